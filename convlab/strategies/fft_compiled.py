"""fft's compiled pipeline: one input channel per group, float32, stride 1.

Depthwise layers (RepLKNet's 31x31, 3-D UX-Net's 7x7x7) and banks of filters on one
channel (SincNet, LEAF) spend little in their channel "contraction": a product per
frequency. What the Python pipeline spends there is the calls around the transforms, a
few microseconds each, thousands of them a layer. Here one C function runs every tile
from the gather to the crop (``convlab.strategies.kernels._fft``, on fft_tiles.h), with
transforms of its own (fft_lanes.h) that compute eight at once across a vector's lanes
and put two real signals in each lane: 16 channels (depthwise) or 16 outputs (banks) per
transform. Tasks are (16 channels, image, tile) or (group, 8 tiles); the threads share
them, each with its own scratch, so the result does not depend on the thread count.

Transform lengths are 2^a 3^b 5^c up to 4096 per axis. The tile shape is the cheapest
estimate (TILE_CHOICE) among whole axes (shortened by the padding, as in the Python
pipeline) and tiles of every such length at least the kernel's extent, within the
workspace limit that im2col sets (one thread's scratch: four tile buffers).

The spectra are prepared weights, kept per tile shape with the rest of fft's
(:class:`convlab.strategies.fft.FFTWeights`): a plan transforms its weights once.
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
# leave most lanes of a transform empty: the Python pipeline runs them.
MIN_DEPTHWISE_GROUPS = 8
MIN_BANK_OUTPUTS = 8

# The tile choice: seconds per unit, of the order measured on one core of an AMD EPYC
# (family 25 model 17, AVX2) in the transforms of fft_lanes.h: ~35 GFLOP/s counted as
# 5 N log2 N per lane, ~3 ns per point for the passes that are not transforms (zeroing,
# gather, product, crop), ~1 us a task. Only their ratios matter; a tile whose scratch
# outgrows the core's L2 pays L2_SPILL times (the fitted cost constants price the chosen
# tiling, not these).
TILE_CHOICE = {"flop": 1.0 / 35e9, "point": 3.0e-9, "task": 1.0e-6}
L2_SPILL = 1.5

# Successive candidate lengths per axis differ by at least this ratio.
LENGTH_LADDER = 1.06

# Banks of filters split their outputs among tasks until there are this many per core
# (each task transforms its input tiles again: one transform per 16 outputs or more).
TASKS_PER_CORE = 4


@dataclass(frozen=True)
class LaneTiling:
    """The compiled pipeline's cut of a problem."""

    mode: str                     # "depthwise" or "bank"
    fft_shape: tuple[int, ...]
    tile_outputs: tuple[int, ...]
    tiles_per_axis: tuple[int, ...]
    geometry: tuple[int, ...]     # what the kernel module takes
    scratch_stride: int           # floats per thread
    spectrum_floats: int
    out_blocks_per_task: int      # banks: blocks of 16 outputs per task

    @property
    def depthwise(self) -> bool:
        return self.mode == "depthwise"

    def describe(self) -> dict[str, Any]:
        return {"pipeline": f"compiled ({self.mode})",
                "fft_shape": "x".join(map(str, self.fft_shape)),
                "tile_outputs": "x".join(map(str, self.tile_outputs)),
                "tiles": "x".join(map(str, self.tiles_per_axis)),
                "workspace_bytes": 4 * self.scratch_stride}


def mode(problem) -> str | None:
    """"depthwise" or "bank" where this pipeline runs ``problem``, else None."""
    if (problem.dtype != np.float32 or problem.in_channels_per_group != 1
            or problem.rank > 3 or any(s != 1 for s in problem.strides)):
        return None
    if problem.out_channels_per_group == 1:
        return "depthwise" if problem.groups >= MIN_DEPTHWISE_GROUPS else None
    return "bank" if problem.out_channels_per_group >= MIN_BANK_OUTPUTS else None


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


def tiling(problem) -> LaneTiling | None:
    """The cheapest tiling (TILE_CHOICE) whose per-thread scratch fits, or None where
    this pipeline does not run ``problem``."""
    if mode(problem) is None:
        return None
    return _tiling(problem, im2col.get_workspace_limit(), available_cores())


