"""Plans that check their choice (``Convolution(..., choose="measure")``): on the first call
for a shape they time the contenders whose estimates are close and keep the fastest.

Timings are made deterministic by replacing ``convlab.dispatch.measure.clock`` with a counter that
the algorithms under test advance by a set amount per run; nothing here depends on how
fast this machine runs any kernel.
"""
from __future__ import annotations

import contextlib
import dataclasses
import threading

import numpy as np
import pytest

import convlab
from convlab.dispatch import cost_model, measure, registry, select
from convlab.problem.params import make_problem
from tests.helpers import (
    ALGORITHMS,
    FakeClock,
    assert_matches_reference,
    call_from_threads,
    problem_of,
    random_tensors,
    temporary_algorithm,
)

ATTRIBUTES = dict(pads_begin=1, pads_end=1)


def _tensors(rng, batch=1):
    return random_tensors(rng, batch=batch, in_channels=4, out_channels=6, groups=1,
                          input_shape=(7, 6), kernel_shape=(3, 3), dtype="float32",
                          data_format="NXC", weights_format="XIO", bias=True)


@pytest.fixture
def clock(monkeypatch):
    fake = FakeClock()
    monkeypatch.setattr(measure, "clock", fake)
    return fake


class FakeAlgorithm:
    """An algorithm with a set estimate that computes through the reference and advances
    the fake clock by ``duration`` per run, counting its runs and preparations."""

    def __init__(self, clock, estimate, duration, counts):
        self.clock, self.estimate, self.duration, self.counts = clock, estimate, duration, counts
        self.name = None

    def run(self, problem, src, weights, bias, dst, threads):
        runs = self.counts["runs"][self.name] = self.counts["runs"].get(self.name, 0) + 1
        self.counts["order"].append(self.name)
        registry.get_algorithm("reference").run(problem, src, weights, bias, dst, threads)
        # a duration per run (the last one repeats), or one for every run
        durations = self.duration if isinstance(self.duration, tuple) else (self.duration,)
        self.clock.now += durations[min(runs, len(durations)) - 1]

    def prepare(self, problem, weights):
        self.counts["prepared"][self.name] = self.counts["prepared"].get(self.name, 0) + 1
        return weights * 1  # a fresh array, as a real packing would be

    def cost(self, problem, threads):
        return convlab.Estimate(self.estimate, {"note": "test"})


@contextlib.contextmanager
def fake_algorithms(clock, specs):
    """Register a :class:`FakeAlgorithm` per (estimated seconds, seconds per run) in
    ``specs``. Yields their names and the counts of their runs and preparations."""
    counts = {"runs": {}, "prepared": {}, "order": []}
    with contextlib.ExitStack() as stack:
        names = []
        for estimate, duration in specs:
            fake = FakeAlgorithm(clock, estimate, duration, counts)
            fake.name = stack.enter_context(temporary_algorithm(
                fake.run, cost=fake.cost, prepare_weights=fake.prepare))
            names.append(fake.name)
        yield names, counts


@pytest.fixture
def wide_margin(monkeypatch):
    """A 50% margin, and no contender timed for being cheap (the fakes' estimates are
    all far below any real algorithm's)."""
    monkeypatch.setattr(cost_model, "measure_margin", lambda: 0.5)
    monkeypatch.setattr(measure, "CHEAP_SECONDS", 0.0)


def test_the_measured_choice_is_the_fastest_timed_contender(rng, clock, wide_margin):
    src, weights, bias = _tensors(rng)
    # estimates all within 50% of the lowest (1e-9 s: far below any real algorithm's);
    # the second-lowest estimate runs fastest
    specs = [(1.0e-9, 3e-3), (1.2e-9, 1e-3), (1.4e-9, 2e-3)]
    with fake_algorithms(clock, specs) as (names, counts):
        plan = convlab.Convolution(weights, bias, **ATTRIBUTES)
        first = plan(src)
        assert plan.algorithm_for(src) == names[1]
        # each: one untimed run and TIMED_RUNS turns of RUNS_PER_TURN timed ones; then the
        # call itself
        timed = measure.TIMED_RUNS * measure.RUNS_PER_TURN
        assert counts["runs"] == {names[0]: 1 + timed, names[1]: 2 + timed,
                                  names[2]: 1 + timed}
        assert_matches_reference(first, src, weights, bias, ATTRIBUTES, names[1])
        np.testing.assert_array_equal(plan(src), first)
        assert counts["runs"][names[1]] == 3 + timed  # no timing the second time
        account = plan.explain(src)
        assert account.choice == names[1]
        assert account.measurement.seconds == pytest.approx({names[0]: 3e-3, names[1]: 1e-3,
                                                           names[2]: 2e-3})
        assert "fastest when timed" in str(account)
        assert account.to_dict()["plan"]["measurement"]["measured_seconds"][names[1]] == \
            pytest.approx(1e-3)
        # the losers' prepared weights are not kept
        assert set(plan._prepared) == {(names[1], "<f4")}


