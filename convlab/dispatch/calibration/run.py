""":func:`calibrate`: fit the cost constants to this machine within a wall-time budget.

It times every algorithm the cost model prices on the problems of
:mod:`convlab.dispatch.calibration.design` (one-shot ``convlab.convolve(..., algorithm=name)``
calls, as "auto" serves them, and plans on the problems marked for it), fits the constants
with :mod:`convlab.dispatch.calibration.fit` and stores them under this machine's key
(:mod:`convlab.dispatch.calibration.store`), where selection finds them from then on.

The timing is shaped by the budget, everything included:

1. warm-up: each problem's contenders are built and called once, core problems first,
   while the time spent plus one round of blocks of every problem so far still fits (for
   the extra tier, :data:`MIN_ROUNDS` rounds); problems that do not fit are left out (and
   named in the file), and the terms only they would have pinned keep the shipped
   constants (named too);
2. rounds: each round times one block per problem, the problems in turn (forwards, then
   backwards), so that a slow spell of the machine falls on many problems rather than on
   one. A block is the bench's "mixed" schedule (:func:`convlab.runtime.timing.time_rotation`):
   after a pause, every contender of the problem (one-shot calls and plans) is called in
   a fresh random order, each timed call right after an untimed call of itself, for
   about :data:`BLOCK_SECONDS`; then each plan, in a random order, is timed again in a
   block of its own of back-to-back calls, as the bench times plans
   (:func:`time_block`). The rotation's timings are what the constants are fitted to;
   the plans' own blocks set the measure margin (:func:`_measure_margin`).
   Rounds go on while the next block fits before the deadline (at most
   :data:`MAX_ROUNDS`); each timing is the median over rounds of its blocks' medians;
3. the fit and the file, for which :func:`reserve_seconds` is kept back.
"""
from __future__ import annotations

import datetime
import functools
import json
import math
import numbers
import os
import random
import statistics
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Callable

from convlab.dispatch import cost_model, registry, select
from convlab.dispatch.calibration import design, store
from convlab.runtime.threads import available_cores, effective_threads

MIN_BUDGET_SECONDS = 5.0
# Rounds every timed problem should get: fewer, and one slow block decides a timing.
MIN_ROUNDS = 3
MAX_ROUNDS = 40
# Idle time before each block, so that the previous block's OpenMP and BLAS workers stop
# spinning (timing.IDLE_SECONDS is the bench's; here all contenders are convlab's own,
# whose pools stop within it, so the blocks do not wait for quiet: see timing.settle).
PAUSE_SECONDS = 0.02
# Timed calls per block: as many rounds of the problem's contenders as take about this.
BLOCK_SECONDS = 0.02
# A plan's block of its own (no pause: the previous calls were convlab's own): calls for
# about this long, at least a few of them, most past the warm-up of large weights.
PLAN_BLOCK_SECONDS = 0.01
PLAN_BLOCK_CALLS = 5


# A first call against the cost model's estimate of a call (allocations, page faults,
# preparing weights), for deciding whether a problem's warm-up still fits.
FIRST_CALL_FACTOR = 3.0


def _block_seconds(call_seconds: float, plans: int) -> float:
    """A block's length, given the seconds of one call of each of its contenders and how
    many of them are plans: the pause, then untimed and timed calls for at least
    BLOCK_SECONDS, and each plan's block of its own."""
    return PAUSE_SECONDS + 2 * max(call_seconds, BLOCK_SECONDS) \
        + plans * PLAN_BLOCK_SECONDS


def reserve_seconds(budget: float) -> float:
    """The part of the budget kept for fitting and writing: the fit, refined, and again
    for each held-out fold, took 2-3 s on the 280 timings of a 60 s calibration (2-core
    AMD EPYC, AVX2); the rest is a margin for a busy machine."""
    return max(1.5, 0.08 * budget)


# --------------------------------------------------------------------------- measuring

