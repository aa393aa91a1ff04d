/* The elementwise stage's GEMM micro-kernel for one real type, one instruction set and one
 * micro-tile height: included by winograd_template.h with WG_REAL, WG_SUFFIX, WG_ISA (a
 * name), WG_ISA_ATTR (a GCC target attribute, or nothing), WG_ISA_BYTES (the vector width
 * of the panel's layout), WG_ISA_REGISTER_BYTES (the width computed with, a divisor of
 * WG_ISA_BYTES: a register of the level) and WG_MR (rows per micro-tile) defined.
 *
 *     C[WG_MR x 2 vectors] = A[WG_MR x k] @ panel[k x 2 vectors]
 *
 * Why not BLAS: a batch-1 Winograd GEMM has few rows (the tiles of a block: 9..200) and a
 * U slice of ICg x OCg that a BLAS call packs again on every call; with U packed once, in
 * prepare_weights, these skinny products ran about twice as fast (OpenBLAS 59, this
 * kernel about 105 GFLOP/s on res3a's 49 x 128 x 128, one core). The WG_MR accumulator
 * pairs stay in registers: 12 rows use 24 of AVX-512's 32 vector registers.
 *
 * Unless ``next`` is NULL, each step over k also prefetches the same row of ``next`` (the
 * panel the caller runs after this one) into L2: where a panel serves few row blocks, as
 * on the small maps of batch 1, the first block of each panel otherwise waits on U coming
 * from L3 or memory (wg_prefetch_max_tiles in winograd_kernels.h). */

#define WG_G_(name, isa, mr) WG_CAT(WG_CAT(WG_FN(name), isa), mr)
#define WG_G(name) WG_G_(name, WG_ISA, WG_MR)

static WG_ISA_ATTR __attribute__((noinline)) void WG_G(wg_micro)(
    Py_ssize_t k, const WG_REAL *A, Py_ssize_t lda, const WG_REAL *panel, WG_REAL *C,
    Py_ssize_t ldc, const WG_REAL *next)
{
    /* a row of the panel: V registers of L elements (two layout vectors) */
    typedef WG_REAL vec __attribute__((vector_size(WG_ISA_REGISTER_BYTES),
                                       aligned(sizeof(WG_REAL))));
    enum { L = WG_ISA_REGISTER_BYTES / sizeof(WG_REAL),
           V = 2 * WG_ISA_BYTES / WG_ISA_REGISTER_BYTES };
    vec acc[WG_MR][V];
#pragma GCC unroll 16
    for (int r = 0; r < WG_MR; r++)
#pragma GCC unroll 4
        for (int v = 0; v < V; v++)
            acc[r][v] = (vec){0};
    for (Py_ssize_t kk = 0; kk < k; kk++) {
        vec b[V];
        if (next)
#pragma GCC unroll 4
            for (int line = 0; line < (int)(V * L * sizeof(WG_REAL) / 64); line++)
                __builtin_prefetch(next + kk * V * L + line * (64 / sizeof(WG_REAL)), 0, 2);
#pragma GCC unroll 4
        for (int v = 0; v < V; v++)
            b[v] = *(const vec *)(panel + (kk * V + v) * L);
#pragma GCC unroll 16
        for (int r = 0; r < WG_MR; r++) {
            const WG_REAL s = A[r * lda + kk];
#pragma GCC unroll 4
            for (int v = 0; v < V; v++)
                acc[r][v] += s * b[v];
        }
    }
#pragma GCC unroll 16
    for (int r = 0; r < WG_MR; r++)
#pragma GCC unroll 4
        for (int v = 0; v < V; v++)
            *(vec *)(C + r * ldc + v * L) = acc[r][v];
}

#undef WG_G
#undef WG_G_
