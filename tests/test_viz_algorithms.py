"""convlab.viz helpers for the algorithm notebooks (im2col, Winograd, selection).

What they compute is checked against definitions written out here: the column matrix
against the index formula of docs/specification.md §1.1 and, multiplied by the weights,
against the float64 reference; the Winograd stages against the Cook–Toom identities and
the reference on the same tile; the crossover map against :func:`convlab.select_algorithm`
point by point. The drawings run under Agg and must show what was computed.
"""
from __future__ import annotations

import io
import itertools
import math

import numpy as np
import pytest

import convlab
from convlab import viz
from convlab.dispatch import cost_model, select
from convlab.strategies import im2col as im2col_strategy, winograd_transforms as wt
from convlab.viz import selection as vselection, winograd as vwinograd
from tests.helpers import run_python_in_checkout

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")


def png(fig) -> None:
    fig.savefig(io.BytesIO(), format="png")


# --------------------------------------------------------------------------- im2col

COLUMN_CASES = [
    # src shape (NXC), kernel, attributes
    ((1, 4, 4, 1), (3, 3), {"pads_begin": 1, "pads_end": 0}),
    ((2, 7, 6, 4), (3, 2), {"strides": (2, 1), "dilations": (1, 2), "pads_begin": (1, -1),
                            "pads_end": (2, 1), "groups": 2}),
    ((1, 9, 3), (3,), {"strides": 2, "dilations": 2, "pads_begin": 2, "pads_end": 1}),
    ((1, 3, 4, 5, 2), (2, 2, 3), {"pads_begin": (0, 1, 1), "pads_end": (1, 0, 1)}),
]


@pytest.mark.parametrize("case", COLUMN_CASES, ids=str)
def test_column_matrix_entries_follow_the_index_formula(case):
    src_shape, kernel, attributes = case
    rng = np.random.default_rng(1)
    src = rng.standard_normal(src_shape)
    groups = attributes.get("groups", 1)
    ic = src_shape[-1]
    icg = ic // groups
    r = len(kernel)
    for group in range(groups):
        cm = viz.column_matrix(src, kernel, group=group, **attributes)
        p = cm.problem
        assert cm.panel.shape == (p.batch * p.output_size, math.prod(kernel) * icg)
        assert cm.rows.shape == (cm.panel.shape[0], r + 1)
        assert cm.columns.shape == (cm.panel.shape[1], r + 1)
        for m, j in itertools.product(range(cm.panel.shape[0]), range(cm.panel.shape[1])):
            n, o = cm.rows[m][0], cm.rows[m][1:]
            k, c = cm.columns[j][:-1], cm.columns[j][-1]
            i = [oo * s + kk * d - pb for oo, kk, s, d, pb in
                 zip(o, k, p.strides, p.dilations, p.pads_begin)]
            if all(0 <= ii < ext for ii, ext in zip(i, p.input_shape)):
                want = (n, *i, group * icg + c)
                assert tuple(cm.source[m, j]) == want
                assert cm.panel[m, j] == src[want]
            else:
                assert cm.padding[m, j] and cm.panel[m, j] == 0
        # rows in dst order, columns tap-major then channel
        assert [tuple(x) for x in cm.rows] == list(itertools.product(
            range(p.batch), *map(range, p.output_shape)))
        assert [tuple(x) for x in cm.columns] == list(itertools.product(
            *map(range, kernel), range(icg)))


