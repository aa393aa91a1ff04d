"""What is specific to ``im2col``: chunking, the 1x1 paths, the workspace bound, threads.

The registry-parametrized suites (test_grid, test_edge_cases, test_threads...) already run
im2col on every attribute combination; these tests force the parts of its plan that small
default-limit problems never reach.
"""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tracemalloc

import numpy as np
import pytest

import convlab
from convlab.dispatch.registry import get_algorithm
from convlab.runtime import blas
from convlab.strategies import im2col
from convlab.strategies.kernels import _im2col
from tests.helpers import assert_matches_reference, problem_of, random_tensors

# (batch, input, kernel, IC, OC, attributes): a spread of paths and geometries.
CHUNK_PROBLEMS = {
    "2d-padded": (2, (9, 10), (3, 3), 8, 16, {"pads_begin": 1, "pads_end": (0, 2)}),
    "2d-grouped-strided-dilated-cropped": (
        2, (11, 9), (3, 2), 8, 12,
        {"groups": 2, "strides": (2, 1), "dilations": (1, 2), "pads_begin": (-1, 1),
         "pads_end": (2, -1)}),
    "1d-dilated": (3, (17,), (5,), 6, 4,
                   {"strides": 3, "dilations": 2, "pads_begin": 4, "pads_end": 1}),
    "3d-asymmetric": (1, (5, 6, 7), (3, 2, 3), 4, 6,
                      {"groups": 2, "pads_begin": 1, "pads_end": (0, 1, 2),
                       "dilations": (1, 2, 1)}),
    "4d": (1, (3, 4, 3, 4), (2, 2, 1, 3), 4, 6, {"pads_begin": 1, "pads_end": 0}),
    "1x1-strided-grouped": (2, (9, 10), (1, 1), 8, 16, {"groups": 4, "strides": 2}),
    "1x1-padded": (1, (6, 7), (1, 1), 6, 8, {"pads_begin": 1, "pads_end": (2, -1)}),
    "depthwise": (2, (7, 8), (3, 3), 6, 6, {"groups": 6, "pads_begin": 1, "pads_end": 1}),
}


def _call(src, weights, bias, attributes, **options):
    return convlab.convolve(src, weights, bias, algorithm="im2col", **attributes, **options)


def _tensors(rng, case, dtype="float32"):
    batch, input_shape, kernel, ic, oc, attributes = CHUNK_PROBLEMS[case]
    src, weights, bias = random_tensors(
        rng, batch=batch, in_channels=ic, out_channels=oc, groups=attributes.get("groups", 1),
        input_shape=input_shape, kernel_shape=kernel, dtype=dtype, data_format="NXC",
        weights_format="XIO", bias=True)
    return src, weights, bias, attributes


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", list(CHUNK_PROBLEMS))
def test_result_does_not_depend_on_chunk_size(rng, case, dtype):
    """Tiny workspaces force one-row chunks and split reductions; results stay right."""
    src, weights, bias, attributes = _tensors(rng, case, dtype)
    itemsize = np.dtype(dtype).itemsize
    default = _call(src, weights, bias, attributes, threads=2)
    assert_matches_reference(default, src, weights, bias, attributes, "im2col", "default limit")
    seen_chunks, seen_blocks = set(), set()
    for limit in (im2col.MIN_WORKSPACE_LIMIT, 80 * itemsize, 1000, 4096):
        for threads in (1, 2):
            with im2col.workspace_limit(limit):
                got = _call(src, weights, bias, attributes, threads=threads)
            run = dict(im2col.last_run)
            assert run["workspace_bytes"] <= limit, run
            seen_chunks.add(run["chunks"])
            seen_blocks.add(run["reduction_blocks"])
            assert_matches_reference(got, src, weights, bias, attributes, "im2col",
                                     f"workspace limit {limit}, threads={threads}: {run}")
    # the limits above did cut the work up (else this test is idle): into row chunks, and
    # for wide enough rows into reduction blocks
    assert max(seen_chunks) > 1 or max(seen_blocks) > 1
    problem = problem_of(src, weights, bias, attributes)
    if problem.kernel_size * problem.in_channels_per_group * itemsize > 256:
        assert max(seen_blocks) > 1


