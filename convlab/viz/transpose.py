"""Transposed convolution: where each src element scatters its copy of the kernel.

``dst[x*S + k*D - P_b] += src[x] * weights[k]`` (docs/specification.md §5.1, one channel), with
``O = S*(I-1) + (K-1)*D + 1 + output_padding - P_b - P_e``. This module finds, by running
:func:`convlab.conv_transpose` on one-hot inputs and one-hot weights, the dst coordinate
every (src element, tap) pair writes to; counts how many taps land on each output (the
source of the "checkerboard" pattern) by running it on all-ones inputs; and relates the
scatter to its other reading, a stride-1 forward convolution of the input stretched by
the strides (``S - 1`` zeros between neighbours, padded by ``(K-1)*D - P_b`` before and
``(K-1)*D - P_e + output_padding`` after) with the kernel flipped, whose windows come
from :func:`convlab.viz.windows`, i.e. from the forward kernels.
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

import convlab
from convlab.ops import transpose as _transpose
from convlab.ops.transpose import TransposeProblem
from convlab.viz import render
from convlab.viz.windows import ProblemShapes, Windows, windows


def _one_hot_scatter(input_shape, kernel_shape, attributes, algorithm) -> np.ndarray:
    """bool ``(*I, *K, *O)``: True where src[i] * weights[k] lands on dst[o].

    Batch entry n is one-hot at flat src position n; output channel t has XOI weights
    one-hot at flat tap t. conv_transpose is linear in both, so dst[n, o, t] is 1 exactly
    where the pair (n, t) writes to o.
    """
    positions, taps = math.prod(input_shape), math.prod(kernel_shape)
    src = np.eye(positions, dtype=np.float32).reshape(positions, *input_shape, 1)
    weights = np.eye(taps, dtype=np.float32).reshape(*kernel_shape, taps, 1)   # XOI
    dst = convlab.conv_transpose(src, weights, algorithm=algorithm, **attributes)
    # Forward algorithms with transforms (Winograd) may be off in the last bits; anything
    # far from 0 and 1 means a wrong kernel, and a figure drawn from it would be wrong too.
    if not np.all(np.abs(dst - np.rint(dst)) < 1e-3) or dst.min() < -1e-3 or dst.max() > 1.001:
        raise RuntimeError(f"conv_transpose(algorithm={algorithm!r}) returned values other "
                           f"than 0 and 1 for one-hot src and weights")
    output_shape = dst.shape[1:-1]
    r = len(input_shape)
    hits = dst.reshape(*input_shape, *output_shape, *kernel_shape) > 0.5
    # (*I, *O, *K) -> (*I, *K, *O)
    order = (*range(r), *range(2 * r, 3 * r), *range(r, 2 * r))
    return np.transpose(hits, order)


@dataclass(frozen=True)
class Scatter(ProblemShapes):
    """Where every tap of every src element lands, for one single-channel problem.

    Attributes
    ----------
    problem : convlab.ops.transpose.TransposeProblem
        The resolved problem (N = IC = OC = 1); ``output_shape`` and ``auto_pad`` are
        already turned into ``pads_begin``/``pads_end``.
    targets : numpy.ndarray of int, shape ``(*I, *K, r)``
        ``targets[i, k]`` is the dst coordinate ``src[i] * weights[k]`` is added to,
        ``i*S + k*D - P_b``. Outside ``[0, O)`` on some axis it is cropped away by a pad.
    algorithm : str
        The conv_transpose algorithm that was probed (and that computes values in figures).
    """

    problem: TransposeProblem
    targets: np.ndarray
    algorithm: str = "col2im"

    @property
    def inside(self) -> np.ndarray:
        """bool ``(*I, *K)``: the pair lands in dst (is not cropped by a pad)."""
        shape = np.array(self.output_shape)
        return np.all((self.targets >= 0) & (self.targets < shape), axis=-1)

    def writes(self, input_index: Sequence[int]) -> np.ndarray:
        """int ``(prod(K), r)``: the dst coordinates ``src[input_index]`` writes, tap by tap."""
        return self.targets[tuple(input_index)].reshape(-1, self.rank)

    def sources(self, output_index: Sequence[int]) -> list[tuple[tuple[int, ...],
                                                                 tuple[int, ...]]]:
        """The ``(i, k)`` pairs whose products are summed into ``dst[output_index]``,
        src positions in C order."""
        output_index = np.asarray(output_index)
        match = np.all(self.targets == output_index, axis=-1)
        return [(tuple(int(v) for v in ik[:self.rank]), tuple(int(v) for v in ik[self.rank:]))
                for ik in np.argwhere(match)]

    def counts(self) -> np.ndarray:
        """int ``(*O)``: how many (src element, tap) pairs land on each output position."""
        counts = np.zeros(self.output_shape, dtype=np.int64)
        np.add.at(counts, tuple(self.targets[self.inside].T), 1)
        return counts


def scatter_contributions(input_shape: Sequence[int], kernel_shape: Sequence[int], *,
                          strides=None, dilations=None, pads_begin=None, pads_end=None,
                          output_padding=None, output_shape=None, auto_pad: str = "none",
                          algorithm: str = "col2im") -> Scatter:
    """Find, with conv_transpose itself, the dst coordinate of every (src element, tap) pair.

    The attributes are those of :func:`convlab.conv_transpose`. Two probes run: one with
    zero pads and no output_padding, where every pair lands somewhere in the full extent
    ``S*(I-1) + (K-1)*D + 1``, and the real problem, which must keep exactly the pairs
    whose ``target = full position - P_b`` lies in ``[0, O)``. The targets are also
    compared with docs/specification.md §5.1's ``i*S + k*D - P_b``.

    Raises
    ------
    RuntimeError
        If the kernel disagrees with the index formula (a bug in the kernel).
    """
    input_shape, kernel_shape = tuple(input_shape), tuple(kernel_shape)
    attributes = {"strides": strides, "dilations": dilations, "pads_begin": pads_begin,
                      "pads_end": pads_end, "output_padding": output_padding,
                      "output_shape": output_shape, "auto_pad": auto_pad}
    problem = _transpose.make_transpose_problem(
        (1, *input_shape, 1), np.float32, (*kernel_shape, 1, 1), np.float32, **attributes)
    r = problem.rank

    full = _one_hot_scatter(input_shape, kernel_shape,
                            {"strides": problem.strides, "dilations": problem.dilations},
                            algorithm)
    full_shape = full.shape[2 * r:]
    flat = full.reshape(*input_shape, *kernel_shape, -1)
    if not np.all(flat.sum(axis=-1) == 1):
        raise RuntimeError(f"conv_transpose(algorithm={algorithm!r}) did not write each "
                           f"src element through each tap to exactly one output")
    position = np.argmax(flat, axis=-1)
    targets = np.stack(np.unravel_index(position, full_shape), axis=-1) \
        - np.array(problem.pads_begin)

    grids = np.meshgrid(*(np.arange(i) for i in input_shape),
                        *(np.arange(k) for k in kernel_shape), indexing="ij")
    formula = np.stack([grids[a] * problem.strides[a] + grids[r + a] * problem.dilations[a]
                        - problem.pads_begin[a] for a in range(r)], axis=-1)
    if not np.array_equal(targets, formula):
        raise RuntimeError(f"conv_transpose(algorithm={algorithm!r}) wrote to other outputs "
                           f"than dst[i*S + k*D - P_b]")

    result = Scatter(problem, targets, algorithm)
    real = _one_hot_scatter(input_shape, kernel_shape, attributes, algorithm)
    if real.shape[2 * r:] != problem.output_shape:
        raise RuntimeError(f"conv_transpose(algorithm={algorithm!r}) gave output shape "
                           f"{real.shape[2 * r:]}; the problem says {problem.output_shape}")
    expected = np.zeros_like(real)
    for ik in zip(*np.nonzero(result.inside)):
        expected[ik + tuple(targets[ik])] = True
    if not np.array_equal(real, expected):
        raise RuntimeError(f"conv_transpose(algorithm={algorithm!r}) handles pads or "
                           f"output_padding wrongly: it keeps other pairs than those landing "
                           f"in [0, O)")
    return result


def overlap_counts(input_shape: Sequence[int], kernel_shape: Sequence[int], *, strides=None,
                   dilations=None, pads_begin=None, pads_end=None, output_padding=None,
                   output_shape=None, auto_pad: str = "none",
                   algorithm: str = "col2im") -> np.ndarray:
    """int ``(*O)``: how many kernel taps land on each output position.

    Computed as ``conv_transpose`` of an all-ones src with all-ones weights: each (src
    element, tap) pair then adds exactly 1 to the output it lands on. Uneven counts are
    what makes transposed convolutions draw checkerboards (K not a multiple of S).
    """
    input_shape, kernel_shape = tuple(input_shape), tuple(kernel_shape)
    # float64: counts are small integers and must come out exact
    dst = convlab.conv_transpose(np.ones((1, *input_shape, 1)), np.ones((*kernel_shape, 1, 1)),
                                 strides=strides, dilations=dilations, pads_begin=pads_begin,
                                 pads_end=pads_end, output_padding=output_padding,
                                 output_shape=output_shape, auto_pad=auto_pad,
                                 algorithm=algorithm)[0, ..., 0]
    counts = np.rint(dst)
    if not np.all(np.abs(dst - counts) < 1e-6):
        raise RuntimeError(f"conv_transpose(algorithm={algorithm!r}) returned non-integer "
                           f"sums of ones")
    return counts.astype(np.int64)


@dataclass(frozen=True)
class Stretched:
    """The forward-convolution reading of a transposed convolution.

    Attributes
    ----------
    scatter : Scatter
        The transposed problem.
    windows : convlab.viz.Windows
        The windows of the equivalent forward convolution over the stretched input
        (extent ``S*(I-1) + 1``), stride 1, dilation D, pads ``problem.forward_pads``;
        its tap ``j`` carries ``weights[K-1-j]`` (the flipped kernel).
    """

    scatter: Scatter
    windows: Windows

    @property
    def strides(self) -> tuple[int, ...]:
        return self.scatter.problem.strides

    def sources(self, output_index: Sequence[int]) -> list[tuple[tuple[int, ...],
                                                                 tuple[int, ...]]]:
        """The ``(i, k)`` pairs the forward window of ``dst[output_index]`` multiplies: taps
        that land on a real src element (not an inserted zero or padding), with the
        flipped tap ``j`` renamed to the kernel tap ``k = K-1-j``."""
        win, k_shape = self.windows, self.scatter.kernel_shape
        strides = np.array(self.strides)
        taps = win.taps[tuple(output_index)]                      # (*K, r)
        pairs = []
        for j in itertools.product(*map(range, k_shape)):
            u = taps[j]
            if np.all((u >= 0) & (u < np.array(win.input_shape))) and np.all(u % strides == 0):
                k = tuple(kk - 1 - jj for kk, jj in zip(k_shape, j))
                pairs.append((tuple(int(v) for v in u // strides), k))
        return sorted(pairs)

    def kind(self, stretched_index: Sequence[int]) -> str:
        """``"src"``, ``"zero"`` (inserted between src elements) or ``"pad"``."""
        u = np.asarray(stretched_index)
        if not np.all((u >= 0) & (u < np.array(self.windows.input_shape))):
            return "pad"
        return "src" if np.all(u % np.array(self.strides) == 0) else "zero"


def stretched_view(scatter: Scatter, algorithm: str = "direct") -> Stretched:
    """The equivalent forward convolution, its windows probed with ``algorithm``.

    Raises
    ------
    RuntimeError
        If some output's forward window multiplies other (src, tap) pairs than the
        scatter adds into it.
    """
    p = scatter.problem
    begin, end = p.forward_pads
    win = windows(p.stretched_shape, p.kernel_shape, dilations=p.dilations,
                  pads_begin=begin, pads_end=end, algorithm=algorithm)
    if win.output_shape != p.output_shape:
        raise RuntimeError(f"the stretched forward convolution has output shape "
                           f"{win.output_shape}; the transposed one {p.output_shape}")
    view = Stretched(scatter, win)
    for o in itertools.product(*map(range, p.output_shape)):
        if view.sources(o) != sorted(scatter.sources(o)):
            raise RuntimeError(f"dst{list(o)}: the stretched forward window reads "
                               f"{view.sources(o)}, the scatter writes "
                               f"{sorted(scatter.sources(o))}")
    return view


# --------------------------------------------------------------------------- drawing

def _light(index: int):
    """The src element's colour, mixed with white so that black text stays readable."""
    rgb = np.array(render.mpl("matplotlib.colors").to_rgb(render.group_colour(index)))
    return tuple(0.45 + 0.55 * rgb)


