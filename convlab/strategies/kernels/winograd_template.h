/* Winograd tile transforms for one real type; included by winograd_kernels.h once per type
 * with WG_REAL (float or double) and WG_SUFFIX (f or d) defined.
 *
 * Every problem arrives lifted to three spatial axes; an axis a lower rank lifts away has
 * alpha = m = 1 and a 1x1 identity transform, and its passes are skipped. The last axis is
 * always a real Winograd axis.
 *
 * Buffers hold one tile for a chunk of cc channels as [a0][a1][a2][cc] (channels innermost,
 * as in NXC src), so a transform along axis k treats everything after axis k as one
 * contiguous vector and the loops that dominate run over long unit-stride vectors. */

#define WG_FN(name) WG_CAT(name, WG_SUFFIX)

/* out[(o*rows + r) * out_stride + v] = sum_j mat[r][j] * in[(o*cols + j) * in_stride + v]
 * for o < outer, r < rows, v < vec. Zero coefficients are skipped: B^T and A^T are about
 * half zeros, and skipping them here costs one branch per row, not per element. */
static inline __attribute__((always_inline)) void WG_FN(wg_pass)(
    const WG_REAL *restrict in, Py_ssize_t in_stride, WG_REAL *restrict out,
    Py_ssize_t out_stride, const WG_REAL *restrict mat, Py_ssize_t rows, Py_ssize_t cols,
    Py_ssize_t outer, Py_ssize_t vec)
{
    for (Py_ssize_t o = 0; o < outer; o++) {
        for (Py_ssize_t r = 0; r < rows; r++) {
            WG_REAL *restrict dst = out + (o * rows + r) * out_stride;
            const WG_REAL *row = mat + r * cols;
            int first = 1;
            for (Py_ssize_t j = 0; j < cols; j++) {
                const WG_REAL c = row[j];
                if (c == 0)
                    continue;
                const WG_REAL *restrict s = in + (o * cols + j) * in_stride;
                if (first) {
                    for (Py_ssize_t v = 0; v < vec; v++)
                        dst[v] = c * s[v];
                    first = 0;
                } else {
                    for (Py_ssize_t v = 0; v < vec; v++)
                        dst[v] += c * s[v];
                }
            }
            if (first)
                for (Py_ssize_t v = 0; v < vec; v++)
                    dst[v] = 0;
        }
    }
}

/* Tile index t (over batch and the tile grid) -> batch entry and first output per axis. */
static inline void WG_FN(wg_tile_origin)(const wg_geometry *geo, Py_ssize_t t, Py_ssize_t *n,
                                         Py_ssize_t origin[3])
{
    Py_ssize_t j2 = t % geo->tiles[2];
    t /= geo->tiles[2];
    Py_ssize_t j1 = t % geo->tiles[1];
    t /= geo->tiles[1];
    Py_ssize_t j0 = t % geo->tiles[0];
    *n = t / geo->tiles[0];
    origin[0] = j0 * geo->m[0];
    origin[1] = j1 * geo->m[1];
    origin[2] = j2 * geo->m[2];
}

/* The vector types of the fast paths: 64 bytes of WG_REAL, aligned like one element so
 * that loads and stores at any channel offset are legal. */
typedef WG_REAL WG_FN(wg_vec) __attribute__((vector_size(64), aligned(sizeof(WG_REAL))));
#define WG_VEC WG_FN(wg_vec)
#define WG_VL ((Py_ssize_t)(64 / sizeof(WG_REAL)))

/* *(WG_VEC *)p = v, as two 32-byte halves where the compiler can split it: GCC 12 stored a
 * whole 64-byte vector at x86-64-v3 through the stack, 8 bytes at a time
 * (bench/results/winograd_output_store_2026-11-28_zen3-avx2.txt). */
#if defined(__clang__) || __GNUC__ >= 12
typedef WG_REAL WG_FN(wg_half) __attribute__((vector_size(32), aligned(sizeof(WG_REAL))));
#define WG_STORE_VEC(p, v) do { \
        *(WG_FN(wg_half) *)(p) = __builtin_shufflevector((v), (v), WG_LOW_HALF); \
        *(WG_FN(wg_half) *)((p) + WG_VL / 2) = __builtin_shufflevector((v), (v), WG_HIGH_HALF); \
    } while (0)
#else
#define WG_STORE_VEC(p, v) (*(WG_VEC *)(p) = (v))
#endif

/* g[0]*a + g[1]*b + g[2]*c: one step of G w G^T, in the one order both weight paths use.
 * (A macro: a function returning a 64-byte vector draws ABI warnings outside AVX-512.) */
#define WG_W_DOT3(g, a, b, c) ((g)[0] * (a) + (g)[1] * (b) + (g)[2] * (c))

/* The most coefficients a fast path takes as vectors: B^T of F(6) has 8 x 8. */
#define WG_MAX_COEFFS 64

