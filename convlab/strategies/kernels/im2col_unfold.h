/* The 2-D whole-row unfold of _im2col.pyx, in C for its vector moves. */
#ifndef CONVLAB_IM2COL_UNFOLD_H
#define CONVLAB_IM2COL_UNFOLD_H
/* Whole panel rows of a 2-D convolution over every channel: per kernel row, zeros |
 * the in-range taps | zeros, the taps one run of src where the last axis is dense
 * (dilation 1) and one short copy each otherwise (a dilated 5x5 on 3 channels: 3 floats).
 * Data moves as 4-byte units (a float is one, a double two): only bits are copied.
 * Runs are short (conv1 of ResNet-50: 7 taps x 3 channels = 21 floats), so a libc
 * call per run cost as much as the copy, and the tap-table walk of unfold_row more:
 * the AVX-512 build moves whole vectors and one masked tail per run, chosen at run
 * time when the level in effect (isa_level.h) is AVX-512, so the build stays portable.
 * unfold_panel of 2091 conv1 rows, one thread: 0.127 ms (unfold_row) -> 0.067 ms;
 * 523 rows of res2a_branch2b 0.055 -> 0.039 ms.
 * Storing the tail whole (overlapping the next run) measured no faster. */
#include <stdint.h>
#include <string.h>
#include <stddef.h>

#include "isa_level.h"
#if CL_X86_DISPATCH
#include <immintrin.h>
#define IM2COL_X86 1
#endif

#define IM2COL_ROWS2D_BODY(COPY, ZERO)                                             \
    ptrdiff_t n = m0 / (OH * OW), rem = m0 - n * OH * OW;                          \
    ptrdiff_t oh = rem / OW, ow = rem - oh * OW, m, kh, kw, run = KW * C;          \
    for (m = m0; m < m1; m++) {                                                    \
        ptrdiff_t ih0 = oh * SH - PH, iw0 = ow * SW - PW, span = IW - iw0;         \
        ptrdiff_t lo = iw0 < 0 ? (-iw0 + DW - 1) / DW : 0;                         \
        ptrdiff_t hi = span <= 0 ? 0 : (span + DW - 1) / DW;                       \
        ptrdiff_t first;                                                           \
        if (hi > KW) hi = KW;                                                      \
        if (lo > KW) lo = KW;                                                      \
        if (hi < lo) hi = lo;                                                      \
        first = (n * IH * IW + iw0 + lo * DW) * IC + coff;                         \
        for (kh = 0; kh < KH; kh++) {                                              \
            ptrdiff_t ih = ih0 + kh * DH;                                          \
            if (ih < 0 || ih >= IH || lo == hi) {                                  \
                ZERO(out, run);                                                    \
            } else {                                                               \
                const uint32_t *row = src + (first + ih * IW * IC);                \
                if (lo > 0) ZERO(out, lo * C);                                     \
                if (DW == 1) {                                                     \
                    COPY(out + lo * C, row, (hi - lo) * C);                        \
                } else {                                                           \
                    for (kw = lo; kw < hi; kw++)                                   \
                        COPY(out + kw * C, row + (kw - lo) * DW * IC, C);          \
                }                                                                  \
                if (hi < KW) ZERO(out + hi * C, (KW - hi) * C);                    \
            }                                                                      \
            out += run;                                                            \
        }                                                                          \
        out += ld - KH * run;                                                      \
        if (++ow == OW) { ow = 0; if (++oh == OH) { oh = 0; n++; } }               \
    }

static inline void im2col_copy_plain(uint32_t *out, const uint32_t *src, ptrdiff_t k) {
    if (k >= 16) { memcpy(out, src, (size_t)k * 4); return; }
    for (ptrdiff_t i = 0; i < k; i++) out[i] = src[i];
}
static inline void im2col_zero_plain(uint32_t *out, ptrdiff_t k) {
    if (k >= 16) { memset(out, 0, (size_t)k * 4); return; }
    for (ptrdiff_t i = 0; i < k; i++) out[i] = 0;
}

