"""``winograd2``, ``winograd4``, ``winograd6``: Winograd F(m x m, 3 x 3) convolution.

One algorithm per output tile m. 2-D problems use F(m x m, 3x3), 1-D ones F(m, 3) and
3-D ones F(m x m x m, 3x3x3): the 1-D transforms of :mod:`convlab.strategies.winograd_transforms`
nested along every axis. A tile of m^r outputs needs alpha^r products per (ic, oc) pair
(alpha = m + 2) instead of (3m)^r, so the multiply count drops by (3m / alpha)^r, at a
cost in float32 accuracy that grows with m (see ``MEASURED_RELATIVE_ERROR``).

The steps, with P = alpha^r transform positions:

* ``prepare_weights`` sets up ``U[g, pos] = (G w G^T)[pos]``, which the kernel computes in
  the compute dtype, packed in panels of output channels for the GEMM micro-kernel of
  this CPU, on the first run (with that call's ``threads``: the registry's hook has no
  thread count). A plan pays for it once; ``convolve`` on every call.
* ``run``: the Cython kernel :mod:`convlab.strategies.kernels._winograd` transforms input tiles,
  runs P GEMMs [tiles x ICg] x [ICg x OCg] per block of tiles, and transforms back, with
  ``threads`` OpenMP threads. The GEMMs use the kernel's own micro-kernels on U packed
  once by ``prepare_weights``, not BLAS: with batch-1 tile counts they have few rows, and
  a BLAS call re-packs its ICg x OCg operand every time (OpenBLAS reached 59 GFLOP/s on
  the 49 x 128 x 128 products of ResNet-50 res3a, 146 GFLOP/s on large ones, one core).

Runs on: kernel 3 on every spatial axis, stride 1, dilation 1, any pads (asymmetric,
auto, negative = crop), groups, batch and bias.

Exactness where the transforms would blur it: outputs whose every tap is padding are
set to the bias exactly, and a call whose result holds Inf or NaN (a special value in
the inputs spreads over its whole tile; the transforms may also overflow before a
direct sum would) is recomputed by ``direct``, so special values land exactly where
docs/specification.md §1.1 puts them.
"""
from __future__ import annotations

import contextlib
import functools
import math
import sys
import threading
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from convlab.dispatch import cost_model
from convlab.dispatch.registry import get_algorithm, register_algorithm
from convlab.runtime import _buffers as buffers, cpu
from convlab.runtime.threads import effective_threads
from convlab.strategies import schedule_trials, winograd_transforms as wt
from convlab.strategies.kernels import _winograd

TILE_SIZES = (2, 4, 6)
MAX_RANK = 3

# Workspace (V and M blocks plus tile buffers, all threads together) stays under this
# many bytes whatever the problem size; only when one GEMM micro-tile of tiles (1 to 12
# rows) is larger on its own (very wide 3-D layers) does one thread go over, by that.
# Change it with ``workspace_limit``.
WORKSPACE_BYTES = 16 * 2**20

# Preferred size of one thread's block (V + M): small enough to stay in a core's L2 (half
# of it: 1 MiB of the 2 MiB L2 it was first timed on; this CPU's L2, 2 MiB where the OS
# does not say), large enough that each GEMM has rows to amortise its call (a few timings
# of res2a/res3a/VGG-19 layers).
L2_BYTES = cpu.cache_bytes("L2", 2 * 2**20)
BLOCK_BYTES_PER_THREAD = L2_BYTES // 2
MIN_BLOCK_TILES = 16
# Chunks to aim for when there are enough tiles, so that this many threads can share them.
PARALLEL_CHUNKS = 8
# Below this many GEMM rows per block, a U slice of at least SHARED_MIN_SLICE_BYTES costs
# more to read and pack than its GEMM does useful work, and threads share larger blocks.
# Provisional, from timings of the res3a and VGG-19 conv3-conv5 layers.
SHARED_MIN_ROWS = 48
SHARED_MIN_SLICE_BYTES = 64 * 2**10
# 2-D F(2) shares blocks below SHARED_MIN_ROWS whatever the slice size. One-shot time,
# shared / per-thread blocks, on the nine ResNet-50/GoogLeNet/VGG-19 layers where the
# slice limit decides: F(2) 0.67-1.01 (geo-mean 0.86; inception_4a/double3x3a 0.31 ->
# 0.21 ms, now faster than direct), F(4) 0.81-1.18 and F(6) 0.74-1.31, and 3-D and 1-D
# F(2) 0.98-3.3 (`python bench/ab_constant.py convlab.strategies.winograd
# SHARED_MIN_SLICE_BYTES 65536 0 --algorithm winogradM ...`,
# bench/results/shared_blocks_2026-11-25.txt).
SHARED_MIN_SLICE_BYTES_2D_F2 = 0
# Ungrouped 2-D runs of more than one per-thread block but at most this many tiles
# (small images: GoogLeNet's 28x28 and ResNet's 56x56 layers at batch 1) share blocks below
# SHARED_MIN_ROWS whatever the tile and slice size. Per-thread blocks of 13-25 tiles
# each re-read all of U, 2-4 times per call, and U outgrows L2 there. One-shot time,
# shared / per-thread, on the five such ResNet-50/GoogLeNet layers: F(4) 0.75-0.97
# (geo-mean 0.89-0.91 in two runs), F(6) 0.85-0.97; on the 16-tile (one block) 14x14
# layers 0.74-1.17 and on VGG-19 conv2_1 (784 tiles) 1.04-1.06, which keep per-thread
# blocks (bench/results/shared_tiles_2026-11-25.txt, bench/results/shared_blocks_2026-11-25.txt).
# That was a Zen 4; on a Zen 3 the 56x56 layers ran the other way, so a plan's runs time
# both splits where only this rule makes them share (other_split, schedule_trials).
SHARED_MAX_TILES_2D = 256

