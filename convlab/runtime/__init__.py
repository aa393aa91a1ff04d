"""The machine convlab runs on: the CPU model and instruction-set cap
(:mod:`convlab.runtime.cpu`), thread counts and the BLAS thread limit
(:mod:`convlab.runtime.threads`), the BLAS library the im2col kernel calls
(:mod:`convlab.runtime.blas`) and aligned scratch buffers (``_buffers``)."""
