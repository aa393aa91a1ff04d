/* Winograd convolution: the per-tile input and output transforms, in C so that each
 * function is compiled for several instruction sets and picked at load time
 * (target_clones); the build itself stays portable (no -march=native). */
#ifndef CONVLAB_WINOGRAD_KERNELS_H
#define CONVLAB_WINOGRAD_KERNELS_H

#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "epilogue.h"

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

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) \
    && !defined(CONVLAB_NO_TARGET_CLONES)
#define WG_X86 1
#define WG_TARGETS __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define WG_X86 0
#define WG_TARGETS
#endif

/* GEMM micro-kernels per instruction set level: 2 = x86-64-v4 (AVX-512), 1 = x86-64-v3
 * (AVX2, FMA), 0 = the baseline the build targets. Detected at run time, like the
 * target_clones of the transforms; a caller may ask for a lower level (tests do). */
static inline int wg_max_gemm_level(void)
{
#if WG_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("x86-64-v4"))
        return 2;
    if (__builtin_cpu_supports("x86-64-v3"))
        return 1;
#endif
    return 0;
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

#define WG_CAT_(a, b) a##_##b
#define WG_CAT(a, b) WG_CAT_(a, b)

#define WG_REAL float
#define WG_SUFFIX f
#define WG_IVEC wg_ivec_f
typedef int32_t wg_ivec_f __attribute__((vector_size(64)));
#include "winograd_template.h"
#undef WG_IVEC
#undef WG_REAL
#undef WG_SUFFIX

#define WG_REAL double
#define WG_SUFFIX d
#define WG_IVEC wg_ivec_d
typedef int64_t wg_ivec_d __attribute__((vector_size(64)));
#include "winograd_template.h"
#undef WG_IVEC
#undef WG_REAL
#undef WG_SUFFIX

#endif
