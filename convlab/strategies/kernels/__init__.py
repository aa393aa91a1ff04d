"""Compiled kernels (Cython, OpenMP). They only compute; choosing happens in Python.

Running from a source checkout (``python -m convlab`` or ``python -m pytest`` in the
repository root) imports this folder, which holds no compiled modules unless built
in place. ``extend_path`` lets the import fall through to the installed copy of this
package, so the README's commands work from the checkout after ``pip install .``.
"""
import functools
from pkgutil import extend_path

import numpy as np

__path__ = extend_path(__path__, __name__)

# Cython's names for the dtypes of the kernels' fused type ``real``.
_SPECIALIZATION_NAMES = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}


@functools.lru_cache(maxsize=64)
def specialized(function, dtype: np.dtype):
    """The ``dtype`` specialization of a kernel written over Cython's fused ``real``.

    Calling the fused function itself makes Cython match its arguments' buffer formats
    against every specialization first, about a microsecond per call: as much as a small
    layer's unfolding or packing."""
    return function.__signatures__[_SPECIALIZATION_NAMES[np.dtype(dtype)]]
