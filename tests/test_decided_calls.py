"""One-shot calls remember what they decided per argument signature (convlab.ops._decided):
a repeated call must compute exactly what a first call computes, on the data it is given,
and must decide afresh whenever what the decision rests on changed."""
from __future__ import annotations

import numpy as np
import pytest

import convlab
from convlab.dispatch import cost_model
from convlab.ops import _decided as decided
from convlab.strategies import im2col
from tests.helpers import (
    ALGORITHMS,
    MUTATES_REGISTRY,
    assert_matches_reference,
    problem_of,
    skip_unless_supported,
    temporary_algorithm,
)

SRC = (2, 9, 8, 5)        # NXC
WEIGHTS = (3, 3, 5, 6)    # XIO
ATTRIBUTES = dict(strides=(2, 1), pads_begin=(1, 0), pads_end=(0, 2), dilations=(1, 2))
# Stride 1 and dense, so that every algorithm (Winograd too) runs one of the two.
DENSE = dict(pads_begin=1, pads_end=(1, 0))


@pytest.fixture(autouse=True)
def fresh():
    decided.forget()
    yield
    decided.forget()


def _arrays(rng, dtype=np.float32):
    src = rng.standard_normal(SRC).astype(dtype)
    weights = rng.standard_normal(WEIGHTS).astype(dtype)
    bias = rng.standard_normal(WEIGHTS[-1]).astype(dtype)
    return src, weights, bias