# One tile's generic transform (3-D, and 1-D) works through two buffers of P *
# channel_chunk values each, one pass per axis; each may take this many bytes, a quarter
# of the core's L2, so that the pair stays in it while a pass covers as many channels as
# it can. The earlier bound, 16 KiB a buffer, cut 3-D F(4) and F(6) to 16 channels a
# pass (F(2) to 64), so each tile ran its passes once per chunk: on an AVX2-only Zen 3
# (512 KiB of L2, so 128 KiB buffers) one-shot 3-D F(4) took 0.46-0.74x its time on
# layers of more than 16 channels (geo-mean 0.65 over eight layers of the 3d and 3-D
# U-Net suites; the U-Net's conv_3 287 -> 172 ms), F(6) 0.48-0.82x (0.72), F(2)
# 0.60-0.97x (0.88), and F(4) capped at baseline 0.79x
# (bench/results/winograd_transform_chunk_2026-11-28_zen3-avx2.txt).
TRANSFORM_BUFFER_BYTES = L2_BYTES // 4
CHANNEL_ALIGN = 16

# A first run transforms the weights inside the GEMM stage (see fused_weights) when a
# block has at most this many tiles per output channel (of a group). A fused run reads
# the block's V once per block of output channels, an unfused one writes U (alpha^2 x ICg
# x OCg) and reads it back: the first costs less while the tiles are few against OC/G
# (fused / unfused one-shot time 0.35-0.96 at 4-54 tiles against 128-512 channels, 1.05-
# 1.9 at 100-392 tiles against 128-256: bench/results/
# winograd_oneshot_2026-11-25_epyc-zen4-avx2.txt).
FUSED_MAX_TILES_PER_CHANNEL = 0.5
# The tile sizes whose first runs may fuse: all. Fused runs keep each thread's U slices in
# its own cache, which matters most when data one thread writes and the other reads is
# slow (bench/results/fused_weights_2026-11-25_0a46b61.txt, fused_weights_2026-11-25_5eba809.txt).
FUSED_TILE_SIZES = (2, 4, 6)
# A fused run's item (a row of positions for a block of panels of output channels) keeps
# its part of the filter and its U slices within this many bytes, for its consecutive rows
# to find them in the core's L2.
FUSED_ITEM_BYTES = 192 * 2**10
# A shared run's unfused weight transform splits positions as its GEMMs do (each thread
# writes the U planes it multiplies) rather than input channels (_splits_by_position).
# One-shot time, by position / by channel, 2 threads, geo-mean over res4a_branch2b, VGG-19
# conv5_1, GoogLeNet-v2 inception_4d/double3x3b and 4e/double3x3a (bench/ab_constant.py,
# bench/results/weights_by_position_2026-11-25_epyc-zen4.txt): F(2) 0.75, F(4) 0.96,
# F(6) 1.05. The gains are largest in the slow spells (F(2) on inception_4e/double3x3a
# 1.21 ms -> 0.69 ms), where passing U between the cores was the slow part; each thread
# reading the whole filter costs up to 5-9% on quiet runs with large filters.
BY_POSITION = True

# Fewer multiply-adds than this per thread and a parallel region costs more than it
# saves (starting threads; on a busy machine, waiting for a descheduled one).
MIN_FLOPS_PER_THREAD = 2_000_000

# Relative error ||y - ref|| / ||ref|| against the float64 reference on N(0, 1) data,
# float32, 2-D 3x3 with pads 1, the worst over spatial extents 7..56, per IC; "direct"
# for comparison. Produced by ``python bench/winograd_accuracy.py`` (which prints this
# dict and writes the full table to convlab/strategies/winograd_accuracy.md);
# tests/test_winograd.py asserts each variant stays within 4x of its entry.
MEASURED_RELATIVE_ERROR = {
    "direct": {16: 2.2e-07, 64: 4.3e-07, 256: 8.5e-07, 512: 1.2e-06},
    "winograd2": {16: 1.6e-07, 64: 2.7e-07, 256: 5.0e-07, 512: 6.9e-07},
    "winograd4": {16: 7.2e-07, 64: 1.1e-06, 256: 2.2e-06, 512: 2.9e-06},
    "winograd6": {16: 2.1e-06, 64: 3.3e-06, 256: 6.1e-06, 512: 8.5e-06},
}

# The worst relative error per spatial rank, over the IC of each table of
# ``python bench/winograd_accuracy.py`` (1-D lengths 56, 1024; 2-D as above; 3-D extents
# 6..16, IC 16..512). Three nested transforms round more than two: 3-D F(6) reaches 4.6e-5,
# so precision="default" (bound 1e-5) judges every problem by its own rank's entry.
MEASURED_RELATIVE_ERROR_BY_RANK = {
    "winograd2": {1: 5.2e-07, 2: 6.9e-07, 3: 9.2e-07},
    "winograd4": {1: 1.2e-06, 2: 2.9e-06, 3: 7.9e-06},
    "winograd6": {1: 1.9e-06, 2: 8.5e-06, 3: 4.6e-05},
}

