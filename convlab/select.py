"""Choosing an algorithm for a problem, and explaining the choice.

The rule here is deliberately simple: among the registered algorithms that
support the problem and take part in "auto", pick the lowest estimated time.
The estimates come from each algorithm's own ``cost`` hook.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from convlab.params import ConvProblem
from convlab.registry import Algorithm, Estimate, get_algorithm, registered


@dataclass(frozen=True)
class Candidate:
    name: str
    reason: Optional[str]  # why it cannot run, or None
    estimate: Optional[Estimate]
    auto: bool

    @property
    def viable(self) -> bool:
        return self.reason is None


def assess(problem: ConvProblem, threads: int) -> List[Candidate]:
    """Every registered algorithm with its verdict on the problem."""
    rows = []
    for algorithm in registered():
        reason = algorithm.supports(problem)
        estimate = algorithm.cost(problem, threads) if reason is None else None
        rows.append(Candidate(algorithm.name, reason, estimate, algorithm.auto))
    return rows


def choose(problem: ConvProblem, threads: int, rows: Optional[List[Candidate]] = None) -> str:
    rows = assess(problem, threads) if rows is None else rows
    contenders = [row for row in rows if row.viable and row.auto]
    if not contenders:
        contenders = [row for row in rows if row.viable]
    if not contenders:
        reasons = "; ".join(f"{row.name}: {row.reason}" for row in rows)
        raise ValueError(f"no registered algorithm supports this problem ({reasons})")
    return min(contenders, key=lambda row: row.estimate.seconds).name


def resolve(algorithm, problem: ConvProblem, threads: int) -> Algorithm:
    """The algorithm a call runs: "auto" chooses; a name is checked against the problem."""
    if not isinstance(algorithm, str):
        raise TypeError(f"algorithm={algorithm!r} must be a string: 'auto' or a registered name")
    if algorithm == "auto":
        return get_algorithm(choose(problem, threads))
    chosen = get_algorithm(algorithm)
    reason = chosen.supports(problem)
    if reason is not None:
        raise ValueError(f"algorithm={algorithm!r} cannot run this problem: {reason}")
    return chosen


@dataclass(frozen=True)
class Explanation:
    """Why "auto" picks what it picks. ``str()`` reads as text, ``to_dict()`` feeds notebooks."""

    problem: ConvProblem
    threads: int
    candidates: List[Candidate]
    choice: str

    def to_dict(self) -> Dict[str, Any]:
        return {
            "problem": self.problem.describe(),
            "flops": self.problem.flops,
            "threads": self.threads,
            "choice": self.choice,
            "candidates": [
                {"name": c.name, "viable": c.viable, "reason": c.reason, "auto": c.auto,
                 "estimated_seconds": None if c.estimate is None else c.estimate.seconds,
                 "inputs": None if c.estimate is None else dict(c.estimate.inputs)}
                for c in self.candidates
            ],
        }

    def __str__(self) -> str:
        lines = [f"problem: {self.problem.describe()}",
                 f"work: {self.problem.flops / 1e9:.3f} GFLOP, threads: {self.threads}"]
        for c in self.candidates:
            if not c.viable:
                lines.append(f"  {c.name:<12} cannot run: {c.reason}")
                continue
            seconds = c.estimate.seconds
            shown = "unknown" if math.isinf(seconds) else f"{seconds * 1e3:.3f} ms"
            inputs = ", ".join(f"{k}={v}" for k, v in c.estimate.inputs.items())
            note = "" if c.auto else " (not an auto contender)"
            lines.append(f"  {c.name:<12} estimated {shown}{note}  [{inputs}]")
        lines.append(f"choice: {self.choice} (lowest estimated time among auto contenders)")
        return "\n".join(lines)

    __repr__ = __str__


def explain_problem(problem: ConvProblem, threads: int) -> Explanation:
    rows = assess(problem, threads)
    return Explanation(problem, threads, rows, choose(problem, threads, rows))
