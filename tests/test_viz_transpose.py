"""convlab.viz.transpose: the scatter of a transposed convolution, checked against
docs/specification.md §5.1.

Each (src element i, tap k) pair must land on ``i*S + k*D - P_b`` and be kept exactly when
that lies in ``[0, O)`` with ``O = S*(I-1) + (K-1)*D + 1 + output_padding - P_b - P_e``;
overlap counts must be the number of such pairs per output, counted here by plain loops;
the stretched forward view must multiply the same pairs. The drawings run under Agg and
must show what was computed.
"""
from __future__ import annotations

import io
import itertools

import numpy as np
import pytest

import convlab
from convlab import viz
from convlab.viz import render
from tests.helpers import run_python_in_checkout

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")


def png(fig) -> None:
    fig.savefig(io.BytesIO(), format="png")


def spec_extent(i, k, s, d, pb, pe, op):
    return s * (i - 1) + (k - 1) * d + 1 + op - pb - pe


def spec_counts(input_shape, kernel, strides, dilations, pads_begin, out):
    """Taps landing on each output, by walking every (i, k) pair."""
    counts = np.zeros(out, dtype=np.int64)
    for i in itertools.product(*map(range, input_shape)):
        for k in itertools.product(*map(range, kernel)):
            y = tuple(ii * s + kk * d - pb for ii, kk, s, d, pb in
                      zip(i, k, strides, dilations, pads_begin))
            if all(0 <= yy < o for yy, o in zip(y, out)):
                counts[y] += 1
    return counts


SCATTER_CASES = [
    # input, kernel, strides, dilations, pads_begin, pads_end, output_padding
    ((5,), (3,), (2,), (1,), (0,), (0,), (0,)),
    ((4,), (4,), (2,), (1,), (1,), (1,), (0,)),
    ((4,), (3,), (2,), (1,), (1,), (1,), (1,)),          # output_padding adds a row
    ((5,), (2,), (3,), (2,), (2,), (0,), (2,)),          # dilation, stride > kernel
    ((4,), (3,), (1,), (1,), (-1,), (-2,), (0,)),        # negative pads add rows
    ((3, 4), (3, 2), (2, 1), (1, 2), (1, 0), (0, 1), (1, 0)),
    ((2, 2, 3), (2, 3, 2), (2, 1, 3), (1, 1, 1), (0, 1, 1), (1, 0, 0), (1, 0, 2)),
]


@pytest.mark.parametrize("algorithm", ["col2im", "direct"])
@pytest.mark.parametrize("case", SCATTER_CASES, ids=str)
def test_scatter_targets_follow_spec(case, algorithm):
    input_shape, kernel, strides, dilations, pb, pe, op = case
    sc = viz.scatter_contributions(input_shape, kernel, strides=strides, dilations=dilations,
                                   pads_begin=pb, pads_end=pe, output_padding=op,
                                   algorithm=algorithm)
    out = tuple(spec_extent(*a) for a in zip(input_shape, kernel, strides, dilations, pb,
                                              pe, op))
    assert sc.output_shape == out
    assert sc.targets.shape == (*input_shape, *kernel, len(input_shape))
    for i in itertools.product(*map(range, input_shape)):
        for k in itertools.product(*map(range, kernel)):
            want = [ii * s + kk * d - b for ii, kk, s, d, b in
                    zip(i, k, strides, dilations, pb)]
            assert list(sc.targets[i + k]) == want
            assert sc.inside[i + k] == all(0 <= w < o for w, o in zip(want, out))
    counts = spec_counts(input_shape, kernel, strides, dilations, pb, out)
    np.testing.assert_array_equal(sc.counts(), counts)
    np.testing.assert_array_equal(
        viz.overlap_counts(input_shape, kernel, strides=strides, dilations=dilations,
                           pads_begin=pb, pads_end=pe, output_padding=op,
                           algorithm=algorithm), counts)
    for o in itertools.product(*map(range, out)):
        pairs = sc.sources(o)
        assert len(pairs) == counts[o]
        for i, k in pairs:
            assert tuple(sc.targets[i + k]) == o


def test_writes_lists_the_kernel_copy_of_one_src_element():
    sc = viz.scatter_contributions((4,), (3,), strides=2, pads_begin=1, pads_end=1)
    # src[x] writes w0, w1, w2 to x*2 - 1, x*2, x*2 + 1
    assert sc.writes((0,))[:, 0].tolist() == [-1, 0, 1]
    assert sc.writes((3,))[:, 0].tolist() == [5, 6, 7]
    assert not sc.inside[0, 0] and sc.output_shape == (7,)      # 2*3 + 2 + 1 - 1 - 1


