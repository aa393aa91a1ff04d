"""Calibration of the cost constants: the stored files, their checks, the fit and calibrate().

Nothing here assumes this machine: keys are read from it, the shipped set is whichever the
effective ISA level gets, and timings are faked wherever their values matter.
"""
from __future__ import annotations

import dataclasses
import io
import json
import math
import os
import pathlib
import re
import statistics
import time
import warnings

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import convlab
from convlab.cli import demo, main as cli
from convlab.dispatch import cost_model, measure, registry, select
from convlab.dispatch.calibration import design, fit, run, store
from convlab.runtime import cpu
from convlab.runtime.cpu import ISA_LEVELS
from convlab.runtime.threads import effective_threads
from tests.helpers import load_bench_script

THREADS = 2


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty calibration cache of this test's own."""
    monkeypatch.setenv("CONVLAB_CACHE_DIR", str(tmp_path))
    cost_model.reload()
    yield tmp_path
    cost_model.reload()


def shipped_set(threads=THREADS):
    key = store.current_key(threads)
    return store.shipped(store.shipped_level_for(str(key["isa"])))


def valid_set(threads=THREADS, scale=None):
    """A calibration for this machine's key that load_calibration accepts: the shipped
    constants at ``threads``, each algorithm's times ``scale[name]`` (default 1)."""
    key = store.current_key(threads)
    shipped = shipped_set(threads)
    constants = {name: {str(threads): {term: value * (scale or {}).get(name, 1.0)
                                       for term, value in
                                       store.constants_at(by_threads, threads).items()}}
                 for name, by_threads in shipped["constants"].items()}
    return {"format": store.FORMAT, "key": key,
            "source": {"command": "test", "date": "2000-01-01"},
            "provenance": {"date": "2000-01-01", "budget_s": 1.0},
            "constants": constants,
            "selection_margins": dict(shipped.get("selection_margins", {}))}


def write(path, stored, allow_nan=False):
    path.write_text(json.dumps(stored, allow_nan=allow_nan))
    return path


def expected_path(threads=THREADS):
    return store.calibration_path(store.current_key(threads))


def assert_ignored(path, why, threads=THREADS):
    """The file is skipped with a RuntimeWarning naming it and why; the shipped set (of the
    effective level) is in force and selection still chooses."""
    cost_model.reload()
    with pytest.warns(RuntimeWarning, match=re.escape(str(path))) as caught:
        chosen = cost_model.in_force(threads)
    assert any(re.search(why, str(w.message)) for w in caught), [str(w.message) for w in caught]
    assert chosen.origin == "shipped"
    assert chosen.data == shipped_set(threads)
    src, weights = np.ones((1, 9, 9, 8), np.float32), np.ones((3, 3, 8, 8), np.float32)
    assert convlab.select_algorithm(src, weights, threads=threads) in convlab.algorithms()


# --------------------------------------------------------------------------- shipped sets

def test_every_level_ships_constants_for_exactly_the_terms_the_hooks_count():
    problem = convlab.make_problem((1, 8, 8, 16), np.float32, (3, 3, 16, 16), np.float32,
                                   pads_begin=1, pads_end=1)
    levels = store.shipped_levels()
    assert levels and set(levels) <= set(ISA_LEVELS)
    for level in levels:
        stored = store.shipped(level)
        source = stored["source"]
        assert source["isa"] == level
        for field in ("cpu_model", "date", "command", "method"):
            assert source[field], (level, field)
        for name, by_threads in stored["constants"].items():
            counted = set(registry.get_algorithm(name).cost(problem, 1).inputs["terms"])
            for threads, constants in by_threads.items():
                assert set(constants) == counted, (level, name, threads)
                assert all(v >= 0 and math.isfinite(v) for v in constants.values())
        for name, margin in stored.get("selection_margins", {}).items():
            assert name in stored["constants"] and 0 <= margin < 1


@pytest.mark.parametrize("level", store.shipped_levels())
def test_every_shipped_set_prices_every_operation(level):
    """8-bit convolution's constants sit in a section of their own (not fitted by the
    calibration); a level whose set lacks it cannot estimate an 8-bit problem at all."""
    stored = store.shipped(level)
    for section in cost_model.OPERATION_SECTIONS:
        assert section in stored, (level, section)
        for name, by_threads in stored[section]["constants"].items():
            assert name in registry.INT8.names(), (level, section, name)
            for constants in by_threads.values():
                assert constants and all(v >= 0 and math.isfinite(v)
                                         for v in constants.values())


@pytest.mark.parametrize("level", store.shipped_levels())
def test_every_shipped_set_holds_one_constant_per_shared_term(level):
    """The fit keeps one constant for a family's shared terms (fit.SHARED_TERMS); a shipped
    set fitted before a term was shared is one a calibration cannot reproduce, and its
    estimates disagree with the fit's even on timings they predicted themselves."""
    constants = store.shipped(level)["constants"]
    for kin, terms in fit.SHARED_TERMS.items():
        members = [name for name in constants if fit.family(name) == kin]
        for threads in {t for name in members for t in constants[name]}:
            for term in terms:
                values = {name: constants[name][threads][term] for name in members
                          if term in constants[name].get(threads, {})}
                assert len(set(values.values())) <= 1, (level, threads, term, values)


TINY_PROBLEMS = [((1, 8, 8, 8), (3, 3, 8, 8)), ((1, 6, 6, 4), (3, 3, 4, 5)),
                 ((1, 32, 4), (3, 4, 4)), ((1, 4, 4, 4, 4), (3, 3, 3, 4, 4))]


@pytest.mark.parametrize("level", store.shipped_levels())
def test_shipped_sets_never_estimate_winograd_cheapest_on_a_tiny_problem(level):
    """A shipped fit that does is broken, whatever the machine: Winograd's three stages cost
    a call 2-3x what direct's or im2col's fixed cost is where it was measured (95-113 us
    against 33-39 us for an 8x8x8 3x3 on the AVX2 EPYC), and on a tiny problem it rounds
    where the others are exact (a noisy fit of the avx2 set did pick it there)."""
    stored = store.shipped(level)
    for src_shape, weights_shape in TINY_PROBLEMS:
        problem = convlab.make_problem(src_shape, np.float32, weights_shape, np.float32,
                                       pads_begin=1, pads_end=1)
        for threads in map(int, stored["constants"]["direct"]):
            estimates = {}
            for name, by_threads in stored["constants"].items():
                algorithm = registry.get_algorithm(name)
                if algorithm.supports(problem) is None:
                    terms = algorithm.cost(problem, threads).inputs["terms"]
                    per_unit = store.constants_at(by_threads, threads)
                    estimates[name] = sum(per_unit[t] * v for t, v in terms.items())
            cheapest = min(estimates, key=estimates.get)
            assert not cheapest.startswith("winograd"), (level, threads, src_shape, estimates)


