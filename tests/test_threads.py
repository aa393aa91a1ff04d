"""Thread count: results do not depend on it, and the effective count is decided as documented."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import convlab
from convlab.runtime.threads import available_cores
from convlab.strategies.kernels import _runtime
from tests.helpers import (
    ALGORITHMS,
    assert_matches_reference,
    problem_of,
    random_tensors,
    skip_unless_supported,
    thread_invariant,
)

# (batch, input, kernel, attributes): enough output rows that two threads share them,
# and one problem with a single output, less work than threads.
THREAD_PROBLEMS = {
    "2d-many-rows": (3, (9, 8), (3, 3), dict(pads_begin=1, pads_end=1)),
    "3d-strided": (2, (5, 6, 7), (2, 3, 2), dict(strides=(1, 2, 2), dilations=(2, 1, 1))),
    "3d-dense": (2, (5, 6, 7), (3, 3, 3), dict(pads_begin=(1, 0, 2), pads_end=1)),
    "1d-single-output": (1, (3,), (3,), {}),
}


@pytest.mark.parametrize("data_format", ["NCX", "NXC"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", list(THREAD_PROBLEMS))
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_result_does_not_depend_on_thread_count(rng, algorithm, case, dtype, data_format):
    batch, input_shape, kernel, extra = THREAD_PROBLEMS[case]
    weights_format = "OIX" if data_format == "NCX" else "XIO"
    src, weights, bias = random_tensors(
        rng, batch=batch, in_channels=6, out_channels=4, groups=2, input_shape=input_shape,
        kernel_shape=kernel, dtype=dtype, data_format=data_format,
        weights_format=weights_format, bias=True)
    attributes = dict(extra, groups=2, data_format=data_format, weights_format=weights_format)
    skip_unless_supported(algorithm, problem_of(src, weights, bias, attributes))
    results = {threads: convlab.convolve(src, weights, bias, algorithm=algorithm,
                                         threads=threads, **attributes)
               for threads in (1, 2, 3, 7, -1)}
    assert_matches_reference(results[1], src, weights, bias, attributes, algorithm)
    for threads, got in results.items():
        if thread_invariant(algorithm):
            np.testing.assert_array_equal(got, results[1], err_msg=f"threads={threads}",
                                          strict=True)
        else:
            assert_matches_reference(got, src, weights, bias, attributes, algorithm,
                                     f"threads={threads}")


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_result_does_not_depend_on_openmp_limit(rng, algorithm):
    """The default thread count follows threadpoolctl's OpenMP limit; results must not."""
    threadpoolctl = pytest.importorskip("threadpoolctl")
    src, weights, bias = random_tensors(
        rng, batch=2, in_channels=4, out_channels=4, groups=1, input_shape=(8, 7),
        kernel_shape=(3, 3), dtype="float32", data_format="NXC", weights_format="XIO",
        bias=True)
    skip_unless_supported(algorithm, problem_of(src, weights, bias))
    default = convlab.convolve(src, weights, bias, algorithm=algorithm)
    with threadpoolctl.threadpool_limits(1, user_api="openmp"):
        limited = convlab.convolve(src, weights, bias, algorithm=algorithm)
    if thread_invariant(algorithm):
        np.testing.assert_array_equal(limited, default, strict=True)
    else:
        assert_matches_reference(limited, src, weights, bias, {}, algorithm)


# ---------------------------------------------------------------------------- effective_threads

def test_explicit_positive_counts_are_kept():
    for threads in (1, 2, 3, 64):
        assert convlab.effective_threads(threads) == threads
    assert convlab.effective_threads(np.int64(2)) == 2


def test_negative_counts_are_counted_from_the_available_cores():
    cores = available_cores()
    assert convlab.effective_threads(-1) == cores
    for k in range(1, cores + 1):
        assert convlab.effective_threads(-k) == cores + 1 - k
    with pytest.raises(ValueError, match=rf"threads={-(cores + 1)} leaves no thread"):
        convlab.effective_threads(-(cores + 1))


def test_default_is_between_one_and_the_available_cores():
    assert 1 <= convlab.effective_threads() <= available_cores()
    assert convlab.effective_threads(None) == convlab.effective_threads()


