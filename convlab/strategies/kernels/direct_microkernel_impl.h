/* One instantiation of the direct microkernels. Included by direct_microkernel.h once per
 * (element type, ISA level), so there is no include guard. It expects:
 *   CL_REAL, CL_TYPE (f32/f64), CL_TGT (function attribute), CL_LEVEL (name suffix),
 *   CL_VBYTES, and for each kernel (dense, dw, dw3) a CL_*_PMAX_TABLE (largest P per J)
 *   and CL_*_SHAPES, the list of (P pixels, J vectors) shapes that get a fully unrolled
 *   copy. P * J accumulators must fit the vector registers with room for the J weight
 *   vectors (3 * J in dw3) and an input vector. CL_HAVE_DW3 0 leaves out the width-3
 *   row kernel (float64 does without it: it halves that kernel's share of the build). */

#define CL_SFX CL_CAT2(CL_TYPE, CL_LEVEL)
#define CL_FN(name) CL_CAT2(name, CL_SFX)

#ifndef CL_LINE_BYTES
#define CL_LINE_BYTES 64 /* a cache line: the unit non-temporal stores should fill */
#endif

#if CL_VECTOR_EXT
#define CL_V ((ptrdiff_t)(CL_VBYTES / sizeof(CL_REAL)))
typedef CL_REAL CL_FN(vec) __attribute__((vector_size(CL_VBYTES)));
/* Element-aligned, aliasing-safe view for loads and stores at any element address. */
typedef CL_REAL CL_FN(uvec)
    __attribute__((vector_size(CL_VBYTES), aligned(sizeof(CL_REAL)), __may_alias__));
#define CL_VEC CL_FN(vec)
#define CL_LOAD(p) (*(const CL_FN(uvec) *)(p))
#define CL_STORE(p, v) (*(CL_FN(uvec) *)(p) = (v))

/* x - 0 is x exactly (also for -0), so this folds to a single broadcast. */
static CL_AI CL_TGT CL_VEC CL_FN(bcast)(CL_REAL x) { return x - (CL_VEC){0}; }
#define CL_BCAST(x) CL_FN(bcast)(x)
#else
#define CL_V ((ptrdiff_t)1)
#define CL_VEC CL_REAL
#define CL_LOAD(p) (*(p))
#define CL_STORE(p, v) (*(p) = (v))
#define CL_BCAST(x) (x)
#endif

/* dense_body's step over input channel ic: J weight vectors times P broadcast inputs. */
#define CL_DENSE_STEP                                                                   \
    do {                                                                                \
        CL_VEC wv[4];                                                                   \
        CL_UNROLL for (j = 0; j < J; j++) wv[j] = CL_LOAD(wp + j * CL_V);               \
        CL_UNROLL for (p = 0; p < P; p++) {                                             \
            CL_VEC x = CL_BCAST(q[p][ic]);                                              \
            CL_UNROLL for (j = 0; j < J; j++) acc[p][j] += x * wv[j];                   \
        }                                                                               \
        wp += w_ic;                                                                     \
    } while (0)
/* Elements of a 64-byte cache line. */
#define CL_LINE ((ptrdiff_t)(64 / sizeof(CL_REAL)))

/* dense_body's and dense_flat_body's start: the accumulators from the bias, or from dst
 * (a->accumulate). A block whose channels run past the group's last output channel goes
 * through a tile: the lanes beyond nstore belong to another group or lie past the array. */
#define CL_DENSE_LOAD                                                                   \
    do {                                                                                \
        if (nstore < J * CL_V) {                                                        \
            dt = tile;                                                                  \
            dt_pix = J * CL_V;                                                          \
            for (p = 0; p < P; p++) {                                                   \
                if (a->accumulate)                                                      \
                    memcpy(tile + p * dt_pix, d + p * d_pix,                            \
                           (size_t)nstore * sizeof(CL_REAL));                           \
                memset(tile + p * dt_pix + nstore, 0,                                   \
                       (size_t)(dt_pix - nstore) * sizeof(CL_REAL));                    \
            }                                                                           \
        }                                                                               \
        if (a->accumulate) {                                                            \
            CL_UNROLL for (p = 0; p < P; p++) {                                         \
                CL_UNROLL for (j = 0; j < J; j++)                                       \
                    acc[p][j] = CL_LOAD(dt + p * dt_pix + j * CL_V);                    \
            }                                                                           \
        } else {                                                                        \
            const CL_REAL *bias_ = (const CL_REAL *)a->bias;                            \
            CL_UNROLL for (j = 0; j < J; j++) {                                         \
                CL_VEC b_ = CL_LOAD(bias_ + j * CL_V);                                  \
                CL_UNROLL for (p = 0; p < P; p++) acc[p][j] = b_;                       \
            }                                                                           \
        }                                                                               \
    } while (0)
/* ... and their end: the accumulators to dst (non-temporal where a->stream says so). */
#if CL_CAN_STREAM
#define CL_DENSE_STREAM                                                                 \
    if (a->stream) {                                                                    \
        CL_UNROLL for (p = 0; p < P; p++) {                                             \
            CL_UNROLL for (j = 0; j < J; j++)                                           \
                CL_CAT2(CL_CAT2(CL_STREAM, CL_TYPE), CL_VBYTES)(d + p * d_pix + j * CL_V, \
                                                                acc[p][j]);             \
        }                                                                               \
        return;                                                                         \
    }
#else
#define CL_DENSE_STREAM
#endif
#define CL_DENSE_STORE                                                                  \
    do {                                                                                \
        CL_DENSE_STREAM                                                                 \
        CL_UNROLL for (p = 0; p < P; p++) {                                             \
            CL_UNROLL for (j = 0; j < J; j++)                                           \
                CL_STORE(dt + p * dt_pix + j * CL_V, acc[p][j]);                        \
        }                                                                               \
        if (dt == tile) {                                                               \
            for (p = 0; p < P; p++)                                                     \
                memcpy(d + p * d_pix, tile + p * dt_pix, (size_t)nstore * sizeof(CL_REAL)); \
        }                                                                               \
    } while (0)

/* A block whose every pixel has all its taps inside the input, in one pass over all input
 * channels: one flat loop over the taps (cl_kargs.toff). A function of its own (see
 * dense_flat_call): inlined among dense_body's nested loops, the weight pointer of this
 * loop lived on the stack, a load and a store per step. */
static CL_AI CL_TGT void CL_FN(dense_flat_body)(const int P, const int J, const cl_kargs *a) {
    const CL_REAL *s = (const CL_REAL *)a->s;
    const CL_REAL *wp = (const CL_REAL *)a->w;
    CL_REAL *d = (CL_REAL *)a->d;
    const ptrdiff_t *toff = a->toff, ntoff = a->ntoff, w_ic = a->w_ic;
    const ptrdiff_t d_pix = a->d_pix, nstore = a->nstore;
    CL_VEC acc[12][4];
    CL_REAL tile[12 * 4 * (CL_VBYTES / sizeof(CL_REAL))];
    CL_REAL *dt = d;
    ptrdiff_t dt_pix = d_pix, t;
    const CL_REAL *sp[12];
    int p, j;

    CL_DENSE_LOAD;
    CL_UNROLL for (p = 0; p < P; p++) sp[p] = s + a->poff[p];
    for (t = 0; t < ntoff; t++) {
        const ptrdiff_t o = toff[t];
        CL_VEC wv[4];
        CL_UNROLL for (j = 0; j < J; j++) wv[j] = CL_LOAD(wp + j * CL_V);
        CL_UNROLL for (p = 0; p < P; p++) {
            CL_VEC x = CL_BCAST(sp[p][o]);
            CL_UNROLL for (j = 0; j < J; j++) acc[p][j] += x * wv[j];
        }
        wp += w_ic;
    }
    CL_DENSE_STORE;
}