def test_a_level_without_a_set_of_its_own_takes_the_nearest_narrower_one(monkeypatch):
    monkeypatch.setattr(store, "shipped_levels", lambda: ["baseline", "avx512"])
    assert store.shipped_level_for("avx2") == "baseline"
    assert store.shipped_level_for("avx512") == "avx512"
    assert store.shipped_level_for("some-future-level") == "avx512"
    monkeypatch.setattr(store, "shipped_levels", lambda: ["avx512"])
    assert store.shipped_level_for("baseline") == "avx512"


def test_without_a_calibration_the_shipped_set_of_the_effective_level_is_in_force(cache):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        chosen = cost_model.in_force(THREADS)
    assert chosen.origin == "shipped"
    assert chosen.isa == cpu.effective_isa()
    assert chosen.level == store.shipped_level_for(cpu.effective_isa())
    described = cost_model.describe_constants(THREADS)
    assert described.startswith(f"shipped {chosen.level} set")
    assert chosen.data["source"]["cpu_model"] in described
    for name, about in chosen.data["source"].get("refitted", {}).items():
        assert f"{name} refitted on {about['cpu_model']}" in described
    assert described == cost_model.source(THREADS)


def test_a_shipped_sets_later_refits_are_described(cache, monkeypatch):
    chosen = cost_model.in_force(THREADS)
    source = {**chosen.data["source"], "refitted": {
        "im2col": {"cpu_model": "Some CPU (model 1)", "date": "2026-01-02"}}}
    data = {**chosen.data, "source": source}
    monkeypatch.setattr(cost_model, "in_force", lambda threads=None: dataclasses.replace(
        chosen, data=data))
    assert cost_model.describe_constants(THREADS).endswith(
        "; im2col refitted on Some CPU (model 1) on 2026-01-02")


# --------------------------------------------------------------------------- the cache

def test_the_cache_directory_follows_convlab_cache_dir(tmp_path, monkeypatch):
    import platformdirs

    monkeypatch.setenv("CONVLAB_CACHE_DIR", str(tmp_path / "mine"))
    assert store.cache_dir() == tmp_path / "mine"
    assert store.calibration_path(store.current_key(3)).parent == tmp_path / "mine"
    monkeypatch.setenv("CONVLAB_CACHE_DIR", "")
    assert store.cache_dir() == pathlib.Path(platformdirs.user_cache_dir("convlab"))
    monkeypatch.delenv("CONVLAB_CACHE_DIR")
    assert store.cache_dir() == pathlib.Path(platformdirs.user_cache_dir("convlab"))


def test_one_file_per_key():
    key = store.current_key(2)
    names = {store.file_name(key)}
    for field, other in (("cpu_model", key["cpu_model"] + " v2"), ("isa", "other"),
                         ("threads", 3), ("convlab_version", "0.0.1"),
                         ("gemm", key["gemm"] + " OPENBLAS_CORETYPE=Haswell")):
        names.add(store.file_name({**key, field: other}))
    assert len(names) == 6
    odd = {**key, "cpu_model": "../../etc/passwd \x00 *?[", "convlab_version": "1/2"}
    assert "/" not in store.file_name(odd) and "\x00" not in store.file_name(odd)


def test_a_valid_calibration_is_used_and_described(cache):
    path = write(expected_path(), valid_set(scale={"direct": 0.5}))
    cost_model.reload()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        chosen = cost_model.in_force(THREADS)
    assert chosen.origin == "calibrated" and chosen.path == str(path)
    shipped = store.constants_at(shipped_set()["constants"]["direct"], THREADS)
    assert cost_model.constants_for("direct", THREADS) == {t: v * 0.5 for t, v in shipped.items()}
    assert str(path) in cost_model.describe_constants(THREADS)
    # other thread counts keep the shipped set
    assert cost_model.in_force(THREADS + 1).origin == "shipped"


def test_a_calibrated_set_measures_plans_with_its_own_margin(cache, monkeypatch):
    threads = effective_threads(None)  # the count measure_margin() reads the set at
    shipped = store.shipped

    def shipped_with_margin(level):
        return {**shipped(level), "measure_margin": 0.31}

    monkeypatch.setattr(store, "shipped", shipped_with_margin)
    # a calibration file without one (as older files are): its level's shipped margin
    write(expected_path(threads), valid_set(threads))
    cost_model.reload()
    assert cost_model.in_force().origin == "calibrated"
    assert cost_model.measure_margin() == 0.31
    write(expected_path(threads), {**valid_set(threads), "measure_margin": 0.9})
    cost_model.reload()
    assert cost_model.measure_margin() == 0.9


@pytest.mark.parametrize("margin", ["not a number", -0.1, store.MAX_MEASURE_MARGIN + 1,
                                    True, None])
def test_an_unusable_measure_margin_makes_the_file_corrupt(cache, margin):
    stored = {**valid_set(), "measure_margin": margin}
    if margin is None:  # null is as good as absent
        write(expected_path(), stored)
        cost_model.reload()
        assert cost_model.in_force(THREADS).origin == "calibrated"
        return
    assert_ignored(write(expected_path(), stored), "measure margin")


def test_estimate_spreads_say_how_far_above_the_lowest_estimate_the_fastest_lay():
    timings = [fit.Timing("a", 1, {}, 3.0, case="p:plan"),
               fit.Timing("b", 1, {}, 2.0, case="p:plan"),
               fit.Timing("c", 1, {}, 1.0, case="p:plan"),
               fit.Timing("a", 1, {}, 1.0, case="q"), fit.Timing("b", 1, {}, 2.0, case="q"),
               fit.Timing("a", 1, {}, 2.0, case="r"), fit.Timing("b", 1, {}, 1.0, case="r"),
               fit.Timing("a", 1, {}, 1.0, case="alone")]
    estimates = [1.0, 1.2, 1.5, 1.0, 3.0, 1.0, 3.0, 1.0]
    # the fastest has the third-lowest estimate in p; in r it is the runner-up, which a
    # plan times whatever the margin
    assert measure.RUNNERS_TIMED == 2
    assert fit.estimate_spreads(timings, estimates) == {"p:plan": 1.5, "q": 1.0, "r": 1.0}
    # margins scale the estimates as selection does
    assert fit.estimate_spreads(timings, estimates, {"c": 1.0})["p:plan"] == 3.0


