"""What runs inside a Dask task: assemble one output chunk's receptive field from its
pieces, and run it through a plan cached on the worker.

A plan (``convlab.Convolution``) is built once per worker process for each weights key and
local attribute set (interior chunks share one; edge chunks differ in their pads) and kept
in a small module-level cache, so the weights are validated, converted and prepared once
per worker rather than once per chunk.
"""
from __future__ import annotations

import sys
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np

from convlab import Convolution, effective_threads

# Plans per process: each holds a private copy of the weights and their prepared forms,
# so the cache is bounded; a convolution needs one plan per distinct local pad set.
MAX_PLANS = 32


@dataclass(frozen=True)
class CallSpec:
    """What every chunk of one ``convlab.dask.convolve`` call shares."""

    token: str                       # the weights key, bias key and call attributes
    plan_kwargs: tuple               # (name, value) pairs for Convolution, local ones aside
    data_format: str
    rank: int
    src_dtype: Any
    fill: Any                        # what an inserted data-dilation zero holds (a mode's
                                     # gathered window only): 0, or the src zero point
    threads: int | None              # the caller's threads=, else None
    local_threads: int               # budget per task under the threaded scheduler


@dataclass(frozen=True)
class BlockSpec:
    """One output chunk: the compact source array it reads and how to call on it."""

    call: CallSpec
    batch: int                                   # the batch chunk's extent
    compact_shape: tuple[int, ...]               # spatial extents of the gathered source
    offsets: tuple[tuple[int, ...], ...]         # per piece, its spatial offset there
    selections: tuple                            # per piece, its spatial (start, stop)s
                                                 # in the array it arrives in (None: all)
    takes: tuple[tuple[int, ...] | None, ...] | None   # gathered windows (padding modes)
    local_attributes: tuple                      # pads and data dilation of this call


def _spatial_axis(call: CallSpec, axis: int) -> int:
    return axis + (2 if call.data_format == "NCX" else 1)


def _data_shape(call: CallSpec, batch: int, spatial, channels: int) -> tuple[int, ...]:
    if call.data_format == "NCX":
        return (batch, channels, *spatial)
    return (batch, *spatial, channels)


def assemble(block: BlockSpec, pieces, channels: int) -> np.ndarray:
    """The source elements the chunk reads, laid end to end per axis (then traced through
    the padding mode's map, for a gathered window)."""
    call = block.call
    shape = _data_shape(call, block.batch, block.compact_shape, channels)
    pieces = [_select(call, piece, selection)
              for piece, selection in zip(pieces, block.selections)]
    if len(pieces) == 1 and tuple(pieces[0].shape) == shape:
        compact = pieces[0]
    else:
        compact = np.empty(shape, dtype=call.src_dtype)
        for piece, offset in zip(pieces, block.offsets):
            index: list = [slice(None)] * compact.ndim
            for axis, start in enumerate(offset):
                where = _spatial_axis(call, axis)
                index[where] = slice(start, start + piece.shape[where])
            compact[tuple(index)] = piece
    if block.takes is None:
        return compact
    for axis, take in enumerate(block.takes):
        if take is None:
            continue
        where = _spatial_axis(call, axis)
        indices = np.asarray(take, dtype=np.intp)
        if (indices < 0).any():
            compact = _with_fill_slot(compact, where, call)
            indices = np.where(indices < 0, compact.shape[where] - 1, indices)
        compact = np.take(compact, indices, axis=where)
    return compact


def _select(call: CallSpec, piece: np.ndarray, selection) -> np.ndarray:
    """The part of an arriving array (a block or a halo slab) that the chunk reads."""
    if selection is None:
        return piece
    index: list = [slice(None)] * piece.ndim
    for axis, (start, stop) in enumerate(selection):
        index[_spatial_axis(call, axis)] = slice(start, stop)
    return piece[tuple(index)]


def _with_fill_slot(array: np.ndarray, where: int, call: CallSpec) -> np.ndarray:
    """``array`` with one more position along ``where`` holding the fill value (per
    channel when the src zero point is)."""
    shape = list(array.shape)
    shape[where] += 1
    extended = np.empty(shape, dtype=array.dtype)
    index: list = [slice(None)] * array.ndim
    index[where] = slice(0, array.shape[where])
    extended[tuple(index)] = array
    index[where] = slice(array.shape[where], None)
    fill = np.asarray(call.fill)
    if fill.ndim == 1:  # per channel
        channel = 1 if call.data_format == "NCX" else array.ndim - 1
        fill = fill.reshape([-1 if axis == channel else 1 for axis in range(array.ndim)])
    extended[tuple(index)] = fill
    return extended


def _distributed_threads() -> int | None:
    """Dask threads of this process's distributed worker, or None outside one."""
    if "distributed" not in sys.modules:
        return None
    import distributed

    try:
        worker = distributed.get_worker()
    except ValueError:
        return None
    nthreads = getattr(getattr(worker, "state", None), "nthreads", None)
    return int(nthreads or getattr(worker, "nthreads", None) or 1)


def task_threads(call: CallSpec) -> int:
    """OpenMP threads for one task, so that the worker's Dask threads times this stays
    within the cores this process may use (OMP_NUM_THREADS and affinity honoured)."""
    if call.threads is not None:
        return call.threads
    dask_threads = _distributed_threads()
    if dask_threads is None:
        return call.local_threads
    return max(1, effective_threads(None) // max(1, dask_threads))


_plans: OrderedDict[tuple, Convolution] = OrderedDict()
_plans_lock = threading.Lock()
_plans_built = 0


def plans_built() -> int:
    """Plans this process has built (the tests check that chunks share them)."""
    return _plans_built


def clear_plans() -> None:
    """Drop this process's cached plans."""
    global _plans_built
    with _plans_lock:
        _plans.clear()
        _plans_built = 0


def plan_for(block: BlockSpec, weights, bias, threads: int) -> Convolution:
    """This process's plan for the chunk's weights key and local attributes."""
    global _plans_built
    key = (block.call.token, block.local_attributes, threads)
    with _plans_lock:
        plan = _plans.get(key)
        if plan is not None:
            _plans.move_to_end(key)
            return plan
        # built under the lock: construction only validates and copies the weights, and
        # concurrent first chunks then share one plan rather than each building their own
        plan = Convolution(weights, bias, **dict(block.call.plan_kwargs),
                           **dict(block.local_attributes), threads=threads,
                           choose="estimate")
        _plans_built += 1
        _plans[key] = plan
        while len(_plans) > MAX_PLANS:
            _plans.popitem(last=False)
        return plan


def run_block(block: BlockSpec, channels: int, weights, bias, *pieces) -> np.ndarray:
    """One task: the output chunk of ``block`` from its source pieces."""
    src = assemble(block, pieces, channels)
    plan = plan_for(block, weights, bias, task_threads(block.call))
    return plan(src)