def test_contenders_are_timed_in_interleaved_turns_and_keep_their_fastest_run(
        rng, clock, wide_margin):
    src, weights, bias = _tensors(rng)
    # the first contender's timed runs take 4 ms but one of 1 ms (its fastest, amid a slow
    # spell, opening its second turn); the second's take 2 ms each: by its fastest run the
    # first wins, though its median (4 ms) would lose
    steady = measure.RUNS_PER_TURN
    specs = [(1.0e-9, (2e-3,) + (4e-3,) * steady + (1e-3, 4e-3)), (1.2e-9, 2e-3)]
    with fake_algorithms(clock, specs) as (names, counts):
        plan = convlab.Convolution(weights, bias, **ATTRIBUTES)
        plan(src)
        first, second = names
        # one untimed run each, then measure.TIMED_RUNS rounds of turns, RUNS_PER_TURN runs
        # back to back (none of them warming up), the order reversed every other round;
        # then the call
        turns = [[first, second], [second, first]]
        expected = [first, second]
        for index in range(measure.TIMED_RUNS):
            for name in turns[index % 2]:
                expected += [name] * measure.RUNS_PER_TURN
        assert counts["order"] == expected + [first]
        assert plan.algorithm_for(src) == first
        measurement = plan.explain(src).measurement
        assert measurement.seconds == pytest.approx({first: 1e-3, second: 2e-3})
        # every turn is recorded in the order it ran, with each of its runs
        assert [name for name, _ in measurement.turns] == [
            name for index in range(measure.TIMED_RUNS) for name in turns[index % 2]]
        assert measurement.turns[0][1] == pytest.approx((4e-3,) * steady)
        assert measurement.turns[3][1] == pytest.approx((1e-3,) + (4e-3,) * (steady - 1))
        assert all(len(runs) == steady for _, runs in measurement.turns)
        assert measurement.to_dict()["turns"][0] == [first, list(measurement.turns[0][1])]


def test_a_turn_goes_on_while_its_contender_warms_up(rng, clock, wide_margin):
    src, weights, bias = _tensors(rng)
    # large transformed weights: two slow runs after the other contender's turn, then
    # faster runs until steady at 1.7 ms; the other runs 2.5 ms from its first run. A turn
    # of the steady length would keep the other one.
    warming = (3.2e-3, 3.2e-3, 3.2e-3, 2.6e-3, 2.0e-3, 1.7e-3)
    with fake_algorithms(clock, [(1.0e-9, 2.5e-3), (1.2e-9, warming)]) as (names, counts):
        plan = convlab.Convolution(weights, bias, **ATTRIBUTES)
        plan(src)
        assert plan.algorithm_for(src) == names[1]
        # after the untimed runs and the steady one's first turn, the warming one's: 3.2,
        # 3.2, 2.6, 2.0, 1.7 ms and TURN_PATIENCE runs that are no faster
        order = counts["order"]
        steady = measure.RUNS_PER_TURN
        assert order[2:2 + steady] == [names[0]] * steady
        warming_turn = 5 + measure.TURN_PATIENCE
        assert order[2 + steady:2 + steady + warming_turn] == [names[1]] * warming_turn
        # steady from then on: TIMED_RUNS rounds in all (a clear lead), then the call
        rounds = measure.TIMED_RUNS
        assert counts["runs"] == {names[0]: 1 + rounds * steady,
                                  names[1]: 1 + warming_turn + (rounds - 1) * steady + 1}
        assert plan.explain(src).measurement.seconds == pytest.approx({names[0]: 2.5e-3,
                                                                       names[1]: 1.7e-3})


