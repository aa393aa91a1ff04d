"""Fitted cost models: an estimate is a sum of work terms, each times a fitted constant.

Each strategy's ``cost`` hook counts the work a run does on a problem as named *terms*
(multiply-adds per thread, bytes unfolded per thread, BLAS calls, one term of 1 for the
call itself, ...). The seconds each unit of a term costs on this kind of machine are the
*constants*, kept apart from the counting (as SciPy's ``choose_conv_method`` keeps its
op-count model apart from its fitted constants). They are fitted by
``bench/fit_cost_model.py``, which times every algorithm on the benchdnn suites and
solves a non-negative least-squares problem on relative error, and they are stored with
the command, machine and date of that run in ``cost_constants.json`` next to this file.

The same fit also sets each algorithm's *selection margin*: "auto" compares
``estimate * (1 + margin)``, so an algorithm with a margin must be estimated cheaper than
the others by that fraction to be picked. Only im2col has one. Where its estimate came
out a little below direct's, direct was mostly the faster of the two when measured (46
of 56 timings with im2col estimated 0-10% cheaper, in the session-7 and -8 runs). The
fit picks the margin with the lowest in-sample regret: 9% took the geo-mean regret over
the 385 session-11 timings from 1.035 to 1.028 (bench/results/cost_fit_s11.txt).
"""
from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Dict, Mapping

from convlab.registry import Estimate

CONSTANTS_FILE = "cost_constants.json"

# Terms a plan pays once, when it prepares the weights, rather than on every call.
PREPARATION_TERMS = ("weight_pack_bytes", "weight_transform_flops", "weight_transform_flops_3d")


@functools.lru_cache(maxsize=1)
def fitted() -> Dict:
    """The stored fit: ``{"source": {...}, "constants": {algorithm: {threads: {term:
    seconds per unit}}}}``."""
    text = resources.files("convlab").joinpath(CONSTANTS_FILE).read_text(encoding="utf-8")
    return json.loads(text)


def constants_for(algorithm: str, threads: int) -> Dict[str, float]:
    """The constants fitted at the largest thread count not above ``threads`` (else the
    smallest fitted): parallel efficiency differs between algorithms, so each thread count
    the fit saw has its own set, and the per-thread terms carry it to larger counts."""
    by_threads = fitted()["constants"][algorithm]
    counts = sorted(int(t) for t in by_threads)
    chosen = max((t for t in counts if t <= threads), default=counts[0])
    return by_threads[str(chosen)]


def selection_margin(algorithm: str) -> float:
    """How much lower than the others' an algorithm's estimate must be for "auto" to pick
    it, as a fraction (0 unless the fit set one)."""
    return float(fitted().get("selection_margins", {}).get(algorithm, 0.0))


# The measure margin a stored fit without one gets: the value fitted with the constants
# in force when plans began to measure (bench/results/measure_margin_fit.txt).
DEFAULT_MEASURE_MARGIN = 0.20


def measure_margin() -> float:
    """How far above the lowest prepared-weights estimate (a fraction) a contender's
    estimate may lie for a plan to time it on its first call (:mod:`convlab.measure`);
    :data:`DEFAULT_MEASURE_MARGIN` when the stored fit has none."""
    return float(fitted().get("measure_margin", DEFAULT_MEASURE_MARGIN))


def source() -> str:
    """The run the constants came from, in one line (for ``explain`` and the docs)."""
    info = fitted()["source"]
    return f"{info['command']} on {info['date']} ({info['machine']})"


def estimate(algorithm: str, threads: int, terms: Mapping[str, float],
             details: Mapping = ()) -> Estimate:
    """Seconds = sum of terms times the algorithm's fitted constants.

    ``details`` are shown by ``explain`` beside the terms. A term the fit has no
    constant for raises KeyError: counting and fitting must agree on the names.
    """
    constants = constants_for(algorithm, threads)
    seconds = sum(constants[name] * value for name, value in terms.items())
    inputs = dict(details)
    inputs["terms"] = dict(terms)
    inputs["seconds_per_unit"] = {name: constants[name] for name in terms}
    return Estimate(seconds, inputs)


def seconds(estimate: Estimate, prepared: bool = False) -> float:
    """The estimate of one call; with ``prepared``, of a call on prepared weights (a plan's),
    leaving out the :data:`PREPARATION_TERMS`."""
    if not prepared:
        return estimate.seconds
    terms = estimate.inputs.get("terms", {})
    per_unit = estimate.inputs.get("seconds_per_unit", {})
    return estimate.seconds - sum(terms[name] * per_unit[name] for name in PREPARATION_TERMS
                                  if name in terms)


def compared_seconds(algorithm: str, estimate: Estimate, prepared: bool = False) -> float:
    """What "auto" ranks an algorithm by: its estimate times 1 + its selection margin."""
    return seconds(estimate, prepared) * (1.0 + selection_margin(algorithm))