/* P pixels x J vectors of output channels, summed over the taps and nic input channels
 * of one group; weights are vectors along the output channels. Each pixel reads through
 * its own pointer per tap, pointed at a zero row where the tap falls in the padding, so
 * pixels from different rows and the borders block together. Inlined with constant P
 * and J, the accumulators become registers. */
static CL_AI CL_TGT void CL_FN(dense_body)(const int P, const int J, const cl_kargs *a) {
    const CL_REAL *s = (const CL_REAL *)a->s;
    const CL_REAL *w = (const CL_REAL *)a->w;
    const CL_REAL *zero = (const CL_REAL *)a->zero;
    CL_REAL *d = (CL_REAL *)a->d;
    const ptrdiff_t *poff = a->poff, *pd0 = a->pd0, *ph0 = a->ph0, *pw0 = a->pw0;
    const ptrdiff_t s_kd = a->s_kd, s_kh = a->s_kh, s_kw = a->s_kw;
    const ptrdiff_t w_kd = a->w_kd, w_kh = a->w_kh, w_kw = a->w_kw, w_ic = a->w_ic;
    const ptrdiff_t nkd = a->nkd, nkh = a->nkh, nkw = a->nkw, nic = a->nic;
    const ptrdiff_t dd = a->dd, dh = a->dh, c_kw = a->c_kw;
    const size_t ID = (size_t)a->ID, IH = (size_t)a->IH, IW = (size_t)a->IW;
    const ptrdiff_t d_pix = a->d_pix, nstore = a->nstore;
    const int merge = a->merge;
    CL_VEC acc[12][4];
    CL_REAL tile[12 * 4 * (CL_VBYTES / sizeof(CL_REAL))];
    CL_REAL *dt = d;
    ptrdiff_t dt_pix = d_pix;
    ptrdiff_t kd, kh, kw, ic, ic0, kwl = 0, kwh = 0;
    const uintptr_t pf = (uintptr_t)a->pf;
    const size_t pf_pix = (size_t)a->pf_pix * sizeof(CL_REAL);
    int p, j;

    CL_DENSE_LOAD;
    /* With merge, the W taps [kwl, kwh) that are inside the input for every pixel of
     * the block are one contiguous run of src and weights (adjacent taps, the group
     * spans all channels): one loop of (kwh - kwl) * nic. The other taps go singly. */
    if (merge) {
        kwl = 0;
        kwh = nkw;
        CL_UNROLL for (p = 0; p < P; p++) {
            if (-pw0[p] > kwl) kwl = -pw0[p];
            if ((ptrdiff_t)IW - pw0[p] < kwh) kwh = (ptrdiff_t)IW - pw0[p];
        }
        if (kwh <= kwl) kwl = kwh = 0;
    }
    for (kd = 0; kd < nkd; kd++) {
        for (kh = 0; kh < nkh; kh++) {
            for (kw = 0; kw < nkw; kw++) {
                const CL_REAL *q[12];
                const CL_REAL *wp = w + kd * w_kd + kh * w_kh + kw * w_kw;
                const ptrdiff_t toff = kd * s_kd + kh * s_kh + kw * s_kw;
                const int run = kw == kwl && kwh > kwl;
                const ptrdiff_t n_ic = run ? (kwh - kwl) * nic : nic;
                int any = 0;
                CL_UNROLL for (p = 0; p < P; p++) {
                    const int inside = (size_t)(pd0[p] + kd * dd) < ID
                                       && (size_t)(ph0[p] + kh * dh) < IH
                                       && (run || (size_t)(pw0[p] + kw * c_kw) < IW);
                    q[p] = inside ? s + poff[p] + toff : zero;
                    any |= inside;
                }
                if (run) kw = kwh - 1;
                if (!any) continue;
                if (pf == 0) {
                    for (ic = 0; ic < n_ic; ic++) CL_DENSE_STEP;
                } else {
                    /* a line of each of the next block's pixels per line of this block's */
                    for (ic0 = 0; ic0 < n_ic; ic0 += CL_LINE) {
                        const ptrdiff_t ic1 = ic0 + CL_LINE < n_ic ? ic0 + CL_LINE : n_ic;
                        CL_UNROLL for (p = 0; p < P; p++)
                            CL_PREFETCH((const void *)(pf + p * pf_pix + ic0 * sizeof(CL_REAL)));
                        for (ic = ic0; ic < ic1; ic++) CL_DENSE_STEP;
                    }
                }
            }
        }
    }
    CL_DENSE_STORE;
}

/* P consecutive pixels of a pointwise geometry (one tap, stride 1, no pads, src as large
 * as dst: a 1x1 layer flattened to one row of pixels) x J vectors: pixel p reads src at
 * s + p * s_pix, so neither the block nor its call sets up per-pixel positions or tests
 * taps against the borders. The loop over input channels is dense_body's. That set-up
 * weighs where a block's reduction is short (at AVX2, 12 vector multiply-adds per input
 * channel): direct's kernel alone on ResNet-50's stride-1 1x1 layers, 2 threads, AMD EPYC
 * family 25 model 17, ran 1.04-1.19x faster without it at the avx2 cap and 1.01-1.11x at
 * avx512 (bench/direct_build_ab.py;
 * bench/results/direct_pointwise_blocks_2026-12-04_zen4-*.txt). */
static CL_AI CL_TGT void CL_FN(dense_pointwise_body)(const int P, const int J,
                                                     const cl_kargs *a) {
    const CL_REAL *s = (const CL_REAL *)a->s;
    const CL_REAL *wp = (const CL_REAL *)a->w;
    CL_REAL *d = (CL_REAL *)a->d;
    const ptrdiff_t s_pix = a->s_pix, w_ic = a->w_ic, n_ic = a->nic;
    const ptrdiff_t d_pix = a->d_pix, nstore = a->nstore;
    const uintptr_t pf = (uintptr_t)a->pf;
    const size_t pf_pix = (size_t)a->pf_pix * sizeof(CL_REAL);
    CL_VEC acc[12][4];
    CL_REAL tile[12 * 4 * (CL_VBYTES / sizeof(CL_REAL))];
    CL_REAL *dt = d;
    ptrdiff_t dt_pix = d_pix, ic, ic0;
    const CL_REAL *q[12];
    int p, j;

    CL_DENSE_LOAD;
    CL_UNROLL for (p = 0; p < P; p++) q[p] = s + p * s_pix;
    if (pf == 0) {
        for (ic = 0; ic < n_ic; ic++) CL_DENSE_STEP;
    } else {
        /* a line of each of the next block's pixels per line of this block's */
        for (ic0 = 0; ic0 < n_ic; ic0 += CL_LINE) {
            const ptrdiff_t ic1 = ic0 + CL_LINE < n_ic ? ic0 + CL_LINE : n_ic;
            CL_UNROLL for (p = 0; p < P; p++)
                CL_PREFETCH((const void *)(pf + p * pf_pix + ic0 * sizeof(CL_REAL)));
            for (ic = ic0; ic < ic1; ic++) CL_DENSE_STEP;
        }
    }
    CL_DENSE_STORE;
}

