"""convlab.viz.explore: the explorer's state against convolve, conv_transpose, the float64
reference and docs/specification.md; its widget driven from code, headless.

For a grid of attributes (1-D and 2-D, sizes, kernels, strides, dilations, asymmetric and
negative pads, every auto_pad mode, groups, data dilation, every padding mode, transposed)
the explorer's dst shape must be the shape convolve / conv_transpose return on real
arrays, and its windows (how many taps of each output read each src element) must equal
an independent count: the float64 reference run on one-hot src with all-ones weights
(forward), or the scatter index formula of §5.1 walked by plain loops (transposed).
Attributes the library rejects must give its own message, in the state and in the widget.
"""
from __future__ import annotations

import itertools
import math
import sys

import numpy as np
import pytest

import convlab
from convlab.viz import render
from convlab.viz.explore import Explorer, explore, explorer_state, plot_explorer

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
ipywidgets = pytest.importorskip("ipywidgets", reason="install the test extra")

AUTO_PADS = ("none", "same_upper", "same_lower", "valid")
PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


def forward_cases(count=72, seed=5):
    """Attribute sets cycling through every auto_pad and padding mode, the rest drawn at
    random (a fixed seed), per axis in 2-D."""
    rng = np.random.default_rng(seed)
    cases = []
    for n in range(count):
        rank = 1 + n % 2
        auto_pad = AUTO_PADS[(n // 2) % 4]
        padding_mode = PADDING_MODES[(n // 8) % 4]

        def axes(lo, hi, rank=rank):
            return tuple(int(v) for v in rng.integers(lo, hi + 1, rank))
        groups = int(rng.choice([1, 2]))
        cases.append(dict(
            rank=rank, input_size=axes(1, 7), kernel_size=axes(1, 3), stride=axes(1, 3),
            dilation=axes(1, 2), pads_begin=axes(-1, 3), pads_end=axes(-1, 2),
            auto_pad=auto_pad, padding_mode=padding_mode, groups=groups,
            in_channels=2 * groups, out_channels=int(rng.choice([2, 4])),
            data_dilation=axes(1, 2) if n % 3 == 0 else (1,) * rank,
            selected=axes(0, 4)))
    return cases


def transposed_cases(count=40, seed=7):
    rng = np.random.default_rng(seed)
    cases = []
    for n in range(count):
        rank = 1 + n % 2

        def axes(lo, hi, rank=rank):
            return tuple(int(v) for v in rng.integers(lo, hi + 1, rank))
        groups = int(rng.choice([1, 2]))
        stride, dilation = axes(1, 3), axes(1, 2)
        cases.append(dict(
            rank=rank, transposed=True, input_size=axes(1, 5), kernel_size=axes(1, 3),
            stride=stride, dilation=dilation, pads_begin=axes(-1, 2), pads_end=axes(-1, 2),
            auto_pad=AUTO_PADS[(n // 2) % 4], groups=groups, in_channels=2 * groups,
            out_channels=2 * groups,
            output_padding=tuple(int(rng.integers(0, max(s, d))) for s, d in
                                 zip(stride, dilation)),
            selected=axes(0, 6)))
    return cases


def convolve_call(case):
    """convolve on real arrays with the case's attributes: (dst shape, error text)."""
    ic, oc, g = case["in_channels"], case["out_channels"], case["groups"]
    src = np.ones((1, *case["input_size"], ic), np.float32)
    weights = np.ones((*case["kernel_size"], ic // g, oc), np.float32)
    try:
        dst = convlab.convolve(src, weights, strides=case["stride"],
                               dilations=case["dilation"], pads_begin=case["pads_begin"],
                               pads_end=case["pads_end"], auto_pad=case["auto_pad"], groups=g,
                               data_dilations=case["data_dilation"],
                               padding_mode=case["padding_mode"])
    except (ValueError, TypeError) as error:
        return None, f"{type(error).__name__}: {error}"
    return dst.shape, None


def reference_reads(case, output_shape):
    """int (*O, *I): taps of each output reading each src element, from the float64
    reference on one-hot src (one batch entry per element) and all-ones weights."""
    source = case["input_size"]
    positions = math.prod(source)
    src = np.eye(positions).reshape(positions, *source, 1)
    weights = np.ones((*case["kernel_size"], 1, 1))
    dst = convlab.reference.convolve(
        src, weights, strides=case["stride"], dilations=case["dilation"],
        pads_begin=case["pads_begin"], pads_end=case["pads_end"], auto_pad=case["auto_pad"],
        data_dilations=case["data_dilation"], padding_mode=case["padding_mode"])
    counts = np.rint(dst[..., 0]).astype(np.int64)           # (prod(I), *O)
    assert counts.shape[1:] == tuple(output_shape)
    return np.moveaxis(counts.reshape(*source, *output_shape),
                       range(len(source)), range(len(source), 2 * len(source)))


def spec_transposed_pads(case):
    """docs/specification.md §5.1: pads for auto_pad, written out here."""
    if case["auto_pad"] == "valid":
        return (0,) * case["rank"], (0,) * case["rank"]
    if case["auto_pad"] == "none":
        return case["pads_begin"], case["pads_end"]
    begin, end = [], []
    for i, k, s, d, op in zip(case["input_size"], case["kernel_size"], case["stride"],
                              case["dilation"], case["output_padding"]):
        total = s * (i - 1) + op + (k - 1) * d + 1 - i * s
        half = total // 2
        if case["auto_pad"] == "same_upper":
            begin.append(half)
            end.append(total - half)
        else:
            begin.append(total - half)
            end.append(half)
    return tuple(begin), tuple(end)


def spec_scatter_reads(case):
    """int (*O, *I) by walking every (src element, tap) pair: dst[i*S + k*D - P_b]."""
    pads_begin, pads_end = spec_transposed_pads(case)
    out = tuple(s * (i - 1) + (k - 1) * d + 1 + op - pb - pe for i, k, s, d, op, pb, pe in
                zip(case["input_size"], case["kernel_size"], case["stride"],
                    case["dilation"], case["output_padding"], pads_begin, pads_end))
    reads = np.zeros((*out, *case["input_size"]), dtype=np.int64)
    for i in itertools.product(*map(range, case["input_size"])):
        for k in itertools.product(*map(range, case["kernel_size"])):
            y = tuple(ii * s + kk * d - pb for ii, kk, s, d, pb in
                      zip(i, k, case["stride"], case["dilation"], pads_begin))
            if all(0 <= yy < o for yy, o in zip(y, out)):
                reads[y + i] += 1
    return out, reads


def test_forward_grid_matches_convolve_and_reference():
    covered = set()
    for case in forward_cases():
        state = explorer_state(**case)
        shape, error = convolve_call(case)
        if error is not None:
            assert state.error == error, case
            continue
        assert state.error is None, (case, state.error)
        assert state.dst_shape == shape, case
        assert state.output_shape == shape[1:-1], case
        np.testing.assert_array_equal(state.reads, reference_reads(case, state.output_shape),
                                      err_msg=str(case))
        # the selected output's (src, tap) pairs are its row of the windows
        counts = np.zeros(case["input_size"], dtype=np.int64)
        for i, _ in state.selected_sources:
            counts[i] += 1
        np.testing.assert_array_equal(counts, state.reads[state.selected], err_msg=str(case))
        assert state.auto_choice == convlab.select_algorithm(
            np.empty((1, *case["input_size"], case["in_channels"]), np.float32),
            np.empty((*case["kernel_size"], case["in_channels"] // case["groups"],
                      case["out_channels"]), np.float32),
            strides=case["stride"], dilations=case["dilation"],
            pads_begin=case["pads_begin"], pads_end=case["pads_end"],
            auto_pad=case["auto_pad"], groups=case["groups"],
            data_dilations=case["data_dilation"], padding_mode=case["padding_mode"])
        covered.add(("rank", case["rank"]))
        covered.add(("auto_pad", case["auto_pad"]))
        covered.add(("padding_mode", case["padding_mode"]))
        covered.add(("groups", case["groups"]))
        covered.add(("data_dilation", max(case["data_dilation"]) > 1))
        if case["auto_pad"] == "none":
            covered.add(("negative pad", min(case["pads_begin"] + case["pads_end"]) < 0))
            covered.add(("asymmetric pads", case["pads_begin"] != case["pads_end"]))
    expected = ({("rank", r) for r in (1, 2)} | {("auto_pad", a) for a in AUTO_PADS}
                | {("padding_mode", m) for m in PADDING_MODES}
                | {("groups", g) for g in (1, 2)} | {("data_dilation", True),
                                                     ("negative pad", True),
                                                     ("asymmetric pads", True)})
    assert expected <= covered, expected - covered


def test_transposed_grid_matches_conv_transpose_and_the_scatter_formula():
    covered = set()
    for case in transposed_cases():
        state = explorer_state(**case)
        ic, g = case["in_channels"], case["groups"]
        src = np.ones((1, *case["input_size"], ic), np.float32)
        weights = np.ones((*case["kernel_size"], case["out_channels"] // g, ic), np.float32)
        try:
            dst = convlab.conv_transpose(
                src, weights, strides=case["stride"], dilations=case["dilation"],
                pads_begin=case["pads_begin"], pads_end=case["pads_end"],
                auto_pad=case["auto_pad"], groups=g, output_padding=case["output_padding"])
        except (ValueError, TypeError) as error:
            assert state.error == f"{type(error).__name__}: {error}", case
            continue
        assert state.error is None, (case, state.error)
        assert state.dst_shape == dst.shape, case
        out, reads = spec_scatter_reads(case)
        assert state.output_shape == out, case
        np.testing.assert_array_equal(state.reads, reads, err_msg=str(case))
        assert sorted(state.selected_sources) == sorted(
            (i, k) for i in itertools.product(*map(range, case["input_size"]))
            for k in itertools.product(*map(range, case["kernel_size"]))
            if tuple(ii * s + kk * d - pb for ii, kk, s, d, pb in
                     zip(i, k, case["stride"], case["dilation"],
                         spec_transposed_pads(case)[0])) == state.selected)
        covered.add(("rank", case["rank"]))
        covered.add(("auto_pad", case["auto_pad"]))
        covered.add(("groups", g))
        covered.add(("stride > 1", max(case["stride"]) > 1))
    expected = ({("rank", r) for r in (1, 2)} | {("auto_pad", a) for a in AUTO_PADS}
                | {("groups", g) for g in (1, 2)} | {("stride > 1", True)})
    assert expected <= covered, expected - covered


def test_formula_has_the_numbers_filled_in():
    state = explorer_state(input_size=7, kernel_size=3, stride=2, pads_begin=1, pads_end=1)
    assert state.output_shape == (4,)
    assert ("O = floor((I + P_b + P_e - ((K-1)*D + 1)) / S) + 1 = "
            "floor((7 + 1 + 1 - (2*1 + 1)) / 2) + 1 = floor(6/2) + 1 = 4") in state.formula
    # docs/specification.md §2.3's example: I = 6, K = 3, S = 2 pads (0, 1) / (1, 0)
    upper = explorer_state(input_size=6, kernel_size=3, stride=2, auto_pad="same_upper")
    assert upper.problem.pads_begin == (0,) and upper.problem.pads_end == (1,)
    assert "P_b = floor(1/2) = 0, P_e = 1 - 0 = 1" in upper.formula
    lower = explorer_state(input_size=6, kernel_size=3, stride=2, auto_pad="same_lower")
    assert "P_e = floor(1/2) = 0, P_b = 1 - 0 = 1" in lower.formula
    stretched = explorer_state(input_size=5, kernel_size=3, data_dilation=2)
    assert "I' = L*(I-1) + 1 = 2*(5-1) + 1 = 9" in stretched.formula
    assert stretched.output_shape == (7,)
    transposed = explorer_state(transposed=True, input_size=4, kernel_size=3, stride=2,
                                pads_begin=1, pads_end=1, output_padding=1)
    assert ("= 2*(4-1) + 2*1 + 1 + 1 - 1 - 1 = 8") in transposed.formula
    assert transposed.output_shape == (8,)


def test_padding_modes_show_what_each_pad_holds():
    """reflect: -1 -> 1 and I -> I-2; replicate: the edge; circular: t mod I (§2.6)."""
    held = {mode: explorer_state(input_size=5, kernel_size=3, pads_begin=2, pads_end=2,
                                 padding_mode=mode).frame_source.tolist()
            for mode in PADDING_MODES}
    assert held["zeros"] == [-1, -1, 0, 1, 2, 3, 4, -1, -1]
    assert held["reflect"] == [2, 1, 0, 1, 2, 3, 4, 3, 2]
    assert held["replicate"] == [0, 0, 0, 1, 2, 3, 4, 4, 4]
    assert held["circular"] == [3, 4, 0, 1, 2, 3, 4, 0, 1]
    # data dilation first, then the mode pads the stretched input (its zeros are data)
    state = explorer_state(input_size=3, kernel_size=1, pads_begin=1, pads_end=1,
                           data_dilation=2, padding_mode="reflect")
    assert state.frame_source.tolist() == [-1, 0, -1, 1, -1, 2, -1]


INVALID = [
    dict(groups=3, in_channels=4, out_channels=3),
    dict(input_size=7, pads_begin=7, padding_mode="reflect"),
    dict(input_size=3, kernel_size=5),
    dict(input_size=4, pads_begin=-3, pads_end=-2),
    dict(auto_pad="sideways"),
    dict(padding_mode="mirror"),
    dict(stride=0),
    dict(transposed=True, output_padding=2, stride=2),
    dict(transposed=True, groups=2, in_channels=3, out_channels=2),
]


@pytest.mark.parametrize("case", INVALID, ids=str)
def test_invalid_attributes_give_the_library_message(case):
    state = explorer_state(**case)
    assert state.error is not None and not state.ok
    attributes = dict(strides=case.get("stride", 1), pads_begin=case.get("pads_begin", 0),
                      pads_end=case.get("pads_end", 0), auto_pad=case.get("auto_pad", "none"),
                      groups=case.get("groups", 1))
    ic, oc, g = case.get("in_channels", 1), case.get("out_channels", 1), case.get("groups", 1)
    size, kernel = case.get("input_size", 7), case.get("kernel_size", 3)
    src = np.ones((1, size, ic), np.float32)
    with pytest.raises((ValueError, TypeError)) as raised:
        if case.get("transposed"):
            convlab.conv_transpose(src, np.ones((kernel, max(oc // g, 1), ic), np.float32),
                                   output_padding=case.get("output_padding", 0), **attributes)
        else:
            convlab.convolve(src, np.ones((kernel, max(ic // g, 1), oc), np.float32),
                             padding_mode=case.get("padding_mode", "zeros"), **attributes)
    assert state.error == f"{raised.type.__name__}: {raised.value}"
    fig = plot_explorer(state)
    assert str(raised.value) in "".join(t.get_text() for t in fig.axes[0].texts).replace(
        "\n", " ") or str(raised.value)[:40] in fig.axes[0].texts[0].get_text()


def test_transposed_mode_rejects_forward_only_attributes_with_the_library_message():
    state = explorer_state(transposed=True, padding_mode="reflect")
    assert state.error == ("TypeError: conv_transpose() got an unexpected keyword argument "
                           "'padding_mode'")


def tap_cells(ax):
    return [p for p in ax.patches
            if matplotlib.colors.to_hex(p.get_facecolor()) == render.TAP_FACE]


def out_cells(ax):
    return [p for p in ax.patches
            if matplotlib.colors.to_hex(p.get_facecolor()) == render.OUT_FACE]


def test_widget_redraws_from_code_headless():
    explorer = explore(interactive=True, input_size=7, kernel_size=3)
    assert isinstance(explorer, Explorer)
    c = explorer.controls
    assert explorer.state.output_shape == (5,) and explorer.state.selected == (2,)

    c["stride"].value = 2
    c["pads_begin"].value = 1
    c["pads_end"].value = 2
    c["padding_mode"].value = "replicate"
    expected = explorer_state(input_size=7, kernel_size=3, stride=2, pads_begin=1,
                              pads_end=2, padding_mode="replicate", selected=(2,))
    assert explorer.state.output_shape == expected.output_shape == (4,)
    np.testing.assert_array_equal(explorer.state.reads, expected.reads)
    assert c["selected_1"].max == 3
    c["selected_1"].value = 3
    assert explorer.state.selected == (3,)
    # dst[3] reads padded positions 5, 6, 7 -> src 5, 6 and the end pad, which copies 6
    assert explorer.state.selected_sources == [((5,), (0,)), ((6,), (1,)), ((6,), (2,))]
    src_ax, dst_ax = explorer.figure.axes[:2]
    assert len(tap_cells(src_ax)) == 3
    (selected,) = out_cells(dst_ax)
    assert selected.get_x() == 3
    assert "floor((7 + 1 + 2 - (2*1 + 1)) / 2) + 1" in explorer.text.value

    c["rank"].value = 2
    c["kernel_size"].value = 2
    assert explorer.state.rank == 2 and explorer.state.ok
    assert explorer.state.output_shape == (5, 5)
    assert not c["selected_0"].disabled and c["selected_0"].max == 4
    c["selected_0"].value = 1
    c["selected_1"].value = 4
    assert explorer.state.selected == (1, 4)
    assert len(tap_cells(explorer.figure.axes[0])) == 4

    c["auto_pad"].value = "same_lower"
    assert c["pads_begin"].disabled and explorer.state.output_shape == (4, 4)

    c["transposed"].value = True
    assert c["padding_mode"].disabled and c["data_dilation"].disabled
    assert not c["output_padding"].disabled
    # replicate is still selected: conv_transpose has no such keyword, and says so
    assert "padding_mode" in explorer.state.error
    assert "unexpected keyword argument" in explorer.text.value
    c["padding_mode"].value = "zeros"
    assert explorer.state.ok and explorer.state.transposed
    assert explorer.state.output_shape == (14, 14)          # same_lower: O = I*S
    assert explorer.state.auto_choice == "col2im"           # a stride above 1


def test_widget_shows_errors_instead_of_raising():
    explorer = explore(interactive=True, input_size=4, kernel_size=3)
    explorer.controls["pads_begin"].value = -2
    explorer.controls["pads_end"].value = -2
    assert not explorer.state.ok
    assert "ValueError" in explorer.text.value
    assert explorer.controls["selected_1"].disabled
    explorer.controls["pads_begin"].value = 0
    explorer.controls["pads_end"].value = 0
    assert explorer.state.ok and not explorer.controls["selected_1"].disabled
    explorer.controls["in_channels"].value = 3
    explorer.controls["groups"].value = 2
    assert explorer.state.error == "ValueError: groups=2 must divide IC=3 (src channels)"
    assert "must divide IC=3" in explorer.text.value


def test_static_figure_without_a_widget_frontend(monkeypatch):
    # outside a Jupyter kernel (as here) the same state comes back as a figure
    fig = explore(input_size=6, kernel_size=3, stride=2, auto_pad="same_upper")
    assert isinstance(fig, matplotlib.figure.Figure)
    src_ax, dst_ax = fig.axes[:2]
    assert len(tap_cells(src_ax)) == 3 and len(out_cells(dst_ax)) == 1
    assert "ceil(6/2) = 3" in fig.axes[2].texts[0].get_text()
    # and without ipywidgets, even when asked for the default
    monkeypatch.setitem(sys.modules, "ipywidgets", None)
    assert isinstance(explore(), matplotlib.figure.Figure)
    with pytest.raises(ImportError, match="ipywidgets"):
        explore(interactive=True)


def test_explore_is_exported():
    assert convlab.viz.explore is explore
    assert "explore" in convlab.viz.__all__