def test_the_calibrated_measure_margin_covers_the_plans_and_the_shipped_margin():
    case = f"p:{run.ALONE}"
    plan = [fit.Timing("a", 1, {}, 3.0, case=case), fit.Timing("b", 1, {}, 2.0, case=case),
            fit.Timing("c", 1, {}, 1.0, case=case)]
    shipped = {"measure_margin": 0.4}
    # the fastest plan's estimate 2.5x the lowest: 150%
    margin, spreads = run._measure_margin(shipped, plan, [1.0, 1.2, 2.5], {})
    assert margin == pytest.approx(1.5) and spreads == {case: 2.5}
    # never below the shipped margin, never above the most a file may hold
    assert run._measure_margin(shipped, plan, [1.0, 1.05, 1.1], {})[0] == pytest.approx(0.4)
    assert run._measure_margin(shipped, plan, [1.0, 1.2, 99.0], {})[0] == \
        store.MAX_MEASURE_MARGIN
    assert run._measure_margin({}, plan, [1.0, 1.0, 1.0], {})[0] == \
        cost_model.DEFAULT_MEASURE_MARGIN


@pytest.mark.parametrize("field, other, kind", [
    ("convlab_version", "0.0.0-test", "stale"),
    ("cpu_model", "Some Other CPU (cpu family 1)", "foreign"),
    ("isa", "an-other-level", "foreign"),
    ("threads", THREADS + 1, "foreign"),
    ("gemm", "scipy-openblas32 OPENBLAS_CORETYPE=Prescott", "foreign"),
])
def test_a_file_made_for_another_key_is_ignored_with_a_warning(cache, field, other, kind):
    stored = valid_set()
    stored["key"][field] = other
    path = write(expected_path(), stored)
    assert_ignored(path, f"is {kind}: calibrated for {field} ")


def test_an_upgrade_of_convlab_makes_the_calibration_stale(cache, monkeypatch):
    path = write(expected_path(), valid_set(scale={"im2col": 0.5}))
    cost_model.reload()
    assert cost_model.in_force(THREADS).origin == "calibrated"
    monkeypatch.setattr(convlab._version, "VERSION", "999.0")
    assert_ignored(path, "is stale: calibrated for convlab_version .*, this is '999.0'")


@pytest.mark.parametrize("change", ["cpu_model", "isa", "threads", "gemm"])
def test_another_machine_level_or_thread_count_never_uses_the_calibration(cache, monkeypatch,
                                                                         change):
    """Files are found by key: a calibration made for another CPU model, ISA level, thread
    count or choice of GEMM kernels is not read at all (a shared cache directory holds each
    machine's own)."""
    write(expected_path(), valid_set(scale={"direct": 0.5}))
    threads = THREADS
    if change == "cpu_model":
        monkeypatch.setattr(cpu, "cpu_model", lambda: "Some Other CPU")
    elif change == "isa":
        other = next(level for level in ISA_LEVELS if level != cpu.effective_isa())
        monkeypatch.setattr(cpu, "effective_isa", lambda: other)
    elif change == "gemm":  # OpenBLAS told to run kernels other than the CPU's own
        other = "Haswell" if os.environ.get("OPENBLAS_CORETYPE") == "Prescott" else "Prescott"
        monkeypatch.setenv("OPENBLAS_CORETYPE", other)
    else:
        threads = THREADS + 1
    cost_model.reload()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        chosen = cost_model.in_force(threads)
    assert chosen.origin == "shipped"
    assert chosen.data == store.shipped(store.shipped_level_for(store.current_key(threads)["isa"]))


def _edited(edit):
    stored = valid_set()
    edit(stored)
    return json.dumps(stored, allow_nan=True).encode()


def _first_constants(stored):
    return stored["constants"]["direct"][str(THREADS)]


CORRUPT = {
    "garbage bytes": (b"\x00\xffnot json at all\x80", "not UTF-8"),
    "empty": (b"", "not valid JSON"),
    "truncated": (b'{"format": 1, "key": {', "not valid JSON"),
    "a list": (b"[1, 2, 3]", "JSON list"),
    "no key": (json.dumps({"format": store.FORMAT}).encode(), "no 'key'"),
    "another format": (_edited(lambda s: s.update(format=store.FORMAT + 1)), "file format"),
    "the format before GEMM kernels were keyed": (_edited(lambda s: s.update(format=1)),
                                                  "file format"),
    "format true": (_edited(lambda s: s.update(format=True)), "file format"),
    "NaN constant": (_edited(lambda s: _first_constants(s).update(call=float("nan"))),
                     "not valid JSON"),
    "infinite constant": (_edited(lambda s: _first_constants(s).update(call=1e999)),
                          "not valid JSON"),
    "huge literal": (json.dumps(valid_set()).replace('"call": ', '"call": 1e400, "x": ', 1)
                     .encode(), "unusable constant|terms differ"),
    "negative constant": (_edited(lambda s: _first_constants(s).update(call=-1e-6)),
                          "unusable constant direct.call"),
    "string constant": (_edited(lambda s: _first_constants(s).update(call="1e-6")),
                        "unusable constant direct.call"),
    "boolean constant": (_edited(lambda s: _first_constants(s).update(call=True)),
                         "unusable constant direct.call"),
    "absurd constant": (_edited(lambda s: _first_constants(s).update(call=5.0)),
                        "unusable constant direct.call"),
    "all zero": (_edited(lambda s: _first_constants(s).update(
        {t: 0.0 for t in _first_constants(s)})), "prices every term of 'direct' at zero"),
    "missing term": (_edited(lambda s: _first_constants(s).pop("call")), "missing \\['call'\\]"),
    "unknown term": (_edited(lambda s: _first_constants(s).update(warp_drive=1e-9)),
                     "unknown \\['warp_drive'\\]"),
    "missing algorithm": (_edited(lambda s: s["constants"].pop("im2col")),
                          "no 2-thread constants for 'im2col'"),
    "unknown algorithm": (_edited(lambda s: s["constants"].update(mine={})),
                          "algorithms this convlab does not price"),
    "other thread count only": (_edited(lambda s: s["constants"].update(
        direct={"1": _first_constants(s)})), "no 2-thread constants for 'direct'"),
    "margin out of range": (_edited(lambda s: s["selection_margins"].update(im2col=1.5)),
                            "unusable selection margin"),
    "margin of nothing": (_edited(lambda s: s["selection_margins"].update(mine=0.1)),
                          "unknown algorithm"),
    "constants a list": (_edited(lambda s: s.update(constants=[])), "no 'constants'"),
    "no provenance": (_edited(lambda s: s.pop("provenance")), "no 'provenance'"),
    "deeply nested": (b"[" * 100000, "not valid JSON"),
    "too large": (b" " * (store.MAX_FILE_BYTES + 1), "larger than"),
}


