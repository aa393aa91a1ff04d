"""algorithm="tune" and precision=: timing picks the measured winner and remembers it;
precision keeps inexact algorithms out of auto and tune."""
from __future__ import annotations

import json
import time

import numpy as np
import pytest

import convlab
from convlab.dispatch.registry import get_algorithm
from tests.helpers import random_tensors, temporary_algorithm

pytestmark = pytest.mark.thread_unsafe(
    reason="tune's winners live in one process-wide cache (and file), which every test "
           "clears and fills, and the mocks in the process-wide registry")


@pytest.fixture(autouse=True)
def fresh_tune_cache():
    convlab.set_tune_cache(None)
    convlab.clear_tune_cache()
    yield
    convlab.set_tune_cache(None)
    convlab.clear_tune_cache()


def _tensors(rng):
    return random_tensors(rng, batch=1, in_channels=4, out_channels=4, groups=1,
                          input_shape=(6, 6), kernel_shape=(3, 3), dtype="float32",
                          data_format="NXC", weights_format="XIO", bias=False)


def _counting(delay, calls, key):
    compute = get_algorithm("reference").run  # looked up now: the registry is emptied below

    def run(problem, src, weights, bias, dst, threads):
        calls[key] = calls.get(key, 0) + 1
        time.sleep(delay)
        compute(problem, src, weights, bias, dst, threads)
    return run


def _only(names):
    """Other algorithms out of auto for the block, so the test controls the field."""
    return {name: get_algorithm(name) for name in convlab.algorithms() if name not in names}


@pytest.fixture
def two_mocks():
    """A slow and a fast mock whose estimates claim the opposite, alone in the registry."""
    calls = {}
    slow_run, fast_run = _counting(0.02, calls, "slow"), _counting(0.0, calls, "fast")
    hidden = _only(())
    for name in hidden:
        convlab.unregister_algorithm(name)
    try:
        estimate = convlab.Estimate
        with temporary_algorithm(slow_run, cost=lambda p, t: estimate(1e-6)) as slow, \
             temporary_algorithm(fast_run,
                                 cost=lambda p, t: estimate(1.0)) as fast:
            yield slow, fast, calls
    finally:
        for algorithm in hidden.values():
            convlab.register_algorithm(algorithm, replace=True)


def test_tune_picks_the_measured_winner_and_remembers_it(rng, two_mocks):
    slow, fast, calls = two_mocks
    src, weights, _ = _tensors(rng)
    assert convlab.select_algorithm(src, weights) == slow  # the estimate is wrong on purpose
    expected = convlab.reference.convolve(src, weights)
    np.testing.assert_allclose(convlab.convolve(src, weights, algorithm="tune"), expected,
                               rtol=1e-5, atol=1e-5)
    timed = dict(calls)
    assert timed["slow"] >= 2 and timed["fast"] >= 3  # warm-up + timed runs + the real run
    convlab.convolve(src, weights, algorithm="tune")
    assert calls["slow"] == timed["slow"]  # remembered: no second timing
    assert calls["fast"] == timed["fast"] + 1
    text = str(convlab.explain(src, weights))
    assert f"tuned choice: {fast}" in text and "tuned" in text
    row = {c["name"]: c for c in convlab.explain(src, weights).to_dict()["candidates"]}
    assert row[fast]["tuned_seconds"] < row[slow]["tuned_seconds"]


def test_tune_cache_file_round_trip(rng, two_mocks, tmp_path):
    slow, fast, calls = two_mocks
    src, weights, _ = _tensors(rng)
    path = tmp_path / "tuned.json"
    convlab.set_tune_cache(path)
    convlab.convolve(src, weights, algorithm="tune")
    stored = json.loads(path.read_text())
    assert [entry["choice"] for entry in stored.values()] == [fast]
    convlab.clear_tune_cache()
    calls.clear()
    convlab.set_tune_cache(path)  # a later process would start here
    convlab.convolve(src, weights, algorithm="tune")
    assert calls == {"fast": 1}


