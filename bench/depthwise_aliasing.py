"""Depthwise direct on channel counts whose pixel rows are a multiple of 4 KiB (1024 and
2048 float32 channels) against their neighbours 16 channels either side, time per channel,
one-shot calls at batch 1: with src as the kernel takes it (a copy one cache line wider
per pixel where ``direct.SRC_ALIAS_BYTES`` and ``direct.SRC_ALIAS_MIN_TAPS`` say so) and
with src read where it lies. Weights are always padded (``_direct.ALIAS_BYTES``).

    python bench/depthwise_aliasing.py [--threads 2] [--rounds 7]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import convlab  # noqa: E402
from convlab.cli._bench_tables import core_round_trip_text, cpu_model  # noqa: E402
from convlab.problem import shapes  # noqa: E402
from convlab.runtime.timing import time_block  # noqa: E402
from convlab.strategies import direct  # noqa: E402

# (channels, image side, kernel side, stride): RepLKNet/ConvNeXt-like stages, and 3x3
# and 5x5 MobileNet-like layers where a copy of src costs more than it saves
CASES = [(1024, 7, 13, 1), (1024, 14, 7, 1), (1024, 28, 7, 1), (2048, 7, 13, 1),
         (1024, 7, 31, 1), (512, 14, 7, 1), (512, 14, 31, 1), (512, 56, 7, 1),
         (256, 56, 7, 1), (1024, 7, 5, 1), (1024, 14, 5, 1), (512, 56, 5, 1),
         (256, 28, 5, 1), (256, 56, 3, 1), (512, 14, 3, 1), (1024, 7, 3, 1),
         (1024, 28, 3, 1), (1024, 14, 3, 2)]
NEVER = 10**9


def call(channels, side, kernel, stride, threads):
    out = (side + 2 * (kernel // 2) - kernel) // stride + 1
    layer = shapes.parse_descriptor(f'g{channels}mb1ic{channels}ih{side}oc{channels}oh{out}'
                                    f'kh{kernel}sh{stride}ph{kernel // 2}n"x"')
    src, weights, _ = layer.arrays(1)
    kwargs = layer.convolve_kwargs()
    return lambda: convlab.convolve(src, weights, algorithm="direct", threads=threads,
                                    **kwargs)


def timed(fn, rounds, min_taps_each):
    """Medians over alternating blocks, one per SRC_ALIAS_MIN_TAPS setting."""
    times: list[list[float]] = [[] for _ in min_taps_each]
    shipped = direct.SRC_ALIAS_MIN_TAPS
    try:
        for index in range(rounds):
            order = range(len(min_taps_each)) if index % 2 == 0 else \
                reversed(range(len(min_taps_each)))
            for which in order:
                direct.SRC_ALIAS_MIN_TAPS = min_taps_each[which]
                times[which] += time_block(fn, 1, pause=0.0, min_seconds=0.1)
    finally:
        direct.SRC_ALIAS_MIN_TAPS = shipped
    return [statistics.median(t) for t in times]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args(argv)
    print(f"machine: {cpu_model()}; {core_round_trip_text()}; batch 1, {args.threads} "
          f"threads, float32, direct one-shot, {args.rounds} rounds of 0.1 s blocks; "
          f"ns per channel")
    print(f"{'channels x image, kernel, stride':34s} {'C-16':>8s} {'C+16':>8s} {'C':>8s} "
          f"{'C, src in place':>16s} {'C / neighbours':>15s} {'in place / C':>13s}")
    for channels, side, kernel, stride in CASES:
        per_channel = {}
        for count in (channels - 16, channels + 16):
            per_channel[count] = timed(call(count, side, kernel, stride, args.threads),
                                       args.rounds, [direct.SRC_ALIAS_MIN_TAPS])[0] / count
        shipped, in_place = (t / channels for t in timed(
            call(channels, side, kernel, stride, args.threads), args.rounds,
            [direct.SRC_ALIAS_MIN_TAPS, NEVER]))
        neighbours = (per_channel[channels - 16] + per_channel[channels + 16]) / 2
        print(f"{channels:5d} x {side:3d}^2, {kernel:2d}x{kernel:<2d}, s{stride}"
              f"{'':14s} {per_channel[channels - 16] * 1e9:8.1f} "
              f"{per_channel[channels + 16] * 1e9:8.1f} {shipped * 1e9:8.1f} "
              f"{in_place * 1e9:16.1f} {shipped / neighbours:15.2f} "
              f"{in_place / shipped:13.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
