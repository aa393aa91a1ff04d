"""Exercises on output sizes, padding, stride and dilation (notebooks 01 to 03).

The right answer is always worked out by the library for the parameters given: output
sizes and resolved pads by :func:`convlab.make_problem`, the positions a window reads by
the kernels themselves (:func:`convlab.viz.windows.windows`, one-hot probes).
"""
from __future__ import annotations

import numpy as np

import convlab
from convlab.viz.exercises.verdict import (
    Verdict,
    checker,
    index_set,
    listed,
    whole_number,
    whole_numbers,
)
from convlab.viz.windows import windows as probe_windows


def _problem_1d(input_length: int, kernel_taps: int, **attributes):
    return convlab.make_problem((1, input_length, 1), np.float32, (kernel_taps, 1, 1),
                                np.float32, **attributes)


def _length_reason(problem) -> str:
    (i,), (k,), (s,), (d,) = (problem.input_shape, problem.kernel_shape, problem.strides,
                              problem.dilations)
    (pb,), (pe,), (o,) = problem.pads_begin, problem.pads_end, problem.output_shape
    span = (k - 1) * d + 1
    return (f"the window spans (K-1)*D + 1 = {span} positions of the padded input "
            f"I + P_b + P_e = {i + pb + pe}, and starts every S = {s}: "
            f"floor(({i + pb + pe} - {span}) / {s}) + 1 = {o}")


