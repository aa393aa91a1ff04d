# cython: language_level=3
"""The fft strategy's compiled tile pipeline (fft_tiles.h) for one input channel per group,
float32, stride 1: the transforms (fft_lanes.h, l = 8 or 16 at once across vector lanes),
the products with the kernels' spectra and the crops, all without the GIL.

Two kinds of problem, each with its own spectrum layout:

* depthwise (one output per group): the spectra are (ceil(G / 2l), 4, N, l) floats,
  P and Q (real and imaginary parts) of each pair of l-channel halves;
* banks (several outputs per group): (G, ceil(OCg / 2l), 2, N, l) floats, V of each pair
  of l-output halves.

N is the points of one tile's transform. ``geometry`` is a tuple of ints: the lane count
l, batch, groups, OCg, then per axis (three, leading ones for lower ranks) the input and
output extents, the begin pad, the kernel extent, the dilation, the transform length, the
outputs per tile and the tiles. Any level runs either lane count (:func:`lanes` is the one
it runs fastest), so spectra made at one level stay valid at another.
"""
from libc.stdint cimport uintptr_t

import numpy as np

from convlab.strategies.kernels.isa_level cimport (
    CL_ISA_AVX512,
    CL_X86_DISPATCH,
    cl_isa_in_effect,
    cl_isa_set_cap,
)


cdef extern from "fft_lanes.h" nogil:
    ctypedef struct fl_plan:
        int n
    int fl_plan_init(fl_plan *p, int n)
    void fl_plan_free(fl_plan *p)
    int fl_fast_length(int n)


cdef extern from "fft_tiles.h" nogil:
    ctypedef struct ft_geometry:
        Py_ssize_t lanes, batch, groups, ocg
        Py_ssize_t in_shape[3]
        Py_ssize_t out_shape[3]
        Py_ssize_t pads_begin[3]
        Py_ssize_t kernel[3]
        Py_ssize_t dilation[3]
        Py_ssize_t extent[3]
        Py_ssize_t L[3]
        Py_ssize_t to[3]
        Py_ssize_t tiles[3]
        Py_ssize_t w_group, w_out
        Py_ssize_t w_tap[3]
    Py_ssize_t ft_scratch_floats(const ft_geometry *g)
    void ft_run_depthwise(const ft_geometry *g, const fl_plan *plans, const float *src,
                          const float *spectra, const float *bias, float *dst,
                          int *nonfinite, float *scratch, Py_ssize_t scratch_stride,
                          int threads)
    void ft_run_bank(const ft_geometry *g, const fl_plan *plans, const float *src,
                     const float *spectra, const float *bias, float *dst,
                     int *nonfinite, Py_ssize_t unit_step, Py_ssize_t ob_step,
                     float *scratch, Py_ssize_t scratch_stride, int threads)
    void ft_run_depthwise_fused(const ft_geometry *g, const fl_plan *plans,
                                const float *src, const float *w, const float *bias,
                                float *dst, int *nonfinite, Py_ssize_t chunks,
                                float *scratch, Py_ssize_t scratch_stride, int threads)
    void ft_run_spectra(const ft_geometry *g, const fl_plan *plans, const float *w,
                        int depthwise, float *out, float *scratch,
                        Py_ssize_t scratch_stride, int threads)
    void ft_lane_transform(Py_ssize_t lanes_of, const fl_plan *p, float *re, float *im,
                           int inverse, float *work)


LANE_COUNTS = (8, 16)
"""The transforms per vector of lanes the kernels run (two real signals share a lane)."""
MAX_LENGTH = 4096
"""The longest transform along one axis."""
GEOMETRY_FIELDS = 4 + 3 * 8

BUILT_ISA_LEVELS = {"fft_tiles": tuple([0, 1, 2] if CL_X86_DISPATCH else [0])}


def lanes():
    """The lane count the level in effect runs fastest: 16 with AVX-512 (one register of
    floats), else 8."""
    return 16 if CL_X86_DISPATCH and cl_isa_in_effect == CL_ISA_AVX512 else 8


def isa_levels():
    """The level (0 baseline, 1 AVX2, 2 AVX-512) each part of this module runs at now."""
    return {"fft_tiles": cl_isa_in_effect}


def _set_isa_cap(int level):
    """Run at most ``level`` from now on (convlab.runtime.cpu calls it); returns the level in
    effect."""
    return cl_isa_set_cap(level)


from convlab.runtime import cpu as _cpu
_cpu.follow_cap(__name__, _set_isa_cap)


def fast_length(int n):
    """The smallest length >= n of the form 2^a 3^b 5^c, or -1 above MAX_LENGTH."""
    return fl_fast_length(n)


