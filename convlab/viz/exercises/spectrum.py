"""Exercises on the convolution theorem (notebook 09).

Each check runs the reader's answer against the library (the ``fft`` strategy's stages in
:mod:`convlab.viz.spectrum`, the float64 :func:`convlab.reference.convolve`), prints
*right* or *wrong* with the reason it found, and returns a :class:`Verdict`. Nothing is
compared with a stored answer: the checks compute what is right for the parameters given.
"""
from __future__ import annotations

import numbers
from collections.abc import Callable

import numpy as np

import convlab
from convlab.viz.exercises.verdict import Verdict, report as _report
from convlab.viz.spectrum import convolution_theorem

# Relative tolerance of the checks: float64 transforms of these sizes round to ~1e-15.
TOLERANCE = 1e-9


def _wrong_outputs(got: np.ndarray, expected: np.ndarray) -> np.ndarray:
    scale = max(float(np.abs(expected).max()), 1.0)
    return np.flatnonzero(np.abs(got - expected) > TOLERANCE * scale)


def _ranges(indices: np.ndarray) -> str:
    """'3..7, 12' for [3, 4, 5, 6, 7, 12]."""
    parts, start = [], None
    for i, value in enumerate(indices):
        if start is None:
            start = value
        if i + 1 == len(indices) or indices[i + 1] != value + 1:
            parts.append(str(start) if start == value else f"{start}..{value}")
            start = None
    return ", ".join(parts)


def _exact_with(length: int, src: np.ndarray, kernel: np.ndarray) -> tuple[bool, np.ndarray]:
    stages = convolution_theorem(src, kernel, fft_shape=(length,))
    wrong = _wrong_outputs(stages.dst, stages.reference)
    return wrong.size == 0, wrong


def check_transform_length(length, *, input_length: int = 50, kernel_taps: int = 11,
                           seed: int = 0) -> Verdict:
    """Exercise: the shortest transform length L with which ONE tile gives every output of
    a 'valid' 1-D cross-correlation (no pads, stride 1) of ``input_length`` points with a
    ``kernel_taps``-tap kernel exactly.

    The answer is run through the theorem (:func:`convlab.viz.spectrum.convolution_theorem`
    with ``fft_shape=(length,)``) on random data and compared with the reference; a length
    whose outputs are all exact is right only if no shorter one is.
    """
    if length is None:
        return _report(Verdict(False, "no answer yet: set the length and run the cell again"))
    if isinstance(length, bool) or not isinstance(length, numbers.Integral):
        return _report(Verdict(False, f"length={length!r}: expected a whole number of points"))
    length = int(length)
    if input_length < kernel_taps or kernel_taps < 1:
        raise ValueError(f"input_length={input_length}, kernel_taps={kernel_taps}: expected "
                         f"1 <= kernel_taps <= input_length")
    outputs = input_length - kernel_taps + 1
    if length < kernel_taps:
        return _report(Verdict(False, f"L={length} is shorter than the kernel "
                                      f"({kernel_taps} taps): the kernel itself does not "
                                      f"fit in the tile"))
    rng = np.random.default_rng(seed)
    src = rng.standard_normal(input_length)
    kernel = rng.standard_normal(kernel_taps)
    exact, wrong = _exact_with(length, src, kernel)
    if not exact:
        return _report(Verdict(False, (
            f"with L={length}, {wrong.size} of the {outputs} outputs are wrong (outputs "
            f"{_ranges(wrong)}): their windows run past the tile's end and wrap around onto "
            f"its start, or input positions L apart fold onto each other")))
    shortest = next(n for n in range(kernel_taps, length + 1)
                    if _exact_with(n, src, kernel)[0])
    if shortest < length:
        return _report(Verdict(False, (
            f"every output is exact with L={length}, but L={shortest} already is: the "
            f"outputs that would wrap around are the ones a 'valid' correlation throws "
            f"away, so no extra room (such as K - 1 zeros) is needed")))
    return _report(Verdict(True, (
        f"L={length} gives all {outputs} outputs exactly, and with L={length - 1} some wrap "
        f"around: the last output reads positions {outputs - 1}..{input_length - 1}, so the "
        f"tile must hold the whole input")))


# (input length, kernel taps) pairs the correlation exercise is checked on
CORRELATION_CASES = ((16, 3), (50, 11), (33, 33), (64, 1), (31, 8))


def check_correlation(function: Callable, *, seed: int = 0) -> Verdict:
    """Exercise: ``function(x, k)`` returns the 'valid' cross-correlation
    ``y[i] = sum_j x[i + j] k[j]`` of 1-D float64 arrays, ``len(x) - len(k) + 1`` values,
    computed through the convolution theorem.

    Checked against :func:`convlab.reference.convolve` on several lengths; a wrong answer
    is diagnosed (a convolution instead of a correlation, a wrong output count, complex
    output, wrap-around at the edges).
    """
    if function is None:
        return _report(Verdict(False, "no answer yet: write the function and run the cell "
                                      "again"))
    if not callable(function):
        return _report(Verdict(False, f"{function!r} is not a function; expected "
                                      f"function(x, k) -> array"))
    rng = np.random.default_rng(seed)
    for size, taps in CORRELATION_CASES:
        x = rng.standard_normal(size)
        k = rng.standard_normal(taps)
        case = f"len(x)={size}, len(k)={taps}"
        expected = convlab.reference.convolve(x[None, :, None], k[:, None, None])[0, :, 0]
        try:
            got = function(x.copy(), k.copy())
        except Exception as exc:  # the reader's code: report whatever it raised
            return _report(Verdict(False, f"{case}: raised {type(exc).__name__}: {exc}"))
        if got is None:
            return _report(Verdict(False, f"{case}: returned None; expected an array"))
        got = np.asarray(got)
        if got.shape != expected.shape:
            return _report(Verdict(False, (
                f"{case}: returned shape {got.shape}; expected ({expected.size},): "
                f"len(x) - len(k) + 1 'valid' outputs, the window inside x")))
        if np.iscomplexobj(got):
            if np.abs(got.imag).max() > TOLERANCE * max(float(np.abs(expected).max()), 1.0):
                return _report(Verdict(False, f"{case}: returned complex values with "
                                              f"non-zero imaginary parts"))
            got = got.real
        wrong = _wrong_outputs(got, expected)
        if wrong.size == 0:
            continue
        flipped = np.convolve(x, k, mode="valid")
        if taps > 1 and _wrong_outputs(got, flipped).size == 0:
            return _report(Verdict(False, (
                f"{case}: this is the convolution (kernel flipped), not the correlation: "
                f"multiply by the conjugate of the kernel's spectrum, or reverse the kernel")))
        return _report(Verdict(False, (
            f"{case}: outputs {_ranges(wrong)} of {expected.size} differ from the reference "
            f"(largest difference {float(np.abs(got - expected).max()):.2g})"
            + ("; they sit at the edges, where a transform shorter than the input wraps "
               "around" if wrong[0] == 0 or wrong[-1] == expected.size - 1 else ""))))
    lengths = ", ".join(str(size) for size, _ in CORRELATION_CASES)
    return _report(Verdict(True, f"matches the reference on {len(CORRELATION_CASES)} cases "
                                 f"(input lengths {lengths})"))
