"""The float64 oracle, written straight from docs/specification.md §1.1.

    dst[n, g*OCg + oc, o...] = bias[g*OCg + oc]
        + sum over ic < ICg, k... of
          src[n, g*ICg + ic, o*S + k*D - P_b] * weights[g*OCg + oc, ic, k...]

Reads outside the input are zero. Nothing here is tuned for speed: every other
algorithm is tested against this one, and the first tutorial rebuilds it by hand.

The extensions (docs/specification.md §2.5, §2.6, §3.4, §4) are written out just as
literally: data dilation stretches src with zeros, a ``padding_mode`` maps each padded
position back to a src position, 8-bit problems are summed exactly in int64 and wrapped to
int32, and the post-ops are their textbook formulas, applied in float64 for floating
problems and in float32 (as §4.1 orders) for 8-bit ones.
"""
from __future__ import annotations

import itertools

import numpy as np

from convlab.problem import params


def zero_padded(src: np.ndarray, pads_begin, pads_end) -> np.ndarray:
    """src (N, C, I...) placed in zeros of extent I + P_b + P_e; negative pads crop."""
    n, c, *extents = src.shape
    padded_shape = [i + pb + pe for i, pb, pe in zip(extents, pads_begin, pads_end)]
    padded = np.zeros((n, c, *padded_shape), dtype=src.dtype)
    target, source = [slice(None), slice(None)], [slice(None), slice(None)]
    for i, pb, pe in zip(extents, pads_begin, pads_end):
        # padded index j holds src index j - P_b whenever 0 <= j - P_b < I
        first = max(0, -pb)
        # max(): when the pads crop the whole axis, last + pb would go negative and the
        # target slice would wrap around instead of being empty
        last = max(first, min(i, i + pe))
        source.append(slice(first, last))
        target.append(slice(first + pb, last + pb))
    padded[tuple(target)] = src[tuple(source)]
    return padded


def data_dilated(src: np.ndarray, data_dilations) -> np.ndarray:
    """src (N, C, I...) with L - 1 zeros between neighbours: extent L * (I - 1) + 1."""
    n, c, *extents = src.shape
    stretched = np.zeros(
        (n, c, *(step * (i - 1) + 1 for step, i in zip(data_dilations, extents))),
        dtype=src.dtype)
    every_step = tuple(slice(None, None, step) for step in data_dilations)
    stretched[(slice(None), slice(None), *every_step)] = src
    return stretched


def mode_padded(src: np.ndarray, pads_begin, pads_end, padding_mode) -> np.ndarray:
    """src (N, C, I...) padded by ``padding_mode``: padded position j reads src position
    map(j - P_b), where map reflects (without repeating the edge), clamps (replicate) or
    wraps (circular). Negative pads crop, since then j - P_b never leaves [0, I)."""
    for axis, (pb, pe) in enumerate(zip(pads_begin, pads_end)):
        i = src.shape[2 + axis]
        index = np.arange(i + pb + pe) - pb
        if padding_mode == "reflect":
            index = np.where(index < 0, -index, index)
            index = np.where(index >= i, 2 * (i - 1) - index, index)
        elif padding_mode == "replicate":
            index = np.clip(index, 0, i - 1)
        elif padding_mode == "circular":
            index = index % i
        else:
            raise ValueError(f"padding_mode={padding_mode!r} is not a mode this maps")
        src = np.take(src, index, axis=2 + axis)
    return src


def correlate(src, weights, bias, strides, dilations, pads_begin, pads_end, groups,
              dtype=np.float64):
    """Grouped N-D cross-correlation on NCX src and OIX weights, in ``dtype`` (float64, or
    int64 for exact integer sums)."""
    src = np.asarray(src, dtype=dtype)
    weights = np.asarray(weights, dtype=dtype)
    n, ic = src.shape[:2]
    oc, icg, *kernel = weights.shape
    ocg = oc // groups
    padded = zero_padded(src, pads_begin, pads_end)
    out_extents = [params.output_extent(i, k, s, d, pb, pe) for i, k, s, d, pb, pe in
                   zip(src.shape[2:], kernel, strides, dilations, pads_begin, pads_end)]
    dst = np.zeros((n, oc, *out_extents), dtype=dtype)
    for k in itertools.product(*(range(extent) for extent in kernel)):
        # the input positions o*S + k*D (in padded coordinates) for every output o
        window = tuple(slice(kk * d, kk * d + (o - 1) * s + 1, s)
                       for kk, d, s, o in zip(k, dilations, strides, out_extents))
        for g in range(groups):
            taps = padded[(slice(None), slice(g * icg, (g + 1) * icg)) + window]
            w = weights[(slice(g * ocg, (g + 1) * ocg), slice(None)) + k]
            dst[:, g * ocg:(g + 1) * ocg] += np.einsum("nc...,oc->no...", taps, w)
    if bias is not None:
        dst += np.asarray(bias, dtype=dtype).reshape((1, oc) + (1,) * len(kernel))
    return dst


