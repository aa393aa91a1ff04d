"""The registry, dispatch to a plugged-in algorithm, select_algorithm and explain."""
from __future__ import annotations

import json

import numpy as np
import pytest

import convlab
from convlab.dispatch.registry import Estimate
from convlab.strategies.reference import run_reference
from tests.helpers import (
    MUTATES_REGISTRY,
    assert_matches_reference,
    random_tensors,
    temporary_algorithm,
)


class CountingMock:
    """An algorithm that records what it receives, checks the canonical layouts, and computes
    through the reference strategy (so a wrong layout also shows up as a wrong result)."""

    def __init__(self):
        self.runs, self.prepares = [], []

    def prepare_weights(self, problem, weights):
        self.prepares.append(weights.shape)
        return ("prepared", weights)

    def run(self, problem, src, prepared, bias, dst, threads):
        tag, weights = prepared
        assert tag == "prepared", "run did not receive prepare_weights' result"
        p = problem
        expected_shapes = {
            "src": (src, (p.batch, *p.input_shape, p.in_channels)),
            "weights": (weights, (p.groups, *p.kernel_shape, p.in_channels_per_group,
                                  p.out_channels_per_group)),
            "dst": (dst, (p.batch, *p.output_shape, p.out_channels)),
        }
        if bias is not None:
            expected_shapes["bias"] = (bias, (p.out_channels,))
        for name, (array, shape) in expected_shapes.items():
            assert isinstance(array, np.ndarray), name
            assert array.shape == shape, f"{name} {array.shape} != canonical {shape}"
            assert array.flags.c_contiguous, f"{name} is not C-contiguous"
            assert array.dtype == p.dtype, f"{name} dtype {array.dtype} != {p.dtype}"
        assert dst.flags.writeable
        assert (bias is None) == (not p.has_bias)
        assert isinstance(threads, int) and threads >= 1
        self.runs.append(dict(problem=p, threads=threads))
        run_reference(problem, src, weights, bias, dst, threads)


@pytest.fixture
def mock():
    """A counting mock registered through the public decorator; removed afterwards."""
    counting = CountingMock()
    with temporary_algorithm(counting.run, prepare_weights=counting.prepare_weights,
                             cost=lambda problem, threads: Estimate(0.0, {"mock": True}),
                             description="counting mock") as name:
        counting.name = name
        yield counting
    assert name not in convlab.algorithms()


@MUTATES_REGISTRY
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
@pytest.mark.parametrize("rank", [1, 2, 3])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("data_format, weights_format",
                         [("NCX", "OIX"), ("NXC", "XIO"), ("NCX", "XIO"), ("NXC", "OIX")])
def test_dispatch_reaches_the_mock_with_canonical_layouts(rng, mock, data_format,
                                                          weights_format, dtype, rank, bias):
    src, weights, b = random_tensors(
        rng, batch=2, in_channels=4, out_channels=6, groups=2, input_shape=(6, 5, 4)[:rank],
        kernel_shape=(3, 2, 2)[:rank], dtype=dtype, data_format=data_format,
        weights_format=weights_format, bias=bias)
    attributes = dict(groups=2, strides=2, pads_begin=1, data_format=data_format,
                      weights_format=weights_format)
    got = convlab.convolve(src, weights, b, algorithm=mock.name, threads=1, **attributes)
    assert len(mock.runs) == 1 and len(mock.prepares) == 1
    assert mock.runs[0]["threads"] == 1
    assert_matches_reference(got, src, weights, b, attributes, mock.name)


@MUTATES_REGISTRY
def test_auto_picks_the_cheapest_contender(mock):
    src, weights = np.ones((1, 6, 6, 3), np.float32), np.ones((3, 3, 3, 2), np.float32)
    assert convlab.select_algorithm(src, weights) == mock.name
    convlab.convolve(src, weights)
    convlab.convolve(src, weights, threads=2)
    assert len(mock.runs) == 2
    assert [run["threads"] for run in mock.runs] == [convlab.effective_threads(), 2]
    explanation = convlab.explain(src, weights)
    assert explanation.choice == mock.name
    assert f"choice: {mock.name}" in str(explanation)


