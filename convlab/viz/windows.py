"""The window of taps each output reads, over the padded input.

``dst[o] = sum_k src[o*S + k*D - P_b] * weights[k]`` (docs/specification.md §1.1, one
channel). For every output ``o`` and tap ``k`` this module finds the src coordinate read,
by running the kernel on one-hot inputs (:mod:`convlab.viz.probe`), and draws it: the
padded input with the taps of one output highlighted, the output grid beside it, and an
animation that slides the window over every output in turn.
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

import convlab
from convlab.problem.params import ConvProblem
from convlab.viz import probe, render

if TYPE_CHECKING:
    from convlab.ops.transpose import TransposeProblem


class ProblemShapes:
    """The shapes of a probed single-channel problem, read off its ``problem``."""

    problem: ConvProblem | TransposeProblem

    @property
    def rank(self) -> int:
        return self.problem.rank

    @property
    def input_shape(self) -> tuple[int, ...]:
        return self.problem.input_shape

    @property
    def kernel_shape(self) -> tuple[int, ...]:
        return self.problem.kernel_shape

    @property
    def output_shape(self) -> tuple[int, ...]:
        return self.problem.output_shape


@dataclass(frozen=True)
class Windows(ProblemShapes):
    """Where every tap of every output lands, for one single-channel problem.

    Attributes
    ----------
    problem : ConvProblem
        The resolved problem (N = IC = OC = 1); ``auto_pad`` is already turned into
        ``pads_begin``/``pads_end``.
    taps : numpy.ndarray of int, shape ``(*O, *K, r)``
        ``taps[o, k]`` is the src coordinate read by tap ``k`` of output ``o``. A
        coordinate outside ``[0, I)`` on some axis lands on zero padding.
    algorithm : str
        The convlab algorithm that was probed (and that computes values in figures).
    """

    problem: ConvProblem
    taps: np.ndarray
    algorithm: str = "direct"

    @property
    def inside(self) -> np.ndarray:
        """bool ``(*O, *K)``: the tap reads a real src element (not padding)."""
        shape = np.array(self.input_shape)
        return np.all((self.taps >= 0) & (self.taps < shape), axis=-1)

    @property
    def padded_bounds(self) -> tuple[tuple[int, int], ...]:
        """Per axis, the padded extent in src coordinates: ``[-P_b, I + P_e)``."""
        return tuple((-pb, i + pe) for i, pb, pe in
                     zip(self.input_shape, self.problem.pads_begin, self.problem.pads_end))

    def outputs(self) -> list[tuple[int, ...]]:
        """Every output position in the order a loop visits them (C order)."""
        return list(itertools.product(*(range(o) for o in self.output_shape)))

    def reads(self, output_index: Sequence[int]) -> np.ndarray:
        """int ``(prod(K), r)``: the src coordinates output ``output_index`` reads, tap by tap."""
        return self.taps[tuple(output_index)].reshape(-1, self.rank)

    def read_counts(self) -> np.ndarray:
        """int ``(*I)``: how many (output, tap) pairs read each src element.

        Zeros mark elements no output reads, as happens when S > (K - 1) * D + 1.
        """
        counts = np.zeros(self.input_shape, dtype=np.int64)
        coords = self.taps[self.inside]
        np.add.at(counts, tuple(coords.T), 1)
        return counts


def windows(input_shape: Sequence[int], kernel_shape: Sequence[int], *, strides=None,
            dilations=None, pads_begin=None, pads_end=None, auto_pad: str = "none",
            algorithm: str = "direct") -> Windows:
    """Find, with the kernel itself, which src coordinate every tap of every output reads.

    The attributes are those of :func:`convlab.convolve`. Two probes run: a padding-free
    convolution over the padded extent ``I + P_b + P_e`` gives each tap's position in the
    padded input (padding included), and the real problem checks that the kernel reads
    exactly those src elements and nothing where the padding is. The positions are also
    compared with docs/specification.md §1.1's ``o*S + k*D - P_b``, so a figure drawn from
    them is both what the kernel does and what the specification says.

    Raises
    ------
    RuntimeError
        If the kernel disagrees with the index formula (a bug in the kernel).
    """
    input_shape, kernel_shape = tuple(input_shape), tuple(kernel_shape)
    problem = convlab.make_problem(
        (1, *input_shape, 1), np.float32, (*kernel_shape, 1, 1), np.float32,
        strides=strides, dilations=dilations, pads_begin=pads_begin, pads_end=pads_end,
        auto_pad=auto_pad)
    r = problem.rank
    padded_shape = tuple(i + pb + pe for i, pb, pe in
                         zip(input_shape, problem.pads_begin, problem.pads_end))

    on_padded = probe.tap_hits(padded_shape, kernel_shape, strides=problem.strides,
                               dilations=problem.dilations, algorithm=algorithm)
    # (*E, *O, *K) -> (*O, *K, prod(E)): each tap of each output must read one position.
    flat = np.moveaxis(on_padded.reshape(math.prod(padded_shape), -1), 0, -1)
    if not np.all(flat.sum(axis=-1) == 1):
        raise RuntimeError(f"algorithm={algorithm!r} did not read exactly one element per tap "
                           f"on the padded input ({problem.describe()})")
    position = np.argmax(flat, axis=-1).reshape(*problem.output_shape, *kernel_shape)
    taps = np.stack(np.unravel_index(position, padded_shape), axis=-1)
    taps = taps - np.array(problem.pads_begin)

    # docs/specification.md §1.1 for the same problem, from the ConvProblem's own numbers
    grids = np.meshgrid(*(np.arange(o) for o in problem.output_shape),
                        *(np.arange(k) for k in kernel_shape), indexing="ij")
    formula = np.stack([grids[a] * problem.strides[a] + grids[r + a] * problem.dilations[a]
                        - problem.pads_begin[a] for a in range(r)], axis=-1)
    if not np.array_equal(taps, formula):
        raise RuntimeError(f"algorithm={algorithm!r} read src elements other than "
                           f"src[o*S + k*D - P_b] ({problem.describe()})")

    result = Windows(problem, taps, algorithm)
    on_src = probe.tap_hits(input_shape, kernel_shape, strides=problem.strides,
                            dilations=problem.dilations, pads_begin=problem.pads_begin,
                            pads_end=problem.pads_end, algorithm=algorithm)
    expected = np.zeros_like(on_src)
    inside = result.inside
    for o_k in zip(*np.nonzero(inside)):
        expected[tuple(taps[o_k]) + o_k] = True
    if not np.array_equal(on_src, expected):
        raise RuntimeError(f"algorithm={algorithm!r} handles padding wrongly: with pads it "
                           f"reads other src elements than without ({problem.describe()})")
    return result


# --------------------------------------------------------------------------- drawing

def _check_drawable(win: Windows):
    """1-D problems are drawn as one row of a 2-D grid; 3-D ones would need a volume."""
    if win.rank not in (1, 2):
        raise ValueError(f"windows of rank {win.rank} cannot be drawn; expected a 1-D or 2-D "
                     f"problem")


def _as2d(win: Windows, coords: np.ndarray) -> np.ndarray:
    return np.concatenate([np.zeros_like(coords[..., :1]), coords], axis=-1) \
        if win.rank == 1 else coords


def _values(win: Windows, src, weights):
    if src is None and weights is None:
        return None, None, None
    if src is None or weights is None:
        raise ValueError("pass both src and weights (spatial shapes I and K) to show values, "
                         "or neither")
    src = np.asarray(src, dtype=np.float64)
    weights = np.asarray(weights, dtype=np.float64)
    if src.shape != win.input_shape:
        raise ValueError(f"src has shape {src.shape}; expected the input shape "
                         f"{win.input_shape}")
    if weights.shape != win.kernel_shape:
        raise ValueError(f"weights has shape {weights.shape}; expected the kernel shape "
                         f"{win.kernel_shape}")
    p = win.problem
    dst = convlab.convolve(src[None, ..., None], weights[..., None, None], strides=p.strides,
                           dilations=p.dilations, pads_begin=p.pads_begin,
                           pads_end=p.pads_end, algorithm=win.algorithm)[0, ..., 0]
    return src, weights.reshape(-1), dst


class _WindowFigure:
    """The src and dst grids drawn once; each frame only recolours and relabels cells.

    Rebuilding hundreds of patches and texts per frame made animations several times
    slower than redrawing them, so the artists are kept and updated in place.
    """

    def __init__(self, win: Windows, src, weights, dst, title, figsize):
        _check_drawable(win)
        self.win, self.src, self.weights, self.dst, self.title = win, src, weights, dst, title
        self.order = win.outputs()
        self.fig, (self.src_ax, self.dst_ax) = _window_figure(win, figsize)
        self.src_cells = {}     # (row, col) -> (patch, text, base face, base text)
        self.dst_cells = {}     # output index -> (patch, text)
        self.tap_labels = []    # "×w" texts of the current frame
        self.current_taps = []
        self._draw_src()
        self._draw_dst()

    def _draw_src(self):
        win, ax, src = self.win, self.src_ax, self.src
        p = win.problem
        bounds = win.padded_bounds
        in_shape = win.input_shape
        if win.rank == 1:
            bounds, in_shape = ((0, 1),) + bounds, (1,) + in_shape
        lo = [min(0, b[0]) for b in bounds]
        hi = [max(i, b[1]) for i, b in zip(in_shape, bounds)]
        for row in range(lo[0], hi[0]):
            for col in range(lo[1], hi[1]):
                in_src = 0 <= row < in_shape[0] and 0 <= col < in_shape[1]
                in_pad = (bounds[0][0] <= row < bounds[0][1]
                          and bounds[1][0] <= col < bounds[1][1])
                y = -row - 1  # row 0 at the top
                if not in_src and not in_pad:
                    continue  # a corner beyond both the input and the padded extent
                if not in_pad:
                    render.cell(ax, col, y, render.CROP_FACE, "crop", hatch="xx", fontsize=7,
                                text_colour="white")
                    continue
                if not in_src:
                    face, text = render.PAD_FACE, "0"
                elif src is not None:
                    face, text = render.SRC_FACE, render.format_value(
                        src[(row, col)[2 - win.rank:]])
                else:
                    face, text = render.SRC_FACE, (str(col) if win.rank == 1 else "")
                patch, label = render.cell(ax, col, y, face, text,
                                           hatch=None if in_src else "///")
                self.src_cells[(row, col)] = (patch, label, face, text)
        render.bare(ax, (lo[1] - 0.2, hi[1] + 0.2), (-hi[0] - 0.2, -lo[0] + 0.2))
        ax.set_xticks(np.arange(lo[1], hi[1]) + 0.5, [str(c) for c in range(lo[1], hi[1])],
                      fontsize=8)
        if win.rank == 2:
            ax.set_yticks(-np.arange(lo[0], hi[0]) - 0.5,
                          [str(r) for r in range(lo[0], hi[0])], fontsize=8)
        else:
            ax.set_yticks([])
        pads = ", ".join(f"{b}/{e}" for b, e in zip(p.pads_begin, p.pads_end))
        ax.set_title(f"src  I={_shape(p.input_shape)}  K={_shape(p.kernel_shape)}  "
                     f"S={_shape(p.strides)}  D={_shape(p.dilations)}  P_b/P_e={pads}",
                     fontsize=9)

    def _draw_dst(self):
        win, ax = self.win, self.dst_ax
        shape = ((1,) + win.output_shape) if win.rank == 1 else win.output_shape
        for o in self.order:
            row, col = ((0,) + o) if win.rank == 1 else o
            self.dst_cells[o] = render.cell(ax, col, -row - 1, render.SRC_FACE, "")
        render.bare(ax, (-0.2, shape[1] + 0.2), (-shape[0] - 0.2, 0.2))
        ax.set_xticks(np.arange(shape[1]) + 0.5, [str(c) for c in range(shape[1])],
                      fontsize=8)
        if win.rank == 2:
            ax.set_yticks(-np.arange(shape[0]) - 0.5, [str(r) for r in range(shape[0])],
                          fontsize=8)
        else:
            ax.set_yticks([])
        ax.set_title(f"dst  O={_shape(win.output_shape)}", fontsize=9)

    def show(self, output_index):
        """Highlight the taps of ``dst[output_index]`` and the outputs computed so far."""
        win = self.win
        for key in self.current_taps:
            patch, label, face, text = self.src_cells[key]
            patch.set_facecolor(face)
            label.set_text(text)
        for label in self.tap_labels:
            label.remove()
        self.current_taps, self.tap_labels = [], []
        for k, coord in enumerate(_as2d(win, win.reads(output_index))):
            key = tuple(int(c) for c in coord)
            patch, label, _, _ = self.src_cells[key]
            patch.set_facecolor(render.TAP_FACE)
            if self.src is None and win.rank == 2:
                label.set_text(f"k{k}")  # a 2-D tap index would not fit; the flat number
            if self.weights is not None:
                x, y = patch.get_x(), patch.get_y()
                self.tap_labels.append(self.src_ax.text(
                    x + 0.5, y + 0.12, f"×{render.format_value(self.weights[k])}",
                    ha="center", va="bottom", fontsize=7, color="#5a2d00",
                    # readable over the hatching of padding cells too
                    bbox={"facecolor": render.TAP_FACE, "edgecolor": "none", "pad": 0.6}))
            self.current_taps.append(key)

        current = self.order.index(tuple(output_index))
        for flat, o in enumerate(self.order):
            patch, label = self.dst_cells[o]
            if flat == current:
                face, colour = render.OUT_FACE, "white"
            elif flat < current:
                face, colour = render.DONE_FACE, "black"
            else:
                face, colour = render.SRC_FACE, "black"
            if self.dst is not None:
                text = render.format_value(self.dst[o]) if flat <= current else ""
            else:
                text = ",".join(map(str, o))
            patch.set_facecolor(face)
            label.set_text(text)
            label.set_color(colour)
        caption = _caption(win, output_index, self.src, self.dst, self.weights)
        self.fig.suptitle(f"{self.title}: {caption}" if self.title else caption, fontsize=10)


def _shape(values) -> str:
    return "x".join(map(str, values))


def _caption(win: Windows, output_index, src, dst, weights=None) -> str:
    reads = win.reads(output_index)
    inside = np.all((reads >= 0) & (reads < np.array(win.input_shape)), axis=-1)
    o = ",".join(map(str, output_index))
    if win.rank == 1:
        coords = ", ".join(str(c[0]) if ok else f"{c[0]}(pad)" for c, ok in zip(reads, inside))
        text = f"dst[{o}] reads src[{coords}]"
    else:
        text = (f"dst[{o}] reads {int(inside.sum())} src elements and "
                f"{int((~inside).sum())} zeros of padding")
    if dst is not None and weights is not None and win.rank == 1:
        fmt = render.format_value

        def factor(value):
            return f"({fmt(value)})" if value < 0 else fmt(value)
        terms = [f"{factor(src[c[0]]) if ok else 0}·{factor(w)}"
                 for c, ok, w in zip(reads, inside, weights)]
        text = f"dst[{o}] = " + " + ".join(terms)
    if dst is not None:
        text += f"  =  {render.format_value(dst[tuple(output_index)])}"
    return text


def _window_figure(win: Windows, figsize):
    if win.rank == 1:
        (lo, hi), = win.padded_bounds
        width = max(hi, win.input_shape[0]) - min(lo, 0)
        fig = render.new_figure(figsize or (max(5.0, 0.55 * width + 1), 2.6))
        axes = fig.subplots(2, 1, height_ratios=[1, 1])
    else:
        extents = [max(b[1], i) - min(b[0], 0)
                   for b, i in zip(win.padded_bounds, win.input_shape)]
        fig = render.new_figure(figsize or (0.45 * (extents[1] + win.output_shape[1]) + 2,
                                            0.45 * extents[0] + 1.4))
        axes = fig.subplots(1, 2, width_ratios=[extents[1], max(win.output_shape[1], 2)])
    return fig, axes


def plot_window(win: Windows, output_index: Sequence[int] | None = None, *, src=None,
                weights=None, title: str = "", figsize=None):
    """One frame: the padded src with the taps of ``dst[output_index]`` highlighted.

    Padding cells are hatched grey and hold 0; src cropped away by a negative pad is dark.
    Tap cells are orange; in 2-D each names its tap ``k`` (flat index). The dst grid shows
    the current output in blue and the ones a loop has already computed in light blue.

    Parameters
    ----------
    win : Windows
        From :func:`windows` (1-D or 2-D).
    output_index : sequence of int, optional
        Which output to highlight; default the first.
    src, weights : array_like, optional
        Values (spatial shapes I and K) to write into the cells; dst is then computed by
        :func:`convlab.convolve` and filled in up to the current output.
    title : str, optional
        Put in front of the caption, e.g. to name the case shown.

    Returns
    -------
    matplotlib.figure.Figure
    """
    order = win.outputs()
    output_index = order[0] if output_index is None else tuple(output_index)
    if output_index not in order:
        raise ValueError(f"output_index={output_index} is outside the output shape "
                         f"{win.output_shape}")
    src, weights, dst = _values(win, src, weights)
    figure = _WindowFigure(win, src, weights, dst, title, figsize)
    figure.show(output_index)
    return figure.fig


def animate_windows(win: Windows, *, src=None, weights=None, interval: int = 700,
                    title: str = "", figsize=None,
                    outputs: Sequence[Sequence[int]] | None = None):
    """The window sliding over every output in loop order, one frame per output.

    Show it with ``IPython.display.HTML(convlab.viz.to_html(anim))`` or write it with
    :func:`convlab.viz.save_gif`. ``outputs`` restricts the frames to some positions.

    Returns
    -------
    matplotlib.animation.FuncAnimation
    """
    animation = render.mpl("matplotlib.animation")
    order = win.outputs()
    frames = order if outputs is None else [tuple(o) for o in outputs]
    for o in frames:
        if o not in order:
            raise ValueError(f"output {o} is outside the output shape {win.output_shape}")
    src, weights, dst = _values(win, src, weights)
    figure = _WindowFigure(win, src, weights, dst, title, figsize)
    figure.show(frames[0])
    # Lay the figure out once: every frame has the same grids, and a fixed layout keeps
    # them from shifting as captions change length (and saves drawing time).
    figure.fig.draw_without_rendering()
    figure.fig.set_layout_engine("none")

    def update(frame):
        figure.show(frames[frame])
        return []

    return animation.FuncAnimation(figure.fig, update, frames=len(frames), interval=interval,
                                   blit=False, repeat=True)
