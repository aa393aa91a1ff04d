"""Offline regret analysis of the cost model against measured per-algorithm times.

    python bench/regret_analysis.py                       # the shipped set of this ISA level
    python bench/regret_analysis.py --constants other.json --csv bench/results/x_shipped.csv
    CONVLAB_MAX_CPU_ISA=avx2 python bench/regret_analysis.py --layers   # every layer
    python bench/regret_analysis.py --baseline old.json   # before / after a refit

Reads the per-layer CSVs ``python -m convlab bench`` writes (one row per layer and
contender, ``median_ms`` the one-shot time), recomputes each algorithm's estimate with the
cost hooks of this checkout and a set of constants (a shipped or calibrated JSON file), and
reports, per suite: auto's predicted regret (measured time of the algorithm the estimates
pick / fastest measured), the estimate error of each algorithm (measured / estimated),
and the layers where the pick costs more than ``--threshold`` or the two fastest
algorithms are ranked the wrong way round by more than it, grouped by layer features
(small IC, 1x1, strided, dilated, 1-D, 3-D, depthwise, grouped, tiny, large kernel). Nothing is
timed: it runs on any machine, for the CSVs of any CPU, as long as the constants are
those of the CPU the CSVs were measured on.
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import pathlib
import statistics
import sys
from collections import defaultdict

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import convlab  # noqa: E402,F401  (registers the strategies)
from convlab.dispatch import cost_model, registry, select  # noqa: E402
from convlab.dispatch.calibration import store  # noqa: E402
from convlab.problem import shapes  # noqa: E402

DEFAULT_CSVS = [
    "bench/results/resnet_50_2026-11-26_epyc-zen4-avx2_shipped.csv",
    "bench/results/vgg_19_2026-11-26_epyc-zen4-avx2_shipped.csv",
    "bench/results/googlenet_v2_2026-11-26_epyc-zen4-avx2_shipped.csv",
    "bench/results/mobilenet_dw_2026-11-26_epyc-zen4-avx2_shipped.csv",
    "bench/results/1d_2026-11-26_epyc-zen4-avx2_shipped.csv",
    "bench/results/3d_unet_2026-11-25_epyc-zen4-avx2_shipped.csv",
    "bench/results/dilated_2026-11-26_epyc-zen4-avx2_shipped.csv",
    "bench/results/large_kernel_2026-11-26_epyc-zen4-avx2_shipped.csv",
]

# Layers faster than this (best algorithm) are "tiny": fixed per-call costs dominate.
TINY_SECONDS = 50e-6
# Kernels with at least this many taps are "large".
LARGE_KERNEL_TAPS = 25


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 2)[2])
    parser.add_argument("--csv", action="append",
                        help="a bench CSV (repeatable; default: the avx2 suites of "
                             "2026-11-26, 3d_unet of 2026-11-25)")
    parser.add_argument("--constants",
                        help="a constants JSON (shipped or calibrated; default: the shipped "
                             "set of the effective ISA level)")
    parser.add_argument("--threads", type=int,
                        help="estimate at this thread count (default: each CSV row's)")
    parser.add_argument("--threshold", type=float, default=1.15,
                        help="flag layers whose regret, or whose misranking of the two "
                             "fastest, exceeds this ratio (default 1.15)")
    parser.add_argument("--baseline",
                        help="another constants JSON: first print both sets' predicted "
                             "regret per suite side by side (before / after a refit)")
    parser.add_argument("--layers", action="store_true",
                        help="print every layer, not only the flagged ones")
    return parser.parse_args(argv)


def load_constants(path):
    if path:
        data = json.loads(pathlib.Path(path).read_text())
        return data, path
    level = store.shipped_level_for(cost_model.in_force().isa)
    return store.shipped(level), f"shipped {level}"


def read_layers(path):
    """{layer: (suite, descriptor, threads, {contender: seconds})} of one bench CSV; a
    layer whose name an earlier one of another shape took (the 1d suite has two
    1d_gconv_channel-block-4) is named with its descriptor."""
    layers = {}
    with open(path, newline="") as handle:
        for row in csv.DictReader(handle):
            if int(row["mb"]) != 1 or not row["median_ms"]:
                continue
            entry = layers.setdefault((row["layer"], row["descriptor"]),
                                      (row["suite"], row["descriptor"], int(row["threads"]), {}))
            entry[3][row["contender"]] = float(row["median_ms"]) * 1e-3
    named = {}
    for (name, descriptor), entry in layers.items():
        named[f"{name} ({descriptor})" if name in named else name] = entry
    return named


def features(problem) -> list[str]:
    """The problem's features the report groups by."""
    tags = []
    if problem.rank == 1:
        tags.append("1-D")
    elif problem.rank == 3:
        tags.append("3-D")
    if problem.is_depthwise:
        tags.append("depthwise")
    elif problem.groups > 1:
        tags.append("grouped")
    if problem.in_channels_per_group <= 4:
        tags.append("small IC")
    if all(k == 1 for k in problem.kernel_shape):
        tags.append("1x1")
    if any(s > 1 for s in problem.strides):
        tags.append("strided")
    if any(d > 1 for d in problem.dilations):
        tags.append("dilated")
    if math.prod(problem.kernel_shape) >= LARGE_KERNEL_TAPS:
        tags.append("large K")
    return tags