@dataclass
class Contender:
    """One algorithm on one design problem, called one way ("oneshot" or "plan")."""

    problem: str
    algorithm: str
    mode: str
    call: Callable[[], object]
    terms: Mapping[str, float]
    contender: bool  # an auto contender there (precision="default")
    estimated: float  # seconds, by the constants in force
    samples: list[float] = field(default_factory=list)

    @property
    def case(self) -> str:
        return case_name(self.problem, self.mode)


def case_name(problem: str, mode: str) -> str:
    """A timing's case: the problem's name, and the mode after a ":" unless one-shot."""
    return problem if mode == "oneshot" else f"{problem}:{mode}"


def first_call_seconds(contender: Contender) -> float:
    """Seconds of the contender's first call (allocations, a plan's weight preparation)."""
    start = time.perf_counter()
    contender.call()
    return time.perf_counter() - start


# The mode of a plan timed in a block of its own (see time_block).
ALONE = "plan_alone"


def time_block(contenders: list[Contender], seed: int) -> list[float]:
    """One block of a problem's contenders (see the module docstring): the median seconds
    of each one's timed calls. Contenders of mode ALONE are timed apart, each in
    back-to-back calls: between other contenders' calls a plan's prepared weights leave
    the caches, and large ones take several calls to come back (ResNet-50
    res5a_branch2b's winograd4 plan, 37.7 MB of transformed weights, timed 2.3 ms in the
    rotation, 0.90 ms alone and 0.84 ms in the bench, on the Xeon capped at avx2), and the
    bench and a plan's first call judge warm weights."""
    from convlab.runtime import timing

    medians = [0.0] * len(contenders)
    rotated = [index for index, c in enumerate(contenders) if c.mode != ALONE]
    if rotated:
        times = timing.time_rotation([contenders[i].call for i in rotated], 1,
                                     pause=PAUSE_SECONDS, quiet=False,
                                     min_seconds=BLOCK_SECONDS, seed=seed)
        for index, runs in zip(rotated, times):
            medians[index] = statistics.median(runs)
    alone = [index for index, c in enumerate(contenders) if c.mode == ALONE]
    random.Random(seed).shuffle(alone)
    for index in alone:
        medians[index] = statistics.median(timing.time_block(
            contenders[index].call, PLAN_BLOCK_CALLS, pause=0.0,
            min_seconds=PLAN_BLOCK_SECONDS, quiet=False))
    return medians


# --------------------------------------------------------------------------- progress

class Progress:
    """A one-line bar of the budget spent, on stderr when it is a terminal.

    Calibration advances in seconds of a known budget rather than in items, which is the
    whole of what this draws."""

    WIDTH = 30

    def __init__(self, budget: float, enabled: bool | None = None, stream=None):
        self.stream = stream if stream is not None else sys.stderr
        if enabled is None:
            enabled = bool(getattr(self.stream, "isatty", lambda: False)())
        self.enabled, self.budget = enabled, budget
        self.started = time.perf_counter()
        self._drawn = 0.0

    def update(self, status: str, force: bool = False) -> None:
        now = time.perf_counter()
        if not self.enabled or (not force and now - self._drawn < 0.2):
            return
        self._drawn = now
        spent = now - self.started
        filled = min(self.WIDTH, int(self.WIDTH * spent / self.budget))
        bar = "#" * filled + "." * (self.WIDTH - filled)
        self.stream.write(f"\rcalibrating [{bar}] {spent:4.0f}/{self.budget:.0f} s  "
                          f"{status:<40.40}")
        self.stream.flush()

    def close(self, status: str) -> None:
        if self.enabled:
            self.update(status, force=True)
            self.stream.write("\n")
            self.stream.flush()


# --------------------------------------------------------------------------- calibrate

