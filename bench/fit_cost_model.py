"""Fit the selector's shipped cost constants for this machine's ISA level.

    python bench/fit_cost_model.py --design-budget 300 --threads 1,2 --write
    python bench/fit_cost_model.py --threads 1,2 --csv bench/results/cost_timings.csv --write
    # refit stored timings only:
    python bench/fit_cost_model.py --from-csv bench/results/design_timings_avx2_run2.csv
    python bench/fit_cost_model.py --from-csv design.csv --preparation --write
    python bench/fit_cost_model.py --design-budget 60 --algorithms fft --provisional \
        "..." --write    # one algorithm's constants alone (a new one), marked provisional

Each algorithm's ``cost`` hook counts the work of a run as named terms (see
``convlab/dispatch/cost_model.py``); the estimate is the sum of terms times per-term constants.
The timings come from one of:

* ``--design-budget S``: the problems of ``convlab.dispatch.calibration.design``, timed as
  ``convlab.calibrate`` times them (one-shot calls and plans, interleaved blocks, medians),
  for S seconds per thread count: the calibration of a user's machine with a longer
  budget;
* the benchdnn suites (default): ``convlab.convolve(..., algorithm=name)`` (one-shot
  calls, as "auto" serves them; each algorithm's runs in a block after a pause) on every
  layer at each thread count.

The fit is ``convlab.dispatch.calibration.fit`` (the one ``convlab.calibrate`` uses): non-negative
constants minimising the squared *relative* error of the estimates (scipy's NNLS on rows
scaled by 1/measured time), each suite and batch (each design problem) weighing the same,
one algorithm at a time. It prints, per suite and thread count, the regret of the
model's picks (time of the pick / fastest time) with the shipped constants of this level
and with the fitted ones, then sets the selection margin of each ``--margin-for``
algorithm: the one on MARGIN_GRID with the lowest geo-mean regret (the smallest, on a
tie).

``--algorithms`` times and fits only the named algorithms: ``--write`` then replaces
only their constants and keeps the stored margins and provenance. With ``--relative``
every priced algorithm is timed, and the named ones are fitted to their timings scaled,
problem by problem, by how far the stored constants of the others misestimate those in
the same run (the geometric mean of estimate / measured): a new algorithm's constants
then agree with a set fitted on another day, or under another load, where a plain fit
would rank it against estimates that run slow or fast. The regret printed is that of
the stored set with the new constants in it. ``--provisional TEXT``
stores TEXT under the file's ``"provisional"`` key for them (constants fitted in a hurry,
to be refitted); a later full fit drops the note of every algorithm it refits.

``--preparation`` refits only the weight-preparation terms (weight packing, gathering and
transforms, a one-shot call's fixed cost) of each algorithm from the gap between one-shot
and plan timings of the same problems (the design's plan problems), keeping every other
constant of the stored set: a set fitted before a preparation term existed, or on a CPU
whose weight copies cost otherwise, gains those terms without a full refit.

With ``--write`` the constants and margins go to
``convlab/dispatch/cost_constants/<level>.json``,
the level being the effective one (``convlab.runtime.cpu.effective_isa()``: the widest the
kernels use, capped by ``CONVLAB_MAX_CPU_ISA``), with the CPU model, level, command,
commit and date of this run. Thread counts not fitted keep their stored constants.
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

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import convlab  # noqa: E402
from convlab.cli.benchmark import progress  # noqa: E402
from convlab.dispatch import cost_model, registry, select  # noqa: E402
from convlab.dispatch.calibration import design, fit, run, store  # noqa: E402
from convlab.problem import shapes  # noqa: E402
from convlab.runtime import cpu  # noqa: E402
from convlab.runtime.threads import available_cores  # noqa: E402
from convlab.runtime.timing import time_block  # noqa: E402

DEFAULT_SUITES = "resnet_50,mobilenet_dw,vgg_19,googlenet_v2,3d_unet,1d,dilated"
SHIPPED_DIR = HERE.parent / "convlab" / "dispatch" / store.SHIPPED_DIR
DESIGN_SUITE = "calibration"  # the suite name design timings carry in CSVs


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suites", default=DEFAULT_SUITES)
    parser.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    parser.add_argument("--mb", default="1", help="comma-separated minibatches")
    parser.add_argument("--repeats", type=int, default=7, help="most timed runs per algorithm")
    parser.add_argument("--budget", type=float, default=1.5,
                        help="seconds of timed runs per algorithm and layer; fewer repeats "
                             "(at least 3) on slow layers")
    parser.add_argument("--design-budget", type=float,
                        help="time the calibration design instead of the suites, this many "
                             "seconds per thread count")
    parser.add_argument("--csv", help="write the timings here")
    parser.add_argument("--from-csv", nargs="+",
                        help="refit from stored timings instead of timing; with several files "
                             "(runs), each timing is the median over them")
    parser.add_argument("--margin-for", default="im2col",
                        help="comma-separated algorithms to fit a selection margin for "
                             "('' for none)")
    parser.add_argument("--algorithms",
                        help="comma-separated algorithms to time and fit (default: every "
                             "priced one); --write then replaces only theirs")
    parser.add_argument("--relative", action="store_true",
                        help="with --algorithms: time every priced algorithm and fit the "
                             "named ones on the scale of the stored constants of the others")
    parser.add_argument("--preparation", action="store_true",
                        help="refit only the weight-preparation terms (of --algorithms, "
                             "default every priced one) from the gap between each problem's "
                             "one-shot and plan timings, keeping the stored constants' "
                             "other terms")
    parser.add_argument("--terms",
                        help="comma-separated cost terms: refit only these (of --algorithms, "
                             "default every priced one), keeping the stored set's other "
                             "constants (see convlab.dispatch.calibration.fit.fit_terms)")
    parser.add_argument("--provisional",
                        help="with --algorithms and --write: a note, stored under the file's "
                             "'provisional' key for each of them, of why they must be "
                             "refitted")
    parser.add_argument("--write", action="store_true",
                        help=f"store the fitted constants in "
                             f"{SHIPPED_DIR.relative_to(HERE.parent)}/<level>.json")
    return parser.parse_args(argv)


_ONLY = None  # --algorithms: the names fitted, or None for all
_TIMED = None  # the names timed: _ONLY, or None (all) with --relative


def contenders():
    """The algorithms "auto" chooses among (those timed, when --algorithms says)."""
    return [a for a in registry.registered() if a.auto and (_TIMED is None or a.name in _TIMED)]


def time_layer(layer, mb, threads, repeats, budget):
    """Median seconds of each supporting algorithm, each timed in a block after a pause."""
    src, weights, _ = layer.arrays(mb, seed=0)
    kwargs = layer.convolve_kwargs()
    problem = convlab.problem.params.make_problem(src.shape, src.dtype, weights.shape,
                                                  weights.dtype, **kwargs)
    names = [a.name for a in contenders() if a.supports(problem) is None]

    def call(name):
        convlab.convolve(src, weights, algorithm=name, threads=threads, **kwargs)

    first = {}
    for name in names:
        start = time.perf_counter()
        call(name)  # warm-up: allocations, weight transforms, page faults
        first[name] = time.perf_counter() - start
    runs = max(3, min(repeats, int(budget / max(first.values()))))
    # Blocks after a pause, as the bench times them (see convlab.cli.benchmark.bench_layer):
    # alternating call by call, one algorithm's spinning OpenMP or BLAS workers slowed the
    # next one's call, and the fit learnt that contention instead of the algorithms.
    medians = {name: statistics.median(time_block(lambda: call(name), runs))
               for name in names}
    return problem, medians, runs


def collect_suites(args):
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
                                         algorithm=name, mode="oneshot", seconds=seconds,
                                         runs=runs))
    return rows


def collect_design(args):
    """The design's timings at each thread count, ``--design-budget`` seconds each."""
    rows = []
    priced = [name for name in store.shipped(store.shipped_level_for(cpu.effective_isa()))[
        "constants"] if _TIMED is None or name in _TIMED]
    for threads in (int(t) for t in args.threads.split(",")):
        bar = run.Progress(args.design_budget)
        measured = run.time_design(time.perf_counter() + args.design_budget, threads, priced,
                                   bar)
        bar.close(f"{threads} thread(s): {len(measured.problems)} problems, "
                  f"{measured.rounds} rounds")
        print(f"design at {threads} thread(s): {len(measured.problems)} problems, "
              f"{measured.rounds} rounds; left out: {', '.join(measured.skipped) or 'none'}")
        batch = {p.name: p.layer().mb for p in design.DESIGN}
        for c in measured.contenders:
            rows.append(dict(suite=DESIGN_SUITE, layer=c.problem, mb=batch[c.problem],
                             threads=threads,
                             algorithm=c.algorithm, mode=c.mode,
                             seconds=statistics.median(c.samples), runs=len(c.samples)))
    return rows