def test_a_turn_ends_at_the_most_runs_per_turn(rng, clock, wide_margin):
    src, weights, bias = _tensors(rng)
    # every run 5% faster than the one before: still warming up at every run
    falling = tuple(1e-3 * 0.95 ** index for index in range(100))
    with fake_algorithms(clock, [(1.0e-9, falling), (1.2e-9, 1e-3)]) as (names, counts):
        plan = convlab.Convolution(weights, bias, **ATTRIBUTES)
        plan(src)
        order = counts["order"]
        assert order[2:2 + measure.MAX_RUNS_PER_TURN + 1] == \
            [names[0]] * measure.MAX_RUNS_PER_TURN + [names[1]]


def test_only_contenders_within_the_margin_are_timed(rng, clock, wide_margin):
    src, weights, bias = _tensors(rng)
    # the third is estimated 2x the lowest: outside a 50% margin, though it would run fastest
    specs = [(1.0e-9, 3e-3), (1.4e-9, 2e-3), (2.0e-9, 1e-3)]
    with fake_algorithms(clock, specs) as (names, counts):
        plan = convlab.Convolution(weights, bias, **ATTRIBUTES)
        plan(src)
        assert plan.algorithm_for(src) == names[1]
        assert names[2] not in counts["runs"] and names[2] not in counts["prepared"]


def test_cheap_contenders_are_timed_outside_the_margin(rng, clock, wide_margin, monkeypatch):
    src, weights, bias = _tensors(rng)
    # estimated 3x and 30x the lowest, outside a 50% margin; the first runs fastest. At
    # most 5e-9 s estimated, it is timed; the other is not.
    monkeypatch.setattr(measure, "CHEAP_SECONDS", 5e-9)
    specs = [(1.0e-9, 2e-3), (3.0e-9, 1e-3), (3.0e-8, 0.5e-3)]
    with fake_algorithms(clock, specs) as (names, counts):
        plan = convlab.Convolution(weights, bias, **ATTRIBUTES)
        plan(src)
        assert plan.algorithm_for(src) == names[1]
        assert set(counts["runs"]) == set(names[:2])


def test_at_most_max_contenders_are_timed(rng, clock, wide_margin):
    src, weights, bias = _tensors(rng)
    count = measure.MAX_CONTENDERS + 2
    # the fastest has the highest estimate: past the cap, so never timed
    specs = [(1e-9 * (1 + 0.01 * i), 1e-3 * (count - i)) for i in range(count)]
    with fake_algorithms(clock, specs) as (names, counts):
        plan = convlab.Convolution(weights, bias, **ATTRIBUTES)
        plan(src)
        timed = names[:measure.MAX_CONTENDERS]
        assert set(counts["runs"]) == set(timed)
        assert plan.algorithm_for(src) == timed[-1]
        assert plan.explain(src).measurement.not_timed == tuple(names[measure.MAX_CONTENDERS:])


def test_a_close_call_gets_more_rounds(rng, clock, wide_margin):
    src, weights, bias = _tensors(rng)
    # after the usual rounds the second contender leads by 10% (a close call); in the
    # rounds that follow, the first runs faster than both had (its slow spell ended)
    usual = measure.TIMED_RUNS * measure.RUNS_PER_TURN
    first_runs = (2e-3,) + (1.1e-3,) * usual + (0.9e-3,)
    with fake_algorithms(clock, [(1.0e-9, first_runs), (1.2e-9, 1e-3)]) as (names, counts):
        plan = convlab.Convolution(weights, bias, **ATTRIBUTES)
        plan(src)
        assert plan.algorithm_for(src) == names[0]
        timed = measure.MAX_TIMED_RUNS * measure.RUNS_PER_TURN
        assert counts["runs"] == {names[0]: 2 + timed, names[1]: 1 + timed}


