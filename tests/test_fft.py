"""The fft algorithm's own guarantees: bounded workspace, tiles, plans, refusals, selection.

Its results on every attribute are checked by the registry-parametrized tests (grid,
properties, edge cases, plans, post-ops, padding modes); these tests cover what only fft has.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import convlab
from convlab.dispatch import registry, select
from convlab.problem import shapes
from convlab.strategies import fft, im2col
from tests.helpers import assert_matches_reference, problem_of, random_tensors

WORKSPACE_SETTING = pytest.mark.thread_unsafe(reason="changes the process-wide workspace "
                                                     "limit")


def _tensors(rng, *, batch=2, ic=6, oc=4, groups=1, input_shape=(40, 33), kernel=(9, 7),
             dtype="float32", bias=True):
    return random_tensors(rng, batch=batch, in_channels=ic, out_channels=oc, groups=groups,
                          input_shape=input_shape, kernel_shape=kernel, dtype=dtype,
                          data_format="NXC", weights_format="XIO", bias=bias)


@WORKSPACE_SETTING
@pytest.mark.parametrize("groups, ic, oc", [(1, 6, 4), (3, 6, 6), (6, 6, 6)])
def test_a_small_workspace_cuts_tiles_blocks_and_group_chunks(rng, groups, ic, oc):
    """With a workspace of a few tiles the image is cut into many tiles, blocks and group
    chunks; every block's buffers stay within the limit and the result is unchanged."""
    src, weights, bias = _tensors(rng, groups=groups, ic=ic, oc=oc)
    attributes = dict(groups=groups, pads_begin=(4, 2), pads_end=(3, 5), strides=(1, 2))
    problem = problem_of(src, weights, bias, attributes)
    limit = 3 * fft.tile_bytes_per_group(problem, (16, 16))
    with im2col.workspace_limit(limit):
        t = fft.tiling(problem)
        got = convlab.convolve(src, weights, bias, algorithm="fft", **attributes)
        assert fft.last_run["workspace_bytes"] <= limit
    assert t.workspace_bytes <= limit
    assert t.spatial_tiles > 1 and fft.last_run["blocks"] > 1
    if groups > 1:
        assert t.group_chunk < groups
    assert_matches_reference(got, src, weights, bias, attributes, "fft")


@WORKSPACE_SETTING
def test_a_kernel_too_large_for_the_workspace_is_refused_with_the_reason(rng):
    src, weights, _ = _tensors(rng, input_shape=(64, 64), kernel=(31, 31), bias=False)
    problem = problem_of(src, weights)
    with im2col.workspace_limit(4096):
        reason = registry.get_algorithm("fft").supports(problem)
        assert reason is not None and "workspace limit 4096" in reason
        with pytest.raises(ValueError, match="algorithm='fft' cannot run this problem: "
                                             "kernel extent 31x31"):
            convlab.convolve(src, weights, algorithm="fft")
        # auto still runs it, with another algorithm
        assert convlab.select_algorithm(src, weights) != "fft"


def test_other_dtypes_are_refused_with_the_reason():
    problem = convlab.make_problem((1, 8, 8, 2), np.int8, (3, 3, 2, 2), np.int8)
    assert "fft computes float32 and float64" in registry.get_algorithm("fft").supports(
        problem)
    with pytest.raises(ValueError, match="algorithm='fft'"):
        convlab.convolve(np.zeros((1, 8, 8, 2), np.int8), np.zeros((3, 3, 2, 2), np.int8),
                         algorithm="fft")


def test_a_plan_transforms_its_weights_once_per_tile_shape(rng):
    src, weights, bias = _tensors(rng)
    plan = convlab.Convolution(weights, bias, algorithm="fft", pads_begin=4, pads_end=3)
    first = plan(src)
    (prepared,) = plan._prepared.values()  # the plan's FFTWeights
    assert prepared.transforms == 1
    for _ in range(3):
        np.testing.assert_array_equal(plan(src), first)
    assert prepared.transforms == 1
    plan(src[:, :20, :17])  # a smaller image: another tile shape, one more transform
    assert prepared.transforms == 2
    assert_matches_reference(first, src, weights, bias, dict(pads_begin=4, pads_end=3), "fft")


def test_prepared_weights_keep_one_spectrum_per_tile_shape(rng):
    _, weights, _ = _tensors(rng, bias=False)
    problem = problem_of(np.zeros((1, 40, 33, 6), np.float32), weights)
    prepared = registry.get_algorithm("fft").prepare(problem, weights)
    a = prepared.spectrum((16, 16), 1)
    assert prepared.spectrum((16, 16), 2) is a and prepared.transforms == 1
    prepared.spectrum((18, 20), 1)
    assert prepared.transforms == 2
    for n in range(fft.MAX_KEPT_SPECTRA + 2):
        prepared.spectrum((16 + n, 16), 1)
    assert len(prepared._spectra) == fft.MAX_KEPT_SPECTRA