/* P pixels x J whole vectors of channels of a depthwise convolution (one input and one
 * output channel per group): channel c of dst reads only channel c of src. The taps come
 * as one flat table, so a 3x3 kernel is a single 9-iteration loop with no nested-loop
 * bookkeeping between taps. */
static CL_AI CL_TGT void CL_FN(dw_body)(const int P, const int J, const cl_kargs *a) {
    const CL_REAL *s = (const CL_REAL *)a->s;
    const CL_REAL *w = (const CL_REAL *)a->w;
    CL_REAL *d = (CL_REAL *)a->d;
    const ptrdiff_t *soff = a->soff, *woff = a->woff;
    const ptrdiff_t s_pix = a->s_pix, d_pix = a->d_pix, ntap = a->ntap;
    const CL_REAL *sp[12];
    CL_VEC acc[12][4];
    ptrdiff_t t;
    int p, j;

    if (a->accumulate) {
        CL_UNROLL for (p = 0; p < P; p++) {
            CL_UNROLL for (j = 0; j < J; j++) acc[p][j] = CL_LOAD(d + p * d_pix + j * CL_V);
        }
    } else {
        const CL_REAL *bias = (const CL_REAL *)a->bias;
        CL_UNROLL for (j = 0; j < J; j++) {
            CL_VEC b = CL_LOAD(bias + j * CL_V);
            CL_UNROLL for (p = 0; p < P; p++) acc[p][j] = b;
        }
    }
    /* One base pointer per pixel: the tap offset is then the index register and the
     * channel offsets are displacements, instead of P * J index registers. */
    CL_UNROLL for (p = 0; p < P; p++) sp[p] = s + p * s_pix;
    for (t = 0; t < ntap; t++) {
        const ptrdiff_t so = soff[t];
        const CL_REAL *wp = w + woff[t];
        CL_VEC wv[4];
        CL_UNROLL for (j = 0; j < J; j++) wv[j] = CL_LOAD(wp + j * CL_V);
        CL_UNROLL for (p = 0; p < P; p++) {
            CL_UNROLL for (j = 0; j < J; j++)
                acc[p][j] += CL_LOAD(sp[p] + so + j * CL_V) * wv[j];
        }
    }
    CL_UNROLL for (p = 0; p < P; p++) {
        CL_UNROLL for (j = 0; j < J; j++) CL_STORE(d + p * d_pix + j * CL_V, acc[p][j]);
    }
}

#if CL_HAVE_DW3
/* Depthwise rows of a width-3 kernel (dilation 1, stride SW = 1 or 2) for P interior
 * pixels: each input vector of a row is loaded once and feeds the (up to 3) output pixels
 * that read it, instead of once per tap. a->soff/woff list the (kd, kh) rows; a->s_kw is
 * the step between input pixels and a->w_kw between the weights of consecutive kw. */
static CL_AI CL_TGT void CL_FN(dw3_body)(const int P, const int J, const int SW,
                                         const cl_kargs *a) {
    const CL_REAL *s = (const CL_REAL *)a->s;
    const CL_REAL *w = (const CL_REAL *)a->w;
    CL_REAL *d = (CL_REAL *)a->d;
    const ptrdiff_t *soff = a->soff, *woff = a->woff;
    const ptrdiff_t s_in = a->s_kw, w_kw = a->w_kw, d_pix = a->d_pix, nrow = a->ntap;
    const int skip_first = a->skip_first, skip_last = a->skip_last;
    CL_VEC acc[16][2];
    ptrdiff_t r;
    int p, j, i, k;

    if (a->accumulate) {
        CL_UNROLL for (p = 0; p < P; p++) {
            CL_UNROLL for (j = 0; j < J; j++) acc[p][j] = CL_LOAD(d + p * d_pix + j * CL_V);
        }
    } else {
        const CL_REAL *bias = (const CL_REAL *)a->bias;
        CL_UNROLL for (j = 0; j < J; j++) {
            CL_VEC b = CL_LOAD(bias + j * CL_V);
            CL_UNROLL for (p = 0; p < P; p++) acc[p][j] = b;
        }
    }
    for (r = 0; r < nrow; r++) {
        const CL_REAL *q = s + soff[r];
        const CL_REAL *wp = w + woff[r];
        CL_VEC wk[3][2];
        CL_UNROLL for (k = 0; k < 3; k++) {
            CL_UNROLL for (j = 0; j < J; j++) wk[k][j] = CL_LOAD(wp + k * w_kw + j * CL_V);
        }
        CL_UNROLL for (i = 0; i < (P - 1) * SW + 3; i++) {
            CL_VEC x[2];
            /* A padding column adds nothing; only the first and last can be one. */
            if (i == 0 && skip_first) continue;
            if (i == (P - 1) * SW + 2 && skip_last) continue;
            CL_UNROLL for (j = 0; j < J; j++) x[j] = CL_LOAD(q + j * CL_V);
            q += s_in;
            /* input i feeds output p through tap k when i == p * SW + k */
            CL_UNROLL for (k = 0; k < 3; k++) {
                if (i - k >= 0 && (i - k) % SW == 0 && (i - k) / SW < P) {
                    CL_UNROLL for (j = 0; j < J; j++)
                        acc[(i - k) / SW][j] += x[j] * wk[k][j];
                }
            }
        }
    }
    CL_UNROLL for (p = 0; p < P; p++) {
        CL_UNROLL for (j = 0; j < J; j++) CL_STORE(d + p * d_pix + j * CL_V, acc[p][j]);
    }
}

#endif

/* Each compiled shape gets its own fully unrolled copy; any other shape (never planned)
 * still computes correctly through a generic copy. */
static CL_NOINLINE CL_TGT void CL_FN(dense_flat_call)(int P, int J, const cl_kargs *a) {
    switch (J * 16 + P) {
#define CL_CASE(P_, J_) case J_ * 16 + P_: CL_FN(dense_flat_body)(P_, J_, a); break;
        CL_DENSE_SHAPES(CL_CASE)
#undef CL_CASE
    default: CL_FN(dense_flat_body)(P, J, a); break;
    }
}

static CL_NOINLINE CL_TGT void CL_FN(dense_pointwise_call)(int P, int J, const cl_kargs *a) {
    switch (J * 16 + P) {
#define CL_CASE(P_, J_) case J_ * 16 + P_: CL_FN(dense_pointwise_body)(P_, J_, a); break;
        CL_DENSE_SHAPES(CL_CASE)
#undef CL_CASE
    default: CL_FN(dense_pointwise_body)(P, J, a); break;
    }
}

static CL_TGT void CL_FN(dense_call)(int P, int J, const cl_kargs *a) {
    if (a->toff != NULL) {
        CL_FN(dense_flat_call)(P, J, a);
        return;
    }
    if (a->s_pix > 0) {
        CL_FN(dense_pointwise_call)(P, J, a);
        return;
    }
    switch (J * 16 + P) {
#define CL_CASE(P_, J_) case J_ * 16 + P_: CL_FN(dense_body)(P_, J_, a); break;
        CL_DENSE_SHAPES(CL_CASE)
#undef CL_CASE
    default: CL_FN(dense_body)(P, J, a); break;
    }
}

