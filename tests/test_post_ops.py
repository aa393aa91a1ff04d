"""Post-ops (docs/specification.md §4): fused results match the unfused reference, in
oneDNN's order.

"Unfused" is the same algorithm's plain convolution followed by the oracle's textbook
formulas (convlab.reference.eltwise / apply_post_ops) in float64. The post-op code is a
different implementation (in-place NumPy in the compute dtype, sigmoid through tanh), so
the comparison allows the compute dtype's rounding of the formula, a few eps relative to
the values involved.
"""
from __future__ import annotations

import numpy as np
import pytest

import convlab
from convlab.ops import postops
from tests.helpers import ALGORITHMS, problem_of, random_tensors, skip_unless_supported

ELTWISE = [("relu",), ("relu", 0.1), ("tanh",), ("sigmoid",), ("elu", 0.7), ("gelu_erf",),
           ("gelu_tanh",), ("swish", 1.5), ("clip", -0.5, 1.25), ("linear", 2.0, -1.0),
           ("abs",), ("square",), ("exp",), ("log",)]
RTOL = {"float32": 2e-6, "float64": 1e-13}


def _case(rng, dtype="float32", data_format="NCX"):
    src, weights, bias = random_tensors(
        rng, batch=2, in_channels=4, out_channels=6, groups=2, input_shape=(7, 6),
        kernel_shape=(3, 3), dtype=dtype, data_format=data_format, weights_format="OIX",
        bias=True)
    return src, weights, bias, dict(groups=2, data_format=data_format, weights_format="OIX",
                                    pads_begin=1, pads_end=1)


def unfused(plain, ops, attributes, dst_before=None):
    """The oracle's post-op formulas on an already computed dst, in float64."""
    data_format = attributes["data_format"]
    dst = np.asarray(plain, np.float64)
    before = None if dst_before is None else np.asarray(dst_before, np.float64)
    if data_format == "NXC":
        dst = np.moveaxis(dst, -1, 1)
        before = None if before is None else np.moveaxis(before, -1, 1)
    dst = convlab.reference.apply_post_ops(dst, ops, before)
    return dst if data_format == "NCX" else np.moveaxis(dst, 1, -1)


def _parsed(ops, src, weights, bias, attributes, out=None):
    return postops.parse(ops, problem_of(src, weights, bias, attributes), out)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("op", ELTWISE, ids=lambda op: "-".join(map(str, op)))
def test_each_eltwise_matches_its_formula(rng, op, dtype):
    src, weights, bias, attributes = _case(rng, dtype)
    if op[0] == "log":
        # log needs positive inputs: shift them through abs and a linear post-op first
        ops = [("abs",), ("linear", 1.0, 0.5), op]
    else:
        ops = [op if len(op) > 1 else op[0]]
    got = convlab.convolve(src, weights, bias, post_ops=ops, algorithm="direct", **attributes)
    base = convlab.convolve(src, weights, bias, algorithm="direct", **attributes)
    expected = unfused(base, _parsed(ops, src, weights, bias, attributes), attributes)
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_allclose(got, expected, rtol=RTOL[dtype],
                               atol=RTOL[dtype] * np.abs(expected).max())


@pytest.mark.parametrize("data_format", ["NCX", "NXC"])
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_chain_with_sum_and_binary_every_algorithm(rng, algorithm, data_format):
    src, weights, bias, attributes = _case(rng, data_format=data_format)
    skip_unless_supported(algorithm, problem_of(src, weights, bias, attributes))
    dst_shape = problem_of(src, weights, bias, attributes).dst_shape
    per_channel = rng.standard_normal((1, 6, 1, 1) if data_format == "NCX" else (6,))
    full = rng.standard_normal(dst_shape).astype(np.float32)
    ops = ["relu", ("sum", 0.5), ("mul", per_channel), ("add", full), ("max", 0.25),
           ("min", np.float32(3.0)), ("gelu_tanh",)]
    before = rng.standard_normal(dst_shape).astype(np.float32)
    out = before.copy()
    got = convlab.convolve(src, weights, bias, post_ops=ops, out=out, algorithm=algorithm,
                           **attributes)
    assert got is out
    base = convlab.convolve(src, weights, bias, algorithm=algorithm, **attributes)
    expected = unfused(base, _parsed(ops, src, weights, bias, attributes, out=before),
                       attributes, before)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5 * np.abs(expected).max())
    # and against the oracle end to end
    oracle = convlab.reference.convolve(src, weights, bias, post_ops=ops, dst_before=before,
                                        **attributes)
    np.testing.assert_allclose(got, oracle, rtol=1e-4, atol=1e-4 * np.abs(oracle).max())


