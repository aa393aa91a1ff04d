"""Buffers that convlab allocates itself: outputs, and the kernels' aligned workspaces."""
from __future__ import annotations

import functools
import math
import threading
from typing import Callable

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


def aligned_copy(array) -> np.ndarray:
    """A C-contiguous copy of ``array`` starting on a cache line (a plain copy for object
    arrays, whose bytes must stay NumPy's)."""
    array = np.asarray(array)
    if array.dtype.hasobject:
        return np.array(array, copy=True)
    out = aligned_empty(array.shape, array.dtype)
    np.copyto(out, array)
    return out


def aligned_contiguous(array: np.ndarray) -> np.ndarray:
    """``array`` itself when it is C-contiguous and starts on a cache line, else
    :func:`aligned_copy` of it."""
    if array.flags.c_contiguous and array.ctypes.data % CACHE_LINE == 0:
        return array
    return aligned_copy(array)


def _on_a_line(shape, dtype: np.dtype) -> bool:
    return math.prod(shape) * dtype.itemsize >= ALIGN_FROM_BYTES


def empty(shape, dtype) -> np.ndarray:
    """``np.empty(shape, dtype)``, on a cache line when it takes ALIGN_FROM_BYTES or more."""
    dtype = np.dtype(dtype)
    return aligned_empty(shape, dtype) if _on_a_line(shape, dtype) else np.empty(shape, dtype)


def empty_allocator(shape, dtype) -> Callable[[], np.ndarray]:
    """:func:`empty` for ``shape`` and ``dtype`` with the choice made once, for a caller
    that allocates the same shape on every call."""
    dtype = np.dtype(dtype)
    return functools.partial(aligned_empty if _on_a_line(shape, dtype) else np.empty, shape,
                             dtype)


# A call's staging buffers (an NCX call's src and dst in the kernels' layout, filled and
# read before the call returns) are kept per thread and reused, each up to this size. A
# fresh buffer of megabytes costs the page faults of its first writes on every call:
# ResNet-50 conv1 in NCX took 3.25 ms a call with fresh buffers and 1.38 ms with glibc
# told to keep freed memory, against 0.8 ms in NXC (direct, 2 threads, 2-core Xeon with
# AVX-512).
STAGING_MAX_BYTES = 32 << 20
_kept = threading.local()


def staging(slot: str, shape, dtype) -> np.ndarray:
    """An uninitialised C-contiguous array on a cache line, for use within one call only
    (it must not reach the caller): this thread's later requests for the same ``slot``
    get the same memory. Larger than STAGING_MAX_BYTES, a new array each time."""
    dtype = np.dtype(dtype)
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes > STAGING_MAX_BYTES:
        return aligned_empty(shape, dtype)
    slots = getattr(_kept, "slots", None)
    if slots is None:
        slots = _kept.slots = {}
    raw = slots.get(slot)
    if raw is None or raw.nbytes < nbytes + CACHE_LINE:
        raw = slots[slot] = np.empty(nbytes + CACHE_LINE, np.uint8)
    start = -raw.ctypes.data % CACHE_LINE
    return raw[start:start + nbytes].view(dtype).reshape(shape)