static CL_TGT void CL_FN(dw_call)(int P, int J, const cl_kargs *a) {
    switch (J * 16 + P) {
#define CL_CASE(P_, J_) case J_ * 16 + P_: CL_FN(dw_body)(P_, J_, a); break;
        CL_DW_SHAPES(CL_CASE)
#undef CL_CASE
    default: CL_FN(dw_body)(P, J, a); break;
    }
}

#if CL_HAVE_DW3
static CL_TGT void CL_FN(dw3_call)(int P, int J, int SW, const cl_kargs *a) {
    if (SW == 1) {
        switch (J * 32 + P) {
#define CL_CASE(P_, J_) case J_ * 32 + P_: CL_FN(dw3_body)(P_, J_, 1, a); break;
            CL_DW3_SHAPES(CL_CASE)
#undef CL_CASE
        default: CL_FN(dw3_body)(P, J, 1, a); break;
        }
    } else {
        switch (J * 32 + P) {
#define CL_CASE(P_, J_) case J_ * 32 + P_: CL_FN(dw3_body)(P_, J_, 2, a); break;
            CL_DW3_SHAPES(CL_CASE)
#undef CL_CASE
        default: CL_FN(dw3_body)(P, J, 2, a); break;
        }
    }
}

#endif

/* Output columns [lo, hi) of the row, cut into near-equal blocks of at most pmax. */
#define CL_FOR_BLOCKS(lo, hi, pmax, ow, P, ...)                                       \
    do {                                                                              \
        ptrdiff_t width_ = (hi) - (lo);                                               \
        if (width_ > 0) {                                                             \
            ptrdiff_t nb_ = (width_ + (pmax) - 1) / (pmax);                           \
            ptrdiff_t small_ = width_ / nb_, big_ = width_ % nb_, b_;                 \
            ptrdiff_t ow = (lo);                                                      \
            for (b_ = 0; b_ < nb_; b_++) {                                            \
                int P = (int)(small_ + (b_ < big_));                                  \
                __VA_ARGS__;                                                          \
                ow += P;                                                              \
            }                                                                         \
        }                                                                             \
    } while (0)

/* The J vectors starting at vector v0 that chunk `chunk` of `nchunk` covers. */
static CL_AI void CL_FN(chunk_span)(ptrdiff_t nvec, ptrdiff_t nchunk, ptrdiff_t chunk,
                                    ptrdiff_t *v0, int *J) {
    ptrdiff_t small = nvec / nchunk, big = nvec % nchunk;
    *J = (int)(small + (chunk < big));
    *v0 = chunk * small + (chunk < big ? chunk : big);
}

/* The receptive fields of a block's P pixels, in the order of the flat list of taps
 * (kd, kh, kw, input channel), to patch: pixel p's nic * taps values from
 * patch + p * a->ntoff, zeros where a tap falls in the padding. A block with border pixels
 * then runs the flat loop over its patch instead of dense_body's nested loops, which set
 * up P pointers per tap (or run of W taps) and, with few input channels, spent longer on
 * that than on the arithmetic. */
static CL_AI void CL_FN(dense_gather)(const cl_geom *g, const cl_kargs *a, int P,
                                      CL_REAL *patch) {
    const CL_REAL *s = (const CL_REAL *)a->s;
    const ptrdiff_t nic = a->nic, row = g->KW * nic;
    ptrdiff_t kd, kh, kw, kwl, kwh, i;
    int p;
    for (p = 0; p < P; p++) {
        CL_REAL *to = patch + p * a->ntoff;
        /* the W taps inside the input, the same on every row of the pixel */
        cl_tap_range(a->pw0[p], a->c_kw, g->KW, g->IW, &kwl, &kwh);
        for (kd = 0; kd < g->KD; kd++) {
            const int d_in = (size_t)(a->pd0[p] + kd * a->dd) < (size_t)g->ID;
            for (kh = 0; kh < g->KH; kh++, to += row) {
                const CL_REAL *from;
                if (!d_in || (size_t)(a->ph0[p] + kh * a->dh) >= (size_t)g->IH
                    || kwh <= kwl) {
                    for (i = 0; i < row; i++) to[i] = 0;
                    continue;
                }
                for (i = 0; i < kwl * nic; i++) to[i] = 0;
                for (i = kwh * nic; i < row; i++) to[i] = 0;
                from = s + a->poff[p] + kd * a->s_kd + kh * a->s_kh + kwl * a->s_kw;
                if (a->merge) {
                    /* adjacent taps of every channel: one contiguous run of src */
                    for (i = 0; i < (kwh - kwl) * nic; i++) to[kwl * nic + i] = from[i];
                } else {
                    for (kw = kwl; kw < kwh; kw++, from += a->s_kw)
                        for (i = 0; i < nic; i++) to[kw * nic + i] = from[i];
                }
            }
        }
    }
}

/* Where the run of pixels that starts at flattened output pixel r0 ends (at most p1): at
 * the end of its row's interior columns (ow_lo <= ow < ow_hi) if it starts in them, else
 * at the start of the next interior columns. Interior blocks then never take a border
 * pixel, which would send the whole block through dense_body's nested loops instead of
 * the flat list of taps: with blocks running across rows, on ResNet-50 conv1 (7x7, pads
 * 3, stride 2) about one block in ten did. Rows too narrow to hold several blocks of
 * interior columns stay whole runs, so that blocks span rows (small images). */
static CL_AI ptrdiff_t CL_FN(dense_run_end)(const cl_geom *g, ptrdiff_t r0, ptrdiff_t p1,
                                            ptrdiff_t pmax) {
    ptrdiff_t ow, row, end;
    if ((g->ow_lo == 0 && g->ow_hi == g->OW) || g->ow_hi - g->ow_lo < 4 * pmax) return p1;
    ow = r0 % g->OW;
    row = r0 - ow;
    end = ow < g->ow_lo ? row + g->ow_lo : ow < g->ow_hi ? row + g->ow_hi
                                                        : row + g->OW + g->ow_lo;
    return end < p1 ? end : p1;
}

/* One dense item: a run of flattened output pixels of one image, for one chunk of output
 * channels of one group, in passes over icb input channels at a time. */