@pytest.mark.parametrize("case", list(CORRUPT))
def test_a_corrupt_file_is_ignored_with_a_warning(cache, case):
    data, why = CORRUPT[case]
    path = expected_path()
    path.write_bytes(data)
    with pytest.raises(store.InvalidCalibration, match=why):
        store.load_calibration(path, store.current_key(THREADS))
    assert_ignored(path, why)


def test_an_unreadable_file_is_ignored_with_a_warning(cache):
    path = expected_path()
    path.mkdir()  # a directory where the file should be: open() fails
    with pytest.raises(store.InvalidCalibration, match="cannot be read"):
        store.load_calibration(path, store.current_key(THREADS))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=3000))
def test_the_reader_takes_any_bytes(data):
    try:
        stored = store.parse_calibration(data, store.current_key(THREADS))
    except store.InvalidCalibration:
        return
    assert isinstance(stored, dict)  # only a well-formed set gets here


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=4),
    max_leaves=30)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_the_reader_takes_any_edit_of_a_valid_file(data):
    """Replace one value anywhere in a valid file by arbitrary JSON: the reader accepts it
    only if every check still holds, and raises nothing but InvalidCalibration."""
    stored = valid_set()
    node, path = stored, []
    while isinstance(node, dict) and node and data.draw(st.booleans()):
        key = data.draw(st.sampled_from(sorted(node)))
        path.append(key)
        node = node[key]
    if not path:
        return
    parent = stored
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = data.draw(JSON)
    try:
        accepted = store.parse_calibration(json.dumps(stored).encode(), store.current_key(THREADS))
    except store.InvalidCalibration:
        return
    for by_threads in accepted["constants"].values():
        for value in by_threads[str(THREADS)].values():
            assert isinstance(value, (int, float)) and 0 <= value <= 1 and math.isfinite(value)


# --------------------------------------------------------------------------- the design

@pytest.mark.parametrize("threads", [1, 2, 8])
def test_the_core_design_pins_every_term_of_every_algorithm(threads):
    """Every term of every priced algorithm's hook is non-zero in some core problem that
    algorithm runs: no column of the fit's design matrix is all zero."""
    core = design.problems([design.CORE])
    for name, by_threads in shipped_set(threads)["constants"].items():
        algorithm = registry.get_algorithm(name)
        term_names = sorted(next(iter(by_threads.values())))
        timings = []
        for p in core:
            problem = p.layer().problem()
            if algorithm.supports(problem) is None:
                terms = algorithm.cost(problem, threads).inputs["terms"]
                timings.append(fit.Timing(name, threads, terms, 1.0))
        assert len(timings) >= len(term_names), name
        columns = fit.design_matrix(timings, term_names)
        zero = [t for t, column in zip(term_names, columns.T) if not column.any()]
        assert not zero, (name, zero)


def test_design_problems_are_valid_and_named_uniquely():
    names = [p.name for p in design.DESIGN]
    assert len(names) == len(set(names))
    for p in design.DESIGN:
        layer = p.layer()
        assert layer.name == f"calibration:{p.name}"
        assert layer.problem().flops > 0 and p.why


# --------------------------------------------------------------------------- the fit

def test_the_fit_recovers_constants_from_exact_timings():
    rng = np.random.default_rng(1)
    truth = {"call": 2e-5, "flops": 1e-11, "bytes": 3e-10}
    timings = []
    for i in range(30):
        terms = {"call": 1.0, "flops": float(rng.uniform(1e5, 1e8)),
                 "bytes": float(rng.uniform(1e3, 1e6))}
        seconds = sum(truth[t] * v for t, v in terms.items())
        timings.append(fit.Timing("a", 2, terms, seconds, group=str(i % 3), case=str(i)))
    result = fit.fit(timings)
    for term, value in truth.items():
        assert result.constants["a"]["2"][term] == pytest.approx(value, rel=1e-3)
    residuals = result.residuals["a"]["2"]
    assert residuals.timings == 30 and residuals.rms_relative_error < 1e-3
    assert result.unpinned["a"]["2"] == []


def test_a_family_shares_the_constants_of_its_shared_terms():
    # winograd4's timings alone cannot tell its GEMM from its transforms (they grow
    # together there); winograd2's pin the GEMM constant the two share.
    shared = fit.SHARED_TERMS["winograd"][0]
    truth = {"winograd2": {"call": 1e-4, shared: 2e-11, "transform_flops": 6e-11},
             "winograd4": {"call": 1e-4, shared: 2e-11, "transform_flops": 9e-11}}
    rng = np.random.default_rng(2)
    timings = []
    for i in range(20):
        g = float(rng.uniform(1e6, 1e9))
        for name, t_flops in (("winograd2", float(rng.uniform(1e5, 1e8))),
                              ("winograd4", 0.25 * g)):
            terms = {"call": 1.0, shared: g, "transform_flops": t_flops}
            seconds = sum(truth[name][n] * v for n, v in terms.items())
            timings.append(fit.Timing(name, 2, terms, seconds, group=str(i % 4), case=str(i)))
    result = fit.fit(timings)
    for name, constants in truth.items():
        for term, value in constants.items():
            assert result.constants[name]["2"][term] == pytest.approx(value, rel=1e-3), (
                name, term)
    assert fit.family("winograd4") == "winograd" and fit.family("direct") == "direct"
    assert fit.family("transposed_winograd2") == "transposed_winograd2"


