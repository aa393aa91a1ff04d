"""Fit the selector's cost constants from timings of every algorithm on real layers.

    python bench/fit_cost_model.py --threads 1,2 --csv bench/results/cost_timings.csv --write
    python bench/fit_cost_model.py --from-csv bench/results/cost_timings.csv   # refit only

Each algorithm's ``cost`` hook counts the work of a run as named terms (see
``convlab/cost_model.py``); the estimate is the sum of terms times per-term constants.
This script times ``convlab.convolve(..., algorithm=name)`` (one-shot calls, as "auto"
serves them; each algorithm's runs in a block after a pause) on the benchdnn suites at each
thread count, then finds non-negative
constants that minimise the squared *relative* error of the estimates (scipy's NNLS on
rows scaled by 1/measured time), each suite and batch weighing the same, one algorithm at
a time.

It prints, per suite and thread count, how often the fitted model picks the measured
fastest algorithm and its regret (time of the pick / fastest time), next to the
constants in force before the fit.

Then it sets the selection margin of each ``--margin-for`` algorithm (see
``convlab/cost_model.py``): auto picks it only when its estimate is lower than the
others' by that fraction. Each margin on MARGIN_GRID is tried with the fitted constants,
and the one with the lowest geo-mean regret over every timing wins (the smallest, on a
tie). With ``--write`` the constants and margins, and the command, machine and date of
this run, go to ``convlab/cost_constants.json``.
"""
from __future__ import annotations

import argparse
import csv
import datetime
import json
import os
import pathlib
import shlex
import statistics
import subprocess
import sys
import time
from collections import Counter

import numpy as np
from scipy.optimize import nnls

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import convlab  # noqa: E402
from convlab import cost_model, registry, shapes  # noqa: E402
from convlab.benchmark import cpu_model, geo_mean, progress, time_block  # noqa: E402
from convlab.threads import available_cores  # noqa: E402

DEFAULT_SUITES = "resnet_50,mobilenet_dw,vgg_19,googlenet_v2,3d_unet,1d,dilated"
CONSTANTS_PATH = HERE.parent / "convlab" / "cost_constants.json"


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suites", default=DEFAULT_SUITES)
    parser.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    parser.add_argument("--mb", default="1", help="comma-separated minibatches")
    parser.add_argument("--repeats", type=int, default=7, help="most timed runs per algorithm")
    parser.add_argument("--budget", type=float, default=1.5,
                        help="seconds of timed runs per algorithm and layer; fewer repeats "
                             "(at least 3) on slow layers")
    parser.add_argument("--csv", help="write the timings here")
    parser.add_argument("--from-csv", nargs="+",
                        help="refit from stored timings instead of timing; with several files "
                             "(runs), each timing is the median over them")
    parser.add_argument("--margin-for", default="im2col",
                        help="comma-separated algorithms to fit a selection margin for "
                             "('' for none)")
    parser.add_argument("--write", action="store_true",
                        help=f"store the fitted constants in {CONSTANTS_PATH.name}")
    return parser.parse_args(argv)


def contenders():
    """The algorithms "auto" chooses among."""
    return [a for a in registry.registered() if a.auto]


def time_layer(layer, mb, threads, repeats, budget):
    """Median seconds of each supporting algorithm, each timed in a block after a pause."""
    src, weights, _ = layer.arrays(mb, seed=0)
    kwargs = layer.convolve_kwargs()
    problem = convlab.params.make_problem(src.shape, src.dtype, weights.shape, weights.dtype,
                                          **kwargs)
    names = [a.name for a in contenders() if a.supports(problem) is None]

    def call(name):
        convlab.convolve(src, weights, algorithm=name, threads=threads, **kwargs)

    first = {}
    for name in names:
        start = time.perf_counter()
        call(name)  # warm-up: allocations, weight transforms, page faults
        first[name] = time.perf_counter() - start
    runs = max(3, min(repeats, int(budget / max(first.values()))))
    # Blocks after a pause, as the bench times them (see convlab.benchmark.bench_layer):
    # alternating call by call, one algorithm's spinning OpenMP or BLAS workers slowed the
    # next one's call, and the fit learnt that contention instead of the algorithms.
    medians = {name: statistics.median(time_block(lambda: call(name), runs))
               for name in names}
    return problem, medians, runs


