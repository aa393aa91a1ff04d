"""Shared helpers of the convlab test suite: problem builders, the accuracy bound, mocks.

Test modules import them with ``from tests.helpers import ...``; the fixtures stay in
``conftest.py``, where pytest finds them.
"""
from __future__ import annotations

import contextlib
import importlib.util
import math
import os
import pathlib
import threading
import uuid
from dataclasses import dataclass

import numpy as np
import pytest

import convlab
from convlab.dispatch import registry

# Algorithms are listed at collection time, so one registered later (a new strategy module)
# is picked up by every parametrized test with no new test code.
ALGORITHMS = convlab.algorithms()

# --------------------------------------------------------------------------- accuracy

@dataclass(frozen=True)
class Tolerance:
    """Allowed error, in multiples of eps(dtype) * sqrt(L) times a magnitude.

    L is the reduction length IC/G * prod(K) (+1 with bias). The magnitude of an output
    element is sum|src|*|weights| + |bias| over its taps; ``scale="element"`` measures each
    element against its own magnitude, ``scale="output"`` against the largest one in the
    output (a normwise bound, for algorithms whose rounding mixes neighbouring outputs).
    """

    float32: float
    float64: float
    scale: str = "element"

    def factor(self, dtype) -> float:
        return getattr(self, np.dtype(dtype).name)


# Why the default bound (16, per element):
# * any summation order of L products satisfies |fl(s) - s| <= gamma_L * sum|a_i b_i|,
#   gamma_L ~= L * eps / 2 (Higham, "Accuracy and Stability of Numerical Algorithms",
#   §3.1); so with factor 16 the bound is the rigorous worst case for every L <= 1024,
#   which covers every problem in this suite, and beyond that it keeps the sqrt(L) growth
#   that rounding errors of random sign show in practice;
# * measuring against the magnitude, not |dst|, keeps the bound meaningful where the
#   products cancel, and demands exact zeros where every tap falls in padding;
# * a real indexing bug (a missing, extra or misplaced tap) is off by about
#   magnitude / L, orders of magnitude above the bound.
# Winograd F(m, 3) multiplies in a transformed domain: its error is bounded normwise, by the
# norms of the transform matrices (which grow with the tile size m, and as a power of the
# rank) times the data of the whole tile (Barabasz et al., "Error analysis and improving the
# accuracy of Winograd convolution for deep neural networks", ACM TOMS 2020), so an output
# whose own taps are small can carry its neighbours' rounding: scale="output". Measured
# worst normwise ratios (the same quantity, factor 1) over the grid and 5 x 150 random
# 3-kernel problems of rank 1-3 with IC/G up to 32, float32/float64: winograd2 0.7/0.6,
# winograd4 6.3/7.4, winograd6 26/38 (rank 3). The factors leave 3.4x or more headroom;
# a missing tap still exceeds the winograd6 bound by two orders of magnitude in float32
# at L = 27.
# FFT multiplies spectra: an output's error is that of its whole tile's transforms (it
# grows with log2 of the transform size times the norms of the tile and the kernel), so it
# is bounded normwise too. The worst normwise ratios measured on the problems the tests
# run (the grid, the edge shapes, 3000 random problems drawn as test_properties draws
# them; python bench/fft_accuracy.py --test-bound --random 3000) were 1.3 in float32 and
# 1.77 in float64; the factor 8 leaves 4.5x headroom, and a missing tap at L = 27 still
# exceeds it by three orders of magnitude in float32.
# Keys are algorithm-name prefixes; the longest match wins. "" is the default.
TOLERANCES = {
    "": Tolerance(float32=16.0, float64=16.0),
    "winograd": Tolerance(float32=4.0, float64=4.0, scale="output"),
    "winograd4": Tolerance(float32=32.0, float64=32.0, scale="output"),
    "winograd6": Tolerance(float32=128.0, float64=128.0, scale="output"),
    "fft": Tolerance(float32=8.0, float64=8.0, scale="output"),
}

# Algorithms allowed to differ in the last bits between thread counts (say, one that splits
# the reduction across threads), by name prefix. Every other algorithm must be bit-identical.
THREAD_VARIANT_PREFIXES: tuple = ()


def _longest_prefix(name: str, keys):
    return max((k for k in keys if name.startswith(k)), key=len)


def tolerance(algorithm: str) -> Tolerance:
    return TOLERANCES[_longest_prefix(algorithm, TOLERANCES)]


def thread_invariant(algorithm: str) -> bool:
    return not any(algorithm.startswith(p) for p in THREAD_VARIANT_PREFIXES)