cdef class _Plans:
    """The three axes' transform plans of one geometry."""
    cdef fl_plan plans[3]
    cdef int made

    def __cinit__(self, lengths):
        self.made = 0
        for axis in range(3):
            if fl_plan_init(&self.plans[axis], int(lengths[axis])) != 0:
                raise ValueError(f"transform length {lengths[axis]} is not 2^a 3^b 5^c "
                                 f"up to {MAX_LENGTH}")
            self.made += 1

    def __dealloc__(self):
        for axis in range(self.made):
            fl_plan_free(&self.plans[axis])


def plans(lengths):
    """The transform plans for one tile shape (three lengths), to pass to the runs."""
    return _Plans(tuple(lengths))


cdef ft_geometry _geometry(tuple geometry) except *:
    if len(geometry) != GEOMETRY_FIELDS:
        raise ValueError(f"geometry: expected {GEOMETRY_FIELDS} ints, got {len(geometry)}")
    cdef ft_geometry g
    cdef int axis
    cdef Py_ssize_t at
    values = [int(v) for v in geometry]
    if values[0] not in LANE_COUNTS:
        raise ValueError(f"geometry: {values[0]} lanes, expected one of {LANE_COUNTS}")
    g.lanes = values[0]
    g.batch = values[1]
    g.groups = values[2]
    g.ocg = values[3]
    for axis in range(3):
        at = 4 + 8 * axis
        g.in_shape[axis] = values[at]
        g.out_shape[axis] = values[at + 1]
        g.pads_begin[axis] = values[at + 2]
        g.kernel[axis] = values[at + 3]
        g.dilation[axis] = values[at + 4]
        g.L[axis] = values[at + 5]
        g.to[axis] = values[at + 6]
        g.tiles[axis] = values[at + 7]
        g.extent[axis] = (g.kernel[axis] - 1) * g.dilation[axis] + 1
        g.w_tap[axis] = 0
    g.w_group = g.w_out = 0
    return g


def scratch_floats(tuple geometry):
    """Floats of one thread's scratch (its stride in the scratch buffer is this rounded up
    to a cache line)."""
    cdef ft_geometry g = _geometry(geometry)
    return int(ft_scratch_floats(&g))


def scratch_stride(tuple geometry):
    """Floats between two threads' scratch: one thread's, rounded up to 64 bytes."""
    return (scratch_floats(geometry) + 15) // 16 * 16


cdef float *_aligned(float[::1] scratch, Py_ssize_t need) except NULL:
    cdef uintptr_t address = <uintptr_t>&scratch[0]
    cdef Py_ssize_t skip = <Py_ssize_t>((64 - address % 64) % 64) // sizeof(float)
    if scratch.shape[0] < need + skip:
        raise ValueError(f"scratch: {scratch.shape[0]} floats, need {need + skip}")
    return &scratch[0] + skip