def test_order_is_the_order_given(rng):
    src, weights, bias, attributes = _case(rng)
    before = np.full(problem_of(src, weights, bias, attributes).dst_shape, -5.0, np.float32)
    relu_then_sum = convlab.convolve(src, weights, bias, post_ops=["relu", "sum"],
                                     out=before.copy(), **attributes)
    sum_then_relu = convlab.convolve(src, weights, bias, post_ops=["sum", "relu"],
                                     out=before.copy(), **attributes)
    assert sum_then_relu.min() == 0 and relu_then_sum.min() <= -5.0


def test_plan_applies_post_ops_and_checks_syntax_up_front(rng):
    src, weights, bias, attributes = _case(rng)
    ops = [("relu", 0.2), ("add", rng.standard_normal((1, 6, 1, 1)))]
    plan = convlab.Convolution(weights, bias, post_ops=ops, **attributes)
    got = plan(src)
    # The plan times its contenders, so compare with the one-shot call of the algorithm it chose.
    one_shot = convlab.convolve(src, weights, bias, post_ops=ops,
                                algorithm=plan.algorithm_for(src), **attributes)
    np.testing.assert_allclose(got, one_shot, rtol=1e-6, atol=1e-6)
    with pytest.raises(ValueError, match=r"post_ops\[0\]: 'hardswish' is not a known"):
        convlab.Convolution(weights, bias, post_ops=["hardswish"], **attributes)
    with pytest.raises(ValueError, match=r"'sum' .* pass out="):
        convlab.Convolution(weights, bias, post_ops=["sum"], **attributes)(src)


def test_chunks_cover_the_output(rng, monkeypatch):
    """Tiny chunks give the same result as one chunk (the chunking is not visible)."""
    src, weights, bias, attributes = _case(rng)
    ops = ["relu", ("add", rng.standard_normal((1, 6, 1, 1)))]
    whole = convlab.convolve(src, weights, bias, post_ops=ops, **attributes)
    monkeypatch.setattr(postops, "CHUNK_ELEMENTS", 7)
    np.testing.assert_array_equal(convlab.convolve(src, weights, bias, post_ops=ops,
                                                   **attributes), whole)


def test_post_ops_in_the_quantized_float_stage(rng):
    src = rng.integers(0, 256, (1, 3, 5, 5), dtype=np.uint8)
    weights = rng.integers(-128, 128, (4, 3, 3, 3), dtype=np.int8)
    keywords = dict(data_format="NCX", weights_format="OIX", src_zero_point=128,
                    output_scale=0.01, dst_zero_point=10, dst_dtype="uint8")
    acc = convlab.convolve(src, weights, data_format="NCX", weights_format="OIX",
                           src_zero_point=128)
    got = convlab.convolve(src, weights, post_ops=[("clip", -3.0, 3.0)], **keywords)
    y = np.clip(acc.astype(np.float32) * np.float32(0.01), -3, 3) + np.float32(10)
    np.testing.assert_array_equal(got, np.clip(np.rint(y), 0, 255).astype(np.uint8))


# --------------------------------------------------------------------------- fused epilogues