def collect(args):
    rows = []
    thread_counts = [int(t) for t in args.threads.split(",")]
    for suite in args.suites.split(","):
        for mb in (int(m) for m in args.mb.split(",")):
            layers = shapes.load_suite(suite, mb=mb)
            for layer in progress(layers, f"{suite} mb{mb}"):
                for threads in thread_counts:
                    _, medians, runs = time_layer(layer, mb, threads, args.repeats, args.budget)
                    for name, seconds in medians.items():
                        rows.append(dict(suite=suite, layer=layer.name, mb=mb, threads=threads,
                                         algorithm=name, seconds=seconds, runs=runs))
    return rows


def load_timings(paths):
    """Rows of stored timing CSVs; a layer, algorithm and thread count timed in several
    runs becomes one row holding the median of its runs' seconds (a single run's timing
    of a small layer moves by up to 1.3x between runs, so the fit and its regret read
    medians, not whichever run came first)."""
    grouped = {}
    for path in paths:
        with open(path, newline="") as handle:
            for r in csv.DictReader(handle):
                key = (r["suite"], r["layer"], int(r["mb"]), int(r["threads"]), r["algorithm"])
                grouped.setdefault(key, []).append(float(r["seconds"]))
    return [dict(suite=suite, layer=layer, mb=mb, threads=threads, algorithm=name,
                 seconds=statistics.median(times), files=len(times))
            for (suite, layer, mb, threads, name), times in grouped.items()]


def problem_of(row):
    layer = next(l for l in shapes.load_suite(row["suite"], mb=int(row["mb"]))
                 if l.name == row["layer"])
    return layer.problem(mb=int(row["mb"]))


def terms_of(name, problem, threads):
    return registry.get_algorithm(name).cost(problem, threads).inputs["terms"]


def fit(rows):
    """Per algorithm and thread count: non-negative constants minimising the sum over
    timings of (estimate / measured - 1)^2 / (timings of its suite at its batch).

    Each suite and batch weighs the same, whatever its number of layers: with a weight per
    layer, GoogLeNet's and the dilated suite's 40 layers each outweighed ResNet-50 at batch
    8, and the pick there regretted 1.067 in-sample on the session-7 timings (1.040 with
    the suites weighed alike; all cases 1.046 against 1.037)."""
    constants = {}
    for name, threads in sorted({(r["algorithm"], r["threads"]) for r in rows}):
        mine = [r for r in rows if r["algorithm"] == name and r["threads"] == threads]
        terms = [terms_of(name, r["problem"], threads) for r in mine]
        term_names = list(terms[0])
        a = np.array([[t[n] / r["seconds"] for n in term_names] for t, r in zip(terms, mine)])
        group_size = Counter((r["suite"], r["mb"]) for r in mine)
        root_weight = np.array([group_size[(r["suite"], r["mb"])] ** -0.5 for r in mine])
        # Columns scaled to unit norm so NNLS sees a well-conditioned problem.
        scale = np.linalg.norm(a, axis=0)
        scale[scale == 0] = 1.0
        x, _ = nnls(a / scale * root_weight[:, None], root_weight)
        constants.setdefault(name, {})[str(threads)] = {
            n: float(f"{v:.4g}") for n, v in zip(term_names, x / scale)}
        estimate = a @ (x / scale)
        print(f"  {name:10s} threads {threads}: {len(mine):4d} timings, estimate/measured: "
              f"median {np.median(estimate):.2f}, 10-90% {np.percentile(estimate, 10):.2f}-"
              f"{np.percentile(estimate, 90):.2f}")
    return constants


def predicted_seconds(constants, name, problem, threads):
    by_threads = constants[name]
    counts = sorted(int(t) for t in by_threads)
    chosen = str(max((t for t in counts if t <= threads), default=counts[0]))
    terms = terms_of(name, problem, threads)
    return sum(by_threads[chosen].get(t, 0.0) * v for t, v in terms.items())


# Margins tried for each --margin-for algorithm: 0 to 20% in steps of 1%.
MARGIN_GRID = [step / 100 for step in range(21)]


def estimates(rows, constants):
    """The model's seconds for each timing in ``rows`` (a cost hook call each)."""
    return [predicted_seconds(constants, r["algorithm"], r["problem"], r["threads"])
            for r in rows]


