"""The fit of the cost constants, from timings whose work terms are known.

Each timing is one algorithm's measured seconds on one problem, with the terms its cost
hook counts there (see :mod:`convlab.dispatch.cost_model`). Per algorithm and thread count, the
constants (one for a family's :data:`SHARED_TERMS`) are the non-negative ones that
minimise the squared *relative* error of the estimates,
``sum((terms . constants / seconds - 1)^2)``, each *group* of timings (a suite at one
batch, say) weighing the same however many timings it holds: scipy's NNLS on rows
scaled by 1 / seconds, columns scaled to unit norm. A calibration adds a *prior*: each
constant's relative distance from the shipped set's, weighed so that only what the
timings pin firmly moves far from it.

Then :func:`refine` rescales the constants, jointly across algorithms, for the regret of
the picks they make on the timings (the least-squares fit judges each algorithm's
estimates alone), and each named algorithm's *selection margin* is chosen on
:data:`MARGIN_GRID`: the
margin with the lowest geo-mean regret (time of the pick / fastest time, over the timings'
*cases*) with the fitted constants, the smallest on a tie.

``convlab.calibrate`` and ``bench/fit_cost_model.py`` both fit through this module.
"""
from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
from scipy.optimize import nnls

from convlab.dispatch.calibration import store

# Margins tried for each algorithm given to fit_margins: 0 to 20% in steps of 1%.
MARGIN_GRID = tuple(step / 100 for step in range(21))

METHOD = ("NNLS on relative error, per algorithm, Winograd's GEMM and U stream shared, "
          "a calibration's held near the shipped constants (prior); "
          "then rescaled for a soft regret of the picks (refine); margins on MARGIN_GRID "
          "by in-sample regret")


@dataclass(frozen=True)
class Timing:
    """One measured run. ``terms``: what the cost hook counts for it (a plan's call: the
    weight-preparation terms zeroed). Timings of one ``group`` weigh as much together as
    those of any other group in the fit; timings of one ``case`` (a problem at a thread
    count, called one way) compete for the pick when regret is measured, those with
    ``contender`` False (not an auto contender there) only count for the fit."""

    algorithm: str
    threads: int
    terms: Mapping[str, float]
    seconds: float
    group: str = ""
    case: str = ""
    contender: bool = True


@dataclass(frozen=True)
class Residuals:
    """How an algorithm's fitted estimates compare with its timings (in-sample)."""

    timings: int
    median_ratio: float  # estimate / measured
    p10_ratio: float
    p90_ratio: float
    rms_relative_error: float

    def to_dict(self) -> dict[str, float]:
        return {"timings": self.timings, "median_ratio": round(self.median_ratio, 4),
                "p10_ratio": round(self.p10_ratio, 4), "p90_ratio": round(self.p90_ratio, 4),
                "rms_relative_error": round(self.rms_relative_error, 4)}


@dataclass
class Fit:
    """``constants[algorithm][str(threads)][term]``; ``residuals`` likewise per algorithm
    and thread count; ``unpinned`` lists the terms no timing counted (they keep the
    fallback's constant, or 0 without one)."""

    constants: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)
    residuals: dict[str, dict[str, Residuals]] = field(default_factory=dict)
    unpinned: dict[str, dict[str, list[str]]] = field(default_factory=dict)


def design_matrix(timings: Sequence[Timing], term_names: Sequence[str]) -> np.ndarray:
    """Rows of ``terms / seconds``: the estimate over the measured time is the row times the
    constants."""
    return np.array([[t.terms.get(n, 0.0) / t.seconds for n in term_names] for t in timings],
                    dtype=float).reshape(len(timings), len(term_names))


