"""The CPU model, its caches and instruction-set levels, and the ISA cap.

The documented import path of :mod:`convlab.runtime.cpu`, which it re-exports."""
from convlab.runtime.cpu import (
    ENVIRONMENT,
    ISA_LEVELS,
    cache_bytes,
    cache_sizes,
    cpu_info,
    cpu_model,
    detected_isa,
    effective_isa,
    kernel_isa_levels,
    max_isa,
    max_isa_cap,
    set_max_isa,
    summary,
    supported_levels,
)

__all__ = [
    "cache_bytes", "cache_sizes", "cpu_info", "cpu_model", "detected_isa", "effective_isa",
    "ENVIRONMENT", "ISA_LEVELS", "kernel_isa_levels", "max_isa", "max_isa_cap", "set_max_isa",
    "summary", "supported_levels",
]
