/* Post-ops (SPEC §4) applied by the kernels themselves, to a block of dst they have just
 * written and that is still in cache, instead of in a second pass over the whole output.
 *
 * A block is `rows` rows of `cols` channels, rows `ld` elements apart; row i is output
 * row m0 + i of the call (image (m0 + i) / npix, pixel (m0 + i) % npix) and its first
 * channel is c0. Binary operands are indexed by those coordinates through their strides,
 * which are 0 on the axes they broadcast over.
 *
 * A `sum` post-op is fused only as the first post-op: the kernel then starts its
 * accumulation from scale * (prior dst) + bias (cl_epi_prologue_*) instead of from the
 * bias, so the prior contents are read exactly once, before they are overwritten. The
 * post-ops after it run in the epilogue (cl_epi_apply_*). Other orders are not fused
 * (convlab.postops decides).
 *
 * The element functions follow convlab.postops.apply formula by formula (sigmoid through
 * tanh, max/min propagating NaN like NumPy), in the problem's dtype. */
#ifndef CONVLAB_EPILOGUE_H
#define CONVLAB_EPILOGUE_H

#include <math.h>
#include <stddef.h>

/* Codes shared with convlab/kernels/_epilogue.pyx (OP_CODES there). */
enum {
    CL_OP_RELU = 0, CL_OP_TANH, CL_OP_SIGMOID, CL_OP_ELU, CL_OP_GELU_ERF, CL_OP_GELU_TANH,
    CL_OP_SWISH, CL_OP_CLIP, CL_OP_LINEAR, CL_OP_ABS, CL_OP_SQUARE, CL_OP_EXP, CL_OP_LOG,
    CL_OP_ADD, CL_OP_MUL, CL_OP_MAX, CL_OP_MIN
};

typedef struct {
    int kind;
    double a, b;                 /* parameters (relu's slope, clip's bounds, linear's a, b) */
    const void *operand;         /* binary: element (0, 0, 0) of an (N, pixels, OC) view */
    ptrdiff_t s_n, s_pix, s_ch;  /* its strides in elements */
} cl_postop;

typedef struct {
    int has_sum;                 /* the first post-op was a sum */
    double sum_scale;
    int nops;                    /* the post-ops after the sum */
    const cl_postop *ops;
    ptrdiff_t npix;              /* output pixels per image */
} cl_epilogue;

#define CL_EPI_DEFINE(SFX, REAL, EXP, EXPM1, TANH, ERF, LOG, FABS)                          \
/* d = scale * d + bias over the block: where a fused sum starts the accumulation. */       \
static void cl_epi_prologue_##SFX(const cl_epilogue *e, REAL *d, ptrdiff_t ld,              \
                                  ptrdiff_t rows, ptrdiff_t cols, const REAL *bias) {       \
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
static inline REAL cl_epi_sigmoid_##SFX(REAL x) {                                          \
    return (REAL)0.5 * (TANH((REAL)0.5 * x) + (REAL)1);                                     \
}                                                                                           \
                                                                                            \
static inline REAL cl_epi_eltwise_##SFX(int kind, REAL a, REAL b, REAL x) {                \
    switch (kind) {                                                                         \
    case CL_OP_RELU: return x >= 0 ? x : x * a;                                             \
    case CL_OP_TANH: return TANH(x);                                                        \
    case CL_OP_SIGMOID: return cl_epi_sigmoid_##SFX(x);                                     \
    case CL_OP_ELU: return x > 0 ? x : a * EXPM1(x);                                        \
    case CL_OP_GELU_ERF:                                                                    \
        return (REAL)0.5 * x * ((REAL)1 + ERF(x * (REAL)0.70710678118654752440));           \
    case CL_OP_GELU_TANH:                                                                   \
        return (REAL)0.5 * x * ((REAL)1 + TANH((REAL)0.79788456080286535588                 \
                                               * (x + (REAL)0.044715 * x * x * x)));        \
    case CL_OP_SWISH: return x * cl_epi_sigmoid_##SFX(a * x);                               \
    case CL_OP_CLIP: return x < a ? a : x > b ? b : x;                                      \
    case CL_OP_LINEAR: return a * x + b;                                                    \
    case CL_OP_ABS: return FABS(x);                                                         \
    case CL_OP_SQUARE: return x * x;                                                        \
    case CL_OP_EXP: return EXP(x);                                                          \
    default: return LOG(x);                                                                 \
    }                                                                                       \
}                                                                                           \
                                                                                            \
/* The post-ops after the sum, over the block, one post-op at a time. */                    \
static void cl_epi_apply_##SFX(const cl_epilogue *e, REAL *d, ptrdiff_t ld, ptrdiff_t rows, \
                               ptrdiff_t cols, ptrdiff_t m0, ptrdiff_t c0) {               \
    int k;                                                                                  \
    ptrdiff_t i, j;                                                                         \
    for (k = 0; k < e->nops; k++) {                                                         \
        const cl_postop *op = &e->ops[k];                                                   \
        const int kind = op->kind;                                                          \
        const REAL a = (REAL)op->a, b = (REAL)op->b;                                        \
        REAL *row = d;                                                                      \
        if (kind == CL_OP_RELU && a == 0) {                                                 \
            /* x < 0 ? 0 : x keeps NaN, as np.maximum(x, 0) does */                         \
            for (i = 0; i < rows; i++, row += ld)                                           \
                for (j = 0; j < cols; j++) row[j] = row[j] < 0 ? 0 : row[j];                \
        } else if (kind < CL_OP_ADD) {                                                      \
            for (i = 0; i < rows; i++, row += ld)                                           \
                for (j = 0; j < cols; j++) row[j] = cl_epi_eltwise_##SFX(kind, a, b, row[j]); \
        } else {                                                                            \
            const REAL *base = (const REAL *)op->operand;                                   \
            const ptrdiff_t sc = op->s_ch;                                                  \
            for (i = 0; i < rows; i++, row += ld) {                                         \
                const ptrdiff_t m = m0 + i, n = m / e->npix, p = m - n * e->npix;           \
                const REAL *o = base + n * op->s_n + p * op->s_pix + c0 * sc;               \
                switch (kind) {                                                             \
                case CL_OP_ADD:                                                             \
                    for (j = 0; j < cols; j++) row[j] += o[j * sc];                         \
                    break;                                                                  \
                case CL_OP_MUL:                                                             \
                    for (j = 0; j < cols; j++) row[j] *= o[j * sc];                         \
                    break;                                                                  \
                case CL_OP_MAX: /* NaN on either side gives NaN, as np.maximum */           \
                    for (j = 0; j < cols; j++)                                              \
                        row[j] = row[j] > o[j * sc] || row[j] != row[j] ? row[j] : o[j * sc]; \
                    break;                                                                  \
                default:                                                                    \
                    for (j = 0; j < cols; j++)                                              \
                        row[j] = row[j] < o[j * sc] || row[j] != row[j] ? row[j] : o[j * sc]; \
                }                                                                           \
            }                                                                               \
        }                                                                                   \
    }                                                                                       \
}

CL_EPI_DEFINE(f32, float, expf, expm1f, tanhf, erff, logf, fabsf)
CL_EPI_DEFINE(f64, double, exp, expm1, tanh, erf, log, fabs)

#undef CL_EPI_DEFINE

#endif /* CONVLAB_EPILOGUE_H */
