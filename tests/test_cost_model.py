"""The selector's cost model: terms counted by each strategy times the fitted constants."""
from __future__ import annotations

import math

import numpy as np
import pytest

import convlab
from convlab.dispatch import cost_model, registry, select
from tests.helpers import assert_matches_reference, problem_of, random_tensors

PROBLEMS = [
    ((1, 8, 8, 16), (3, 3, 16, 16), {"pads_begin": 1, "pads_end": 1}),
    ((2, 56, 56, 64), (1, 1, 64, 256), {}),
    ((1, 112, 112, 32), (3, 3, 1, 32), {"groups": 32, "pads_begin": 1, "pads_end": 1}),
    ((1, 30, 16), (3, 16, 8), {"strides": 2}),
    ((1, 6, 7, 8, 4), (3, 3, 3, 4, 4), {"dilations": (1, 2, 1)}),
]


@pytest.mark.parametrize("threads", [1, 2, 7])
@pytest.mark.parametrize("src_shape, weights_shape, attributes", PROBLEMS)
@pytest.mark.parametrize("name", [a.name for a in registry.registered() if a.auto])
def test_estimate_is_the_sum_of_terms_times_fitted_constants(name, src_shape, weights_shape,
                                                             attributes, threads):
    problem = convlab.make_problem(src_shape, np.float32, weights_shape, np.float32,
                                   **attributes)
    algorithm = registry.get_algorithm(name)
    if algorithm.supports(problem) is not None:
        pytest.skip(algorithm.supports(problem))
    estimate = algorithm.cost(problem, threads)
    terms, per_unit = estimate.inputs["terms"], estimate.inputs["seconds_per_unit"]
    assert set(terms) == set(cost_model.constants_for(name, threads)), "counting and fit disagree"
    assert all(value >= 0 and math.isfinite(value) for value in terms.values())
    want = sum(per_unit[t] * v for t, v in terms.items())
    assert estimate.seconds == pytest.approx(want, rel=1e-12)
    assert 0 < estimate.seconds < math.inf


def test_more_work_is_never_estimated_cheaper():
    """Monotone in batch: the terms count work, and the constants are non-negative."""
    for name in (a.name for a in registry.registered() if a.auto):
        small = convlab.make_problem((1, 28, 28, 32), np.float32, (3, 3, 32, 32), np.float32,
                                     pads_begin=1, pads_end=1)
        large = convlab.make_problem((8, 28, 28, 32), np.float32, (3, 3, 32, 32), np.float32,
                                     pads_begin=1, pads_end=1)
        cost = registry.get_algorithm(name).cost
        assert cost(large, 2).seconds >= cost(small, 2).seconds, name


def test_constants_are_non_negative_and_cite_their_run():
    stored = cost_model.fitted()
    for key in ("command", "date", "machine"):
        assert stored["source"][key], key
    for name, by_threads in stored["constants"].items():
        for constants in by_threads.values():
            assert all(v >= 0 for v in constants.values()), name
    assert "fit_cost_model" in cost_model.source()
    assert all(set(by_threads) >= {"1", "2"} for by_threads in stored["constants"].values())


def test_a_plan_chooses_without_the_per_call_weight_preparation():
    """Plans pack or transform weights once, so their estimates leave those terms out."""
    # 3x3 with 250 output channels: direct pads (packs) them, Winograd transforms them
    problem = convlab.make_problem((1, 14, 14, 256), np.float32, (3, 3, 256, 250), np.float32,
                                   pads_begin=1, pads_end=1)
    left_out = {}
    for algorithm in registry.registered():
        if not algorithm.auto or algorithm.supports(problem) is not None:
            continue
        estimate = algorithm.cost(problem, 2)
        terms, per_unit = estimate.inputs["terms"], estimate.inputs["seconds_per_unit"]
        preparation = sum(terms[name] * per_unit[name]
                          for name in cost_model.PREPARATION_TERMS if name in terms)
        assert cost_model.seconds(estimate, prepared=True) == pytest.approx(
            estimate.seconds - preparation)
        assert cost_model.seconds(estimate) == estimate.seconds
        left_out[algorithm.name] = preparation
    # the fitted constants price preparing the weights somewhere (the fit may zero a term
    # that its timings cannot tell apart from others, as it once did direct's packing),
    # else plans and one-shot calls would never choose differently
    assert max(left_out.values()) > 0, left_out
    rows = select.assess(problem, 2)
    prepared_pick = select.choose(problem, 2, rows, prepared=True)
    assert prepared_pick == min(select.contenders(rows),
                                key=lambda r: cost_model.seconds(r.estimate, True)).name
    # choose="estimate": the plan's estimate-only rule (by default it also times the
    # contenders close to this pick, tests/test_plan_measure.py)
    plan = convlab.Convolution(np.zeros((3, 3, 256, 250), np.float32), threads=2,
                               pads_begin=1, pads_end=1, choose="estimate")
    assert plan.algorithm_for(np.zeros((1, 14, 14, 256), np.float32)) == prepared_pick


