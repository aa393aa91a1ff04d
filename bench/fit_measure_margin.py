"""Fit the measure margin: how far above the lowest estimate a plan still times a contender.

    python bench/fit_measure_margin.py --threads 1,2 --csv bench/results/plan_timings.csv
    python bench/fit_measure_margin.py --from-csv run1.csv run2.csv --write
    python bench/fit_measure_margin.py --from-csv bench/results/resnet_50_*.csv ...
        # the forced plans (plan:<name>) of `python -m convlab bench --csv` files

A plan (``convlab.Convolution``, ``choose="measure"``) times, on its first call for a
shape, the two contenders with the lowest prepared-weights estimates
(``cost_model.compared_seconds(..., prepared=True)``) and those within ``1 + measure_margin``
of the lowest, and keeps the fastest. The margin is what the estimates' errors need: this
script times every auto contender as a plan would run it (``Convolution(weights,
algorithm=name)``, weights prepared once, calls after the first; the contenders of a layer
take turns inside shared blocks, as the bench's mixed schedule does) on the benchdnn
suites, and for each layer with two or more contenders computes

    needed = (estimate of the fastest measured contender) / (lowest estimate)

(1 where the fastest has one of the two lowest estimates, which are timed anyway)

where a contender within ``--tie`` of the fastest time counts as fastest (runs of one
kernel differ by that much, and picking either costs nothing worth measuring). The margin
is the ``--coverage`` quantile of ``needed`` minus 1, rounded up to a whole percent: 99% by
default, because plans are held to running within 1.10x of the fastest on every layer; at
95% the last twelfth of the layers (tiny 1-D and dilated layers whose estimates are 3-4x
their times) were left to the estimates, and the plans' worst layer ran 1.34x the fastest.
The cap on contenders (``convlab.dispatch.measure.MAX_CONTENDERS``) and the time limit keep
the first call bounded however wide the margin. It prints the quantiles, how many
contenders each layer would time with that margin, and the regret (time of the pick /
fastest time) of the estimate-only pick and of the measured pick (every contender within
the margin timed; a plan times at most ``convlab.dispatch.measure.MAX_CONTENDERS``).

Each CSV row keeps the median and the fastest of a contender's calls; ``--statistic``
picks which one is compared (the fastest by default: on a shared machine other jobs only
ever add time). ``--one-shot`` reads bench/fit_cost_model.py's one-shot timings instead and
ranks them by one-shot estimates, as a cross-check of the estimates' spread. With
``--write`` the margin, and the command, data, machine and date of this run, go to
``convlab/dispatch/cost_constants/<level>.json`` (keys ``measure_margin`` and
``measure_margin_source``).
"""
from __future__ import annotations

import argparse
import csv
import datetime
import json
import math
import os
import pathlib
import shlex
import statistics
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import convlab  # noqa: E402
from convlab.cli._bench_results import geo_mean  # noqa: E402
from convlab.cli._bench_tables import cpu_model  # noqa: E402
from convlab.cli.benchmark import progress  # noqa: E402
from convlab.dispatch import cost_model, measure, select  # noqa: E402
from convlab.dispatch.calibration import store  # noqa: E402
from convlab.problem import shapes  # noqa: E402
from convlab.runtime.threads import available_cores  # noqa: E402
from convlab.runtime.timing import time_rotation  # noqa: E402

sys.path.insert(0, str(HERE))
from fit_cost_model import (  # noqa: E402
    DEFAULT_SUITES,
    SHIPPED_DIR,
    git_commit,
    load_timings,
    problem_of,
    store_timings,
)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suites", default=DEFAULT_SUITES)
    parser.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    parser.add_argument("--mb", default="1", help="comma-separated minibatches")
    parser.add_argument("--repeats", type=int, default=5,
                        help="fewest timed calls per contender and layer")
    parser.add_argument("--budget", type=float, default=0.3,
                        help="seconds each layer's shared block runs at least (more calls "
                             "on small layers)")
    parser.add_argument("--csv", help="write the timings here")
    parser.add_argument("--from-csv", nargs="+",
                        help="fit from stored timings instead of timing; with several files "
                             "(runs), each timing is the median over them")
    parser.add_argument("--tie", type=float, default=0.03,
                        help="a contender this fraction or less slower than the fastest "
                             "counts as fastest")
    parser.add_argument("--coverage", type=float, default=0.99,
                        help="share of the layers whose fastest contender the margin must "
                             "include")
    parser.add_argument("--statistic", choices=("min", "median"), default="min",
                        help="which time of a contender's calls to compare: the fastest "
                             "(default; other jobs on a shared machine only add time) or "
                             "the median")
    parser.add_argument("--one-shot", action="store_true",
                        help="with --from-csv: the timings are one-shot calls "
                             "(bench/fit_cost_model.py's CSVs), so rank by one-shot "
                             "estimates (a cross-check of the estimates' spread)")
    parser.add_argument("--write", action="store_true",
                        help="store the margin in the shipped constants of the effective "
                             "ISA level (convlab/dispatch/cost_constants/<level>.json)")
    args = parser.parse_args(argv)
    if not 0 < args.coverage <= 1 or args.tie < 0 or args.repeats < 1 or args.budget < 0:
        parser.error("--coverage must be in (0, 1], --tie and --budget >= 0, --repeats >= 1")
    if args.one_shot and (args.write or not args.from_csv):
        parser.error("--one-shot reads stored one-shot timings (--from-csv) and writes nothing")
    return args