def reduction_length(problem: convlab.ConvProblem) -> int:
    return problem.in_channels_per_group * problem.kernel_size + int(problem.has_bias)


def _uncropped_magnitude(src, weights, bias, attributes, problem) -> float:
    """The largest magnitude of the stride-1 convolution padded by the dilated kernel's
    span on every side: every output a tile of a transformed-domain algorithm may compute
    on the way, cropped ones included (negative pads, output ends inside a tile), whose
    rounding the tile's kept outputs share. 0 when that convolution does not apply."""
    if attributes.get("padding_mode", "zeros") not in ("zeros", None):
        return 0.0
    spans = [(k - 1) * d for k, d in zip(problem.kernel_shape, problem.dilations)]
    uncropped = {key: value for key, value in attributes.items()
                 if key not in ("strides", "pads_begin", "pads_end", "auto_pad")}
    full = convlab.reference.convolve(
        np.abs(np.asarray(src, dtype=np.float64)), np.abs(np.asarray(weights, np.float64)),
        None if bias is None else np.abs(np.asarray(bias, np.float64)),
        pads_begin=spans, pads_end=spans, **uncropped)
    return float(full.max()) if full.size else 0.0


def assert_matches_reference(got, src, weights, bias, attributes, algorithm, context=""):
    """``got`` against the float64 oracle, within the algorithm's :class:`Tolerance`."""
    problem = problem_of(src, weights, bias, attributes)
    expected = convlab.reference.convolve(src, weights, bias, **attributes)
    magnitude = convlab.reference.convolve(
        np.abs(np.asarray(src, dtype=np.float64)), np.abs(np.asarray(weights, np.float64)),
        None if bias is None else np.abs(np.asarray(bias, np.float64)), **attributes)
    assert got.shape == expected.shape, f"shape {got.shape} != {expected.shape} {context}"
    assert got.dtype == problem.dtype, f"dtype {got.dtype} != {problem.dtype} {context}"
    bound = tolerance(algorithm)
    rtol = (bound.factor(problem.dtype) * np.finfo(problem.dtype).eps
            * math.sqrt(reduction_length(problem)))
    if bound.scale == "output" and magnitude.size:
        magnitude = np.full_like(magnitude, max(magnitude.max(), _uncropped_magnitude(
            src, weights, bias, attributes, problem)))
    error = np.abs(got.astype(np.float64) - expected)
    allowed = rtol * magnitude
    bad = ~(error <= allowed)  # also catches NaN
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        raise AssertionError(
            f"{algorithm} differs from the reference at {int(bad.sum())} of {bad.size} "
            f"elements; first at {where}: got {got[where]!r}, expected {expected[where]!r}, "
            f"error {error[where]:.3g} > allowed {allowed[where]:.3g} "
            f"(rtol {rtol:.3g} x magnitude {magnitude[where]:.3g}); problem "
            f"{problem.describe()} {attributes} {context}")


# --------------------------------------------------------------------------- problems

def problem_of(src, weights, bias=None, attributes=None) -> convlab.ConvProblem:
    """The validated ConvProblem for a call (shape-level; no data is touched)."""
    attributes = dict(attributes or {})
    for key in ("algorithm", "threads", "out"):
        attributes.pop(key, None)
    bias_shape, bias_dtype = (None, None) if bias is None else _shape_dtype(bias)
    return convlab.make_problem(*_shape_dtype(src), *_shape_dtype(weights), bias_shape,
                                bias_dtype, **attributes)


def _shape_dtype(value):
    if not (hasattr(value, "shape") and hasattr(value, "dtype")):
        value = np.asarray(value)
    return tuple(value.shape), np.dtype(value.dtype)


def skip_unless_supported(algorithm: str, problem: convlab.ConvProblem) -> None:
    reason = registry.get_algorithm(algorithm).supports(problem)
    if reason is not None:
        pytest.skip(f"{algorithm} does not support {problem.describe()}: {reason}")


def to_data_format(ncx: np.ndarray, data_format: str) -> np.ndarray:
    """An (N, C, X...) array in the requested layout, C-contiguous."""
    if data_format == "NXC":
        ncx = np.moveaxis(ncx, 1, -1)
    return np.ascontiguousarray(ncx)


def to_weights_format(oix: np.ndarray, weights_format: str) -> np.ndarray:
    """(OC, IC/G, K...) weights in the requested layout, C-contiguous."""
    if weights_format == "XIO":
        oix = np.moveaxis(oix, (0, 1), (-1, -2))
    return np.ascontiguousarray(oix)