@pytest.mark.parametrize("case", COLUMN_CASES, ids=str)
def test_column_matrix_times_weights_is_the_convolution(case):
    src_shape, kernel, attributes = case
    rng = np.random.default_rng(2)
    groups = attributes.get("groups", 1)
    oc = 3 * groups
    src = rng.standard_normal(src_shape)
    weights = rng.standard_normal((*kernel, src_shape[-1] // groups, oc))
    ref = convlab.reference.convolve(src, weights, **attributes)
    pieces = [viz.column_matrix(src, kernel, out_channels=oc, group=g, **attributes)
              .multiply(weights) for g in range(groups)]
    np.testing.assert_allclose(np.concatenate(pieces, axis=-1), ref, rtol=1e-12, atol=1e-12)


def test_column_matrix_is_the_strategys_own_unfolding():
    src = np.random.default_rng(3).standard_normal((1, 5, 5, 3)).astype(np.float32)
    cm = viz.column_matrix(src, (3, 3), strides=2, pads_begin=1, pads_end=1)
    assert cm.panel.dtype == np.float32
    np.testing.assert_array_equal(cm.panel, im2col_strategy.unfold(cm.problem, src, 0))


def test_column_matrix_copies_count_the_windows_over_each_element():
    cm = viz.column_matrix(np.ones((1, 4, 4, 1)), (3, 3), pads_begin=1, pads_end=1)
    copies = cm.copies()[0, :, :, 0]
    # a 3x3 "same" window covers a corner 4 times, an edge 6 times, the inside 9 times
    assert copies.tolist() == [[4, 6, 6, 4], [6, 9, 9, 6], [6, 9, 9, 6], [4, 6, 6, 4]]
    assert copies.sum() == (~cm.padding).sum()


def test_column_matrix_rejects_bad_arguments():
    with pytest.raises(ValueError, match="group=2"):
        viz.column_matrix(np.zeros((1, 4, 4, 2)), (3, 3), groups=2, group=2)
    with pytest.raises(ValueError, match="src has shape"):
        viz.column_matrix(np.zeros((4, 4)), (3,))
    cm = viz.column_matrix(np.zeros((1, 4, 4, 1)), (3, 3), out_channels=2)
    with pytest.raises(ValueError, match="weights has shape"):
        cm.multiply(np.zeros((3, 3, 1, 3)))


def test_panel_cost_reports_the_strategys_plan_and_bound():
    problem = convlab.make_problem((1, 56, 56, 64), np.float32, (3, 3, 64, 64), np.float32,
                                   pads_begin=1, pads_end=1)
    full = 56 * 56 * 9 * 64 * 4
    for limit in (2**18, 2**20, 2**24):
        cost = viz.panel_cost(problem, threads=2, limit_bytes=limit)
        assert cost.panel_bytes == full
        assert cost.blow_up == pytest.approx(9.0)
        assert cost.workspace_bytes <= limit
        assert cost.plan == im2col_strategy.plan(problem, 2, limit).describe(4)
        chunks = cost.chunk_rows()
        assert chunks[0][0] == 0 and chunks[-1][1] == 56 * 56
        assert all(a[1] == b[0] for a, b in zip(chunks, chunks[1:]))
        assert len(chunks) == cost.plan["chunks"]
        assert len(cost.column_blocks()) == cost.plan["reduction_blocks"]
    # the strategy's run follows that plan
    src = np.zeros((1, 56, 56, 64), np.float32)
    weights = np.zeros((3, 3, 64, 64), np.float32)
    with im2col_strategy.workspace_limit(2**18):
        convlab.convolve(src, weights, pads_begin=1, pads_end=1, algorithm="im2col", threads=2)
        expected = viz.panel_cost(problem, threads=2)
    assert im2col_strategy.last_run == expected.plan
    pointwise = convlab.make_problem((1, 8, 8, 16), np.float32, (1, 1, 16, 8), np.float32)
    assert viz.panel_cost(pointwise).panel_bytes == 0     # 1x1-direct: src is the panel


def test_plot_column_matrix_draws_every_entry():
    src = np.arange(1.0, 17.0).reshape(1, 4, 4, 1)
    weights = np.arange(18.0).reshape(3, 3, 1, 2) - 9
    cm = viz.column_matrix(src, (3, 3), out_channels=2, pads_begin=1, pads_end=0)
    fig = viz.plot_column_matrix(cm, weights)
    panel_ax = fig.axes[1]
    labels = [t.get_text() for t in panel_ax.texts]
    assert len(labels) == cm.panel.size
    want = ["0" if cm.padding[m, j] else ",".join(map(str, cm.source[m, j][1:3]))
            for m in range(cm.panel.shape[0]) for j in range(cm.panel.shape[1])]
    assert labels == want
    dst = [t.get_text() for t in fig.axes[3].texts]
    ref = convlab.reference.convolve(src, weights, pads_begin=1, pads_end=0).reshape(-1, 2)
    assert dst == [viz.render.format_value(round(v, 2)) for v in ref.ravel()]
    values = viz.plot_column_matrix(cm, values=True)
    assert len(values.axes) == 2
    assert [t.get_text() for t in values.axes[1].texts] == [
        viz.render.format_value(v) for v in cm.panel.ravel()]
    png(fig)
    with pytest.raises(ValueError, match="cannot be drawn"):
        viz.plot_column_matrix(viz.column_matrix(np.zeros((2, 4, 4, 1)), (3, 3)))


def test_plot_panel_chunks_draws_one_rectangle_per_chunk_and_block():
    problem = convlab.make_problem((1, 28, 28, 64), np.float32, (3, 3, 64, 64), np.float32,
                                   pads_begin=1, pads_end=1)
    cost = viz.panel_cost(problem, threads=2, limit_bytes=2**16)
    fig = viz.plot_panel_chunks(cost)
    n = min(len(cost.chunk_rows()), 40) * len(cost.column_blocks())
    assert len(fig.axes[0].patches) == n
    png(fig)


# --------------------------------------------------------------------------- Winograd

@pytest.mark.parametrize("m", sorted(wt.TRANSFORMS))
def test_winograd_stages_reproduce_the_reference_on_a_tile(m):
    s = viz.winograd_stages(m, seed=m)
    a = m + 2
    assert s.alpha == a and s.d.shape == s.V.shape == s.U.shape == s.M.shape == (a, a)
    assert s.Y.shape == s.reference.shape == (m, m)
    AT, G, BT = wt.TRANSFORMS[m].arrays(np.float64)
    np.testing.assert_array_equal(s.AT, AT)
    np.testing.assert_array_equal(s.BT, BT)
    # the strategy's prepared weights are G g G^T
    np.testing.assert_allclose(s.U, G @ s.g @ G.T, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(s.V, BT @ s.d @ BT.T, rtol=0, atol=0)
    np.testing.assert_array_equal(s.M, s.U * s.V)
    # Y is the valid correlation, written out here
    want = np.array([[np.sum(s.d[i:i + 3, j:j + 3] * s.g) for j in range(m)]
                     for i in range(m)])
    np.testing.assert_array_equal(s.reference, want)
    np.testing.assert_allclose(s.Y, want, rtol=0, atol=1e-12 * np.abs(want).max())
    np.testing.assert_allclose(s.kernel_output, want, rtol=0, atol=1e-12 * np.abs(want).max())


def test_winograd_stages_with_given_tile_and_filter():
    d = np.arange(16.0).reshape(4, 4)
    g = np.array([[1.0, 0, -1], [2, 0, -2], [1, 0, -1]])      # Sobel
    s = viz.winograd_stages(2, d, g)
    np.testing.assert_allclose(s.Y, [[-8, -8], [-8, -8]], atol=1e-12)
    with pytest.raises(ValueError, match=r"d has shape \(3, 3\)"):
        viz.winograd_stages(2, np.zeros((3, 3)), g)
    with pytest.raises(ValueError, match="m=3"):
        viz.winograd_stages(3)


def test_multiplication_counts():
    for m in (2, 4, 6):
        counts = viz.multiplication_counts(m)
        assert counts["direct"] == 9 * m * m and counts["winograd"] == (m + 2) ** 2
        assert counts["saving"] == pytest.approx(9 * m * m / (m + 2) ** 2)
    assert viz.multiplication_counts(2)["saving"] == 2.25
    assert viz.multiplication_counts(4, rank=1)["winograd"] == 6


def test_relative_errors_are_measured_and_ordered_by_tile():
    errors = viz.winograd_relative_errors((32,), spatial=12)
    assert set(errors) == {"direct", "winograd2", "winograd4", "winograd6"}
    e = {name: values[0] for name, values in errors.items()}
    assert all(0 < v < 1e-4 for v in e.values())
    # larger tiles round more: the library's table says so, and so does a live run
    assert e["winograd2"] < e["winograd4"] < e["winograd6"]
    exact = viz.winograd_relative_errors((8,), spatial=6, dtype=np.float64,
                                         algorithms=("direct",))
    assert exact["direct"][0] < 1e-14


def test_plot_winograd_stages_shows_each_stage():
    s = viz.winograd_stages(2, seed=1)
    fig = viz.plot_winograd_stages(s)
    assert len(fig.axes) == 9
    y_texts = [t.get_text() for t in fig.axes[8].texts]
    assert y_texts == [vwinograd._short(v) for v in s.Y.ravel()]
    assert "reference" in fig.axes[8].get_title()
    png(fig)
    fig = viz.plot_winograd_relative_errors({"direct": [1e-7, 2e-7]}, (16, 64),
                                            table={"direct": {16: 1e-7}}, bound=1e-5)
    png(fig)


# --------------------------------------------------------------------------- selection

CHANNELS, SPATIAL, THREADS = (4, 16, 64, 256), (7, 14, 28, 56), (1, 2)


def test_crossover_map_matches_select_algorithm_at_every_point():
    cmap = viz.crossover_map(CHANNELS, SPATIAL, THREADS)
    assert cmap.winners.shape == (2, 4, 4)
    for (ti, t), (ci, c), (hi, h) in itertools.product(
            enumerate(THREADS), enumerate(CHANNELS), enumerate(SPATIAL)):
        src_shape, weights_shape, attributes = cmap.arguments(c, h)
        src = np.empty(src_shape, np.float32)
        weights = np.empty(weights_shape, np.float32)
        want = convlab.select_algorithm(src, weights, threads=t, **attributes)
        assert cmap.winners[ti, ci, hi] == want, (t, c, h)
        estimates = {name: table[ti, ci, hi] for name, table in cmap.seconds.items()}
        # as auto compares them: each times 1 + its selection margin
        compared = {name: seconds * (1 + cost_model.selection_margin(name, t))
                    for name, seconds in estimates.items()}
        assert min(compared, key=compared.get) == want
        explained = convlab.explain(src, weights, threads=t, **attributes).to_dict()
        for row in explained["candidates"]:
            if row["estimated_seconds"] is not None and row["auto"] and not row["excluded"]:
                assert estimates[row["name"]] == row["estimated_seconds"]


def test_crossover_map_follows_precision_and_dtype():
    highest = viz.crossover_map((64,), (28,), (2,), precision="highest")
    assert not highest.winners[0, 0, 0].startswith("winograd")
    assert highest.winners[0, 0, 0] == convlab.select_algorithm(
        np.empty((1, 28, 28, 64), np.float32), np.empty((3, 3, 64, 64), np.float32),
        threads=2, precision="highest", pads_begin=1, pads_end=1)
    wide = viz.crossover_map((16,), (14,), (1,), kernel=5, dtype=np.float64)
    assert wide.problem(16, 14).kernel_shape == (5, 5)
    assert wide.problem(16, 14).output_shape == (14, 14)
    assert not wide.winners[0, 0, 0].startswith("winograd")   # Winograd needs kernel 3


def test_measured_map_times_the_contenders_and_agreement_counts():
    measured = viz.measured_map((8,), (6, 10), (1,), repeats=1)
    estimated = viz.crossover_map((8,), (6, 10), (1,))
    for hi in range(2):
        contenders = [name for name, table in measured.seconds.items()
                      if np.isfinite(table[0, 0, hi])]
        rows = select.contenders(select.assess(estimated.problem(8, (6, 10)[hi]), 1))
        assert sorted(contenders) == sorted(row.name for row in rows)
        best = min(contenders, key=lambda n: measured.seconds[n][0, 0, hi])
        assert measured.winners[0, 0, hi] == best
    result = viz.selector_agreement(estimated, measured)
    assert result["points"] == 2
    assert result["agree"] == int(np.sum(estimated.winners == measured.winners))
    assert np.all(result["regret"] >= 1.0)
    assert np.all(result["regret"][estimated.winners == measured.winners] == 1.0)
    with pytest.raises(ValueError, match="different grids"):
        viz.selector_agreement(estimated, viz.crossover_map((8,), (6,), (1,)))


def test_plot_crossover_map_colours_each_cell_by_its_winner():
    cmap = viz.crossover_map(CHANNELS, SPATIAL, THREADS)
    fig = viz.plot_crossover_map(cmap)
    colours = vselection._colours(cmap.names)
    for ti, ax in enumerate(fig.axes):
        faces = [matplotlib.colors.to_hex(p.get_facecolor()) for p in ax.patches]
        want = [matplotlib.colors.to_hex(colours[cmap.winners[ti, ci, hi]])
                for ci in range(len(CHANNELS)) for hi in range(len(SPATIAL))]
        assert faces == want
    png(fig)
    # a "measured" map that disagrees everywhere gets a frame on every cell
    flipped = vselection.CrossoverMap(**{**cmap.__dict__, "source": "measured",
                                         "winners": np.full(cmap.winners.shape, "direct")})
    fig = viz.plot_crossover_map(cmap, flipped)
    frames = sum(1 for ax in fig.axes for p in ax.patches if not p.get_fill())
    assert frames == int(np.sum(cmap.winners != "direct"))
    fig = viz.plot_crossover_lines(cmap, channels=64, threads=2)
    assert len(fig.axes[0].lines) == sum(
        1 for t in cmap.seconds.values() if np.isfinite(t[1, 2]).any())
    png(fig)


def test_new_viz_modules_do_not_import_matplotlib():
    code = ("import sys, numpy as np; from convlab import viz; "
            "viz.column_matrix(np.ones((1, 4, 4, 1)), (3, 3)); viz.winograd_stages(2); "
            "viz.crossover_map((8,), (8,), (1,)); "
            "assert 'matplotlib' not in sys.modules")
    run_python_in_checkout(code)
