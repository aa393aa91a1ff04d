"""What the channels-first layout costs a call: each suite layer through
``convlab.convolve`` (auto) and a plan (``choose="estimate"``, so both layouts run the
same algorithm) on NCX arrays (PyTorch's and ONNX's layout) beside the same calls on NXC
arrays, batch 1, alternating blocks; per-layer medians, network totals (x multiplicity)
and the NCX / NXC ratios.

    python bench/ncx_calls.py --suite resnet_50 [--layers a,b] [--threads 2]
"""
from __future__ import annotations

import os
import statistics
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import convlab  # noqa: E402
from convlab.cli._bench_args import layer_script_parser, select_layers  # noqa: E402
from convlab.cli._bench_tables import core_round_trip_text, cpu_model  # noqa: E402
from convlab.problem import shapes  # noqa: E402
from convlab.runtime.timing import time_block  # noqa: E402

CONTENDERS = ("convolve NXC", "convolve NCX", "plan NXC", "plan NCX")


def layer_calls(layer, threads: int) -> list:
    """The calls of CONTENDERS on the layer's arrays."""
    src, weights, _ = layer.arrays(1)
    kwargs = dict(layer.convolve_kwargs(), threads=threads)
    src_ncx = np.ascontiguousarray(np.moveaxis(src, -1, 1))
    weights_oix = np.ascontiguousarray(np.moveaxis(weights, (-1, -2), (0, 1)))
    ncx = dict(kwargs, data_format="NCX", weights_format="OIX")
    plans = (convlab.Convolution(weights, choose="estimate", **kwargs),
             convlab.Convolution(weights_oix, choose="estimate", **ncx))
    return [lambda: convlab.convolve(src, weights, **kwargs),
            lambda: convlab.convolve(src_ncx, weights_oix, **ncx),
            lambda: plans[0](src), lambda: plans[1](src_ncx)]


def main(argv=None) -> int:
    args = layer_script_parser(__doc__.split("\n")[0]).parse_args(argv)
    print(f"machine: {cpu_model()}; isa {convlab.cpu.effective_isa()}; "
          f"{core_round_trip_text()}; suite {args.suite}, batch 1, {args.threads} threads, "
          f"float32, {args.rounds} rounds of 0.15 s blocks, medians in ms")
    print(f"{'layer':28s}" + "".join(f"{name:>14s}" for name in CONTENDERS)
          + "   NCX/NXC convolve, plan")
    totals = [0.0] * len(CONTENDERS)
    for layer in select_layers(shapes.load_suite(args.suite), args.layers):
        calls = layer_calls(layer, args.threads)
        times: list[list[float]] = [[] for _ in calls]
        for index in range(args.rounds):
            order = range(len(calls)) if index % 2 == 0 else reversed(range(len(calls)))
            for which in order:
                times[which] += time_block(calls[which], 1, pause=0.0, min_seconds=0.15)
        medians = [statistics.median(t) for t in times]
        for which, median in enumerate(medians):
            totals[which] += median * layer.multiplicity
        print(f"{layer.short_name:28s}" + "".join(f"{m * 1e3:14.3f}" for m in medians)
              + f"   {medians[1] / medians[0]:5.2f}x {medians[3] / medians[2]:5.2f}x",
              flush=True)
    print(f"{'network (x multiplicity)':28s}" + "".join(f"{t * 1e3:14.3f}" for t in totals)
          + f"   {totals[1] / totals[0]:5.2f}x {totals[3] / totals[2]:5.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
