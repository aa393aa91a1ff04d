/* Register-blocked microkernels of the `direct` convolution, with run-time ISA dispatch.
 *
 * Layouts (canonical, C-contiguous), spatial ranks lifted to 3 by the caller:
 *   src (N, ID, IH, IW, IC), dst (N, OD, OH, OW, OC)
 *   dense weights     (G, KD, KH, KW, ICg, OCgp)  OCgp >= OCg, zero-padded to 64 bytes
 *   depthwise weights (KD, KH, KW, Gp)            Gp >= G, zero-padded to 64 bytes
 *   bias, padded like the weights' last axis: (G, OCgp) or (Gp,), zeros when absent.
 *
 * Work is split into independent "items" that write disjoint parts of dst, so any thread
 * may take any item: a dense item is a run of output pixels (flattened over the spatial
 * axes of one image) for one chunk of output channels of one group; a depthwise item is
 * an output row segment over a group of channel chunks. Inside an item, microkernels
 * compute blocks of P pixels x J vectors of channels in registers.
 *
 * The kernel bodies live in direct_microkernel_impl.h, included once per element type
 * and ISA level; the wide levels carry GCC target attributes and are chosen at run time
 * (isa_level.h), so the module runs on any x86-64 CPU and builds on other architectures
 * and compilers with the portable level only. */
#ifndef CONVLAB_DIRECT_MICROKERNEL_H
#define CONVLAB_DIRECT_MICROKERNEL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "epilogue.h"
#include "isa_level.h"

/* The geometry shared by every item of one call. Filled by the caller (the first block of
 * fields) and by cl_plan (the rest). */
typedef struct {
    ptrdiff_t N, ID, IH, IW, IC;
    ptrdiff_t ICs;          /* depthwise: src elements from one pixel to the next (>= IC) */
    ptrdiff_t OD, OH, OW, OC;
    ptrdiff_t G, KD, KH, KW, ICg, OCg, OCgp;   /* OCgp: padded last weight axis (Gp if depthwise) */
    /* dense: elements between consecutive (tap, input channel) rows of the weights, and
     * between groups: OCgp and taps * ICg * OCgp for packed weights; OC and OCg for a
     * grouped view of XIO weights whose OC/G fills whole vectors (no copy per call) */
    ptrdiff_t w_row, w_group;
    ptrdiff_t sd, sh, sw, dd, dh, dw, pd, ph, pw;
    int depthwise;
    /* dense: weights blocked by channel chunk (see cl_dense_chunks): chunk c, vectors
     * [v0, v0 + J) of its group, holds its taps x ICg rows of J vectors together, at
     * v0 * V * taps * ICg elements from the group's start. Each item then reads its
     * chunk's weights as one contiguous run instead of rows w_row apart (in the packed
     * layout, rows of 2048 float32 channels are 8 KiB apart: a page per row, which the
     * hardware prefetchers do not cross), and needs no per-pass copy (wpack). The
     * weights start on a cache line, as the copies did (direct.prepare_weights). */
    int blocked;
    /* planned */
    int isa;                /* ISA level the items run with */
    ptrdiff_t V;            /* vector width in elements at that level */
    ptrdiff_t nvec;         /* vectors across the channel axis that is blocked */
    ptrdiff_t nchunk;       /* channel chunks per group */
    /* Depthwise: src's channel c sits on a vector boundary when c == cshift (mod V)
     * (the caller sets cshift from src's address). The nvec vectors of a chunk then
     * start at cshift; channels before and after them get one overlapping vector each
     * (head, tail), so every load of the hot loop is aligned. */
    ptrdiff_t cshift;
    int head, tail;
    ptrdiff_t seglen, nseg; /* output-row segments (dense: of the flattened pixels) */
    ptrdiff_t icb;          /* dense: input channels per pass over a segment */
    int stream_dst;         /* dense: dst is written with non-temporal stores (see cl_plan) */
    int prefetch_src;       /* dense 1x1: each pixel block prefetches the next one's src */
    int whole_pixels;       /* dense: an item takes every channel chunk of its group, chunk
                             * loop innermost (see cl_whole_pixel_bytes) */
    ptrdiff_t item_chunks;  /* dense: channel chunks an item takes, at most
                             * CL_WHOLE_PIXEL_CHUNKS: 1, every one (whole_pixels), or a
                             * copy group (see cl_copy_group_bytes); the last item of a
                             * group of chunks may take fewer */
    ptrdiff_t ncgroup;      /* depthwise: groups of channel chunks, one per item */
    ptrdiff_t ow_lo, ow_hi; /* columns whose every kernel tap along W is inside the input */
    ptrdiff_t nitems;
    const void *zeros;      /* dense: KW * ICg zeros of the element type, read in padding */
    /* Dense: when wpack_elems > 0, each thread copies a pass's weights for its item's
     * channel chunks (every tap, icb channels, their vectors) into its own wpack_elems elements at
     * wpack (64-byte aligned, set by the caller) before the pass's pixel blocks read
     * them. In place, consecutive input channels of a pass lie w_row elements apart; with
     * w_row a multiple of 256 (1 KiB of float32) their lines crowd a few L1 sets, so every
     * pixel block re-fetched them (perf on ResNet-50 res5a_branch2c: the weight loads
     * held a quarter of the kernel's samples). */
    ptrdiff_t wpack_elems;
    void *wpack;
    /* Post-ops applied to each block as it is finished, NULL for none (epilogue.h). A
     * depthwise call never has a sum here: its head and tail vectors overlap the chunks'
     * channels, so those channels are written twice, and only recomputing from the bias
     * makes that harmless. */
    const cl_epilogue *epi;
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
    /* Divisions cost tens of cycles; dilation 1 (the usual case) needs none. */
    ptrdiff_t l = base >= 0 ? 0 : dil == 1 ? -base : cl_ceildiv(-base, dil);
    ptrdiff_t h = dil == 1 ? I - base : cl_ceildiv(I - base, dil);
    if (l > K) l = K;
    if (h > K) h = K;
    if (h < l) h = l;
    *lo = l;
    *hi = h;
}

