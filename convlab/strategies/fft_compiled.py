"""fft's compiled pipeline: one input channel per group, float32, stride 1.

Depthwise layers (RepLKNet's 31x31, 3-D UX-Net's 7x7x7) and banks of filters on one
channel (SincNet, LEAF) spend little in their channel "contraction": a product per
frequency. What the Python pipeline spends there is the calls around the transforms, a
few microseconds each, thousands of them a layer. Here one C function runs every tile
from the gather to the crop (``convlab.strategies.kernels._fft``, on fft_tiles.h), with
transforms of its own (fft_lanes.h) that compute l at once across a vector's lanes and
put two real signals in each lane: 2l channels (depthwise) or 2l outputs (banks) per
transform, l = 8, or 16 at the AVX-512 level (:func:`lane_counts`). Tasks are (2l
channels, image, tile) or (group, up to l tiles, every output where the tiles go round the
cores); the threads share them, each with its own scratch, so the result does not depend
on the thread count. The crops check each value they write for Inf and NaN, so the caller
knows whether to recompute exactly without reading the result again.

Transform lengths are 2^a 3^b 5^c up to 4096 per axis. The tile shape and the lane count
are the cheapest estimate (TILE_CHOICE) among whole axes (shortened by the padding, as in
the Python pipeline) and tiles of every such length at least the kernel's extent, within
the workspace limit that im2col sets (one thread's scratch: four tile buffers).

The spectra are prepared weights, kept per tile shape and lane count with the rest of
fft's (:class:`convlab.strategies.fft.FFTWeights`): a plan transforms its weights once per
lane count (another cap on the instruction set may call for the other one). A one-shot
depthwise call keeps none (:func:`run_one_shot`): each task transforms its channel
block's kernels in its own scratch and runs its tiles with them, since writing every
block's spectra and reading them back cost more than the tiles themselves.
"""
from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from convlab.runtime import cpu
from convlab.runtime.threads import available_cores
from convlab.strategies import im2col
from convlab.strategies.fft_geometry import (
    candidate_grid,
    stretched_kernel,
    whole_axis_length,
)
from convlab.strategies.kernels import _fft

# Depthwise layers with fewer groups than this, and banks with fewer outputs per group,
# leave most lanes of the narrowest transform empty: the Python pipeline runs them.
MIN_DEPTHWISE_GROUPS = min(_fft.LANE_COUNTS)
MIN_BANK_OUTPUTS = min(_fft.LANE_COUNTS)

# The tile choice: seconds per unit, of the order measured on one core of an AMD EPYC
# (family 25 model 17, AVX2) in the 8-lane transforms of fft_lanes.h: ~35 GFLOP/s counted
# as 5 N log2 N per lane, ~3 ns per point of 8 lanes for the passes that are not
# transforms (zeroing, gather, product, crop), ~1 us a task. Only their ratios matter (the
# fitted cost constants price the chosen tiling, not these).
TILE_CHOICE = {"flop": 1.0 / 35e9, "lane_point": 3.0e-9 / 8, "task": 1.0e-6}
# Lane-flops per second of the transforms at each lane count against 8, on one core of an
# Intel Xeon (family 6 model 207): 16 lanes (x86-64-v4 copy) 84 GFLOP/s, 8 (x86-64-v3) 47,
# while a line stays in the L1 data cache.
LANE_SPEEDUP = {8: 1.0, 16: 1.75}
# A line whose transform (re, im and twice as much work: 16 L lanes bytes) outgrows the
# L1 data cache runs L1_SPILL times slower (same Xeon: 16 lanes 84 -> 35 GFLOP/s, 8 lanes
# 47 -> 26); a tile whose buffers outgrow the core's L2 pays L2_SPILL times.
L1_SPILL = {8: 1.8, 16: 2.4}
L2_SPILL = 1.5
# The transforms' time goes with their passes over the data more than with log2 L: per
# point of 8 lanes on the same Xeon, 256 (four radix-4 passes) took 6.3 ns, 288 (radix
# 4, 4, 2, 3, 3 and a copy back) 9.1 ns, 1.43x while 5 N log2 N says 1.02x. A pass is
# priced at PASS_FLOPS a point (what 5 N log2 N gives a radix-4 pass), and a line spills
# once it takes more than L1_SHARE of the L1 data cache (the tile's other data, the
# spectra and twiddles, share it: 384 points of 8 lanes, 48 KiB exactly, ran 1.23x as
# long per pass as 288).
PASS_FLOPS = 10.0
L1_SHARE = 0.875
# Likewise a tile's buffers spill the core's L2 beyond this share of it (the src and dst
# it streams share it too).
L2_SHARE = 0.875

