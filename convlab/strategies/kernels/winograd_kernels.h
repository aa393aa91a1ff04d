/* Winograd convolution: the per-tile input and output transforms, in C so that each
 * function is compiled for several instruction sets and picked at run time by the level
 * in effect (isa_level.h, winograd_levels.h); the build itself stays portable (no
 * -march=native). */
#ifndef CONVLAB_WINOGRAD_KERNELS_H
#define CONVLAB_WINOGRAD_KERNELS_H

#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "epilogue.h"
#include "isa_level.h"

/* A problem lifted to three spatial axes; sizes in elements. */
typedef struct {
    Py_ssize_t batch;
    Py_ssize_t in_shape[3], out_shape[3], pads_begin[3];
    Py_ssize_t in_channels, out_channels, in_channels_per_group, out_channels_per_group;
    Py_ssize_t m[3], alpha[3], tiles[3], kernel[3];
    Py_ssize_t channel_chunk;  /* channels transformed together; buffers hold alpha^3 * this */
    /* post-ops applied to each output tile once it is written, NULL for none; never a sum
     * (the caller may overwrite outputs afterwards, see convlab.strategies.winograd) */
    const cl_epilogue *epi;
} wg_geometry;

/* The wide levels' copies need GCC's psABI level names (GCC 12 and later); elsewhere
 * only the baseline copy exists. */
#if CL_X86_DISPATCH && defined(__x86_64__) && !defined(__clang__) && __GNUC__ >= 12
#define WG_X86 1
#else
#define WG_X86 0
#endif

/* The transforms' entry points are defined by winograd_levels.h from these bodies. */
#define WG_PER_LEVEL static inline __attribute__((always_inline))

/* Instruction-set levels (CL_ISA_*): 2 = x86-64-v4 (AVX-512), 1 = x86-64-v3 (AVX2, FMA),
 * 0 = the baseline the build targets. The transforms run at the level in effect; the GEMM
 * micro-kernels at the level their caller passes, at most this one (tests ask for lower
 * ones). */
static inline int wg_isa_level(void)
{
    return WG_X86 ? cl_isa_in_effect : CL_ISA_DEFAULT;
}

/* The widest level this build and CPU have: U may be packed for any level up to it. */
static inline int wg_widest_level(void)
{
    return WG_X86 ? cl_isa_best() : CL_ISA_DEFAULT;
}

/* Rows per micro-tile: what the level's accumulators hold (24 of 32 zmm, 12 of 16 ymm/xmm). */
static inline Py_ssize_t wg_gemm_mr(int level)
{
    return level == 2 ? 12 : level == 1 ? 6 : 3;
}

/* Bytes per vector the level's micro-kernel uses; a packed panel is two vectors wide. */
static inline Py_ssize_t wg_gemm_vector_bytes(int level)
{
    return level == 2 ? 64 : 32;
}

/* The GEMM prefetches the next panel of U while it runs one (winograd_gemm.h) when a
 * panel serves at most this many micro-tiles of rows (0: never). Small maps at batch 1
 * have few tiles, so a panel is done with before the hardware prefetcher has brought the
 * next one from L3 or memory; on large maps a panel serves many row blocks and the
 * prefetch made no difference beyond the noise. On an AMD EPYC (Zen 3, AVX2, 512 KiB L2),
 * the same plan with and without, 2 threads (bench/winograd_panel_prefetch.py;
 * bench/results/winograd_panel_prefetch_2026-12-03_zen3-{avx2,baseline}.txt): at avx2
 * 1.07-1.24x on ResNet-50's 7x7 and 14x14 maps and VGG-19's conv5_1, 0.93-1.04x on the
 * larger maps; at the baseline 1.10-1.23x on res5a_branch2b's F(4) and F(6). On an AMD
 * EPYC (Zen 4, AVX-512, 1 MiB L2) capped at avx2, whose panels are half as wide, F(4) and
 * F(6) on res5a_branch2b ran 1.81x and 1.95x, where U outgrows L3; at avx512 the four
 * ResNet-50 3x3 layers ran 0.95-1.07x
 * (bench/results/winograd_panel_prefetch_2026-12-04_zen4-{avx512,avx2cap}.txt). A variable
 * so that the bench can vary it (_winograd.set_panel_prefetch). */
static Py_ssize_t wg_prefetch_max_tiles = 4;

#define WG_CAT_(a, b) a##_##b
#define WG_CAT(a, b) WG_CAT_(a, b)

#define WG_REAL float
#define WG_SUFFIX f
#define WG_LOW_HALF 0, 1, 2, 3, 4, 5, 6, 7
#define WG_HIGH_HALF 8, 9, 10, 11, 12, 13, 14, 15
#include "winograd_template.h"
#undef WG_LOW_HALF
#undef WG_HIGH_HALF
#undef WG_REAL
#undef WG_SUFFIX

#define WG_REAL double
#define WG_SUFFIX d
#define WG_LOW_HALF 0, 1, 2, 3
#define WG_HIGH_HALF 4, 5, 6, 7
#include "winograd_template.h"
#undef WG_LOW_HALF
#undef WG_HIGH_HALF
#undef WG_REAL
#undef WG_SUFFIX

#endif
