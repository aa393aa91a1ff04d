"""Fitted cost models: an estimate is a sum of work terms, each times a fitted constant.

Each strategy's ``cost`` hook counts the work a run does on a problem as named *terms*
(multiply-adds per thread, bytes unfolded per thread, BLAS calls, one term of 1 for the
call itself, ...). The seconds each unit of a term costs on this kind of machine are the
*constants*, kept apart from the counting (as SciPy's ``choose_conv_method`` keeps its
op-count model apart from its fitted constants). They are fitted by
:mod:`convlab.dispatch.calibration.fit`: non-negative least squares on the relative error of
timings, one algorithm at a time.

The constants in force for a thread count are, in order:

1. a calibration of this machine (:func:`convlab.calibrate`, ``python -m convlab
   calibrate``) stored in the user's cache directory under this CPU model, effective ISA
   level, thread count, GEMM kernels' source and convlab version; a file that is corrupt,
   foreign or stale is ignored with a ``RuntimeWarning`` that names it and says why;
2. else the set shipped for the effective ISA level
   (``convlab/dispatch/cost_constants/<level>.json``, each fitted by
   ``bench/fit_cost_model.py`` on the CPU it names).

They are read once and kept in memory; :func:`reload` drops them (``calibrate`` does after
writing). Calibration never runs by itself: selection only reads.

The same fit also sets each algorithm's *selection margin*: "auto" compares
``estimate * (1 + margin)``, so an algorithm with a margin must be estimated cheaper than
the others by that fraction to be picked. Only im2col has one. Where its estimate came
out a little below direct's, direct was mostly the faster of the two when measured (46
of 56 timings with im2col estimated 0-10% cheaper, on the AVX-512 machine of the shipped
avx512 set). The fit picks the margin with the lowest in-sample regret: 9% took the
geo-mean regret over its 385 timings from 1.035 to 1.028
(bench/results/cost_fit_2026-11-25_epyc_808f0fe.txt).
"""
from __future__ import annotations

import functools
import warnings
from collections.abc import Mapping
from dataclasses import dataclass

from convlab.dispatch.calibration import store
from convlab.dispatch.registry import Estimate
from convlab.runtime import cpu

# Terms a plan pays once, when it prepares the weights, rather than on every call.
# "oneshot_call" is the fixed cost a one-shot call adds to a plan's call (validating,
# deciding and readying the caller's weights): on 8-channel 8x8 layers direct took 25 us
# one-shot and 12 us as a plan, im2col 16 and 12 us (Intel Xeon, AVX-512; the design's
# tiny problems are timed both ways, so the fit tells the two apart).
PREPARATION_TERMS = ("weight_pack_bytes", "weight_gather_bytes", "weight_transform_flops",
                     "fused_weight_transform_flops", "weight_transform_flops_3d",
                     "lane_weight_transform_flops", "oneshot_call")
# Every priced algorithm's fixed costs: per call, and per one-shot call on top.
FIXED_TERMS = {"call": 1.0, "oneshot_call": 1.0}

# How describe_constants shows a long fitting command.
SHOWN_COMMAND_CHARS = 100


@dataclass(frozen=True)
class ConstantSet:
    """A set of constants and where it came from.

    ``data`` is shaped like the stored files: ``{"source": {...}, "constants": {algorithm:
    {threads: {term: seconds per unit}}}, "selection_margins": {algorithm: fraction}}``.
    ``origin`` is "calibrated" (``path`` is the file) or "shipped" (``level`` names the
    set; ``isa`` is the effective level it serves, which may lack a set of its own)."""

    data: dict
    origin: str
    level: str
    isa: str
    threads: int
    path: str | None = None


_generation = 0


def generation() -> tuple[int, str]:
    """A value that changes whenever the constants in force may have changed: a reload, or
    another effective ISA level (caches of choices made with them key on it)."""
    return _generation, cpu.effective_isa()


def reload() -> None:
    """Forget the constants read so far; the next estimate reads them again (after a
    calibration, or a change of ``CONVLAB_CACHE_DIR`` or of the ISA level)."""
    global _generation
    _generation += 1
    _in_force.cache_clear()


def _default_threads() -> int:
    from convlab.runtime.threads import effective_threads

    return effective_threads(None)


def in_force(threads: int | None = None) -> ConstantSet:
    """The constants estimates at ``threads`` threads use (default: the effective count)."""
    return _in_force(_default_threads() if threads is None else int(threads),
                     cpu.effective_isa())


@functools.cache
def _in_force(threads: int, isa: str) -> ConstantSet:
    """``isa``, the effective level, keys the cache: a change of the cap changes the set."""
    key = store.current_key(threads)
    level = store.shipped_level_for(str(key["isa"]))
    shipped = ConstantSet(store.shipped(level), "shipped", level, str(key["isa"]), threads)
    try:
        path = store.calibration_path(key)
        present = path.is_file()
    except OSError as exc:
        _ignore(f"cache directory {store.cache_dir()}", f"cannot be read ({exc})", level)
        return shipped
    if not present:
        for other in store.other_versions(key):
            try:
                store.load_calibration(other, key, store.expected_terms(shipped.data))
            except store.InvalidCalibration as exc:
                _ignore(str(other), str(exc), level)
        return shipped
    try:
        data = store.load_calibration(path, key, store.expected_terms(shipped.data))
    except store.InvalidCalibration as exc:
        _ignore(str(path), str(exc), level)
        return shipped
    return ConstantSet(data, "calibrated", str(key["isa"]), str(key["isa"]), threads, str(path))


