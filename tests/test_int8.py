"""8-bit integer convolution (docs/specification.md §3.4): ONNX ConvInteger / QLinearConv
cases and exact sums.

Every path ("direct": int16 operands with wrapping 32-bit accumulation; "im2col": exact
float64 GEMM then wrap; "reference": int64) must agree bit for bit with a literal int64
formula written out here, independently of convlab.reference.
"""
from __future__ import annotations

import functools
import itertools
import warnings

import numpy as np
import pytest

import convlab

PATHS = ["direct", "im2col", "reference", "auto"]
EXPECTED_CASES = {"ConvInteger": 2, "QLinearConv": 1}


def _onnx_cases():
    onnx = pytest.importorskip("onnx")
    return onnx, _collected()


@functools.lru_cache(maxsize=1)
def _collected():
    """Once per session: re-exporting registers the case names, which may happen once."""
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():  # other operators' case generators warn on import
        warnings.simplefilter("ignore")
        cases = collect_testcases()
        if not any(c.model.graph.node[0].op_type in EXPECTED_CASES for c in cases):
            cases = _export_again()
    by_op = {}
    for case in cases:
        ops = [node.op_type for node in case.model.graph.node]
        if ops[0] in EXPECTED_CASES:
            assert len(ops) == 1, case.name
            by_op.setdefault(ops[0], []).append(case)
    return by_op


def _export_again():
    """collect_testcases() fills its list once, at first import, keeping only the op type
    of that first call (tests/test_onnx.py asks for "Conv"). Run the two operators'
    export functions again into a fresh list, then put the module's list back."""
    import onnx.backend.test.case.node as cases_module
    from onnx.backend.test.case.node.convinteger import ConvInteger
    from onnx.backend.test.case.node.qlinearconv import QLinearConv

    saved = cases_module._NodeTestCases, cases_module._TargetOpType
    cases_module._NodeTestCases, cases_module._TargetOpType = [], None
    try:
        for cls in (ConvInteger, QLinearConv):
            for name in dir(cls):
                if name.startswith("export"):
                    getattr(cls, name)()
        return cases_module._NodeTestCases
    finally:
        cases_module._NodeTestCases, cases_module._TargetOpType = saved


ONNX_COLLECTION = pytest.mark.thread_unsafe(
    reason="collects ONNX's shipped cases through module-level lists that a second "
           "collection swaps out")


@ONNX_COLLECTION
def test_every_shipped_integer_conv_case_is_collected():
    _, by_op = _onnx_cases()
    assert {op: len(cases) for op, cases in by_op.items()} == EXPECTED_CASES


def _onnx_keywords(onnx, node, weights_shape):
    given = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    rank = len(weights_shape) - 2
    pads = list(given.pop("pads", [0] * 2 * rank))
    keywords = dict(data_format="NCX", weights_format="OIX", pads_begin=pads[:rank],
                    pads_end=pads[rank:], strides=list(given.pop("strides", [1] * rank)),
                    dilations=list(given.pop("dilations", [1] * rank)),
                    groups=given.pop("group", 1))
    auto_pad = given.pop("auto_pad", b"NOTSET")
    keywords["auto_pad"] = auto_pad.decode() if isinstance(auto_pad, bytes) else auto_pad
    kernel_shape = given.pop("kernel_shape", None)
    assert kernel_shape is None or tuple(kernel_shape) == tuple(weights_shape[2:])
    assert not given, f"untranslated ONNX attributes {sorted(given)}"
    return keywords


