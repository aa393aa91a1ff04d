/* Complex FFT of `lanes` independent single-precision signals at once, lanes being 8 or
 * 16 (FL_MAX_LANES).
 *
 * Lengths n = 2^a 3^b 5^c, 1 <= n <= FL_MAX_N. Data are split real/imaginary arrays with
 * the lanes of one element contiguous: element j of lane v is re[j*lanes + v],
 * im[j*lanes + v]. Every arithmetic loop runs over the lanes with a scalar twiddle
 * broadcast, so the compiler vectorizes it for the target it is compiled for (16 floats =
 * one AVX-512 register, 8 one AVX2 register); there are no intrinsics.
 *
 * Algorithm: Stockham autosort (no bit reversal), decimation in frequency, mixed radix
 * 4/2/3/5, ping-ponging between (re, im) and the caller's work buffer; a final copy
 * brings the result back to (re, im) when the pass count is odd. Pass q with radix p
 * reads x[i + ido*(u + p*k)] and writes X[i + ido*(k + l1*u)] (u < p, i < ido, k < l1,
 * l1 = product of the earlier radices, ido = n / (l1*p)), multiplying output u by
 * exp(-+2 pi i u l1 i / n). Twiddles are stored once (forward sign) and conjugated for
 * the inverse; the direction is a compile-time constant inside the passes.
 *
 * Header-only, no global state: everything is static, and fl_fft_body is always_inline
 * so that a caller can instantiate it inside functions with different GCC target
 * attributes and a constant lane count (which the lane loops fold to). FMA contraction
 * follows the caller's flags (-ffp-contract=fast, GCC's default outside strict ISO modes,
 * lets it fuse the twiddle products).
 *
 * Caller rules: re, im and work must be float-aligned (no stronger alignment assumed) and
 * must not overlap one another (the passes use restrict); work holds 2*n*lanes floats,
 * used as scratch with the real and imaginary lanes of each element side by side. For
 * n a large power of 2, keeping im a few cache lines off a 4 KiB multiple from re
 * avoids L1 set conflicts (the transform is correct for any placement).
 * A plan is read-only during a transform, so threads may share it (each with its own
 * work). */
#ifndef CONVLAB_FFT_LANES_H
#define CONVLAB_FFT_LANES_H

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define FL_MAX_LANES 16
#define FL_MAX_FACTORS 32
#define FL_MAX_N 4096

#if defined(__GNUC__) || defined(__clang__)
#define FL_ALWAYS_INLINE __attribute__((always_inline)) inline
#define FL_UNUSED __attribute__((unused))
#define FL_RESTRICT __restrict__
#else
#define FL_ALWAYS_INLINE inline
#define FL_UNUSED
#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 199901L
#define FL_RESTRICT restrict
#else
#define FL_RESTRICT
#endif
#endif

typedef struct {
    int n;                       /* transform length */
    int nfactors;
    int factors[FL_MAX_FACTORS]; /* radices in pass order: 4s, then one 2 (if any), 3s, 5s */
    float *tw_re, *tw_im;        /* forward twiddles; per pass ido*(p-1), at i*(p-1) + u-1 */
} fl_plan;

/* Whether n > 0 has no prime factor other than 2, 3, 5. */
static inline int fl_is_smooth_(int n) {
    if (n < 1) return 0;
    while (n % 2 == 0) n /= 2;
    while (n % 3 == 0) n /= 3;
    while (n % 5 == 0) n /= 5;
    return n == 1;
}

/* Smallest m >= n of the form 2^a 3^b 5^c, or -1 if that exceeds FL_MAX_N. */
static FL_UNUSED int fl_fast_length(int n) {
    int m;
    if (n < 1) n = 1;
    for (m = n; m <= FL_MAX_N; m++)
        if (fl_is_smooth_(m)) return m;
    return -1;
}

static FL_UNUSED void fl_plan_free(fl_plan *p) {
    if (!p) return;
    free(p->tw_re);
    free(p->tw_im);
    memset(p, 0, sizeof *p);
}

/* 0 on success; -1 (plan left zeroed, nothing to free) for a length out of range or with
 * a prime factor above 5, or when malloc fails. */
