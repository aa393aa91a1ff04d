/* The compiled tile pipeline of the fft strategy, for one input channel per group (depthwise
 * layers and banks of filters on one channel), float32, stride 1.
 *
 * The transforms are fft_lanes.h's: `lanes` complex transforms at once, one per lane, the
 * lanes of an element contiguous; the geometry says how many (8 or 16), and each entry
 * point runs it with a copy built for the level in effect. Two real signals share a lane
 * as its real and imaginary parts, so a complex transform costs what a real one would per
 * signal (below, l is the lane count):
 *
 * - depthwise (one output per group): lane v holds channel c0 + v in its real part and
 *   channel c0 + l + v in its imaginary part. With Z the transform of that pair and m the
 *   mirrored frequency (-k on every axis), the pair's output spectrum is
 *       Y[k] = Z[k] P[k] + conj(Z[m]) Q[k],  P = (conj Wa + conj Wb) / 2,
 *                                              Q = (conj Wa - conj Wb) / 2
 *   (Wa, Wb the two channels' kernel spectra), and the inverse transform of Y holds the
 *   two channels' cross-correlations as its real and imaginary parts.
 * - banks (one input channel, several outputs per group): the input tile's spectrum X is
 *   computed once (lanes: up to l tiles, imaginary parts zero), then for 2l outputs at a
 *   time Y[k] = X[k] V[k], V = conj Wa + i conj Wb (Wa, Wb the kernels of outputs o and
 *   o + l), whose inverse holds output o in the real part and o + l in the imaginary one.
 *
 * Spatial axes: every problem is lifted to three (leading axes of length 1). A tile buffer
 * is [L0][L1][L2][l] real parts and the same of imaginary parts. The forward transform
 * runs the last axis first over the lines that hold data, the inverse the first axis first
 * and then only the lines whose positions the crop keeps. All spectra carry the 1/N scale.
 * Overlap-save tiles: a tile of `to` outputs per axis reads the `to + Ke - 1` inputs from
 * its first output on (Ke the dilated kernel's extent), in a transform of length L; the
 * kept positions [0, to) see no wrap-around. */
#ifndef CONVLAB_FFT_TILES_H
#define CONVLAB_FFT_TILES_H

#include <string.h>
#include "fft_lanes.h"
#include "isa_level.h"
#include "omp_shim.h"

/* One element's lanes as one value (GCC/clang vector extension): the loops below that pair
 * a frequency with its mirror, or scale one unit's value over the lanes, do not vectorize
 * well as plain loops over the lanes (GCC vectorizes the loop around them instead, with
 * shuffles). FT_LANE_VECTORS(lanes, statements...) runs the statements with FT_VEC the
 * vector of `lanes` floats (8 or 16; a constant, so one branch remains), whose FT_LOAD and
 * FT_STORE go through memcpy (no alignment assumed). */
typedef float ft_vec8 __attribute__((vector_size(8 * sizeof(float))));
typedef float ft_vec16 __attribute__((vector_size(16 * sizeof(float))));
#define FT_LANE_VECTORS(lanes, ...)                                                          \
    do {                                                                                     \
        if ((lanes) == 16) { typedef ft_vec16 FT_VEC; __VA_ARGS__ }                          \
        else { typedef ft_vec8 FT_VEC; __VA_ARGS__ }                                         \
    } while (0)
#define FT_LOAD(p)                                                                           \
    __extension__({                                                                          \
        FT_VEC ft_loaded_;                                                                   \
        memcpy(&ft_loaded_, (p), sizeof ft_loaded_);                                         \
        ft_loaded_;                                                                          \
    })
#define FT_STORE(p, value)                                                                   \
    do {                                                                                     \
        const FT_VEC ft_stored_ = (value);                                                   \
        memcpy((p), &ft_stored_, sizeof ft_stored_);                                         \
    } while (0)

typedef struct {
    Py_ssize_t lanes;                         /* 8 or 16 */
    Py_ssize_t batch, groups, ocg;            /* one input channel per group */
    Py_ssize_t in_shape[3], out_shape[3];
    Py_ssize_t pads_begin[3];
    Py_ssize_t kernel[3], dilation[3], extent[3];
    Py_ssize_t L[3], to[3], tiles[3];
    /* element strides of the weights as (G, K0, K1, K2, OCg) */
    Py_ssize_t w_group, w_tap[3], w_out;
} ft_geometry;

/* Scratch of one thread: two tile buffers (each re then im, N * lanes floats apiece), a
 * line buffer (re then im, Lmax * lanes each) and the transform's work (2 * Lmax * lanes). */
typedef struct {
    float *a_re, *a_im, *b_re, *b_im, *line_re, *line_im, *work;
    int *nonfinite;  /* set to 1 by a crop that writes Inf or NaN (NULL: not asked) */
} ft_scratch;

static inline Py_ssize_t ft_points(const ft_geometry *g) { return g->L[0] * g->L[1] * g->L[2]; }

static inline Py_ssize_t ft_lmax(const ft_geometry *g)
{
    Py_ssize_t m = g->L[0];
    if (g->L[1] > m) m = g->L[1];
    if (g->L[2] > m) m = g->L[2];
    return m;
}

/* Floats of one thread's scratch. */
static Py_ssize_t ft_scratch_floats(const ft_geometry *g)
{
    return 4 * ft_points(g) * g->lanes + 4 * ft_lmax(g) * g->lanes;
}

static void ft_scratch_carve(const ft_geometry *g, float *base, int *nonfinite,
                             ft_scratch *s)
{
    const Py_ssize_t n = ft_points(g) * g->lanes, l = ft_lmax(g) * g->lanes;
    s->a_re = base;
    s->a_im = base + n;
    s->b_re = base + 2 * n;
    s->b_im = base + 3 * n;
    s->line_re = base + 4 * n;
    s->line_im = base + 4 * n + l;
    s->work = base + 4 * n + 2 * l;
    s->nonfinite = nonfinite;
}

/* One tile along one axis: the buffer positions [lo, hi) hold src positions
 * [lo + start, hi + start); `count` outputs from `first`. */
typedef struct { Py_ssize_t first, count, start, lo, hi; } ft_axis_tile;

