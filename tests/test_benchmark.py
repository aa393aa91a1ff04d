"""The bench harness (convlab.cli.benchmark): what it times and reports, not how fast."""
import csv
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import convlab
from convlab.cli import (
    _bench_args as bench_args,
    _bench_results as bench_results,
    _bench_tables as tables,
    benchmark,
)
from convlab.dispatch import cost_model
from convlab.problem.shapes.descriptor import parse_descriptor
from convlab.runtime import blas, cpu, timing
from tests.helpers import load_bench_script


def test_time_rotation_times_every_call_once_per_round_in_varying_order():
    order = []
    calls = [lambda name=name: order.append(name) for name in "abc"]
    times = timing.time_rotation(calls, repeats=12, pause=0)
    assert [len(t) for t in times] == [12, 12, 12]
    assert all(s >= 0 for t in times for s in t)
    untimed, turns = order[:3], order[3:]
    assert untimed == list("abc")
    # every timed call right after an untimed one of itself
    assert all(turns[i] == turns[i + 1] for i in range(0, 72, 2))
    timed = turns[1::2]
    rounds = [tuple(timed[i:i + 3]) for i in range(0, 36, 3)]
    assert all(sorted(r) == list("abc") for r in rounds)
    # no call always follows the same other one
    assert len(set(rounds)) > 2


def test_time_rotation_times_a_call_alone_back_to_back():
    """A call alone follows itself anyway: one untimed call, then the timed ones."""
    calls = []
    times = timing.time_rotation([lambda: calls.append(1)], repeats=5, pause=0)
    assert len(times) == 1 and len(times[0]) == 5
    assert len(calls) == 6


def test_timed_rounds_reverse_the_units_every_other_round():
    """benchmark.timed_rounds: units in order, then reversed; a unit's contenders share
    its block (each timed call right after an untimed one of itself)."""
    order = []

    def contender(label):
        made = _contender(label, 1.0)
        made.call = lambda: order.append(label)
        return made

    a, b, c = contender("a"), contender("b"), contender("c")
    blocks = list(benchmark.timed_rounds([[a], [b, c]], rounds=2, per_block=2,
                                         min_block_seconds=0.0))
    assert [(x.label, len(times)) for x, times in blocks] == [
        ("a", 2), ("b", 2), ("c", 2), ("b", 2), ("c", 2), ("a", 2)]
    # round 1: a's block (1 untimed + 2 timed), then b and c sharing one (2 untimed,
    # then per round one untimed and one timed call of each)
    assert order[:3] == ["a"] * 3
    shared = order[3:13]
    assert sorted(shared[:2]) == ["b", "c"]
    assert all(x == y for x, y in zip(shared[2::2], shared[3::2]))
    # round 2: the shared block first, then a's
    assert len(order) == 26 and sorted(order[13:23]) == ["b"] * 5 + ["c"] * 5
    assert order[23:] == ["a"] * 3


def test_time_rotation_takes_more_rounds_to_fill_min_seconds():
    times = timing.time_rotation([lambda: None], repeats=1, pause=0, min_seconds=1e-3)
    assert len(times[0]) > 1


def _spin_for(seconds: float) -> threading.Thread:
    def spin():
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            pass

    thread = threading.Thread(target=spin)
    thread.start()
    return thread


def test_settle_waits_out_a_spinning_thread_and_no_longer():
    spinner = _spin_for(0.3)
    start = time.perf_counter()
    timing.settle(0.01)
    waited = time.perf_counter() - start
    spinner.join()
    assert 0.25 < waited < 0.3 + timing.MAX_SETTLE_SECONDS
    start = time.perf_counter()
    timing.settle(0.01)  # nothing spins now
    assert time.perf_counter() - start < 0.2


def test_settle_without_quiet_only_pauses():
    spinner = _spin_for(0.3)
    start = time.perf_counter()
    timing.settle(0.01, quiet=False)
    waited = time.perf_counter() - start
    spinner.join()
    assert waited < 0.2


def test_interleaved_schedule_keeps_each_call_as_a_round_of_its_own():
    layer = parse_descriptor('mb1ic4ih6oc8oh6kh3ph1n"tiny"')
    contenders = benchmark.bench_layer(layer, ["direct", "im2col"], threads=1, repeats=3,
                                       warmup=1, torch=None, onnx=None, ort=None, seed=0,
                                       schedule="interleaved", rounds=1)
    for contender in contenders:
        assert [len(times) for times in contender.round_times] == [1, 1, 1], contender.label
        assert contender.times == [t for (t,) in contender.round_times]
        assert contender.median == statistics.median(contender.times)


