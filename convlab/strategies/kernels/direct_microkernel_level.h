/* One ISA level of the direct microkernels: instantiates direct_microkernel_impl.h for
 * float and double with the level's parameters (CL_TGT, CL_LEVEL, CL_VBYTES and the shape
 * tables, defined by the includer), then clears those parameters so that the next level
 * can define its own. Included once per level by direct_microkernel.h. */
#define CL_REAL float
#define CL_TYPE f32
#define CL_HAVE_DW3 1
#include "direct_microkernel_impl.h"
#undef CL_REAL
#undef CL_TYPE
#undef CL_HAVE_DW3
#define CL_REAL double
#define CL_TYPE f64
#define CL_HAVE_DW3 0
#include "direct_microkernel_impl.h"
#undef CL_REAL
#undef CL_TYPE
#undef CL_HAVE_DW3

#undef CL_TGT
#undef CL_LEVEL
#undef CL_VBYTES
#undef CL_DENSE_JMAX
#undef CL_DENSE_PMAX_TABLE
#undef CL_DENSE_SHAPES
#undef CL_DW_PMAX_TABLE
#undef CL_DW_SHAPES
#undef CL_DW3_PMAX_TABLE
#undef CL_DW3_SHAPES
