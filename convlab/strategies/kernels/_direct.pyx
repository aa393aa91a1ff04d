# cython: language_level=3
"""Direct convolution on canonical layouts, three spatial axes (callers lift ranks 1-2).

The output is cut into independent items (runs of output pixels for one block of output
channels, see ``cl_plan`` in direct_microkernel.h) that OpenMP threads share. Each item
runs register-blocked C microkernels compiled for several instruction sets; each call
runs the widest one the CPU supports, at most the cap of :mod:`convlab.runtime.cpu`
(``CONVLAB_MAX_CPU_ISA``).

Weights arrive repacked by ``convlab.strategies.direct.prepare_weights``:

* dense/grouped: (G, KD, KH, KW, ICg, OCgp), OCgp >= OCg zero-padded, and bias (G, OCgp);
* depthwise (ICg == OCg == 1): (KD, KH, KW, Gp), Gp >= G zero-padded, and bias (Gp,).
"""
import numpy as _np

cimport cython
from libc.stdlib cimport calloc, free, malloc
from libc.string cimport memcpy, memset
from cython.parallel cimport prange

from convlab.strategies.kernels._epilogue cimport Epilogue, cl_epilogue
from convlab.strategies.kernels.isa_level cimport (CL_X86_DISPATCH, cl_isa_in_effect, cl_isa_set_cap,
                                        cl_isa_supported)
from convlab.strategies.kernels.omp_shim cimport omp_get_thread_num

ctypedef fused real:
    float
    double

cdef extern from "direct_microkernel.h" nogil:
    ctypedef struct cl_geom:
        Py_ssize_t N, ID, IH, IW, IC
        Py_ssize_t ICs
        Py_ssize_t OD, OH, OW, OC
        Py_ssize_t G, KD, KH, KW, ICg, OCg, OCgp
        Py_ssize_t w_row, w_group
        Py_ssize_t sd, sh, sw, dd, dh, dw, pd, ph, pw
        int depthwise
        int blocked
        Py_ssize_t cshift
        int isa
        Py_ssize_t V, nvec, nchunk, seglen, nseg, icb, ncgroup, ow_lo, ow_hi, nitems
        const void *zeros
        Py_ssize_t wpack_elems
        int stream_dst
        int prefetch_src
        int whole_pixels
        Py_ssize_t item_chunks
        void *wpack
        const cl_epilogue *epi
    Py_ssize_t cl_wpack_max_bytes
    Py_ssize_t cl_pass_bytes
    Py_ssize_t cl_pass_min_channels
    Py_ssize_t cl_pass_max_bytes
    Py_ssize_t cl_stream_min_bytes
    int CL_CAN_STREAM
    Py_ssize_t cl_prefetch_min_bytes
    Py_ssize_t cl_flat_max_taps
    Py_ssize_t cl_flat_max_run
    Py_ssize_t CL_FLAT_TAPS_CAP
    Py_ssize_t cl_whole_pixel_bytes
    Py_ssize_t cl_copy_group_bytes
    Py_ssize_t cl_copy_prefetch_rows
    int cl_isa_jmax(int isa, int depthwise)
    Py_ssize_t cl_dense_chunks(Py_ssize_t OCg, int *isa, size_t itemsize, Py_ssize_t *V,
                               Py_ssize_t *nvec)
    Py_ssize_t cl_plan(cl_geom *g, int isa, int threads, size_t itemsize)
    void cl_item_f32(const cl_geom *g, const float *src, const float *w, const float *bias,
                     float *dst, Py_ssize_t item, Py_ssize_t tid)
    void cl_item_f64(const cl_geom *g, const double *src, const double *w,
                     const double *bias, double *dst, Py_ssize_t item, Py_ssize_t tid)

# Indexed by the CL_ISA_* levels; convlab.runtime.cpu.ISA_LEVELS.
ISA_NAMES = ("baseline", "avx2", "avx512")