# Terms whose constant is one for a family of algorithms, because the same kernel does
# that work in each: Winograd's tile sizes all run the batched GEMM of winograd_gemm.h over
# a stream of U. Fitted apart, F(4)'s GEMM came out 14% dearer per multiply-add than
# F(2)'s, and auto picked F(6) or F(2) over a faster F(4) on VGG-19's 28x28 and 56x56
# layers; fitted as one, the predicted regret on VGG-19 went from 1.058 to 1.029 geo-mean
# with every other suite and the design's in-sample regret unchanged (python
# bench/regret_analysis.py; bench/results/cost_fit_avx2_2026-11-26_epyc-zen4_shared_gemm.txt).
SHARED_TERMS: Mapping[str, tuple[str, ...]] = {"winograd": ("gemm_flops", "u_stream_bytes")}


def family(algorithm: str) -> str:
    """The :data:`SHARED_TERMS` family of an algorithm ("winograd4": "winograd"), or its
    own name when it shares no constant."""
    stem = algorithm.rstrip("0123456789")
    return stem if stem in SHARED_TERMS and stem != algorithm else algorithm


def fit(timings: Iterable[Timing],
        fallback: Mapping[str, Mapping[str, Mapping[str, float]]] | None = None,
        prior: Mapping[str, Mapping[str, Mapping[str, float]]] | None = None,
        prior_weight: float = 0.0) -> Fit:
    """Per algorithm and thread count: non-negative constants minimising the sum over
    timings of (estimate / measured - 1)^2 / (timings of its algorithm in its group).

    Groups weigh the same, whatever their number of timings: with a weight per timing,
    GoogLeNet's and the dilated suite's 40 layers each outweighed ResNet-50 at batch 8,
    and the pick there regretted 1.067 in-sample on the suites' timings (1.040 with the
    suites weighed alike; all cases 1.046 against 1.037;
    bench/results/cost_fit_2026-11-25_epyc_808f0fe.txt).

    The algorithms of a :data:`SHARED_TERMS` family are fitted together, with one constant
    for each shared term and their own for the others: the same sum, over all of them.

    ``fallback`` (a set's ``constants``) gives the constant of a term that no timing
    counts; without it such a term gets 0.

    ``prior`` (a set's ``constants``) adds, for each of its non-zero constants, the term
    ``prior_weight * (constant / prior's - 1)^2`` to the sum: a constant moves from the
    prior's only as far as the timings pull it, so one that few timings pin, or that
    trades off against another along a direction the timings hardly see, stays near it."""
    timings = [t for t in timings if t.seconds > 0]
    result = Fit()
    for kin, threads in sorted({(family(t.algorithm), t.threads) for t in timings}):
        mine = [t for t in timings if family(t.algorithm) == kin and t.threads == threads]
        members = sorted({t.algorithm for t in mine})
        terms_of = {name: list(next(t for t in mine if t.algorithm == name).terms)
                    for name in members}
        shared = [n for n in SHARED_TERMS.get(kin, ()) if all(n in terms_of[m] for m in members)]
        # one column per shared term, then each member's own terms
        columns = [(None, n) for n in shared] + [(m, n) for m in members
                                                  for n in terms_of[m] if n not in shared]
        a = np.array([[t.terms.get(n, 0.0) / t.seconds if owner in (None, t.algorithm)
                       else 0.0 for owner, n in columns] for t in mine],
                     dtype=float).reshape(len(mine), len(columns))
        group_size = Counter((t.algorithm, t.group) for t in mine)
        root_weight = np.array([group_size[(t.algorithm, t.group)] ** -0.5 for t in mine])
        target = np.ones(len(mine))
        if prior is not None and prior_weight > 0:
            anchors = _prior_rows(columns, members, prior, threads)
            a = np.vstack([a, anchors])
            root_weight = np.concatenate([root_weight,
                                          np.full(len(anchors), prior_weight ** 0.5)])
            target = np.concatenate([target, np.ones(len(anchors))])
        # Columns scaled to unit norm so NNLS sees a well-conditioned problem; a column
        # that only the prior counts is not pinned by the timings.
        pinned = np.linalg.norm(a[:len(mine)], axis=0) > 0
        scale = np.linalg.norm(a, axis=0)
        scale[scale == 0] = 1.0
        x, _ = nnls(a / scale * root_weight[:, None], target * root_weight)
        x = x / scale
        ratio_all = a[:len(mine)] @ x
        for name in members:
            values, unpinned = {}, []
            for n in terms_of[name]:
                k = columns.index((None, n) if n in shared else (name, n))
                values[n] = float(f"{x[k]:.4g}")
                if not pinned[k]:
                    unpinned.append(n)
            if fallback is not None and unpinned:
                fallback_set = store.constants_at(fallback.get(name, {}), threads)
                for n in unpinned:
                    values[n] = float(fallback_set.get(n, 0.0))
            ratio = ratio_all[[i for i, t in enumerate(mine) if t.algorithm == name]]
            result.constants.setdefault(name, {})[str(threads)] = values
            result.unpinned.setdefault(name, {})[str(threads)] = unpinned
            result.residuals.setdefault(name, {})[str(threads)] = Residuals(
                len(ratio), float(np.median(ratio)), float(np.percentile(ratio, 10)),
                float(np.percentile(ratio, 90)), float(np.sqrt(np.mean((ratio - 1) ** 2))))
    return result


