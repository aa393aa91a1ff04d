"""The algorithm registry.

The documented import path of :mod:`convlab.dispatch.registry`, which it re-exports."""
from convlab.dispatch.registry import (
                                       Algorithm,
                                       Estimate,
                                       algorithms,
                                       generation,
                                       get_algorithm,
                                       register_algorithm,
                                       registered,
                                       unregister_algorithm,
)

__all__ = ["Algorithm", "algorithms", "Estimate", "generation", "get_algorithm",
    "register_algorithm", "registered", "unregister_algorithm"]