_workspace_bytes = WORKSPACE_BYTES


@contextlib.contextmanager
def workspace_limit(nbytes: int):
    """Run the block inside with a different workspace bound (tests force tiny blocks)."""
    global _workspace_bytes
    if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 1:
        raise ValueError(f"nbytes={nbytes!r} must be a positive int")
    before = _workspace_bytes
    _workspace_bytes = nbytes
    try:
        yield
    finally:
        _workspace_bytes = before


# --------------------------------------------------------------------------- GEMM level

# The level gemm_level() asked for, or None for the widest one allowed.
_gemm_level_asked: int | None = None


def current_gemm_level() -> int:
    """The GEMM micro-kernel level runs use now: the widest this CPU has within the
    instruction-set cap (convlab.runtime.cpu), or the lower one :func:`gemm_level` asked for."""
    widest = max(_winograd.gemm_levels())
    return widest if _gemm_level_asked is None else min(_gemm_level_asked, widest)


@contextlib.contextmanager
def gemm_level(level: int):
    """Prepare and run with a lower GEMM micro-kernel level inside the block (tests run
    every level this CPU has: 0 baseline, 1 AVX2, 2 AVX-512)."""
    global _gemm_level_asked
    if level not in _winograd.gemm_levels():
        raise ValueError(f"level={level!r} is not available on this CPU; expected one of "
                         f"{_winograd.gemm_levels()}")
    before = _gemm_level_asked
    _gemm_level_asked = level
    try:
        yield
    finally:
        _gemm_level_asked = before


# --------------------------------------------------------------------------- support

def _supports(problem) -> str | None:
    r = problem.rank
    if r > MAX_RANK:
        return f"rank {r}: Winograd handles 1 to {MAX_RANK} spatial axes"
    if any(k != wt.KERNEL for k in problem.kernel_shape):
        shown = "x".join(map(str, problem.kernel_shape))
        return f"kernel {shown}: Winograd F(m, 3) needs kernel 3 on every spatial axis"
    if any(s != 1 for s in problem.strides):
        shown = "x".join(map(str, problem.strides))
        return f"stride {shown}: Winograd needs stride 1"
    if any(d != 1 for d in problem.dilations):
        shown = "x".join(map(str, problem.dilations))
        return f"dilation {shown}: Winograd needs dilation 1 (a dense kernel)"
    return None


# --------------------------------------------------------------------------- transforms

@functools.lru_cache(maxsize=64)
def lifted_transforms(transform: wt.Transform, rank: int, dtype) -> tuple[tuple, tuple, tuple]:
    """(B^T, A^T, G) for each of the three lifted axes, in ``dtype``, read-only.

    Axes a lower rank lifts away come first and get the 1x1 identity.
    """
    dtype = np.dtype(dtype)
    axes = [wt.identity_transform()] * (MAX_RANK - rank) + [transform] * rank
    bts, ats, gs = [], [], []
    for t in axes:
        at, g, bt = t.arrays(dtype)
        for array, out in ((bt, bts), (at, ats), (g, gs)):
            array.setflags(write=False)
            out.append(array)
    return tuple(bts), tuple(ats), tuple(gs)


def positions(m: int, rank: int) -> int:
    return (m + wt.KERNEL - 1) ** rank


def _lifted(array: np.ndarray, rank: int) -> np.ndarray:
    """Unit spatial axes inserted after the leading axis, up to three (a free reshape)."""
    return array.reshape(array.shape[:1] + (1,) * (MAX_RANK - rank) + array.shape[1:])


class PreparedWeights:
    """What ``prepare_weights`` hands to ``run``: the canonical weights and, once a run has
    needed it, U (the transformed weights) packed for GEMM ``level``.

    U is computed by the first ``run``, not by ``prepare_weights``: the registry's hook
    has no thread count, and the transform must run on the call's ``threads``. A plan,
    which prepares once and runs many times, still transforms only once. ``canonical``
    is the caller's array, referenced, not copied; it also serves the exact
    recomputation when a result is not finite.
    """

    __slots__ = ("transform", "problem", "canonical", "level", "runs", "splits",
                 "_transformed", "_lock", "_other_levels")

    def __init__(self, transform: wt.Transform, problem, canonical: np.ndarray, level: int,
                 transformed: np.ndarray | None = None):
        self.transform = transform
        self.problem = problem
        self.canonical = canonical
        self.level = level
        self.runs = 0
        # per (problem, threads): shared or per-thread blocks, where that choice is open
        self.splits = schedule_trials.ScheduleTrials()
        self._transformed = transformed
        self._lock = threading.Lock()
        self._other_levels: dict[int, PreparedWeights] = {}

    def transformed(self, threads: int, by_position: bool = False) -> np.ndarray:
        """U (G, P, plane), computed with ``threads`` threads on first use (split as
        :func:`transform_weights` says)."""
        with self._lock:
            if self._transformed is None:
                self._transformed = transform_weights(self.transform, self.problem,
                                                      self.canonical, threads, self.level,
                                                      by_position)
            return self._transformed

    def for_level(self, level: int) -> PreparedWeights:
        """These weights for GEMM ``level`` (U packs differently per level): itself, or
        one kept with it and transformed by its own first run, once the instruction-set
        cap has changed since they were prepared."""
        if level == self.level:
            return self
        with self._lock:
            other = self._other_levels.get(level)
            if other is None:
                other = PreparedWeights(self.transform, self.problem, self.canonical, level)
                self._other_levels[level] = other
            return other

    def first_run(self) -> bool:
        """True once: for the first run, when U is not computed yet."""
        with self._lock:
            self.runs += 1
            return self.runs == 1 and self._transformed is None