def _prior_rows(columns, members, prior, threads: int) -> np.ndarray:
    """One row per column whose prior constant is non-zero: 1 / that constant in its
    column, so that the row times the constants is the constant over the prior's."""
    rows = []
    for k, (owner, name) in enumerate(columns):
        value = 0.0
        for member in ([owner] if owner is not None else members):
            value = float(store.constants_at(prior.get(member, {}), threads).get(name, 0.0))
            if value > 0:
                break
        if value > 0:
            row = np.zeros(len(columns))
            row[k] = 1.0 / value
            rows.append(row)
    return np.array(rows, dtype=float).reshape(len(rows), len(columns))


PREPARATION_METHOD = ("NNLS on the relative gap between one-shot and plan timings, per "
                      "algorithm and thread count, over its weight-preparation terms; the "
                      "other constants kept, the fixed cost of a one-shot call unchanged")


@dataclass(frozen=True)
class PreparedPair:
    """One problem timed one-shot and as a plan (weights prepared once) by one algorithm:
    the gap between the two is the preparation a one-shot call pays. ``terms``: the
    preparation terms its cost hook counts there."""

    algorithm: str
    threads: int
    terms: Mapping[str, float]
    oneshot_seconds: float
    plan_seconds: float


def fit_preparation(pairs: Iterable[PreparedPair], constants,
                    fixed_terms: Mapping[str, str]) -> dict[str, dict[str, dict[str, float]]]:
    """Each paired algorithm's constants (``constants``, a set's) with only its
    preparation terms refitted, per thread count: the non-negative ones minimising the
    squared error of (one-shot - plan) / one-shot over its pairs.

    A full fit prices preparation from one-shot timings mostly, where it hides among the
    larger terms; the gap between the two ways of calling the same problem isolates it
    without moving the rest of a set fitted on other timings. ``fixed_terms`` maps a
    per-one-shot fixed term to the per-call one it sits on top of (``oneshot_call`` to
    ``call``): the sum of the two, the fixed cost of a one-shot call the full fit
    measured, is kept, so that only a plan's fixed cost changes with it."""
    grouped: dict[tuple[str, int], list[PreparedPair]] = {}
    for pair in pairs:
        if pair.oneshot_seconds > 0:
            grouped.setdefault((pair.algorithm, pair.threads), []).append(pair)
    out: dict[str, dict[str, dict[str, float]]] = {}
    for (name, threads), mine in sorted(grouped.items()):
        names = sorted({n for pair in mine for n in pair.terms})
        a = np.array([[pair.terms.get(n, 0.0) / pair.oneshot_seconds for n in names]
                      for pair in mine], dtype=float).reshape(len(mine), len(names))
        gap = np.array([1.0 - pair.plan_seconds / pair.oneshot_seconds for pair in mine])
        scale = np.linalg.norm(a, axis=0)
        pinned = scale > 0
        scale[~pinned] = 1.0
        x, _ = nnls(a / scale, gap)
        values = dict(store.constants_at(constants[name], threads))
        before = dict(values)
        for n, v, counted in zip(names, x / scale, pinned):
            if counted:  # a term no pair counts keeps the set's constant
                values[n] = float(f"{v:.4g}")
        for extra, base in fixed_terms.items():
            if extra in names and base in values:
                total = before.get(base, 0.0) + before.get(extra, 0.0)
                values[base] = float(f"{max(0.0, total - values[extra]):.4g}")
        out.setdefault(name, {})[str(threads)] = values
    return out