def store_timings(path, rows) -> None:
    """Write timing rows (dicts sharing the first row's keys) as a CSV that
    :func:`load_timings` and ``--from-csv`` read back."""
    pathlib.Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def load_timings(paths):
    """Rows of stored timing CSVs; a layer, algorithm, thread count and mode timed in
    several runs becomes one row holding the median of its runs' seconds (a single run's
    timing of a small layer moves by up to 1.3x between runs, so the fit and its regret
    read medians, not whichever run came first). ``python -m convlab bench --csv`` files
    are read too: their one-shot medians of the priced algorithms."""
    grouped = {}
    priced = priced_algorithms()
    for path in paths:
        with open(path, newline="") as handle:
            for r in (bench_row_as_timing(row, priced) for row in csv.DictReader(handle)):
                if r is None:
                    continue
                key = (r["suite"], r["layer"], int(r["mb"]), int(r["threads"]), r["algorithm"],
                       r.get("mode") or "oneshot")
                grouped.setdefault(key, []).append(float(r["seconds"]))
    return [dict(suite=suite, layer=layer, mb=mb, threads=threads, algorithm=name, mode=mode,
                 seconds=statistics.median(times), files=len(times))
            for (suite, layer, mb, threads, name, mode), times in grouped.items()]


def bench_row_as_timing(row, priced):
    """A row of a timing CSV as it is; one of a bench CSV (contender, median_ms) as a
    one-shot timing row, or None for a contender that is not in ``priced`` (auto, plans,
    peers) or did not run."""
    if "algorithm" in row:
        return row
    name = row["contender"]
    if not row.get("median_ms") or name not in priced:
        return None
    return dict(suite=row["suite"], layer=row["layer"], mb=row["mb"], threads=row["threads"],
                algorithm=name, mode="oneshot", seconds=float(row["median_ms"]) / 1e3)