static FL_ALWAYS_INLINE void ft_axis(const ft_geometry *g, int axis, Py_ssize_t t,
                                            ft_axis_tile *a)
{
    a->first = t * g->to[axis];
    a->count = g->out_shape[axis] - a->first;
    if (a->count > g->to[axis]) a->count = g->to[axis];
    a->start = a->first - g->pads_begin[axis];
    Py_ssize_t lo = a->start < 0 ? 0 : a->start;
    Py_ssize_t hi = a->start + a->count - 1 + g->extent[axis];
    if (hi > g->in_shape[axis]) hi = g->in_shape[axis];
    /* a whole-axis tile shorter than the span holds only the positions that carry src */
    if (hi > a->start + g->L[axis]) hi = a->start + g->L[axis];
    if (hi < lo) hi = lo;
    a->lo = lo - a->start;
    a->hi = hi - a->start;
}

/* Transform the lines of axis `axis` of a tile buffer whose positions on the axes before
 * it lie in [lo[i], hi[i]) and on the axes after it anywhere. */
static FL_ALWAYS_INLINE void ft_axis_pass(
    const ft_geometry *g, const fl_plan *plan, int axis, const Py_ssize_t *lo,
    const Py_ssize_t *hi, float *re, float *im, int inverse, const ft_scratch *s,
    const int lanes)
{
    const Py_ssize_t n = g->L[axis];
    if (n == 1) return;
    const Py_ssize_t L1 = g->L[1], L2 = g->L[2];
    if (axis == 2) {
        for (Py_ssize_t p0 = lo[0]; p0 < hi[0]; p0++)
            for (Py_ssize_t p1 = lo[1]; p1 < hi[1]; p1++) {
                const Py_ssize_t off = (p0 * L1 + p1) * L2 * lanes;
                fl_fft_body(plan, re + off, im + off, inverse, s->work, lanes);
            }
        return;
    }
    const Py_ssize_t stride = (axis == 1 ? L2 : L1 * L2) * lanes;
    const Py_ssize_t outer_lo = axis == 1 ? lo[0] : 0, outer_hi = axis == 1 ? hi[0] : 1;
    const Py_ssize_t inner = axis == 1 ? L2 : L1 * L2;
    for (Py_ssize_t o = outer_lo; o < outer_hi; o++)
        for (Py_ssize_t i = 0; i < inner; i++) {
            const Py_ssize_t base = (axis == 1 ? o * L1 * L2 : 0) * lanes + i * lanes;
            float *lr = s->line_re, *li = s->line_im;
            for (Py_ssize_t j = 0; j < n; j++) {
                const float *r = re + base + j * stride, *m = im + base + j * stride;
                for (int v = 0; v < lanes; v++) {
                    lr[j * lanes + v] = r[v];
                    li[j * lanes + v] = m[v];
                }
            }
            fl_fft_body(plan, lr, li, inverse, s->work, lanes);
            for (Py_ssize_t j = 0; j < n; j++) {
                float *r = re + base + j * stride, *m = im + base + j * stride;
                for (int v = 0; v < lanes; v++) {
                    r[v] = lr[j * lanes + v];
                    m[v] = li[j * lanes + v];
                }
            }
        }
}

/* Forward transform of a buffer that is zero outside the box [lo, hi). */
static FL_ALWAYS_INLINE void ft_forward(
    const ft_geometry *g, const fl_plan *plans, const Py_ssize_t *lo, const Py_ssize_t *hi,
    float *re, float *im, const ft_scratch *s, const int lanes)
{
    const Py_ssize_t all_lo[3] = {0, 0, 0};
    const Py_ssize_t l2[3] = {lo[0], lo[1], 0}, h2[3] = {hi[0], hi[1], 0};
    ft_axis_pass(g, &plans[2], 2, l2, h2, re, im, 0, s, lanes);
    const Py_ssize_t l1[3] = {lo[0], 0, 0}, h1[3] = {hi[0], 0, 0};
    ft_axis_pass(g, &plans[1], 1, l1, h1, re, im, 0, s, lanes);
    ft_axis_pass(g, &plans[0], 0, all_lo, all_lo, re, im, 0, s, lanes);
}

/* Inverse transform, exact at the positions [0, keep) of every axis. */
static FL_ALWAYS_INLINE void ft_inverse(
    const ft_geometry *g, const fl_plan *plans, const Py_ssize_t *keep, float *re,
    float *im, const ft_scratch *s, const int lanes)
{
    const Py_ssize_t zero[3] = {0, 0, 0};
    ft_axis_pass(g, &plans[0], 0, zero, zero, re, im, 1, s, lanes);
    const Py_ssize_t h1[3] = {keep[0], 0, 0};
    ft_axis_pass(g, &plans[1], 1, zero, h1, re, im, 1, s, lanes);
    const Py_ssize_t h2[3] = {keep[0], keep[1], 0};
    ft_axis_pass(g, &plans[2], 2, zero, h2, re, im, 1, s, lanes);
}

/* Lanes [0, count) of `re` (a buffer of `lanes` lanes; the others left alone) = the
 * kernels of filters f0 + v, folded onto the transform length, each tap (j0, j1, j2) at
 * its dilated position modulo L. Filters lie `filter_stride` apart from `w`, taps by the
 * geometry's w_tap strides. Returns the box the taps occupy in `hi`. */