@MUTATES_REGISTRY
def test_empty_batch_does_not_call_the_algorithm(mock):
    got = convlab.convolve(np.ones((0, 6, 3), np.float32), np.ones((3, 3, 2), np.float32),
                           algorithm=mock.name)
    assert got.shape == (0, 4, 2) and mock.runs == []


@MUTATES_REGISTRY
def test_auto_false_keeps_an_algorithm_out_of_auto():
    calls = []
    with temporary_algorithm(lambda *args: calls.append(args), auto=False,
                             cost=lambda problem, threads: Estimate(0.0)) as name:
        src, weights = np.ones((1, 6, 6, 3)), np.ones((3, 3, 3, 2))
        assert convlab.select_algorithm(src, weights) != name
        convlab.convolve(src, weights)
        assert calls == []
        convlab.convolve(src, weights, algorithm=name)  # still callable by name
        assert len(calls) == 1


@MUTATES_REGISTRY
def test_registration_by_algorithm_object_and_replace():
    calls = []
    algorithm = convlab.Algorithm(name="test_object_registration",
                                  run=lambda *args: calls.append("first"))
    convlab.register_algorithm(algorithm)
    try:
        assert convlab.algorithms()[-1] == "test_object_registration"
        with pytest.raises(ValueError, match="already registered"):
            convlab.register_algorithm(algorithm)
        convlab.register_algorithm(
            convlab.Algorithm(name="test_object_registration",
                              run=lambda *args: calls.append("second")), replace=True)
        convlab.convolve(np.ones((1, 3, 1)), np.ones((1, 1, 1)),
                         algorithm="test_object_registration")
        assert calls == ["second"]
    finally:
        convlab.unregister_algorithm("test_object_registration")
    assert "test_object_registration" not in convlab.algorithms()
    convlab.unregister_algorithm("test_object_registration")  # a second removal is harmless


@MUTATES_REGISTRY
def test_temporary_algorithm_unregisters_after_an_error():
    before = convlab.algorithms()
    with pytest.raises(RuntimeError, match="boom"):
        with temporary_algorithm(lambda *args: None) as name:
            assert name in convlab.algorithms()
            raise RuntimeError("boom")
    assert convlab.algorithms() == before


@MUTATES_REGISTRY
def test_an_algorithm_error_reaches_the_caller():
    def failing(problem, src, weights, bias, dst, threads):
        raise RuntimeError("the mock kernel failed")

    with temporary_algorithm(failing) as name:
        with pytest.raises(RuntimeError, match="the mock kernel failed"):
            convlab.convolve(np.ones((1, 3, 1)), np.ones((1, 1, 1)), algorithm=name)


@MUTATES_REGISTRY
def test_one_shot_calls_prepare_once_and_plans_keep_prepare_weights():
    """A one-shot call takes ``prepare_once`` (whose result may read the caller's array);
    a plan takes ``prepare_weights`` on its own copy, and later edits of the caller's
    weights do not reach it."""
    seen = []

    def run(problem, src, weights, bias, dst, threads):
        hook, w = weights
        seen.append(hook)
        run_reference(problem, src, w, bias, dst, threads)

    src, weights = np.ones((1, 5, 2)), np.ones((3, 2, 4))
    with temporary_algorithm(run, prepare_weights=lambda p, w: ("kept", np.array(w)),
                             prepare_once=lambda p, w: ("once", w)) as name:
        once = convlab.convolve(src, weights, algorithm=name)
        plan = convlab.Convolution(weights, algorithm=name)
        weights[...] = 0
        np.testing.assert_array_equal(plan(src), once)
        assert seen == ["once", "kept"]
        np.testing.assert_array_equal(convlab.convolve(src, weights, algorithm=name), 0)
        assert seen[-1] == "once"


# ---------------------------------------------------------------------------- select / explain

SELECT_PROBLEMS = {
    "resnet-3x3": ((1, 14, 14, 32), (3, 3, 32, 32), dict(pads_begin=1, pads_end=1)),
    "depthwise": ((1, 16, 16, 8), (3, 3, 1, 8), dict(groups=8, auto_pad="same_upper")),
    "1d-strided": ((2, 50, 3), (5, 3, 4), dict(strides=2)),
    "3d": ((1, 6, 6, 6, 2), (3, 3, 3, 2, 2), {}),
}