def priced_algorithms():
    """The algorithms the shipped sets price (auto's contenders)."""
    return {a.name for a in registry.registered() if a.auto}


def problem_of(row):
    if row["suite"] == DESIGN_SUITE:
        layer = next(p.layer() for p in design.DESIGN if p.name == row["layer"])
    else:
        layer = next(candidate for candidate in shapes.load_suite(row["suite"], mb=int(row["mb"]))
                     if candidate.name == row["layer"])
    return layer.problem(mb=int(row["mb"]))


def timing_of(row):
    """A CSV row as a fit.Timing: the cost hook's terms (a plan's without the weight
    preparation), grouped by suite and batch (each design problem on its own)."""
    problem = problem_of(row)
    algorithm = registry.get_algorithm(row["algorithm"])
    terms = dict(algorithm.cost(problem, row["threads"]).inputs["terms"])
    if row["mode"] == "plan":
        terms = {t: 0.0 if t in cost_model.PREPARATION_TERMS else v for t, v in terms.items()}
    case = f"{row['suite']}:{row['layer']}:mb{row['mb']}:t{row['threads']}:{row['mode']}"
    group = case if row["suite"] == DESIGN_SUITE else f"{row['suite']}:mb{row['mb']}"
    return fit.Timing(row["algorithm"], row["threads"], terms, row["seconds"], group=group,
                      case=case,
                      contender=select.precision_excludes(algorithm, "default", problem) is None)


def evaluate(rows, timings, constants, label, margins=None):
    """How the model's picks fare against the measured fastest, per suite and thread count."""
    regret = fit.regrets(timings, fit.estimated(timings, constants), margins)
    summary = {}
    for r, t in zip(rows, timings):
        if t.case in regret:
            summary.setdefault((r["suite"], r["threads"], r["mb"]), {})[t.case] = regret[t.case]
    print(f"\n{label}: regret of the model's pick (time of pick / fastest measured)")
    print(f"  {'suite':14s} {'thr':>3s} {'mb':>3s} {'cases':>6s} {'geo-mean':>8s} "
          f"{'worst':>6s} {'within 5%':>9s}")
    everything = []
    for (suite, threads, mb), by_case in sorted(summary.items()):
        values = list(by_case.values())
        everything += values
        print(f"  {suite:14s} {threads:3d} {mb:3d} {len(values):6d} "
              f"{fit.geo_mean(values):8.3f} {max(values):6.2f} "
              f"{sum(r <= 1.05 for r in values):5d}/{len(values)}")
    if everything:
        print(f"  {'all':14s} {'':3s} {'':3s} {len(everything):6d} "
              f"{fit.geo_mean(everything):8.3f} {max(everything):6.2f} "
              f"{sum(r <= 1.05 for r in everything):5d}/{len(everything)}")