def estimates_for(problem, threads, constants, margins):
    """{algorithm: (estimate seconds, compared seconds)} of auto's contenders that the
    constants price (a set without an algorithm leaves it out, as a stale file would)."""
    out = {}
    for algorithm in registry.registered():
        if (algorithm.supports(problem) is not None or not algorithm.auto_for(problem)
                or algorithm.name not in constants):
            continue
        if select.precision_excludes(algorithm, "default", problem) is not None:
            continue
        terms = algorithm.cost(problem, threads).inputs["terms"]
        per_unit = store.constants_at(constants[algorithm.name], threads)
        missing = set(terms) - set(per_unit)
        if missing:
            raise SystemExit(f"the constants have no {algorithm.name} constant for "
                             f"{sorted(missing)}: they were fitted to other cost terms")
        seconds = sum(per_unit[name] * value for name, value in terms.items())
        out[algorithm.name] = (seconds, seconds * (1 + margins.get(algorithm.name, 0.0)))
    return out


def geo_mean(values):
    values = list(values)
    return math.exp(sum(map(math.log, values)) / len(values)) if values else float("nan")


def analyse(paths, data, threads_override, threshold, show_all):
    constants, margins = data["constants"], data.get("selection_margins", {})
    ratios = defaultdict(lambda: defaultdict(list))  # suite -> algorithm -> measured/estimated
    by_feature = defaultdict(lambda: defaultdict(list))  # feature -> algorithm -> ratios
    summary, flagged = [], []
    for path in paths:
        layers = read_layers(path)
        suite_regrets = []
        suite = None
        for name, (suite, descriptor, threads, measured) in layers.items():
            layer = shapes.parse_descriptor(descriptor)
            problem = layer.problem(mb=1)
            threads = threads_override or threads
            estimates = {a: e for a, e in estimates_for(problem, threads, constants,
                                                          margins).items() if a in measured}
            if not estimates:
                continue
            times = {a: measured[a] for a in estimates}
            best = min(times, key=times.__getitem__)
            pick = min(estimates, key=lambda a: estimates[a][1])
            regret = times[pick] / times[best]
            suite_regrets.append(regret)
            tags = features(problem)
            if times[best] < TINY_SECONDS:
                tags.append("tiny")
            for a, (seconds, _) in estimates.items():
                ratios[suite][a].append(times[a] / seconds)
                for tag in tags or ["plain"]:
                    by_feature[tag][a].append(times[a] / seconds)
            ranked = sorted(times, key=times.__getitem__)
            misranked = 1.0
            if len(ranked) > 1:
                first, second = ranked[:2]
                if estimates[second][1] < estimates[first][1]:
                    misranked = times[second] / times[first]
            row = (suite, name, tags, times, estimates, pick, best, regret)
            if show_all or regret > threshold or misranked > threshold:
                flagged.append(row)
        if suite is not None:
            summary.append((suite, len(suite_regrets), geo_mean(suite_regrets),
                            max(suite_regrets), sum(r <= 1.05 for r in suite_regrets)))
    return summary, ratios, by_feature, flagged