/* Arguments of one microkernel call: P output pixels x J vectors of channels. */
typedef struct {
    const void *s;          /* src at the first pixel's first valid tap, first channel */
    /* s_pix: depthwise, and dense blocks of a pointwise geometry (0 for the others,
     * which use poff): the step from one pixel's src to the next */
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
    /* depthwise row kernel: the block's first / last input column lies in the padding
     * (s then points at the first column inside the input) */
    int skip_first, skip_last;
    /* dense: pixel p's tap (0, 0, 0) is input position (pd0, ph0, pw0)[p], at offset
     * poff[p] from s (both may lie in the padding); tap (kd, kh, kw) adds
     * (kd * dd, kh * dh, kw * c_kw) and kd * s_kd + kh * s_kh + kw * s_kw. A position
     * outside the input (ID, IH, IW) reads the zeros at `zero` instead. */
    const ptrdiff_t *poff, *pd0, *ph0, *pw0;
    ptrdiff_t dd, dh, c_kw, ID, IH, IW;
    const void *zero;       /* KW * nic zeros */
    int merge;              /* W taps with all pixels inside may run as one loop */
    int stream;             /* dense: store the block with non-temporal stores */
    /* dense, one tap: the next block's src (its first pixel, this pass's first channel),
     * pixels pf_pix apart, fetched a cache line per pixel as this block reads its own;
     * NULL for none */
    const void *pf;
    ptrdiff_t pf_pix;
    /* dense, a block whose every pixel has all its taps inside the input, in one pass
     * over all input channels: the (kd, kh, kw, ic) taps as one flat list of ntoff src
     * offsets from each pixel's tap 0 (weights step w_ic from tap to tap). The block then
     * runs one loop over them, with no per-row setup; NULL for the nested loops. */
    const ptrdiff_t *toff;
    ptrdiff_t ntoff;
} cl_kargs;