def contender_names(problem, threads):
    """The algorithms a plan with algorithm="auto" chooses among on ``problem``."""
    return [row.name for row in select.contenders(select.assess(problem, threads))]


def time_layer(layer, mb, threads, repeats, budget):
    """Median seconds of a call of each contender's plan after its first call."""
    src, weights, _ = layer.arrays(mb, seed=0)
    kwargs = layer.convolve_kwargs()
    problem = layer.problem(mb=mb)
    names = contender_names(problem, threads)
    plans = [convlab.Convolution(weights, algorithm=name, threads=threads, **kwargs)
             for name in names]
    calls = [lambda plan=plan: plan(src) for plan in plans]
    for call in calls:
        call()  # prepares the weights
    times = time_rotation(calls, repeats, min_seconds=budget)
    return {name: (statistics.median(t), min(t)) for name, t in zip(names, times)}, \
        len(times[0])


def collect(args):
    rows = []
    for suite in args.suites.split(","):
        for mb in (int(m) for m in args.mb.split(",")):
            for layer in progress(shapes.load_suite(suite, mb=mb), f"{suite} mb{mb}"):
                for threads in (int(t) for t in args.threads.split(",")):
                    medians, runs = time_layer(layer, mb, threads, args.repeats, args.budget)
                    for name, (median, fastest) in medians.items():
                        rows.append(dict(suite=suite, layer=layer.name, mb=mb, threads=threads,
                                         algorithm=name, seconds=median, min_seconds=fastest,
                                         runs=runs))
    return rows


def _plan_rows(handle):
    """(suite, layer, mb, threads, algorithm, fastest seconds, median seconds) per row of
    this script's CSV, or per forced plan (``plan:<name>``) of a ``python -m convlab
    bench --csv`` file, whose plans run exactly as a plan's measured first call does."""
    for r in csv.DictReader(handle):
        if "contender" not in r:
            yield (r["suite"], r["layer"], int(r["mb"]), int(r["threads"]), r["algorithm"],
                   float(r["min_seconds"]), float(r["seconds"]))
        elif r["contender"].startswith("plan:") and r["median_ms"]:
            yield (r["suite"], r["layer"], int(r["mb"]), int(r["threads"]),
                   r["contender"][len("plan:"):], float(r["min_ms"]) / 1e3,
                   float(r["median_ms"]) / 1e3)


def load_plan_timings(paths, statistic):
    """Rows of stored CSVs (this script's, or the bench's forced plans), one per layer,
    batch, threads and algorithm: with ``statistic="min"`` the least of every run's
    fastest call (on a loaded machine other jobs only ever add time), else the median of
    the runs' medians."""
    grouped = {}
    for path in paths:
        with open(path, newline="") as handle:
            for suite, layer, mb, threads, name, fastest, median in _plan_rows(handle):
                value = fastest if statistic == "min" else median
                grouped.setdefault((suite, layer, mb, threads, name), []).append(value)
    pick = min if statistic == "min" else statistics.median
    return [dict(suite=suite, layer=layer, mb=mb, threads=threads, algorithm=name,
                 seconds=pick(times))
            for (suite, layer, mb, threads, name), times in grouped.items()]


def layer_cases(rows, prepared=True):
    """Per (suite, layer, mb, threads) with two or more contenders: {name: (measured
    seconds, compared estimate)}, prepared-weights estimates unless ``prepared`` is False."""
    groups = {}
    for r in rows:
        groups.setdefault((r["suite"], r["layer"], r["mb"], r["threads"]), []).append(r)
    cases = {}
    for key, members in groups.items():
        if len(members) < 2:
            continue
        problem, threads = members[0]["problem"], key[3]
        cases[key] = {
            r["algorithm"]: (r["seconds"], cost_model.compared_seconds(
                r["algorithm"], convlab.dispatch.registry.get_algorithm(r["algorithm"])
                .cost(problem, threads), prepared=prepared))
            for r in members}
    return cases


def needed_ratio(case, tie):
    """Lowest estimate among the (tied) fastest contenders over the lowest estimate; 1
    where one of them is among the ``measure.RUNNERS_TIMED`` lowest estimates, which a
    plan times whatever the margin."""
    fastest = min(seconds for seconds, _ in case.values())
    best_estimate = min(estimate for _, estimate in case.values())
    tied = [estimate for seconds, estimate in case.values() if seconds <= fastest * (1 + tie)]
    if min(tied) <= always_timed_estimate(case):
        return 1.0
    return min(tied) / best_estimate