static FL_UNUSED int fl_plan_init(fl_plan *p, int n) {
    int f[FL_MAX_FACTORS];
    int nf = 0, m, q;
    size_t ntw = 0, l1, off;
    float *twr, *twi;

    if (!p) return -1;
    memset(p, 0, sizeof *p);
    if (n < 1 || n > FL_MAX_N || !fl_is_smooth_(n)) return -1;
    m = n;
    while (m % 4 == 0) { f[nf++] = 4; m /= 4; }
    if (m % 2 == 0) { f[nf++] = 2; m /= 2; }
    while (m % 3 == 0) { f[nf++] = 3; m /= 3; }
    while (m % 5 == 0) { f[nf++] = 5; m /= 5; }

    l1 = 1;
    for (q = 0; q < nf; q++) {
        size_t ido = (size_t)n / (l1 * (size_t)f[q]);
        ntw += ido * (size_t)(f[q] - 1);
        l1 *= (size_t)f[q];
    }
    twr = (float *)malloc((ntw ? ntw : 1) * sizeof(float));
    twi = (float *)malloc((ntw ? ntw : 1) * sizeof(float));
    if (!twr || !twi) {
        free(twr);
        free(twi);
        return -1;
    }
    /* exp(-2 pi i u l1 i / n), the angle reduced mod n in integers, evaluated in double */
    l1 = 1;
    off = 0;
    for (q = 0; q < nf; q++) {
        size_t ip = (size_t)f[q], ido = (size_t)n / (l1 * ip), i, u;
        for (i = 0; i < ido; i++)
            for (u = 1; u < ip; u++) {
                size_t e = (u * l1 * i) % (size_t)n;
                double a = -2.0 * 3.14159265358979323846 * (double)e / (double)n;
                twr[off + i * (ip - 1) + u - 1] = (float)cos(a);
                twi[off + i * (ip - 1) + u - 1] = (float)sin(a);
            }
        off += ido * (ip - 1);
        l1 *= ip;
    }
    p->n = n;
    p->nfactors = nf;
    for (q = 0; q < nf; q++) p->factors[q] = f[q];
    p->tw_re = twr;
    p->tw_im = twi;
    return 0;
}

/* Butterflies on one element group (`lanes` lanes each): inputs x + u*is, outputs
 * y + u*os (strides in floats). tw: multiply output u >= 1 by twiddle u-1 of (wr, wi),
 * conjugated unless fwd; fwd, tw and lanes are compile-time constants after inlining. The
 * kernels (fl_bf*k_) take one restrict pointer per output, so the compiler knows the
 * stores do not overlap (os is a run-time value) and vectorizes the lane loop. */

#define FL_TW_LOAD_(j)                                        \
    if (tw) {                                                 \
        w##j##r = wr[(j) - 1];                                \
        w##j##i = fwd ? wi[(j) - 1] : -wi[(j) - 1];           \
    }
/* store output u, the complex local (a##r, a##i), times twiddle u if tw */
#define FL_STORE_(u, a)                                       \
    if (tw) {                                                 \
        y##u##r[v] = w##u##r * a##r - w##u##i * a##i;         \
        y##u##i[v] = w##u##r * a##i + w##u##i * a##r;         \
    } else {                                                  \
        y##u##r[v] = a##r;                                    \
        y##u##i[v] = a##i;                                    \
    }

static FL_ALWAYS_INLINE void fl_bf2k_(const float *FL_RESTRICT xr, const float *FL_RESTRICT xi,
                                      size_t is,
                                      float *FL_RESTRICT y0r, float *FL_RESTRICT y0i,
                                      float *FL_RESTRICT y1r, float *FL_RESTRICT y1i,
                                      const float *wr, const float *wi, const int tw,
                                      const int fwd, const int lanes) {
    float w1r = 1.0f, w1i = 0.0f;
    size_t v;
    FL_TW_LOAD_(1)
    for (v = 0; v < (size_t)lanes; v++) {
        float a1r = xr[v] - xr[is + v], a1i = xi[v] - xi[is + v];
        y0r[v] = xr[v] + xr[is + v];
        y0i[v] = xi[v] + xi[is + v];
        FL_STORE_(1, a1)
    }
}

static FL_ALWAYS_INLINE void fl_bf2_(const float *xr, const float *xi, size_t is, float *yr,
                                     float *yi, size_t os, const float *wr, const float *wi,
                                     const int tw, const int fwd, const int lanes) {
    fl_bf2k_(xr, xi, is, yr, yi, yr + 1 * os, yi + 1 * os, wr, wi, tw, fwd, lanes);
}

