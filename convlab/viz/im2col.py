"""im2col: the column matrix a convolution becomes, and the memory it would take.

im2col rewrites a convolution as one matrix product per group. Row ``m`` of the column
matrix (the *panel*) is output position ``(n, o_1..o_r)`` in dst order; column
``t * IC/G + c`` is kernel tap ``t`` (taps in C order), channel ``c`` of the group::

    panel_g[m, t*ICg + c] = src[n, o*S + k(t)*D - P_b, g*ICg + c]    (0 in the padding)
    dst[m, g*OCg:(g+1)*OCg] = panel_g @ W_g

with ``W_g`` the canonical weights of group g read as a ``(prod(K)*ICg, OCg)`` matrix.
The panels here are built by the library's own unfolding code
(:func:`convlab.strategies.im2col.unfold`, which calls the Cython kernel's
``unfold_panel``), and where each entry comes from is found the same way, by unfolding
a src whose values are their own flat positions. The chunking figures read the plan
the strategy itself would follow (:func:`convlab.strategies.im2col.plan`).
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from convlab.problem import params
from convlab.problem.params import ConvProblem
from convlab.strategies import im2col as strategy
from convlab.viz import render


@dataclass(frozen=True)
class ColumnMatrix:
    """One group's column matrix, with where each of its entries came from.

    Attributes
    ----------
    problem : ConvProblem
        The convolution (src NXC, weights XIO) whose panel this is.
    group : int
        g, the group whose channels the columns hold.
    panel : numpy.ndarray, shape ``(N * prod(O), prod(K) * IC/G)``
        The values, as :func:`convlab.strategies.im2col.unfold` builds them.
    source : numpy.ndarray of int, shape ``panel.shape + (r + 2,)``
        ``source[m, j]`` is the src index ``(n, i_1..i_r, c)`` (NXC, c over all IC)
        that ``panel[m, j]`` copies, or all -1 where it is zero padding.
    rows : numpy.ndarray of int, shape ``(N * prod(O), r + 1)``
        ``(n, o_1..o_r)`` of each row.
    columns : numpy.ndarray of int, shape ``(prod(K) * IC/G, r + 1)``
        ``(k_1..k_r, c)`` of each column, ``c`` counted within the group.
    src : numpy.ndarray
        The src that was unfolded, NXC, in the problem's dtype.
    """

    problem: ConvProblem
    group: int
    panel: np.ndarray
    source: np.ndarray
    rows: np.ndarray
    columns: np.ndarray
    src: np.ndarray

    @property
    def padding(self) -> np.ndarray:
        """bool, ``panel.shape``: entries that are zero padding, not copies of src."""
        return self.source[..., 0] < 0

    def copies(self) -> np.ndarray:
        """int, src shape ``(N, I..., IC)``: how often each src element appears in the panel
        (its channels outside this group appear 0 times)."""
        p = self.problem
        counts = np.zeros((p.batch, *p.input_shape, p.in_channels), dtype=np.int64)
        inside = self.source[~self.padding]
        np.add.at(counts, tuple(inside.T), 1)
        return counts

    def weights_matrix(self, weights) -> np.ndarray:
        """``W_g``: group g of XIO ``weights`` ``(K..., IC/G, OC)`` as ``(prod(K)*ICg, OCg)``."""
        p = self.problem
        weights = np.asarray(weights)
        if weights.shape != p.weights_shape:
            raise ValueError(f"weights has shape {weights.shape}; expected {p.weights_shape} "
                             f"(XIO: K..., IC/G, OC)")
        canonical = params.canonical_weights(weights, p)       # (G, K..., ICg, OCg)
        return canonical[self.group].reshape(-1, p.out_channels_per_group)

    def multiply(self, weights) -> np.ndarray:
        """``panel @ W_g`` reshaped to dst's channels-last ``(N, O..., OC/G)``."""
        p = self.problem
        product = self.panel.astype(np.float64) @ self.weights_matrix(weights).astype(np.float64)
        return product.reshape(p.batch, *p.output_shape, p.out_channels_per_group)