/* Taps per depthwise batch: enough for any 2-D kernel up to 16x16 or 3-D up to 6x6x6;
 * larger kernels run in several batches that accumulate into dst. */
#define CL_TAP_BATCH 256

/* Dense items whose reduction (taps x input channels of a group) has at most this many
 * terms, and whose runs of adjacent W taps are shorter than cl_flat_max_run, run their
 * interior pixel blocks over one flat list of taps (cl_kargs.toff) instead of a loop per
 * kernel row: with few input channels (the first layer of a network, IC = 3) a row's run
 * is 9-21 steps, and the per-row setup of P pixel pointers cost as much as the steps.
 * 0 turns it off. Variables so that tests and experiments can vary them
 * (_direct.set_flat_taps). */
#define CL_FLAT_TAPS_CAP 1024

/* Dense items take every channel chunk of their group, each pixel block running the
 * chunks one after the other, when the group's weights (taps x ICg x OCgp) take at most
 * this many bytes, there are at most CL_WHOLE_PIXEL_CHUNKS chunks and one pass takes every
 * input channel. With one chunk per item, each item wrote one cache line of every
 * 64-channel pixel in a pass of its own over dst, and where the reduction is short (the
 * first layer of a network) those scattered writes, not the arithmetic, set the pace;
 * chunk by chunk, a block's pixels are written whole and in address order. Every pixel
 * block then reads all of the group's weights, so direct.py sets the limit from the CPU's
 * L2 (_direct.set_whole_pixels); 32 KiB until it does. 0 turns it off. */
#define CL_WHOLE_PIXEL_CHUNKS 16

/* Elements of the per-thread buffer that holds a border block's receptive fields (see
 * dense_gather): blocks whose P pixels' flat tap lists need more run the nested loops. */
#define CL_PATCH_ELEMS 2048
static ptrdiff_t cl_whole_pixel_bytes = 32 * 1024;

/* A dense call that copies its weights per pass (wpack), whose weights exceed
 * cl_pass_max_bytes (so they come from beyond L2) and whose images have at most
 * CL_COPY_GROUP_MAX_PIXELS output pixels (so each copied weight feeds few pixel blocks,
 * and the copy is a large share of the call) gives each item a copy group of adjacent
 * channel chunks, about this many bytes of each weight row, rather than one chunk: the
 * copy then reads runs of whole cache lines along a row instead of one or two lines per
 * row, and rows of 2048 float32 channels lie 8 KiB apart. On an AMD EPYC (Zen 3, 2
 * threads) a lone copy of 8 MiB of such rows ran 2.9 ms 64 bytes a row, 1.3 ms 512 bytes
 * a row and 0.8 ms 1 KiB a row, and the copy held half of direct's one-shot time on
 * ResNet-50's res5 layers (perf). Each thread keeps at least two groups. On larger images
 * (res4, 196 pixels) grouping lost 5-10%: the copy is a small share there, and fewer,
 * wider items balance worse. 0 copies chunk by chunk. A variable so that tests and
 * experiments can vary it (_direct.set_copy_group). */
static ptrdiff_t cl_copy_group_bytes = 1024;
#define CL_COPY_GROUP_MAX_PIXELS 64

/* The per-pass weight copy (wpack) prefetches the row this many rows ahead (0: none):
 * rows far apart defeat the hardware prefetchers, and the copy otherwise waits on each
 * row in turn. On an AMD EPYC (Zen 3), a lone copy of 8 MiB of rows 8 KiB apart, 512
 * bytes a row, ran 1.3 ms without and 0.5 ms with 8 rows ahead. A variable so that
 * experiments can vary it (_direct.set_copy_group). */
static ptrdiff_t cl_copy_prefetch_rows = 8;
static ptrdiff_t cl_flat_max_taps = 1024;
static ptrdiff_t cl_flat_max_run = 64;

