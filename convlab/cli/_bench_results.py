"""The figures a bench run's results give: the contenders timed on a layer, and their
regret, fastest, first-call and network totals (:mod:`convlab.cli.benchmark`)."""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from convlab.dispatch.measure import Measurement


@dataclass
class Contender:
    label: str
    kind: str  # "convlab", "torch", "onnxruntime" or "gemm"
    call: Callable[[], object] | None = None  # None: cannot run this layer
    why_not: str = ""
    to_nxc: Callable[[object], np.ndarray] = lambda result: result
    # the timed calls, one list per round (a round of blocks, or one call each under the
    # "interleaved" schedule): the median takes them all, the spread of network totals
    # takes each round alone
    round_times: list[list[float]] = field(default_factory=list)
    error: float | None = None
    checked: bool = True  # False: not a convolution (a reference GEMM), nothing to compare
    first_call: float | None = None  # a plan's first call (its choice, its preparation)
    runs: str = ""  # the algorithm auto or a plan runs
    measurement: Measurement | None = None  # how a plan chose on its first call
    warm_seconds: float | None = None  # its last untimed (warm-up) call
    # An algorithm (one-shot or a forced plan) that auto may choose on this layer at
    # precision "default"; the second regret figures judge auto against those only.
    admissible: bool = True
    # Timed again after the rounds, keyed by the pseudo-algorithm ("auto", "plan") whose
    # regret the recheck was for (:func:`recheck_labels`); empty where not rechecked.
    recheck_times: dict[str, list[float]] = field(default_factory=dict)

    @property
    def times(self) -> list[float]:
        return [t for times in self.round_times for t in times]

    @property
    def median(self) -> float | None:
        times = self.times
        return statistics.median(times) if times else None

    @property
    def ok(self) -> bool:
        return self.error is None or self.error <= CHECK_TOLERANCE


# Pseudo-algorithms: "auto" is convolve's own choice, one-shot (weights prepared on every
# call); "plan" is a convlab.Convolution built once, so its weights are prepared once, like
# an ONNX Runtime session's prepacked weights, and its first call times the close contenders
# (choose="measure"); "plan:<name>" is a plan forced to one algorithm, what "plan" is
# measured against. Plans are timed on the calls after their first, which is timed apart.
PSEUDO_ALGORITHMS = ("auto", "plan")


FORCED_PLAN = "plan:"


def is_plan(label: str) -> bool:
    return label == "plan" or label.startswith(FORCED_PLAN)


def is_algorithm(contender) -> bool:
    """A registered algorithm called one-shot (not auto, a plan or a peer library)."""
    return (contender.kind == "convlab" and contender.label not in PSEUDO_ALGORITHMS
            and not is_plan(contender.label))


def geo_mean(values):
    values = [v for v in values if v is not None and v > 0]
    return math.exp(statistics.fmean(map(math.log, values))) if values else None


def regret(contenders, admissible_only: bool = False) -> float | None:
    """auto's time over the fastest registered algorithm's time on this layer (1 = ideal);
    with ``admissible_only``, over the fastest of those auto may choose there."""
    by = {c.label: c for c in contenders}
    auto = by.get("auto")
    times = _algorithm_medians(contenders, admissible_only)
    if auto is None or auto.median is None or not times:
        return None
    return auto.median / min(times)


def _algorithm_medians(contenders, admissible_only: bool) -> list[float]:
    """The medians of the registered algorithms timed on the layer (of those auto may
    choose, with ``admissible_only``)."""
    return [c.median for c in contenders if is_algorithm(c) and c.median is not None
            and (c.admissible or not admissible_only)]


def fastest(contenders, admissible_only: bool = False) -> str | None:
    """The fastest registered algorithm's label (of those auto may choose, with
    ``admissible_only``)."""
    runs = [c for c in contenders if is_algorithm(c) and c.median is not None
            and (c.admissible or not admissible_only)]
    return min(runs, key=lambda c: c.median).label if runs else None


