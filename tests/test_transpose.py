"""``convlab.conv_transpose`` against a float64 scatter oracle and torch, through every path.

The oracle below is docs/specification.md §5.1 read literally (every src element scatters
a weighted kernel into dst); it shares no code with ``convlab.ops.transpose``, which computes
the same thing as a forward convolution on a stretched input or as GEMM + col2im.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import convlab
from convlab.dispatch import select
from convlab.ops import transpose
from convlab.problem import params
from convlab.runtime.threads import effective_threads
from tests.helpers import (
    ALGORITHMS,
    MUTATES_REGISTRY,
    skip_unless_supported,
    temporary_algorithm,
    to_data_format,
    tolerance,
)

TRANSPOSE_ALGORITHMS = ["auto", transpose.COL2IM] + ALGORITHMS


# --------------------------------------------------------------------------- the oracle

def scatter_reference(src, weights, bias, strides, dilations, pads_begin, output_shape,
                      groups):
    """float64 transposed convolution on NCX src and IOX weights, from the definition:
    ``dst[n, g*OCg+oc, x*S + k*D - P_b] += src[n, g*ICg+ic, x] * weights[g*ICg+ic, oc, k]``,
    keeping the y that fall in [0, O)."""
    src = np.asarray(src, dtype=np.float64)
    weights = np.asarray(weights, dtype=np.float64)
    n, ic, *extents = src.shape
    _, ocg, *kernel = weights.shape
    icg = ic // groups
    dst = np.zeros((n, ocg * groups, *output_shape))
    for k in itertools.product(*(range(e) for e in kernel)):
        for x in itertools.product(*(range(e) for e in extents)):
            y = [xx * s + kk * d - pb for xx, kk, s, d, pb in
                 zip(x, k, strides, dilations, pads_begin)]
            if not all(0 <= yy < o for yy, o in zip(y, output_shape)):
                continue
            for g in range(groups):
                contribution = np.einsum("nc,co->no", src[(slice(None), slice(
                    g * icg, (g + 1) * icg)) + x], weights[(slice(g * icg, (g + 1) * icg),
                                                            slice(None)) + k])
                dst[(slice(None), slice(g * ocg, (g + 1) * ocg)) + tuple(y)] += contribution
    if bias is not None:
        dst += np.asarray(bias, dtype=np.float64).reshape((1, -1) + (1,) * len(kernel))
    return dst


def to_transpose_weights(iox, weights_format):
    """(IC, OC/G, K...) weights in IOX or XOI (its channels-last mirror), C-contiguous."""
    if weights_format == "XOI":
        iox = np.moveaxis(iox, (0, 1), (-1, -2))
    return np.ascontiguousarray(iox)


def from_transpose_weights(weights, weights_format):
    return weights if weights_format == "IOX" else np.moveaxis(weights, (-1, -2), (0, 1))


def transpose_problem(src, weights, bias, attributes):
    attributes = {k: v for k, v in attributes.items()
                  if k not in ("algorithm", "threads", "precision")}
    return transpose.make_transpose_problem(
        src.shape, src.dtype, weights.shape, weights.dtype,
        None if bias is None else bias.shape, None if bias is None else bias.dtype,
        **attributes)


def forward_problem(tp):
    """The forward ConvProblem a forward algorithm sees (for its ``supports`` check)."""
    pads_begin, pads_end = tp.forward_pads
    return params.make_problem(
        (tp.batch, *tp.stretched_shape, tp.in_channels), tp.dtype,
        (*tp.kernel_shape, tp.in_channels_per_group, tp.out_channels), tp.dtype,
        (tp.out_channels,) if tp.has_bias else None, tp.dtype if tp.has_bias else None,
        strides=1, dilations=tp.dilations, pads_begin=pads_begin, pads_end=pads_end,
        groups=tp.groups)


def skip_unless_transpose_supported(algorithm, tp):
    if algorithm not in ("auto", transpose.COL2IM):
        skip_unless_supported(algorithm, forward_problem(tp))


def assert_transpose_matches(got, src, weights, bias, attributes, algorithm, context=""):
    """``got`` against the oracle within the path's tolerance (helpers.TOLERANCES).

    The reduction length is that of the forward convolution the path may run, IC/G *
    prod(K) (+1 with bias): an upper bound on the terms of any output element.
    """
    tp = transpose_problem(src, weights, bias, attributes)
    src_ncx = np.asarray(src) if tp.data_format == "NCX" else np.moveaxis(src, -1, 1)
    w_iox = from_transpose_weights(np.asarray(weights), tp.weights_format)
    oracle_args = (tp.strides, tp.dilations, tp.pads_begin, tp.output_shape, tp.groups)
    expected = scatter_reference(src_ncx, w_iox, bias, *oracle_args)
    magnitude = scatter_reference(np.abs(src_ncx), np.abs(w_iox),
                                  None if bias is None else np.abs(bias), *oracle_args)
    if tp.data_format == "NXC":
        expected, magnitude = np.moveaxis(expected, 1, -1), np.moveaxis(magnitude, 1, -1)
    assert got.shape == expected.shape == tp.dst_shape, \
        f"shape {got.shape} != {expected.shape} {context}"
    assert got.dtype == tp.dtype, f"dtype {got.dtype} != {tp.dtype} {context}"
    # "auto" is held to the bound of the algorithm it ran (a Winograd tile's error scales
    # with the largest output, docs/accuracy.md), col2im to the summation bound.
    ran = transpose.algorithm_run(tp, algorithm)
    bound = tolerance("" if ran == transpose.COL2IM else ran)
    length = tp.in_channels_per_group * math.prod(tp.kernel_shape) + int(tp.has_bias)
    rtol = bound.factor(tp.dtype) * np.finfo(tp.dtype).eps * math.sqrt(length)
    if bound.scale == "output" and magnitude.size:
        magnitude = np.full_like(magnitude, magnitude.max())
    error = np.abs(got.astype(np.float64) - expected)
    bad = ~(error <= rtol * magnitude)
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        raise AssertionError(
            f"{algorithm}: {int(bad.sum())} of {bad.size} elements differ from the scatter "
            f"oracle; first at {where}: got {got[where]!r}, expected {expected[where]!r} "
            f"(allowed {rtol * magnitude[where]:.3g}); {attributes} {context}")


def random_case(rng, *, batch, in_channels, out_channels, groups, input_shape, kernel_shape,
                dtype, data_format, weights_format, bias):
    src = rng.standard_normal((batch, in_channels, *input_shape)).astype(dtype)
    weights = rng.standard_normal(
        (in_channels, out_channels // groups, *kernel_shape)).astype(dtype)
    b = rng.standard_normal(out_channels).astype(dtype) if bias else None
    return (to_data_format(src, data_format), to_transpose_weights(weights, weights_format), b)


# --------------------------------------------------------------------------- the grid

# (N, IC, OC, G, I, K, attributes): ranks 1-3, groups and depthwise, strides, dilations,
# asymmetric and negative pads, output_padding, output_shape and every auto_pad.
CASES = [
    (1, 1, 1, 1, (5,), (3,), {}),
    (2, 3, 4, 1, (6,), (3,), dict(strides=2, pads_begin=1, pads_end=0, output_padding=1)),
    (1, 4, 6, 2, (7,), (2,), dict(strides=3, dilations=2, output_padding=1)),
    (2, 4, 4, 4, (5,), (3,), dict(strides=2, pads_begin=2, pads_end=1)),          # depthwise
    (1, 2, 3, 1, (4, 5), (3, 3), dict(strides=(3, 2), output_shape=(10, 8))),
    (1, 2, 3, 1, (4, 5), (3, 3), dict(strides=(3, 2), output_shape=(14, 12))),    # extra rows
    (2, 3, 2, 1, (3, 4), (2, 3), dict(strides=2, auto_pad="same_upper")),
    (1, 3, 2, 1, (3, 4), (3, 3), dict(strides=(2, 3), auto_pad="same_lower")),
    (1, 2, 2, 1, (3, 3), (1, 1), dict(strides=2, auto_pad="same_upper")),         # total < 0
    (1, 3, 2, 1, (3, 3), (2, 2), dict(strides=2, auto_pad="valid")),
    (2, 6, 4, 2, (4, 3), (3, 2), dict(strides=(1, 2), dilations=(2, 1),
                                     pads_begin=(1, 0), pads_end=(2, 1))),
    (1, 2, 3, 1, (5, 4), (3, 3), dict(pads_begin=(-1, 3), pads_end=(2, -2))),     # crop/extend
    (1, 3, 3, 1, (3, 3), (3, 3), dict(strides=2, dilations=3, output_padding=(2, 1))),
    (1, 8, 8, 8, (4, 4), (3, 3), dict(strides=2, pads_begin=1, pads_end=1, output_padding=1)),
    (1, 3, 4, 1, (5, 5), (3, 3), dict(pads_begin=1, pads_end=1)),                  # Winograd
    (1, 2, 4, 2, (3, 4, 3), (2, 3, 2), dict(strides=(2, 1, 3), pads_begin=(0, 1, 1),
                                           pads_end=(1, 0, 0), output_padding=(1, 0, 2))),
    (2, 2, 2, 1, (2, 3, 3), (3, 3, 3), dict(dilations=(1, 2, 1), output_shape=(5, 8, 6))),
]
LAYOUTS = [("NCX", "IOX"), ("NXC", "XOI")]


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("algorithm", TRANSPOSE_ALGORITHMS)
def test_conv_transpose_matches_scatter_oracle(algorithm, dtype, case, rng):
    n, ic, oc, g, i, k, attributes = CASES[case]
    data_format, weights_format = LAYOUTS[case % 2]
    src, weights, bias = random_case(
        rng, batch=n, in_channels=ic, out_channels=oc, groups=g, input_shape=i,
        kernel_shape=k, dtype=dtype, data_format=data_format, weights_format=weights_format,
        bias=case % 3 != 1)
    attributes = dict(attributes, groups=g, data_format=data_format,
                      weights_format=weights_format)
    skip_unless_transpose_supported(algorithm, transpose_problem(src, weights, bias,
                                                                 attributes))
    src_before, weights_before = src.copy(), weights.copy()
    got = convlab.conv_transpose(src, weights, bias, algorithm=algorithm, **attributes)
    assert_transpose_matches(got, src, weights, bias, attributes, algorithm)
    np.testing.assert_array_equal(src, src_before)
    np.testing.assert_array_equal(weights, weights_before)


TORCH_FUNCTIONS = {1: "conv_transpose1d", 2: "conv_transpose2d", 3: "conv_transpose3d"}


@pytest.mark.parametrize("algorithm", ["auto", transpose.COL2IM, "direct", "im2col"])
def test_conv_transpose_matches_torch_on_a_random_grid(algorithm, rng):
    """torch's conv_transposeNd (symmetric pads only) in float64, 60 random problems."""
    torch = pytest.importorskip("torch")
    for _ in range(60):
        r = int(rng.integers(1, 4))
        function = getattr(torch.nn.functional, TORCH_FUNCTIONS[r])
        g, icg, ocg, n = (int(v) for v in rng.integers(1, 4, size=4))
        i, k = rng.integers(1, 5, size=r), rng.integers(1, 4, size=r)
        s, d = rng.integers(1, 4, size=r), rng.integers(1, 3, size=r)
        p = np.array([rng.integers(0, (kk - 1) * dd + 1) for kk, dd in zip(k, d)])
        op = np.array([rng.integers(0, max(ss, dd)) for ss, dd in zip(s, d)])
        if np.any(s * (i - 1) + (k - 1) * d + 1 + op - 2 * p < 1):
            continue
        src = rng.standard_normal((n, g * icg, *i))
        weights = rng.standard_normal((g * icg, ocg, *k))
        bias = rng.standard_normal(g * ocg)
        expected = function(torch.tensor(src), torch.tensor(weights), torch.tensor(bias),
                            stride=tuple(s), padding=tuple(p), output_padding=tuple(op),
                            groups=g, dilation=tuple(d)).numpy()
        attributes = dict(strides=s.tolist(), pads_begin=p.tolist(), pads_end=p.tolist(),
                          dilations=d.tolist(), output_padding=op.tolist(), groups=g,
                          data_format="NCX", weights_format="IOX")
        got = convlab.conv_transpose(src, weights, bias, algorithm=algorithm, **attributes)
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12,
                                   err_msg=str(attributes))