@ONNX_COLLECTION
@pytest.mark.parametrize("algorithm", PATHS)
def test_onnx_integer_cases(algorithm):
    onnx, by_op = _onnx_cases()
    checked = 0
    for op, cases in by_op.items():
        for case in cases:
            node = case.model.graph.node[0]
            for inputs, outputs in case.data_sets:
                inputs = [np.asarray(x) for x in inputs]
                expected = np.asarray(outputs[0])
                if op == "ConvInteger":
                    x, w, *zero_points = inputs + [None] * (4 - len(inputs))
                    got = convlab.convolve(x, w, src_zero_point=zero_points[0],
                                           weights_zero_point=zero_points[1],
                                           algorithm=algorithm,
                                           **_onnx_keywords(onnx, node, w.shape))
                else:
                    x, xs, xz, w, ws, wz, ys, yz, *bias = inputs
                    got = convlab.convolve(
                        x, w, bias[0] if bias else None, src_zero_point=xz,
                        weights_zero_point=wz, output_scale=xs * ws / ys, dst_zero_point=yz,
                        dst_dtype=yz.dtype, algorithm=algorithm,
                        **_onnx_keywords(onnx, node, w.shape))
                assert got.dtype == expected.dtype, case.name
                np.testing.assert_array_equal(got, expected, err_msg=case.name)
                checked += 1
    assert checked == sum(EXPECTED_CASES.values())


# --------------------------------------------------------------------------- literal formula

def literal_accumulator(src, weights, bias, zs, zw, strides, dilations, pads_begin, pads_end,
                        groups, data_dilations=None):
    """docs/specification.md §1.1, §3.4 in int64, NCX/OIX, one output position and tap at a
    time, wrapped to int32."""
    src = np.asarray(src, np.int64)
    weights = np.asarray(weights, np.int64)
    n, ic, *extents = src.shape
    oc, icg, *kernel = weights.shape
    r = len(extents)
    ocg = oc // groups
    zs = np.broadcast_to(np.asarray(zs, np.int64), (ic,))
    zw = np.broadcast_to(np.asarray(zw, np.int64), (oc,))
    ld = data_dilations or (1,) * r
    stretched = [step * (i - 1) + 1 for step, i in zip(ld, extents)]
    out = [(i + pb + pe - ((k - 1) * d + 1)) // s + 1 for i, k, s, d, pb, pe in
           zip(stretched, kernel, strides, dilations, pads_begin, pads_end)]
    dst = np.zeros((n, oc, *out), np.int64)
    for o in itertools.product(*map(range, out)):
        for k in itertools.product(*map(range, kernel)):
            position = [oo * s + kk * d - pb for oo, kk, s, d, pb in
                        zip(o, k, strides, dilations, pads_begin)]
            # a stretched position holds src only at multiples of L; elsewhere zero (= zp)
            if any(p < 0 or p >= e or p % step for p, e, step in zip(position, stretched, ld)):
                continue
            tap = tuple(p // step for p, step in zip(position, ld))
            for g in range(groups):
                x = src[(slice(None), slice(g * icg, (g + 1) * icg)) + tap] - \
                    zs[g * icg:(g + 1) * icg]
                w = weights[(slice(g * ocg, (g + 1) * ocg), slice(None)) + k] - \
                    zw[g * ocg:(g + 1) * ocg, None]
                dst[(slice(None), slice(g * ocg, (g + 1) * ocg)) + o] += x @ w.T
    if bias is not None:
        dst += np.asarray(bias, np.int64).reshape((1, oc) + (1,) * r)
    return ((dst + 2**31) % 2**32 - 2**31).astype(np.int32)


def _random(rng, dtype, shape):
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, shape, dtype=dtype)


CASES = {
    # name: (rank, groups, IC, OC, kernel, attributes)
    "1d-strided": (1, 1, 3, 5, (3,), dict(strides=2, pads_begin=1, pads_end=2)),
    "2d-dilated": (2, 1, 4, 6, (3, 2), dict(dilations=(2, 1), pads_begin=(1, 0), pads_end=1)),
    "2d-grouped-negative-pads": (2, 2, 4, 6, (2, 3), dict(pads_begin=(-1, 2), pads_end=(1, -1))),
    "2d-depthwise": (2, 4, 4, 4, (3, 3), dict(pads_begin=1, pads_end=1)),
    "3d": (3, 1, 2, 3, (2, 3, 2), dict(strides=(1, 2, 1), pads_begin=(0, 1, 1))),
    "2d-data-dilation": (2, 1, 3, 4, (3, 3), dict(data_dilations=(2, 3), pads_begin=1)),
    "1x1-wide": (2, 1, 70, 8, (1, 1), dict()),
}