@pytest.mark.parametrize("groups", [1, 4])
def test_1x1_unit_stride_reads_src_in_place(rng, groups):
    """The 1x1 stride-1 unpadded path: one GEMM per group on src as it lies, no panel."""
    src, weights, bias = random_tensors(
        rng, batch=2, in_channels=64, out_channels=32, groups=groups, input_shape=(40, 50),
        kernel_shape=(1, 1), dtype="float32", data_format="NXC", weights_format="XIO",
        bias=True)
    attributes = {"groups": groups}
    out = np.empty((2, 40, 50, 32), np.float32)
    _call(src[:, :2, :2], weights, bias, attributes, threads=2)  # imports happen here
    before = im2col.path_counts["1x1-direct"]
    tracemalloc.start()
    try:
        _call(src, weights, bias, attributes, threads=2, out=out)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert im2col.path_counts["1x1-direct"] == before + 1
    assert im2col.last_run["path"] == "1x1-direct"
    assert im2col.last_run["workspace_bytes"] == 0
    # src is 1 MiB: a copy of it, or any panel, would show here (weights are 8 KiB)
    assert peak < 64 * 1024, f"the 1x1 direct path allocated {peak} bytes"
    assert_matches_reference(out, src, weights, bias, attributes, "im2col")


@pytest.mark.parametrize("attributes", [
    {"strides": 2}, {"strides": (2, 3), "groups": 2}, {"pads_begin": 1, "pads_end": 1},
    {"pads_begin": (-1, 2), "pads_end": (1, -2), "groups": 4},
    {"auto_pad": "same_upper", "strides": 2},
], ids=str)
def test_1x1_strided_or_padded_gathers_rows(rng, attributes):
    src, weights, bias = random_tensors(
        rng, batch=2, in_channels=16, out_channels=24, groups=attributes.get("groups", 1),
        input_shape=(9, 11), kernel_shape=(1, 1), dtype="float32", data_format="NXC",
        weights_format="XIO", bias=True)
    got = _call(src, weights, bias, attributes, threads=2)
    run = dict(im2col.last_run)
    assert run["path"] == "1x1-gather"
    # a gathered row holds every channel of a task's groups once, then one GEMM per group
    channels = run["groups_per_task"] * 16 // attributes.get("groups", 1) \
        if run["mode"] == "rows" else 16
    assert run["work_per_thread"] == run["rows"] * channels, run
    assert_matches_reference(got, src, weights, bias, attributes, "im2col")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_huge_reduction_is_split_and_accumulated(rng, dtype):
    """A row wider than the whole workspace: column blocks, accumulated with beta = 1."""
    src, weights, bias = random_tensors(
        rng, batch=1, in_channels=1024, out_channels=8, groups=1, input_shape=(6, 5),
        kernel_shape=(3, 3), dtype=dtype, data_format="NXC", weights_format="XIO", bias=True)
    attributes = {"pads_begin": 1, "pads_end": 1}
    limit = 16 * 1024  # one row is 9 * 1024 elements: 36 KiB in float32, 72 KiB in float64
    for threads in (1, 2):
        with im2col.workspace_limit(limit):
            got = _call(src, weights, bias, attributes, threads=threads)
        run = dict(im2col.last_run)
        assert run["path"] == "unfold" and run["reduction_blocks"] > 1, run
        assert run["cols_per_block"] * run["rows"] * np.dtype(dtype).itemsize <= limit
        assert run["workspace_bytes"] <= limit
        assert_matches_reference(got, src, weights, bias, attributes, "im2col", str(run))


def _spot_check(got, src, weights, positions, pads):
    """A few outputs of a stride-1 2-D convolution, recomputed in float64 by hand."""
    kh, kw = weights.shape[:2]
    padded = np.pad(src.astype(np.float64), ((0, 0), (pads, pads), (pads, pads), (0, 0)))
    for n, oh, ow, oc in positions:
        window = padded[n, oh:oh + kh, ow:ow + kw, :]
        want = np.sum(window * weights[..., oc].astype(np.float64))
        scale = np.sum(np.abs(window) * np.abs(weights[..., oc]))
        assert abs(got[n, oh, ow, oc] - want) <= 1e-5 * scale, (n, oh, ow, oc)