static FL_ALWAYS_INLINE void ft_place_kernels(
    const ft_geometry *g, const float *w, Py_ssize_t filter_stride, Py_ssize_t f0,
    int count, float *re, Py_ssize_t *hi, const int lanes)
{
    const Py_ssize_t s0 = g->w_tap[0], s1 = g->w_tap[1], s2 = g->w_tap[2];
    const Py_ssize_t L0 = g->L[0], L1 = g->L[1], L2 = g->L[2];
    const Py_ssize_t K0 = g->kernel[0], K1 = g->kernel[1], K2 = g->kernel[2];
    /* dilated steps folded onto the lengths once, so the loops wrap by one subtraction */
    const Py_ssize_t d0 = g->dilation[0] % L0, d1 = g->dilation[1] % L1;
    const Py_ssize_t d2 = g->dilation[2] % L2;
    for (int a = 0; a < 3; a++)
        hi[a] = g->extent[a] < g->L[a] ? g->extent[a] : g->L[a];
    /* taps land on distinct positions unless the kernel is longer than the transform */
    const int folds = g->extent[0] > L0 || g->extent[1] > L1 || g->extent[2] > L2;
    /* the loop over lanes innermost where the filters lie closer together than the taps
     * (weights laid out taps-major, as XIO) */
    const int lanes_inner = filter_stride <= s2 || K2 == 1;
    Py_ssize_t p0 = 0;
    for (Py_ssize_t j0 = 0; j0 < K0; j0++) {
        Py_ssize_t p1 = 0;
        for (Py_ssize_t j1 = 0; j1 < K1; j1++) {
            float *row = re + (p0 * L1 + p1) * L2 * lanes;
            const float *taps = w + f0 * filter_stride + j0 * s0 + j1 * s1;
            if (lanes_inner) {
                Py_ssize_t p2 = 0;
                for (Py_ssize_t j2 = 0; j2 < K2; j2++) {
                    float *at = row + p2 * lanes;
                    const float *from = taps + j2 * s2;
                    if (folds)
                        for (int v = 0; v < count; v++) at[v] += from[v * filter_stride];
                    else
                        for (int v = 0; v < count; v++) at[v] = from[v * filter_stride];
                    p2 += d2;
                    if (p2 >= L2) p2 -= L2;
                }
            } else {
                for (int v = 0; v < count; v++) {
                    const float *from = taps + v * filter_stride;
                    Py_ssize_t p2 = 0;
                    for (Py_ssize_t j2 = 0; j2 < K2; j2++) {
                        if (folds) row[p2 * lanes + v] += from[j2 * s2];
                        else row[p2 * lanes + v] = from[j2 * s2];
                        p2 += d2;
                        if (p2 >= L2) p2 -= L2;
                    }
                }
            }
            p1 += d1;
            if (p1 >= L1) p1 -= L1;
        }
        p0 += d0;
        if (p0 >= L0) p0 -= L0;
    }
}

/* The index of the mirrored frequency -k of each k, per axis. */
#define FT_MIRROR(k, L) ((k) == 0 ? 0 : (L) - (k))

/* How many of the 2*lanes signals from `first` of `total` a transform's real (*a) and
 * imaginary (*b) parts hold. */
static FL_ALWAYS_INLINE void ft_halves(Py_ssize_t total, Py_ssize_t first, const int lanes,
                                       Py_ssize_t *a, Py_ssize_t *b)
{
    *a = total - first;
    if (*a > lanes) *a = lanes;
    *b = total - first - lanes;
    if (*b > lanes) *b = lanes;
    if (*b < 0) *b = 0;
}

/* The transform of the kernels of 2*lanes filters, f0 + v in the real part of lane v and
 * f0 + lanes + v in the imaginary part (`w` filters `filter_stride` apart; `count` filters
 * from f0), into (re, im), two of the scratch's tile buffers. */
static FL_ALWAYS_INLINE void ft_kernel_pair_transform(
    const ft_geometry *g, const fl_plan *plans, const float *w, Py_ssize_t filter_stride,
    Py_ssize_t f0, Py_ssize_t count, float *re, float *im, const ft_scratch *s,
    const int lanes)
{
    const Py_ssize_t n = ft_points(g) * lanes;
    const Py_ssize_t zero[3] = {0, 0, 0};
    Py_ssize_t hi[3], lanes_a, lanes_b;
    memset(re, 0, n * sizeof(float));
    memset(im, 0, n * sizeof(float));
    ft_halves(count, 0, lanes, &lanes_a, &lanes_b);
    ft_place_kernels(g, w, filter_stride, f0, (int)lanes_a, re, hi, lanes);
    if (lanes_b > 0)
        ft_place_kernels(g, w, filter_stride, f0 + lanes, (int)lanes_b, im, hi, lanes);
    ft_forward(g, plans, zero, hi, re, im, s, lanes);
}

/* P[k] and Q[k] of a depthwise channel pair from its kernel pair's transform Z at k and at
 * its mirror m (see ft_depthwise_spectrum_body), scaled by q. Plans store them; one-shot
 * calls form them inside the pair product (ft_pair_product): one copy of the arithmetic,
 * so that both round alike. */
#define FT_PQ_FROM_PAIR(kr, ki, mr, mi, q, pr, pi, qr, qi)                                 \
    do {                                                                                   \
        (pr) = ((kr) + (mr) + (ki) + (mi)) * (q);                                          \
        (pi) = ((kr) - (mr) - (ki) + (mi)) * (q);                                          \
        (qr) = ((kr) + (mr) - (ki) - (mi)) * (q);                                          \
        (qi) = ((mr) - (kr) - (ki) + (mi)) * (q);                                          \
    } while (0)

/* Depthwise spectra of channel block `block` (channels 2*lanes*block ...): P and Q as
 * four arrays of N * lanes floats (P re, P im, Q re, Q im) at `out`.
 * With Z the transform of the pair (Wa + i Wb), conj Wa = (conj Z[k] + Z[m]) / 2 and
 * conj Wb = i (conj Z[k] - Z[m]) / 2, so one transform serves both channels. */
static FL_ALWAYS_INLINE void ft_depthwise_spectrum_body(
    const ft_geometry *g, const fl_plan *plans, const float *w, Py_ssize_t block,
    float *out, const ft_scratch *s, const int lanes)
{
    const Py_ssize_t n = ft_points(g) * lanes;
    const Py_ssize_t c0 = block * 2 * lanes;
    ft_kernel_pair_transform(g, plans, w, g->w_group, c0, g->groups - c0, s->a_re, s->a_im,
                             s, lanes);
    const float q = 0.25f / (float)ft_points(g);
    const float *restrict z_re = s->a_re, *restrict z_im = s->a_im;
    float *restrict p_re = out, *restrict p_im = out + n;
    float *restrict q_re = out + 2 * n, *restrict q_im = out + 3 * n;
    const Py_ssize_t L0 = g->L[0], L1 = g->L[1], L2 = g->L[2];
    for (Py_ssize_t k0 = 0; k0 < L0; k0++)
        for (Py_ssize_t k1 = 0; k1 < L1; k1++)
            for (Py_ssize_t k2 = 0; k2 < L2; k2++) {
                const Py_ssize_t k = ((k0 * L1 + k1) * L2 + k2) * lanes;
                const Py_ssize_t m = ((FT_MIRROR(k0, L0) * L1 + FT_MIRROR(k1, L1)) * L2
                                      + FT_MIRROR(k2, L2)) * lanes;
                FT_LANE_VECTORS(lanes,
                    const FT_VEC kr = FT_LOAD(z_re + k), ki = FT_LOAD(z_im + k);
                    const FT_VEC mr = FT_LOAD(z_re + m), mi = FT_LOAD(z_im + m);
                    FT_VEC pr, pi, qr, qi;
                    FT_PQ_FROM_PAIR(kr, ki, mr, mi, q, pr, pi, qr, qi);
                    FT_STORE(p_re + k, pr);
                    FT_STORE(p_im + k, pi);
                    FT_STORE(q_re + k, qr);
                    FT_STORE(q_im + k, qi););
            }
}

