/* The transforms' entry points for one real type, one copy per instruction-set level and a
 * dispatch on the level in effect (wg_isa_level). Included at the end of
 * winograd_template.h, where each function `name` exists as the always-inlined body
 * WG_FN(name_body); this file defines WG_FN(name), the one _winograd.pyx calls.
 *
 * Each copy is the body inlined into a function with the level's GCC target attribute, so
 * the body and the helpers it inlines are compiled for that level (what target_clones
 * did, but chosen by the cap rather than fixed when the module loads). */

#if WG_X86
#define WG_LEVEL_COPY(RET, RETURN, name, suffix, TARGET, PARAMS, ARGS)                      \
    static __attribute__((target(TARGET), noinline)) RET WG_FN(name##_##suffix) PARAMS {   \
        RETURN WG_FN(name##_body) ARGS;                                                     \
    }
#define WG_DISPATCHED(RET, RETURN, name, PARAMS, ARGS)                                      \
    WG_LEVEL_COPY(RET, RETURN, name, v4, "arch=x86-64-v4", PARAMS, ARGS)                    \
    WG_LEVEL_COPY(RET, RETURN, name, v3, "arch=x86-64-v3", PARAMS, ARGS)                    \
    static RET WG_FN(name) PARAMS {                                                         \
        const int level = wg_isa_level();                                                   \
        if (level == 2) {                                                                   \
            RETURN WG_FN(name##_v4) ARGS;                                                   \
        } else if (level == 1) {                                                            \
            RETURN WG_FN(name##_v3) ARGS;                                                   \
        } else {                                                                            \
            RETURN WG_FN(name##_body) ARGS;                                                 \
        }                                                                                   \
    }
#else
#define WG_DISPATCHED(RET, RETURN, name, PARAMS, ARGS)                                      \
    static RET WG_FN(name) PARAMS { RETURN WG_FN(name##_body) ARGS; }
#endif

WG_DISPATCHED(void, , wg_input_tiles,
    (const WG_REAL *src, const wg_geometry *geo, const WG_REAL *bt0, const WG_REAL *bt1,
     const WG_REAL *bt2, Py_ssize_t g, Py_ssize_t t_begin, Py_ssize_t t_end,
     Py_ssize_t row_begin, WG_REAL *V, Py_ssize_t pos_stride, WG_REAL *buf_a,
     WG_REAL *buf_b),
    (src, geo, bt0, bt1, bt2, g, t_begin, t_end, row_begin, V, pos_stride, buf_a, buf_b))

WG_DISPATCHED(int, return, wg_output_tiles,
    (const WG_REAL *M, Py_ssize_t pos_stride, Py_ssize_t row_stride, const wg_geometry *geo,
     const WG_REAL *at0, const WG_REAL *at1, const WG_REAL *at2, const WG_REAL *bias,
     Py_ssize_t g, Py_ssize_t t_begin, Py_ssize_t t_end, Py_ssize_t row_begin,
     WG_REAL *dst, WG_REAL *buf_a, WG_REAL *buf_b),
    (M, pos_stride, row_stride, geo, at0, at1, at2, bias, g, t_begin, t_end, row_begin, dst,
     buf_a, buf_b))

WG_DISPATCHED(void, , wg_weight_tiles,
    (const WG_REAL *w, const wg_geometry *geo, const WG_REAL *g0, const WG_REAL *g1,
     const WG_REAL *g2, Py_ssize_t ic_begin, Py_ssize_t ic_end, WG_REAL *U,
     Py_ssize_t pos_stride, Py_ssize_t nr, WG_REAL *buf_a, WG_REAL *buf_b,
     Py_ssize_t p_lo, Py_ssize_t p_hi),
    (w, geo, g0, g1, g2, ic_begin, ic_end, U, pos_stride, nr, buf_a, buf_b, p_lo, p_hi))

WG_DISPATCHED(void, , wg_weight_pack,
    (const WG_REAL *w, Py_ssize_t ICg, Py_ssize_t OCg, Py_ssize_t block_width,
     Py_ssize_t k_lo, Py_ssize_t k_hi, WG_REAL *out, Py_ssize_t tap_stride,
     Py_ssize_t block_stride),
    (w, ICg, OCg, block_width, k_lo, k_hi, out, tap_stride, block_stride))

WG_DISPATCHED(void, , wg_weight_row,
    (const WG_REAL *w, Py_ssize_t tap_stride, Py_ssize_t ICg, Py_ssize_t width,
     const WG_REAL *g, Py_ssize_t alpha, Py_ssize_t i, Py_ssize_t j_lo, Py_ssize_t j_hi,
     Py_ssize_t nr, WG_REAL *out, Py_ssize_t slice_stride),
    (w, tap_stride, ICg, width, g, alpha, i, j_lo, j_hi, nr, out, slice_stride))

#undef WG_DISPATCHED
#undef WG_LEVEL_COPY