def _shape(values) -> str:
    return "x".join(map(str, values))


def _describe(p: TransposeProblem) -> str:
    pads = ", ".join(f"{b}/{e}" for b, e in zip(p.pads_begin, p.pads_end))
    text = (f"I={_shape(p.input_shape)}  K={_shape(p.kernel_shape)}  S={_shape(p.strides)}  "
            f"D={_shape(p.dilations)}  P_b/P_e={pads}")
    if any(p.output_padding):
        text += f"  output_padding={_shape(p.output_padding)}"
    return text + f"  ->  O={_shape(p.output_shape)}"


def _values_1d(scatter: Scatter, src, weights):
    if src is None and weights is None:
        return None, None, None
    if src is None or weights is None:
        raise ValueError("pass both src and weights (shapes I and K) to show values, or "
                         "neither")
    src = np.asarray(src, dtype=np.float64)
    weights = np.asarray(weights, dtype=np.float64)
    if src.shape != scatter.input_shape:
        raise ValueError(f"src has shape {src.shape}; expected the input shape "
                         f"{scatter.input_shape}")
    if weights.shape != scatter.kernel_shape:
        raise ValueError(f"weights has shape {weights.shape}; expected the kernel shape "
                         f"{scatter.kernel_shape}")
    p = scatter.problem
    dst = convlab.conv_transpose(src[None, ..., None], weights[..., None, None],
                                 strides=p.strides, dilations=p.dilations,
                                 pads_begin=p.pads_begin, pads_end=p.pads_end,
                                 output_padding=p.output_padding,
                                 algorithm=scatter.algorithm)[0, ..., 0]
    return src, weights, dst