@pytest.mark.parametrize("limit", [None, 4 * 2**20])
def test_workspace_stays_bounded_on_vgg_conv1_2(rng, limit):
    """VGG-19 conv1_2 at batch 1 (64->64, 224x224, 3x3): a whole panel would be 110 MiB."""
    src = rng.standard_normal((1, 224, 224, 64)).astype(np.float32)
    weights = (rng.standard_normal((3, 3, 64, 64)) / 24).astype(np.float32)
    out = np.empty((1, 224, 224, 64), np.float32)
    full_panel = 224 * 224 * 9 * 64 * 4
    assert full_panel > 110 * 2**20
    bound = im2col.get_workspace_limit() if limit is None else limit
    assert bound <= 32 * 2**20
    # the first call imports SciPy's BLAS (megabytes of Python objects): not workspace
    _call(src[:, :4, :4], weights, None, {}, threads=2)
    im2col.release_workspace()  # so that this call allocates its panels where we can see
    tracemalloc.start()
    try:
        if limit is None:
            _call(src, weights, None, {"pads_begin": 1, "pads_end": 1}, threads=2, out=out)
        else:
            with im2col.workspace_limit(limit):
                _call(src, weights, None, {"pads_begin": 1, "pads_end": 1}, threads=2, out=out)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    run = dict(im2col.last_run)
    assert 0 < run["workspace_bytes"] <= bound, run
    # NumPy reports its allocations to tracemalloc: the panels are seen, and nothing else big
    assert run["workspace_bytes"] <= peak <= bound + 256 * 1024, (peak, run)
    positions = [(0, 0, 0, 0), (0, 223, 223, 63), (0, 0, 223, 5), (0, 117, 3, 31),
                 (0, 223, 0, 7), (0, 100, 150, 40)]
    _spot_check(out, src, weights, positions, pads=1)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [
    # (batch, input, kernel, IC, OC, attributes): rows mode, cols mode (few rows), groups,
    # the 1x1 paths, and a split reduction under a small workspace
    (2, (30, 30), (3, 3), 16, 48, {"pads_begin": 1, "pads_end": 1}),
    (1, (7, 7), (3, 3), 64, 96, {"pads_begin": 1, "pads_end": 1}),
    (1, (5, 6), (3, 3), 12, 12, {"groups": 3, "strides": 2}),
    (1, (20, 21), (1, 1), 32, 64, {}),
    (1, (4, 5), (1, 1), 32, 64, {"strides": 2}),
    (1, (9, 9), (3, 3), 256, 64, {"pads_begin": 1, "pads_end": 1, "limit": 64 * 1024}),
], ids=["rows", "cols", "groups", "1x1-direct", "1x1-gather-cols", "split-reduction"])
def test_result_is_bitwise_identical_across_thread_counts(rng, shape, dtype):
    """The GEMM calls depend on the plan, not on threads=, so the bits do not either."""
    batch, input_shape, kernel, ic, oc, attributes = shape
    attributes = dict(attributes)
    limit = attributes.pop("limit", im2col.get_workspace_limit())
    src, weights, bias = random_tensors(
        rng, batch=batch, in_channels=ic, out_channels=oc, groups=attributes.get("groups", 1),
        input_shape=input_shape, kernel_shape=kernel, dtype=dtype, data_format="NXC",
        weights_format="XIO", bias=True)
    results, modes = {}, set()
    with im2col.workspace_limit(limit):
        for threads in (1, 2, 3, 8):
            results[threads] = _call(src, weights, bias, attributes, threads=threads)
            modes.add(im2col.last_run["mode"])
    assert_matches_reference(results[1], src, weights, bias, attributes, "im2col")
    for threads, got in results.items():
        np.testing.assert_array_equal(got, results[1], err_msg=f"threads={threads}",
                                      strict=True)


def test_workspace_is_kept_between_calls_within_the_limit(rng):
    src, weights, bias, attributes = _tensors(rng, "2d-padded")
    im2col.release_workspace()
    _call(src, weights, bias, attributes, threads=2)
    tracemalloc.start()
    try:
        _call(src, weights, bias, attributes, threads=2)
        _, peak_again = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert im2col.last_run["workspace_bytes"] > peak_again, "the buffer was not reused"
    with im2col.workspace_limit(1000):
        # a lower limit drops a larger kept buffer: what is held stays under the limit
        got = _call(src, weights, bias, attributes, threads=2)
        assert im2col._cache.buffer.nbytes <= 1000
    assert_matches_reference(got, src, weights, bias, attributes, "im2col")
    im2col.release_workspace()
    assert im2col._cache.buffer is None


def test_blas_thread_counts_are_restored(rng):
    """The call runs BLAS single-threaded inside OpenMP threads, then puts counts back."""
    before = [lib.get_num_threads() for lib in im2col._blas_controllers()]
    assert before, "no BLAS library found by threadpoolctl"
    src, weights, bias = random_tensors(
        rng, batch=1, in_channels=8, out_channels=16, groups=1, input_shape=(12, 12),
        kernel_shape=(3, 3), dtype="float32", data_format="NXC", weights_format="XIO",
        bias=True)
    _call(src, weights, bias, {}, threads=2)
    assert [lib.get_num_threads() for lib in im2col._blas_controllers()] == before


@pytest.mark.parametrize("mode", ["rows", "cols", "blas"])
@pytest.mark.parametrize("case", ["2d-padded", "1x1-strided-grouped", "3d-asymmetric"])
def test_every_thread_mode_is_correct(rng, monkeypatch, mode, case):
    """Each way of sharing the work computes the same convolution, whatever auto picks."""
    src, weights, bias, attributes = _tensors(rng, case)
    monkeypatch.setattr(im2col, "_forced_mode", mode)
    for limit in (1000, im2col.get_workspace_limit()):
        with im2col.workspace_limit(limit):
            got = _call(src, weights, bias, attributes, threads=2)
        assert im2col.last_run["mode"] == mode
        assert im2col.last_run["workspace_bytes"] <= limit
        assert_matches_reference(got, src, weights, bias, attributes, "im2col", mode)