TERMS_METHOD = ("NNLS on relative error over the named terms only, per algorithm and thread "
                "count, the set's other constants kept; each algorithm's timings first "
                "scaled by the geo-mean of the set's estimate / measured over its timings "
                "that count none of the named terms")


def fit_terms(timings: Iterable[Timing], constants,
              names: Sequence[str]) -> dict[str, dict[str, dict[str, float]]]:
    """Each timed algorithm's constants (``constants``, a set's) with only the terms
    ``names`` refitted, per thread count.

    For a kernel rewritten after the set was fitted, whose work has terms of its own (the
    3-D Winograd transforms beside the 2-D ones): the other terms keep the constants
    fitted with every algorithm, and the timings are first brought to the set's scale,
    algorithm by algorithm: divided by the geo-mean of measured / estimate over that
    algorithm's timings that count none of ``names`` (a machine that runs the whole
    algorithm 1.5x slower than the set's then moves the named terms only by what differs
    between the two kinds of problem). Then the non-negative named constants minimising
    the squared relative error over the timings that count them, each group weighing the
    same. An algorithm without timings of both kinds keeps its constants."""
    grouped: dict[tuple[str, int], list[Timing]] = {}
    for t in timings:
        if t.seconds > 0:
            grouped.setdefault((t.algorithm, t.threads), []).append(t)
    out: dict[str, dict[str, dict[str, float]]] = {}
    for (name, threads), mine in sorted(grouped.items()):
        values = dict(store.constants_at(constants[name], threads))
        counting = [t for t in mine if any(t.terms.get(n, 0.0) for n in names)]
        others = [t for t in mine if not any(t.terms.get(n, 0.0) for n in names)]
        if not counting or not others:
            continue
        scale = geo_mean(t.seconds / e for t, e in zip(others, estimated(others, constants)))
        kept = {n: 0.0 for n in names}
        base = np.array(estimated(counting, {name: {str(threads): {**values, **kept}}}))
        seconds = np.array([t.seconds / scale for t in counting])
        a = design_matrix(counting, names) * scale
        group_size = Counter(t.group for t in counting)
        root_weight = np.array([group_size[t.group] ** -0.5 for t in counting])
        norm = np.linalg.norm(a, axis=0)
        pinned = norm > 0
        norm[~pinned] = 1.0
        x, _ = nnls(a / norm * root_weight[:, None], (1.0 - base / seconds) * root_weight)
        for n, v, counted in zip(names, x / norm, pinned):
            if counted:
                values[n] = float(f"{v:.4g}")
        out.setdefault(name, {})[str(threads)] = values
    return out


def estimated(timings: Sequence[Timing], constants) -> list[float]:
    """The model's seconds for each timing."""
    out = []
    for t in timings:
        per_unit = store.constants_at(constants[t.algorithm], t.threads)
        out.append(sum(per_unit.get(n, 0.0) * v for n, v in t.terms.items()))
    return out


