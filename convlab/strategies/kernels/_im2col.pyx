# cython: language_level=3
"""im2col: unfold input windows into column panels, multiply them by the weights with BLAS.

Arrays arrive flattened from the canonical layouts of :mod:`convlab.problem.params`:
src (N, I_1..I_r, IC), dst (N, O_1..O_r, OC), weights (G, K_1..K_r, IC/G, OC/G), all
C-contiguous. Row m of a panel is output position (n, o_1..o_r) in dst order; column
j = t*C + c is kernel tap t (row-major over K_1..K_r) and channel c:

    panel[m, t*C + c] = src[n, o*S + k(t)*D - P_b, c_off + c]     (0 outside the input)
    dst[m, g*OCg:(g+1)*OCg] = panel_g @ W_g + bias,    W_g = weights[g] as (K*ICg, OCg)

BLAS is column-major, and a row-major matrix read column-major is its transpose, so the
row-major product C = A @ B is the column-major call C^T = B^T A^T with no transposition
flags: gemm('N', 'N', m=columns of C, n=rows of C, k, B, A, C). The GEMM is a Fortran
sgemm/dgemm called without the GIL from inside OpenMP threads: SciPy's BLAS
(``scipy.linalg.cython_blas``) until :func:`use_gemm` installs another library's pair
(convlab.runtime.blas picks it).

The Python side (convlab.strategies.im2col) plans the work: which path, which thread
mode, rows per chunk and columns per reduction block, so that the panel buffers it
passes in (``work``) stay under the workspace limit. This file only computes.
"""
cimport cython
from cython.parallel cimport parallel, prange
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy, memset
from scipy.linalg.cython_blas cimport dgemm as scipy_dgemm, sgemm as scipy_sgemm

from convlab.strategies.kernels._epilogue cimport (Epilogue, cl_epilogue, cl_epi_apply_f32,
                                         cl_epi_apply_f64, cl_epi_prologue_f32,
                                         cl_epi_prologue_f64)
from convlab.strategies.kernels.isa_level cimport CL_X86_DISPATCH, cl_isa_in_effect, cl_isa_set_cap
from convlab.strategies.kernels.omp_shim cimport omp_get_thread_num


cdef extern from "im2col_omp.h" nogil:
    void im2col_barrier()
    int im2col_team_size()


cdef extern from "im2col_unfold.h" nogil:
    int im2col_unfold_level()
    void im2col_rows2d(const void *src, void *out, Py_ssize_t ld, Py_ssize_t m0,
                       Py_ssize_t m1, Py_ssize_t IH, Py_ssize_t IW, Py_ssize_t OH,
                       Py_ssize_t OW, Py_ssize_t KH, Py_ssize_t KW, Py_ssize_t SH,
                       Py_ssize_t SW, Py_ssize_t DH, Py_ssize_t DW, Py_ssize_t PH, Py_ssize_t PW,
                       Py_ssize_t IC, Py_ssize_t coff, Py_ssize_t C)


ctypedef fused real:
    float
    double


# The levels each part of this module has code for (convlab.runtime.cpu.kernel_isa_levels).
BUILT_ISA_LEVELS = {"im2col_unfold": tuple([0, 2] if CL_X86_DISPATCH else [0]),
                    "im2col_epilogue": tuple(range(3 if CL_X86_DISPATCH else 1))}


def isa_levels():
    """The level (0 baseline, 1 AVX2, 2 AVX-512) each part of this module runs at now."""
    return {"im2col_unfold": im2col_unfold_level(), "im2col_epilogue": cl_isa_in_effect}


def _set_isa_cap(int level):
    """Run at most ``level`` from now on (convlab.runtime.cpu calls it); returns the level in
    effect."""
    return cl_isa_set_cap(level)


from convlab.runtime import cpu as _cpu
_cpu.follow_cap(__name__, _set_isa_cap)


# The Fortran BLAS signatures, as scipy.linalg.cython_blas declares them.
ctypedef void (*sgemm_fn)(char *transa, char *transb, int *m, int *n, int *k, float *alpha,
                          float *a, int *lda, float *b, int *ldb, float *beta, float *c,
                          int *ldc) noexcept nogil
ctypedef void (*dgemm_fn)(char *transa, char *transb, int *m, int *n, int *k, double *alpha,
                          double *a, int *lda, double *b, int *ldb, double *beta, double *c,
                          int *ldc) noexcept nogil

cdef sgemm_fn sgemm = scipy_sgemm
cdef dgemm_fn dgemm = scipy_dgemm