@checker
def check_output_length(answer, *, input_length: int, kernel_taps: int, stride: int = 1,
                        dilation: int = 1, pads: tuple[int, int] = (0, 0)) -> Verdict:
    """Exercise: how many outputs a 1-D convolution has (from :func:`convlab.make_problem`)."""
    problem = _problem_1d(input_length, kernel_taps, strides=stride, dilations=dilation,
                          pads_begin=pads[0], pads_end=pads[1])
    got = whole_number(answer)
    expected = problem.output_shape[0]
    if got == expected:
        return Verdict(True, f"{expected} outputs: {_length_reason(problem)}")
    hints = []
    if got == input_length - kernel_taps + 1 and (dilation, stride, pads) != (1, 1, (0, 0)):
        hints.append("I - K + 1 holds only without dilation, stride and pads")
    elif stride > 1 and got == input_length + pads[0] + pads[1] - (kernel_taps - 1) * dilation:
        hints.append("that counts every window start, but only every S-th one is an output")
    padded = input_length + pads[0] + pads[1]
    if stride > 1 and got == -(-(padded - (kernel_taps - 1) * dilation - 1) // stride) + 1:
        hints.append("floor, not ceil: a window that would run past the padded input is "
                     "no output")
    hint = f" ({'; '.join(hints)})" if hints else ""
    return Verdict(False, f"{expected} outputs, not {got}: {_length_reason(problem)}{hint}")


@checker
def check_reads(answer, *, output_index: int, input_length: int, kernel_taps: int,
                stride: int = 1, dilation: int = 1, pads: tuple[int, int] = (0, 0)) -> Verdict:
    """Exercise: which input positions output ``output_index`` of a 1-D convolution reads
    (positions on the zero padding excluded), probed in the kernel."""
    win = probe_windows((input_length,), (kernel_taps,), strides=stride,
                               dilations=dilation, pads_begin=pads[0], pads_end=pads[1])
    outputs = win.output_shape[0]
    if not 0 <= output_index < outputs:
        raise ValueError(f"output_index={output_index}: expected 0 <= output_index < "
                         f"{outputs}")
    got = index_set(answer)
    taps = [int(t) for t in win.reads((output_index,))[:, 0]]
    expected = frozenset(t for t in taps if 0 <= t < input_length)
    formula = (f"tap k reads o*S + k*D - P_b = {output_index}*{stride} + k*{dilation} - "
               f"{pads[0]}: {taps}")
    if got == expected:
        return Verdict(True, f"output {output_index} reads {listed(expected)}: {formula}")
    missing, extra = expected - got, got - expected
    parts = []
    if missing:
        parts.append(f"it also reads {listed(missing)}")
    if extra:
        outside = {e for e in extra if not 0 <= e < input_length}
        parts.append(f"it does not read {listed(extra)}"
                     + (f" ({listed(outside)} are outside the input: zero padding, not "
                        f"read)" if outside else ""))
    return Verdict(False, f"{'; '.join(parts)}. {formula}")


@checker
def check_pads_for_length(answer, *, input_length: int, kernel_taps: int, target: int,
                          stride: int = 1, dilation: int = 1) -> Verdict:
    """Exercise: pads ``(P_b, P_e)`` that give ``target`` outputs (any such pair is right;
    the output size comes from :func:`convlab.make_problem`)."""
    pb, pe = whole_numbers(answer, 2)
    try:
        problem = _problem_1d(input_length, kernel_taps, strides=stride, dilations=dilation,
                              pads_begin=pb, pads_end=pe)
    except ValueError as exc:
        return Verdict(False, f"pads ({pb}, {pe}) are refused by the library: {exc}")
    got = problem.output_shape[0]
    if got == target:
        balance = ("" if abs(pb - pe) <= 1 else
                   f" (an even split such as ({(pb + pe) // 2}, {pb + pe - (pb + pe) // 2}) "
                   f"keeps the output centred)")
        return Verdict(True, f"pads ({pb}, {pe}) give {got} outputs: "
                             f"{_length_reason(problem)}{balance}")
    direction = "more" if got < target else "fewer"
    return Verdict(False, f"pads ({pb}, {pe}) give {got} outputs, not {target}: "
                          f"{_length_reason(problem)}; {direction} pads are needed")


@checker
def check_auto_pads(answer, *, input_length: int, kernel_taps: int, stride: int = 1,
                    dilation: int = 1, auto_pad: str = "same_upper") -> Verdict:
    """Exercise: the pads ``(P_b, P_e)`` that ``auto_pad`` resolves to, as
    :func:`convlab.make_problem` resolves them."""
    problem = _problem_1d(input_length, kernel_taps, strides=stride, dilations=dilation,
                          auto_pad=auto_pad)
    expected = (problem.pads_begin[0], problem.pads_end[0])
    got = whole_numbers(answer, 2)
    total = expected[0] + expected[1]
    reason = (f"{auto_pad} asks for ceil(I / S) = {problem.output_shape[0]} outputs, which "
              f"needs {total} pad(s) in all; {auto_pad} puts the odd one at the "
              f"{'end' if auto_pad == 'same_upper' else 'beginning'}")
    if got == expected:
        return Verdict(True, f"{auto_pad} pads {expected}: {reason}")
    if got == expected[::-1]:
        return Verdict(False, f"{got} is the other 'same' mode; {auto_pad} pads "
                              f"{expected}: {reason}")
    return Verdict(False, f"{auto_pad} pads {expected}, not {got}: {reason}")


@checker
def check_output_shape(answer, *, input_shape: tuple[int, ...], kernel_shape: tuple[int, ...],
                       strides=None, dilations=None, pads_begin=None,
                       pads_end=None) -> Verdict:
    """Exercise: the spatial output shape of an N-D convolution (from
    :func:`convlab.make_problem`), axis by axis."""
    rank = len(input_shape)
    problem = convlab.make_problem((1, *input_shape, 1), np.float32, (*kernel_shape, 1, 1),
                                   np.float32, strides=strides, dilations=dilations,
                                   pads_begin=pads_begin, pads_end=pads_end)
    got = whole_numbers(answer, rank)
    expected = tuple(problem.output_shape)
    if got == expected:
        return Verdict(True, f"output shape {expected}")
    axes = []
    for a in range(rank):
        if got[a] == expected[a]:
            continue
        i, k, s, d = (problem.input_shape[a], problem.kernel_shape[a], problem.strides[a],
                      problem.dilations[a])
        pb, pe = problem.pads_begin[a], problem.pads_end[a]
        span = (k - 1) * d + 1
        axes.append(f"axis {a}: {expected[a]}, not {got[a]} (the dilated kernel spans "
                    f"({k}-1)*{d} + 1 = {span}; floor(({i} + {pb} + {pe} - {span}) / {s}) "
                    f"+ 1 = {expected[a]})")
    return Verdict(False, f"output shape {expected}, not {got}: " + "; ".join(axes))


def _fields(input_length: int, layers: list[dict]) -> np.ndarray:
    """bool (input, final output): the final output reads the input through some path."""
    values = np.eye(input_length).reshape(input_length, input_length, 1)
    for layer in layers:
        weights = np.ones((layer["kernel"], 1, 1))
        values = convlab.convolve(values, weights, strides=layer.get("stride", 1),
                                  dilations=layer.get("dilation", 1))
    return values[:, :, 0] > 0.5


@checker
def check_tiling_stride(answer, *, first: dict, second_kernel: int,
                        input_length: int = 48) -> Verdict:
    """Exercise: the stride of a second layer (kernel ``second_kernel``) on top of
    ``first`` (``{"kernel": K, "stride": S, "dilation": D}``) with which the final
    outputs' receptive fields tile the input: every input position up to the last field's
    end is read by exactly one final output. Measured by pushing one-hot inputs through
    both layers with :func:`convlab.convolve`."""
    stride = whole_number(answer, "stride")
    if stride < 1:
        return Verdict(False, f"stride={stride}: a stride is at least 1")
    if stride >= input_length:
        return Verdict(False, f"stride={stride}: with {input_length} inputs the second layer "
                              f"would have at most one output; the stride is too large")
    fields = _fields(input_length, [first, {"kernel": second_kernel, "stride": stride}])
    if fields.shape[1] < 2:
        return Verdict(False, f"with stride {stride} only one final output fits in "
                              f"{input_length} inputs, so its neighbour's field starts too "
                              f"far away: the stride is too large")
    counts = fields.sum(axis=1)
    covered = np.flatnonzero(counts)
    last = int(covered[-1]) if covered.size else -1
    inside = counts[:last + 1]
    overlap = np.flatnonzero(inside > 1)
    skipped = np.flatnonzero(inside == 0)
    if overlap.size == 0 and skipped.size == 0:
        return Verdict(True, f"with stride {stride} every input position 0..{last} is read "
                             f"by exactly one final output: the fields tile the input")
    parts = []
    if overlap.size:
        parts.append(f"{overlap.size} input positions (first {overlap[:4].tolist()}) are read "
                     f"by {int(inside.max())} outputs: the fields overlap, the stride is too "
                     f"small")
    if skipped.size:
        parts.append(f"{skipped.size} positions (first {skipped[:4].tolist()}) are read by "
                     f"no output: the fields leave gaps, the stride is too large")
    return Verdict(False, f"with stride {stride}, " + "; ".join(parts))


__all__ = ["check_auto_pads", "check_output_length",
           "check_output_shape", "check_pads_for_length", "check_reads",
           "check_tiling_stride"]
