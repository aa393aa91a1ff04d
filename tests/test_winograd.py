"""Winograd F(m, 3): exact transforms, the kernel against the oracle, blocking, reasons, accuracy.

The registry-wide tests (grid, threads, edge cases) run winograd2/4/6 too; this file covers
what is particular to Winograd: the Cook-Toom matrices, tiles that stick out of the output,
pads of every kind, the workspace bound, the exact fallbacks and the measured accuracy.
"""
from __future__ import annotations

import itertools
import random
from fractions import Fraction

import numpy as np
import pytest

import convlab
from convlab.dispatch import cost_model, select
from convlab.problem import params
from convlab.runtime import _buffers as buffers
from convlab.strategies import winograd, winograd_transforms as wt
from convlab.strategies.kernels import _winograd
from tests.helpers import assert_matches_reference, to_data_format, to_weights_format

VARIANTS = [f"winograd{m}" for m in winograd.TILE_SIZES]
TILE = {name: int(name[len("winograd"):]) for name in VARIANTS}


def exact_matmul(a, b):
    return tuple(tuple(sum((x * y for x, y in zip(row, col)), Fraction(0))
                       for col in zip(*b)) for row in a)


def transpose(a):
    return tuple(zip(*a))


# --------------------------------------------------------------------------- transforms

@pytest.mark.parametrize("m", sorted(wt.TRANSFORMS))
def test_1d_identity_is_exact_in_fractions(m):
    """A^T [(G g) ⊙ (B^T d)] == correlate(d, g), exactly, for random integer data."""
    t = wt.TRANSFORMS[m]
    rand = random.Random(m)
    for _ in range(200):
        d = [Fraction(rand.randint(-99, 99)) for _ in range(t.alpha)]
        g = [Fraction(rand.randint(-99, 99)) for _ in range(t.r)]
        assert wt.winograd_exact(t, d, g) == wt.correlate_exact(d, g)


@pytest.mark.parametrize("m", sorted(wt.TRANSFORMS))
def test_2d_nested_identity_is_exact_in_fractions(m):
    """(A^T M A) with M = (G g G^T) ⊙ (B^T d B) is the 2-D valid correlation, exactly."""
    t = wt.TRANSFORMS[m]
    rand = random.Random(100 + m)
    d = tuple(tuple(Fraction(rand.randint(-9, 9)) for _ in range(t.alpha))
              for _ in range(t.alpha))
    g = tuple(tuple(Fraction(rand.randint(-9, 9)) for _ in range(3)) for _ in range(3))
    u = exact_matmul(exact_matmul(t.G, g), transpose(t.G))
    v = exact_matmul(exact_matmul(t.BT, d), transpose(t.BT))
    product = tuple(tuple(a * b for a, b in zip(ru, rv)) for ru, rv in zip(u, v))
    y = exact_matmul(exact_matmul(t.AT, product), transpose(t.AT))
    for i, j in itertools.product(range(m), repeat=2):
        want = sum((g[a][b] * d[i + a][j + b] for a in range(3) for b in range(3)), Fraction(0))
        assert y[i][j] == want, (i, j)


@pytest.mark.parametrize("m, r, points", [
    (1, 3, (0, 1)), (3, 2, (0, 1, -1)), (2, 5, (0, 1, -1, 2, -2)),
    (3, 3, (0, 1, -1, 2)), (5, 3, (0, 1, -1, 2, -2, Fraction(1, 2))),
])
def test_cook_toom_works_for_other_sizes_and_points(m, r, points):
    t = wt.cook_toom(m, r, points)
    assert len(t.AT) == m and len(t.G) == t.alpha and len(t.BT) == t.alpha
    rand = random.Random(m * 10 + r)
    for _ in range(50):
        d = [Fraction(rand.randint(-50, 50), rand.randint(1, 4)) for _ in range(t.alpha)]
        g = [Fraction(rand.randint(-50, 50)) for _ in range(r)]
        assert wt.winograd_exact(t, d, g) == wt.correlate_exact(d, g)


@pytest.mark.parametrize("m", sorted(wt.TRANSFORMS))
def test_infinity_point_gives_the_unit_last_column_and_row(m):
    t = wt.TRANSFORMS[m]
    assert [row[-1] for row in t.AT] == [0] * (m - 1) + [1]
    assert list(t.G[-1]) == [0] * (t.r - 1) + [1]
    assert t.BT[-1] == wt.poly_from_roots(t.points)


@pytest.mark.parametrize("m", sorted(wt.TRANSFORMS))
def test_input_and_output_matrices_are_exact_in_float32(m):
    """Dyadic points keep B^T and A^T exact in float32; only G (applied to weights) rounds."""
    t = wt.TRANSFORMS[m]
    for matrix in (t.BT, t.AT):
        for x in itertools.chain.from_iterable(matrix):
            assert Fraction(float(np.float32(x))) == x


def test_point_sets_are_the_documented_ones():
    assert set(wt.POINTS[2]) == {0, 1, -1}
    assert set(wt.POINTS[4]) == {0, 1, -1, Fraction(1, 2), -2}
    assert set(wt.POINTS[6]) == {0, 1, -1, 2, -2, Fraction(1, 2), Fraction(-1, 2)}


def test_cook_toom_rejects_bad_points():
    with pytest.raises(ValueError, match="needs 3 finite points"):
        wt.cook_toom(2, 3, (0, 1))
    with pytest.raises(ValueError, match="distinct"):
        wt.cook_toom(2, 3, (0, 1, 1))