/* out[k] = a vector of n coefficients c[k], every lane c[k]. The fast paths multiply by
 * these rather than by the scalars: a scalar times a 64-byte vector, wider than the
 * registers of x86-64-v3 and the baseline, makes GCC assemble the broadcast in a stack
 * slot lane by lane at every use (most of the F(4) weight transform's time at AVX2),
 * where a table entry is one or two loads. Same products, same bits. */
static inline __attribute__((always_inline)) void WG_FN(wg_broadcast)(
    const WG_REAL *c, Py_ssize_t n, WG_REAL (*out)[WG_VL])
{
    for (Py_ssize_t k = 0; k < n; k++)
        for (Py_ssize_t v = 0; v < WG_VL; v++)
            out[k][v] = c[k];
}

#define WG_A 4
#include "winograd_fast.h"
#undef WG_A
#define WG_A 6
#include "winograd_fast.h"
#undef WG_A
#define WG_A 8
#include "winograd_fast.h"
#undef WG_A

/* GEMM micro-kernels: per instruction set level a full-height one and smaller ones for
 * the last rows of a block (49 rows take 4 x 12 + 4, not 5 x 12; at x86-64-v3 the 4
 * tiles of a 7x7 image's F(4) and F(6) blocks take one 4-row tile, not a 6-row one). */
#if WG_X86
#define WG_ISA v4
#define WG_ISA_ATTR __attribute__((target("arch=x86-64-v4")))
#define WG_ISA_BYTES 64
#define WG_ISA_REGISTER_BYTES 64
#define WG_MR 12
#include "winograd_gemm.h"
#undef WG_MR
#define WG_MR 8
#include "winograd_gemm.h"
#undef WG_MR
#define WG_MR 4
#include "winograd_gemm.h"
#undef WG_MR
#undef WG_ISA
#undef WG_ISA_ATTR
#undef WG_ISA_BYTES
#undef WG_ISA_REGISTER_BYTES
#define WG_ISA v3
#define WG_ISA_ATTR __attribute__((target("arch=x86-64-v3")))
#define WG_ISA_BYTES 32
#define WG_ISA_REGISTER_BYTES 32
#define WG_MR 6
#include "winograd_gemm.h"
#undef WG_MR
#define WG_MR 4
#include "winograd_gemm.h"
#undef WG_MR
#define WG_MR 3
#include "winograd_gemm.h"
#undef WG_MR
#undef WG_ISA
#undef WG_ISA_ATTR
#undef WG_ISA_BYTES
#undef WG_ISA_REGISTER_BYTES
#endif
#define WG_ISA base
#define WG_ISA_ATTR
#define WG_ISA_BYTES 32
/* SSE2's and NEON's registers: with 32-byte vectors GCC kept the accumulators on the stack
 * and built every broadcast there lane by lane (a winograd4 plan of res4a_branch2b took 47
 * ms against direct's 9 ms at the baseline, one thread) */
#define WG_ISA_REGISTER_BYTES 16
#define WG_MR 3
#include "winograd_gemm.h"
#undef WG_MR
#define WG_MR 1
#include "winograd_gemm.h"
#undef WG_MR
#undef WG_ISA
#undef WG_ISA_ATTR
#undef WG_ISA_BYTES
#undef WG_ISA_REGISTER_BYTES

/* Output channels per packed panel of U at a level: two of its vectors. */
static inline Py_ssize_t WG_FN(wg_gemm_nr)(int level)
{
    return 2 * wg_gemm_vector_bytes(level) / (Py_ssize_t)sizeof(WG_REAL);
}

#define WG_MICRO_CALL(isa, mr) \
    WG_CAT(WG_CAT(WG_FN(wg_micro), isa), mr)(k, A + i * lda, lda, panel, c + i * ldc, ldc, \
                                              next)

/* C = A @ B (B packed, see winograd_gemm.h) with the micro-kernels of ``level``. The last
 * micro-tile may compute rows past ``rows``: A and C must hold rows_capacity(rows) rows
 * (_winograd.pyx), the extra ones of A readable (zeros preferably), those of C scratch. */
static inline void WG_FN(wg_gemm)(int level, Py_ssize_t rows, Py_ssize_t k, Py_ssize_t panels,
                                  const WG_REAL *A, Py_ssize_t lda, const WG_REAL *B,
                                  WG_REAL *C, Py_ssize_t ldc)
{
    const Py_ssize_t nr = WG_FN(wg_gemm_nr)(level);
    const Py_ssize_t mr = wg_gemm_mr(level);
    const int prefetch = (rows + mr - 1) / mr <= wg_prefetch_max_tiles;
    for (Py_ssize_t p = 0; p < panels; p++) {
        const WG_REAL *panel = B + p * k * nr;
        WG_REAL *c = C + p * nr;
        /* the last panel of the call prefetches itself: every address stays within B */
        const WG_REAL *next = !prefetch ? NULL : p + 1 < panels ? panel + k * nr : panel;
        Py_ssize_t i = 0;
#if WG_X86
        if (level == 2) {
            for (; i + 12 <= rows; i += 12)
                WG_MICRO_CALL(v4, 12);
            if (rows - i > 8)
                WG_MICRO_CALL(v4, 12);
            else if (rows - i > 4)
                WG_MICRO_CALL(v4, 8);
            else if (rows - i > 0)
                WG_MICRO_CALL(v4, 4);
            continue;
        }
        if (level == 1) {
            for (; i + 6 <= rows; i += 6)
                WG_MICRO_CALL(v3, 6);
            if (rows - i > 4)
                WG_MICRO_CALL(v3, 6);
            else if (rows - i > 3)
                WG_MICRO_CALL(v3, 4);
            else if (rows - i > 0)
                WG_MICRO_CALL(v3, 3);
            continue;
        }
#endif
        for (; i + 3 <= rows; i += 3)
            WG_MICRO_CALL(base, 3);
        for (; i < rows; i++)
            WG_MICRO_CALL(base, 1);
    }
}