@lru_cache(maxsize=256)
def _tiling(problem, limit: int, cores: int) -> LaneTiling | None:
    r = problem.rank
    axes = [_axis_candidates(problem, axis) for axis in range(r)]
    if any(not c for c in axes):
        return None
    lengths, held = candidate_grid(axes)
    points = lengths.prod(axis=1)
    scratch_bytes = 4 * (4 * points * _fft.LANES + 4 * lengths.max(axis=1) * _fft.LANES)
    fits = scratch_bytes * cores <= limit
    if not fits.any():
        return None
    spill = np.where(scratch_bytes > cpu.cache_bytes("L2", 1 << 20), L2_SPILL, 1.0)
    tiles = np.ceil(np.asarray(problem.output_shape, dtype=np.float64) / held).prod(axis=1)
    step = _out_blocks_per_task(problem, tiles, cores)
    counts = _counts(problem, points, tiles, step)
    c = TILE_CHOICE
    seconds = ((counts["lane_transform_flops"] + counts["lane_weight_transform_flops"])
               * c["flop"] * spill + counts["lane_points"] * c["point"] * spill
               + counts["lane_tasks"] * c["task"])
    best = int(np.argmin(np.where(fits, seconds, np.inf)))
    fft_shape = tuple(int(v) for v in lengths[best])
    outputs = tuple(int(v) for v in held[best])
    per_axis = tuple(-(-o // t) for o, t in zip(problem.output_shape, outputs))
    geometry = _geometry(problem, fft_shape, outputs, per_axis)
    return LaneTiling(mode(problem), fft_shape, outputs, per_axis, geometry,
                      _fft.scratch_stride(geometry),
                      _fft.spectrum_floats(geometry, mode(problem) == "depthwise"),
                      int(step[best]))


def _out_blocks_per_task(problem, tiles: np.ndarray, cores: int) -> np.ndarray:
    """Banks with few (group, 8 tiles) tasks split their outputs too, into at least
    TASKS_PER_CORE tasks per core where there are enough blocks of 16 outputs."""
    out_blocks = -(-problem.out_channels_per_group // (2 * _fft.LANES))
    unit_tasks = problem.groups * np.ceil(problem.batch * tiles / _fft.LANES)
    splits = np.minimum(out_blocks, np.ceil(TASKS_PER_CORE * cores / unit_tasks))
    return np.ceil(out_blocks / splits).astype(np.int64)


def _counts(problem, points, tiles, out_blocks_per_task) -> dict[str, np.ndarray]:
    """What runs with tiles of ``points`` points (``tiles`` of them per image) do: the
    8-lane transforms' flops (5 N log2 N per lane), points of the passes that are not
    transforms, tasks, and the weights' transforms (one per 16 filters)."""
    points = np.asarray(points, dtype=np.float64)
    transform = 5.0 * points * np.log2(np.maximum(points, 2.0)) * _fft.LANES
    units = np.asarray(tiles, dtype=np.float64) * problem.batch
    pair = 2 * _fft.LANES
    if mode(problem) == "depthwise":
        blocks = -(-problem.groups // pair)
        tasks = blocks * units
        transforms = 2.0 * tasks
        passes = 4.0 * tasks
        weights = np.full_like(points, float(blocks))
    else:
        out_blocks = -(-problem.out_channels_per_group // pair)
        tasks = (problem.groups * np.ceil(units / _fft.LANES)
                 * np.ceil(out_blocks / np.asarray(out_blocks_per_task)))
        inverses = problem.groups * units * out_blocks
        transforms = tasks + inverses
        passes = 2.0 * tasks + 3.0 * inverses
        weights = np.full_like(points, float(problem.groups * out_blocks))
    return {"lane_transform_flops": transforms * transform,
            "lane_points": passes * points,
            "lane_tasks": tasks * np.ones_like(points),
            "lane_weight_transform_flops": weights * transform}


def _geometry(problem, fft_shape, outputs, tiles) -> tuple[int, ...]:
    lift = 3 - problem.rank

    def lifted(values, fill):
        return (fill,) * lift + tuple(values)

    per_axis = zip(lifted(problem.input_shape, 1), lifted(problem.output_shape, 1),
                   lifted(problem.pads_begin, 0), lifted(problem.kernel_shape, 1),
                   lifted(problem.dilations, 1), lifted(fft_shape, 1), lifted(outputs, 1),
                   lifted(tiles, 1))
    return (problem.batch, problem.groups, problem.out_channels_per_group,
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


def spectra(problem, canonical: np.ndarray, t: LaneTiling, threads: int,
            keep: bool = True) -> np.ndarray:
    """The kernels' spectra for tiling ``t`` from the canonical (G, K..., 1, OCg) weights;
    without ``keep``, in the buffer this thread reuses for one call's spectra."""
    # (G, K0, K1, K2, OCg): unit axes for the lifted ones, without the ICg of 1 (a view)
    lifted = (1,) * (3 - problem.rank)
    weights = canonical.reshape(problem.groups, *lifted, *problem.kernel_shape,
                                problem.out_channels_per_group)
    out = (np.empty(t.spectrum_floats, np.float32) if keep
           else _one_call_buffer(t.spectrum_floats))
    threads = _threads_for(t, threads)
    _fft.spectra(t.geometry, _plans(t.fft_shape), weights, t.depthwise, out,
                 _scratch(t, threads), threads)
    return out


def run(problem, src, spectrum: np.ndarray, bias, dst, threads: int, t: LaneTiling) -> None:
    """``dst`` = the correlation (plus ``bias``) through tiling ``t``."""
    threads = _threads_for(t, threads)
    source = np.ascontiguousarray(src, dtype=np.float32).reshape(-1)
    target = dst if dst.flags.c_contiguous else np.empty(dst.shape, np.float32)
    if bias is not None:
        bias = np.ascontiguousarray(bias, dtype=np.float32)
    _fft.run(t.geometry, _plans(t.fft_shape), source, spectrum, bias, target.reshape(-1),
             t.depthwise, t.out_blocks_per_task, _scratch(t, threads), threads)
    if target is not dst:
        np.copyto(dst, target)


def weight_tasks(problem) -> int:
    """The weights' transform tasks (16 filters each) the threads share."""
    pair = 2 * _fft.LANES
    if mode(problem) == "depthwise":
        return -(-problem.groups // pair)
    return problem.groups * -(-problem.out_channels_per_group // pair)


def work_counts(problem, t: LaneTiling) -> dict[str, float]:
    """:func:`_counts` of one tiling, as floats."""
    counts = _counts(problem, np.array([math.prod(t.fft_shape)]),
                     np.array([math.prod(t.tiles_per_axis)]),
                     np.array([t.out_blocks_per_task]))
    return {name: float(value[0]) for name, value in counts.items()}
