"""``winograd2``, ``winograd4``, ``winograd6``: Winograd F(m x m, 3 x 3) convolution.

One algorithm per output tile m. 2-D problems use F(m x m, 3x3), 1-D ones F(m, 3) and
3-D ones F(m x m x m, 3x3x3): the 1-D transforms of :mod:`convlab.winograd_transforms`
nested along every axis. A tile of m^r outputs needs alpha^r products per (ic, oc) pair
(alpha = m + 2) instead of (3m)^r, so the multiply count drops by (3m / alpha)^r, at a
cost in float32 accuracy that grows with m (see ``MEASURED_RELATIVE_ERROR``).

The steps, with P = alpha^r transform positions:

* ``prepare_weights``: ``U[g, pos] = (G w G^T)[pos]``, shape (G, P, ICg, OCg), by the
  kernel in the compute dtype. A plan does this once; ``convolve`` on every call.
* ``run``: the Cython kernel :mod:`convlab.kernels._winograd` transforms input tiles,
  runs P GEMMs [tiles x ICg] x [ICg x OCg] per block of tiles, and transforms back, all
  in one OpenMP region. BLAS is held to one thread meanwhile, so ``threads`` threads run
  in total.

Runs on: kernel 3 on every spatial axis, stride 1, dilation 1, any pads (asymmetric,
auto, negative = crop), groups, batch and bias.

Exactness where the transforms would blur it: outputs whose every tap is padding are
set to the bias exactly, and a call whose result holds Inf or NaN (a special value in
the inputs spreads over its whole tile; the transforms may also overflow before a
direct sum would) is recomputed by ``direct``, so special values land exactly where
SPEC §1 puts them.
"""
from __future__ import annotations

import contextlib
import functools
import math
from dataclasses import dataclass
from typing import Optional, Tuple

import numpy as np

from convlab import winograd_transforms as wt
from convlab.kernels import _winograd
from convlab.registry import Estimate, get_algorithm, register_algorithm
from convlab.threads import effective_threads

TILE_SIZES = (2, 4, 6)
MAX_RANK = 3

# Workspace (V and M blocks plus tile buffers, all threads together) stays under this
# many bytes whatever the problem size; only a single tile that is larger on its own
# (very wide 3-D layers) goes over, by that tile. Change it with ``workspace_limit``.
WORKSPACE_BYTES = 16 * 2**20

# Preferred size of one thread's block (V + M): small enough to stay in a core's L2,
# large enough that each GEMM has rows to amortise its call. Provisional (a few timings
# of res2a/res3a/VGG-19 layers); [selection] may refit it.
BLOCK_BYTES_PER_THREAD = 1 * 2**20
MIN_BLOCK_TILES = 16

# One tile's transform buffer holds P * channel_chunk elements; this many keeps the two
# buffers in L1/L2 while the vector loops stay long.
TRANSFORM_BUFFER_ELEMENTS = 4096
CHANNEL_ALIGN = 16

# Cost model constants. PROVISIONAL: guesses from a few timings on the development
# machine (2 cores, AVX-512, SciPy's OpenBLAS); [selection] fits them.
ASSUMED_GEMM_GFLOPS_PER_THREAD = 80.0       # the P small GEMMs, BLAS
ASSUMED_TRANSFORM_GFLOPS_PER_THREAD = 8.0   # tile and weight transforms: memory-bound loops

