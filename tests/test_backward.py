"""``convolve_backward_data`` and ``convolve_backward_weights`` against torch autograd and
finite differences.

torch (a test extra, never a runtime dependency) differentiates the forward convolution
in float64; asymmetric and negative pads go through ``torch.nn.functional.pad`` first, so
every convlab attribute has a torch counterpart. float32 results are held to the suite's
bound (tests/helpers.py), eps(float32) * 16 * sqrt(L) times each element's magnitude (the same
gradient computed on absolute values), with L the number of terms an element sums.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import convlab
from convlab.ops import transpose
from tests.helpers import TOLERANCES, to_data_format, to_weights_format

torch = pytest.importorskip("torch")
F = torch.nn.functional
CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}
DATA_ALGORITHMS = ["auto", transpose.COL2IM, "direct", "im2col", "reference"]


def torch_gradients(src, weights, diff_dst, strides, dilations, pads_begin, pads_end, groups):
    """float64 (diff_src, diff_weights, diff_bias) by autograd, NCX/OIX in and out."""
    x = torch.tensor(np.asarray(src, np.float64), requires_grad=True)
    w = torch.tensor(np.asarray(weights, np.float64), requires_grad=True)
    b = torch.zeros(w.shape[0], dtype=torch.float64, requires_grad=True)
    pad = []
    for begin, end in zip(reversed(pads_begin), reversed(pads_end)):
        pad += [int(begin), int(end)]   # F.pad lists the last axis first
    y = CONV[x.dim() - 2](F.pad(x, pad), w, b, stride=tuple(strides),
                          dilation=tuple(dilations), groups=groups)
    y.backward(torch.tensor(np.asarray(diff_dst, np.float64)))
    return x.grad.numpy(), w.grad.numpy(), b.grad.numpy()


def random_problem(rng):
    """A random forward problem of rank 1-3 with groups, strides, dilations and pads
    (asymmetric, sometimes negative), or None when its output would be empty."""
    r = int(rng.integers(1, 4))
    g, icg, ocg, n = (int(v) for v in rng.integers(1, 4, size=4))
    i = rng.integers(2, 8, size=r)
    k = rng.integers(1, 4, size=r)
    s = rng.integers(1, 4, size=r)
    d = rng.integers(1, 3, size=r)
    pb = rng.integers(-1, 3, size=r)
    pe = rng.integers(-1, 3, size=r)
    padded = i + pb + pe
    if np.any(padded < (k - 1) * d + 1):
        return None
    out = (padded - (k - 1) * d - 1) // s + 1
    return dict(batch=n, groups=g, icg=icg, ocg=ocg, input_shape=tuple(i.tolist()),
                kernel_shape=tuple(k.tolist()), output_shape=tuple(out.tolist()),
                strides=s.tolist(), dilations=d.tolist(), pads_begin=pb.tolist(),
                pads_end=pe.tolist())


def assert_close_to(got, expected, magnitude, length, dtype, label):
    rtol = TOLERANCES[""].factor(dtype) * np.finfo(dtype).eps * math.sqrt(length)
    assert got.shape == expected.shape, (got.shape, expected.shape, label)
    assert got.dtype == np.dtype(dtype), (got.dtype, dtype, label)
    error = np.abs(got.astype(np.float64) - expected)
    bad = ~(error <= rtol * magnitude)
    if bad.any():
        where = tuple(int(v) for v in np.argwhere(bad)[0])
        raise AssertionError(f"{label}: {int(bad.sum())} of {bad.size} differ; first at "
                             f"{where}: got {got[where]!r}, expected {expected[where]!r}, "
                             f"allowed {rtol * magnitude[where]:.3g}")


def problems(rng, count):
    found = 0
    while found < count:
        problem = random_problem(rng)
        if problem is not None:
            found += 1
            yield problem


def tensors(rng, p, dtype):
    src = rng.standard_normal((p["batch"], p["groups"] * p["icg"], *p["input_shape"]))
    weights = rng.standard_normal((p["groups"] * p["ocg"], p["icg"], *p["kernel_shape"]))
    diff_dst = rng.standard_normal((p["batch"], p["groups"] * p["ocg"], *p["output_shape"]))
    return src.astype(dtype), weights.astype(dtype), diff_dst.astype(dtype)


def attributes_of(p, **layout):
    return dict(strides=p["strides"], dilations=p["dilations"], pads_begin=p["pads_begin"],
                pads_end=p["pads_end"], groups=p["groups"], **layout)


TORCH_ARGS = ("strides", "dilations", "pads_begin", "pads_end", "groups")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("algorithm", DATA_ALGORITHMS)
def test_backward_data_matches_torch_autograd(algorithm, dtype, rng):
    for p in problems(rng, 40):
        src, weights, diff_dst = tensors(rng, p, dtype)
        args = [p[key] for key in TORCH_ARGS]
        expected = torch_gradients(src, weights, diff_dst, *args)[0]
        magnitude = torch_gradients(src, np.abs(weights), np.abs(diff_dst), *args)[0]
        attributes = attributes_of(p, data_format="NCX", weights_format="OIX")
        before = diff_dst.copy(), weights.copy()
        got = convlab.convolve_backward_data(diff_dst, weights, src.shape, algorithm=algorithm,
                                             **attributes)
        length = p["ocg"] * math.prod(p["kernel_shape"])
        assert_close_to(got, expected, magnitude, length, dtype, f"{algorithm} {p}")
        np.testing.assert_array_equal(diff_dst, before[0])
        np.testing.assert_array_equal(weights, before[1])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_backward_weights_matches_torch_autograd(dtype, rng):
    for p in problems(rng, 60):
        src, weights, diff_dst = tensors(rng, p, dtype)
        args = [p[key] for key in TORCH_ARGS]
        _, expected_w, expected_b = torch_gradients(src, weights, diff_dst, *args)
        _, magnitude_w, magnitude_b = torch_gradients(np.abs(src), weights, np.abs(diff_dst),
                                                      *args)
        attributes = attributes_of(p, data_format="NCX", weights_format="OIX")
        before = src.copy(), diff_dst.copy()
        got_w, got_b = convlab.convolve_backward_weights(src, diff_dst, weights.shape,
                                                         **attributes)
        length = p["batch"] * math.prod(p["output_shape"])
        assert_close_to(got_w, expected_w, magnitude_w, length, dtype, f"weights {p}")
        assert_close_to(got_b, expected_b, magnitude_b, length, dtype, f"bias {p}")
        np.testing.assert_array_equal(src, before[0])
        np.testing.assert_array_equal(diff_dst, before[1])


@pytest.mark.parametrize("layout", [("NXC", "XIO"), ("NCX", "OIX")])
def test_default_and_channels_last_layouts(layout, rng):
    data_format, weights_format = layout
    p = dict(batch=2, groups=2, icg=3, ocg=2, input_shape=(6, 5), kernel_shape=(3, 2),
             output_shape=(3, 5), strides=[2, 1], dilations=[1, 2], pads_begin=[1, 1],
             pads_end=[0, 1])
    src, weights, diff_dst = tensors(rng, p, np.float64)
    expected = torch_gradients(src, weights, diff_dst, *[p[key] for key in TORCH_ARGS])
    attributes = attributes_of(p, data_format=data_format, weights_format=weights_format)
    src_l, diff_l = to_data_format(src, data_format), to_data_format(diff_dst, data_format)
    weights_l = to_weights_format(weights, weights_format)
    diff_src = convlab.convolve_backward_data(diff_l, weights_l, src_l.shape, **attributes)
    diff_w, diff_b = convlab.convolve_backward_weights(src_l, diff_l, weights_l.shape,
                                                       **attributes)
    np.testing.assert_allclose(diff_src, to_data_format(expected[0], data_format), atol=1e-12)
    np.testing.assert_allclose(diff_w, to_weights_format(expected[1], weights_format),
                               atol=1e-12)
    np.testing.assert_allclose(diff_b, expected[2], atol=1e-12)


@pytest.mark.parametrize("auto_pad", ["same_upper", "same_lower", "valid"])
def test_auto_pad_is_resolved_as_in_the_forward_pass(auto_pad, rng):
    src = rng.standard_normal((1, 7, 6, 4))
    weights = rng.standard_normal((3, 2, 4, 5))
    dst = convlab.convolve(src, weights, strides=2, auto_pad=auto_pad)
    diff_dst = rng.standard_normal(dst.shape)
    resolved = convlab.make_problem(src.shape, src.dtype, weights.shape, weights.dtype,
                                    strides=2, auto_pad=auto_pad)
    explicit = dict(strides=2, pads_begin=resolved.pads_begin, pads_end=resolved.pads_end)
    np.testing.assert_array_equal(
        convlab.convolve_backward_data(diff_dst, weights, src.shape, strides=2,
                                       auto_pad=auto_pad),
        convlab.convolve_backward_data(diff_dst, weights, src.shape, **explicit))
    for got, want in zip(convlab.convolve_backward_weights(src, diff_dst, weights.shape,
                                                           strides=2, auto_pad=auto_pad),
                         convlab.convolve_backward_weights(src, diff_dst, weights.shape,
                                                           **explicit)):
        np.testing.assert_array_equal(got, want)


# --------------------------------------------------------------------------- finite differences

@pytest.mark.parametrize("case", [
    dict(src=(2, 3, 7), weights=(4, 3, 3), strides=2, pads_begin=1, pads_end=0),
    dict(src=(1, 4, 5, 6), weights=(2, 2, 2, 3), strides=(1, 2), dilations=(2, 1), groups=2,
         pads_begin=(0, -1), pads_end=(2, 1)),
    dict(src=(1, 2, 4, 3, 5), weights=(2, 1, 2, 2, 3), strides=(2, 1, 2), groups=2,
         pads_begin=1, pads_end=(0, 1, 1)),
])
def test_gradients_match_finite_differences(case, rng):
    """Central differences of loss = sum(convolve(src, w, b) * R) in float64.

    The loss is linear in each argument, so a central difference has no truncation
    error and is exact up to rounding (~1e-13 here); an indexing bug is off by O(1).
    """
    case = dict(case)
    src = rng.standard_normal(case.pop("src"))
    weights = rng.standard_normal(case.pop("weights"))
    attributes = dict(case, data_format="NCX", weights_format="OIX")
    bias = rng.standard_normal(weights.shape[0])
    R = rng.standard_normal(convlab.convolve(src, weights, bias, **attributes).shape)

    def loss(x, w, b):
        return float(np.sum(convlab.convolve(x, w, b, algorithm="reference", **attributes)
                            * R))

    diff_src = convlab.convolve_backward_data(R, weights, src.shape, **attributes)
    diff_w, diff_b = convlab.convolve_backward_weights(src, R, weights.shape, **attributes)
    h = 1e-3
    arguments = [src, weights, bias]
    for position, grad in enumerate((diff_src, diff_w, diff_b)):
        for index in np.ndindex(*grad.shape):
            upper, lower = list(arguments), list(arguments)
            upper[position] = arguments[position].copy()
            lower[position] = arguments[position].copy()
            upper[position][index] += h
            lower[position][index] -= h
            numeric = (loss(*upper) - loss(*lower)) / (2 * h)
            assert abs(numeric - grad[index]) <= 1e-8 * (1 + abs(numeric)), \
                (("src", "weights", "bias")[position], index, numeric, grad[index], case)

# --------------------------------------------------------------------------- errors

def test_errors_name_the_argument():
    src = np.zeros((1, 2, 5, 5))
    weights = np.zeros((3, 2, 3, 3))
    diff_dst = np.zeros((1, 3, 3, 3))
    layout = dict(data_format="NCX", weights_format="OIX")
    with pytest.raises(ValueError, match=r"diff_dst has shape \(1, 3, 4, 4\); expected "
                                         r"\(1, 3, 3, 3\)"):
        convlab.convolve_backward_data(np.zeros((1, 3, 4, 4)), weights, src.shape, **layout)
    with pytest.raises(ValueError, match=r"diff_dst has shape \(1, 3, 3, 3\); expected "
                                         r"\(1, 3, 2, 2\)"):
        convlab.convolve_backward_weights(src, diff_dst, weights.shape, strides=2, **layout)
    with pytest.raises(TypeError, match="src_shape=5"):
        convlab.convolve_backward_data(diff_dst, weights, 5, **layout)
    with pytest.raises(TypeError, match="weights_shape='abc'"):
        convlab.convolve_backward_weights(src, diff_dst, "abc", **layout)
    with pytest.raises(ValueError, match="IC/G=3"):
        convlab.convolve_backward_weights(src, diff_dst, (3, 3, 3, 3), **layout)
    with pytest.raises(ValueError, match="weights_format='IOX'"):
        convlab.convolve_backward_data(diff_dst, weights, src.shape, data_format="NCX",
                                       weights_format="IOX")
    with pytest.raises(ValueError, match="algorithm='nope'"):
        convlab.convolve_backward_data(diff_dst, weights, src.shape, algorithm="nope",
                                       **layout)
    with pytest.raises(TypeError, match="diff_dst has dtype complex128"):
        convlab.convolve_backward_data(diff_dst.astype(complex), weights, src.shape, **layout)
    with pytest.raises(TypeError, match="diff_dst has dtype complex128"):
        convlab.convolve_backward_weights(src, diff_dst.astype(complex), weights.shape,
                                          **layout)


def test_batch_zero():
    diff_src = convlab.convolve_backward_data(np.zeros((0, 3, 3, 3)), np.zeros((3, 2, 3, 3)),
                                              (0, 2, 5, 5), data_format="NCX",
                                              weights_format="OIX")
    assert diff_src.shape == (0, 2, 5, 5)
    diff_w, diff_b = convlab.convolve_backward_weights(
        np.zeros((0, 2, 5, 5)), np.zeros((0, 3, 3, 3)), (3, 2, 3, 3), data_format="NCX",
        weights_format="OIX")
    assert diff_w.shape == (3, 2, 3, 3) and not diff_w.any()
    assert diff_b.shape == (3,) and not diff_b.any()