static CL_TGT void CL_FN(dense_item)(const cl_geom *g, const CL_REAL *src, const CL_REAL *w,
                                     const CL_REAL *bias, CL_REAL *dst, ptrdiff_t item,
                                     CL_REAL *pack) {
    static const int pmax_table[] = CL_DENSE_PMAX_TABLE;
    const ptrdiff_t IC = g->IC, IW = g->IW, OCgp = g->OCgp, ICg = g->ICg;
    const ptrdiff_t npix = g->OD * g->OH * g->OW;
    ptrdiff_t poff[12], pd0[12], ph0[12], pw0[12];
    ptrdiff_t toff[CL_FLAT_TAPS_CAP];
    /* border blocks of a flat item: their pixels' receptive fields (dense_gather), and the
     * flat list of taps over them, 0, 1, ... */
    CL_REAL patch[CL_PATCH_ELEMS];
    ptrdiff_t patch_toff[CL_FLAT_TAPS_CAP], patch_off[12];
    int patching;
    ptrdiff_t seg, n, chunk, grp, v0, oc0, p0, p1, ic0, r0, r1;
    /* the last input position a pixel's taps reach, from its tap 0, per axis */
    const ptrdiff_t reach_d = (g->KD - 1) * g->dd, reach_h = (g->KH - 1) * g->dh;
    const ptrdiff_t reach_w = (g->KW - 1) * g->dw;
    int flat;
    const int summing = g->epi != NULL && g->epi->seeds_sum;
    const int finishing = g->epi != NULL && g->epi->nops > 0;
    int J, pmax, stream;
    const CL_REAL *src_n, *w_g;
    ptrdiff_t w_row;
    CL_REAL *dst_n;
    cl_kargs a;

    /* chunks [chunk, chunk + nch) of the group: one, a copy group, or all of them
     * (whole_pixels); see cl_geom.item_chunks */
    const ptrdiff_t per_group = (g->nchunk + g->item_chunks - 1) / g->item_chunks;
    ptrdiff_t nch, width;
    ptrdiff_t ch, coc[CL_WHOLE_PIXEL_CHUNKS], cstore[CL_WHOLE_PIXEL_CHUNKS];
    int cJ[CL_WHOLE_PIXEL_CHUNKS], cstream[CL_WHOLE_PIXEL_CHUNKS];

    seg = item % g->nseg; item /= g->nseg;
    n = item % g->N; item /= g->N;
    chunk = item % per_group * g->item_chunks;
    grp = item / per_group;
    nch = g->nchunk - chunk < g->item_chunks ? g->nchunk - chunk : g->item_chunks;
    CL_FN(chunk_span)(g->nvec, g->nchunk, chunk, &v0, &J);
    oc0 = v0 * CL_V;
    /* the first chunk has the most vectors: blocks sized for it suit every chunk */
    pmax = pmax_table[J];
    p0 = seg * g->seglen;
    p1 = p0 + g->seglen < npix ? p0 + g->seglen : npix;

    a.s_kw = g->dw * IC;
    a.s_kh = g->dh * IW * IC;
    a.s_kd = g->dd * g->IH * IW * IC;
    a.nkd = g->KD;
    a.nkh = g->KH;
    a.dd = g->dd;
    a.dh = g->dh;
    a.c_kw = g->dw;
    a.ID = g->ID;
    a.IH = g->IH;
    a.IW = IW;
    a.poff = poff;
    a.pd0 = pd0;
    a.ph0 = ph0;
    a.pw0 = pw0;
    a.zero = g->zeros;
    /* a pointwise geometry's blocks read src pixel p for output pixel p
     * (dense_pointwise_body): s_pix > 0 marks them */
    a.s_pix = g->KD == 1 && g->KH == 1 && g->KW == 1 && g->sd == 1 && g->sh == 1
                      && g->sw == 1 && g->pd == 0 && g->ph == 0 && g->pw == 0
                      && g->ID == g->OD && g->IH == g->OH && IW == g->OW
                  ? IC : 0;
    a.bias = bias + grp * OCgp + oc0;
    a.d_pix = g->OC;
    a.nstore = g->OCg - oc0 < J * CL_V ? g->OCg - oc0 : J * CL_V;
    /* Consecutive W taps of one group are one contiguous run of src and of weights when
     * the group spans every channel, the taps are adjacent and one pass takes every
     * input channel (see dense_body). */
    a.merge = g->dw == 1 && ICg == IC && g->icb == ICg;
    /* Non-temporal stores take whole vectors at aligned addresses, and post-ops would
     * read the block straight back. They must also fill whole 64-byte lines: a line whose
     * halves are streamed by two pixels' stores leaves the write-combining buffer part
     * full, and with dst 32 bytes past a line (AVX2 vectors) VGG-19 conv1_1 ran 3.1 ms
     * against 1.25 ms (AMD EPYC, 2 threads). So pixel rows, chunks and their starts are
     * whole lines, or the stores are ordinary ones. */
    stream = g->stream_dst && !finishing && (g->OC * sizeof(CL_REAL)) % CL_LINE_BYTES == 0;
    for (ch = 0; ch < nch; ch++) {
        ptrdiff_t v;
        CL_FN(chunk_span)(g->nvec, g->nchunk, chunk + ch, &v, &cJ[ch]);
        coc[ch] = v * CL_V - oc0;  /* from the first chunk's first channel */
        cstore[ch] = g->OCg - v * CL_V < cJ[ch] * CL_V ? g->OCg - v * CL_V : cJ[ch] * CL_V;
        cstream[ch] = stream && cstore[ch] == cJ[ch] * CL_V
                      && (cJ[ch] * CL_VBYTES) % CL_LINE_BYTES == 0
                      && (size_t)(dst + n * npix * g->OC + grp * g->OCg + v * CL_V)
                         % CL_LINE_BYTES == 0;
    }
    /* the item's channels, from its first chunk's first to its last chunk's last vector */
    width = coc[nch - 1] + cJ[nch - 1] * CL_V;
    a.nkw = g->KW;
    a.pf = NULL;
    a.pf_pix = g->sw * IC;
    /* src of image n and group grp; pixel offsets are added only for inside taps */
    /* Interior blocks loop over one flat list of taps (cl_flat_max_taps): one pass over
     * every input channel, several taps, and short runs of adjacent W taps. */
    a.toff = NULL;
    a.ntoff = g->KD * g->KH * g->KW * ICg;
    flat = g->icb == ICg && a.ntoff > ICg && a.ntoff <= cl_flat_max_taps
           && a.ntoff <= CL_FLAT_TAPS_CAP && (a.merge ? g->KW * ICg : ICg) < cl_flat_max_run;
    if (flat) {
        ptrdiff_t kd, kh, kw, ic, t = 0;
        for (kd = 0; kd < g->KD; kd++)
            for (kh = 0; kh < g->KH; kh++)
                for (kw = 0; kw < g->KW; kw++)
                    for (ic = 0; ic < ICg; ic++)
                        toff[t++] = kd * a.s_kd + kh * a.s_kh + kw * a.s_kw + ic;
    }
    patching = flat && pmax * a.ntoff <= CL_PATCH_ELEMS;
    if (patching) {
        ptrdiff_t t;
        int p;
        for (t = 0; t < a.ntoff; t++) patch_toff[t] = t;
        for (p = 0; p < 12; p++) patch_off[p] = p * a.ntoff;
    }
    src_n = src + n * g->ID * g->IH * IW * IC + grp * ICg;
    /* rows of the weights this item reads: its chunk's block, or the group's rows */
    w_row = g->blocked ? J * CL_V : g->w_row;
    w_g = w + grp * g->w_group
          + (g->blocked ? v0 * CL_V * g->KD * g->KH * g->KW * ICg : oc0);
    dst_n = dst + n * npix * g->OC + grp * g->OCg + oc0;

    for (ic0 = 0; ic0 < ICg; ic0 += g->icb) {
        /* post-ops: a fused sum seeds each block before its first pass (the prior dst is
         * read there, once); the rest follow its last pass, while it is in L1 */
        const int seed = summing && ic0 == 0, finish = finishing && ic0 + g->icb >= ICg;
        a.nic = ICg - ic0 < g->icb ? ICg - ic0 : g->icb;
        a.s = src_n + ic0;
        if (pack != NULL && p1 - p0 > pmax) {
            /* several pixel blocks will read this pass's weights: copy the item's channels
             * of them contiguous, a row of `width` channels per (tap, input channel) */
            const ptrdiff_t taps = g->KD * g->KH * g->KW, rows = taps * a.nic;
            const ptrdiff_t ahead = cl_copy_prefetch_rows;
            ptrdiff_t t, ic, j, q = 0;
            for (t = 0; t < taps; t++) {
                const CL_REAL *from = w_g + (t * ICg + ic0) * w_row;
                CL_REAL *to = pack + t * a.nic * width;
                for (ic = 0; ic < a.nic; ic++, q++, from += w_row, to += width) {
                    if (ahead > 0 && q + ahead < rows) {
                        /* the row `ahead` rows on in (tap, input channel) order */
                        const CL_REAL *next = w_g + ((q + ahead) / a.nic * ICg + ic0
                                                     + (q + ahead) % a.nic) * w_row;
                        for (j = 0; j < width; j += CL_LINE_BYTES / (ptrdiff_t)sizeof(CL_REAL))
                            CL_PREFETCH(next + j);
                    }
                    for (j = 0; j < width; j += CL_V)
                        CL_STORE(to + j, CL_LOAD(from + j));
                }
            }
            a.w = pack;
            a.w_ic = width;
            a.w_kw = a.nic * width;
        } else {
            a.w = w_g + ic0 * w_row;
            a.w_ic = w_row;
            a.w_kw = ICg * w_row;
        }
        a.w_kh = g->KW * a.w_kw;
        a.w_kd = g->KH * a.w_kh;
        a.accumulate = ic0 > 0 || summing;
        for (r0 = p0; r0 < p1; r0 = r1) {
            r1 = CL_FN(dense_run_end)(g, r0, p1, pmax);
            CL_FOR_BLOCKS(r0, r1, pmax, pix, P, {
                if (a.s_pix > 0) {
                    /* the block's src starts at its first pixel; the next block's follows
                     * (it may lie past src: only prefetched, formed as an integer) */
                    a.s = src_n + ic0 + pix * IC;
                    a.pf = g->prefetch_src
                           ? (const void *)((uintptr_t)a.s
                                            + (size_t)(P * IC) * sizeof(CL_REAL))
                           : NULL;
                    a.toff = NULL;
                } else {
                    /* input position of tap 0 for each pixel of the block, stepping
                     * (od, oh, ow) */
                    ptrdiff_t ow = pix % g->OW, rest = pix / g->OW;
                    ptrdiff_t oh = rest % g->OH, od = rest / g->OH;
                    int p, inside = flat;
                    for (p = 0; p < P; p++) {
                        const ptrdiff_t id = od * g->sd - g->pd, ih = oh * g->sh - g->ph;
                        const ptrdiff_t iw = ow * g->sw - g->pw;
                        pd0[p] = id;
                        ph0[p] = ih;
                        pw0[p] = iw;
                        poff[p] = ((id * g->IH + ih) * IW + iw) * IC;
                        inside &= id >= 0 && id + reach_d < g->ID && ih >= 0
                                  && ih + reach_h < g->IH && iw >= 0 && iw + reach_w < IW;
                        if (++ow == g->OW) {
                            ow = 0;
                            if (++oh == g->OH) {
                                oh = 0;
                                od++;
                            }
                        }
                    }
                    /* (od, oh, ow) is now the next block's first pixel (1x1, no pads). It
                     * may lie past this image, or past src: only prefetched, so the address
                     * is formed as an integer. */
                    a.pf = g->prefetch_src
                           ? (const void *)((uintptr_t)a.s
                                            + (size_t)(((od * g->sd * g->IH + oh * g->sh) * IW
                                                        + ow * g->sw) * IC) * sizeof(CL_REAL))
                           : NULL;
                    a.toff = inside ? toff : NULL;
                    if (!inside && patching) {
                        /* flat items run every pass at once: a.s is src_n (see flat) */
                        CL_FN(dense_gather)(g, &a, P, patch);
                        a.s = patch;
                        a.poff = patch_off;
                        a.toff = patch_toff;
                    }
                }
                {
                    const CL_REAL *w_pass = (const CL_REAL *)a.w;
                    for (ch = 0; ch < nch; ch++) {
                        /* a chunk's weights are columns of the pass's rows, copied or
                         * in place */
                        a.w = w_pass + coc[ch];
                        a.bias = bias + grp * OCgp + oc0 + coc[ch];
                        a.nstore = cstore[ch];
                        /* the last pass writes the block for good */
                        a.stream = cstream[ch] && ic0 + g->icb >= ICg;
                        a.d = dst_n + pix * g->OC + coc[ch];
                        if (seed)
                            CL_CAT2(cl_epi_prologue, CL_TYPE)(g->epi, (CL_REAL *)a.d, g->OC, P,
                                                              a.nstore, (const CL_REAL *)a.bias);
                        CL_FN(dense_call)(P, cJ[ch], &a);
                        if (finish)
                            CL_CAT2(cl_epi_apply, CL_TYPE)(g->epi, (CL_REAL *)a.d, g->OC, P,
                                                           a.nstore, n * npix + pix,
                                                           grp * g->OCg + oc0 + coc[ch]);
                    }
                    a.w = w_pass;
                }
                a.s = src_n + ic0;
                a.poff = poff;
            });
        }
    }
#if CL_CAN_STREAM
    /* non-temporal stores are weakly ordered: drain them before the item counts as done */
    if (stream) _mm_sfence();
#endif
}