def correlate_nxc_int64(problem, src, weights) -> np.ndarray:
    """Exact int64 sums for canonical (materialised, zero-point-shifted) src and weights:
    the runtime ``algorithm="reference"`` of 8-bit problems. Returns (N, O..., OC)."""
    r = problem.rank
    w = np.asarray(weights).transpose(0, r + 2, r + 1, *range(1, r + 1)).reshape(
        problem.out_channels, problem.in_channels_per_group, *problem.kernel_shape)
    dst = correlate(np.moveaxis(src, -1, 1), w, None, problem.strides, problem.dilations,
                    problem.pads_begin, problem.pads_end, problem.groups, dtype=np.int64)
    return np.moveaxis(dst, 1, -1)


# --------------------------------------------------------------------------- post-ops

def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def eltwise(name, x, parameters):
    """docs/specification.md §4.2 eltwise post-ops, from their definitions."""
    from scipy.special import erf

    p = parameters
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        formulas = {
            "relu": lambda: np.where(x > 0, x, p[0] * x),
            "tanh": lambda: np.tanh(x),
            "sigmoid": lambda: _sigmoid(x),
            "elu": lambda: np.where(x > 0, x, p[0] * (np.exp(x) - 1)),
            "gelu_erf": lambda: 0.5 * x * (1 + erf(x / np.sqrt(2))),
            "gelu_tanh": lambda: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi)
                                                        * (x + 0.044715 * x ** 3))),
            "swish": lambda: x * _sigmoid(p[0] * x),
            "clip": lambda: np.minimum(np.maximum(x, p[0]), p[1]),
            "linear": lambda: p[0] * x + p[1],
            "abs": lambda: np.abs(x),
            "square": lambda: x * x,
            "exp": lambda: np.exp(x),
            "log": lambda: np.log(x),
        }
        return formulas[name]().astype(x.dtype)


def apply_post_ops(dst, ops, dst_before=None):
    """``ops`` (parsed by :func:`convlab.ops.postops.parse` against NCX dst) on NCX ``dst``."""
    for op in ops:
        if op.kind == "eltwise":
            dst = eltwise(op.name, dst, op.parameters)
        elif op.kind == "sum":
            dst = dst + dst.dtype.type(op.parameters[0]) * np.asarray(dst_before, dst.dtype)
        else:
            operand = np.moveaxis(op.operand, -1, 1).astype(dst.dtype)
            dst = {"add": np.add, "mul": np.multiply, "max": np.maximum,
                   "min": np.minimum}[op.name](dst, operand)
    return dst


