"""convlab: N-D convolutions on the CPU, for learning and for shipping.

Public API (names fixed by docs/specification.md §6): :func:`convolve`, :func:`algorithms`,
:func:`register_algorithm`, :func:`select_algorithm`, :func:`explain`.
"""
from pkgutil import extend_path

# From a source checkout (``python -m convlab`` in the repository root) this folder
# shadows the installed package; extending the path lets ``convlab.kernels`` find
# the installed compiled modules (see convlab/kernels/__init__.py).
__path__ = extend_path(__path__, __name__)

# The instruction-set cap (CONVLAB_MAX_CPU_ISA) is read once, here, before any kernel runs.
from convlab import cpu as _cpu

_cpu._read_environment()

from convlab.registry import (Algorithm, Estimate, algorithms, register_algorithm,
                              unregister_algorithm)
from convlab.api import convolve, explain, select_algorithm
from convlab.plan import Convolution
from convlab.transpose import conv_transpose
from convlab.backward import convolve_backward_data, convolve_backward_weights
from convlab.tune import clear_tune_cache, set_tune_cache
from convlab.params import ConvProblem, make_problem
from convlab.threads import effective_threads
from convlab import strategies as _builtin_strategies  # noqa: F401  (registers them)
from convlab import reference
from convlab.calibration.run import calibrate

__version__ = "0.1.0"

__all__ = [
    "Algorithm", "Convolution", "ConvProblem", "Estimate", "algorithms", "calibrate",
    "clear_tune_cache", "conv_transpose", "convolve", "convolve_backward_data",
    "convolve_backward_weights", "effective_threads", "explain", "make_problem", "reference",
    "register_algorithm", "select_algorithm", "set_tune_cache", "unregister_algorithm",
]
