/* Winograd tile transforms for one real type; included by winograd_kernels.h once per type
 * with WG_REAL (float or double) and WG_SUFFIX (f or d) defined.
 *
 * Every problem arrives lifted to three spatial axes; an axis a lower rank lifts away has
 * alpha = m = 1 and a 1x1 identity transform, and its passes are skipped. The last axis is
 * always a real Winograd axis.
 *
 * Buffers hold one tile for a chunk of cc channels as [a0][a1][a2][cc] (channels innermost,
 * as in NXC src), so a transform along axis k treats everything after axis k as one
 * contiguous vector and the loops that dominate run over long unit-stride vectors. */

#define WG_CAT_(a, b) a##_##b
#define WG_CAT(a, b) WG_CAT_(a, b)
#define WG_FN(name) WG_CAT(name, WG_SUFFIX)

/* out[(o*rows + r) * out_stride + v] = sum_j mat[r][j] * in[(o*cols + j) * in_stride + v]
 * for o < outer, r < rows, v < vec. Zero coefficients are skipped: B^T and A^T are about
 * half zeros, and skipping them here costs one branch per row, not per element. */
static inline __attribute__((always_inline)) void WG_FN(wg_pass)(
    const WG_REAL *restrict in, Py_ssize_t in_stride, WG_REAL *restrict out,
    Py_ssize_t out_stride, const WG_REAL *restrict mat, Py_ssize_t rows, Py_ssize_t cols,
    Py_ssize_t outer, Py_ssize_t vec)
{
    for (Py_ssize_t o = 0; o < outer; o++) {
        for (Py_ssize_t r = 0; r < rows; r++) {
            WG_REAL *restrict dst = out + (o * rows + r) * out_stride;
            const WG_REAL *row = mat + r * cols;
            int first = 1;
            for (Py_ssize_t j = 0; j < cols; j++) {
                const WG_REAL c = row[j];
                if (c == 0)
                    continue;
                const WG_REAL *restrict s = in + (o * cols + j) * in_stride;
                if (first) {
                    for (Py_ssize_t v = 0; v < vec; v++)
                        dst[v] = c * s[v];
                    first = 0;
                } else {
                    for (Py_ssize_t v = 0; v < vec; v++)
                        dst[v] += c * s[v];
                }
            }
            if (first)
                for (Py_ssize_t v = 0; v < vec; v++)
                    dst[v] = 0;
        }
    }
}

/* Tile index t (over batch and the tile grid) -> batch entry and first output per axis. */
static inline void WG_FN(wg_tile_origin)(const wg_geometry *geo, Py_ssize_t t, Py_ssize_t *n,
                                         Py_ssize_t origin[3])
{
    Py_ssize_t j2 = t % geo->tiles[2];
    t /= geo->tiles[2];
    Py_ssize_t j1 = t % geo->tiles[1];
    t /= geo->tiles[1];
    Py_ssize_t j0 = t % geo->tiles[0];
    *n = t / geo->tiles[0];
    origin[0] = j0 * geo->m[0];
    origin[1] = j1 * geo->m[1];
    origin[2] = j2 * geo->m[2];
}

/* B^T d B (per axis) for tiles [t_begin, t_end) of group g. Writes
 * V[pos * pos_stride + (t - t_begin) * ICg + c] with pos = (p0*a1 + p1)*a2 + p2.
 * buf_a and buf_b each hold geo->buf_elems elements. */