@pytest.mark.parametrize("mode", ["rows", "cols", "blas"])
@pytest.mark.parametrize("case", list(CHUNK_PROBLEMS))
def test_fused_post_ops_in_every_mode_and_chunking(rng, monkeypatch, mode, case):
    """The epilogue (a leading sum seeds each block, the rest follows its last GEMM) is
    right in every thread mode, with row chunks and split reductions; the output stage,
    which would hide a missing epilogue, is not allowed to run."""
    src, weights, bias, attributes = _tensors(rng, case)
    problem = problem_of(src, weights, bias, attributes)
    monkeypatch.setattr(im2col, "_forced_mode", mode)
    monkeypatch.setattr(convlab.ops.postops, "finish", None)
    before = rng.standard_normal(problem.dst_shape).astype(np.float32)
    ops = [("sum", 0.5), ("add", rng.standard_normal(problem.out_channels)), "relu"]
    oracle = convlab.reference.convolve(src, weights, bias, post_ops=ops, dst_before=before,
                                        **attributes)
    for limit in (im2col.MIN_WORKSPACE_LIMIT, 1000, im2col.get_workspace_limit()):
        with im2col.workspace_limit(limit):
            got = _call(src, weights, bias, attributes, threads=2, post_ops=ops,
                        out=before.copy())
        assert im2col.last_run["mode"] == mode
        np.testing.assert_allclose(got, oracle, rtol=1e-5, atol=1e-5 * np.abs(oracle).max(),
                                   err_msg=f"{mode}, workspace limit {limit}")


def test_unfold_matches_the_panel_definition(rng):
    """panel_g[m, t*ICg + c] = src[n, o*S + k(t)*D - P_b, g*ICg + c], 0 in the padding."""
    src = rng.standard_normal((2, 7, 6, 6)).astype(np.float32)
    weights = np.zeros((3, 2, 3, 4), np.float32)
    attributes = {"groups": 2, "strides": (2, 1), "dilations": (1, 2), "pads_begin": (1, -1),
                      "pads_end": (2, 1)}
    problem = problem_of(src, weights, None, attributes)
    (oh, ow), (kh, kw), icg = problem.output_shape, problem.kernel_shape, 3
    for group in range(2):
        want = np.zeros((2 * oh * ow, kh * kw * icg), np.float32)
        for n in range(2):
            for i in range(oh):
                for j in range(ow):
                    for a in range(kh):
                        for b in range(kw):
                            y, x = i * 2 + a - 1, j + b * 2 + 1
                            if 0 <= y < 7 and 0 <= x < 6:
                                col = (a * kw + b) * icg
                                want[(n * oh + i) * ow + j, col:col + icg] = \
                                    src[n, y, x, group * icg:(group + 1) * icg]
        np.testing.assert_array_equal(im2col.unfold(problem, src, group), want)
        block = im2col.unfold(problem, src, group, rows=slice(3, 11), cols=slice(2, 13))
        np.testing.assert_array_equal(block, want[3:11, 2:13])


