/* One instantiation of the direct microkernels. Included by direct_microkernel.h once per
 * (element type, target), so there is no include guard. It expects:
 *   CL_REAL, CL_TYPE (f32/f64), CL_TGT (function attribute), CL_LEVEL (name suffix),
 *   CL_VBYTES, and the blocking tables CL_DENSE_PMAX_TABLE / CL_DENSE_SHAPES and
 *   CL_DW_PMAX_TABLE / CL_DW_SHAPES, which list every (P pixels, J vectors) shape that is
 *   compiled. P * J accumulators must fit the target's vector registers with room for J
 *   weight vectors (plus an input vector in the depthwise kernel). */

#define CL_SFX CL_CAT2(CL_TYPE, CL_LEVEL)
#define CL_FN(name) CL_CAT2(name, CL_SFX)

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

/* Store the first `count` (< V) lanes of v. */
static CL_AI CL_TGT void CL_FN(store_part)(CL_REAL *d, CL_VEC v, ptrdiff_t count) {
    CL_REAL tmp[CL_VBYTES / sizeof(CL_REAL)];
    CL_STORE(tmp, v);
    memcpy(d, tmp, (size_t)count * sizeof(CL_REAL));
}

/* P pixels x J vectors of output channels, summed over the taps and input channels of
 * one group. Pixel p reads src at s + p * s_pix and writes dst at d + p * d_pix; weights
 * are vectors along the output channels. Inlined with constant P and J, the accumulators
 * become registers. */
