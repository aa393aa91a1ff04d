/* The floor for a 1x1 convolution on one core: a bare loop of register-blocked
 * micro-tiles, P pixels x J vectors of 8 float32 output channels, over channels-last src
 * and weights blocked by chunk of J vectors (each chunk's input-channel rows contiguous,
 * as direct's prepared weights are). No items, passes, bias, borders or threads: what is
 * left when all of direct's bookkeeping is taken away, to compare with direct's kernel
 * alone (bench/direct_tiling.py --threads 1) on the same shape.
 *
 * Three tile shapes, 6x2 (direct's at AVX2), 3x4 (MLAS's FMA3 pointwise kernel: three
 * outputs by four filter blocks of 8) and 4x3, each twelve accumulators, timed in
 * alternating order; prints the fastest block of each (chunks of 24 channels take only
 * the whole ones, and the rate counts those).
 *
 * Needs an x86-64 CPU with AVX2 and FMA (it is a measurement tool, built for that level):
 *     cc -O3 -march=x86-64-v3 bench/pointwise_bare_kernel.c -o /tmp/pointwise_bare_kernel
 *     /tmp/pointwise_bare_kernel PIXELS IN_CHANNELS OUT_CHANNELS REPEATS
 * e.g. ResNet-50 res5a_branch2c: 49 512 2048 200. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef float vec8 __attribute__((vector_size(32), aligned(4)));

static double seconds_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* dst[p][j] = sum over c of src[p][c] * w[c][j], for P pixels and J vectors */
#define TILE(P, J)                                                                         \
    static __attribute__((noinline)) void tile_##P##_##J(                                  \
        const float *src, long src_pixel, const float *w, long channels, float *dst,       \
        long dst_pixel)                                                                    \
    {                                                                                      \
        vec8 acc[P][J];                                                                    \
        for (int p = 0; p < P; p++)                                                        \
            for (int j = 0; j < J; j++) acc[p][j] = (vec8){0};                             \
        for (long c = 0; c < channels; c++) {                                              \
            vec8 wv[J];                                                                    \
            for (int j = 0; j < J; j++) wv[j] = *(const vec8 *)(w + (c * J + j) * 8);      \
            for (int p = 0; p < P; p++) {                                                  \
                vec8 x = src[p * src_pixel + c] - (vec8){0};                               \
                for (int j = 0; j < J; j++) acc[p][j] += x * wv[j];                        \
            }                                                                              \
        }                                                                                  \
        for (int p = 0; p < P; p++)                                                        \
            for (int j = 0; j < J; j++) *(vec8 *)(dst + p * dst_pixel + j * 8) = acc[p][j]; \
    }
TILE(1, 2) TILE(2, 2) TILE(3, 2) TILE(4, 2) TILE(5, 2) TILE(6, 2)
TILE(1, 3) TILE(2, 3) TILE(3, 3) TILE(4, 3)
TILE(1, 4) TILE(2, 4) TILE(3, 4)

typedef void (*tile_fn)(const float *, long, const float *, long, float *, long);

static tile_fn tile_for(int pixels, int vectors)
{
    static const tile_fn two[] = {0, tile_1_2, tile_2_2, tile_3_2, tile_4_2, tile_5_2, tile_6_2};
    static const tile_fn three[] = {0, tile_1_3, tile_2_3, tile_3_3, tile_4_3};
    static const tile_fn four[] = {0, tile_1_4, tile_2_4, tile_3_4};
    return vectors == 2 ? two[pixels] : vectors == 3 ? three[pixels] : four[pixels];
}

/* Chunk by chunk of output channels; in each, the pixels in tiles of at most max_pixels. */
static void convolve(int max_pixels, int vectors, const float *src, long npix, long ic,
                     const float *w, long oc, float *dst)
{
    const long width = vectors * 8, chunks = oc / width;
    for (long chunk = 0; chunk < chunks; chunk++) {
        const float *wc = w + chunk * ic * width;
        for (long p0 = 0; p0 < npix;) {
            const int p = npix - p0 >= max_pixels ? max_pixels : (int)(npix - p0);
            tile_for(p, vectors)(src + p0 * ic, ic, wc, ic, dst + p0 * oc + chunk * width, oc);
            p0 += p;
        }
    }
}

int main(int argc, char **argv)
{
    enum { SHAPES = 3, ROUNDS = 15 };
    static const int shape[SHAPES][2] = {{6, 2}, {3, 4}, {4, 3}};
    double best[SHAPES] = {1e30, 1e30, 1e30};
    long npix, ic, oc;
    int repeats;
    float *src, *w, *dst;

    if (argc != 5 || (npix = atol(argv[1])) < 1 || (ic = atol(argv[2])) < 1
        || (oc = atol(argv[3])) < 24 || (repeats = atoi(argv[4])) < 1) {
        fprintf(stderr, "usage: %s PIXELS IN_CHANNELS OUT_CHANNELS(>=24) REPEATS\n", argv[0]);
        return 2;
    }
    src = aligned_alloc(64, (size_t)(npix * ic * 4 + 63) / 64 * 64);
    w = aligned_alloc(64, (size_t)(ic * oc * 4 + 63) / 64 * 64);
    dst = aligned_alloc(64, (size_t)(npix * oc * 4 + 63) / 64 * 64);
    if (!src || !w || !dst) return 1;
    for (long i = 0; i < npix * ic; i++) src[i] = (float)(i % 7) * 0.1f;
    for (long i = 0; i < ic * oc; i++) w[i] = (float)(i % 5) * 0.1f;
    for (int round = 0; round < ROUNDS; round++) {
        for (int k = 0; k < SHAPES; k++) {
            const int s = round % 2 ? SHAPES - 1 - k : k;
            double start, t;
            convolve(shape[s][0], shape[s][1], src, npix, ic, w, oc, dst);
            start = seconds_now();
            for (int r = 0; r < repeats; r++)
                convolve(shape[s][0], shape[s][1], src, npix, ic, w, oc, dst);
            t = (seconds_now() - start) / repeats;
            if (t < best[s]) best[s] = t;
        }
    }
    for (int s = 0; s < SHAPES; s++) {
        const long width = shape[s][1] * 8;
        const double flops = 2.0 * (double)npix * (double)ic * (double)(oc / width * width);
        printf("P%d x J%d: %.3f ms %.1f GFLOP/s   ", shape[s][0], shape[s][1], best[s] * 1e3,
               flops / best[s] / 1e9);
    }
    printf("[pixels %ld, in %ld, out %ld; one thread, fastest of %d blocks]\n", npix, ic, oc,
           ROUNDS);
    free(src);
    free(w);
    free(dst);
    return 0;
}
