"""Refit stored calibrations' timings with other prior weights, and score each fit.

    python bench/refit_calibration.py --prior-weights 0,1,3,10,30 \\
        --suite bench/results/vgg_19_2026-11-28_zen3-avx2-calibrated5.csv ... \\
        CALIBRATION.json [CALIBRATION.json ...]

A calibration file (``python -m convlab calibrate``) keeps the median time of every
contender it timed. For each file and each weight this rebuilds those timings (the cost
hooks of this checkout count their terms), fits the constants as ``convlab.calibrate``
does with that prior weight (:data:`convlab.dispatch.calibration.run.PRIOR_WEIGHT`), and
prints the regret the calibration judges the fit by (each problem held out of the fit)
beside the shipped set's, whether the calibration keeps the shipped set by its rule (the
case-by-case log ratio, :func:`convlab.dispatch.calibration.run.paired_log_regret`) and
whether it would by the geo-means alone, and, with ``--suite``, the regret the fit's picks
would have on those bench CSVs (``bench/regret_analysis.py``'s prediction), so that a weight is
chosen on what the calibration can see and checked on the networks it serves.
"""
from __future__ import annotations

import argparse
import itertools
import json
import math
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import regret_analysis  # noqa: E402

from convlab.dispatch.calibration import fit, run, store  # noqa: E402


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("calibrations", nargs="+", help="calibration JSON files")
    parser.add_argument("--prior-weights", default="0,10",
                        help="comma-separated prior weights to fit with")
    parser.add_argument("--suite", action="append", default=[], dest="suites",
                        help="a bench CSV to predict the fit's regret on (repeatable)")
    parser.add_argument("--constants", action="append", default=[], metavar="ALGORITHM",
                        help="also print this algorithm's fitted constants (repeatable)")
    parser.add_argument("--unrefined", action="store_true",
                        help="also fit each weight without the refining step")
    return parser.parse_args(argv)


def stored_timings(path):
    """The calibration's timings as fit rows, the shipped set of its ISA level, the
    algorithms it priced and its thread count."""
    data = json.loads(pathlib.Path(path).read_text())
    shipped = store.shipped(store.shipped_level_for(str(data["key"]["isa"])))
    return run.stored_timings(data), shipped, list(shipped["constants"]), int(
        data["key"]["threads"])


def suite_regret(constants_set, suites, threads):
    """regret_analysis's predicted regret per suite CSV: {suite: (geo-mean, worst)}."""
    summary = regret_analysis.analyse(suites, constants_set, threads, 1.15, False)[0]
    return {suite: (geo, worst) for suite, _, geo, worst, _ in summary}


def main(argv=None):
    args = parse_args(argv)
    weights = [float(w) for w in args.prior_weights.split(",")]
    refinements = (True, False) if args.unrefined else (True,)
    for path in args.calibrations:
        timings, shipped, priced, threads = stored_timings(path)
        margins = dict(shipped.get("selection_margins", {}))
        by_shipped = fit.regrets(timings, fit.estimated(timings, shipped["constants"]),
                                 margins)
        base = fit.summary_of(by_shipped.values())
        print(f"{path}: {len(timings)} timings at {threads} threads; shipped set's regret "
              f"{base['geo_mean']:.4f} / {base['worst']:.2f}")
        if args.suites:
            shown = suite_regret(shipped, args.suites, threads)
            print("  shipped      suites " + "  ".join(
                f"{s} {g:.3f}/{w:.2f}" for s, (g, w) in shown.items()))
        for name in args.constants:
            print(f"  shipped      {name} {format_constants(shipped['constants'], name, threads)}")
        for weight, refined in itertools.product(weights, refinements):
            fitted_on = run.fitter(shipped, priced, threads, weight, refined)
            per_case = fit.held_out_regrets(timings,
                                            lambda subset: fitted_on(subset).constants)
            held_out = fit.summary_of(per_case.values())
            paired = run.paired_log_regret(by_shipped, per_case)
            by_geo_means = base["geo_mean"] < held_out["geo_mean"] - run.KEEP_SHIPPED_BY
            line = (f"  prior {weight:<6g}{'' if refined else ' unrefined'} held out "
                    f"{held_out['geo_mean']:.4f} / {held_out['worst']:.2f}; shipped/held-out "
                    f"{math.exp(paired['mean']):.4f} (se {paired['standard_error']:.4f}): "
                    f"keeps {'shipped' if run._shipped_picks_better(paired) else 'fit'} "
                    f"(by geo-means: {'shipped' if by_geo_means else 'fit'})")
            constants = fitted_on(timings).constants
            if args.suites:
                fitted = json.loads(json.dumps(shipped))
                fitted["constants"] = constants
                shown = suite_regret(fitted, args.suites, threads)
                line += "  suites " + "  ".join(f"{s} {g:.3f}/{w:.2f}"
                                                for s, (g, w) in shown.items())
            for name in args.constants:
                line += f"\n    {name} {format_constants(constants, name, threads)}"
            print(line, flush=True)


def format_constants(constants, name, threads):
    """One algorithm's constants at ``threads``, in one line."""
    return " ".join(f"{term}={value:.4g}" for term, value
                    in store.constants_at(constants[name], threads).items())


if __name__ == "__main__":
    main()
