"""Output buffers that convlab allocates itself."""
from __future__ import annotations

import numpy as np

# Buffers at least this large start on a cache line: the direct kernel writes a dst of
# 1 MiB or more (cl_stream_min_bytes in direct_microkernel.h) with non-temporal stores,
# which take whole aligned vectors, and NumPy's allocator aligns to 16 bytes. Smaller
# ones skip the microsecond of aligning, which counts on small layers.
ALIGN_FROM_BYTES = 1 << 20
CACHE_LINE = 64


def empty(shape, dtype) -> np.ndarray:
    """``np.empty(shape, dtype)``, 64-byte aligned when it takes ALIGN_FROM_BYTES or more."""
    dtype = np.dtype(dtype)
    count = 1
    for extent in shape:
        count *= extent
    nbytes = count * dtype.itemsize
    if nbytes < ALIGN_FROM_BYTES:
        return np.empty(shape, dtype)
    raw = np.empty(nbytes + CACHE_LINE, np.uint8)
    start = -raw.ctypes.data % CACHE_LINE
    return raw[start:start + nbytes].view(dtype).reshape(shape)