def use_gemm(size_t sgemm_address=0, size_t dgemm_address=0):
    """Call the Fortran ``sgemm_``/``dgemm_`` at these addresses from now on (a BLAS
    library loaded by the caller, which keeps it loaded); 0, 0 restores SciPy's.

    Not while a convolution runs: the kernels read the pointers without a lock.
    """
    global sgemm, dgemm
    if (sgemm_address == 0) != (dgemm_address == 0):
        raise ValueError("use_gemm: expected both addresses, or neither (SciPy's BLAS)")
    if sgemm_address == 0:
        sgemm, dgemm = scipy_sgemm, scipy_dgemm
    else:
        sgemm, dgemm = <sgemm_fn>sgemm_address, <dgemm_fn>dgemm_address


cdef enum:
    # Where GEMM's left operand comes from.
    C_PATH_DIRECT = 0  # 1x1, stride 1, no pads: the src rows are the panel, read in place
    C_PATH_GATHER = 1  # 1x1 otherwise: gather src rows (every channel of a task's groups)
    C_PATH_UNFOLD = 2  # general: one panel per group, the reduction split into column blocks
    # How threads share the work.
    C_MODE_ROWS = 0  # tasks = row chunks x group blocks; own panel per thread, BLAS 1 thread
    C_MODE_COLS = 1  # one panel unfolded by all threads, then the GEMM split by output channels
    C_MODE_BLAS = 2  # panel unfolded by OpenMP threads, then one GEMM threaded by the BLAS

PATH_DIRECT, PATH_GATHER, PATH_UNFOLD = C_PATH_DIRECT, C_PATH_GATHER, C_PATH_UNFOLD
MODE_ROWS, MODE_COLS, MODE_BLAS = C_MODE_ROWS, C_MODE_COLS, C_MODE_BLAS


cdef enum:
    # Output-channel splits in COLS mode are rounded to whole 64-byte vectors of float32.
    OC_ALIGN = 16
    # Py_ssize_t elements per 64-byte cache line
    SCRATCH_LINE = 8


cdef struct Geom:
    Py_ssize_t r, N, IC, OC, G, ICg, OCg, Kt, P, M, W, src_batch
    Py_ssize_t k_last, dil_last  # kernel extent and dilation of the last spatial axis
    Py_ssize_t *in_shape
    Py_ssize_t *out_shape
    Py_ssize_t *strides
    Py_ssize_t *pads
    Py_ssize_t *sstride  # element stride of spatial axis a in src
    Py_ssize_t *kext     # (K_a - 1) * D_a: the last tap's offset on axis a
    Py_ssize_t *tap_kd   # Kt x r: k_a * D_a of tap t
    Py_ssize_t *tap_off  # Kt: src offset of tap t from its window's origin


