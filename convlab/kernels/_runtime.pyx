"""What the compiled kernels were built with, and what their OpenMP runtime allows now."""
from convlab.kernels.omp_shim cimport CONVLAB_HAVE_OPENMP, omp_get_max_threads


def openmp_enabled():
    """True when the kernels were compiled with OpenMP (else prange runs serially)."""
    return bool(CONVLAB_HAVE_OPENMP)


def openmp_max_threads():
    """omp_get_max_threads(): honours OMP_NUM_THREADS and threadpoolctl's limits."""
    return omp_get_max_threads()
