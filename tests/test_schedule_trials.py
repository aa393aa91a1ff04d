"""A plan's runs that can cut their work two exact ways time both, then keep the faster.

The trials' clock is replaced by one that moves only when a schedule runs, by the seconds
the test gives that schedule, so the choice is deterministic.
"""
from __future__ import annotations

import numpy as np
import pytest

import convlab
from convlab.strategies import schedule_trials, winograd
from tests.helpers import FakeClock, assert_matches_reference
from tests.test_winograd import CASES, TILE, VARIANTS, make_case


@pytest.fixture
def clock(monkeypatch):
    fake = FakeClock()
    monkeypatch.setattr(schedule_trials, "clock", fake)
    return fake


def run_trials(clock, seconds):
    """Run one key's trials to their end; ``seconds[schedule]`` lists each run's time."""
    trials, order = schedule_trials.ScheduleTrials(), []
    left = {schedule: list(runs) for schedule, runs in seconds.items()}

    def call(schedule):
        order.append(schedule)
        clock.now += left[schedule].pop(0)
        return schedule

    while trials.choice("key") is None:
        assert len(order) < 4 * schedule_trials.TRIALS_EACH
        assert trials.run("key", call) == order[-1]
    return trials, order


def test_the_schedules_alternate_abba_from_the_rules(clock):
    n = schedule_trials.TRIALS_EACH
    _, order = run_trials(clock, {True: [1.0] * n, False: [2.0] * n})
    assert order[:6] == [True, False, False, True, True, False][:len(order)]
    assert order.count(True) == order.count(False) == n


@pytest.mark.parametrize("faster", [True, False])
def test_the_schedule_with_the_lower_median_is_kept(clock, faster):
    n = schedule_trials.TRIALS_EACH
    # the slower schedule has the single fastest run: a median, not a minimum, decides
    fast, slow = [1.0] * n, [0.5] + [3.0] * (n - 1)
    trials, _ = run_trials(clock, {faster: fast, not faster: slow})
    assert trials.choice("key") is faster
    assert trials.times("key") == {faster: fast, not faster: slow}
    ran = []
    for _ in range(3):  # decided: every later run takes the kept schedule, untimed
        trials.run("key", ran.append)
    assert ran == [faster] * 3 and trials.times("key")[faster] == fast


def test_keys_are_tried_apart(clock):
    trials = schedule_trials.ScheduleTrials()
    trials.run("a", lambda schedule: None)
    assert trials.times("a") == {True: [0.0], False: []}
    assert trials.times("b") == {} and trials.choice("b") is None


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("algorithm", VARIANTS)
def test_a_plans_winograd_runs_try_both_splits_of_a_small_image_exactly(rng, algorithm,
                                                                        dtype):
    """small_image shares blocks by the size rule alone, so a plan's runs after the first
    time per-thread blocks too; every run matches the reference, and both splits give the
    same bits. F(2) shares blocks there by its slice rule, so it has no trials."""
    src, weights, bias, attributes = make_case(rng, "small_image", dtype)
    plan = convlab.Convolution(weights, bias, algorithm=algorithm, threads=2, **attributes)
    runs = [plan(src) for _ in range(1 + 2 * schedule_trials.TRIALS_EACH + 1)]
    for got in runs:
        assert_matches_reference(got, src, weights, bias, attributes, algorithm)
    (prepared,) = plan._prepared.values()
    problem = prepared.problem
    rule = winograd.blocking(TILE[algorithm], problem, 2, level=prepared.level)
    other = winograd.other_split(TILE[algorithm], problem, 2, prepared.level, rule)
    times = prepared.splits.times((problem, 2))
    if algorithm == "winograd2":
        assert other is None and times == {}
        return
    assert rule.shared and other is not None and not other.shared
    assert {s: len(t) for s, t in times.items()} == {True: schedule_trials.TRIALS_EACH,
                                                     False: schedule_trials.TRIALS_EACH}
    assert prepared.splits.choice((problem, 2)) is not None
    for got in runs[1:]:
        np.testing.assert_array_equal(got, runs[0])


@pytest.mark.parametrize("algorithm", VARIANTS)
def test_one_shot_runs_follow_the_rule(rng, algorithm, monkeypatch):
    """convolve runs once: it never times the other split."""
    def fail(self, key, call):
        raise AssertionError("a one-shot run started schedule trials")

    monkeypatch.setattr(schedule_trials.ScheduleTrials, "run", fail)
    src, weights, bias, attributes = make_case(rng, "small_image")
    got = convlab.convolve(src, weights, bias, algorithm=algorithm, threads=2, **attributes)
    assert_matches_reference(got, src, weights, bias, attributes, algorithm)


def test_cases_with_no_open_choice_have_no_trials():
    for case in ("per_thread_blocks", "shared_blocks", "shared_groups"):
        batch, shape, groups, ic, oc, attributes, _ = CASES[case]
        problem = convlab.make_problem((batch, *shape, ic), np.float32,
                                       (3,) * len(shape) + (ic // groups, oc), np.float32,
                                       groups=groups, **attributes)
        for algorithm in VARIANTS:
            rule = winograd.blocking(TILE[algorithm], problem, 2)
            assert winograd.other_split(TILE[algorithm], problem, 2,
                                        winograd.current_gemm_level(), rule) is None