def regrets(rows, estimated, margins=None):
    """{(suite, threads, mb): [time of the model's pick / fastest measured, per layer]},
    the pick ranking ``estimated`` (one per row) times 1 + each algorithm's margin."""
    margins = margins or {}
    groups = {}
    for r, seconds in zip(rows, estimated):
        groups.setdefault((r["suite"], r["threads"], r["mb"], r["layer"]), []).append(
            (seconds * (1 + margins.get(r["algorithm"], 0.0)), r))
    summary = {}
    for (suite, threads, mb, _), members in groups.items():
        fastest = min(r["seconds"] for _, r in members)
        pick = min(members, key=lambda member: member[0])[1]
        summary.setdefault((suite, threads, mb), []).append(pick["seconds"] / fastest)
    return summary


def fit_margins(rows, constants, names):
    """Each named algorithm's margin on MARGIN_GRID (one after the other, the earlier ones
    kept): the lowest geo-mean regret over every timing, the smallest margin on a tie."""
    estimated = estimates(rows, constants)
    margins = {}
    for name in names:
        print(f"\nselection margin of {name}: geo-mean regret over all timings (worst)")
        scores = []
        for margin in MARGIN_GRID:
            everything = [x for values in regrets(rows, estimated, {**margins, name: margin})
                          .values() for x in values]
            scores.append((round(geo_mean(everything), 4), margin))
            print(f"  {margin:4.0%}: {geo_mean(everything):.4f} ({max(everything):.2f})")
        margins[name] = min(scores)[1]
        print(f"  chosen: {margins[name]:.0%}")
    return margins


def evaluate(rows, constants, label, margins=None):
    """How the model's picks fare against the measured fastest, per suite and thread count."""
    summary = regrets(rows, estimates(rows, constants), margins)
    print(f"\n{label}: regret of the model's pick (time of pick / fastest measured)")
    print(f"  {'suite':14s} {'thr':>3s} {'mb':>3s} {'layers':>6s} {'geo-mean':>8s} "
          f"{'worst':>6s} {'within 5%':>9s}")
    everything = []
    for (suite, threads, mb), values in summary.items():
        everything += values
        print(f"  {suite:14s} {threads:3d} {mb:3d} {len(values):6d} {geo_mean(values):8.3f} "
              f"{max(values):6.2f} {sum(r <= 1.05 for r in values):5d}/{len(values)}")
    print(f"  {'all':14s} {'':3s} {'':3s} {len(everything):6d} {geo_mean(everything):8.3f} "
          f"{max(everything):6.2f} {sum(r <= 1.05 for r in everything):5d}/{len(everything)}")


def git_commit():
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=HERE, text=True,
                              capture_output=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main(argv=None):
    args = parse_args(argv)
    command = "python bench/fit_cost_model.py " + " ".join(map(shlex.quote, sys.argv[1:]))
    print(f"command: {command}")
    print(f"machine: {cpu_model()}, {available_cores()} cores available; "
          f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}")
    if args.from_csv:
        rows = load_timings(args.from_csv)
        data = " + ".join(args.from_csv)
    else:
        rows = collect(args)
        data = args.csv or "(not stored)"
        if args.csv:
            pathlib.Path(args.csv).parent.mkdir(parents=True, exist_ok=True)
            with open(args.csv, "w", newline="") as handle:
                writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
                writer.writeheader()
                writer.writerows(rows)
    for r in rows:
        r["problem"] = problem_of(r)

    before = cost_model.fitted()
    print("\nfit (per algorithm):")
    constants = fit(rows)
    evaluate(rows, before["constants"], f"constants in force before ({cost_model.source()})",
             before.get("selection_margins"))
    evaluate(rows, constants, "fitted constants (in-sample), no margins")
    margins = fit_margins(rows, constants, [n for n in args.margin_for.split(",") if n])
    if margins:
        evaluate(rows, constants, f"fitted constants and margins {margins} (in-sample)",
                 margins)
    print("\n" + json.dumps({"constants": constants, "selection_margins": margins}, indent=1))
    if args.write:
        stored = cost_model.fitted()
        stored["constants"].update(constants)
        stored["selection_margins"] = margins
        stored["source"] = {
            "command": command, "data": data, "commit": git_commit(),
            "date": datetime.date.today().isoformat(),
            "machine": f"{cpu_model()}, {available_cores()} cores",
            "method": "NNLS on relative error, per algorithm; margins on MARGIN_GRID by "
                      "in-sample regret",
        }
        CONSTANTS_PATH.write_text(json.dumps(stored, indent=1) + "\n")
        print(f"\nwrote {CONSTANTS_PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