WG_TARGETS void WG_FN(wg_input_tiles)(
    const WG_REAL *src, const wg_geometry *geo, const WG_REAL *bt0, const WG_REAL *bt1,
    const WG_REAL *bt2, Py_ssize_t g, Py_ssize_t t_begin, Py_ssize_t t_end, WG_REAL *V,
    Py_ssize_t pos_stride, WG_REAL *buf_a, WG_REAL *buf_b)
{
    const Py_ssize_t a0 = geo->alpha[0], a1 = geo->alpha[1], a2 = geo->alpha[2];
    const Py_ssize_t I0 = geo->in_shape[0], I1 = geo->in_shape[1], I2 = geo->in_shape[2];
    const Py_ssize_t IC = geo->in_channels, ICg = geo->in_channels_per_group;
    const Py_ssize_t CC = geo->channel_chunk;
    for (Py_ssize_t t = t_begin; t < t_end; t++) {
        Py_ssize_t n, origin[3];
        WG_FN(wg_tile_origin)(geo, t, &n, origin);
        const Py_ssize_t s0 = origin[0] - geo->pads_begin[0];
        const Py_ssize_t s1 = origin[1] - geo->pads_begin[1];
        const Py_ssize_t s2 = origin[2] - geo->pads_begin[2];
        /* the part of the tile's last axis that lies inside src; the rest is zero padding */
        const Py_ssize_t x_lo = s2 < 0 ? -s2 : 0;
        const Py_ssize_t x_hi = (I2 - s2) < a2 ? (I2 - s2) : a2;
        for (Py_ssize_t c0 = 0; c0 < ICg; c0 += CC) {
            const Py_ssize_t cc = (ICg - c0) < CC ? (ICg - c0) : CC;
            const WG_REAL *base = src + n * I0 * I1 * I2 * IC + g * ICg + c0;
            for (Py_ssize_t i0 = 0; i0 < a0; i0++) {
                const Py_ssize_t y0 = s0 + i0;
                for (Py_ssize_t i1 = 0; i1 < a1; i1++) {
                    const Py_ssize_t y1 = s1 + i1;
                    WG_REAL *row = buf_a + (i0 * a1 + i1) * a2 * cc;
                    if (y0 < 0 || y0 >= I0 || y1 < 0 || y1 >= I1 || x_lo >= x_hi) {
                        memset(row, 0, (size_t)(a2 * cc) * sizeof(WG_REAL));
                        continue;
                    }
                    if (x_lo > 0)
                        memset(row, 0, (size_t)(x_lo * cc) * sizeof(WG_REAL));
                    const WG_REAL *line = base + ((y0 * I1 + y1) * I2 + s2) * IC;
                    for (Py_ssize_t i2 = x_lo; i2 < x_hi; i2++)
                        memcpy(row + i2 * cc, line + i2 * IC, (size_t)cc * sizeof(WG_REAL));
                    if (x_hi < a2)
                        memset(row + x_hi * cc, 0,
                               (size_t)((a2 - x_hi) * cc) * sizeof(WG_REAL));
                }
            }
            WG_REAL *cur = buf_a, *other = buf_b, *swap;
            if (a0 > 1) {
                WG_FN(wg_pass)(cur, a1 * a2 * cc, other, a1 * a2 * cc, bt0, a0, a0, 1,
                               a1 * a2 * cc);
                swap = cur; cur = other; other = swap;
            }
            if (a1 > 1) {
                WG_FN(wg_pass)(cur, a2 * cc, other, a2 * cc, bt1, a1, a1, a0, a2 * cc);
                swap = cur; cur = other; other = swap;
            }
            WG_FN(wg_pass)(cur, cc, V + (t - t_begin) * ICg + c0, pos_stride, bt2, a2, a2,
                           a0 * a1, cc);
        }
    }
}

/* A^T M A (per axis) plus bias for tiles [t_begin, t_end) of group g, from
 * M[pos * pos_stride + (t - t_begin) * OCg + oc]; writes the outputs that fall inside dst
 * (the last tile along an axis may stick out).
 *
 * Returns nonzero when an output written is Inf or NaN. The transforms spread a special
 * value over the whole tile (and may overflow earlier than a direct sum), so the caller
 * then recomputes exactly; the test (y - y != 0 holds only for Inf and NaN) is an integer
 * OR the compiler keeps vectorised. */