# Relative error ||y - ref|| / ||ref|| against the float64 reference on N(0, 1) data,
# float32, 2-D 3x3 with pads 1, the worst over spatial extents 7..56, per IC; "direct"
# for comparison. Produced by ``python bench/winograd_accuracy.py`` (which prints this
# dict and writes the full table to convlab/winograd_accuracy.md);
# tests/test_winograd.py asserts each variant stays within 4x of its entry.
MEASURED_RELATIVE_ERROR = {
    "direct": {},
    "winograd2": {},
    "winograd4": {},
    "winograd6": {},
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


# --------------------------------------------------------------------------- BLAS threads

_blas_libraries = None


def _blas_controllers():
    """threadpoolctl's handles on the loaded BLAS libraries, found once.

    ``threadpool_limits`` rescans every loaded library per call (about 1 ms here);
    setting a count on handles found once is one C call each.
    """
    global _blas_libraries
    if _blas_libraries is None:
        from threadpoolctl import ThreadpoolController

        _blas_libraries = [lib for lib in ThreadpoolController().lib_controllers
                           if lib.user_api == "blas"]
    return _blas_libraries


@contextlib.contextmanager
def single_threaded_blas():
    """BLAS on one thread while the kernel's OpenMP threads call it, so that a call runs
    ``threads`` threads in total, never ``threads`` x BLAS threads. Restored afterwards."""
    changed = []
    for lib in _blas_controllers():
        current = lib.get_num_threads()
        if current != 1:
            lib.set_num_threads(1)
            changed.append((lib, current))
    try:
        yield
    finally:
        for lib, previous in changed:
            lib.set_num_threads(previous)


# --------------------------------------------------------------------------- support

def _supports(problem) -> Optional[str]:
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

@functools.lru_cache(maxsize=None)
def lifted_transforms(transform: wt.Transform, rank: int, dtype) -> Tuple[tuple, tuple, tuple]:
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


@dataclass(frozen=True)
class PreparedWeights:
    """What ``prepare_weights`` hands to ``run``.

    ``transformed`` is U (G, P, ICg, OCg). ``canonical`` is the caller's canonical array,
    referenced, not copied, for the exact recomputation when a result is not finite.
    """

    transform: wt.Transform
    transformed: np.ndarray
    canonical: np.ndarray


def transform_weights(transform: wt.Transform, problem, weights: np.ndarray,
                      threads: int) -> np.ndarray:
    """Canonical (G, 3.., ICg, OCg) weights -> U (G, P, ICg, OCg) = G w G^T per axis.

    Computed by the kernel in the compute dtype (OpenMP over input channels).
    """
    r = problem.rank
    _, _, gs = lifted_transforms(transform, r, problem.dtype)
    weights = np.ascontiguousarray(weights, dtype=problem.dtype)
    u = np.empty((problem.groups, transform.alpha ** r, problem.in_channels_per_group,
                  problem.out_channels_per_group), dtype=problem.dtype)
    _winograd.transform_weights(_lifted(weights, r), *gs, u,
                                channel_chunk(transform.m, problem), threads)
    return u


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
            threads: Optional[int] = None) -> PreparedWeights:
    threads = effective_threads(threads)
    return PreparedWeights(transform, transform_weights(transform, problem, weights, threads),
                           weights)


# --------------------------------------------------------------------------- blocking