# The padded channel axis of prepared weights is a multiple of this many bytes, so a
# vector of any level (16, 32 or 64 bytes) never reads past it.
PAD_BYTES = 64
# A depthwise kernel reads one weight vector per tap, a weight row apart. Rows a multiple
# of 1 KiB long put all of a pixel's taps in at most 4 of L1's sets (64-byte lines, 4 KiB
# per way), which a large kernel's taps overflow on every pixel: 1024 channels of a 7x7
# image under a 13x13 kernel ran 2.9x slower per channel than 1008 or 1040 channels, and
# 1.6x faster with rows one line longer
# (bench/results/depthwise_aliasing_2026-11-28_zen3-avx2.txt).
ALIAS_BYTES = 1024

cdef enum:
    LINE_BYTES = 64  # cache line


def supported_isas():
    """Names of the instruction-set levels this CPU can run, narrowest first."""
    return [name for level, name in enumerate(ISA_NAMES) if cl_isa_supported(level)]


def get_isa():
    """The level the microkernels use now (narrower ones are still picked for very few
    channels, where wide vectors would waste lanes)."""
    return ISA_NAMES[cl_isa_in_effect]


# The levels each part of this module has code for (convlab.runtime.cpu.kernel_isa_levels).
BUILT_ISA_LEVELS = {"direct": tuple(range(3 if CL_X86_DISPATCH else 1)),
                    "direct_epilogue": tuple(range(3 if CL_X86_DISPATCH else 1))}


def isa_levels():
    """The level (0 baseline, 1 AVX2, 2 AVX-512) each part of this module runs at now."""
    return {"direct": cl_isa_in_effect, "direct_epilogue": cl_isa_in_effect}


def _set_isa_cap(int level):
    """Run at most ``level`` from now on (convlab.runtime.cpu calls it); returns the level in
    effect."""
    return cl_isa_set_cap(level)


from convlab.runtime import cpu as _cpu
_cpu.follow_cap(__name__, _set_isa_cap)


cdef Py_ssize_t _swap_byte_knob(Py_ssize_t *knob, Py_ssize_t value, str name) except -1:
    """Set one of the kernel's byte-count knobs (0 or more) and return its previous value."""
    if value < 0:
        raise ValueError(f"{name}={value}; expected >= 0")
    cdef Py_ssize_t previous = knob[0]
    knob[0] = value
    return previous


def set_weight_copy_limit(Py_ssize_t nbytes):
    """Largest per-thread copy of one pass's weights (see cl_geom.wpack); 0 reads every
    pass in place. Returns the previous limit. Not thread-safe: for tests and experiments."""
    return _swap_byte_knob(&cl_wpack_max_bytes, nbytes, "nbytes")


def set_pass_size(Py_ssize_t nbytes, Py_ssize_t min_channels):
    """Size the input-channel passes of dense items: one pass's weights within ``nbytes``,
    but at least ``min_channels`` channels. Returns the previous (nbytes, min_channels).
    Not thread-safe: for experiments."""
    global cl_pass_bytes, cl_pass_min_channels
    previous = (cl_pass_bytes, cl_pass_min_channels)
    if nbytes < 1 or min_channels < 1:
        raise ValueError(f"nbytes={nbytes}, min_channels={min_channels}; expected >= 1")
    cl_pass_bytes = nbytes
    cl_pass_min_channels = min_channels
    return previous


# Whether this build has non-temporal stores (x86-64 builds with run-time dispatch; the
# portable build, as on AArch64, stores normally whatever set_streaming says).
CAN_STREAM = bool(CL_CAN_STREAM)


def set_streaming(Py_ssize_t min_bytes):
    """Write dense dst with non-temporal stores when it takes at least ``min_bytes`` (0:
    never). Returns the previous value. Not thread-safe: for tests and experiments."""
    return _swap_byte_knob(&cl_stream_min_bytes, min_bytes, "min_bytes")


def set_prefetch(Py_ssize_t min_bytes):
    """Prefetch the next pixel block's src in 1x1 convolutions whose src takes at least
    ``min_bytes`` (0: never). Returns the previous value. Not thread-safe: for tests and
    experiments."""
    return _swap_byte_knob(&cl_prefetch_min_bytes, min_bytes, "min_bytes")