def test_a_clear_lead_ends_the_rounds(rng, clock, wide_margin):
    src, weights, bias = _tensors(rng)
    ahead = 1 + 2 * measure.CLOSE_CALL
    with fake_algorithms(clock, [(1.0e-9, 1e-3 * ahead), (1.2e-9, 1e-3)]) as (names, counts):
        plan = convlab.Convolution(weights, bias, **ATTRIBUTES)
        plan(src)
        assert plan.algorithm_for(src) == names[1]
        timed = measure.TIMED_RUNS * measure.RUNS_PER_TURN
        assert counts["runs"] == {names[0]: 1 + timed, names[1]: 2 + timed}


def test_no_contender_starts_after_the_time_limit(rng, clock, wide_margin):
    src, weights, bias = _tensors(rng)
    slow = measure.TIME_LIMIT_SECONDS * 2
    with fake_algorithms(clock, [(1.0e-9, slow), (1.1e-9, 1e-3)]) as (names, counts):
        plan = convlab.Convolution(weights, bias, **ATTRIBUTES)
        result = plan(src)
        # the first contender: one untimed run, then a single timed one (a second in its
        # turn, or another round, would pass the limit); the second is never started
        assert counts["runs"] == {names[0]: 3}
        assert plan.algorithm_for(src) == names[0]
        assert plan.explain(src).measurement.not_timed == (names[1],)
        assert_matches_reference(result, src, weights, bias, ATTRIBUTES, names[0])


def test_the_runner_up_is_timed_outside_the_margin(rng, clock, monkeypatch):
    monkeypatch.setattr(cost_model, "measure_margin", lambda: 0.0)
    monkeypatch.setattr(measure, "CHEAP_SECONDS", 0.0)
    src, weights, bias = _tensors(rng)
    # with no margin, only the lowest estimate lies within it; the runner-up, estimated
    # 1.5x the lowest, runs fastest and is timed; the third (2x) is not
    specs = [(1.0e-9, 3e-3), (1.5e-9, 1e-3), (2.0e-9, 0.5e-3)]
    with fake_algorithms(clock, specs) as (names, counts):
        plan = convlab.Convolution(weights, bias, **ATTRIBUTES)
        plan(src)
        assert set(counts["runs"]) == set(names[:2])
        assert plan.algorithm_for(src) == names[1]
        assert plan.explain(src).measurement.measured
        assert "the two lowest estimates" in str(plan.explain(src))


def test_a_lone_contender_is_not_timed(monkeypatch):
    only = [select.Candidate("direct", None, convlab.Estimate(1e-3, {}), True, None,
                             "direct")]
    monkeypatch.setattr(select, "assess", lambda *args, **kwargs: only)
    problem = make_problem((1, 6, 6, 4), np.float32, (3, 3, 4, 6), np.float32, **ATTRIBUTES)
    clock_reads = []
    monkeypatch.setattr(measure, "clock", lambda: clock_reads.append(1) or 0.0)
    ran = []
    measurement = measure.measure(problem, 1, "default", ran.append, ran.append)
    assert measurement.choice == "direct" and not measurement.measured
    assert ran == [] and clock_reads == []
    assert "the only contender, so nothing was timed" in measurement.describe()


def test_choose_estimate_keeps_the_lowest_prepared_estimate(rng, clock, wide_margin):
    src, weights, bias = _tensors(rng)
    with fake_algorithms(clock, [(1.0e-9, 3e-3), (1.2e-9, 1e-3)]) as (names, counts):
        plan = convlab.Convolution(weights, bias, choose="estimate", **ATTRIBUTES)
        result = plan(src)
        problem = problem_of(src, weights, bias, ATTRIBUTES)
        assert plan.algorithm_for(src) == names[0] == select.choose(
            problem, convlab.effective_threads(None), prepared=True)
        assert counts["runs"] == {names[0]: 1} and clock.reads == 0
        assert plan.explain(src).measurement is None
        assert "choose='estimate'" in str(plan.explain(src))
        assert_matches_reference(result, src, weights, bias, ATTRIBUTES, names[0])


def test_choose_estimate_matches_the_plans_previous_rule_on_the_builtin_algorithms(rng):
    src, weights, bias = _tensors(rng)
    problem = problem_of(src, weights, bias, ATTRIBUTES)
    for threads in (1, 2):
        plan = convlab.Convolution(weights, bias, threads=threads, choose="estimate",
                                   **ATTRIBUTES)
        assert plan.algorithm_for(src) == select.choose(problem, threads, prepared=True)