# --------------------------------------------------------------------------- kernel

# name -> (batch, input shape, groups, IC, OC, attributes, bias)
CASES = {
    "partial_tiles_odd": (2, (13, 7), 1, 5, 3, dict(pads_begin=1, pads_end=1), True),
    "asymmetric_pads": (1, (9, 11), 1, 4, 6, dict(pads_begin=(2, 0), pads_end=(0, 1)), False),
    "same_upper": (1, (10, 7), 1, 3, 4, dict(auto_pad="same_upper"), True),
    "same_lower": (1, (6, 9), 1, 3, 4, dict(auto_pad="SAME_LOWER"), False),
    "valid": (2, (8, 12), 1, 3, 5, dict(auto_pad="valid"), True),
    "negative_pads": (1, (12, 10), 1, 4, 3, dict(pads_begin=(-1, 0), pads_end=(0, -2)), True),
    "padding_only_outputs": (1, (6, 5), 1, 3, 2, dict(pads_begin=(3, 0), pads_end=(3, 4)), True),
    "groups": (2, (9, 8), 2, 6, 4, dict(pads_begin=1, pads_end=1), True),
    "depthwise": (1, (11, 10), 4, 4, 4, dict(pads_begin=1, pads_end=1), False),
    "batch": (3, (7, 7), 1, 8, 8, dict(pads_begin=1, pads_end=1), True),
    "one_output": (1, (3, 3), 1, 2, 2, {}, True),
    # channel counts of whole vectors (16 float32 lanes) take the register-resident 2-D
    # path, the rest of the channels the generic one; wide layers share blocks (shared)
    "vector_channels": (2, (13, 11), 1, 40, 20, dict(pads_begin=1, pads_end=(0, 2)), True),
    # enough tiles for per-thread blocks of SHARED_MIN_ROWS rows even with F(2)'s 2x2 tiles,
    # and more than SHARED_MAX_TILES_2D even with F(6)'s 6x6 tiles
    "per_thread_blocks": (2, (70, 68), 1, 40, 20, dict(pads_begin=1, pads_end=1), True),
    "vector_groups": (1, (9, 10), 2, 64, 34, dict(pads_begin=(2, 0), pads_end=1), True),
    # 17-256 tiles whatever the tile size: shared blocks though U's slices are small
    "small_image": (1, (28, 26), 1, 24, 32, dict(pads_begin=1, pads_end=1), True),
    "shared_blocks": (1, (10, 9), 1, 128, 144, dict(pads_begin=1, pads_end=1), True),
    "shared_groups": (2, (7, 8), 2, 256, 256, dict(pads_begin=(0, 1), pads_end=2), False),
    "1d": (2, (23,), 1, 5, 4, dict(pads_begin=2, pads_end=0), True),
    "1d_long": (1, (250,), 2, 8, 6, dict(pads_begin=1, pads_end=1), False),
    "3d": (1, (7, 6, 5), 1, 3, 4, dict(pads_begin=1, pads_end=(0, 1, 2)), True),
    "3d_groups": (2, (5, 5, 6), 2, 4, 2, dict(pads_begin=(1, 0, 1), pads_end=1), False),
}


