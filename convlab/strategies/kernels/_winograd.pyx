# cython: language_level=3
"""Winograd convolution on canonical layouts: tile transforms and batched GEMMs in OpenMP.

The tiles of all batch entries form one list, cut into blocks. For each group a block goes
through three steps:

1. the input transform, ``V[pos, tile, ic] = (B^T d B)[pos]``  (C, per tile);
2. one GEMM per transform position, ``M[pos] = V[pos] @ U[g, pos]``
   ([tiles x ICg] x [ICg x OCg]) by the micro-kernels of winograd_gemm.h, on U packed in
   panels by :func:`transform_weights`;
3. the output transform, ``dst = A^T M A + bias``, keeping the outputs inside dst.

Two ways to share the work among threads (``shared``):

* per thread (False): each thread takes whole blocks and runs all three steps on them in
  its own workspace, which stays in its cache. Suits narrow layers, whose U slices are
  small enough to re-read for every block.
* shared (True): all threads work on one block at a time, splitting steps 1 and 3 by
  tiles and step 2 by transform positions, so each GEMM gets every tile of the block as
  rows and each U slice is read once per block. Suits wide layers with few tiles, where
  a per-thread block would hold too few rows to pay for reading a U slice of ICg x OCg.
  Shared runs may also compute U's slices on the fly from the filter (``U=None``).

Memory: per thread ``threads * block * P * (ICg + OCg)`` elements, shared
``block * P * (IC + OC)``, plus two tile buffers (and, if fused, a block of the filter and
a row of U slices, see :func:`fused_elements`) per thread, whatever the problem size; rows
are padded to GEMM micro-tiles, channels to panels and planes to an odd number of cache
lines (see :func:`rows_capacity`, :func:`position_stride`), all from one 64-byte-aligned
allocation.
"""
cimport cython
from cython.parallel cimport parallel, prange
from libc.string cimport memset

import math

import numpy as np

from convlab.runtime import _buffers as buffers
from convlab.strategies.kernels._epilogue cimport Epilogue, cl_epilogue
from convlab.strategies.kernels.isa_level cimport CL_X86_DISPATCH, cl_isa_in_effect, cl_isa_set_cap
from convlab.strategies.kernels.omp_shim cimport omp_get_num_threads, omp_get_thread_num


cdef extern from "winograd_kernels.h" nogil:
    ctypedef struct wg_geometry:
        Py_ssize_t batch
        Py_ssize_t in_shape[3]
        Py_ssize_t out_shape[3]
        Py_ssize_t pads_begin[3]
        Py_ssize_t in_channels
        Py_ssize_t out_channels
        Py_ssize_t in_channels_per_group
        Py_ssize_t out_channels_per_group
        Py_ssize_t m[3]
        Py_ssize_t alpha[3]
        Py_ssize_t tiles[3]
        Py_ssize_t kernel[3]
        Py_ssize_t channel_chunk
        const cl_epilogue *epi

    int WG_X86
    Py_ssize_t wg_prefetch_max_tiles
    int wg_isa_level()
    int wg_widest_level()
    Py_ssize_t wg_gemm_mr(int level)
    Py_ssize_t wg_gemm_nr_f(int level)
    Py_ssize_t wg_gemm_nr_d(int level)
    void wg_gemm_f(int level, Py_ssize_t rows, Py_ssize_t k, Py_ssize_t panels,
                   const float *A, Py_ssize_t lda, const float *B, float *C, Py_ssize_t ldc)
    void wg_gemm_d(int level, Py_ssize_t rows, Py_ssize_t k, Py_ssize_t panels,
                   const double *A, Py_ssize_t lda, const double *B, double *C,
                   Py_ssize_t ldc)
    void wg_weight_tiles_f(const float *w, const wg_geometry *geo, const float *g0,
                           const float *g1, const float *g2, Py_ssize_t ic_begin,
                           Py_ssize_t ic_end, float *U, Py_ssize_t pos_stride, Py_ssize_t nr,
                           float *buf_a, float *buf_b, Py_ssize_t p_lo, Py_ssize_t p_hi)
    void wg_weight_tiles_d(const double *w, const wg_geometry *geo, const double *g0,
                           const double *g1, const double *g2, Py_ssize_t ic_begin,
                           Py_ssize_t ic_end, double *U, Py_ssize_t pos_stride,
                           Py_ssize_t nr, double *buf_a, double *buf_b, Py_ssize_t p_lo,
                           Py_ssize_t p_hi)
    void wg_weight_pack_f(const float *w, Py_ssize_t ICg, Py_ssize_t OCg,
                          Py_ssize_t block_width, Py_ssize_t k_lo, Py_ssize_t k_hi,
                          float *out, Py_ssize_t tap_stride, Py_ssize_t block_stride)
    void wg_weight_pack_d(const double *w, Py_ssize_t ICg, Py_ssize_t OCg,
                          Py_ssize_t block_width, Py_ssize_t k_lo, Py_ssize_t k_hi,
                          double *out, Py_ssize_t tap_stride, Py_ssize_t block_stride)
    void wg_weight_row_f(const float *w, Py_ssize_t tap_stride, Py_ssize_t ICg,
                         Py_ssize_t width, const float *g, Py_ssize_t alpha, Py_ssize_t i,
                         Py_ssize_t j_lo, Py_ssize_t j_hi, Py_ssize_t nr, float *out,
                         Py_ssize_t slice_stride)
    void wg_weight_row_d(const double *w, Py_ssize_t tap_stride, Py_ssize_t ICg,
                         Py_ssize_t width, const double *g, Py_ssize_t alpha, Py_ssize_t i,
                         Py_ssize_t j_lo, Py_ssize_t j_hi, Py_ssize_t nr, double *out,
                         Py_ssize_t slice_stride)
    void wg_input_tiles_f(const float *src, const wg_geometry *geo, const float *bt0,
                          const float *bt1, const float *bt2, Py_ssize_t g, Py_ssize_t t_begin,
                          Py_ssize_t t_end, Py_ssize_t row_begin, float *V,
                          Py_ssize_t pos_stride, float *buf_a, float *buf_b)
    void wg_input_tiles_d(const double *src, const wg_geometry *geo, const double *bt0,
                          const double *bt1, const double *bt2, Py_ssize_t g,
                          Py_ssize_t t_begin, Py_ssize_t t_end, Py_ssize_t row_begin,
                          double *V, Py_ssize_t pos_stride, double *buf_a, double *buf_b)
    int wg_output_tiles_f(const float *M, Py_ssize_t pos_stride, Py_ssize_t row_stride,
                          const wg_geometry *geo, const float *at0, const float *at1,
                          const float *at2, const float *bias, Py_ssize_t g,
                          Py_ssize_t t_begin, Py_ssize_t t_end, Py_ssize_t row_begin,
                          float *dst, float *buf_a, float *buf_b)
    int wg_output_tiles_d(const double *M, Py_ssize_t pos_stride, Py_ssize_t row_stride,
                          const wg_geometry *geo, const double *at0, const double *at1,
                          const double *at2, const double *bias, Py_ssize_t g,
                          Py_ssize_t t_begin, Py_ssize_t t_end, Py_ssize_t row_begin,
                          double *dst, double *buf_a, double *buf_b)


