/* Winograd convolution: the per-tile input and output transforms, in C so that each
 * function is compiled for several instruction sets and picked at load time
 * (target_clones); the build itself stays portable (no -march=native). */
#ifndef CONVLAB_WINOGRAD_KERNELS_H
#define CONVLAB_WINOGRAD_KERNELS_H

#include <Python.h>
#include <string.h>

/* A problem lifted to three spatial axes; sizes in elements. */
typedef struct {
    Py_ssize_t batch;
    Py_ssize_t in_shape[3], out_shape[3], pads_begin[3];
    Py_ssize_t in_channels, out_channels, in_channels_per_group, out_channels_per_group;
    Py_ssize_t m[3], alpha[3], tiles[3], kernel[3];
    Py_ssize_t channel_chunk;  /* channels transformed together; buffers hold alpha^3 * this */
} wg_geometry;

#if defined(__GNUC__) && !defined(__clang__) && (defined(__x86_64__) || defined(__i386__)) \
    && !defined(CONVLAB_NO_TARGET_CLONES)
#define WG_TARGETS __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define WG_TARGETS
#endif

#define WG_REAL float
#define WG_SUFFIX f
#include "winograd_template.h"
#undef WG_REAL
#undef WG_SUFFIX

#define WG_REAL double
#define WG_SUFFIX d
#include "winograd_template.h"
#undef WG_REAL
#undef WG_SUFFIX

#endif
