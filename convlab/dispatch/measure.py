"""A plan's first call for a shape checks the estimates: it times the close contenders.

A plan (:class:`convlab.Convolution` with ``choose="measure"``, its default) is built once
and called many times, so, as FFTW's ``FFTW_MEASURE`` plans and cuDNN's benchmark mode do,
it can afford to run the algorithms its estimates cannot tell apart and keep the fastest.
Which ones: the contenders of ``algorithm="auto"`` whose prepared-weights estimates
(:func:`convlab.dispatch.cost_model.compared_seconds` with ``prepared=True``) are at most
``1 + cost_model.measure_margin()`` times the lowest. The margin is fitted
(``bench/fit_measure_margin.py``): it is how far above the lowest estimate the measured
fastest contender's estimate lay on the benchdnn suites. The runner-up (the second-lowest
estimate) is timed whatever the margin: a fit off on the user's CPU misranks two close
contenders most often, and one more contender costs the first call little. Contenders
estimated at :data:`CHEAP_SECONDS` or less are timed too: their runs cost the first call
little, and a tiny layer's estimates are the least reliable.

The first call's extra cost is bounded: at most :data:`MAX_CONTENDERS`, lowest estimate
first, and no further contender once :data:`TIME_LIMIT_SECONDS` have gone by; each one is
prepared (its weights packed or transformed, which the plan keeps for the winner) and run
once untimed. Then the contenders take turns of back-to-back timed runs for
:data:`TIMED_RUNS` rounds (fewer when that would pass the limit; the order reversed every
other round), and each keeps its fastest run. A turn lasts while the contender is still
warming up: it ends once :data:`TURN_PATIENCE` runs in a row have not beaten the turn's
fastest by :data:`WARMING_STEP` (so a steady contender's turn is :data:`RUNS_PER_TURN`
runs), at most :data:`MAX_RUNS_PER_TURN`. On a shared machine a slow
spell of a second or so then lands on every contender's rounds alike instead of on one
contender's block, and noise only ever adds time. While the two fastest lie within
:data:`CLOSE_CALL` of each other, rounds go on, up to :data:`MAX_TIMED_RUNS` (the limit
still holds): a slow spell that spared one of them in three rounds rarely does in more.
"""
from __future__ import annotations

import math
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Callable

from convlab.dispatch import cost_model, select
from convlab.problem.params import ConvProblem

CHOICES = ("measure", "estimate")

# The lowest estimates timed whatever the margin: the lowest and the runner-up. Capped at
# avx2 on a Zen 4 EPYC (2 threads), a calibrated set priced direct's plans of ResNet-50's
# 1x1 layers at twice their time, 1.47-1.56x im2col's estimate against a 44% margin, and
# plans kept im2col where direct's plan ran 1.12-1.22x faster
# (bench/results/resnet_50_2026-12-02_epyc-zen4-avx2cap-final.txt).
RUNNERS_TIMED = 2
# Most contenders a first call times. With the avx2 set's margin, the suites' layers had at
# most this many contenders within it
# (bench/results/measure_margin_fit_avx2_2026-11-26_epyc-zen4.txt).
MAX_CONTENDERS = 5
# Contenders estimated at this or less are timed whatever the margin. A 1-D grouped layer
# (g100, 400 channels, 15 pixels, kernel 1) ran its im2col plan in 13.3 us and direct's in
# 15.9 us on the Xeon (AVX-512, 2 threads) while the estimates said 28.3 and 10.3 us, 2.7x
# apart, outside the 82% margin; plans kept direct, 1.2-1.3x slower.
CHEAP_SECONDS = 1e-4
# No contender is started after this many seconds of measuring (the first always runs).
TIME_LIMIT_SECONDS = 1.0
# Rounds of turns, after one untimed run of each contender; the fastest run is kept.
TIMED_RUNS = 3
# A close call: the runner-up's fastest run within this fraction of the leader's; rounds
# then go on up to MAX_TIMED_RUNS. On a 2-core VM, a plan's first call in a fresh process
# ran direct at 6.4, 6.4, 2.3 and 7.8 ms and im2col at 2.1-5.3 ms (VGG-19 conv1_1; both
# 1.3-2.2 ms steady), and three rounds kept the slower one.
CLOSE_CALL = 0.15
MAX_TIMED_RUNS = 8
# A turn's runs go on while the contender warms up. Its first runs after another
# contender's inherit that one's caches: on VGG-19 conv1_1 (batch 1, 2 threads, AVX2 EPYC)
# direct's fastest of three such runs came out 1.6-2.5 ms against 1.3 ms steady, and plans
# kept im2col, 1.3x slower. Large transformed weights warm up over more runs, and not
# steadily: on a Xeon (AVX-512, 2 threads) VGG-19 conv5_1's winograd4 plan ran 3.2, 3.2,
# 2.6, 2.0, 1.7 ms after direct's turn (1.7 ms steady, winograd2 1.9), and turns of two
# runs kept winograd2.
TURN_PATIENCE = 2
WARMING_STEP = 0.03
MAX_RUNS_PER_TURN = 12
RUNS_PER_TURN = 1 + TURN_PATIENCE  # a steady contender's turn