#undef WG_MICRO_CALL

/* The register-resident path runs 2-D problems (axis 0 lifted away) whose two axes share
 * one F(alpha - 2, 3) transform with alpha in {4, 6, 8}. */
static inline int WG_FN(wg_fast_2d)(const wg_geometry *geo, const WG_REAL *m1,
                                    const WG_REAL *m2, Py_ssize_t rows)
{
    const Py_ssize_t a = geo->alpha[2];
    if (geo->alpha[0] != 1 || geo->alpha[1] != a || geo->m[1] != a - 2 || geo->m[2] != a - 2)
        return 0;
    if (a != 4 && a != 6 && a != 8)
        return 0;
    return memcmp(m1, m2, (size_t)(rows * a) * sizeof(WG_REAL)) == 0;
}

/* The generic input transform of one tile for channels [c0, c0 + cc) of group g: gather
 * with zero padding, then one pass per axis. */
static inline __attribute__((always_inline)) void WG_FN(wg_input_generic)(
    const WG_REAL *src, const wg_geometry *geo, const WG_REAL *bt0, const WG_REAL *bt1,
    const WG_REAL *bt2, Py_ssize_t g, Py_ssize_t n, const Py_ssize_t start[3], Py_ssize_t c0,
    Py_ssize_t cc, WG_REAL *V, Py_ssize_t pos_stride, WG_REAL *buf_a, WG_REAL *buf_b)
{
    const Py_ssize_t a0 = geo->alpha[0], a1 = geo->alpha[1], a2 = geo->alpha[2];
    const Py_ssize_t I0 = geo->in_shape[0], I1 = geo->in_shape[1], I2 = geo->in_shape[2];
    const Py_ssize_t IC = geo->in_channels, ICg = geo->in_channels_per_group;
    const Py_ssize_t s0 = start[0], s1 = start[1], s2 = start[2];
    /* the part of the tile's last axis that lies inside src; the rest is zero padding */
    const Py_ssize_t x_lo = s2 < 0 ? -s2 : 0;
    const Py_ssize_t x_hi = (I2 - s2) < a2 ? (I2 - s2) : a2;
    const WG_REAL *base = src + n * I0 * I1 * I2 * IC + g * ICg + c0;
    for (Py_ssize_t i0 = 0; i0 < a0; i0++) {
        const Py_ssize_t y0 = s0 + i0;
        for (Py_ssize_t i1 = 0; i1 < a1; i1++) {
            const Py_ssize_t y1 = s1 + i1;
            WG_REAL *row = buf_a + (i0 * a1 + i1) * a2 * cc;
            if (y0 < 0 || y0 >= I0 || y1 < 0 || y1 >= I1 || x_lo >= x_hi) {
                memset(row, 0, (size_t)(a2 * cc) * sizeof(WG_REAL));
                continue;
            }
            if (x_lo > 0)
                memset(row, 0, (size_t)(x_lo * cc) * sizeof(WG_REAL));
            /* the line's first pixel, not the tile's: s2 may lie in the padding */
            const WG_REAL *line = base + (y0 * I1 + y1) * I2 * IC;
            for (Py_ssize_t i2 = x_lo; i2 < x_hi; i2++)
                memcpy(row + i2 * cc, line + (s2 + i2) * IC, (size_t)cc * sizeof(WG_REAL));
            if (x_hi < a2)
                memset(row + x_hi * cc, 0, (size_t)((a2 - x_hi) * cc) * sizeof(WG_REAL));
        }
    }
    WG_REAL *cur = buf_a, *other = buf_b, *swap;
    if (a0 > 1) {
        WG_FN(wg_pass)(cur, a1 * a2 * cc, other, a1 * a2 * cc, bt0, a0, a0, 1, a1 * a2 * cc);
        swap = cur; cur = other; other = swap;
    }
    if (a1 > 1) {
        WG_FN(wg_pass)(cur, a2 * cc, other, a2 * cc, bt1, a1, a1, a0, a2 * cc);
        swap = cur; cur = other; other = swap;
    }
    WG_FN(wg_pass)(cur, cc, V, pos_stride, bt2, a2, a2, a0 * a1, cc);
}

