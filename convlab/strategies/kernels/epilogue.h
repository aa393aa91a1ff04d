/* Post-ops applied by the kernels themselves (docs/specification.md §4.3), to a block of dst
 * they have just written and that is still in cache, instead of in a second pass over the
 * whole output.
 *
 * A block is `rows` rows of `cols` channels, rows `ld` elements apart; row i is output
 * row m0 + i of the call (image (m0 + i) / npix, pixel (m0 + i) % npix) and its first
 * channel is c0. Binary operands are indexed by those coordinates through their strides,
 * which are 0 on the axes they broadcast over.
 *
 * A leading `sum` post-op may be seeded: the kernel then starts its accumulation from
 * scale * (prior dst) + bias (cl_epi_prologue_*) instead of from the bias, so the prior
 * contents are read once, in cache, before they are overwritten. The post-ops after it
 * run in the epilogue (cl_epi_apply_*). Any other sum is a CL_OP_SCALED_ADD of a
 * snapshot of the prior dst, taken before the kernel ran (convlab.postops decides).
 *
 * The element functions follow convlab.postops.apply formula by formula (sigmoid through
 * tanh, max/min propagating NaN like NumPy), in the problem's dtype. */
#ifndef CONVLAB_EPILOGUE_H
#define CONVLAB_EPILOGUE_H

#include <math.h>
#include <stddef.h>

#include "isa_level.h"

/* Codes shared with convlab/strategies/kernels/_epilogue.pyx (OP_CODES there). */
enum {
    CL_OP_RELU = 0, CL_OP_TANH, CL_OP_SIGMOID, CL_OP_ELU, CL_OP_GELU_ERF, CL_OP_GELU_TANH,
    CL_OP_SWISH, CL_OP_CLIP, CL_OP_LINEAR, CL_OP_ABS, CL_OP_SQUARE, CL_OP_EXP, CL_OP_LOG,
    CL_OP_ADD, CL_OP_MUL, CL_OP_MAX, CL_OP_MIN,
    CL_OP_SCALED_ADD  /* x + a * operand: a sum reading a snapshot of the prior dst */
};

typedef struct {
    int kind;
    double a, b;                 /* parameters (relu's slope, clip's bounds, linear's a, b) */
    const void *operand;         /* binary: element (0, 0, 0) of an (N, pixels, OC) view */
    ptrdiff_t s_n, s_pix, s_ch;  /* its strides in elements */
} cl_postop;

typedef struct {
    int seeds_sum;                 /* the first post-op was a sum */
    double sum_scale;
    int nops;                    /* the post-ops after the sum */
    const cl_postop *ops;
    ptrdiff_t npix;              /* output pixels per image */
} cl_epilogue;

/* Wide-vector copies of the loops below are compiled with GCC target attributes and
 * picked at run time (the level in effect, isa_level.h), so the module still runs on any
 * x86-64 CPU. */
#define CL_EPI_X86 CL_X86_DISPATCH

/* Every row of the block, every column: x = EXPR (x the element; `a`, `b` in scope).
 * CL_EPI_REAL is the element type of the copy being defined. */
#define CL_EPI_MAP(EXPR)                                                                    \
    for (i = 0; i < rows; i++, row += ld)                                                   \
        for (j = 0; j < cols; j++) {                                                        \
            const CL_EPI_REAL x = row[j];                                                          \
            row[j] = (EXPR);                                                                \
        }

/* Same with the binary operand's element o at (row m0 + i, channel c0 + j). */
#define CL_EPI_MAP_OPERAND(EXPR)                                                            \
    for (i = 0; i < rows; i++, row += ld) {                                                 \
        const ptrdiff_t m = m0 + i, n = m / e->npix, p = m - n * e->npix;                   \
        const CL_EPI_REAL *ob = (const CL_EPI_REAL *)op->operand + n * op->s_n + p * op->s_pix + c0 * sc; \
        if (sc == 1)                                                                        \
            for (j = 0; j < cols; j++) {                                                    \
                const CL_EPI_REAL x = row[j], o = ob[j];                                           \
                row[j] = (EXPR);                                                            \
            }                                                                               \
        else                                                                                \
            for (j = 0; j < cols; j++) {                                                    \
                const CL_EPI_REAL x = row[j], o = ob[j * sc];                                      \
                row[j] = (EXPR);                                                            \
            }                                                                               \
    }

