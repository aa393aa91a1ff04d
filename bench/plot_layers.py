"""Per-layer bar charts from ``python -m convlab bench --csv`` files.

    python bench/plot_layers.py bench/results/resnet_50_2026-11-25_epyc_9b9c231_run1.csv \
        bench/results/vgg_19_2026-11-25_epyc_9b9c231_run1.csv --out bench/results/layers.png

One panel per CSV (suite): for every layer, a bar per contender with its GFLOP/s, so where
each algorithm wins, and by how much against PyTorch and ONNX Runtime, is visible at once.
"""
from __future__ import annotations

import argparse
import csv
import sys
from collections import OrderedDict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def read(path):
    """{layer: {contender: GFLOP/s}} in file order, and the suite, mb and threads."""
    rates = OrderedDict()
    suite = mb = threads = None
    with open(path, newline="") as handle:
        for row in csv.DictReader(handle):
            suite, mb, threads = row["suite"], row["mb"], row["threads"]
            layer = row["layer"].split(":")[-1].split("*")[0]
            if row["gflops"]:
                rates.setdefault(layer, OrderedDict())[row["contender"]] = float(row["gflops"])
    return rates, suite, mb, threads


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv", nargs="+")
    parser.add_argument("--out", default="layers.png")
    args = parser.parse_args(argv)
    fig, axes = plt.subplots(len(args.csv), 1, figsize=(14, 3.6 * len(args.csv)),
                             squeeze=False)
    for ax, path in zip(axes[:, 0], args.csv):
        rates, suite, mb, threads = read(path)
        contenders = list(OrderedDict.fromkeys(c for r in rates.values() for c in r))
        width = 0.8 / len(contenders)
        x = np.arange(len(rates))
        for i, contender in enumerate(contenders):
            values = [r.get(contender, 0.0) for r in rates.values()]
            ax.bar(x + (i - (len(contenders) - 1) / 2) * width, values, width,
                   label=contender)
        ax.set_xticks(x)
        ax.set_xticklabels(list(rates), rotation=60, ha="right", fontsize=7)
        ax.set_ylabel("GFLOP/s")
        ax.set_title(f"{suite}: float32, mb {mb}, {threads} threads (higher is better)")
        ax.legend(ncol=len(contenders), fontsize=7, loc="upper right")
        ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