# A convolve() call transforms its weights into a fresh U and drops it when it returns.
# The operating system page-faults and zeroes a fresh array of tens of MiB on every call
# (about 15 ms for the 67 MiB of VGG-19 conv4_2's F(6) U on the development machine, as
# long as the convolution itself), so recent U buffers that nobody holds any more are
# reused.
# At most this many bytes stay cached between calls; clear_buffer_cache() drops them.
BUFFER_CACHE_BYTES = 256 * 2**20

_buffer_cache: OrderedDict[tuple, np.ndarray] = OrderedDict()
_buffer_lock = threading.Lock()


def _transformed_buffer(shape, dtype) -> np.ndarray:
    """An uninitialised, 64-byte-aligned array for U: a cached one nobody else references,
    or a new one."""
    key = (tuple(shape), np.dtype(dtype).str)
    with _buffer_lock:
        cached = _buffer_cache.get(key)
        # the array held only by the cache, `cached` and getrefcount's argument, and its
        # memory (NumPy points every view at the owning array) only by the array: nobody
        # (no plan, no view, no running call) can see what is written into it next
        if (cached is not None and sys.getrefcount(cached) <= 3
                and sys.getrefcount(cached.base) <= 2):
            _buffer_cache.move_to_end(key)
            return cached
        fresh = buffers.aligned_empty(tuple(shape), dtype)
        if fresh.nbytes <= BUFFER_CACHE_BYTES:
            _buffer_cache[key] = fresh
            _buffer_cache.move_to_end(key)
            total = sum(a.nbytes for a in _buffer_cache.values())
            while total > BUFFER_CACHE_BYTES:
                _, dropped = _buffer_cache.popitem(last=False)
                total -= dropped.nbytes
        return fresh


def clear_buffer_cache() -> None:
    """Forget the cached U buffers (memory held by a running call or a plan stays theirs)."""
    with _buffer_lock:
        _buffer_cache.clear()