ctypedef fused real:
    float
    double


# The levels each part of this module has code for (convlab.runtime.cpu.kernel_isa_levels).
BUILT_ISA_LEVELS = {"winograd_transforms": tuple(range(3 if WG_X86 else 1)),
                    "winograd_gemm": tuple(range(3 if WG_X86 else 1)),
                    "winograd_epilogue": tuple(range(3 if CL_X86_DISPATCH else 1))}


def isa_levels():
    """The level (0 baseline, 1 AVX2, 2 AVX-512) each part of this module runs at now;
    for the GEMMs, the widest level a run may ask for (see :func:`gemm_levels`)."""
    return {"winograd_transforms": wg_isa_level(), "winograd_gemm": wg_isa_level(),
            "winograd_epilogue": cl_isa_in_effect}


def _set_isa_cap(int level):
    """Run at most ``level`` from now on (convlab.runtime.cpu calls it); returns the level in
    effect."""
    return cl_isa_set_cap(level)


from convlab.runtime import cpu as _cpu
_cpu.follow_cap(__name__, _set_isa_cap)


def set_panel_prefetch(Py_ssize_t max_tiles):
    """Let the GEMM prefetch the next panel of U while it runs one when a panel serves at
    most ``max_tiles`` micro-tiles of rows (0: never; see wg_prefetch_max_tiles in
    winograd_kernels.h). Returns the previous value. Not thread-safe: for the bench and
    tests."""
    global wg_prefetch_max_tiles
    if max_tiles < 0:
        raise ValueError(f"max_tiles={max_tiles}; expected >= 0")
    previous = wg_prefetch_max_tiles
    wg_prefetch_max_tiles = max_tiles
    return previous


def gemm_levels():
    """The GEMM micro-kernel levels a run may use now: 0 (baseline), 1 (AVX2), 2
    (AVX-512), up to the widest this CPU has and the cap of convlab.runtime.cpu allows."""
    return list(range(wg_isa_level() + 1))


def gemm_layout(int level, dtype):
    """(rows per micro-tile, output channels per packed panel) of a level, for ``dtype``
    (any level this CPU has, whatever the cap: U packed before a cap keeps its layout)."""
    if not 0 <= level <= wg_widest_level():
        raise ValueError(f"level={level} is not available on this CPU; expected one of "
                         f"{list(range(wg_widest_level() + 1))}")
    nr = wg_gemm_nr_f(level) if np.dtype(dtype) == np.float32 else wg_gemm_nr_d(level)
    return int(wg_gemm_mr(level)), int(nr)


def rows_capacity(Py_ssize_t rows, int level):
    """Rows of V and M that a block of ``rows`` tiles needs: whole micro-tiles of the
    level, the last one the smallest kernel that covers what is left (see wg_gemm)."""
    cdef Py_ssize_t mr = wg_gemm_mr(level), left = rows % mr
    cdef Py_ssize_t last = 0
    heights = {2: (4, 8), 1: (3, 4)}.get(level, (1,))
    if left:
        last = mr
        for height in heights:
            if left <= height:
                last = height
                break
    return rows - left + last