/* Channels [c0, G) of a depthwise row segment that do not fill a vector: plain loops. */
static CL_TGT void CL_FN(dw_tail)(const cl_geom *g, const CL_REAL *src, const CL_REAL *w,
                                  const CL_REAL *bias, CL_REAL *dst, ptrdiff_t n,
                                  ptrdiff_t od, ptrdiff_t oh, ptrdiff_t ow0, ptrdiff_t ow1,
                                  ptrdiff_t c0) {
    const ptrdiff_t IC = g->ICs, Gp = g->OCgp;
    ptrdiff_t kdl, kdh, khl, khh, id0, ih0, ow, c, kd, kh, kw;
    id0 = od * g->sd - g->pd;
    ih0 = oh * g->sh - g->ph;
    cl_tap_range(id0, g->dd, g->KD, g->ID, &kdl, &kdh);
    cl_tap_range(ih0, g->dh, g->KH, g->IH, &khl, &khh);
    for (ow = ow0; ow < ow1; ow++) {
        ptrdiff_t iw0 = ow * g->sw - g->pw, kwl, kwh;
        CL_REAL *d = dst + (((n * g->OD + od) * g->OH + oh) * g->OW + ow) * g->OC;
        cl_tap_range(iw0, g->dw, g->KW, g->IW, &kwl, &kwh);
        for (c = c0; c < g->G; c++) {
            CL_REAL sum = bias[c];
            for (kd = kdl; kd < kdh; kd++)
                for (kh = khl; kh < khh; kh++)
                    for (kw = kwl; kw < kwh; kw++) {
                        ptrdiff_t id = id0 + kd * g->dd, ih = ih0 + kh * g->dh;
                        ptrdiff_t iw = iw0 + kw * g->dw;
                        sum += src[(((n * g->ID + id) * g->IH + ih) * g->IW + iw) * IC + c]
                               * w[((kd * g->KH + kh) * g->KW + kw) * Gp + c];
                    }
            d[c] = sum;
        }
    }
}

/* Depthwise taps: the box kd in [kdl, kdh) x kh in [khl, khh) x kw in [kwl, kwh), as
 * src and weight offsets from its first tap. */
typedef struct {
    ptrdiff_t kdl, kdh, khl, khh, kwl, kwh, count;
} CL_FN(tapbox);

/* Fill soff/woff with the taps start, start + 1, ... of the box (at most CL_TAP_BATCH);
 * returns how many. */