def test_the_preparation_refit_recovers_preparation_from_the_one_shot_plan_gap():
    # The stored set misprices the copy (0) and splits the fixed cost its own way; the
    # refit takes the copy's constant and the one-shot fixed cost from the gaps, keeps the
    # other terms, and keeps call + oneshot_call (a one-shot call's fixed cost).
    stored = {"a": {"2": {"call": 5e-5, "oneshot_call": 0.0, "flops": 1e-11,
                          "copy_bytes": 0.0}}}
    truth_copy, truth_oneshot = 2e-10, 3e-5
    rng = np.random.default_rng(3)
    pairs = []
    for _ in range(12):
        flops, copied = float(rng.uniform(1e6, 1e9)), float(rng.uniform(1e3, 1e7))
        plan = 2e-5 + 1e-11 * flops
        pairs.append(fit.PreparedPair("a", 2, {"copy_bytes": copied, "oneshot_call": 1.0},
                                      plan + truth_oneshot + truth_copy * copied, plan))
    refitted = fit.fit_preparation(pairs, stored, {"oneshot_call": "call"})["a"]["2"]
    assert refitted["copy_bytes"] == pytest.approx(truth_copy, rel=1e-3)
    assert refitted["oneshot_call"] == pytest.approx(truth_oneshot, rel=1e-3)
    assert refitted["call"] + refitted["oneshot_call"] == pytest.approx(5e-5, rel=1e-3)
    assert refitted["flops"] == 1e-11
    # a term no pair counts keeps the stored constant
    stored["a"]["2"]["pack_bytes"] = 7e-11
    unpinned = [dataclasses.replace(p, terms={**p.terms, "pack_bytes": 0.0}) for p in pairs]
    values = fit.fit_preparation(unpinned, stored, {"oneshot_call": "call"})["a"]["2"]
    assert values["pack_bytes"] == 7e-11
    assert values["copy_bytes"] == pytest.approx(truth_copy, rel=1e-3)
    # a plan slower than its one-shot call (noise) never makes a constant negative
    noisy = [dataclasses.replace(p, plan_seconds=p.oneshot_seconds * 1.1) for p in pairs]
    values = fit.fit_preparation(noisy, stored, {"oneshot_call": "call"})["a"]["2"]
    assert min(values.values()) >= 0.0


def test_a_terms_refit_moves_only_the_named_terms_on_the_sets_scale():
    # The stored set prices the 3-D extra at 3e-11 where it costs 1e-11; the machine runs
    # the whole algorithm 1.5x slower than the set says. The refit brings the timings to
    # the set's scale by the 2-D problems, recovers the 3-D constant, keeps the others.
    stored = {"a": {"2": {"call": 2e-5, "flops": 1e-11, "flops_3d": 3e-11}}}
    truth = {"call": 2e-5, "flops": 1e-11, "flops_3d": 1e-11}
    rng = np.random.default_rng(5)
    timings = []
    for i in range(20):
        work = float(10 ** rng.uniform(5, 9))
        terms = {"call": 1.0, "flops": work, "flops_3d": work if i % 2 else 0.0}
        seconds = 1.5 * sum(truth[t] * v for t, v in terms.items())
        timings.append(fit.Timing("a", 2, terms, seconds, group=str(i), case=str(i)))
    values = fit.fit_terms(timings, stored, ["flops_3d"])["a"]["2"]
    assert values["flops_3d"] == pytest.approx(1e-11, rel=1e-3)
    assert values["call"] == 2e-5 and values["flops"] == 1e-11
    # the scale matters: without the 2-D problems there is none, and nothing is refitted
    only_3d = [t for t in timings if t.terms["flops_3d"]]
    assert fit.fit_terms(only_3d, stored, ["flops_3d"]) == {}
    # a constant never goes negative, however cheap the timings say the terms are
    cheap = [dataclasses.replace(t, seconds=t.seconds * 0.3) if t.terms["flops_3d"] else t
             for t in timings]
    assert fit.fit_terms(cheap, stored, ["flops_3d"])["a"]["2"]["flops_3d"] >= 0.0


def test_a_prior_holds_what_the_timings_cannot_tell_apart_and_lets_the_rest_move():
    # "flops" and "bytes" grow together in every timing: the timings fix their sum, and
    # without a prior NNLS may split it any way; with one, the split stays near the
    # prior's while "call", which the timings pin, moves to its true value.
    truth = {"call": 2e-5, "flops": 1e-11, "bytes": 1e-11}
    prior = {"a": {"2": {"call": 5e-5, "flops": 1.5e-11, "bytes": 0.5e-11}}}
    rng = np.random.default_rng(4)
    timings = []
    for i in range(30):
        work = float(10 ** rng.uniform(3, 8))
        terms = {"call": 1.0, "flops": work, "bytes": work}
        seconds = sum(truth[t] * v for t, v in terms.items())
        timings.append(fit.Timing("a", 2, terms, seconds, group=str(i), case=str(i)))
    held = fit.fit(timings, prior=prior, prior_weight=0.1).constants["a"]["2"]
    assert held["call"] == pytest.approx(2e-5, rel=0.05)
    assert held["flops"] + held["bytes"] == pytest.approx(2e-11, rel=0.01)
    assert held["flops"] / held["bytes"] == pytest.approx(3.0, rel=0.05)
    # where the timings pin a constant, they outweigh the prior (2.5x the true call)
    assert held["call"] < 0.5 * prior["a"]["2"]["call"]
    # a zero weight is the fit without a prior
    assert (fit.fit(timings, prior=prior, prior_weight=0.0).constants
            == fit.fit(timings).constants)
    # a prior does not pin a term no timing counts: the fallback still gives it
    unused = [dataclasses.replace(t, terms={**t.terms, "unused": 0.0}) for t in timings]
    with_unused = {"a": {"2": {**prior["a"]["2"], "unused": 4e-9}}}
    result = fit.fit(unused, fallback=with_unused, prior=with_unused, prior_weight=0.1)
    assert result.unpinned["a"]["2"] == ["unused"]
    assert result.constants["a"]["2"]["unused"] == 4e-9


def test_a_term_no_timing_counts_keeps_the_fallback_constant():
    timings = [fit.Timing("a", 1, {"call": 1.0, "unused": 0.0}, 1e-5, case=str(i))
               for i in range(3)]
    result = fit.fit(timings, fallback={"a": {"1": {"call": 9.0, "unused": 7e-9}}})
    assert result.constants["a"]["1"] == {"call": pytest.approx(1e-5), "unused": 7e-9}
    assert result.unpinned["a"]["1"] == ["unused"]
    assert fit.fit(timings).constants["a"]["1"]["unused"] == 0.0


def test_margins_and_regret():
    # case x: b is estimated 5% cheaper than a but is 20% slower; case y: b is right
    timings = [fit.Timing("a", 1, {"s": 1.00}, 1.0, case="x"),
               fit.Timing("b", 1, {"s": 0.95}, 1.2, case="x"),
               fit.Timing("a", 1, {"s": 1.00}, 1.0, case="y"),
               fit.Timing("b", 1, {"s": 0.50}, 0.5, case="y"),
               fit.Timing("c", 1, {"s": 0.01}, 0.01, case="y", contender=False)]
    constants = {"a": {"1": {"s": 1.0}}, "b": {"1": {"s": 1.0}}, "c": {"1": {"s": 1.0}}}
    assert fit.regrets(timings, fit.estimated(timings, constants)) == {"x": 1.2, "y": 1.0}
    margins, scores = fit.fit_margins(timings, constants, ["b"])
    assert margins == {"b": 0.06}  # the smallest margin that gives case x to a
    assert min(s[1] for s in scores["b"]) == pytest.approx(1.0)
    summary = fit.regret_summary(timings, constants, margins)
    assert summary == {"cases": 2, "geo_mean": 1.0, "worst": 1.0, "within_5_percent": 2}