def convolve(src, weights, bias=None, *, strides=None, pads_begin=None, pads_end=None,
             dilations=None, auto_pad="none", groups=1, data_format="NXC",
             weights_format="XIO", data_dilations=None, padding_mode="zeros",
             src_zero_point=None, weights_zero_point=None, output_scale=None,
             dst_zero_point=None, dst_dtype=None, post_ops=None,
             dst_before=None) -> np.ndarray:
    """The oracle with ``convlab.convolve``'s attributes.

    Floating inputs: computed in float64 whatever their dtype, returned as float64.
    8-bit integer inputs: the exact int64 sum wrapped to int32, then (when asked for) the
    float32 stage of docs/specification.md §3.4, returned in the problem's dst dtype, as
    ``convolve`` does.
    ``dst_before`` stands for the prior contents of ``out`` that a "sum" post-op adds.
    Inputs are validated exactly as ``convolve`` validates them.
    """
    from convlab.ops import _quantized as quantized, postops

    src = params.as_array("src", src)
    weights = params.as_array("weights", weights)
    bias = None if bias is None else params.as_array("bias", bias)
    problem = params.make_problem(
        src.shape, src.dtype, weights.shape, weights.dtype,
        None if bias is None else bias.shape, None if bias is None else bias.dtype,
        strides=strides, pads_begin=pads_begin, pads_end=pads_end, dilations=dilations,
        auto_pad=auto_pad, groups=groups, data_format=data_format,
        weights_format=weights_format, data_dilations=data_dilations,
        padding_mode=padding_mode, dst_dtype=dst_dtype)
    q = quantized.parse(problem, src.dtype, weights.dtype, bias,
                        src_zero_point=src_zero_point, weights_zero_point=weights_zero_point,
                        output_scale=output_scale, dst_zero_point=dst_zero_point)
    ops = postops.parse(post_ops, problem, out=dst_before)
    src_ncx = src if problem.data_format == "NCX" else np.moveaxis(src, -1, 1)
    weights_oix = weights if problem.weights_format == "OIX" else \
        np.moveaxis(weights, (-1, -2), (0, 1))
    if dst_before is not None:
        dst_before = np.asarray(dst_before)
        if problem.data_format == "NXC":
            dst_before = np.moveaxis(dst_before, -1, 1)
    if q is None:
        src_ncx = np.asarray(src_ncx, dtype=np.float64)
        bias64 = None if bias is None else np.asarray(bias, np.float64)
        dst = _correlate_extended(src_ncx, weights_oix, bias64, problem, np.float64)
        dst = apply_post_ops(dst, ops, dst_before)
    else:
        dst = _quantized(src_ncx, weights_oix, bias, problem, q, ops, dst_before)
    return dst if problem.data_format == "NCX" else np.moveaxis(dst, 1, -1)


def _correlate_extended(src_ncx, weights_oix, bias, problem, dtype):
    """Data dilation, then the padding mode, then the plain correlation
    (docs/specification.md §2.5, §2.6, §1.1)."""
    pads_begin, pads_end = problem.pads_begin, problem.pads_end
    if problem.data_dilations is not None:
        src_ncx = data_dilated(src_ncx, problem.data_dilations)
    if problem.padding_mode != "zeros":
        src_ncx = mode_padded(src_ncx, *problem.materialized_pads, problem.padding_mode)
    return correlate(src_ncx, weights_oix, bias, problem.strides, problem.dilations,
                     pads_begin, pads_end, problem.groups, dtype=dtype)


def _quantized(src_ncx, weights_oix, bias, problem, q, ops, dst_before):
    """docs/specification.md §3.4 for 8-bit inputs, one element at a time, in §4.1's order."""
    r = problem.rank
    zs = q.src_zero_point.astype(np.int64)
    zw = q.weights_zero_point.astype(np.int64)
    s = np.asarray(src_ncx, np.int64) - (zs.reshape(1, -1, *(1,) * r) if zs.ndim else zs)
    w = np.asarray(weights_oix, np.int64) - (zw.reshape(-1, 1, *(1,) * r) if zw.ndim else zw)
    total = _correlate_extended(s, w, None, problem, np.int64)
    per_channel = (1, -1) + (1,) * r
    if q.int_bias is not None:
        total = total + q.int_bias.astype(np.int64).reshape(per_channel)
    acc = ((total + 2**31) % 2**32 - 2**31).astype(np.int32)
    out_dtype = problem.output_dtype
    if not (ops or q.requant.active or out_dtype != np.int32):
        return acc
    y = acc.astype(np.float32)
    rq = q.requant
    if rq.output_scale is not None:
        y = y * rq.output_scale.reshape(per_channel if rq.output_scale.ndim else ())
    if rq.float_bias is not None:
        y = y + rq.float_bias.reshape(per_channel)
    y = apply_post_ops(y.astype(np.float32), ops, dst_before)
    if rq.dst_zero_point is not None:
        y = y + rq.dst_zero_point.reshape(per_channel if rq.dst_zero_point.ndim else ())
    if out_dtype.kind == "f":
        return y.astype(out_dtype)
    info = np.iinfo(out_dtype)
    return np.clip(np.rint(y.astype(np.float64)), info.min, info.max).astype(out_dtype)
