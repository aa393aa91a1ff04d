"""8-bit integer convolution as ONNX ConvInteger and QLinearConv (docs/specification.md §3.4).

    acc[n, oc, o] = sum over in-bounds taps of
                        (src - src_zero_point) * (weights - weights_zero_point)
                    (+ an integer bias), accumulated in int32 (modulo 2**32)
    dst = saturate(round_half_even(post_ops(acc * output_scale + float_bias) + dst_zero_point))

Padding (and data dilation) contributes zero after the src zero point is subtracted, i.e.
pads hold the zero point. The float stage is float32 and runs only when something asks
for it (a scale, a dst zero point, a floating bias, post-ops or a dst_dtype other than
int32); otherwise the int32 accumulator is the result.

Three paths, chosen with ``algorithm=``:

* ``"direct"``: :mod:`convlab.strategies.kernels._int8`, int16 operands, wrapping 32-bit
  accumulation;
* ``"im2col"``: the float64 im2col strategy (BLAS dgemm) on the zero-point-shifted
  integers. Every product and partial sum is an integer below 2**53, so float64 holds
  them exactly in any order; the sum is then reduced modulo 2**32, which is what int32
  accumulation gives. Problems with IC/G * prod(K) * 255**2 >= 2**53 are refused;
* ``"reference"``: the int64 oracle of :mod:`convlab.reference`.

``"auto"`` (and ``"tune"``) takes im2col when IC/G * prod(K) reaches
``GEMM_MIN_REDUCTION`` and direct otherwise.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from convlab.ops import postops
from convlab.problem import params
from convlab.problem.params import ConvProblem

ALGORITHMS = ("direct", "im2col", "reference")
# The direct kernel's inner loop runs over OCg for each (tap, ic); below this reduction
# length the GEMM path's unfold and float64 conversions cost more than they save.
# Provisional: from a handful of timings (ResNet-50 res2a 3x3: im2col 3x faster;
# 1x1 with IC 16: direct faster); to be fitted by bench runs.
GEMM_MIN_REDUCTION = 64
# Largest |(src - zp) * (weights - zp)|: both factors lie in -255..255.
_MAX_PRODUCT = 255 * 255


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


def check_algorithm(algorithm, problem: ConvProblem) -> str:
    if not isinstance(algorithm, str):
        raise TypeError(f"algorithm={algorithm!r} must be a string: 'auto' or one of "
                        f"{list(ALGORITHMS)}")
    if algorithm in ("auto", "tune"):
        return choose(problem)
    if algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm={algorithm!r} cannot run 8-bit integer problems; "
                         f"expected 'auto' or one of {list(ALGORITHMS)}")
    reason = supports(algorithm, problem)
    if reason is not None:
        raise ValueError(f"algorithm={algorithm!r} cannot run this problem: {reason}")
    return algorithm


def supports(algorithm: str, problem: ConvProblem) -> str | None:
    if algorithm == "direct" and problem.rank > 3:
        return f"rank {problem.rank}: the int8 direct kernel handles 1 to 3 spatial axes"
    if algorithm == "im2col":
        reduction = problem.in_channels_per_group * problem.kernel_size
        if reduction * _MAX_PRODUCT >= 2**53:
            return (f"IC/G * prod(K) = {reduction}: float64 sums would no longer be exact "
                    f"integers")
    return None


def choose(problem: ConvProblem) -> str:
    reduction = problem.in_channels_per_group * problem.kernel_size
    if supports("direct", problem) is None and (
            reduction < GEMM_MIN_REDUCTION or supports("im2col", problem) is not None):
        return "direct"
    if supports("im2col", problem) is None:
        return "im2col"
    return "reference"


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


def accumulate(algorithm: str, problem: ConvProblem, src: np.ndarray, weights: np.ndarray,
               int_bias, acc: np.ndarray, threads: int) -> None:
    """acc (N, O..., OC) int32 <- the wrapped int32 sum of shifted src * shifted weights."""
    r = problem.rank
    if algorithm == "direct":
        from convlab.strategies.direct import lift, lift_spatial
        from convlab.strategies.kernels import _int8

        _int8.conv_int8_direct(
            src.reshape(lift(src.shape, r)),
            weights.reshape(weights.shape[:1] + (1,) * (3 - r) + weights.shape[1:]),
            int_bias, acc.reshape(lift(acc.shape, r)), lift_spatial(problem.strides, r, 1),
            lift_spatial(problem.dilations, r, 1), lift_spatial(problem.pads_begin, r, 0),
            threads)
        return
    if algorithm == "im2col":
        from convlab.dispatch.registry import get_algorithm

        exact = dataclasses.replace(problem, dtype=np.dtype(np.float64), result_dtype=None,
                                    has_bias=False)
        dst = np.empty(acc.shape, np.float64)
        get_algorithm("im2col").run(exact, src.astype(np.float64), weights.astype(np.float64),
                                    None, dst, threads)
        total = dst.astype(np.int64)  # exact integers, see the module docstring
    else:
        from convlab import reference

        total = reference.correlate_nxc_int64(problem, src, weights)
    if int_bias is not None:
        total += int_bias
    acc[...] = wrap_int32(total)


def wrap_int32(values: np.ndarray) -> np.ndarray:
    """int64 -> int32 modulo 2**32: what int32 accumulation yields in any order."""
    return ((values + 2**31) % 2**32 - 2**31).astype(np.int32)

