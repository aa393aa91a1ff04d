# cython: language_level=3
"""Winograd convolution on canonical layouts: tile transforms, batched GEMMs, one parallel region.

The tiles of all batch entries form one list, cut into chunks of ``block_tiles`` tiles.
Threads take chunks; for each group a thread

1. transforms its tiles' inputs, ``V[pos, tile, ic] = (B^T d B)[pos]``  (C, per tile);
2. runs one GEMM per transform position, ``M[pos] = V[pos] @ U[g, pos]``
   ([tiles x ICg] x [ICg x OCg]) through SciPy's BLAS (``cython_blas``), single-threaded
   inside this OpenMP region (the caller limits BLAS to one thread);
3. transforms back, ``dst = A^T M A + bias``, keeping the outputs that fall inside dst.

Each thread's V and M stay in its own workspace, so the memory in use is
``threads * block_tiles * P * (ICg + OCg)`` elements however big the problem is.
"""
cimport cython
from cython.parallel cimport parallel, prange
from scipy.linalg.cython_blas cimport dgemm, sgemm

import numpy as np

from convlab.kernels.omp_shim cimport omp_get_thread_num


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

    void wg_weight_tiles_f(const float *w, const wg_geometry *geo, const float *g0,
                           const float *g1, const float *g2, Py_ssize_t ic_begin,
                           Py_ssize_t ic_end, float *U, float *buf_a, float *buf_b)
    void wg_weight_tiles_d(const double *w, const wg_geometry *geo, const double *g0,
                           const double *g1, const double *g2, Py_ssize_t ic_begin,
                           Py_ssize_t ic_end, double *U, double *buf_a, double *buf_b)
    void wg_input_tiles_f(const float *src, const wg_geometry *geo, const float *bt0,
                          const float *bt1, const float *bt2, Py_ssize_t g, Py_ssize_t t_begin,
                          Py_ssize_t t_end, float *V, Py_ssize_t pos_stride, float *buf_a,
                          float *buf_b)
    void wg_input_tiles_d(const double *src, const wg_geometry *geo, const double *bt0,
                          const double *bt1, const double *bt2, Py_ssize_t g,
                          Py_ssize_t t_begin, Py_ssize_t t_end, double *V,
                          Py_ssize_t pos_stride, double *buf_a, double *buf_b)
    int wg_output_tiles_f(const float *M, Py_ssize_t pos_stride, const wg_geometry *geo,
                           const float *at0, const float *at1, const float *at2,
                           const float *bias, Py_ssize_t g, Py_ssize_t t_begin,
                           Py_ssize_t t_end, float *dst, float *buf_a, float *buf_b)
    int wg_output_tiles_d(const double *M, Py_ssize_t pos_stride, const wg_geometry *geo,
                           const double *at0, const double *at1, const double *at2,
                           const double *bias, Py_ssize_t g, Py_ssize_t t_begin,
                           Py_ssize_t t_end, double *dst, double *buf_a, double *buf_b)


ctypedef fused real:
    float
    double


cdef inline void _gemm(real *V, real *U, real *M, int rows, int icg, int ocg) noexcept nogil:
    """Row-major M (rows x ocg) = V (rows x icg) @ U (icg x ocg).

    Column-major BLAS sees the same memory as the transposes, so it computes
    M^T = U^T @ V^T: m=ocg, n=rows, k=icg.
    """
    cdef char trans = b'N'
    cdef real one = 1, zero = 0
    if real is float:
        sgemm(&trans, &trans, &ocg, &rows, &icg, &one, U, &ocg, V, &icg, &zero, M, &ocg)
    else:
        dgemm(&trans, &trans, &ocg, &rows, &icg, &one, U, &ocg, V, &icg, &zero, M, &ocg)