def _require_1d(rank: int, what: str):
    if rank != 1:
        raise ValueError(f"{what} of rank {rank} cannot be drawn; expected a 1-D problem "
                         f"(use plot_overlap for 2-D)")


def _axis_ticks(ax, lo, hi):
    ax.set_xticks(np.arange(lo, hi) + 0.5, [str(c) for c in range(lo, hi)], fontsize=8)


def plot_scatter(scatter: Scatter, *, src=None, weights=None, title: str = "",
                 figsize=None):
    """The scatter view of a 1-D transposed convolution, one row per src element.

    Row ``i`` holds the copy of the kernel that ``src[i]`` writes, starting at
    ``i*S - P_b``: cells labelled ``w0, w1, ...`` (or the products ``src[i]*w[k]`` when
    ``src`` and ``weights`` are given), coloured per src element. Copies that a pad
    crops are drawn dark and hatched. The bottom row is dst: the column sums, computed
    by :func:`convlab.conv_transpose` (or, without values, the number of taps landing on
    each output).

    Returns
    -------
    matplotlib.figure.Figure
    """
    _require_1d(scatter.rank, "a scatter")
    src, weights, dst = _values_1d(scatter, src, weights)
    (out,) = scatter.output_shape
    targets = scatter.targets[..., 0]                      # (I, K)
    lo, hi = min(0, int(targets.min())), max(out, int(targets.max()) + 1)
    rows = scatter.input_shape[0]
    fig = render.new_figure(figsize or (max(5.0, 0.5 * (hi - lo) + 1.6),
                                        0.42 * (rows + 2) + 1.0))
    ax = fig.subplots()
    for i in range(rows):
        y = -i - 1
        for k, t in enumerate(targets[i]):
            t = int(t)
            text = (f"w{k}" if src is None
                    else render.format_value(round(src[i] * weights[k], 4)))
            if 0 <= t < out:
                render.cell(ax, t, y, _light(i), text, fontsize=8)
            else:
                _, label = render.cell(ax, t, y, render.CROP_FACE, text, hatch="xx",
                                       fontsize=8, text_colour="white")
                label.set_bbox({"facecolor": render.CROP_FACE, "edgecolor": "none",
                                "pad": 2.0})
    counts = scatter.counts()
    y = -rows - 1.6                                          # a gap above the sum row
    for t in range(out):
        text = str(counts[t]) if dst is None else render.format_value(round(dst[t], 4))
        render.cell(ax, t, y, render.DONE_FACE, text, fontsize=8)
    ax.axhline(-rows - 0.3, color=render.EDGE, linewidth=0.8)
    render.bare(ax, (lo - 0.2, hi + 0.2), (y - 0.2, 0.2))
    _axis_ticks(ax, lo, hi)
    labels = [f"src[{i}]" if src is None else f"src[{i}]={render.format_value(src[i])}"
              for i in range(rows)]
    bottom = "taps here" if dst is None else "dst (sum)"
    ax.set_yticks([-i - 0.5 for i in range(rows)] + [y + 0.5], labels + [bottom], fontsize=8)
    ax.set_xlabel("dst position  x*S + k*D - P_b", fontsize=8)
    head = f"{title}: " if title else ""
    ax.set_title(f"{head}scatter view  {_describe(scatter.problem)}", fontsize=9)
    return fig


