"""Receptive fields along one spatial axis: which source elements each output chunk reads.

Pure index arithmetic, no Dask: for every output chunk ``[o0, o1)`` of an axis, the
source intervals its taps touch (the halo is whatever lies outside the chunk's own input
chunk) and how a convlab call on just those elements reproduces the chunk exactly.

Coordinates, per docs/specification.md §1.1, §2.5 and §2.6: output ``o`` reads the padded
position ``o*S + k*D``, which is the stretched (data-dilated) position ``t = o*S + k*D - P_b``;
a stretched position that is a multiple of ``L`` holds source element ``t / L``, any other
holds a zero. Outside ``[0, I_stretched)`` the padding mode decides: zeros, or the
stretched position the mode maps it to, at the edge of the whole array.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class AxisGeometry:
    """One spatial axis of a resolved problem, in the caller's source coordinates."""

    source_extent: int      # I, before data dilation
    kernel: int             # K
    stride: int             # S
    dilation: int           # D
    data_dilation: int      # L
    pad_begin: int          # P_b, resolved (auto_pad applied), on the stretched extent
    output_extent: int      # O

    @property
    def stretched_extent(self) -> int:
        return self.data_dilation * (self.source_extent - 1) + 1

    @property
    def span(self) -> int:
        """Padded positions the dilated kernel covers: (K - 1) * D + 1."""
        return (self.kernel - 1) * self.dilation + 1

    def window(self, o0: int, o1: int) -> tuple[int, int]:
        """The stretched positions ``[t0, t1)`` that outputs ``[o0, o1)`` read."""
        t0 = o0 * self.stride - self.pad_begin
        return t0, (o1 - 1) * self.stride + self.span - self.pad_begin

    def padded_length(self, o0: int, o1: int) -> int:
        """Padded positions a call needs so that it yields exactly ``o1 - o0`` outputs."""
        return (o1 - o0 - 1) * self.stride + self.span


@dataclass(frozen=True)
class ZeroPadWindow:
    """Output chunk ``[o0, o1)`` under zero padding: one source interval ``[start, stop)``
    run with data dilation ``L`` and these local pads (negative pads crop)."""

    start: int
    stop: int
    pad_begin: int
    pad_end: int

    @property
    def runs(self) -> tuple[tuple[int, int], ...]:
        return ((self.start, self.stop),)


@dataclass(frozen=True)
class GatheredWindow:
    """Output chunk ``[o0, o1)`` under a padding mode: the source intervals ``runs`` are
    concatenated into a compact array; ``take`` maps each padded position the call reads
    to its index there (-1: an inserted data-dilation zero), or is None when it is the
    identity. The call then runs with no pads and no data dilation."""

    runs: tuple[tuple[int, int], ...]
    take: tuple[int, ...] | None

    @property
    def compact_extent(self) -> int:
        return sum(stop - start for start, stop in self.runs)


