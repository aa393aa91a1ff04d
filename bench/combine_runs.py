"""Combine several benchmark runs of one suite into per-layer medians, and the figures the
acceptance lists ask for.

    python bench/combine_runs.py bench/results/resnet_50_2026-11-25_epyc_9b9c231_run*.csv

Each CSV is one ``python -m convlab bench ... --csv`` run. A single run's ratios move by
up to about 1.3x from run to run on this 2-core machine (other processes, frequency,
thread wake-ups), so the figures here take, per layer and contender, the median over the
runs of each run's median time, and only then form ratios and geo-means.
"""
from __future__ import annotations

import argparse
import csv
import pathlib
import statistics
import sys
from collections import Counter, defaultdict

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from convlab.cli._bench_results import GEMM_BOUND_MIN_FLOPS, geo_mean  # noqa: E402
from convlab.cli._bench_tables import gemm_share_summary  # noqa: E402

ALGORITHM_PREFIXES = ("direct", "im2col", "winograd")


def load(paths):
    """(layer -> contender -> [median ms per run]), layer order as in the first file.

    A layer is its name and its descriptor: suites name some shapes alike (the 1d suite
    has five such pairs), and those stay apart, as ``name#1``, ``name#2``."""
    times = defaultdict(lambda: defaultdict(list))
    gflop = {}
    keys = []
    for path in paths:
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                if not row["median_ms"]:
                    continue
                key = (row["layer"].rsplit(":", 1)[-1], row["descriptor"])
                if key not in times:
                    keys.append(key)
                times[key][row["contender"]].append(float(row["median_ms"]))
                gflop[key] = float(row["gflop"])
    shared = Counter(name for name, _ in keys)
    seen = Counter()
    names = {}
    for name, descriptor in keys:
        seen[name] += 1
        names[name, descriptor] = f"{name}#{seen[name]}" if shared[name] > 1 else name
    return ([names[k] for k in keys], {names[k]: times[k] for k in keys},
            {names[k]: gflop[k] for k in keys})


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("csv", nargs="+")
    args = parser.parse_args(argv)
    order, times, gflop = load(args.csv)
    median = {layer: {c: statistics.median(v) for c, v in times[layer].items()}
              for layer in order}
    runs = max(len(v) for layer in order for v in times[layer].values())
    print(f"{len(args.csv)} files, {len(order)} layers, up to {runs} runs per layer; "
          f"per layer and contender the median over runs of each run's median time\n")
    contenders = sorted({c for layer in order for c in median[layer]})
    algorithms = [c for c in contenders if c.startswith(ALGORITHM_PREFIXES)]
    ratio_names = [c for c in contenders if c not in ("torch", "onnxrt", "matmul")]
    header = f"{'layer':<18}" + "".join(f"{'t/' + c:>12}" for c in ratio_names) + \
        f"{'regret':>9}{'ort/plan':>10}"
    print(header + "\n" + "-" * len(header))
    ratios = defaultdict(list)
    regrets, ort_plan = [], []
    for layer in order:
        m = median[layer]
        cells = []
        for c in ratio_names:
            if "torch" in m and c in m:
                ratios[c].append((m["torch"] / m[c], layer))
                cells.append(f"{m['torch'] / m[c]:>11.2f}x")
            else:
                cells.append(f"{'-':>12}")
        fastest = min((m[a] for a in algorithms if a in m), default=None)
        regret = m["auto"] / fastest if "auto" in m and fastest else None
        if regret:
            regrets.append((regret, layer))
        over = m["onnxrt"] / m["plan"] if "onnxrt" in m and "plan" in m else None
        if over:
            ort_plan.append((over, layer))
        print(f"{layer:<18}" + "".join(cells)
              + (f"{regret:>9.2f}" if regret else f"{'-':>9}")
              + (f"{over:>9.2f}x" if over else f"{'-':>10}"))
    print()
    for c in ratio_names:
        if ratios[c]:
            low = min(ratios[c])
            print(f"torch time / {c} time: geo-mean {geo_mean([r for r, _ in ratios[c]]):.2f}x, "
                  f"lowest {low[0]:.2f}x ({low[1]}), below 0.8x on "
                  f"{sum(r < 0.8 for r, _ in ratios[c])} layers")
    shares = [(median[layer]["matmul"] / median[layer]["im2col"], layer,
               gflop[layer] * 1e9 >= GEMM_BOUND_MIN_FLOPS) for layer in order
              if "matmul" in median[layer] and "im2col" in median[layer]]
    if shares:
        print("im2col rate / NumPy matmul rate on the same-sized GEMM: "
              + gemm_share_summary(shares))
    if regrets:
        worst = max(regrets)
        print(f"auto regret: geo-mean {geo_mean([r for r, _ in regrets]):.3f}, worst "
              f"{worst[0]:.2f} ({worst[1]}), within 5% on "
              f"{sum(r <= 1.05 for r, _ in regrets)}/{len(regrets)} layers")
    if ort_plan:
        low = min(ort_plan)
        print(f"ONNX Runtime time / plan time: geo-mean {geo_mean([r for r, _ in ort_plan]):.2f}x, "
              f"lowest {low[0]:.2f}x ({low[1]})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
