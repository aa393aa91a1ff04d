/* Register-blocked microkernels of the `direct` convolution, with run-time ISA dispatch.
 *
 * Layouts (canonical, C-contiguous), spatial ranks lifted to 3 by the caller:
 *   src (N, ID, IH, IW, IC), dst (N, OD, OH, OW, OC)
 *   dense weights     (G, KD, KH, KW, ICg, OCgp)  OCgp >= OCg, zero-padded to 64 bytes
 *   depthwise weights (KD, KH, KW, Gp)            Gp >= G, zero-padded to 64 bytes
 *   bias, padded like the weights' last axis: (G, OCgp) or (Gp,), zeros when absent.
 *
 * Work is split into independent "items" (one output row segment of one block of output
 * channels); items write disjoint parts of dst, so any thread may take any item. The
 * kernel body lives in direct_microkernel_impl.h, included once per element type and
 * target. Only this translation unit is compiled with target attributes, so the module
 * runs on any x86-64 CPU (and on other architectures through the portable variant). */
#ifndef CONVLAB_DIRECT_MICROKERNEL_H
#define CONVLAB_DIRECT_MICROKERNEL_H

#include <stddef.h>
#include <string.h>

/* ISA levels, widest last. CL_ISA_DEFAULT is whatever the baseline compiler flags give
 * (SSE2 on x86-64), and the only level on other architectures and compilers. */
enum { CL_ISA_DEFAULT = 0, CL_ISA_AVX2 = 1, CL_ISA_AVX512 = 2, CL_ISA_COUNT = 3 };

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__)) && !defined(CONVLAB_NO_ISA_DISPATCH)
#define CL_X86_DISPATCH 1
#else
#define CL_X86_DISPATCH 0
#endif

/* The geometry shared by every item of one call. Filled by the caller (the first block of
 * fields) and by cl_plan (the rest). */
typedef struct {
    ptrdiff_t N, ID, IH, IW, IC;
    ptrdiff_t OD, OH, OW, OC;
    ptrdiff_t G, KD, KH, KW, ICg, OCg, OCgp;   /* OCgp: padded last weight axis (Gp if depthwise) */
    ptrdiff_t sd, sh, sw, dd, dh, dw, pd, ph, pw;
    int depthwise;
    /* planned */
    int isa;                /* ISA level the items run with */
    ptrdiff_t V;            /* vector width in elements at that level */
    ptrdiff_t nvec;         /* vectors across the channel axis that is blocked */
    ptrdiff_t nchunk;       /* channel chunks per group (depthwise: incl. a scalar tail chunk) */
    ptrdiff_t nvchunk;      /* chunks made of whole vectors */
    ptrdiff_t seglen, nseg; /* output-row segments */
    ptrdiff_t ow_lo, ow_hi; /* columns whose every kernel tap along W is inside the input */
    ptrdiff_t nitems;
} cl_geom;

/* floor(a / b) for b > 0, correct for negative a (C's '/' truncates). */
static inline ptrdiff_t cl_floordiv(ptrdiff_t a, ptrdiff_t b) {
    return a >= 0 ? a / b : -((-a + b - 1) / b);
}

static inline ptrdiff_t cl_ceildiv(ptrdiff_t a, ptrdiff_t b) { return -cl_floordiv(-a, b); }

/* Taps k in [lo, hi) of a kernel axis with extent K whose input index
 * base + k * dil falls inside [0, I). lo == hi when none does. */
static inline void cl_tap_range(ptrdiff_t base, ptrdiff_t dil, ptrdiff_t K, ptrdiff_t I,
                                ptrdiff_t *lo, ptrdiff_t *hi) {
    ptrdiff_t l = base >= 0 ? 0 : cl_ceildiv(-base, dil);
    ptrdiff_t h = cl_ceildiv(I - base, dil);
    if (l > K) l = K;
    if (h > K) h = K;
    if (h < l) h = l;
    *lo = l;
    *hi = h;
}

