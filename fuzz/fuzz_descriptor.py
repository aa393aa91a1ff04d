"""benchdnn descriptors and shape files: ``parse_descriptor``, ``parse_lines``, ``load_suite``.

A descriptor that parses must describe a consistent layer: its canonical form, as a line of
a shape file, parses back to the same layer; its output sizes and FLOP count follow from
the other fields; building the convlab problem either works or is refused with a
ValueError.
"""
from __future__ import annotations

import math

from fuzz_targets import clear_errors_allowed, text_of

from convlab.problem import shapes


def check_layer(layer: shapes.Layer) -> None:
    again = shapes.parse_lines(layer.canonical().splitlines())
    assert again == [layer], f"{layer.canonical()!r} parses to {again}, not {layer}"
    assert layer.multiplicity >= 1 and layer.mb >= 1 and layer.groups >= 1
    assert layer.ic % layer.groups == 0 and layer.oc % layer.groups == 0
    for i, o, k, s, d, p, e in zip(layer.input_shape, layer.output_shape, layer.kernel_shape,
                                   layer.strides, layer.dilations, layer.pads_begin,
                                   layer.pads_end):
        assert min(i, o, k, s, d) >= 1, layer  # p < 0: derived from a small output
        assert (o - 1) * s + (k - 1) * d + 1 == p + i + e, layer  # the output fits exactly
    expected = (2 * layer.mb * layer.oc * math.prod(layer.output_shape)
                * (layer.ic // layer.groups) * math.prod(layer.kernel_shape))
    assert layer.flops() == expected, f"flops() {layer.flops()} != {expected} for {layer}"
    with clear_errors_allowed():
        problem = layer.problem()
        assert problem.dst_shape == layer.dst_shape(), (problem, layer)


def one_input(data: bytes) -> None:
    text = text_of(data)
    layer = None
    with clear_errors_allowed():
        layer = shapes.parse_descriptor(text)
    if layer is not None:
        check_layer(layer)
    with clear_errors_allowed():
        for layer in shapes.parse_lines(text.splitlines(), "<fuzz>"):
            check_layer(layer)
    with clear_errors_allowed():
        shapes.load_suite(text.strip())
