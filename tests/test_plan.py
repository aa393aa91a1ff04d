"""The plan object ``convlab.Convolution``: same results as ``convolve``, weights prepared
once per algorithm, choices cached, safe under concurrent calls."""
from __future__ import annotations

import numpy as np
import pytest

import convlab
from tests.helpers import (
    ALGORITHMS,
    MUTATES_REGISTRY,
    assert_matches_reference,
    call_from_threads,
    problem_of,
    random_tensors,
    skip_unless_supported,
    temporary_algorithm,
)

ATTRIBUTES = dict(pads_begin=1, pads_end=(0, 1), groups=2)


def _tensors(rng, dtype="float32", batch=2):
    return random_tensors(rng, batch=batch, in_channels=8, out_channels=6, groups=2,
                          input_shape=(9, 7), kernel_shape=(3, 3), dtype=dtype,
                          data_format="NXC", weights_format="XIO", bias=True)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("algorithm", ALGORITHMS + ["auto"])
def test_plan_matches_the_reference_and_convolve(rng, algorithm, dtype):
    src, weights, bias = _tensors(rng, dtype)
    if algorithm != "auto":
        skip_unless_supported(algorithm, problem_of(src, weights, bias, ATTRIBUTES))
    plan = convlab.Convolution(weights, bias, algorithm=algorithm, **ATTRIBUTES)
    first, second = plan(src), plan(src)
    name = plan.algorithm_for(src)
    assert_matches_reference(first, src, weights, bias, ATTRIBUTES, name)
    np.testing.assert_array_equal(first, second)
    one_shot = convlab.convolve(src, weights, bias, algorithm=name, **ATTRIBUTES)
    np.testing.assert_array_equal(first, one_shot)


@MUTATES_REGISTRY
def test_weights_are_prepared_once_per_algorithm_and_dtype(rng):
    prepared = []

    def prepare(problem, weights):
        prepared.append(problem.dtype)
        return weights * 1  # a fresh array, as a real packing would be

    def run(problem, src, weights, bias, dst, threads):
        convlab.dispatch.registry.get_algorithm("reference").run(problem, src, weights, bias, dst,
                                                        threads)

    src, weights, bias = _tensors(rng)
    with temporary_algorithm(run, prepare_weights=prepare) as name:
        plan = convlab.Convolution(weights, bias, algorithm=name, **ATTRIBUTES)
        for _ in range(3):
            plan(src)
        plan(src[:1])  # another batch size: a new choice, the same prepared weights
        assert prepared == [np.dtype(np.float32)]
        plan(src.astype(np.float64))
        assert prepared == [np.dtype(np.float32), np.dtype(np.float64)]


def test_plan_keeps_its_own_copy_of_the_weights(rng):
    src, weights, bias = _tensors(rng)
    plan = convlab.Convolution(weights, bias, **ATTRIBUTES)
    before = plan(src)
    weights[...] = 0
    bias[...] = 0
    np.testing.assert_array_equal(plan(src), before)


def test_plan_writes_into_out_and_validates_it(rng):
    src, weights, bias = _tensors(rng)
    plan = convlab.Convolution(weights, bias, **ATTRIBUTES)
    expected = plan(src)
    out = np.empty_like(expected)
    assert plan(src, out=out) is out
    np.testing.assert_array_equal(out, expected)
    with pytest.raises(ValueError, match="out has shape"):
        plan(src, out=np.empty(expected.shape[:-1] + (1,), np.float32))
    with pytest.raises(ValueError, match="out has dtype"):
        plan(src, out=np.empty(expected.shape, np.float64))


@pytest.mark.parametrize("bad, match, error", [
    (dict(groups=4), "groups=4 must divide", ValueError),
    (dict(strides=0), "strides", ValueError),
    (dict(dilations=(1, 2, 3)), "dilations", ValueError),
    (dict(data_format="NHWC"), "data_format", ValueError),
    (dict(auto_pad="same"), "auto_pad", ValueError),
    (dict(algorithm="no_such_algorithm"), "algorithm=", ValueError),
    (dict(threads=0), "threads=0", ValueError),
    (dict(groups=1.5), "groups", TypeError),
])
def test_plan_validates_at_construction(rng, bad, match, error):
    _, weights, bias = random_tensors(rng, batch=1, in_channels=4, out_channels=6, groups=1,
                                      input_shape=(5, 5), kernel_shape=(3, 3),
                                      dtype="float32", data_format="NXC",
                                      weights_format="XIO", bias=True)
    with pytest.raises(error, match=match):
        convlab.Convolution(weights, bias, **bad)


def test_plan_rejects_a_src_that_does_not_fit(rng):
    src, weights, bias = _tensors(rng)
    plan = convlab.Convolution(weights, bias, **ATTRIBUTES)
    with pytest.raises(ValueError, match="IC/G"):
        plan(src[..., :4])


def test_one_plan_from_eight_python_threads_gives_identical_results(rng):
    src, weights, bias = random_tensors(rng, batch=2, in_channels=16, out_channels=16,
                                        groups=1, input_shape=(20, 20), kernel_shape=(3, 3),
                                        dtype="float32", data_format="NXC",
                                        weights_format="XIO", bias=True)
    plan = convlab.Convolution(weights, bias, pads_begin=1, pads_end=1)
    expected = convlab.convolve(src, weights, bias, pads_begin=1, pads_end=1,
                                algorithm=plan.algorithm_for(src))
    results = call_from_threads(lambda: [plan(src) for _ in range(5)])
    for outputs in results:
        for dst in outputs:
            np.testing.assert_array_equal(dst, expected)
