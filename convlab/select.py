"""Choosing an algorithm for a problem, and explaining the choice.

The documented import path of :mod:`convlab.dispatch.select`, which it re-exports."""
from convlab.dispatch.select import (
    DEFAULT_RELATIVE_ERROR_BOUND,
    EMPTY_BATCH_ESTIMATE,
    PRECISIONS,
    Candidate,
    Explanation,
    assess,
    choose,
    contenders,
    explain_problem,
    parse_precision,
    precision_excludes,
    resolve,
)

__all__ = [
    "assess", "Candidate", "choose", "contenders", "DEFAULT_RELATIVE_ERROR_BOUND",
    "EMPTY_BATCH_ESTIMATE", "explain_problem", "Explanation", "parse_precision",
    "precision_excludes", "PRECISIONS", "resolve",
]