def git_commit():
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=HERE, text=True,
                              capture_output=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def write_shipped(level, constants, margins, command, data, only=None, provisional=None,
                  method=fit.METHOD):
    """Merge the fitted thread counts into the level's shipped set, with this run's
    provenance; with ``only`` (some algorithms), only their constants, keeping the stored
    margins and provenance, and ``provisional`` noted for each of them."""
    path = SHIPPED_DIR / f"{level}.json"
    if path.exists():
        stored = json.loads(path.read_text())
    else:
        # A level's first set: the operations this fit does not time (8-bit convolution)
        # keep the constants the level used until now, those of the set it fell back to.
        before = json.loads((SHIPPED_DIR / f"{store.shipped_level_for(level)}.json").read_text())
        stored = {"constants": {}, **{section: before[section]
                                      for section in cost_model.OPERATION_SECTIONS
                                      if section in before}}
    notes = stored.get("provisional", {})
    for name, by_threads in constants.items():
        stored["constants"].setdefault(name, {}).update(by_threads)
        notes.pop(name, None)  # refitted: no longer provisional
    if only is not None:
        for name in constants:
            if provisional:
                notes[name] = (f"{provisional} (timings: {data}; "
                               f"{datetime.date.today().isoformat()}, {cpu.cpu_model()})")
        if notes:
            stored["provisional"] = notes
        else:
            stored.pop("provisional", None)
        # the source names the full fit; each later refit of some algorithms says its own
        stored.setdefault("refits", []).append({
            "algorithms": sorted(constants), "command": command, "data": data,
            "commit": git_commit(), "date": datetime.date.today().isoformat(),
            "machine": f"{cpu.cpu_model()}, {available_cores()} cores", "method": method})
        path.write_text(json.dumps(stored, indent=1) + "\n")
        return path
    if notes:
        stored["provisional"] = notes
    else:
        stored.pop("provisional", None)
    stored.pop("refits", None)  # this fit's source covers every algorithm
    stored["selection_margins"] = margins
    stored["source"] = {
        "isa": level, "cpu_model": cpu.cpu_model(), "command": command, "data": data,
        "commit": git_commit(), "date": datetime.date.today().isoformat(),
        "machine": f"{cpu.cpu_model()}, {available_cores()} cores",
        "method": fit.METHOD,
    }
    # keys other fits own (the plans' measure margin) stay as they are
    stored = {"source": stored["source"], "constants": stored["constants"],
              "selection_margins": margins,
              **{k: v for k, v in stored.items()
                 if k not in ("source", "constants", "selection_margins")}}
    path.write_text(json.dumps(stored, indent=1) + "\n")
    return path


def relative_timings(timings, constants):
    """The timings of the --algorithms ones, each scaled by the geometric mean, over the
    other algorithms timed in its case, of their estimate (``constants``) / measured;
    cases without another algorithm are left out."""
    estimates = fit.estimated([t for t in timings if t.algorithm not in _ONLY], constants)
    ratios = {}
    for t, seconds in zip([t for t in timings if t.algorithm not in _ONLY], estimates):
        ratios.setdefault(t.case, []).append(seconds / t.seconds)
    scaled = []
    for t in timings:
        if t.algorithm in _ONLY and t.case in ratios:
            scale = fit.geo_mean(ratios[t.case])
            scaled.append(fit.Timing(t.algorithm, t.threads, t.terms, t.seconds * scale,
                                     group=t.group, case=t.case, contender=t.contender))
    return scaled