def column_matrix(src, kernel_shape: Sequence[int], *, out_channels: int | None = None,
                  strides=None,
                  dilations=None, pads_begin=None, pads_end=None, auto_pad: str = "none",
                  groups: int = 1, group: int = 0) -> ColumnMatrix:
    """Unfold ``src`` (NXC, ``(N, I..., IC)``) into group ``group``'s column matrix.

    The attributes are those of :func:`convlab.convolve`; ``out_channels`` only sets OC
    of the problem (default G: the panel does not depend on it, ``multiply`` does).
    """
    src = np.asarray(src)
    if src.ndim < 3:
        raise ValueError(f"src has shape {src.shape}; expected (N, I..., IC) with at least "
                         f"one spatial axis")
    kernel_shape = tuple(int(k) for k in kernel_shape)
    in_channels = src.shape[-1]
    icg = in_channels // groups if isinstance(groups, int) and groups >= 1 else in_channels
    dtype = src.dtype if src.dtype in (np.float32, np.float64) else np.float64
    if out_channels is None:
        out_channels = groups
    problem = params.make_problem(src.shape, dtype, (*kernel_shape, icg, out_channels), dtype,
                                  strides=strides, dilations=dilations,
                                  pads_begin=pads_begin, pads_end=pads_end,
                                  auto_pad=auto_pad, groups=groups)
    if not 0 <= group < problem.groups:
        raise ValueError(f"group={group} is outside 0..{problem.groups - 1} (G={problem.groups})")
    src = np.ascontiguousarray(src, dtype=dtype)
    panel = strategy.unfold(problem, src, group)

    # Unfolding a src whose values are flat positions + 1 (0 stays for padding) tells
    # where every entry comes from; float64 holds such positions exactly.
    positions = math.prod(src.shape)
    labels = np.arange(1, positions + 1, dtype=np.float64).reshape(src.shape)
    label_problem = params.make_problem(
        src.shape, np.float64, problem.weights_shape, np.float64, strides=problem.strides,
        dilations=problem.dilations, pads_begin=problem.pads_begin,
        pads_end=problem.pads_end, groups=problem.groups)
    flat = np.rint(strategy.unfold(label_problem, labels, group)).astype(np.int64) - 1
    source = np.full(flat.shape + (src.ndim,), -1, dtype=np.int64)
    inside = flat >= 0
    source[inside] = np.stack(np.unravel_index(flat[inside], src.shape), axis=-1)

    rows = np.stack(np.unravel_index(np.arange(problem.batch * problem.output_size),
                                     (problem.batch, *problem.output_shape)), axis=-1)
    columns = np.stack(np.unravel_index(np.arange(panel.shape[1]),
                                        (*kernel_shape, problem.in_channels_per_group)), axis=-1)
    return ColumnMatrix(problem, group, panel, source, rows, columns, src)


# --------------------------------------------------------------------------- memory

@dataclass(frozen=True)
class PanelCost:
    """What im2col's column matrices cost for one problem, and how the strategy bounds it.

    Attributes
    ----------
    problem : ConvProblem
    src_bytes, weights_bytes, dst_bytes : int
    panel_bytes : int
        All groups' full panels together: ``N * prod(O) * prod(K) * IC`` elements (0 for
        the ``1x1-direct`` path, which multiplies src as it lies).
    limit_bytes : int
        The workspace bound the plan was made for.
    plan : dict
        :meth:`convlab.strategies.im2col.Plan.describe`: path, thread mode, rows per chunk,
        chunks, reduction blocks, workspace bytes.
    """

    problem: ConvProblem
    src_bytes: int
    weights_bytes: int
    dst_bytes: int
    panel_bytes: int
    limit_bytes: int
    plan: dict

    @property
    def blow_up(self) -> float:
        """Panel bytes over src bytes: how many times im2col copies the input."""
        return self.panel_bytes / self.src_bytes

    @property
    def workspace_bytes(self) -> int:
        return int(self.plan["workspace_bytes"])

    def chunk_rows(self) -> list:
        """``(first_row, end_row)`` of each chunk of the panel, in order."""
        total = self.problem.batch * self.problem.output_size
        rows = int(self.plan["rows"])
        return [(start, min(total, start + rows)) for start in range(0, total, rows)]

    def column_blocks(self) -> list:
        """``(first_column, end_column)`` of each reduction block of a panel row."""
        width = self.problem.kernel_size * self.problem.in_channels_per_group
        cols = int(self.plan["cols_per_block"])
        return [(start, min(width, start + cols)) for start in range(0, width, cols)]