#if defined(__GNUC__) && !defined(CONVLAB_NO_VECTOR_EXT)
/* GCC vector extensions: one source for every vector width; clang accepts them too.
 * Without them (or with CONVLAB_NO_VECTOR_EXT, to test that path) the same code runs
 * on scalars. */
#define CL_VECTOR_EXT 1
#define CL_AI inline __attribute__((always_inline))
#define CL_NOINLINE __attribute__((noinline))
#define CL_UNROLL _Pragma("GCC unroll 64")
#else
#define CL_VECTOR_EXT 0
#define CL_AI inline
#define CL_NOINLINE
#define CL_UNROLL
#endif

/* Non-temporal stores of one vector at a vector-aligned address, per element type and
 * vector width. Baseline x86-64 has SSE2's; elsewhere the kernels store normally. */
#if CL_X86_DISPATCH && CL_VECTOR_EXT && defined(__SSE2__)
#include <immintrin.h>
#define CL_CAN_STREAM 1
#define CL_STREAM_f32_16(p, v) _mm_stream_ps((float *)(p), (__m128)(v))
#define CL_STREAM_f64_16(p, v) _mm_stream_pd((double *)(p), (__m128d)(v))
#define CL_STREAM_f32_32(p, v) _mm256_stream_ps((float *)(p), (__m256)(v))
#define CL_STREAM_f64_32(p, v) _mm256_stream_pd((double *)(p), (__m256d)(v))
#define CL_STREAM_f32_64(p, v) _mm512_stream_ps((float *)(p), (__m512)(v))
#define CL_STREAM_f64_64(p, v) _mm512_stream_pd((double *)(p), (__m512d)(v))
#else
#define CL_CAN_STREAM 0
#endif

/* A read prefetch into every cache level, where the compiler has one. */
#if defined(__GNUC__)
#define CL_PREFETCH(p) __builtin_prefetch((p), 0, 3)
#else
#define CL_PREFETCH(p) ((void)(p))
#endif

#define CL_CAT2_(a, b) a##_##b
#define CL_CAT2(a, b) CL_CAT2_(a, b)

#define CL_UPTO4(X, J) X(1, J) X(2, J) X(3, J) X(4, J)
#define CL_UPTO6(X, J) CL_UPTO4(X, J) X(5, J) X(6, J)
#define CL_UPTO8(X, J) CL_UPTO6(X, J) X(7, J) X(8, J)
#define CL_UPTO10(X, J) CL_UPTO8(X, J) X(9, J) X(10, J)
#define CL_UPTO12(X, J) CL_UPTO10(X, J) X(11, J) X(12, J)

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
#define CL_DW_PMAX_TABLE {0, 8}
#define CL_DW_SHAPES(X) CL_UPTO8(X, 1)
#define CL_DW3_PMAX_TABLE {0, 8}
#define CL_DW3_SHAPES(X) CL_UPTO8(X, 1)

#include "direct_microkernel_level.h"

#if CL_X86_DISPATCH
/* ------------------------------------------------------------------ AVX2 + FMA
 * 16 ymm registers: 12 accumulators, 2 weight vectors, 1 broadcast. */
#define CL_TGT __attribute__((target("avx2,fma")))
#define CL_LEVEL avx2
#define CL_VBYTES 32
#define CL_DENSE_JMAX 2
#define CL_DENSE_PMAX_TABLE {0, 12, 6}
#define CL_DENSE_SHAPES(X) CL_UPTO12(X, 1) CL_UPTO6(X, 2)
#define CL_DW_PMAX_TABLE {0, 12}
#define CL_DW_SHAPES(X) CL_UPTO12(X, 1)
#define CL_DW3_PMAX_TABLE {0, 10}
#define CL_DW3_SHAPES(X) CL_UPTO10(X, 1)

#include "direct_microkernel_level.h"

/* ------------------------------------------------------------------ AVX-512F
 * 32 zmm registers: 24 accumulators, up to 4 weight vectors, broadcasts from memory. */