def test_refine_rescales_constants_for_the_regret_of_the_picks():
    # b is 15% faster than a on odd cases and 30% slower on even ones, and its terms say
    # so, but its constant is 30% too high: every pick goes to a (regret 1.18 on odd cases)
    timings = []
    for i in range(12):
        work, ratio = 1.0 + i, (0.85 if i % 2 else 1.3)
        timings += [fit.Timing("a", 1, {"s": work, "unused": 1.0}, 1e-3 * work, case=str(i)),
                    fit.Timing("b", 1, {"s": work * ratio}, 1e-3 * work * ratio, case=str(i))]
    constants = {"a": {"1": {"s": 1e-3, "unused": 0.0}}, "b": {"1": {"s": 1.3e-3}}}
    assert fit.regret_summary(timings, constants)["geo_mean"] > 1.05
    refined = fit.refine(timings, constants)
    assert fit.regret_summary(timings, refined)["geo_mean"] == pytest.approx(1.0)
    assert 0.9e-3 < refined["b"]["1"]["s"] < 1e-3 / 0.85
    assert refined["a"]["1"]["s"] == pytest.approx(1e-3, rel=0.1)
    assert refined["a"]["1"]["unused"] == 0.0  # a zero constant stays zero
    assert constants["b"]["1"]["s"] == 1.3e-3  # the input is left as it was


def test_refine_keeps_one_factor_for_a_shared_constant():
    shared = fit.SHARED_TERMS["winograd"][0]
    timings = []
    for i in range(6):
        for name, own in (("winograd2", 2.0), ("winograd4", 1.0)):
            terms = {shared: 1.0 + i, "own": own}
            timings.append(fit.Timing(name, 2, terms, 1e-3 * (1.0 + i) + 1e-4 * own * (1 + i % 2),
                                      case=str(i)))
    constants = {name: {"2": {shared: 2e-3, "own": 1e-4}} for name in ("winograd2", "winograd4")}
    refined = fit.refine(timings, constants)
    assert refined["winograd2"]["2"][shared] == refined["winograd4"]["2"][shared]


def test_held_out_regret_judges_each_problem_by_constants_fitted_without_it():
    timings = []
    for i in range(10):
        for mode in ("", ":plan"):
            for name, seconds in (("a", 1.0), ("b", 2.0)):
                timings.append(fit.Timing(name, 1, {"s": seconds}, seconds,
                                          case=f"p{i}{mode}"))
    seen = []

    def fitted_on(subset):
        seen.append({t.case for t in subset})
        # a "fit" that gets every problem right that it saw, and the rest wrong
        return {"a": {"1": {"s": 1.0}}, "b": {"1": {"s": 0.1}}}

    regrets = fit.held_out_regrets(timings, fitted_on)
    assert len(seen) == fit.HELD_OUT_FOLDS
    cases = {t.case for t in timings}
    for train in seen:
        held_out = cases - train
        # a problem's one-shot and plan cases are held out together
        assert {c.split(":")[0] for c in held_out}.isdisjoint({c.split(":")[0] for c in train})
    assert set(regrets) == cases
    assert all(value == pytest.approx(2.0) for value in regrets.values())
    assert fit.summary_of(regrets.values())["geo_mean"] == pytest.approx(2.0)


# --------------------------------------------------------------------------- calibrate()

CORE_BUDGET_SECONDS = 8


def fake_timing(monkeypatch, favour=None):
    """Timings without running anything: each contender takes what the shipped constants
    estimate for it, an algorithm in ``favour`` that times the factor given."""
    shipped = shipped_set()
    favour = favour or {}

    def seconds(c):
        per_unit = store.constants_at(shipped["constants"][c.algorithm], THREADS)
        return favour.get(c.algorithm, 1.0) * sum(per_unit[t] * v for t, v in c.terms.items())

    monkeypatch.setattr(run, "first_call_seconds", seconds)
    monkeypatch.setattr(run, "time_block",
                        lambda contenders, seed: [seconds(c) for c in contenders])


def test_calibrate_writes_a_file_that_selection_then_uses(cache, monkeypatch):
    probe = next(p for p in design.DESIGN if p.name == "dense_3x3_28").layer()
    problem = probe.problem()
    src, weights, _ = probe.arrays()
    kwargs = probe.convolve_kwargs()
    rows = select.assess(problem, THREADS)
    ranked = sorted(select.contenders(rows), key=lambda r: r.estimate.seconds)
    before = convlab.select_algorithm(src, weights, threads=THREADS, **kwargs)
    # the runner-up outside a family of shared constants (Winograd's tiles share their
    # GEMM's): timings of it alone scaled are then what some set of constants estimates
    other = next(r for r in ranked if r.name != before and fit.family(r.name) == r.name)
    # make it time a third of the current pick's estimate
    factor = ranked[0].estimate.seconds / other.estimate.seconds / 3
    fake_timing(monkeypatch, {other.name: factor})

    # the core tier, with every plan timed a second time on its own, within the budget at
    # every level's shipped estimates
    result = convlab.calibrate(budget_s=CORE_BUDGET_SECONDS, threads=THREADS)
    path = expected_path()
    assert result.path == str(path) and path.is_file()
    assert path.parent == cache
    assert result.key == store.current_key(THREADS)
    stored = store.load_calibration(path, store.current_key(THREADS))
    assert stored == json.loads(json.dumps(result.data))
    provenance = stored["provenance"]
    assert set(design.problems([design.CORE])) <= {
        p for p in design.DESIGN if p.name in provenance["problems"]}
    assert provenance["rounds"] >= 1 and provenance["timings"] > 0
    assert provenance["budget_s"] == CORE_BUDGET_SECONDS
    assert provenance["wall_s"] <= CORE_BUDGET_SECONDS
    assert provenance["regret"]["calibrated"]["worst"] == pytest.approx(1.0)
    assert provenance["regret"]["calibrated_held_out"]["cases"] > 0
    assert provenance["shipped_over_held_out"]["cases"] > 0
    assert provenance["plan_estimate_spreads"]
    assert all(case.endswith(run.ALONE) for case in provenance["plan_estimate_spreads"])
    # the fit sees the rotations' timings only; the plans' own blocks are kept apart
    modes = {mode for _, mode, *_ in provenance["medians"]}
    assert modes == {"oneshot", "plan", run.ALONE}
    # each median is its own contender's: a plan times the same in both blocks here
    medians = {(problem, mode, name): seconds
               for problem, mode, name, seconds, _ in provenance["medians"]}
    assert len(medians) == len(provenance["medians"])
    for (problem, mode, name), seconds in medians.items():
        if mode == run.ALONE:
            assert seconds == medians[(problem, "plan", name)], (problem, name)
    assert stored["measure_margin"] >= shipped_set().get("measure_margin", 0.0)

    # the in-memory constants and cached choices follow the new file
    assert cost_model.in_force(THREADS).origin == "calibrated"
    assert convlab.select_algorithm(src, weights, threads=THREADS, **kwargs) == other.name
    assert str(path) in str(convlab.explain(src, weights, threads=THREADS, **kwargs))
    assert cost_model.in_force(THREADS + 1).origin == "shipped"