def set_flat_taps(Py_ssize_t max_taps, Py_ssize_t max_run):
    """Run interior blocks of dense items over one flat list of taps when the reduction has
    at most ``max_taps`` terms (0: never; at most CL_FLAT_TAPS_CAP) and the runs of adjacent
    W taps are shorter than ``max_run``. Returns the previous (max_taps, max_run). Not
    thread-safe: for tests and experiments."""
    global cl_flat_max_taps, cl_flat_max_run
    if not 0 <= max_taps <= CL_FLAT_TAPS_CAP or max_run < 0:
        raise ValueError(f"max_taps={max_taps}, max_run={max_run}; expected 0 <= max_taps "
                         f"<= {CL_FLAT_TAPS_CAP} and max_run >= 0")
    previous = (cl_flat_max_taps, cl_flat_max_run)
    cl_flat_max_taps = max_taps
    cl_flat_max_run = max_run
    return previous


def set_pass_limit(Py_ssize_t nbytes):
    """The most bytes of weights a dense pass takes to reach its minimum channel count (see
    set_pass_size); direct.py sets it from the CPU's L2. Returns the previous limit. Not
    thread-safe: set it at import, or in tests and experiments."""
    return _swap_byte_knob(&cl_pass_max_bytes, nbytes, "nbytes")


def set_whole_pixels(Py_ssize_t max_weight_bytes):
    """Let a dense item take every channel chunk of its group, chunk loop innermost, when
    the group's weights take at most ``max_weight_bytes`` (0: never). Returns the previous
    value. Not thread-safe: for tests and experiments."""
    return _swap_byte_knob(&cl_whole_pixel_bytes, max_weight_bytes, "max_weight_bytes")


def set_copy_group(Py_ssize_t row_bytes, Py_ssize_t prefetch_rows=-1):
    """Where a dense call copies weights from beyond L2 per pass, let each item take
    adjacent channel chunks covering about ``row_bytes`` of each weight row (0: one chunk
    per item), and have the copy prefetch ``prefetch_rows`` rows ahead (0: none; -1 keeps
    the current value). Returns the previous (row_bytes, prefetch_rows). Not thread-safe:
    for tests and experiments."""
    global cl_copy_prefetch_rows
    if prefetch_rows < -1:
        raise ValueError(f"prefetch_rows={prefetch_rows}; expected >= 0, or -1 to keep it")
    previous_rows = cl_copy_prefetch_rows
    previous = _swap_byte_knob(&cl_copy_group_bytes, row_bytes, "row_bytes")
    if prefetch_rows >= 0:
        cl_copy_prefetch_rows = prefetch_rows
    return previous, previous_rows


def padded_channels(Py_ssize_t channels, Py_ssize_t itemsize):
    """channels rounded up to a multiple of PAD_BYTES // itemsize."""
    cdef Py_ssize_t lanes = PAD_BYTES // itemsize
    return (channels + lanes - 1) // lanes * lanes


def depthwise_padded_channels(Py_ssize_t channels, Py_ssize_t itemsize):
    """The last axis of depthwise weights: channels padded like padded_channels, and by
    one more line where that row would be a multiple of ALIAS_BYTES long."""
    cdef Py_ssize_t padded = padded_channels(channels, itemsize)
    if padded * itemsize % ALIAS_BYTES == 0:
        padded += PAD_BYTES // itemsize
    return padded


cdef object _aligned_empty(Py_ssize_t rows, Py_ssize_t cols, bint single):
    """An uninitialised (rows, cols) float32 (single) or float64 array whose data starts
    on a PAD_BYTES boundary."""
    cdef Py_ssize_t itemsize = 4 if single else 8
    cdef Py_ssize_t extra = PAD_BYTES // itemsize
    cdef float[::1] f
    cdef double[::1] d
    cdef size_t address
    raw = _np.empty(rows * cols + extra, dtype=_np.float32 if single else _np.float64)
    if single:
        f = raw
        address = <size_t>&f[0]
    else:
        d = raw
        address = <size_t>&d[0]
    cdef Py_ssize_t skip = ((PAD_BYTES - address % PAD_BYTES) % PAD_BYTES) // itemsize
    return raw[skip:skip + rows * cols].reshape(rows, cols)


