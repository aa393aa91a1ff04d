"""The algorithm registry.

The documented import path of :mod:`convlab.dispatch.registry`, which it re-exports."""
from convlab.dispatch.registry import (
    FORWARD,
    INT8,
    TRANSPOSED,
    Algorithm,
    Estimate,
    Registry,
    algorithms,
    always,
    generation,
    get_algorithm,
    keep_weights,
    register_algorithm,
    registered,
    unknown_cost,
    unregister_algorithm,
)

__all__ = [
    "Algorithm", "algorithms", "always", "Estimate", "FORWARD", "generation", "get_algorithm",
    "INT8", "keep_weights", "register_algorithm", "registered", "Registry", "TRANSPOSED",
    "unknown_cost", "unregister_algorithm",
]