def test_a_fit_whose_picks_regret_more_keeps_the_shipped_set(cache, monkeypatch):
    """Timings that the shipped constants predict exactly, and a fit spoiled so that im2col
    looks 1000x cheaper: its picks regret more on the calibration's own timings, so the
    stored set is the shipped one at this thread count, and explain says so."""
    fake_timing(monkeypatch)
    real_refine = fit.refine

    def spoiled_fit(timings, constants, **kwargs):
        result = real_refine(timings, constants, **kwargs)
        for by_threads in result["im2col"].values():
            for term in by_threads:
                by_threads[term] *= 1e-3
        return result

    monkeypatch.setattr(fit, "refine", spoiled_fit)
    result = convlab.calibrate(budget_s=5, threads=THREADS)
    regret = result.provenance["regret"]
    # exact estimates pick the fastest but where a selection margin prefers another within it
    widest_margin = max(shipped_set().get("selection_margins", {}).values(), default=0.0)
    assert regret["shipped"]["worst"] <= 1 + widest_margin + 1e-9
    assert regret["calibrated"]["geo_mean"] > regret["shipped"]["geo_mean"] + 0.001
    assert result.provenance["kept_shipped_set"] is True
    shipped = shipped_set()
    for name, by_threads in result.data["constants"].items():
        assert by_threads == {str(THREADS): dict(
            store.constants_at(shipped["constants"][name], THREADS))}
    assert result.data["selection_margins"] == shipped.get("selection_margins", {})
    assert "shipped set kept" in cost_model.describe_constants(THREADS)


def test_a_stored_calibration_gives_back_the_timings_it_was_fitted_to(cache, monkeypatch):
    """run.stored_timings rebuilds, from a calibration file's medians, the rows its fit
    saw (the plans' own blocks left out), so that bench/refit_calibration.py can fit them
    again with other settings."""
    fake_timing(monkeypatch)
    seen = []
    real_fit = fit.fit

    def recording_fit(timings, **kwargs):
        seen.append(list(timings))
        return real_fit(timings, **kwargs)

    monkeypatch.setattr(fit, "fit", recording_fit)
    result = convlab.calibrate(budget_s=5, threads=THREADS)
    rebuilt = run.stored_timings(result.data)

    def rows(timings):
        return sorted((t.case, t.algorithm, t.contender, round(t.seconds, 12),
                       tuple(sorted(t.terms.items()))) for t in timings)

    fitted_to = seen[0]  # the full fit comes first, then the held-out folds'
    assert rebuilt and all(t.threads == THREADS for t in rebuilt)
    # medians are stored to 4 significant digits
    assert [r[:3] for r in rows(rebuilt)] == [r[:3] for r in rows(fitted_to)]
    for a, b in zip(rows(rebuilt), rows(fitted_to)):
        assert a[3] == pytest.approx(b[3], rel=1e-3)
        assert a[4] == b[4]


def test_a_fit_whose_picks_regret_no_more_is_stored():
    """The rule itself: the shipped set is kept only when its picks regret less than the
    held-out fit's case by case, by more than 0.1% on the mean log ratio and by two
    standard errors; a tie, or a difference a few cases make, keeps the fit."""
    def better(shipped, held_out):
        cases = [f"c{i}" for i in range(len(shipped))]
        paired = run.paired_log_regret(dict(zip(cases, shipped)), dict(zip(cases, held_out)))
        return run._shipped_picks_better(paired)

    # shipped better on every case, steadily
    assert better([1.00] * 20, [1.03] * 20)
    assert better([1.00 + 0.001 * (i % 3) for i in range(20)], [1.02] * 20)
    # the same geo-means apart, but one case makes all the difference: kept the fit
    assert not better([1.0] * 19 + [1.0], [1.0] * 19 + [1.8])
    # a tie, a difference within 0.1%, and a fit that picks better
    assert not better([1.03] * 20, [1.03] * 20)
    assert not better([1.0300] * 20, [1.0305] * 20)
    assert not better([1.03] * 20, [1.01] * 20)
    # nothing judged by both: the fit
    assert not run._shipped_picks_better(run.paired_log_regret({"a": 1.0}, {"b": 1.5}))
    assert not better([1.0], [1.5])  # one case has no spread to judge by


def test_the_paired_regret_is_the_mean_log_ratio_with_its_standard_error():
    paired = run.paired_log_regret({"a": 1.0, "b": 2.0, "c": 1.0}, {"a": 1.0, "b": 1.0})
    assert paired["cases"] == 2
    assert paired["mean"] == pytest.approx(math.log(2) / 2)
    assert paired["standard_error"] == pytest.approx(
        statistics.stdev([0.0, math.log(2)]) / math.sqrt(2))


def test_calibrate_checks_its_arguments(cache):
    for budget in (0, 4.9, -1, float("nan"), float("inf"), True, "60", None):
        with pytest.raises(ValueError, match="budget_s"):
            convlab.calibrate(budget_s=budget)
    with pytest.raises(ValueError, match="threads"):
        convlab.calibrate(budget_s=10, threads=0)
    assert not any(cache.iterdir())


