/* Instruction-set levels of the kernels' run-time dispatch, and the cap on them.
 *
 * A kernel with code for several levels runs the widest one the CPU supports, at most the
 * cap that convlab.cpu sets (CONVLAB_MAX_CPU_ISA, convlab.cpu.set_max_isa). The levels are
 * the x86-64 psABI ones: CL_ISA_AVX2 is x86-64-v3 (AVX2, FMA, BMI2, ...), CL_ISA_AVX512 is
 * x86-64-v4 (AVX-512 F, BW, CD, DQ, VL), so that every kernel means the same by a level.
 *
 * Each extension module compiles its own copy of these statics: convlab.cpu sets the cap in
 * every module that includes this header, as the module is imported (its _set_isa_cap) and
 * again on every change. Until then the module runs the baseline level. */
#ifndef CONVLAB_ISA_LEVEL_H
#define CONVLAB_ISA_LEVEL_H

/* Widest last. CL_ISA_DEFAULT is whatever the baseline compiler flags give (SSE2 on
 * x86-64), and the only level on other architectures and compilers. */
enum { CL_ISA_DEFAULT = 0, CL_ISA_AVX2 = 1, CL_ISA_AVX512 = 2, CL_ISA_COUNT = 3 };

/* CONVLAB_NO_ISA_DISPATCH builds only the portable level (to test it, or for compilers
 * without target attributes). */
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__)) \
    && !defined(CONVLAB_NO_ISA_DISPATCH)
#define CL_X86_DISPATCH 1
#else
#define CL_X86_DISPATCH 0
#endif

/* Whether this CPU (and its OS, which must save the wide registers) runs level `isa`. */
static int cl_isa_supported(int isa) {
    if (isa == CL_ISA_DEFAULT) return 1;
#if CL_X86_DISPATCH
    __builtin_cpu_init();
#if defined(__clang__) || __GNUC__ < 12
    /* compilers that do not know the psABI level names: the features the kernels'
     * target attributes use under such compilers */
    if (isa == CL_ISA_AVX2)
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (isa == CL_ISA_AVX512) return __builtin_cpu_supports("avx512f");
#else
    if (isa == CL_ISA_AVX2) return __builtin_cpu_supports("x86-64-v3");
    if (isa == CL_ISA_AVX512) return __builtin_cpu_supports("x86-64-v4");
#endif
#endif
    return 0;
}

/* The widest level this CPU runs. */
static int cl_isa_best(void) {
    int isa;
    for (isa = CL_ISA_COUNT - 1; isa > CL_ISA_DEFAULT; isa--)
        if (cl_isa_supported(isa)) return isa;
    return CL_ISA_DEFAULT;
}

/* The level this module's kernels run at: the widest the CPU supports, at most the cap.
 * Written by cl_isa_set_cap (from Python); kernels read it at least once per call, so a
 * change while one runs may mix levels within it, each of which computes correctly. */
static int cl_isa_in_effect = CL_ISA_DEFAULT;

/* Run at most level `cap` from now on (CL_ISA_COUNT - 1 or more: no cap). Returns the
 * level in effect. */
static int cl_isa_set_cap(int cap) {
    int best = cl_isa_best();
    if (cap < CL_ISA_DEFAULT) cap = CL_ISA_DEFAULT;
    cl_isa_in_effect = cap < best ? cap : best;
    return cl_isa_in_effect;
}

#endif /* CONVLAB_ISA_LEVEL_H */
