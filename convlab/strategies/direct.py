"""``direct``: the Cython/OpenMP direct kernel on canonical NXC layouts.

The kernel is written for three spatial axes; 1-D and 2-D problems are lifted
to 3-D by adding unit axes (free reshapes, no copies).
"""
from __future__ import annotations

from convlab.kernels import _direct
from convlab.registry import Estimate, register_algorithm

KERNEL_RANK = 3

# Sustained GFLOP/s per thread assumed by the simple foundation rule.
# TODO([selection]): fit from bench runs and cite the run.
ASSUMED_GFLOPS_PER_THREAD = 10.0


def lift(shape, rank):
    """Insert unit spatial axes after the leading axis so rank becomes KERNEL_RANK."""
    return shape[:1] + (1,) * (KERNEL_RANK - rank) + shape[1:]


def lift_spatial(values, rank, fill):
    return (fill,) * (KERNEL_RANK - rank) + tuple(values)


def _supports(problem):
    if problem.rank > KERNEL_RANK:
        return f"rank {problem.rank}: the direct kernel handles 1 to {KERNEL_RANK} spatial axes"
    return None


def _cost(problem, threads):
    rate = ASSUMED_GFLOPS_PER_THREAD * 1e9 * threads
    return Estimate(problem.flops / rate, {"flops": problem.flops, "threads": threads,
                                           "gflops_per_thread": ASSUMED_GFLOPS_PER_THREAD})


@register_algorithm("direct", supports=_supports, cost=_cost,
                    description="Cython/OpenMP loops over output blocks; ranks 1-3, all attributes")
def run_direct(problem, src, weights, bias, dst, threads):
    r = problem.rank
    _direct.conv_direct(
        src.reshape(lift(src.shape, r)),
        weights.reshape(lift(weights.shape, r)),
        bias,
        dst.reshape(lift(dst.shape, r)),
        lift_spatial(problem.strides, r, 1),
        lift_spatial(problem.dilations, r, 1),
        lift_spatial(problem.pads_begin, r, 0),
        threads,
    )