def test_mixed_schedule_times_convlab_contenders_together_and_checks_them():
    layer = parse_descriptor('mb1ic4ih6oc8oh6kh3ph1n"tiny"')
    labels = ["direct", "im2col", "auto", "plan", "plan:direct"]
    contenders = benchmark.bench_layer(layer, labels, threads=1,
                                       repeats=4, warmup=1, torch=None, onnx=None, ort=None,
                                       seed=0, schedule="mixed", rounds=2)
    assert [c.label for c in contenders] == labels
    for contender in contenders:
        # two rounds of two rotations each
        assert [len(times) for times in contender.round_times] == [2, 2], contender.label
        assert len(contender.times) == 4, contender.label
        assert contender.ok and contender.error is not None, contender.label
        # plans: the first call is timed apart from the later ones
        assert (contender.first_call is not None) == contender.label.startswith("plan")


def _fake_contender(label, warm_seconds, call_seconds, calls):
    def call():
        calls.append(label)
        time.sleep(call_seconds)
    return bench_results.Contender(label, "convlab", call, warm_seconds=warm_seconds)


def test_far_slower_contenders_leave_the_shared_block():
    calls = []
    fast = _fake_contender("fast", 1e-4, 0.0, calls)
    near = _fake_contender("near", 5e-4, 0.0, calls)
    slow = _fake_contender("slow", 1e-4 * (benchmark.SHARED_BLOCK_FACTOR + 2), 0.01, calls)
    assert benchmark.shared_block([fast, near, slow]) == [fast, near]
    # the slow one was called once more before it was left out; the others were not
    assert calls == ["slow"]


def test_a_contender_slow_once_stays_in_the_shared_block():
    calls = []
    fast = _fake_contender("fast", 1e-3, 0.0, calls)
    # its warm-up call fell in a slow spell; called again, it is as fast as the other
    hiccup = _fake_contender("hiccup", 1e-3 * (benchmark.SHARED_BLOCK_FACTOR * 10), 0.0, calls)
    assert benchmark.shared_block([fast, hiccup]) == [fast, hiccup]
    assert calls == ["hiccup"]


def test_gemm_share_summary_judges_gemm_bound_layers_apart():
    shares = [(0.95, "big", True), (0.72, "medium", True), (0.40, "tiny", False)]
    text = tables.gemm_share_summary(shares)
    overall, bound = text.split("; ")
    assert "lowest 40% (tiny), below 70% on 1 of 3 layers" in overall
    assert "lowest 72% (medium), below 70% on 0 of 2" in bound
    assert "GEMM-bound" not in tables.gemm_share_summary([(0.4, "tiny", False)])


def _contender(label, seconds, kind="convlab", **fields):
    rounds = [] if seconds is None else [[seconds]]
    return bench_results.Contender(label, kind, round_times=rounds, **fields)


def test_network_totals_count_each_layer_times_its_multiplicity():
    once = parse_descriptor('mb1ic4ih6oc8oh6kh3ph1n"net:once"')
    thrice = parse_descriptor('mb1ic4ih6oc8oh6kh1n"net:thrice*3"')
    assert (once.multiplicity, thrice.multiplicity) == (1, 3)
    results = [
        (once, [_contender("direct", 2.0), _contender("winograd4", 1.0),
                _contender("plan", 1.0), _contender("torch", 4.0, "torch"),
                _contender("onnxrt", 3.0, "onnxruntime")]),
        (thrice, [_contender("direct", 1.0), _contender("winograd4", None),
                  _contender("plan", 0.5), _contender("torch", 2.0, "torch"),
                  _contender("onnxrt", 1.0, "onnxruntime")]),
    ]
    totals = bench_results.network_seconds(results)
    assert totals == {"direct": 5.0, "winograd4": None, "plan": 2.5, "torch": 10.0,
                      "onnxrt": 6.0}
    text = "\n".join(tables.network_summary(results))
    assert "direct 5000.00 ms" in text and "plan 2500.00 ms" in text
    # the fastest algorithm on each layer: winograd4 once, then direct three times
    assert "fastest algorithm per layer 4000.00 ms" in text
    assert "no total for winograd4" in text
    assert "torch/direct 2.00x" in text and "torch/plan 4.00x" in text
    assert "onnxrt/plan 2.40x" in text


