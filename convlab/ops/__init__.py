"""The operations built on the algorithm registry.

The entry points ``convolve``/``select_algorithm``/``explain`` and the plan ``Convolution``
live here (``_convolve``, ``_plan``) and are exported by :mod:`convlab`; transposed
convolution (:mod:`convlab.ops.transpose`), the backward passes (``_backward``), the 8-bit
path (``_quantized``) and the post-ops with the output stage (:mod:`convlab.ops.postops`).

One module here is compiled (``_signature``). As for the kernels
(:mod:`convlab.strategies.kernels`), ``extend_path`` lets its import from a source
checkout that was not built in place fall through to the installed copy of this package.
"""
from pkgutil import extend_path

__path__ = extend_path(__path__, __name__)