def panel_cost(problem: ConvProblem, *, threads: int = 1,
               limit_bytes: int | None = None) -> PanelCost:
    """The sizes of ``problem``'s panels and the strategy's chunking under ``limit_bytes``
    (default: the current workspace limit,
    :func:`convlab.strategies.im2col.get_workspace_limit`)."""
    limit = strategy.get_workspace_limit() if limit_bytes is None else int(limit_bytes)
    plan = strategy.plan(problem, threads, limit)
    item = problem.dtype.itemsize
    described = plan.describe(item)
    panel = 0 if described["path"] == "1x1-direct" else \
        problem.batch * problem.output_size * problem.kernel_size * problem.in_channels * item
    return PanelCost(problem,
                     problem.batch * math.prod(problem.input_shape) * problem.in_channels * item,
                     math.prod(problem.weights_shape) * item,
                     problem.batch * problem.output_size * problem.out_channels * item,
                     panel, limit, described)


# --------------------------------------------------------------------------- drawing

def _source_colours(src_shape):
    """A distinct, light colour per src position (channels share their pixel's hue)."""
    colors = render.mpl("matplotlib.colors")
    cmap = render.mpl("matplotlib").colormaps["tab20"]
    pixels = math.prod(src_shape[:-1])

    def colour(index):
        pixel = np.ravel_multi_index(tuple(index[:-1]), src_shape[:-1])
        rgb = np.array(colors.to_rgb(cmap(pixel % 20)))
        return tuple(0.35 + 0.65 * rgb) if pixels > 20 and pixel >= 20 else tuple(rgb)
    return colour


def _ink(face) -> str:
    """Black text on light cells, white on dark ones."""
    r, g, b = render.mpl("matplotlib.colors").to_rgb(face)
    return "black" if 0.299 * r + 0.587 * g + 0.114 * b > 0.5 else "white"


def _index_text(index, rank, channels) -> str:
    spatial = ",".join(str(int(v)) for v in index[1:1 + rank])
    return spatial if channels == 1 else f"{spatial};{int(index[-1])}"