def test_network_ratios_show_their_spread_over_rounds():
    once = parse_descriptor('mb1ic4ih6oc8oh6kh3ph1n"net:once"')
    twice = parse_descriptor('mb1ic4ih6oc8oh6kh1n"net:twice*2"')

    def timed(label, rounds, kind="convlab"):
        return bench_results.Contender(label, kind, round_times=rounds)

    # round 1: plan 1 + 2 x 1 = 3, onnxrt 3 + 2 x 3 = 9 -> 3.0x;
    # round 2: plan 2 + 2 x 2 = 6, onnxrt 3 + 2 x 1.5 = 6 -> 1.0x (medians within a round)
    results = [
        (once, [timed("plan", [[1.0], [2.0]]), timed("onnxrt", [[3.0], [3.0]], "onnxruntime")]),
        (twice, [timed("plan", [[1.0, 0.9, 1.1], [2.0]]),
                 timed("onnxrt", [[3.0], [1.0, 2.0]], "onnxruntime")]),
    ]
    assert bench_results.round_ratio_range(results, "onnxrt", "plan") == (1.0, 3.0)
    text = "\n".join(tables.network_summary(results))
    assert "onnxrt/plan" in text and "(1.00-3.00)" in text
    # a contender timed in another number of rounds, or one round only: no spread
    uneven = [(once, [timed("plan", [[1.0], [2.0]]), timed("onnxrt", [[3.0]], "onnxruntime")])]
    assert bench_results.round_ratio_range(uneven, "onnxrt", "plan") is None
    single = [(once, [timed("plan", [[1.0]]), timed("onnxrt", [[3.0]], "onnxruntime")])]
    assert bench_results.round_ratio_range(single, "onnxrt", "plan") is None
    text = "\n".join(tables.network_summary(single))
    assert text.endswith("onnxrt/plan 3.00x")


def test_plan_regret_prefers_forced_plans_as_the_bar():
    one_shot = [_contender("direct", 2.0), _contender("winograd4", 1.5),
                _contender("plan", 1.1, runs="winograd4")]
    assert bench_results.plan_regret(one_shot) == (1.1 / 1.5, "winograd4", "winograd4")
    forced = one_shot + [_contender("plan:direct", 1.0), _contender("plan:winograd4", None)]
    assert bench_results.plan_regret(forced) == (1.1, "plan:direct", "winograd4")
    assert bench_results.plan_regret([_contender("direct", 1.0)]) is None
    # the choice alone: plan:winograd4 is not timed, so there is nothing to judge it by
    assert bench_results.plan_choice_regret(forced) is None
    timed = one_shot + [_contender("plan:direct", 1.0), _contender("plan:winograd4", 1.25)]
    assert bench_results.plan_choice_regret(timed) == 1.25
    assert bench_results.plan_choice_regret(one_shot) is None  # no forced plans
    first = [_contender("plan", 2.0, first_call=10.0)]
    assert bench_results.first_call_ratio(first) == 5.0


def test_auto_choice_holds_the_algorithm_auto_runs_against_the_fastest():
    """auto's choice apart from the spread of auto's own runs: the algorithm it runs,
    timed one-shot under its own name, over the fastest algorithm."""
    layer = [_contender("direct", 2.0), _contender("winograd4", 1.6),
             _contender("winograd6", 1.0, admissible=False),
             _contender("auto", 1.2, runs="winograd4")]
    assert bench_results.auto_choice_regret(layer) == 1.6
    assert bench_results.auto_choice_regret(layer, admissible_only=True) == 1.0
    # what auto runs not timed on its own, or auto not run: nothing to judge by
    assert bench_results.auto_choice_regret(layer[:1] + layer[2:]) is None
    assert bench_results.auto_choice_regret(layer[:3]) is None
    lines = tables.selection_summary([(parse_descriptor('mb1ic8oc8_id8kd3pd1n"t:a"'), layer)],
                                     ["a"])
    line = next(text for text in lines if text.startswith("auto choice"))
    assert "geo-mean 1.600, worst 1.60 (a); within 5% on 0/1 layers" in line


def test_the_plan_is_held_against_its_twin_as_the_runs_noise():
    """plan / plan:<the algorithm it runs> per layer, and a summary line with its spread:
    the same code timed twice, so the line reads how far this run's timings drift."""
    twin_ratio = bench_results.plan_twin_ratio
    even = [_contender("plan", 1.0, runs="direct"), _contender("plan:direct", 1.0),
            _contender("plan:im2col", 0.5)]
    slow = [_contender("plan", 1.2, runs="im2col"), _contender("plan:direct", 1.0),
            _contender("plan:im2col", 1.0)]
    fast = [_contender("plan", 0.8, runs="im2col"), _contender("plan:im2col", 1.0)]
    assert twin_ratio(even) == 1.0 and twin_ratio(slow) == 1.2 and twin_ratio(fast) == 0.8
    assert twin_ratio([_contender("plan", 1.0, runs="direct"),
                       _contender("plan:im2col", 1.0)]) is None  # no twin timed
    assert twin_ratio([_contender("plan:direct", 1.0)]) is None  # no plan
    layer = parse_descriptor('mb1ic8oc8_id8kd3pd1n"t:a"')
    lines = tables.selection_summary([(layer, even), (layer, slow), (layer, fast)],
                                     ["a", "b", "c"])
    line = next(text for text in lines if text.startswith("plan / its twin"))
    # geo-mean of 1.0, 1.2 and 0.8; 1.2 and 1/0.8 = 1.25 lie more than 10% off
    assert f"geo-mean {(1.2 * 0.8) ** (1 / 3):.3f}, from 0.80 (c) to 1.20 (b)" in line
    assert line.endswith("more than 10% apart on 2/3 layers")
    plain = tables.selection_summary([(layer, [_contender("direct", 1.0)])], ["a"])
    assert not any(text.startswith("plan / its twin") for text in plain)