@dataclass(frozen=True)
class Calibration:
    """What :func:`calibrate` stored: the file and its contents (the constant set, its key
    and provenance)."""

    path: str
    data: dict

    @property
    def key(self) -> dict:
        return self.data["key"]

    @property
    def provenance(self) -> dict:
        return self.data["provenance"]

    def __str__(self) -> str:
        p = self.provenance
        return (f"calibrated {len(p['problems'])} problems, {p['rounds']} rounds in "
                f"{p['wall_s']:.1f} s (budget {p['budget_s']:g} s): {self.path}")


# How strongly a calibration's fit holds each constant to the shipped set's (see
# fit.fit's ``prior``): a minute of timings pins some constants only weakly, and noise
# then moved them far. Refitting three calibrations' timings on an AMD EPYC Zen 3 (AVX2,
# 2 threads), the fit's held-out regret was 1.054 / 1.053 / 1.056 without it and 1.033 /
# 1.047 / 1.051 at 10 (mean 1.044, as at 30; 1.046 at 1 and 3, 1.045 at 100), against
# the shipped set's 1.033 / 1.043 / 1.040. The first then keeps its fit, which predicts
# VGG-19's regret 1.017 / 1.08 where the shipped set's is 1.064 / 1.60
# (bench/results/calibration_prior_2026-11-28_zen3-avx2.txt).
PRIOR_WEIGHT = 10.0


def shipped_at(shipped: dict, priced, threads: int) -> dict[str, dict[str, float]]:
    """The ``shipped`` set's constants of each ``priced`` algorithm at ``threads`` (copies)."""
    return {name: dict(store.constants_at(shipped["constants"][name], threads))
            for name in priced}


def fitter(shipped: dict, priced, threads: int, prior_weight: float = PRIOR_WEIGHT,
           refined: bool = True):
    """A function of a list of timings that fits them as a calibration does: least squares
    held near the ``shipped`` set by ``prior_weight``, then (``refined``) refined for its
    picks; an algorithm of ``priced`` that no timing ran keeps the shipped constants."""
    from convlab.dispatch.calibration import fit  # SciPy's optimizer: loaded when needed only

    def fitted_on(subset):
        result = fit.fit(subset, fallback=shipped["constants"], prior=shipped["constants"],
                         prior_weight=prior_weight)
        for name, here in shipped_at(shipped, priced, threads).items():
            if name not in result.constants:  # no problem the budget left ran it
                result.constants[name] = {str(threads): here}
                result.unpinned[name] = {str(threads): list(here)}
        if refined:
            result.constants = fit.refine(subset, result.constants)
        return result
    return fitted_on


# The shipped set is kept only when its picks regret less on the calibration's timings
# than the held-out fit's, case by case, with confidence: the mean over the cases of
# log(shipped pick's regret / held-out pick's) must lie below -KEEP_SHIPPED_BY, and below
# zero by KEEP_SHIPPED_CONFIDENCE standard errors. A difference that a few cases make,
# which is what a minute of noisy timings and a fit that loses a fold of problems give,
# keeps the fit, which describes this machine. On geo-means alone, six of ten stored
# calibrations (AMD EPYC Zen 3 at avx2, AMD EPYC family 26 at avx512) kept a shipped set
# that regretted 0.1-2.2% less there, whose picks on those machines' suites regretted
# more than the fit's in five of the six (VGG-19 1.066-1.074 against 1.000-1.037)
# (bench/results/calibration_keep_rule_2026-12-02.txt); a tie broken so kept a
# shipped set that ran VGG-19 conv1_1 1.67x slower than the fit would have
# (bench/results/calibration_tie_2026-11-27_xeon-emr-avx2.txt).
KEEP_SHIPPED_BY = 0.001
KEEP_SHIPPED_CONFIDENCE = 2.0


def paired_log_regret(shipped: dict[str, float],
                      held_out: dict[str, float]) -> dict[str, float]:
    """``{"cases", "mean", "standard_error"}`` of log(shipped regret / held-out regret)
    over the cases both judge (per-case regrets, as :func:`fit.regrets` gives them)."""
    diffs = [math.log(shipped[case] / held_out[case]) for case in sorted(shipped)
             if case in held_out and shipped[case] > 0 and held_out[case] > 0]
    if not diffs:
        return {"cases": 0, "mean": 0.0, "standard_error": math.inf}
    error = (statistics.stdev(diffs) / math.sqrt(len(diffs)) if len(diffs) > 1
             else math.inf)
    return {"cases": len(diffs), "mean": statistics.fmean(diffs), "standard_error": error}