def test_layouts_agree():
    rng = np.random.default_rng(7)
    src = rng.standard_normal((2, 4, 5, 6))
    weights = rng.standard_normal((4, 3, 3, 2))
    attributes = dict(strides=(2, 1), pads_begin=(1, 0), pads_end=(0, 1), groups=2,
                      output_padding=(1, 0))
    ncx = convlab.conv_transpose(src, weights, data_format="NCX", weights_format="IOX",
                                 **attributes)
    nxc = convlab.conv_transpose(np.moveaxis(src, 1, -1), to_transpose_weights(weights, "XOI"),
                                 **attributes)
    np.testing.assert_allclose(np.moveaxis(nxc, -1, 1), ncx, rtol=1e-13, atol=1e-13)


# --------------------------------------------------------------------------- pads and shapes

@pytest.mark.parametrize("attributes, pads_begin, pads_end, output_shape", [
    # ONNX convtranspose_output_shape: total = -1 on both axes, the extra row at the end
    (dict(strides=(3, 2), output_shape=(10, 8)), (0, 0), (-1, -1), (10, 8)),
    # ONNX convtranspose_autopad_same: total 1, same_upper puts it at the end
    (dict(strides=2, auto_pad="SAME_UPPER"), (0, 0), (1, 1), (6, 6)),
    (dict(strides=2, auto_pad="same_lower"), (1, 1), (0, 0), (6, 6)),
    (dict(strides=2, auto_pad="same_upper", output_shape=(8, 5)), (-1, 1), (0, 1), (8, 5)),
    (dict(output_shape=(4, 4)), (1, 1), (0, 0), (4, 4)),
    (dict(pads_begin=(1, 2), pads_end=(2, 1), output_padding=(0, 0)), (1, 2), (2, 1), (2, 2)),
])
def test_pads_are_derived_as_spec_says(attributes, pads_begin, pads_end, output_shape):
    tp = transpose.make_transpose_problem((1, 1, 3, 3), np.float32, (1, 2, 3, 3), np.float32,
                                          data_format="NCX", weights_format="IOX",
                                          **attributes)
    assert (tp.pads_begin, tp.pads_end, tp.output_shape) == (pads_begin, pads_end,
                                                             output_shape)