def pack_dense(const real[:, :, :] weights, Py_ssize_t padded):
    """(G, T, OCg), any strides -> (G * T, padded): each row's channels zero-padded to
    ``padded``, 64-byte aligned. T is every (tap, input channel) pair of a group.

    Any strides, so that grouped XIO weights, whose canonical (G, T, OCg) view steps OCg
    elements from group to group, are packed as they lie instead of copied first (2 of a
    one-shot call's 36 us on the 1d suite's 100-group 1x1 of 4 channels per group)."""
    cdef Py_ssize_t G = weights.shape[0], T = weights.shape[1], OCg = weights.shape[2]
    cdef Py_ssize_t g, t, c
    if padded < OCg:
        raise ValueError(f"padded={padded} must be >= OCg={OCg}")
    out = _aligned_empty(G * T, padded, real is float)
    cdef real[:, ::1] o = out
    if G * T == 0:
        return out
    cdef bint whole = padded == OCg and weights.is_c_contig()
    cdef bint rows = weights.strides[2] == sizeof(real)
    # Row copies by memcpy: a one-shot call packs on every call, and on weight-heavy layers
    # (ResNet-50 res5: 4 MB of weights, 49 output pixels) the element loop took about half
    # of the call.
    with nogil:
        if whole:
            memcpy(&o[0, 0], &weights[0, 0, 0], G * T * OCg * sizeof(real))
        else:
            for g in range(G):
                for t in range(T):
                    if rows:
                        memcpy(&o[g * T + t, 0], &weights[g, t, 0], OCg * sizeof(real))
                    else:
                        for c in range(OCg):
                            o[g * T + t, c] = weights[g, t, c]
                    if padded > OCg:
                        memset(&o[g * T + t, OCg], 0, (padded - OCg) * sizeof(real))
    return out


def pack_depthwise(const real[:, :] weights, Py_ssize_t padded):
    """(T, G), any strides -> (T, padded): taps first, channels contiguous and
    zero-padded to ``padded``, 64-byte aligned."""
    cdef Py_ssize_t T = weights.shape[0], G = weights.shape[1]
    cdef Py_ssize_t g, t
    if padded < G:
        raise ValueError(f"padded={padded} must be >= G={G}")
    out = _aligned_empty(T, padded, real is float)
    cdef real[:, ::1] o = out
    with nogil:
        for t in range(T):
            for g in range(G):
                o[t, g] = weights[t, g]
            for g in range(G, padded):
                o[t, g] = 0
    return out


# Below this many 64-byte vectors per pixel, the two extra overlapping vectors that an
# aligned start costs outweigh the split loads it saves. Measured by timing the direct
# strategy's run on MobileNet depthwise layers with src and dst 16 bytes off a cache
# line, both settings interleaved: with 2 vectors (C=32 float32) aligning was 1.4-1.6x
# slower, with 4 and 8 it was 1.2-1.3x faster at 2 threads (a shared, noisy machine).
MIN_VECTORS_TO_ALIGN = 4


cdef Py_ssize_t _aligned_channel(size_t address, Py_ssize_t channels, size_t itemsize):
    """The first channel whose address is a multiple of PAD_BYTES in every pixel, or 0
    when pixels do not all share one alignment (or there are too few channels for it to
    pay). Vectors of a depthwise row then start there, so their loads never straddle two
    cache lines."""
    if address % itemsize or (channels * itemsize) % PAD_BYTES:
        return 0
    if channels * itemsize < MIN_VECTORS_TO_ALIGN * PAD_BYTES:
        return 0
    return ((PAD_BYTES - address % PAD_BYTES) % PAD_BYTES) // itemsize