# Successive candidate lengths per axis differ by at least this ratio.
LENGTH_LADDER = 1.06

# Banks of filters split their outputs among tasks until there are this many per core
# (each task transforms its input tiles again: one transform per 2l outputs or more).
TASKS_PER_CORE = 4


@dataclass(frozen=True)
class LaneTiling:
    """The compiled pipeline's cut of a problem."""

    mode: str                     # "depthwise" or "bank"
    lanes: int                    # transforms per vector of lanes (8 or 16)
    fft_shape: tuple[int, ...]
    tile_outputs: tuple[int, ...]
    tiles_per_axis: tuple[int, ...]
    geometry: tuple[int, ...]     # what the kernel module takes
    scratch_stride: int           # floats per thread
    spectrum_floats: int
    out_blocks_per_task: int      # banks: blocks of 2 * lanes outputs per task
    units_per_task: int           # banks: (image, tile) units per task, at most lanes
    # one-shot depthwise: tasks per channel block, each transforming its kernels in its
    # scratch (run_one_shot); 0 where the spectra are computed first (:func:`spectra`)
    weight_chunks: int = 0

    @property
    def depthwise(self) -> bool:
        return self.mode == "depthwise"

    def describe(self) -> dict[str, Any]:
        found = {"pipeline": f"compiled ({self.mode})",
                 "lanes": self.lanes,
                 "fft_shape": "x".join(map(str, self.fft_shape)),
                 "tile_outputs": "x".join(map(str, self.tile_outputs)),
                 "tiles": "x".join(map(str, self.tiles_per_axis)),
                 "workspace_bytes": 4 * self.scratch_stride}
        if self.weight_chunks:
            found["weight_chunks"] = self.weight_chunks
        return found


def mode(problem) -> str | None:
    """"depthwise" or "bank" where this pipeline runs ``problem``, else None."""
    if (problem.dtype != np.float32 or problem.in_channels_per_group != 1
            or problem.rank > 3 or any(s != 1 for s in problem.strides)):
        return None
    if problem.out_channels_per_group == 1:
        return "depthwise" if problem.groups >= MIN_DEPTHWISE_GROUPS else None
    return "bank" if problem.out_channels_per_group >= MIN_BANK_OUTPUTS else None


def lane_counts() -> tuple[int, ...]:
    """The lane counts a tiling chooses among: those up to the one the level in effect runs
    fastest (``_fft.lanes()``: 16 at AVX-512, else 8). A wider transform costs more per
    transform, so problems with few channels (or long lines) may run the narrower one."""
    return tuple(count for count in _fft.LANE_COUNTS if count <= _fft.lanes())


def _lengths(low: int, high: int) -> list[int]:
    """2^a 3^b 5^c lengths in [low, high], successive ones LENGTH_LADDER apart."""
    found: list[int] = []
    n = _fft.fast_length(max(1, low))
    while 0 < n <= high:
        if not found or n >= found[-1] * LENGTH_LADDER:
            found.append(n)
        n = _fft.fast_length(n + 1)
    return found


def _axis_candidates(problem, axis: int) -> list[tuple[int, int]]:
    """(L, outputs per tile) for one axis: the whole axis, and tiles of each length."""
    outputs = problem.output_shape[axis]
    extent = stretched_kernel(problem)[axis]
    found = {}
    whole = _fft.fast_length(whole_axis_length(problem, axis))
    if whole > 0:
        found[whole] = outputs
    top = _fft.MAX_LENGTH if whole < 0 else whole - 1
    for length in _lengths(extent, top):
        held = length - extent + 1
        if held < outputs:
            found.setdefault(length, held)
    return sorted(found.items())