def always_timed_estimate(case):
    """The highest estimate a plan times whatever the margin (the runner-up's)."""
    return measure.always_timed_estimate(estimate for _, estimate in case.values())


def quantile(values, q):
    """The smallest value v with at least ``q`` of ``values`` at or below it."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def with_margin(case, margin):
    """(contenders timed, regret of the estimate-only pick, regret of the measured pick)."""
    fastest = min(seconds for seconds, _ in case.values())
    best_estimate = min(estimate for _, estimate in case.values())
    timed = [seconds for seconds, estimate in case.values()
             if estimate <= max(best_estimate * (1 + margin), always_timed_estimate(case))]
    estimated_pick = min(case.values(), key=lambda v: v[1])[0]
    return len(timed), estimated_pick / fastest, min(timed) / fastest


def report(cases, tie, coverage):
    ratios = {key: needed_ratio(case, tie) for key, case in cases.items()}
    values = list(ratios.values())
    print(f"\n{len(values)} timings (layer, batch, threads) with two or more contenders; "
          f"needed = estimate of "
          f"the fastest (within {tie:.0%}) / lowest estimate")
    for q in (0.5, 0.8, 0.9, 0.95, 0.98, 1.0):
        print(f"  {q:4.0%} of layers need at most {quantile(values, q):.3f}")
    print("  largest needs:")
    for key, ratio in sorted(ratios.items(), key=lambda item: -item[1])[:8]:
        suite, layer, mb, threads = key
        times = ", ".join(f"{n} {s * 1e3:.3f} ms (est {e * 1e3:.3f})"
                          for n, (s, e) in sorted(cases[key].items(), key=lambda i: i[1][0]))
        print(f"    {ratio:.3f} {layer} mb{mb} threads {threads}: {times}")
    margin = math.ceil(round((quantile(values, coverage) - 1) * 100, 6)) / 100
    print(f"\nmargin covering {coverage:.0%} of them: {margin:.2f}")
    print(f"\n{'margin':>6} {'covered':>9} {'timed: mean':>11} {'max':>4} "
          f"{'estimate regret: geo':>20} {'worst':>6} {'measured regret: geo':>20} {'worst':>6}")
    for trial in sorted({0.0, 0.05, 0.1, 0.2, 0.3, 0.5, margin}):
        outcome = [with_margin(case, trial) for case in cases.values()]
        covered = sum(ratio <= 1 + trial + 1e-12 for ratio in values)
        print(f"{trial:6.2f} {covered:4d}/{len(values):<4d} "
              f"{statistics.fmean(o[0] for o in outcome):11.2f} {max(o[0] for o in outcome):4d} "
              f"{geo_mean([o[1] for o in outcome]):20.3f} {max(o[1] for o in outcome):6.2f} "
              f"{geo_mean([o[2] for o in outcome]):20.3f} {max(o[2] for o in outcome):6.2f}")
    return margin


def main(argv=None):
    args = parse_args(argv)
    command = "python bench/fit_measure_margin.py " + " ".join(map(shlex.quote, sys.argv[1:]))
    print(f"command: {command}")
    print(f"machine: {cpu_model()}, {available_cores()} cores available; "
          f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}; load average "
          f"{'/'.join(f'{v:.2f}' for v in os.getloadavg())}")
    print(f"estimates: {cost_model.source()}")
    if args.from_csv:
        rows = (load_timings(args.from_csv) if args.one_shot
                else load_plan_timings(args.from_csv, args.statistic))
        data = " + ".join(args.from_csv)
    else:
        collected = collect(args)
        data = args.csv or "(not stored)"
        if args.csv:
            store_timings(args.csv, collected)
        rows = [dict(r, seconds=r["min_seconds"] if args.statistic == "min" else r["seconds"])
                for r in collected]
    for r in rows:
        r["problem"] = problem_of(r)
    margin = report(layer_cases(rows, prepared=not args.one_shot), args.tie, args.coverage)
    print(f"load average after: {'/'.join(f'{v:.2f}' for v in os.getloadavg())}")
    if args.write:
        # the shipped set this level uses (the estimates above came from it), never a
        # calibration that may be in force
        level = store.shipped_level_for(convlab.runtime.cpu.effective_isa())
        path = SHIPPED_DIR / f"{level}.json"
        stored = json.loads(path.read_text())
        stored["measure_margin"] = margin
        stored["measure_margin_source"] = {
            "command": command, "data": data, "commit": git_commit(),
            "date": datetime.date.today().isoformat(),
            "machine": f"{cpu_model()}, {available_cores()} cores",
            "method": f"{args.coverage:.0%} quantile of (estimate of the fastest within "
                      f"{args.tie:.0%}, by {args.statistic} time) / (lowest estimate), "
                      f"prepared weights, layers with two or more contenders",
        }
        path.write_text(json.dumps(stored, indent=1) + "\n")
        print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