/* Arguments of one microkernel call: P output pixels x J vectors of channels. */
typedef struct {
    const void *s;          /* src at the first pixel's first valid tap, first channel */
    ptrdiff_t s_pix, s_kd, s_kh, s_kw;
    const void *w;          /* weights at the first valid tap, first (input) channel */
    ptrdiff_t w_kd, w_kh, w_kw, w_ic;
    ptrdiff_t nkd, nkh, nkw, nic;
    const void *bias;       /* padded: J full vectors are readable */
    void *d;                /* dst at the first pixel, first channel */
    ptrdiff_t d_pix;
    ptrdiff_t nstore;       /* channels to store (<= J * V) */
    /* depthwise only: a flat list of taps, as src and weight offsets from s and w */
    const ptrdiff_t *soff, *woff;
    ptrdiff_t ntap;
    int accumulate;         /* start from dst instead of bias (a later batch of taps) */
} cl_kargs;

/* Taps per depthwise batch: enough for any 2-D kernel up to 16x16 or 3-D up to 6x6x6;
 * larger kernels run in several batches that accumulate into dst. */
#define CL_TAP_BATCH 256

#if defined(__GNUC__)
/* GCC vector extensions: one source for every vector width; clang accepts them too. */
#define CL_VECTOR_EXT 1
#define CL_AI inline __attribute__((always_inline))
#define CL_UNROLL _Pragma("GCC unroll 16")
#else
#define CL_VECTOR_EXT 0
#define CL_AI inline
#define CL_UNROLL
#endif

#define CL_CAT2_(a, b) a##_##b
#define CL_CAT2(a, b) CL_CAT2_(a, b)

#define CL_UPTO4(X, J) X(1, J) X(2, J) X(3, J) X(4, J)
#define CL_UPTO6(X, J) CL_UPTO4(X, J) X(5, J) X(6, J)
#define CL_UPTO8(X, J) CL_UPTO6(X, J) X(7, J) X(8, J)
#define CL_UPTO12(X, J) CL_UPTO8(X, J) X(9, J) X(10, J) X(11, J) X(12, J)

/* ------------------------------------------------------------------ portable level
 * Vector width 16 bytes: SSE2 on x86-64, NEON on AArch64, scalar code elsewhere. 16
 * vector registers and possibly no FMA: 8 accumulators, plus weights and a temporary. */
#define CL_TGT
#define CL_LEVEL default
#if CL_VECTOR_EXT
#define CL_VBYTES 16
#else
#define CL_VBYTES sizeof(CL_REAL)
#endif
#define CL_DENSE_JMAX 2
#define CL_DENSE_PMAX_TABLE {0, 8, 4}
#define CL_DENSE_SHAPES(X) CL_UPTO8(X, 1) CL_UPTO4(X, 2)
#define CL_DW_JMAX 2
#define CL_DW_PMAX_TABLE {0, 8, 4}
#define CL_DW_SHAPES(X) CL_UPTO8(X, 1) CL_UPTO4(X, 2)

#define CL_REAL float
#define CL_TYPE f32
#include "direct_microkernel_impl.h"
#undef CL_REAL
#undef CL_TYPE
#define CL_REAL double
#define CL_TYPE f64
#include "direct_microkernel_impl.h"
#undef CL_REAL
#undef CL_TYPE

#undef CL_TGT
#undef CL_LEVEL
#undef CL_VBYTES
#undef CL_DENSE_JMAX
#undef CL_DENSE_PMAX_TABLE
#undef CL_DENSE_SHAPES
#undef CL_DW_JMAX
#undef CL_DW_PMAX_TABLE
#undef CL_DW_SHAPES

#if CL_X86_DISPATCH
/* ------------------------------------------------------------------ AVX2 + FMA
 * 16 ymm registers: 12 accumulators, 2 weight vectors, 1 broadcast. */