def test_convolve_never_calibrates(cache, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("calibration ran inside convolve")

    monkeypatch.setattr(run, "time_design", refuse)
    monkeypatch.setattr(run, "calibrate", refuse)
    src = np.ones((1, 12, 12, 16), np.float32)
    for weights in (np.ones((3, 3, 16, 16), np.float32), np.ones((1, 1, 16, 8), np.float32)):
        convlab.convolve(src, weights, threads=THREADS)
        convlab.Convolution(weights, threads=THREADS)(src)
    assert not any(cache.iterdir())


def test_a_real_calibration_within_a_small_budget(cache):
    budget = 6.0
    start = time.perf_counter()
    result = convlab.calibrate(budget_s=budget, threads=1)
    wall = time.perf_counter() - start
    assert wall <= budget + 2.0, wall
    stored = store.load_calibration(result.path, store.current_key(1))
    assert stored["provenance"]["problems"], "nothing was timed"
    chosen = cost_model.in_force(1)
    assert chosen.origin == "calibrated" and chosen.path == result.path
    src, weights = np.ones((1, 14, 14, 32), np.float32), np.ones((3, 3, 32, 32), np.float32)
    got = convlab.convolve(src, weights, threads=1, pads_begin=1, pads_end=1)
    want = convlab.convolve(src, weights, threads=1, pads_begin=1, pads_end=1,
                            algorithm="direct")
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)


def test_the_command_line(cache, monkeypatch, capsys):
    fake_timing(monkeypatch)
    monkeypatch.setattr(cli, "_seconds_since_start", lambda: 0.0)
    assert cli.main(["calibrate", "--budget", "5", "--threads", str(THREADS)]) == 0
    out = capsys.readouterr().out
    assert str(expected_path()) in out and "regret with the calibrated constants" in out
    assert "each problem held out" in out
    assert "over the held-out fit's, case by case" in out
    assert "constants now in force: calibrated on this machine" in out
    monkeypatch.setattr(cli, "_seconds_since_start", lambda: 3.0)
    assert cli.main(["calibrate", "--budget", "7"]) == 2  # 4 s left: too short
    assert "budget_s" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        cli.main(["calibrate", "--budget", "soon"])


def _design_timings(samples_per_contender):
    contenders = [run.Contender("p", "direct", "oneshot", lambda: None, {}, True, 1.0,
                                list(samples)) for samples in samples_per_contender]
    return run.DesignTimings(THREADS, contenders, 5, ["p"], [])


def test_round_slowdowns_tell_a_slowed_round_from_jittery_blocks():
    # every contender has one block 1.8x slow, each in another round: the jitter of one
    # block is not load, though every contender's rounds lie 1.8x apart
    jittery = [[1.8 if r == c % 5 else 1.0 for r in range(5)] for c in range(40)]
    timed = _design_timings(jittery)
    assert timed.spread() == pytest.approx(1.8)
    assert timed.round_slowdowns() == [1.0] * 5
    # load across round 2: the whole round is slow
    loaded = _design_timings([[x * (1.5 if r == 2 else 1.0) for r, x in enumerate(samples)]
                              for samples in jittery])
    slowdowns = loaded.round_slowdowns()
    assert slowdowns[2] == pytest.approx(1.5) and max(slowdowns[:2] + slowdowns[3:]) == 1.0
    # a round the deadline cut short counts the contenders it timed; one sample: no median
    short = _design_timings([[1.0, 2.0, 1.0], [1.0, 1.0], [3.0]])
    assert short.round_slowdowns() == [1.0, 1.5, 1.0]


@pytest.mark.parametrize("slow_round", [None, 1])
def test_the_command_line_warns_of_a_round_that_load_slowed(cache, monkeypatch, capsys,
                                                            slow_round):
    fake_timing(monkeypatch)
    timed = run.time_block
    monkeypatch.setattr(run, "time_block", lambda contenders, seed: [
        x * (1.5 if seed // 1000 == slow_round else 1.0) for x in timed(contenders, seed)])
    monkeypatch.setattr(run, "_load_average", lambda: 0.0)
    monkeypatch.setattr(cli, "_seconds_since_start", lambda: 0.0)
    assert cli.main(["calibrate", "--budget", "5", "--threads", str(THREADS)]) == 0
    out = capsys.readouterr().out
    assert "each round's time over the contenders' medians" in out
    assert ("warning: the machine was busy" in out) == (slow_round is not None)


def test_the_progress_bar_draws_on_a_terminal_only():
    stream = io.StringIO()
    bar = run.Progress(10.0, enabled=True, stream=stream)
    bar.update("warm-up: tiny", force=True)
    bar.close("done")
    assert "calibrating [" in stream.getvalue() and "/10 s" in stream.getvalue()
    quiet = io.StringIO()
    run.Progress(10.0, stream=quiet).update("x", force=True)  # StringIO is no terminal
    assert quiet.getvalue() == ""


def test_the_demo_says_which_constants_it_used(cache, monkeypatch):
    note = demo.constants_note(THREADS)
    assert cost_model.describe_constants(THREADS) in note
    assert "python -m convlab calibrate" in note
    write(expected_path(), valid_set())
    cost_model.reload()
    note = demo.constants_note(THREADS)
    assert "calibrated on this machine" in note and "python -m convlab calibrate" not in note


def test_the_offline_fit_reads_bench_csvs_as_one_shot_timings(tmp_path):
    # bench/fit_cost_model.py --from-csv takes `python -m convlab bench --csv` files beside
    # its own: each priced algorithm's one-shot median becomes a timing row; auto, plans,
    # peers and contenders that did not run are left out.
    module = load_bench_script("fit_cost_model.py")
    header = "suite,layer,mb,threads,contender,median_ms\n"
    rows = ["resnet_50,resnet_50:res2a_branch2a,1,2,direct,0.2",
            "resnet_50,resnet_50:res2a_branch2a,1,2,im2col,0.15",
            "resnet_50,resnet_50:res2a_branch2a,1,2,auto,0.2",
            "resnet_50,resnet_50:res2a_branch2a,1,2,plan:im2col,0.14",
            "resnet_50,resnet_50:res2a_branch2a,1,2,torch,0.4",
            "resnet_50,resnet_50:res2a_branch2a,1,2,winograd4,"]
    csv_path = tmp_path / "bench.csv"
    csv_path.write_text(header + "\n".join(rows) + "\n")
    loaded = {r["algorithm"]: r for r in module.load_timings([str(csv_path)])}
    assert sorted(loaded) == ["direct", "im2col"]
    assert loaded["im2col"]["seconds"] == pytest.approx(0.15e-3)
    assert loaded["im2col"]["mode"] == "oneshot" and loaded["im2col"]["threads"] == 2
    problem = module.problem_of(loaded["direct"])
    assert (problem.in_channels, problem.out_channels, problem.kernel_shape) == (64, 64, (1, 1))