def plot_column_matrix(matrix: ColumnMatrix, weights=None, *, values: bool = False,
                       figsize=None):
    """Left: src with each element in its own colour (padding hatched). Middle: the column
    matrix, every entry coloured like the src element it copies and labelled with its
    src coordinates (or its value, ``values=True``). With XIO ``weights``, right: the
    GEMM ``panel @ W_g = dst`` that finishes the convolution.

    Only 1-D and 2-D problems of batch 1 are drawn (the panel has one row per output).

    Returns
    -------
    matplotlib.figure.Figure
    """
    p = matrix.problem
    if p.rank not in (1, 2) or p.batch != 1:
        raise ValueError(f"a column matrix of rank {p.rank} and batch {p.batch} cannot be "
                         f"drawn; expected a 1-D or 2-D problem with N=1")
    panel, source = matrix.panel, matrix.source
    rows, cols = panel.shape
    icg = p.in_channels_per_group
    src_shape = (p.batch, *p.input_shape, p.in_channels)
    colour = _source_colours(src_shape[1:])
    grid = p.input_shape if p.rank == 2 else (1, p.input_shape[0])
    pb = p.pads_begin if p.rank == 2 else (0, p.pads_begin[0])
    pe = p.pads_end if p.rank == 2 else (0, p.pads_end[0])

    w_matrix = None if weights is None else matrix.weights_matrix(weights)
    ocg = 0 if w_matrix is None else w_matrix.shape[1]
    padded_w = grid[1] + max(0, pb[1]) + max(0, pe[1])
    widths = [padded_w + 0.5, cols + 0.5] + ([ocg + 0.5, ocg + 0.5] if ocg else [])
    width = 0.42 * sum(widths) + 1.6 + (1.4 if ocg else 0)
    fig = render.new_figure(figsize or (max(6.0, width), 0.3 * rows + 1.9))
    axes = fig.subplots(1, len(widths), width_ratios=widths)

    # src over its padded extent
    ax = axes[0]
    for r in range(-max(0, pb[0]), grid[0] + max(0, pe[0])):
        for c in range(-max(0, pb[1]), grid[1] + max(0, pe[1])):
            inside = 0 <= r < grid[0] and 0 <= c < grid[1]
            if inside:
                index = (0, r, c, 0) if p.rank == 2 else (0, c, 0)
                text = (render.format_value(matrix.src[index]) if values
                        else ",".join(map(str, index[1:-1])))
                face = colour(index[1:])
                render.cell(ax, c, -r - 1, face, text, fontsize=7, text_colour=_ink(face))
            else:
                render.cell(ax, c, -r - 1, render.PAD_FACE, "0", hatch="///", fontsize=7)
    render.bare(ax, (-max(0, pb[1]) - 0.2, grid[1] + max(0, pe[1]) + 0.2),
                (-grid[0] - max(0, pe[0]) - 0.2, max(0, pb[0]) + 0.2))
    ax.set_xticks([])
    ax.set_yticks([])
    channels = f", IC={p.in_channels}" if p.in_channels > 1 else ""
    padded = "\n(with its padding)" if any(pb) or any(pe) else ""
    ax.set_title(f"src I={'x'.join(map(str, p.input_shape))}{channels}{padded}", fontsize=9)

    # the column matrix
    ax = axes[1]
    for m in range(rows):
        for j in range(cols):
            if matrix.padding[m, j]:
                render.cell(ax, j, -m - 1, render.PAD_FACE, "0", hatch="///", fontsize=6)
                continue
            index = source[m, j]
            text = (render.format_value(panel[m, j]) if values
                    else _index_text(index, p.rank, icg))
            face = colour(index[1:])
            render.cell(ax, j, -m - 1, face, text, fontsize=6, text_colour=_ink(face))
    render.bare(ax, (-0.2, cols + 0.2), (-rows - 0.2, 0.2))
    tap_names = [",".join(map(str, col[:-1])) + (f";{col[-1]}" if icg > 1 else "")
                 for col in matrix.columns]
    ax.set_xticks(np.arange(cols) + 0.5, tap_names, fontsize=6, rotation=90)
    ax.set_yticks(-np.arange(rows) - 0.5,
                  [",".join(map(str, row[1:])) for row in matrix.rows], fontsize=6)
    ax.set_xlabel("column: tap k" + (";channel c" if icg > 1 else ""), fontsize=8)
    ax.set_ylabel("row: output position o", fontsize=8)
    ax.set_title(f"column matrix ({rows} x {cols}): {int((~matrix.padding).sum())} copies "
                 f"of {p.in_channels_per_group * math.prod(p.input_shape)} src values",
                 fontsize=9)

    if ocg:
        dst = matrix.multiply(weights).reshape(rows, ocg)
        _plot_matrix(axes[2], w_matrix, f"weights W_g\n({cols} x {ocg})")
        _plot_matrix(axes[3], dst, f"dst =\npanel @ W_g\n({rows} x {ocg})")
        axes[2].set_xlabel("oc", fontsize=8)
        axes[3].set_xlabel("oc", fontsize=8)
    return fig