/* Bank spectra of group `group`, the 2*lanes outputs from 2*lanes*ob: V re then V im
 * (N * lanes floats each) at `out`. V = conj Wa + i conj Wb is Z[m],
 * Z the transform of the pair (Wa + i Wb). */
static FL_ALWAYS_INLINE void ft_bank_spectrum_body(
    const ft_geometry *g, const fl_plan *plans, const float *w, Py_ssize_t group,
    Py_ssize_t ob, float *out, const ft_scratch *s, const int lanes)
{
    const Py_ssize_t n = ft_points(g) * lanes;
    const Py_ssize_t o0 = ob * 2 * lanes;
    ft_kernel_pair_transform(g, plans, w + group * g->w_group, g->w_out, o0, g->ocg - o0,
                             s->a_re, s->a_im, s, lanes);
    const float scale = 1.0f / (float)ft_points(g);
    const float *restrict z_re = s->a_re, *restrict z_im = s->a_im;
    float *restrict v_re = out, *restrict v_im = out + n;
    const Py_ssize_t L0 = g->L[0], L1 = g->L[1], L2 = g->L[2];
    for (Py_ssize_t k0 = 0; k0 < L0; k0++)
        for (Py_ssize_t k1 = 0; k1 < L1; k1++)
            for (Py_ssize_t k2 = 0; k2 < L2; k2++) {
                const Py_ssize_t k = ((k0 * L1 + k1) * L2 + k2) * lanes;
                const Py_ssize_t m = ((FT_MIRROR(k0, L0) * L1 + FT_MIRROR(k1, L1)) * L2
                                      + FT_MIRROR(k2, L2)) * lanes;
                FT_LANE_VECTORS(lanes,
                    FT_STORE(v_re + k, FT_LOAD(z_re + m) * scale);
                    FT_STORE(v_im + k, FT_LOAD(z_im + m) * scale););
            }
}

/* Y = Z P + conj(Z[mirror]) Q in place, every frequency with its mirror. `spec` holds P
 * and Q (ft_depthwise_spectrum_body's four arrays), or, `from_kernel`, the kernel pair's
 * transform (re then im, N * lanes floats each), from which P and Q are formed on the way
 * with the scale `q`: P and Q of real kernels are Hermitian, P[m] = conj P[k]. */
static FL_ALWAYS_INLINE void ft_pair_product(
    const ft_geometry *g, float *restrict re, float *restrict im, const float *spec,
    const int from_kernel, const float q, const int lanes)
{
    const Py_ssize_t n = ft_points(g) * lanes;
    const float *restrict p_re = spec, *restrict p_im = spec + n;
    const float *restrict q_re = spec + 2 * n, *restrict q_im = spec + 3 * n;
    const Py_ssize_t L0 = g->L[0], L1 = g->L[1], L2 = g->L[2];
    for (Py_ssize_t k0 = 0; k0 < L0; k0++) {
        const Py_ssize_t m0 = FT_MIRROR(k0, L0);
        if (m0 < k0) continue;
        for (Py_ssize_t k1 = 0; k1 < L1; k1++) {
            const Py_ssize_t m1 = FT_MIRROR(k1, L1);
            if (m0 == k0 && m1 < k1) continue;
            for (Py_ssize_t k2 = 0; k2 < L2; k2++) {
                const Py_ssize_t m2 = FT_MIRROR(k2, L2);
                if (m0 == k0 && m1 == k1 && m2 < k2) continue;
                const Py_ssize_t k = ((k0 * L1 + k1) * L2 + k2) * lanes;
                const Py_ssize_t m = ((m0 * L1 + m1) * L2 + m2) * lanes;
                FT_LANE_VECTORS(lanes,
                    const FT_VEC zr = FT_LOAD(re + k), zi = FT_LOAD(im + k);
                    const FT_VEC wr = FT_LOAD(re + m), wi = FT_LOAD(im + m);
                    FT_VEC pkr, pki, qkr, qki, pmr, pmi, qmr, qmi;
                    if (from_kernel) {
                        /* spec is the kernel pair's transform U: P and Q from U[k], U[m] */
                        const FT_VEC ukr = FT_LOAD(p_re + k), uki = FT_LOAD(p_im + k);
                        const FT_VEC umr = FT_LOAD(p_re + m), umi = FT_LOAD(p_im + m);
                        FT_PQ_FROM_PAIR(ukr, uki, umr, umi, q, pkr, pki, qkr, qki);
                        pmr = pkr; pmi = -pki; qmr = qkr; qmi = -qki;
                    } else {
                        pkr = FT_LOAD(p_re + k); pki = FT_LOAD(p_im + k);
                        qkr = FT_LOAD(q_re + k); qki = FT_LOAD(q_im + k);
                        pmr = FT_LOAD(p_re + m); pmi = FT_LOAD(p_im + m);
                        qmr = FT_LOAD(q_re + m); qmi = FT_LOAD(q_im + m);
                    }
                    /* Z[m] P[m] + conj(Z[k]) Q[m], then Z[k] P[k] + conj(Z[m]) Q[k] (the
                     * second store wins where k == m, both being equal there) */
                    FT_STORE(re + m, wr * pmr - wi * pmi + zr * qmr + zi * qmi);
                    FT_STORE(im + m, wr * pmi + wi * pmr + zr * qmi - zi * qmr);
                    FT_STORE(re + k, zr * pkr - zi * pki + wr * qkr + wi * qki);
                    FT_STORE(im + k, zr * pki + zi * pkr + wr * qki - wi * qkr););
            }
        }
    }
}

/* Whether x is Inf or NaN, as an integer the crops OR together (an integer reduction
 * vectorizes where a floating-point one would need reassociation). */
static FL_ALWAYS_INLINE unsigned ft_nonfinite(float x)
{
    unsigned bits;
    memcpy(&bits, &x, sizeof bits);
    return (bits & 0x7f800000u) == 0x7f800000u;
}

