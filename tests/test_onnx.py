"""The Conv test cases that ship inside the ``onnx`` package, through every algorithm.

* the six node cases of ``onnx.backend.test.case.node.collect_testcases("Conv")``;
* the 26 ``onnx/backend/test/data/pytorch-converted/test_Conv*`` models whose node is Conv
  (two more directories there, test_ConvTranspose2d*, hold ConvTranspose models).

ONNX attributes translate as: ``pads`` [b_1..b_r, e_1..e_r] -> pads_begin, pads_end;
``strides``, ``dilations``, ``group`` -> groups; ``auto_pad``; ``kernel_shape`` must equal
the weights' spatial shape. Layouts are ONNX's: data_format="NCX", weights_format="OIX".
"""
from __future__ import annotations

import glob
import os
import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

import convlab  # noqa: E402
from tests.helpers import ALGORITHMS, assert_matches_reference, problem_of, skip_unless_supported  # noqa: E402
from tests.onnx_cases import (  # noqa: E402
    MODEL_ROOT,
    attribute_kinds,
    load_model_case,
    node_case_runs,
    translate_attributes,
)

EXPECTED_NODE_CASES = 6
EXPECTED_CONV_MODELS = 26
# The expected outputs come from other float32 implementations (NumPy, PyTorch), so they are
# compared with the float64 oracle at the ONNX backend runner's default tolerance (what the
# node cases declare): that checks the semantics and the attribute translation. Each
# algorithm is then held to its own bound against the oracle on the same inputs
# (helpers.TOLERANCES), as in the grid.
RTOL, ATOL = 1e-3, 1e-7



def _node_cases():
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():  # other operators' case generators warn on import
        warnings.simplefilter("ignore")
        return {case.name: case for case in collect_testcases("Conv")}


def _model_dirs():
    """test_Conv* model directories, split by the operator of their single node."""
    by_op = {}
    for path in sorted(glob.glob(os.path.join(MODEL_ROOT, "test_Conv*"))):
        model = onnx.load(os.path.join(path, "model.onnx"))
        ops = [node.op_type for node in model.graph.node]
        by_op.setdefault(ops[0] if len(ops) == 1 else "+".join(ops), []).append(path)
    return by_op


NODE_CASES = _node_cases()
MODELS_BY_OP = _model_dirs()
CONV_MODELS = MODELS_BY_OP.get("Conv", [])


def test_every_shipped_conv_case_is_collected():
    assert len(NODE_CASES) == EXPECTED_NODE_CASES, sorted(NODE_CASES)
    assert len(CONV_MODELS) == EXPECTED_CONV_MODELS, [os.path.basename(p) for p in CONV_MODELS]
    assert {os.path.basename(p) for p in MODELS_BY_OP.get("ConvTranspose", [])} == {
        "test_ConvTranspose2d", "test_ConvTranspose2d_no_bias"}
    assert set(MODELS_BY_OP) <= {"Conv", "ConvTranspose"}, sorted(MODELS_BY_OP)
    for case in NODE_CASES.values():
        assert [node.op_type for node in case.model.graph.node] == ["Conv"], case.name


def onnx_attributes(node, weights_shape):
    """convlab keywords for an ONNX Conv node."""
    attributes, given = translate_attributes(node, weights_shape, "NCX", "OIX")
    assert not given, f"untranslated ONNX attributes {sorted(given)}"
    return attributes


def check(algorithm, inputs, expected, node, label):
    src, weights, *rest = inputs
    bias = rest[0] if rest else None
    attributes = onnx_attributes(node, weights.shape)
    skip_unless_supported(algorithm, problem_of(src, weights, bias, attributes))
    got = convlab.convolve(src, weights, bias, algorithm=algorithm, **attributes)
    assert got.dtype == expected.dtype
    oracle = convlab.reference.convolve(src, weights, bias, **attributes)
    np.testing.assert_allclose(oracle, expected, rtol=RTOL, atol=ATOL,
                               err_msg=f"{label} {attributes}")
    assert_matches_reference(got, src, weights, bias, attributes, algorithm, label)


@pytest.mark.parametrize("name", sorted(NODE_CASES))
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_onnx_node_case(algorithm, name):
    for inputs, expected, node in node_case_runs(NODE_CASES[name]):
        check(algorithm, inputs, expected, node, name)


@pytest.mark.parametrize("path", CONV_MODELS, ids=os.path.basename)
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_onnx_pytorch_converted_model(algorithm, path):
    for node, inputs, outputs in load_model_case(path):
        check(algorithm, inputs, outputs[0], node, os.path.basename(path))


def test_onnx_attribute_translation_covers_every_attribute_kind():
    """The shipped cases exercise each translated attribute, so translation bugs would show."""
    nodes = [case.model.graph.node[0] for case in NODE_CASES.values()]
    nodes += [onnx.load(os.path.join(p, "model.onnx")).graph.node[0] for p in CONV_MODELS]
    seen = attribute_kinds(nodes)
    assert seen == {"asymmetric pads", "strides", "dilations", "group", "auto_pad"}