def _contender_cases(timings: Sequence[Timing], estimates: Sequence[float],
                     margins: Mapping[str, float] | None) -> dict[str, list[tuple[float, Timing]]]:
    """{case: [(estimate times 1 + the algorithm's margin, timing)]} over the auto
    contenders: what selection ranks in each case."""
    margins = margins or {}
    cases: dict[str, list[tuple[float, Timing]]] = {}
    for t, seconds in zip(timings, estimates):
        if t.contender:
            cases.setdefault(t.case, []).append(
                (seconds * (1 + margins.get(t.algorithm, 0.0)), t))
    return cases


def regrets(timings: Sequence[Timing], estimates: Sequence[float],
            margins: Mapping[str, float] | None = None) -> dict[str, float]:
    """{case: time of the model's pick / fastest measured}, over each case's contenders,
    the pick ranking ``estimates`` (one per timing) times 1 + each algorithm's margin.
    Cases with fewer than two contenders choose nothing and are left out."""
    out = {}
    for case, members in _contender_cases(timings, estimates, margins).items():
        if len(members) < 2:
            continue
        fastest = min(t.seconds for _, t in members)
        pick = min(members, key=lambda member: member[0])[1]
        out[case] = pick.seconds / fastest
    return out


def regret_summary(timings: Sequence[Timing], constants,
                   margins: Mapping[str, float] | None = None) -> dict[str, float]:
    """Cases, geo-mean and worst regret, and cases within 5% of the fastest, of the picks
    the constants (and margins) make on the timings."""
    return summary_of(regrets(timings, estimated(timings, constants), margins).values())


def geo_mean(values: Iterable[float]) -> float:
    values = [v for v in values if v > 0]
    return statistics.geometric_mean(values) if values else float("nan")


def fit_margins(timings: Sequence[Timing], constants, names: Sequence[str],
                grid: Sequence[float] = MARGIN_GRID):
    """Each named algorithm's margin on ``grid`` (one after the other, the earlier ones
    kept): the lowest geo-mean regret over every case, the smallest margin on a tie.
    Returns the margins and, per name, ``[(margin, geo-mean regret, worst regret)]``."""
    estimates = estimated(timings, constants)
    margins: dict[str, float] = {}
    scores: dict[str, list[tuple[float, float, float]]] = {}
    for name in names:
        tried = []
        for margin in grid:
            values = list(regrets(timings, estimates, {**margins, name: margin}).values())
            if values:
                tried.append((margin, geo_mean(values), max(values)))
        scores[name] = tried
        if tried:
            margins[name] = min(tried, key=lambda s: (round(s[1], 4), s[0]))[0]
    return margins, scores


# The refinement's weights (see refine): how far the estimates may drift from the measured
# times, and the constants from their least-squares values, for a lower regret.
REFINE_TEMPERATURES = (0.2, 0.1, 0.05)
REFINE_ACCURACY_WEIGHT = 0.1
REFINE_PRIOR_WEIGHT = 0.01


