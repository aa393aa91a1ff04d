"""Where each element of src and weights sits in memory, for NCX/NXC and OIX/XIO.

A C-contiguous array stores its last axis fastest. NCX (N, C, X...) therefore keeps
each channel's whole image together, while NXC (N, X..., C) keeps the channels of one
pixel together. The offsets here are produced by the same conversion convlab applies at
its boundary (:func:`convlab.problem.params.canonical_src`,
:func:`~convlab.problem.params.canonical_weights`):
an array whose values are their own memory offsets is read in the user's format and
re-indexed logically, as docs/specification.md §1.1 indexes ``src[n, c, x...]`` and
``weights[oc, ic, k...]``.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from convlab.problem import params
from convlab.viz import render


def _own_offsets(shape) -> np.ndarray:
    # float64 holds every offset of a drawable array exactly
    return np.arange(math.prod(shape), dtype=np.float64).reshape(shape)


def src_offsets(batch: int, in_channels: int, spatial: Sequence[int],
                data_format: str = "NXC") -> np.ndarray:
    """Memory offset of ``src[n, c, x...]`` when src is stored in ``data_format``.

    Returns
    -------
    numpy.ndarray of int, shape ``(N, IC, *X)``, logical order whatever the format.
    """
    spatial = tuple(spatial)
    problem = params.make_problem(
        params.user_data_shape(batch, in_channels, spatial, params.parse_data_format(data_format)),
        np.float64, (*(1,) * len(spatial), in_channels, 1), np.float64,
        data_format=data_format)
    canonical = params.canonical_src(_own_offsets(problem.src_shape), problem)  # (N, X..., C)
    return np.moveaxis(canonical, -1, 1).astype(np.int64)


def weights_offsets(out_channels: int, in_channels: int, kernel: Sequence[int], groups: int = 1,
                    weights_format: str = "XIO") -> np.ndarray:
    """Memory offset of ``weights[oc, ic', k...]`` when stored in ``weights_format``.

    ``ic'`` counts within the group (0 <= ic' < IC/G).

    Returns
    -------
    numpy.ndarray of int, shape ``(OC, IC/G, *K)``, logical order whatever the format.
    """
    kernel = tuple(kernel)
    r = len(kernel)
    fmt = params.parse_weights_format(weights_format)
    icg = in_channels // groups if groups >= 1 else in_channels
    problem = params.make_problem(
        (1, *kernel, in_channels), np.float64,
        params.user_weights_shape(out_channels, icg, kernel, fmt), np.float64,
        groups=groups, weights_format=fmt)
    grouped = params.canonical_weights(_own_offsets(problem.weights_shape), problem)
    # (G, K..., ICg, OCg) -> (G, OCg, ICg, K...) -> (OC, ICg, K...)
    logical = np.moveaxis(grouped, (r + 1, r + 2), (2, 1))
    return logical.reshape(out_channels, icg, *kernel).astype(np.int64)


def memory_order(offsets: np.ndarray) -> np.ndarray:
    """int ``(size, ndim)``: the logical index stored at offset 0, 1, 2, ..."""
    order = np.argsort(offsets, axis=None, kind="stable")
    return np.stack(np.unravel_index(order, offsets.shape), axis=-1)


def logical_strides(offsets: np.ndarray) -> tuple:
    """Elements skipped in memory by one step along each logical axis."""
    strides = []
    for axis, extent in enumerate(offsets.shape):
        if extent < 2:
            strides.append(0)
            continue
        step = [0] * offsets.ndim
        step[axis] = 1
        strides.append(int(offsets[tuple(step)] - offsets[(0,) * offsets.ndim]))
    return tuple(strides)


def plot_memory_layout(offsets: np.ndarray, names: Sequence[str], *, colour_axis: int = 1,
                       title: str = "", per_row: int = 18, figsize=None):
    """Top: the logical tensor, one small grid per leading index pair, each cell holding its
    memory offset. Bottom: memory itself, cell after cell, each holding its logical index.
    Colours follow ``colour_axis`` (the channel axis by default), so a channels-first and
    a channels-last layout look striped differently.

    Parameters
    ----------
    offsets : numpy.ndarray of int
        From :func:`src_offsets` or :func:`weights_offsets`: two leading axes, then one or
        two spatial axes.
    names : sequence of str
        One short name per axis, e.g. ``("n", "c", "h", "w")``.

    Returns
    -------
    matplotlib.figure.Figure
    """
    offsets = np.asarray(offsets)
    if offsets.ndim not in (3, 4):
        raise ValueError(f"offsets has {offsets.ndim} axes; expected 3 or 4 (two leading "
                         f"axes and one or two spatial axes)")
    if len(names) != offsets.ndim:
        raise ValueError(f"names={tuple(names)!r} must name each of the {offsets.ndim} axes")
    grid = offsets if offsets.ndim == 4 else offsets[:, :, None, :]
    lead0, lead1, rows, cols = grid.shape
    panels = lead0 * lead1
    size = offsets.size
    strip_rows = math.ceil(size / per_row)
    strip_cols = min(size, per_row)

    width = max(panels * (cols + 1), strip_cols + 2) * 0.42 + 0.6
    fig = render.new_figure(figsize or (width, 0.42 * (rows + strip_rows * 1.25) + 1.9))
    top, bottom = fig.subplots(2, 1, height_ratios=[rows + 1.2, strip_rows * 1.25 + 0.6])

    def colour(index):
        return render.group_colour(int(index[colour_axis]))

    x = 0
    for a in range(lead0):
        for b in range(lead1):
            for r in range(rows):
                for c in range(cols):
                    index = (a, b, r, c) if offsets.ndim == 4 else (a, b, c)
                    render.cell(top, x + c, rows - 1 - r, colour(index),
                                str(int(offsets[index])), text_colour="white", fontsize=8)
            top.text(x + cols / 2, rows + 0.15, f"{names[0]}={a}, {names[1]}={b}",
                     ha="center", va="bottom", fontsize=8)
            x += cols + 1
    render.bare(top, (-0.2, x - 0.8), (-0.2, rows + 0.9))
    top.set_xticks([])
    top.set_yticks([])
    spatial = ",".join(names[2:])
    top.set_title(f"logical view: each cell shows its memory offset "
                  f"(grids are {spatial})", fontsize=9)

    shown = [axis for axis, extent in enumerate(offsets.shape) if extent > 1] or [0]
    for position, index in enumerate(memory_order(offsets)):
        r, c = divmod(position, per_row)
        label = ",".join(str(int(index[axis])) for axis in shown)
        render.cell(bottom, c, -1.25 * r - 1, colour(index), label, text_colour="white",
                    fontsize=7 if len(shown) > 2 else 8)
    for r in range(strip_rows):
        bottom.text(-0.3, -1.25 * r - 0.5, str(r * per_row), ha="right", va="center",
                    fontsize=8)
    render.bare(bottom, (-1.4, strip_cols + 0.2), (-1.25 * strip_rows - 0.1, 0.3))
    bottom.set_xticks([])
    bottom.set_yticks([])
    # a stride along an axis of extent 1 cannot be seen in the picture, so it is left out
    strides = ", ".join(f"{n}:{s}" for n, s, e in
                        zip(names, logical_strides(offsets), offsets.shape) if e > 1)
    bottom.set_title(f"memory, offset 0 onwards; cells show "
                     f"({','.join(names[a] for a in shown)});  strides {strides}", fontsize=9)
    if title:
        fig.suptitle(title, fontsize=10)
    return fig