def prepared_pairs(rows):
    """fit.PreparedPair of each layer, batch, thread count and algorithm (of --algorithms)
    timed both one-shot and as a plan."""
    by_key = {}
    for r in rows:
        if _ONLY is None or r["algorithm"] in _ONLY:
            key = (r["suite"], r["layer"], r["mb"], r["threads"], r["algorithm"])
            by_key.setdefault(key, {})[r["mode"]] = r
    pairs = []
    for (_, _, _, threads, name), modes in sorted(by_key.items()):
        if "oneshot" in modes and "plan" in modes:
            terms = registry.get_algorithm(name).cost(problem_of(modes["oneshot"]),
                                                      threads).inputs["terms"]
            pairs.append(fit.PreparedPair(
                name, threads, {t: v for t, v in terms.items()
                                if t in cost_model.PREPARATION_TERMS},
                modes["oneshot"]["seconds"], modes["plan"]["seconds"]))
    return pairs


def refit_terms(args, rows, timings, level, shipped_level, before, command, data):
    """--terms: the stored set with the named terms of --algorithms refitted."""
    names = [n for n in args.terms.split(",") if n]
    refitted = fit.fit_terms([t for t in timings if _ONLY is None or t.algorithm in _ONLY],
                             before["constants"], names)
    if not refitted:
        raise SystemExit(f"--terms: no algorithm has timings both counting and not counting "
                         f"{', '.join(names)}")
    print(f"\nrefit of {', '.join(names)}:")
    for name, by_threads in refitted.items():
        for threads, values in by_threads.items():
            old = store.constants_at(before["constants"][name], int(threads))
            print(f"  {name:10s} threads {threads}: " + ", ".join(
                f"{t} {old.get(t, 0.0):.4g} -> {values.get(t, 0.0):.4g}" for t in names))
    return compare_and_write(args, rows, timings, level, shipped_level, before, command, data,
                             refitted, f"{', '.join(names)} of {', '.join(sorted(refitted))}",
                             fit.TERMS_METHOD)


def compare_and_write(args, rows, timings, level, shipped_level, before, command, data,
                      refitted, what, method):
    """The regret of the stored set and of the set with ``refitted`` (``what`` says which
    constants) in it; with --write, store those alone."""
    margins = before.get("selection_margins")
    evaluate(rows, timings, before["constants"],
             f"shipped {shipped_level} constants ({before['source'].get('date')})", margins)
    merged = {**before["constants"], **refitted}
    evaluate(rows, timings, merged, f"shipped {shipped_level} constants with {what} refitted "
             f"(in-sample)", margins)
    if args.write:
        path = write_shipped(level, refitted, margins, command, data, only=set(refitted),
                             provisional=args.provisional, method=method)
        print(f"\nwrote {path}")
    return 0


def refit_preparation(args, rows, timings, level, shipped_level, before, command, data):
    """--preparation: the stored set with its preparation terms refitted."""
    pairs = prepared_pairs(rows)
    if not pairs:
        raise SystemExit("--preparation needs problems timed both one-shot and as plans "
                         "(the design's plan problems)")
    refitted = fit.fit_preparation(pairs, before["constants"], {"oneshot_call": "call"})
    print(f"\npreparation refit over {len(pairs)} one-shot / plan pairs:")
    for name, by_threads in refitted.items():
        for threads, values in by_threads.items():
            old = store.constants_at(before["constants"][name], int(threads))
            changed = {t: (old.get(t, 0.0), v) for t, v in values.items()
                       if v != old.get(t, 0.0)}
            print(f"  {name:10s} threads {threads}: " + (", ".join(
                f"{t} {a:.4g} -> {b:.4g}" for t, (a, b) in changed.items()) or "unchanged"))
    return compare_and_write(args, rows, timings, level, shipped_level, before, command, data,
                             refitted, f"the preparation of {', '.join(sorted(refitted))}",
                             fit.PREPARATION_METHOD)