def refine(timings: Sequence[Timing], constants,
           temperatures: Sequence[float] = REFINE_TEMPERATURES,
           accuracy_weight: float = REFINE_ACCURACY_WEIGHT,
           prior_weight: float = REFINE_PRIOR_WEIGHT):
    """The constants rescaled, each by its own factor, for the picks they make on the
    timings' cases, where :func:`fit` minimised each algorithm's relative error alone.

    The least-squares fit weighs a 20% error on a layer where two algorithms lie 5% apart
    no more than one where they lie 3x apart, and each algorithm's fit knows nothing of
    the others': the picks that follow can regret more than another machine's constants
    do. Per thread count, this minimises by L-BFGS-B over the logarithms of the factors

    - the expected log-regret per case, each contender weighed by a softmax of its
      negated log-estimate divided by a temperature (lowered in steps, so that the
      smooth early stages steer the sharp last one): the regret of the pick, made
      differentiable;
    - plus ``accuracy_weight`` times the mean squared log-ratio of estimate to measured
      time (the estimates must stay times: margins and thread counts compare them);
    - plus ``prior_weight`` times the mean squared log-factor (no factor strays without
      cause).

    Zero constants stay zero; a :data:`SHARED_TERMS` constant keeps one factor for its
    family. Returns constants shaped like ``constants``.
    """
    refined = {name: {t: dict(v) for t, v in by_threads.items()}
               for name, by_threads in constants.items()}
    timings = [t for t in timings if t.seconds > 0 and t.algorithm in constants]
    for threads in sorted({t.threads for t in timings}):
        mine = [t for t in timings if t.threads == threads]
        factor = _refine_factors(mine, constants, threads, temperatures,
                                 accuracy_weight, prior_weight)
        for name, by_threads in refined.items():
            if str(threads) not in by_threads:
                continue
            per_unit = by_threads[str(threads)]
            for n in per_unit:
                owner = family(name) if n in SHARED_TERMS.get(family(name), ()) else name
                if (owner, n) in factor:
                    per_unit[n] = float(f"{per_unit[n] * factor[(owner, n)]:.4g}")
    return refined


def _refine_factors(mine: Sequence[Timing], constants, threads: int,
                    temperatures: Sequence[float], accuracy_weight: float,
                    prior_weight: float) -> dict[tuple[str, str], float]:
    """:func:`refine` at one thread count: {(algorithm or family, term): factor}."""
    from scipy.optimize import minimize

    keys: dict[tuple[str, str], int] = {}
    rows: list[list[tuple[int, float]]] = []
    fixed = np.zeros(len(mine))
    for i, t in enumerate(mine):
        per_unit = constants[t.algorithm].get(str(threads))
        entries = []
        if per_unit is None:  # priced by another thread count's set: left as it is
            fixed[i] = estimated([t], constants)[0]
            rows.append(entries)
            continue
        for n, v in t.terms.items():
            c = per_unit.get(n, 0.0)
            if c <= 0 or v == 0:
                continue
            owner = family(t.algorithm) if n in SHARED_TERMS.get(family(t.algorithm), ()) \
                else t.algorithm
            k = keys.setdefault((owner, n), len(keys))
            entries.append((k, c * v))
        rows.append(entries)
    if not keys:
        return {}
    b = np.zeros((len(mine), len(keys)))
    for i, entries in enumerate(rows):
        for k, value in entries:
            b[i, k] += value
    measured = np.log([t.seconds for t in mine])
    group_size = Counter((t.algorithm, t.group) for t in mine)
    weight = np.array([1.0 / group_size[(t.algorithm, t.group)] for t in mine])
    weight /= weight.sum()
    cases: dict[str, list[int]] = {}
    for i, t in enumerate(mine):
        if t.contender:
            cases.setdefault(t.case, []).append(i)
    members = [v for v in cases.values() if len(v) >= 2]
    if not members:
        return {}
    # cases as rows of a padded (cases x most contenders) table of timing indices
    width = max(map(len, members))
    index = np.zeros((len(members), width), dtype=int)
    present = np.zeros((len(members), width), dtype=bool)
    for row, v in enumerate(members):
        index[row, :len(v)] = v
        present[row, :len(v)] = True
    case_measured = np.where(present, measured[index], np.inf)
    log_regret = np.where(present, case_measured - case_measured.min(axis=1)[:, None], 0.0)

    def objective(u, temperature):
        scale = np.exp(u)
        est = np.maximum(fixed + b @ scale, 1e-300)
        log_est = np.log(est)
        # softmax of -log_est / temperature over each case's contenders
        logits = np.where(present, -log_est[index] / temperature, -np.inf)
        p = np.exp(logits - logits.max(axis=1)[:, None])
        p /= p.sum(axis=1)[:, None]
        value = (p * log_regret).sum(axis=1)
        regret = float(value.mean())
        g_log_est = np.zeros(len(mine))
        np.add.at(g_log_est, index[present],
                  (p * (log_regret - value[:, None]) * (-1.0 / temperature))[present]
                  / len(members))
        diff = log_est - measured
        accuracy = float(weight @ diff ** 2)
        g_log_est += accuracy_weight * 2 * weight * diff
        prior = float(u @ u) / len(u)
        grad = scale * ((g_log_est / est) @ b) + prior_weight * 2 * u / len(u)
        return regret + accuracy_weight * accuracy + prior_weight * prior, grad

    u = np.zeros(len(keys))
    for temperature in temperatures:
        u = minimize(objective, u, args=(temperature,), jac=True, method="L-BFGS-B",
                     options={"maxiter": 500}).x
    return {key: float(np.exp(u[k])) for key, k in keys.items()}