/* B^T d B (per axis) for tiles [t_begin, t_end) of group g. Tile t is row
 * t - row_begin of V: V[pos * pos_stride + (t - row_begin) * ICg + c], with
 * pos = (p0*a1 + p1)*a2 + p2. buf_a and buf_b each hold P * channel_chunk elements. */
WG_PER_LEVEL void WG_FN(wg_input_tiles_body)(
    const WG_REAL *src, const wg_geometry *geo, const WG_REAL *bt0, const WG_REAL *bt1,
    const WG_REAL *bt2, Py_ssize_t g, Py_ssize_t t_begin, Py_ssize_t t_end,
    Py_ssize_t row_begin, WG_REAL *V, Py_ssize_t pos_stride, WG_REAL *buf_a, WG_REAL *buf_b)
{
    const Py_ssize_t a2 = geo->alpha[2];
    const Py_ssize_t I0 = geo->in_shape[0], I1 = geo->in_shape[1], I2 = geo->in_shape[2];
    const Py_ssize_t IC = geo->in_channels, ICg = geo->in_channels_per_group;
    const Py_ssize_t CC = geo->channel_chunk;
    const int fast = WG_FN(wg_fast_2d)(geo, bt1, bt2, a2);
    WG_REAL bt_vectors[WG_MAX_COEFFS][WG_VL] __attribute__((aligned(64)));
    if (fast)
        WG_FN(wg_broadcast)(bt2, a2 * a2, bt_vectors);
    const WG_VEC *btv = (const WG_VEC *)bt_vectors;
    for (Py_ssize_t t = t_begin; t < t_end; t++) {
        Py_ssize_t n, origin[3], start[3];
        WG_FN(wg_tile_origin)(geo, t, &n, origin);
        for (int axis = 0; axis < 3; axis++)
            start[axis] = origin[axis] - geo->pads_begin[axis];
        WG_REAL *row = V + (t - row_begin) * ICg;
        if (!fast) {
            for (Py_ssize_t c0 = 0; c0 < ICg; c0 += CC) {
                const Py_ssize_t cc = (ICg - c0) < CC ? (ICg - c0) : CC;
                WG_FN(wg_input_generic)(src, geo, bt0, bt1, bt2, g, n, start, c0, cc,
                                        row + c0, pos_stride, buf_a, buf_b);
            }
            continue;
        }
        const Py_ssize_t s1 = start[1], s2 = start[2];
        const int inside = s1 >= 0 && s1 + a2 <= I1 && s2 >= 0 && s2 + a2 <= I2;
        const Py_ssize_t y_lo = s1 < 0 ? -s1 : 0, y_hi = (I1 - s1) < a2 ? (I1 - s1) : a2;
        const Py_ssize_t x_lo = s2 < 0 ? -s2 : 0, x_hi = (I2 - s2) < a2 ? (I2 - s2) : a2;
        /* element (y, x) of image n, channel g * ICg; only formed for (y, x) inside the
         * image, since a pointer into the padding would lie outside src */
#define WG_PIXEL(y, x) (src + ((n * I0 * I1 + (y)) * I2 + (x)) * IC + g * ICg)
        for (Py_ssize_t c = 0; c < ICg; c += WG_VL) {
            const Py_ssize_t lanes = (ICg - c) < WG_VL ? (ICg - c) : WG_VL;
            const WG_REAL *base = buf_a;
            Py_ssize_t ys = I2 * IC, xs = IC;
            if (inside && lanes == WG_VL) {
                base = WG_PIXEL(s1, s2) + c;
            } else {
                /* a tile reaching into the padding, or the last few channels: gather it
                 * with zeros around and in the unused lanes */
                memset(buf_a, 0, (size_t)(a2 * a2 * WG_VL) * sizeof(WG_REAL));
                for (Py_ssize_t i = y_lo; i < y_hi; i++)
                    for (Py_ssize_t j = x_lo; j < x_hi; j++)
                        memcpy(buf_a + (i * a2 + j) * WG_VL, WG_PIXEL(s1 + i, s2 + j) + c,
                               (size_t)lanes * sizeof(WG_REAL));
                base = buf_a;
                ys = a2 * WG_VL;
                xs = WG_VL;
            }
            /* a partial vector goes through buf_b, and only its lanes on to V */
            WG_REAL *out = lanes < WG_VL ? buf_b : row + c;
            const Py_ssize_t stride = lanes < WG_VL ? WG_VL : pos_stride;
            switch (a2) {
            case 4: WG_CAT(WG_FN(wg_in2d), 4)(base, ys, xs, btv, out, stride); break;
            case 6: WG_CAT(WG_FN(wg_in2d), 6)(base, ys, xs, btv, out, stride); break;
            default: WG_CAT(WG_FN(wg_in2d), 8)(base, ys, xs, btv, out, stride); break;
            }
            if (lanes < WG_VL)
                for (Py_ssize_t pos = 0; pos < a2 * a2; pos++)
                    memcpy(row + c + pos * pos_stride, buf_b + pos * WG_VL,
                           (size_t)lanes * sizeof(WG_REAL));
        }
#undef WG_PIXEL
    }
}