def test_output_shape_with_agreeing_pads_is_accepted():
    tp = transpose.make_transpose_problem((1, 3, 1), np.float32, (1, 3, 1), np.float32,
                                          output_shape=[4], pads_begin=0, pads_end=-1)
    assert tp.output_shape == (4,)


@pytest.mark.parametrize("algorithm", ["auto", transpose.COL2IM, "direct", "im2col"])
def test_extra_output_positions_hold_only_the_bias(algorithm):
    src = np.ones((1, 1, 2), np.float32)
    weights = np.ones((1, 1, 1), np.float32)
    got = convlab.conv_transpose(src, weights, np.array([0.5], np.float32), strides=3,
                                 output_shape=[6], algorithm=algorithm, data_format="NCX",
                                 weights_format="IOX")
    # full scatter covers 4 positions (total = -2: one extra row before, one after)
    np.testing.assert_array_equal(got[0, 0], [0.5, 1.5, 0.5, 0.5, 1.5, 0.5])


# --------------------------------------------------------------------------- dispatch

def test_auto_runs_col2im_for_strides_and_the_forward_auto_otherwise():
    tp = transpose.make_transpose_problem((1, 4, 4, 2), np.float32, (3, 3, 2, 2), np.float32,
                                          strides=(1, 2))
    assert transpose.choose(tp, "auto") == transpose.COL2IM
    tp = transpose.make_transpose_problem((1, 4, 4, 2), np.float32, (3, 3, 2, 2), np.float32)
    assert transpose.choose(tp, "auto") == "auto"
    assert transpose.choose(tp, "direct") == "direct"