/* The crop of one tile: the positions [0, keep) of every axis of (re, im) (lanes_a
 * channels from c0 in the real parts, lanes_b from c0 + lanes in the imaginary ones) into
 * `dst` (N, O0, O1, O2, C) of image `image` at the tile's first outputs, plus `bias` (its
 * value for c0 on, or NULL). Raises the scratch's `nonfinite` flag where a value written
 * is Inf or NaN, so that the caller need not read dst again to find out. */
static FL_ALWAYS_INLINE void ft_crop(
    const ft_geometry *g, const float *re, const float *im, const Py_ssize_t *keep,
    const ft_axis_tile *ax, Py_ssize_t image, Py_ssize_t c0, Py_ssize_t C,
    const float *bias, Py_ssize_t lanes_a, Py_ssize_t lanes_b, float *dst,
    const ft_scratch *s, const int lanes)
{
    const Py_ssize_t L1 = g->L[1], L2 = g->L[2];
    const Py_ssize_t O0 = g->out_shape[0], O1 = g->out_shape[1], O2 = g->out_shape[2];
    unsigned bad = 0;
    for (Py_ssize_t q0 = 0; q0 < keep[0]; q0++)
        for (Py_ssize_t q1 = 0; q1 < keep[1]; q1++) {
            float *row = dst + (((image * O0 + ax[0].first + q0) * O1 + ax[1].first + q1) * O2
                                + ax[2].first) * C + c0;
            for (Py_ssize_t q2 = 0; q2 < keep[2]; q2++) {
                float *to = row + q2 * C;
                const float *from_re = re + ((q0 * L1 + q1) * L2 + q2) * lanes;
                const float *from_im = im + ((q0 * L1 + q1) * L2 + q2) * lanes;
                if (bias) {
                    for (Py_ssize_t v = 0; v < lanes_a; v++) {
                        to[v] = from_re[v] + bias[v];
                        bad |= ft_nonfinite(to[v]);
                    }
                    for (Py_ssize_t v = 0; v < lanes_b; v++) {
                        to[lanes + v] = from_im[v] + bias[lanes + v];
                        bad |= ft_nonfinite(to[lanes + v]);
                    }
                } else {
                    for (Py_ssize_t v = 0; v < lanes_a; v++) {
                        to[v] = from_re[v];
                        bad |= ft_nonfinite(from_re[v]);
                    }
                    for (Py_ssize_t v = 0; v < lanes_b; v++) {
                        to[lanes + v] = from_im[v];
                        bad |= ft_nonfinite(from_im[v]);
                    }
                }
            }
        }
    if (bad && s->nonfinite) __atomic_store_n(s->nonfinite, 1, __ATOMIC_RELAXED);
}

/* One depthwise tile: channel block `block`, image `image`, spatial tile `tile`, in the
 * scratch's a buffers, with the block's spectra `spec` (ft_pair_product). `src` is
 * (N, I0, I1, I2, G), `dst` (N, O0, O1, O2, G), `bias` G floats or NULL. */
static FL_ALWAYS_INLINE void ft_depthwise_tile(
    const ft_geometry *g, const fl_plan *plans, const float *src, const float *spec,
    const int from_kernel, const float *bias, float *dst, Py_ssize_t block,
    Py_ssize_t image, Py_ssize_t tile, const ft_scratch *s, const int lanes)
{
    const Py_ssize_t n = ft_points(g) * lanes;
    const Py_ssize_t C = g->groups, c0 = block * 2 * lanes;
    Py_ssize_t lanes_a, lanes_b;
    ft_halves(C, c0, lanes, &lanes_a, &lanes_b);
    ft_axis_tile ax[3];
    const Py_ssize_t t2 = tile % g->tiles[2], t1 = (tile / g->tiles[2]) % g->tiles[1];
    const Py_ssize_t t0 = tile / (g->tiles[2] * g->tiles[1]);
    ft_axis(g, 0, t0, &ax[0]);
    ft_axis(g, 1, t1, &ax[1]);
    ft_axis(g, 2, t2, &ax[2]);
    float *re = s->a_re, *im = s->a_im;
    memset(re, 0, n * sizeof(float));
    memset(im, 0, n * sizeof(float));
    const Py_ssize_t L1 = g->L[1], L2 = g->L[2];
    const Py_ssize_t I0 = g->in_shape[0], I1 = g->in_shape[1], I2 = g->in_shape[2];
    for (Py_ssize_t p0 = ax[0].lo; p0 < ax[0].hi; p0++)
        for (Py_ssize_t p1 = ax[1].lo; p1 < ax[1].hi; p1++) {
            const float *row = src + (((image * I0 + p0 + ax[0].start) * I1 + p1 + ax[1].start)
                                      * I2 + ax[2].start) * C + c0;
            for (Py_ssize_t p2 = ax[2].lo; p2 < ax[2].hi; p2++) {
                const float *from = row + p2 * C;
                const Py_ssize_t at = ((p0 * L1 + p1) * L2 + p2) * lanes;
                for (Py_ssize_t v = 0; v < lanes_a; v++) re[at + v] = from[v];
                for (Py_ssize_t v = 0; v < lanes_b; v++) im[at + v] = from[lanes + v];
            }
        }
    const Py_ssize_t lo[3] = {ax[0].lo, ax[1].lo, ax[2].lo};
    const Py_ssize_t hi[3] = {ax[0].hi, ax[1].hi, ax[2].hi};
    ft_forward(g, plans, lo, hi, re, im, s, lanes);
    ft_pair_product(g, re, im, spec, from_kernel, 0.25f / (float)ft_points(g), lanes);
    const Py_ssize_t keep[3] = {ax[0].count, ax[1].count, ax[2].count};
    ft_inverse(g, plans, keep, re, im, s, lanes);
    ft_crop(g, re, im, keep, ax, image, c0, C, bias ? bias + c0 : NULL, lanes_a, lanes_b, dst,
            s, lanes);
}

/* One depthwise task of a plan: a tile with the block's spectra from `spectra`. */
static FL_ALWAYS_INLINE void ft_depthwise_task_body(
    const ft_geometry *g, const fl_plan *plans, const float *src, const float *spectra,
    const float *bias, float *dst, Py_ssize_t block, Py_ssize_t image, Py_ssize_t tile,
    const ft_scratch *s, const int lanes)
{
    const Py_ssize_t n = ft_points(g) * lanes;
    ft_depthwise_tile(g, plans, src, spectra + block * 4 * n, 0, bias, dst, block, image,
                      tile, s, lanes);
}