# (batch, IC, OC, groups, input shape, kernel, attributes): dense, grouped, depthwise with
# channels that do not fill a vector, 1x1 over flattened pixels, 1-D strided, 3-D.
FUSION_PROBLEMS = {
    "dense-3x3": (2, 8, 40, 1, (9, 7), (3, 3), dict(pads_begin=1, pads_end=1)),
    "grouped": (2, 8, 36, 2, (6, 5), (3, 3), dict(strides=2, pads_begin=1, pads_end=0)),
    "depthwise": (2, 37, 37, 37, (9, 8), (3, 3), dict(pads_begin=1, pads_end=1)),
    "pointwise": (3, 16, 24, 1, (5, 4), (1, 1), {}),
    "1d-strided": (2, 6, 20, 1, (23,), (5,), dict(strides=3, dilations=2, pads_begin=2)),
    "3d": (1, 4, 18, 1, (5, 4, 6), (3, 2, 3), dict(pads_begin=1, pads_end=(0, 1, 1))),
    "3d-3x3x3": (1, 5, 20, 1, (6, 5, 7), (3, 3, 3), dict(pads_begin=1, pads_end=1)),
    # outputs whose taps all fall in the padding (Winograd then keeps the output stage)
    "wide-pads": (1, 6, 20, 1, (5, 6), (3, 3), dict(pads_begin=3, pads_end=(3, 1))),
}


def _fusion_case(rng, case, dtype, data_format):
    batch, ic, oc, groups, shape, kernel, extra = FUSION_PROBLEMS[case]
    src, weights, bias = random_tensors(
        rng, batch=batch, in_channels=ic, out_channels=oc, groups=groups, input_shape=shape,
        kernel_shape=kernel, dtype=dtype, data_format=data_format, weights_format="OIX",
        bias=True)
    return src, weights, bias, dict(groups=groups, data_format=data_format,
                                    weights_format="OIX", **extra)


def _chains(rng, problem):
    """Chains an epilogue takes: eltwise only, a leading sum, binary operands broadcast
    per channel, per pixel, as a scalar and at full size."""
    shape, channel_axis = problem.dst_shape, 1 if problem.data_format == "NCX" else -1
    per_channel = np.zeros(len(shape), int) + 1
    per_channel[channel_axis] = shape[channel_axis]
    per_pixel = list(shape)
    per_pixel[channel_axis] = 1
    return {
        "eltwise": [("relu", 0.1), "gelu_erf", ("clip", -0.5, 0.75), "tanh"],
        "sum-relu": ["sum", "relu"],
        # a sum no kernel can seed: it reads a snapshot of the prior dst
        "relu-sum": ["relu", ("sum", 0.5), "tanh", ("sum", 2.0)],
        "sum-binary": [("sum", 0.5), ("add", rng.standard_normal(tuple(per_channel))),
                       ("mul", rng.standard_normal(tuple(per_pixel))),
                       ("max", rng.standard_normal(shape).astype(np.float32)),
                       ("min", 0.8), ("linear", 2.0, -0.25), "sigmoid"],
    }


