"""8-bit integer convolution's algorithms, in the 8-bit registry
(:data:`convlab.dispatch.registry.INT8`; docs/specification.md §3.4).

Each ``run`` takes src and weights with their zero points already subtracted (int16,
canonical: src (N, I..., IC) materialised, weights (G, K..., IC/G, OC/G)), the integer
bias (int32 (OC,) or None), and writes into ``dst``, the int32 accumulator (N, O..., OC),
the wrapped int32 sum of products plus bias: what int32 accumulation gives in any order.

* ``direct``: :mod:`convlab.strategies.kernels._int8`, int16 operands, wrapping 32-bit
  accumulation; 1 to 3 spatial axes.
* ``im2col``: the float64 im2col strategy (BLAS dgemm) on the shifted integers. Every
  product and partial sum is an integer below 2**53, so float64 holds them exactly in any
  order; the sum is then reduced modulo 2**32. Problems with
  IC/G * prod(K) * 255**2 >= 2**53 are refused.
* ``reference``: the int64 oracle of :mod:`convlab.reference` (never an "auto" contender).

"auto" compares their estimates as it does the forward algorithms': the work of a call
counted as ``macs`` (N * prod(O) * OC * IC/G * prod(K)) and ``outputs`` (N * prod(O) * OC),
times the constants of the cost constants' ``int8`` section. The direct
kernel's inner loop runs over OC/G for each (tap, ic); below a reduction length IC/G *
prod(K) of about 64 the GEMM path's unfold and float64 conversions cost more than they
save (ResNet-50 res2a 3x3: im2col 3x faster; 1x1 with IC 16: direct faster). The shipped
constants put that crossover between 63 and 64 (docs/selection.md, "Transposed and
8-bit convolution").
"""
from __future__ import annotations

import dataclasses

import numpy as np

from convlab import reference
from convlab.dispatch import cost_model
from convlab.dispatch.registry import INT8, Estimate, get_algorithm, register_algorithm
from convlab.strategies.direct import lift, lift_spatial
from convlab.strategies.kernels import _int8

# Largest |(src - zp) * (weights - zp)|: both factors lie in -255..255.
MAX_PRODUCT = 255 * 255


def wrap_int32(values: np.ndarray) -> np.ndarray:
    """int64 -> int32 modulo 2**32: what int32 accumulation yields in any order."""
    return ((values + 2**31) % 2**32 - 2**31).astype(np.int32)


def cost_terms(problem) -> dict[str, float]:
    outputs = problem.batch * problem.output_size * problem.out_channels
    return {"macs": float(outputs * problem.in_channels_per_group * problem.kernel_size),
            "outputs": float(outputs)}


def direct_supports(problem) -> str | None:
    if problem.rank > 3:
        return f"rank {problem.rank}: the int8 direct kernel handles 1 to 3 spatial axes"
    return None


def direct_cost(problem, threads: int) -> Estimate:
    return cost_model.estimate("int8_direct", threads, {"macs": cost_terms(problem)["macs"]})


@register_algorithm("direct", registry=INT8, supports=direct_supports, cost=direct_cost,
                    description="the int8 direct kernel: int16 operands, wrapping int32 sums")
def run_direct(problem, src, weights, bias, dst, threads):
    r = problem.rank
    _int8.conv_int8_direct(
        src.reshape(lift(src.shape, r)),
        weights.reshape(weights.shape[:1] + (1,) * (3 - r) + weights.shape[1:]),
        bias, dst.reshape(lift(dst.shape, r)), lift_spatial(problem.strides, r, 1),
        lift_spatial(problem.dilations, r, 1), lift_spatial(problem.pads_begin, r, 0),
        threads)


def im2col_supports(problem) -> str | None:
    reduction = problem.in_channels_per_group * problem.kernel_size
    if reduction * MAX_PRODUCT >= 2**53:
        return (f"IC/G * prod(K) = {reduction}: float64 sums would no longer be exact "
                f"integers")
    return None


def im2col_cost(problem, threads: int) -> Estimate:
    return cost_model.estimate("int8_im2col", threads, cost_terms(problem))


@register_algorithm("im2col", registry=INT8, supports=im2col_supports, cost=im2col_cost,
                    description="float64 im2col (BLAS dgemm) on the exact shifted integers")
def run_im2col(problem, src, weights, bias, dst, threads):
    exact = dataclasses.replace(problem, dtype=np.dtype(np.float64), result_dtype=None,
                                has_bias=False)
    sums = np.empty(dst.shape, np.float64)
    get_algorithm("im2col").run(exact, src.astype(np.float64), weights.astype(np.float64),
                                None, sums, threads)
    finish(sums.astype(np.int64), bias, dst)  # exact integers, see the module docstring


def reference_cost(problem, threads: int) -> Estimate:
    # NumPy int64 per kernel tap and group: slow on purpose; never chosen by "auto".
    return Estimate(problem.flops / 0.5e9, {"flops": problem.flops, "gflops_assumed": 0.5})


@register_algorithm("reference", registry=INT8, cost=reference_cost, auto=False,
                    description="the int64 oracle, wrapped to int32")
def run_reference(problem, src, weights, bias, dst, threads):
    finish(reference.correlate_nxc_int64(problem, src, weights), bias, dst)


def finish(total: np.ndarray, bias, dst: np.ndarray) -> None:
    """dst <- the int64 sums plus the integer bias, wrapped to int32."""
    if bias is not None:
        total += bias
    dst[...] = wrap_int32(total)