cdef inline void _gemm(int level, real *V, const real *U, real *M, Py_ssize_t rows,
                       Py_ssize_t icg, Py_ssize_t panels, Py_ssize_t ldm) noexcept nogil:
    """Row-major M (rows x panels*nr, row stride ldm) = V (rows x icg) @ U (packed)."""
    if real is float:
        wg_gemm_f(level, rows, icg, panels, V, icg, U, M, ldm)
    else:
        wg_gemm_d(level, rows, icg, panels, V, icg, U, M, ldm)


cdef inline void _pad_rows(real *V, Py_ssize_t positions, Py_ssize_t v_stride,
                           Py_ssize_t rows, Py_ssize_t padded, Py_ssize_t icg) noexcept nogil:
    """Zero the rows the last micro-tile computes beyond the block's tiles (their results
    are never read, but stale bits could be slow denormals or NaN)."""
    cdef Py_ssize_t pos
    if padded > rows:
        for pos in range(positions):
            memset(V + pos * v_stride + rows * icg, 0,
                   <size_t>((padded - rows) * icg) * sizeof(real))


cdef inline void _input(const real *src, const wg_geometry *geo, const real *bt0,
                        const real *bt1, const real *bt2, Py_ssize_t g, Py_ssize_t t_begin,
                        Py_ssize_t t_end, Py_ssize_t row_begin, real *V, Py_ssize_t pos_stride,
                        real *buf_a, real *buf_b) noexcept nogil:
    if real is float:
        wg_input_tiles_f(src, geo, bt0, bt1, bt2, g, t_begin, t_end, row_begin, V, pos_stride,
                         buf_a, buf_b)
    else:
        wg_input_tiles_d(src, geo, bt0, bt1, bt2, g, t_begin, t_end, row_begin, V, pos_stride,
                         buf_a, buf_b)


cdef inline int _output(const real *M, Py_ssize_t pos_stride, Py_ssize_t row_stride,
                        const wg_geometry *geo, const real *at0, const real *at1,
                        const real *at2, const real *bias, Py_ssize_t g, Py_ssize_t t_begin,
                        Py_ssize_t t_end, Py_ssize_t row_begin, real *dst, real *buf_a,
                        real *buf_b) noexcept nogil:
    if real is float:
        return wg_output_tiles_f(M, pos_stride, row_stride, geo, at0, at1, at2, bias, g,
                                 t_begin, t_end, row_begin, dst, buf_a, buf_b)
    else:
        return wg_output_tiles_d(M, pos_stride, row_stride, geo, at0, at1, at2, bias, g,
                                 t_begin, t_end, row_begin, dst, buf_a, buf_b)


# The fast paths run whole 64-byte vectors of channels at every level (WG_VL), padding a
# partial one in the tile buffers, so a buffer holds at least this many channels per
# transform position.
cdef enum:
    _VECTOR_BYTES = 64
    _VECTOR_ELEMENTS = 16
VECTOR_ELEMENTS = _VECTOR_ELEMENTS


cpdef Py_ssize_t vector_channels(Py_ssize_t channels, Py_ssize_t itemsize):
    """channels rounded up to whole 64-byte vectors, as the tile transforms run them."""
    cdef Py_ssize_t lanes = _VECTOR_BYTES // itemsize
    return (channels + lanes - 1) // lanes * lanes


cpdef Py_ssize_t position_stride(Py_ssize_t elements, Py_ssize_t itemsize):
    """The distance between two transform positions' planes, in elements: at least
    ``elements``, and an odd number of 64-byte lines.

    A tile transform touches all P planes at once; with plane sizes that are multiples of
    4 KiB (as 128 channels x 48 rows are) every plane's line maps to the same cache sets
    and 36-64 streams fight over a few ways. Odd line counts spread them (measured: the
    F(6) weight transform of 256 x 256 channels took 1.5 ms instead of 11 ms).
    """
    cdef Py_ssize_t lines = (elements * itemsize + 63) // 64
    if lines % 2 == 0:
        lines += 1
    return lines * 64 // itemsize


def ats_positions(at0, at1, at2):
    """P: the product of the three axes' alpha (A^T's column counts)."""
    return at0.shape[1] * at1.shape[1] * at2.shape[1]


cdef inline void _weight_pack(const real *w, Py_ssize_t icg, Py_ssize_t ocg,
                              Py_ssize_t block_width, Py_ssize_t k_lo, Py_ssize_t k_hi,
                              real *out, Py_ssize_t tap_stride,
                              Py_ssize_t block_stride) noexcept nogil:
    if real is float:
        wg_weight_pack_f(w, icg, ocg, block_width, k_lo, k_hi, out, tap_stride, block_stride)
    else:
        wg_weight_pack_d(w, icg, ocg, block_width, k_lo, k_hi, out, tap_stride, block_stride)