@pytest.mark.parametrize("case", list(SELECT_PROBLEMS))
def test_select_algorithm_returns_a_registered_auto_contender(case):
    src_shape, weights_shape, attributes = SELECT_PROBLEMS[case]
    src, weights = np.zeros(src_shape, np.float32), np.zeros(weights_shape, np.float32)
    name = convlab.select_algorithm(src, weights, **attributes)
    assert name in convlab.algorithms()
    assert convlab.dispatch.registry.get_algorithm(name).auto
    explanation = convlab.explain(src, weights, **attributes)
    assert explanation.choice == name
    text = str(explanation)
    for algorithm in convlab.algorithms():
        assert algorithm in text, f"explain() does not mention {algorithm}"
    as_dict = explanation.to_dict()
    json.dumps(as_dict)  # plain data, ready for a notebook or a log
    assert as_dict["choice"] == name
    assert [c["name"] for c in as_dict["candidates"]] == convlab.algorithms()
    assert as_dict["threads"] == convlab.effective_threads()


@MUTATES_REGISTRY
def test_explain_shows_why_an_algorithm_cannot_run():
    with temporary_algorithm(lambda *a: None, supports=lambda p: "mock refuses every problem",
                             cost=lambda p, t: Estimate(0.0)) as name:
        explanation = convlab.explain(np.zeros((1, 5, 5, 2)), np.zeros((3, 3, 2, 2)))
        assert explanation.choice != name
        assert "mock refuses every problem" in str(explanation)
        row = [c for c in explanation.to_dict()["candidates"] if c["name"] == name][0]
        assert row == dict(row, viable=False, reason="mock refuses every problem",
                           estimated_seconds=None)


def test_explain_honours_threads_and_accepts_shape_only_inputs():
    class ShapeOnly:
        def __init__(self, shape):
            self.shape, self.dtype = shape, np.dtype(np.float32)

    explanation = convlab.explain(ShapeOnly((1, 56, 56, 64)), ShapeOnly((3, 3, 64, 64)),
                                  threads=1, pads_begin=1, pads_end=1)
    assert explanation.to_dict()["threads"] == 1
    assert "threads: 1" in str(explanation)
    assert explanation.problem.output_shape == (56, 56)


# --------------------------------------------------------------------------- every operation

def test_8bit_problems_are_chosen_by_estimates_in_their_own_registry():
    """The 8-bit registry's algorithms get estimates and the choice the forward rules give:
    im2col from a reduction IC/G * prod(K) of 64, direct below (docs/selection.md)."""
    from convlab.dispatch.registry import INT8

    deep = (np.zeros((1, 8, 8, 16), np.int8), np.zeros((3, 3, 16, 8), np.int8))  # 144
    shallow = (np.zeros((1, 8, 8, 16), np.int8), np.zeros((1, 1, 16, 8), np.int8))  # 16
    for arrays, expected in ((deep, "im2col"), (shallow, "direct")):
        account = convlab.explain(*arrays, threads=1)
        assert [c.name for c in account.candidates] == INT8.names()
        assert account.choice == expected == convlab.select_algorithm(*arrays, threads=1)
        estimated = {c.name: c.estimate.seconds for c in account.candidates}
        assert all(np.isfinite(estimated[name]) for name in ("direct", "im2col"))
        plan = convlab.Convolution(arrays[1])
        assert plan.algorithm_for(arrays[0]) == expected
        assert plan.explain(arrays[0]).choice == expected


def test_transposed_problems_are_chosen_in_their_own_registry():
    from convlab.dispatch.registry import TRANSPOSED
    from convlab.ops import transpose

    for strides, expected in ((2, transpose.COL2IM), (1, transpose.FORWARD)):
        tp = transpose.make_transpose_problem((1, 5, 5, 4), np.float32, (3, 3, 6, 4),
                                              np.float32, strides=strides)
        account = transpose.explain(tp, threads=1)
        assert [c.name for c in account.candidates] == TRANSPOSED.names()
        assert account.choice == expected
        contenders = [c.name for c in account.candidates if c.contender]
        assert contenders == [expected]
