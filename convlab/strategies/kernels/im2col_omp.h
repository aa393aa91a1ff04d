/* Team-level OpenMP calls the im2col kernel needs beyond omp_shim.h.
 * The cooperative mode unfolds a shared panel with every thread, then splits the GEMM
 * by output channels; the barrier keeps the two phases apart. Without OpenMP the team
 * is one thread and the barrier is a no-op. */
#ifndef CONVLAB_IM2COL_OMP_H
#define CONVLAB_IM2COL_OMP_H
#ifdef _OPENMP
#include <omp.h>
static inline void im2col_barrier(void) {
    #pragma omp barrier
}
static inline int im2col_team_size(void) { return omp_get_num_threads(); }
#else
static inline void im2col_barrier(void) {}
static inline int im2col_team_size(void) { return 1; }
#endif
#endif
