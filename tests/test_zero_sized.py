"""Zero-sized axes on every entry point: an empty batch gives an empty result of the right
shape and dtype; an empty spatial, channel or kernel axis is a ValueError naming the
argument. Nothing may take the process down (an empty batch once divided by zero inside
direct's work planner on the auto path)."""
from __future__ import annotations

import numpy as np
import pytest

import convlab
from tests.helpers import ALGORITHMS, to_data_format, to_weights_format

LAYOUTS = [("NCX", "OIX"), ("NXC", "XIO")]
DTYPES = [np.float32, np.float64]
# rank 1, 2 and 3 problems: (IC, OC, input extents, kernel extents, groups)
GEOMETRIES = [(4, 6, (9,), (3,), 1), (4, 6, (9, 8), (3, 3), 1), (4, 4, (9, 8), (3, 3), 4),
              (2, 3, (5, 6, 4), (3, 3, 3), 1)]


def empty_batch(dtype, data_format, weights_format, geometry):
    ic, oc, input_shape, kernel, groups = geometry
    rng = np.random.default_rng(0)
    src = to_data_format(rng.standard_normal((0, ic, *input_shape)).astype(dtype), data_format)
    weights = to_weights_format(
        rng.standard_normal((oc, ic // groups, *kernel)).astype(dtype), weights_format)
    output_shape = tuple(i - k + 3 for i, k in zip(input_shape, kernel))  # pads 1 + 1
    expected = (0, oc, *output_shape) if data_format == "NCX" else (0, *output_shape, oc)
    attributes = dict(pads_begin=1, pads_end=1, groups=groups, data_format=data_format,
                      weights_format=weights_format)
    return src, weights, rng.standard_normal(oc).astype(dtype), attributes, expected


def check_empty(got, expected_shape, dtype):
    assert got.shape == expected_shape
    assert got.dtype == np.dtype(dtype)


@pytest.mark.parametrize("geometry", GEOMETRIES, ids=lambda g: f"rank{len(g[2])}-g{g[4]}")
@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda f: f[0])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("algorithm", ["auto", "tune", *ALGORITHMS])
def test_empty_batch_gives_an_empty_result(algorithm, dtype, layout, geometry):
    src, weights, bias, attributes, expected = empty_batch(dtype, *layout, geometry)
    problem = convlab.make_problem(src.shape, src.dtype, weights.shape, weights.dtype,
                                   bias.shape, bias.dtype, **attributes)
    if algorithm in ALGORITHMS:
        reason = convlab.dispatch.registry.get_algorithm(algorithm).supports(problem)
        if reason is not None:
            with pytest.raises(ValueError, match="algorithm="):
                convlab.convolve(src, weights, bias, algorithm=algorithm, **attributes)
            return
    got = convlab.convolve(src, weights, bias, algorithm=algorithm, **attributes)
    check_empty(got, expected, dtype)
    plan = convlab.Convolution(weights, bias, algorithm=algorithm, **attributes)
    check_empty(plan(src), expected, dtype)
    out = np.full(expected, 7, dtype)
    assert convlab.convolve(src, weights, bias, algorithm=algorithm, out=out,
                            **attributes) is out


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda f: f[0])
def test_empty_batch_is_explained_and_selected(layout):
    src, weights, bias, attributes, _ = empty_batch(np.float32, *layout, GEOMETRIES[1])
    text = str(convlab.explain(src, weights, bias, **attributes))
    assert "batch is empty" in text
    assert convlab.select_algorithm(src, weights, bias, **attributes) in convlab.algorithms()


@pytest.mark.parametrize("post_ops", [["relu"], [("sum", 1.0), "relu"]], ids=["relu", "sum"])
def test_empty_batch_with_post_ops(post_ops):
    src, weights, bias, attributes, expected = empty_batch(np.float32, "NCX", "OIX",
                                                           GEOMETRIES[1])
    out = np.zeros(expected, np.float32)
    got = convlab.convolve(src, weights, bias, post_ops=post_ops, out=out, **attributes)
    check_empty(got, expected, np.float32)
    plan = convlab.Convolution(weights, bias, post_ops=post_ops, **attributes)
    check_empty(plan(src, out=out), expected, np.float32)


def test_empty_batch_int8_and_half():
    src, weights, bias, attributes, expected = empty_batch(np.float32, "NCX", "OIX",
                                                           GEOMETRIES[1])
    got = convlab.convolve(src.astype(np.uint8), weights.astype(np.int8), **attributes)
    assert got.shape == expected
    got = convlab.convolve(src.astype(np.float16), weights.astype(np.float16), **attributes)
    check_empty(got, expected, np.float16)


def test_empty_batch_backward_and_transposed():
    src, weights, _, attributes, expected = empty_batch(np.float64, "NCX", "OIX",
                                                        GEOMETRIES[1])
    diff_dst = np.zeros(expected)
    got = convlab.convolve_backward_data(diff_dst, weights, src.shape, **attributes)
    check_empty(got, src.shape, np.float64)
    grads = convlab.convolve_backward_weights(src, diff_dst, weights.shape, **attributes)
    grads = grads[0] if isinstance(grads, tuple) else grads
    assert grads.shape == weights.shape
    np.testing.assert_array_equal(grads, 0.0)  # a sum over no images
    transposed = convlab.conv_transpose(diff_dst, np.zeros((6, 4, 3, 3)), strides=2,
                                        data_format="NCX", weights_format="IOX")
    assert transposed.shape[:2] == (0, 4)


@pytest.mark.parametrize("case, argument", [
    (dict(src=(1, 4, 0, 9)), "src"),
    (dict(src=(1, 0, 9, 9), weights=(6, 0, 3, 3)), "src|weights"),  # either is empty
    (dict(weights=(0, 4, 3, 3)), "weights"),
    (dict(weights=(6, 4, 0, 3)), "weights"),
])
@pytest.mark.parametrize("entry", ["convolve", "explain", "plan"])
def test_other_empty_axes_are_errors_naming_the_argument(case, argument, entry):
    src = np.ones(case.get("src", (1, 4, 9, 9)), np.float32)
    weights = np.ones(case.get("weights", (6, 4, 3, 3)), np.float32)
    attributes = dict(data_format="NCX", weights_format="OIX")
    if entry == "plan" and "weights" in case:
        call = lambda: convlab.Convolution(weights, **attributes)  # noqa: E731
    elif entry == "plan":
        call = lambda: convlab.Convolution(np.ones((6, src.shape[1], 3, 3), np.float32),  # noqa: E731
                                           **attributes)(src)
    else:
        call = lambda: getattr(convlab, entry)(src, weights, **attributes)  # noqa: E731
    with pytest.raises(ValueError, match=argument):
        call()
