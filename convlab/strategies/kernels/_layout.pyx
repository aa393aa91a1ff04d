# cython: language_level=3
"""Swapping the last two axes of an array into a new one: the copy between the
channels-first layout (NCX) a caller may hand in or ask for and the channels-last one the
kernels compute in.

NumPy copies a transposed view along the destination's rows, reading the source C (or
pixels) elements apart: ResNet-50 conv1's (1, 112 * 112, 64) float32 dst took 4.0 ms to
copy to (1, 64, 112 * 112), longer than the convolution. Here the copy goes in square
tiles whose rows are one cache line on both sides, split over threads.
"""
from cython.parallel cimport prange
from libc.stdint cimport uint8_t, uint16_t, uint32_t, uint64_t

import numpy as _np

# Elements are moved as unsigned integers of their size: any dtype of 1, 2, 4 or 8 bytes.
ctypedef fused item_t:
    uint8_t
    uint16_t
    uint32_t
    uint64_t

_ITEM_TYPES = {1: _np.uint8, 2: _np.uint16, 4: _np.uint32, 8: _np.uint64}

# Below this many bytes one thread copies: starting a parallel region costs microseconds,
# about what such a copy takes.
PARALLEL_MIN_BYTES = 1 << 18


cdef void _swap(const item_t[:, :, ::1] src, item_t[:, :, ::1] dst, int threads) noexcept nogil:
    """dst[n, s, r] = src[n, r, s], tile by tile."""
    cdef Py_ssize_t rows = src.shape[1], cols = src.shape[2]
    # a tile row is one 64-byte cache line of either side
    cdef Py_ssize_t edge = 64 // sizeof(item_t)
    cdef Py_ssize_t row_tiles = (rows + edge - 1) // edge
    cdef Py_ssize_t col_tiles = (cols + edge - 1) // edge
    cdef Py_ssize_t per_image = row_tiles * col_tiles
    cdef Py_ssize_t task, n, r0, c0, r, c, r_end, c_end
    for task in prange(src.shape[0] * per_image, num_threads=threads, schedule="static"):
        n = task // per_image
        r0 = (task % per_image) // col_tiles * edge
        c0 = (task % col_tiles) * edge
        r_end = min(r0 + edge, rows)
        c_end = min(c0 + edge, cols)
        for c in range(c0, c_end):
            for r in range(r0, r_end):
                dst[n, c, r] = src[n, r, c]


def swap_last_axes(src, dst, int threads=1):
    """Copy the C-contiguous 3-D ``src`` (N, R, S) into the C-contiguous ``dst`` (N, S, R)
    of the same dtype, as ``dst[...] = src.transpose(0, 2, 1)`` does."""
    if not (isinstance(src, _np.ndarray) and isinstance(dst, _np.ndarray)):
        raise TypeError("src and dst must be numpy arrays")
    if src.ndim != 3 or dst.shape != (src.shape[0], src.shape[2], src.shape[1]):
        raise ValueError(f"dst of shape {dst.shape} is not src's {src.shape} with its last "
                         f"two axes swapped")
    if src.dtype != dst.dtype or src.dtype.itemsize not in _ITEM_TYPES:
        raise TypeError(f"src and dst must share a dtype of 1, 2, 4 or 8 bytes, got "
                        f"{src.dtype} and {dst.dtype}")
    if not (src.flags.c_contiguous and dst.flags.c_contiguous and dst.flags.writeable):
        raise ValueError("src and dst must be C-contiguous, dst writeable")
    if src.size == 0:
        return dst
    if threads < 1:
        raise ValueError(f"threads={threads} must be at least 1")
    if src.nbytes < PARALLEL_MIN_BYTES:
        threads = 1
    item = _ITEM_TYPES[src.dtype.itemsize]
    _swap_as(src.view(item), dst.view(item), threads)
    return dst


cdef _swap_as(source, target, int threads):
    """Pick _swap's specialization by the unsigned integer dtype both views have."""
    cdef const uint8_t[:, :, ::1] s1
    cdef uint8_t[:, :, ::1] t1
    cdef const uint16_t[:, :, ::1] s2
    cdef uint16_t[:, :, ::1] t2
    cdef const uint32_t[:, :, ::1] s4
    cdef uint32_t[:, :, ::1] t4
    cdef const uint64_t[:, :, ::1] s8
    cdef uint64_t[:, :, ::1] t8
    size = source.dtype.itemsize
    if size == 1:
        s1, t1 = source, target
        with nogil:
            _swap(s1, t1, threads)
    elif size == 2:
        s2, t2 = source, target
        with nogil:
            _swap(s2, t2, threads)
    elif size == 4:
        s4, t4 = source, target
        with nogil:
            _swap(s4, t4, threads)
    else:
        s8, t8 = source, target
        with nogil:
            _swap(s8, t8, threads)