def transform_weights(transform: wt.Transform, problem, weights: np.ndarray, threads: int,
                      level: int | None = None, by_position: bool = False) -> np.ndarray:
    """Canonical (G, 3.., ICg, OCg) weights -> U = G w G^T per axis, packed for the GEMM.

    Computed by the kernel in the compute dtype, OpenMP over input channels, or with
    ``by_position`` on exactly ``threads`` threads over positions as a shared run on as
    many threads multiplies them (``_winograd.transform_weights``). The result
    is (G, P, plane): position pos of group g holds panels of nr output channels, (ic, oc)
    at ``(oc // nr) * ICg * nr + ic * nr + oc % nr``, zeros past OCg; planes are padded
    (``_winograd.position_stride``) so that the P planes do not share cache sets.
    """
    r = problem.rank
    level = current_gemm_level() if level is None else level
    _, nr = _winograd.gemm_layout(level, problem.dtype)
    _, _, gs = lifted_transforms(transform, r, problem.dtype)
    weights = np.ascontiguousarray(weights, dtype=problem.dtype)
    icg, ocg = problem.in_channels_per_group, problem.out_channels_per_group
    plane = _winograd.position_stride(-(-ocg // nr) * icg * nr, problem.dtype.itemsize)
    u = _transformed_buffer((problem.groups, transform.alpha ** r, plane), problem.dtype)
    if not by_position:
        work = weight_transform_flops(transform.m, problem)
        threads = max(1, min(threads, work // MIN_FLOPS_PER_THREAD))
    _winograd.transform_weights(_lifted(weights, r), *gs, u, nr,
                                channel_chunk(transform.m, problem), threads, by_position)
    return u


def unpack(prepared: PreparedWeights) -> np.ndarray:
    """The packed U of ``prepared`` as (G, P, ICg, OCg), a copy."""
    problem = prepared.problem
    _, nr = _winograd.gemm_layout(prepared.level, problem.dtype)
    icg, ocg = problem.in_channels_per_group, problem.out_channels_per_group
    panels = -(-ocg // nr)
    packed = prepared.transformed(effective_threads())
    g, p, _ = packed.shape
    u = packed[:, :, :panels * icg * nr].reshape(g, p, panels, icg, nr)
    u = u.transpose(0, 1, 3, 2, 4).reshape(g, p, icg, panels * nr)
    return np.ascontiguousarray(u[..., :ocg])


def transform_weights_float64(transform: wt.Transform, problem,
                              weights: np.ndarray) -> np.ndarray:
    """The same transform in float64 NumPy (tensordot per axis): a check on the kernel."""
    r = problem.rank
    g64 = transform.arrays(np.float64)[1]
    u = np.asarray(weights, dtype=np.float64)
    for axis in range(r):
        # contract kernel axis 1 + axis with G's columns; the new alpha axis lands last
        u = np.moveaxis(np.tensordot(u, g64, axes=([1 + axis], [1])), -1, 1 + axis)
    return u.reshape(problem.groups, transform.alpha ** r, problem.in_channels_per_group,
                     problem.out_channels_per_group)


def prepare(transform: wt.Transform, problem, weights: np.ndarray,
            threads: int | None = None) -> PreparedWeights:
    """Canonical weights for the Winograd run of ``transform``; with ``threads`` given, U
    is computed now (on that many threads), else by the first run."""
    prepared = PreparedWeights(transform, problem, weights, current_gemm_level())
    if threads is not None:
        prepared.transformed(effective_threads(threads))
    return prepared


# --------------------------------------------------------------------------- blocking

def total_tiles(m: int, problem) -> int:
    return problem.batch * math.prod(-(-o // m) for o in problem.output_shape)


def channel_chunk(m: int, problem) -> int:
    """Channels transformed together: a multiple of 16 whose buffers fit the target."""
    widest = max(problem.in_channels_per_group, problem.out_channels_per_group)
    chunk = TRANSFORM_BUFFER_BYTES // (positions(m, problem.rank) * problem.dtype.itemsize)
    chunk = max(CHANNEL_ALIGN, chunk // CHANNEL_ALIGN * CHANNEL_ALIGN)
    return min(chunk, widest)


@dataclass(frozen=True)
class Blocking:
    """How a run cuts its tiles: ``block`` tiles at a time, ``channel_chunk`` channels per
    generic tile transform, ``threads`` started, and whether the threads share each block
    (``shared``) or take whole blocks each (see :mod:`convlab.strategies.kernels._winograd`)."""

    block: int
    channel_chunk: int
    threads: int
    shared: bool


def blocking(m: int, problem, threads: int, workspace_bytes: int | None = None,
             level: int | None = None, share_small_images: bool = True) -> Blocking:
    """The blocking of a run (see :func:`_blocking`) at GEMM ``level`` (default: the
    current one), remembered per problem."""
    budget = _workspace_bytes if workspace_bytes is None else workspace_bytes
    return _blocking(m, problem, threads, budget,
                     current_gemm_level() if level is None else level, share_small_images)


def other_split(m: int, problem, threads: int, level: int, rule: Blocking) -> Blocking | None:
    """The per-thread blocking when ``rule`` shares blocks only because the image is small
    (``SHARED_MAX_TILES_2D``), else None: the choice a plan's runs try both ways
    (:mod:`convlab.strategies.schedule_trials`)."""
    if not rule.shared:
        return None
    other = blocking(m, problem, threads, level=level, share_small_images=False)
    return None if other.shared else other


@functools.lru_cache(maxsize=256)
def _blocking(m: int, problem, threads: int, budget: int, level: int,
              share_small_images: bool = True) -> Blocking:
    """The blocking of a run.

    Nothing but the thread count used depends on ``threads``: every GEMM then gets the
    same rows whatever ``threads`` is, so results are bit-identical across thread counts.

    Per-thread blocks are as large as the cache target allows and small enough to make
    ``PARALLEL_CHUNKS`` blocks when there are tiles for it. When that leaves fewer than
    ``SHARED_MIN_ROWS`` rows per GEMM while a U slice is large or the image is small
    (``SHARED_MAX_TILES_2D``), the threads share blocks instead, as large as the workspace
    bound holds and, for ungrouped problems, the threads' shares of L2 or U's size, whichever
    is larger (without ``share_small_images``, the small image alone does not make them
    share). Threads that the blocks or the bound
    cannot keep busy are not started. A block's rows are padded to whole GEMM micro-tiles
    and M's channels to whole panels; the bound counts the padding.
    """
    p = positions(m, problem.rank)
    itemsize = problem.dtype.itemsize
    cc = channel_chunk(m, problem)
    tiles = total_tiles(m, problem)
    _, nr = _winograd.gemm_layout(level, problem.dtype)
    icg, ocg = problem.in_channels_per_group, problem.out_channels_per_group
    ldm = -(-ocg // nr) * nr
    buffers = 2 * p * max(cc, _winograd.VECTOR_ELEMENTS) * itemsize  # one thread's two
    # per row of V and M, plus the two planes' padding (up to 2 lines each) per position
    per_row = p * (icg + ldm) * itemsize
    padding = p * 4 * 64

    def capacity(rows):
        return _winograd.rows_capacity(rows, level)

    def rows_within(nbytes, per):
        """Most tiles whose rows, padded to micro-tiles, fit ``nbytes`` (at least one)."""
        rows = max(1, (nbytes - padding) // per)
        while rows > 1 and capacity(rows) * per > nbytes - padding:
            rows -= 1
        return rows

    threads = max(1, min(threads, gemm_flops(m, problem) // MIN_FLOPS_PER_THREAD))
    preferred = max(MIN_BLOCK_TILES, BLOCK_BYTES_PER_THREAD // per_row)
    spread = max(MIN_BLOCK_TILES, -(-tiles // PARALLEL_CHUNKS))
    block = _even(tiles, min(rows_within(budget - buffers, per_row), preferred, spread, tiles))
    min_slice = (SHARED_MIN_SLICE_BYTES_2D_F2 if m == 2 and problem.rank == 2
                 else SHARED_MIN_SLICE_BYTES)
    small_image = (share_small_images and problem.rank == 2 and problem.groups == 1
                   and MIN_BLOCK_TILES < tiles <= SHARED_MAX_TILES_2D)
    slice_bytes = icg * ocg * itemsize  # one position of one group's U
    if block < SHARED_MIN_ROWS and (small_image or slice_bytes >= min_slice):
        if _fusable(m, problem):
            # the U slices a fused run keeps per thread
            buffers += _winograd.fused_elements(icg, ocg, m + wt.KERNEL - 1,
                                                fused_panels(m, problem, level), nr,
                                                itemsize) * itemsize
        shared_row = per_row * problem.groups
        bound = budget - buffers
        if problem.groups == 1:
            # A shared block's V and M stay within the threads' halves of L2, or within
            # U's size where U is larger (U is then read again per block at most as much
            # as V and M are written). Bounded by the workspace alone, a block took 1046
            # tiles (12.5 MB) on VGG-19 conv2_1's F(2) on a core of 1 MiB of L2: one-shot
            # time bounded / unbounded on the 21 ResNet-50, VGG-19 and GoogLeNet-v2 layer
            # and tile pairs it changes, 0.56-1.00 (geo-mean 0.77), and 3-D U-Net conv_5's
            # F(2) 0.72 (bench/results/winograd_shared_block_cap_2026-12-02_epyc-zen4.txt).
            # Grouped runs keep the workspace bound: MobileNet's depthwise F(2) (U a few
            # kB) ran 1.1-1.8x slower bounded.
            cached = max(threads * BLOCK_BYTES_PER_THREAD, p * slice_bytes)
            bound = min(bound, cached + padding)
        block = _even(tiles, min(tiles, rows_within(bound, shared_row)))
        used = max(1, min(threads, (budget - capacity(block) * shared_row
                                    - padding * problem.groups) // buffers))
        return Blocking(block, cc, used, True)
    used = max(1, min(threads, -(-tiles // block),
                      budget // (capacity(block) * per_row + padding + buffers)))
    return Blocking(block, cc, used, False)


def _even(tiles: int, block: int) -> int:
    """The smallest block that covers ``tiles`` in as many blocks as ``block`` needs."""
    return -(-tiles // -(-tiles // block))


def workspace_bytes_used(m: int, problem, threads: int,
                         workspace_bytes: int | None = None) -> int:
    """Bytes of a run's workspace, counting a fused first run's U slices."""
    b = blocking(m, problem, threads, workspace_bytes)
    return _winograd.workspace_elements(
        positions(m, problem.rank), b.block, problem.in_channels_per_group,
        problem.out_channels_per_group, problem.groups, b.channel_chunk, b.threads,
        b.shared, current_gemm_level(), problem.dtype.itemsize,
        fused_panels(m, problem, current_gemm_level()) if fused_weights(m, problem, b) else 0
    ) * problem.dtype.itemsize


# --------------------------------------------------------------------------- run

def _padding_only_ranges(problem):
    """Per axis, the output ranges whose every tap lies in the zero padding."""
    ranges = []
    for axis in range(problem.rank):
        i, pb = problem.input_shape[axis], problem.pads_begin[axis]
        o = problem.output_shape[axis]
        # output x reads inputs x - P_b .. x - P_b + 2
        head = min(o, max(0, pb - (wt.KERNEL - 1)))
        tail = min(o, max(0, i + pb))
        ranges.append([(lo, hi) for lo, hi in ((0, head), (tail, o)) if lo < hi])
    return ranges


def _fuses_post_ops(problem, seeds_sum) -> bool:
    # It cannot seed a sum: a call whose tiles came out Inf or NaN is recomputed by direct
    # over dst, after the prior contents are gone. Outputs in the padding alone are
    # overwritten after the kernel, so problems that have those keep the output stage.
    return not seeds_sum and not any(_padding_only_ranges(problem))


def _fill_padding_only_outputs(problem, dst, bias) -> None:
    """Outputs whose every tap lies in the zero padding are exactly the bias.

    The transforms mix a whole tile, so such an output would otherwise carry the rounding
    residue of its neighbours' data; docs/specification.md §1.1 makes it exactly bias (or 0).
    """
    value = 0 if bias is None else bias
    for axis, ranges in enumerate(_padding_only_ranges(problem)):
        for lo, hi in ranges:
            index = [slice(None)] * dst.ndim
            index[1 + axis] = slice(lo, hi)
            dst[tuple(index)] = value


def fused_weights(m: int, problem, b: Blocking) -> bool:
    """Whether a first run computes U inside the GEMM stage, a row of positions for a
    block of output channels at a time (``_winograd.conv_winograd`` with U None).

    One-shot calls (``convolve``) then never write U to memory and read it back:
    res5a_branch2b's F(4) one-shot call (37.7 MB of U) took a third as long as unfused.
    It pays for shared blocks whose tiles are few against the output channels
    (FUSED_MAX_TILES_PER_CHANNEL), where the register path applies (2-D, whole vectors of
    output channels) and the tile is one of FUSED_TILE_SIZES.
    """
    return (b.shared and _fusable(m, problem)
            and b.block <= FUSED_MAX_TILES_PER_CHANNEL * problem.out_channels_per_group)


def _splits_by_position(problem) -> bool:
    """Whether a shared run's threads each transform the weights they multiply
    (``_winograd.transform_weights(by_position=True)``): 2-D filters whose OC/G fills
    whole vectors, which the register path computes a position at a time; elsewhere each
    thread would compute every position to keep its own."""
    return (BY_POSITION and problem.rank == 2
            and problem.out_channels_per_group % (64 // problem.dtype.itemsize) == 0)


def fused_panels(m: int, problem, level: int) -> int:
    """Panels of output channels per item of a fused run: as many as keep the item's block
    of the packed filter (9 taps) and its row of U slices (alpha) within FUSED_ITEM_BYTES,
    at least one."""
    _, nr = _winograd.gemm_layout(level, problem.dtype)
    per_panel = ((wt.KERNEL ** 2 + m + wt.KERNEL - 1) * problem.in_channels_per_group
                 * nr * problem.dtype.itemsize)
    return max(1, FUSED_ITEM_BYTES // per_panel)


def _fusable(m: int, problem) -> bool:
    """Whether the fused kernel can run the problem (blocking counts its buffers then)."""
    ocg, itemsize = problem.out_channels_per_group, problem.dtype.itemsize
    return m in FUSED_TILE_SIZES and problem.rank == 2 and ocg % (64 // itemsize) == 0


def run_prepared(problem, src, prepared: PreparedWeights, bias, dst, threads,
                 epilogue=None) -> str:
    """Compute ``dst``; returns "winograd", or "direct" when it had to recompute exactly.
    ``epilogue``: post-ops the kernel applies to each tile (see :func:`_fuses_post_ops`)."""
    r, m = problem.rank, prepared.transform.m
    prepared = prepared.for_level(current_gemm_level())
    bts, ats, _ = lifted_transforms(prepared.transform, r, problem.dtype)
    b = blocking(m, problem, threads, level=prepared.level)
    pads = (0,) * (MAX_RANK - r) + tuple(problem.pads_begin)
    first = prepared.first_run()
    if first and fused_weights(m, problem, b):
        _, _, gs = lifted_transforms(prepared.transform, r, problem.dtype)
        _, nr = _winograd.gemm_layout(prepared.level, problem.dtype)
        panels = fused_panels(m, problem, prepared.level)
        # weight-sized, like U: a cached buffer spares the page faults of a fresh one
        packed = _transformed_buffer((_winograd.packed_filter_elements(
            problem.in_channels_per_group, problem.out_channels_per_group, problem.groups,
            panels, nr, problem.dtype.itemsize),), problem.dtype)
        nonfinite = _winograd.conv_winograd(
            _lifted(src, r), None, bias, _lifted(dst, r), *bts, *ats, pads, b.block,
            b.channel_chunk, b.threads, b.shared, prepared.level,
            np.ascontiguousarray(prepared.canonical, dtype=problem.dtype), gs[-1], epilogue,
            panels, packed)
        del packed
    else:
        def run_with(b: Blocking) -> bool:
            u = (prepared.transformed(b.threads, by_position=True)
                 if b.shared and _splits_by_position(problem)
                 else prepared.transformed(threads))
            return _winograd.conv_winograd(
                _lifted(src, r), u, bias, _lifted(dst, r), *bts,
                *ats, pads, b.block, b.channel_chunk, b.threads, b.shared, prepared.level,
                epilogue=epilogue)

        # a one-shot run (the first) follows the rule; later ones try the other split too
        other = None if first else other_split(m, problem, threads, prepared.level, b)
        if other is None:
            nonfinite = run_with(b)
        else:
            nonfinite = prepared.splits.run(
                (problem, threads), lambda rule: run_with(b if rule else other))
    if nonfinite:
        direct = get_algorithm("direct")
        direct.run(problem, src, direct.prepare_weights(problem, prepared.canonical), bias,
                   dst, threads, epilogue=epilogue)
        return "direct"
    _fill_padding_only_outputs(problem, dst, bias)
    return "winograd"


def _make_run(m: int):
    def run(problem, src, weights, bias, dst, threads, epilogue=None):
        run_prepared(problem, src, weights, bias, dst, threads, epilogue)

    run.__name__ = f"run_winograd{m}"
    run.__doc__ = f"Winograd F({m}, 3) per axis: tile transforms + batched GEMMs"
    return run


def _make_prepare(m: int):
    def prepare_weights(problem, weights):
        # The transform itself waits for the first run, which knows the thread count.
        return prepare(wt.TRANSFORMS[m], problem, weights)

    return prepare_weights


# --------------------------------------------------------------------------- cost

def transform_flops(m: int, problem) -> int:
    """2 x multiply-adds of the input and output tile transforms, counting the zero
    entries of B^T and A^T (the 2-D register path multiplies them too) and the unused
    lanes of each group's last vector of channels: the transforms run whole 64-byte
    vectors at every level (WG_VL, winograd_template.h), so that 3-D F(2) on 4 to 16
    channels of 16x32x32 takes the same 4 ms (one thread, avx512)."""
    r, alpha = problem.rank, m + wt.KERNEL - 1
    # input: r passes, each alpha^(r-1) lines of alpha x alpha multiply-adds per channel
    per_channel_in = r * alpha ** (r + 1)
    # output: the last axis first (alpha^(r-1) lines), then lines shrinking to m
    per_channel_out = sum(alpha ** (r - 1 - k) * m ** k * m * alpha for k in range(r))
    itemsize = problem.dtype.itemsize
    in_channels = problem.groups * _winograd.vector_channels(problem.in_channels_per_group,
                                                             itemsize)
    out_channels = problem.groups * _winograd.vector_channels(problem.out_channels_per_group,
                                                              itemsize)
    return 2 * total_tiles(m, problem) * (in_channels * per_channel_in
                                          + out_channels * per_channel_out)


def gemm_flops(m: int, problem) -> int:
    return (2 * positions(m, problem.rank) * total_tiles(m, problem)
            * problem.in_channels_per_group * problem.out_channels)


def weight_transform_flops(m: int, problem) -> int:
    """prepare_weights' passes: a plan pays them once, ``convolve`` on every call."""
    alpha, r = m + wt.KERNEL - 1, problem.rank
    per_pair = sum(2 * alpha ** (k + 1) * wt.KERNEL ** (r - k) for k in range(r))
    return per_pair * problem.in_channels_per_group * problem.out_channels


# Rows at which a GEMM runs at half its full rate in the "short_gemm_flops" term, of the
# order of the 12-row micro-tiles of the register-blocked GEMM (WG_MR, winograd_gemm.h).
SHORT_GEMM_ROWS = 16


def cost_terms(m: int, problem, threads) -> tuple:
    """The work of one ``convolve`` call, as :mod:`convlab.dispatch.cost_model` terms (per thread),
    and details for ``explain``. The weight transform is counted because a one-shot call
    pays it every time; a plan pays it once."""
    g_flops, t_flops = gemm_flops(m, problem), transform_flops(m, problem)
    w_flops = weight_transform_flops(m, problem)
    b = blocking(m, problem, threads)
    threads = b.threads  # small problems start fewer
    # Every block of tiles streams all of U (alpha^r x IC/G x OC); with few tiles per block
    # (small images) that traffic, not the arithmetic, sets the pace.
    blocks = -(-total_tiles(m, problem) // b.block)
    u_bytes = (positions(m, problem.rank) * problem.in_channels_per_group
               * problem.out_channels * problem.dtype.itemsize)
    # A fused run (fused_weights) computes U's slices again for every block of tiles, from
    # the filter packed once per call and kept in cache, rather than U once into memory:
    # its own term, since the two cost differently per multiply-add. Priced by one
    # constant, the fit came out between them, and one-shot F(4) was estimated 1.3x its
    # time on fused 14x14 layers (auto ran F(2), 1.1-1.2x slower, on GoogLeNet-v2's
    # inception_4* and VGG-19 conv5_1) while unfused runs (256 x 250 channels) took 2.4x
    # their estimate (bench/results/winograd_fused_weight_term_2026-12-02.txt).
    fused = fused_weights(m, problem, b)
    # 1-D and 3-D runs take other transform code than 2-D (no register-tiled 2-D
    # transform), and 1-D its own GEMM shapes: their extra cost per unit is fitted on its
    # own, zero where no run says otherwise. A 3-D run's GEMMs are the 2-D kernel's and
    # are priced at its rate: a 3-D GEMM term of their own, fitted on narrow problems,
    # overpriced F(4) on wide ones (bench/results/winograd_3d_gemm_term_2026-11-27_xeon-emr.txt).
    other_rank = {1: "_1d", 3: "_3d"}.get(problem.rank)
    terms = {**cost_model.FIXED_TERMS, "gemm_flops": g_flops / threads,
             "transform_flops": t_flops / threads,
             "weight_transform_flops": 0.0 if fused else w_flops / threads,
             "fused_weight_transform_flops": w_flops * blocks / threads if fused else 0.0,
             "tiles": total_tiles(m, problem) * problem.groups / threads,
             "u_stream_bytes": u_bytes * blocks / threads,
             # GEMMs of few rows (tiles per block) run below the microkernel's full rate
             "short_gemm_flops": g_flops / threads * SHORT_GEMM_ROWS
             / (min(b.block, total_tiles(m, problem)) + SHORT_GEMM_ROWS)}
    terms["gemm_flops_1d"] = terms["gemm_flops"] if problem.rank == 1 else 0.0
    for suffix in ("_1d", "_3d"):
        terms["transform_flops" + suffix] = (terms["transform_flops"] if suffix == other_rank
                                             else 0.0)
    # The 3-D weight transform scatters each filter over alpha^3 planes of U: on 3d_unet
    # conv_7 (13x13x12, 256 channels) it took 22 ms of F(4)'s 29 ms one-shot call, 9x its
    # 2-D rate per multiply-add (bench/results/cost_timings_2026-11-24_epyc_229b174_run*.csv).
    terms["weight_transform_flops_3d"] = (terms["weight_transform_flops"]
                                          if problem.rank == 3 else 0.0)
    measured = MEASURED_RELATIVE_ERROR_BY_RANK[f"winograd{m}"]
    details = {"tile": m, "threads": threads,
               "workspace_bytes": workspace_bytes_used(m, problem, threads),
               "float32_relative_error": measured.get(problem.rank, max(measured.values()))}
    return terms, details


def _make_cost(m: int):
    def cost(problem, threads):
        return cost_model.estimate(f"winograd{m}", threads, *cost_terms(m, problem, threads))

    return cost


def _make_relative_error(m: int):
    by_rank = MEASURED_RELATIVE_ERROR_BY_RANK[f"winograd{m}"]

    def relative_error(problem) -> float:
        return by_rank.get(problem.rank, max(by_rank.values()))

    return relative_error


for _m in TILE_SIZES:
    register_algorithm(
        f"winograd{_m}", supports=_supports, cost=_make_cost(_m),
        prepare_weights=_make_prepare(_m),
        description=f"Winograd F({_m}x{_m}, 3x3) (1-D F({_m}, 3), 3-D nested): "
                    f"kernel 3, stride 1, dilation 1",
        # the worst entry measured at the problem's rank decides what precision= admits
        relative_error=_make_relative_error(_m), fuse_post_ops=_fuses_post_ops,
    )(_make_run(_m))