def test_the_recheck_times_auto_and_the_plan_again_with_the_fastest_contenders():
    """After the rounds, auto shares blocks with the fastest algorithms, and the plan
    takes turns in blocks of its own with the fastest forced plans (over all, and over
    those auto may choose); the rechecked regrets read the medians of the rounds and those
    blocks together, and the other contenders are not called again."""
    calls = []

    def timed(label, seconds, **fields):
        contender = _contender(label, seconds, **fields)
        contender.call = lambda: calls.append(label)
        return contender

    contenders = [timed("direct", 3.0), timed("winograd4", 2.0),
                  timed("winograd6", 1.9, admissible=False), timed("auto", 2.1),
                  timed("plan", 1.2, runs="winograd4"), timed("plan:winograd4", 1.1),
                  timed("plan:winograd6", 1.0, admissible=False), timed("plan:direct", 2.0)]
    assert bench_results.recheck_labels(contenders, "auto") == ["auto", "winograd4",
                                                                "winograd6"]
    assert bench_results.recheck_labels(contenders, "plan") == ["plan", "plan:winograd4",
                                                                "plan:winograd6"]
    assert bench_results.rechecked_regret(contenders, "plan") is None  # not rechecked yet
    benchmark.recheck(contenders, rounds=2, per_block=1, min_block_seconds=0.0)
    auto_calls, plan_calls = calls[:18], calls[18:]
    # auto's group, each round a rotation: one untimed call each, then each timed call
    # right after an untimed one of itself
    assert sorted(auto_calls) == sorted(["auto", "winograd4", "winograd6"] * 6)
    assert all(a == b for a, b in zip(auto_calls[3:9:2], auto_calls[4:9:2]))
    # the plans: one untimed and one timed call per block, the order reversed every other
    # round
    assert plan_calls == [label for label in ["plan", "plan:winograd4", "plan:winograd6",
                                              "plan:winograd6", "plan:winograd4", "plan"]
                          for _ in range(2)]
    for contender in contenders:
        groups = {pseudo: len(times) for pseudo, times in contender.recheck_times.items()}
        assert groups == ({"auto": 2} if contender.label in auto_calls else
                          {"plan": 2} if contender.label in plan_calls else {})
    # the ratio of the medians of the rounds and the recheck together
    by = {c.label: c for c in contenders}
    by["plan"].recheck_times = {"plan": [2.0, 2.2]}  # with the rounds' 1.2: median 2.0
    by["plan:winograd4"].recheck_times = {"plan": [2.0, 2.0]}  # 2.0
    by["plan:winograd6"].recheck_times = {"plan": [1.0, 1.0]}  # 1.0
    assert bench_results.pooled_median(by["plan"], "plan") == 2.0
    assert bench_results.pooled_median(by["plan"], "auto") is None
    assert bench_results.rechecked_regret(contenders, "plan") == pytest.approx(2.0)
    assert bench_results.rechecked_regret(contenders, "plan", admissible_only=True) == \
        pytest.approx(1.0)
    by["auto"].recheck_times = {"auto": [1.5, 1.5]}  # with 2.1: 1.5
    by["winograd4"].recheck_times = {"auto": [1.0, 1.0]}  # with 2.0: 1.0
    by["winograd6"].recheck_times = {"auto": [1.5, 1.5]}  # with 1.9: 1.5
    assert bench_results.rechecked_regret(contenders, "auto") == pytest.approx(1.5)
    assert bench_results.rechecked_regret(contenders, "auto", admissible_only=True) == \
        pytest.approx(1.5)
    # no recheck asked for, or nothing to hold the plan against but one-shot algorithms
    calls.clear()
    benchmark.recheck(contenders, rounds=0, per_block=1, min_block_seconds=0.0)
    assert calls == []
    for contender in contenders:
        contender.recheck_times = {}
    benchmark.recheck([by["direct"], by["plan"]], rounds=2, per_block=1,
                      min_block_seconds=0.0)
    assert calls == [label for label in ["plan", "direct", "direct", "plan"]
                     for _ in range(2)]
    assert set(by["direct"].recheck_times) == {"plan"}