@pytest.mark.parametrize("precision", ["default", "highest"])
@pytest.mark.parametrize("shape", [(1, 4, 4, 2), (1, 56, 56, 64)])
def test_algorithm_run_names_what_auto_runs(shape, precision):
    channels = shape[-1]
    tp = transpose.make_transpose_problem(shape, np.float32, (3, 3, channels, channels),
                                          np.float32)
    expected = select.choose(forward_problem(tp), effective_threads(None),
                             precision=precision)
    assert transpose.algorithm_run(tp, "auto", precision=precision) == expected
    assert transpose.algorithm_run(tp, "im2col") == "im2col"
    strided = transpose.make_transpose_problem(shape, np.float32,
                                               (3, 3, channels, channels), np.float32,
                                               strides=2)
    assert transpose.algorithm_run(strided, "auto") == transpose.COL2IM


@MUTATES_REGISTRY
@pytest.mark.parametrize("strides", [1, 2])
def test_a_registered_strategy_receives_the_stretched_forward_problem(strides):
    """Proves conv_transpose runs through the registry: a counting mock sees the call."""
    seen = []
    reference_run = convlab.dispatch.registry.get_algorithm("reference").run

    def counting(problem, src, weights, bias, dst, threads):
        seen.append(problem)
        reference_run(problem, src, weights, bias, dst, threads)

    rng = np.random.default_rng(3)
    src = rng.standard_normal((2, 3, 3, 4))
    weights = rng.standard_normal((2, 2, 3, 4))
    with temporary_algorithm(counting) as name:
        got = convlab.conv_transpose(src, weights, strides=strides, pads_begin=(0, 1),
                                     algorithm=name)
    assert len(seen) == 1
    problem = seen[0]
    assert problem.strides == (1, 1)
    assert problem.input_shape == tuple(strides * (e - 1) + 1 for e in (3, 3))
    assert problem.pads_begin == (1, 0)
    assert_transpose_matches(got, src, weights, None,
                             dict(strides=strides, pads_begin=(0, 1)), "reference")


