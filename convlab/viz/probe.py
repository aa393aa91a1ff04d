"""One-hot probes: ask the convolution kernels themselves which elements they combine.

A convolution is linear in src and in weights. Feeding it a one-hot src (a single 1,
zeros elsewhere) and one-hot weights (a single tap set to 1) therefore produces 1
exactly where an output reads that src element through that tap, and 0 elsewhere. One
call with one batch entry per src position and one output channel per tap answers
the question for every position and tap at once.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

import convlab


def tap_hits(input_shape: Sequence[int], kernel_shape: Sequence[int], *, strides=None,
             dilations=None, pads_begin=None, pads_end=None, auto_pad="none",
             data_dilations=None, padding_mode: str = "zeros",
             algorithm: str = "direct") -> np.ndarray:
    """Which src element each output reads through each tap, as the kernel computes it.

    ``data_dilations`` and ``padding_mode`` are those of :func:`convlab.convolve`: a tap
    on an inserted zero hits no ``i``, and a tap on a pad that another mode than "zeros"
    fills hits the src element the pad copies.

    Returns
    -------
    numpy.ndarray of bool, shape ``(*I, *O, *K)``
        ``hits[i, o, k]`` is True where ``dst[o]`` takes ``src[i] * weights[k]``, that is
        where ``i == o*S + k*D - P_b`` and ``i`` lies inside the input
        (docs/specification.md §1.1).
        Taps that fall on zero padding hit no ``i``.
    """
    input_shape, kernel_shape = tuple(input_shape), tuple(kernel_shape)
    positions, taps = math.prod(input_shape), math.prod(kernel_shape)
    # Batch entry n is one-hot at flat src position n; output channel j has weights
    # one-hot at flat tap j. float32 holds 0 and 1 exactly, so the comparison is exact.
    src = np.eye(positions, dtype=np.float32).reshape(positions, *input_shape, 1)
    weights = np.eye(taps, dtype=np.float32).reshape(*kernel_shape, 1, taps)
    dst = convlab.convolve(src, weights, strides=strides, dilations=dilations,
                           pads_begin=pads_begin, pads_end=pads_end, auto_pad=auto_pad,
                           data_dilations=data_dilations, padding_mode=padding_mode,
                           algorithm=algorithm)
    output_shape = dst.shape[1:-1]
    # Exact algorithms give exactly 0 or 1; transform-based ones (Winograd) may be off in
    # the last bits, which must not turn a 0 into a tap. Anything far from 0 and 1 means
    # the algorithm is wrong, and a figure drawn from it would be too.
    if not np.all(np.abs(dst - np.rint(dst)) < 1e-3) or dst.min() < -1e-3 or dst.max() > 1.001:
        raise RuntimeError(f"algorithm={algorithm!r} returned values other than 0 and 1 for "
                           f"one-hot src and weights")
    return dst.reshape(*input_shape, *output_shape, *kernel_shape) > 0.5


def path_counts(input_shape: Sequence[int], layers: Sequence[dict], output_index: tuple[int, ...],
                algorithm: str = "direct") -> np.ndarray:
    """How many paths lead from each src position to one final output through ``layers``.

    Each layer is a single-channel convolution with all-ones weights, given as a dict of
    :func:`convlab.convolve` keywords plus ``kernel``. Since every weight is 1, the final
    output for a one-hot src at ``i`` counts the chains of taps that connect ``i`` to it;
    it is positive exactly on the receptive field.
    """
    input_shape = tuple(input_shape)
    positions = math.prod(input_shape)
    # float64: counts grow like prod(K) per layer and must stay exact integers.
    values = np.eye(positions, dtype=np.float64).reshape(positions, *input_shape, 1)
    for layer in layers:
        attributes = {key: value for key, value in layer.items() if key != "kernel"}
        weights = np.ones((*layer["kernel"], 1, 1), dtype=np.float64)
        values = convlab.convolve(values, weights, algorithm=algorithm, **attributes)
    final = values[(slice(None), *output_index, 0)]
    return np.rint(final).astype(np.int64).reshape(input_shape)