static CL_AI ptrdiff_t CL_FN(dw_table)(const cl_geom *g, const CL_FN(tapbox) *box,
                                       ptrdiff_t start, ptrdiff_t *soff, ptrdiff_t *woff) {
    const ptrdiff_t s_kw = g->dw * g->ICs, s_kh = g->dh * g->IW * g->ICs;
    const ptrdiff_t s_kd = g->dd * g->IH * g->IW * g->ICs, Gp = g->OCgp;
    ptrdiff_t kd, kh, kw, i = 0, n = 0;
    for (kd = 0; kd < box->kdh - box->kdl; kd++)
        for (kh = 0; kh < box->khh - box->khl; kh++)
            for (kw = 0; kw < box->kwh - box->kwl; kw++, i++) {
                if (i < start) continue;
                if (n == CL_TAP_BATCH) return n;
                soff[n] = kd * s_kd + kh * s_kh + kw * s_kw;
                woff[n] = ((kd * g->KH + kh) * g->KW + kw) * Gp;
                n++;
            }
    return n;
}

/* One block of P pixels whose first pixel's input position (tap 0) is at src offset
 * base (which may lie outside src: pads), over the taps of box. */
static CL_AI CL_TGT void CL_FN(dw_block)(const cl_geom *g, cl_kargs *a, int P, int J,
                                         const CL_REAL *src, ptrdiff_t base,
                                         const CL_REAL *w, const CL_FN(tapbox) *box,
                                         ptrdiff_t *soff, ptrdiff_t *woff, int table_ready) {
    ptrdiff_t start;
    if (box->count == 0) {
        a->s = src;
        a->w = w;
        a->ntap = 0;
        a->accumulate = 0;
        CL_FN(dw_call)(P, J, a);
        return;
    }
    /* Pointers are formed from the first valid tap, so they stay inside the arrays. */
    a->s = src + base + box->kdl * g->dd * g->IH * g->IW * g->ICs
           + box->khl * g->dh * g->IW * g->ICs + box->kwl * g->dw * g->ICs;
    a->w = w + ((box->kdl * g->KH + box->khl) * g->KW + box->kwl) * g->OCgp;
    a->soff = soff;
    a->woff = woff;
    for (start = 0; start < box->count; start += CL_TAP_BATCH) {
        a->ntap = table_ready ? box->count : CL_FN(dw_table)(g, box, start, soff, woff);
        a->accumulate = start > 0;
        CL_FN(dw_call)(P, J, a);
    }
}

#if CL_HAVE_DW3
/* Fill soff/woff with the (kd, kh) rows start, start + 1, ... of the box (kw = 0), at
 * most CL_TAP_BATCH; returns how many. */
static CL_AI ptrdiff_t CL_FN(dw3_table)(const cl_geom *g, const CL_FN(tapbox) *box,
                                        ptrdiff_t start, ptrdiff_t *soff, ptrdiff_t *woff) {
    const ptrdiff_t s_kh = g->dh * g->IW * g->ICs, s_kd = g->dd * g->IH * g->IW * g->ICs;
    ptrdiff_t kd, kh, i = 0, n = 0;
    for (kd = 0; kd < box->kdh - box->kdl; kd++)
        for (kh = 0; kh < box->khh - box->khl; kh++, i++) {
            if (i < start) continue;
            if (n == CL_TAP_BATCH) return n;
            soff[n] = kd * s_kd + kh * s_kh;
            woff[n] = (kd * g->KH + kh) * g->KW * g->OCgp;
            n++;
        }
    return n;
}

/* P interior pixels through the width-3 row kernel; like dw_block otherwise. */
static CL_AI CL_TGT void CL_FN(dw3_block)(const cl_geom *g, cl_kargs *a, int P, int J,
                                          const CL_REAL *src, ptrdiff_t base,
                                          const CL_REAL *w, const CL_FN(tapbox) *box,
                                          ptrdiff_t *soff, ptrdiff_t *woff, int table_ready) {
    const ptrdiff_t rows = (box->kdh - box->kdl) * (box->khh - box->khl);
    ptrdiff_t start;
    a->s = src + base + box->kdl * g->dd * g->IH * g->IW * g->ICs
           + box->khl * g->dh * g->IW * g->ICs;
    a->w = w + (box->kdl * g->KH + box->khl) * g->KW * g->OCgp;
    a->soff = soff;
    a->woff = woff;
    for (start = 0; start < rows; start += CL_TAP_BATCH) {
        a->ntap = table_ready ? rows : CL_FN(dw3_table)(g, box, start, soff, woff);
        a->accumulate = start > 0;
        CL_FN(dw3_call)(P, J, (int)g->sw, a);
    }
}

#else
/* Never called without the row kernel (rows3 is then 0); they keep dw_item one text. */
static CL_AI ptrdiff_t CL_FN(dw3_table)(const cl_geom *g, const CL_FN(tapbox) *box,
                                        ptrdiff_t start, ptrdiff_t *soff, ptrdiff_t *woff) {
    (void)g; (void)box; (void)start; (void)soff; (void)woff;
    return 0;
}

static CL_AI void CL_FN(dw3_block)(const cl_geom *g, cl_kargs *a, int P, int J,
                                   const CL_REAL *src, ptrdiff_t base, const CL_REAL *w,
                                   const CL_FN(tapbox) *box, ptrdiff_t *soff, ptrdiff_t *woff,
                                   int table_ready) {
    (void)g; (void)a; (void)P; (void)J; (void)src; (void)base; (void)w; (void)box;
    (void)soff; (void)woff; (void)table_ready;
}
#endif

/* One depthwise item: a row segment, over the channel chunks of its chunk group. The
 * chunk loop is innermost, so the tap tables are built once per pixel block and each
 * block sweeps its pixels' channels in address order. */