#define CL_EPI_DEFINE(SFX, REAL, TGT, EXP, EXPM1, TANH, ERF, LOG, FABS)                     \
/* d = scale * d + bias over the block: where a fused sum starts the accumulation. */       \
static TGT void cl_epi_prologue_##SFX(const cl_epilogue *e, REAL *d, ptrdiff_t ld,          \
                                      ptrdiff_t rows, ptrdiff_t cols, const REAL *bias) {   \
    const REAL s = (REAL)e->sum_scale;                                                      \
    ptrdiff_t i, j;                                                                         \
    for (i = 0; i < rows; i++, d += ld) {                                                   \
        if (bias)                                                                           \
            for (j = 0; j < cols; j++) d[j] = s * d[j] + bias[j];                           \
        else if (s != (REAL)1)                                                              \
            for (j = 0; j < cols; j++) d[j] = s * d[j];                                     \
    }                                                                                       \
}                                                                                           \
                                                                                            \
/* The post-ops after the sum, over the block, one post-op at a time; each kind has its  \
 * own loop so that the simple ones vectorise. */                                           \
static TGT void cl_epi_apply_##SFX(const cl_epilogue *e, REAL *d, ptrdiff_t ld,             \
                                   ptrdiff_t rows, ptrdiff_t cols, ptrdiff_t m0,            \
                                   ptrdiff_t c0) {                                          \
    const REAL half = (REAL)0.5, one = (REAL)1;                                             \
    int k;                                                                                  \
    ptrdiff_t i, j;                                                                         \
    for (k = 0; k < e->nops; k++) {                                                         \
        const cl_postop *op = &e->ops[k];                                                   \
        const REAL a = (REAL)op->a, b = (REAL)op->b;                                        \
        const ptrdiff_t sc = op->s_ch;                                                      \
        REAL *row = d;                                                                      \
        switch (op->kind) {                                                                 \
        case CL_OP_RELU:                                                                    \
            /* x < 0 ? 0 : x keeps NaN, as np.maximum(x, 0) does */                         \
            if (a == 0) { CL_EPI_MAP(x < 0 ? 0 : x) }                                       \
            else { CL_EPI_MAP(x >= 0 ? x : x * a) }                                         \
            break;                                                                          \
        case CL_OP_TANH: CL_EPI_MAP(TANH(x)) break;                                         \
        /* sigmoid through tanh, as convlab.postops: exp(-x) overflows for very negative x */ \
        case CL_OP_SIGMOID: CL_EPI_MAP(half * (TANH(half * x) + one)) break;                \
        case CL_OP_ELU: CL_EPI_MAP(x > 0 ? x : a * EXPM1(x)) break;                         \
        case CL_OP_GELU_ERF:                                                                \
            CL_EPI_MAP(half * x * (one + ERF(x * (REAL)0.70710678118654752440))) break;     \
        case CL_OP_GELU_TANH:                                                               \
            CL_EPI_MAP(half * x * (one + TANH((REAL)0.79788456080286535588                  \
                                             * (x + (REAL)0.044715 * x * x * x)))) break;   \
        case CL_OP_SWISH: CL_EPI_MAP(x * (half * (TANH(half * a * x) + one))) break;        \
        case CL_OP_CLIP: CL_EPI_MAP(x < a ? a : x > b ? b : x) break;                       \
        case CL_OP_LINEAR: CL_EPI_MAP(a * x + b) break;                                     \
        case CL_OP_ABS: CL_EPI_MAP(FABS(x)) break;                                          \
        case CL_OP_SQUARE: CL_EPI_MAP(x * x) break;                                         \
        case CL_OP_EXP: CL_EPI_MAP(EXP(x)) break;                                           \
        case CL_OP_LOG: CL_EPI_MAP(LOG(x)) break;                                           \
        case CL_OP_ADD: CL_EPI_MAP_OPERAND(x + o) break;                                    \
        case CL_OP_MUL: CL_EPI_MAP_OPERAND(x * o) break;                                    \
        case CL_OP_SCALED_ADD: CL_EPI_MAP_OPERAND(x + a * o) break;                         \
        /* NaN on either side gives NaN, as np.maximum / np.minimum */                      \
        case CL_OP_MAX: CL_EPI_MAP_OPERAND(x > o || x != x ? x : o) break;                  \
        default: CL_EPI_MAP_OPERAND(x < o || x != x ? x : o) break;                         \
        }                                                                                   \
    }                                                                                       \
}