def tiling(problem, weights_per_call: bool = True) -> LaneTiling | None:
    """The cheapest tiling (TILE_CHOICE) at any of :func:`lane_counts` whose per-thread
    scratch fits, or None where this pipeline does not run ``problem``. The weights'
    transform counts where the call makes it (``weights_per_call``, a one-shot call), not
    for a plan's, which are transformed once."""
    if mode(problem) is None:
        return None
    return _tiling(problem, im2col.get_workspace_limit(), available_cores(), lane_counts(),
                   weights_per_call)


@lru_cache(maxsize=256)
def _tiling(problem, limit: int, cores: int, lane_options: tuple[int, ...],
            weights_per_call: bool = True) -> LaneTiling | None:
    found = [t for t in (_tiling_at(problem, limit, cores, c, weights_per_call)
                         for c in lane_options) if t]
    return min(found, key=lambda t: t[0])[1] if found else None


def _tiling_at(problem, limit: int, cores: int, lane_count: int,
               weights_per_call: bool = True) -> tuple[float, LaneTiling] | None:
    """The cheapest tiling with ``lane_count`` lanes and its estimate (seconds)."""
    r = problem.rank
    axes = [_axis_candidates(problem, axis) for axis in range(r)]
    if any(not c for c in axes):
        return None
    lengths, held = candidate_grid(axes)
    points = lengths.prod(axis=1)
    scratch_bytes = 4 * lane_count * (4 * points + 4 * lengths.max(axis=1))
    fits = scratch_bytes * cores <= limit
    if not fits.any():
        return None
    spill = np.where(scratch_bytes > L2_SHARE * cpu.cache_bytes("L2", 1 << 20), L2_SPILL, 1.0)
    tiles = np.ceil(np.asarray(problem.output_shape, dtype=np.float64) / held).prod(axis=1)
    unit_step, step = _bank_split(problem, tiles, cores, lane_count)
    chunks = (_weight_chunks(problem, tiles, cores, lane_count)
              if weights_per_call and mode(problem) == "depthwise" else None)
    counts = _counts(problem, points, tiles, unit_step, step, lane_count, chunks)
    c = TILE_CHOICE
    flop = c["flop"] / LANE_SPEEDUP[lane_count] * _transform_factor(lengths, lane_count)
    seconds = (((counts["lane_transform_flops"] * flop
                 + counts["lane_points"] * c["lane_point"]) * spill
                + counts["lane_tasks"] * c["task"]) * _idle(counts["lane_tasks"], cores))
    if weights_per_call:
        seconds = seconds + ((counts["lane_weight_transform_flops"] * flop
                              + counts["lane_weight_points"] * c["lane_point"])
                             * spill * _idle(counts["lane_weight_tasks"], cores))
    best = int(np.argmin(np.where(fits, seconds, np.inf)))
    fft_shape = tuple(int(v) for v in lengths[best])
    outputs = tuple(int(v) for v in held[best])
    per_axis = tuple(-(-o // t) for o, t in zip(problem.output_shape, outputs))
    geometry = _geometry(problem, lane_count, fft_shape, outputs, per_axis)
    return float(seconds[best]), LaneTiling(
        mode(problem), lane_count, fft_shape, outputs, per_axis, geometry,
        _fft.scratch_stride(geometry),
        _fft.spectrum_floats(geometry, mode(problem) == "depthwise"),
        out_blocks_per_task=int(step[best]), units_per_task=int(unit_step[best]),
        weight_chunks=0 if chunks is None else int(chunks[best]))


def _idle(tasks: np.ndarray, cores: int) -> np.ndarray:
    """How much longer ``tasks`` equal tasks take on ``cores`` threads than their share
    (a last round of fewer tasks than threads leaves some idle)."""
    tasks = np.maximum(np.asarray(tasks, dtype=np.float64), 1.0)
    return np.ceil(tasks / cores) * cores / tasks


def _transform_factor(lengths: np.ndarray, lane_count: int) -> np.ndarray:
    """Per candidate (rows of per-axis lengths), its transforms' time against what 5 N
    log2 N prices: each axis costs its passes (:func:`_passes`) at PASS_FLOPS a point,
    L1_SPILL times that where its lines outgrow L1_SHARE of the L1 data cache."""
    lengths = np.asarray(lengths, dtype=np.int64)
    passes = np.vectorize(_passes, otypes=[np.float64])(lengths)
    spills = 16 * lengths * lane_count > L1_SHARE * cpu.cache_bytes("L1d", 32 << 10)
    cost = PASS_FLOPS * passes * np.where(spills, L1_SPILL[lane_count], 1.0)
    logs = 5.0 * np.log2(np.maximum(lengths, 1)).sum(axis=1)
    return np.where(logs > 0, cost.sum(axis=1) / np.maximum(logs, 1.0), 1.0)


@lru_cache(maxsize=4096)
def _passes(length: int) -> int:
    """The passes over its data a transform of ``length`` makes in fft_lanes.h: radix 4
    while it divides, one 2, then 3s and 5s, and a copy back after an odd count."""
    count = 0
    for radix in (4, 2, 3, 5):
        while length > 1 and length % radix == 0:
            length //= radix
            count += 1
            if radix == 2:
                break
    return count + count % 2


def _bank_split(problem, tiles: np.ndarray, cores: int,
                lane_count: int) -> tuple[np.ndarray, np.ndarray]:
    """Banks: (image, tile) units and blocks of 2l outputs per task. Tasks take l units
    and every block while that makes TASKS_PER_CORE tasks per core, fewer units where it
    does not; they share out the blocks only where one unit per task leaves a core
    without a task. A task that writes every output of its units owns whole rows of dst,
    while tasks writing neighbouring blocks of one row at once share its cache lines
    (SincNet's 63 taps ran no faster on two threads than on one with dst 16 bytes off a
    cache line)."""
    out_blocks = -(-problem.out_channels_per_group // (2 * lane_count))
    units = problem.batch * np.asarray(tiles, dtype=np.float64)
    per_task = np.clip(np.floor(problem.groups * units / (TASKS_PER_CORE * cores)), 1,
                       lane_count)
    unit_tasks = problem.groups * np.ceil(units / per_task)
    splits = np.minimum(out_blocks, np.ceil(cores / unit_tasks))
    return per_task.astype(np.int64), np.ceil(out_blocks / splits).astype(np.int64)


def _weight_chunks(problem, tiles: np.ndarray, cores: int, lane_count: int) -> np.ndarray:
    """One-shot depthwise calls: into how many tasks each channel block's (image, tile)
    units are cut (each transforming the block's kernels again), for TASKS_PER_CORE tasks
    per core where the blocks alone are fewer and the units allow."""
    blocks = -(-problem.groups // (2 * lane_count))
    units = problem.batch * np.asarray(tiles, dtype=np.float64)
    wanted = max(1.0, math.ceil(TASKS_PER_CORE * cores / blocks))
    return np.minimum(units, wanted).astype(np.int64)


def _counts(problem, points, tiles, units_per_task, out_blocks_per_task, lane_count: int,
            weight_chunks=None) -> dict[str, np.ndarray]:
    """What runs with tiles of ``points`` points (``tiles`` of them per image) and
    ``lane_count`` lanes do: the transforms' flops (5 N log2 N per lane), the points of
    the passes that are not transforms times the lanes, tasks, and the same of the
    weights' transforms (one task per 2 ``lane_count`` filters; the cost model prices
    their flops alone, the tile choice their passes too). ``weight_chunks`` (a one-shot
    depthwise call's, :func:`_weight_chunks`): the kernels are transformed once per task
    in its scratch, with no spectra pass."""
    points = np.asarray(points, dtype=np.float64)
    transform = 5.0 * points * np.log2(np.maximum(points, 2.0)) * lane_count
    units = np.asarray(tiles, dtype=np.float64) * problem.batch
    pair = 2 * lane_count
    if mode(problem) == "depthwise":
        blocks = -(-problem.groups // pair)
        tasks = blocks * units
        transforms = 2.0 * tasks
        passes = 4.0 * tasks
        weights = np.full_like(points, float(blocks))
        weight_passes = 6.0  # zeroing, P and Q
        if weight_chunks is not None:
            weights = weights * np.asarray(weight_chunks, dtype=np.float64)
            weight_passes = 2.0  # zeroing
    else:
        out_blocks = -(-problem.out_channels_per_group // pair)
        tasks = (problem.groups * np.ceil(units / np.asarray(units_per_task))
                 * np.ceil(out_blocks / np.asarray(out_blocks_per_task)))
        inverses = problem.groups * units * out_blocks
        transforms = tasks + inverses
        passes = 2.0 * tasks + 3.0 * inverses
        weights = np.full_like(points, float(problem.groups * out_blocks))
        weight_passes = 4.0  # zeroing, V
    return {"lane_transform_flops": transforms * transform,
            "lane_points": passes * points * lane_count,
            "lane_tasks": tasks * np.ones_like(points),
            "lane_weight_transform_flops": weights * transform,
            "lane_weight_points": weights * weight_passes * points * lane_count,
            "lane_weight_tasks": weights}


def _geometry(problem, lane_count, fft_shape, outputs, tiles) -> tuple[int, ...]:
    lift = 3 - problem.rank

    def lifted(values, fill):
        return (fill,) * lift + tuple(values)

    per_axis = zip(lifted(problem.input_shape, 1), lifted(problem.output_shape, 1),
                   lifted(problem.pads_begin, 0), lifted(problem.kernel_shape, 1),
                   lifted(problem.dilations, 1), lifted(fft_shape, 1), lifted(outputs, 1),
                   lifted(tiles, 1))
    return (lane_count, problem.batch, problem.groups, problem.out_channels_per_group,
            *(v for axis in per_axis for v in axis))


@lru_cache(maxsize=16)
def _plans(fft_shape: tuple[int, ...]):
    return _fft.plans((1,) * (3 - len(fft_shape)) + fft_shape)


def _threads_for(t: LaneTiling, threads: int) -> int:
    """At most as many threads as scratch buffers fit the workspace limit."""
    most = max(1, im2col.get_workspace_limit() // (4 * t.scratch_stride))
    return max(1, min(threads, most))


def _scratch(t: LaneTiling, threads: int) -> np.ndarray:
    # 16 floats more: the kernel module starts the first thread's on a cache line
    return im2col.thread_workspace(t.scratch_stride * threads + 16, np.dtype(np.float32))


_one_call = threading.local()


# A one-shot call's spectra larger than this many workspace limits are not kept for the
# next call (3-D UX-Net's 48^3 stage takes 19 MB, a little over one limit of 16 MiB).
KEPT_SPECTRA_WORKSPACES = 4


def _one_call_buffer(floats: int) -> np.ndarray:
    """The spectra buffer this thread keeps for one-shot calls (grown when too small, at
    most KEPT_SPECTRA_WORKSPACES workspace limits): a fresh one page-faults on every call
    (RepLKNet's 14x14 stage: 3 MB, ~0.4 ms)."""
    buffer = getattr(_one_call, "buffer", None)
    if buffer is not None and buffer.size >= floats:
        return buffer[:floats]
    _one_call.buffer = None
    buffer = np.empty(floats, np.float32)
    if 4 * floats <= KEPT_SPECTRA_WORKSPACES * im2col.get_workspace_limit():
        _one_call.buffer = buffer
    return buffer


def kept_spectra_bytes() -> int:
    """Bytes of the one-shot spectra buffer this thread keeps (for tests)."""
    buffer = getattr(_one_call, "buffer", None)
    return 0 if buffer is None else int(buffer.nbytes)


def drop_kept_spectra() -> None:
    """Let go of the one-shot spectra buffer this thread keeps (for tests)."""
    _one_call.buffer = None


def _weights_5d(problem, canonical: np.ndarray) -> np.ndarray:
    """The canonical (G, K..., 1, OCg) weights as (G, K0, K1, K2, OCg): unit axes for the
    lifted ones, without the ICg of 1 (a view)."""
    lifted = (1,) * (3 - problem.rank)
    return canonical.reshape(problem.groups, *lifted, *problem.kernel_shape,
                             problem.out_channels_per_group)


def spectra(problem, canonical: np.ndarray, t: LaneTiling, threads: int,
            keep: bool = True) -> np.ndarray:
    """The kernels' spectra for tiling ``t`` from the canonical (G, K..., 1, OCg) weights;
    without ``keep``, in the buffer this thread reuses for one call's spectra."""
    weights = _weights_5d(problem, canonical)
    out = (np.empty(t.spectrum_floats, np.float32) if keep
           else _one_call_buffer(t.spectrum_floats))
    threads = _threads_for(t, threads)
    _fft.spectra(t.geometry, _plans(t.fft_shape), weights, t.depthwise, out,
                 _scratch(t, threads), threads)
    return out


def run(problem, src, spectrum: np.ndarray, bias, dst, threads: int, t: LaneTiling) -> bool:
    """``dst`` = the correlation (plus ``bias``) through tiling ``t``; whether every value
    of it is finite."""
    return _run(src, bias, dst, lambda source, bias_, target, threads_: _fft.run(
        t.geometry, _plans(t.fft_shape), source, spectrum, bias_, target, t.depthwise,
        t.units_per_task, t.out_blocks_per_task, _scratch(t, threads_), threads_),
        _threads_for(t, threads))


def run_one_shot(problem, src, canonical: np.ndarray, bias, dst, threads: int,
                 t: LaneTiling) -> bool:
    """``dst`` as :func:`run` computes it (and what it returns), for a one-shot depthwise
    tiling (``t.weight_chunks``): each task transforms its channel block's kernels in its
    own scratch, so the spectra never make a pass through memory of their own."""
    weights = _weights_5d(problem, canonical)
    return _run(src, bias, dst, lambda source, bias_, target, threads_: _fft.run_depthwise_one_shot(
        t.geometry, _plans(t.fft_shape), source, weights, bias_, target, t.weight_chunks,
        _scratch(t, threads_), threads_), _threads_for(t, threads))


def _run(src, bias, dst, kernel, threads: int) -> bool:
    """``kernel(source, bias, target, threads)`` on float32 C-contiguous flat views,
    through a temporary where ``dst`` is not C-contiguous; what the kernel returns."""
    source = np.ascontiguousarray(src, dtype=np.float32).reshape(-1)
    target = dst if dst.flags.c_contiguous else np.empty(dst.shape, np.float32)
    if bias is not None:
        bias = np.ascontiguousarray(bias, dtype=np.float32)
    finite = bool(kernel(source, bias, target.reshape(-1), threads))
    if target is not dst:
        np.copyto(dst, target)
    return finite


def weight_tasks(problem, t: LaneTiling) -> int:
    """The weights' transform tasks (2 * lanes filters each) the threads share."""
    pair = 2 * t.lanes
    if t.depthwise:
        return -(-problem.groups // pair) * max(1, t.weight_chunks)
    return problem.groups * -(-problem.out_channels_per_group // pair)


def work_counts(problem, t: LaneTiling) -> dict[str, float]:
    """:func:`_counts` of one tiling, as floats."""
    counts = _counts(problem, np.array([math.prod(t.fft_shape)]),
                     np.array([math.prod(t.tiles_per_axis)]),
                     np.array([t.units_per_task]), np.array([t.out_blocks_per_task]), t.lanes,
                     np.array([t.weight_chunks]) if t.weight_chunks else None)
    return {name: float(value[0]) for name, value in counts.items()}