cdef int _run_chunk(const real *src, const real *U, const real *bias, real *dst,
                     const wg_geometry *geo, Py_ssize_t groups, Py_ssize_t positions,
                     const real *bt0, const real *bt1, const real *bt2, const real *at0,
                     const real *at1, const real *at2, Py_ssize_t t_begin, Py_ssize_t t_end,
                     Py_ssize_t block_tiles, real *work,
                     Py_ssize_t buf_elems) noexcept nogil:
    """One chunk of tiles through all three steps, for every group; nonzero when an
    output came out Inf or NaN."""
    cdef int nonfinite = 0
    cdef Py_ssize_t icg = geo.in_channels_per_group, ocg = geo.out_channels_per_group
    cdef real *V = work
    cdef real *M = V + positions * block_tiles * icg
    cdef real *buf_a = M + positions * block_tiles * ocg
    cdef real *buf_b = buf_a + buf_elems
    cdef Py_ssize_t v_stride = block_tiles * icg, m_stride = block_tiles * ocg
    cdef Py_ssize_t g, pos
    cdef int rows = <int>(t_end - t_begin)
    for g in range(groups):
        if real is float:
            wg_input_tiles_f(src, geo, bt0, bt1, bt2, g, t_begin, t_end, V, v_stride,
                             buf_a, buf_b)
        else:
            wg_input_tiles_d(src, geo, bt0, bt1, bt2, g, t_begin, t_end, V, v_stride,
                             buf_a, buf_b)
        for pos in range(positions):
            _gemm(V + pos * v_stride, <real *>U + (g * positions + pos) * icg * ocg,
                  M + pos * m_stride, rows, <int>icg, <int>ocg)
        if real is float:
            nonfinite |= wg_output_tiles_f(M, m_stride, geo, at0, at1, at2, bias, g, t_begin,
                                           t_end, dst, buf_a, buf_b)
        else:
            nonfinite |= wg_output_tiles_d(M, m_stride, geo, at0, at1, at2, bias, g, t_begin,
                                           t_end, dst, buf_a, buf_b)
    return nonfinite


def workspace_elements(positions, block_tiles, icg, ocg, channel_chunk):
    """Elements of one thread's workspace: V, M and two tile buffers."""
    return positions * (block_tiles * (icg + ocg) + 2 * channel_chunk)


@cython.boundscheck(False)
@cython.wraparound(False)
def conv_winograd(const real[:, :, :, :, ::1] src, const real[:, :, :, ::1] U,
                  const real[::1] bias, real[:, :, :, :, ::1] dst,
                  const real[:, ::1] bt0, const real[:, ::1] bt1, const real[:, ::1] bt2,
                  const real[:, ::1] at0, const real[:, ::1] at1, const real[:, ::1] at2,
                  pads_begin, Py_ssize_t block_tiles, Py_ssize_t channel_chunk, int threads):
    """Winograd convolution, stride 1 and dilation 1, on three (lifted) spatial axes.

    src (N, I0, I1, I2, IC), U (G, P, ICg, OCg) = the transformed weights with
    P = alpha0 * alpha1 * alpha2, dst (N, O0, O1, O2, OC). ``bt*`` are (alpha, alpha),
    ``at*`` are (m, alpha), one per axis; an axis with alpha == 1 is skipped.

    Returns the number of chunks in which some output came out Inf or NaN (0 normally).
    """
    cdef wg_geometry geo
    cdef Py_ssize_t axis, groups = U.shape[0], positions = U.shape[1]
    geo.batch = src.shape[0]
    geo.in_channels = src.shape[4]
    geo.out_channels = dst.shape[4]
    geo.in_channels_per_group = U.shape[2]
    geo.out_channels_per_group = U.shape[3]
    geo.channel_chunk = channel_chunk
    cdef object ats = (at0, at1, at2)
    for axis in range(3):
        geo.in_shape[axis] = src.shape[1 + axis]
        geo.out_shape[axis] = dst.shape[1 + axis]
        geo.pads_begin[axis] = pads_begin[axis]
        geo.alpha[axis] = ats[axis].shape[1]
        geo.m[axis] = ats[axis].shape[0]
        geo.tiles[axis] = (geo.out_shape[axis] + geo.m[axis] - 1) // geo.m[axis]
    if positions != geo.alpha[0] * geo.alpha[1] * geo.alpha[2]:
        raise ValueError(f"U has {positions} transform positions; expected "
                         f"{geo.alpha[0] * geo.alpha[1] * geo.alpha[2]} (alpha per axis "
                         f"{geo.alpha[0]}, {geo.alpha[1]}, {geo.alpha[2]})")
    if geo.in_channels != groups * geo.in_channels_per_group or \
            geo.out_channels != groups * geo.out_channels_per_group:
        raise ValueError("U's group and channel extents do not match src and dst")
    if block_tiles < 1 or channel_chunk < 1 or threads < 1:
        raise ValueError(f"block_tiles={block_tiles}, channel_chunk={channel_chunk} and "
                         f"threads={threads} must be >= 1")

    cdef Py_ssize_t total_tiles = geo.batch * geo.tiles[0] * geo.tiles[1] * geo.tiles[2]
    cdef Py_ssize_t chunks = (total_tiles + block_tiles - 1) // block_tiles
    if chunks < threads:
        threads = <int>chunks
    cdef Py_ssize_t buf_elems = positions * channel_chunk
    cdef Py_ssize_t per_thread = workspace_elements(
        positions, block_tiles, geo.in_channels_per_group, geo.out_channels_per_group,
        channel_chunk)
    dtype = np.float32 if real is float else np.float64
    work_array = np.empty((threads, per_thread), dtype=dtype)
    cdef real[:, ::1] work = work_array
    cdef const real *bias_ptr = &bias[0] if bias is not None else NULL
    cdef Py_ssize_t chunk, t_begin, t_end
    cdef Py_ssize_t nonfinite = 0
    cdef int tid = 0
    with nogil, parallel(num_threads=threads):
        tid = omp_get_thread_num()
        for chunk in prange(chunks, schedule="dynamic"):
            t_begin = chunk * block_tiles
            t_end = t_begin + block_tiles
            if t_end > total_tiles:
                t_end = total_tiles
            nonfinite += _run_chunk(
                &src[0, 0, 0, 0, 0], &U[0, 0, 0, 0], bias_ptr, &dst[0, 0, 0, 0, 0], &geo,
                groups, positions, &bt0[0, 0], &bt1[0, 0], &bt2[0, 0], &at0[0, 0],
                &at1[0, 0], &at2[0, 0], t_begin, t_end, block_tiles, &work[tid, 0], buf_elems)
    return nonfinite


