"""Exercises on channels, groups and depthwise convolution (notebook 04).

Weight counts come from the problem :func:`convlab.make_problem` builds; which input
channels feed an output channel is probed with :func:`convlab.convolve` (one-hot channels).
"""
from __future__ import annotations

import math

import numpy as np

import convlab
from convlab.viz.exercises.verdict import Verdict, checker, index_set, listed, whole_number


def _grouped_problem(in_channels: int, out_channels: int, kernel_shape, groups: int):
    if groups < 1 or in_channels % groups or out_channels % groups:
        raise ValueError(f"groups={groups}: expected a divisor of in_channels={in_channels} "
                         f"and out_channels={out_channels}")
    kernel_shape = tuple(kernel_shape)
    return convlab.make_problem((1, *(k + 1 for k in kernel_shape), in_channels), np.float32,
                                (*kernel_shape, in_channels // groups, out_channels),
                                np.float32, groups=groups)


@checker
def check_weight_count(answer, *, in_channels: int, out_channels: int,
                       kernel_shape: tuple[int, ...], groups: int = 1) -> Verdict:
    """Exercise: how many weights (no bias) a grouped layer has."""
    problem = _grouped_problem(in_channels, out_channels, kernel_shape, groups)
    expected = math.prod(problem.weights_shape)
    got = whole_number(answer)
    taps = math.prod(kernel_shape)
    reason = (f"each of the {out_channels} filters has {taps} taps on IC/G = "
              f"{in_channels}/{groups} = {problem.in_channels_per_group} input channels: "
              f"{taps} * {problem.in_channels_per_group} * {out_channels} = {expected} "
              f"(weights shape {tuple(problem.weights_shape)})")
    if got == expected:
        return Verdict(True, reason)
    hint = ""
    if groups > 1 and got == taps * in_channels * out_channels:
        hint = "; that is the ungrouped count: a filter only sees its own group's channels"
    elif got == taps * in_channels * out_channels // (groups * groups):
        hint = "; that divides by G twice: G groups each hold OC/G filters of IC/G channels"
    return Verdict(False, f"{expected} weights, not {got}: {reason}{hint}")


def _feeding_channels(in_channels: int, out_channels: int, groups: int) -> list[frozenset]:
    """For each output channel, the input channels that reach it, from one convolve call
    with one batch entry per one-hot input channel and all-ones 1x1 weights."""
    src = np.eye(in_channels).reshape(in_channels, 1, in_channels)
    weights = np.ones((1, in_channels // groups, out_channels))
    dst = convlab.convolve(src, weights, groups=groups)[:, 0, :]
    return [frozenset(int(c) for c in np.flatnonzero(dst[:, oc] > 0.5))
            for oc in range(out_channels)]


@checker
def check_connected_inputs(answer, *, in_channels: int, out_channels: int, groups: int,
                           output_channel: int) -> Verdict:
    """Exercise: the set of input channels that output channel ``output_channel`` reads."""
    _grouped_problem(in_channels, out_channels, (1,), groups)
    if not 0 <= output_channel < out_channels:
        raise ValueError(f"output_channel={output_channel}: expected 0 <= output_channel < "
                         f"{out_channels}")
    expected = _feeding_channels(in_channels, out_channels, groups)[output_channel]
    got = index_set(answer)
    group = output_channel // (out_channels // groups)
    reason = (f"output channel {output_channel} is in group {group} (OC/G = "
              f"{out_channels // groups} per group), which reads input channels "
              f"{listed(expected)} (IC/G = {in_channels // groups} per group)")
    if got == expected:
        return Verdict(True, reason)
    return Verdict(False, f"not {listed(got)}: {reason}")


__all__ = ["check_connected_inputs", "check_weight_count"]
