"""Batch scaling of one contender: its time at a larger batch over its time at batch 1.

    python bench/batch_scaling.py --small bench/results/resnet_50_s4_run*.csv \
        --large bench/results/resnet_50_mb8_s4_run*.csv [--contender auto]

Both sets are ``python -m convlab bench --csv`` runs of one suite at two batch sizes. Per
layer, each set gives the median over its runs of the contender's median time (as
``combine_runs.py`` does); the table shows large / small against the batch ratio, which
the [selection] acceptance list takes as the bound (8x for batch 8 over batch 1).
"""
from __future__ import annotations

import argparse
import csv
import statistics

from combine_runs import load


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", nargs="+", required=True, help="CSVs at the small batch")
    parser.add_argument("--large", nargs="+", required=True, help="CSVs at the large batch")
    parser.add_argument("--contender", default="auto")
    args = parser.parse_args(argv)
    order, small = load(args.small)
    _, large = load(args.large)
    batches = []
    for paths in (args.small, args.large):
        with open(paths[0], newline="") as f:
            batches.append(int(next(csv.DictReader(f))["mb"]))
    bound = batches[1] / batches[0]
    print(f"{args.contender}: time at mb{batches[1]} / time at mb{batches[0]} "
          f"({len(args.small)} and {len(args.large)} runs; bound {bound:g}x)")
    over = []
    for layer in order:
        a, b = small[layer].get(args.contender), large[layer].get(args.contender)
        if not a or not b:
            continue
        ratio = statistics.median(b) / statistics.median(a)
        mark = "  over" if ratio > bound else ""
        if ratio > bound:
            over.append(layer)
        print(f"  {layer:24s} {statistics.median(a):9.3f} ms {statistics.median(b):9.3f} ms "
              f"{ratio:6.2f}x{mark}")
    print(f"over {bound:g}x on {len(over)} layers" + (f": {', '.join(over)}" if over else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