/* The post-ops (geo->epi) on the e0 x e1 x e2 outputs of one tile just written, group g's
 * channels: one call per line of e2 pixels, which are consecutive output rows. Run after
 * the tile's Inf/NaN test, which concerns the convolution alone. */
static inline void WG_FN(wg_tile_epilogue)(const wg_geometry *geo, WG_REAL *first,
                                           Py_ssize_t n, const Py_ssize_t *origin,
                                           Py_ssize_t e0, Py_ssize_t e1, Py_ssize_t e2,
                                           Py_ssize_t g)
{
    const Py_ssize_t O1 = geo->out_shape[1], O2 = geo->out_shape[2], OC = geo->out_channels;
    const Py_ssize_t OCg = geo->out_channels_per_group;
    if (geo->epi == NULL || geo->epi->nops == 0)
        return;
    for (Py_ssize_t i0 = 0; i0 < e0; i0++)
        for (Py_ssize_t i1 = 0; i1 < e1; i1++) {
            const Py_ssize_t row = ((n * geo->out_shape[0] + origin[0] + i0) * O1
                                    + origin[1] + i1) * O2 + origin[2];
            WG_REAL *line = first + ((i0 * O1 + i1) * O2) * OC;
            if (sizeof(WG_REAL) == sizeof(float))
                cl_epi_apply_f32(geo->epi, (float *)line, OC, e2, OCg, row, g * OCg);
            else
                cl_epi_apply_f64(geo->epi, (double *)line, OC, e2, OCg, row, g * OCg);
        }
}

/* A^T M A (per axis) plus bias for tiles [t_begin, t_end) of group g, from
 * M[pos * pos_stride + (t - row_begin) * row_stride + oc]; writes the outputs that fall inside dst
 * (the last tile along an axis may stick out).
 *
 * Returns nonzero when an output written is Inf or NaN. The transforms spread a special
 * value over the whole tile (and may overflow earlier than a direct sum), so the caller
 * then recomputes exactly; the test (y - y != 0 holds only for Inf and NaN) is an integer
 * OR the compiler keeps vectorised. */
