"""Batch scaling: a contender's time at a larger batch over its time at batch 1.

Measured here, both batches in one process, in alternating blocks (the machine's speed
drifts between runs minutes apart, and that drift would fall on one batch only):

    python bench/batch_scaling.py --measure --suite resnet_50 --mb 8 \
        --contenders auto,direct,im2col --rounds 3

or from ``python -m convlab bench --csv`` runs of one suite at two batch sizes:

    python bench/batch_scaling.py --small bench/results/<suite>_run*.csv \
        --large bench/results/<suite>_mb8_run*.csv [--contender auto]

Per layer it prints the median time at each batch and their ratio against the batch
ratio, which the [selection] acceptance list takes as the bound (8x for batch 8 over
batch 1). The measured contenders are one-shot ``convlab.convolve`` calls with
``algorithm=`` each name ("auto" is the selector's pick).
"""
from __future__ import annotations

import argparse
import csv
import os
import statistics
import sys

from combine_runs import load

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import convlab  # noqa: E402
from convlab.cli._bench_args import select_layers  # noqa: E402
from convlab.cli._bench_tables import cpu_model  # noqa: E402
from convlab.problem import shapes  # noqa: E402
from convlab.runtime.timing import time_block  # noqa: E402


def measure(suite, layer_names, contenders, large_mb, threads, rounds, block_seconds):
    """{contender: [(layer, median s at mb1, median s at large_mb)]}, each contender's two
    batches timed in alternating blocks (``rounds`` blocks each)."""
    small_layers = select_layers(shapes.load_suite(suite, mb=1), layer_names)
    large_layers = {layer.name: layer for layer in shapes.load_suite(suite, mb=large_mb)}
    results = {name: [] for name in contenders}
    for small in small_layers:
        batches = (small, large_layers[small.name])
        arrays = [layer.arrays(seed=0) for layer in batches]
        kwargs = small.convolve_kwargs()
        for name in contenders:
            calls = [lambda src=src, w=w: convlab.convolve(src, w, algorithm=name,
                                                            threads=threads, **kwargs)
                     for src, w, _ in arrays]
            times = ([], [])
            for index in range(rounds):
                for which in ((0, 1) if index % 2 == 0 else (1, 0)):
                    times[which].extend(time_block(calls[which], 3,
                                                   min_seconds=block_seconds))
            results[name].append((small.short_name, statistics.median(times[0]),
                                  statistics.median(times[1])))
            print(f"  measured {small.short_name} {name}", file=sys.stderr, flush=True)
    return results


def print_table(label, rows, bound, small_mb, large_mb) -> None:
    print(f"{label}: time at mb{large_mb} / time at mb{small_mb} (bound {bound:g}x)")
    over = []
    for layer, small, large in rows:
        ratio = large / small
        if ratio > bound:
            over.append(layer)
        print(f"  {layer:24s} {small * 1e3:9.3f} ms {large * 1e3:9.3f} ms {ratio:6.2f}x"
              + ("  over" if ratio > bound else ""))
    print(f"over {bound:g}x on {len(over)} of {len(rows)} layers"
          + (f": {', '.join(over)}" if over else ""))


def from_csv(args) -> int:
    order, small = load(args.small)
    _, large = load(args.large)
    batches = []
    for paths in (args.small, args.large):
        with open(paths[0], newline="") as f:
            batches.append(int(next(csv.DictReader(f))["mb"]))
    rows = []
    for layer in order:
        a, b = small[layer].get(args.contender), large[layer].get(args.contender)
        if a and b:
            # combine_runs keeps milliseconds; the table takes seconds
            rows.append((layer, statistics.median(a) / 1e3, statistics.median(b) / 1e3))
    print(f"{len(args.small)} and {len(args.large)} runs")
    print_table(args.contender, rows, batches[1] / batches[0], *batches)
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--measure", action="store_true",
                        help="time both batches here rather than read bench CSVs")
    parser.add_argument("--suite", default="resnet_50")
    parser.add_argument("--layers", default="", help="comma-separated names (default: all)")
    parser.add_argument("--mb", type=int, default=8, help="the larger batch (--measure)")
    parser.add_argument("--contenders", default="auto", help="comma-separated (--measure)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--block-seconds", type=float, default=0.2)
    parser.add_argument("--small", nargs="+", help="CSVs at the small batch")
    parser.add_argument("--large", nargs="+", help="CSVs at the large batch")
    parser.add_argument("--contender", default="auto", help="the contender read from CSVs")
    args = parser.parse_args(argv)
    if not args.measure:
        if not (args.small and args.large):
            parser.error("give --measure, or both --small and --large")
        return from_csv(args)
    print(f"command: python {' '.join(sys.argv)}")
    print(f"machine: {cpu_model()}, {os.cpu_count()} logical CPUs; {args.threads} threads; "
          f"per batch {args.rounds} blocks of at least {args.block_seconds} s, batches "
          f"alternating")
    results = measure(args.suite, args.layers, args.contenders.split(","), args.mb,
                      args.threads, args.rounds, args.block_seconds)
    for name, rows in results.items():
        print()
        print_table(name, rows, args.mb, 1, args.mb)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
