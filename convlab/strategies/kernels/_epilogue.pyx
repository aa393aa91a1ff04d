# cython: language_level=3
"""The post-op chain a kernel applies in its epilogue (see epilogue.h).

:class:`Epilogue` is built once per call by :func:`convlab.ops.postops.epilogue` from parsed
post-ops, then handed to a kernel (``conv_direct``, ``conv_im2col``), which applies it to
each block of dst it finishes.
"""
from libc.stdlib cimport free, malloc

import numpy as _np

# Post-op names -> the CL_OP_* codes of epilogue.h.
OP_CODES = {name: code for code, name in enumerate((
    "relu", "tanh", "sigmoid", "elu", "gelu_erf", "gelu_tanh", "swish", "clip", "linear",
    "abs", "square", "exp", "log", "add", "mul", "max", "min", "scaled_add"))}


cdef class Epilogue:
    """``ops``: (name, parameters, operand) triples in order, operand None or an array of
    shape (N or 1, pixels or 1, OC or 1) in ``dtype``; ``sum_scale`` None, or the scale of
    a sum that comes before them; ``shape``: dst as (N, output pixels per image, OC)."""

    def __cinit__(self, ops, sum_scale, shape, dtype):
        cdef Py_ssize_t k, itemsize, axis
        cdef size_t address
        self.dtype = _np.dtype(dtype)
        if self.dtype not in (_np.float32, _np.float64):
            raise TypeError(f"dtype={self.dtype} must be float32 or float64")
        shape = tuple(shape)
        if len(shape) != 3 or min(shape) < 1:
            raise ValueError(f"shape={shape} must be (N, pixels, OC), each >= 1")
        itemsize = self.dtype.itemsize
        ops = list(ops)
        self.ops = <cl_postop*>malloc(max(1, len(ops)) * sizeof(cl_postop))
        if self.ops == NULL:
            raise MemoryError("no memory for the post-op list")
        self.operands = []
        self.c.seeds_sum = sum_scale is not None
        self.c.sum_scale = 1.0 if sum_scale is None else float(sum_scale)
        self.c.nops = len(ops)
        self.c.ops = self.ops
        self.c.npix = shape[1]
        for k, (name, parameters, operand) in enumerate(ops):
            if name not in OP_CODES:
                raise ValueError(f"post-op {name!r} has no kernel code; expected one of "
                                 f"{list(OP_CODES)}")
            self.ops[k].kind = OP_CODES[name]
            self.ops[k].a = parameters[0] if len(parameters) > 0 else 0.0
            self.ops[k].b = parameters[1] if len(parameters) > 1 else 0.0
            self.ops[k].operand = NULL
            self.ops[k].s_n = self.ops[k].s_pix = self.ops[k].s_ch = 0
            if operand is None:
                continue
            if (operand.dtype != self.dtype or operand.ndim != 3
                    or any(e not in (1, full) for e, full in zip(operand.shape, shape))):
                # the kernels index it without bounds checks
                raise ValueError(f"post-op {name!r}: operand of shape {operand.shape} and "
                                 f"dtype {operand.dtype}; expected {self.dtype} broadcastable "
                                 f"as {shape}")
            if any(s % itemsize for s in operand.strides):
                operand = _np.ascontiguousarray(operand)
            self.operands.append(operand)
            address = operand.__array_interface__["data"][0]
            self.ops[k].operand = <const void*>address
            strides = [0 if extent == 1 else stride // itemsize
                       for extent, stride in zip(operand.shape, operand.strides)]
            self.ops[k].s_n, self.ops[k].s_pix, self.ops[k].s_ch = strides

    def __dealloc__(self):
        free(self.ops)

    @property
    def seeds_sum(self):
        return bool(self.c.seeds_sum)

    def __len__(self):
        return self.c.nops