#define CL_TGT __attribute__((target("avx2,fma")))
#define CL_LEVEL avx2
#define CL_VBYTES 32
#define CL_DENSE_JMAX 2
#define CL_DENSE_PMAX_TABLE {0, 12, 6}
#define CL_DENSE_SHAPES(X) CL_UPTO12(X, 1) CL_UPTO6(X, 2)
#define CL_DW_JMAX 2
#define CL_DW_PMAX_TABLE {0, 8, 6}
#define CL_DW_SHAPES(X) CL_UPTO8(X, 1) CL_UPTO6(X, 2)

#define CL_REAL float
#define CL_TYPE f32
#include "direct_microkernel_impl.h"
#undef CL_REAL
#undef CL_TYPE
#define CL_REAL double
#define CL_TYPE f64
#include "direct_microkernel_impl.h"
#undef CL_REAL
#undef CL_TYPE

#undef CL_TGT
#undef CL_LEVEL
#undef CL_VBYTES
#undef CL_DENSE_JMAX
#undef CL_DENSE_PMAX_TABLE
#undef CL_DENSE_SHAPES
#undef CL_DW_JMAX
#undef CL_DW_PMAX_TABLE
#undef CL_DW_SHAPES

/* ------------------------------------------------------------------ AVX-512F
 * 32 zmm registers: 24 accumulators, up to 4 weight vectors, broadcasts from memory. */
#define CL_TGT __attribute__((target("avx512f")))
#define CL_LEVEL avx512
#define CL_VBYTES 64
#define CL_DENSE_JMAX 4
#define CL_DENSE_PMAX_TABLE {0, 12, 12, 8, 6}
#define CL_DENSE_SHAPES(X) CL_UPTO12(X, 1) CL_UPTO12(X, 2) CL_UPTO8(X, 3) CL_UPTO6(X, 4)
#define CL_DW_JMAX 4
#define CL_DW_PMAX_TABLE {0, 12, 12, 8, 6}
#define CL_DW_SHAPES(X) CL_UPTO12(X, 1) CL_UPTO12(X, 2) CL_UPTO8(X, 3) CL_UPTO6(X, 4)

#define CL_REAL float
#define CL_TYPE f32
#include "direct_microkernel_impl.h"
#undef CL_REAL
#undef CL_TYPE
#define CL_REAL double
#define CL_TYPE f64
#include "direct_microkernel_impl.h"
#undef CL_REAL
#undef CL_TYPE

#undef CL_TGT
#undef CL_LEVEL
#undef CL_VBYTES
#undef CL_DENSE_JMAX
#undef CL_DENSE_PMAX_TABLE
#undef CL_DENSE_SHAPES
#undef CL_DW_JMAX
#undef CL_DW_PMAX_TABLE
#undef CL_DW_SHAPES
#endif /* CL_X86_DISPATCH */

/* ------------------------------------------------------------------ dispatch */

/* The widest level this CPU (and its OS, which must save the wide registers) runs. */
static int cl_isa_supported(int isa) {
    if (isa == CL_ISA_DEFAULT) return 1;
#if CL_X86_DISPATCH
    __builtin_cpu_init();
    if (isa == CL_ISA_AVX2)
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (isa == CL_ISA_AVX512) return __builtin_cpu_supports("avx512f");
#endif
    return 0;
}

static int cl_isa_best(void) {
    int isa;
    for (isa = CL_ISA_COUNT - 1; isa > CL_ISA_DEFAULT; isa--)
        if (cl_isa_supported(isa)) return isa;
    return CL_ISA_DEFAULT;
}

/* Vector width in elements of `itemsize` bytes at level `isa`. */
static ptrdiff_t cl_isa_lanes(int isa, size_t itemsize) {
    ptrdiff_t bytes = isa == CL_ISA_AVX512 ? 64 : isa == CL_ISA_AVX2 ? 32
                      : CL_VECTOR_EXT ? 16 : (ptrdiff_t)itemsize;
    return bytes / (ptrdiff_t)itemsize;
}

static int cl_isa_jmax(int isa, int depthwise) {
    (void)depthwise;
    return isa == CL_ISA_AVX512 ? 4 : 2;
}