def plan_regret(contenders, admissible_only: bool = False) -> tuple[float, str, str] | None:
    """The plan's time (calls after its first) over the fastest of the plans forced to one
    algorithm ("plan:<name>", weights prepared alike), or, without those, of the one-shot
    algorithms (which also prepare the weights on every call: a looser bar); and that
    fastest contender's label, and the algorithm the plan runs. ``admissible_only``: of
    those auto may choose on the layer."""
    by = {c.label: c for c in contenders}
    plan = by.get("plan")
    if plan is None or plan.median is None:
        return None
    usable = [c for c in contenders if c.median is not None
              and (c.admissible or not admissible_only)]
    forced = [c for c in usable if c.label.startswith(FORCED_PLAN)]
    pool = forced or [c for c in usable if is_algorithm(c)]
    if not pool:
        return None
    best = min(pool, key=lambda c: c.median)
    return plan.median / best.median, best.label, plan.runs


def recheck_labels(contenders, pseudo: str) -> list[str]:
    """The contenders ``pseudo`` ("auto" or "plan") is timed again with, ``pseudo`` first:
    the fastest of those its regret holds it against (:func:`regret`, :func:`plan_regret`),
    over all and over those auto may choose; none where ``pseudo`` did not run."""
    by = {c.label: c for c in contenders}
    if pseudo not in by or by[pseudo].median is None:
        return []
    if pseudo == "auto":
        bars = [fastest(contenders, admissible) for admissible in (False, True)]
    else:
        bars = [None if value is None else value[1]
                for value in (plan_regret(contenders), plan_regret(contenders, True))]
    found = sorted({label for label in bars if label is not None})
    return [pseudo] + found if found else []


def pooled_median(contender: Contender, pseudo: str) -> float | None:
    """The median of the contender's calls in the rounds and in ``pseudo``'s recheck
    together; None where it was not rechecked for ``pseudo``."""
    again = contender.recheck_times.get(pseudo)
    return statistics.median(contender.times + again) if again else None


def rechecked_regret(contenders, pseudo: str, admissible_only: bool = False) -> float | None:
    """:func:`regret` (``pseudo`` "auto") or :func:`plan_regret` ("plan") on the medians of
    the rounds and the recheck together (:func:`pooled_median`): ``pseudo``'s over the
    fastest rechecked contender's of its group (of those auto may choose, with
    ``admissible_only``). The recheck is a second sample, not a better one (two runs of one
    plan read 1.31x apart in alternating blocks on a 2-core VM), so it adds to the rounds
    rather than replacing them."""
    labels = recheck_labels(contenders, pseudo)
    by = {c.label: c for c in contenders}
    if not labels:
        return None
    mine = pooled_median(by[pseudo], pseudo)
    others = [pooled_median(by[label], pseudo) for label in labels[1:]
              if by[label].admissible or not admissible_only]
    others = [value for value in others if value is not None]
    return mine / min(others) if mine is not None and others else None


def auto_choice_regret(contenders, admissible_only: bool = False) -> float | None:
    """The one-shot algorithm auto runs over the fastest one-shot algorithm: how good auto's
    choice was, apart from the spread between auto's runs and that algorithm's own (noise,
    on a shared machine) and from auto's dispatch. None where that algorithm was not timed
    on its own."""
    by = {c.label: c for c in contenders}
    auto = by.get("auto")
    twin = by.get(auto.runs) if auto is not None and auto.runs else None
    times = _algorithm_medians(contenders, admissible_only)
    if twin is None or twin.median is None or not is_algorithm(twin) or not times:
        return None
    return twin.median / min(times)


def plan_choice_regret(contenders, admissible_only: bool = False) -> float | None:
    """The forced plan of the algorithm the plan runs ("plan:<runs>") over the fastest
    forced plan: how good the plan's choice was, apart from the spread between a plan's
    runs and a forced plan's runs of the same algorithm (noise, on a shared machine).
    None without forced plans, or without the one the plan runs."""
    timed = _plan_and_twin(contenders)
    forced = [c for c in contenders if c.label.startswith(FORCED_PLAN) and c.median is not None
              and (c.admissible or not admissible_only)]
    if timed is None or not forced:
        return None
    return timed[1].median / min(c.median for c in forced)


def plan_twin_ratio(contenders) -> float | None:
    """The plan's time over its twin's, the forced plan of the algorithm it runs
    ("plan:<runs>"): after the first call the two run the same code on the same prepared
    weights, so their distance from 1 is how far two timings of one thing drift apart in
    this run, the floor under the plan regret. None without that forced plan."""
    timed = _plan_and_twin(contenders)
    return None if timed is None else timed[0].median / timed[1].median


