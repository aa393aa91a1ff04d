/* OpenMP entry points that exist with or without OpenMP.
 * Without it, prange loops compile to serial loops and these report one thread,
 * so every kernel builds on a compiler that lacks OpenMP. */
#ifndef CONVLAB_OMP_SHIM_H
#define CONVLAB_OMP_SHIM_H
#ifdef _OPENMP
#include <omp.h>
#define CONVLAB_HAVE_OPENMP 1
#else
#define CONVLAB_HAVE_OPENMP 0
static inline int omp_get_max_threads(void) { return 1; }
static inline int omp_get_thread_num(void) { return 0; }
static inline int omp_get_num_threads(void) { return 1; }
static inline int omp_get_num_procs(void) { return 1; }
#endif
#endif
