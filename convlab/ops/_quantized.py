"""8-bit integer convolution as ONNX ConvInteger and QLinearConv (docs/specification.md §3.4).

    acc[n, oc, o] = sum over in-bounds taps of
                        (src - src_zero_point) * (weights - weights_zero_point)
                    (+ an integer bias), accumulated in int32 (modulo 2**32)
    dst = saturate(round_half_even(post_ops(acc * output_scale + float_bias) + dst_zero_point))

Padding (and data dilation) contributes zero after the src zero point is subtracted, i.e.
pads hold the zero point. The float stage is float32 and runs only when something asks
for it (a scale, a dst zero point, a floating bias, post-ops or a dst_dtype other than
int32); otherwise the int32 accumulator is the result.

This module validates the quantization arguments and shifts src and weights by their zero
points; the algorithms that accumulate (``direct``, ``im2col``, ``reference``) are those of
the 8-bit registry (:mod:`convlab.strategies.int8`), chosen as the forward ones are
(``"tune"`` is ``"auto"`` there).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from convlab.ops import postops
from convlab.problem import params
from convlab.problem.params import ConvProblem


@dataclass(frozen=True)
class Quantization:
    """Validated quantization arguments; arrays are scalars () or per channel."""

    src_zero_point: np.ndarray      # int16, () or (IC,)
    weights_zero_point: np.ndarray  # int32, () or (OC,)
    requant: postops.Requantization
    int_bias: np.ndarray | None  # int32 (OC,), added to the accumulator


def _zero_point(name, value, channels, what, lo, hi) -> np.ndarray:
    array = np.asarray(value)
    if array.dtype.kind not in "iu" or array.dtype == np.bool_:
        raise TypeError(f"{name}={value!r} has dtype {array.dtype}; expected integers "
                        f"(a scalar or one per {what} channel)")
    if array.ndim > 1 or (array.ndim == 1 and array.shape[0] not in (1, channels)):
        raise ValueError(f"{name} has shape {array.shape}; expected a scalar or "
                         f"({channels},) ({what})")
    if array.size and (array.min() < lo or array.max() > hi):
        raise ValueError(f"{name}={value!r} is outside [{lo}, {hi}], the range of the "
                         f"tensor it belongs to")
    return array.reshape(-1) if array.ndim == 1 and array.shape[0] == channels else \
        array.reshape(())


def _range(dtype) -> tuple:
    info = np.iinfo(dtype)
    return int(info.min), int(info.max)


def parse(problem: ConvProblem, src_dtype, weights_dtype, bias, *, src_zero_point=None,
          weights_zero_point=None, output_scale=None, dst_zero_point=None) -> Quantization | None:
    """Validate the quantization keywords; None for a floating problem (where they are refused)."""
    given = dict(src_zero_point=src_zero_point, weights_zero_point=weights_zero_point,
                 output_scale=output_scale, dst_zero_point=dst_zero_point)
    if not problem.is_quantized:
        for name, value in given.items():
            if value is not None:
                raise ValueError(f"{name}={value!r} applies to 8-bit integer src and "
                                 f"weights; these are {np.dtype(src_dtype)} and "
                                 f"{np.dtype(weights_dtype)}")
        return None
    ic, oc = problem.in_channels, problem.out_channels
    zs = _zero_point("src_zero_point", 0 if src_zero_point is None else src_zero_point, ic,
                     "IC, src", *_range(src_dtype)).astype(np.int16)
    zw = _zero_point("weights_zero_point",
                     0 if weights_zero_point is None else weights_zero_point, oc,
                     "OC, weights", *_range(weights_dtype)).astype(np.int32)
    out_dtype = problem.output_dtype
    dst_range = _range(out_dtype) if out_dtype.kind in "iu" else _range(np.int32)
    zd = None
    if dst_zero_point is not None:
        zd = _zero_point("dst_zero_point", dst_zero_point, oc, "OC, dst",
                         *dst_range).astype(np.float32)
    scale = None
    if output_scale is not None:
        scale = np.asarray(output_scale)
        if scale.dtype.kind not in "fiu" or scale.dtype == np.bool_:
            raise TypeError(f"output_scale={output_scale!r} has dtype {scale.dtype}; "
                            f"expected real numbers (a scalar or one per OC)")
        if scale.ndim > 1 or (scale.ndim == 1 and scale.shape[0] not in (1, oc)):
            raise ValueError(f"output_scale has shape {scale.shape}; expected a scalar or "
                             f"({oc},) (OC)")
        scale = scale.astype(np.float32)
        if not np.isfinite(scale).all():
            raise ValueError(f"output_scale={output_scale!r} must be finite")
        scale = scale.reshape(-1) if scale.ndim == 1 and scale.shape[0] == oc else \
            scale.reshape(())
    int_bias = float_bias = None
    if bias is not None:
        bias = np.asarray(bias)
        if bias.dtype.kind in "iu":
            if bias.size and (bias.min() < -2**31 or bias.max() > 2**31 - 1):
                raise ValueError("bias holds values outside int32; an integer bias is "
                                 "added to the int32 accumulator")
            int_bias = np.ascontiguousarray(bias, dtype=np.int32)
        else:
            float_bias = np.ascontiguousarray(bias, dtype=np.float32)
    requant = postops.Requantization(scale, float_bias, zd)
    return Quantization(zs, zw, requant, int_bias)


def shifted_src(src: np.ndarray, problem: ConvProblem, q: Quantization) -> np.ndarray:
    """Canonical src minus its zero point, int16, materialised (dilation, padding mode)."""
    if problem.data_format == "NCX":
        src = src.transpose(params.channels_last_axes(src.ndim))
    shifted = src.astype(np.int16)
    shifted -= q.src_zero_point  # per IC broadcasts along the last (channel) axis
    return params.materialize(shifted, problem)


def shifted_weights(weights: np.ndarray, problem: ConvProblem, q: Quantization) -> np.ndarray:
    """Canonical (G, K..., ICg, OCg) weights minus their zero point, int16."""
    canonical = params.canonical_weights(weights, problem)  # int32 (problem.dtype)
    zw = q.weights_zero_point
    if zw.ndim == 1:
        zw = zw.reshape(problem.groups, *(1,) * (problem.rank + 1),
                        problem.out_channels_per_group)
    return (canonical - zw).astype(np.int16)