def _panel_by_definition(src, kernel, strides, dilations, pads_begin, output_shape):
    """The whole group-0 panel of a 2-D problem with groups=1, built from its definition."""
    n_batch, ih, iw, ic = src.shape
    (oh, ow), (kh, kw) = output_shape, kernel
    want = np.zeros((n_batch * oh * ow, kh * kw * ic), src.dtype)
    for n in range(n_batch):
        for i in range(oh):
            for j in range(ow):
                for a in range(kh):
                    for b in range(kw):
                        y = i * strides[0] + a * dilations[0] - pads_begin[0]
                        x = j * strides[1] + b * dilations[1] - pads_begin[1]
                        if 0 <= y < ih and 0 <= x < iw:
                            col = (a * kw + b) * ic
                            want[(n * oh + i) * ow + j, col:col + ic] = src[n, y, x]
    return want


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("attributes", [
    {"strides": (2, 2), "pads_begin": 3, "pads_end": 2},           # ResNet-50 conv1's shape
    {"strides": (2, 3), "dilations": (2, 1), "pads_begin": (2, -1), "pads_end": (1, 3)},
    {"strides": (1, 1), "pads_begin": (0, 5), "pads_end": (4, 6)},  # rows wholly in the pads
    # dilated on the last axis: one short copy per tap (the dilated suite's 227x227 stems)
    {"strides": (2, 2), "dilations": (2, 2), "pads_begin": 1, "pads_end": 1},
    {"strides": (2, 3), "dilations": (2, 3), "pads_begin": (0, 4), "pads_end": (0, -1)},
    {"strides": (1, 1), "dilations": (1, 4), "pads_begin": (1, 9), "pads_end": (1, 9)},
    {"strides": (1, 2), "dilations": (1, 5), "pads_begin": (0, -2), "pads_end": (0, 3)},
])
def test_unfold_of_dense_2d_rows_matches_the_panel_definition(rng, dtype, attributes):
    """2-D, one group: the kernel copies each kernel row's in-range taps, as one run where
    the last axis is dense and one copy per tap where it is dilated (a separate code path
    from the tap-by-tap one); every run must land where the definition puts it, for float32
    and float64, with pads, crops and taps that skip past either edge."""
    src = rng.standard_normal((2, 9, 11, 3)).astype(dtype)
    weights = np.zeros((4, 3, 3, 5), dtype)
    problem = problem_of(src, weights, None, attributes)
    want = _panel_by_definition(src, problem.kernel_shape, problem.strides, problem.dilations,
                                problem.pads_begin, problem.output_shape)
    np.testing.assert_array_equal(im2col.unfold(problem, src), want)
    np.testing.assert_array_equal(im2col.unfold(problem, src, rows=slice(5, 17)), want[5:17])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rows_mode_cuts_chunks_to_the_small_gemm_size(dtype):
    """ResNet-50 conv1 (K*IC = 147, OC = 64): float32 chunks keep rows * OC * 147 within
    SMALL_GEMM_MNK (at least SMALL_GEMM_MIN_ROWS rows); float64, not measured, is left alone;
    the cost model keeps the packed plan's terms."""
    problem = convlab.make_problem((1, 229, 229, 3), dtype, (7, 7, 3, 64), dtype, strides=2)
    cut = im2col.plan(problem, 2)
    packed = im2col.plan(problem, 2, small_gemm=False)
    assert cut.mode == packed.mode == im2col.MODE_ROWS
    if dtype == np.float32:
        assert cut.rows >= im2col.SMALL_GEMM_MIN_ROWS
        assert cut.rows * 64 * 147 <= im2col.SMALL_GEMM_MNK < packed.rows * 64 * 147
    else:
        assert cut == packed
    # a reduction too deep for SMALL_GEMM_MIN_ROWS rows keeps its chunks
    deep = convlab.make_problem((1, 56, 56, 64), np.float32, (3, 3, 64, 64), np.float32,
                                pads_begin=1, pads_end=1)
    assert im2col.plan(deep, 2) == im2col.plan(deep, 2, small_gemm=False)


def test_cost_model_orders_im2col_and_direct_where_every_bench_run_agrees():
    """The fitted model must keep the orderings no bench run has ever contradicted: for
    im2col a depthwise layer is G GEMMs of one column each. (It also held im2col ahead on
    the 1x1 res2a_branch1 until direct's input-channel passes grew; runs on an AMD EPYC
    with them time the two alike: 0.56-0.70 against 0.60-0.64 ms,
    bench/results/cost_timings_2026-11-24_epyc_db29019_run*.csv.)"""
    im2col_cost, direct_cost = get_algorithm("im2col").cost, get_algorithm("direct").cost
    depthwise = convlab.make_problem((1, 112, 112, 32), np.float32, (3, 3, 1, 32), np.float32,
                                     groups=32, pads_begin=1, pads_end=1)
    assert im2col_cost(depthwise, 2).seconds > direct_cost(depthwise, 2).seconds


@pytest.mark.parametrize("shape", [
    ((1, 56, 56, 3), (3, 3, 3, 64), 1),      # 27 deep: the depth's share is large
    ((1, 14, 14, 256), (1, 1, 256, 1024), 0),  # 1x1, output channels split (COLS)
    ((1, 28, 28, 128), (3, 3, 128, 128), 1),  # 1152 deep
])
def test_the_gemm_depth_share_is_its_own_term(shape):
    """gemm_output_passes is the GEMM's work over its depth, so that with the constant
    GEMM_HALF_RATE_DIM x gemm_flops's it prices what the efficiency factor
    d / (d + GEMM_HALF_RATE_DIM) of the depth did, and a fit can find another half-rate
    depth; the rates on top of the GEMM's still see the depth's factor."""
    src_shape, w_shape, pad = shape
    problem = convlab.make_problem(src_shape, np.float32, w_shape, np.float32,
                                   pads_begin=pad, pads_end=pad)
    p = im2col.plan(problem, 2, small_gemm=False)
    depth = min(problem.kernel_size * problem.in_channels_per_group, p.cols_per_block)
    terms, details = im2col.cost_terms(problem, 2)
    assert terms["gemm_output_passes"] == pytest.approx(terms["gemm_flops"] / depth)
    half = im2col.GEMM_HALF_RATE_DIM
    with_depth_factor = terms["gemm_flops"] * (depth + half) / depth
    assert terms["gemm_flops"] + half * terms["gemm_output_passes"] == pytest.approx(
        with_depth_factor)
    for name in ("gather_gemm_flops", "gemv_flops", "small_gemm_flops"):
        assert terms[name] in (0.0, pytest.approx(with_depth_factor))


