"""The ConvTranspose test cases that ship inside the ``onnx`` package, through every path.

* the eleven node cases of ``onnx.backend.test.case.node.collect_testcases("ConvTranspose")``;
* the two ``onnx/backend/test/data/pytorch-converted/test_ConvTranspose2d*`` models.

ONNX attributes translate as: ``pads`` [b_1..b_r, e_1..e_r] -> pads_begin, pads_end;
``strides``, ``dilations``, ``group`` -> groups, ``output_padding``, ``output_shape``,
``auto_pad``; ``kernel_shape`` must equal the weights' spatial shape. Layouts are ONNX's:
data_format="NCX", weights_format="IOX".
"""
from __future__ import annotations

import glob
import os
import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

import convlab  # noqa: E402
from convlab.ops import transpose  # noqa: E402
from tests.onnx_cases import (  # noqa: E402
    MODEL_ROOT,
    attribute_kinds,
    load_model_case,
    node_case_runs,
    translate_attributes,
)
from tests.test_transpose import (  # noqa: E402
    TRANSPOSE_ALGORITHMS,
    assert_transpose_matches,
    from_transpose_weights,
    scatter_reference,
    skip_unless_transpose_supported,
    transpose_problem,
)

EXPECTED_NODE_CASES = 11
EXPECTED_MODELS = 2
# As in test_onnx.py: the shipped outputs come from other float32 implementations, so they
# are compared with the float64 oracle at the ONNX backend runner's default tolerance; each
# path is then held to its own bound against the oracle on the same inputs.
RTOL, ATOL = 1e-3, 1e-7



def _node_cases():
    """The ConvTranspose node cases, whatever else this process collected before.

    ``collect_testcases(op)`` filters only while it first imports the case modules (the
    cases are generated at import), so a second call with another op returns the first
    call's cases. Here the ConvTranspose exporters run into a private list instead, and
    onnx's module state is put back, so test_onnx.py's ``collect_testcases("Conv")`` sees
    the same thing whichever file is collected first.
    """
    import importlib

    import onnx.backend.test.case.node as cases_module

    saved = (cases_module._NodeTestCases, cases_module._existing_names,
             cases_module._TargetOpType)
    try:
        cases_module._NodeTestCases, cases_module._existing_names = [], {}
        cases_module._TargetOpType = "ConvTranspose"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            module = importlib.import_module("onnx.backend.test.case.node.convtranspose")
            if not cases_module._NodeTestCases:  # imported before: run its exporters again
                exporter = module.ConvTranspose
                for name in sorted(vars(exporter)):
                    if name.startswith("export"):
                        np.random.seed(0)  # noqa: NPY002  as onnx's exporter does before each export
                        getattr(exporter, name)()
        collected = cases_module._NodeTestCases
    finally:
        (cases_module._NodeTestCases, cases_module._existing_names,
         cases_module._TargetOpType) = saved
    return {case.name: case for case in collected}


NODE_CASES = _node_cases()
MODELS = sorted(glob.glob(os.path.join(MODEL_ROOT, "test_ConvTranspose*")))


def test_every_shipped_conv_transpose_case_is_collected():
    assert len(NODE_CASES) == EXPECTED_NODE_CASES, sorted(NODE_CASES)
    assert [os.path.basename(p) for p in MODELS] == ["test_ConvTranspose2d",
                                                     "test_ConvTranspose2d_no_bias"]
    assert len(MODELS) == EXPECTED_MODELS
    for case in NODE_CASES.values():
        assert [node.op_type for node in case.model.graph.node] == ["ConvTranspose"], case.name
    for path in MODELS:
        model = onnx.load(os.path.join(path, "model.onnx"))
        assert [node.op_type for node in model.graph.node] == ["ConvTranspose"], path


def onnx_attributes(node, weights_shape):
    """convlab keywords for an ONNX ConvTranspose node."""
    attributes, given = translate_attributes(node, weights_shape, "NCX", "IOX")
    rank = len(weights_shape) - 2
    attributes["output_padding"] = list(given.pop("output_padding", [0] * rank))
    if "output_shape" in given:
        attributes["output_shape"] = list(given.pop("output_shape"))
    assert not given, f"untranslated ONNX attributes {sorted(given)}"
    return attributes


def check(algorithm, inputs, expected, node, label):
    src, weights, *rest = inputs
    bias = rest[0] if rest else None
    attributes = onnx_attributes(node, weights.shape)
    tp = transpose_problem(src, weights, bias, attributes)
    oracle = scatter_reference(src, from_transpose_weights(weights, "IOX"), bias, tp.strides,
                               tp.dilations, tp.pads_begin, tp.output_shape, tp.groups)
    np.testing.assert_allclose(oracle, expected, rtol=RTOL, atol=ATOL,
                               err_msg=f"{label} {attributes}")
    skip_unless_transpose_supported(algorithm, tp)
    got = convlab.conv_transpose(src, weights, bias, algorithm=algorithm, **attributes)
    assert got.dtype == expected.dtype
    assert_transpose_matches(got, src, weights, bias, attributes, algorithm, label)


@pytest.mark.parametrize("name", sorted(NODE_CASES))
@pytest.mark.parametrize("algorithm", TRANSPOSE_ALGORITHMS)
def test_onnx_node_case(algorithm, name):
    for inputs, expected, node in node_case_runs(NODE_CASES[name]):
        check(algorithm, inputs, expected, node, name)


@pytest.mark.parametrize("path", MODELS, ids=os.path.basename)
@pytest.mark.parametrize("algorithm", TRANSPOSE_ALGORITHMS)
def test_onnx_pytorch_converted_model(algorithm, path):
    for node, inputs, outputs in load_model_case(path):
        check(algorithm, inputs, outputs[0], node, os.path.basename(path))


def test_onnx_attribute_translation_covers_every_attribute_kind():
    """The shipped cases exercise each translated attribute, so translation bugs would show."""
    nodes = [case.model.graph.node[0] for case in NODE_CASES.values()]
    nodes += [onnx.load(os.path.join(p, "model.onnx")).graph.node[0] for p in MODELS]
    seen = attribute_kinds(nodes)
    assert seen == {"asymmetric pads", "strides", "dilations", "group", "auto_pad",
                    "output_padding", "output_shape"}
    assert transpose.COL2IM in TRANSPOSE_ALGORITHMS