@pytest.mark.parametrize("threads, error, match", [
    (0, ValueError, r"threads=0"), (1.0, TypeError, r"threads=1\.0"),
    ("1", TypeError, r"threads='1'"), (False, TypeError, r"threads=False"),
    (2**31, ValueError, r"threads=2147483648 is more than the kernels take"),
])
def test_invalid_counts_are_refused(threads, error, match):
    with pytest.raises(error, match=match):
        convlab.effective_threads(threads)


def test_default_honours_threadpoolctl_openmp_limit():
    threadpoolctl = pytest.importorskip("threadpoolctl")
    if not _runtime.openmp_enabled():
        pytest.skip("kernels built without OpenMP: no OpenMP runtime to limit")
    with threadpoolctl.threadpool_limits(1, user_api="openmp"):
        assert convlab.effective_threads() == 1
        assert convlab.effective_threads(2) == 2  # an explicit count still wins


def _in_subprocess(omp_num_threads, code):
    """Run ``code`` (after ``import numpy as np, convlab``) in a fresh interpreter whose
    environment sets OMP_NUM_THREADS (the OpenMP runtime reads it once, at start-up)."""
    env = dict(os.environ, OMP_NUM_THREADS=omp_num_threads)
    package_parent = os.path.dirname(os.path.dirname(convlab.__file__))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_parent,
                                                      env.get("PYTHONPATH")]))
    result = subprocess.run([sys.executable, "-c", "import numpy as np, convlab\n" + code],
                            env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout.split()


@pytest.mark.parametrize("omp_num_threads, expected", [
    pytest.param("1", lambda cores: 1, id="1"),
    # a nested-parallelism list: the outer level counts
    pytest.param("2,1", lambda cores: min(2, cores), id="2,1"),
    # never more than the cores this process may use
    pytest.param("1024", lambda cores: cores, id="1024"),
])
def test_default_honours_omp_num_threads(omp_num_threads, expected):
    out = _in_subprocess(omp_num_threads, "print(convlab.effective_threads(), "
                         "convlab.effective_threads(2), convlab.runtime.threads.available_cores())")
    default, explicit, cores = (int(v) for v in out)
    assert default == expected(cores)
    assert explicit == 2  # an explicit count wins over the environment


@pytest.mark.parametrize("omp_num_threads", ["\u00b2", "1" * 5000, "1_0", "four"],
                         ids=["superscript", "5000 digits", "underscore", "word"])
def test_omp_num_threads_that_is_not_a_count_is_ignored(omp_num_threads):
    out = _in_subprocess(omp_num_threads, "print(convlab.effective_threads(), "
                         "convlab.runtime.threads.available_cores())")
    default, cores = (int(v) for v in out)
    assert 1 <= default <= cores


def test_omp_num_threads_reaches_the_kernels():
    """Under OMP_NUM_THREADS=1 a default call runs and matches an explicit threads=2 call."""
    code = ("src, weights = np.ones((2, 6, 6, 3)), np.ones((3, 3, 3, 4))\n"
            "print(np.array_equal(convlab.convolve(src, weights),\n"
            "                     convlab.convolve(src, weights, threads=2)))")
    assert _in_subprocess("1", code) == ["True"]


def test_core_round_trip_is_measured_or_declined():
    # Two threads ping a cache line; with one core, or no OpenMP, the probe must decline
    # within its time budget rather than hang.
    seconds = _runtime.core_round_trip(rounds=2000, tries=3)
    assert seconds is None or 0 < seconds < 1e-3
    if not _runtime.openmp_enabled():
        assert seconds is None
    for bad in (dict(rounds=0), dict(tries=0)):
        with pytest.raises(ValueError, match="must be >= 1"):
            _runtime.core_round_trip(**bad)


def test_blas_limit_holds_every_blas_at_the_count_and_restores_it():
    from threadpoolctl import threadpool_info

    from convlab.runtime.threads import blas_limit

    def blas_counts():
        return [info["num_threads"] for info in threadpool_info()
                if info["user_api"] == "blas"]

    before = blas_counts()
    with blas_limit(1):
        assert all(count == 1 for count in blas_counts())
    assert blas_counts() == before