#define CL_EPI_REAL float
CL_EPI_DEFINE(f32_default, float, , expf, expm1f, tanhf, erff, logf, fabsf)
#if CL_EPI_X86
CL_EPI_DEFINE(f32_avx2, float, __attribute__((target("avx2,fma"))), expf, expm1f, tanhf,
              erff, logf, fabsf)
CL_EPI_DEFINE(f32_avx512, float, __attribute__((target("avx512f"))), expf, expm1f, tanhf,
              erff, logf, fabsf)
#endif
#undef CL_EPI_REAL
#define CL_EPI_REAL double
CL_EPI_DEFINE(f64_default, double, , exp, expm1, tanh, erf, log, fabs)
#if CL_EPI_X86
CL_EPI_DEFINE(f64_avx2, double, __attribute__((target("avx2,fma"))), exp, expm1, tanh, erf,
              log, fabs)
CL_EPI_DEFINE(f64_avx512, double, __attribute__((target("avx512f"))), exp, expm1, tanh, erf,
              log, fabs)
#endif
#undef CL_EPI_REAL

/* The entry points: the copy of the level in effect. */
#if CL_EPI_X86
#define CL_EPI_DISPATCH(NAME, T, ARGS)                                                      \
    if (cl_isa_in_effect == CL_ISA_AVX512) NAME##_##T##_avx512 ARGS;                       \
    else if (cl_isa_in_effect == CL_ISA_AVX2) NAME##_##T##_avx2 ARGS;                      \
    else NAME##_##T##_default ARGS;
#else
#define CL_EPI_DISPATCH(NAME, T, ARGS) NAME##_##T##_default ARGS;
#endif

#define CL_EPI_ENTRY(T, REAL_T)                                                             \
static void cl_epi_prologue_##T(const cl_epilogue *e, REAL_T *d, ptrdiff_t ld,              \
                                ptrdiff_t rows, ptrdiff_t cols, const REAL_T *bias) {       \
    CL_EPI_DISPATCH(cl_epi_prologue, T, (e, d, ld, rows, cols, bias))                       \
}                                                                                           \
static void cl_epi_apply_##T(const cl_epilogue *e, REAL_T *d, ptrdiff_t ld, ptrdiff_t rows, \
                             ptrdiff_t cols, ptrdiff_t m0, ptrdiff_t c0) {                  \
    CL_EPI_DISPATCH(cl_epi_apply, T, (e, d, ld, rows, cols, m0, c0))                        \
}
CL_EPI_ENTRY(f32, float)
CL_EPI_ENTRY(f64, double)

#undef CL_EPI_ENTRY
#undef CL_EPI_DISPATCH
#undef CL_EPI_DEFINE
#undef CL_EPI_MAP
#undef CL_EPI_MAP_OPERAND

#endif /* CONVLAB_EPILOGUE_H */