@pytest.mark.parametrize("algorithm", ["direct", "tune"])
def test_forced_names_and_tune_ignore_choose(rng, clock, algorithm):
    src, weights, bias = _tensors(rng)
    convlab.clear_tune_cache()
    plan = convlab.Convolution(weights, bias, algorithm=algorithm, choose="measure",
                               **ATTRIBUTES)
    plan(src)
    assert clock.reads == 0  # tune times with its own clock, not the plan's measurement
    assert plan.explain(src).measurement is None
    if algorithm == "direct":
        assert plan.algorithm_for(src) == "direct"
        assert "forced by algorithm='direct'" in str(plan.explain(src))
    convlab.clear_tune_cache()


@pytest.mark.parametrize("bad", ["fast", "Measure", "", None, 1])
def test_choose_is_validated_at_construction(rng, bad):
    _, weights, bias = _tensors(rng)
    with pytest.raises(ValueError, match=r"choose=.*expected one of \['measure', 'estimate'\]"):
        convlab.Convolution(weights, bias, choose=bad)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_the_first_call_returns_the_measured_winners_result(rng, monkeypatch, clock,
                                                           algorithm):
    """Whichever registered algorithm wins the timing, the first call's result is that
    algorithm's, correct, and the later calls repeat it."""
    src, weights, bias = random_tensors(rng, batch=2, in_channels=5, out_channels=7, groups=1,
                                        input_shape=(8, 7), kernel_shape=(3, 3),
                                        dtype="float32", data_format="NXC",
                                        weights_format="XIO", bias=True)
    problem = problem_of(src, weights, bias, ATTRIBUTES)
    contenders = [row.name for row in select.contenders(select.assess(problem, 2))]
    if algorithm not in contenders:
        pytest.skip(f"{algorithm} is not an auto contender on {problem.describe()}")
    monkeypatch.setattr(cost_model, "measure_margin", lambda: float("inf"))
    monkeypatch.setattr(measure, "MAX_CONTENDERS", len(contenders))
    for name in contenders:  # the target runs in 1 ms of the fake clock, the others in 5 ms
        original = registry.get_algorithm(name)

        def run(*args, original=original, **kwargs):
            original.run(*args, **kwargs)
            clock.now += 1e-3 if original.name == algorithm else 5e-3

        # without its bind hook, the bound run calls this run
        monkeypatch.setitem(registry.FORWARD.by_name, name,
                            dataclasses.replace(original, run=run, bind=None))
    plan = convlab.Convolution(weights, bias, threads=2, **ATTRIBUTES)
    first = plan(src)
    assert plan.algorithm_for(src) == algorithm
    assert set(plan.explain(src).measurement.seconds) == set(contenders)
    assert_matches_reference(first, src, weights, bias, ATTRIBUTES, algorithm)
    np.testing.assert_array_equal(plan(src), first)
    np.testing.assert_array_equal(
        first, convlab.convolve(src, weights, bias, algorithm=algorithm, threads=2,
                                **ATTRIBUTES))


def test_concurrent_first_calls_measure_once_and_agree(rng, monkeypatch):
    src, weights, bias = random_tensors(rng, batch=2, in_channels=16, out_channels=16,
                                        groups=1, input_shape=(12, 12), kernel_shape=(3, 3),
                                        dtype="float32", data_format="NXC",
                                        weights_format="XIO", bias=True)
    monkeypatch.setattr(cost_model, "measure_margin", lambda: float("inf"))
    measured = []
    real_measure = measure.measure

    def counting_measure(*args, **kwargs):
        measured.append(threading.get_ident())
        return real_measure(*args, **kwargs)

    monkeypatch.setattr(measure, "measure", counting_measure)
    plan = convlab.Convolution(weights, bias, **ATTRIBUTES)
    results = call_from_threads(lambda: [plan(src) for _ in range(3)])
    assert len(measured) == 1
    chosen = plan.algorithm_for(src)
    expected = convlab.convolve(src, weights, bias, algorithm=chosen, **ATTRIBUTES)
    for outputs in results:
        for dst in outputs:
            np.testing.assert_array_equal(dst, expected)


