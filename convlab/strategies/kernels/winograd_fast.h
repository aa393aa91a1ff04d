/* Register-resident 2-D tile transforms for one alpha, on one vector of channels.
 * Included by winograd_template.h once per alpha, with WG_A (4, 6 or 8) defined next to
 * WG_REAL, WG_SUFFIX and WG_VEC (a 64-byte GCC vector of WG_REAL, alignment of one element).
 *
 * With alpha a compile-time constant the loops unroll and a tile stays in vector registers
 * (and L1 spill slots) between the two passes, instead of going through memory for every
 * coefficient as the generic passes do. The coefficients are still the generated matrices,
 * read at run time, as whole vectors from a table the caller fills once (wg_broadcast);
 * zero entries are multiplied rather than skipped, which costs less than a branch per entry
 * here. */

#define WG_FA(name) WG_CAT(WG_FN(name), WG_A)

/* V[(i*A + j) * pos_stride] = (B^T d B)[i][j], d[k][l] at base + k*ys + l*xs; bt holds
 * B^T's A x A entries as vectors. */
static inline __attribute__((always_inline)) void WG_FA(wg_in2d)(
    const WG_REAL *base, Py_ssize_t ys, Py_ssize_t xs, const WG_VEC *restrict bt,
    WG_REAL *V, Py_ssize_t pos_stride)
{
    WG_VEC t[WG_A][WG_A];
#pragma GCC unroll 8
    for (int j = 0; j < WG_A; j++) {
        WG_VEC d[WG_A];
#pragma GCC unroll 8
        for (int k = 0; k < WG_A; k++)
            d[k] = *(const WG_VEC *)(base + k * ys + j * xs);
#pragma GCC unroll 8
        for (int i = 0; i < WG_A; i++) {
            WG_VEC s = bt[i * WG_A] * d[0];
#pragma GCC unroll 8
            for (int k = 1; k < WG_A; k++)
                s += bt[i * WG_A + k] * d[k];
            t[i][j] = s;
        }
    }
#pragma GCC unroll 8
    for (int i = 0; i < WG_A; i++) {
#pragma GCC unroll 8
        for (int j = 0; j < WG_A; j++) {
            WG_VEC s = t[i][0] * bt[j * WG_A];
#pragma GCC unroll 8
            for (int k = 1; k < WG_A; k++)
                s += t[i][k] * bt[j * WG_A + k];
            *(WG_VEC *)(V + (i * WG_A + j) * pos_stride) = s;
        }
    }
}

/* out[i*ys + j*xs] = (A^T M A)[i][j] + bias for i < e0, j < e1, with M[k][l] at
 * Mp + (k*A + l) * pos_stride and A^T's (A - 2) x A entries as vectors in at. *bad
 * accumulates s - s, which is 0 for a finite s and NaN for Inf or NaN: a vector add,
 * where a compare of 64-byte vectors at AVX2 was lowered lane by lane (16 scalar compares
 * and branches per output pixel, 20-25% of an output transform's time;
 * bench/results/winograd_output_store_2026-11-28_zen3-avx2.txt). */
static inline __attribute__((always_inline)) void WG_FA(wg_out2d)(
    const WG_REAL *Mp, Py_ssize_t pos_stride, const WG_VEC *restrict at, WG_VEC bias,
    WG_REAL *out, Py_ssize_t ys, Py_ssize_t xs, Py_ssize_t e0, Py_ssize_t e1, WG_VEC *bad)
{
    enum { WG_M = WG_A - 2 };
    WG_VEC t[WG_M][WG_A];
#pragma GCC unroll 8
    for (int j = 0; j < WG_A; j++) {
        WG_VEC col[WG_A];
#pragma GCC unroll 8
        for (int k = 0; k < WG_A; k++)
            col[k] = *(const WG_VEC *)(Mp + (k * WG_A + j) * pos_stride);
#pragma GCC unroll 8
        for (int i = 0; i < WG_M; i++) {
            WG_VEC s = at[i * WG_A] * col[0];
#pragma GCC unroll 8
            for (int k = 1; k < WG_A; k++)
                s += at[i * WG_A + k] * col[k];
            t[i][j] = s;
        }
    }
    WG_VEC nan_lanes = {0};
    for (Py_ssize_t i = 0; i < e0; i++) {
        for (Py_ssize_t j = 0; j < e1; j++) {
            WG_VEC s = t[i][0] * at[j * WG_A];
#pragma GCC unroll 8
            for (int k = 1; k < WG_A; k++)
                s += t[i][k] * at[j * WG_A + k];
            s += bias;
            WG_STORE_VEC(out + i * ys + j * xs, s);
            nan_lanes += s - s;
        }
    }
    *bad += nan_lanes;
}