def make_case(rng, case, dtype="float32", data_format="NXC", weights_format="XIO"):
    batch, shape, groups, ic, oc, attributes, with_bias = CASES[case]
    src = rng.standard_normal((batch, ic, *shape)).astype(dtype)
    weights = rng.standard_normal((oc, ic // groups) + (3,) * len(shape)).astype(dtype)
    bias = rng.standard_normal(oc).astype(dtype) if with_bias else None
    attributes = dict(attributes, groups=groups, data_format=data_format,
                      weights_format=weights_format)
    return (to_data_format(src, data_format), to_weights_format(weights, weights_format), bias,
            attributes)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("algorithm", VARIANTS)
def test_matches_reference(rng, algorithm, case, dtype):
    src, weights, bias, attributes = make_case(rng, case, dtype)
    got = convlab.convolve(src, weights, bias, algorithm=algorithm, **attributes)
    assert_matches_reference(got, src, weights, bias, attributes, algorithm)


@pytest.mark.parametrize("case, shared", [
    ("per_thread_blocks", False), ("shared_blocks", True), ("shared_groups", True),
    # small 2-D images: F(2) shares blocks whatever the slice size, F(4) and F(6) when
    # there is more than one per-thread block of tiles (SHARED_MAX_TILES_2D): 24 and 12
    ("vector_channels", {"winograd2": True, "winograd4": True, "winograd6": False}),
    ("small_image", True)])
@pytest.mark.parametrize("algorithm", VARIANTS)
def test_cases_take_the_intended_work_split(algorithm, case, shared):
    if isinstance(shared, dict):
        shared = shared[algorithm]
    batch, shape, groups, ic, oc, attributes, _ = CASES[case]
    problem = convlab.make_problem((batch, *shape, ic), np.float32, (3,) * len(shape)
                                   + (ic // groups, oc), np.float32, groups=groups,
                                   **attributes)
    assert winograd.blocking(TILE[algorithm], problem, 2).shared == shared


@pytest.mark.parametrize("limit", [1, 300_000])
@pytest.mark.parametrize("algorithm", VARIANTS)
def test_shared_blocks_of_any_size(rng, algorithm, limit):
    src, weights, bias, attributes = make_case(rng, "shared_groups")
    problem = convlab.make_problem(src.shape, src.dtype, weights.shape, weights.dtype,
                                   **attributes)
    with winograd.workspace_limit(limit):
        b = winograd.blocking(TILE[algorithm], problem, 2)
        assert b.shared and b.block < winograd.total_tiles(TILE[algorithm], problem)
        got = convlab.convolve(src, weights, bias, algorithm=algorithm, **attributes)
    assert_matches_reference(got, src, weights, bias, attributes, algorithm)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("level", _winograd.gemm_levels())
@pytest.mark.parametrize("case", ["vector_channels", "shared_groups", "groups", "1d", "3d"])
@pytest.mark.parametrize("algorithm", VARIANTS)
def test_every_gemm_micro_kernel(rng, algorithm, case, level, dtype):
    """Each instruction set level this CPU has: its own micro-tile rows and panel width."""
    src, weights, bias, attributes = make_case(rng, case, dtype)
    with winograd.gemm_level(level):
        got = convlab.convolve(src, weights, bias, algorithm=algorithm, **attributes)
    assert_matches_reference(got, src, weights, bias, attributes, algorithm)


@pytest.mark.parametrize("level", _winograd.gemm_levels())
def test_every_row_count_of_a_micro_tile(rng, level):
    """Blocks of 1 to 14 tiles: full micro-tiles and each smaller remainder kernel."""
    weights = rng.standard_normal((3, 8, 40)).astype(np.float32)
    for tiles in range(1, 15):
        src = rng.standard_normal((1, 2 * tiles, 8)).astype(np.float32)
        with winograd.gemm_level(level):
            got = convlab.convolve(src, weights, pads_begin=1, pads_end=1,
                                   algorithm="winograd2")
        assert_matches_reference(got, src, weights, None, dict(pads_begin=1, pads_end=1),
                                 "winograd2", f"({tiles} tiles)")


@pytest.mark.parametrize("level", _winograd.gemm_levels())
def test_panel_prefetch_never_changes_a_bit(rng, level):
    """The GEMM's prefetch of the next panel of U, in every block, in none and at the
    default reach: the same bits, every row count of a micro-tile, several panels."""
    weights = rng.standard_normal((3, 3, 8, 40)).astype(np.float32)
    attributes = dict(pads_begin=1, pads_end=1)
    default = _winograd.set_panel_prefetch(0)
    try:
        for tiles in (1, 3, 7, 14, 30):
            src = rng.standard_normal((1, 2, 2 * tiles, 8)).astype(np.float32)
            results = []
            for reach in (0, default, 1_000_000):
                _winograd.set_panel_prefetch(reach)
                with winograd.gemm_level(level):
                    results.append(convlab.convolve(src, weights, algorithm="winograd2",
                                                    **attributes))
            assert_matches_reference(results[0], src, weights, None, attributes,
                                     "winograd2", f"({tiles} tiles)")
            for got in results[1:]:
                np.testing.assert_array_equal(got, results[0], err_msg=f"{tiles} tiles")
    finally:
        _winograd.set_panel_prefetch(default)
    with pytest.raises(ValueError, match="max_tiles=-1"):
        _winograd.set_panel_prefetch(-1)


def test_gemm_level_rejects_unknown_levels():
    with pytest.raises(ValueError, match="level=7 is not available"), winograd.gemm_level(7):
        pass


@pytest.mark.parametrize("algorithm", VARIANTS)
def test_channels_first_layouts(rng, algorithm):
    src, weights, bias, attributes = make_case(rng, "partial_tiles_odd", "float32", "NCX", "OIX")
    got = convlab.convolve(src, weights, bias, algorithm=algorithm, **attributes)
    assert_matches_reference(got, src, weights, bias, attributes, algorithm)


@pytest.mark.parametrize("algorithm", VARIANTS)
def test_padding_only_outputs_are_exactly_the_bias(rng, algorithm):
    src, weights, bias, attributes = make_case(rng, "padding_only_outputs")
    got = convlab.convolve(src, weights, bias, algorithm=algorithm, **attributes)
    # pads_begin (3, 0), pads_end (3, 4), I = (6, 5): row 0 and row 9 read only padding,
    # and columns 5 and 6. Every tile size puts some of them in a tile with real outputs
    # (F(2): rows 0-1, rows 8-9, columns 4-5). F(2)'s matrices happen to give exact zeros
    # there; F(4)'s and F(6)'s leave rounding residue of the real data unless it is reset.
    assert got.shape[1:3] == (10, 7)
    for index in (np.s_[:, :1], np.s_[:, 9:], np.s_[:, :, 5:]):
        np.testing.assert_array_equal(got[index], np.broadcast_to(bias, got[index].shape))
    assert np.all(got[:, 1:9, :5] != bias)


def _prepared_run(algorithm, src, weights, bias, attributes, threads=2):
    """run_prepared on canonical arrays: returns (dst in NXC, which path computed it)."""
    problem = convlab.make_problem(src.shape, src.dtype, weights.shape, weights.dtype,
                                   None if bias is None else bias.shape,
                                   None if bias is None else bias.dtype, **attributes)
    prepared = winograd.prepare(wt.TRANSFORMS[TILE[algorithm]], problem,
                                params.canonical_weights(weights, problem), threads)
    dst = np.empty((problem.batch, *problem.output_shape, problem.out_channels), problem.dtype)
    path = winograd.run_prepared(problem, params.canonical_src(src, problem), prepared,
                                 params.canonical_bias(bias, problem), dst, threads)
    return dst, path


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
@pytest.mark.parametrize("algorithm", VARIANTS)
def test_special_values_are_recomputed_exactly(rng, algorithm):
    src, weights, bias, attributes = make_case(rng, "groups")
    dst, path = _prepared_run(algorithm, src, weights, bias, attributes)
    assert path == "winograd"
    src[1, 4, 3, 0] = np.nan
    src[0, 2, 2, 3] = np.inf
    dst, path = _prepared_run(algorithm, src, weights, bias, attributes)
    assert path == "direct"
    expected = convlab.reference.convolve(src, weights, bias, **attributes)
    np.testing.assert_array_equal(np.isnan(dst), np.isnan(expected))
    np.testing.assert_array_equal(np.isinf(dst), np.isinf(expected))
    # NaN and Inf reach only their own windows, not the rest of their tiles
    assert np.isfinite(dst).sum() > 0.8 * dst.size


@pytest.mark.parametrize("algorithm", VARIANTS)
def test_overflow_in_the_transforms_is_recomputed(algorithm):
    """Data near the float32 limit: a direct sum stays finite where B^T d may not."""
    src = np.full((1, 8, 8, 1), 3e37, np.float32)
    src[..., ::2, :] *= -1
    weights = np.ones((3, 3, 1, 1), np.float32)
    attributes = dict(pads_begin=1, pads_end=1)
    got = convlab.convolve(src, weights, algorithm=algorithm, **attributes)
    assert np.isfinite(got).all()
    assert_matches_reference(got, src, weights, None, attributes, algorithm)


@pytest.mark.parametrize("algorithm", VARIANTS)
def test_prepared_weights_serve_many_inputs(rng, algorithm):
    """What a plan does: transform the weights once, run on several inputs."""
    src, weights, bias, attributes = make_case(rng, "batch")
    problem = convlab.make_problem(src.shape, src.dtype, weights.shape, weights.dtype,
                                   bias.shape, bias.dtype, **attributes)
    algo = convlab.dispatch.registry.get_algorithm(algorithm)
    prepared = algo.prepare_weights(problem, params.canonical_weights(weights, problem))
    for seed in range(3):
        src = np.random.default_rng(seed).standard_normal(src.shape).astype(np.float32)
        dst = np.empty(problem.dst_shape, np.float32)
        algo.run(problem, params.canonical_src(src, problem), prepared, bias, dst, 2)
        assert_matches_reference(dst, src, weights, bias, attributes, algorithm)


# --------------------------------------------------------------------------- weights

@pytest.mark.parametrize("threads", [2, 8])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", ["shared_blocks", "shared_groups"])
@pytest.mark.parametrize("algorithm", VARIANTS)
def test_fused_first_run_equals_later_runs(rng, monkeypatch, request, algorithm, case, dtype,
                                           threads):
    """A first run transforms the weights inside the GEMM stage, a row of positions for a
    block of output channels at a time (8 threads: the rows split between threads); later
    runs of the same prepared weights use the stored U. Same arithmetic, same bits."""
    # the kernel fuses every tile size, whichever the strategy lets it
    monkeypatch.setattr(winograd, "FUSED_TILE_SIZES", winograd.TILE_SIZES)
    winograd._blocking.cache_clear()  # blockings count the fused slices
    request.addfinalizer(winograd._blocking.cache_clear)
    src, weights, bias, attributes = make_case(rng, case, dtype)
    problem = convlab.make_problem(src.shape, src.dtype, weights.shape, weights.dtype,
                                   None if bias is None else bias.shape,
                                   None if bias is None else bias.dtype, **attributes)
    m = TILE[algorithm]
    b = winograd.blocking(m, problem, threads)
    assert winograd.fused_weights(m, problem, b)
    algo = convlab.dispatch.registry.get_algorithm(algorithm)
    prepared = algo.prepare_weights(problem, params.canonical_weights(weights, problem))
    canonical_src = params.canonical_src(src, problem)
    results = []
    for _ in range(3):
        dst = np.empty((problem.batch, *problem.output_shape, problem.out_channels), dtype)
        algo.run(problem, canonical_src, prepared, bias, dst, threads)
        results.append(dst)
        if len(results) == 1:
            assert prepared._transformed is None, "the first run stored U"
    assert prepared._transformed is not None
    for other in results[1:]:
        np.testing.assert_array_equal(other, results[0], strict=True)
    got = params.user_dst(results[0], problem)
    assert_matches_reference(got, src, weights, bias, attributes, algorithm)


@pytest.mark.parametrize("threads", [2, 8])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("block_panels", [1, 2, 4, 1000])
@pytest.mark.parametrize("algorithm", VARIANTS)
def test_fused_blocks_of_panels_give_the_bits_of_stored_u(rng, monkeypatch, request,
                                                          algorithm, block_panels, dtype,
                                                          threads):
    """A fused run's items take a row of positions for a block of panels of output
    channels: whatever the block (one panel, several, a last one cut short, all), each
    output gets the bits of a run on the stored U."""
    monkeypatch.setattr(winograd, "fused_panels", lambda m, problem, level: block_panels)
    winograd._blocking.cache_clear()  # blockings count the fused buffers
    request.addfinalizer(winograd._blocking.cache_clear)
    src, weights, bias, attributes = make_case(rng, "shared_blocks", dtype)
    problem = convlab.make_problem(src.shape, src.dtype, weights.shape, weights.dtype,
                                   bias.shape, bias.dtype, **attributes)
    m = TILE[algorithm]
    b = winograd.blocking(m, problem, threads)
    assert winograd.fused_weights(m, problem, b)
    _, nr = _winograd.gemm_layout(winograd.current_gemm_level(), problem.dtype)
    panels = -(-problem.out_channels // nr)
    blocks = -(-panels // block_panels)
    assert (blocks == 1) == (block_panels == 1000)
    if (threads, block_panels, m) == (8, 1000, 2):
        # 7 threads share one block's 4 rows of F(2) positions: each row goes in 2 parts
        assert _winograd.fused_row_parts(b.threads, blocks * (m + 2), m + 2) == 2
    algo = convlab.dispatch.registry.get_algorithm(algorithm)
    prepared = algo.prepare_weights(problem, params.canonical_weights(weights, problem))
    canonical_src = params.canonical_src(src, problem)
    results = []
    for _ in range(2):
        dst = np.empty((problem.batch, *problem.output_shape, problem.out_channels), dtype)
        algo.run(problem, canonical_src, prepared, bias, dst, threads)
        results.append(dst)
    assert prepared._transformed is not None
    np.testing.assert_array_equal(results[1], results[0], strict=True)
    got = params.user_dst(results[0], problem)
    assert_matches_reference(got, src, weights, bias, attributes, algorithm)


def test_weights_are_transformed_once_by_the_first_run(rng):
    """prepare_weights cannot know the call's thread count, so the first run transforms
    (on its threads); later runs of the same prepared weights reuse U."""
    src, weights, bias, attributes = make_case(rng, "vector_channels")
    problem = convlab.make_problem(src.shape, src.dtype, weights.shape, weights.dtype,
                                   bias.shape, bias.dtype, **attributes)
    algo = convlab.dispatch.registry.get_algorithm("winograd4")
    prepared = algo.prepare_weights(problem, params.canonical_weights(weights, problem))
    assert prepared._transformed is None
    dst = np.empty(problem.dst_shape, np.float32)
    algo.run(problem, params.canonical_src(src, problem), prepared, bias, dst, 1)
    first = prepared.transformed(1)
    algo.run(problem, params.canonical_src(src, problem), prepared, bias, dst, 2)
    assert prepared.transformed(2) is first


def test_transformed_weights_held_by_a_plan_are_never_reused(rng):
    """U buffers are recycled between calls only once nobody references them."""
    problem = convlab.make_problem((1, 8, 8, 8), np.float32, (3, 3, 8, 8), np.float32)
    transform = wt.TRANSFORMS[4]
    weights = [rng.standard_normal((1, 3, 3, 8, 8)).astype(np.float32) for _ in range(2)]
    winograd.clear_buffer_cache()
    kept = winograd.prepare(transform, problem, weights[0], 1).transformed(1)
    snapshot = kept.copy()
    other = winograd.prepare(transform, problem, weights[1], 1).transformed(1)
    assert not np.shares_memory(kept, other)
    np.testing.assert_array_equal(kept, snapshot)
    # a dropped U is recycled; the plan's stays untouched
    address = other.__array_interface__["data"][0]
    del other
    again = winograd.prepare(transform, problem, weights[1], 1).transformed(1)
    assert again.__array_interface__["data"][0] == address
    np.testing.assert_array_equal(kept, snapshot)
    view = again[0]
    del again
    fresh = winograd.prepare(transform, problem, weights[0], 1).transformed(1)
    assert not np.shares_memory(fresh, view), "a live view's buffer was reused"
    winograd.clear_buffer_cache()


@pytest.mark.parametrize("rank, groups", [(1, 1), (2, 1), (2, 3), (3, 2)])
@pytest.mark.parametrize("m", winograd.TILE_SIZES)
def test_weight_transform_kernel_matches_float64(rng, m, rank, groups):
    # OC/G = 20: a whole vector of channels (the 2-D register path) and a remainder
    weights = rng.standard_normal((3,) * rank + (5, 20 * groups))
    src_shape = (1,) + (6,) * rank + (5 * groups,)
    for dtype, rtol in ((np.float64, 1e-15), (np.float32, 4 * np.finfo(np.float32).eps)):
        problem = convlab.make_problem(src_shape, dtype, weights.shape, dtype, groups=groups)
        canonical = params.canonical_weights(weights.astype(dtype), problem)
        prepared = winograd.prepare(wt.TRANSFORMS[m], problem, canonical, 2)
        got = winograd.unpack(prepared)
        want = winograd.transform_weights_float64(wt.TRANSFORMS[m], problem, canonical)
        # the padding of the last panel is zero, so the GEMM's extra columns are too
        _, nr = _winograd.gemm_layout(prepared.level, dtype)
        panels = -(-20 // nr)
        last = prepared.transformed(2)[:, :, (panels - 1) * 5 * nr:panels * 5 * nr]
        assert not last.reshape(groups, -1, 5, nr)[..., 20 % nr:].any()
        assert got.shape == (groups, (m + 2) ** rank, 5, 20)
        assert got.dtype == dtype
        np.testing.assert_allclose(got, want, rtol=0, atol=rtol * np.abs(want).max())


@pytest.mark.parametrize("rank, groups, ocg", [(2, 1, 32), (2, 3, 16), (2, 2, 20), (3, 2, 16),
                                               (1, 1, 16)])
@pytest.mark.parametrize("m", winograd.TILE_SIZES)
def test_weight_transform_by_position_gives_the_same_bits(rng, monkeypatch, m, rank, groups,
                                                         ocg):
    # Each thread computes a contiguous share of the (group, position) planes, which may
    # start and end inside a row of positions; U must not depend on the split. U starts
    # as NaN, so that a plane no thread writes shows.
    made = []

    def nan_buffer(shape, dtype):
        made.append(buffers.aligned_empty(tuple(shape), dtype))
        made[-1].fill(np.nan)
        return made[-1]

    monkeypatch.setattr(winograd, "_transformed_buffer", nan_buffer)
    weights = rng.standard_normal((3,) * rank + (7, ocg * groups)).astype(np.float32)
    problem = convlab.make_problem((1,) + (6,) * rank + (7 * groups,), np.float32,
                                   weights.shape, np.float32, groups=groups)
    canonical = params.canonical_weights(weights, problem)
    transform = wt.TRANSFORMS[m]
    _, nr = _winograd.gemm_layout(winograd.current_gemm_level(), np.float32)
    packed = -(-ocg // nr) * 7 * nr  # each plane's data; what follows it is padding
    by_channel = winograd.transform_weights(transform, problem, canonical, 1)[..., :packed]
    by_channel = by_channel.copy()
    for threads in (1, 2, 3, 5, 7):
        by_position = winograd.transform_weights(transform, problem, canonical, threads,
                                                 by_position=True)[..., :packed]
        assert np.shares_memory(by_position, made[-1])
        np.testing.assert_array_equal(by_position, by_channel, err_msg=f"threads={threads}")


# --------------------------------------------------------------------------- blocking

@pytest.mark.parametrize("algorithm", VARIANTS)
def test_tiny_blocks_give_the_same_result(rng, algorithm):
    """One tile per block (the smallest workspace) against the default blocking.

    BLAS may take another path for a single row (a GEMV), so the last bits may differ;
    both must stay within the Winograd bound of the oracle and close to each other.
    """
    src, weights, bias, attributes = make_case(rng, "batch")
    default = convlab.convolve(src, weights, bias, algorithm=algorithm, **attributes)
    problem = convlab.make_problem(src.shape, src.dtype, weights.shape, weights.dtype,
                                   bias.shape, bias.dtype, **attributes)
    with winograd.workspace_limit(1):
        assert winograd.blocking(TILE[algorithm], problem, 2).block == 1
        tiny = convlab.convolve(src, weights, bias, algorithm=algorithm, **attributes)
    assert_matches_reference(tiny, src, weights, bias, attributes, algorithm, "(tiny blocks)")
    scale = np.abs(default).max()
    np.testing.assert_allclose(tiny, default, rtol=0, atol=1e-5 * scale)


@pytest.mark.parametrize("algorithm", VARIANTS)
def test_block_sizes_agree_bit_for_bit_on_small_channel_counts(rng, algorithm):
    """Several block sizes of more than one row: the same BLAS path, the same bits."""
    src, weights, bias, attributes = make_case(rng, "partial_tiles_odd")
    results = []
    for limit in (None, 200_000, 60_000):
        with winograd.workspace_limit(limit or winograd.WORKSPACE_BYTES):
            results.append(convlab.convolve(src, weights, bias, algorithm=algorithm,
                                            **attributes))
    for other in results[1:]:
        np.testing.assert_array_equal(other, results[0], strict=True)


@pytest.mark.parametrize("case", ["batch", "3d", "1d_long"])
@pytest.mark.parametrize("algorithm", VARIANTS)
def test_thread_count_does_not_change_blocking(rng, algorithm, case):
    src, weights, bias, attributes = make_case(rng, case)
    problem = convlab.make_problem(src.shape, src.dtype, weights.shape, weights.dtype,
                                   None if bias is None else bias.shape,
                                   None if bias is None else bias.dtype, **attributes)
    m = TILE[algorithm]
    plans = [winograd.blocking(m, problem, threads) for threads in (1, 2, 3, 8, 64)]
    assert len({(b.block, b.channel_chunk, b.shared) for b in plans}) == 1
    results = [convlab.convolve(src, weights, bias, algorithm=algorithm, threads=threads,
                                **attributes) for threads in (1, 2, 5)]
    for other in results[1:]:
        np.testing.assert_array_equal(other, results[0], strict=True)


@pytest.mark.parametrize("limit", [1, 4096, 300_000, 2**20, winograd.WORKSPACE_BYTES])
@pytest.mark.parametrize("shape, channels", [((56, 56), 64), ((28, 28), 128), ((28, 28), 512),
                                             ((9, 9, 9), 32), ((1000,), 16)])
@pytest.mark.parametrize("threads", [1, 2, 7])
def test_workspace_stays_under_the_bound(shape, channels, limit, threads):
    """Whatever the problem, all threads' blocks together fit the bound (or one tile does
    not fit on its own, and then one thread runs one-tile blocks)."""
    src_shape = (2, *shape, channels)
    weights_shape = (3,) * len(shape) + (channels, channels)
    problem = convlab.make_problem(src_shape, np.float32, weights_shape, np.float32,
                                   pads_begin=1, pads_end=1)
    for m in winograd.TILE_SIZES:
        b = winograd.blocking(m, problem, threads, limit)
        assert 1 <= b.threads <= threads and b.block >= 1
        used_bytes = winograd.workspace_bytes_used(m, problem, threads, limit)
        if used_bytes > limit:
            assert b.block == 1 and b.threads == 1


def test_workspace_limit_rejects_nonsense():
    with pytest.raises(ValueError, match="nbytes=0 must be a positive int"):
        with winograd.workspace_limit(0):
            pass


# --------------------------------------------------------------------------- supports

@pytest.mark.parametrize("src_shape, weights_shape, attributes, reason", [
    ((1, 8, 8, 2), (3, 3, 2, 2), dict(strides=2), "stride 2x2: Winograd needs stride 1"),
    ((1, 8, 8, 2), (3, 3, 2, 2), dict(strides=(1, 2)), "stride 1x2: Winograd needs stride 1"),
    ((1, 8, 8, 2), (3, 3, 2, 2), dict(dilations=2),
     "dilation 2x2: Winograd needs dilation 1 (a dense kernel)"),
    ((1, 8, 8, 2), (5, 5, 2, 2), {}, "kernel 5x5: Winograd F(m, 3) needs kernel 3 on every"),
    ((1, 8, 8, 2), (3, 1, 2, 2), {}, "kernel 3x1: Winograd F(m, 3) needs kernel 3 on every"),
    ((1, 8, 2), (1, 2, 2), {}, "kernel 1: Winograd F(m, 3) needs kernel 3"),
    ((1, 5, 5, 5, 5, 2), (3, 3, 3, 3, 2, 2), {}, "rank 4: Winograd handles 1 to 3"),
])
@pytest.mark.parametrize("algorithm", VARIANTS)
def test_unsupported_problems_say_why(algorithm, src_shape, weights_shape, attributes, reason):
    problem = convlab.make_problem(src_shape, np.float32, weights_shape, np.float32,
                                   **attributes)
    got = convlab.dispatch.registry.get_algorithm(algorithm).supports(problem)
    assert got is not None and got.startswith(reason), got
    src, weights = np.zeros(src_shape, np.float32), np.zeros(weights_shape, np.float32)
    with pytest.raises(ValueError, match="cannot run this problem"):
        convlab.convolve(src, weights, algorithm=algorithm, **attributes)


@pytest.mark.parametrize("algorithm", VARIANTS)
def test_supported_problems(algorithm):
    for src_shape, weights_shape, attributes in [
            ((1, 8, 8, 4), (3, 3, 2, 6), dict(groups=2, pads_begin=(0, 3), pads_end=-1)),
            ((3, 9, 1), (3, 1, 1), dict(auto_pad="same_lower")),
            ((1, 4, 5, 6, 2), (3, 3, 3, 2, 2), {})]:
        problem = convlab.make_problem(src_shape, np.float32, weights_shape, np.float32,
                                       **attributes)
        assert convlab.dispatch.registry.get_algorithm(algorithm).supports(problem) is None


# --------------------------------------------------------------------------- accuracy

# The bound: 4x the worst relative error measured by bench/winograd_accuracy.py for the
# same IC (kept in MEASURED_RELATIVE_ERROR); a seed changes the error by far less than 4x,
# a wrong transform entry by orders of magnitude.
ACCURACY_MARGIN = 4.0


@pytest.mark.parametrize("ic, extent", [(16, 28), (64, 14), (64, 28)])
@pytest.mark.parametrize("algorithm", VARIANTS)
def test_float32_accuracy_is_as_measured(algorithm, ic, extent):
    rng = np.random.default_rng(ic + extent)
    src = rng.standard_normal((1, extent, extent, ic), dtype=np.float32)
    weights = rng.standard_normal((3, 3, ic, 16), dtype=np.float32)
    reference = convlab.reference.convolve(src, weights, pads_begin=1, pads_end=1)
    got = convlab.convolve(src, weights, pads_begin=1, pads_end=1, algorithm=algorithm)
    error = np.linalg.norm(got - reference) / np.linalg.norm(reference)
    bound = ACCURACY_MARGIN * winograd.MEASURED_RELATIVE_ERROR[algorithm][ic]
    assert error <= bound, f"{algorithm}: relative error {error:.3g} > {bound:.3g}"


@pytest.mark.parametrize("rank, ic, extent", [(1, 64, 300), (3, 64, 8)])
@pytest.mark.parametrize("algorithm", VARIANTS)
def test_float32_accuracy_per_rank_is_as_measured(algorithm, rank, ic, extent):
    """1-D and 3-D against the per-rank table (the worst over IC there, so the bound is
    loose for IC 64 but still orders of magnitude below a wrong transform's error)."""
    rng = np.random.default_rng(rank + ic + extent)
    src = rng.standard_normal((1,) + (extent,) * rank + (ic,), dtype=np.float32)
    weights = rng.standard_normal((3,) * rank + (ic, 16), dtype=np.float32)
    reference = convlab.reference.convolve(src, weights, pads_begin=1, pads_end=1)
    got = convlab.convolve(src, weights, pads_begin=1, pads_end=1, algorithm=algorithm)
    error = np.linalg.norm(got - reference) / np.linalg.norm(reference)
    bound = ACCURACY_MARGIN * winograd.MEASURED_RELATIVE_ERROR_BY_RANK[algorithm][rank]
    assert error <= bound, f"{algorithm}: relative error {error:.3g} > {bound:.3g}"


def test_default_precision_judges_each_rank_by_its_own_error():
    """3-D F(6) rounds past the default bound (4.6e-5 measured), 2-D F(6) does not."""
    for rank, admitted in ((2, True), (3, False)):
        problem = convlab.make_problem((1,) + (12,) * rank + (64,), np.float32,
                                       (3,) * rank + (64, 64), np.float32, pads_begin=1,
                                       pads_end=1)
        rows = {row.name: row for row in select.assess(problem, 2, "default")}
        assert (rows["winograd6"].excluded is None) == admitted, rank
        assert rows["winograd2"].excluded is None


def test_accuracy_table_is_ordered_by_tile_size():
    table = winograd.MEASURED_RELATIVE_ERROR
    for ic in (16, 64, 256, 512):
        assert table["winograd2"][ic] < table["winograd4"][ic] < table["winograd6"][ic]


# --------------------------------------------------------------------------- cost

@pytest.mark.parametrize("algorithm", VARIANTS)
def test_cost_estimate_counts_the_gemm_work(algorithm):
    m = TILE[algorithm]
    problem = convlab.make_problem((1, 12 * 4, 12 * 4, 64), np.float32, (3, 3, 64, 32),
                                   np.float32, pads_begin=1, pads_end=1)
    estimate = convlab.dispatch.registry.get_algorithm(algorithm).cost(problem, 2)
    tiles = (48 // m) ** 2
    gemm = winograd.gemm_flops(m, problem)
    assert gemm == 2 * (m + 2) ** 2 * tiles * 64 * 32
    # the cost model's term is that work per thread
    assert estimate.inputs["terms"]["gemm_flops"] == gemm / 2
    # the reason for Winograd: fewer multiplications than direct, by (3m / alpha)^2
    assert problem.flops / gemm == pytest.approx((3 * m / (m + 2)) ** 2)
    assert 0 < estimate.seconds < float("inf")
    assert estimate.inputs["float32_relative_error"] == max(
        winograd.MEASURED_RELATIVE_ERROR[algorithm].values())


@pytest.mark.parametrize("algorithm", VARIANTS)
def test_shared_blocks_stay_within_the_caches_or_u(monkeypatch, request, algorithm):
    """An ungrouped run's shared blocks hold no more V and M than the threads' halves of
    L2, or than U where U is larger; grouped runs are bounded by the workspace alone. The
    L2 share is fixed here, so that the blocking does not depend on this machine's caches."""
    monkeypatch.setattr(winograd, "BLOCK_BYTES_PER_THREAD", 256 * 2**10)
    winograd._blocking.cache_clear()
    request.addfinalizer(winograd._blocking.cache_clear)
    m, threads = TILE[algorithm], 2
    positions = winograd.positions(m, 2)
    shared = 0
    for ic, oc in ((64, 128), (256, 256)):
        problem = convlab.make_problem((1, 112, 112, ic), np.float32, (3, 3, ic, oc),
                                       np.float32, pads_begin=1, pads_end=1)
        b = winograd.blocking(m, problem, threads)
        if not b.shared:  # F(4) and F(6) keep per-thread blocks on 64 x 128 channels
            continue
        shared += 1
        u_bytes = positions * ic * oc * 4
        bound = max(threads * winograd.BLOCK_BYTES_PER_THREAD, u_bytes) + positions * 4 * 64
        assert b.block * positions * (ic + oc) * 4 <= bound
        assert b.block < winograd.total_tiles(m, problem)
    assert shared
    if m == 2:  # F(2) shares blocks whatever its U slices' size, so grouped runs too
        grouped = convlab.make_problem((1, 112, 112, 128), np.float32, (3, 3, 64, 128),
                                       np.float32, pads_begin=1, pads_end=1, groups=2)
        b = winograd.blocking(m, grouped, threads)
        assert b.shared
        assert (b.block * positions * (64 + 64) * 4 * 2
                > threads * winograd.BLOCK_BYTES_PER_THREAD + positions * 4 * 64)


@pytest.mark.parametrize("oc", [256, 250])
@pytest.mark.parametrize("algorithm", VARIANTS)
def test_fused_and_unfused_weight_transforms_are_priced_apart(algorithm, oc):
    """A one-shot run counts its weight transform under the term of the path it takes;
    both are weight preparation, which a plan's estimate leaves out."""
    m = TILE[algorithm]
    problem = convlab.make_problem((1, 14, 14, 256), np.float32, (3, 3, 256, oc), np.float32,
                                   pads_begin=1, pads_end=1)
    terms, _ = winograd.cost_terms(m, problem, 2)
    fused = winograd.fused_weights(m, problem, winograd.blocking(m, problem, 2))
    if oc % 16:
        assert not fused  # the fused path needs whole vectors of output channels
    assert (terms["fused_weight_transform_flops"] > 0) == fused
    assert (terms["weight_transform_flops"] > 0) == (not fused)
    assert {"weight_transform_flops", "fused_weight_transform_flops"} <= set(
        cost_model.PREPARATION_TERMS)
