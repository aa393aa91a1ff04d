cdef extern from "omp_shim.h" nogil:
    int CONVLAB_HAVE_OPENMP
    int omp_get_max_threads()
    int omp_get_thread_num()
    int omp_get_num_threads()
    int omp_get_num_procs()
