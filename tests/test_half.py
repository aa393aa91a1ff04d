"""float16 and bfloat16: accumulate in float32, store in the input's type
(docs/specification.md §3.2).

Every algorithm sees a float32 problem (converted copies at the boundary) whose
``result_dtype`` is the half type, so every registered algorithm claims half inputs; the
result is rounded once, at the end. The bound per element is therefore

    |got - ref| <= t32 + eps(half) / 2 * (|ref| + t32) + smallest_subnormal(half)

where ref is the float64 oracle on the same (half) inputs and t32 the algorithm's float32
bound (helpers.TOLERANCES): the float32 computation, then one rounding to nearest
(eps(float16) = 2**-10, eps(bfloat16) = 2**-7).
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import convlab
from tests.helpers import ALGORITHMS, problem_of, reduction_length, skip_unless_supported, tolerance
from tests.test_grid import grid_cells, grid_problem

ml_dtypes = pytest.importorskip("ml_dtypes")

HALF = {"float16": np.dtype(np.float16), "bfloat16": np.dtype(ml_dtypes.bfloat16)}


def half_bound(algorithm, dtype, problem, expected, magnitude):
    info = ml_dtypes.finfo(dtype)
    bound = tolerance(algorithm)
    t32 = (bound.factor(np.float32) * np.finfo(np.float32).eps
           * math.sqrt(reduction_length(problem)))
    if bound.scale == "output" and magnitude.size:
        magnitude = np.full_like(magnitude, magnitude.max())
    t32 = t32 * magnitude
    return t32 + float(info.eps) / 2 * (np.abs(expected) + t32) + float(info.smallest_subnormal)


def check_half(got, src, weights, bias, attributes, algorithm, dtype):
    problem = problem_of(src, weights, bias, attributes)
    assert got.dtype == HALF[dtype], (got.dtype, dtype)
    expected = convlab.reference.convolve(src, weights, bias, **attributes)
    magnitude = convlab.reference.convolve(
        np.abs(src.astype(np.float64)), np.abs(weights.astype(np.float64)),
        None if bias is None else np.abs(bias.astype(np.float64)), **attributes)
    allowed = half_bound(algorithm, dtype, problem, expected, magnitude)
    error = np.abs(got.astype(np.float64) - expected)
    bad = ~(error <= allowed)
    assert not bad.any(), (f"{algorithm} {dtype}: {int(bad.sum())} of {bad.size} beyond the "
                           f"bound; worst error/allowed {np.max(error / allowed):.3g}; "
                           f"{problem.describe()} {attributes}")


CELLS = [cell for cell in grid_cells() if cell[0] == "float32"]


@pytest.mark.parametrize("dtype", list(HALF))
@pytest.mark.parametrize("cell", CELLS, ids=lambda c: "-".join(map(str, c[1:])))
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_half_grid(rng, algorithm, cell, dtype):
    src, weights, bias, attributes = grid_problem(rng, *cell)
    src, weights = src.astype(HALF[dtype]), weights.astype(HALF[dtype])
    bias = None if bias is None else bias.astype(HALF[dtype])
    problem = problem_of(src, weights, bias, attributes)
    assert problem.dtype == np.float32 and problem.output_dtype == HALF[dtype]
    skip_unless_supported(algorithm, problem)
    got = convlab.convolve(src, weights, bias, algorithm=algorithm, **attributes)
    check_half(got, src, weights, bias, attributes, algorithm, dtype)


@pytest.mark.parametrize("dtype", list(HALF))
def test_half_result_is_the_rounded_float32_result(rng, dtype):
    """Within one rounding of the float32 convolution of the same values."""
    src = rng.standard_normal((2, 9, 9, 16)).astype(HALF[dtype])
    weights = rng.standard_normal((3, 3, 16, 8)).astype(HALF[dtype])
    got = convlab.convolve(src, weights, pads_begin=1, pads_end=1, algorithm="direct")
    single = convlab.convolve(src.astype(np.float32), weights.astype(np.float32),
                              pads_begin=1, pads_end=1, algorithm="direct")
    np.testing.assert_array_equal(got, single.astype(HALF[dtype]))


@pytest.mark.parametrize("dtype", list(HALF))
def test_half_plan_out_and_post_ops(rng, dtype):
    h = HALF[dtype]
    src = rng.standard_normal((1, 4, 6, 6)).astype(h)
    weights = rng.standard_normal((5, 4, 3, 3)).astype(h)
    keywords = dict(data_format="NCX", weights_format="OIX", pads_begin=1, pads_end=1)
    expected = convlab.convolve(src, weights, **keywords)
    plan = convlab.Convolution(weights, **keywords)
    # a plan chooses as if its weights were prepared, so it may pick another algorithm
    np.testing.assert_array_equal(plan(src), convlab.convolve(
        src, weights, algorithm=plan.algorithm_for(src), **keywords))
    out = np.empty(expected.shape, h)
    assert convlab.convolve(src, weights, out=out, **keywords) is out
    np.testing.assert_array_equal(out, expected)
    relu = convlab.convolve(src, weights, post_ops=["relu"], **keywords)
    np.testing.assert_array_equal(relu, np.maximum(expected, h.type(0)))
    with pytest.raises(ValueError, match=f"out has dtype float32; expected {dtype}"):
        convlab.convolve(src, weights, out=np.empty(expected.shape, np.float32), **keywords)


def test_mixed_half_and_float32_computes_and_returns_float32(rng):
    src = rng.standard_normal((1, 5, 5, 2)).astype(np.float16)
    weights = rng.standard_normal((3, 3, 2, 3)).astype(np.float32)
    assert convlab.convolve(src, weights).dtype == np.float32
    both = np.zeros((1, 5, 5, 2), ml_dtypes.bfloat16)
    assert convlab.convolve(both, weights.astype(np.float16)).dtype == np.float32
    assert convlab.convolve(src, weights.astype(np.float64)).dtype == np.float64
