"""An interactive explorer of every attribute of a convolution, computed by convlab itself.

:func:`explorer_state` takes the attributes a reader picks (rank, sizes, stride, dilation,
pads, ``auto_pad``, groups, data dilation, padding mode, transposed or not) and returns an
:class:`ExplorerState`: the windows, the output shape with its formula filled in, the
src elements one output reads, and what ``algorithm="auto"`` would run and why. Every
answer comes from the library: the problem from :func:`convlab.make_problem` (or the
transposed problem), the windows from :func:`convlab.viz.windows` and
:func:`convlab.viz.scatter_contributions`, which run the kernels on one-hot inputs, what
each padded position holds from a one-hot probe of :func:`convlab.convolve` with the
padding mode and data dilation, and the choice from :func:`convlab.explain`. Arguments
the library rejects give a state holding its ``ValueError``/``TypeError`` text instead.

:func:`plot_explorer` draws a state. :func:`explore` wires ipywidgets sliders and
dropdowns to :func:`explorer_state` and redraws on each change; without ipywidgets, or
outside a Jupyter kernel, it returns the static figure of the same state.

A transposed convolution has no data dilation of its own: its stride is one. It is a
forward convolution of the input stretched by the strides (``S - 1`` zeros between
neighbours, docs/specification.md §5.1), which is what ``data_dilations`` does for a
forward one (§2.5).
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import convlab
from convlab.ops import transpose as _transpose
from convlab.problem.params import AUTO_PADS, PADDING_MODES, parse_auto_pad
from convlab.viz import probe, render
from convlab.viz.channels import ChannelMap, channel_connectivity
from convlab.viz.transpose import Scatter, scatter_contributions
from convlab.viz.windows import windows

# The widget's ranges: small enough that each redraw (a handful of one-hot convolutions
# and one PNG) takes a fraction of a second.
SIZE_RANGE = (1, 12)
KERNEL_RANGE = (1, 5)
STRIDE_RANGE = (1, 4)
DILATION_RANGE = (1, 3)
PAD_RANGE = (-2, 4)
CHANNEL_RANGE = (1, 8)


@dataclass(frozen=True)
class ExplorerState:
    """Everything the explorer shows for one set of attributes.

    Attributes
    ----------
    params : dict
        The attributes as given to :func:`explorer_state`, per-axis values as tuples.
    error : str or None
        The library's ``ValueError``/``TypeError`` text (``"ValueError: ..."``) when it
        rejects the attributes; every other field but ``params`` is then empty.
    problem : ConvProblem or TransposeProblem
        The resolved problem (N = 1), ``auto_pad`` turned into pads.
    input_shape, kernel_shape, output_shape : tuple of int
        Spatial extents: src as the caller gives it (before data dilation), kernel, dst.
    dst_shape : tuple of int
        The whole dst array, ``(1, *output_shape, OC)`` (NXC).
    formula : str
        The output extent per axis, with its formula and the numbers substituted (and the
        data dilation or ``auto_pad`` steps that lead to it).
    reads : numpy.ndarray of int, shape ``(*output_shape, *input_shape)``
        How many taps of output ``o`` multiply ``src[i]``: the windows. A tap on zero
        padding or an inserted zero reads nothing; a tap on a pad that ``reflect``,
        ``replicate`` or ``circular`` fills reads the src element copied there.
    taps : numpy.ndarray of int, shape ``(*output_shape, *kernel_shape, r)`` or None
        Forward only: the position each tap reads in the stretched input's coordinates
        (``o*S + k*D - P_b``, docs/specification.md §1.1), possibly in the pads.
    frame_bounds : tuple of (int, int)
        Forward only: per axis the padded extent ``[-P_b, I' + P_e)`` in those coordinates
        (``I'`` the stretched extent); transposed: ``[0, I)``.
    frame_source : numpy.ndarray of int, shape of the padded extent, or None
        Forward only: the flat src index each padded position holds, -1 for a zero
        (padding or inserted by data dilation).
    stretched_shape : tuple of int
        Forward: ``I' = L*(I-1) + 1`` per axis; transposed: ``S*(I-1) + 1``.
    scatter : Scatter or None
        Transposed only: where every (src element, tap) pair lands.
    selected : tuple of int
        The output cell whose reads are listed (clipped into the output shape).
    selected_sources : list of (src index, tap index)
        The (i, k) pairs summed into ``dst[selected]``, in tap order (forward) or src order
        (transposed).
    channels : ChannelMap
        Which input channels feed which output channels (groups).
    auto_choice : str
        What ``algorithm="auto"`` runs for this layer (N = 1, float32).
    auto_reason : str
        One line on why: the choice's estimate against the next best, and what cannot run.
    explanation : str
        The whole :func:`convlab.explain` account.
    """

    params: dict[str, Any]
    error: str | None = None
    problem: Any = None
    input_shape: tuple[int, ...] = ()
    kernel_shape: tuple[int, ...] = ()
    output_shape: tuple[int, ...] = ()
    dst_shape: tuple[int, ...] = ()
    formula: str = ""
    reads: np.ndarray | None = None
    taps: np.ndarray | None = None
    frame_bounds: tuple[tuple[int, int], ...] = ()
    frame_source: np.ndarray | None = None
    stretched_shape: tuple[int, ...] = ()
    scatter: Scatter | None = None
    selected: tuple[int, ...] = ()
    selected_sources: list[tuple[tuple[int, ...], tuple[int, ...]]] = field(
        default_factory=list)
    channels: ChannelMap | None = None
    auto_choice: str = ""
    auto_reason: str = ""
    explanation: str = ""

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def transposed(self) -> bool:
        return bool(self.params.get("transposed"))

    @property
    def rank(self) -> int:
        return int(self.params["rank"])

    def read_by(self, output_index: Sequence[int]) -> np.ndarray:
        """int ``(n, r)``: the src coordinates ``dst[output_index]`` reads, in C order."""
        if self.reads is None:
            return np.zeros((0, self.rank), dtype=np.int64)
        return np.argwhere(self.reads[tuple(output_index)] > 0)


def _per_axis(name: str, value, rank: int) -> tuple[int, ...]:
    """An int for every axis, or a sequence of ``rank`` ints (checked by the library later)."""
    if isinstance(value, (int, np.integer)):
        return (int(value),) * rank
    values = tuple(value)
    if len(values) != rank:
        raise ValueError(f"{name}={value!r} has {len(values)} entries; expected {rank} "
                         f"(rank={rank}) or one int")
    return values


def _pad_split_text(auto_pad: str, total: int) -> str:
    half = total // 2
    if auto_pad == "same_upper":
        return f"P_b = floor({total}/2) = {half}, P_e = {total} - {half} = {total - half}"
    return f"P_e = floor({total}/2) = {half}, P_b = {total} - {half} = {total - half}"


def _forward_formula(p, source, stretched, pads_begin, pads_end, auto_pad,
                     data_dilations) -> str:
    lines = []
    for a in range(p.rank):
        head = f"axis {a}: " if p.rank > 1 else ""
        i, k, s, d = source[a], p.kernel_shape[a], p.strides[a], p.dilations[a]
        pb, pe, o = pads_begin[a], pads_end[a], p.output_shape[a]
        ii = stretched[a]
        if data_dilations[a] > 1:
            lines.append(f"{head}I' = L*(I-1) + 1 = {data_dilations[a]}*({i}-1) + 1 = {ii}"
                         f"   (data dilation: {data_dilations[a] - 1} zeros between src "
                         f"elements)")
            name = "I'"
        else:
            name = "I"
        if auto_pad in ("same_upper", "same_lower"):
            out = -(-ii // s)
            total = max(0, (out - 1) * s + (k - 1) * d + 1 - ii)
            lines.append(f"{head}{auto_pad}: O = ceil({name}/S) = ceil({ii}/{s}) = {out}; "
                         f"total pad = max(0, (O-1)*S + (K-1)*D + 1 - {name}) = "
                         f"max(0, {out - 1}*{s} + {k - 1}*{d} + 1 - {ii}) = {total}: "
                         + _pad_split_text(auto_pad, total))
        elif auto_pad == "valid":
            lines.append(f"{head}valid: P_b = P_e = 0")
        numerator = ii + pb + pe - ((k - 1) * d + 1)
        lines.append(f"{head}O = floor(({name} + P_b + P_e - ((K-1)*D + 1)) / S) + 1 = "
                     f"floor(({ii} + {pb} + {pe} - ({k - 1}*{d} + 1)) / {s}) + 1 = "
                     f"floor({numerator}/{s}) + 1 = {numerator // s + 1}")
        if numerator // s + 1 != o:
            raise RuntimeError(f"the output extent formula gives {numerator // s + 1} on axis "
                               f"{a}; the problem says {o} ({p.describe()})")
    return "\n".join(lines)


def _transposed_formula(p, auto_pad, output_padding) -> str:
    lines = []
    for a in range(p.rank):
        head = f"axis {a}: " if p.rank > 1 else ""
        i, k, s, d = p.input_shape[a], p.kernel_shape[a], p.strides[a], p.dilations[a]
        pb, pe, op, o = p.pads_begin[a], p.pads_end[a], output_padding[a], p.output_shape[a]
        if auto_pad in ("same_upper", "same_lower"):
            total = s * (i - 1) + op + (k - 1) * d + 1 - i * s
            lines.append(f"{head}{auto_pad}: O = I*S = {i}*{s} = {i * s}; total pad = "
                         f"S*(I-1) + output_padding + (K-1)*D + 1 - O = {s}*({i}-1) + {op} + "
                         f"{k - 1}*{d} + 1 - {i * s} = {total}: "
                         + _pad_split_text(auto_pad, total))
        elif auto_pad == "valid":
            lines.append(f"{head}valid: P_b = P_e = 0")
        value = s * (i - 1) + (k - 1) * d + 1 + op - pb - pe
        lines.append(f"{head}O = S*(I-1) + (K-1)*D + 1 + output_padding - P_b - P_e = "
                     f"{s}*({i}-1) + {k - 1}*{d} + 1 + {op} - {pb} - {pe} = {value}")
        if value != o:
            raise RuntimeError(f"the output extent formula gives {value} on axis {a}; the "
                               f"problem says {o} ({p.describe()})")
    return "\n".join(lines)


def _auto_reason(explanation) -> str:
    """The choice against the next best auto contender, and what is out of the running."""
    threads = explanation.threads
    contenders = [c for c in explanation.candidates if c.viable and c.auto and not c.excluded]
    ranked = sorted(((c.compared(False, threads), c.name) for c in contenders),
                    key=lambda pair: pair[0])
    chosen = next((c for c in contenders if c.name == explanation.choice), None)
    parts = []
    if len(contenders) == 1 and chosen is not None:
        note = (chosen.estimate.inputs.get("note") if chosen.estimate is not None else None)
        parts.append(f"{chosen.name} is the only auto contender" + (f" ({note})" if note else ""))
    elif ranked and ranked[0][1] == explanation.choice and math.isfinite(ranked[0][0]):
        parts.append(f"{explanation.choice} has the lowest estimate ({ranked[0][0] * 1e6:.1f} us "
                     f"on {threads} thread{'s' if threads != 1 else ''}, margins included)")
        if len(ranked) > 1 and math.isfinite(ranked[1][0]):
            parts.append(f"next {ranked[1][1]} {ranked[1][0] * 1e6:.1f} us")
    else:
        parts.append(f"auto picks {explanation.choice}")
    others = [c.name for c in explanation.candidates if c.viable and not c.auto]
    if others:
        parts.append("not auto contenders for this layer: " + ", ".join(others))
    excluded = [f"{c.name} ({c.excluded})" for c in explanation.candidates
                if c.viable and c.auto and c.excluded]
    if excluded:
        parts.append("excluded: " + "; ".join(excluded))
    unable = [f"{c.name} ({c.reason})" for c in explanation.candidates if not c.viable]
    if unable:
        parts.append("cannot run: " + "; ".join(unable))
    return "; ".join(parts)


def _frame_source(source, pads_begin, pads_end, data_dilations, padding_mode) -> np.ndarray:
    """int (*padded extent): the flat src index each padded position holds, or -1.

    A one-hot probe with a 1x...x1 kernel, stride 1: output ``u`` is padded position ``u``,
    so the kernel itself says what every pad and inserted zero holds in this mode.
    """
    r = len(source)
    hits = probe.tap_hits(source, (1,) * r, pads_begin=pads_begin, pads_end=pads_end,
                          data_dilations=data_dilations, padding_mode=padding_mode)
    flat = hits.reshape(math.prod(source), -1)                  # (prod(I), prod(frame))
    frame_shape = hits.shape[r:2 * r]
    held = np.where(flat.any(axis=0), np.argmax(flat, axis=0), -1)
    if np.any(flat.sum(axis=0) > 1):
        raise RuntimeError("a padded position read more than one src element")
    return held.reshape(frame_shape)


def _forward(params: dict) -> tuple[dict, Any]:
    r = params["rank"]
    source = params["input_size"]
    kernel = params["kernel_size"]
    ic, oc, groups = params["in_channels"], params["out_channels"], params["groups"]
    attributes = dict(strides=params["stride"], dilations=params["dilation"],
                      pads_begin=params["pads_begin"], pads_end=params["pads_end"],
                      auto_pad=params["auto_pad"], groups=groups,
                      data_dilations=params["data_dilation"],
                      padding_mode=params["padding_mode"])
    w_icg = ic // groups if ic % groups == 0 else ic
    src_shape, weights_shape = (1, *source, ic), (*kernel, w_icg, oc)
    problem = convlab.make_problem(src_shape, np.float32, weights_shape, np.float32,
                                   **attributes)
    data_dilations = problem.data_dilations or (1,) * r
    if problem.materialized_pads is not None:
        pads_begin, pads_end = problem.materialized_pads
    else:
        pads_begin, pads_end = problem.pads_begin, problem.pads_end
    stretched = tuple(step * (i - 1) + 1 for step, i in zip(data_dilations, source))

    win = windows(stretched, kernel, strides=problem.strides, dilations=problem.dilations,
                  pads_begin=pads_begin, pads_end=pads_end)
    held = _frame_source(source, pads_begin, pads_end, data_dilations, problem.padding_mode)
    output_shape = win.output_shape
    frame_index = win.taps + np.array(pads_begin)               # (*O, *K, r)
    tap_source = held[tuple(np.moveaxis(frame_index, -1, 0))]   # (*O, *K)
    reads = np.zeros((*output_shape, math.prod(source)), dtype=np.int64)
    flat_o = np.broadcast_to(np.arange(math.prod(output_shape)).reshape(
        *output_shape, *(1,) * r), tap_source.shape)
    valid = tap_source >= 0
    np.add.at(reads.reshape(math.prod(output_shape), -1),
              (flat_o[valid], tap_source[valid]), 1)
    reads = reads.reshape(*output_shape, *source)

    def sources(selected):
        pairs = []
        for k in np.ndindex(*kernel):
            i = int(tap_source[tuple(selected) + k])
            if i >= 0:
                pairs.append((tuple(int(v) for v in np.unravel_index(i, source)), k))
        return pairs

    explanation = convlab.explain(np.empty(src_shape, np.float32),
                                  np.empty(weights_shape, np.float32), **attributes)
    fields = dict(
        problem=problem, input_shape=source, kernel_shape=kernel, output_shape=output_shape,
        dst_shape=(1, *output_shape, oc),
        formula=_forward_formula(problem, source, stretched, pads_begin, pads_end,
                                 _canonical_auto_pad(params), data_dilations),
        reads=reads, taps=win.taps,
        frame_bounds=tuple((-pb, s + pe) for s, pb, pe in zip(stretched, pads_begin,
                                                                 pads_end)),
        frame_source=held, stretched_shape=stretched,
        channels=channel_connectivity(ic, oc, groups),
        auto_choice=explanation.choice, auto_reason=_auto_reason(explanation),
        explanation=str(explanation))
    return fields, sources


def _canonical_auto_pad(params: dict) -> str:
    """The canonical spelling of ``auto_pad`` (ONNX's are accepted too)."""
    return parse_auto_pad(params["auto_pad"])


def _transposed(params: dict) -> tuple[dict, Any]:
    r = params["rank"]
    source = params["input_size"]
    kernel = params["kernel_size"]
    ic, oc, groups = params["in_channels"], params["out_channels"], params["groups"]
    if params["padding_mode"] != "zeros" or any(v != 1 for v in params["data_dilation"]):
        # the library's own answer: conv_transpose has neither keyword
        convlab.conv_transpose(np.zeros((1, *source, ic), np.float32),
                               np.zeros((*kernel, 1, ic), np.float32),
                               padding_mode=params["padding_mode"],
                               data_dilations=params["data_dilation"])
    attributes = dict(strides=params["stride"], dilations=params["dilation"],
                      pads_begin=params["pads_begin"], pads_end=params["pads_end"],
                      auto_pad=params["auto_pad"], output_padding=params["output_padding"])
    src_shape = (1, *source, ic)
    weights_shape = (*kernel, max(oc // max(groups, 1), 1), ic)
    problem = _transpose.make_transpose_problem(src_shape, np.float32, weights_shape,
                                                np.float32, groups=groups, **attributes)
    if oc % groups:
        # conv_transpose's weights hold OC/G output channels per group, so no call has this OC
        raise ValueError(f"out_channels={oc} is not a multiple of groups={groups}: "
                         f"conv_transpose's weights hold OC/G output channels per group")
    scatter = scatter_contributions(source, kernel, **attributes)
    output_shape = scatter.output_shape
    reads = np.zeros((*output_shape, *source), dtype=np.int64)
    inside = scatter.inside
    for ik in zip(*np.nonzero(inside)):
        reads[tuple(scatter.targets[ik]) + tuple(ik[:r])] += 1
    explanation = _transpose.explain(problem)
    reason = _auto_reason(explanation)
    if explanation.choice != _transpose.COL2IM:
        reason = (f"{reason}; the forward choice on the input stretched by the strides: "
                  f"{_transpose.algorithm_run(problem)}")
    stretched = tuple(s * (i - 1) + 1 for s, i in zip(problem.strides, source))
    fields = dict(
        problem=problem, input_shape=source, kernel_shape=kernel, output_shape=output_shape,
        dst_shape=(1, *output_shape, problem.out_channels),
        formula=_transposed_formula(problem, _canonical_auto_pad(params),
                                    problem.output_padding),
        reads=reads, frame_bounds=tuple((0, i) for i in source), stretched_shape=stretched,
        scatter=scatter, channels=channel_connectivity(ic, problem.out_channels, groups),
        auto_choice=explanation.choice, auto_reason=reason,
        explanation=str(explanation))
    return fields, scatter.sources


def explorer_state(*, rank: int = 1, input_size: int | Sequence[int] = 7,
                   kernel_size: int | Sequence[int] = 3, stride: int | Sequence[int] = 1,
                   dilation: int | Sequence[int] = 1, pads_begin: int | Sequence[int] = 0,
                   pads_end: int | Sequence[int] = 0, auto_pad: str = "none",
                   groups: int = 1, in_channels: int = 1, out_channels: int = 1,
                   data_dilation: int | Sequence[int] = 1, padding_mode: str = "zeros",
                   transposed: bool = False, output_padding: int | Sequence[int] = 0,
                   selected: Sequence[int] | None = None) -> ExplorerState:
    """Everything the explorer shows for these attributes; never raises for bad ones.

    Parameters
    ----------
    rank : {1, 2}
        Spatial rank. Each per-axis attribute is one int (every axis) or ``rank`` ints.
    input_size, kernel_size : int or sequence of int
        Spatial extents I (before data dilation) and K.
    stride, dilation, pads_begin, pads_end, auto_pad, groups :
        As :func:`convlab.convolve` (``strides``, ``dilations``, ...) or, when
        ``transposed``, :func:`convlab.conv_transpose`.
    in_channels, out_channels : int
        IC and OC (for ``groups``).
    data_dilation : int or sequence of int
        :func:`convlab.convolve`'s ``data_dilations``; forward only.
    padding_mode : {"zeros", "reflect", "replicate", "circular"}
        Forward only.
    transposed : bool
        Explore :func:`convlab.conv_transpose` (with ``output_padding``) instead.
    selected : sequence of int, optional
        The output cell whose reads are listed; clipped into the output shape; default
        the middle one.

    Returns
    -------
    ExplorerState
        With ``error`` set to the library's message when it rejects the attributes.
    """
    params: dict[str, Any] = dict(rank=rank, auto_pad=auto_pad, groups=groups,
                                  in_channels=in_channels, out_channels=out_channels,
                                  padding_mode=padding_mode, transposed=bool(transposed))
    try:
        if rank not in (1, 2):
            raise ValueError(f"rank={rank!r}; the explorer draws 1-D or 2-D problems")
        for name, value in (("input_size", input_size), ("kernel_size", kernel_size),
                            ("stride", stride), ("dilation", dilation),
                            ("pads_begin", pads_begin), ("pads_end", pads_end),
                            ("data_dilation", data_dilation),
                            ("output_padding", output_padding)):
            params[name] = _per_axis(name, value, rank)
        compute = _transposed if params["transposed"] else _forward
        fields, sources_of = compute(params)
        cell = _clip(selected, fields["output_shape"])
        params["selected"] = cell
        fields["selected_sources"] = sources_of(cell)
    except (ValueError, TypeError) as error:
        return ExplorerState(params=params, error=f"{type(error).__name__}: {error}")
    return ExplorerState(params=params, selected=cell, **fields)


def _clip(selected, shape) -> tuple[int, ...]:
    if selected is None:
        return tuple(o // 2 for o in shape)
    selected = tuple(int(v) for v in selected)
    if len(selected) != len(shape):
        raise ValueError(f"selected={selected} has {len(selected)} entries; expected "
                         f"{len(shape)} (the output rank)")
    return tuple(min(max(v, 0), o - 1) for v, o in zip(selected, shape))


# --------------------------------------------------------------------------- drawing

def _grid_xy(rank: int, index) -> tuple[int, int]:
    """(x, y) of a cell's lower-left corner: 1-D is one row, 2-D row 0 at the top."""
    if rank == 1:
        return int(index[0]), -1
    return int(index[1]), -int(index[0]) - 1


def _label(rank: int, index) -> str:
    return str(index[0]) if rank == 1 else f"{index[0]},{index[1]}"


def _finish_grid(ax, rank: int, lows, highs, title: str):
    if rank == 1:
        lows, highs = (0, *lows), (1, *highs)
    render.bare(ax, (lows[1] - 0.2, highs[1] + 0.2), (-highs[0] - 0.2, -lows[0] + 0.2))
    ax.set_xticks(np.arange(lows[1], highs[1]) + 0.5,
                  [str(c) for c in range(lows[1], highs[1])], fontsize=7)
    if rank == 2:
        ax.set_yticks(-np.arange(lows[0], highs[0]) - 0.5,
                      [str(r) for r in range(lows[0], highs[0])], fontsize=7)
    else:
        ax.set_yticks([])
    ax.set_title(title, fontsize=9)


def _draw_forward_src(ax, state: ExplorerState):
    """The padded, stretched src: src elements, inserted zeros, pads (with what they hold),
    cropped elements; the selected output's taps in orange."""
    r, p = state.rank, state.params
    bounds = state.frame_bounds
    lows = [min(0, lo) for lo, _ in bounds]
    highs = [max(s, hi) for s, (_, hi) in zip(state.stretched_shape, bounds)]
    steps = p["data_dilation"]
    assert state.frame_source is not None and state.taps is not None
    tapped = {tuple(int(v) for v in t)
              for t in state.taps[state.selected].reshape(-1, r)}
    fontsize = 7 if r == 1 else 6
    for t in np.ndindex(*(hi - lo for lo, hi in zip(lows, highs))):
        t = tuple(v + lo for v, lo in zip(t, lows))
        x, y = _grid_xy(r, t)
        in_frame = all(lo <= v < hi for v, (lo, hi) in zip(t, bounds))
        in_src = all(0 <= v < s for v, s in zip(t, state.stretched_shape))
        if not in_frame:
            render.cell(ax, x, y, render.CROP_FACE, "crop", hatch="xx", fontsize=5,
                        text_colour="white")
            continue
        held = int(state.frame_source[tuple(v - lo for v, (lo, _) in zip(t, bounds))])
        name = "0" if held < 0 else "x" + _label(r, np.unravel_index(held, state.input_shape))
        if in_src and all(v % step == 0 for v, step in zip(t, steps)):
            face, hatch = render.SRC_FACE, None
        elif in_src:
            face, hatch = render.SRC_FACE, ".."          # a zero inserted by data dilation
        else:
            face, hatch = render.PAD_FACE, "///"
        if t in tapped:
            face = render.TAP_FACE
        render.cell(ax, x, y, face, name, hatch=hatch, fontsize=fontsize)
    pads = ", ".join(f"{-lo}/{hi - s}" for (lo, hi), s in zip(bounds, state.stretched_shape))
    title = (f"src I={_shape(state.input_shape)}  padded {pads} ({p['padding_mode']})")
    if any(step > 1 for step in steps):
        title += f"  stretched by L={_shape(steps)} to {_shape(state.stretched_shape)}"
    _finish_grid(ax, r, lows, highs, title)


def _draw_transposed_src(ax, state: ExplorerState):
    """src with the elements whose kernel copies reach the selected output in orange,
    each labelled with the tap that carries it there."""
    r = state.rank
    taps_of: dict[tuple[int, ...], list[str]] = {}
    for i, k in state.selected_sources:
        taps_of.setdefault(i, []).append("k" + _label(r, k))
    fontsize = 7 if r == 1 else 5
    for i in np.ndindex(*state.input_shape):
        x, y = _grid_xy(r, i)
        if i in taps_of:
            render.cell(ax, x, y, render.TAP_FACE, " ".join(taps_of[i]), fontsize=fontsize)
        else:
            render.cell(ax, x, y, render.SRC_FACE, "x" + _label(r, i), fontsize=fontsize)
    _finish_grid(ax, r, [0] * r, list(state.input_shape),
                 f"src I={_shape(state.input_shape)}\norange: feeds the selected output "
                 f"(tap k)")


def _draw_dst(ax, state: ExplorerState):
    r = state.rank
    fontsize = 7 if r == 1 else 5
    for o in np.ndindex(*state.output_shape):
        x, y = _grid_xy(r, o)
        if o == state.selected:
            render.cell(ax, x, y, render.OUT_FACE, _label(r, o), fontsize=fontsize,
                        text_colour="white")
        else:
            render.cell(ax, x, y, render.SRC_FACE, _label(r, o), fontsize=fontsize)
    _finish_grid(ax, r, [0] * r, list(state.output_shape),
                 f"dst O={_shape(state.output_shape)}  (blue: selected)")


def _shape(values) -> str:
    return "x".join(map(str, values))


def summary(state: ExplorerState) -> str:
    """The explorer's text: the formula, dst's shape, the selected output's reads and
    auto's choice (or the library's error)."""
    if not state.ok:
        return f"The library rejects these attributes:\n{state.error}"
    r = state.rank
    reads = ", ".join(f"x[{_label(r, i)}]·w[{_label(r, k)}]"
                      for i, k in state.selected_sources) or "nothing (only padding zeros)"
    what = "conv_transpose" if state.transposed else "convolve"
    groups = state.params["groups"]
    lines = [state.formula,
             f"{what}: dst shape (N, O..., OC) = {state.dst_shape}",
             f"dst[{_label(r, state.selected)}] = {reads}"]
    if groups > 1 and state.channels is not None:
        lines.append(f"groups={groups}: each output channel oc reads only the "
                     f"{state.channels.in_channels // groups} input channels of its group "
                     f"g = oc // {state.channels.out_channels // groups}")
    lines.append(f"auto: {state.auto_choice}: {state.auto_reason}")
    return "\n".join(lines)


def plot_explorer(state: ExplorerState, *, figsize=None, with_text: bool = True):
    """Draw an :class:`ExplorerState`: src (padded, stretched) above or beside dst, the
    selected output and the src elements it reads highlighted, and the summary text
    (:func:`summary`; ``with_text=False`` leaves it out, as the widget shows it as text).

    Returns
    -------
    matplotlib.figure.Figure
    """
    import textwrap

    text = "\n".join(textwrap.fill(line, 110, subsequent_indent="    ")
                     for line in summary(state).splitlines())
    if not state.ok:
        fig = render.new_figure(figsize or (7.5, 1.6))
        ax = fig.subplots()
        ax.axis("off")
        ax.text(0, 1, text, va="top", ha="left", fontsize=9, color="#b00020",
                family="monospace", wrap=True)
        return fig
    lines = text.count("\n") + 1 if with_text else 0
    r = state.rank
    src_extent = [hi - lo for lo, hi in state.frame_bounds] if not state.transposed \
        else list(state.input_shape)
    if r == 1:
        width = max(src_extent[0], state.output_shape[0])
        fig = render.new_figure(figsize or (max(7.5, 0.42 * width + 1), 2.6 + 0.16 * lines))
        src_ax, dst_ax, text_ax = fig.subplots(3, 1, height_ratios=[1, 1, 0.12 * lines + 0.2])
    else:
        height = max(src_extent[0], state.output_shape[0])
        fig = render.new_figure(figsize or (
            max(7.5, 0.36 * (src_extent[1] + state.output_shape[1]) + 1.5),
            0.36 * height + 1.2 + 0.16 * lines))
        grid = fig.add_gridspec(2, 2, height_ratios=[max(height, 2) * 0.36,
                                                     0.16 * lines + 0.2],
                                width_ratios=[max(src_extent[1], 2),
                                              max(state.output_shape[1], 2)])
        src_ax, dst_ax = fig.add_subplot(grid[0, 0]), fig.add_subplot(grid[0, 1])
        text_ax = fig.add_subplot(grid[1, :])
    if state.transposed:
        _draw_transposed_src(src_ax, state)
    else:
        _draw_forward_src(src_ax, state)
    _draw_dst(dst_ax, state)
    text_ax.axis("off")
    if with_text:
        text_ax.text(0, 1, text, va="top", ha="left", fontsize=7, family="monospace")
    return fig


# --------------------------------------------------------------------------- widget

def _widgets():
    """ipywidgets when it can show widgets: installed, and running in a Jupyter kernel."""
    try:
        import ipywidgets
        from IPython import get_ipython
    except ImportError:
        return None
    shell = get_ipython()
    if shell is None or not hasattr(shell, "kernel"):
        return None
    return ipywidgets


class Explorer:
    """Sliders and dropdowns wired to :func:`explorer_state`; each change redraws.

    Attributes
    ----------
    controls : dict of str to ipywidgets.Widget
        One control per argument of :func:`explorer_state` (``selected`` is one slider
        per axis, ``selected_0`` and ``selected_1``). Setting ``.value`` from code redraws
        as moving it does.
    state : ExplorerState
        What is shown now.
    figure : matplotlib.figure.Figure
        The figure drawn from ``state`` (shown as a PNG in ``image``).
    widget : ipywidgets.VBox
        The whole explorer; a cell whose value is the Explorer shows it.
    """

    def __init__(self, ipywidgets, **params):
        w = ipywidgets
        defaults = {name: value.default for name, value in
                    _explorer_parameters().items()}
        defaults.update(params)
        first = _first(defaults)
        slider = dict(continuous_update=False, style={"description_width": "initial"},
                      layout=w.Layout(width="240px"))
        self.controls = {
            "transposed": w.Checkbox(value=bool(defaults["transposed"]),
                                     description="transposed (conv_transpose)"),
            "rank": w.ToggleButtons(options=[1, 2], value=defaults["rank"],
                                    description="rank"),
            "input_size": w.IntSlider(value=first("input_size"), min=SIZE_RANGE[0],
                                      max=SIZE_RANGE[1], description="input I", **slider),
            "kernel_size": w.IntSlider(value=first("kernel_size"), min=KERNEL_RANGE[0],
                                       max=KERNEL_RANGE[1], description="kernel K", **slider),
            "stride": w.IntSlider(value=first("stride"), min=STRIDE_RANGE[0],
                                  max=STRIDE_RANGE[1], description="stride S", **slider),
            "dilation": w.IntSlider(value=first("dilation"), min=DILATION_RANGE[0],
                                    max=DILATION_RANGE[1], description="dilation D", **slider),
            "pads_begin": w.IntSlider(value=first("pads_begin"), min=PAD_RANGE[0],
                                      max=PAD_RANGE[1], description="pads_begin P_b",
                                      **slider),
            "pads_end": w.IntSlider(value=first("pads_end"), min=PAD_RANGE[0],
                                    max=PAD_RANGE[1], description="pads_end P_e", **slider),
            "auto_pad": w.Dropdown(options=list(AUTO_PADS), value=defaults["auto_pad"],
                                   description="auto_pad", layout=w.Layout(width="240px"),
                                   style={"description_width": "initial"}),
            "in_channels": w.IntSlider(value=defaults["in_channels"], min=CHANNEL_RANGE[0],
                                       max=CHANNEL_RANGE[1], description="IC", **slider),
            "out_channels": w.IntSlider(value=defaults["out_channels"], min=CHANNEL_RANGE[0],
                                        max=CHANNEL_RANGE[1], description="OC", **slider),
            "groups": w.IntSlider(value=defaults["groups"], min=1, max=CHANNEL_RANGE[1],
                                  description="groups G", **slider),
            "data_dilation": w.IntSlider(value=first("data_dilation"), min=1, max=3,
                                         description="data dilation L", **slider),
            "padding_mode": w.Dropdown(options=list(PADDING_MODES),
                                       value=defaults["padding_mode"],
                                       description="padding_mode",
                                       layout=w.Layout(width="240px"),
                                       style={"description_width": "initial"}),
            "output_padding": w.IntSlider(value=first("output_padding"), min=0, max=3,
                                          description="output_padding", **slider),
            "selected_0": w.IntSlider(value=0, min=0, max=0, description="output row",
                                      **slider),
            "selected_1": w.IntSlider(value=0, min=0, max=0, description="output column",
                                      **slider),
        }
        selected = defaults.get("selected")
        self._selected = None if selected is None else tuple(selected)
        self.image = w.Image(format="png")
        self.text = w.HTML()
        self.state: ExplorerState = explorer_state(**self.values())
        self.figure = None
        names = list(self.controls)
        columns = [names[:6], names[6:12], names[12:]]
        self.widget = w.VBox([
            w.HBox([w.VBox([self.controls[n] for n in column]) for column in columns]),
            self.text, self.image])
        self._updating = False
        for name, control in self.controls.items():
            control.observe(self._on_change(name), names="value")
        self.update()

    def values(self) -> dict[str, Any]:
        """The controls' values as :func:`explorer_state` arguments."""
        c = self.controls
        values = {name: c[name].value for name in
                  ("transposed", "rank", "input_size", "kernel_size", "stride", "dilation",
                   "pads_begin", "pads_end", "auto_pad", "in_channels", "out_channels",
                   "groups", "data_dilation", "padding_mode", "output_padding")}
        values["selected"] = self._selected
        return values

    def _on_change(self, name: str):
        def handler(change):
            if self._updating:
                return
            if name.startswith("selected_"):
                row, column = (self.controls["selected_0"].value,
                               self.controls["selected_1"].value)
                self._selected = (row, column) if self.controls["rank"].value == 2 \
                    else (column,)
            elif name in ("rank", "transposed"):
                self._selected = None
            self.update()
        return handler

    def update(self) -> None:
        """Recompute the state from the controls and redraw; errors go into the widget."""
        import html
        import io

        try:
            self.state = explorer_state(**self.values())
            self.figure = plot_explorer(self.state, with_text=False)
            buffer = io.BytesIO()
            self.figure.savefig(buffer, format="png", dpi=90)
            self.image.value = buffer.getvalue()
            colour = "#000" if self.state.ok else "#b00020"
            self.text.value = (f"<pre style='color:{colour};font-size:11px;"
                               f"white-space:pre-wrap'>{html.escape(summary(self.state))}</pre>")
        except Exception as error:  # a bug must still not break the reader's notebook
            self.text.value = (f"<pre style='color:#b00020'>{html.escape(type(error).__name__)}"
                               f": {html.escape(str(error))}</pre>")
        self._sync_controls()

    def _sync_controls(self) -> None:
        """Enable the controls that apply, and fit the output-cell sliders to dst."""
        c, transposed = self.controls, self.controls["transposed"].value
        rank = c["rank"].value
        c["data_dilation"].disabled = transposed
        c["padding_mode"].disabled = transposed
        c["output_padding"].disabled = not transposed
        explicit = c["auto_pad"].value == "none"
        c["pads_begin"].disabled = not explicit
        c["pads_end"].disabled = not explicit
        self._updating = True
        try:
            shape = self.state.output_shape if self.state.ok else ()
            cell = self.state.selected if self.state.ok else ()
            axes = [("selected_0", 0), ("selected_1", 1)] if rank == 2 else [("selected_1", 0)]
            c["selected_0"].disabled = rank == 1 or not shape
            for name, axis in axes:
                if shape:
                    c[name].max = shape[axis] - 1
                    c[name].value = cell[axis]
                c[name].disabled = not shape
        finally:
            self._updating = False

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)


def _explorer_parameters():
    import inspect

    return {name: p for name, p in inspect.signature(explorer_state).parameters.items()}


def _first(values: dict):
    """A slider holds one value for every axis: the first of a per-axis sequence."""
    def first(name):
        value = values[name]
        return int(value) if isinstance(value, (int, np.integer)) else int(tuple(value)[0])
    return first


def explore(*, interactive: bool | None = None, **params):
    """Explore every attribute of a convolution with sliders and dropdowns.

    Keywords are those of :func:`explorer_state` and set the starting values (one value
    per attribute, applied to every axis). In a Jupyter kernel with ipywidgets installed
    (``pip install "convlab[tutorials]"``) this returns an :class:`Explorer`, which shows
    itself as the cell's value; each change recomputes :func:`explorer_state` and redraws.
    Attributes the library rejects show its error message in place of the figure.

    Otherwise (no ipywidgets, no kernel, or ``interactive=False``) it returns the static
    figure of the same state, :func:`plot_explorer` of :func:`explorer_state`.

    Returns
    -------
    Explorer or matplotlib.figure.Figure
    """
    ipywidgets = _widgets() if interactive is not False else None
    if interactive and ipywidgets is None:
        try:
            import ipywidgets
        except ImportError:
            raise ImportError("convlab.viz.explore(interactive=True) needs ipywidgets; "
                              "install it with: pip install \"convlab[tutorials]\"") from None
    if ipywidgets is None:
        return plot_explorer(explorer_state(**params))
    return Explorer(ipywidgets, **params)
