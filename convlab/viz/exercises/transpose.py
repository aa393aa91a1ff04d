"""Exercises on transposed convolution (notebook 08).

Output sizes come from running :func:`convlab.conv_transpose` itself (on zeros), and the
forward sizes it must undo from :func:`convlab.make_problem`.
"""
from __future__ import annotations

import numpy as np

import convlab
from convlab.viz.exercises.verdict import Verdict, checker, whole_number


def _transposed_length(input_length: int, kernel_taps: int, **attributes) -> int:
    src = np.zeros((1, input_length, 1), np.float32)
    weights = np.zeros((kernel_taps, 1, 1), np.float32)
    return convlab.conv_transpose(src, weights, **attributes).shape[1]


@checker
def check_transpose_length(answer, *, input_length: int, kernel_taps: int, stride: int = 1,
                           dilation: int = 1, pads: tuple[int, int] = (0, 0),
                           output_padding: int = 0) -> Verdict:
    """Exercise: how many outputs a 1-D transposed convolution has."""
    expected = _transposed_length(input_length, kernel_taps, strides=stride,
                                  dilations=dilation, pads_begin=pads[0], pads_end=pads[1],
                                  output_padding=output_padding)
    got = whole_number(answer)
    span = (kernel_taps - 1) * dilation + 1
    reason = (f"the {input_length} inputs scatter S = {stride} apart, so the last copy "
              f"starts at S*(I-1) = {stride * (input_length - 1)} and spans (K-1)*D + 1 = "
              f"{span}; + output_padding {output_padding} - P_b {pads[0]} - P_e {pads[1]} "
              f"= {expected}")
    if got == expected:
        return Verdict(True, f"{expected} outputs: {reason}")
    hint = ""
    if got == stride * input_length:
        hint = (f"; S*I gives each input S outputs, but the last input's copy reaches "
                f"{span - stride} further")
    elif got == stride * (input_length - 1) + span:
        hint = "; the pads crop the scatter's ends"
    return Verdict(False, f"{expected} outputs, not {got}: {reason}{hint}")


@checker
def check_output_padding(answer, *, input_length: int, kernel_taps: int, stride: int,
                         pads: tuple[int, int] = (0, 0)) -> Verdict:
    """Exercise: the ``output_padding`` with which the transposed convolution (same
    kernel, stride and pads) maps a forward convolution's output back to
    ``input_length`` positions."""
    forward = convlab.make_problem((1, input_length, 1), np.float32, (kernel_taps, 1, 1),
                                   np.float32, strides=stride, pads_begin=pads[0],
                                   pads_end=pads[1])
    outputs = forward.output_shape[0]
    got = whole_number(answer, "output_padding")
    try:
        length = _transposed_length(outputs, kernel_taps, strides=stride, pads_begin=pads[0],
                                    pads_end=pads[1], output_padding=got)
    except ValueError as exc:
        return Verdict(False, f"output_padding={got} is refused by the library: {exc}")
    without = _transposed_length(outputs, kernel_taps, strides=stride, pads_begin=pads[0],
                                 pads_end=pads[1])
    reason = (f"the forward convolution maps {input_length} positions to {outputs}; "
              f"transposed back without output_padding they give {without}, so "
              f"{input_length - without} more are needed (inputs the forward stride "
              f"dropped at the end)")
    if length == input_length:
        return Verdict(True, f"output_padding={got}: {reason}")
    return Verdict(False, f"output_padding={got} gives {length} positions, not "
                          f"{input_length}: {reason}")


__all__ = ["check_output_padding", "check_transpose_length"]
