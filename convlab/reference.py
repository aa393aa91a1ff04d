"""The float64 oracle, written straight from SPEC §1.

    dst[n, g*OCg + oc, o...] = bias[g*OCg + oc]
        + sum over ic < ICg, k... of
          src[n, g*ICg + ic, o*S + k*D - P_b] * weights[g*OCg + oc, ic, k...]

Reads outside the input are zero. Nothing here is tuned for speed: every other
algorithm is tested against this one, and the first tutorial rebuilds it by hand.
"""
from __future__ import annotations

import itertools

import numpy as np

from convlab import params


def zero_padded(src: np.ndarray, pads_begin, pads_end) -> np.ndarray:
    """src (N, C, I...) placed in zeros of extent I + P_b + P_e; negative pads crop."""
    n, c, *extents = src.shape
    padded_shape = [i + pb + pe for i, pb, pe in zip(extents, pads_begin, pads_end)]
    padded = np.zeros((n, c, *padded_shape), dtype=np.float64)
    target, source = [slice(None), slice(None)], [slice(None), slice(None)]
    for i, pb, pe in zip(extents, pads_begin, pads_end):
        # padded index j holds src index j - P_b whenever 0 <= j - P_b < I
        first = max(0, -pb)
        last = min(i, i + pe)
        source.append(slice(first, last))
        target.append(slice(first + pb, last + pb))
    padded[tuple(target)] = src[tuple(source)]
    return padded


def correlate(src, weights, bias, strides, dilations, pads_begin, pads_end, groups):
    """Grouped N-D cross-correlation on NCX src and OIX weights, in float64."""
    src = np.asarray(src, dtype=np.float64)
    weights = np.asarray(weights, dtype=np.float64)
    n, ic = src.shape[:2]
    oc, icg, *kernel = weights.shape
    ocg = oc // groups
    padded = zero_padded(src, pads_begin, pads_end)
    out_extents = [params.output_extent(i, k, s, d, pb, pe) for i, k, s, d, pb, pe in
                   zip(src.shape[2:], kernel, strides, dilations, pads_begin, pads_end)]
    dst = np.zeros((n, oc, *out_extents), dtype=np.float64)
    for k in itertools.product(*(range(extent) for extent in kernel)):
        # the input positions o*S + k*D (in padded coordinates) for every output o
        window = tuple(slice(kk * d, kk * d + (o - 1) * s + 1, s)
                       for kk, d, s, o in zip(k, dilations, strides, out_extents))
        for g in range(groups):
            taps = padded[(slice(None), slice(g * icg, (g + 1) * icg)) + window]
            w = weights[(slice(g * ocg, (g + 1) * ocg), slice(None)) + k]
            dst[:, g * ocg:(g + 1) * ocg] += np.einsum("nc...,oc->no...", taps, w)
    if bias is not None:
        dst += np.asarray(bias, dtype=np.float64).reshape((1, oc) + (1,) * len(kernel))
    return dst


def convolve(src, weights, bias=None, *, strides=None, pads_begin=None, pads_end=None,
             dilations=None, auto_pad="none", groups=1, data_format="NXC",
             weights_format="XIO") -> np.ndarray:
    """The oracle with ``convlab.convolve``'s attributes; always returns float64.

    Inputs are validated exactly as ``convolve`` validates them, then computed in
    float64 whatever their dtype.
    """
    src = params.as_array("src", src)
    weights = params.as_array("weights", weights)
    bias = None if bias is None else params.as_array("bias", bias)
    problem = params.make_problem(
        src.shape, src.dtype, weights.shape, weights.dtype,
        None if bias is None else bias.shape, None if bias is None else bias.dtype,
        strides=strides, pads_begin=pads_begin, pads_end=pads_end, dilations=dilations,
        auto_pad=auto_pad, groups=groups, data_format=data_format,
        weights_format=weights_format)
    src_ncx = src if problem.data_format == "NCX" else np.moveaxis(src, -1, 1)
    weights_oix = weights if problem.weights_format == "OIX" else \
        np.moveaxis(weights, (-1, -2), (0, 1))
    dst = correlate(src_ncx, weights_oix, bias, problem.strides, problem.dilations,
                    problem.pads_begin, problem.pads_end, problem.groups)
    return dst if problem.data_format == "NCX" else np.moveaxis(dst, 1, -1)