def _shipped_picks_better(paired: dict[str, float]) -> bool:
    """Whether the shipped set's picks regret less than the held-out fit's, by the rule
    above, from :func:`paired_log_regret`."""
    if not paired.get("cases"):
        return False
    mean, error = paired["mean"], paired["standard_error"]
    return mean < -KEEP_SHIPPED_BY and mean + KEEP_SHIPPED_CONFIDENCE * error < 0


def _measure_margin(shipped: dict, timings, estimates, margins) -> tuple[float, dict]:
    """The margin plans measure within under these constants: the widest spread, over
    the plans timed in blocks of their own (``timings``, ``estimates`` of the constants
    stored), between the lowest estimate and the estimate of the fastest plan, never
    below the level's shipped margin, which was fitted on the suites' layers. Returns it
    and the spreads ({case: ratio})."""
    from convlab.dispatch.calibration import fit  # as in calibrate

    spreads = {case: round(ratio, 4) for case, ratio
               in fit.estimate_spreads(timings, estimates, margins).items()}
    shipped_margin = float(shipped.get("measure_margin", cost_model.DEFAULT_MEASURE_MARGIN))
    widest = max(spreads.values(), default=1.0) - 1
    return round(max(shipped_margin, min(widest, store.MAX_MEASURE_MARGIN)), 4), spreads


def _load_average() -> float | None:
    """The 1-minute load average (runnable threads), where the OS reports one."""
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


def _check_budget(budget_s) -> float:
    if isinstance(budget_s, bool) or not isinstance(budget_s, numbers.Real) \
            or not math.isfinite(budget_s) or budget_s < MIN_BUDGET_SECONDS:
        raise ValueError(f"budget_s={budget_s!r} must be a number of seconds, at least "
                         f"{MIN_BUDGET_SECONDS:g}")
    return float(budget_s)


@dataclass(frozen=True)
class Priced:
    """What the cost model counts for one algorithm on one design problem, called one way."""

    algorithm: str
    mode: str  # "oneshot", "plan" (in the rotation) or ALONE (a plan's own blocks)
    terms: Mapping[str, float]
    contender: bool  # an auto contender there (precision="default")
    estimated: float  # seconds, by the constants in force


def priced_calls(problem: design.DesignProblem, threads: int, priced) -> list[Priced]:
    """Every priced algorithm that runs the problem, one-shot, and as a plan if asked (a
    plan's terms leave out the weight preparation it did when it was built)."""
    conv = problem.layer().problem()
    out = []
    for name in priced:
        algorithm = registry.get_algorithm(name)
        if algorithm.supports(conv) is not None:
            continue
        estimate = algorithm.cost(conv, threads)
        terms = dict(estimate.inputs["terms"])
        contender = select.precision_excludes(algorithm, "default", conv) is None
        out.append(Priced(name, "oneshot", terms, contender, cost_model.seconds(estimate)))
        if problem.plan:
            prepared = {t: (0.0 if t in cost_model.PREPARATION_TERMS else v)
                        for t, v in terms.items()}
            for mode in ("plan", ALONE):
                out.append(Priced(name, mode, prepared, contender,
                                  cost_model.seconds(estimate, True)))
    return out