cdef Py_ssize_t* make_geom(Geom* g, tuple in_shape, tuple out_shape, tuple kernel, tuple strides,
                           tuple dilations, tuple pads_begin, Py_ssize_t batch,
                           Py_ssize_t in_channels, Py_ssize_t out_channels,
                           Py_ssize_t groups) except NULL:
    """Fill ``g``; returns the one allocation that holds its arrays (free it)."""
    cdef Py_ssize_t r = len(in_shape), a, t, rem, k, kt = 1, p = 1, stride
    for a in range(r):
        kt *= <Py_ssize_t>kernel[a]
        p *= <Py_ssize_t>out_shape[a]
    cdef Py_ssize_t *mem = <Py_ssize_t*>malloc((6 * r + kt * r + kt + 1) * sizeof(Py_ssize_t))
    if mem == NULL:
        raise MemoryError("im2col: no memory for the kernel's tap tables")
    g.r, g.N, g.IC, g.OC, g.G = r, batch, in_channels, out_channels, groups
    g.ICg, g.OCg, g.Kt, g.P = in_channels // groups, out_channels // groups, kt, p
    g.M, g.W = batch * p, kt * (in_channels // groups)
    g.in_shape, g.out_shape, g.strides = mem, mem + r, mem + 2 * r
    g.pads, g.sstride, g.kext = mem + 3 * r, mem + 4 * r, mem + 5 * r
    g.tap_kd, g.tap_off = mem + 6 * r, mem + 6 * r + kt * r
    stride = in_channels
    for a in range(r - 1, -1, -1):
        g.in_shape[a] = in_shape[a]
        g.out_shape[a] = out_shape[a]
        g.strides[a] = strides[a]
        g.pads[a] = pads_begin[a]
        g.kext[a] = (<Py_ssize_t>kernel[a] - 1) * <Py_ssize_t>dilations[a]
        g.sstride[a] = stride
        stride *= g.in_shape[a]
    g.src_batch = stride
    g.k_last, g.dil_last = kernel[r - 1], dilations[r - 1]
    for t in range(kt):
        rem = t
        g.tap_off[t] = 0
        for a in range(r - 1, -1, -1):
            k = rem % <Py_ssize_t>kernel[a]
            rem //= <Py_ssize_t>kernel[a]
            g.tap_kd[t * r + a] = k * <Py_ssize_t>dilations[a]
            g.tap_off[t] += g.tap_kd[t * r + a] * g.sstride[a]
    return mem


cdef inline void copy_run(real* out, const real* src, Py_ssize_t n) noexcept nogil:
    # Channel runs are often a few elements (IC = 3, depthwise): a libc call costs more.
    cdef Py_ssize_t i
    if n >= 16:
        memcpy(out, src, n * sizeof(real))
    else:
        for i in range(n):
            out[i] = src[i]


cdef inline void put_run(real* out, const real* run_src, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i
    if run_src == NULL:
        if n >= 16:
            memset(out, 0, n * sizeof(real))
        else:
            for i in range(n):
                out[i] = 0
    else:
        copy_run(out, run_src, n)


@cython.cdivision(True)
cdef inline void unfold_row(const real* src, const Geom* g, Py_ssize_t off, const Py_ssize_t* base,
                            Py_ssize_t C, real* out) noexcept nogil:
    """One whole panel row (every tap) from the window at ``base``, ``off`` its src offset.

    The taps along the last axis are handled together: the in-range ones are found by
    arithmetic, and when that axis is dense and C spans every channel they are one
    contiguous run of src. Only the outer taps (the other axes) are walked one by one.
    """
    cdef Py_ssize_t r = g.r, last = g.r - 1, a, u, t, kw, x
    cdef Py_ssize_t kl = g.k_last, dl = g.dil_last, bl = base[last], il = g.in_shape[last]
    cdef Py_ssize_t lo = 0, hi = kl, outer = g.Kt // kl
    cdef bint valid
    if bl < 0:
        lo = (-bl + dl - 1) // dl
    if bl + g.kext[last] >= il:
        hi = (il - bl + dl - 1) // dl
    if lo > kl:
        lo = kl
    if hi < lo:
        hi = lo
    for u in range(outer):
        t = u * kl
        valid = lo < hi
        if valid:
            for a in range(last):
                x = base[a] + g.tap_kd[t * r + a]
                if x < 0 or x >= g.in_shape[a]:
                    valid = False
                    break
        if not valid:
            put_run(out, NULL, kl * C)
        else:
            if lo > 0:
                put_run(out, NULL, lo * C)
            if dl == 1 and C == g.IC:
                copy_run(out + lo * C, src + (off + g.tap_off[t + lo]), (hi - lo) * C)
            else:
                for kw in range(lo, hi):
                    copy_run(out + kw * C, src + (off + g.tap_off[t + kw]), C)
            if hi < kl:
                put_run(out + hi * C, NULL, (kl - hi) * C)
        out += kl * C


@cython.cdivision(True)
cdef inline void unfold_taps(const real* src, const Geom* g, Py_ssize_t off,
                             const Py_ssize_t* base, bint interior, Py_ssize_t C, Py_ssize_t j0,
                             Py_ssize_t j1, real* out) noexcept nogil:
    """Columns j0..j1 of one panel row, tap by tap (a block of a split reduction).

    Pieces adjacent in src are merged into one copy, pieces outside the input into one
    fill of zeros.
    """
    cdef Py_ssize_t r = g.r, a, t, x, c0, c1, run_len = 0
    cdef bint valid
    cdef const real *piece
    cdef const real *run_src = NULL
    for t in range(j0 // C, (j1 - 1) // C + 1):
        c0 = j0 - t * C
        if c0 < 0:
            c0 = 0
        c1 = j1 - t * C
        if c1 > C:
            c1 = C
        valid = True
        if not interior:
            for a in range(r):
                x = base[a] + g.tap_kd[t * r + a]
                if x < 0 or x >= g.in_shape[a]:
                    valid = False
                    break
        piece = NULL
        if valid:
            # off may be negative while some axis is in the padding; only valid taps form
            # a pointer, and those lie inside src.
            piece = src + (off + g.tap_off[t] + c0)
        if run_len > 0 and ((piece == NULL and run_src == NULL) or
                            (piece != NULL and run_src != NULL and
                             piece == run_src + run_len)):
            run_len += c1 - c0
            continue
        if run_len > 0:
            put_run(out, run_src, run_len)
            out += run_len
        run_src = piece
        run_len = c1 - c0
    if run_len > 0:
        put_run(out, run_src, run_len)


cdef void unfold(const real* src, const Geom* g, Py_ssize_t m0, Py_ssize_t m1, Py_ssize_t c_off,
                 Py_ssize_t C, Py_ssize_t j0, Py_ssize_t j1, real* buf,
                 Py_ssize_t* scratch) noexcept nogil:
    """Panel rows m0..m1, columns j0..j1 over channels c_off..c_off+C, into buf (ld j1-j0)."""
    cdef Py_ssize_t r = g.r, ld = j1 - j0
    cdef Py_ssize_t *o = scratch
    cdef Py_ssize_t *base = scratch + r
    cdef Py_ssize_t m, a, n, rem, off, b, u
    cdef bint interior, whole_rows = j0 == 0 and j1 == g.Kt * C
    cdef real *out
    if m1 <= m0:
        return
    if whole_rows and r == 2 and C == g.IC:
        # units of 4 bytes: sizeof(real) // 4 per element
        u = sizeof(real) // 4
        im2col_rows2d(src, buf, ld * u, m0, m1, g.in_shape[0], g.in_shape[1], g.out_shape[0],
                      g.out_shape[1], g.Kt // g.k_last, g.k_last, g.strides[0], g.strides[1],
                      g.kext[0] // (g.Kt // g.k_last - 1) if g.Kt > g.k_last else 1,
                      g.dil_last, g.pads[0], g.pads[1], g.IC * u, c_off * u, C * u)
        return
    n = m0 // g.P
    rem = m0 - n * g.P
    for a in range(r - 1, -1, -1):
        o[a] = rem % g.out_shape[a]
        rem = rem // g.out_shape[a]
    for m in range(m0, m1):
        out = buf + (m - m0) * ld
        # the window origin o*S - P_b on each axis, and its src offset
        off = n * g.src_batch + c_off
        interior = True
        for a in range(r):
            b = o[a] * g.strides[a] - g.pads[a]
            base[a] = b
            off += b * g.sstride[a]
            if b < 0 or b + g.kext[a] >= g.in_shape[a]:
                interior = False
        if whole_rows:
            unfold_row(src, g, off, base, C, out)
        else:
            unfold_taps(src, g, off, base, interior, C, j0, j1, out)
        # next output position in dst order
        a = r - 1
        o[a] += 1
        while o[a] == g.out_shape[a]:
            o[a] = 0
            if a == 0:
                n += 1
                break
            a -= 1
            o[a] += 1


cdef inline void gemm(real* c, Py_ssize_t ldc, const real* a, Py_ssize_t lda, const real* w,
                      Py_ssize_t ldw, Py_ssize_t rows, Py_ssize_t cols, Py_ssize_t depth,
                      bint accumulate) noexcept nogil:
    """Row-major c[rows, cols] (+)= a[rows, depth] @ w[depth, cols] (see the module doc)."""
    cdef char no = b'N'
    cdef int m = <int>cols, n = <int>rows, k = <int>depth
    cdef int lw = <int>ldw, la = <int>lda, lc = <int>ldc
    cdef float f_one = 1, f_beta = 1 if accumulate else 0
    cdef double d_one = 1, d_beta = 1 if accumulate else 0
    if rows <= 0 or cols <= 0:
        return
    if real is float:
        sgemm(&no, &no, &m, &n, &k, &f_one, <float*>w, &lw, <float*>a, &la, &f_beta, c, &lc)
    else:
        dgemm(&no, &no, &m, &n, &k, &d_one, <double*>w, &lw, <double*>a, &la, &d_beta, c, &lc)


cdef inline void zero_block(real* c, Py_ssize_t ldc, Py_ssize_t rows,
                            Py_ssize_t cols) noexcept nogil:
    cdef Py_ssize_t i
    for i in range(rows):
        memset(c + i * ldc, 0, cols * sizeof(real))


cdef struct RowRange:
    Py_ssize_t begin, end


cdef inline RowRange slab_rows(const Geom* g, Py_ssize_t slab, Py_ssize_t slabs, Py_ssize_t m0,
                               Py_ssize_t m1) noexcept nogil:
    """[begin, end): the rows of [m0, m1), all in one image, whose taps of kernel row
    ``slab`` on the first spatial axis land inside the input rather than in its padding.
    Returned by value: a result written through pointers to variables of the caller's
    parallel block would leave them shared between its threads."""
    cdef Py_ssize_t inner = g.P // g.out_shape[0], image = m0 // g.P * g.P
    # output o reads input o * stride + shift' where shift' = slab * dilation - pad
    cdef Py_ssize_t shift = g.pads[0] - slab * (g.kext[0] // (slabs - 1))
    cdef Py_ssize_t stride = g.strides[0], last = g.in_shape[0] - 1 + shift
    cdef Py_ssize_t lo = 0 if shift <= 0 else (shift + stride - 1) // stride
    cdef Py_ssize_t hi = 0 if last < 0 else min(last // stride + 1, g.out_shape[0])
    cdef RowRange rows
    rows.begin = max(m0, image + lo * inner)
    rows.end = max(rows.begin, min(m1, image + hi * inner))
    return rows


cdef inline void add_bias(real* c, Py_ssize_t ldc, const real* bias, Py_ssize_t rows,
                          Py_ssize_t cols) noexcept nogil:
    cdef Py_ssize_t i, j
    for i in range(rows):
        for j in range(cols):
            c[i * ldc + j] += bias[j]


cdef inline bint seeds(const cl_epilogue* e) noexcept nogil:
    """A fused sum: blocks start from scale * dst + bias, and every GEMM accumulates."""
    return e != NULL and e.seeds_sum


cdef inline void seed(const cl_epilogue* e, real* c, Py_ssize_t ldc, const real* bias,
                      Py_ssize_t c0, Py_ssize_t rows, Py_ssize_t cols) noexcept nogil:
    """Before a block's first GEMM (seeds(e)): c = scale * c + bias[c0:], read once."""
    cdef const real *b = NULL if bias == NULL else bias + c0
    if real is float:
        cl_epi_prologue_f32(e, c, ldc, rows, cols, b)
    else:
        cl_epi_prologue_f64(e, c, ldc, rows, cols, b)


cdef inline void finish(real* c, Py_ssize_t ldc, const real* bias, const cl_epilogue* e,
                        Py_ssize_t m0, Py_ssize_t c0, Py_ssize_t rows,
                        Py_ssize_t cols) noexcept nogil:
    """After a block's last GEMM: the bias (unless seeded), then the post-ops, on rows
    m0.. and channels c0.. of dst while the GEMM's output is still in cache."""
    if bias != NULL and not seeds(e):
        add_bias(c, ldc, bias + c0, rows, cols)
    if e != NULL and e.nops > 0:
        if real is float:
            cl_epi_apply_f32(e, c, ldc, rows, cols, m0, c0)
        else:
            cl_epi_apply_f64(e, c, ldc, rows, cols, m0, c0)


cdef void row_task(const real* src, const real* w, const real* bias, real* dst, const Geom* g,
                   int path, Py_ssize_t m0, Py_ssize_t m1, Py_ssize_t g0, Py_ssize_t g1,
                   Py_ssize_t cols_per_block, real* buf, Py_ssize_t* scratch,
                   const cl_epilogue* e) noexcept nogil:
    """Rows m0..m1 of dst for groups g0..g1, all output channels, on one thread."""
    cdef Py_ssize_t rows = m1 - m0, gi, jb, je, cu
    cdef Py_ssize_t ICg = g.ICg, OCg = g.OCg, W = g.W, OC = g.OC
    cdef real *out = dst + m0 * OC
    cdef bint summing = seeds(e)
    if summing:
        seed(e, out + g0 * OCg, OC, bias, g0 * OCg, rows, (g1 - g0) * OCg)
    if path == C_PATH_DIRECT:
        for gi in range(g0, g1):
            gemm(out + gi * OCg, OC, src + m0 * g.IC + gi * ICg, g.IC, w + gi * W * OCg, OCg,
                 rows, OCg, ICg, summing)
    elif path == C_PATH_GATHER:
        cu = (g1 - g0) * ICg
        unfold(src, g, m0, m1, g0 * ICg, cu, 0, cu, buf, scratch)
        for gi in range(g0, g1):
            gemm(out + gi * OCg, OC, buf + (gi - g0) * ICg, cu, w + gi * W * OCg, OCg,
                 rows, OCg, ICg, summing)
    else:
        for gi in range(g0, g1):
            jb = 0
            while jb < W:
                je = min(W, jb + cols_per_block)
                unfold(src, g, m0, m1, gi * ICg, ICg, jb, je, buf, scratch)
                gemm(out + gi * OCg, OC, buf, je - jb, w + (gi * W + jb) * OCg, OCg,
                     rows, OCg, je - jb, jb > 0 or summing)
                jb = je
    finish(out + g0 * OCg, OC, bias, e, m0, g0 * OCg, rows, (g1 - g0) * OCg)


cdef inline Py_ssize_t split_point(Py_ssize_t extent, Py_ssize_t part, Py_ssize_t parts,
                                   Py_ssize_t align) noexcept nogil:
    """Start of part ``part`` of ``parts`` over 0..extent, on a multiple of align."""
    cdef Py_ssize_t units = (extent + align - 1) // align
    cdef Py_ssize_t at = (units * part) // parts * align
    return extent if at > extent else at


cdef inline void numbered_row_task(const real* src, const real* w, const real* bias,
                                   real* dst, const Geom* g, int path, Py_ssize_t task,
                                   Py_ssize_t n_gblocks, Py_ssize_t rows_per_chunk,
                                   Py_ssize_t groups_per_task, Py_ssize_t cols_per_block,
                                   real* buf, Py_ssize_t* scratch,
                                   const cl_epilogue* e) noexcept nogil:
    """ROWS mode's task number ``task``: a chunk of rows for a block of groups."""
    cdef Py_ssize_t ci = task // n_gblocks
    cdef Py_ssize_t g0 = (task - ci * n_gblocks) * groups_per_task
    cdef Py_ssize_t m0 = ci * rows_per_chunk
    row_task(src, w, bias, dst, g, path, m0, min(g.M, m0 + rows_per_chunk), g0,
             min(g.G, g0 + groups_per_task), cols_per_block, buf, scratch, e)


def conv_im2col(const real[::1] src, const real[::1] weights, const real[::1] bias,
                real[::1] dst, real[::1] work, tuple in_shape, tuple out_shape, tuple kernel,
                tuple strides, tuple dilations, tuple pads_begin, Py_ssize_t batch,
                Py_ssize_t in_channels, Py_ssize_t out_channels, Py_ssize_t groups, int path,
                int mode, Py_ssize_t rows_per_chunk, Py_ssize_t groups_per_task,
                Py_ssize_t oc_blocks, Py_ssize_t cols_per_block, Py_ssize_t work_per_thread,
                int threads, Epilogue epilogue=None, Py_ssize_t tap_slabs=1):
    """dst = im2col(src) @ weights + bias, following a plan made by the caller.

    ``work`` holds ``threads * work_per_thread`` elements in ROWS mode (one panel per
    thread) and ``work_per_thread`` elements in COLS and BLAS mode (one shared panel).
    A panel holds rows_per_chunk rows of cols_per_block columns (GATHER: of every channel
    of a task's groups). COLS mode splits each group's output channels into oc_blocks
    blocks, which the threads take in turn. In BLAS mode the caller has set the BLAS
    thread count.

    The GEMM calls (their shapes and operands) depend on the plan only, never on the
    number of threads that share them, so the result does not depend on ``threads``.

    ``epilogue``: post-ops applied to each block of dst after its last GEMM; a sum
    among them seeds the block from dst's prior contents before its first GEMM.

    ``tap_slabs`` > 1 (COLS mode, UNFOLD path, one reduction block, chunks within one
    image; it must equal the kernel's extent on the first spatial axis): the GEMM goes
    slab by slab of that axis' taps, each over the rows whose taps of the slab read the
    input, so the rows of zeros the padding puts in the panel are not multiplied.
    """
    cdef Geom g
    cdef Py_ssize_t *mem = make_geom(&g, in_shape, out_shape, kernel, strides, dilations,
                                     pads_begin, batch, in_channels, out_channels, groups)
    cdef Py_ssize_t *scratch = NULL
    cdef void *scratch_mem = NULL
    # Each thread's window coordinates on cache lines of their own: they are written for
    # every panel row, and with two threads sharing one line, unfold took 23% of the
    # samples of a 2-thread ResNet-50 conv1 run (perf record over 1500 calls), 11.7% apart
    # (and one thread unfolded the same rows 2x faster than its share in that run).
    cdef Py_ssize_t scratch_step = (2 * g.r + SCRATCH_LINE - 1) // SCRATCH_LINE * SCRATCH_LINE
    cdef const real *sp = &src[0]
    cdef const real *wp = &weights[0]
    cdef const real *bp = NULL
    cdef real *dp = &dst[0]
    cdef real *wk = NULL
    cdef real *buf
    cdef Py_ssize_t *tscratch
    cdef Py_ssize_t n_chunks, n_gblocks, task, ci, m0, m1, rows, um0, um1
    cdef Py_ssize_t n0, n1, gi, jb, je, ld, cu, part, ob
    cdef real *cp
    cdef const real *w_blk
    cdef int tid = 0, team = 1
    cdef const cl_epilogue *ep = NULL
    cdef bint summing = False
    # Assigned inside the parallel blocks (so thread-private there); set here so that the
    # copies OpenMP makes on entry are initialised.
    buf, tscratch = NULL, NULL
    ci = m0 = m1 = rows = um0 = um1 = n0 = n1 = gi = jb = je = ld = ob = 0
    cp, w_blk = NULL, NULL
    if bias is not None:
        bp = &bias[0]
    if epilogue is not None:
        if epilogue.dtype.itemsize != sizeof(real):
            raise TypeError(f"epilogue is for {epilogue.dtype}; expected the dtype of dst")
        ep = &epilogue.c
        summing = seeds(ep)
    if work.shape[0] > 0:
        wk = &work[0]
    cdef Py_ssize_t slab, slab_w = 0
    cdef RowRange span
    try:
        if tap_slabs > 1:
            if (mode != C_MODE_COLS or path != C_PATH_UNFOLD or cols_per_block != g.W
                    or kernel[0] != tap_slabs or (g.N > 1 and g.P % rows_per_chunk)):
                raise ValueError(f"tap_slabs={tap_slabs} needs COLS mode on the unfold path, "
                                 f"one reduction block, chunks within one image and the "
                                 f"first kernel extent ({kernel[0]})")
            slab_w = g.W // tap_slabs
        scratch_mem = malloc((scratch_step * (threads + 1) + SCRATCH_LINE) * sizeof(Py_ssize_t))
        if scratch_mem == NULL:
            raise MemoryError("im2col: no memory for per-thread scratch")
        scratch = <Py_ssize_t*>((<size_t>scratch_mem + SCRATCH_LINE * sizeof(Py_ssize_t) - 1)
                                // (SCRATCH_LINE * sizeof(Py_ssize_t))
                                * (SCRATCH_LINE * sizeof(Py_ssize_t)))
        n_chunks = (g.M + rows_per_chunk - 1) // rows_per_chunk
        if mode == C_MODE_ROWS:
            n_gblocks = (g.G + groups_per_task - 1) // groups_per_task
            if threads == 1:
                # No OpenMP region: even a team of one ends in a barrier whose futex wake
                # is a system call. On a 4 -> 6 channel 10x10 layer the kernel took 3.4 us
                # with the region and 2.3 us without (AMD EPYC).
                with nogil:
                    for task in range(n_chunks * n_gblocks):
                        numbered_row_task(sp, wp, bp, dp, &g, path, task, n_gblocks,
                                          rows_per_chunk, groups_per_task, cols_per_block, wk,
                                          scratch, ep)
            else:
                with nogil, parallel(num_threads=threads):
                    tid = omp_get_thread_num()
                    buf = wk + tid * work_per_thread if wk != NULL else NULL
                    tscratch = scratch + scratch_step * tid
                    for task in prange(n_chunks * n_gblocks, schedule="dynamic"):
                        numbered_row_task(sp, wp, bp, dp, &g, path, task, n_gblocks,
                                          rows_per_chunk, groups_per_task, cols_per_block, buf,
                                          tscratch, ep)
        elif mode == C_MODE_COLS:
            with nogil, parallel(num_threads=threads):
                tid = omp_get_thread_num()
                team = im2col_team_size()
                tscratch = scratch + scratch_step * tid
                for ci in range(n_chunks):
                    m0 = ci * rows_per_chunk
                    m1 = min(g.M, m0 + rows_per_chunk)
                    rows = m1 - m0
                    um0 = m0 + rows * tid // team
                    um1 = m0 + rows * (tid + 1) // team
                    if path == C_PATH_GATHER:
                        unfold(sp, &g, um0, um1, 0, g.IC, 0, g.IC, wk + (um0 - m0) * g.IC,
                               tscratch)
                        im2col_barrier()
                    for gi in range(g.G):
                        jb = 0
                        while jb < g.W:
                            je = g.W if path != C_PATH_UNFOLD else min(g.W, jb + cols_per_block)
                            ld = je - jb
                            if path == C_PATH_UNFOLD:
                                unfold(sp, &g, um0, um1, gi * g.ICg, g.ICg, jb, je,
                                       wk + (um0 - m0) * ld, tscratch)
                                im2col_barrier()
                            ob = tid
                            while ob < oc_blocks:
                                n0 = split_point(g.OCg, ob, oc_blocks, OC_ALIGN)
                                n1 = split_point(g.OCg, ob + 1, oc_blocks, OC_ALIGN)
                                cp = dp + m0 * g.OC + gi * g.OCg + n0
                                w_blk = wp + (gi * g.W + jb) * g.OCg + n0
                                if summing and jb == 0:
                                    seed(ep, cp, g.OC, bp, gi * g.OCg + n0, rows, n1 - n0)
                                if path == C_PATH_DIRECT:
                                    gemm(cp, g.OC, sp + m0 * g.IC + gi * g.ICg, g.IC, w_blk,
                                         g.OCg, rows, n1 - n0, g.ICg, summing)
                                elif path == C_PATH_GATHER:
                                    gemm(cp, g.OC, wk + gi * g.ICg, g.IC, w_blk, g.OCg, rows,
                                         n1 - n0, g.ICg, summing)
                                elif tap_slabs > 1:
                                    if not summing:
                                        zero_block(cp, g.OC, rows, n1 - n0)
                                    for slab in range(tap_slabs):
                                        span = slab_rows(&g, slab, tap_slabs, m0, m1)
                                        if span.end > span.begin:
                                            gemm(cp + (span.begin - m0) * g.OC, g.OC,
                                                 wk + (span.begin - m0) * ld + slab * slab_w,
                                                 ld, w_blk + slab * slab_w * g.OCg, g.OCg,
                                                 span.end - span.begin, n1 - n0, slab_w, True)
                                else:
                                    gemm(cp, g.OC, wk, ld, w_blk, g.OCg, rows, n1 - n0, ld,
                                         jb > 0 or summing)
                                if je == g.W:
                                    finish(cp, g.OC, bp, ep, m0, gi * g.OCg + n0, rows,
                                           n1 - n0)
                                ob = ob + team
                            if path == C_PATH_UNFOLD:
                                im2col_barrier()
                            jb = je
                    if path == C_PATH_GATHER:
                        im2col_barrier()
        else:
            with nogil:
                for ci in range(n_chunks):
                    m0 = ci * rows_per_chunk
                    m1 = min(g.M, m0 + rows_per_chunk)
                    rows = m1 - m0
                    if summing:
                        for part in prange(threads, num_threads=threads, schedule="static"):
                            um0 = m0 + rows * part // threads
                            um1 = m0 + rows * (part + 1) // threads
                            seed(ep, dp + um0 * g.OC, g.OC, bp, 0, um1 - um0, g.OC)
                    if path == C_PATH_DIRECT:
                        for gi in range(g.G):
                            gemm(dp + m0 * g.OC + gi * g.OCg, g.OC, sp + m0 * g.IC + gi * g.ICg,
                                 g.IC, wp + gi * g.W * g.OCg, g.OCg, rows, g.OCg, g.ICg,
                                 summing)
                    elif path == C_PATH_GATHER:
                        for part in prange(threads, num_threads=threads, schedule="static"):
                            unfold(sp, &g, m0 + rows * part // threads,
                                   m0 + rows * (part + 1) // threads, 0, g.IC, 0, g.IC,
                                   wk + (rows * part // threads) * g.IC,
                                   scratch + scratch_step * part)
                        for gi in range(g.G):
                            gemm(dp + m0 * g.OC + gi * g.OCg, g.OC, wk + gi * g.ICg, g.IC,
                                 wp + gi * g.W * g.OCg, g.OCg, rows, g.OCg, g.ICg, summing)
                    else:
                        for gi in range(g.G):
                            jb = 0
                            while jb < g.W:
                                je = min(g.W, jb + cols_per_block)
                                ld = je - jb
                                for part in prange(threads, num_threads=threads,
                                                   schedule="static"):
                                    unfold(sp, &g, m0 + rows * part // threads,
                                           m0 + rows * (part + 1) // threads, gi * g.ICg,
                                           g.ICg, jb, je, wk + (rows * part // threads) * ld,
                                           scratch + scratch_step * part)
                                gemm(dp + m0 * g.OC + gi * g.OCg, g.OC, wk, ld,
                                     wp + (gi * g.W + jb) * g.OCg, g.OCg, rows, g.OCg, ld,
                                     jb > 0 or summing)
                                jb = je
                    if bp != NULL or ep != NULL:
                        # the BLAS threads are idle now: the kernel's threads finish the chunk
                        for part in prange(threads, num_threads=threads, schedule="static"):
                            um0 = m0 + rows * part // threads
                            um1 = m0 + rows * (part + 1) // threads
                            finish(dp + um0 * g.OC, g.OC, bp, ep, um0, 0, um1 - um0, g.OC)
    finally:
        free(scratch_mem)
        free(mem)


def unfold_panel(const real[::1] src, real[:, ::1] out, tuple in_shape, tuple out_shape,
                 tuple kernel, tuple strides, tuple dilations, tuple pads_begin,
                 Py_ssize_t batch, Py_ssize_t in_channels, Py_ssize_t groups, Py_ssize_t group,
                 Py_ssize_t first_row, Py_ssize_t first_col):
    """Rows first_row.. and columns first_col.. of group ``group``'s panel, into ``out``.

    The panel is (N * prod(O), prod(K) * IC/G); ``out``'s shape says how much of it.
    Serial; for teaching and tests (the convolution itself never materialises it whole).
    """
    cdef Geom g
    cdef Py_ssize_t *mem = make_geom(&g, in_shape, out_shape, kernel, strides, dilations,
                                     pads_begin, batch, in_channels, in_channels, groups)
    cdef Py_ssize_t *scratch = NULL
    cdef Py_ssize_t rows = out.shape[0], cols = out.shape[1]
    try:
        if not (0 <= first_row and first_row + rows <= g.M and 0 <= first_col
                and first_col + cols <= g.W and 0 <= group < g.G):
            raise ValueError(f"panel block rows {first_row}..{first_row + rows}, columns "
                             f"{first_col}..{first_col + cols} of group {group}: expected "
                             f"rows within 0..{g.M}, columns within 0..{g.W}, group < {g.G}")
        if rows == 0 or cols == 0:
            return
        scratch = <Py_ssize_t*>malloc(2 * g.r * sizeof(Py_ssize_t))
        if scratch == NULL:
            raise MemoryError("im2col: no memory for scratch")
        with nogil:
            unfold(&src[0], &g, first_row, first_row + rows, group * g.ICg, g.ICg, first_col,
                   first_col + cols, &out[0, 0], scratch)
    finally:
        free(scratch)
        free(mem)