def random_tensors(rng, *, batch, in_channels, out_channels, groups, input_shape,
                   kernel_shape, dtype, data_format, weights_format, bias):
    """Standard-normal src, weights and (optionally) bias in the requested layouts."""
    src = rng.standard_normal((batch, in_channels, *input_shape)).astype(dtype)
    weights = rng.standard_normal(
        (out_channels, in_channels // groups, *kernel_shape)).astype(dtype)
    b = rng.standard_normal(out_channels).astype(dtype) if bias else None
    return to_data_format(src, data_format), to_weights_format(weights, weights_format), b


# --------------------------------------------------------------------------- ISA levels

def _test_isa_levels() -> list:
    """The instruction-set levels that tests taking the ``isa_level`` fixture run at.

    ``CONVLAB_TEST_ISA_LEVELS``: ``all`` (the default) runs every level this CPU has up to
    the one in effect (``CONVLAB_MAX_CPU_ISA`` lowers it), ``native`` only the level in
    effect, or a comma-separated list of levels (those above the CPU are left out).
    """
    effective = convlab.runtime.cpu.ISA_LEVELS.index(convlab.runtime.cpu.effective_isa())
    runnable = [level for level in convlab.runtime.cpu.supported_levels()
                if convlab.runtime.cpu.ISA_LEVELS.index(level) <= effective]
    asked = os.environ.get("CONVLAB_TEST_ISA_LEVELS", "all").strip().lower()
    if asked == "all":
        return runnable
    if asked == "native":
        return [convlab.runtime.cpu.effective_isa()]
    wanted = [name.strip() for name in asked.split(",") if name.strip()]
    unknown = [name for name in wanted if name not in convlab.runtime.cpu.ISA_LEVELS]
    if unknown:
        raise ValueError(f"CONVLAB_TEST_ISA_LEVELS={asked!r}: {unknown} are not levels; "
                         f"expected all, native or some of {convlab.runtime.cpu.ISA_LEVELS}")
    return [level for level in runnable if level in wanted]


TEST_ISA_LEVELS = _test_isa_levels()


# --------------------------------------------------------------------------- processes

def run_python_in_checkout(code: str) -> None:
    """Run ``code`` in a fresh interpreter from the repository root (so the import is of
    this checkout, with no module already loaded); it must exit cleanly."""
    import pathlib
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=str(pathlib.Path(convlab.__file__).parents[1]), check=False)
    assert result.returncode == 0, result.stderr


# --------------------------------------------------------------------------- mocks

# pytest-run-parallel (--parallel-threads=N) runs each test in N threads at once; a test
# that changes process-wide state would change it under the other threads' feet.
MUTATES_REGISTRY = pytest.mark.thread_unsafe(
    reason="registers an algorithm in the process-wide registry, where the other threads' "
           "calls (auto, algorithms()) would find it")


def call_from_threads(call, count: int = 8, timeout: float = 120.0) -> list:
    """Run ``call()`` in ``count`` Python threads released together; their results in
    thread order. An exception in any thread fails the test (it is otherwise lost)."""
    results, errors = [None] * count, []
    start = threading.Barrier(count)

    def worker(index):
        try:
            start.wait()
            results[index] = call()
        except Exception as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=timeout)
    assert not errors, errors
    return results


@contextlib.contextmanager
def temporary_algorithm(run, **options):
    """Register ``run`` under a fresh name for the duration of the block, then remove it."""
    name = f"test_mock_{uuid.uuid4().hex[:8]}"
    before = convlab.algorithms()
    convlab.register_algorithm(name, **options)(run)
    try:
        yield name
    finally:
        convlab.unregister_algorithm(name)
        assert convlab.algorithms() == before, "the mock algorithm did not unregister cleanly"


# --------------------------------------------------------------------------- notebooks

# {file name: executed notebook}: test_notebooks.py fills it as it runs the tutorials, and
# test_render_notebooks.py renders those instead of executing them a second time.
EXECUTED_NOTEBOOKS: dict = {}


class FakeClock:
    """A ``time.perf_counter`` stand-in for timing code under test: seconds pass only when
    the test moves ``now``; ``reads`` counts the calls."""

    def __init__(self):
        self.now = 0.0
        self.reads = 0

    def __call__(self):
        self.reads += 1
        return self.now


# --------------------------------------------------------------------------- bench scripts

def load_bench_script(filename: str):
    """The module of a script in bench/ (they are not a package), imported from its file."""
    path = pathlib.Path(__file__).resolve().parents[1] / "bench" / filename
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