def _contenders(problem: design.DesignProblem, threads: int, priced) -> list[Contender]:
    """The calls :func:`priced_calls` prices, ready to time on the problem's arrays."""
    from convlab.ops._convolve import convolve
    from convlab.ops._plan import Convolution

    layer = problem.layer()
    src, weights, _ = layer.arrays(seed=0)
    kwargs = layer.convolve_kwargs()
    plans: dict[str, Callable[..., object]] = {}
    out = []
    for p in priced_calls(problem, threads, priced):
        call: Callable[[], object]
        if p.mode == "oneshot":
            call = functools.partial(convolve, src, weights, algorithm=p.algorithm,
                                     threads=threads, **kwargs)
        else:  # one plan serves the rotation and its own blocks
            if p.algorithm not in plans:
                plans[p.algorithm] = Convolution(weights, algorithm=p.algorithm,
                                                 threads=threads, **kwargs)
            call = functools.partial(plans[p.algorithm], src)
        out.append(Contender(problem.name, p.algorithm, p.mode, call, p.terms, p.contender,
                             p.estimated))
    return out


def stored_timings(data: Mapping) -> list:
    """A stored calibration's one-shot and rotated-plan medians (its provenance) as
    :class:`convlab.dispatch.calibration.fit.Timing` rows at its thread count, with the
    terms this convlab's cost hooks count, so that they can be fitted again."""
    from convlab.dispatch.calibration import fit

    threads = int(data["key"]["threads"])
    provenance = data["provenance"]
    medians = {(problem, mode, name): seconds
               for problem, mode, name, seconds, _ in provenance["medians"]}
    shipped = store.shipped(store.shipped_level_for(str(data["key"]["isa"])))
    timings = []
    for problem in design.problems():
        if problem.name not in provenance["problems"]:
            continue
        for p in priced_calls(problem, threads, list(shipped["constants"])):
            seconds = medians.get((problem.name, p.mode, p.algorithm))
            if seconds is not None and p.mode != ALONE:
                case = case_name(problem.name, p.mode)
                timings.append(fit.Timing(p.algorithm, threads, p.terms, seconds,
                                          group=case, case=case, contender=p.contender))
    return timings


@dataclass
class DesignTimings:
    """What :func:`time_design` measured: one median per contender, and how."""

    threads: int
    contenders: list[Contender]
    rounds: int
    problems: list[str]
    skipped: list[str]

    def spread(self) -> float | None:
        """The median, over contenders timed in several rounds, of their slowest round's
        median over their fastest's: how far apart one contender's blocks ran. It grows
        with the number of rounds and with the jitter of short blocks, which a quiet
        machine has too; :meth:`round_slowdowns` is what tells a busy machine."""
        ratios = [max(c.samples) / min(c.samples) for c in self.contenders
                  if len(c.samples) > 1 and min(c.samples) > 0]
        return round(statistics.median(ratios), 3) if ratios else None

    def round_slowdowns(self) -> list[float]:
        """Per round, the median over the contenders timed in it (and in another round)
        of their time in that round over their own median. A block's jitter falls on
        some contenders of a round and not on others, so the median stays near 1 in
        every round; load that lasts across a round's blocks moves the whole round."""
        ratios: list[list[float]] = []
        for c in self.contenders:
            middle = statistics.median(c.samples) if len(c.samples) > 1 else 0.0
            if middle <= 0:
                continue
            for index, seconds in enumerate(c.samples):
                if index == len(ratios):
                    ratios.append([])
                ratios[index].append(seconds / middle)
        return [round(statistics.median(values), 3) for values in ratios]

    def timings(self, alone: bool = False):
        """The measurements as :class:`convlab.dispatch.calibration.fit.Timing` rows (each case its
        own group: every problem weighs the same): those of the rotations, which the
        constants are fitted to, or with ``alone`` the plans' own blocks."""
        from convlab.dispatch.calibration import fit

        return [fit.Timing(c.algorithm, self.threads, c.terms, statistics.median(c.samples),
                           group=c.case, case=c.case, contender=c.contender)
                for c in self.contenders if (c.mode == ALONE) == alone]