def total_tiles(m: int, problem) -> int:
    return problem.batch * math.prod(-(-o // m) for o in problem.output_shape)


def channel_chunk(m: int, problem) -> int:
    """Channels transformed together: a multiple of 16 whose buffers fit the target."""
    widest = max(problem.in_channels_per_group, problem.out_channels_per_group)
    chunk = TRANSFORM_BUFFER_ELEMENTS // positions(m, problem.rank)
    chunk = max(CHANNEL_ALIGN, chunk // CHANNEL_ALIGN * CHANNEL_ALIGN)
    return min(chunk, widest)


def blocking(m: int, problem, threads: int, workspace_bytes: Optional[int] = None):
    """(block_tiles, channel_chunk, threads used) for a run.

    Blocks are as large as the per-thread cache target allows, never so large that
    ``threads`` blocks together exceed the workspace bound, then evened out so that every
    thread gets work when there are enough tiles.
    """
    budget = _workspace_bytes if workspace_bytes is None else workspace_bytes
    p = positions(m, problem.rank)
    itemsize = problem.dtype.itemsize
    cc = channel_chunk(m, problem)
    tiles = total_tiles(m, problem)
    per_tile = p * (problem.in_channels_per_group + problem.out_channels_per_group) * itemsize
    fixed = 2 * p * cc * itemsize
    cap = max(1, (budget // threads - fixed) // per_tile)
    preferred = max(MIN_BLOCK_TILES, BLOCK_BYTES_PER_THREAD // per_tile)
    block = max(1, min(cap, preferred, tiles))
    chunks = max(-(-tiles // block), min(threads, tiles))
    block = -(-tiles // chunks)
    chunks = -(-tiles // block)
    return block, cc, min(threads, chunks)


def workspace_bytes_used(m: int, problem, threads: int,
                         workspace_bytes: Optional[int] = None) -> int:
    block, cc, used = blocking(m, problem, threads, workspace_bytes)
    return used * _winograd.workspace_elements(
        positions(m, problem.rank), block, problem.in_channels_per_group,
        problem.out_channels_per_group, cc) * problem.dtype.itemsize


# --------------------------------------------------------------------------- run

def _fill_padding_only_outputs(problem, dst, bias) -> None:
    """Outputs whose every tap lies in the zero padding are exactly the bias.

    The transforms mix a whole tile, so such an output would otherwise carry the rounding
    residue of its neighbours' data; SPEC §1 makes it exactly bias (or 0).
    """
    value = 0 if bias is None else bias
    for axis in range(problem.rank):
        i, pb = problem.input_shape[axis], problem.pads_begin[axis]
        o = problem.output_shape[axis]
        # output x reads inputs x - P_b .. x - P_b + 2
        head = min(o, max(0, pb - (wt.KERNEL - 1)))
        tail = min(o, max(0, i + pb))
        for lo, hi in ((0, head), (tail, o)):
            if lo < hi:
                index = [slice(None)] * dst.ndim
                index[1 + axis] = slice(lo, hi)
                dst[tuple(index)] = value


def run_prepared(problem, src, prepared: PreparedWeights, bias, dst, threads) -> str:
    """Compute ``dst``; returns "winograd", or "direct" when it had to recompute exactly."""
    r, m = problem.rank, prepared.transform.m
    bts, ats, _ = lifted_transforms(prepared.transform, r, problem.dtype)
    block, cc, used = blocking(m, problem, threads)
    with single_threaded_blas():
        nonfinite = _winograd.conv_winograd(
            _lifted(src, r), prepared.transformed, bias, _lifted(dst, r), *bts, *ats,
            (0,) * (MAX_RANK - r) + tuple(problem.pads_begin), block, cc, used)
    if nonfinite:
        direct = get_algorithm("direct")
        direct.run(problem, src, direct.prepare_weights(problem, prepared.canonical), bias,
                   dst, threads)
        return "direct"
    _fill_padding_only_outputs(problem, dst, bias)
    return "winograd"


def _make_run(m: int):
    def run(problem, src, weights, bias, dst, threads):
        run_prepared(problem, src, weights, bias, dst, threads)

    run.__name__ = f"run_winograd{m}"
    run.__doc__ = f"Winograd F({m}, 3) per axis: tile transforms + batched BLAS GEMMs"
    return run


def _make_prepare(m: int):
    def prepare_weights(problem, weights):
        # The registry's hook has no thread count: the default one (OMP_NUM_THREADS) runs.
        return prepare(wt.TRANSFORMS[m], problem, weights)

    return prepare_weights


# --------------------------------------------------------------------------- cost

def transform_flops(m: int, problem) -> int:
    """2 x multiply-adds of the input and output tile transforms (zero entries skipped)."""
    r, t = problem.rank, wt.TRANSFORMS[m]
    alpha = t.alpha
    at, _, bt = t.arrays(np.float64)
    nnz_bt, nnz_at = int(np.count_nonzero(bt)), int(np.count_nonzero(at))
    # input: r passes, each alpha^(r-1) lines of nnz(B^T) multiply-adds per channel
    per_channel_in = r * alpha ** (r - 1) * nnz_bt
    # output: the last axis first (alpha^(r-1) lines), then lines shrinking to m
    per_channel_out = sum(alpha ** (r - 1 - k) * m ** k * nnz_at for k in range(r))
    return 2 * total_tiles(m, problem) * (problem.in_channels * per_channel_in
                                          + problem.out_channels * per_channel_out)


def gemm_flops(m: int, problem) -> int:
    return (2 * positions(m, problem.rank) * total_tiles(m, problem)
            * problem.in_channels_per_group * problem.out_channels)


def weight_transform_flops(m: int, problem) -> int:
    """prepare_weights' passes: a plan pays them once, ``convolve`` on every call."""
    alpha, r = m + wt.KERNEL - 1, problem.rank
    per_pair = sum(2 * alpha ** (k + 1) * wt.KERNEL ** (r - k) for k in range(r))
    return per_pair * problem.in_channels_per_group * problem.out_channels


def _make_cost(m: int):
    def cost(problem, threads):
        g_flops, t_flops = gemm_flops(m, problem), transform_flops(m, problem)
        w_flops = weight_transform_flops(m, problem)
        seconds = (g_flops / (ASSUMED_GEMM_GFLOPS_PER_THREAD * 1e9 * threads)
                   + (t_flops + w_flops) / (ASSUMED_TRANSFORM_GFLOPS_PER_THREAD * 1e9 * threads))
        measured = MEASURED_RELATIVE_ERROR.get(f"winograd{m}") or {}
        return Estimate(seconds, {
            "tile": m, "gemm_flops": g_flops, "transform_flops": t_flops,
            "weight_transform_flops": w_flops, "threads": threads,
            "gemm_gflops_per_thread": ASSUMED_GEMM_GFLOPS_PER_THREAD,
            "transform_gflops_per_thread": ASSUMED_TRANSFORM_GFLOPS_PER_THREAD,
            "workspace_bytes": workspace_bytes_used(m, problem, threads),
            "float32_relative_error": max(measured.values()) if measured else None,
            "constants": "provisional",
        })

    return cost


for _m in TILE_SIZES:
    register_algorithm(
        f"winograd{_m}", supports=_supports, cost=_make_cost(_m),
        prepare_weights=_make_prepare(_m),
        description=f"Winograd F({_m}x{_m}, 3x3) (1-D F({_m}, 3), 3-D nested): "
                    f"kernel 3, stride 1, dilation 1",
    )(_make_run(_m))