/* One depthwise task of a one-shot call: the block's kernel pair transform into the
 * scratch's b buffers, then the (image, tile) units [u_lo, u_hi) with it. The spectra stay
 * in the thread's scratch instead of a pass of their own through memory (`w` as
 * ft_depthwise_spectrum_body's). */
static FL_ALWAYS_INLINE void ft_depthwise_fused_task_body(
    const ft_geometry *g, const fl_plan *plans, const float *src, const float *w,
    const float *bias, float *dst, Py_ssize_t block, Py_ssize_t u_lo, Py_ssize_t u_hi,
    const ft_scratch *s, const int lanes)
{
    const Py_ssize_t c0 = block * 2 * lanes;
    const Py_ssize_t tiles = g->tiles[0] * g->tiles[1] * g->tiles[2];
    ft_kernel_pair_transform(g, plans, w, g->w_group, c0, g->groups - c0, s->b_re, s->b_im,
                             s, lanes);
    for (Py_ssize_t u = u_lo; u < u_hi; u++)
        ft_depthwise_tile(g, plans, src, s->b_re, 1, bias, dst, block, u / tiles, u % tiles,
                          s, lanes);
}

/* One bank task: group `group`, units [u0, u0 + unit_count) of the (image, tile) list
 * (image major; unit_count at most lanes), the blocks of 2*lanes outputs [ob_lo, ob_hi).
 * `src` is (N, I0, I1, I2, G), `dst` (N, O0, O1, O2, G * OCg), `spectra` the groups' V
 * blocks, (G, ceil(OCg / (2*lanes)), 2, N, lanes). */
static FL_ALWAYS_INLINE void ft_bank_task_body(
    const ft_geometry *g, const fl_plan *plans, const float *src, const float *spectra,
    const float *bias, float *dst, Py_ssize_t group, Py_ssize_t u0, Py_ssize_t unit_count,
    Py_ssize_t ob_lo, Py_ssize_t ob_hi, const ft_scratch *s, const int lanes)
{
    const Py_ssize_t n = ft_points(g) * lanes;
    const Py_ssize_t tiles = g->tiles[0] * g->tiles[1] * g->tiles[2];
    Py_ssize_t units = g->batch * tiles - u0;
    if (units > unit_count) units = unit_count;
    if (units > lanes) units = lanes;
    const Py_ssize_t G = g->groups, OC = g->groups * g->ocg;
    const Py_ssize_t L1 = g->L[1], L2 = g->L[2];
    const Py_ssize_t I0 = g->in_shape[0], I1 = g->in_shape[1], I2 = g->in_shape[2];
    ft_axis_tile ax[FL_MAX_LANES][3];
    Py_ssize_t lo[3] = {g->L[0], g->L[1], g->L[2]}, hi[3] = {0, 0, 0};
    float *x_re = s->b_re, *x_im = s->b_im;
    memset(x_re, 0, n * sizeof(float));
    memset(x_im, 0, n * sizeof(float));
    for (Py_ssize_t u = 0; u < units; u++) {
        const Py_ssize_t image = (u0 + u) / tiles, tile = (u0 + u) % tiles;
        const Py_ssize_t t2 = tile % g->tiles[2], t1 = (tile / g->tiles[2]) % g->tiles[1];
        const Py_ssize_t t0 = tile / (g->tiles[2] * g->tiles[1]);
        ft_axis(g, 0, t0, &ax[u][0]);
        ft_axis(g, 1, t1, &ax[u][1]);
        ft_axis(g, 2, t2, &ax[u][2]);
        for (int a = 0; a < 3; a++) {
            if (ax[u][a].lo < lo[a]) lo[a] = ax[u][a].lo;
            if (ax[u][a].hi > hi[a]) hi[a] = ax[u][a].hi;
        }
        for (Py_ssize_t p0 = ax[u][0].lo; p0 < ax[u][0].hi; p0++)
            for (Py_ssize_t p1 = ax[u][1].lo; p1 < ax[u][1].hi; p1++) {
                const float *row = src + (((image * I0 + p0 + ax[u][0].start) * I1 + p1
                                           + ax[u][1].start) * I2 + ax[u][2].start) * G + group;
                for (Py_ssize_t p2 = ax[u][2].lo; p2 < ax[u][2].hi; p2++)
                    x_re[((p0 * L1 + p1) * L2 + p2) * lanes + u] = row[p2 * G];
            }
    }
    for (int a = 0; a < 3; a++)
        if (hi[a] < lo[a]) { lo[a] = 0; hi[a] = 0; }
    ft_forward(g, plans, lo, hi, x_re, x_im, s, lanes);
    /* the units' spectra one after another in the a buffers (unit u's N values from u * N),
     * so that each product below streams its unit's values instead of reading one lane of
     * every element; the b buffers then hold the inverse transforms */
    const Py_ssize_t points = ft_points(g);
    float *xt_re = s->a_re, *xt_im = s->a_im;
    for (Py_ssize_t k = 0; k < points; k++)
        for (Py_ssize_t u = 0; u < units; u++) {
            xt_re[u * points + k] = x_re[k * lanes + u];
            xt_im[u * points + k] = x_im[k * lanes + u];
        }
    const Py_ssize_t out_blocks = (g->ocg + 2 * lanes - 1) / (2 * lanes);
    float *re = s->b_re, *im = s->b_im;
    for (Py_ssize_t ob = ob_lo; ob < ob_hi && ob < out_blocks; ob++) {
        const float *v_re = spectra + (group * out_blocks + ob) * 2 * n, *v_im = v_re + n;
        const Py_ssize_t o0 = ob * 2 * lanes;
        Py_ssize_t lanes_a, lanes_b;
        ft_halves(g->ocg, o0, lanes, &lanes_a, &lanes_b);
        const Py_ssize_t c0 = group * g->ocg + o0;
        for (Py_ssize_t u = 0; u < units; u++) {
            const float *restrict ur = xt_re + u * points, *restrict ui = xt_im + u * points;
            for (Py_ssize_t k = 0; k < points; k++) {
                const float xr = ur[k], xi = ui[k];
                FT_LANE_VECTORS(lanes,
                    const FT_VEC vr = FT_LOAD(v_re + k * lanes), vi = FT_LOAD(v_im + k * lanes);
                    FT_STORE(re + k * lanes, xr * vr - xi * vi);
                    FT_STORE(im + k * lanes, xr * vi + xi * vr););
            }
            const Py_ssize_t keep[3] = {ax[u][0].count, ax[u][1].count, ax[u][2].count};
            ft_inverse(g, plans, keep, re, im, s, lanes);
            ft_crop(g, re, im, keep, ax[u], (u0 + u) / tiles, c0, OC,
                    bias ? bias + c0 : NULL, lanes_a, lanes_b, dst, s, lanes);
        }
    }
}