def print_report(summary, ratios, by_feature, flagged, label, threshold):
    print(f"constants: {label}")
    print("\npredicted regret (measured time of the estimates' pick / fastest measured)")
    print(f"  {'suite':14s} {'layers':>6s} {'geo-mean':>8s} {'worst':>6s} {'within 5%':>9s}")
    for suite, n, geo, worst, within in summary:
        print(f"  {suite:14s} {n:6d} {geo:8.3f} {worst:6.2f} {within:5d}/{n}")
    algorithms = sorted({a for per in ratios.values() for a in per})
    print("\nmeasured / estimated per algorithm: median [10%-90%] over the suite's layers")
    print(f"  {'suite':14s} " + " ".join(f"{a:>19s}" for a in algorithms))
    for suite, per in ratios.items():
        print(f"  {suite:14s} " + " ".join(f"{_spread(per.get(a)):>19s}" for a in algorithms))
    print("\nmeasured / estimated by layer feature (a layer counts under each of its features)")
    print(f"  {'feature':14s} " + " ".join(f"{a:>19s}" for a in algorithms))
    for tag in sorted(by_feature):
        per = by_feature[tag]
        print(f"  {tag:14s} " + " ".join(f"{_spread(per.get(a)):>19s}" for a in algorithms))
    print(f"\nlayers with regret > {threshold} or the two fastest misranked by > {threshold} "
          f"(times in us; m/e = measured / estimated)")
    for _suite, name, tags, times, estimates, pick, best, regret in flagged:
        print(f"  {name} [{', '.join(tags) or 'plain'}] regret {regret:.2f}: pick {pick}, "
              f"fastest {best}")
        for a in sorted(times, key=times.__getitem__):
            print(f"      {a:10s} measured {times[a] * 1e6:9.1f}  estimated "
                  f"{estimates[a][0] * 1e6:9.1f}  m/e {times[a] / estimates[a][0]:5.2f}")


def _spread(values):
    if not values:
        return "-"
    values = sorted(values)
    low, high = values[int(0.1 * (len(values) - 1))], values[int(0.9 * (len(values) - 1))]
    return f"{statistics.median(values):.2f} [{low:.2f}-{high:.2f}]"


def main(argv=None):
    args = parse_args(argv)
    data, label = load_constants(args.constants)
    paths = args.csv or [str(HERE.parent / p) for p in DEFAULT_CSVS]
    if args.baseline:
        base_data, base_label = load_constants(args.baseline)
        before = analyse(paths, base_data, args.threads, args.threshold, False)[0]
        after = analyse(paths, data, args.threads, args.threshold, False)[0]
        print(f"predicted regret, geo-mean / worst: before = {base_label}; after = {label}")
        print(f"  {'suite':14s} {'layers':>6s} {'before':>12s} {'after':>12s}")
        for (suite, n, geo0, worst0, _), (_, _, geo1, worst1, _) in zip(before, after):
            print(f"  {suite:14s} {n:6d} {geo0:7.3f} /{worst0:4.2f} {geo1:7.3f} /{worst1:4.2f}")
        print()
    report = analyse(paths, data, args.threads, args.threshold, args.layers)
    print_report(*report, label, args.threshold)
    return 0


if __name__ == "__main__":
    sys.exit(main())