static FL_ALWAYS_INLINE void fl_bf4k_(const float *FL_RESTRICT xr, const float *FL_RESTRICT xi,
                                      size_t is,
                                      float *FL_RESTRICT y0r, float *FL_RESTRICT y0i,
                                      float *FL_RESTRICT y1r, float *FL_RESTRICT y1i,
                                      float *FL_RESTRICT y2r, float *FL_RESTRICT y2i,
                                      float *FL_RESTRICT y3r, float *FL_RESTRICT y3i,
                                      const float *wr, const float *wi, const int tw,
                                      const int fwd, const int lanes) {
    float w1r = 1.0f, w1i = 0.0f, w2r = 1.0f, w2i = 0.0f, w3r = 1.0f, w3i = 0.0f;
    size_t v;
    FL_TW_LOAD_(1)
    FL_TW_LOAD_(2)
    FL_TW_LOAD_(3)
    for (v = 0; v < (size_t)lanes; v++) {
        float t0r = xr[v] + xr[2 * is + v], t0i = xi[v] + xi[2 * is + v];
        float t1r = xr[v] - xr[2 * is + v], t1i = xi[v] - xi[2 * is + v];
        float t2r = xr[is + v] + xr[3 * is + v], t2i = xi[is + v] + xi[3 * is + v];
        float t3r = xr[is + v] - xr[3 * is + v], t3i = xi[is + v] - xi[3 * is + v];
        float a1r, a1i, a3r, a3i;
        float a2r = t0r - t2r, a2i = t0i - t2i;
        y0r[v] = t0r + t2r;
        y0i[v] = t0i + t2i;
        if (fwd) { /* a1 = t1 - i t3, a3 = t1 + i t3 */
            a1r = t1r + t3i; a1i = t1i - t3r;
            a3r = t1r - t3i; a3i = t1i + t3r;
        } else {
            a1r = t1r - t3i; a1i = t1i + t3r;
            a3r = t1r + t3i; a3i = t1i - t3r;
        }
        FL_STORE_(1, a1)
        FL_STORE_(2, a2)
        FL_STORE_(3, a3)
    }
}

static FL_ALWAYS_INLINE void fl_bf4_(const float *xr, const float *xi, size_t is, float *yr,
                                     float *yi, size_t os, const float *wr, const float *wi,
                                     const int tw, const int fwd, const int lanes) {
    fl_bf4k_(xr, xi, is, yr, yi, yr + 1 * os, yi + 1 * os, yr + 2 * os, yi + 2 * os,
             yr + 3 * os, yi + 3 * os, wr, wi, tw, fwd, lanes);
}

static FL_ALWAYS_INLINE void fl_bf3k_(const float *FL_RESTRICT xr, const float *FL_RESTRICT xi,
                                      size_t is,
                                      float *FL_RESTRICT y0r, float *FL_RESTRICT y0i,
                                      float *FL_RESTRICT y1r, float *FL_RESTRICT y1i,
                                      float *FL_RESTRICT y2r, float *FL_RESTRICT y2i,
                                      const float *wr, const float *wi, const int tw,
                                      const int fwd, const int lanes) {
    const float c = -0.5f;
    const float s = fwd ? -0.86602540378443864676f : 0.86602540378443864676f;
    float w1r = 1.0f, w1i = 0.0f, w2r = 1.0f, w2i = 0.0f;
    size_t v;
    FL_TW_LOAD_(1)
    FL_TW_LOAD_(2)
    for (v = 0; v < (size_t)lanes; v++) {
        float t1r = xr[is + v] + xr[2 * is + v], t1i = xi[is + v] + xi[2 * is + v];
        float br = s * (xr[is + v] - xr[2 * is + v]), bi = s * (xi[is + v] - xi[2 * is + v]);
        float ar = xr[v] + c * t1r, ai = xi[v] + c * t1i;
        float a1r = ar - bi, a1i = ai + br; /* a + i b */
        float a2r = ar + bi, a2i = ai - br; /* a - i b */
        y0r[v] = xr[v] + t1r;
        y0i[v] = xi[v] + t1i;
        FL_STORE_(1, a1)
        FL_STORE_(2, a2)
    }
}

static FL_ALWAYS_INLINE void fl_bf3_(const float *xr, const float *xi, size_t is, float *yr,
                                     float *yi, size_t os, const float *wr, const float *wi,
                                     const int tw, const int fwd, const int lanes) {
    fl_bf3k_(xr, xi, is, yr, yi, yr + 1 * os, yi + 1 * os, yr + 2 * os, yi + 2 * os, wr,
             wi, tw, fwd, lanes);
}

