"""One-shot Winograd with the weight transform fused into the GEMM stage, against the
transform written to U first, on every benchdnn layer where the fused path applies.

    python bench/fused_weights.py [--suites resnet_50,googlenet_v2,vgg_19] [--threads 2]

A one-shot call (``convolve``) pays the weight transform every time. For shared-blocks
runs with a small enough filter, ``winograd.fused_weights`` computes each row of U's
positions just before its GEMMs instead of writing all of U and reading it back. Which
tile sizes get that is ``winograd.FUSED_TILE_SIZES``; this script times each tile size
both ways (blocks of calls, the two ways alternating in order round by round) and prints
the median per layer, so that choice can be checked on a machine.
"""
from __future__ import annotations

import argparse
import pathlib
import sys

from ab_constant import add_block_options, alternating_medians, constant_set_to

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

import convlab  # noqa: E402
from convlab.cli._bench_results import geo_mean  # noqa: E402
from convlab.problem import shapes  # noqa: E402
from convlab.strategies import winograd  # noqa: E402


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suites", default="resnet_50,googlenet_v2,vgg_19")
    add_block_options(parser, rounds=5, repeats=15, per="way and tile size")
    return parser.parse_args(argv)


def fusable_layers(suites, mb, threads):
    """(layer, tile sizes whose run would fuse if allowed) for each layer that has some."""
    found = []
    with fusing(winograd.TILE_SIZES):
        for suite in suites:
            for layer in shapes.load_suite(suite, mb=mb):
                problem = layer.problem(mb=mb)
                if winograd._supports(problem) is not None:
                    continue
                tiles = [m for m in winograd.TILE_SIZES if winograd.fused_weights(
                    m, problem, winograd.blocking(m, problem, threads))]
                if tiles:
                    found.append((layer, tiles))
    return found


def fusing(tile_sizes):
    """Within the block, the first runs of these tile sizes fuse the weight transform."""
    return constant_set_to(winograd, "FUSED_TILE_SIZES", tuple(tile_sizes))


def main(argv=None):
    args = parse_args(argv)
    layers = fusable_layers(args.suites.split(","), args.mb, args.threads)
    print(f"{args.threads} threads, mb {args.mb}; median ms of {args.rounds} blocks of "
          f"{args.repeats} one-shot calls per way\n")
    print(f"{'layer':38s} {'tile':>4s} {'fused':>8s} {'unfused':>8s} {'unfused/fused':>14s}")
    ratios = {}
    for layer, tiles in layers:
        src, weights, _ = layer.arrays(args.mb, seed=0)
        kwargs = layer.convolve_kwargs()
        for m in tiles:
            def call():
                convlab.convolve(src, weights, algorithm=f"winograd{m}", threads=args.threads,
                                 **kwargs)

            fused_s, unfused_s = alternating_medians(
                call, [lambda: fusing(winograd.TILE_SIZES), lambda: fusing(())],
                args.rounds, args.repeats)
            fused_ms, unfused_ms = fused_s * 1e3, unfused_s * 1e3
            ratios.setdefault(m, []).append(unfused_ms / fused_ms)
            print(f"{layer.name:38s} {m:4d} {fused_ms:8.3f} {unfused_ms:8.3f} "
                  f"{unfused_ms / fused_ms:13.2f}x", flush=True)
    print()
    for m, values in sorted(ratios.items()):
        print(f"F({m}, 3): unfused time / fused time, geo-mean {geo_mean(values):.2f}x over "
              f"{len(values)} layers (lowest {min(values):.2f}x, highest {max(values):.2f}x)")


if __name__ == "__main__":
    main()