WG_PER_LEVEL int WG_FN(wg_output_tiles_body)(
    const WG_REAL *M, Py_ssize_t pos_stride, Py_ssize_t row_stride, const wg_geometry *geo,
    const WG_REAL *at0, const WG_REAL *at1, const WG_REAL *at2, const WG_REAL *bias,
    Py_ssize_t g, Py_ssize_t t_begin, Py_ssize_t t_end, Py_ssize_t row_begin, WG_REAL *dst,
    WG_REAL *buf_a, WG_REAL *buf_b)
{
    const Py_ssize_t a0 = geo->alpha[0], a1 = geo->alpha[1], a2 = geo->alpha[2];
    const Py_ssize_t m0 = geo->m[0], m1 = geo->m[1], m2 = geo->m[2];
    const Py_ssize_t O0 = geo->out_shape[0], O1 = geo->out_shape[1], O2 = geo->out_shape[2];
    const Py_ssize_t OC = geo->out_channels, OCg = geo->out_channels_per_group;
    const Py_ssize_t CC = geo->channel_chunk;
    const int fast = WG_FN(wg_fast_2d)(geo, at1, at2, m2);
    WG_REAL at_vectors[WG_MAX_COEFFS][WG_VL] __attribute__((aligned(64)));
    if (fast)
        WG_FN(wg_broadcast)(at2, m2 * a2, at_vectors);
    const WG_VEC *atv = (const WG_VEC *)at_vectors;
    int nonfinite = 0;
    for (Py_ssize_t t = t_begin; t < t_end; t++) {
        Py_ssize_t n, origin[3];
        WG_FN(wg_tile_origin)(geo, t, &n, origin);
        const Py_ssize_t e0 = (O0 - origin[0]) < m0 ? (O0 - origin[0]) : m0;
        const Py_ssize_t e1 = (O1 - origin[1]) < m1 ? (O1 - origin[1]) : m1;
        const Py_ssize_t e2 = (O2 - origin[2]) < m2 ? (O2 - origin[2]) : m2;
        const WG_REAL *Mt = M + (t - row_begin) * row_stride;
        WG_REAL *first = dst + (((n * O0 + origin[0]) * O1 + origin[1]) * O2 + origin[2]) * OC
                         + g * OCg;
        if (fast) {
            WG_VEC bad = {0};  /* 0, or NaN in a lane that met Inf or NaN */
            for (Py_ssize_t c = 0; c < OCg; c += WG_VL) {
                const Py_ssize_t lanes = (OCg - c) < WG_VL ? (OCg - c) : WG_VL;
                const WG_REAL *Mp = Mt + c;
                Py_ssize_t mstride = pos_stride;
                WG_VEC b = {0};
                WG_REAL *out = first + c;
                Py_ssize_t ys = O2 * OC, xs = OC;
                if (lanes < WG_VL) {
                    /* the last few channels: their M lanes gathered with zeros around,
                     * results through buf_b, and only their lanes on to dst */
                    memset(buf_a, 0, (size_t)(a2 * a2 * WG_VL) * sizeof(WG_REAL));
                    for (Py_ssize_t pos = 0; pos < a2 * a2; pos++)
                        memcpy(buf_a + pos * WG_VL, Mp + pos * pos_stride,
                               (size_t)lanes * sizeof(WG_REAL));
                    Mp = buf_a;
                    mstride = WG_VL;
                    if (bias)
                        memcpy(&b, bias + g * OCg + c, (size_t)lanes * sizeof(WG_REAL));
                    out = buf_b;
                    ys = m2 * WG_VL;
                    xs = WG_VL;
                } else if (bias) {
                    b = *(const WG_VEC *)(bias + g * OCg + c);
                }
                switch (a2) {
                case 4:
                    WG_CAT(WG_FN(wg_out2d), 4)(Mp, mstride, atv, b, out, ys, xs, e1, e2, &bad);
                    break;
                case 6:
                    WG_CAT(WG_FN(wg_out2d), 6)(Mp, mstride, atv, b, out, ys, xs, e1, e2, &bad);
                    break;
                default:
                    WG_CAT(WG_FN(wg_out2d), 8)(Mp, mstride, atv, b, out, ys, xs, e1, e2, &bad);
                    break;
                }
                if (lanes < WG_VL)
                    for (Py_ssize_t i = 0; i < e1; i++)
                        for (Py_ssize_t j = 0; j < e2; j++)
                            memcpy(first + c + (i * O2 + j) * OC, buf_b + (i * m2 + j) * WG_VL,
                                   (size_t)lanes * sizeof(WG_REAL));
            }
            for (Py_ssize_t v = 0; v < WG_VL; v++)
                nonfinite |= bad[v] != 0;
            WG_FN(wg_tile_epilogue)(geo, first, n, origin, e0, e1, e2, g);
            continue;
        }
        for (Py_ssize_t c0 = 0; c0 < OCg; c0 += CC) {
            const Py_ssize_t cc = (OCg - c0) < CC ? (OCg - c0) : CC;
            WG_REAL *cur = buf_a, *other = buf_b, *swap;
            WG_FN(wg_pass)(Mt + c0, pos_stride, cur, cc, at2, m2, a2, a0 * a1, cc);
            if (a1 > 1) {
                WG_FN(wg_pass)(cur, m2 * cc, other, m2 * cc, at1, m1, a1, a0, m2 * cc);
                swap = cur; cur = other; other = swap;
            }
            if (a0 > 1) {
                WG_FN(wg_pass)(cur, m1 * m2 * cc, other, m1 * m2 * cc, at0, m0, a0, 1,
                               m1 * m2 * cc);
                swap = cur; cur = other; other = swap;
            }
            const WG_REAL *b = bias ? bias + g * OCg + c0 : NULL;
            for (Py_ssize_t i0 = 0; i0 < e0; i0++) {
                for (Py_ssize_t i1 = 0; i1 < e1; i1++) {
                    WG_REAL *line = first + ((i0 * O1 + i1) * O2) * OC + c0;
                    const WG_REAL *res = cur + (i0 * m1 + i1) * m2 * cc;
                    for (Py_ssize_t i2 = 0; i2 < e2; i2++) {
                        WG_REAL *restrict out = line + i2 * OC;
                        const WG_REAL *restrict val = res + i2 * cc;
                        if (b) {
                            for (Py_ssize_t v = 0; v < cc; v++) {
                                const WG_REAL y = val[v] + b[v];
                                out[v] = y;
                                nonfinite |= (y - y != 0);
                            }
                        } else {
                            for (Py_ssize_t v = 0; v < cc; v++) {
                                const WG_REAL y = val[v];
                                out[v] = y;
                                nonfinite |= (y - y != 0);
                            }
                        }
                    }
                }
            }
        }
        WG_FN(wg_tile_epilogue)(geo, first, n, origin, e0, e1, e2, g);
    }
    return nonfinite;
}

/* G w G^T (per axis) for input channels [ic_begin, ic_end) of one group: w holds that
 * group's canonical weights (K0, K1, K2, ICg, OCg); writes U packed for the GEMM, in
 * panels of nr output channels: (pos, oc) goes to
 * U[pos * pos_stride + (oc / nr) * ICg * nr + ic * nr + oc % nr], for the positions
 * [p_lo, p_hi) only. The filter is read once and every position comes out of the
 * separable passes, cheaper than 9 (27) taps each. */