@pytest.mark.parametrize("attributes", [ATTRIBUTES, DENSE], ids=["strided", "dense"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("algorithm", ["auto", *ALGORITHMS])
def test_a_repeated_call_computes_on_its_own_data(rng, algorithm, dtype, attributes):
    """The second and third calls take the remembered path (the signature is stored after
    the first) and must follow new src, weights and bias values, not the first call's."""
    src, weights, bias = _arrays(rng, dtype)
    if algorithm != "auto":
        skip_unless_supported(algorithm, problem_of(src, weights, bias, attributes))
    first = convlab.convolve(src, weights, bias, algorithm=algorithm, **attributes)
    assert len(decided._decisions) == 1
    for _ in range(2):
        src, weights, bias = _arrays(rng, dtype)
        kept = (src.copy(), weights.copy(), bias.copy())
        again = convlab.convolve(src, weights, bias, algorithm=algorithm, **attributes)
        assert again.shape == first.shape and again.dtype == first.dtype
        ran = (convlab.select_algorithm(src, weights, bias, **attributes)
               if algorithm == "auto" else algorithm)
        assert_matches_reference(again, src, weights, bias, attributes, ran)
        for before, after in zip(kept, (src, weights, bias)):
            np.testing.assert_array_equal(before, after)  # inputs never modified
    assert len(decided._decisions) == 1


def test_channels_first_layouts_take_the_remembered_path_too(rng):
    src, weights, bias = _arrays(rng)
    src_ncx = np.ascontiguousarray(np.moveaxis(src, -1, 1))
    weights_oix = np.ascontiguousarray(np.transpose(weights, (3, 2, 0, 1)))
    want = convlab.convolve(src, weights, bias, **ATTRIBUTES)
    for _ in range(3):
        got = convlab.convolve(src_ncx, weights_oix, bias, data_format="NCX",
                               weights_format="OIX", **ATTRIBUTES)
        assert got.flags.c_contiguous
        np.testing.assert_allclose(np.moveaxis(got, 1, -1), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("call", [
    dict(strides=(2.0, 1)), dict(strides=(True, 1)), dict(groups=1.0), dict(groups=True),
    dict(pads_begin=[1, 0]),
])
def test_only_exact_builtin_types_enter_a_signature(rng, call):
    """2.0 == 2 and True == 1 hash alike: such a call must not find its valid twin's
    decision (it would then escape the type check that refuses it)."""
    src, weights, _ = _arrays(rng)
    attributes = {**ATTRIBUTES, **call}
    key = decided.signature(src, weights, None, tuple(attributes.values()), "auto", 2,
                            "default")
    assert key is None


@pytest.mark.parametrize("argument, value", [
    ("src", [[[[0.0]]]]), ("weights", [[[[0.0]]]]), ("bias", [0.0]), ("algorithm", None),
    ("precision", None),
])
def test_non_arrays_and_odd_types_never_enter_a_signature(rng, argument, value):
    src, weights, bias = _arrays(rng)
    arguments = dict(src=src, weights=weights, bias=bias, algorithm="auto",
                     precision="default")
    arguments[argument] = value
    assert decided.signature(arguments["src"], arguments["weights"], arguments["bias"],
                             (), arguments["algorithm"], 2, arguments["precision"]) is None


def test_calls_with_an_output_stage_or_extras_are_not_remembered(rng):
    src, weights, bias = _arrays(rng)
    out = np.empty_like(convlab.convolve(src, weights, bias, **ATTRIBUTES))
    decided.forget()
    convlab.convolve(src, weights, bias, out=out, **ATTRIBUTES)
    convlab.convolve(src, weights, bias, post_ops=["relu"], **ATTRIBUTES)
    convlab.convolve(src.astype(np.float16), weights.astype(np.float16), **ATTRIBUTES)
    convlab.convolve(src[:0], weights, **ATTRIBUTES)
    assert len(decided._decisions) == 0


def test_a_reload_of_the_constants_decides_again(rng, monkeypatch):
    src, weights, _ = _arrays(rng)
    convlab.convolve(src, weights, **ATTRIBUTES)
    (key,) = decided._decisions
    assert decided.lookup(key) is not None
    cost_model.reload()
    assert decided.lookup(key) is None, "a decision made under older constants was reused"
    convlab.convolve(src, weights, **ATTRIBUTES)
    assert decided.lookup(key) is not None


def test_the_remembered_signatures_are_bounded(rng, monkeypatch):
    monkeypatch.setattr(decided, "MAX_SIGNATURES", 4)
    weights = rng.standard_normal((1, 1, 2, 3)).astype(np.float32)
    for width in range(1, 11):
        convlab.convolve(np.ones((1, 1, width, 2), np.float32), weights)
        assert len(decided._decisions) <= 4
    kept_widths = sorted(key[0][2] for key in decided._decisions)
    assert kept_widths == [7, 8, 9, 10], "the oldest signatures go first"


def test_a_type_error_after_a_remembered_twin_is_still_raised(rng):
    src, weights, _ = _arrays(rng)
    convlab.convolve(src, weights, strides=2)
    convlab.convolve(src, weights, strides=2)
    with pytest.raises(TypeError, match="strides"):
        convlab.convolve(src, weights, strides=2.0)
    with pytest.raises(TypeError, match="threads"):
        convlab.convolve(src, weights, strides=2, threads=2.0)


def _misaligned_copy(array):
    """``array``'s values in memory one byte off the dtype's alignment."""
    raw = np.empty(array.nbytes + 1, np.uint8)
    out = raw[1:].view(array.dtype).reshape(array.shape)
    out[...] = array
    assert not out.flags.aligned
    return out


@pytest.mark.parametrize("layout", ["contiguous", "fortran", "misaligned", "strided"])
@pytest.mark.parametrize("algorithm", ["auto", *ALGORITHMS])
def test_remembered_calls_take_weights_in_any_memory_layout(rng, algorithm, layout):
    """A remembered call readies the weights its own way where it can (a reshape, for
    algorithms that multiply the weights as they are); weights of the same shape and dtype
    in another memory layout must give the same result as a first call."""
    src, weights, bias = _arrays(rng)
    if algorithm != "auto":
        skip_unless_supported(algorithm, problem_of(src, weights, bias, ATTRIBUTES))
    convlab.convolve(src, weights, bias, algorithm=algorithm, **ATTRIBUTES)
    fresh_weights = rng.standard_normal(WEIGHTS).astype(np.float32)
    arranged = {"contiguous": fresh_weights,
                "fortran": np.asfortranarray(fresh_weights),
                "misaligned": _misaligned_copy(fresh_weights),
                "strided": np.repeat(fresh_weights, 2, axis=-1)[..., ::2]}[layout]
    np.testing.assert_array_equal(arranged, fresh_weights)
    got = convlab.convolve(src, arranged, bias, algorithm=algorithm, **ATTRIBUTES)
    assert len(decided._decisions) == 1, "the call did not take the remembered path"
    decided.forget()
    want = convlab.convolve(src, np.ascontiguousarray(fresh_weights), bias,
                            algorithm=algorithm, **ATTRIBUTES)
    np.testing.assert_array_equal(got, want)


def _arranged(array, layout):
    """``array``'s values in another memory layout (the same values, shape and dtype)."""
    arranged = {"contiguous": lambda: array,
                "fortran": lambda: np.asfortranarray(array),
                "misaligned": lambda: _misaligned_copy(array),
                "strided": lambda: np.repeat(array, 2, axis=-1)[..., ::2],
                "big-endian": lambda: array.astype(array.dtype.newbyteorder(">"))}[layout]()
    np.testing.assert_array_equal(arranged, array)
    return arranged


SRC_LAYOUTS = ["contiguous", "fortran", "misaligned", "strided"]


@pytest.mark.parametrize("layout", SRC_LAYOUTS)
@pytest.mark.parametrize("algorithm", ["auto", *ALGORITHMS])
def test_remembered_calls_and_plans_take_src_in_any_memory_layout(rng, algorithm, layout):
    """A C-contiguous, aligned src of the compute dtype goes to the kernel as it is on a
    repeated call; any other src of the same shape and dtype must be readied as on a first
    call, in one-shot calls and in plans alike."""
    src, weights, bias = _arrays(rng)
    if algorithm != "auto":
        skip_unless_supported(algorithm, problem_of(src, weights, bias, ATTRIBUTES))
    plan = convlab.Convolution(weights, bias, algorithm=algorithm, **ATTRIBUTES)
    convlab.convolve(src, weights, bias, algorithm=algorithm, **ATTRIBUTES)
    plan(src)
    fresh_src = rng.standard_normal(SRC).astype(np.float32)
    arranged = _arranged(fresh_src, layout)
    kept = arranged.copy()
    got = convlab.convolve(arranged, weights, bias, algorithm=algorithm, **ATTRIBUTES)
    from_plan = plan(arranged)
    assert len(decided._decisions) == 1, "the call did not take the remembered path"
    np.testing.assert_array_equal(arranged, kept)
    decided.forget()
    want = convlab.convolve(np.ascontiguousarray(fresh_src), weights, bias,
                            algorithm=algorithm, **ATTRIBUTES)
    # a plan measures its contenders, so under "auto" it may run another algorithm
    plan_ran = convlab.convolve(np.ascontiguousarray(fresh_src), weights, bias,
                                algorithm=plan.algorithm_for(fresh_src), **ATTRIBUTES)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(from_plan, plan_ran)
    assert got.flags.c_contiguous and from_plan.flags.c_contiguous


def test_a_big_endian_src_is_decided_on_its_own(rng):
    """A byte-swapped src compares unequal to the native dtype, so it has a signature of
    its own and is converted, never handed to a kernel as native floats."""
    src, weights, bias = _arrays(rng)
    want = convlab.convolve(src, weights, bias, **ATTRIBUTES)
    for _ in range(2):
        got = convlab.convolve(_arranged(src, "big-endian"), weights, bias, **ATTRIBUTES)
        np.testing.assert_array_equal(got, want)
    assert len(decided._decisions) == 2


def test_a_remembered_im2col_call_follows_a_new_workspace_limit(rng):
    """im2col's bound run keeps the launch it planned, but not past a change of the
    workspace limit: the repeated call must then plan within the new limit."""
    src, weights, bias = _arrays(rng)
    plan = convlab.Convolution(weights, bias, algorithm="im2col", **ATTRIBUTES)
    want = convlab.convolve(src, weights, bias, algorithm="im2col", **ATTRIBUTES)
    plan(src)
    roomy = im2col.last_run["workspace_bytes"]
    limit = im2col.MIN_WORKSPACE_LIMIT
    assert roomy > limit, "the problem needs no more than the smallest limit"
    with im2col.workspace_limit(limit):
        for call in (lambda: convlab.convolve(src, weights, bias, algorithm="im2col",
                                              **ATTRIBUTES), lambda: plan(src)):
            got = call()
            assert im2col.last_run["workspace_bytes"] <= limit
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert len(decided._decisions) == 1


@MUTATES_REGISTRY
def test_an_algorithms_bind_hook_runs_its_repeated_calls(rng):
    """Decided calls and plans run what an algorithm's ``bind`` returns, bound once per
    case; a first call runs ``run`` itself."""
    bound_for, bound_calls, run_calls = [], [], []

    def run(problem, src, weights, bias, dst, threads):
        run_calls.append(1)
        dst[...] = convlab.reference.convolve(src, weights[0], bias, **ATTRIBUTES)

    def bind(problem, threads):
        bound_for.append((problem, threads))

        def bound(src, weights, bias, dst):
            bound_calls.append(1)
            run(problem, src, weights, bias, dst, threads)

        return bound

    src, weights, bias = _arrays(rng)
    with temporary_algorithm(run, bind=bind) as name:
        plan = convlab.Convolution(weights, bias, algorithm=name, threads=1, **ATTRIBUTES)
        for _ in range(3):
            got = convlab.convolve(src, weights, bias, algorithm=name, threads=1,
                                   **ATTRIBUTES)
            from_plan = plan(src)
    want = convlab.reference.convolve(src, weights, bias, **ATTRIBUTES)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    np.testing.assert_allclose(from_plan, want, rtol=1e-5)
    assert [threads for _, threads in bound_for] == [1, 1], "bound once per case"
    assert len(bound_calls) == 4, "the repeated calls did not take the bound run"
    assert len(run_calls) == 6