# The clock the timings read; tests replace it to make them deterministic.
clock = time.perf_counter


def parse_choose(choose) -> str:
    if not isinstance(choose, str) or choose not in CHOICES:
        raise ValueError(f"choose={choose!r} is not known; expected one of {list(CHOICES)}")
    return choose


@dataclass(frozen=True)
class Measurement:
    """How a plan chose for one shape: each contender's prepared-weights estimate, which of
    them were timed and how long they took (seconds of its fastest timed run), and the pick."""

    choice: str
    estimates: dict[str, float]
    seconds: dict[str, float] = field(default_factory=dict)
    margin: float = 0.0
    # Within the margin but not timed: the contender cap or the time limit stopped it.
    not_timed: tuple[str, ...] = ()
    # Seconds the whole measurement took (preparing and running every timed contender).
    total_seconds: float = 0.0
    # Every turn in the order it ran: (contender, seconds of each of its runs).
    turns: tuple[tuple[str, tuple[float, ...]], ...] = ()

    @property
    def measured(self) -> bool:
        return bool(self.seconds)

    def to_dict(self) -> dict:
        return {"choice": self.choice, "measured": self.measured,
                "estimated_seconds": dict(self.estimates),
                "measured_seconds": dict(self.seconds), "margin": self.margin,
                "not_timed": list(self.not_timed), "total_seconds": self.total_seconds,
                "turns": [[name, list(runs)] for name, runs in self.turns]}

    def describe(self) -> str:
        """A line or two for ``explain``."""
        if not self.measured:
            return f"{self.choice}: the only contender, so nothing was timed"
        timed = ", ".join(f"{name} {seconds * 1e3:.3f} ms (estimated "
                          f"{self.estimates[name] * 1e3:.3f})"
                          for name, seconds in sorted(self.seconds.items(), key=lambda i: i[1]))
        text = (f"{self.choice}: fastest when timed on the first call ({timed}; the two lowest "
                f"estimates and those within {self.margin:.0%} of the lowest or under "
                f"{CHEAP_SECONDS * 1e6:.0f} us, prepared weights; "
                f"measuring took {self.total_seconds * 1e3:.1f} ms)")
        if self.not_timed:
            text += f"; within the margin but not timed (cap or time limit): " \
                    f"{', '.join(self.not_timed)}"
        return text


def always_timed_estimate(estimates: Iterable[float]) -> float:
    """The highest of ``estimates`` that a first call times whatever the margin: the
    :data:`RUNNERS_TIMED`-th lowest (the highest when there are fewer)."""
    ranked = sorted(estimates)
    return ranked[min(RUNNERS_TIMED, len(ranked)) - 1]