static void im2col_rows2d_plain(
        const uint32_t *src, uint32_t *out, ptrdiff_t ld, ptrdiff_t m0, ptrdiff_t m1,
        ptrdiff_t IH, ptrdiff_t IW, ptrdiff_t OH, ptrdiff_t OW, ptrdiff_t KH,
        ptrdiff_t KW, ptrdiff_t SH, ptrdiff_t SW, ptrdiff_t DH, ptrdiff_t DW, ptrdiff_t PH,
        ptrdiff_t PW, ptrdiff_t IC, ptrdiff_t coff, ptrdiff_t C) {
    IM2COL_ROWS2D_BODY(im2col_copy_plain, im2col_zero_plain)
}

#ifdef IM2COL_X86
__attribute__((target("avx512f"))) static inline void im2col_copy_512(
        uint32_t *out, const uint32_t *src, ptrdiff_t k) {
    for (; k >= 16; k -= 16, out += 16, src += 16)
        _mm512_storeu_si512((void *)out, _mm512_loadu_si512((const void *)src));
    if (k > 0) {
        __mmask16 mask = (__mmask16)((1u << k) - 1u);
        _mm512_mask_storeu_epi32(out, mask, _mm512_maskz_loadu_epi32(mask, src));
    }
}
__attribute__((target("avx512f"))) static inline void im2col_zero_512(
        uint32_t *out, ptrdiff_t k) {
    __m512i z = _mm512_setzero_si512();
    for (; k >= 16; k -= 16, out += 16) _mm512_storeu_si512((void *)out, z);
    if (k > 0) _mm512_mask_storeu_epi32(out, (__mmask16)((1u << k) - 1u), z);
}
__attribute__((target("avx512f"))) static void im2col_rows2d_512(
        const uint32_t *src, uint32_t *out, ptrdiff_t ld, ptrdiff_t m0, ptrdiff_t m1,
        ptrdiff_t IH, ptrdiff_t IW, ptrdiff_t OH, ptrdiff_t OW, ptrdiff_t KH,
        ptrdiff_t KW, ptrdiff_t SH, ptrdiff_t SW, ptrdiff_t DH, ptrdiff_t DW, ptrdiff_t PH,
        ptrdiff_t PW, ptrdiff_t IC, ptrdiff_t coff, ptrdiff_t C) {
    IM2COL_ROWS2D_BODY(im2col_copy_512, im2col_zero_512)
}
#endif

/* The level of the unfold in effect: AVX-512's moves or the plain copies. */
static inline int im2col_unfold_level(void) {
#ifdef IM2COL_X86
    if (cl_isa_in_effect >= CL_ISA_AVX512) return CL_ISA_AVX512;
#endif
    return CL_ISA_DEFAULT;
}

/* Rows m0..m1 of the panel (row stride ld units) from src, both in 4-byte units:
 * IC, coff and C are channel counts times the units of one element. */
static void im2col_rows2d(
        const void *src, void *out, ptrdiff_t ld, ptrdiff_t m0, ptrdiff_t m1,
        ptrdiff_t IH, ptrdiff_t IW, ptrdiff_t OH, ptrdiff_t OW, ptrdiff_t KH,
        ptrdiff_t KW, ptrdiff_t SH, ptrdiff_t SW, ptrdiff_t DH, ptrdiff_t DW, ptrdiff_t PH,
        ptrdiff_t PW, ptrdiff_t IC, ptrdiff_t coff, ptrdiff_t C) {
#ifdef IM2COL_X86
    if (im2col_unfold_level() == CL_ISA_AVX512) {
        im2col_rows2d_512((const uint32_t *)src, (uint32_t *)out, ld, m0, m1, IH, IW,
                          OH, OW, KH, KW, SH, SW, DH, DW, PH, PW, IC, coff, C);
        return;
    }
#endif
    im2col_rows2d_plain((const uint32_t *)src, (uint32_t *)out, ld, m0, m1, IH, IW, OH,
                        OW, KH, KW, SH, SW, DH, DW, PH, PW, IC, coff, C);
}
#endif /* CONVLAB_IM2COL_UNFOLD_H */
