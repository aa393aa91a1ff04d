"""The exact Winograd matrices.

The documented import path of :mod:`convlab.strategies.winograd_transforms`, which it re-exports."""
from convlab.strategies.winograd_transforms import (
    KERNEL,
    POINTS,
    TRANSFORMS,
    Matrix,
    Transform,
    cook_toom,
    correlate_exact,
    identity_transform,
    poly_from_roots,
    winograd_exact,
)

__all__ = [
    "cook_toom", "correlate_exact", "identity_transform", "KERNEL", "Matrix", "POINTS",
    "poly_from_roots", "Transform", "TRANSFORMS", "winograd_exact",
]
