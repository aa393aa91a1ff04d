"""The window of taps each output reads, over the padded input.

``dst[o] = sum_k src[o*S + k*D - P_b] * weights[k]`` (SPEC §1, one channel). For every
output ``o`` and tap ``k`` this module finds the src coordinate read, by running the
kernel on one-hot inputs (:mod:`convlab.viz.probe`), and draws it: the padded input
with the taps of one output highlighted, the output grid beside it, and an animation
that slides the window over every output in turn.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

import numpy as np

import convlab
from convlab.params import ConvProblem
from convlab.viz import probe, render


@dataclass(frozen=True)
class Windows:
    """Where every tap of every output lands, for one single-channel problem.

    Attributes
    ----------
    problem : ConvProblem
        The resolved problem (N = IC = OC = 1); ``auto_pad`` is already turned into
        ``pads_begin``/``pads_end``.
    taps : numpy.ndarray of int, shape ``(*O, *K, r)``
        ``taps[o, k]`` is the src coordinate read by tap ``k`` of output ``o``. A
        coordinate outside ``[0, I)`` on some axis lands on zero padding.
    """

    problem: ConvProblem
    taps: np.ndarray

    @property
    def rank(self) -> int:
        return self.problem.rank

    @property
    def input_shape(self) -> Tuple[int, ...]:
        return self.problem.input_shape

    @property
    def kernel_shape(self) -> Tuple[int, ...]:
        return self.problem.kernel_shape

    @property
    def output_shape(self) -> Tuple[int, ...]:
        return self.problem.output_shape

    @property
    def inside(self) -> np.ndarray:
        """bool ``(*O, *K)``: the tap reads a real src element (not padding)."""
        shape = np.array(self.input_shape)
        return np.all((self.taps >= 0) & (self.taps < shape), axis=-1)

    @property
    def padded_bounds(self) -> Tuple[Tuple[int, int], ...]:
        """Per axis, the padded extent in src coordinates: ``[-P_b, I + P_e)``."""
        return tuple((-pb, i + pe) for i, pb, pe in
                     zip(self.input_shape, self.problem.pads_begin, self.problem.pads_end))

    def outputs(self) -> List[Tuple[int, ...]]:
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
    compared with SPEC §1's ``o*S + k*D - P_b``, so a figure drawn from them is both what
    the kernel does and what the specification says.

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

    # SPEC §1 for the same problem, from the ConvProblem's own numbers
    grids = np.meshgrid(*(np.arange(o) for o in problem.output_shape),
                        *(np.arange(k) for k in kernel_shape), indexing="ij")
    formula = np.stack([grids[a] * problem.strides[a] + grids[r + a] * problem.dilations[a]
                        - problem.pads_begin[a] for a in range(r)], axis=-1)
    if not np.array_equal(taps, formula):
        raise RuntimeError(f"algorithm={algorithm!r} read src elements other than "
                           f"src[o*S + k*D - P_b] ({problem.describe()})")

    result = Windows(problem, taps)
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

def _plane(win: Windows):
    """1-D problems are drawn as one row of a 2-D grid."""
    if win.rank == 1:
        return (1,), ((0, 1),)
    if win.rank == 2:
        return (), ()
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
                           pads_end=p.pads_end)[0, ..., 0]
    return src, weights.reshape(-1), dst


def _draw_src(ax, win: Windows, output_index, src, weights=None):
    """The src grid over the union of the input and the padded extent, taps highlighted."""
    p = win.problem
    bounds = win.padded_bounds
    if win.rank == 1:
        bounds = ((0, 1),) + bounds
        in_shape = (1,) + win.input_shape
    else:
        in_shape = win.input_shape
    lo = [min(0, b[0]) for b in bounds]
    hi = [max(i, b[1]) for i, b in zip(in_shape, bounds)]
    taps = {}
    if output_index is not None:
        reads = _as2d(win, win.reads(output_index))
        taps = {tuple(c): k for k, c in enumerate(reads)}
    for row in range(lo[0], hi[0]):
        for col in range(lo[1], hi[1]):
            in_src = 0 <= row < in_shape[0] and 0 <= col < in_shape[1]
            in_pad = bounds[0][0] <= row < bounds[0][1] and bounds[1][0] <= col < bounds[1][1]
            y = -row - 1  # row 0 at the top
            if not in_src and not in_pad:
                continue  # a corner beyond both the input and the padded extent
            if in_src and not in_pad:
                render.cell(ax, col, y, render.CROP_FACE, "crop", hatch="xx", fontsize=7,
                            text_colour="white")
                continue
            if (row, col) in taps:
                face = render.TAP_FACE
            else:
                face = render.SRC_FACE if in_src else render.PAD_FACE
            if (row, col) in taps and src is None and win.rank == 2:
                text = f"k{taps[(row, col)]}"  # a 2-D index would not fit; flat tap number
            elif not in_src:
                text = "0"
            elif src is not None:
                text = render.format_value(src[(row, col)[2 - win.rank:]])
            else:
                text = str(col) if win.rank == 1 else ""
            render.cell(ax, col, y, face, text, hatch=None if in_src else "///")
            if (row, col) in taps and weights is not None:
                ax.text(col + 0.5, y + 0.12, f"×{render.format_value(weights[taps[(row, col)]])}",
                        ha="center", va="bottom", fontsize=7, color="#5a2d00")
    render.bare(ax, (lo[1] - 0.2, hi[1] + 0.2), (-hi[0] - 0.2, -lo[0] + 0.2))
    ax.set_xticks(np.arange(lo[1], hi[1]) + 0.5, [str(c) for c in range(lo[1], hi[1])],
                  fontsize=8)
    if win.rank == 2:
        ax.set_yticks(-np.arange(lo[0], hi[0]) - 0.5, [str(r) for r in range(lo[0], hi[0])],
                      fontsize=8)
    else:
        ax.set_yticks([])
    pads = ", ".join(f"{b}/{e}" for b, e in zip(p.pads_begin, p.pads_end))
    ax.set_title(f"src  I={_shape(p.input_shape)}  K={_shape(p.kernel_shape)}  "
                 f"S={_shape(p.strides)}  D={_shape(p.dilations)}  P_b/P_e={pads}",
                 fontsize=9)


def _draw_dst(ax, win: Windows, output_index, dst, order):
    shape = ((1,) + win.output_shape) if win.rank == 1 else win.output_shape
    current = None if output_index is None else order.index(tuple(output_index))
    for flat, o in enumerate(order):
        row, col = ((0,) + o) if win.rank == 1 else o
        if current is not None and flat == current:
            face, colour = render.OUT_FACE, "white"
        elif current is not None and flat < current:
            face, colour = render.DONE_FACE, "black"
        else:
            face, colour = render.SRC_FACE, "black"
        if dst is not None:
            text = render.format_value(dst[o]) if current is None or flat <= current else ""
        else:
            text = ",".join(map(str, o))
        render.cell(ax, col, -row - 1, face, text, text_colour=colour)
    render.bare(ax, (-0.2, shape[1] + 0.2), (-shape[0] - 0.2, 0.2))
    ax.set_xticks(np.arange(shape[1]) + 0.5, [str(c) for c in range(shape[1])], fontsize=8)
    if win.rank == 2:
        ax.set_yticks(-np.arange(shape[0]) - 0.5, [str(r) for r in range(shape[0])],
                      fontsize=8)
    else:
        ax.set_yticks([])
    ax.set_title(f"dst  O={_shape(win.output_shape)}", fontsize=9)


def _shape(values) -> str:
    return "x".join(map(str, values))


def _caption(win: Windows, output_index, src, dst, weights=None) -> str:
    if output_index is None:
        return ""
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
    _plane(win)
    if win.rank == 1:
        width = max(b[1] for b in win.padded_bounds) - min(b[0] for b in win.padded_bounds)
        width = max(width, win.input_shape[0])
        fig = render.new_figure(figsize or (max(5.0, 0.55 * width + 1), 2.6))
        axes = fig.subplots(2, 1, height_ratios=[1, 1])
    else:
        rows = max(b[1] - b[0] for b in win.padded_bounds[:1])
        cols = [max(b[1], i) - min(b[0], 0) for b, i in zip(win.padded_bounds, win.input_shape)]
        fig = render.new_figure(figsize or (0.5 * (cols[1] + win.output_shape[1]) + 2,
                                            0.5 * max(rows, cols[0]) + 1.4))
        axes = fig.subplots(1, 2, width_ratios=[cols[1], max(win.output_shape[1], 2)])
    return fig, axes


def _render_frame(fig, axes, win, output_index, src, weights, dst, order, title=""):
    for ax in axes:
        ax.clear()
    _draw_src(axes[0], win, output_index, src, weights)
    _draw_dst(axes[1], win, output_index, dst, order)
    caption = _caption(win, output_index, src, dst, weights)
    fig.suptitle(f"{title}: {caption}" if title else caption, fontsize=10)


def plot_window(win: Windows, output_index: Optional[Sequence[int]] = None, *, src=None,
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
    fig, axes = _window_figure(win, figsize)
    _render_frame(fig, axes, win, output_index, src, weights, dst, order, title)
    return fig


def animate_windows(win: Windows, *, src=None, weights=None, interval: int = 700,
                    title: str = "", figsize=None,
                    outputs: Optional[Sequence[Sequence[int]]] = None):
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
    fig, axes = _window_figure(win, figsize)

    def update(frame):
        _render_frame(fig, axes, win, frames[frame], src, weights, dst, order, title)
        return []

    update(0)
    return animation.FuncAnimation(fig, update, frames=len(frames), interval=interval,
                                   blit=False, repeat=True)