def plot_stretched(view: Stretched, output_index: Sequence[int] | None = None, *,
                   src=None, weights=None, title: str = "", figsize=None):
    """The stretched-input view of a 1-D transposed convolution, for one output.

    Top: the stretched, padded input: src elements coloured as in :func:`plot_scatter`,
    the ``S - 1`` zeros inserted between them dotted, the padding hatched grey. The
    flipped kernel's window for ``dst[output_index]`` is outlined in orange, each tap
    labelled with the weight it carries. Bottom: dst, with that output highlighted; the
    caption lists the products that reach it.

    Returns
    -------
    matplotlib.figure.Figure
    """
    scatter = view.scatter
    _require_1d(scatter.rank, "a stretched view")
    src, weights, dst = _values_1d(scatter, src, weights)
    (out,) = scatter.output_shape
    output_index = (0,) if output_index is None else tuple(output_index)
    if not 0 <= output_index[0] < out:
        raise ValueError(f"output_index={output_index} is outside the output shape "
                         f"{scatter.output_shape}")
    win = view.windows
    (lo, hi), = win.padded_bounds
    s = view.strides[0]
    (kernel,) = scatter.kernel_shape
    # dst[y] sits under the centre of its window, and both rows share one x scale, so
    # that a cell of dst is as wide as a cell of the stretched input
    begin, end = scatter.problem.forward_pads
    centre = -begin[0] + (kernel - 1) * scatter.problem.dilations[0] / 2
    left, right = min(lo, centre), max(hi, out + centre)
    fig = render.new_figure(figsize or (max(6.0, 0.5 * (right - left) + 1.2), 3.0))
    top, bottom = fig.subplots(2, 1, height_ratios=[1, 1])
    taps = {int(u): j for j, u in enumerate(win.reads(output_index)[:, 0])}
    for u in range(lo, hi):
        kind = view.kind((u,))
        if kind == "src":
            i = u // s
            text = f"x{i}" if src is None else render.format_value(src[i])
            render.cell(top, u, -1, _light(i), text, fontsize=8)
        elif kind == "zero":
            _, label = render.cell(top, u, -1, render.SRC_FACE, "0", hatch="..", fontsize=8)
            # the dots would hide the digit
            label.set_bbox({"facecolor": render.SRC_FACE, "edgecolor": "none", "pad": 0.8})
        else:
            _, label = render.cell(top, u, -1, render.PAD_FACE, "0", hatch="///", fontsize=8)
            label.set_bbox({"facecolor": render.PAD_FACE, "edgecolor": "none", "pad": 0.8})
        if u in taps:
            k = kernel - 1 - taps[u]                     # the flipped kernel's tap j
            outline = top.add_patch(render.mpl("matplotlib.patches").Rectangle(
                (u, -1), 1, 1, fill=False, edgecolor=render.TAP_FACE, linewidth=2.6))
            outline.set_in_layout(False)
            label = f"×w{k}" if weights is None else f"×{render.format_value(weights[k])}"
            top.text(u + 0.5, -1.15, label, ha="center", va="top", fontsize=7,
                     color="#5a2d00")
    render.bare(top, (left - 0.2, right + 0.2), (-1.6, 0.2))
    _axis_ticks(top, lo, hi)
    top.set_yticks([])
    top.set_title(f"src stretched by S={s} ({s - 1} zero{'s' if s != 2 else ''} between "
                  f"elements), padded {begin[0]}/{end[0]}, flipped kernel", fontsize=9)

    for t in range(out):
        face, ink = (render.OUT_FACE, "white") if t == output_index[0] else \
            (render.SRC_FACE, "black")
        text = str(t) if dst is None else render.format_value(round(dst[t], 4))
        render.cell(bottom, t + centre, -1, face, text, fontsize=8, text_colour=ink)
    render.bare(bottom, (left - 0.2, right + 0.2), (-1.2, 0.2))
    bottom.set_xticks(np.arange(out) + centre + 0.5, [str(c) for c in range(out)],
                      fontsize=8)
    bottom.set_yticks([])
    bottom.set_title(f"dst  O={out}", fontsize=9)

    pairs = view.sources(output_index)
    o = output_index[0]
    if not pairs:
        caption = f"dst[{o}] receives no product (only bias)"
    elif src is None:
        caption = f"dst[{o}] = " + " + ".join(f"x{i[0]}·w{k[0]}" for i, k in pairs)
    else:
        def factor(value):
            text = render.format_value(value)
            return f"({text})" if value < 0 else text
        caption = f"dst[{o}] = " + " + ".join(
            f"{factor(src[i])}·{factor(weights[k])}"
            for i, k in pairs) + f" = {render.format_value(round(dst[o], 4))}"
    head = f"{title}: " if title else ""
    fig.suptitle(head + caption, fontsize=10)
    return fig


