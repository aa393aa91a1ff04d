"""Buffers that convlab allocates itself: outputs, and the kernels' aligned workspaces."""
from __future__ import annotations

import math

import numpy as np

# Buffers at least this large start on a cache line: the direct kernel writes a dst of
# 1 MiB or more (cl_stream_min_bytes in direct_microkernel.h) with non-temporal stores,
# which take whole aligned vectors, and NumPy's allocator aligns to 16 bytes. Smaller
# ones skip the microsecond of aligning, which counts on small layers.
ALIGN_FROM_BYTES = 1 << 20
CACHE_LINE = 64


def aligned_empty(shape, dtype) -> np.ndarray:
    """An uninitialised C-contiguous array starting on a cache line (64 bytes).

    NumPy aligns to 16 bytes; a 64-byte vector load or store that straddles two cache
    lines costs about two (Winograd's weight transform ran up to 2x slower on
    16-byte-aligned buffers)."""
    dtype = np.dtype(dtype)
    nbytes = math.prod(shape) * dtype.itemsize
    raw = np.empty(nbytes + CACHE_LINE, np.uint8)
    start = -raw.ctypes.data % CACHE_LINE
    return raw[start:start + nbytes].view(dtype).reshape(shape)


def empty(shape, dtype) -> np.ndarray:
    """``np.empty(shape, dtype)``, on a cache line when it takes ALIGN_FROM_BYTES or more."""
    dtype = np.dtype(dtype)
    if math.prod(shape) * dtype.itemsize < ALIGN_FROM_BYTES:
        return np.empty(shape, dtype)
    return aligned_empty(shape, dtype)
