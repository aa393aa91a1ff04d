"""Reading the test data that ships inside the ``onnx`` package (shared by the ONNX tests).

``load_model_case`` reads one ``pytorch-converted`` model with its data sets;
``translate_attributes`` turns the attributes Conv and ConvTranspose share into convlab
keywords, leaving the operator's own ones in ``given`` for the caller.
"""
from __future__ import annotations

import glob
import os

import numpy as np
import onnx
from onnx import numpy_helper

MODEL_ROOT = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data",
                          "pytorch-converted")


def load_model_case(path):
    """(node, [src, weights, bias?], [expected outputs]) for one pytorch-converted model."""
    model = onnx.load(os.path.join(path, "model.onnx"))
    (node,) = model.graph.node
    initializers = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    feeds = [i.name for i in model.graph.input if i.name not in initializers]
    data_sets = sorted(glob.glob(os.path.join(path, "test_data_set_*")))
    assert data_sets, f"{path} has no test_data_set_*"
    for data_set in data_sets:
        values = dict(initializers)
        input_files = sorted(glob.glob(os.path.join(data_set, "input_*.pb")))
        assert len(input_files) == len(feeds), data_set
        for name, file in zip(feeds, input_files):
            values[name] = numpy_helper.to_array(onnx.load_tensor(file))
        outputs = [numpy_helper.to_array(onnx.load_tensor(file))
                   for file in sorted(glob.glob(os.path.join(data_set, "output_*.pb")))]
        assert len(outputs) == len(model.graph.output) == 1, data_set
        yield node, [values[name] for name in node.input if name], outputs


def translate_attributes(node, weights_shape, data_format, weights_format):
    """(convlab keywords, the node's attributes not translated yet).

    ``pads`` [b_1..b_r, e_1..e_r] -> pads_begin, pads_end (only when given); ``strides``,
    ``dilations``, ``group`` -> groups, ``auto_pad``; ``kernel_shape`` must equal the
    weights' spatial shape (the last r axes in ONNX layouts).
    """
    given = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    rank = len(weights_shape) - 2
    kernel_shape = given.pop("kernel_shape", None)
    if kernel_shape is not None:
        assert tuple(kernel_shape) == tuple(weights_shape[2:]), "kernel_shape disagrees with W"
    attributes = dict(data_format=data_format, weights_format=weights_format,
                      groups=given.pop("group", 1),
                      strides=list(given.pop("strides", [1] * rank)),
                      dilations=list(given.pop("dilations", [1] * rank)))
    auto_pad = given.pop("auto_pad", b"NOTSET")
    attributes["auto_pad"] = auto_pad.decode() if isinstance(auto_pad, bytes) else auto_pad
    if "pads" in given:
        pads = list(given.pop("pads"))
        attributes["pads_begin"], attributes["pads_end"] = pads[:rank], pads[rank:]
    return attributes, given


def node_case_runs(case):
    """(inputs, expected output, node) for each data set of an onnx node test case."""
    node = case.model.graph.node[0]
    assert case.data_sets, case.name
    for inputs, outputs in case.data_sets:
        yield [np.asarray(x) for x in inputs], np.asarray(outputs[0]), node


def attribute_kinds(nodes):
    """Which translated attribute kinds the nodes exercise with a non-default value."""
    seen = set()
    for node in nodes:
        for a in node.attribute:
            value = onnx.helper.get_attribute_value(a)
            if a.name == "pads" and len(set(value)) > 1:
                seen.add("asymmetric pads")
            elif a.name in ("strides", "dilations") and max(value) > 1:
                seen.add(a.name)
            elif a.name == "group" and value > 1:
                seen.add("group")
            elif a.name == "auto_pad" and value not in (b"NOTSET", "NOTSET"):
                seen.add("auto_pad")
            elif a.name in ("output_padding", "output_shape"):
                seen.add(a.name)
    return seen
