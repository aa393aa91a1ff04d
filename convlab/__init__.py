"""convlab: N-D convolutions on the CPU, for learning and for shipping.

Public API (names fixed by docs/specification.md §6): :func:`convolve`, :func:`algorithms`,
:func:`register_algorithm`, :func:`select_algorithm`, :func:`explain`, and the names in
``__all__``. The modules the documentation names keep their paths: :mod:`convlab.cpu`,
:mod:`convlab.reference`, :mod:`convlab.registry`, :mod:`convlab.select`,
:mod:`convlab.params`, :mod:`convlab.transpose`, :mod:`convlab.shapes`,
:mod:`convlab.winograd_transforms`, :mod:`convlab.strategies`, :mod:`convlab.viz`.

The package is laid out by concern (docs/index.md, "Where things are"):
``problem/`` describes a convolution, ``dispatch/`` chooses an algorithm for it,
``strategies/`` are the algorithms and their compiled kernels, ``ops/`` are the operations
built on the registry (``convolve``, the plan, transposed and 8-bit convolution, the
backward passes, post-ops), ``runtime/`` is the machine (CPU, threads, BLAS, buffers),
``cli/`` the command line and the benchmark harness, ``viz/`` the tutorials' figures.
"""
import pkgutil

# From a source checkout (``python -m convlab`` in the repository root) this folder
# shadows the installed package; extending the path lets ``convlab.strategies.kernels``
# find the installed compiled modules (see convlab/strategies/kernels/__init__.py).
__path__ = pkgutil.extend_path(__path__, __name__)

# The instruction-set cap (CONVLAB_MAX_CPU_ISA) is read once, here, before any kernel runs.
from convlab.runtime import cpu as runtime_cpu

runtime_cpu.read_environment()
del runtime_cpu

from convlab.dispatch.registry import (Algorithm, Estimate, algorithms, register_algorithm,
                                       unregister_algorithm)
from convlab.ops._convolve import convolve, explain, select_algorithm
from convlab.ops._plan import Convolution
from convlab.ops.transpose import conv_transpose
from convlab.ops._backward import convolve_backward_data, convolve_backward_weights
from convlab.dispatch._tune import clear_tune_cache, set_tune_cache
from convlab.problem.params import ConvProblem, make_problem
from convlab.runtime.threads import effective_threads
from convlab import strategies  # registers the built-in algorithms
from convlab import cpu, params, reference, registry, select
from convlab.dispatch.calibration.run import calibrate

from convlab import _version

__version__ = _version.VERSION

__all__ = [
    "Algorithm", "Convolution", "ConvProblem", "Estimate", "algorithms", "calibrate",
    "clear_tune_cache", "conv_transpose", "convolve", "convolve_backward_data",
    "convolve_backward_weights", "cpu", "effective_threads", "explain", "make_problem",
    "params", "reference", "register_algorithm", "registry", "select", "select_algorithm",
    "set_tune_cache", "strategies", "unregister_algorithm",
]