def plot_overlap(counts: np.ndarray | dict[str, np.ndarray], *, figsize=None):
    """How many taps land on each output, as a grid of numbers shaded by the count.

    ``counts`` is one array from :func:`overlap_counts` (or :meth:`Scatter.counts`), or a
    dict ``{title: counts}`` to compare cases side by side on one colour scale. 1-D
    counts are drawn as one row.

    Returns
    -------
    matplotlib.figure.Figure
    """
    cases = counts if isinstance(counts, dict) else {"": counts}
    arrays = {name: np.atleast_2d(np.asarray(c)) for name, c in cases.items()}
    for name, c in cases.items():
        if np.asarray(c).ndim not in (1, 2):
            raise ValueError(f"counts {name!r} have rank {np.asarray(c).ndim}; expected 1-D "
                             f"or 2-D")
    top = max(1, max(int(a.max()) for a in arrays.values()))
    cmap = render.mpl("matplotlib").colormaps["Blues"]
    colors = render.mpl("matplotlib.colors")
    widths = [a.shape[1] for a in arrays.values()]
    height = max(a.shape[0] for a in arrays.values())
    fig = render.new_figure(figsize or (max(4.0, 0.36 * sum(widths) + 1.0 * len(widths)),
                                        0.36 * height + 1.1))
    axes = np.atleast_1d(fig.subplots(1, len(arrays), width_ratios=widths, squeeze=False)[0])
    for ax, (name, a) in zip(axes, arrays.items()):
        for r, c in itertools.product(range(a.shape[0]), range(a.shape[1])):
            face = cmap(0.1 + 0.75 * a[r, c] / top)
            r_, g_, b_ = colors.to_rgb(face)
            ink = "black" if 0.299 * r_ + 0.587 * g_ + 0.114 * b_ > 0.5 else "white"
            render.cell(ax, c, -r - 1, face, str(int(a[r, c])), fontsize=7, text_colour=ink,
                        linewidth=0.4)
        render.bare(ax, (-0.2, a.shape[1] + 0.2), (-a.shape[0] - 0.2, 0.2))
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_title(name or "taps landing on each output", fontsize=9)
    return fig