@pytest.mark.parametrize("level", ["avx2", "baseline"])
def test_the_shipped_sets_price_the_depth_share_as_they_were_fitted(level):
    """The avx2 and baseline sets were fitted with the depth's factor at
    GEMM_HALF_RATE_DIM, before it became a term: their gemm_output_passes constant carries
    that factor, so that their estimates are the ones they were fitted and checked with.
    (The avx512 set has since been refitted with the term free, as calibrations fit it.)"""
    from convlab.dispatch.calibration import store

    for per_unit in store.shipped(level)["constants"]["im2col"].values():
        assert per_unit["gemm_output_passes"] == pytest.approx(
            im2col.GEMM_HALF_RATE_DIM * per_unit["gemm_flops"], rel=1e-3)


def test_workspace_limit_settings():
    previous = im2col.get_workspace_limit()
    try:
        assert im2col.set_workspace_limit("32M") == previous
        assert im2col.get_workspace_limit() == 32 * 2**20
        im2col.set_workspace_limit(5000)
        assert im2col.get_workspace_limit() == 5000
        with im2col.workspace_limit("1KiB"):
            assert im2col.get_workspace_limit() == 1024
        assert im2col.get_workspace_limit() == 5000
    finally:
        im2col.set_workspace_limit(previous)
    with pytest.raises(ValueError, match="at least"):
        im2col.set_workspace_limit(im2col.MIN_WORKSPACE_LIMIT - 1)
    with pytest.raises(ValueError, match="byte count"):
        im2col.set_workspace_limit("lots")
    with pytest.raises(TypeError, match="must be an int"):
        im2col.set_workspace_limit(1.5e6)
    assert im2col.get_workspace_limit() == previous


def test_workspace_limit_from_environment(monkeypatch):
    monkeypatch.setenv(im2col.WORKSPACE_ENV, "24MiB")
    assert im2col._initial_limit() == 24 * 2**20
    monkeypatch.setenv(im2col.WORKSPACE_ENV, "")
    assert im2col._initial_limit() == im2col.DEFAULT_WORKSPACE_LIMIT
    monkeypatch.setenv(im2col.WORKSPACE_ENV, "-5")
    with pytest.raises(ValueError, match=im2col.WORKSPACE_ENV):
        im2col._initial_limit()


def test_kernel_rejects_blocks_outside_the_panel():
    problem = convlab.make_problem((1, 4, 4, 2), np.float32, (3, 3, 2, 2), np.float32)
    src = np.zeros((1, 4, 4, 2), np.float32)
    with pytest.raises(ValueError, match="panel block"):
        _im2col.unfold_panel(src.reshape(-1), np.empty((5, 18), np.float32),
                             problem.input_shape, problem.output_shape, problem.kernel_shape,
                             problem.strides, problem.dilations, problem.pads_begin, 1, 2, 1,
                             0, 0, 0)


# (batch, input, kernel, IC, OC, attributes): padding on the first axis, so that some tap
# slabs skip rows; "wide-pads" has output rows that read nothing but padding.
SLAB_PROBLEMS = {
    "2d-padded": (1, (7, 7), (3, 3), 8, 32, {"pads_begin": 1, "pads_end": 1}),
    "2d-wide-pads-strided-dilated": (
        1, (9, 8), (3, 2), 6, 32,
        {"strides": (2, 1), "dilations": (2, 1), "pads_begin": (5, 1), "pads_end": (6, 0)}),
    "2d-cropped": (1, (8, 6), (3, 3), 4, 32, {"pads_begin": (-1, 1), "pads_end": (2, 1)}),
    "2d-batch": (3, (6, 5), (3, 3), 4, 32, {"pads_begin": 1, "pads_end": 1}),
    "1d-dilated": (1, (12,), (5,), 4, 32, {"pads_begin": 2, "pads_end": 3, "dilations": 2}),
    "3d": (1, (4, 5, 6), (3, 3, 3), 4, 32, {"pads_begin": 1, "pads_end": (2, 1, 0)}),
}


@pytest.fixture
def slabs_always(monkeypatch, request):
    """Plans take tap slabs wherever they apply, however little they save."""
    monkeypatch.setattr(im2col, "TAP_SLAB_MIN_SAVING", 0.0)
    im2col.forget_plans()  # plans are cached; the constant is not an argument
    request.addfinalizer(im2col.forget_plans)