static FL_ALWAYS_INLINE void fl_bf5k_(const float *FL_RESTRICT xr, const float *FL_RESTRICT xi,
                                      size_t is,
                                      float *FL_RESTRICT y0r, float *FL_RESTRICT y0i,
                                      float *FL_RESTRICT y1r, float *FL_RESTRICT y1i,
                                      float *FL_RESTRICT y2r, float *FL_RESTRICT y2i,
                                      float *FL_RESTRICT y3r, float *FL_RESTRICT y3i,
                                      float *FL_RESTRICT y4r, float *FL_RESTRICT y4i,
                                      const float *wr, const float *wi, const int tw,
                                      const int fwd, const int lanes) {
    /* cos/sin of 2 pi/5 and 4 pi/5; the sines carry the direction's sign */
    const float c1 = 0.30901699437494742410f, c2 = -0.80901699437494742410f;
    const float s1 = fwd ? -0.95105651629515357212f : 0.95105651629515357212f;
    const float s2 = fwd ? -0.58778525229247312917f : 0.58778525229247312917f;
    float w1r = 1.0f, w1i = 0.0f, w2r = 1.0f, w2i = 0.0f;
    float w3r = 1.0f, w3i = 0.0f, w4r = 1.0f, w4i = 0.0f;
    size_t v;
    FL_TW_LOAD_(1)
    FL_TW_LOAD_(2)
    FL_TW_LOAD_(3)
    FL_TW_LOAD_(4)
    for (v = 0; v < (size_t)lanes; v++) {
        float x0r = xr[v], x0i = xi[v];
        float t1r = xr[is + v] + xr[4 * is + v], t1i = xi[is + v] + xi[4 * is + v];
        float t4r = xr[is + v] - xr[4 * is + v], t4i = xi[is + v] - xi[4 * is + v];
        float t2r = xr[2 * is + v] + xr[3 * is + v], t2i = xi[2 * is + v] + xi[3 * is + v];
        float t3r = xr[2 * is + v] - xr[3 * is + v], t3i = xi[2 * is + v] - xi[3 * is + v];
        float p1r = x0r + c1 * t1r + c2 * t2r, p1i = x0i + c1 * t1i + c2 * t2i;
        float q1r = s1 * t4r + s2 * t3r, q1i = s1 * t4i + s2 * t3i;
        float p2r = x0r + c2 * t1r + c1 * t2r, p2i = x0i + c2 * t1i + c1 * t2i;
        float q2r = s2 * t4r - s1 * t3r, q2i = s2 * t4i - s1 * t3i;
        float a1r = p1r - q1i, a1i = p1i + q1r; /* p1 + i q1 */
        float a4r = p1r + q1i, a4i = p1i - q1r; /* p1 - i q1 */
        float a2r = p2r - q2i, a2i = p2i + q2r; /* p2 + i q2 */
        float a3r = p2r + q2i, a3i = p2i - q2r; /* p2 - i q2 */
        y0r[v] = x0r + t1r + t2r;
        y0i[v] = x0i + t1i + t2i;
        FL_STORE_(1, a1)
        FL_STORE_(2, a2)
        FL_STORE_(3, a3)
        FL_STORE_(4, a4)
    }
}

static FL_ALWAYS_INLINE void fl_bf5_(const float *xr, const float *xi, size_t is, float *yr,
                                     float *yi, size_t os, const float *wr, const float *wi,
                                     const int tw, const int fwd, const int lanes) {
    fl_bf5k_(xr, xi, is, yr, yi, yr + 1 * os, yi + 1 * os, yr + 2 * os, yi + 2 * os,
             yr + 3 * os, yi + 3 * os, yr + 4 * os, yi + 4 * os, wr, wi, tw, fwd, lanes);
}

#undef FL_TW_LOAD_
#undef FL_STORE_

/* One pass of radix IP: for k < l1, i < ido, butterfly over CC(i, u, k) -> CH(i, k, u).
 * Element e of the input is at cr/ci + e*ies, of the output at hr/hi + e*oes (floats). */