def test_overlap_counts_show_the_checkerboard():
    # K=3, S=2: outputs hit by two taps alternate with outputs hit by one
    uneven = viz.overlap_counts((5,), (3,), strides=2)
    assert uneven.tolist() == [1, 1, 2, 1, 2, 1, 2, 1, 2, 1, 1]
    # K=4, S=2 (the usual 2x upsampling layer, P=1): every interior output gets 2
    even = viz.overlap_counts((4,), (4,), strides=2, pads_begin=1, pads_end=1)
    assert even.tolist() == [1, 2, 2, 2, 2, 2, 2, 1]
    # 2-D: the products of the per-axis counts
    grid = viz.overlap_counts((4, 4), (3, 3), strides=2)
    row = viz.overlap_counts((4,), (3,), strides=2)
    np.testing.assert_array_equal(grid, np.outer(row, row))
    assert set(grid[1:-1, 1:-1].ravel().tolist()) == {1, 2, 4}
    flat = viz.overlap_counts((4, 4), (4, 4), strides=2, pads_begin=1, pads_end=1)
    assert set(flat[1:-1, 1:-1].ravel().tolist()) == {4}
    # every (i, k) pair lands somewhere without pads
    assert grid.sum() == 16 * 9


def test_output_shape_and_auto_pad_resolve_as_spec_says():
    # total = S*(I-1) + output_padding + (K-1)*D + 1 - output_shape = 6 + 3 - 8 = 1;
    # not same_upper, so P_e = total // 2 = 0 and P_b = 1
    sc = viz.scatter_contributions((4,), (3,), strides=2, output_shape=(8,))
    assert sc.output_shape == (8,)
    assert sc.problem.pads_begin == (1,) and sc.problem.pads_end == (0,)
    assert sc.targets[0, 0, 0] == -1
    upper = viz.scatter_contributions((4,), (3,), strides=2, output_shape=(8,),
                                      auto_pad="same_upper")
    assert upper.problem.pads_begin == (0,) and upper.problem.pads_end == (1,)
    # total = -1: one extra output at the end that no tap reaches
    wide = viz.scatter_contributions((4,), (3,), strides=2, output_shape=(10,))
    assert wide.problem.pads_begin == (0,) and wide.problem.pads_end == (-1,)
    assert wide.counts()[-1] == 0
    same = viz.scatter_contributions((3, 5), (3, 3), strides=(2, 3), auto_pad="same_lower")
    assert same.output_shape == (6, 15)


@pytest.mark.parametrize("case", SCATTER_CASES, ids=str)
def test_stretched_view_multiplies_the_scattered_pairs(case):
    input_shape, kernel, strides, dilations, pb, pe, op = case
    sc = viz.scatter_contributions(input_shape, kernel, strides=strides, dilations=dilations,
                                   pads_begin=pb, pads_end=pe, output_padding=op)
    view = viz.stretched_view(sc)
    win = view.windows
    assert win.input_shape == tuple(s * (i - 1) + 1 for s, i in zip(strides, input_shape))
    assert win.problem.strides == (1,) * len(kernel)
    assert win.problem.pads_begin == tuple((k - 1) * d - b for k, d, b in
                                           zip(kernel, dilations, pb))
    assert win.problem.pads_end == tuple((k - 1) * d - e + o for k, d, e, o in
                                         zip(kernel, dilations, pe, op))
    for o in itertools.product(*map(range, sc.output_shape)):
        want = sorted((i, k) for i in itertools.product(*map(range, input_shape))
                      for k in itertools.product(*map(range, kernel))
                      if all(ii * s + kk * d - b == oo for ii, kk, s, d, b, oo in
                             zip(i, k, strides, dilations, pb, o)))
        assert view.sources(o) == want
    s = strides[0]
    assert view.kind((0,) * len(kernel)) == "src"
    assert view.kind((-1,) + (0,) * (len(kernel) - 1)) == "pad"
    if s > 1:
        assert view.kind((1,) + (0,) * (len(kernel) - 1)) == "zero"