#define CL_TGT __attribute__((target("avx512f")))
#define CL_LEVEL avx512
#define CL_VBYTES 64
#define CL_DENSE_JMAX 4
#define CL_DENSE_PMAX_TABLE {0, 12, 12, 8, 6}
#define CL_DENSE_SHAPES(X) CL_UPTO12(X, 1) CL_UPTO12(X, 2) CL_UPTO8(X, 3) CL_UPTO6(X, 4)
#define CL_DW_PMAX_TABLE {0, 12, 12}
#define CL_DW_SHAPES(X) CL_UPTO12(X, 1) CL_UPTO12(X, 2)
#define CL_DW3_PMAX_TABLE {0, 10, 10}
#define CL_DW3_SHAPES(X) CL_UPTO10(X, 1) CL_UPTO10(X, 2)

#include "direct_microkernel_level.h"
#endif /* CL_X86_DISPATCH */

/* ------------------------------------------------------------------ dispatch */

/* Vector width in elements of `itemsize` bytes at level `isa`. */
static ptrdiff_t cl_isa_lanes(int isa, size_t itemsize) {
    ptrdiff_t bytes = isa == CL_ISA_AVX512 ? 64 : isa == CL_ISA_AVX2 ? 32
                      : CL_VECTOR_EXT ? 16 : (ptrdiff_t)itemsize;
    return bytes / (ptrdiff_t)itemsize;
}

/* Vectors of channels per microkernel call (the CL_*_PMAX_TABLEs have this many rows).
 * Depthwise keeps J small: its row kernel holds 3 * J weight vectors besides P * J
 * accumulators. */
static int cl_isa_jmax(int isa, int depthwise) {
    if (depthwise) return isa == CL_ISA_AVX512 ? 2 : 1;
    return isa == CL_ISA_AVX512 ? 4 : 2;
}

/* Largest per-thread copy of one pass's weights (dense); larger passes read in place.
 * A variable so that tests and experiments can turn the copies off (0). */
static ptrdiff_t cl_wpack_max_bytes = 1 << 20;

/* A dense pass's weights (taps x icb input channels x J vectors) should fit this many
 * bytes, but a pass takes at least cl_pass_min_channels input channels (see cl_plan).
 * Variables so that experiments can vary them (_direct.set_pass_size). */
static ptrdiff_t cl_pass_bytes = 256 * 1024;
static ptrdiff_t cl_pass_min_channels = 64;

/* ... but cl_pass_min_channels give way where they would make a pass larger than this
 * (half of a core's L2: direct.py sets it from the CPU's L2 size, _direct.set_pass_limit),
 * since every pixel block of the run would then read the pass's weights from beyond L2:
 * such a pass takes as many whole cache lines of src channels as fit, at least one. On
 * V-Net's 5x5x5 layers (125 taps x 64 channels x 4 vectors: 2 MiB passes) on an Intel
 * Xeon (family 6 model 207, 2 MiB L2), direct's kernel alone, 2 threads
 * (bench/direct_tiling.py; bench/results/direct_pass_limit_2026-11-27_xeon-emr.txt):
 * 1 MiB passes (32 channels) 2.4-2.6x faster on 128-256 channels, 1.1x on 64, where
 * passes of 1.4 MiB gained 1.1-1.25x; 3x3x3 layers (442 KiB passes) ran 0.94x with 32
 * channels, and keep 64 under this limit. */
static ptrdiff_t cl_pass_max_bytes = 1024 * 1024;