def test_tune_cache_file_must_be_json(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text("not json")
    with pytest.raises(ValueError, match="tune cache"):
        convlab.set_tune_cache(path)


def test_tune_cache_with_a_bad_entry_is_refused_and_not_used(rng, tmp_path):
    path = tmp_path / "tuned.json"
    path.write_text(json.dumps({"some problem": {"choice": "direct", "seconds": "fast"}}))
    with pytest.raises(ValueError, match="entry 'some problem'"):
        convlab.set_tune_cache(path)
    src, weights, _ = _tensors(rng)
    convlab.convolve(src, weights, algorithm="tune")
    assert json.loads(path.read_text())["some problem"]["seconds"] == "fast"  # not written


@pytest.mark.parametrize("stored", ["no_such_algorithm", "winograd4"])
def test_a_stored_winner_that_cannot_run_here_is_tuned_again(rng, tmp_path, stored):
    # a 5-tap kernel: unknown names and Winograd (3-tap only) cannot run it
    src = rng.standard_normal((1, 9, 2)).astype(np.float32)
    weights = rng.standard_normal((5, 2, 2)).astype(np.float32)
    key = convlab.dispatch._tune.tune_key(convlab.make_problem(src.shape, src.dtype, weights.shape,
                                                     weights.dtype, None, None), 1, "default")
    path = tmp_path / "tuned.json"
    path.write_text(json.dumps({key: {"choice": stored, "seconds": {stored: 1e-9}}}))
    convlab.set_tune_cache(path)
    got = convlab.convolve(src, weights, algorithm="tune", threads=1)
    np.testing.assert_allclose(got, convlab.reference.convolve(src, weights), rtol=1e-5,
                               atol=1e-5)
    assert json.loads(path.read_text())[key]["choice"] in convlab.algorithms()
    assert json.loads(path.read_text())[key]["choice"] != stored


def test_plan_tunes_once_per_shape(rng, two_mocks):
    slow, fast, calls = two_mocks
    src, weights, _ = _tensors(rng)
    plan = convlab.Convolution(weights, algorithm="tune")
    plan(src)
    assert plan.algorithm_for(src) == fast
    before = dict(calls)
    plan(src)
    assert calls == {"slow": before["slow"], "fast": before["fast"] + 1}


@pytest.mark.parametrize("precision, error, admitted", [
    ("default", None, True), ("highest", None, True),
    ("default", 5e-6, True), ("highest", 5e-6, False),
    ("default", 5e-5, False), ("highest", 5e-5, False),
])
def test_precision_admits_by_measured_error(rng, precision, error, admitted):
    src, weights, _ = _tensors(rng)
    run = get_algorithm("reference").run
    with temporary_algorithm(run, cost=lambda p, t: convlab.Estimate(0.0),
                             relative_error=error) as name:
        chosen = convlab.select_algorithm(src, weights, precision=precision)
        assert (chosen == name) == admitted
        row = next(c for c in convlab.explain(src, weights, precision=precision)
                   .to_dict()["candidates"] if c["name"] == name)
        assert (row["excluded"] is None) == admitted
        # a forced name runs whatever the precision says
        convlab.convolve(src, weights, algorithm=name, precision=precision)


def test_highest_precision_never_picks_winograd(rng):
    src, weights, _ = random_tensors(rng, batch=1, in_channels=64, out_channels=64, groups=1,
                                     input_shape=(56, 56), kernel_shape=(3, 3),
                                     dtype="float32", data_format="NXC",
                                     weights_format="XIO", bias=False)
    for threads in (1, 2):
        chosen = convlab.select_algorithm(src, weights, pads_begin=1, pads_end=1,
                                          threads=threads, precision="highest")
        assert get_algorithm(chosen).relative_error is None


@pytest.mark.parametrize("bad", ["fast", "HIGHEST!", None, 1])
def test_unknown_precision_is_refused(rng, bad):
    src, weights, _ = _tensors(rng)
    with pytest.raises(ValueError, match="precision="):
        convlab.convolve(src, weights, precision=bad)
    with pytest.raises(ValueError, match="precision="):
        convlab.Convolution(weights, precision=bad)