static CL_AI CL_TGT void CL_FN(dense_body)(const int P, const int J, const cl_kargs *a) {
    const CL_REAL *s = (const CL_REAL *)a->s;
    const CL_REAL *w = (const CL_REAL *)a->w;
    const CL_REAL *bias = (const CL_REAL *)a->bias;
    CL_REAL *d = (CL_REAL *)a->d;
    const ptrdiff_t s_pix = a->s_pix, s_kd = a->s_kd, s_kh = a->s_kh, s_kw = a->s_kw;
    const ptrdiff_t w_kd = a->w_kd, w_kh = a->w_kh, w_kw = a->w_kw, w_ic = a->w_ic;
    const ptrdiff_t nkd = a->nkd, nkh = a->nkh, nkw = a->nkw, nic = a->nic;
    const ptrdiff_t d_pix = a->d_pix, nstore = a->nstore;
    CL_VEC acc[12][4];
    ptrdiff_t kd, kh, kw, ic;
    int p, j;

    CL_UNROLL for (j = 0; j < J; j++) {
        CL_VEC b = CL_LOAD(bias + j * CL_V);
        CL_UNROLL for (p = 0; p < P; p++) acc[p][j] = b;
    }
    for (kd = 0; kd < nkd; kd++) {
        for (kh = 0; kh < nkh; kh++) {
            for (kw = 0; kw < nkw; kw++) {
                const CL_REAL *sp = s + kd * s_kd + kh * s_kh + kw * s_kw;
                const CL_REAL *wp = w + kd * w_kd + kh * w_kh + kw * w_kw;
                for (ic = 0; ic < nic; ic++) {
                    CL_VEC wv[4];
                    CL_UNROLL for (j = 0; j < J; j++) wv[j] = CL_LOAD(wp + j * CL_V);
                    CL_UNROLL for (p = 0; p < P; p++) {
                        CL_VEC x = CL_BCAST(sp[p * s_pix]);
                        CL_UNROLL for (j = 0; j < J; j++) acc[p][j] += x * wv[j];
                    }
                    sp += 1;
                    wp += w_ic;
                }
            }
        }
    }
    if (nstore >= J * CL_V) {
        CL_UNROLL for (p = 0; p < P; p++) {
            CL_UNROLL for (j = 0; j < J; j++) CL_STORE(d + p * d_pix + j * CL_V, acc[p][j]);
        }
    } else {
        /* The channel block runs past the group's last output channel: store only
         * what belongs to it (the rest is another group's or past the array). */
        CL_UNROLL for (p = 0; p < P; p++) {
            CL_UNROLL for (j = 0; j < J; j++) {
                ptrdiff_t left = nstore - j * CL_V;
                if (left >= CL_V)
                    CL_STORE(d + p * d_pix + j * CL_V, acc[p][j]);
                else if (left > 0)
                    CL_FN(store_part)(d + p * d_pix + j * CL_V, acc[p][j], left);
            }
        }
    }
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

/* Each compiled shape gets its own fully unrolled copy; any other shape (never planned)
 * still computes correctly through a generic copy. */
static CL_TGT void CL_FN(dense_call)(int P, int J, const cl_kargs *a) {
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

/* Output columns [lo, hi) of the row, cut into near-equal blocks of at most pmax. */
#define CL_FOR_BLOCKS(lo, hi, pmax, ow, P, BODY)                                      \
    do {                                                                              \
        ptrdiff_t width_ = (hi) - (lo);                                               \
        if (width_ > 0) {                                                             \
            ptrdiff_t nb_ = (width_ + (pmax) - 1) / (pmax);                           \
            ptrdiff_t small_ = width_ / nb_, big_ = width_ % nb_, b_;                 \
            ptrdiff_t ow = (lo);                                                      \
            for (b_ = 0; b_ < nb_; b_++) {                                            \
                int P = (int)(small_ + (b_ < big_));                                  \
                BODY;                                                                 \
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

static CL_TGT void CL_FN(dense_item)(const cl_geom *g, const CL_REAL *src, const CL_REAL *w,
                                     const CL_REAL *bias, CL_REAL *dst, ptrdiff_t item) {
    static const int pmax_table[] = CL_DENSE_PMAX_TABLE;
    const ptrdiff_t IC = g->IC, IW = g->IW, OCgp = g->OCgp;
    ptrdiff_t seg, oh, od, n, chunk, grp, v0, oc0, kdl, kdh, khl, khh, id0, ih0;
    ptrdiff_t row_off, w_off, ow0, ow1, lo, hi, ow, nkw;
    int J, pmax, merge;
    CL_REAL *drow;
    cl_kargs a;

    seg = item % g->nseg; item /= g->nseg;
    oh = item % g->OH; item /= g->OH;
    od = item % g->OD; item /= g->OD;
    n = item % g->N; item /= g->N;
    chunk = item % g->nchunk;
    grp = item / g->nchunk;
    CL_FN(chunk_span)(g->nvec, g->nchunk, chunk, &v0, &J);
    oc0 = v0 * CL_V;
    pmax = pmax_table[J];

    id0 = od * g->sd - g->pd;
    ih0 = oh * g->sh - g->ph;
    cl_tap_range(id0, g->dd, g->KD, g->ID, &kdl, &kdh);
    cl_tap_range(ih0, g->dh, g->KH, g->IH, &khl, &khh);

    a.s_pix = g->sw * IC;
    a.s_kw = g->dw * IC;
    a.s_kh = g->dh * IW * IC;
    a.s_kd = g->dd * g->IH * IW * IC;
    a.w_ic = OCgp;
    a.w_kw = g->ICg * OCgp;
    a.w_kh = g->KW * a.w_kw;
    a.w_kd = g->KH * a.w_kh;
    a.nkd = kdh - kdl;
    a.nkh = khh - khl;
    a.nic = g->ICg;
    a.bias = bias + grp * OCgp + oc0;
    a.d_pix = g->OC;
    a.nstore = g->OCg - oc0 < J * CL_V ? g->OCg - oc0 : J * CL_V;
    /* Consecutive W taps of one group are one contiguous run of src and of weights when
     * the group spans every channel and the taps are adjacent: one longer loop then. */
    merge = g->dw == 1 && g->ICg == IC;

    /* Offsets are formed only when the row has a valid tap, so no pointer ever leaves
     * the arrays. */
    row_off = 0;
    if (a.nkd > 0 && a.nkh > 0)
        row_off = (((n * g->ID + id0 + kdl * g->dd) * g->IH + ih0 + khl * g->dh) * IW) * IC
                  + grp * g->ICg;
    else
        a.nkd = a.nkh = 0;
    w_off = grp * g->KD * a.w_kd + kdl * a.w_kd + khl * a.w_kh + oc0;
    drow = dst + ((n * g->OD + od) * g->OH + oh) * g->OW * g->OC + grp * g->OCg + oc0;

    ow0 = seg * g->seglen;
    ow1 = ow0 + g->seglen < g->OW ? ow0 + g->seglen : g->OW;
    lo = g->ow_lo < ow0 ? ow0 : g->ow_lo > ow1 ? ow1 : g->ow_lo;
    hi = g->ow_hi > ow1 ? ow1 : g->ow_hi < lo ? lo : g->ow_hi;

    /* Border columns, one at a time with their own W tap range. */
    for (ow = ow0; ow < ow1; ow++) {
        ptrdiff_t iw0, kwl, kwh;
        if (ow == lo) ow = hi;
        if (ow >= ow1) break;
        iw0 = ow * g->sw - g->pw;
        cl_tap_range(iw0, g->dw, g->KW, IW, &kwl, &kwh);
        nkw = a.nkd > 0 ? kwh - kwl : 0;
        a.s = src + (nkw > 0 ? row_off + (iw0 + kwl * g->dw) * IC : 0);
        a.w = w + w_off + kwl * a.w_kw;
        a.d = drow + ow * g->OC;
        a.nkw = merge ? nkw > 0 : nkw;
        a.nic = merge ? nkw * g->ICg : g->ICg;
        CL_FN(dense_call)(1, J, &a);
    }
    /* Interior columns: every W tap is inside the input. */
    nkw = a.nkd > 0 ? g->KW : 0;
    a.w = w + w_off;
    a.nkw = merge ? nkw > 0 : nkw;
    a.nic = merge ? nkw * g->ICg : g->ICg;
    CL_FOR_BLOCKS(lo, hi, pmax, ow, P, {
        a.s = src + (a.nkd > 0 ? row_off + (ow * g->sw - g->pw) * IC : 0);
        a.d = drow + ow * g->OC;
        CL_FN(dense_call)(P, J, &a);
    });
}

/* Channels [c0, G) of a depthwise row segment that do not fill a vector: plain loops. */
static CL_TGT void CL_FN(dw_tail)(const cl_geom *g, const CL_REAL *src, const CL_REAL *w,
                                  const CL_REAL *bias, CL_REAL *dst, ptrdiff_t n,
                                  ptrdiff_t od, ptrdiff_t oh, ptrdiff_t ow0, ptrdiff_t ow1,
                                  ptrdiff_t c0) {
    const ptrdiff_t IC = g->IC, Gp = g->OCgp;
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
    const ptrdiff_t s_kw = g->dw * g->IC, s_kh = g->dh * g->IW * g->IC;
    const ptrdiff_t s_kd = g->dd * g->IH * g->IW * g->IC, Gp = g->OCgp;
    const ptrdiff_t nkh = box->khh - box->khl, nkw = box->kwh - box->kwl;
    ptrdiff_t t, n = box->count - start < CL_TAP_BATCH ? box->count - start : CL_TAP_BATCH;
    for (t = 0; t < n; t++) {
        ptrdiff_t i = start + t, kw = i % nkw, kh = (i / nkw) % nkh, kd = i / (nkw * nkh);
        soff[t] = kd * s_kd + kh * s_kh + kw * s_kw;
        woff[t] = ((kd * g->KH + kh) * g->KW + kw) * Gp;
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
    a->s = src + base + box->kdl * g->dd * g->IH * g->IW * g->IC
           + box->khl * g->dh * g->IW * g->IC + box->kwl * g->dw * g->IC;
    a->w = w + ((box->kdl * g->KH + box->khl) * g->KW + box->kwl) * g->OCgp;
    a->soff = soff;
    a->woff = woff;
    for (start = 0; start < box->count; start += CL_TAP_BATCH) {
        a->ntap = table_ready ? box->count : CL_FN(dw_table)(g, box, start, soff, woff);
        a->accumulate = start > 0;
        CL_FN(dw_call)(P, J, a);
    }
}

static CL_TGT void CL_FN(dw_item)(const cl_geom *g, const CL_REAL *src, const CL_REAL *w,
                                  const CL_REAL *bias, CL_REAL *dst, ptrdiff_t item) {
    static const int pmax_table[] = CL_DW_PMAX_TABLE;
    const ptrdiff_t IC = g->IC, IW = g->IW;
    ptrdiff_t soff[CL_TAP_BATCH], woff[CL_TAP_BATCH];
    ptrdiff_t seg, oh, od, n, chunk, v0, c0, id0, ih0, row_base;
    ptrdiff_t ow0, ow1, lo, hi, ow;
    int J, pmax, table_ready;
    CL_FN(tapbox) box;
    CL_REAL *drow;
    cl_kargs a;

    seg = item % g->nseg; item /= g->nseg;
    oh = item % g->OH; item /= g->OH;
    od = item % g->OD; item /= g->OD;
    n = item % g->N;
    chunk = item / g->N;
    ow0 = seg * g->seglen;
    ow1 = ow0 + g->seglen < g->OW ? ow0 + g->seglen : g->OW;
    if (chunk >= g->nvchunk) {
        CL_FN(dw_tail)(g, src, w, bias, dst, n, od, oh, ow0, ow1, g->nvec * CL_V);
        return;
    }
    CL_FN(chunk_span)(g->nvec, g->nvchunk, chunk, &v0, &J);
    c0 = v0 * CL_V;
    pmax = pmax_table[J];

    id0 = od * g->sd - g->pd;
    ih0 = oh * g->sh - g->ph;
    cl_tap_range(id0, g->dd, g->KD, g->ID, &box.kdl, &box.kdh);
    cl_tap_range(ih0, g->dh, g->KH, g->IH, &box.khl, &box.khh);

    a.s_pix = g->sw * IC;
    a.bias = bias + c0;
    a.d_pix = g->OC;
    a.nstore = J * CL_V;
    /* Offset of input position (n, id0, ih0, 0, c0), possibly outside src. */
    row_base = (((n * g->ID + id0) * g->IH + ih0) * IW) * IC + c0;
    drow = dst + ((n * g->OD + od) * g->OH + oh) * g->OW * g->OC + c0;

    lo = g->ow_lo < ow0 ? ow0 : g->ow_lo > ow1 ? ow1 : g->ow_lo;
    hi = g->ow_hi > ow1 ? ow1 : g->ow_hi < lo ? lo : g->ow_hi;
    /* Border columns, one at a time with their own W tap range. */
    for (ow = ow0; ow < ow1; ow++) {
        ptrdiff_t iw0;
        if (ow == lo) ow = hi;
        if (ow >= ow1) break;
        iw0 = ow * g->sw - g->pw;
        cl_tap_range(iw0, g->dw, g->KW, IW, &box.kwl, &box.kwh);
        box.count = (box.kdh - box.kdl) * (box.khh - box.khl) * (box.kwh - box.kwl);
        a.d = drow + ow * g->OC;
        CL_FN(dw_block)(g, &a, 1, J, src, row_base + iw0 * IC, w + c0, &box, soff, woff, 0);
    }
    /* Interior columns share one tap table. */
    box.kwl = 0;
    box.kwh = g->KW;
    box.count = (box.kdh - box.kdl) * (box.khh - box.khl) * g->KW;
    table_ready = box.count <= CL_TAP_BATCH;
    if (table_ready && box.count > 0) CL_FN(dw_table)(g, &box, 0, soff, woff);
    CL_FOR_BLOCKS(lo, hi, pmax, ow, P, {
        a.d = drow + ow * g->OC;
        CL_FN(dw_block)(g, &a, P, J, src, row_base + (ow * g->sw - g->pw) * IC, w + c0,
                        &box, soff, woff, table_ready);
    });
}

static void CL_CAT2(cl_item, CL_SFX)(const cl_geom *g, const CL_REAL *src, const CL_REAL *w,
                                     const CL_REAL *bias, CL_REAL *dst, ptrdiff_t item) {
    if (g->depthwise)
        CL_FN(dw_item)(g, src, w, bias, dst, item);
    else
        CL_FN(dense_item)(g, src, w, bias, dst, item);
}

#undef CL_SFX
#undef CL_FN
#undef CL_V
#undef CL_VEC
#undef CL_LOAD
#undef CL_STORE
#undef CL_BCAST
