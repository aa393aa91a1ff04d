"""Which input channels feed which output channels: groups and depthwise convolution.

With ``groups=G`` the IC input channels and OC output channels split into G equal
groups, and output channel ``oc`` only reads the IC/G input channels of its own group
(docs/specification.md §1.1: ``src[n, g*ICg + ic, ...] * weights[g*OCg + oc, ic, ...]``).
Depthwise is ``G == IC``: one input channel per group. The connectivity here is measured by the
kernel on one-hot inputs, so a block-diagonal picture is a fact about the code.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import convlab
from convlab.viz import render


@dataclass(frozen=True)
class ChannelMap:
    """Channel connectivity of a (grouped) convolution.

    Attributes
    ----------
    in_channels, out_channels, groups : int
        IC, OC and G.
    connected : numpy.ndarray of bool, shape ``(OC, IC)``
        ``connected[oc, ic]``: output channel ``oc`` reads input channel ``ic``.
    weight_column : numpy.ndarray of int, shape ``(OC, IC)``
        The weights column ``ic'`` (0 <= ic' < IC/G, as in ``weights[oc, ic', k...]`` for
        OIX) that carries the connection, or -1 where there is none.
    """

    in_channels: int
    out_channels: int
    groups: int
    connected: np.ndarray
    weight_column: np.ndarray

    def group_of_output(self, oc: int) -> int:
        return oc // (self.out_channels // self.groups)


def channel_connectivity(in_channels: int, out_channels: int, groups: int = 1, *,
                         algorithm: str = "direct") -> ChannelMap:
    """Measure channel connectivity by convolving one-hot channel inputs.

    One convolution with a 1x1 kernel and no spatial extent: batch entry ``n`` has
    src one-hot at channel ``n``, and the weights of input column ``ic'`` all hold
    ``ic' + 1``. Then ``dst[n, oc]`` is ``ic' + 1`` if output ``oc`` reads input ``n``
    through column ``ic'``, and 0 if it does not read it at all.
    """
    problem = convlab.make_problem((in_channels, 1, in_channels), np.float64,
                                   (1, in_channels // max(groups, 1), out_channels),
                                   np.float64, groups=groups)
    icg = problem.in_channels_per_group
    src = np.eye(in_channels).reshape(in_channels, 1, in_channels)
    weights = np.broadcast_to((np.arange(icg, dtype=np.float64) + 1)[:, None],
                              (icg, out_channels)).reshape(1, icg, out_channels)
    dst = convlab.convolve(src, np.ascontiguousarray(weights), groups=groups,
                           algorithm=algorithm)[:, 0, :]          # (IC, OC)
    column = np.rint(dst.T).astype(np.int64) - 1                   # (OC, IC)
    return ChannelMap(in_channels, out_channels, groups, column >= 0, column)


def plot_channel_groups(channel_map: ChannelMap, *, figsize=None):
    """Left: input channels wired to output channels, coloured by group. Right: the
    ``(OC, IC)`` connectivity matrix, each connection labelled with its weights column.

    Returns
    -------
    matplotlib.figure.Figure
    """
    patches = render.mpl("matplotlib.patches")
    m = channel_map
    ic, oc, g = m.in_channels, m.out_channels, m.groups
    tall = max(ic, oc)
    fig = render.new_figure(figsize or (4.0 + 0.45 * ic + 2.5, 0.45 * tall + 1.6))
    wires, matrix = fig.subplots(1, 2, width_ratios=[4.0, max(ic, 2) * 0.45 + 0.6])

    def y_of(index, count):
        # centre the shorter column against the taller one
        return (tall - count) / 2 + (count - 1 - index)

    icg, ocg = ic // g, oc // g
    for group in range(g):
        colour = render.group_colour(group)
        for x, first, count, per in ((0.0, group * icg, ic, icg),
                                     (3.0, group * ocg, oc, ocg)):
            top = y_of(first, count) + 0.45
            bottom = y_of(first + per - 1, count) - 0.45
            wires.add_patch(patches.FancyBboxPatch(
                (x - 0.55, bottom), 1.1, top - bottom, boxstyle="round,pad=0.05",
                facecolor=colour, alpha=0.15, edgecolor="none"))
    for o in range(oc):
        for i in range(ic):
            if m.connected[o, i]:
                wires.plot([0.4, 2.6], [y_of(i, ic), y_of(o, oc)],
                           color=render.group_colour(m.group_of_output(o)), lw=1.3)
    for i in range(ic):
        render.cell(wires, -0.4, y_of(i, ic) - 0.4, render.SRC_FACE, f"ic {i}", width=0.8,
                    height=0.8, fontsize=8)
    for o in range(oc):
        render.cell(wires, 2.6, y_of(o, oc) - 0.4, render.SRC_FACE, f"oc {o}", width=0.8,
                    height=0.8, fontsize=8)
    render.bare(wires, (-0.8, 3.8), (-0.8, tall))
    wires.set_xticks([0, 3], ["src channels", "dst channels"], fontsize=9)
    wires.set_yticks([])
    kind = " (depthwise)" if g == ic and g > 1 else ""
    wires.set_title(f"IC={ic}  OC={oc}  G={g}{kind}: each output reads IC/G={icg}",
                    fontsize=9)

    for o in range(oc):
        for i in range(ic):
            if m.connected[o, i]:
                render.cell(matrix, i, oc - 1 - o, render.group_colour(m.group_of_output(o)),
                            str(m.weight_column[o, i]), text_colour="white", fontsize=8)
            else:
                render.cell(matrix, i, oc - 1 - o, render.SRC_FACE)
    render.bare(matrix, (-0.1, ic + 0.1), (-0.1, oc + 0.1))
    matrix.set_xticks(np.arange(ic) + 0.5, [str(i) for i in range(ic)], fontsize=8)
    matrix.set_yticks(oc - 1 - np.arange(oc) + 0.5, [str(o) for o in range(oc)], fontsize=8)
    matrix.set_xlabel("input channel ic", fontsize=9)
    matrix.set_ylabel("output channel oc", fontsize=9)
    matrix.set_title("connected (number: weights column ic')", fontsize=9)
    return fig