/* One transform of `lanes_of` lanes (8 or 16) of (re, im), for tests. */
static FL_ALWAYS_INLINE void ft_lane_transform_body(
    Py_ssize_t lanes_of, const fl_plan *p, float *re, float *im, int inverse, float *work,
    const int lanes)
{
    (void)lanes_of; /* what the dispatch below chose `lanes` by */
    fl_fft_body(p, re, im, inverse, work, lanes);
}

/* The entry points: each runs the lane count LANES_OF (8 or 16) with the widest copy the
 * level in effect runs: 16 lanes with the x86-64-v4 copy, 8 with the x86-64-v3 one (as
 * winograd_levels.h dispatches), the portable copies otherwise. The lane count comes from
 * the caller, not the level, so that a change of the cap while a run goes on keeps the
 * layout of its spectra and buffers. */
#define FT_ARGS(...) __VA_ARGS__
#define FT_COPY(name, suffix, ATTRIBUTES, LANES, PARAMS, ARGS)                               \
    static ATTRIBUTES void name##_##suffix PARAMS { name##_body(FT_ARGS ARGS, LANES); }
#define FT_PORTABLE_COPIES(name, PARAMS, ARGS)                                               \
    FT_COPY(name, 8, , 8, PARAMS, ARGS)                                                      \
    FT_COPY(name, 16, , 16, PARAMS, ARGS)
#if CL_X86_DISPATCH
#define FT_DISPATCHED(name, LANES_OF, PARAMS, ARGS)                                          \
    FT_COPY(name, v4, __attribute__((target("arch=x86-64-v4"), noinline)), 16, PARAMS, ARGS) \
    FT_COPY(name, v3, __attribute__((target("arch=x86-64-v3"), noinline)), 8, PARAMS, ARGS)  \
    FT_PORTABLE_COPIES(name, PARAMS, ARGS)                                                   \
    static void name PARAMS {                                                                \
        if ((LANES_OF) == 16) {                                                              \
            if (cl_isa_in_effect == CL_ISA_AVX512) name##_v4 ARGS;                           \
            else name##_16 ARGS;                                                             \
        } else if (cl_isa_in_effect >= CL_ISA_AVX2) name##_v3 ARGS;                          \
        else name##_8 ARGS;                                                                  \
    }
#else
#define FT_DISPATCHED(name, LANES_OF, PARAMS, ARGS)                                          \
    FT_PORTABLE_COPIES(name, PARAMS, ARGS)                                                   \
    static void name PARAMS {                                                                \
        if ((LANES_OF) == 16) name##_16 ARGS;                                                \
        else name##_8 ARGS;                                                                  \
    }
#endif

FT_DISPATCHED(ft_depthwise_spectrum, g->lanes,
    (const ft_geometry *g, const fl_plan *plans, const float *w, Py_ssize_t block,
     float *out, const ft_scratch *s),
    (g, plans, w, block, out, s))

FT_DISPATCHED(ft_bank_spectrum, g->lanes,
    (const ft_geometry *g, const fl_plan *plans, const float *w, Py_ssize_t group,
     Py_ssize_t ob, float *out, const ft_scratch *s),
    (g, plans, w, group, ob, out, s))

FT_DISPATCHED(ft_depthwise_task, g->lanes,
    (const ft_geometry *g, const fl_plan *plans, const float *src, const float *spectra,
     const float *bias, float *dst, Py_ssize_t block, Py_ssize_t image, Py_ssize_t tile,
     const ft_scratch *s),
    (g, plans, src, spectra, bias, dst, block, image, tile, s))

FT_DISPATCHED(ft_depthwise_fused_task, g->lanes,
    (const ft_geometry *g, const fl_plan *plans, const float *src, const float *w,
     const float *bias, float *dst, Py_ssize_t block, Py_ssize_t u_lo, Py_ssize_t u_hi,
     const ft_scratch *s),
    (g, plans, src, w, bias, dst, block, u_lo, u_hi, s))

FT_DISPATCHED(ft_bank_task, g->lanes,
    (const ft_geometry *g, const fl_plan *plans, const float *src, const float *spectra,
     const float *bias, float *dst, Py_ssize_t group, Py_ssize_t u0, Py_ssize_t unit_count,
     Py_ssize_t ob_lo, Py_ssize_t ob_hi, const ft_scratch *s),
    (g, plans, src, spectra, bias, dst, group, u0, unit_count, ob_lo, ob_hi, s))

FT_DISPATCHED(ft_lane_transform, lanes_of,
    (Py_ssize_t lanes_of, const fl_plan *p, float *re, float *im, int inverse, float *work),
    (lanes_of, p, re, im, inverse, work))

#undef FT_DISPATCHED
#undef FT_PORTABLE_COPIES
#undef FT_COPY
#undef FT_ARGS

/* What one driver's tasks share, and the task it runs by index. */
typedef struct {
    const ft_geometry *g;
    const fl_plan *plans;
    const float *src, *spectra, *bias, *w;
    float *dst, *out;
    Py_ssize_t tiles, per_block, per_group, unit_step, ob_tasks, ob_step, out_blocks, n,
        chunks;
    int depthwise;
    int *nonfinite;  /* the crops' flag (ft_scratch), or NULL */
} ft_run;

typedef void (*ft_task_fn)(const ft_run *r, Py_ssize_t t, const ft_scratch *s);

/* Tasks [0, tasks) on `threads` threads, each with its own scratch at
 * `scratch + thread * scratch_stride`, taken in turn. A one-thread call opens no OpenMP
 * region (whose closing barrier costs a system call). */