@pytest.mark.parametrize("algorithm", PATHS)
@pytest.mark.parametrize("src_type, weights_type", [(np.uint8, np.int8), (np.int8, np.int8),
                                                   (np.uint8, np.uint8)])
@pytest.mark.parametrize("case", list(CASES))
def test_exact_accumulator(rng, case, src_type, weights_type, algorithm):
    rank, groups, ic, oc, kernel, attributes = CASES[case]
    src = _random(rng, src_type, (2, ic, *(7, 6, 5)[:rank]))
    weights = _random(rng, weights_type, (oc, ic // groups, *kernel))
    bias = rng.integers(-2**20, 2**20, oc).astype(np.int32)
    zs = _random(rng, src_type, (ic,))          # per input channel
    zw = _random(rng, weights_type, (oc,))      # per output channel
    r = rank
    expected = literal_accumulator(
        src, weights, bias, zs, zw, _tuple(attributes.get("strides", 1), r),
        _tuple(attributes.get("dilations", 1), r), _tuple(attributes.get("pads_begin", 0), r),
        _tuple(attributes.get("pads_end", 0), r), groups,
        attributes.get("data_dilations") and _tuple(attributes["data_dilations"], r))
    for data_format, weights_format in (("NCX", "OIX"), ("NXC", "XIO")):
        s = src if data_format == "NCX" else np.moveaxis(src, 1, -1).copy()
        w = weights if weights_format == "OIX" else np.moveaxis(weights, (0, 1), (-1, -2)).copy()
        got = convlab.convolve(s, w, bias, src_zero_point=zs, weights_zero_point=zw,
                               groups=groups, data_format=data_format,
                               weights_format=weights_format, algorithm=algorithm,
                               **attributes)
        assert got.dtype == np.int32
        if data_format == "NXC":
            got = np.moveaxis(got, -1, 1)
        np.testing.assert_array_equal(got, expected, err_msg=f"{case} {data_format}")


def _tuple(value, rank):
    return tuple(value) if isinstance(value, (tuple, list)) else (value,) * rank


def test_accumulator_wraps_like_int32():
    """255 * 255 * 40000 > 2**31: every path wraps modulo 2**32, as int32 adders do."""
    src = np.full((1, 40000, 1, 1), 255, np.uint8)
    weights = np.full((2, 40000, 1, 1), 255, np.uint8)
    exact = 255 * 255 * 40000
    wrapped = (exact + 2**31) % 2**32 - 2**31
    assert wrapped != exact
    for algorithm in ("direct", "im2col", "reference"):
        got = convlab.convolve(src, weights, data_format="NCX", weights_format="OIX",
                               algorithm=algorithm)
        assert got.ravel().tolist() == [wrapped, wrapped], algorithm


@pytest.mark.parametrize("algorithm", PATHS)
@pytest.mark.parametrize("dst_dtype", ["int8", "uint8", "int32", "float32"])
def test_requantization_is_exact(rng, algorithm, dst_dtype):
    """float32 acc * scale + float bias, relu, + dst zero point, round half even, saturate."""
    src = _random(rng, np.uint8, (2, 5, 6, 6))
    weights = _random(rng, np.int8, (4, 5, 3, 3))
    scale = np.array([1e-3, 2e-3, 5e-4, 3e-3], np.float32)
    float_bias = np.array([-3.25, 0.5, 1.0, 7.0], np.float32)
    zd = np.array([3, 100, 0, 7]) if dst_dtype != "int8" else np.array([3, -100, 0, 7])
    got = convlab.convolve(src, weights, float_bias, src_zero_point=128, weights_zero_point=0,
                           output_scale=scale, dst_zero_point=zd, dst_dtype=dst_dtype,
                           post_ops=["relu"], pads_begin=1, pads_end=1, data_format="NCX",
                           weights_format="OIX", algorithm=algorithm)
    acc = literal_accumulator(src, weights, None, 128, 0, (1, 1), (1, 1), (1, 1), (1, 1), 1)
    y = acc.astype(np.float32) * scale[:, None, None] + float_bias[:, None, None]
    y = np.maximum(y, np.float32(0)) + zd[:, None, None].astype(np.float32)
    if dst_dtype != "float32":
        info = np.iinfo(dst_dtype)
        y = np.clip(np.rint(y.astype(np.float64)), info.min, info.max)
    assert got.dtype == np.dtype(dst_dtype)
    np.testing.assert_array_equal(got, y.astype(dst_dtype))


def test_round_half_to_even_and_saturation():
    src = np.arange(-8, 8, dtype=np.int8).reshape(1, 16, 1)  # NXC, 16 positions, 1 channel
    weights = np.ones((1, 1, 1), np.int8)
    got = convlab.convolve(src, weights, output_scale=0.5, dst_dtype="int8")
    # -4, -3.5 -> -4, -3, -2.5 -> -2, ..., 0.5 -> 0, 1.5 -> 2, 2.5 -> 2, 3.5 -> 4
    assert got.ravel().tolist() == [-4, -4, -3, -2, -2, -2, -1, 0, 0, 0, 1, 2, 2, 2, 3, 4]
    big = np.full((1, 3, 1), 100, np.int8)
    assert convlab.convolve(big, weights, output_scale=2.0, dst_dtype="int8").max() == 127
    assert convlab.convolve(-big, weights, output_scale=2.0, dst_dtype="uint8").max() == 0


def test_int32_bias_before_scale_float_bias_after():
    src = np.ones((1, 1, 1), np.uint8)
    weights = np.full((1, 1, 1), 3, np.int8)
    int_bias = convlab.convolve(src, weights, np.array([5], np.int32), output_scale=0.5,
                                dst_dtype="float32")
    float_bias = convlab.convolve(src, weights, np.array([5.0], np.float32), output_scale=0.5,
                                  dst_dtype="float32")
    assert int_bias.item() == (3 + 5) * 0.5 and float_bias.item() == 3 * 0.5 + 5


@pytest.mark.parametrize("data_format", ["NCX", "NXC"])
def test_plan_and_out_match_one_shot(rng, data_format):
    src = _random(rng, np.uint8, (2, 6, 6, 4) if data_format == "NXC" else (2, 4, 6, 6))
    weights = _random(rng, np.int8, (3, 3, 4, 8))
    keywords = dict(src_zero_point=7, weights_zero_point=np.arange(8) - 4, output_scale=0.01,
                    dst_zero_point=5, dst_dtype="uint8", pads_begin=1, pads_end=1,
                    data_format=data_format)
    expected = convlab.convolve(src, weights, algorithm="reference", **keywords)
    plan = convlab.Convolution(weights, **keywords)
    np.testing.assert_array_equal(plan(src), expected)
    out = np.empty_like(expected)
    assert plan(src, out=out) is out
    np.testing.assert_array_equal(out, expected)
    for algorithm in ("direct", "im2col"):
        out = np.empty_like(expected)
        convlab.convolve(src, weights, algorithm=algorithm, out=out, **keywords)
        np.testing.assert_array_equal(out, expected)


def test_thread_count_does_not_change_the_result(rng):
    src = _random(rng, np.int8, (3, 9, 9, 16))
    weights = _random(rng, np.int8, (3, 3, 16, 24))
    for algorithm in ("direct", "im2col"):
        one = convlab.convolve(src, weights, threads=1, algorithm=algorithm, pads_begin=1)
        two = convlab.convolve(src, weights, threads=2, algorithm=algorithm, pads_begin=1)
        np.testing.assert_array_equal(one, two)


def test_selection_for_integer_problems():
    src = np.zeros((1, 8, 8, 64), np.uint8)
    assert convlab.select_algorithm(src, np.zeros((3, 3, 64, 64), np.int8)) == "im2col"
    assert convlab.select_algorithm(src, np.zeros((1, 1, 64, 8), np.int8)) == "im2col"
    assert convlab.select_algorithm(src[..., :4], np.zeros((1, 1, 4, 8), np.int8)) == "direct"
    text = str(convlab.explain(src, np.zeros((3, 3, 64, 64), np.int8)))
    assert "choice: im2col" in text and "int32" in text
