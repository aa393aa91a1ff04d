"""``reference``: the float64 oracle of :mod:`convlab.reference`, behind the registry."""
from __future__ import annotations

import numpy as np

from convlab import reference as oracle
from convlab.dispatch.registry import Estimate, register_algorithm


def _cost(problem, threads):
    # Pure NumPy einsum per kernel tap and group: slow on purpose; never chosen by "auto".
    return Estimate(problem.flops / 0.5e9, {"flops": problem.flops, "gflops_assumed": 0.5})


@register_algorithm("reference", cost=_cost, auto=False,
                    description="float64 NumPy, literally docs/specification.md §1.1; "
                                "any rank, every attribute")
def run_reference(problem, src, weights, bias, dst, threads):
    r = problem.rank
    src_ncx = np.moveaxis(src, -1, 1)
    # canonical (G, K..., ICg, OCg) -> OIX (OC, ICg, K...), OC running over g then oc
    w = weights.transpose(0, r + 2, r + 1, *range(1, r + 1)).reshape(
        problem.out_channels, problem.in_channels_per_group, *problem.kernel_shape)
    result = oracle.correlate(src_ncx, w, bias, problem.strides, problem.dilations,
                              problem.pads_begin, problem.pads_end, problem.groups)
    dst[...] = np.moveaxis(result, 1, -1)
