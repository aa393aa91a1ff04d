"""The operations built on the algorithm registry.

The entry points ``convolve``/``select_algorithm``/``explain`` and the plan ``Convolution``
live here (``_convolve``, ``_plan``) and are exported by :mod:`convlab`; transposed
convolution (:mod:`convlab.ops.transpose`), the backward passes (``_backward``), the 8-bit
path (``_quantized``) and the post-ops with the output stage (:mod:`convlab.ops.postops`).
"""