def zero_pad_window(axis: AxisGeometry, o0: int, o1: int) -> ZeroPadWindow:
    """The source elements outputs ``[o0, o1)`` read, and the local pads that make a call on
    them produce exactly those outputs (the global pads where the window crosses an edge)."""
    t0, t1 = axis.window(o0, o1)
    step, extent = axis.data_dilation, axis.source_extent
    start = max(0, -(-t0 // step))
    stop = min(extent, (t1 - 1) // step + 1)
    if stop <= start:
        # Every tap reads padding or inserted zeros: the outputs are the bias alone. A call
        # still needs one source element; any one will do, the local pads place it outside
        # every window.
        start = min(max(t0 // step, 0), extent - 1)
        stop = start + 1
    local_begin = start * step - t0
    local_extent = step * (stop - start - 1) + 1
    local_end = axis.padded_length(o0, o1) - local_extent - local_begin
    return ZeroPadWindow(start, stop, local_begin, local_end)


def _mode_map(t: np.ndarray, extent: int, padding_mode: str) -> np.ndarray:
    """docs/specification.md §2.6: the stretched position each padded one reads."""
    inside = (t >= 0) & (t < extent)
    if padding_mode == "replicate":
        mapped = np.clip(t, 0, extent - 1)
    elif padding_mode == "circular":
        mapped = np.mod(t, extent)
    elif padding_mode == "reflect":
        # one mirror without repeating the edge (pads reach at most I - 1: params checks)
        mapped = np.where(t < 0, -t, np.where(t >= extent, 2 * (extent - 1) - t, t))
    else:
        raise ValueError(f"padding_mode={padding_mode!r} has no gathered window")
    return np.where(inside, t, mapped)


def gathered_window(axis: AxisGeometry, o0: int, o1: int, padding_mode: str) -> GatheredWindow:
    """Outputs ``[o0, o1)`` under ``padding_mode``: the padded positions they read, each
    traced to a source element of the whole array (or to an inserted zero)."""
    t0, t1 = axis.window(o0, o1)
    stretched = _mode_map(np.arange(t0, t1, dtype=np.int64), axis.stretched_extent,
                          padding_mode)
    step = axis.data_dilation
    is_data = stretched % step == 0
    source = stretched // step
    needed = np.unique(source[is_data])
    if needed.size:
        breaks = np.flatnonzero(np.diff(needed) != 1) + 1
        runs = tuple((int(run[0]), int(run[-1]) + 1) for run in np.split(needed, breaks))
    else:
        runs = ()
    take = np.where(is_data, np.searchsorted(needed, source), -1)
    identity = bool(is_data.all()) and take.size == needed.size \
        and bool((take == np.arange(take.size)).all())
    return GatheredWindow(runs, None if identity else tuple(int(i) for i in take))


def output_boundaries(axis: AxisGeometry, input_chunks: tuple[int, ...]) -> tuple[int, ...]:
    """Output chunk sizes that follow the input chunks: output ``o`` belongs to the input
    chunk holding the centre of its window (for a stride-1 "same" convolution the output
    chunks are the input chunks). Chunks left empty (strides, crops) are dropped."""
    centre_offset = (axis.span - 1) // 2 - axis.pad_begin
    bounds = [0]
    edge = 0
    for size in input_chunks[:-1]:
        edge += size
        # smallest o with o*S + centre_offset >= edge*L
        first = -(-(edge * axis.data_dilation - centre_offset) // axis.stride)
        bounds.append(min(max(first, bounds[-1]), axis.output_extent))
    bounds.append(axis.output_extent)
    return tuple(b - a for a, b in zip(bounds, bounds[1:]) if b > a)


def pieces(runs, input_chunks: tuple[int, ...]):
    """Split source intervals along the input chunks: ``(block, start, stop, offset)`` per
    piece, ``start:stop`` within input block ``block``, ``offset`` in the compact array
    (the runs laid end to end)."""
    edges = np.concatenate([[0], np.cumsum(input_chunks)]).astype(np.int64)
    result = []
    offset = 0
    for run_start, run_stop in runs:
        first = int(np.searchsorted(edges, run_start, side="right")) - 1
        position = run_start
        block = first
        while position < run_stop:
            block_stop = int(edges[block + 1])
            stop = min(run_stop, block_stop)
            result.append((block, position - int(edges[block]), stop - int(edges[block]),
                           offset))
            offset += stop - position
            position = stop
            block += 1
    return tuple(result)


def halo_slab(wanted: tuple[tuple[int, int], ...],
              extents: tuple[int, ...]) -> tuple[tuple[int, int], ...] | None:
    """The slab of an input block (spatial ``extents``) that carries the piece ``wanted``
    (per axis ``[start, stop)`` within the block) to the chunk reading it, or None when the
    piece is the whole block.

    A slab is the piece's interval along one axis, the one where the piece is thinnest
    relative to the block, and the whole block along the others. Pieces read through the
    same face of a block (a face neighbour's, and the edge and corner neighbours' beside
    it) share one slab, so while halos are shallower than the chunks a block sends at most
    two slabs per axis instead of one slice per neighbour (26 in 3-D), and a chunk
    receives at most a face-thick slab of each neighbour, never the whole neighbour."""
    if all(start == 0 and stop == extent for (start, stop), extent in zip(wanted, extents)):
        return None
    thinnest = min(range(len(extents)),
                   key=lambda axis: (wanted[axis][1] - wanted[axis][0]) / extents[axis])
    return tuple(wanted[axis] if axis == thinnest else (0, extent)
                 for axis, extent in enumerate(extents))
