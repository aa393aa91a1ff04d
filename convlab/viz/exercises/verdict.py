"""What every exercise checker returns and prints, and how it reads the reader's answer.

A checker never raises on the reader's answer: a missing answer (``None`` or ``...``)
gives a :class:`Verdict` that is not right and says so, and an answer of the wrong type
gives a wrong verdict that names the type expected. Only the exercise's own parameters
(fixed by the notebook) raise ``ValueError``.
"""
from __future__ import annotations

import functools
import numbers
from collections.abc import Callable, Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Verdict:
    """Whether an answer is right, and why."""

    right: bool
    reason: str

    def __str__(self) -> str:
        return f"{'right' if self.right else 'wrong'}: {self.reason}"

    def __bool__(self) -> bool:
        return self.right


class Rejected(Exception):
    """An answer that cannot be checked at all; carries the verdict to report."""

    def __init__(self, verdict: Verdict):
        super().__init__(verdict.reason)
        self.verdict = verdict


def report(verdict: Verdict) -> Verdict:
    """Print the verdict (the notebook shows it under the cell) and return it."""
    print(verdict)
    return verdict


def is_unanswered(answer) -> bool:
    return answer is None or answer is Ellipsis


NO_ANSWER = Verdict(False, "no answer yet: replace None with your answer and run the cell "
                           "again")


def whole_number(answer, name: str = "answer") -> int:
    """``answer`` as an int, or :class:`Rejected` naming what was expected."""
    if isinstance(answer, bool) or not isinstance(answer, numbers.Integral):
        raise Rejected(Verdict(False, f"{name}={answer!r}: expected a whole number"))
    return int(answer)


def whole_numbers(answer, length: int, name: str = "answer") -> tuple[int, ...]:
    """``answer`` as a tuple of ``length`` ints, or :class:`Rejected`."""
    if isinstance(answer, numbers.Integral) and not isinstance(answer, bool) and length == 1:
        return (int(answer),)
    try:
        values = tuple(answer)
    except TypeError:
        raise Rejected(Verdict(False, f"{name}={answer!r}: expected {length} whole "
                                      f"number(s), such as a tuple")) from None
    if len(values) != length:
        raise Rejected(Verdict(False, f"{name}={answer!r} has {len(values)} value(s); "
                                      f"expected {length}"))
    return tuple(whole_number(v, name) for v in values)


def name_set(answer, name: str = "answer") -> frozenset[str]:
    """``answer`` as a set of strings (a single string counts as a set of one)."""
    if isinstance(answer, str):
        return frozenset((answer,))
    if not isinstance(answer, Iterable):
        raise Rejected(Verdict(False, f"{name}={answer!r}: expected a set of names such as "
                                      f"{{'direct', 'im2col'}}"))
    values = list(answer)
    if not all(isinstance(v, str) for v in values):
        raise Rejected(Verdict(False, f"{name}={answer!r}: expected names (strings)"))
    return frozenset(values)


def index_set(answer, name: str = "answer") -> frozenset[int]:
    """``answer`` as a set of ints (a single int counts as a set of one)."""
    if isinstance(answer, numbers.Integral) and not isinstance(answer, bool):
        return frozenset((int(answer),))
    if isinstance(answer, (str, bytes)) or not isinstance(answer, Iterable):
        raise Rejected(Verdict(False, f"{name}={answer!r}: expected a set of whole numbers "
                                      f"such as {{0, 2}}"))
    return frozenset(whole_number(v, name) for v in answer)


def listed(values: Iterable) -> str:
    """'{0, 2, 5}' in sorted order, or 'none'."""
    items = sorted(values)
    return "{" + ", ".join(repr(v) for v in items) + "}" if items else "none"


def checker(function: Callable[..., Verdict]) -> Callable[..., Verdict]:
    """Make ``function(answer, ...)`` a notebook checker: a missing answer reports
    :data:`NO_ANSWER`, a :class:`Rejected` answer its verdict, and every verdict is
    printed."""

    @functools.wraps(function)
    def check(answer, *args, **kwargs) -> Verdict:
        if is_unanswered(answer):
            return report(NO_ANSWER)
        try:
            verdict = function(answer, *args, **kwargs)
        except Rejected as rejected:
            verdict = rejected.verdict
        return report(verdict)

    return check