def spectrum_floats(tuple geometry, bint depthwise):
    """Floats of the spectra of every group."""
    cdef ft_geometry g = _geometry(geometry)
    cdef Py_ssize_t n = g.L[0] * g.L[1] * g.L[2] * g.lanes
    cdef Py_ssize_t pair = 2 * g.lanes
    if depthwise:
        return int((g.groups + pair - 1) // pair * 4 * n)
    return int(g.groups * ((g.ocg + pair - 1) // pair) * 2 * n)


cdef int _weight_strides(ft_geometry *g, const float[:, :, :, :, :] weights) except -1:
    """Check the canonical (G, K0, K1, K2, OCg) ``weights`` against ``g`` and put their
    element strides in it."""
    cdef int axis
    expected = (g.groups, g.kernel[0], g.kernel[1], g.kernel[2], g.ocg)
    shape = tuple([weights.shape[axis] for axis in range(5)])
    if shape != expected:
        raise ValueError(f"weights: shape {shape}, expected {expected}")
    for axis in range(5):
        if weights.strides[axis] < 0 or weights.strides[axis] % sizeof(float):
            raise ValueError("weights: strides must be non-negative multiples of 4 bytes")
    g.w_group = weights.strides[0] // sizeof(float)
    for axis in range(3):
        g.w_tap[axis] = weights.strides[1 + axis] // sizeof(float)
    g.w_out = weights.strides[4] // sizeof(float)
    return 0


def spectra(tuple geometry, _Plans plans, const float[:, :, :, :, :] weights,
            bint depthwise, float[::1] out, float[::1] scratch, int threads):
    """``out`` = the kernels' spectra (layout in the module docstring); ``weights`` are the
    canonical ones as (G, K0, K1, K2, OCg), any strides (a view of the caller's)."""
    cdef ft_geometry g = _geometry(geometry)
    _weight_strides(&g, weights)
    if out.shape[0] < spectrum_floats(geometry, depthwise):
        raise ValueError("out: too small for the spectra")
    cdef Py_ssize_t stride = scratch_stride(geometry)
    threads = max(1, threads)
    cdef float *base = _aligned(scratch, stride * threads)
    with nogil:
        ft_run_spectra(&g, plans.plans, &weights[0, 0, 0, 0, 0], depthwise, &out[0], base,
                       stride, threads)


cdef const float *_checked_io(ft_geometry *g, const float[::1] src, bias,
                              float[::1] dst) except? NULL:
    """Check ``src`` and ``dst`` against ``g``; the bias's floats, or NULL for None."""
    cdef Py_ssize_t in_points = g.in_shape[0] * g.in_shape[1] * g.in_shape[2]
    cdef Py_ssize_t out_points = g.out_shape[0] * g.out_shape[1] * g.out_shape[2]
    if src.shape[0] != g.batch * in_points * g.groups:
        raise ValueError("src: size does not match the geometry")
    if dst.shape[0] != g.batch * out_points * g.groups * g.ocg:
        raise ValueError("dst: size does not match the geometry")
    cdef const float[::1] bias_view
    if bias is None:
        return NULL
    bias_view = bias
    if bias_view.shape[0] != g.groups * g.ocg:
        raise ValueError("bias: one value per output channel expected")
    return &bias_view[0]


def run_depthwise_one_shot(tuple geometry, _Plans plans, const float[::1] src,
                           const float[:, :, :, :, :] weights, bias, float[::1] dst,
                           Py_ssize_t chunks, float[::1] scratch, int threads):
    """``dst`` as :func:`run` computes it for a depthwise geometry, from the canonical
    ``weights`` (as :func:`spectra` takes them) instead of kept spectra: each task
    transforms its channel block's kernels in its own scratch, then runs its share of the
    (image, tile) units, the block's units cut into ``chunks``. Returns whether every value
    written is finite."""
    cdef ft_geometry g = _geometry(geometry)
    _weight_strides(&g, weights)
    if g.ocg != 1:
        raise ValueError("geometry: depthwise expected (one output per group)")
    cdef const float *bias_ptr = _checked_io(&g, src, bias, dst)
    cdef Py_ssize_t stride = scratch_stride(geometry)
    threads = max(1, threads)
    cdef float *base = _aligned(scratch, stride * threads)
    cdef int nonfinite = 0
    with nogil:
        ft_run_depthwise_fused(&g, plans.plans, &src[0], &weights[0, 0, 0, 0, 0], bias_ptr,
                               &dst[0], &nonfinite, chunks, base, stride, threads)
    return not nonfinite


def run(tuple geometry, _Plans plans, const float[::1] src, const float[::1] spectra,
        bias, float[::1] dst, bint depthwise, Py_ssize_t units_per_task,
        Py_ssize_t out_blocks_per_task, float[::1] scratch, int threads):
    """``dst`` (N, O..., G * OCg) = the correlation of ``src`` (N, I..., G) with the
    kernels whose ``spectra`` are given, plus ``bias`` (G * OCg floats, or None); all
    C-contiguous float32, flattened. Bank tasks take ``units_per_task`` (image, tile) units
    (at most l) and ``out_blocks_per_task`` blocks of 2l outputs each. Returns whether every
    value written is finite (the crops check as they write)."""
    cdef ft_geometry g = _geometry(geometry)
    cdef const float *bias_ptr = _checked_io(&g, src, bias, dst)
    if spectra.shape[0] < spectrum_floats(geometry, depthwise):
        raise ValueError("spectra: too small for the geometry")
    cdef Py_ssize_t stride = scratch_stride(geometry)
    threads = max(1, threads)
    cdef float *base = _aligned(scratch, stride * threads)
    cdef int nonfinite = 0
    with nogil:
        if depthwise:
            ft_run_depthwise(&g, plans.plans, &src[0], &spectra[0], bias_ptr, &dst[0],
                             &nonfinite, base, stride, threads)
        else:
            ft_run_bank(&g, plans.plans, &src[0], &spectra[0], bias_ptr, &dst[0],
                        &nonfinite, units_per_task, out_blocks_per_task, base, stride,
                        threads)
    return not nonfinite


def lane_transform(float[:, ::1] re, float[:, ::1] im, bint inverse):
    """The unscaled transforms of the l lanes of (n, l) ``re`` + i ``im`` (l in
    LANE_COUNTS), in place, at the level in effect (for tests and the notebook)."""
    cdef Py_ssize_t count = re.shape[1]
    if count not in LANE_COUNTS or im.shape[0] != re.shape[0] or im.shape[1] != count:
        raise ValueError(f"re and im: expected two (n, l) arrays, l in {LANE_COUNTS}")
    cdef fl_plan plan
    if fl_plan_init(&plan, <int>re.shape[0]) != 0:
        raise ValueError(f"length {re.shape[0]} is not 2^a 3^b 5^c up to {MAX_LENGTH}")
    work = np.empty(2 * re.shape[0] * count, np.float32)
    cdef float[::1] w = work
    try:
        with nogil:
            ft_lane_transform(count, &plan, &re[0, 0], &im[0, 0], inverse, &w[0])
    finally:
        fl_plan_free(&plan)