def close_contenders(problem: ConvProblem, threads: int, precision: str,
                     margin: float) -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
    """``(close, all)``: the contenders as (name, compared prepared estimate), lowest first;
    ``close`` are the two lowest and those within ``1 + margin`` of the lowest or estimated
    at :data:`CHEAP_SECONDS` or less."""
    ranked = sorted(((row.name, cost_model.compared_seconds(row.name, row.estimate, True))
                     for row in select.contenders(select.assess(problem, threads, precision))),
                    key=lambda item: item[1])
    lowest = ranked[0][1]
    if math.isinf(lowest):  # no estimates at all: every contender is as close as any
        return ranked, ranked
    return [item for index, item in enumerate(ranked)
            if index < RUNNERS_TIMED or item[1] <= lowest * (1 + margin)
            or item[1] <= CHEAP_SECONDS], ranked


def _close_call(times: dict[str, list[float]]) -> bool:
    """Whether the two fastest contenders' fastest runs lie within CLOSE_CALL."""
    fastest = sorted(min(runs) for runs in times.values() if runs)
    return len(fastest) >= 2 and fastest[1] <= fastest[0] * (1 + CLOSE_CALL)


def _turn(name: str, run: Callable[[str], object], started: float) -> tuple[float, ...]:
    """Seconds of ``name``'s runs, back to back until it stops warming up (see the module
    docstring) or the time limit has passed (a slow contender's turn then ends with its
    first run)."""
    runs: list[float] = []
    fastest, stale = math.inf, 0
    for turn_index in range(MAX_RUNS_PER_TURN):
        if turn_index and clock() - started > TIME_LIMIT_SECONDS:
            break
        begin = clock()
        run(name)
        seconds = clock() - begin
        runs.append(seconds)
        stale = 0 if seconds < fastest * (1 - WARMING_STEP) else stale + 1
        fastest = min(fastest, seconds)
        if stale >= TURN_PATIENCE:
            break
    return tuple(runs)


def measure(problem: ConvProblem, threads: int, precision: str,
            prepare: Callable[[str], object], run: Callable[[str], object]) -> Measurement:
    """Time the close contenders (see the module docstring) and return the fastest.

    ``prepare(name)`` readies an algorithm's weights; ``run(name)`` runs it once on the
    call's data into scratch memory.
    """
    margin = cost_model.measure_margin()
    close, ranked = close_contenders(problem, threads, precision, margin)
    estimates = dict(ranked)
    if len(close) == 1:
        return Measurement(close[0][0], estimates, margin=margin)
    started = clock()
    warm: dict[str, float] = {}  # contender -> its untimed run's seconds
    not_timed: list[str] = []
    for index, (name, _) in enumerate(close):
        if index >= MAX_CONTENDERS or (warm and clock() - started >= TIME_LIMIT_SECONDS):
            not_timed.append(name)
            continue
        prepare(name)
        begin = clock()
        run(name)
        warm[name] = clock() - begin
    times: dict[str, list[float]] = {name: [] for name in warm}
    round_seconds = sum(warm.values())
    order = list(times)
    turns: list[tuple[str, tuple[float, ...]]] = []
    for round_index in range(MAX_TIMED_RUNS):
        if round_index >= TIMED_RUNS and not _close_call(times):
            break
        if round_index and clock() - started + RUNS_PER_TURN * round_seconds > TIME_LIMIT_SECONDS:
            break  # another round would pass the limit (the first always runs)
        for name in order if round_index % 2 == 0 else order[::-1]:
            runs = _turn(name, run, started)
            times[name] += runs
            turns.append((name, runs))
    seconds = {name: min(runs) for name, runs in times.items()}
    choice = min(seconds, key=seconds.get)
    return Measurement(choice, estimates, seconds, margin, tuple(not_timed),
                       clock() - started, tuple(turns))