/* U[(i*A + j) * pos_stride] = (G w G^T)[i][j] for a 3x3 filter, w[k][l] at
 * base + (k*3 + l) * tap_stride, G's A x 3 entries as vectors in g. Each entry is
 * WG_W_DOT3's arithmetic, which the fused path (wg_w2d_row) repeats, so both give the
 * same bits. */
static inline __attribute__((always_inline)) void WG_FA(wg_w2d)(
    const WG_REAL *base, Py_ssize_t tap_stride, const WG_VEC *restrict g, WG_REAL *U,
    Py_ssize_t pos_stride)
{
    WG_VEC t[WG_A][3];
#pragma GCC unroll 3
    for (int l = 0; l < 3; l++) {
        WG_VEC w[3];
#pragma GCC unroll 3
        for (int k = 0; k < 3; k++)
            w[k] = *(const WG_VEC *)(base + (k * 3 + l) * tap_stride);
#pragma GCC unroll 8
        for (int i = 0; i < WG_A; i++)
            t[i][l] = WG_W_DOT3(g + i * 3, w[0], w[1], w[2]);
    }
#pragma GCC unroll 8
    for (int i = 0; i < WG_A; i++) {
#pragma GCC unroll 8
        for (int j = 0; j < WG_A; j++)
            *(WG_VEC *)(U + (i * WG_A + j) * pos_stride) =
                WG_W_DOT3(g + j * 3, t[i][0], t[i][1], t[i][2]);
    }
}

/* wg_w2d for positions [p_lo, p_hi) of the A x A tile only (flattened i * A + j), with
 * the same arithmetic, so U comes out bit for bit the same whichever thread computes
 * which positions. */
static inline __attribute__((always_inline)) void WG_FA(wg_w2d_span)(
    const WG_REAL *base, Py_ssize_t tap_stride, const WG_VEC *restrict g, WG_REAL *U,
    Py_ssize_t pos_stride, Py_ssize_t p_lo, Py_ssize_t p_hi)
{
    const Py_ssize_t i_lo = p_lo / WG_A, i_hi = (p_hi - 1) / WG_A + 1;
    WG_VEC w[9];
#pragma GCC unroll 9
    for (int k = 0; k < 9; k++)
        w[k] = *(const WG_VEC *)(base + k * tap_stride);
    for (Py_ssize_t i = i_lo; i < i_hi; i++) {
        const Py_ssize_t j_lo = i == i_lo ? p_lo - i * WG_A : 0;
        const Py_ssize_t j_hi = i == i_hi - 1 ? p_hi - i * WG_A : WG_A;
        WG_VEC t[3];
#pragma GCC unroll 3
        for (int l = 0; l < 3; l++)
            t[l] = WG_W_DOT3(g + i * 3, w[l], w[3 + l], w[6 + l]);
        if (j_lo == 0 && j_hi == WG_A) {
#pragma GCC unroll 8
            for (int j = 0; j < WG_A; j++)
                *(WG_VEC *)(U + (i * WG_A + j) * pos_stride) =
                    WG_W_DOT3(g + j * 3, t[0], t[1], t[2]);
        } else {
            for (Py_ssize_t j = j_lo; j < j_hi; j++)
                *(WG_VEC *)(U + (i * WG_A + j) * pos_stride) =
                    WG_W_DOT3(g + j * 3, t[0], t[1], t[2]);
        }
    }
}

/* Positions (i, j_lo) .. (i, j_hi - 1) of wg_w2d's tile into out + j * slice_stride, with
 * the same arithmetic: the fused path's U slices. */
static inline __attribute__((always_inline)) void WG_FA(wg_w2d_row)(
    const WG_REAL *base, Py_ssize_t tap_stride, const WG_VEC *restrict g, Py_ssize_t i,
    Py_ssize_t j_lo, Py_ssize_t j_hi, WG_REAL *out, Py_ssize_t slice_stride)
{
    WG_VEC t[3];
#pragma GCC unroll 3
    for (int l = 0; l < 3; l++)
        t[l] = WG_W_DOT3(g + i * 3, *(const WG_VEC *)(base + l * tap_stride),
                         *(const WG_VEC *)(base + (3 + l) * tap_stride),
                         *(const WG_VEC *)(base + (6 + l) * tap_stride));
    if (j_lo == 0 && j_hi == WG_A) {
#pragma GCC unroll 8
        for (int j = 0; j < WG_A; j++)
            *(WG_VEC *)(out + j * slice_stride) = WG_W_DOT3(g + j * 3, t[0], t[1], t[2]);
    } else {
        for (Py_ssize_t j = j_lo; j < j_hi; j++)
            *(WG_VEC *)(out + j * slice_stride) = WG_W_DOT3(g + j * 3, t[0], t[1], t[2]);
    }
}

#undef WG_FA