# Folds of the held-out regret: each problem's timings are judged by constants fitted
# without them.
HELD_OUT_FOLDS = 4


def estimate_spreads(timings: Sequence[Timing], estimates: Sequence[float],
                     margins: Mapping[str, float] | None = None) -> dict[str, float]:
    """{case: the estimate of the case's fastest measured contender / the case's lowest
    estimate, each times 1 + its algorithm's margin}: how far above the lowest estimate a
    plan's first call must look to time the fastest (1 where one of the
    ``measure.RUNNERS_TIMED`` lowest estimates is the fastest: those are timed whatever the
    margin). Cases with fewer than two contenders are left out."""
    from convlab.dispatch import measure

    out = {}
    for case, members in _contender_cases(timings, estimates, margins).items():
        lowest = min(seconds for seconds, _ in members)
        if len(members) < 2 or lowest <= 0:
            continue
        fastest = min(members, key=lambda member: member[1].seconds)[0]
        timed_anyway = measure.always_timed_estimate(estimate for estimate, _ in members)
        out[case] = 1.0 if fastest <= timed_anyway else fastest / lowest
    return out


def held_out_regrets(timings: Sequence[Timing], fitted_on: Callable[[list[Timing]], object],
                     folds: int = HELD_OUT_FOLDS) -> dict[str, float]:
    """{case: regret} of each case's pick by constants ``fitted_on`` the timings of the
    other folds' problems (see :func:`held_out_estimates`). In-sample regret flatters a
    fit, the more so a refined one: it was chosen for those very picks."""
    return regrets(*held_out_estimates(timings, fitted_on, folds))


def held_out_estimates(timings: Sequence[Timing], fitted_on: Callable[[list[Timing]], object],
                       folds: int = HELD_OUT_FOLDS) -> tuple[list[Timing], list[float]]:
    """The timings whose algorithm the constants price, each with its estimate by constants
    ``fitted_on`` the timings of the other folds' problems (a problem: a case's name up to
    its first ":", so that its one-shot and plan cases fall in one fold)."""
    problems = sorted({t.case.split(":")[0] for t in timings})
    fold_of = {name: index % folds for index, name in enumerate(problems)}
    kept: list[Timing] = []
    estimates: list[float] = []
    for fold in range(min(folds, len(problems))):
        train = [t for t in timings if fold_of[t.case.split(":")[0]] != fold]
        test = [t for t in timings if fold_of[t.case.split(":")[0]] == fold]
        if not train or not test:
            continue
        constants = fitted_on(train)
        known = [t for t in test if t.algorithm in constants]
        kept += known
        estimates += estimated(known, constants)
    return kept, estimates


def summary_of(values: Iterable[float]) -> dict[str, float]:
    """Cases, geo-mean and worst of regrets, and cases within 5% of the fastest."""
    values = list(values)
    if not values:
        return {"cases": 0}
    return {"cases": len(values), "geo_mean": round(geo_mean(values), 4),
            "worst": round(max(values), 4),
            "within_5_percent": sum(v <= 1.05 for v in values)}