def _ignore(what: str, why: str, level: str) -> None:
    warnings.warn(f"convlab: ignoring the cost calibration {what}: it {why}; using the "
                  f"shipped {level} constants (python -m convlab calibrate refits this "
                  f"machine)", RuntimeWarning, stacklevel=4)


def fitted(threads: int | None = None) -> dict:
    """The set in force at ``threads`` threads, as stored: ``{"source": {...},
    "constants": {algorithm: {threads: {term: seconds per unit}}}, "selection_margins":
    {...}}``."""
    return in_force(threads).data


# Operations whose algorithms' constants sit in a section of their own in the shipped sets,
# under their registry's prefix ("int8_direct": section "int8", algorithm "direct").
# Calibration fits the forward algorithms only: these stay as shipped for the level.
OPERATION_SECTIONS = ("int8",)


def constants_for(algorithm: str, threads: int) -> dict[str, float]:
    """The algorithm's constants in force at ``threads`` (:func:`store.constants_at`)."""
    section, _, name = algorithm.partition("_")
    if section in OPERATION_SECTIONS:
        shipped = store.shipped(store.shipped_level_for(in_force(threads).isa))
        return store.constants_at(shipped[section]["constants"][name], threads)
    return store.constants_at(fitted(threads)["constants"][algorithm], threads)


def selection_margin(algorithm: str, threads: int | None = None) -> float:
    """How much lower than the others' an algorithm's estimate must be for "auto" to pick
    it, as a fraction (0 unless the fit set one)."""
    return float(fitted(threads).get("selection_margins", {}).get(algorithm, 0.0))


# The measure margin a set without one gets, when its level's shipped set has none either:
# the value fitted with the constants in force when plans began to measure
# (bench/results/measure_margin_fit.txt).
DEFAULT_MEASURE_MARGIN = 0.20


def measure_margin() -> float:
    """How far above the lowest prepared-weights estimate (a fraction) a contender's
    estimate may lie for a plan to time it on its first call (:mod:`convlab.dispatch.measure`).

    The set in force's own margin: a calibration sets one from its plan timings, never
    below its level's shipped margin; a calibration file without one uses the shipped
    set's, and :data:`DEFAULT_MEASURE_MARGIN` serves where the shipped set has none."""
    chosen = in_force()
    if "measure_margin" in chosen.data:
        return float(chosen.data["measure_margin"])
    shipped = store.shipped(store.shipped_level_for(chosen.isa))
    return float(shipped.get("measure_margin", DEFAULT_MEASURE_MARGIN))


def describe_constants(threads: int | None = None) -> str:
    """Which constants estimates at ``threads`` threads use and where they came from, in one
    line (for ``explain``, the demo and the bench header)."""
    chosen = in_force(threads)
    source = chosen.data.get("source", {})
    if chosen.origin == "calibrated":
        provenance, key = chosen.data.get("provenance", {}), chosen.data.get("key", {})
        kept = (" (the shipped set kept: its picks regretted less on the calibration's "
                "timings)" if provenance.get("kept_shipped_set") else "")
        return (f"calibrated on this machine on {provenance.get('date', '?')} for "
                f"{key.get('cpu_model', '?')}, {chosen.isa}, {chosen.threads} threads, "
                f"im2col GEMM {key.get('gemm', '?')}, "
                f"convlab {key.get('convlab_version', '?')} (budget "
                f"{provenance.get('budget_s', '?')} s){kept}: {chosen.path}")
    command = str(source.get("command", "?"))
    if len(command) > SHOWN_COMMAND_CHARS:
        command = command[:SHOWN_COMMAND_CHARS - 4] + " ..."
    serves = "" if chosen.level == chosen.isa else f" (none shipped for {chosen.isa})"
    refitted = "".join(f"; {name} refitted on {about.get('cpu_model', '?')} on "
                       f"{about.get('date', '?')}"
                       for name, about in sorted(source.get("refitted", {}).items()))
    return (f"shipped {chosen.level} set{serves}, fitted on "
            f"{source.get('cpu_model') or source.get('machine', '?')} on "
            f"{source.get('date', '?')} by {command}{refitted}")


def source(threads: int | None = None) -> str:
    """Where the constants in force came from, in one line (:func:`describe_constants`)."""
    return describe_constants(threads)


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


def compared_seconds(algorithm: str, estimate: Estimate, prepared: bool = False,
                     threads: int | None = None) -> float:
    """What "auto" ranks an algorithm by: its estimate times 1 + its selection margin (that
    of the constants in force at ``threads``)."""
    return seconds(estimate, prepared) * (1.0 + selection_margin(algorithm, threads))