def test_direct_reuses_weights_that_fill_whole_vectors():
    """OC/G a multiple of 16 float32: the canonical weights are the kernel's layout, so a
    one-shot call neither copies them nor is charged for packing, and a plan keeps them
    where they lie when they start on a cache line."""
    from convlab.runtime import _buffers as buffers
    direct = registry.get_algorithm("direct")
    for oc, reused in ((64, True), (60, False)):
        problem = convlab.make_problem((1, 5, 5, 8), np.float32, (3, 3, 8, oc), np.float32)
        weights = np.ones((1, 3, 3, 8, oc), np.float32)
        once = direct.prepare_once(problem, weights)
        assert np.shares_memory(once.array, weights) == reused
        aligned = buffers.aligned_copy(weights)
        prepared = direct.prepare_weights(problem, aligned)
        assert np.shares_memory(prepared.array, aligned) == reused
        pack = direct.cost(problem, 2).inputs["terms"]["weight_pack_bytes"]
        assert (pack == 0) == reused


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("weights_format", ["XIO", "OIX"])
@pytest.mark.parametrize("channels", [32, 37])
def test_direct_prepares_depthwise_weights_from_the_callers_layout(rng, channels,
                                                                   weights_format, dtype):
    """XIO depthwise weights (K..., 1, C) already lie as the kernel reads them (taps, then
    channels): when C fills whole vectors the kernel reads them in place, else they are
    padded from a strided view; OIX weights are always repacked. Results match the
    reference, the caller's weights are untouched, and a plan keeps a copy of its own."""
    attributes = dict(groups=channels, pads_begin=1, pads_end=1,
                      weights_format=weights_format)
    src, weights, bias = random_tensors(
        rng, batch=2, in_channels=channels, out_channels=channels, groups=channels,
        input_shape=(6, 5), kernel_shape=(3, 3), dtype=dtype, data_format="NXC",
        weights_format=weights_format,
        bias=True)
    before = weights.copy()
    problem = problem_of(src, weights, bias, attributes)
    direct = registry.get_algorithm("direct")
    assert direct.weight_views
    prepared = direct.prepare(problem, weights)
    lanes = 64 // np.dtype(dtype).itemsize
    in_place = weights_format == "XIO" and channels % lanes == 0
    assert np.shares_memory(prepared.array, weights) == in_place
    _check_direct_call_and_plan(src, weights, bias, attributes, before)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("groups, oc, in_place", [(2, 64, True), (4, 64, True), (2, 36, False)])