@pytest.mark.parametrize("sum_post_op", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", list(SLAB_PROBLEMS))
def test_tap_slabs_skip_padding_rows_and_match_the_reference(rng, monkeypatch, slabs_always,
                                                             case, dtype, sum_post_op):
    """COLS mode multiplies slab by slab of the first axis' taps over the rows that read
    the input: the same convolution, bias and post-ops (a sum seeds dst) included. With a
    batch, each chunk is one image (the plan's row count is forced to one image's)."""
    batch, input_shape, kernel, ic, oc, attributes = SLAB_PROBLEMS[case]
    src, weights, bias = random_tensors(
        rng, batch=batch, in_channels=ic, out_channels=oc, groups=1, input_shape=input_shape,
        kernel_shape=kernel, dtype=dtype, data_format="NXC", weights_format="XIO", bias=True)
    problem = problem_of(src, weights, bias, attributes)
    monkeypatch.setattr(im2col, "_forced_mode", "cols")
    if batch > 1:
        planned = im2col.plan
        per_image = problem.output_size

        def one_image_per_chunk(problem, threads, *args, **kwargs):
            p = planned(problem, threads, *args, **kwargs)
            work = per_image * p.cols_per_block
            return dataclasses.replace(
                p, rows=per_image, chunks=problem.batch, work_per_thread=work,
                work_elements=work, tap_slabs=problem.kernel_shape[0])

        monkeypatch.setattr(im2col, "plan", one_image_per_chunk)
    assert im2col.padded_row_fraction(problem) > 0
    ops = [("sum", 0.5), "relu"] if sum_post_op else []
    before = rng.standard_normal(problem.dst_shape).astype(dtype)
    oracle = convlab.reference.convolve(src, weights, bias, post_ops=ops,
                                        dst_before=before if ops else None, **attributes)
    got = _call(src, weights, bias, attributes, threads=2, post_ops=ops,
                out=before.copy() if ops else None)
    assert im2col.last_run["mode"] == "cols"
    assert im2col.last_run["tap_slabs"] == kernel[0]
    tolerance = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(got, oracle, rtol=tolerance,
                               atol=tolerance * np.abs(oracle).max())


def test_tap_slabs_only_where_they_save_enough_work():
    """The default plan slabs a padded 7x7 layer in COLS mode (9.5% of the GEMM is
    padding), not a 20x5 one (3.3%, slabs run along the first axis), nor a layer without
    padding."""
    def planned(height, width, pads):
        problem = convlab.make_problem((1, height, width, 64), np.float32, (3, 3, 64, 64),
                                       np.float32, pads_begin=pads, pads_end=pads)
        return im2col.padded_row_fraction(problem), im2col.plan(problem, 2)

    saving, p = planned(7, 7, 1)
    assert saving == pytest.approx(2 / 21) and p.mode == im2col.MODE_COLS
    assert p.tap_slabs == 3
    for height, width, pads in ((20, 5, 1), (9, 9, 0)):
        saving, p = planned(height, width, pads)
        assert p.mode == im2col.MODE_COLS and saving < im2col.TAP_SLAB_MIN_SAVING
        assert p.tap_slabs == 1


def test_kernel_rejects_tap_slabs_outside_cols_mode():
    problem = convlab.make_problem((1, 5, 5, 2), np.float32, (3, 3, 2, 2), np.float32,
                                   pads_begin=1, pads_end=1)
    src = np.zeros(50, np.float32)
    with pytest.raises(ValueError, match="tap_slabs=3 needs COLS mode"):
        _im2col.conv_im2col(src, np.zeros(36, np.float32), None, np.empty(50, np.float32),
                            np.empty(25 * 18, np.float32), problem.input_shape,
                            problem.output_shape, problem.kernel_shape, problem.strides,
                            problem.dilations, problem.pads_begin, 1, 2, 2, 1,
                            im2col.PATH_UNFOLD, im2col.MODE_ROWS, 25, 1, 1, 18, 25 * 18, 1,
                            None, 3)


@pytest.fixture
def each_blas(request):
    """Runs the test with the kernel on the given BLAS, then puts the default back."""
    choice = request.param
    if choice == "scipy-openblas32" and blas.load_openblas() is None:
        pytest.skip("scipy-openblas32 is not installed")
    yield im2col.use_blas(choice)
    im2col.use_blas(blas.requested())


@pytest.mark.parametrize("each_blas", blas.CHOICES, indirect=True)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", ["2d-padded", "1x1-strided-grouped", "3d-asymmetric"])
def test_each_blas_library_computes_the_convolution(rng, monkeypatch, each_blas, dtype, case):
    """Either GEMM the kernel may call (scipy-openblas32's or SciPy's) gives the
    convolution, in every thread mode, and the library's thread count is what is steered."""
    src, weights, bias, attributes = _tensors(rng, case, dtype)
    assert im2col.gemm_library["name"] == each_blas["name"]
    if each_blas["path"] is not None:
        assert [lib.filepath for lib in im2col._blas_controllers()] == [each_blas["path"]]
    for mode in ("rows", "cols", "blas"):
        monkeypatch.setattr(im2col, "_forced_mode", mode)
        got = _call(src, weights, bias, attributes, threads=2)
        assert_matches_reference(got, src, weights, bias, attributes, "im2col", each_blas["name"])


def test_installed_openblas_is_the_default_and_loaded_privately(monkeypatch):
    """With scipy-openblas32 installed, the kernel calls it, and SciPy's own BLAS
    symbols are not displaced (the library is not in the global namespace)."""
    if blas.load_openblas() is None:
        pytest.skip("scipy-openblas32 is not installed")
    im2col._kernel()
    assert im2col.gemm_library["name"] == "scipy-openblas32"
    assert "OpenBLAS" in im2col.gemm_library["version"]
    import ctypes

    assert not hasattr(ctypes.CDLL(None), blas.SYMBOL_PREFIX + "openblas_get_config")
    # convlab is its only caller: it stays at 1 thread between calls, even after a call
    # that runs it wide (the "blas" thread mode)
    rng = np.random.default_rng(0)
    src, weights, bias, attributes = _tensors(rng, "2d-padded")
    for mode in ("rows", "blas"):
        monkeypatch.setattr(im2col, "_forced_mode", mode)
        _call(src, weights, bias, attributes, threads=2)
        assert [lib.get_num_threads() for lib in im2col._blas_controllers()] == [1]


LOAD_IN_FRESH_PROCESS = """
import json, os
tasks = lambda: len(os.listdir("/proc/self/task"))
from convlab.runtime import blas
before = tasks()
library = blas.load_openblas()
reader = blas.thread_count_reader()
print(json.dumps([library is not None, tasks() - before, reader() if reader else None,
                  os.environ.get("OPENBLAS_NUM_THREADS")]))
"""


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts threads in /proc")
@pytest.mark.parametrize("users_setting", [None, "3"])
def test_openblas_loads_without_a_pool_of_workers_and_leaves_the_environment(users_setting):
    """Loaded at one thread: no worker threads start beside the kernel's OpenMP ones, and
    the variable the user set (or did not) is as it was."""
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if users_setting is not None:
        env["OPENBLAS_NUM_THREADS"] = users_setting
    done = subprocess.run([sys.executable, "-c", LOAD_IN_FRESH_PROCESS], env=env,
                          capture_output=True, text=True, cwd=os.path.dirname(
                              os.path.dirname(os.path.abspath(__file__))))
    assert done.returncode == 0, done.stderr
    loaded, new_threads, count, variable = json.loads(done.stdout.splitlines()[-1])
    if not loaded:
        pytest.skip("scipy-openblas32 is not installed")
    assert (new_threads, count, variable) == (0, 1, users_setting)


def test_unknown_blas_choice_is_rejected(monkeypatch):
    im2col._kernel()
    before = dict(im2col.gemm_library)
    monkeypatch.setenv(blas.ENVIRONMENT, "mkl")
    with pytest.raises(ValueError, match=blas.ENVIRONMENT):
        blas.requested()
    with pytest.raises(ValueError, match="expected one of"):
        im2col.use_blas("mkl")
    assert im2col.gemm_library == before  # the library in use is still named
    with pytest.raises(ValueError, match="both addresses"):
        _im2col.use_gemm(1, 0)


def test_kernel_source_names_the_library_and_the_variables_that_pick_its_kernels(monkeypatch):
    """What a calibration's key says of im2col's GEMMs: the library a first call loads and
    any OpenBLAS variable that overrides the CPU's choice of kernels."""
    for name in blas.KERNEL_ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv(blas.ENVIRONMENT, raising=False)
    default = blas.kernel_source()
    assert default == ("scipy-openblas32" if blas.load_openblas() is not None else "scipy")
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Haswell")
    monkeypatch.setenv("OPENBLAS_L2_SIZE", "512")
    assert blas.kernel_source() == f"{default} OPENBLAS_CORETYPE=Haswell OPENBLAS_L2_SIZE=512"
    monkeypatch.setenv(blas.ENVIRONMENT, "scipy")
    assert blas.kernel_source().startswith("scipy OPENBLAS_CORETYPE=Haswell")
    monkeypatch.setenv(blas.ENVIRONMENT, "mkl")  # not a choice: named, not raised
    assert blas.kernel_source().startswith("CONVLAB_BLAS=mkl ")