@cython.boundscheck(False)
@cython.wraparound(False)
def transform_weights(const real[:, :, :, :, :, ::1] weights, const real[:, ::1] g0,
                      const real[:, ::1] g1, const real[:, ::1] g2, real[:, :, :, ::1] U,
                      Py_ssize_t channel_chunk, int threads):
    """U[g, pos, ic, oc] = (G w G^T)[pos] per axis, OpenMP over (group, input channel).

    weights (G, K0, K1, K2, ICg, OCg) canonical and lifted; ``g*`` are (alpha, K) per
    axis; U (G, P, ICg, OCg).
    """
    cdef wg_geometry geo
    cdef Py_ssize_t axis, groups = weights.shape[0]
    cdef object gs = (g0, g1, g2)
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
    got = (U.shape[0], U.shape[1], U.shape[2], U.shape[3])
    expected = (groups, positions, geo.in_channels_per_group, geo.out_channels_per_group)
    if got != expected:
        raise ValueError(f"U has shape {got}; expected {expected}")
    if channel_chunk < 1 or threads < 1:
        raise ValueError(f"channel_chunk={channel_chunk} and threads={threads} must be >= 1")
    cdef Py_ssize_t icg = geo.in_channels_per_group
    cdef Py_ssize_t items = groups * icg
    # enough rows per task to amortise scheduling, enough tasks to share out
    cdef Py_ssize_t per_task = max(1, min(16, items // (4 * threads)))
    cdef Py_ssize_t tasks = (items + per_task - 1) // per_task
    if tasks < threads:
        threads = <int>tasks
    cdef Py_ssize_t buf_elems = positions * channel_chunk
    dtype = np.float32 if real is float else np.float64
    work_array = np.empty((threads, 2 * buf_elems), dtype=dtype)
    cdef real[:, ::1] work = work_array
    cdef Py_ssize_t task, first, last, g, ic_begin, ic_end
    cdef int tid = 0
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
                if real is float:
                    wg_weight_tiles_f(&weights[g, 0, 0, 0, 0, 0], &geo, &g0[0, 0], &g1[0, 0],
                                      &g2[0, 0], ic_begin, ic_end, &U[g, 0, 0, 0],
                                      &work[tid, 0], &work[tid, buf_elems])
                else:
                    wg_weight_tiles_d(&weights[g, 0, 0, 0, 0, 0], &geo, &g0[0, 0], &g1[0, 0],
                                      &g2[0, 0], ic_begin, ic_end, &U[g, 0, 0, 0],
                                      &work[tid, 0], &work[tid, buf_elems])
                first = g * icg + ic_end