cdef inline void _weight_row(const real *w, Py_ssize_t tap_stride, Py_ssize_t icg,
                             Py_ssize_t width, const real *g, Py_ssize_t alpha, Py_ssize_t i,
                             Py_ssize_t j_lo, Py_ssize_t j_hi, Py_ssize_t nr, real *out,
                             Py_ssize_t slice_stride) noexcept nogil:
    if real is float:
        wg_weight_row_f(w, tap_stride, icg, width, g, alpha, i, j_lo, j_hi, nr, out,
                        slice_stride)
    else:
        wg_weight_row_d(w, tap_stride, icg, width, g, alpha, i, j_lo, j_hi, nr, out,
                        slice_stride)


cpdef Py_ssize_t fused_row_parts(Py_ssize_t threads, Py_ssize_t rows, Py_ssize_t row_length):
    """How many parts a fused run splits each of its ``rows`` rows of positions (one per
    group, block of panels and row) into: enough items for every thread, whole rows when
    there are rows for all."""
    return max(1, min(row_length, (threads + rows - 1) // rows))


cpdef Py_ssize_t fused_elements(Py_ssize_t icg, Py_ssize_t ocg, Py_ssize_t alpha,
                                Py_ssize_t fused_panels, Py_ssize_t nr, Py_ssize_t itemsize):
    """Elements of one thread's buffer in a fused run whose items take ``fused_panels``
    panels of ``nr`` output channels: the U slices of a row of positions (alpha), each
    padded as position_stride pads planes."""
    cdef Py_ssize_t block = min(fused_panels, (ocg + nr - 1) // nr)
    return alpha * position_stride(icg * block * nr, itemsize)


cpdef Py_ssize_t packed_filter_elements(Py_ssize_t icg, Py_ssize_t ocg, Py_ssize_t groups,
                                        Py_ssize_t fused_panels, Py_ssize_t nr,
                                        Py_ssize_t itemsize):
    """Elements of a fused run's filter packed by blocks of ``fused_panels`` panels
    (wg_weight_pack): per group and block, 9 taps of ICg x its channels, each tap padded
    as position_stride pads planes."""
    cdef Py_ssize_t panels = (ocg + nr - 1) // nr
    cdef Py_ssize_t block = min(fused_panels, panels)
    cdef Py_ssize_t blocks = (panels + block - 1) // block
    return groups * blocks * 9 * position_stride(icg * min(block * nr, ocg), itemsize)


def workspace_elements(positions, block_tiles, icg, ocg, groups, channel_chunk, threads,
                       shared, int level, itemsize=4, fused_panels=0):
    """Elements of the whole workspace: V and M blocks (rows padded to whole micro-tiles,
    M's channels to whole panels, planes to position_stride), two tile buffers per thread
    and, for fused weights in blocks of ``fused_panels`` panels, a thread's fused buffers
    (:func:`fused_elements`)."""
    _, nr = gemm_layout(level, np.float32 if itemsize == 4 else np.float64)
    rows = rows_capacity(block_tiles, level)
    ldm = -(-ocg // nr) * nr
    planes = (position_stride(rows * icg, itemsize) + position_stride(rows * ldm, itemsize))
    buffers = threads * 2 * positions * max(channel_chunk, VECTOR_ELEMENTS)
    if fused_panels:
        alpha = math.isqrt(positions)  # fused runs are 2-D: P = alpha^2
        buffers += threads * fused_elements(icg, ocg, alpha, fused_panels, nr, itemsize)
    if shared:
        return positions * groups * planes + buffers
    return threads * positions * planes + buffers


@cython.boundscheck(False)
@cython.wraparound(False)
def conv_winograd(const real[:, :, :, :, ::1] src, const real[:, :, ::1] U,
                  const real[::1] bias, real[:, :, :, :, ::1] dst,
                  const real[:, ::1] bt0, const real[:, ::1] bt1, const real[:, ::1] bt2,
                  const real[:, ::1] at0, const real[:, ::1] at1, const real[:, ::1] at2,
                  pads_begin, Py_ssize_t block_tiles, Py_ssize_t channel_chunk, int threads,
                  bint shared, int level, const real[:, :, :, :, ::1] weights=None,
                  const real[:, ::1] gmat=None, Epilogue epilogue=None,
                  Py_ssize_t fused_panels=1, real[::1] packed_filter=None):
    """Winograd convolution, stride 1 and dilation 1, on three (lifted) spatial axes.

    src (N, I0, I1, I2, IC), dst (N, O0, O1, O2, OC). U (G, P, plane) holds the
    transformed weights packed by :func:`transform_weights` for GEMM ``level``, with
    P = alpha0 * alpha1 * alpha2. ``bt*`` are (alpha, alpha), ``at*`` are (m, alpha), one
    per axis; an axis with alpha == 1 is skipped.

    Fused weights: with U None, a shared-blocks 2-D run computes each position's slice of
    U just before its GEMM, from ``weights`` (G, 3, 3, ICg, OCg) and ``gmat`` (alpha, 3), in
    per-thread buffers that stay in cache, so U never goes through memory. A thread takes
    a row of positions for a block of ``fused_panels`` panels of output channels at a
    time: it reads that block's part of the filter once for the whole row, and a thread's
    consecutive items are the rows of one block, whose part of the filter then stays in
    its cache. The filter is first copied block by block into ``packed_filter`` (of
    :func:`packed_filter_elements`; allocated here if None), so that each block is
    contiguous. Output channels per group must be whole 64-byte vectors.

    ``epilogue``: post-ops (without a sum) applied to each output tile once written.

    Returns True when some output came out Inf or NaN (the caller recomputes those calls).
    """
    cdef wg_geometry geo
    cdef bint fused = U is None
    geo.epi = NULL
    if epilogue is not None:
        if epilogue.seeds_sum or epilogue.dtype.itemsize != sizeof(real):
            raise ValueError(f"epilogue (sum: {epilogue.seeds_sum}, {epilogue.dtype}) must be "
                             f"without a sum and of dst's dtype")
        geo.epi = &epilogue.c
    if fused and (weights is None or gmat is None or not shared):
        raise ValueError("U=None (fused weights) needs weights, gmat and shared=True")
    cdef Py_ssize_t axis, groups, positions
    groups = weights.shape[0] if fused else U.shape[0]
    positions = ats_positions(at0, at1, at2)
    if level > wg_isa_level():
        raise ValueError(f"level={level} is above the GEMM levels allowed now "
                         f"{gemm_levels()} (the instruction-set cap, convlab.runtime.cpu)")
    cdef Py_ssize_t mr, nr
    mr, nr = gemm_layout(level, np.float32 if real is float else np.float64)
    geo.batch = src.shape[0]
    geo.in_channels = src.shape[4]
    geo.out_channels = dst.shape[4]
    geo.in_channels_per_group = src.shape[4] // groups
    geo.out_channels_per_group = dst.shape[4] // groups
    geo.channel_chunk = channel_chunk
    cdef object ats = (at0, at1, at2), bts = (bt0, bt1, bt2)
    for axis in range(3):
        geo.in_shape[axis] = src.shape[1 + axis]
        geo.out_shape[axis] = dst.shape[1 + axis]
        geo.pads_begin[axis] = pads_begin[axis]
        geo.alpha[axis] = ats[axis].shape[1]
        geo.m[axis] = ats[axis].shape[0]
        geo.kernel[axis] = geo.alpha[axis] - geo.m[axis] + 1
        geo.tiles[axis] = (geo.out_shape[axis] + geo.m[axis] - 1) // geo.m[axis]
        if bts[axis].shape[0] != geo.alpha[axis] or bts[axis].shape[1] != geo.alpha[axis]:
            raise ValueError(f"B^T on axis {axis} has shape {bts[axis].shape[:2]}; expected "
                             f"({geo.alpha[axis]}, {geo.alpha[axis]}) to match A^T")
    cdef Py_ssize_t icg = geo.in_channels_per_group, ocg = geo.out_channels_per_group
    cdef Py_ssize_t panels = (ocg + nr - 1) // nr
    cdef Py_ssize_t plane = position_stride(panels * icg * nr, sizeof(real))
    if geo.in_channels != groups * icg or geo.out_channels != groups * ocg:
        raise ValueError(f"IC={geo.in_channels} and OC={geo.out_channels} must split into "
                         f"{groups} groups")
    if fused:
        if (geo.alpha[0] != 1 or gmat.shape[0] != geo.alpha[2] or gmat.shape[1] != 3
                or weights.shape[1] != 3 or weights.shape[2] != 3
                or weights.shape[3] != icg or weights.shape[4] != ocg
                or ocg % (64 // sizeof(real))):
            raise ValueError("fused weights need a 2-D 3x3 problem, weights (G, 3, 3, ICg, "
                             "OCg) with whole vectors of OCg, and gmat (alpha, 3)")
    elif U.shape[1] != positions or U.shape[2] != plane:
        raise ValueError(f"U has shape {(U.shape[0], U.shape[1], U.shape[2])}; expected "
                         f"({groups}, {positions}, {plane}) for IC={geo.in_channels}, "
                         f"OC={geo.out_channels} and GEMM level {level}")
    if block_tiles < 1 or channel_chunk < 1 or threads < 1 or fused_panels < 1:
        raise ValueError(f"block_tiles={block_tiles}, channel_chunk={channel_chunk}, "
                         f"threads={threads} and fused_panels={fused_panels} must be >= 1")
    if fused_panels > panels:
        fused_panels = panels

    cdef Py_ssize_t total_tiles = geo.batch * geo.tiles[0] * geo.tiles[1] * geo.tiles[2]
    cdef Py_ssize_t blocks = (total_tiles + block_tiles - 1) // block_tiles
    if not shared and blocks < threads:
        threads = <int>blocks
    cdef Py_ssize_t rows_cap = rows_capacity(block_tiles, level)
    cdef Py_ssize_t ldm = panels * nr
    cdef Py_ssize_t buf_elems = positions * max(channel_chunk, _VECTOR_ELEMENTS)
    cdef Py_ssize_t v_stride = position_stride(rows_cap * icg, sizeof(real))
    cdef Py_ssize_t m_stride = position_stride(rows_cap * ldm, sizeof(real))
    cdef Py_ssize_t u_stride = plane
    cdef Py_ssize_t a_last = geo.alpha[2]
    # the packed filter's blocks (wg_weight_pack) and a fused item's U slices
    cdef Py_ssize_t block_width = min(fused_panels * nr, ocg)
    cdef Py_ssize_t pack_stride = position_stride(icg * block_width, sizeof(real))
    cdef Py_ssize_t block_stride = 9 * pack_stride
    cdef Py_ssize_t slice_stride = position_stride(icg * fused_panels * nr, sizeof(real))
    # per thread: the two tile buffers, then V and M unless shared, or the fused buffers;
    # every part starts on a 64-byte boundary (buffers and planes are whole lines)
    cdef Py_ssize_t own = 2 * buf_elems + (0 if shared else positions * (v_stride + m_stride))
    if fused:
        own += a_last * slice_stride
    cdef Py_ssize_t common = positions * groups * (v_stride + m_stride) if shared else 0
    dtype = np.float32 if real is float else np.float64
    # 64-byte aligned: the vector loads and stores here are whole cache lines
    work_array = buffers.aligned_empty((threads * own + common,), dtype)
    flags_array = np.zeros(threads, dtype=np.intc)
    cdef Py_ssize_t slabs = 2 * buf_elems
    if fused and ocg % nr:
        # the slices' columns past OCg in a last partial panel, which the GEMMs multiply
        # but nothing reads: zero rather than stale bits (slow denormals, NaN)
        for thread in range(threads):
            work_array[thread * own + slabs:(thread + 1) * own] = 0
    cdef real[::1] work = work_array
    cdef int[::1] flags = flags_array
    cdef real *base = &work[0]
    cdef const real *src_p = &src[0, 0, 0, 0, 0]
    cdef const real *u_p = NULL
    cdef const real *w_p = NULL
    cdef const real *g_p = NULL
    cdef real *packed_p = NULL
    if fused:
        w_p = &weights[0, 0, 0, 0, 0]
        g_p = &gmat[0, 0]
        size = packed_filter_elements(icg, ocg, groups, fused_panels, nr, sizeof(real))
        if packed_filter is None:
            packed_filter = buffers.aligned_empty((size,), dtype)
        elif packed_filter.shape[0] < size:
            raise ValueError(f"packed_filter holds {packed_filter.shape[0]} elements; "
                             f"expected at least {size}")
        packed_p = &packed_filter[0]
    else:
        u_p = &U[0, 0, 0]
    cdef Py_ssize_t w_group = 9 * icg * ocg
    cdef Py_ssize_t a_rows = positions // a_last
    cdef Py_ssize_t panel_blocks = (panels + fused_panels - 1) // fused_panels
    cdef Py_ssize_t rows_of_items = groups * panel_blocks * a_rows
    cdef Py_ssize_t parts = fused_row_parts(threads, rows_of_items, a_last)
    cdef Py_ssize_t row, part, col, panel_lo, panel_hi, key, j_lo, j_hi, k_lo, k_hi
    cdef Py_ssize_t filter_rows = 9 * icg, pack_chunk = 32
    cdef real *dst_p = &dst[0, 0, 0, 0, 0]
    cdef const real *bias_p = NULL
    if bias is not None:
        bias_p = &bias[0]
    cdef const real *b0 = &bt0[0, 0]
    cdef const real *b1 = &bt1[0, 0]
    cdef const real *b2 = &bt2[0, 0]
    cdef const real *a0 = &at0[0, 0]
    cdef const real *a1 = &at1[0, 0]
    cdef const real *a2 = &at2[0, 0]
    cdef real *V = NULL
    cdef real *M = NULL
    cdef real *mine = NULL
    cdef Py_ssize_t block, item, t_begin, t_end, t, g, pos, rows, padded
    cdef int tid = 0

    if not shared:
        with nogil, parallel(num_threads=threads):
            tid = omp_get_thread_num()
            mine = base + tid * own
            V = mine + 2 * buf_elems
            M = V + positions * v_stride
            for block in prange(blocks, schedule="dynamic"):
                t_begin = block * block_tiles
                t_end = t_begin + block_tiles
                if t_end > total_tiles:
                    t_end = total_tiles
                padded = min((t_end - t_begin + mr - 1) // mr * mr, rows_cap)
                for g in range(groups):
                    _input(src_p, &geo, b0, b1, b2, g, t_begin, t_end, t_begin, V, v_stride,
                           mine, mine + buf_elems)
                    _pad_rows(V, positions, v_stride, t_end - t_begin, padded, icg)
                    for pos in range(positions):
                        _gemm(level, V + pos * v_stride,
                              u_p + (g * positions + pos) * u_stride,
                              M + pos * m_stride, t_end - t_begin, icg, panels, ldm)
                    flags[tid] |= _output(M, m_stride, ldm, &geo, a0, a1, a2, bias_p, g,
                                          t_begin, t_end, t_begin, dst_p, mine,
                                          mine + buf_elems)
        return bool(flags_array.any())

    V = base + threads * own
    M = V + positions * groups * v_stride
    if fused:
        # chunks of filter rows (tap, input channel), a group's at a time
        with nogil, parallel(num_threads=threads):
            for item in prange(groups * ((filter_rows + pack_chunk - 1) // pack_chunk),
                               schedule="static"):
                g = item // ((filter_rows + pack_chunk - 1) // pack_chunk)
                k_lo = item % ((filter_rows + pack_chunk - 1) // pack_chunk) * pack_chunk
                k_hi = min(k_lo + pack_chunk, filter_rows)
                _weight_pack(w_p + g * w_group, icg, ocg, block_width, k_lo, k_hi,
                             packed_p + g * panel_blocks * block_stride, pack_stride,
                             block_stride)
    for block in range(blocks):
        t_begin = block * block_tiles
        t_end = min(t_begin + block_tiles, total_tiles)
        rows = t_end - t_begin
        padded = min((rows + mr - 1) // mr * mr, rows_cap)
        with nogil, parallel(num_threads=threads):
            tid = omp_get_thread_num()
            mine = base + tid * own
            for item in prange(rows * groups, schedule="static"):
                t = t_begin + item // groups
                g = item % groups
                _input(src_p, &geo, b0, b1, b2, g, t, t + 1, t_begin,
                       V + g * positions * v_stride, v_stride, mine, mine + buf_elems)
            if fused:
                # several items multiply each position: its padding rows first
                for item in prange(groups * positions, schedule="static"):
                    _pad_rows(V + item * v_stride, 1, v_stride, rows, padded, icg)
                # a row of positions for a block of panels per item (a part of one when
                # threads outnumber rows), in order (group, block, row); static, so that a
                # thread's consecutive items share the block's filter in its cache
                for item in prange(rows_of_items * parts, schedule="static"):
                    part = item % parts
                    row = (item // parts) % a_rows
                    key = item // (parts * a_rows)
                    g = key // panel_blocks
                    panel_lo = key % panel_blocks * fused_panels
                    panel_hi = min(panel_lo + fused_panels, panels)
                    j_lo = part * a_last // parts
                    j_hi = (part + 1) * a_last // parts
                    _weight_row(packed_p + key * block_stride, pack_stride, icg,
                                min(panel_hi * nr, ocg) - panel_lo * nr, g_p, a_last, row,
                                j_lo, j_hi, nr, mine + slabs, slice_stride)
                    for col in range(j_lo, j_hi):
                        pos = (g * a_rows + row) * a_last + col
                        _gemm(level, V + pos * v_stride, mine + slabs + col * slice_stride,
                              M + pos * m_stride + panel_lo * nr, rows, icg,
                              panel_hi - panel_lo, ldm)
            else:
                # static, as transform_weights(by_position=True) splits the positions: a
                # thread then multiplies the U planes it wrote itself (see there)
                for item in prange(groups * positions, schedule="static"):
                    _pad_rows(V + item * v_stride, 1, v_stride, rows, padded, icg)
                    _gemm(level, V + item * v_stride, u_p + item * u_stride,
                          M + item * m_stride, rows, icg, panels, ldm)
            for item in prange(rows * groups, schedule="static"):
                t = t_begin + item // groups
                g = item % groups
                flags[tid] |= _output(M + g * positions * m_stride, m_stride, ldm, &geo, a0,
                                      a1, a2, bias_p, g, t, t + 1, t_begin, dst_p, mine,
                                      mine + buf_elems)
    return bool(flags_array.any())


cdef inline void _weight_tiles(const real *w, const wg_geometry *geo, const real *g0,
                               const real *g1, const real *g2, Py_ssize_t ic_begin,
                               Py_ssize_t ic_end, real *U, Py_ssize_t pos_stride,
                               Py_ssize_t nr, real *buf_a, real *buf_b, Py_ssize_t p_lo,
                               Py_ssize_t p_hi) noexcept nogil:
    if real is float:
        wg_weight_tiles_f(w, geo, g0, g1, g2, ic_begin, ic_end, U, pos_stride, nr, buf_a,
                          buf_b, p_lo, p_hi)
    else:
        wg_weight_tiles_d(w, geo, g0, g1, g2, ic_begin, ic_end, U, pos_stride, nr, buf_a,
                          buf_b, p_lo, p_hi)


cdef inline Py_ssize_t _static_begin(Py_ssize_t items, Py_ssize_t tid,
                                     Py_ssize_t nthreads) noexcept nogil:
    """The first item that libgomp's schedule(static) gives thread tid of nthreads; thread
    tid's items end where thread tid + 1's begin."""
    cdef Py_ssize_t q = items // nthreads, r = items % nthreads
    return tid * q + (tid if tid < r else r)


@cython.boundscheck(False)
@cython.wraparound(False)
def transform_weights(const real[:, :, :, :, :, ::1] weights, const real[:, ::1] g0,
                      const real[:, ::1] g1, const real[:, ::1] g2, real[:, :, ::1] U,
                      Py_ssize_t nr, Py_ssize_t channel_chunk, int threads,
                      bint by_position=False):
    """U = (G w G^T) per axis, packed for the GEMM; OpenMP over (group, input channel), or
    with ``by_position`` over (group, position) as a shared run's GEMMs take them.

    By position, each of ``threads`` threads writes the U planes that it multiplies in
    the shared run that follows with as many threads (conv_winograd), so no plane passes
    from one core's cache to another's: where that exchange is slow (a VM whose two vCPUs
    share no cache, bench/results/weights_by_position_2026-11-25_epyc-zen4.txt), the
    weight transform was what slowed most.

    weights (G, K0, K1, K2, ICg, OCg) canonical and lifted; ``g*`` are (alpha, K) per
    axis; U (G, P, plane), plane = position_stride(panels * ICg * nr): (pos, ic, oc) at
    [g, pos, (oc // nr) * ICg * nr + ic * nr + oc % nr]. Output channels past OCg in the
    last panel are zeroed.
    """
    cdef wg_geometry geo
    cdef Py_ssize_t axis, groups = weights.shape[0]
    cdef object gs = (g0, g1, g2)
    geo.epi = NULL
    geo.in_channels_per_group = weights.shape[4]
    geo.out_channels_per_group = weights.shape[5]
    geo.channel_chunk = channel_chunk
    for axis in range(3):
        geo.kernel[axis] = weights.shape[1 + axis]
        geo.alpha[axis] = gs[axis].shape[0]
        if gs[axis].shape[1] != geo.kernel[axis]:
            raise ValueError(f"G on axis {axis} has {gs[axis].shape[1]} columns; expected "
                             f"the kernel extent {geo.kernel[axis]}")
    cdef Py_ssize_t positions = geo.alpha[0] * geo.alpha[1] * geo.alpha[2]
    cdef Py_ssize_t icg = geo.in_channels_per_group, ocg = geo.out_channels_per_group
    cdef Py_ssize_t panels = (ocg + nr - 1) // nr
    # a panel holds whole 64-byte vectors, which the 2-D register path writes
    cdef Py_ssize_t lanes = 64 // sizeof(real)
    got = (U.shape[0], U.shape[1], U.shape[2])
    expected = (groups, positions, position_stride(panels * icg * nr, sizeof(real)))
    if got != expected or nr < 1 or nr % lanes:
        raise ValueError(f"U has shape {got}; expected {expected}, and nr={nr} a multiple "
                         f"of {lanes}")
    if channel_chunk < 1 or threads < 1:
        raise ValueError(f"channel_chunk={channel_chunk} and threads={threads} must be >= 1")
    if ocg % nr:
        # the padding columns of the last panel: zero, so the GEMM's extra outputs are too
        tail = np.asarray(U)[:, :, (panels - 1) * icg * nr:panels * icg * nr]
        tail.reshape(groups, positions, icg, nr)[..., ocg % nr:] = 0
    cdef Py_ssize_t items = groups * (positions if by_position else icg)
    # by input channel: enough rows per task to amortise scheduling, enough tasks to share
    cdef Py_ssize_t per_task = max(1, min(64, items // (4 * threads)))
    cdef Py_ssize_t tasks = items if by_position else (items + per_task - 1) // per_task
    if tasks < threads:
        threads = <int>tasks
    cdef Py_ssize_t buf_elems = positions * max(channel_chunk, _VECTOR_ELEMENTS)
    cdef Py_ssize_t pos_stride = U.shape[2]
    dtype = np.float32 if real is float else np.float64
    work_array = buffers.aligned_empty((threads, 2 * buf_elems), dtype)
    cdef real[:, ::1] work = work_array
    cdef Py_ssize_t task, first, last, g, ic_begin, ic_end, p_lo, p_hi
    cdef int tid = 0
    if by_position:
        with nogil, parallel(num_threads=threads):
            tid = omp_get_thread_num()
            # assigned, not written through pointers: Cython then makes them private
            first = _static_begin(items, tid, omp_get_num_threads())
            last = _static_begin(items, tid + 1, omp_get_num_threads())
            while first < last:
                g = first // positions
                p_lo = first - g * positions
                p_hi = positions if last - g * positions > positions else last - g * positions
                _weight_tiles(&weights[g, 0, 0, 0, 0, 0], &geo, &g0[0, 0], &g1[0, 0],
                              &g2[0, 0], 0, icg, &U[g, 0, 0], pos_stride, nr,
                              &work[tid, 0], &work[tid, buf_elems], p_lo, p_hi)
                first = g * positions + p_hi
        return
    with nogil, parallel(num_threads=threads):
        tid = omp_get_thread_num()
        for task in prange(tasks, schedule="dynamic"):
            first = task * per_task
            last = first + per_task
            if last > items:
                last = items
            while first < last:
                g = first // icg
                ic_begin = first - g * icg
                ic_end = icg if last - g * icg > icg else last - g * icg
                _weight_tiles(&weights[g, 0, 0, 0, 0, 0], &geo, &g0[0, 0], &g1[0, 0],
                              &g2[0, 0], ic_begin, ic_end, &U[g, 0, 0], pos_stride, nr,
                              &work[tid, 0], &work[tid, buf_elems], 0, positions)
                first = g * icg + ic_end