def test_direct_one_shot_reads_grouped_weights_in_place(rng, groups, oc, in_place, dtype):
    """Grouped XIO weights whose OC/G fills whole vectors are (G, taps x ICg rows, OC/G)
    with rows OC apart: a one-shot call's kernel reads them where they are, while a plan
    keeps a group-major copy of its own. Results match the reference either way."""
    if in_place and (oc // groups) % (64 // np.dtype(dtype).itemsize):
        pytest.skip("OC/G does not fill whole vectors of this dtype")
    attributes = dict(groups=groups, pads_begin=1, pads_end=1, dilations=(2, 1))
    src, weights, bias = random_tensors(
        rng, batch=2, in_channels=4 * groups, out_channels=oc, groups=groups,
        input_shape=(9, 7), kernel_shape=(3, 3), dtype=dtype, data_format="NXC",
        weights_format="XIO", bias=True)
    before = weights.copy()
    problem = problem_of(src, weights, bias, attributes)
    direct = registry.get_algorithm("direct")
    once = direct.prepare(problem, weights, once=True)
    kept = direct.prepare(problem, weights)
    assert np.shares_memory(once.array, weights) == in_place
    assert not np.shares_memory(kept.array, weights)
    _check_direct_call_and_plan(src, weights, bias, attributes, before)


def _check_direct_call_and_plan(src, weights, bias, attributes, before):
    """A one-shot direct call matches the reference and leaves the weights as they were;
    a plan keeps its own weights, so zeroing the caller's afterwards changes nothing."""
    got = convlab.convolve(src, weights, bias, algorithm="direct", **attributes)
    assert_matches_reference(got, src, weights, bias, attributes, "direct")
    np.testing.assert_array_equal(weights, before)
    plan = convlab.Convolution(weights, bias, algorithm="direct", **attributes)
    weights[...] = 0
    np.testing.assert_array_equal(plan(src), got)
    weights[...] = before


def test_direct_kernel_reads_rows_one_stride_apart_and_refuses_others():
    from convlab.strategies.kernels import _direct
    src = np.ones((1, 1, 4, 4, 4), np.float32)
    dst = np.zeros((1, 1, 2, 2, 16), np.float32)
    geometry = ((1, 1, 1), (1, 1, 1), (0, 0, 0), 1)
    # every other input channel of 8: rows 32 elements apart, uniformly
    spaced = np.ones((1, 1, 3, 3, 8, 16), np.float32)[:, :, :, :, ::2, :]
    _direct.conv_direct(src, spaced, None, dst, *geometry)
    assert (dst == 36).all()  # 3x3 taps x 4 input channels of ones
    # three of four kernel columns: a gap after every third tap's rows
    gappy = np.ones((1, 1, 3, 4, 4, 16), np.float32)[:, :, :, :3]
    with pytest.raises(ValueError, match="rows one stride apart"):
        _direct.conv_direct(src, gappy, None, dst, *geometry)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("row_bytes, kernel, src_copied", [
    (1024, (3, 3), False), (2048, (5, 5), False), (4096, (3, 3), False),
    (4096, (5, 5), False), (4096, (7, 7), True), (4096, (7, 9), True), (4096, (1, 7), False)])
def test_depthwise_rows_a_multiple_of_a_kilobyte_are_padded_a_line(rng, dtype, row_bytes,
                                                                   kernel, src_copied):
    """Depthwise weights whose channels span a multiple of 1 KiB get one more cache line
    per tap, and src whose pixels span a multiple of 4 KiB is read from a copy one line
    wider per pixel under kernels of 49 taps or more; results match the reference and
    the caller's src and weights are untouched."""
    from convlab.strategies import direct
    from convlab.strategies.kernels import _direct
    itemsize = np.dtype(dtype).itemsize
    channels, lanes = row_bytes // itemsize, 64 // itemsize
    attributes = dict(groups=channels, pads_begin=(kernel[0] // 2, kernel[1] // 2),
                      pads_end=(kernel[0] // 2, kernel[1] // 2))
    src, weights, bias = random_tensors(
        rng, batch=2, in_channels=channels, out_channels=channels, groups=channels,
        input_shape=(6, 5), kernel_shape=kernel, dtype=dtype, data_format="NXC",
        weights_format="XIO", bias=True)
    problem = problem_of(src, weights, bias, attributes)
    prepared = registry.get_algorithm("direct").prepare(problem, weights)
    assert prepared.array.shape[-1] == channels + lanes
    assert _direct.depthwise_padded_channels(channels, itemsize) == channels + lanes
    read = direct._depthwise_src(problem, src.reshape(2, 1, 6, 5, channels))
    assert read.strides[-2] == (channels + lanes if src_copied else channels) * itemsize
    np.testing.assert_array_equal(read.reshape(src.shape), src)
    before_src = src.copy()
    _check_direct_call_and_plan(src, weights, bias, attributes, weights.copy())
    np.testing.assert_array_equal(src, before_src)


def test_depthwise_kernel_reads_packed_pixels_and_refuses_others():
    """conv_depthwise takes src whose pixels lie at least C elements apart and otherwise
    packed (a view of the first C channels of a wider array); any other strides are a
    ValueError, never a read out of bounds."""
    from convlab.strategies.kernels import _direct
    weights = np.ones((1, 3, 3, 16), np.float32)
    dst = np.zeros((1, 1, 4, 4, 16), np.float32)
    geometry = ((1, 1, 1), (1, 1, 1), (0, 1, 1), 1)
    wide = np.ones((1, 1, 4, 4, 32), np.float32)
    _direct.conv_depthwise(wide[..., :16], weights, None, dst, *geometry)
    assert dst[0, 0, 1, 1].tolist() == [9.0] * 16  # an interior pixel: 3x3 taps of ones
    # every other column of the wide array still has packed pixels, 64 elements apart
    narrow = np.zeros((1, 1, 4, 2, 16), np.float32)
    _direct.conv_depthwise(wide[:, :, :, ::2, :16], weights, None, narrow, *geometry)
    assert narrow[0, 0, 1, 0].tolist() == [6.0] * 16  # 3x2 taps land in src
    swapped = np.ones((1, 1, 4, 4, 16), np.float32).transpose(0, 1, 3, 2, 4)
    for strided in (wide[:, :, ::2, :, :16], wide[..., ::2], swapped):
        with pytest.raises(ValueError, match="packed pixels"):
            _direct.conv_depthwise(strided, weights, None, dst, *geometry)


def _with_margins(monkeypatch, margins):
    stored = dict(cost_model.fitted(), selection_margins=margins)
    monkeypatch.setattr(cost_model, "fitted", lambda threads=None: stored)
    select._cached_choice.cache_clear()


def test_auto_picks_an_algorithm_with_a_margin_only_when_it_wins_by_it(monkeypatch):
    """auto compares estimate * (1 + margin): an algorithm whose estimate is below the
    others' by less than its margin loses the pick, by more it keeps it."""
    problem = convlab.make_problem((1, 14, 14, 256), np.float32, (1, 1, 256, 1024),
                                   np.float32)
    rows = select.assess(problem, 2)
    ranked = sorted((row for row in select.contenders(rows)),
                    key=lambda row: row.estimate.seconds)
    assert len(ranked) >= 2
    best, runner_up = ranked[0], ranked[1]
    gap = runner_up.estimate.seconds / best.estimate.seconds - 1
    try:
        _with_margins(monkeypatch, {best.name: gap * 0.5})
        assert select.choose(problem, 2, rows) == best.name
        assert select.choose(problem, 2) == best.name
        _with_margins(monkeypatch, {best.name: gap * 2 + 0.01})
        assert select.choose(problem, 2, rows) == runner_up.name
        assert select.choose(problem, 2) == runner_up.name
        explanation = select.explain_problem(problem, 2)
        assert explanation.choice == runner_up.name
        assert f"margin {gap * 2 + 0.01:.0%}" in str(explanation)
        listed = {c["name"]: c for c in explanation.to_dict()["candidates"]}
        assert listed[best.name]["selection_margin"] == pytest.approx(gap * 2 + 0.01)
    finally:
        monkeypatch.undo()
        select._cached_choice.cache_clear()


def test_stored_margins_are_fractions_of_known_algorithms():
    margins = cost_model.fitted().get("selection_margins", {})
    for name, margin in margins.items():
        assert name in cost_model.fitted()["constants"], name
        assert 0 <= margin < 1, (name, margin)
        assert cost_model.selection_margin(name) == margin
    assert cost_model.selection_margin("no-such-algorithm") == 0.0


@pytest.mark.parametrize("input_shape, kernel, pads, strides, dilations", [
    ((14, 14), (27, 27), (13, 13), (1, 1), (1, 1)),
    ((9, 11), (3, 5), (0, 0), (1, 1), (1, 1)),
    ((20, 17), (5, 3), (4, 1), (2, 3), (2, 1)),
    ((6, 6, 6), (7, 7, 7), (3, 3, 3), (1, 1, 1), (1, 1, 1)),
])
def test_direct_counts_the_depthwise_taps_that_land_in_src(input_shape, kernel, pads, strides,
                                                          dilations):
    """The share of (pixel, tap) pairs inside src, against counting them one by one."""
    from convlab.strategies import direct
    channels = 8
    problem = convlab.make_problem((1, *input_shape, channels), np.float32,
                                   (*kernel, 1, channels), np.float32, groups=channels,
                                   strides=strides, dilations=dilations, pads_begin=pads,
                                   pads_end=pads)
    inside = total = 0
    for pixel in np.ndindex(*problem.output_shape):
        for tap in np.ndindex(*kernel):
            total += 1
            inside += all(0 <= o * s - p + k * d < n for o, s, p, k, d, n in zip(
                pixel, strides, pads, tap, dilations, input_shape))
    assert direct.visited_tap_fraction(problem) == pytest.approx(inside / total)
    terms, details = direct.cost_terms(problem, 1)
    assert details["visited_taps"] == pytest.approx(inside / total, abs=1e-4)