/* Dense dst of at least this many bytes is written with non-temporal stores (0: never),
 * which do not first read into the cache the lines they overwrite. A smaller dst fits in
 * L2 (1 MiB per core on the CPU it was measured on), where the next layer may find it. On
 * an AMD EPYC (Zen 4), direct's kernel alone, 2 threads (bench/direct_tiling.py;
 * bench/results/direct_streaming_2026-11-24_epyc_*.txt), geo-mean speed-up over never streaming:
 * ResNet-50 at batch 8 1.074 (from 1 MiB), 1.051 (from 4 MiB), 1.074 (always); at batch 1
 * 0.999, 0.995, 1.007, i.e. noise; VGG-19 1.015 and GoogLeNet-v2 1.010 (from 4 MiB). Two
 * ResNet-50 bottleneck blocks run as one chain (each layer reading the last one's dst)
 * took as long streamed. A variable so that experiments can vary it
 * (_direct.set_streaming). */
static ptrdiff_t cl_stream_min_bytes = 1024 * 1024;

/* A 1x1 convolution whose src takes at least this many bytes (0: never) has each pixel
 * block fetch the next block's src, one cache line per pixel for each line of its own
 * (cl_kargs.pf). Such a src is read once, from memory: larger than the L3 share that
 * would keep it between calls, and the hardware prefetchers, which stop at page
 * boundaries and see P interleaved streams, left the kernel waiting on it. On an AMD
 * EPYC (Zen 4), direct's kernel alone, 2 threads, ResNet-50 at batch 8
 * (bench/direct_tiling.py; bench/results/direct_prefetch_2026-11-24_epyc_resnet_50_mb8.txt),
 * speed-up over never prefetching: res2b_branch2a (src 25.7 MB) 1.12, res3a_branch2a 1.06,
 * res3a_branch1 1.03, the other layers 0.99-1.01. Prefetching every 1x1 src lost 1% on
 * the 6.4 MB ones (res2a_branch1, res5a_branch1) and gained nothing at batch 1, where src
 * stays in L3. A variable so that experiments can vary it (_direct.set_prefetch). */
static ptrdiff_t cl_prefetch_min_bytes = 16 * 1024 * 1024;

/* The level a dense call with OCg output channels per group runs at, from `isa` (a
 * narrower vector that still covers every channel does the same work), its vector width,
 * the vectors across OCg, and the chunks of at most jmax vectors they are cut into. */
static ptrdiff_t cl_dense_chunks(ptrdiff_t OCg, int *isa, size_t itemsize, ptrdiff_t *V,
                                 ptrdiff_t *nvec) {
    while (*isa > CL_ISA_DEFAULT && cl_isa_lanes(*isa - 1, itemsize) >= OCg)
        (*isa)--;
    *V = cl_isa_lanes(*isa, itemsize);
    *nvec = (OCg + *V - 1) / *V;
    return (*nvec + cl_isa_jmax(*isa, 0) - 1) / cl_isa_jmax(*isa, 0);
}

/* Decide the item decomposition of one call for `isa` (at most the widest supported
 * level), using about `threads` threads. Returns the number of items. */
