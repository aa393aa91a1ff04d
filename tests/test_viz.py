"""convlab.viz: what the helpers compute, checked against closed forms; then the drawings.

The computing half must agree with docs/specification.md §1.1 and §1.2 written out
independently here (tap coordinates o*S + k*D - P_b, output extents, receptive-field
sizes, block-diagonal group connectivity, C-order memory offsets). The drawing half must
run under Agg and draw what was computed (e.g. one highlighted cell per tap).
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import convlab
from convlab import viz
from convlab.dispatch import registry
from convlab.viz import probe, render
from tests.helpers import run_python_in_checkout

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")


def floor_extent(i, k, s, d, pb, pe):
    return math.floor((i + pb + pe - ((k - 1) * d + 1)) / s) + 1


WINDOW_CASES = [
    # input, kernel, strides, dilations, pads_begin, pads_end
    ((7,), (3,), (1,), (1,), (0,), (0,)),
    ((7,), (3,), (2,), (1,), (1,), (2,)),
    ((9,), (3,), (1,), (3,), (2,), (2,)),
    ((8,), (2,), (3,), (1,), (0,), (0,)),          # stride > kernel: some inputs unread
    ((8,), (3,), (1,), (1,), (-2,), (-1,)),        # negative pads crop
    ((5, 6), (3, 2), (2, 1), (1, 2), (1, -1), (1, 0)),
    ((6, 6), (3, 3), (2, 2), (2, 1), (2, 1), (1, 1)),
    ((3, 4, 5), (2, 2, 3), (1, 2, 1), (1, 1, 2), (0, 1, 2), (1, 0, 2)),
]


@pytest.mark.parametrize("case", WINDOW_CASES, ids=str)
def test_windows_taps_follow_the_index_formula(case):
    input_shape, kernel, strides, dilations, pads_begin, pads_end = case
    win = viz.windows(input_shape, kernel, strides=strides, dilations=dilations,
                      pads_begin=pads_begin, pads_end=pads_end)
    out = tuple(floor_extent(*args) for args in
                zip(input_shape, kernel, strides, dilations, pads_begin, pads_end))
    assert win.output_shape == out
    assert win.taps.shape == (*out, *kernel, len(input_shape))
    for o in itertools.product(*map(range, out)):
        for k in itertools.product(*map(range, kernel)):
            want = [oo * s + kk * d - pb for oo, kk, s, d, pb in
                    zip(o, k, strides, dilations, pads_begin)]
            assert list(win.taps[o + k]) == want
            inside = all(0 <= w < i for w, i in zip(want, input_shape))
            assert win.inside[o + k] == inside
    assert win.padded_bounds == tuple((-pb, i + pe) for i, pb, pe in
                                      zip(input_shape, pads_begin, pads_end))


def test_read_counts_show_unread_inputs_when_stride_exceeds_the_kernel():
    win = viz.windows((8,), (2,), strides=3)
    # outputs read [0,1], [3,4], [6,7]; 2 and 5 are skipped
    assert list(win.read_counts()) == [1, 1, 0, 1, 1, 0, 1, 1]
    win = viz.windows((7,), (3,), strides=2, pads_begin=1, pads_end=1)
    assert win.read_counts().sum() == win.inside.sum()
    assert list(win.read_counts()) == [1, 2, 1, 2, 1, 2, 1]


@pytest.mark.parametrize("extent,K,S,D", [(7, 3, 2, 1), (10, 3, 3, 1), (9, 2, 2, 2),
                                          (6, 4, 4, 1), (5, 1, 2, 1), (11, 3, 4, 2)])
def test_auto_pad_windows_give_ceil_output_and_split_pads(extent, K, S, D):
    total = max(0, (math.ceil(extent / S) - 1) * S + (K - 1) * D + 1 - extent)
    upper = viz.windows((extent,), (K,), strides=S, dilations=D, auto_pad="same_upper")
    lower = viz.windows((extent,), (K,), strides=S, dilations=D, auto_pad="same_lower")
    valid = viz.windows((extent,), (K,), strides=S, dilations=D, auto_pad="valid")
    assert upper.output_shape == lower.output_shape == (math.ceil(extent / S),)
    assert upper.problem.pads_begin == (total // 2,) and upper.problem.pads_end == \
        (total - total // 2,)
    assert lower.problem.pads_end == (total // 2,) and lower.problem.pads_begin == \
        (total - total // 2,)
    assert valid.output_shape == ((extent - ((K - 1) * D + 1)) // S + 1,)
    # same_lower reads one element further left than same_upper when the total is odd
    shift = (total % 2)
    assert np.array_equal(lower.taps, upper.taps - shift)


def test_windows_refuse_a_kernel_that_reads_the_wrong_elements():
    name = "viz_test_shifted"

    @convlab.register_algorithm(name, auto=False)
    def shifted(problem, src, weights, bias, dst, threads):
        # correct everywhere except that the last output reads like its neighbour
        dst[...] = convlab.convolve(src, weights.reshape(*weights.shape[1:]),
                                    strides=problem.strides, dilations=problem.dilations,
                                    pads_begin=problem.pads_begin,
                                    pads_end=problem.pads_end, algorithm="reference")
        dst[:, -1] = dst[:, -2]
    try:
        assert viz.windows((6,), (3,), algorithm="direct").output_shape == (4,)
        with pytest.raises(RuntimeError, match=name):
            viz.windows((6,), (3,), algorithm=name)
    finally:
        convlab.unregister_algorithm(name)


@pytest.mark.parametrize("S,P", [(1, 1), (2, 1)])
def test_tap_hits_is_the_kernels_answer_for_every_algorithm(S, P):
    ran = []
    for algorithm in convlab.algorithms():
        problem = convlab.make_problem((36, 6, 1), np.float32, (3, 1, 3), np.float32,
                                       strides=S, pads_begin=P, pads_end=P)
        if registry.get_algorithm(algorithm).supports(problem) is not None:
            continue
        hits = probe.tap_hits((6,), (3,), strides=S, pads_begin=P, pads_end=P,
                              algorithm=algorithm)
        out = (6 + 2 * P - 3) // S + 1
        assert hits.shape == (6, out, 3)
        for i, o, k in itertools.product(range(6), range(out), range(3)):
            assert hits[i, o, k] == (i == o * S + k - P), algorithm
        ran.append(algorithm)
    assert {"reference", "direct"} <= set(ran)


# --------------------------------------------------------------------------- receptive fields

def closed_form_size(layers):
    size, jump = 1, 1
    for layer in layers:
        size += (layer.kernel - 1) * layer.dilations * jump
        jump *= layer.strides
    return size


CHAINS = [
    [viz.Layer(3)],
    [viz.Layer(3), viz.Layer(3)],
    [viz.Layer(3), viz.Layer(3, strides=2), viz.Layer(3, dilations=2)],
    [viz.Layer(5, strides=2), viz.Layer(3, strides=2), viz.Layer(3)],
    [viz.Layer(2, dilations=1), viz.Layer(2, dilations=2), viz.Layer(2, dilations=4),
     viz.Layer(2, dilations=8)],                                   # WaveNet-style stack
    [viz.Layer(3, pads_begin=1, pads_end=1), viz.Layer(3, strides=2, auto_pad="same_upper"),
     viz.Layer(1)],
]


@pytest.mark.parametrize("layers", CHAINS, ids=lambda ls: "-".join(
    f"k{x.kernel}s{x.strides}d{x.dilations}" for x in ls))
def test_receptive_field_size_matches_the_closed_form(layers):
    rf = viz.receptive_field((64,), layers)
    assert rf.depth == len(layers)
    assert rf.size(0) == (closed_form_size(layers),)
    # every path has one tap per layer and no tap of an interior output hits padding
    assert rf.counts[0].sum() == math.prod(layer.kernel for layer in layers)
    assert rf.counts[-1].sum() == 1 and rf.counts[-1][rf.output_index] == 1
    for level in range(rf.depth):
        assert rf.counts[level].shape == rf.shapes[level]
        assert rf.shapes[level + 1] == rf.layer_windows[level].output_shape


def test_receptive_field_counts_and_holes():
    rf = viz.receptive_field((11,), [viz.Layer(3), viz.Layer(3)])
    assert list(rf.counts[0][rf.bounds(0)[0][0]:rf.bounds(0)[0][1] + 1]) == [1, 2, 3, 2, 1]
    dilated = viz.receptive_field((11,), [viz.Layer(3, dilations=3)], output_index=(2,))
    assert list(np.nonzero(dilated.mask(0))[0]) == [2, 5, 8]     # holes between the taps
    assert dilated.size(0) == (7,)


def test_receptive_field_2d_is_the_product_of_the_axes():
    layers = [viz.Layer((3, 5), strides=(1, 2)), viz.Layer(3, dilations=(2, 1))]
    rf = viz.receptive_field((20, 24), layers)
    assert rf.size(0) == (1 + 2 + 2 * 2, 1 + 4 + 2 * 2)
    rows = viz.receptive_field((20,), [viz.Layer(3), viz.Layer(3, dilations=2)],
                               output_index=(rf.output_index[0],))
    cols = viz.receptive_field((24,), [viz.Layer(5, strides=2), viz.Layer(3)],
                               output_index=(rf.output_index[1],))
    assert np.array_equal(rf.counts[0], np.outer(rows.counts[0], cols.counts[0]))


def test_receptive_field_clipped_by_padding_at_the_border():
    rf = viz.receptive_field((8,), [viz.Layer(3, pads_begin=1, pads_end=1)] * 2,
                             output_index=(0,))
    assert rf.bounds(0) == ((0, 2),)                     # the rest lies in padding
    assert rf.counts[0].sum() < 9


def test_receptive_field_rejects_bad_arguments():
    with pytest.raises(ValueError, match="output_index"):
        viz.receptive_field((8,), [viz.Layer(3)], output_index=(6,))
    with pytest.raises(ValueError, match="layers"):
        viz.receptive_field((8,), [])
    with pytest.raises(TypeError, match=r"layers\[0\]"):
        viz.receptive_field((8,), [{"kernel": 3}])


# --------------------------------------------------------------------------- channels

@pytest.mark.parametrize("ic,oc,g", [(4, 6, 1), (6, 9, 3), (8, 8, 8), (4, 8, 4), (6, 4, 2)])
def test_channel_connectivity_is_block_diagonal(ic, oc, g):
    m = viz.channel_connectivity(ic, oc, g)
    icg, ocg = ic // g, oc // g
    assert np.array_equal(m.connected, np.kron(np.eye(g, dtype=bool),
                                               np.ones((ocg, icg), dtype=bool)))
    for o in range(oc):
        for i in range(ic):
            want = i - (o // ocg) * icg if m.connected[o, i] else -1
            assert m.weight_column[o, i] == want
    assert [m.group_of_output(o) for o in range(oc)] == [o // ocg for o in range(oc)]


def test_channel_connectivity_rejects_groups_that_do_not_divide():
    with pytest.raises(ValueError, match="groups=3"):
        viz.channel_connectivity(4, 6, 3)


# --------------------------------------------------------------------------- memory layout

def test_src_offsets_ncx_and_nxc():
    n, c, h, w = 2, 3, 4, 5
    ncx = viz.src_offsets(n, c, (h, w), "NCX")
    nxc = viz.src_offsets(n, c, (h, w), "nxc")
    assert ncx.shape == nxc.shape == (n, c, h, w)
    for idx in itertools.product(range(n), range(c), range(h), range(w)):
        nn, cc, hh, ww = idx
        assert ncx[idx] == ((nn * c + cc) * h + hh) * w + ww
        assert nxc[idx] == ((nn * h + hh) * w + ww) * c + cc
    assert viz.layout.logical_strides(ncx) == (c * h * w, h * w, w, 1)
    assert viz.layout.logical_strides(nxc) == (h * w * c, 1, w * c, c)
    # the strides agree with NumPy's for arrays stored in those formats
    for fmt, offsets, shape in (("NCX", ncx, (n, c, h, w)), ("NXC", nxc, (n, h, w, c))):
        arr = np.zeros(shape, np.float32)
        np_strides = [s // arr.itemsize for s in arr.strides]
        logical = np_strides if fmt == "NCX" else [np_strides[i] for i in (0, 3, 1, 2)]
        assert list(viz.layout.logical_strides(offsets)) == logical


@pytest.mark.parametrize("groups", [1, 2])
def test_weights_offsets_oix_and_xio(groups):
    oc, ic, k = 4, 4, (3, 2)
    icg = ic // groups
    oix = viz.weights_offsets(oc, ic, k, groups, "OIX")
    xio = viz.weights_offsets(oc, ic, k, groups, "XIO")
    assert oix.shape == xio.shape == (oc, icg, *k)
    for o, i, k0, k1 in itertools.product(range(oc), range(icg), range(k[0]), range(k[1])):
        assert oix[o, i, k0, k1] == ((o * icg + i) * k[0] + k0) * k[1] + k1
        assert xio[o, i, k0, k1] == ((k0 * k[1] + k1) * icg + i) * oc + o


def test_memory_order_inverts_the_offsets():
    offsets = viz.src_offsets(1, 3, (2, 2), "NXC")
    order = viz.memory_order(offsets)
    assert order.shape == (12, 4)
    for position, index in enumerate(order):
        assert offsets[tuple(index)] == position
    assert [tuple(i) for i in order[:4]] == [(0, 0, 0, 0), (0, 1, 0, 0), (0, 2, 0, 0),
                                             (0, 0, 0, 1)]


# --------------------------------------------------------------------------- drawing

def faces(fig, colour):
    target = matplotlib.colors.to_rgba(colour)
    return [p for ax in fig.axes for p in ax.patches
            if np.allclose(p.get_facecolor(), target)]


@pytest.mark.parametrize("case", WINDOW_CASES[:7], ids=str)
def test_plot_window_highlights_one_cell_per_tap(case):
    input_shape, kernel, strides, dilations, pads_begin, pads_end = case
    win = viz.windows(input_shape, kernel, strides=strides, dilations=dilations,
                      pads_begin=pads_begin, pads_end=pads_end)
    last = tuple(o - 1 for o in win.output_shape)
    fig = viz.plot_window(win, last)
    assert isinstance(fig, matplotlib.figure.Figure)
    assert len(faces(fig, render.TAP_FACE)) == math.prod(kernel)
    assert len(faces(fig, render.OUT_FACE)) == 1
    assert len(faces(fig, render.DONE_FACE)) == math.prod(win.output_shape) - 1
    pads = sum(pb + pe for pb, pe in zip(pads_begin, pads_end) if pb + pe > 0)
    if all(p >= 0 for p in pads_begin + pads_end) and pads:
        assert faces(fig, render.PAD_FACE)
    if any(p < 0 for p in pads_begin + pads_end):
        assert faces(fig, render.CROP_FACE)
    fig.savefig(__import__("io").BytesIO(), format="png")


def test_plot_window_with_values_shows_convolve_results():
    win = viz.windows((7,), (3,), strides=2, pads_begin=1, pads_end=2)
    src, weights = np.arange(7.0), np.array([1.0, 0.0, -1.0])
    fig = viz.plot_window(win, (3,), src=src, weights=weights)
    expected = convlab.reference.convolve(src[None, :, None], weights[:, None, None],
                                          strides=2, pads_begin=1, pads_end=2)[0, :, 0]
    texts = [t.get_text() for t in fig.axes[1].texts]
    assert texts == [render.format_value(v) for v in expected]
    captions = [t.get_text() for t in fig.texts]
    assert captions == [f"dst[3] = 5·1 + 6·0 + 0·(-1)  =  {render.format_value(expected[3])}"]
    titled = viz.plot_window(win, (0,), title="case A")
    assert [t.get_text() for t in titled.texts] == ["case A: dst[0] reads src[-1(pad), 0, 1]"]
    with pytest.raises(ValueError, match="src has shape"):
        viz.plot_window(win, src=np.zeros(6), weights=weights)
    with pytest.raises(ValueError, match="both src and weights"):
        viz.plot_window(win, src=src)
    with pytest.raises(ValueError, match="output_index"):
        viz.plot_window(win, (4,))


def test_plot_window_refuses_3d():
    win = viz.windows((3, 3, 3), (2, 2, 2))
    with pytest.raises(ValueError, match="rank 3"):
        viz.plot_window(win)


def test_animation_has_one_frame_per_output(tmp_path):
    pil = pytest.importorskip("PIL.Image")
    win = viz.windows((5,), (3,), strides=2, pads_begin=1, pads_end=1)
    anim = viz.animate_windows(win, src=np.arange(5.0), weights=np.ones(3))
    html = viz.to_html(anim)
    assert "<script" in html and "Animation" in html
    path = tmp_path / "window.gif"
    viz.save_gif(anim, path, fps=4, dpi=40)
    with pil.open(path) as gif:
        assert gif.n_frames == 3


def test_other_figures_draw_what_was_computed():
    m = viz.channel_connectivity(6, 9, 3)
    fig = viz.plot_channel_groups(m)
    # one coloured matrix cell per connection, one wire per connection
    coloured = sum(len(faces(fig, render.group_colour(g))) for g in range(3))
    assert coloured == m.connected.sum()
    assert len(fig.axes[0].lines) == m.connected.sum()

    offsets = viz.src_offsets(1, 3, (2, 3), "NCX")
    fig = viz.plot_memory_layout(offsets, ("n", "c", "h", "w"))
    strip = [t.get_text() for t in fig.axes[1].texts if "," in t.get_text()]
    assert strip == [",".join(map(str, i[1:])) for i in viz.memory_order(offsets)]

    rf = viz.receptive_field((16,), [viz.Layer(3), viz.Layer(3, strides=2)])
    fig = viz.plot_receptive_field(rf)
    assert len(faces(fig, render.OUT_FACE)) == 1
    rf2 = viz.receptive_field((10, 10), [viz.Layer(3), viz.Layer(3)])
    assert len(viz.plot_receptive_field(rf2).axes) == 3


def test_import_convlab_and_viz_do_not_import_matplotlib():
    code = ("import sys, convlab; assert 'matplotlib' not in sys.modules, 'convlab'; "
            "import convlab.viz; from convlab import viz; "
            "viz.windows((5,), (3,)); viz.channel_connectivity(2, 2); "
            "assert 'matplotlib' not in sys.modules, 'convlab.viz'")
    run_python_in_checkout(code)