WG_PER_LEVEL void WG_FN(wg_weight_tiles_body)(
    const WG_REAL *w, const wg_geometry *geo, const WG_REAL *g0, const WG_REAL *g1,
    const WG_REAL *g2, Py_ssize_t ic_begin, Py_ssize_t ic_end, WG_REAL *U,
    Py_ssize_t pos_stride, Py_ssize_t nr, WG_REAL *buf_a, WG_REAL *buf_b,
    Py_ssize_t p_lo, Py_ssize_t p_hi)
{
    const Py_ssize_t a0 = geo->alpha[0], a1 = geo->alpha[1], a2 = geo->alpha[2];
    const Py_ssize_t k0 = geo->kernel[0], k1 = geo->kernel[1], k2 = geo->kernel[2];
    const Py_ssize_t ICg = geo->in_channels_per_group, OCg = geo->out_channels_per_group;
    const Py_ssize_t CC = geo->channel_chunk;
    const Py_ssize_t tap_stride = ICg * OCg;
    const Py_ssize_t positions = a0 * a1 * a2;
    /* 2-D 3x3 filters with one transform on both axes: whole vectors of output channels
     * in registers, the remaining channels by the generic passes below (nr is a multiple
     * of the vector, so a vector never straddles two panels) */
    const int fast = a0 == 1 && k0 == 1 && k1 == 3 && k2 == 3 && a1 == a2
                     && (a2 == 4 || a2 == 6 || a2 == 8) && nr % WG_VL == 0
                     && memcmp(g1, g2, (size_t)(a2 * 3) * sizeof(WG_REAL)) == 0;
    const Py_ssize_t fast_channels = fast ? OCg / WG_VL * WG_VL : 0;
    const int whole = p_lo == 0 && p_hi == positions;
    WG_REAL g_vectors[8 * 3][WG_VL] __attribute__((aligned(64)));
    if (fast)
        WG_FN(wg_broadcast)(g2, a2 * 3, g_vectors);
    const WG_VEC *gv = (const WG_VEC *)g_vectors;
    /* panel by panel, input channel by input channel: each position's output then grows
     * as one sequential stream per panel (input channels first would scatter every
     * channel's writes over positions x panels pages) */
    for (Py_ssize_t p0 = 0; p0 < fast_channels; p0 += nr) {
        const Py_ssize_t p1 = (p0 + nr) < fast_channels ? (p0 + nr) : fast_channels;
        for (Py_ssize_t ic = ic_begin; ic < ic_end; ic++) {
            for (Py_ssize_t c = p0; c < p1; c += WG_VL) {
                const WG_REAL *base = w + ic * OCg + c;
                WG_REAL *out = U + (c / nr) * ICg * nr + ic * nr + c % nr;
                if (whole) {
                    switch (a2) {
                    case 4: WG_CAT(WG_FN(wg_w2d), 4)(base, tap_stride, gv, out, pos_stride);
                            break;
                    case 6: WG_CAT(WG_FN(wg_w2d), 6)(base, tap_stride, gv, out, pos_stride);
                            break;
                    default: WG_CAT(WG_FN(wg_w2d), 8)(base, tap_stride, gv, out, pos_stride);
                             break;
                    }
                } else {
                    switch (a2) {
                    case 4: WG_CAT(WG_FN(wg_w2d_span), 4)(base, tap_stride, gv, out,
                                                          pos_stride, p_lo, p_hi); break;
                    case 6: WG_CAT(WG_FN(wg_w2d_span), 6)(base, tap_stride, gv, out,
                                                          pos_stride, p_lo, p_hi); break;
                    default: WG_CAT(WG_FN(wg_w2d_span), 8)(base, tap_stride, gv, out,
                                                           pos_stride, p_lo, p_hi); break;
                    }
                }
            }
        }
    }
    for (Py_ssize_t ic = ic_begin; ic < ic_end; ic++) {
        for (Py_ssize_t c0 = fast_channels; c0 < OCg; c0 += CC) {
            const Py_ssize_t cc = (OCg - c0) < CC ? (OCg - c0) : CC;
            const Py_ssize_t taps = k0 * k1 * k2;
            for (Py_ssize_t tap = 0; tap < taps; tap++)
                memcpy(buf_a + tap * cc, w + tap * tap_stride + ic * OCg + c0,
                       (size_t)cc * sizeof(WG_REAL));
            WG_REAL *cur = buf_a, *other = buf_b, *swap;
            if (a0 > 1) {
                WG_FN(wg_pass)(cur, k1 * k2 * cc, other, k1 * k2 * cc, g0, a0, k0, 1,
                               k1 * k2 * cc);
                swap = cur; cur = other; other = swap;
            }
            if (a1 > 1) {
                WG_FN(wg_pass)(cur, k2 * cc, other, k2 * cc, g1, a1, k1, a0, k2 * cc);
                swap = cur; cur = other; other = swap;
            }
            WG_FN(wg_pass)(cur, cc, other, cc, g2, a2, k2, a0 * a1, cc);
            /* each position's chunk goes out as runs within a panel: a division per value
             * to find its panel took 3 ms of a 1-D F(4) call's 4.4 ms on a 512 x 512
             * filter (Intel Xeon family 6 model 207, 2 threads) */
            for (Py_ssize_t pos = p_lo; pos < p_hi; pos++) {
                const WG_REAL *values = other + pos * cc;
                WG_REAL *plane = U + pos * pos_stride + ic * nr;
                for (Py_ssize_t v = 0; v < cc;) {
                    const Py_ssize_t oc = c0 + v, lane = oc % nr;
                    const Py_ssize_t run = (nr - lane) < (cc - v) ? (nr - lane) : (cc - v);
                    memcpy(plane + (oc / nr) * ICg * nr + lane, values + v,
                           (size_t)run * sizeof(WG_REAL));
                    v += run;
                }
            }
        }
    }
}