static ptrdiff_t cl_plan(cl_geom *g, int isa, int threads, size_t itemsize) {
    ptrdiff_t channels, rows, units, want, jmax;
    g->wpack_elems = 0;
    g->whole_pixels = 0;
    g->item_chunks = 1;
    g->stream_dst = 0;
    g->prefetch_src = 0;
    channels = g->depthwise ? g->G : g->OCg;
    if (g->depthwise) {
        /* Only whole vectors are vectorised there; the rest runs scalar. */
        while (isa > CL_ISA_DEFAULT && cl_isa_lanes(isa, itemsize) > channels)
            isa--;
    } else {
        ptrdiff_t lanes, nvec;
        cl_dense_chunks(channels, &isa, itemsize, &lanes, &nvec);
    }
    g->isa = isa;
    g->V = cl_isa_lanes(isa, itemsize);
    jmax = cl_isa_jmax(isa, g->depthwise);
    if (g->depthwise) {
        g->head = g->tail = 0;
        if (g->G < g->V) {
            g->nvec = 0;                  /* fewer channels than a vector: scalar code */
            g->nchunk = 1;
        } else {
            ptrdiff_t shift = g->cshift % g->V;
            if (shift > g->G - g->V) shift = 0;
            g->cshift = shift;
            g->nvec = (g->G - shift) / g->V;
            g->head = shift > 0;
            g->tail = shift + g->nvec * g->V < g->G;
            g->nchunk = (g->nvec + jmax - 1) / jmax;
        }
    } else {
        g->nvec = (g->OCg + g->V - 1) / g->V;
        g->nchunk = (g->nvec + jmax - 1) / jmax;
    }
    /* Columns whose taps along W all land inside the input. */
    g->ow_lo = g->pw > 0 ? cl_ceildiv(g->pw, g->sw) : 0;
    g->ow_hi = cl_floordiv(g->IW - 1 - (g->KW - 1) * g->dw + g->pw, g->sw) + 1;
    if (g->ow_lo > g->OW) g->ow_lo = g->OW;
    if (g->ow_hi > g->OW) g->ow_hi = g->OW;
    if (g->ow_hi < g->ow_lo) g->ow_hi = g->ow_lo;
    /* Rows alone may not feed every thread (1-D problems, tiny images): then also cut
     * rows into segments, each long enough to keep the microkernel's pixel blocks whole. */
    want = 8 * (ptrdiff_t)(threads > 0 ? threads : 1);
    g->ncgroup = 1;
    if (g->depthwise) {
        /* A depthwise item takes all channel chunks of its row (they share the row's
         * setup) unless there are too few rows to go round. */
        rows = g->N * g->OD * g->OH;
        if (rows > 0 && rows < want) {  /* an empty batch has no rows to share out */
            g->ncgroup = (want + rows - 1) / rows;
            if (g->ncgroup > g->nchunk) g->ncgroup = g->nchunk;
        }
        rows *= g->ncgroup;
    } else {
        /* Dense items are runs of the flattened output pixels of one image, so pixel
         * blocks span rows and small images still fill the microkernel. Input channels
         * go in passes of icb, so that one pass's weights (K taps x icb x J vectors),
         * which every pixel block of the run re-reads, stay in L2 (copied contiguous per
         * thread, see wpack): within cl_pass_bytes, never fewer than 64 channels, in
         * passes of equal size. 256 KiB rather than the 32 KiB share of L1 it was when
         * these weights were read in place (where a whole 512-channel pass was 1.6-2x
         * slower, on an Intel machine): on an AMD EPYC (Zen 4, 32 KiB L1d, 1 MiB L2 per
         * core), direct's kernel on prepared weights, 2
         * threads (bench/direct_tiling.py, then named direct_pass_size.py;
         * bench/results/direct_pass_size_2026-11-24_epyc_*.txt), geo-mean over 32 KiB: ResNet-50
         * 1.053 (1x1 layers 1.04-1.17), GoogLeNet-v2 1.098, 1d 1.036, VGG-19 and
         * dilated 1.006, ResNet-50 at mb8 1.048; an earlier run of the same kind on
         * 3d_unet: 1.00. 1 MiB measured about the same as 256 KiB, which leaves more
         * of a 1 MiB L2 to src and dst. */
        ptrdiff_t npix = g->OD * g->OH * g->OW, taps = g->KD * g->KH * g->KW, pass_elems;
        ptrdiff_t slice, groups_of_chunks;
        if (!g->blocked && g->nchunk > 1 && cl_copy_group_bytes > 0 && cl_wpack_max_bytes > 0
            && npix <= CL_COPY_GROUP_MAX_PIXELS
            && taps * g->ICg * g->OCgp * (ptrdiff_t)itemsize > cl_pass_max_bytes) {
            ptrdiff_t per = cl_copy_group_bytes / (jmax * g->V * (ptrdiff_t)itemsize);
            ptrdiff_t most = g->nchunk / (2 * (ptrdiff_t)(threads > 0 ? threads : 1));
            if (per > most) per = most;
            if (per > CL_WHOLE_PIXEL_CHUNKS) per = CL_WHOLE_PIXEL_CHUNKS;
            if (per > 1) g->item_chunks = per;
        }
        /* a pass's weights, per input channel: every chunk the item copies */
        slice = taps * jmax * g->V * g->item_chunks * (ptrdiff_t)itemsize;
        ptrdiff_t least = cl_pass_min_channels < g->ICg ? cl_pass_min_channels : g->ICg;
        if (slice > 0 && least * slice > cl_pass_max_bytes) {
            ptrdiff_t line = CL_LINE_BYTES / (ptrdiff_t)itemsize;  /* src channels a line */
            least = cl_pass_max_bytes / slice / line * line;
            if (least < line) least = line;
        }
        g->icb = slice > 0 ? cl_pass_bytes / slice : g->ICg;
        if (g->icb < least) g->icb = least;
        if (g->icb > g->ICg) g->icb = g->ICg;
        if (g->icb > 0) {
            /* passes of equal size rather than a short last one */
            ptrdiff_t npass = (g->ICg + g->icb - 1) / g->icb;
            g->icb = (g->ICg + npass - 1) / npass;
        }
        g->whole_pixels = !g->blocked && g->item_chunks == 1 && g->nchunk > 1
                          && g->nchunk <= CL_WHOLE_PIXEL_CHUNKS && g->icb == g->ICg
                          && taps * g->ICg * g->OCgp * (ptrdiff_t)itemsize <= cl_whole_pixel_bytes;
        if (g->whole_pixels) g->item_chunks = g->nchunk;
        groups_of_chunks = (g->nchunk + g->item_chunks - 1) / g->item_chunks;
        rows = g->G * groups_of_chunks * g->N;
        g->nseg = rows >= want || rows == 0 ? 1 : (want + rows - 1) / rows;
        g->seglen = (npix + g->nseg - 1) / g->nseg;
        if (g->seglen < 64) g->seglen = 64 < npix ? 64 : npix;
        if (g->seglen < 1) g->seglen = 1;  /* no output pixels: no segments either */
        g->nseg = (npix + g->seglen - 1) / g->seglen;
        pass_elems = taps * g->icb * jmax * g->V * g->item_chunks;
        if (g->nchunk > 1 && !g->whole_pixels && !g->blocked
            && pass_elems * (ptrdiff_t)itemsize <= cl_wpack_max_bytes)
            g->wpack_elems = pass_elems;
        g->prefetch_src = cl_prefetch_min_bytes > 0 && taps == 1 && !g->pd && !g->ph && !g->pw
                          && g->N * g->ID * g->IH * g->IW * g->IC * (ptrdiff_t)itemsize
                             >= cl_prefetch_min_bytes;
        g->stream_dst = CL_CAN_STREAM && cl_stream_min_bytes > 0
                        && g->N * npix * g->OC * (ptrdiff_t)itemsize >= cl_stream_min_bytes;
        g->nitems = rows * g->nseg;
        return g->nitems;
    }
    g->seglen = g->OW;
    g->nseg = 1;
    if (rows > 0 && rows < want && g->OW > 48) {
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
                        REAL *dst, ptrdiff_t item, ptrdiff_t tid) {                          \
    CL_ITEM_SWITCH(T)                                                                        \
}
#if CL_X86_DISPATCH
#define CL_ITEM_SWITCH(T)                                                                    \
    switch (g->isa) {                                                                        \
    case CL_ISA_AVX512: cl_item_##T##_avx512(g, src, w, bias, dst, item, tid); break;       \
    case CL_ISA_AVX2: cl_item_##T##_avx2(g, src, w, bias, dst, item, tid); break;           \
    default: cl_item_##T##_default(g, src, w, bias, dst, item, tid); break;                  \
    }
#else
#define CL_ITEM_SWITCH(T) cl_item_##T##_default(g, src, w, bias, dst, item, tid);
#endif
CL_DEFINE_ITEM(f32, float)
CL_DEFINE_ITEM(f64, double)

#endif /* CONVLAB_DIRECT_MICROKERNEL_H */