@pytest.mark.parametrize("data_format", ["NCX", "NXC"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", list(FUSION_PROBLEMS))
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_fused_post_ops_match_the_output_stage(rng, monkeypatch, algorithm, case, dtype,
                                              data_format):
    """Whatever an algorithm fuses equals what the separate output stage computes from its
    plain result, and the oracle; with out= in the user's layout, NXC in place or not."""
    src, weights, bias, attributes = _fusion_case(rng, case, dtype, data_format)
    problem = problem_of(src, weights, bias, attributes)
    skip_unless_supported(algorithm, problem)
    tol = RTOL[dtype] * 8
    for name, ops in _chains(rng, problem).items():
        before = rng.standard_normal(problem.dst_shape).astype(dtype)
        got = convlab.convolve(src, weights, bias, post_ops=ops, out=before.copy(),
                               algorithm=algorithm, **attributes)
        with monkeypatch.context() as patch:
            patch.setattr(postops, "epilogue", lambda *args, **kwargs: None)
            staged = convlab.convolve(src, weights, bias, post_ops=ops, out=before.copy(),
                                      algorithm=algorithm, **attributes)
        scale = np.abs(staged).max()
        np.testing.assert_allclose(got, staged, rtol=tol, atol=tol * scale, err_msg=name)
        if convlab.dispatch.registry.get_algorithm(algorithm).relative_error_for(problem):
            # a transform-domain algorithm: its own bound against the oracle is checked
            # by the registry suites; here it only has to agree with its staged self
            continue
        oracle = convlab.reference.convolve(src, weights, bias, post_ops=ops,
                                            dst_before=before, **attributes)
        np.testing.assert_allclose(got, oracle, rtol=1e-4, atol=1e-4 * scale, err_msg=name)


FUSING = [name for name in ALGORITHMS
          if convlab.dispatch.registry.get_algorithm(name).fuse_post_ops]


@pytest.mark.parametrize("case", list(FUSION_PROBLEMS))
@pytest.mark.parametrize("algorithm", FUSING)
def test_fusing_algorithms_skip_the_output_stage(rng, monkeypatch, algorithm, case):
    """Every chain of a float problem is fused by an algorithm that fuses post-ops (only
    Winograd's padding-only outputs keep the stage), and then the stage never runs."""
    src, weights, bias, attributes = _fusion_case(rng, case, "float32", "NXC")
    problem = problem_of(src, weights, bias, attributes)
    skip_unless_supported(algorithm, problem)
    chosen = convlab.dispatch.registry.get_algorithm(algorithm)

    def no_stage(*args, **kwargs):
        raise AssertionError("post-ops ran in the output stage")

    for name, ops in _chains(rng, problem).items():
        out = np.zeros(problem.dst_shape, np.float32)
        fused = postops.epilogue(problem, postops.parse(ops, problem, out), chosen, out)
        if algorithm.startswith("winograd") and case == "wide-pads":
            assert fused is None
            continue
        assert fused is not None, name
        leading_sum = ops[0] == "sum" or ops[0][0] == "sum"
        assert fused.seeds_sum == (leading_sum and chosen.fuse_post_ops(problem, True))
        with monkeypatch.context() as patch:
            patch.setattr(postops, "finish", no_stage)
            convlab.convolve(src, weights, bias, post_ops=ops, out=out, algorithm=algorithm,
                             **attributes)


def test_half_results_keep_the_output_stage(rng):
    src, weights, bias, attributes = _case(rng, data_format="NXC")
    half = problem_of(src.astype(np.float16), weights.astype(np.float16), None, attributes)
    ops = postops.parse(["relu"], half)
    assert "float16" in postops.fusion_blocker(half, ops)
    assert postops.epilogue(half, ops, convlab.dispatch.registry.get_algorithm("direct")) is None


def test_epilogue_rejects_operands_it_cannot_index():
    from convlab.strategies.kernels._epilogue import Epilogue

    good = np.zeros((1, 1, 6), np.float32)
    assert len(Epilogue([("add", (), good)], None, (2, 5, 6), np.float32)) == 1
    with pytest.raises(ValueError, match=r"operand of shape \(1, 2, 6\)"):
        Epilogue([("add", (), np.zeros((1, 2, 6), np.float32))], None, (2, 5, 6), np.float32)
    with pytest.raises(ValueError, match="dtype float64"):
        Epilogue([("add", (), good.astype(np.float64))], None, (2, 5, 6), np.float32)
    with pytest.raises(ValueError, match="'hardswish' has no kernel code"):
        Epilogue([("hardswish", (), None)], None, (2, 5, 6), np.float32)
    with pytest.raises(TypeError, match="float32 or float64"):
        Epilogue([], 1.0, (2, 5, 6), np.float16)


@pytest.mark.parametrize("algorithm", FUSING)
def test_fused_post_ops_survive_the_exact_recompute(rng, algorithm):
    """An Inf in src makes Winograd recompute the call with direct: the post-ops must then
    be applied by that recompute, once."""
    src, weights, bias, attributes = _fusion_case(rng, "dense-3x3", "float32", "NXC")
    problem = problem_of(src, weights, bias, attributes)
    skip_unless_supported(algorithm, problem)
    src[0, 4, 3, 2] = np.inf
    ops = [("linear", 0.5, 1.0), ("clip", -2.0, 2.0)]
    got = convlab.convolve(src, weights, bias, post_ops=ops, algorithm=algorithm, **attributes)
    with np.errstate(invalid="ignore"):
        oracle = convlab.reference.convolve(src, weights, bias, post_ops=ops, **attributes)
    assert np.array_equal(np.isnan(got), np.isnan(oracle))
    finite = ~np.isnan(oracle)
    np.testing.assert_allclose(got[finite], oracle[finite], rtol=1e-5, atol=1e-5)