def time_design(deadline: float, threads: int, priced, bar: Progress | None = None,
                problems=None) -> DesignTimings:
    """Time the design's problems (default: every tier, core first) at ``threads`` threads
    until ``deadline`` (a :func:`time.perf_counter` value), for the algorithms ``priced``
    (see the module docstring for how the time is shared)."""
    bar = bar or Progress(1.0, enabled=False)
    cases: list[list[Contender]] = []
    block_estimate: list[float] = []
    skipped: list[str] = []
    for problem in design.problems() if problems is None else problems:
        # The core tier pins every term, so it is let in while one round of it fits; the
        # extra tier only while MIN_ROUNDS rounds of everything do.
        rounds_needed = 1 if problem.tier == design.CORE else MIN_ROUNDS
        if time.perf_counter() + rounds_needed * sum(block_estimate) >= deadline:
            skipped.append(problem.name)
            continue
        contenders = _contenders(problem, threads, priced)
        if not contenders:
            continue
        # the first calls cost more than later ones (allocations, preparing weights)
        # (a plan timed alone is the rotation's plan called again: its own blocks are
        # PLAN_BLOCK_SECONDS each)
        rotated = [c for c in contenders if c.mode != ALONE]
        plans = len(contenders) - len(rotated)
        predicted = FIRST_CALL_FACTOR * sum(c.estimated for c in rotated)
        if time.perf_counter() + predicted + rounds_needed * (
                sum(block_estimate) + _block_seconds(predicted, plans)) > deadline:
            skipped.append(problem.name)
            continue
        bar.update(f"warm-up: {problem.name}")
        first = sum(first_call_seconds(c) for c in rotated)
        estimate = _block_seconds(first, plans)
        if time.perf_counter() + rounds_needed * (sum(block_estimate) + estimate) > deadline:
            skipped.append(problem.name)
            continue
        cases.append(contenders)
        block_estimate.append(estimate)

    rounds = 0
    while rounds < MAX_ROUNDS and cases:
        order = list(range(len(cases)))
        if rounds % 2:
            order.reverse()
        finished = True
        for index in order:
            if time.perf_counter() + block_estimate[index] > deadline:
                finished = False
                break
            bar.update(f"round {rounds + 1}: {cases[index][0].problem}")
            start = time.perf_counter()
            for contender, seconds in zip(cases[index],
                                          time_block(cases[index], seed=rounds * 1000 + index)):
                contender.samples.append(seconds)
            block_estimate[index] = time.perf_counter() - start
        if not finished:
            break
        rounds += 1
    timed = [c for c in cases if all(x.samples for x in c)]
    skipped += [c[0].problem for c in cases if not all(x.samples for x in c)]
    return DesignTimings(threads, [x for c in timed for x in c], rounds,
                         [c[0].problem for c in timed], skipped)


