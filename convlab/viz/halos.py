"""Chunks, receptive fields and halos of a ``convlab.dask`` convolution, read from its graph.

Nothing here is derived from a formula. :func:`chunk_fields` walks the Dask graph that
:func:`convlab.dask.convolve` built and follows every input of every convolution task
back to the source it comes from: a whole input block, or a halo slab (a slice task of a
neighbouring block), and the part of it the task keeps. That gives, per output chunk,
the source intervals the task receives, which is its receptive field, and the halos:
what it reads beyond the input chunk its outputs follow. A figure drawn from it is right
whenever the graph is.

Needs the ``dask`` extra (the graph is a Dask graph); ``import convlab.viz`` does not
import this module. The exercise checkers (:func:`check_rows`, :func:`check_halo`,
:func:`check_blocks`) grade a reader's answer against the graph and say why it is wrong.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from convlab.viz import render

Interval = tuple[int, int]


@dataclass(frozen=True)
class Piece:
    """One input of a convolution task: source ``intervals`` (whole-array coordinates,
    ``[start, stop)`` per spatial axis) taken from input block ``block``, arriving either
    as the whole block or inside the halo slab ``slab`` (block coordinates)."""

    block: tuple[int, ...]
    intervals: tuple[Interval, ...]
    slab: tuple[Interval, ...] | None


@dataclass(frozen=True)
class ChunkField:
    """Output chunk ``index`` (spatial block index): its outputs ``[o0, o1)`` per axis and
    the pieces of src its task receives."""

    index: tuple[int, ...]
    outputs: tuple[Interval, ...]
    pieces: tuple[Piece, ...]

    def rows(self, axis: int) -> list[int]:
        """The source positions along ``axis`` the task receives, sorted."""
        found: set[int] = set()
        for piece in self.pieces:
            found.update(range(*piece.intervals[axis]))
        return sorted(found)

    def span(self, axis: int) -> Interval:
        """``[first, last + 1)`` of the source positions received along ``axis``."""
        rows = self.rows(axis)
        return rows[0], rows[-1] + 1

    def blocks(self) -> set[tuple[int, ...]]:
        """The input blocks the task reads from (itself and its halo's neighbours)."""
        return {piece.block for piece in self.pieces}


@dataclass(frozen=True)
class HaloMap:
    """What every output chunk of one batch block reads, as the graph says.

    ``input_chunks`` and ``output_chunks`` are the chunk sizes along the spatial axes;
    ``tasks`` counts the graph's tasks by kind (``"convolution"``, ``"halo slab"``, and the
    ``"input block"`` tasks of src's own graph)."""

    input_chunks: tuple[tuple[int, ...], ...]
    output_chunks: tuple[tuple[int, ...], ...]
    fields: dict[tuple[int, ...], ChunkField]
    tasks: dict[str, int]

    @property
    def rank(self) -> int:
        return len(self.input_chunks)

    def input_chunk(self, axis: int, block: int) -> Interval:
        """Source ``[start, stop)`` of input chunk ``block`` along ``axis``."""
        edges = np.concatenate([[0], np.cumsum(self.input_chunks[axis])])
        return int(edges[block]), int(edges[block + 1])

    def halo(self, index: tuple[int, ...], axis: int) -> Interval:
        """(before, after): how many source positions along ``axis`` output chunk ``index``
        receives beyond the input chunk it follows (the one with the same block index;
        output chunks follow input chunks one to one unless a stride or crop emptied one)."""
        if len(self.output_chunks[axis]) != len(self.input_chunks[axis]):
            raise ValueError(f"axis {axis} has {len(self.output_chunks[axis])} output chunks "
                             f"for {len(self.input_chunks[axis])} input chunks: which input "
                             f"chunk an output chunk follows is not its block index")
        own_start, own_stop = self.input_chunk(axis, index[axis])
        start, stop = self.fields[index].span(axis)
        return max(0, own_start - start), max(0, stop - own_stop)


def _spatial(key_index: tuple, data_format: str, rank: int) -> tuple[int, ...]:
    """The spatial block indices of a block key's index (batch and channel dropped)."""
    first = 2 if data_format == "NCX" else 1
    return tuple(int(i) for i in key_index[first:first + rank])


def chunk_fields(src, dst, data_format: str = "NXC", batch_block: int = 0) -> HaloMap:
    """Read, from ``dst``'s graph, what each output chunk of ``batch_block`` receives.

    ``dst`` is the result of ``convlab.dask.convolve(src, ...)`` with ``data_format``
    (src must carry all channels in one chunk, so that it is the array the tasks read).
    """
    from convlab.dask._worker import run_block

    data_format = data_format.upper()
    rank = src.ndim - 2
    spatial_axes = range(2, 2 + rank) if data_format == "NCX" else range(1, 1 + rank)
    input_chunks = tuple(tuple(src.chunks[a]) for a in spatial_axes)
    output_chunks = tuple(tuple(dst.chunks[a]) for a in spatial_axes)
    edges = [np.concatenate([[0], np.cumsum(c)]).astype(int) for c in input_chunks]
    out_edges = [np.concatenate([[0], np.cumsum(c)]).astype(int) for c in output_chunks]
    layer = dst.dask.layers[dst.name]
    tasks = {"convolution": 0, "halo slab": 0,
             "input block": len(dst.dask.layers[src.name]) if src.name in dst.dask.layers
             else 0}
    fields: dict[tuple[int, ...], ChunkField] = {}
    for key in layer:
        task = layer[key]
        if task[0] is not run_block:
            tasks["halo slab"] += 1
            continue
        tasks["convolution"] += 1
        if key[1] != batch_block:
            continue
        spec = task[1]
        index = _spatial(key[1:], data_format, rank)
        pieces = []
        for dependency, selection in zip(task[5:], spec.selections):
            if dependency[0] == src.name:
                source_index, slab = dependency[1:], None
            else:
                getter, source_key, slices = layer[dependency]
                if source_key[0] != src.name:
                    raise ValueError(f"dst was not built from src {src.name!r}: it reads "
                                     f"{source_key[0]!r}; pass the array convolve received")
                source_index = source_key[1:]
                slab = tuple((slices[a].start, slices[a].stop) for a in spatial_axes)
            block = _spatial(source_index, data_format, rank)
            intervals = []
            for axis in range(rank):
                begin = int(edges[axis][block[axis]])
                extent = int(input_chunks[axis][block[axis]])
                lo, hi = (0, extent) if slab is None else slab[axis]
                if selection is not None:
                    lo, hi = lo + selection[axis][0], lo + selection[axis][1]
                intervals.append((begin + lo, begin + hi))
            pieces.append(Piece(block, tuple(intervals), slab))
        outputs = tuple((int(out_edges[a][i]), int(out_edges[a][i + 1]))
                        for a, i in enumerate(index))
        fields[index] = ChunkField(index, outputs, tuple(pieces))
    return HaloMap(input_chunks, output_chunks, fields, tasks)


# --------------------------------------------------------------------------- exercises

@dataclass(frozen=True)
class Verdict:
    """A checker's answer: ``right`` and a sentence saying why."""

    right: bool
    reason: str
    answered: bool = True

    @property
    def label(self) -> str:
        return "right" if self.right else "wrong" if self.answered else "no answer yet"

    def __str__(self) -> str:
        return f"{self.label}: {self.reason}"

    def _repr_markdown_(self) -> str:
        return f"**{self.label}**: {self.reason}"


def _unanswered(answer) -> Verdict | None:
    if answer is None or answer is Ellipsis:
        return Verdict(False, "replace the ... with your answer and run the cell",
                       answered=False)
    return None


def _where(field: ChunkField, axis: int) -> str:
    o0, o1 = field.outputs[axis]
    parts = sorted({(p.block[axis], p.intervals[axis]) for p in field.pieces})
    listed = ", ".join(f"{lo}..{hi - 1} from input chunk {b}" for b, (lo, hi) in parts)
    return f"output chunk {field.index} holds outputs {o0}..{o1 - 1} along axis {axis}; " \
           f"its task receives source positions {listed}"


def check_rows(halo_map: HaloMap, index: tuple[int, ...], axis: int, answer) -> Verdict:
    """Grade "how many source positions along ``axis`` does output chunk ``index``
    receive?"."""
    missing = _unanswered(answer)
    if missing:
        return missing
    field = halo_map.fields[tuple(index)]
    count = len(field.rows(axis))
    where = _where(field, axis)
    if not isinstance(answer, (int, np.integer)) or isinstance(answer, bool):
        return Verdict(False, f"answer with a whole number of positions, not {answer!r}")
    if answer == count:
        return Verdict(True, f"{where}: {count} positions")
    hint = ""
    if abs(answer - count) == 1:
        hint = " Off by one: [start, stop) holds stop - start positions."
    else:
        o0, o1 = field.outputs[axis]
        if answer == o1 - o0:
            hint = " That is the number of outputs, not of the inputs they read."
    return Verdict(False, f"{where}: {count} positions, not {answer}.{hint}")


def check_halo(halo_map: HaloMap, index: tuple[int, ...], axis: int, answer) -> Verdict:
    """Grade "(before, after): how deep is output chunk ``index``'s halo along ``axis``?"."""
    missing = _unanswered(answer)
    if missing:
        return missing
    index = tuple(index)
    before, after = halo_map.halo(index, axis)
    own = halo_map.input_chunk(axis, index[axis])
    start, stop = halo_map.fields[index].span(axis)
    reason = (f"input chunk {index[axis]} holds positions {own[0]}..{own[1] - 1} along axis "
              f"{axis} and output chunk {index} reads {start}..{stop - 1}, so "
              f"{before} before and {after} after")
    try:
        pair = tuple(int(v) for v in answer)
    except (TypeError, ValueError):
        return Verdict(False, f"answer with a pair (before, after), not {answer!r}")
    if len(pair) != 2:
        return Verdict(False, f"answer with a pair (before, after), not {answer!r}")
    if pair == (before, after):
        return Verdict(True, reason)
    hint = ""
    if pair == (after, before):
        hint = " You swapped them: 'before' is the side of smaller indices."
    elif before != after and pair[0] == pair[1]:
        hint = (" The halo is not symmetric here: the pads, the stride and where the "
                "chunk's first output falls make the two sides differ.")
    return Verdict(False, f"{reason}, not {pair[0]} and {pair[1]}.{hint}")


def check_blocks(halo_map: HaloMap, index: tuple[int, ...], answer) -> Verdict:
    """Grade "which input blocks does output chunk ``index`` read from?" (a set of block
    indices, its own included)."""
    missing = _unanswered(answer)
    if missing:
        return missing
    field = halo_map.fields[tuple(index)]
    blocks = field.blocks()
    try:
        given = {tuple(int(i) for i in b) for b in answer}
    except TypeError:
        return Verdict(False, f"answer with a set of block indices such as {{(0, 1)}}, not "
                              f"{answer!r}")
    listed = ", ".join(str(b) for b in sorted(blocks))
    if given == blocks:
        return Verdict(True, f"output chunk {field.index} reads input blocks {listed}")
    extra, lacking = sorted(given - blocks), sorted(blocks - given)
    detail = []
    if lacking:
        detail.append(f"it also reads {', '.join(map(str, lacking))}")
    if extra:
        detail.append(f"it does not read {', '.join(map(str, extra))}")
    return Verdict(False, f"output chunk {field.index} reads input blocks {listed}: "
                          f"{'; '.join(detail)}")


# --------------------------------------------------------------------------- drawing

def plot_chunk_fields(halo_map: HaloMap, indices, shape: tuple[int, int] | None = None):
    """A 2-D source with its chunk grid and, for each output chunk in ``indices``, the
    pieces its task receives: the own input chunk's part filled, halo pieces from
    neighbours hatched, and the slabs they travel in outlined. One panel per chunk."""
    if halo_map.rank != 2:
        raise ValueError(f"plot_chunk_fields draws 2-D convolutions, not rank "
                         f"{halo_map.rank}")
    Rectangle = render.mpl("matplotlib.patches").Rectangle
    indices = [tuple(i) for i in indices]
    fig = render.new_figure((4.2 * len(indices), 4.6))
    axes = np.atleast_1d(fig.subplots(1, len(indices)))
    extents = [sum(c) for c in halo_map.input_chunks]
    for number, (ax, index) in enumerate(zip(axes, indices)):
        colour = render.group_colour(number)
        field = halo_map.fields[index]
        ax.set_xlim(-0.5, extents[1] - 0.5)
        ax.set_ylim(extents[0] - 0.5, -0.5)
        ax.set_aspect("equal")
        for axis, draw in ((0, ax.axhline), (1, ax.axvline)):
            for edge in np.cumsum(halo_map.input_chunks[axis])[:-1]:
                draw(edge - 0.5, color="0.2", linewidth=1.5)
        for piece in field.pieces:
            (r0, r1), (c0, c1) = piece.intervals
            own = piece.block == index
            ax.add_patch(Rectangle((c0 - 0.5, r0 - 0.5), c1 - c0, r1 - r0,
                                   facecolor=colour, alpha=0.45 if own else 0.2,
                                   hatch=None if own else "///", edgecolor=colour,
                                   linewidth=1.0))
            if piece.slab is not None and not own:
                (s0, s1), (t0, t1) = piece.slab
                row0 = halo_map.input_chunk(0, piece.block[0])[0]
                col0 = halo_map.input_chunk(1, piece.block[1])[0]
                ax.add_patch(Rectangle((col0 + t0 - 0.5, row0 + s0 - 0.5), t1 - t0, s1 - s0,
                                       fill=False, edgecolor="0.3", linestyle="--",
                                       linewidth=1.0))
        (o0, o1), (p0, p1) = field.outputs
        ax.set_title(f"output chunk {index}: outputs [{o0}, {o1}) x [{p0}, {p1})\n"
                     f"receives {len(field.pieces)} pieces from "
                     f"{len(field.blocks())} input blocks", fontsize=9)
        ax.set_xlabel("source column")
        ax.set_ylabel("source row")
    return fig


def plot_axis_halos(halo_map: HaloMap, axis: int):
    """Along one axis: each input chunk, and for the output chunk that follows it, the
    source interval its task receives, with the halo before and after marked."""
    Rectangle = render.mpl("matplotlib.patches").Rectangle
    n = len(halo_map.output_chunks[axis])
    fig = render.new_figure((8, 1.2 + 0.75 * n))
    ax = fig.subplots()
    others = [range(len(c)) for c in halo_map.output_chunks]
    for block in range(n):
        own0, own1 = halo_map.input_chunk(axis, block)
        # the union over the chunks of this row of output chunks (the other axes vary)
        index = next(i for i in itertools.product(*others) if i[axis] == block)
        start, stop = halo_map.fields[index].span(axis)
        before, after = halo_map.halo(index, axis)
        y = n - 1 - block
        ax.add_patch(Rectangle((own0 - 0.5, y + 0.05), own1 - own0, 0.35, facecolor="0.75",
                               edgecolor="0.3"))
        ax.add_patch(Rectangle((start - 0.5, y - 0.4), stop - start, 0.35,
                               facecolor=render.group_colour(block), alpha=0.6,
                               edgecolor=render.group_colour(block)))
        if before:
            ax.add_patch(Rectangle((start - 0.5, y - 0.4), before, 0.35, fill=False,
                                   hatch="///", edgecolor="k"))
        if after:
            ax.add_patch(Rectangle((stop - after - 0.5, y - 0.4), after, 0.35, fill=False,
                                   hatch="///", edgecolor="k"))
        o0, o1 = halo_map.fields[index].outputs[axis]
        ax.text(max(stop, own1) + 0.2, y - 0.2,
                f"outputs {o0}..{o1 - 1}: halo {before} before, {after} after",
                va="center", fontsize=8)
    extent = sum(halo_map.input_chunks[axis])
    ax.set_xlim(-1, extent + 12)
    ax.set_ylim(-0.7, n)
    ax.set_yticks([n - 1 - b for b in range(n)], [f"chunk {b}" for b in range(n)])
    ax.set_xlabel(f"source position along axis {axis}")
    ax.set_title(f"axis {axis}: grey, the input chunk; coloured, what the output chunk "
                 f"following it receives (hatched: its halo)", fontsize=9)
    return fig