def test_the_recheck_of_short_plans_shares_their_blocks():
    """Plans of at most PAIRED_PLAN_SECONDS are rechecked call by call in one rotation
    (each timed call right after an untimed one of itself), as they are timed in the
    rounds."""
    calls = []
    short = benchmark.PAIRED_PLAN_SECONDS / 10

    def timed(label):
        contender = _contender(label, short)
        contender.call = lambda: calls.append(label)
        return contender

    contenders = [timed("plan"), timed("plan:direct"), timed("plan:im2col")]
    contenders[2].round_times = [[short * 2]]
    benchmark.recheck(contenders, rounds=2, per_block=3, min_block_seconds=0.0)
    assert [len(c.recheck_times.get("plan", [])) for c in contenders] == [6, 6, 0]
    # after the untimed round, each timed call follows an untimed call of itself
    assert sorted(calls[:2]) == ["plan", "plan:direct"]
    timed_calls = calls[2:8]
    assert all(a == b for a, b in zip(timed_calls[::2], timed_calls[1::2]))


def test_selection_summary_without_a_plan_contender():
    """A run of one-shot algorithms only (no 'plan' in --algorithms) still summarises."""
    layer = parse_descriptor('mb1ic4ih6oc8oh6kh3ph1n"net:once"')
    results = [(layer, [_contender("direct", 2.0), _contender("fft", 1.0),
                        _contender("torch", 4.0, "torch")])]
    text = "\n".join(benchmark.selection_summary(results, ["net:once"]))
    assert "first call" not in text


def test_algorithm_names_accept_plans_forced_to_registered_algorithms():
    bench_args.check_algorithm_names(["direct", "auto", "plan", "plan:direct"])
    for bad in (["plan:no_such"], ["no_such"], ["plan:auto"]):
        with pytest.raises(SystemExit, match="--algorithms"):
            bench_args.check_algorithm_names(bad)


def test_header_names_the_cpu_and_the_constants(monkeypatch):
    lines = tables.machine_lines()
    info = convlab.runtime.cpu.cpu_info()
    assert info["isa_detected"] in lines[0] and info["isa_effective"] in lines[0]
    assert lines[1] == f"cost constants: {cost_model.source()}"
    from convlab.strategies import im2col

    assert lines[-1].startswith("im2col GEMM: ") and im2col.gemm_library["name"] in lines[-1]
    # a richer description of the constants is used when the cost model offers one
    monkeypatch.setattr(cost_model, "describe_constants", lambda: "calibrated here",
                        raising=False)
    assert tables.machine_lines()[1] == "cost constants: calibrated here"


def test_header_names_the_openblas_variables_set_in_the_environment(monkeypatch):
    """They choose im2col's GEMM kernels and blocking in place of the CPU's own."""
    for name in blas.KERNEL_ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)
    assert "set in the environment" not in tables.machine_lines()[-1]
    monkeypatch.setenv("OPENBLAS_L2_SIZE", "512")
    assert tables.machine_lines()[-1].endswith("; set in the environment: OPENBLAS_L2_SIZE=512")


def test_bench_prints_network_totals_and_plan_first_calls(capsys, tmp_path):
    path = tmp_path / "bench.csv"
    status = benchmark.main(["--suite", "resnet_50", "--layers", "res2a_branch2a",
                             "--algorithms", "direct,im2col,auto,plan,plan:direct",
                             "--no-torch", "--no-onnxruntime", "--repeats", "2",
                             "--rounds", "1", "--min-block-time", "0", "--threads", "1",
                             "--csv", str(path)])
    out = capsys.readouterr().out
    assert status == 0, out
    assert "cpu: " in out and "cost constants: " in out
    assert "network time, ms (xN)" in out
    assert "network time (each layer's median x its multiplicity, summed): direct " in out
    assert "plan regret (plan time after its first call / the fastest forced plan's" in out
    assert "plan first call / later call" in out
    assert "plan regret rechecked (the plan and the fastest forced plans timed again" in out
    assert "auto regret rechecked (auto and the fastest algorithms timed again" in out
    rows = list(csv.DictReader(path.open()))
    with_plan = {r["contender"]: r["median_with_plan_recheck_ms"] for r in rows}
    assert float(with_plan["plan"]) > 0 and float(with_plan["plan:direct"]) > 0
    assert with_plan["direct"] == "" and with_plan["auto"] == ""
    with_auto = {r["contender"]: r["median_with_auto_recheck_ms"] for r in rows}
    medians = {r["contender"]: float(r["median_ms"]) for r in rows}
    quicker = min(("direct", "im2col"), key=medians.get)
    assert float(with_auto["auto"]) > 0 and float(with_auto[quicker]) > 0
    assert with_auto["plan"] == ""
    firsts = {r["contender"]: r["first_call_ms"] for r in rows}
    assert float(firsts["plan"]) > 0 and float(firsts["plan:direct"]) > 0
    assert firsts["direct"] == "" and firsts["auto"] == ""
    # the plan's first call timed the two lowest estimates; it keeps the first listed
    timed = [item.split("=") for item in
             next(r for r in rows if r["contender"] == "plan")["first_call_timed_ms"].split(";")]
    assert len(timed) >= 2 and {name for name, _ in timed} <= set(convlab.algorithms())
    assert [float(ms) for _, ms in timed] == sorted(float(ms) for _, ms in timed)
    assert timed[0][0] == next(r for r in rows if r["contender"] == "plan")["runs"]
    assert all(r["first_call_timed_ms"] == "" for r in rows if r["contender"] != "plan")
    runs = {r["contender"]: r["runs"] for r in rows}
    assert runs["plan:direct"] == "direct" and runs["plan"] in convlab.algorithms()
    assert runs["auto"] in convlab.algorithms()
    assert runs["direct"] == ""


