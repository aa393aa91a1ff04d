# The instruction-set levels of the kernels' run-time dispatch and the cap on them
# (isa_level.h). Each module that cimports this has its own copy of the C statics;
# convlab.runtime.cpu sets the cap in all of them.
cdef extern from "isa_level.h" nogil:
    int CL_ISA_DEFAULT
    int CL_ISA_AVX2
    int CL_ISA_AVX512
    int CL_ISA_COUNT
    int CL_X86_DISPATCH
    int cl_isa_in_effect
    int cl_isa_supported(int isa)
    int cl_isa_best()
    int cl_isa_set_cap(int cap)