def test_col2im_chunks_give_the_same_result(monkeypatch):
    rng = np.random.default_rng(11)
    src = rng.standard_normal((5, 4, 4, 6)).astype(np.float32)
    weights = rng.standard_normal((3, 3, 2, 6)).astype(np.float32)
    attributes = dict(strides=2, pads_begin=1, output_padding=1, groups=2,
                      algorithm=transpose.COL2IM)
    whole = convlab.conv_transpose(src, weights, **attributes)
    monkeypatch.setattr(transpose, "COL2IM_WORKSPACE_BYTES", 1)
    np.testing.assert_array_equal(convlab.conv_transpose(src, weights, **attributes), whole)


@pytest.mark.parametrize("algorithm", ["auto", transpose.COL2IM, "direct"])
def test_thread_count_does_not_change_the_result(algorithm):
    rng = np.random.default_rng(12)
    src = rng.standard_normal((2, 9, 7, 8)).astype(np.float32)
    weights = rng.standard_normal((3, 3, 4, 8)).astype(np.float32)
    one = convlab.conv_transpose(src, weights, strides=2, algorithm=algorithm, threads=1)
    two = convlab.conv_transpose(src, weights, strides=2, algorithm=algorithm, threads=2)
    np.testing.assert_array_equal(one, two)


def test_batch_zero_and_dtypes():
    got = convlab.conv_transpose(np.zeros((0, 3, 2)), np.zeros((3, 4, 2)), strides=2)
    assert got.shape == (0, 7, 4) and got.dtype == np.float64
    got = convlab.conv_transpose(np.ones((1, 3, 2), np.float32), np.ones((3, 4, 2), np.float32))
    assert got.dtype == np.float32
    got = convlab.conv_transpose(np.ones((1, 3, 2), np.float32), np.ones((3, 4, 2)))
    assert got.dtype == np.float64