/* Decide the item decomposition of one call for `isa` (at most the widest supported
 * level), using about `threads` threads. Returns the number of items. */
static ptrdiff_t cl_plan(cl_geom *g, int isa, int threads, size_t itemsize) {
    ptrdiff_t channels, rows, units, want, jmax;
    channels = g->depthwise ? g->G : g->OCg;
    if (g->depthwise) {
        /* Only whole vectors are vectorised there; the rest runs scalar. */
        while (isa > CL_ISA_DEFAULT && cl_isa_lanes(isa, itemsize) > channels)
            isa--;
    } else {
        /* A narrower vector that still covers every channel does the same work. */
        while (isa > CL_ISA_DEFAULT && cl_isa_lanes(isa - 1, itemsize) >= channels)
            isa--;
    }
    g->isa = isa;
    g->V = cl_isa_lanes(isa, itemsize);
    jmax = cl_isa_jmax(isa, g->depthwise);
    if (g->depthwise) {
        g->nvec = g->G / g->V;            /* whole vectors; the rest is a scalar chunk */
        g->nvchunk = (g->nvec + jmax - 1) / jmax;
        g->nchunk = g->nvchunk + (g->G % g->V != 0);
    } else {
        g->nvec = (g->OCg + g->V - 1) / g->V;
        g->nvchunk = (g->nvec + jmax - 1) / jmax;
        g->nchunk = g->nvchunk;
    }
    /* Columns whose taps along W all land inside the input. */
    g->ow_lo = g->pw > 0 ? cl_ceildiv(g->pw, g->sw) : 0;
    g->ow_hi = cl_floordiv(g->IW - 1 - (g->KW - 1) * g->dw + g->pw, g->sw) + 1;
    if (g->ow_lo > g->OW) g->ow_lo = g->OW;
    if (g->ow_hi > g->OW) g->ow_hi = g->OW;
    if (g->ow_hi < g->ow_lo) g->ow_hi = g->ow_lo;
    /* Rows alone may not feed every thread (1-D problems, tiny images): then also cut
     * rows into segments, each long enough to keep the microkernel's pixel blocks whole. */
    rows = (g->depthwise ? 1 : g->G) * g->nchunk * g->N * g->OD * g->OH;
    want = 8 * (ptrdiff_t)(threads > 0 ? threads : 1);
    g->seglen = g->OW;
    g->nseg = 1;
    if (rows < want && g->OW > 48) {
        units = (want + rows - 1) / rows;
        g->seglen = (g->OW + units - 1) / units;
        if (g->seglen < 48) g->seglen = 48;
        g->nseg = (g->OW + g->seglen - 1) / g->seglen;
    }
    g->nitems = rows * g->nseg;
    return g->nitems;
}

/* Run one item. Every level's code exists in the binary; g->isa was chosen by cl_plan. */
#define CL_DEFINE_ITEM(T, REAL)                                                              \
static void cl_item_##T(const cl_geom *g, const REAL *src, const REAL *w, const REAL *bias, \
                        REAL *dst, ptrdiff_t item) {                                         \
    CL_ITEM_SWITCH(T)                                                                        \
}
#if CL_X86_DISPATCH
#define CL_ITEM_SWITCH(T)                                                                    \
    switch (g->isa) {                                                                        \
    case CL_ISA_AVX512: cl_item_##T##_avx512(g, src, w, bias, dst, item); break;            \
    case CL_ISA_AVX2: cl_item_##T##_avx2(g, src, w, bias, dst, item); break;                \
    default: cl_item_##T##_default(g, src, w, bias, dst, item); break;                       \
    }
#else
#define CL_ITEM_SWITCH(T) cl_item_##T##_default(g, src, w, bias, dst, item);
#endif
CL_DEFINE_ITEM(f32, float)
CL_DEFINE_ITEM(f64, double)

#endif /* CONVLAB_DIRECT_MICROKERNEL_H */
