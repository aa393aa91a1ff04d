# Shared by the kernels that fuse post-ops (_direct, _im2col): the C description of a
# post-op chain (epilogue.h) and the object that owns it and its operands.
cdef extern from "epilogue.h" nogil:
    ctypedef struct cl_postop:
        int kind
        double a, b
        const void *operand
        Py_ssize_t s_n, s_pix, s_ch
    ctypedef struct cl_epilogue:
        int seeds_sum
        double sum_scale
        int nops
        const cl_postop *ops
        Py_ssize_t npix
    void cl_epi_prologue_f32(const cl_epilogue *e, float *d, Py_ssize_t ld, Py_ssize_t rows,
                             Py_ssize_t cols, const float *bias)
    void cl_epi_prologue_f64(const cl_epilogue *e, double *d, Py_ssize_t ld, Py_ssize_t rows,
                             Py_ssize_t cols, const double *bias)
    void cl_epi_apply_f32(const cl_epilogue *e, float *d, Py_ssize_t ld, Py_ssize_t rows,
                          Py_ssize_t cols, Py_ssize_t m0, Py_ssize_t c0)
    void cl_epi_apply_f64(const cl_epilogue *e, double *d, Py_ssize_t ld, Py_ssize_t rows,
                          Py_ssize_t cols, Py_ssize_t m0, Py_ssize_t c0)


cdef class Epilogue:
    cdef cl_epilogue c
    cdef cl_postop *ops
    cdef readonly object dtype
    cdef object operands  # keeps the binary operands alive while C points into them
