"""Choosing an algorithm for a problem, and explaining the choice.

Among the registered algorithms that support the problem, take part in "auto" and
meet the requested precision, "auto" picks the lowest estimated time. The
estimates come from each algorithm's own ``cost`` hook. "tune" (see
:mod:`convlab.dispatch._tune`) measures the same contenders instead of estimating them.
Every function takes the registry to choose from (forward convolution by default; the
transposed and 8-bit ones of :mod:`convlab.dispatch.registry` alike).
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Any

from convlab.dispatch import _tune as tune, cost_model
from convlab.dispatch.registry import FORWARD, Algorithm, Estimate, Problem, Registry
from convlab.runtime import cpu

PRECISIONS = ("default", "highest")

# precision="default" admits an algorithm whose measured float32 relative error
# ||y - ref|| / ||ref|| (N(0,1) data, IC up to 512) is at most this; the table behind the
# Winograd entries is convlab/strategies/winograd_accuracy.md (python bench/winograd_accuracy.py).
# Plain summation measures 2e-7..2e-6 there; 1e-5 admits every tile in 1-D and 2-D, and
# F(2) and F(4) in 3-D (nested F(6) measures 4.6e-5).
DEFAULT_RELATIVE_ERROR_BOUND = 1e-5


def parse_precision(precision) -> str:
    if not isinstance(precision, str) or precision.lower() not in PRECISIONS:
        raise ValueError(f"precision={precision!r} is not known; expected one of "
                         f"{list(PRECISIONS)}")
    return precision.lower()


def precision_excludes(algorithm: Algorithm, precision: str,
                       problem: Problem) -> str | None:
    """Why ``precision`` keeps ``algorithm`` out of auto/tune on ``problem``, or None."""
    error = algorithm.relative_error_for(problem)
    if error is None:
        return None
    if precision == "highest":
        return (f"precision='highest' admits plain summation only (measured float32 "
                f"relative error {error:.1e})")
    if error > DEFAULT_RELATIVE_ERROR_BOUND:
        return (f"measured float32 relative error {error:.1e} exceeds precision='default' "
                f"bound {DEFAULT_RELATIVE_ERROR_BOUND:.0e}")
    return None


@dataclass(frozen=True)
class Candidate:
    name: str
    reason: str | None  # why it cannot run, or None
    estimate: Estimate | None
    auto: bool
    excluded: str | None = None  # why precision keeps it out of auto/tune
    # its constants' and selection margin's name in the cost constants (see Registry)
    constants_key: str = ""

    @property
    def key(self) -> str:
        return self.constants_key or self.name

    def compared(self, prepared: bool, threads: int) -> float:
        """What "auto" ranks it by (:func:`convlab.dispatch.cost_model.compared_seconds`)."""
        assert self.estimate is not None, "only a viable candidate is compared"
        return cost_model.compared_seconds(self.key, self.estimate, prepared, threads)

    @property
    def viable(self) -> bool:
        return self.reason is None

    @property
    def contender(self) -> bool:
        return self.viable and self.auto and self.excluded is None


# An empty batch has no work for any algorithm: cost hooks count work per image and per
# thread, so they are not asked about it (docs/specification.md §7.1).
EMPTY_BATCH_ESTIMATE = Estimate(0.0, {"work": "none: the batch is empty"})


def assess(problem: Problem, threads: int, precision: str = "default",
           registry: Registry = FORWARD) -> list[Candidate]:
    """Every algorithm of ``registry`` with its verdict on the problem."""
    rows = []
    for algorithm in registry.algorithms():
        reason = algorithm.supports(problem)
        if reason is not None:
            estimate = None
        elif problem.batch == 0:
            estimate = EMPTY_BATCH_ESTIMATE
        else:
            estimate = algorithm.cost(problem, threads)
        rows.append(Candidate(algorithm.name, reason, estimate, algorithm.auto_for(problem),
                              precision_excludes(algorithm, precision, problem),
                              registry.constants_key(algorithm.name)))
    return rows


def contenders(rows: list[Candidate]) -> list[Candidate]:
    chosen = [row for row in rows if row.contender]
    if not chosen:
        # Nothing fast qualifies (say, a rank only the reference handles): any viable one.
        chosen = [row for row in rows if row.viable and row.excluded is None]
    if not chosen:
        reasons = "; ".join(f"{row.name}: {row.reason or row.excluded}" for row in rows)
        raise ValueError(f"no registered algorithm supports this problem ({reasons})")
    return chosen


def choose(problem: Problem, threads: int, rows: list[Candidate] | None = None,
           precision: str = "default", prepared: bool = False,
           registry: Registry = FORWARD) -> str:
    """The contender with the lowest estimate, each times 1 + its selection margin
    (:func:`convlab.dispatch.cost_model.compared_seconds`). ``prepared=True`` is a plan's choice:
    its weights are packed or transformed once, so those terms of the estimates do not
    count."""
    if rows is None:
        return _cached_choice(problem, threads, precision, registry, registry.changes,
                             cost_model.generation(), prepared)
    return min(contenders(rows), key=lambda row: row.compared(prepared, threads)).name


@functools.lru_cache(maxsize=1024)
def _cached_choice(problem: Problem, threads: int, precision: str, registry: Registry,
                  changes: int, constants_generation: tuple, prepared: bool = False) -> str:
    """Every cost hook runs once per (problem, threads, precision); later calls hit the cache.
    The generations key out choices made before the registry or the constants in force
    changed (:func:`convlab.dispatch.cost_model.reload`)."""
    return choose(problem, threads, assess(problem, threads, precision, registry), precision,
                  prepared, registry)


def resolve(algorithm, problem: Problem, threads: int, precision: str = "default",
            prepared: bool = False, registry: Registry = FORWARD) -> Algorithm:
    """The algorithm a call runs: "auto" chooses; a name is checked against the problem.

    "tune" resolves here only once tuned; :func:`convlab.ops._convolve.convolve` times the
    contenders first (forward convolution only: elsewhere "tune" is "auto"). A forced name
    is run whatever ``precision`` says.
    """
    if not isinstance(algorithm, str):
        raise TypeError(f"algorithm={algorithm!r} must be a string: 'auto', 'tune' or a "
                        f"registered name")
    if algorithm == "tune" and registry is not FORWARD:
        algorithm = "auto"
    if algorithm == "auto":
        return registry.get(choose(problem, threads, precision=precision, prepared=prepared,
                                   registry=registry))
    if algorithm == "tune":
        entry = tune.tuned(problem, threads, precision)
        if entry is None:
            raise LookupError("not tuned yet")
        # A winner read from a cache file may be unknown here (another version, or an
        # algorithm this process did not register) or unfit (an edited file): tune again.
        if entry["choice"] not in registry.names():
            raise LookupError(f"tuned choice {entry['choice']!r} is not registered")
        chosen = registry.get(entry["choice"])
        if (chosen.supports(problem) is not None
                or precision_excludes(chosen, precision, problem) is not None):
            raise LookupError(f"tuned choice {entry['choice']!r} cannot run this problem")
        return chosen
    chosen = registry.get(algorithm)
    reason = chosen.supports(problem)
    if reason is not None:
        raise ValueError(f"algorithm={algorithm!r} cannot run this problem: {reason}")
    return chosen


@dataclass(frozen=True)
class Explanation:
    """Why "auto" picks what it picks. ``str()`` reads as text, ``to_dict()`` feeds notebooks."""

    problem: Problem
    threads: int
    precision: str
    candidates: list[Candidate]
    choice: str
    tuned: dict | None = None
    # the machine the estimates are for (convlab.runtime.cpu.cpu_info), as it was when explained
    machine: dict[str, Any] = field(default_factory=cpu.cpu_info)

    def to_dict(self) -> dict[str, Any]:
        tuned_seconds = (self.tuned or {}).get("seconds", {})
        return {
            "problem": self.problem.describe(),
            "flops": self.problem.flops,
            "threads": self.threads,
            "precision": self.precision,
            "cpu": dict(self.machine),
            "choice": self.choice,
            "tuned_choice": None if self.tuned is None else self.tuned["choice"],
            "candidates": [
                {"name": c.name, "viable": c.viable, "reason": c.reason, "auto": c.auto,
                 "excluded": c.excluded,
                 "estimated_seconds": None if c.estimate is None else c.estimate.seconds,
                 "selection_margin": cost_model.selection_margin(c.key, self.threads),
                 "tuned_seconds": tuned_seconds.get(c.name),
                 "inputs": None if c.estimate is None else dict(c.estimate.inputs)}
                for c in self.candidates
            ],
        }

    def __str__(self) -> str:
        tuned_seconds = (self.tuned or {}).get("seconds", {})
        lines = [f"problem: {self.problem.describe()}",
                 f"work: {self.problem.flops / 1e9:.3f} GFLOP, threads: {self.threads}, "
                 f"precision: {self.precision}",
                 f"cpu: {cpu.summary(self.machine)}"]
        for c in self.candidates:
            if not c.viable:
                lines.append(f"  {c.name:<12} cannot run: {c.reason}")
                continue
            estimate = c.estimate
            assert estimate is not None  # every viable candidate has one
            seconds = estimate.seconds
            shown = "unknown" if math.isinf(seconds) else f"{seconds * 1e3:.3f} ms"
            margin = cost_model.selection_margin(c.key, self.threads)
            if margin and not math.isinf(seconds):
                compared = c.compared(False, self.threads)
                shown += f" (compared as {compared * 1e3:.3f} ms: margin {margin:.0%})"
            if c.name in tuned_seconds:
                shown += f", tuned {tuned_seconds[c.name] * 1e3:.3f} ms"
            details = {k: v for k, v in estimate.inputs.items()
                       if k not in ("terms", "seconds_per_unit")}
            inputs = ", ".join(f"{k}={_short(v)}" for k, v in details.items())
            note = ""
            if not c.auto:
                note = " (not an auto contender)"
            elif c.excluded:
                note = f" (excluded: {c.excluded})"
            lines.append(f"  {c.name:<12} estimated {shown}{note}  [{inputs}]")
            breakdown = _breakdown(estimate.inputs)
            if breakdown:
                lines.append(f"  {'':<12} = {breakdown}")
        if any(c.estimate is not None and "terms" in c.estimate.inputs for c in self.candidates):
            lines.append(f"constants: {cost_model.describe_constants(self.threads)}")
        lines.append(f"choice: {self.choice} (lowest estimated time among auto contenders, "
                     f"margins included)")
        if self.tuned is not None:
            lines.append(f"tuned choice: {self.tuned['choice']} (fastest when timed)")
        return "\n".join(lines)

    __repr__ = __str__


def _breakdown(inputs) -> str:
    """``term count x seconds-per-unit`` for each term that costs anything, in microseconds."""
    terms, per_unit = inputs.get("terms"), inputs.get("seconds_per_unit")
    if not terms or not per_unit:
        return ""
    parts = [f"{name} {value:.4g} x {per_unit[name]:.3g} s ({value * per_unit[name] * 1e6:.1f} us)"
             for name, value in terms.items() if value and per_unit[name]]
    return " + ".join(parts)


def _short(value) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def explain_problem(problem: Problem, threads: int, precision: str = "default",
                    registry: Registry = FORWARD) -> Explanation:
    rows = assess(problem, threads, precision, registry)
    tuned = tune.tuned(problem, threads, precision) if registry is FORWARD else None
    return Explanation(problem, threads, precision, rows,
                       choose(problem, threads, rows, precision, registry=registry), tuned)