def calibrate(budget_s: float = 60.0, threads: int | None = None, *,
              progress: bool | None = None) -> Calibration:
    """Fit the cost constants to this machine at ``threads`` threads (default: the
    effective count) in at most ``budget_s`` seconds of wall time, and store them where
    "auto" finds them from then on.

    The file goes to the user's cache directory (``$CONVLAB_CACHE_DIR`` overrides it),
    keyed by CPU model, effective ISA level, thread count, what chooses im2col's GEMM
    kernels (the library and any OpenBLAS variables set) and convlab version; other thread
    counts keep the shipped constants. ``progress``: draw a bar on stderr (default:
    when stderr is a terminal). Returns the :class:`Calibration` written.
    """
    started = time.perf_counter()
    from convlab.dispatch.calibration import fit  # SciPy's optimizer: loaded when needed only

    budget = _check_budget(budget_s)
    n_threads = effective_threads(threads)
    key = store.current_key(n_threads)
    shipped = store.shipped(store.shipped_level_for(str(key["isa"])))
    priced = list(shipped["constants"])
    bar = Progress(budget, progress)
    load_before = _load_average()
    measured = time_design(started + budget - reserve_seconds(budget), n_threads, priced, bar)
    if not measured.contenders:
        raise RuntimeError(f"calibrate: budget_s={budget:g} left no time to time a single "
                           f"problem on this machine; give it more seconds")

    bar.update("fitting", force=True)
    load_after = _load_average()
    timings = measured.timings()
    fitted_on = fitter(shipped, priced, n_threads)
    fitted = fitted_on(timings)
    shipped_margins = dict(shipped.get("selection_margins", {}))
    margins, _ = fit.fit_margins(timings, fitted.constants, list(shipped_margins))
    held_out = fit.held_out_regrets(timings, lambda subset: fitted_on(subset).constants)
    by_shipped = fit.regrets(timings, fit.estimated(timings, shipped["constants"]),
                             shipped_margins)
    paired = paired_log_regret(by_shipped, held_out)
    regret = {"calibrated": fit.regret_summary(timings, fitted.constants, margins),
              "calibrated_held_out": fit.summary_of(held_out.values()),
              "shipped": fit.summary_of(by_shipped.values())}
    constants = fitted.constants
    keeps_shipped = _shipped_picks_better(paired)
    if keeps_shipped:
        # The shipped set never saw these timings, so its regret on them is out of sample;
        # the fit is judged out of sample too (held out, see fit.held_out_regrets), since
        # it was chosen for its picks on them. A short budget leaves noise in the fit:
        # where the shipped set picks better, keeping it is the better calibration.
        constants = {name: {str(n_threads): per_unit}
                     for name, per_unit in shipped_at(shipped, priced, n_threads).items()}
        margins = shipped_margins
    # the plans' own blocks were not fitted to: the constants' errors on them are out of
    # sample
    warm_plans = measured.timings(alone=True)
    measure_margin, spreads = _measure_margin(
        shipped, warm_plans, fit.estimated(warm_plans, constants), margins)
    wall = time.perf_counter() - started
    stored = {
        "format": store.FORMAT,
        "key": key,
        "source": {
            "command": f"convlab.calibrate(budget_s={budget:.2f}, threads={n_threads})",
            "cpu_model": key["cpu_model"], "isa": key["isa"],
            "date": datetime.date.today().isoformat(),
            "machine": f"{key['cpu_model']}, {available_cores()} cores",
            "method": fit.METHOD,
        },
        "provenance": {
            "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "budget_s": round(budget, 2), "wall_s": round(wall, 2),
            "rounds": measured.rounds, "problems": measured.problems,
            "skipped_problems": measured.skipped, "timings": len(timings),
            "load_average": [load_before, load_after], "cores": available_cores(),
            "spread": measured.spread(),
            "round_slowdowns": measured.round_slowdowns(),
            "medians": [[c.problem, c.mode, c.algorithm,
                         float(f"{statistics.median(c.samples):.4g}"), len(c.samples)]
                        for c in measured.contenders],
            "residuals": {name: {t: r.to_dict() for t, r in by_threads.items()}
                          for name, by_threads in fitted.residuals.items()},
            "unpinned_terms": {name: by_threads[str(n_threads)]
                               for name, by_threads in fitted.unpinned.items()
                               if by_threads[str(n_threads)]},
            "regret": regret,
            # JSON has no infinity: a standard error without a spread to judge by is None
            "shipped_over_held_out": {key: round(value, 5) if math.isfinite(value) else None
                                      for key, value in paired.items()},
            "kept_shipped_set": keeps_shipped,
            "plan_estimate_spreads": spreads,
        },
        "constants": constants,
        "selection_margins": margins,
        "measure_margin": measure_margin,
    }
    try:  # what selection would refuse must not be written
        store.parse_calibration(json.dumps(stored).encode(), key,
                                store.expected_terms(shipped))
    except store.InvalidCalibration as exc:
        raise RuntimeError(f"calibrate: the fitted set is unusable: it {exc}") from None
    path = store.write_calibration(stored, key)
    cost_model.reload()
    bar.close(f"done: {len(measured.problems)} problems, {measured.rounds} rounds")
    return Calibration(str(path), stored)