static CL_TGT void CL_FN(dw_item)(const cl_geom *g, const CL_REAL *src, const CL_REAL *w,
                                  const CL_REAL *bias, CL_REAL *dst, ptrdiff_t item) {
    static const int pmax_table[] = CL_DW_PMAX_TABLE;
    static const int pmax3_table[] = CL_DW3_PMAX_TABLE;
    const ptrdiff_t IC = g->ICs, IW = g->IW, OC = g->OC;
    ptrdiff_t soff[CL_TAP_BATCH], woff[CL_TAP_BATCH];
    ptrdiff_t cg, seg, oh, od, n, ch0, ch1, small, big, id0, ih0, row_base;
    ptrdiff_t ow0, ow1, lo, hi, ow, ch, v0;
    ptrdiff_t row0;         /* output row of (n, od, oh, 0): the epilogue's row index */
    int pmax, table_ready, rows3, J, run_head, run_tail;
    const int finishing = g->epi != NULL && g->epi->nops > 0;
    CL_FN(tapbox) box;
    CL_REAL *drow;
    cl_kargs a;

    cg = item % g->ncgroup; item /= g->ncgroup;
    seg = item % g->nseg; item /= g->nseg;
    oh = item % g->OH; item /= g->OH;
    od = item % g->OD;
    n = item / g->OD;
    ow0 = seg * g->seglen;
    ow1 = ow0 + g->seglen < g->OW ? ow0 + g->seglen : g->OW;
    row0 = ((n * g->OD + od) * g->OH + oh) * g->OW;
    if (g->nvec == 0 && !g->head && !g->tail) {
        CL_FN(dw_tail)(g, src, w, bias, dst, n, od, oh, ow0, ow1, 0);
        if (finishing)
            CL_CAT2(cl_epi_apply, CL_TYPE)(g->epi, dst + row0 * OC + ow0 * OC, OC, ow1 - ow0,
                                           g->G, row0 + ow0, 0);
        return;
    }
    /* chunks [ch0, ch1) of this group */
    small = g->nchunk / g->ncgroup;
    big = g->nchunk % g->ncgroup;
    ch0 = cg * small + (cg < big ? cg : big);
    ch1 = ch0 + small + (cg < big);
    if (ch0 >= ch1) return;
    /* vectors per chunk: J = small + (chunk < big) */
    small = g->nvec / g->nchunk;
    big = g->nvec % g->nchunk;
    /* the head vector goes with the first chunk, the tail with the last: overlapping
     * vectors then always belong to the same item, so no two threads write a channel */
    run_head = ch0 == 0 && g->head;
    run_tail = ch1 == g->nchunk && g->tail;

    id0 = od * g->sd - g->pd;
    ih0 = oh * g->sh - g->ph;
    cl_tap_range(id0, g->dd, g->KD, g->ID, &box.kdl, &box.kdh);
    cl_tap_range(ih0, g->dh, g->KH, g->IH, &box.khl, &box.khh);

    a.s_pix = g->sw * IC;
    a.d_pix = OC;
    /* Offset of input position (n, id0, ih0, 0, channel 0), possibly outside src. */
    row_base = (((n * g->ID + id0) * g->IH + ih0) * IW) * IC;
    drow = dst + ((n * g->OD + od) * g->OH + oh) * g->OW * OC;

    /* Runs of J vectors starting at channel c0: the head, the chunks, the tail. */
#define CL_FOR_CHUNKS(...)                                                            \
    for (ch = ch0 - 1, v0 = ch0 * small + (ch0 < big ? ch0 : big); ch <= ch1; ch++) { \
        ptrdiff_t c0;                                                                 \
        if (ch < ch0 || ch == ch1) {                                                  \
            if (ch < ch0 ? !run_head : !run_tail) continue;                           \
            c0 = ch < ch0 ? 0 : g->G - CL_V;                                          \
            J = 1;                                                                    \
        } else {                                                                      \
            J = (int)(small + (ch < big));                                            \
            c0 = g->cshift + v0 * CL_V;                                               \
            v0 += J;                                                                  \
            if (J == 0) continue;                                                     \
        }                                                                             \
        a.bias = bias + c0;                                                           \
        a.nstore = J * CL_V;                                                          \
        __VA_ARGS__;                                                                  \
    }

    rows3 = CL_HAVE_DW3 && g->KW == 3 && g->dw == 1 && (g->sw == 1 || g->sw == 2)
            && box.kdh > box.kdl && box.khh > box.khl;
    if (rows3) {
        /* The row kernel also takes the columns whose first or last tap falls in a
         * padding column of width one: with pads <= 1 that is the whole row. */
        lo = g->pw - 1 > 0 ? cl_ceildiv(g->pw - 1, g->sw) : 0;
        hi = cl_floordiv(IW - 2 + g->pw, g->sw) + 1;
    } else {
        lo = g->ow_lo;
        hi = g->ow_hi;
    }
    lo = lo < ow0 ? ow0 : lo > ow1 ? ow1 : lo;
    hi = hi > ow1 ? ow1 : hi < lo ? lo : hi;
    /* Border columns, one at a time with their own W tap range. */
    for (ow = ow0; ow < ow1; ow++) {
        ptrdiff_t iw0;
        if (ow == lo) ow = hi;
        if (ow >= ow1) break;
        iw0 = ow * g->sw - g->pw;
        cl_tap_range(iw0, g->dw, g->KW, IW, &box.kwl, &box.kwh);
        box.count = (box.kdh - box.kdl) * (box.khh - box.khl) * (box.kwh - box.kwl);
        table_ready = box.count <= CL_TAP_BATCH;
        if (table_ready && box.count > 0) CL_FN(dw_table)(g, &box, 0, soff, woff);
        CL_FOR_CHUNKS({
            a.d = drow + ow * OC + c0;
            CL_FN(dw_block)(g, &a, 1, J, src, row_base + iw0 * IC + c0, w + c0, &box,
                            soff, woff, table_ready);
            if (finishing)
                CL_CAT2(cl_epi_apply, CL_TYPE)(g->epi, (CL_REAL *)a.d, OC, 1, a.nstore,
                                               row0 + ow, c0);
        })
    }
    /* The other columns share one tap table. */
    box.kwl = 0;
    box.kwh = g->KW;
    box.count = (box.kdh - box.kdl) * (box.khh - box.khl) * g->KW;
    if (rows3) {
        table_ready = box.count / 3 <= CL_TAP_BATCH;
        if (table_ready) CL_FN(dw3_table)(g, &box, 0, soff, woff);
        a.s_kw = IC;
        a.w_kw = g->OCgp;
    } else {
        table_ready = box.count <= CL_TAP_BATCH;
        if (table_ready && box.count > 0) CL_FN(dw_table)(g, &box, 0, soff, woff);
    }
    /* Blocks are sized for the chunks' J, which differs by at most one between chunks:
     * size them for the larger, which every compiled shape table covers. */
    J = (int)(small + (big > 0));
    if (J == 0) J = 1;
    pmax = rows3 ? pmax3_table[J] : pmax_table[J];
    CL_FOR_BLOCKS(lo, hi, pmax, ow, P, {
        const ptrdiff_t iw0 = ow * g->sw - g->pw;
        if (rows3) {
            a.skip_first = iw0 < 0;
            a.skip_last = (ow + P - 1) * g->sw - g->pw + 2 >= IW;
        }
        CL_FOR_CHUNKS({
            a.d = drow + ow * OC + c0;
            if (rows3)
                CL_FN(dw3_block)(g, &a, P, J, src, row_base + (iw0 + a.skip_first) * IC + c0,
                                 w + c0, &box, soff, woff, table_ready);
            else
                CL_FN(dw_block)(g, &a, P, J, src, row_base + iw0 * IC + c0, w + c0, &box,
                                soff, woff, table_ready);
            if (finishing)
                CL_CAT2(cl_epi_apply, CL_TYPE)(g->epi, (CL_REAL *)a.d, OC, P, a.nstore,
                                               row0 + ow, c0);
        })
    });
#undef CL_FOR_CHUNKS
}

static void CL_CAT2(cl_item, CL_SFX)(const cl_geom *g, const CL_REAL *src, const CL_REAL *w,
                                     const CL_REAL *bias, CL_REAL *dst, ptrdiff_t item,
                                     ptrdiff_t tid) {
    if (g->depthwise)
        CL_FN(dw_item)(g, src, w, bias, dst, item);
    else
        CL_FN(dense_item)(g, src, w, bias, dst, item,
                          g->wpack_elems > 0 && g->wpack != NULL
                              ? (CL_REAL *)g->wpack + tid * g->wpack_elems : NULL);
}

#undef CL_DENSE_STEP
#undef CL_DENSE_LOAD
#undef CL_DENSE_STREAM
#undef CL_DENSE_STORE
#undef CL_LINE
#undef CL_SFX
#undef CL_FN
#undef CL_V
#undef CL_VEC
#undef CL_LOAD
#undef CL_STORE
#undef CL_BCAST