def _plan_and_twin(contenders) -> tuple[Contender, Contender] | None:
    """The plan and the forced plan of the algorithm it runs, where both were timed."""
    by = {c.label: c for c in contenders}
    plan = by.get("plan")
    if plan is None or plan.median is None or not plan.runs:
        return None
    twin = by.get(FORCED_PLAN + plan.runs)
    return None if twin is None or twin.median is None else (plan, twin)


def first_call_ratio(contenders) -> float | None:
    """The plan's first call (choosing, preparing, running) over a later call."""
    plan = next((c for c in contenders if c.label == "plan"), None)
    if plan is None or plan.first_call is None or plan.median is None:
        return None
    return plan.first_call / plan.median


def median_ratio(contenders, numerator: str, denominator: str) -> float | None:
    """The median time of the contender labelled ``numerator`` over ``denominator``'s."""
    by = {c.label: c for c in contenders}
    top, bottom = by.get(numerator), by.get(denominator)
    if top is None or bottom is None or top.median is None or bottom.median is None:
        return None
    return top.median / bottom.median


def ort_over_plan(contenders) -> float | None:
    return median_ratio(contenders, "onnxrt", "plan")


def best_family_ratio(contenders, prefix) -> float | None:
    """torch's time over the fastest contender whose name starts with ``prefix``."""
    by = {c.label: c for c in contenders}
    family = [c.median for c in contenders
              if c.label.startswith(prefix) and c.median is not None]
    torch_run = by.get("torch")
    if not family or torch_run is None or torch_run.median is None:
        return None
    return torch_run.median / min(family)


# "GEMM-bound layers", whose im2col rate is held against NumPy's
# matmul: a GEMM of at least this many flops, 50 us at the ~200 GFLOP/s of the development
# machine, about three times the 18 us a one-shot convolve spends around its kernel
# (bench/results/overhead_2026-11-25_1063cac.txt). Below it the call, not the GEMM, sets
# the pace: on GoogLeNet's loss2/conv (1 MFLOP) the matmul alone takes 10 us.
GEMM_BOUND_MIN_FLOPS = 10_000_000


def im2col_over_matmul(contenders) -> float | None:
    """im2col's rate as a share of NumPy matmul's on the same-sized product."""
    return median_ratio(contenders, "matmul", "im2col")


def network_seconds(results):
    """{label: sum over layers of its median time x the layer's multiplicity}, None for a
    contender that did not run every layer (its total would not compare)."""
    totals = {}
    for layer, contenders in results:
        for c in contenders:
            if c.median is None:
                totals[c.label] = None
            elif totals.get(c.label, 0.0) is not None:
                totals[c.label] = totals.get(c.label, 0.0) + c.median * layer.multiplicity
    return totals


def round_ratio_range(results, peer: str, mine: str) -> tuple[float, float] | None:
    """Lowest and highest of ``peer``'s network time over ``mine``'s, each round of blocks
    on its own (every layer's median in that round, times its multiplicity, summed); None
    unless both ran every layer in the same number of rounds, at least two."""
    sums: dict[str, list[float]] = {}
    for layer, contenders in results:
        by_label = {c.label: c for c in contenders}
        for label in (peer, mine):
            c = by_label.get(label)
            if c is None or not c.round_times or not all(c.round_times):
                return None
            rounds = [statistics.median(times) * layer.multiplicity for times in c.round_times]
            previous = sums.setdefault(label, [0.0] * len(rounds))
            if len(previous) != len(rounds):
                return None
            sums[label] = [a + b for a, b in zip(previous, rounds)]
    if (not sums or len(sums[mine]) < 2 or len(sums[peer]) != len(sums[mine])
            or min(sums[mine]) <= 0):
        return None
    ratios = [a / b for a, b in zip(sums[peer], sums[mine])]
    return min(ratios), max(ratios)


def fastest_seconds(results, pick) -> float | None:
    """The network time of the fastest contender among ``pick`` on each layer."""
    total = 0.0
    for layer, contenders in results:
        times = [c.median for c in contenders if pick(c) and c.median is not None]
        if not times:
            return None
        total += min(times) * layer.multiplicity
    return total


# A result passes when max|got - want| <= CHECK_TOLERANCE * max|want|. Summation-order
# differences in float32 over up to ~5e3 products per output stay near 1e-6 of the largest
# output on random data in [-1, 1); a wrong tap or index is off by order 1.
CHECK_TOLERANCE = 1e-4