def test_a_wrong_kernel_is_caught(monkeypatch):
    real = convlab.conv_transpose

    def mirrored(*args, **kwargs):
        return np.flip(real(*args, **kwargs), axis=1)      # writes to the wrong positions
    monkeypatch.setattr(convlab, "conv_transpose", mirrored)
    with pytest.raises(RuntimeError, match="i\\*S \\+ k\\*D - P_b"):
        viz.scatter_contributions((4,), (3,), strides=2)


# --------------------------------------------------------------------------- drawing

def test_plot_scatter_draws_each_copy_and_the_sums():
    sc = viz.scatter_contributions((4,), (3,), strides=2, pads_begin=1, pads_end=0)
    fig = viz.plot_scatter(sc)
    texts = [t.get_text() for t in fig.axes[0].texts]
    copies = texts[:4 * 3]
    assert copies == [f"w{k}" for _ in range(4) for k in range(3)]
    assert texts[12:] == [str(c) for c in sc.counts()]
    # the cropped tap of src[0] is drawn dark
    faces = [matplotlib.colors.to_hex(p.get_facecolor()) for p in fig.axes[0].patches]
    assert faces[0] == render.CROP_FACE and faces.count(render.CROP_FACE) == 1
    png(fig)

    src, weights = np.array([1.0, 2.0, -1.0, 3.0]), np.array([1.0, 10.0, 100.0])
    fig = viz.plot_scatter(sc, src=src, weights=weights)
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert texts[:12] == [render.format_value(x * w) for x in src for w in weights]
    want = np.zeros(sc.output_shape)
    for x in range(4):
        for k in range(3):
            if 0 <= x * 2 + k - 1 < want.size:
                want[x * 2 + k - 1] += src[x] * weights[k]
    assert texts[12:] == [render.format_value(v) for v in want]
    png(fig)
    with pytest.raises(ValueError, match="cannot be drawn"):
        viz.plot_scatter(viz.scatter_contributions((2, 2), (2, 2)))
    with pytest.raises(ValueError, match="src has shape"):
        viz.plot_scatter(sc, src=np.ones(3), weights=weights)


def test_plot_stretched_outlines_the_flipped_window():
    sc = viz.scatter_contributions((4,), (3,), strides=2, pads_begin=1, pads_end=1,
                                   output_padding=1)
    view = viz.stretched_view(sc)
    src, weights = np.array([1.0, 2.0, 3.0, 4.0]), np.array([1.0, 10.0, 100.0])
    for o in range(sc.output_shape[0]):
        fig = viz.plot_stretched(view, (o,), src=src, weights=weights)
        top = fig.axes[0]
        outlined = [p for p in top.patches if not p.get_fill()]
        assert len(outlined) == 3
        # outlined cells sit on the window's stretched coordinates
        assert sorted(int(p.get_x()) for p in outlined) == sorted(
            view.windows.reads((o,))[:, 0].tolist())
        pairs = view.sources((o,))
        value = sum(src[i] * weights[k] for i, k in pairs)
        caption = fig._suptitle.get_text()
        assert caption.endswith(render.format_value(value)) or not pairs
    png(fig)
    with pytest.raises(ValueError, match="output_index"):
        viz.plot_stretched(view, (sc.output_shape[0],))


def test_plot_overlap_writes_the_counts():
    a = viz.overlap_counts((4, 4), (3, 3), strides=2)
    b = viz.overlap_counts((4, 4), (4, 4), strides=2, pads_begin=1, pads_end=1)
    fig = viz.plot_overlap({"K=3": a, "K=4": b})
    assert len(fig.axes) == 2
    assert [t.get_text() for t in fig.axes[0].texts] == [str(v) for v in a.ravel()]
    assert [t.get_text() for t in fig.axes[1].texts] == [str(v) for v in b.ravel()]
    png(fig)
    one = viz.plot_overlap(viz.overlap_counts((5,), (3,), strides=2))
    assert [t.get_text() for t in one.axes[0].texts] == ["1", "1", "2", "1", "2", "1", "2",
                                                         "1", "2", "1", "1"]
    with pytest.raises(ValueError, match="rank 3"):
        viz.plot_overlap(np.zeros((2, 2, 2), dtype=int))


def test_computing_functions_do_not_import_matplotlib():
    code = ("import sys; from convlab import viz; "
            "s = viz.scatter_contributions((4,), (3,), strides=2); viz.stretched_view(s); "
            "viz.overlap_counts((4, 4), (3, 3), strides=2); "
            "assert 'matplotlib' not in sys.modules")
    run_python_in_checkout(code)