/* The fused path's filter, in blocks of block_width output channels (the last one may
 * be narrower): rows [k_lo, k_hi) of the canonical (3, 3, ICg, OCg) filter w, row k being
 * tap k / ICg and input channel k % ICg, each row's part in block b copied to
 * out + b * block_stride + tap * tap_stride + ic * width (width: the block's channels).
 * wg_weight_row then reads a block as one contiguous stream per tap, for every row of
 * positions. In place a block is a column of 9 * ICg pieces OCg apart: with power-of-two
 * OCg they fall into a few cache sets and never stayed cached between rows (the six row
 * passes over res5a_branch2b's 512 x 512 F(4) filter, one thread at AVX2: 6.0 ms in place,
 * 2.8 ms packing block by block first), and copied block by block they still waited on
 * memory for every piece, twice when the filter does not start on a cache line (NumPy's
 * large arrays start 16 bytes into a page): 47% of a one-shot F(2) call. Whole rows are
 * read as the streams that prefetchers follow. */
WG_PER_LEVEL void WG_FN(wg_weight_pack_body)(
    const WG_REAL *w, Py_ssize_t ICg, Py_ssize_t OCg, Py_ssize_t block_width,
    Py_ssize_t k_lo, Py_ssize_t k_hi, WG_REAL *out, Py_ssize_t tap_stride,
    Py_ssize_t block_stride)
{
    for (Py_ssize_t k = k_lo; k < k_hi; k++) {
        const WG_REAL *row = w + k * OCg;
        WG_REAL *to = out + (k / ICg) * tap_stride;
        const Py_ssize_t ic = k % ICg;
        for (Py_ssize_t c0 = 0; c0 < OCg; c0 += block_width) {
            const Py_ssize_t width = (OCg - c0) < block_width ? (OCg - c0) : block_width;
            WG_REAL *piece = to + (c0 / block_width) * block_stride + ic * width;
            /* element by element, which GCC vectorises at the target's width (a copy of
             * 64-byte vectors went through the stack at x86-64-v3) */
            for (Py_ssize_t c = 0; c < width; c++)
                piece[c] = row[c0 + c];
        }
    }
}

/* The fused path's U slices for positions (i, j_lo) .. (i, j_hi - 1) (2-D 3x3 filters,
 * alpha 4, 6 or 8) and a block of output channels: position (i, j) into
 * out + j * slice_stride, packed like U, panel p of the block at p * ICg * nr. w holds the
 * block's filter as wg_weight_pack leaves it (width channels, whole vectors; taps
 * tap_stride apart). The arithmetic, and its order, is wg_w2d's, so a fused run gives the
 * bits of a run on stored U. */
WG_PER_LEVEL void WG_FN(wg_weight_row_body)(
    const WG_REAL *w, Py_ssize_t tap_stride, Py_ssize_t ICg, Py_ssize_t width,
    const WG_REAL *g, Py_ssize_t alpha, Py_ssize_t i, Py_ssize_t j_lo, Py_ssize_t j_hi,
    Py_ssize_t nr, WG_REAL *out, Py_ssize_t slice_stride)
{
    WG_REAL g_vectors[8 * 3][WG_VL] __attribute__((aligned(64)));
    WG_FN(wg_broadcast)(g, alpha * 3, g_vectors);
    const WG_VEC *gv = (const WG_VEC *)g_vectors;
    for (Py_ssize_t p0 = 0; p0 < width; p0 += nr) {
        const Py_ssize_t p1 = (p0 + nr) < width ? (p0 + nr) : width;
        for (Py_ssize_t ic = 0; ic < ICg; ic++) {
            for (Py_ssize_t c = p0; c < p1; c += WG_VL) {
                const WG_REAL *base = w + ic * width + c;
                WG_REAL *slice = out + (c / nr) * ICg * nr + ic * nr + c % nr;
                switch (alpha) {
                case 4: WG_CAT(WG_FN(wg_w2d_row), 4)(base, tap_stride, gv, i, j_lo, j_hi,
                                                     slice, slice_stride); break;
                case 6: WG_CAT(WG_FN(wg_w2d_row), 6)(base, tap_stride, gv, i, j_lo, j_hi,
                                                     slice, slice_stride); break;
                default: WG_CAT(WG_FN(wg_w2d_row), 8)(base, tap_stride, gv, i, j_lo, j_hi,
                                                      slice, slice_stride); break;
                }
            }
        }
    }
}

/* The entry points above, one copy per instruction-set level and their dispatch. */
#include "winograd_levels.h"

#undef WG_W_DOT3
#undef WG_MAX_COEFFS
#undef WG_VEC
#undef WG_VL
#undef WG_STORE_VEC
#undef WG_FN