cdef Py_ssize_t _pixel_stride(Py_ssize_t *shape, Py_ssize_t *strides,
                              size_t itemsize) except -1:
    """Elements from one pixel of a (N, ID, IH, IW, C) src to the next: C, or more for a
    view of the first C channels of a wider array whose pixels otherwise lie packed."""
    cdef Py_ssize_t pixel = shape[4], expected, axis
    if shape[4] > 1 and strides[4] != <Py_ssize_t>itemsize:
        pixel = -1
    elif shape[3] > 1:
        pixel = strides[3] // <Py_ssize_t>itemsize
        if strides[3] % <Py_ssize_t>itemsize or pixel < shape[4]:
            pixel = -1
    expected = pixel * <Py_ssize_t>itemsize
    for axis in range(3, -1, -1):
        # a stride along an axis of one element is never used
        if pixel < 0 or (shape[axis] > 1 and strides[axis] != expected):
            raise ValueError(f"src strides {[strides[i] for i in range(5)]}: expected packed "
                             f"pixels of at least {shape[4]} elements")
        expected *= shape[axis]
    return pixel


cdef int _fill_common(cl_geom *g, Py_ssize_t *src_shape, Py_ssize_t *dst_shape,
                      strides, dilations, pads_begin) except -1:
    """Shapes and attributes into g; returns 0 when there is nothing to compute (N == 0)."""
    g.epi = NULL
    g.blocked = 0
    g.N = src_shape[0]
    g.ID = src_shape[1]
    g.IH = src_shape[2]
    g.IW = src_shape[3]
    g.IC = src_shape[4]
    g.ICs = g.IC
    g.OD = dst_shape[1]
    g.OH = dst_shape[2]
    g.OW = dst_shape[3]
    g.OC = dst_shape[4]
    g.sd, g.sh, g.sw = strides
    g.dd, g.dh, g.dw = dilations
    g.pd, g.ph, g.pw = pads_begin
    if g.sd < 1 or g.sh < 1 or g.sw < 1 or g.dd < 1 or g.dh < 1 or g.dw < 1:
        raise ValueError(f"strides={tuple(strides)} and dilations={tuple(dilations)} must "
                         f"be >= 1")
    if dst_shape[0] != g.N:
        raise ValueError(f"dst batch {dst_shape[0]} must equal src batch {g.N}")
    if g.IC < 1 or g.OC < 1:
        raise ValueError(f"src has {g.IC} and dst {g.OC} channels; expected >= 1")
    return g.N > 0


cdef int _attach_epilogue(cl_geom *g, Epilogue epilogue, object dtype) except -1:
    if epilogue is None:
        return 0
    if epilogue.dtype != dtype:
        raise TypeError(f"epilogue is for {epilogue.dtype}; expected {dtype}")
    g.epi = &epilogue.c
    return 0


cdef int _check_extents(const cl_geom *g) except -1:
    if min(g.OD, g.ID, g.KD) < 1 or min(g.OH, g.IH, g.KH) < 1 or min(g.OW, g.IW, g.KW) < 1:
        for axis, extents in enumerate(((g.OD, g.ID, g.KD), (g.OH, g.IH, g.KH),
                                        (g.OW, g.IW, g.KW))):
            if min(extents) < 1:
                raise ValueError(f"spatial axis {axis}: output, input and kernel extents "
                                 f"{extents} must all be >= 1")
    return 0


cdef inline void _run_item(cl_geom *g, const real *sp, const real *wp, const real *bp,
                           real *dp, Py_ssize_t item, int thread) noexcept nogil:
    if real is float:
        cl_item_f32(g, sp, wp, bp, dp, item, thread)
    else:
        cl_item_f64(g, sp, wp, bp, dp, item, thread)