def test_each_shape_and_thread_count_is_measured_once(rng, clock, wide_margin):
    src, weights, bias = _tensors(rng, batch=2)
    with fake_algorithms(clock, [(1.0e-9, 2e-3), (1.2e-9, 1e-3)]) as (names, counts):
        plan = convlab.Convolution(weights, bias, **ATTRIBUTES)
        for _ in range(3):
            plan(src)
            plan(src[:1])
        per_shape = 1 + measure.TIMED_RUNS * measure.RUNS_PER_TURN
        assert counts["runs"][names[0]] == 2 * per_shape
        assert counts["runs"][names[1]] == 2 * per_shape + 6


def test_algorithm_for_a_shape_measures_on_zeros(rng, clock, wide_margin):
    src, weights, bias = _tensors(rng)
    with fake_algorithms(clock, [(1.0e-9, 2e-3), (1.2e-9, 1e-3)]) as (names, counts):
        plan = convlab.Convolution(weights, bias, **ATTRIBUTES)
        described = type("Described", (), {"shape": src.shape, "dtype": src.dtype})()
        assert plan.algorithm_for(described) == names[1]
        result = plan(src)  # the choice is made; this call only runs it
        assert counts["runs"][names[1]] == 2 + measure.TIMED_RUNS * measure.RUNS_PER_TURN
        assert_matches_reference(result, src, weights, bias, ATTRIBUTES, names[1])


def test_contenders_are_timed_into_a_dst_allocated_as_the_calls_dst(rng, clock, wide_margin):
    """The measurement's dst starts on a cache line where a call's would (1 MiB and up):
    the direct kernel streams its stores only into line-aligned rows, and timed into
    NumPy's 16-byte-aligned scratch it ran ResNet-50's conv1 2.5-3.1 ms against 2.1-2.4
    ms, so plans kept im2col where direct was faster."""
    from convlab.runtime import _buffers as buffers
    starts = []

    def run(problem, src, weights, bias, dst, threads):
        starts.append(dst.ctypes.data % buffers.CACHE_LINE)
        clock.now += 1e-3

    src = np.zeros((1, 128, 128, 1), np.float32)
    weights = np.zeros((1, 1, 1, 16), np.float32)
    dst_bytes = 128 * 128 * 16 * 4
    assert dst_bytes >= buffers.ALIGN_FROM_BYTES
    estimate = lambda problem, threads: convlab.Estimate(1e-9, {})  # noqa: E731
    with temporary_algorithm(run, cost=estimate) as first, \
            temporary_algorithm(run, cost=estimate) as second:
        plan = convlab.Convolution(weights)
        plan(src)
        assert plan.algorithm_for(src) in (first, second)
    assert len(starts) > 2 and set(starts) == {0}


def test_contenders_are_timed_through_their_bound_run(rng, clock, wide_margin):
    """A plan's later calls run an algorithm's bound run (its ``bind`` hook), so the first
    call times that: here the bound run is the faster one, while a call of ``run``
    itself would lose to the other contender."""
    src, weights, bias = _tensors(rng)
    reference = registry.get_algorithm("reference")

    def slow_run(problem, src, weights, bias, dst, threads):
        reference.run(problem, src, weights, bias, dst, threads)
        clock.now += 3e-3

    def bind(problem, threads):
        def bound(src, weights, bias, dst):
            reference.run(problem, src, weights, bias, dst, threads)
            clock.now += 1e-3
        return bound

    def steady_run(problem, src, weights, bias, dst, threads):
        reference.run(problem, src, weights, bias, dst, threads)
        clock.now += 2e-3

    estimate = lambda problem, threads: convlab.Estimate(1e-9, {})  # noqa: E731
    with temporary_algorithm(slow_run, cost=estimate, bind=bind) as bound_name, \
            temporary_algorithm(steady_run, cost=estimate) as steady_name:
        plan = convlab.Convolution(weights, bias, **ATTRIBUTES)
        plan(src)
        assert plan.algorithm_for(src) == bound_name
        assert plan.explain(src).measurement.seconds == pytest.approx(
            {bound_name: 1e-3, steady_name: 2e-3})