def main(argv=None):
    args = parse_args(argv)
    global _ONLY
    _ONLY = None if not args.algorithms else set(args.algorithms.split(","))
    global _TIMED
    _TIMED = None if args.relative else _ONLY
    if args.relative and _ONLY is None:
        raise SystemExit("--relative needs --algorithms")
    command = "python bench/fit_cost_model.py " + " ".join(map(shlex.quote, sys.argv[1:]))
    forced = {k: os.environ[k] for k in ("CONVLAB_MAX_CPU_ISA", "CONVLAB_DIRECT_ISA",
                                         "OPENBLAS_CORETYPE", "OMP_WAIT_POLICY")
              if os.environ.get(k)}
    if forced:
        command = " ".join(f"{k}={shlex.quote(v)}" for k, v in forced.items()) + " " + command
    level = cpu.effective_isa()
    print(f"command: {command}")
    print(f"machine: {cpu.cpu_model()}, {available_cores()} cores available; ISA level "
          f"{level} (detected {cpu.detected_isa()}); "
          f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}")
    if not args.from_csv and os.environ.get("OMP_WAIT_POLICY", "").lower() == "passive":
        # The same design at 2 threads ran 1.26-1.33x slower (median) under passive than
        # under the default policy, 1.35-1.93x below 200 us; at 1 thread 1.00-1.05x
        # (design_timings_avx2_2026-11-25_epyc-zen4_fft.csv against ..._oneshot.csv).
        print("warning: OMP_WAIT_POLICY=passive: the constants will price waking sleeping "
              "OpenMP workers, which runs under the default policy mostly do not pay; fit "
              "under the policy the library will run with", file=sys.stderr)
    if args.from_csv:
        rows = load_timings(args.from_csv)
        data = " + ".join(args.from_csv)
    else:
        rows = collect_design(args) if args.design_budget else collect_suites(args)
        data = args.csv or "(not stored)"
        if args.csv:
            store_timings(args.csv, rows)
    # A plan timed in blocks of its own repeats the rotation's plan timing under other
    # caching, and the calibration fits without it too (run.stored_timings)
    rows = [r for r in rows if r["mode"] != run.ALONE]
    timings = [timing_of(r) for r in rows]

    shipped_level = store.shipped_level_for(level)
    before = store.shipped(shipped_level)
    if args.preparation:
        return refit_preparation(args, rows, timings, level, shipped_level, before, command,
                                 data)
    if args.terms:
        return refit_terms(args, rows, timings, level, shipped_level, before, command, data)
    fitted = fit.fit(relative_timings(timings, before["constants"]) if args.relative
                     else [t for t in timings if _ONLY is None or t.algorithm in _ONLY])
    if _ONLY is None:  # the picks weigh every algorithm against the others
        evaluate(rows, timings, fitted.constants,
                 "least-squares constants before refine (in-sample), no margins")
        fitted.constants = fit.refine(timings, fitted.constants)
    print("\nfit (per algorithm, in-sample):")
    for name, by_threads in fitted.residuals.items():
        for threads, r in by_threads.items():
            unpinned = fitted.unpinned[name][threads]
            print(f"  {name:10s} threads {threads}: {r.timings:4d} timings, estimate/measured: "
                  f"median {r.median_ratio:.2f}, 10-90% {r.p10_ratio:.2f}-{r.p90_ratio:.2f}"
                  + (f"; no timing counts {', '.join(unpinned)}" if unpinned else ""))
    evaluate(rows, timings, before["constants"],
             f"shipped {shipped_level} constants ({before['source'].get('date')})",
             before.get("selection_margins"))
    if args.relative:
        merged = {**before["constants"], **fitted.constants}
        evaluate(rows, timings, merged, f"shipped {shipped_level} constants with the fitted "
                 f"{', '.join(sorted(_ONLY))} (in-sample)", before.get("selection_margins"))
    elif _ONLY is not None:
        # stored timings of every algorithm, some refitted: the others keep their constants
        evaluate(rows, timings, {**before["constants"], **fitted.constants},
                 f"shipped {shipped_level} constants with the fitted "
                 f"{', '.join(sorted(_ONLY))} (in-sample)", before.get("selection_margins"))
    else:
        evaluate(rows, timings, fitted.constants, "fitted constants (in-sample), no margins")
    margin_names = [n for n in args.margin_for.split(",") if n]
    if _ONLY is not None:
        margin_names = []  # margins weigh algorithms against each other: a full fit's
    margins, scores = ({}, {}) if _ONLY is not None else fit.fit_margins(
        timings, fitted.constants, margin_names)
    for name, tried in scores.items():
        print(f"\nselection margin of {name}: geo-mean regret over all cases (worst)")
        for margin, geo, worst in tried:
            print(f"  {margin:4.0%}: {geo:.4f} ({worst:.2f})")
        print(f"  chosen: {margins[name]:.0%}")
    if margins:
        evaluate(rows, timings, fitted.constants,
                 f"fitted constants and margins {margins} (in-sample)", margins)
    print("\n" + json.dumps({"constants": fitted.constants, "selection_margins": margins},
                            indent=1))
    if args.write:
        path = write_shipped(level, fitted.constants, margins, command, data,
                             only=_ONLY, provisional=args.provisional)
        print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