def test_the_weight_spectrum_is_the_conjugate_transform_of_the_stretched_kernel(rng):
    weights = rng.standard_normal((5, 3, 2, 4)).astype(np.float64)  # XIO, 2 groups
    problem = convlab.make_problem((1, 20, 20, 4), np.float64, weights.shape, np.float64,
                                   groups=2, dilations=(2, 3))
    prepared = registry.get_algorithm("fft").prepare(problem, weights)
    shape = (12, 10)
    got = prepared.spectrum(shape, 1)
    canonical = convlab.problem.params.canonical_weights(weights, problem)
    stretched = np.zeros((2, 9, 7, 2, 2))  # (G, Ke..., ICg, OCg)
    stretched[:, ::2, ::3] = canonical
    want = np.conj(np.fft.rfftn(stretched, s=shape, axes=(1, 2))) / math.prod(shape)
    want = np.moveaxis(want, 0, 2).reshape(-1, 2, 2, 2)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)


def test_a_whole_axis_tile_is_as_short_as_the_padding_allows():
    """27x27 'same' on 14x14 needs 27 points per axis, not 14 + 27 - 1 = 40; a kernel
    longer than that tile is folded onto it."""
    problem = convlab.make_problem((1, 14, 14, 8), np.float32, (27, 27, 1, 8), np.float32,
                                   groups=8, pads_begin=13, pads_end=13)
    assert fft.whole_axis_length(problem, 0) == 27
    assert fft.tiling(problem).fft_shape == (27, 27)
    tiny = convlab.make_problem((1, 1, 2), np.float32, (13, 2, 3), np.float32,
                                pads_begin=6, pads_end=6)
    assert fft.whole_axis_length(tiny, 0) == 7


def test_a_result_with_a_special_value_is_recomputed_exactly(rng):
    src, weights, bias = _tensors(rng)
    src[1, 5, 7, 2] = np.inf
    got = convlab.convolve(src, weights, bias, algorithm="fft", pads_begin=2, pads_end=2)
    assert fft.last_run["fallback"] == "direct"
    want = convlab.convolve(src, weights, bias, algorithm="direct", pads_begin=2, pads_end=2)
    np.testing.assert_array_equal(got, want)


def test_threads_give_the_same_result_bit_for_bit(rng):
    for groups, ic, oc in ((1, 6, 4), (6, 6, 6), (2, 12, 40)):
        src, weights, bias = _tensors(rng, groups=groups, ic=ic, oc=oc, input_shape=(64, 48))
        results = [convlab.convolve(src, weights, bias, algorithm="fft", threads=t,
                                    groups=groups, pads_begin=3, pads_end=4)
                   for t in (1, 2, 3, 5)]
        for other in results[1:]:
            np.testing.assert_array_equal(other, results[0])



@pytest.mark.parametrize("groups, ic, oc", [(48, 48, 48), (32, 32, 64)])
def test_group_tasks_cover_every_group_and_give_the_same_bits_at_any_thread_count(rng,
                                                                                 groups, ic, oc):
    """Depthwise-like layers run (block, slice of groups) tasks on the threads; every
    group is computed once, and the split does not depend on the thread count."""
    src, weights, bias = _tensors(rng, groups=groups, ic=ic, oc=oc, input_shape=(30, 26),
                                  kernel=(9, 7))
    attributes = dict(groups=groups, pads_begin=(4, 3), pads_end=(4, 3))
    problem = problem_of(src, weights, bias, attributes)
    t = fft.tiling(problem)
    tasks, _ = fft._group_tasks(problem, t, 1, 2)
    covered = sorted(g for _, g0, g1 in tasks for g in range(g0, g1))
    assert len(tasks) >= fft.GROUP_TASKS_MIN and covered == list(range(groups))
    results = [convlab.convolve(src, weights, bias, algorithm="fft", threads=t, **attributes)
               for t in (1, 2, 3)]
    for other in results[1:]:
        np.testing.assert_array_equal(other, results[0])
    assert_matches_reference(results[0], src, weights, bias, attributes, "fft")

def test_precision_highest_excludes_fft_and_default_admits_it():
    problem = convlab.make_problem((1, 56, 56, 16), np.float32, (31, 31, 1, 16), np.float32,
                                   groups=16, pads_begin=15, pads_end=15)
    algorithm = registry.get_algorithm("fft")
    assert algorithm.relative_error_for(problem) <= select.DEFAULT_RELATIVE_ERROR_BOUND
    assert select.precision_excludes(algorithm, "default", problem) is None
    assert "highest" in select.precision_excludes(algorithm, "highest", problem)
    assert select.choose(problem, 2, precision="highest") != "fft"


def test_auto_picks_fft_for_a_31x31_depthwise_layer_and_not_for_resnet_3x3():
    replknet = next(layer for layer in shapes.load_suite("large_kernel")
                    if layer.name == "replknet_31b:stage1_dw31x31")
    assert select.choose(replknet.problem(), 2) == "fft"
    for layer in shapes.load_suite("resnet_50", mb=1):
        assert select.choose(layer.problem(), 2) != "fft", layer.name


def test_explain_shows_the_tiling_and_the_error():
    text = str(convlab.explain(np.ones((1, 56, 56, 16), np.float32),
                               np.ones((31, 31, 1, 16), np.float32), groups=16,
                               pads_begin=15, pads_end=15))
    line = next(line for line in text.splitlines() if line.strip().startswith("fft"))
    assert "fft_shape=" in line and "float32_relative_error=" in line