def test_read_only_and_non_contiguous_inputs():
    rng = np.random.default_rng(5)
    src = rng.standard_normal((2, 8, 5, 3))[:, ::2]
    weights = rng.standard_normal((3, 3, 2, 3))
    src.flags.writeable = False
    weights.flags.writeable = False
    for algorithm in ("auto", transpose.COL2IM, "direct"):
        got = convlab.conv_transpose(src, weights, strides=2, algorithm=algorithm)
        assert_transpose_matches(got, src, weights, None, dict(strides=2), algorithm)


# --------------------------------------------------------------------------- errors

SRC = np.zeros((1, 2, 4, 4), np.float32)
W = np.zeros((2, 3, 3, 3), np.float32)


@pytest.mark.parametrize("kwargs, error, words", [
    (dict(weights_format="OIX"), ValueError, ["weights_format='OIX'", "IOX", "XOI"]),
    (dict(weights_format=3), TypeError, ["weights_format=3"]),
    (dict(output_padding=2, strides=2), ValueError, ["output_padding=(2, 2)",
                                                     "max(stride, dilation) = 2"]),
    (dict(output_padding=1), ValueError, ["output_padding=(1, 1)", "< max"]),
    (dict(output_padding=-1), ValueError, ["output_padding=(-1, -1)", ">= 0"]),
    (dict(output_shape=(6,)), ValueError, ["output_shape=(6,)", "2 entries"]),
    (dict(output_shape=(6, 0)), ValueError, ["output_shape=(6, 0)", ">= 1"]),
    (dict(output_shape=(6, 6), pads_begin=1), ValueError,
     ["pads_begin=1", "output_shape=(6, 6)", "pads_begin=(0, 0)"]),
    (dict(output_shape=(5, 6), auto_pad="valid"), ValueError, ["output_shape=(5, 6)",
                                                                 "'valid'", "(6, 6)"]),
    (dict(pads_begin=4, pads_end=3), ValueError, ["spatial axis 0", "output extent >= 1"]),
    (dict(groups=3), ValueError, ["groups=3", "IC=2"]),
    (dict(strides=0), ValueError, ["strides=(0, 0)", ">= 1"]),
    (dict(algorithm="nope"), ValueError, ["algorithm='nope'"]),
    (dict(data_format="NCHW"), ValueError, ["data_format='NCHW'"]),
    (dict(auto_pad="same"), ValueError, ["auto_pad='same'"]),
])
def test_bad_arguments_are_named(kwargs, error, words):
    kwargs = dict(dict(data_format="NCX", weights_format="IOX"), **kwargs)
    with pytest.raises(error) as info:
        convlab.conv_transpose(SRC, W, **kwargs)
    for word in words:
        assert word in str(info.value), (word, str(info.value))


@pytest.mark.parametrize("src, weights, bias, words", [
    (SRC, np.zeros((3, 3, 3, 3)), None, ["IC=3", "IC=2"]),
    (SRC, np.zeros((2, 3, 3)), None, ["weights has shape (2, 3, 3)", "rank 4"]),
    (np.zeros((2, 4)), W, None, ["src has shape (2, 4)", "rank >= 3"]),
    (SRC, W, np.zeros(2), ["bias has shape (2,)", "(3,)"]),
])
def test_bad_shapes_are_named(src, weights, bias, words):
    with pytest.raises(ValueError) as info:
        convlab.conv_transpose(src, weights, bias, data_format="NCX", weights_format="IOX")
    for word in words:
        assert word in str(info.value), (word, str(info.value))


def test_bad_dtypes_raise_type_error():
    with pytest.raises(TypeError, match="src has dtype complex128"):
        convlab.conv_transpose(SRC.astype(complex), W, data_format="NCX", weights_format="IOX")