#define FL_PASS_(IP, BF)                                                                  \
    static FL_ALWAYS_INLINE void fl_pass##IP##_(                                          \
        size_t ido, size_t l1, const float *FL_RESTRICT cr, const float *FL_RESTRICT ci,  \
        size_t ies, float *FL_RESTRICT hr, float *FL_RESTRICT hi, size_t oes,             \
        const float *FL_RESTRICT twr, const float *FL_RESTRICT twi, const int fwd,        \
        const int lanes) {                                                                \
        size_t k, i;                                                                      \
        if (ido == 1) {                                                                   \
            for (k = 0; k < l1; k++)                                                      \
                BF(cr + IP * k * ies, ci + IP * k * ies, ies, hr + k * oes, hi + k * oes, \
                   l1 * oes, twr, twi, 0, fwd, lanes);                                    \
            return;                                                                       \
        }                                                                                 \
        for (k = 0; k < l1; k++) {                                                        \
            const float *xr = cr + IP * k * ido * ies, *xi = ci + IP * k * ido * ies;     \
            float *yr = hr + k * ido * oes, *yi = hi + k * ido * oes;                     \
            BF(xr, xi, ido * ies, yr, yi, ido * l1 * oes, twr, twi, 0, fwd, lanes);       \
            for (i = 1; i < ido; i++)                                                     \
                BF(xr + i * ies, xi + i * ies, ido * ies, yr + i * oes, yi + i * oes,     \
                   ido * l1 * oes, twr + i * (IP - 1), twi + i * (IP - 1), 1, fwd,        \
                   lanes);                                                                \
        }                                                                                 \
    }

FL_PASS_(2, fl_bf2_)
FL_PASS_(3, fl_bf3_)
FL_PASS_(4, fl_bf4_)
FL_PASS_(5, fl_bf5_)
#undef FL_PASS_

/* Copies the interleaved work layout (below) back to split re/im. */
static FL_ALWAYS_INLINE void fl_unpack_(size_t n, const float *FL_RESTRICT w,
                                        float *FL_RESTRICT re, float *FL_RESTRICT im,
                                        const int lanes) {
    const size_t L = (size_t)lanes;
    size_t j, v;
    for (j = 0; j < n; j++)
        for (v = 0; v < L; v++) {
            re[j * L + v] = w[2 * L * j + v];
            im[j * L + v] = w[2 * L * j + L + v];
        }
}

/* The passes alternate between (re, im), element stride `lanes`, and work, where element
 * j keeps its real lanes at work[2*lanes*j] and its imaginary lanes right after: an
 * element's real and imaginary lanes are adjacent (one 64-byte line at 8 lanes, two at
 * 16), so power-of-2 strides do not crowd both into one L1 set. */
static FL_ALWAYS_INLINE void fl_run_(const fl_plan *p, float *re, float *im, float *work,
                                     const int fwd, const int lanes) {
    const size_t L = (size_t)lanes, n = (size_t)p->n;
    const float *twr = p->tw_re, *twi = p->tw_im;
    float *ar = re, *ai = im, *br = work, *bi = work + L, *t;
    size_t aes = L, bes = 2 * L, l1 = 1, es;
    int q;
    for (q = 0; q < p->nfactors; q++) {
        const size_t ip = (size_t)p->factors[q], ido = n / (l1 * ip);
        switch (ip) {
        case 4: fl_pass4_(ido, l1, ar, ai, aes, br, bi, bes, twr, twi, fwd, lanes); break;
        case 2: fl_pass2_(ido, l1, ar, ai, aes, br, bi, bes, twr, twi, fwd, lanes); break;
        case 3: fl_pass3_(ido, l1, ar, ai, aes, br, bi, bes, twr, twi, fwd, lanes); break;
        default: fl_pass5_(ido, l1, ar, ai, aes, br, bi, bes, twr, twi, fwd, lanes); break;
        }
        twr += ido * (ip - 1);
        twi += ido * (ip - 1);
        l1 *= ip;
        t = ar; ar = br; br = t;
        t = ai; ai = bi; bi = t;
        es = aes; aes = bes; bes = es;
    }
    if (ar != re) fl_unpack_(n, work, re, im, lanes); /* odd pass count: result in work */
}

/* In-place unscaled DFT of the `lanes` lanes: X[k] = sum_j x[j] exp(-+2 pi i j k / n),
 * minus for forward (inverse == 0), plus otherwise. re and im hold n*lanes floats, work
 * 2*n*lanes floats of scratch; none may overlap. Callers pass a constant `lanes`. */
static FL_ALWAYS_INLINE void fl_fft_body(const fl_plan *p, float *re, float *im, int inverse,
                                         float *work, const int lanes) {
    if (p->n <= 1) return;
    if (inverse)
        fl_run_(p, re, im, work, 0, lanes);
    else
        fl_run_(p, re, im, work, 1, lanes);
}

#endif /* CONVLAB_FFT_LANES_H */