static void ft_run_tasks(const ft_run *r, ft_task_fn task, Py_ssize_t tasks, float *scratch,
                         Py_ssize_t scratch_stride, int threads)
{
    if (threads <= 1) {
        ft_scratch s;
        ft_scratch_carve(r->g, scratch, r->nonfinite, &s);
        for (Py_ssize_t t = 0; t < tasks; t++)
            task(r, t, &s);
        return;
    }
#ifdef _OPENMP
    #pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
#endif
    for (Py_ssize_t t = 0; t < tasks; t++) {
        ft_scratch s;
        ft_scratch_carve(r->g, scratch + omp_get_thread_num() * scratch_stride,
                         r->nonfinite, &s);
        task(r, t, &s);
    }
}

/* Depthwise task t: channel block major, then image, then spatial tile. */
static void ft_depthwise_task_at(const ft_run *r, Py_ssize_t t, const ft_scratch *s)
{
    ft_depthwise_task(r->g, r->plans, r->src, r->spectra, r->bias, r->dst, t / r->per_block,
                      (t % r->per_block) / r->tiles, t % r->tiles, s);
}

/* One-shot depthwise task t: channel block major, then its chunk of the (image, tile)
 * units (`chunks` per block, each transforming the block's kernels again). */
static void ft_depthwise_fused_task_at(const ft_run *r, Py_ssize_t t, const ft_scratch *s)
{
    const Py_ssize_t chunk = t % r->chunks;
    ft_depthwise_fused_task(r->g, r->plans, r->src, r->w, r->bias, r->dst, t / r->chunks,
                            chunk * r->per_block / r->chunks,
                            (chunk + 1) * r->per_block / r->chunks, s);
}

/* Bank task t: group major, then `unit_step` (image, tile) units at a time, then `ob_step`
 * blocks of 2*lanes outputs at a time (each task transforms its units' input again). */
static void ft_bank_task_at(const ft_run *r, Py_ssize_t t, const ft_scratch *s)
{
    const Py_ssize_t ob = t % r->ob_tasks * r->ob_step;
    ft_bank_task(r->g, r->plans, r->src, r->spectra, r->bias, r->dst, t / r->per_group,
                 (t % r->per_group) / r->ob_tasks * r->unit_step, r->unit_step, ob,
                 ob + r->ob_step, s);
}

/* Spectrum task t: depthwise, channel block t (4 N lanes floats); banks, (group, block of
 * 2*lanes outputs) (2 N lanes floats). */
static void ft_spectrum_task_at(const ft_run *r, Py_ssize_t t, const ft_scratch *s)
{
    if (r->depthwise)
        ft_depthwise_spectrum(r->g, r->plans, r->w, t, r->out + t * 4 * r->n, s);
    else
        ft_bank_spectrum(r->g, r->plans, r->w, t / r->out_blocks, t % r->out_blocks,
                         r->out + t * 2 * r->n, s);
}

static void ft_run_depthwise(const ft_geometry *g, const fl_plan *plans, const float *src,
                             const float *spectra, const float *bias, float *dst,
                             int *nonfinite, float *scratch, Py_ssize_t scratch_stride,
                             int threads)
{
    ft_run r = {0};
    r.nonfinite = nonfinite;
    r.g = g; r.plans = plans; r.src = src; r.spectra = spectra; r.bias = bias; r.dst = dst;
    r.tiles = g->tiles[0] * g->tiles[1] * g->tiles[2];
    r.per_block = g->batch * r.tiles;
    const Py_ssize_t pair = 2 * g->lanes;
    ft_run_tasks(&r, ft_depthwise_task_at, (g->groups + pair - 1) / pair * r.per_block,
                 scratch, scratch_stride, threads);
}

/* A one-shot depthwise run from the weights `w` (as ft_run_spectra's), no spectra kept. */
static void ft_run_depthwise_fused(const ft_geometry *g, const fl_plan *plans,
                                   const float *src, const float *w, const float *bias,
                                   float *dst, int *nonfinite, Py_ssize_t chunks,
                                   float *scratch, Py_ssize_t scratch_stride, int threads)
{
    ft_run r = {0};
    r.nonfinite = nonfinite;
    r.g = g; r.plans = plans; r.src = src; r.w = w; r.bias = bias; r.dst = dst;
    r.per_block = g->batch * g->tiles[0] * g->tiles[1] * g->tiles[2];
    r.chunks = chunks < 1 ? 1 : (chunks > r.per_block ? r.per_block : chunks);
    const Py_ssize_t pair = 2 * g->lanes;
    ft_run_tasks(&r, ft_depthwise_fused_task_at, (g->groups + pair - 1) / pair * r.chunks,
                 scratch, scratch_stride, threads);
}

static void ft_run_bank(const ft_geometry *g, const fl_plan *plans, const float *src,
                        const float *spectra, const float *bias, float *dst,
                        int *nonfinite, Py_ssize_t unit_step, Py_ssize_t ob_step,
                        float *scratch, Py_ssize_t scratch_stride, int threads)
{
    ft_run r = {0};
    r.nonfinite = nonfinite;
    r.g = g; r.plans = plans; r.src = src; r.spectra = spectra; r.bias = bias; r.dst = dst;
    const Py_ssize_t units = g->batch * g->tiles[0] * g->tiles[1] * g->tiles[2];
    const Py_ssize_t pair = 2 * g->lanes;
    const Py_ssize_t out_blocks = (g->ocg + pair - 1) / pair;
    r.unit_step = unit_step < 1 ? 1 : (unit_step > g->lanes ? g->lanes : unit_step);
    r.ob_step = ob_step < 1 ? 1 : ob_step;
    r.ob_tasks = (out_blocks + r.ob_step - 1) / r.ob_step;
    r.per_group = (units + r.unit_step - 1) / r.unit_step * r.ob_tasks;
    ft_run_tasks(&r, ft_bank_task_at, g->groups * r.per_group, scratch, scratch_stride,
                 threads);
}

static void ft_run_spectra(const ft_geometry *g, const fl_plan *plans, const float *w,
                           int depthwise, float *out, float *scratch,
                           Py_ssize_t scratch_stride, int threads)
{
    ft_run r = {0};
    r.g = g; r.plans = plans; r.w = w; r.out = out; r.depthwise = depthwise;
    r.n = ft_points(g) * g->lanes;
    const Py_ssize_t pair = 2 * g->lanes;
    r.out_blocks = (g->ocg + pair - 1) / pair;
    ft_run_tasks(&r, ft_spectrum_task_at,
                 depthwise ? (g->groups + pair - 1) / pair : g->groups * r.out_blocks,
                 scratch, scratch_stride, threads);
}

#endif /* CONVLAB_FFT_TILES_H */