cdef int _run_items(cl_geom *g, const real *sp, const real *wp, const real *bp, real *dp,
                    int threads) except -1 nogil:
    """Cut the call into work items (``cl_plan``) and run them on up to ``threads`` threads.
    Called without the GIL, so other Python threads run while a kernel does."""
    cdef Py_ssize_t item
    cdef int nthreads = threads if threads > 0 else 1
    cdef Py_ssize_t nitems = cl_plan(g, cl_isa_in_effect, nthreads, sizeof(real))
    cdef void *pack_mem = NULL
    if nthreads > nitems:
        nthreads = <int>nitems
    g.wpack = NULL
    if g.wpack_elems > 0:
        # per-thread weight copies (see cl_geom.wpack), each on its own cache lines
        pack_mem = malloc(nthreads * g.wpack_elems * sizeof(real) + LINE_BYTES)
        if pack_mem == NULL:
            with gil:
                raise MemoryError("direct: no memory for the per-thread weight copies")
        g.wpack = <void*>((<size_t>pack_mem + LINE_BYTES - 1) // LINE_BYTES * LINE_BYTES)
    try:
        if nthreads == 1:
            # No OpenMP region: even a team of one ends in a barrier whose futex wake is a
            # system call (see conv_im2col's row mode).
            for item in range(nitems):
                _run_item(g, sp, wp, bp, dp, item, 0)
        else:
            for item in prange(nitems, num_threads=nthreads, schedule="static"):
                _run_item(g, sp, wp, bp, dp, item, omp_get_thread_num())
    finally:
        free(pack_mem)
        g.wpack = NULL
    return 0


def weight_row_strides(shape, strides, Py_ssize_t itemsize):
    """(row, group) strides in elements of dense weights (G, KD, KH, KW, ICg, OCgp) as
    conv_direct reads them: contiguous channels, (tap, input channel) rows one positive
    stride apart and at least OCgp elements, as in packed weights and grouped views of XIO
    weights; a ValueError otherwise (prepare_weights then copies)."""
    cdef Py_ssize_t c_shape[6]
    cdef Py_ssize_t c_strides[6]
    cdef Py_ssize_t row, group, axis
    for axis in range(6):
        c_shape[axis] = shape[axis]
        c_strides[axis] = strides[axis]
    _row_strides(c_shape, c_strides, itemsize, &row, &group)
    return row, group


cdef int _row_strides(const Py_ssize_t *shape, const Py_ssize_t *strides, Py_ssize_t itemsize,
                      Py_ssize_t *row_out, Py_ssize_t *group_out) except -1:
    """weight_row_strides on C arrays (conv_direct runs it on every call)."""
    cdef Py_ssize_t axis, row, expected, group
    if shape[5] > 1 and strides[5] != itemsize:
        raise ValueError(f"weights' last axis has stride {strides[5]}; expected {itemsize} "
                         f"(contiguous channels)")
    # the innermost row axis longer than one sets the stride; every other one must follow
    row = shape[5]
    for axis in range(4, 0, -1):
        if shape[axis] > 1:
            row = strides[axis] // itemsize
            break
    expected = row
    for axis in range(4, 0, -1):
        if shape[axis] > 1 and strides[axis] != expected * itemsize:
            raise ValueError(f"weights have strides {tuple(strides[i] for i in range(6))}; "
                             f"expected their (tap, input channel) rows one stride apart")
        expected *= shape[axis]
    group = strides[0] // itemsize if shape[0] > 1 else 0
    if row < shape[5] or group < 0 or strides[0] % itemsize:
        raise ValueError(f"weights have strides {tuple(strides[i] for i in range(6))}; "
                         f"expected rows of at least {shape[5]} elements, groups at positive "
                         f"strides")
    row_out[0] = row
    group_out[0] = group
    return 0


def dense_chunks(Py_ssize_t ocg, Py_ssize_t itemsize):
    """How a dense call with ``ocg`` output channels per group cuts them at the level in
    effect: (level, lanes per vector, vectors per chunk, one entry per chunk)."""
    cdef int isa = cl_isa_in_effect
    cdef Py_ssize_t lanes, nvec, nchunk
    nchunk = cl_dense_chunks(ocg, &isa, itemsize, &lanes, &nvec)
    return isa, lanes, tuple(nvec // nchunk + (chunk < nvec % nchunk)
                             for chunk in range(nchunk))


def conv_direct(const real[:, :, :, :, ::1] src, const real[:, :, :, :, :, :] weights,
                const real[:, ::1] bias, real[:, :, :, :, ::1] dst,
                strides, dilations, pads_begin, int threads, Epilogue epilogue=None,
                int blocked_level=-1):
    """Dense or grouped convolution.

    src (N, ID, IH, IW, IC), weights (G, KD, KH, KW, ICg, OCgp), bias None or (G, OCgp)
    (padded like the weights), dst (N, OD, OH, OW, OC) with OC = G * OCg, written in full.
    ``epilogue``: post-ops applied to each block as it is finished (a sum reads dst's
    prior contents). ``blocked_level``: the level whose chunks of output channels the
    weights are blocked by (cl_geom.blocked, direct.prepare_weights), -1 for the packed
    layout; it must be the level this call runs at (``dense_chunks``).
    """
    cdef cl_geom g
    if not _fill_common(&g, src.shape, dst.shape, strides, dilations, pads_begin):
        return
    g.G = weights.shape[0]
    g.KD = weights.shape[1]
    g.KH = weights.shape[2]
    g.KW = weights.shape[3]
    g.ICg = weights.shape[4]
    g.OCgp = weights.shape[5]
    g.depthwise = 0
    g.cshift = 0
    if g.G < 1 or g.ICg * g.G != g.IC:
        raise ValueError(f"weights have G={g.G} groups of ICg={g.ICg} input channels; "
                         f"expected G * ICg == IC={g.IC} (src channels)")
    if g.OC % g.G:
        raise ValueError(f"dst has OC={g.OC} channels; expected a multiple of G={g.G}")
    g.OCg = g.OC // g.G
    if g.OCgp < g.OCg or g.OCgp != padded_channels(g.OCg, sizeof(real)):
        raise ValueError(f"weights' last axis is {g.OCgp}; expected OCg={g.OCg} padded to "
                         f"{padded_channels(g.OCg, sizeof(real))} (see prepare_weights)")
    _check_extents(&g)
    _row_strides(weights.shape, weights.strides, sizeof(real), &g.w_row, &g.w_group)
    cdef int level = cl_isa_in_effect
    cdef Py_ssize_t lanes, nvec
    if blocked_level >= 0:
        cl_dense_chunks(g.OCg, &level, sizeof(real), &lanes, &nvec)
        if level != blocked_level:
            raise ValueError(f"weights are blocked for level {ISA_NAMES[blocked_level]}; "
                             f"this call runs at {ISA_NAMES[level]}")
        if not weights.is_c_contig():
            raise ValueError("blocked weights must be C-contiguous")
        g.blocked = 1
    if bias is None:
        bias = _np.zeros((g.G, g.OCgp), dtype=_np.float32 if real is float else _np.float64)
    if bias.shape[0] != g.G or bias.shape[1] != g.OCgp:
        raise ValueError(f"bias has shape {tuple(bias.shape)[:2]}; expected ({g.G}, {g.OCgp})")

    if epilogue is not None:
        _attach_epilogue(&g, epilogue, _np.dtype(_np.float32 if real is float else _np.float64))

    # Padding taps read these instead of src.
    cdef real *zeros = <real *>calloc(g.KW * g.ICg, sizeof(real))
    if zeros == NULL:
        raise MemoryError("direct: no memory for the padding taps' zeros")
    g.zeros = zeros
    try:
        with nogil:
            _run_items(&g, &src[0, 0, 0, 0, 0], &weights[0, 0, 0, 0, 0, 0], &bias[0, 0],
                       &dst[0, 0, 0, 0, 0], threads)
    finally:
        free(zeros)


def conv_depthwise(const real[:, :, :, :, :] src, const real[:, :, :, ::1] weights,
                   const real[::1] bias, real[:, :, :, :, ::1] dst,
                   strides, dilations, pads_begin, int threads, Epilogue epilogue=None):
    """Depthwise convolution: groups == IC == OC, one input and one output channel each.

    src (N, ID, IH, IW, C), a view of the first C channels of a wider array allowed,
    weights (KD, KH, KW, Cp), bias None or (Cp,) (padded like the weights),
    dst (N, OD, OH, OW, C), written in full. ``epilogue``: post-ops applied to
    each block as it is finished, without a sum (see cl_geom.epi).
    """
    cdef cl_geom g
    if not _fill_common(&g, src.shape, dst.shape, strides, dilations, pads_begin):
        return
    g.KD = weights.shape[0]
    g.KH = weights.shape[1]
    g.KW = weights.shape[2]
    g.OCgp = weights.shape[3]
    g.G = g.IC
    g.ICg = 1
    g.OCg = 1
    g.depthwise = 1
    g.zeros = NULL
    g.ICs = _pixel_stride(src.shape, src.strides, sizeof(real))
    g.cshift = _aligned_channel(<size_t>&src[0, 0, 0, 0, 0], g.ICs, sizeof(real))
    if g.OC != g.IC:
        raise ValueError(f"dst has {g.OC} channels; a depthwise convolution needs as many "
                         f"as src ({g.IC})")
    if g.OCgp < g.G or g.OCgp != depthwise_padded_channels(g.G, sizeof(real)):
        raise ValueError(f"weights' last axis is {g.OCgp}; expected C={g.G} padded to "
                         f"{depthwise_padded_channels(g.G, sizeof(real))} (see prepare_weights)")
    _check_extents(&g)
    if bias is None:
        bias = _np.zeros(g.OCgp, dtype=_np.float32 if real is float else _np.float64)
    if bias.shape[0] != g.OCgp:
        raise ValueError(f"bias has shape ({bias.shape[0]},); expected ({g.OCgp},)")
    if epilogue is not None and epilogue.seeds_sum:
        raise ValueError("epilogue has a sum; the depthwise kernel fuses post-ops without one")
    _attach_epilogue(&g, epilogue, _np.dtype(_np.float32 if real is float else _np.float64))

    with nogil:
        _run_items(&g, &src[0, 0, 0, 0, 0], &weights[0, 0, 0, 0], &bias[0],
                   &dst[0, 0, 0, 0, 0], threads)


def plan_summary(Py_ssize_t n, input_shape, Py_ssize_t ic, kernel_shape, Py_ssize_t oc,
                 output_shape, Py_ssize_t groups, strides, dilations, pads_begin,
                 bint depthwise, Py_ssize_t itemsize, int threads):
    """How a call would be cut up (for explain output and tests): a dict of the plan."""
    cdef cl_geom g
    g.epi = NULL
    g.N = n
    g.ID, g.IH, g.IW = input_shape
    g.IC = ic
    g.OD, g.OH, g.OW = output_shape
    g.OC = oc
    g.KD, g.KH, g.KW = kernel_shape
    g.G = groups
    g.ICg = ic // groups
    g.OCg = oc // groups
    g.sd, g.sh, g.sw = strides
    g.dd, g.dh, g.dw = dilations
    g.pd, g.ph, g.pw = pads_begin
    g.depthwise = depthwise
    g.blocked = 0
    g.cshift = 0
    g.OCgp = (depthwise_padded_channels(g.G, itemsize) if depthwise
              else padded_channels(g.OCg, itemsize))
    cl_plan(&g, cl_isa_in_effect, threads if threads > 0 else 1, itemsize)
    return {"isa": ISA_NAMES[g.isa], "lanes": g.V,
            "vectors_per_block": cl_isa_jmax(g.isa, depthwise),
            "vectors": g.nvec, "chunks": g.nchunk,
            "segments": g.nseg, "segment_length": g.seglen, "chunk_groups": g.ncgroup,
            "input_channels_per_pass": g.icb if not depthwise else 1,
            "interior": (g.ow_lo, g.ow_hi),
            "items": g.nitems, "streamed_dst": bool(g.stream_dst),
            "prefetched_src": bool(g.prefetch_src),
            "whole_pixels": bool(g.whole_pixels),
            "chunks_per_item": g.item_chunks if not depthwise else 1,
            "weights_copied_per_pass": g.wpack_elems > 0}