WG_TARGETS int WG_FN(wg_output_tiles)(
    const WG_REAL *M, Py_ssize_t pos_stride, const wg_geometry *geo, const WG_REAL *at0,
    const WG_REAL *at1, const WG_REAL *at2, const WG_REAL *bias, Py_ssize_t g,
    Py_ssize_t t_begin, Py_ssize_t t_end, WG_REAL *dst, WG_REAL *buf_a, WG_REAL *buf_b)
{
    const Py_ssize_t a0 = geo->alpha[0], a1 = geo->alpha[1], a2 = geo->alpha[2];
    const Py_ssize_t m0 = geo->m[0], m1 = geo->m[1], m2 = geo->m[2];
    const Py_ssize_t O0 = geo->out_shape[0], O1 = geo->out_shape[1], O2 = geo->out_shape[2];
    const Py_ssize_t OC = geo->out_channels, OCg = geo->out_channels_per_group;
    const Py_ssize_t CC = geo->channel_chunk;
    int nonfinite = 0;
    for (Py_ssize_t t = t_begin; t < t_end; t++) {
        Py_ssize_t n, origin[3];
        WG_FN(wg_tile_origin)(geo, t, &n, origin);
        const Py_ssize_t e0 = (O0 - origin[0]) < m0 ? (O0 - origin[0]) : m0;
        const Py_ssize_t e1 = (O1 - origin[1]) < m1 ? (O1 - origin[1]) : m1;
        const Py_ssize_t e2 = (O2 - origin[2]) < m2 ? (O2 - origin[2]) : m2;
        for (Py_ssize_t c0 = 0; c0 < OCg; c0 += CC) {
            const Py_ssize_t cc = (OCg - c0) < CC ? (OCg - c0) : CC;
            WG_REAL *cur = buf_a, *other = buf_b, *swap;
            WG_FN(wg_pass)(M + (t - t_begin) * OCg + c0, pos_stride, cur, cc, at2, m2, a2,
                           a0 * a1, cc);
            if (a1 > 1) {
                WG_FN(wg_pass)(cur, m2 * cc, other, m2 * cc, at1, m1, a1, a0, m2 * cc);
                swap = cur; cur = other; other = swap;
            }
            if (a0 > 1) {
                WG_FN(wg_pass)(cur, m1 * m2 * cc, other, m1 * m2 * cc, at0, m0, a0, 1,
                               m1 * m2 * cc);
                swap = cur; cur = other; other = swap;
            }
            const WG_REAL *b = bias ? bias + g * OCg + c0 : NULL;
            for (Py_ssize_t i0 = 0; i0 < e0; i0++) {
                for (Py_ssize_t i1 = 0; i1 < e1; i1++) {
                    WG_REAL *line = dst + (((n * O0 + origin[0] + i0) * O1 + origin[1] + i1)
                                           * O2 + origin[2]) * OC + g * OCg + c0;
                    const WG_REAL *res = cur + (i0 * m1 + i1) * m2 * cc;
                    for (Py_ssize_t i2 = 0; i2 < e2; i2++) {
                        WG_REAL *restrict out = line + i2 * OC;
                        const WG_REAL *restrict val = res + i2 * cc;
                        if (b) {
                            for (Py_ssize_t v = 0; v < cc; v++) {
                                const WG_REAL y = val[v] + b[v];
                                out[v] = y;
                                nonfinite |= (y - y != 0);
                            }
                        } else {
                            for (Py_ssize_t v = 0; v < cc; v++) {
                                const WG_REAL y = val[v];
                                out[v] = y;
                                nonfinite |= (y - y != 0);
                            }
                        }
                    }
                }
            }
        }
    }
    return nonfinite;
}

/* G w G^T (per axis) for input channels [ic_begin, ic_end) of one group: w holds that
 * group's canonical weights (K0, K1, K2, ICg, OCg); writes
 * U[pos * ICg * OCg + ic * OCg + oc]. The filter is read once and every position comes out
 * of the separable passes, which is cheaper than 9 (27) taps per position. */
WG_TARGETS void WG_FN(wg_weight_tiles)(
    const WG_REAL *w, const wg_geometry *geo, const WG_REAL *g0, const WG_REAL *g1,
    const WG_REAL *g2, Py_ssize_t ic_begin, Py_ssize_t ic_end, WG_REAL *U, WG_REAL *buf_a,
    WG_REAL *buf_b)
{
    const Py_ssize_t a0 = geo->alpha[0], a1 = geo->alpha[1], a2 = geo->alpha[2];
    const Py_ssize_t k0 = geo->kernel[0], k1 = geo->kernel[1], k2 = geo->kernel[2];
    const Py_ssize_t ICg = geo->in_channels_per_group, OCg = geo->out_channels_per_group;
    const Py_ssize_t CC = geo->channel_chunk;
    const Py_ssize_t tap_stride = ICg * OCg;
    for (Py_ssize_t ic = ic_begin; ic < ic_end; ic++) {
        for (Py_ssize_t c0 = 0; c0 < OCg; c0 += CC) {
            const Py_ssize_t cc = (OCg - c0) < CC ? (OCg - c0) : CC;
            const Py_ssize_t taps = k0 * k1 * k2;
            for (Py_ssize_t tap = 0; tap < taps; tap++)
                memcpy(buf_a + tap * cc, w + tap * tap_stride + ic * OCg + c0,
                       (size_t)cc * sizeof(WG_REAL));
            WG_REAL *cur = buf_a, *other = buf_b, *swap;
            if (a0 > 1) {
                WG_FN(wg_pass)(cur, k1 * k2 * cc, other, k1 * k2 * cc, g0, a0, k0, 1,
                               k1 * k2 * cc);
                swap = cur; cur = other; other = swap;
            }
            if (a1 > 1) {
                WG_FN(wg_pass)(cur, k2 * cc, other, k2 * cc, g1, a1, k1, a0, k2 * cc);
                swap = cur; cur = other; other = swap;
            }
            WG_FN(wg_pass)(cur, cc, U + ic * OCg + c0, tap_stride, g2, a2, k2, a0 * a1, cc);
        }
    }
}

#undef WG_FN
#undef WG_CAT
#undef WG_CAT_
