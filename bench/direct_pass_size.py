"""A/B of the direct kernel's input-channel pass size (cl_pass_bytes in direct_microkernel.h).

Times direct's kernel alone on prepared weights (what a plan runs) for each setting, in
alternating blocks of at least --block-seconds each, --rounds rounds, and prints the median
per layer and setting with its speed-up over the first setting, then the geo-mean.

    python bench/direct_pass_size.py --suite resnet_50 --settings 32768:64,262144:64
    python bench/direct_pass_size.py --suite resnet_50 --mb 8 --layers conv1,res3b_branch2a

A setting is BYTES:MIN_CHANNELS, the arguments of convlab.kernels._direct.set_pass_size.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from convlab import params, shapes  # noqa: E402
from convlab.benchmark import cpu_model, geo_mean, select_layers, time_block  # noqa: E402
from convlab.kernels import _direct  # noqa: E402
from convlab.strategies import direct  # noqa: E402


def parse_setting(text):
    nbytes, min_channels = text.split(":")
    return int(nbytes), int(min_channels)


def kernel_call(layer, mb, threads):
    src, weights, _ = layer.arrays(mb)
    problem = params.make_problem(src.shape, src.dtype, weights.shape, weights.dtype,
                                  **layer.convolve_kwargs())
    prepared = direct.prepare_weights(problem, params.canonical_weights(weights, problem))
    src = params.canonical_src(src, problem)
    dst = np.empty(problem.canonical_dst_shape, problem.dtype)
    return lambda: direct.run_direct(problem, src, prepared, None, dst, threads)


def time_settings(call, settings, rounds, block_seconds):
    """Median seconds per setting over ``rounds`` blocks each, settings in alternating order;
    no pause between blocks, since every block runs the same kernel."""
    times = {setting: [] for setting in settings}
    for index in range(rounds):
        for setting in settings if index % 2 == 0 else settings[::-1]:
            _direct.set_pass_size(*setting)
            times[setting] += time_block(call, 1, pause=0.0, min_seconds=block_seconds)
    return {setting: statistics.median(values) for setting, values in times.items()}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--suite", default="resnet_50")
    parser.add_argument("--layers", default="", help="comma-separated names (default: all)")
    parser.add_argument("--settings", default="32768:64,262144:64,1048576:64")
    parser.add_argument("--mb", type=int, default=1)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--block-seconds", type=float, default=0.15)
    args = parser.parse_args(argv)
    settings = [parse_setting(s) for s in args.settings.split(",")]
    layers = select_layers(shapes.load_suite(args.suite), args.layers)
    print(f"command: python {' '.join(sys.argv)}")
    print(f"machine: {cpu_model()}, {os.cpu_count()} logical CPUs; {args.threads} threads, "
          f"mb {args.mb}, {args.rounds} rounds of blocks of {args.block_seconds} s")
    labels = [f"{b // 1024}K/{c}" for b, c in settings]
    default = _direct.set_pass_size(*settings[0])
    speedups = []
    try:
        for layer in layers:
            medians = time_settings(kernel_call(layer, args.mb, args.threads), settings,
                                    args.rounds, args.block_seconds)
            first = medians[settings[0]]
            ratios = [first / medians[s] for s in settings]
            speedups.append(ratios)
            print(f"{layer.short_name:20s} " + "  ".join(
                f"{label}: {medians[s] * 1e3:8.3f} ms ({r:4.2f}x)"
                for label, s, r in zip(labels, settings, ratios)), flush=True)
    finally:
        _direct.set_pass_size(*default)
    print(f"geo-mean speed-up over {labels[0]}: " + "  ".join(
        f"{label}: {geo_mean(column):.3f}" for label, column in zip(labels, zip(*speedups))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
