"""A/B of the Winograd GEMM's prefetch of the next panel of U: the most micro-tiles of
rows a panel may serve for the GEMM to prefetch the next one (wg_prefetch_max_tiles in
winograd_kernels.h, _winograd.set_panel_prefetch; 0: never).

Builds one plan per layer and Winograd tile that runs it (the strategy's own supports
check), then times that same plan under each setting of --settings, in alternating blocks
of at least --block-seconds each, --rounds rounds.
Prints the median per layer, tile and setting with its speed-up over the first setting, and
geo-means per tile and setting; the header names the CPU, its caches and the ISA level in
effect.

    python bench/winograd_panel_prefetch.py --suite resnet_50 --settings 0 4 1000000
    python bench/winograd_panel_prefetch.py --suite vgg_19 --algorithms winograd4
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import convlab  # noqa: E402
from convlab.cli._bench_args import layer_script_parser, select_layers  # noqa: E402
from convlab.cli._bench_results import geo_mean  # noqa: E402
from convlab.cli._bench_tables import machine_lines  # noqa: E402
from convlab.dispatch.registry import get_algorithm  # noqa: E402
from convlab.problem import shapes  # noqa: E402
from convlab.runtime.timing import medians_under_settings  # noqa: E402
from convlab.strategies.kernels import _winograd  # noqa: E402


def main(argv=None):
    parser = layer_script_parser(__doc__.split("\n")[0], rounds=12)
    parser.add_argument("--algorithms", default="winograd2,winograd4,winograd6")
    parser.add_argument("--block-seconds", type=float, default=0.15)
    parser.add_argument("--settings", nargs="+", type=int, default=[0, 4, 1_000_000],
                        help="most micro-tiles per panel to prefetch at, each (0: never)")
    args = parser.parse_args(argv)
    settings = args.settings
    algorithms = [a.strip() for a in args.algorithms.split(",") if a.strip()]
    layers = select_layers(shapes.load_suite(args.suite, mb=1), args.layers)
    print(f"command: python {' '.join(sys.argv)}")
    for line in machine_lines():
        print(line)
    print(f"{args.threads} threads, mb 1, {args.rounds} rounds of blocks of "
          f"{args.block_seconds} s; prefetch when a panel serves at most N micro-tiles, N in "
          f"{settings}; speed-up over N={settings[0]}")
    speedups = {(algorithm, setting): [] for algorithm in algorithms for setting in settings}
    default = _winograd.set_panel_prefetch(0)
    _winograd.set_panel_prefetch(default)
    try:
        for layer in layers:
            src, weights, _ = layer.arrays(1, seed=0)
            cells = []
            for algorithm in algorithms:
                if get_algorithm(algorithm).supports(layer.problem(mb=1)) is not None:
                    continue
                plan = convlab.Convolution(weights, algorithm=algorithm, threads=args.threads,
                                           **layer.convolve_kwargs())
                plan(src)
                medians = medians_under_settings(lambda: plan(src), settings,
                                                 _winograd.set_panel_prefetch, args.rounds,
                                                 args.block_seconds)
                cells.append(algorithm)
                for setting in settings:
                    ratio = medians[settings[0]] / medians[setting]
                    speedups[algorithm, setting].append(ratio)
                    cells.append(f"{setting}: {medians[setting] * 1e3:7.3f} ms ({ratio:4.2f}x)")
            if cells:
                print(f"{layer.short_name:16s} " + " ".join(cells), flush=True)
    finally:
        _winograd.set_panel_prefetch(default)
    for algorithm in algorithms:
        print(f"geo-mean speed-up over {settings[0]}, {algorithm}: " + "  ".join(
            f"{setting}: {geo_mean(speedups[algorithm, setting]):.3f} (lowest "
            f"{min(speedups[algorithm, setting]):.2f})"
            for setting in settings if speedups[algorithm, setting]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
