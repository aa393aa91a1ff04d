"""Receptive fields through a chain of convolution layers.

The receptive field of one output is the set of src elements that can change it. Here
it is measured, not derived: one-hot inputs go through the whole chain of
single-channel convolutions with all-ones weights (:func:`convlab.viz.probe.path_counts`),
and the final output counts the paths from each input element. For a chain of dense
layers away from the borders its extent matches the closed form
``1 + sum_l (K_l - 1) * D_l * prod_{j<l} S_j``, and with dilation it can have holes.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Union

import numpy as np

from convlab.viz import probe, render
from convlab.viz.windows import Windows, windows

IntOrTuple = Union[int, tuple[int, ...]]


@dataclass(frozen=True)
class Layer:
    """One single-channel convolution layer of a chain; attributes as in ``convolve``."""

    kernel: IntOrTuple
    strides: IntOrTuple = 1
    dilations: IntOrTuple = 1
    pads_begin: IntOrTuple = 0
    pads_end: IntOrTuple = 0
    auto_pad: str = "none"

    def attributes(self, rank: int) -> dict:
        kernel = (self.kernel,) * rank if isinstance(self.kernel, int) else tuple(self.kernel)
        return dict(kernel=kernel, strides=self.strides, dilations=self.dilations,
                    pads_begin=self.pads_begin, pads_end=self.pads_end,
                    auto_pad=self.auto_pad)


@dataclass(frozen=True)
class ReceptiveField:
    """Path counts at every level of a chain, for one final output.

    Attributes
    ----------
    shapes : list of tuple
        Spatial shape of each level: ``shapes[0]`` is the input, ``shapes[-1]`` the output.
    output_index : tuple of int
        The final output whose receptive field this is.
    counts : list of numpy.ndarray of int
        ``counts[l]`` has shape ``shapes[l]``: the number of paths from each element of
        level ``l`` to the output; positive exactly on the receptive field.
    layer_windows : list of Windows
        ``layer_windows[l]`` says which elements of level ``l`` each element of level
        ``l + 1`` reads.
    """

    shapes: list[tuple[int, ...]]
    output_index: tuple[int, ...]
    counts: list[np.ndarray]
    layer_windows: list[Windows] = field(repr=False)

    @property
    def depth(self) -> int:
        return len(self.layer_windows)

    def mask(self, level: int = 0) -> np.ndarray:
        return self.counts[level] > 0

    def bounds(self, level: int = 0) -> tuple[tuple[int, int], ...]:
        """Per axis, the first and last index (inclusive) of the field at ``level``."""
        where = np.nonzero(self.mask(level))
        return tuple((int(w.min()), int(w.max())) for w in where)

    def size(self, level: int = 0) -> tuple[int, ...]:
        """Per axis, the extent from first to last element of the field (holes included)."""
        return tuple(hi - lo + 1 for lo, hi in self.bounds(level))


def receptive_field(input_shape: Sequence[int], layers: Sequence[Layer],
                    output_index: Sequence[int] | None = None, *,
                    algorithm: str = "direct") -> ReceptiveField:
    """Measure the receptive field of one final output at every level of ``layers``.

    ``output_index`` defaults to the centre of the final output.
    """
    input_shape = tuple(input_shape)
    rank = len(input_shape)
    if not layers:
        raise ValueError("layers is empty; expected at least one Layer")
    shapes = [input_shape]
    attributes = []
    layer_windows = []
    for number, layer in enumerate(layers):
        if not isinstance(layer, Layer):
            raise TypeError(f"layers[{number}]={layer!r} must be a convlab.viz.Layer")
        attrs = layer.attributes(rank)
        kernel = attrs.pop("kernel")
        win = windows(shapes[-1], kernel, algorithm=algorithm, **attrs)
        layer_windows.append(win)
        # pass the resolved pads on, so every level sees exactly the problem drawn
        p = win.problem
        attributes.append(dict(kernel=kernel, strides=p.strides, dilations=p.dilations,
                               pads_begin=p.pads_begin, pads_end=p.pads_end))
        shapes.append(p.output_shape)
    final = shapes[-1]
    if output_index is None:
        output_index = tuple(o // 2 for o in final)
    output_index = tuple(int(o) for o in output_index)
    if len(output_index) != rank or any(not 0 <= o < e for o, e in zip(output_index, final)):
        raise ValueError(f"output_index={output_index} is outside the final output shape "
                         f"{final}")
    counts = [probe.path_counts(shapes[level], attributes[level:], output_index,
                                algorithm=algorithm) for level in range(len(layers))]
    last = np.zeros(final, dtype=np.int64)
    last[output_index] = 1
    counts.append(last)
    return ReceptiveField(shapes, output_index, counts, layer_windows)


# --------------------------------------------------------------------------- drawing

def _positions(rf: ReceptiveField):
    """x = a*i + b for each level: every element sits over the centre of its window
    in the level below, so strided levels spread out and lines stay short."""
    a, b = [1.0], [0.0]
    for win in rf.layer_windows:
        p = win.problem
        centre = (p.kernel_shape[0] - 1) * p.dilations[0] / 2 - p.pads_begin[0]
        b.append(a[-1] * centre + b[-1])
        a.append(a[-1] * p.strides[0])
    return a, b


def _plot_1d(rf: ReceptiveField, figsize):
    a, b = _positions(rf)
    levels = rf.depth + 1
    lo = min(w.padded_bounds[0][0] for w in rf.layer_windows[:1])
    hi = max(rf.layer_windows[0].padded_bounds[0][1], rf.shapes[0][0])
    fig = render.new_figure(figsize or (max(6.0, 0.4 * (hi - lo + 7)), 0.75 * levels + 0.9))
    ax = fig.subplots()
    peak = max(int(c.max()) for c in rf.counts[:-1]) if rf.depth else 1
    cmap = render.mpl("matplotlib").colormaps["Oranges"]
    y_gap = 2.0

    for level in range(levels):
        y = level * y_gap
        counts = rf.counts[level]
        if level < rf.depth:
            (pad_lo, pad_hi), = rf.layer_windows[level].padded_bounds
            for i in list(range(pad_lo, 0)) + list(range(rf.shapes[level][0], pad_hi)):
                render.cell(ax, a[level] * i + b[level] - 0.5, y - 0.5, render.PAD_FACE, "0",
                            hatch="///", fontsize=7)
        for i, count in enumerate(counts):
            x = a[level] * i + b[level]
            if level == rf.depth:
                face = render.OUT_FACE if count else render.SRC_FACE
                text = None
            elif count > 0:
                # the darkest shade stays mid-orange so that black numbers stay readable
                face = cmap(0.15 + 0.45 * count / peak)
                text = str(int(count))
            else:
                face, text = render.SRC_FACE, None
            render.cell(ax, x - 0.5, y - 0.5, face, text, fontsize=7)
        if level < rf.depth:
            win = rf.layer_windows[level]
            for o in np.nonzero(rf.counts[level + 1] > 0)[0]:
                x_top = a[level + 1] * o + b[level + 1]
                for (i,), inside in zip(win.reads((o,)), win.inside[o]):
                    ax.plot([x_top, a[level] * i + b[level]], [y + y_gap - 0.5, y + 0.5],
                            color=render.TAP_FACE if inside else "#b0b0b0",
                            lw=1.0, ls="-" if inside else ":", zorder=0)
    labels = ["src"] + [f"layer {n + 1}" for n in range(rf.depth)]
    ax.set_yticks([level * y_gap for level in range(levels)], labels, fontsize=9)
    for n, win in enumerate(rf.layer_windows):
        p = win.problem
        ax.text(hi + 0.6, (n + 1) * y_gap - y_gap / 2,
                f"K={p.kernel_shape[0]} S={p.strides[0]} D={p.dilations[0]}",
                fontsize=8, va="center", color="#505050")
    xmax = max(hi, max(a[n] * (rf.shapes[n][0] - 1) + b[n] for n in range(levels)) + 1)
    render.bare(ax, (lo - 1, xmax + 4.5), (-1, (levels - 1) * y_gap + 1))
    ax.set_xticks([])
    ax.set_title(f"receptive field of output {rf.output_index[0]}: "
                 f"{rf.size(0)[0]} src elements wide, {int(rf.mask(0).sum())} of them read "
                 f"(numbers: paths to the output)", fontsize=9)
    return fig


def _plot_2d(rf: ReceptiveField, figsize):
    patches = render.mpl("matplotlib.patches")
    levels = rf.depth + 1
    widths = [max(s[1], 3) for s in rf.shapes]
    fig = render.new_figure(figsize or (0.3 * sum(widths) + 1.2 * levels,
                                        0.3 * max(s[0] for s in rf.shapes) + 1.4))
    axes = fig.subplots(1, levels, width_ratios=widths)
    colours = render.mpl("matplotlib.colors")
    for level, ax in enumerate(axes):
        counts = rf.counts[level]
        rows, cols = counts.shape
        if level == rf.depth:
            cmap = colours.ListedColormap([render.OUT_FACE])
            vmax = 1
        else:
            cmap = "Oranges"
            # headroom above the peak keeps the darkest cells light enough for numbers
            vmax = counts.max() * 1.25
        ax.imshow(np.where(counts > 0, counts, np.nan), cmap=cmap, vmin=0, vmax=vmax,
                  extent=(0, cols, rows, 0), interpolation="nearest")
        ax.hlines(np.arange(rows + 1), 0, cols, color="#c0c0c0", lw=0.5)
        ax.vlines(np.arange(cols + 1), 0, rows, color="#c0c0c0", lw=0.5)
        if level < rf.depth and rows * cols <= 144:
            for r, c in zip(*np.nonzero(counts)):
                ax.text(c + 0.5, r + 0.5, str(int(counts[r, c])), ha="center", va="center",
                        fontsize=7)
        ax.set_xticks([])
        ax.set_yticks([])
        (r0, r1), (c0, c1) = rf.bounds(level)
        ax.add_patch(patches.Rectangle((c0, r0), c1 - c0 + 1, r1 - r0 + 1, fill=False,
                                       edgecolor=render.OUT_FACE, lw=1.5))
        name = "src" if level == 0 else f"layer {level}"
        size = "x".join(map(str, rf.size(level)))
        ax.set_title(f"{name} {counts.shape[0]}x{counts.shape[1]}\nfield {size}", fontsize=9)
        if level < rf.depth:
            p = rf.layer_windows[level].problem
            ax.set_xlabel(f"K={p.kernel_shape} S={p.strides}\nD={p.dilations}", fontsize=8)
    return fig


def plot_receptive_field(rf: ReceptiveField, *, figsize=None):
    """Draw a measured receptive field.

    1-D: one row per level, src at the bottom, each element drawn over the centre of
    the window it reads; orange shades and numbers count the paths to the output (blue),
    lines are the taps, dotted ones land on padding. 2-D: one panel per level, path
    counts as a heat map, the field's bounding box outlined.

    Returns
    -------
    matplotlib.figure.Figure
    """
    if len(rf.shapes[0]) == 1:
        return _plot_1d(rf, figsize)
    if len(rf.shapes[0]) == 2:
        return _plot_2d(rf, figsize)
    raise ValueError(f"receptive fields of rank {len(rf.shapes[0])} cannot be drawn; "
                     f"expected 1-D or 2-D")