def test_the_measure_margin_fit_reads_the_forced_plans_of_bench_csvs(tmp_path):
    """bench/fit_measure_margin.py --from-csv takes `convlab bench --csv` files: their
    plan:<name> rows are plan timings, the one-shot and peer rows are not."""
    script = load_bench_script("fit_measure_margin.py")
    fields = ["suite", "layer", "mb", "threads", "contender", "median_ms", "min_ms"]
    rows = [["s", "s:a", 1, 2, "direct", 1.0, 0.9], ["s", "s:a", 1, 2, "plan:direct", 2.0, 1.5],
            ["s", "s:a", 1, 2, "plan:im2col", 3.0, 2.5], ["s", "s:a", 1, 2, "torch", 1.0, 1.0],
            ["s", "s:a", 1, 2, "plan:winograd4", "", ""]]
    runs = []
    for run, scale in enumerate((1.0, 2.0)):
        runs.append(tmp_path / f"run{run}.csv")
        with open(runs[-1], "w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(fields)
            writer.writerows(r[:5] + ([r[5] * scale, r[6] * scale] if r[5] else ["", ""])
                             for r in rows)
    got = {r["algorithm"]: r["seconds"] for r in script.load_plan_timings(runs, "min")}
    assert got == pytest.approx({"direct": 1.5e-3, "im2col": 2.5e-3})
    got = {r["algorithm"]: r["seconds"] for r in script.load_plan_timings(runs, "median")}
    assert got == pytest.approx({"direct": 3e-3, "im2col": 4.5e-3})


def test_the_measure_margin_fit_counts_the_runner_up_as_timed():
    """A plan times the two lowest estimates whatever the margin, so a layer whose fastest
    contender is the runner-up needs no margin, and the third-lowest sets what it needs."""
    script = load_bench_script("fit_measure_margin.py")
    runner_up_fastest = {"a": (2e-3, 1.0), "b": (1e-3, 3.0), "c": (3e-3, 4.0)}
    third_fastest = {"a": (2e-3, 1.0), "b": (3e-3, 1.5), "c": (1e-3, 2.5)}
    assert script.needed_ratio(runner_up_fastest, 0.0) == 1.0
    assert script.needed_ratio(third_fastest, 0.0) == pytest.approx(2.5)
    # with no margin the two lowest are still timed, and the measured pick is the faster
    assert script.with_margin(runner_up_fastest, 0.0) == (2, 2.0, 1.0)
    assert script.with_margin(third_fastest, 0.0) == (2, 2.0, 2.0)


def test_network_pass_times_whole_passes_and_each_layer_in_them(capsys):
    """bench/network_pass.py runs every copy of every layer per pass (multiplicity copies,
    weights of their own) and, with --per-layer, reports each layer's median in a pass."""
    script = load_bench_script("network_pass.py")
    layers = [layer for layer in script.shapes.load_suite("resnet_50")
              if layer.short_name in ("res2a_branch2a", "res3b_branch2a")]
    copies = list(script.layer_arrays(layers))
    assert len(copies) == sum(layer.multiplicity for layer in layers) > len(layers)
    assert not np.array_equal(copies[-1][2], copies[-2][2])  # each copy its own weights
    status = script.main(["--suite", "resnet_50", "--layers", "res2a_branch2a,res3b_branch2a",
                          "--contenders", "plan,direct", "--threads", "1", "--passes", "1",
                          "--rounds", "1", "--per-layer"])
    out = capsys.readouterr().out
    assert status == 0, out
    assert "2 layers, 4 calls per pass" in out
    rows = {line.split()[0]: line.split() for line in out.splitlines()
            if line.split() and line.split()[0] in ("plan", "direct", "res2a_branch2a",
                                                    "res3b_branch2a")}
    assert set(rows) == {"plan", "direct", "res2a_branch2a", "res3b_branch2a"}
    assert all(float(value) > 0 for value in rows["res3b_branch2a"][1:])


def test_regret_against_what_auto_may_choose_is_reported_beside_the_plain_one():
    """Where an algorithm is faster but auto may not choose it on a layer (a Winograd tile
    past precision="default"'s error bound), the plain regret counts it and a second pair
    of lines judges auto and plans against the algorithms it may choose."""
    regret, plan_regret = bench_results.regret, bench_results.plan_regret
    def layer_contenders(admissible_fast):
        return [_contender("winograd4", 2.0),
                _contender("winograd6", 1.0, admissible=admissible_fast),
                _contender("auto", 2.0),
                _contender("plan", 1.5, runs="winograd4"),
                _contender("plan:winograd4", 1.5),
                _contender("plan:winograd6", 0.75, admissible=admissible_fast)]

    excluded = layer_contenders(False)
    assert regret(excluded) == 2.0 and regret(excluded, admissible_only=True) == 1.0
    assert plan_regret(excluded)[:2] == (2.0, "plan:winograd6")
    assert plan_regret(excluded, admissible_only=True)[:2] == (1.0, "plan:winograd4")
    layer = parse_descriptor('mb1ic8oc8_id8kd3pd1n"t:a"')
    lines = tables.selection_summary([(layer, excluded)], ["a"])
    text = "\n".join(lines)
    assert "auto regret (auto time / fastest algorithm's time): geo-mean 2.000" in text
    assert "precision='default' (not: plan:winograd6, winograd6 where excluded)" in text
    assert "  auto regret (auto time / fastest algorithm's time): geo-mean 1.000" in text
    assert "  plan regret" in text
    # the plan runs winograd4, whose forced plan is 2x the fastest (winograd6), and the
    # fastest among those auto may choose
    assert ("plan choice (the forced plan of the algorithm the plan runs / the fastest "
            "forced plan's time): geo-mean 2.000") in text
    assert "  plan choice (the forced plan of the algorithm the plan runs / the fastest " \
           "forced plan's time): geo-mean 1.000" in text
    allowed = "\n".join(tables.selection_summary([(layer, layer_contenders(True))], ["a"]))
    assert "precision='default'" not in allowed


def test_short_plans_share_their_blocks():
    """All plans short: one rotation. One forced plan long: the auto plan pairs with the
    forced plan of its algorithm only. The auto plan long: blocks of their own."""
    Contender = bench_results.Contender
    short = benchmark.PAIRED_PLAN_SECONDS / 10

    def plans(plan_seconds, again_seconds=None, im2col_seconds=short):
        def call(seconds):  # a call after the warm-up one takes that long
            return lambda: time.sleep(seconds)
        return [Contender("plan", "convlab", call(again_seconds or plan_seconds),
                          runs="direct", warm_seconds=plan_seconds),
                Contender("plan:direct", "convlab", lambda: None, runs="direct",
                          warm_seconds=short),
                Contender("torch", "torch", lambda: None, warm_seconds=short),
                Contender("plan:im2col", "convlab", call(im2col_seconds), runs="im2col",
                          warm_seconds=im2col_seconds)]

    together = plans(short)
    assert benchmark.plan_units(together) == [[together[0], together[1], together[3]],
                                              [together[2]]]
    paired = plans(short, im2col_seconds=benchmark.PAIRED_PLAN_SECONDS * 2)
    assert benchmark.plan_units(paired) == [[paired[0], paired[1]], [paired[2]], [paired[3]]]
    slow = plans(benchmark.PAIRED_PLAN_SECONDS * 2)  # large weights: blocks of their own
    assert benchmark.plan_units(slow) == [[c] for c in slow]
    # a slow warm-up call alone (paging in the output) is called again before judging
    first_slow = plans(benchmark.PAIRED_PLAN_SECONDS * 5, again_seconds=short)
    assert benchmark.plan_units(first_slow)[0] == [first_slow[0], first_slow[1], first_slow[3]]
    alone = plans(short)[:1] + plans(short, im2col_seconds=1)[2:]  # no forced twin
    assert benchmark.plan_units(alone) == [[c] for c in alone]


@pytest.mark.skipif(not ("cpuid_fault" in cpu.os_flags() and shutil.which("cc")),
                    reason="needs Linux CPUID faulting and a C compiler")
def test_as_avx2_cpu_hides_avx512_from_the_process_and_results_stay_exact(tmp_path):
    """bench/as_avx2_cpu.sh: convlab (and any library) sees no AVX-512; the bench header
    says so where the OS lists it; every algorithm still matches the reference."""
    root = pathlib.Path(convlab.__file__).parents[1]
    program = textwrap.dedent("""
        import json, numpy as np, convlab
        from convlab.runtime.cpu import cpu_info
        from convlab.cli._bench_tables import machine_lines
        rng = np.random.default_rng(0)
        src = rng.standard_normal((1, 9, 9, 16)).astype(np.float32)
        weights = rng.standard_normal((3, 3, 16, 32)).astype(np.float32)
        want = convlab.reference.convolve(src, weights, pads_begin=1, pads_end=1)
        errors = {name: float(np.abs(convlab.convolve(src, weights, algorithm=name,
                                                      pads_begin=1, pads_end=1) - want).max())
                  for name in convlab.algorithms() if name != "reference"}
        print(json.dumps(dict(info=cpu_info(), line=machine_lines()[0], errors=errors)))
    """)
    environment = {k: v for k, v in os.environ.items() if k != "CONVLAB_MAX_CPU_ISA"}
    environment["TMPDIR"] = str(tmp_path)
    result = subprocess.run(["bash", str(root / "bench" / "as_avx2_cpu.sh"), sys.executable,
                             "-c", program], capture_output=True, text=True, cwd=str(root),
                            env=environment, timeout=300, check=False)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["info"]["isa_detected"] in ("avx2", "baseline")
    assert ("CPUID hides it" in report["line"]) == ("avx512f" in cpu.os_flags())
    assert report["errors"] and max(report["errors"].values()) < 1e-3, report["errors"]


def test_the_plan_rule_replay_picks_by_fastest_run_by_paired_rounds_and_by_turn_median():
    """bench/plan_rule_replay.py: on the same recorded turns, the fastest-run rule keeps the
    contender with the fastest run; the paired rule the lowest median of its turn over the
    round's fastest turn; the turn-median rule the lowest median of its turns."""
    script = load_bench_script("plan_rule_replay.py")
    # "a" has one lucky turn (0.5) and loses the other two rounds by 1.2x; "b" wins them
    turns = [("a", 1.2), ("b", 1.0), ("b", 1.0), ("a", 0.5), ("a", 1.2), ("b", 1.0)]
    assert script.rule_picks(turns) == ("a", "b", "b")
    # "b" loses one round by far (a slow spell) and wins the other two by little
    turns = [("a", 1.0), ("b", 0.9), ("b", 3.0), ("a", 1.0), ("a", 1.0), ("b", 0.9)]
    assert script.rule_picks(turns) == ("b", "b", "b")
    assert script.rule_picks([("a", 1.0), ("a", 0.9)]) is None


def test_the_pick_stability_script_counts_flipped_rounds_and_times_what_the_plan_timed():
    """bench/plan_pick_stability.py: a round flips where its fastest block is not the
    contender fastest over all rounds; a repeat times, in blocks, exactly the contenders
    the plan's first call timed."""
    script = load_bench_script("plan_pick_stability.py")
    assert script.flips({"a": [1.0, 1.0, 1.0], "b": [2.0, 0.5, 2.0]}) == 1
    assert script.flips({"a": [1.0, 1.0], "b": [2.0, 2.0]}) == 0
    # a layer this small is estimated under measure.CHEAP_SECONDS by every contender, so
    # the first call times them all
    layer = parse_descriptor('mb1ic16ih7iw7oc16oh7ow7kh1kw1ph0pw0n"t:pointwise"')
    measurement, blocks = script.one_repeat(layer, threads=1, rounds=2, min_seconds=0.0,
                                            seed=0)
    assert len(blocks) >= 2 and sorted(blocks) == sorted(measurement.seconds)
    assert all(len(times) == 2 and min(times) > 0 for times in blocks.values())
    # the first call's turns, recorded, are those the measurement kept the fastest of
    turns = measurement.turns
    assert {name for name, _ in turns} == set(measurement.seconds)
    assert all(min(t for n, runs in turns if n == name for t in runs) == seconds
               for name, seconds in measurement.seconds.items())


def test_the_settled_median_rule_reads_runs_after_each_turns_first():
    """Contender "a" has the fastest single run but is slow once settled; "b" is steady.
    Each turn's first run is left out; a contender whose turns had one run each keeps all
    of them."""
    script = load_bench_script("plan_pick_stability.py")
    turns = [("a", [0.5, 2.0, 2.0]), ("b", [3.0, 1.0, 1.0]), ("b", [3.0, 1.0, 1.1]),
             ("a", [0.4, 2.1, 1.9])]
    assert script.settled_median_pick(turns) == "b"
    assert script.settled_median_pick([("a", [1.0]), ("b", [2.0])]) == "a"
    assert script.settled_median_pick([("a", [1.0, 1.0])]) is None
