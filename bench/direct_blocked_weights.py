"""A/B of a direct plan's weights blocked by the kernel's chunks of output channels (what
``direct.prepare_weights`` makes for a plan) against the same values in the packed layout
(which the kernel reads copying each pass's rows per work item, as one-shot calls do):
direct's kernel alone on each suite layer whose plan weights are blocked, batch 1,
alternating blocks, the median per layer and the geo-mean speed-up.

    python bench/direct_blocked_weights.py --suite resnet_50 [--layers a,b] [--threads 2]
"""
from __future__ import annotations

import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from convlab.cli._bench_args import layer_script_parser, select_layers  # noqa: E402
from convlab.cli._bench_results import geo_mean  # noqa: E402
from convlab.cli._bench_tables import core_round_trip_text, cpu_model  # noqa: E402
from convlab.problem import params, shapes  # noqa: E402
from convlab.runtime import _buffers as buffers  # noqa: E402
from convlab.runtime.timing import time_block  # noqa: E402
from convlab.strategies import direct  # noqa: E402


def layer_calls(layer, threads):
    """(packed call, blocked call) on the layer's plan weights, or None if they are not
    blocked."""
    src, weights, _ = layer.arrays(1)
    problem = params.make_problem(src.shape, src.dtype, weights.shape, weights.dtype,
                                  **layer.convolve_kwargs())
    if direct.is_depthwise(problem):
        return None
    blocked = direct.prepare_weights(problem, params.canonical_weights(weights, problem))
    if blocked.blocks is None:
        return None
    packed = direct.PreparedWeights(False, direct._unblocked(blocked))
    src = params.canonical_src(src, problem)
    dst = buffers.aligned_empty(problem.canonical_dst_shape, problem.dtype)
    return tuple((lambda w=w: direct.run_direct(problem, src, w, None, dst, threads))
                 for w in (packed, blocked))


def main(argv=None) -> int:
    args = layer_script_parser(__doc__.split("\n")[0]).parse_args(argv)
    print(f"machine: {cpu_model()}; {core_round_trip_text()}; suite {args.suite}, batch 1, "
          f"{args.threads} threads, float32, {args.rounds} rounds of 0.15 s blocks")
    speedups = []
    for layer in select_layers(shapes.load_suite(args.suite), args.layers):
        calls = layer_calls(layer, args.threads)
        if calls is None:
            continue
        times: list[list[float]] = [[], []]
        for index in range(args.rounds):
            for which in (0, 1) if index % 2 == 0 else (1, 0):
                times[which] += time_block(calls[which], 1, pause=0.0, min_seconds=0.15)
        packed, blocked = (statistics.median(t) for t in times)
        speedups.append(packed / blocked)
        print(f"{layer.short_name:28s} packed {packed * 1e3:8.3f} ms  blocked "
              f"{blocked * 1e3:8.3f} ms  {packed / blocked:5.2f}x", flush=True)
    print(f"geo-mean speed-up, blocked over packed: {geo_mean(speedups):.3f} "
          f"over {len(speedups)} layers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