def _plot_matrix(ax, values, title):
    """A small matrix of numbers, cells shaded by sign and size."""
    cmap = render.mpl("matplotlib").colormaps["RdBu_r"]
    top = float(np.abs(values).max()) or 1.0
    rows, cols = values.shape
    for m in range(rows):
        for j in range(cols):
            v = float(values[m, j])
            face = cmap(0.5 + 0.45 * v / top)
            render.cell(ax, j, -m - 1, face, render.format_value(round(v, 2)), fontsize=6,
                        text_colour=_ink(face))
    render.bare(ax, (-0.2, cols + 0.2), (-rows - 0.2, 0.2))
    ax.set_xticks(np.arange(cols) + 0.5, [str(j) for j in range(cols)], fontsize=6)
    ax.set_yticks([])
    ax.set_title(title, fontsize=9)


def plot_panel_chunks(cost: PanelCost, *, figsize=None):
    """Left: the full column matrix (each axis scaled to its extent), cut into the chunks the
    strategy unfolds one at a time (and into reduction blocks when one row is too wide). Right:
    bytes of src,
    the full panel, the workspace the plan holds and the limit, on a log scale.

    Returns
    -------
    matplotlib.figure.Figure
    """
    patches = render.mpl("matplotlib.patches")
    p = cost.problem
    total_rows = p.batch * p.output_size
    width = p.kernel_size * p.in_channels_per_group
    fig = render.new_figure(figsize or (9.0, 4.2))
    left, right = fig.subplots(1, 2, width_ratios=[1.0, 1.3])
    chunks, blocks = cost.chunk_rows(), cost.column_blocks()
    shown = chunks if len(chunks) <= 40 else chunks[:39] + [chunks[-1]]
    for number, (r0, r1) in enumerate(shown):
        for b, (c0, c1) in enumerate(blocks):
            face = render.group_colour(number % 2 * 2 + b % 2)
            left.add_patch(patches.Rectangle((c0 / width, -r1 / total_rows),
                                             (c1 - c0) / width, (r1 - r0) / total_rows,
                                             facecolor=face, alpha=0.55, edgecolor="white",
                                             linewidth=0.6))
    left.set_xlim(0, 1)
    left.set_ylim(-1, 0)
    left.set_xticks([0, 1], ["0", str(width)], fontsize=8)
    left.set_yticks([0, -1], ["0", str(total_rows)], fontsize=8)
    left.set_xlabel("panel columns (prod(K) x IC/G)", fontsize=8)
    left.set_ylabel("panel rows (N x prod(O))", fontsize=8)
    plan = cost.plan
    skipped = " (first 39 and last shown)" if len(chunks) > 40 else ""
    left.set_title(f"path {plan['path']}, mode {plan['mode']}: {len(chunks)} chunks of "
                   f"{plan['rows']} rows{skipped}\nx {len(blocks)} reduction block(s)"
                   + (f", per group (G={p.groups})" if p.groups > 1 else ""), fontsize=9)

    names = ["src", "weights", "full panels", "workspace held", "limit"]
    sizes = [cost.src_bytes, cost.weights_bytes, max(cost.panel_bytes, 1),
             max(cost.workspace_bytes, 1), cost.limit_bytes]
    colours = ["#bab0ac", "#bab0ac", render.TAP_FACE, render.OUT_FACE, "#404040"]
    y = np.arange(len(names))[::-1]
    right.barh(y, sizes, color=colours)
    right.set_xscale("log")
    right.set_yticks(y, names, fontsize=8)
    for yy, size in zip(y, sizes):
        right.text(size, yy, f" {_bytes(size)}", va="center", fontsize=8)
    right.set_xlim(min(sizes) / 2, max(sizes) * 8)
    right.tick_params(axis="x", labelsize=7)
    right.set_title(f"memory: the full panels are {cost.blow_up:.1f}x src", fontsize=9)
    fig.suptitle(p.describe(), fontsize=9)
    return fig


def _bytes(n: float) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{int(n)} B"
