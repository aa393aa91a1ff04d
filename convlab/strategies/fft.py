"""``fft``: convolution through the convolution theorem, on pocketfft (SciPy's or ducc0's).

For each spatial tile, the real-to-complex transform of the input tile over the spatial
axes, times the conjugated transform of the (zero-stretched) kernel, summed over the
input channels of a group, and transformed back, gives the tile's cross-correlation::

    Y[f, t, g*OCg + o] = sum_i X[f, t, g*ICg + i] * conj(W[f, g, i, o])     (per frequency f)
    y = irfftn(Y)[valid positions]

so the work per output no longer grows with the kernel's extent: that of direct and
im2col grows as prod(K), this one as log(prod(L)) (L the transform length) plus the
contraction over channels, which is where the work is on wide layers.

The steps, for a block of tiles (spatial tile x image pairs) and a chunk of groups:

* gather: each tile's window of the padded input, zeros where it lies in the padding
  (negative pads crop), into a real buffer (L..., tiles, channels);
* the forward real transform over the spatial axes, axis by axis from the last, each pass
  over the lines that hold data only (a 14x14 image in a 27x27 tile skips half of the
  first pass), in pieces of lines shared by the threads (:mod:`.fft_transforms`);
* the contraction per frequency: a batched complex GEMM (``numpy.matmul``, per group, BLAS
  held at one thread while this module's threads split the frequencies), or, for few
  channels per group (depthwise), a broadcast product;
* the inverse transform axis by axis from the first, each pass over the lines whose
  positions the crop keeps, then the crop: the first outputs of each tile, every
  stride-th one, plus the bias, into dst.

The transforms are :mod:`convlab.strategies.fft_transforms`' (ducc0 where installed,
else SciPy's pocketfft), every pass writing into the block's workspace buffers.

Two pipelines run these steps. Problems with one input channel per group in float32 at
stride 1 (depthwise layers of at least 8 channels, banks of at least 8 filters on one
channel) run :mod:`convlab.strategies.fft_compiled`: the whole pipeline in C, with
transforms of its own that handle 16 or 32 channels at once, one call per layer. Every other
problem runs the pipeline this module describes, driven from Python.

Tiles (overlap-save, as ``scipy.signal.oaconvolve`` overlaps): a tile of To outputs per
axis reads (To - 1) * S + Ke inputs (Ke = (K - 1) * D + 1, the stretched kernel); the
transform length L >= that is a fast size (``scipy.fft.next_fast_len``), and the circular
correlation's first (To - 1) * S + 1 positions, the ones kept, see no wrap-around. The
tile shape is chosen per problem by an operation count (:func:`tiling`), within the
workspace bound that im2col uses (``im2col.get_workspace_limit()``, 16 MiB by default,
``CONVLAB_IM2COL_WORKSPACE``): the buffers of one block never exceed it, whatever the
batch and image size; a problem whose smallest tile of one group does not fit is refused
by ``supports``. The transformed weights (like Winograd's U) are not workspace: they are
prepared weights, (F, G, ICg, OCg) complex numbers for a transform of F frequencies.

Strides above 1: the dense result is computed on each tile and decimated (every S-th
position kept), so a call does S^r times the transforms and contraction of its outputs;
the cost hook counts that, and "auto" picks fft on a strided problem only where it still
wins. Dilation: the kernel is stretched with zeros before its transform.

Exactness where the transforms would blur it (as for Winograd): outputs whose every tap
is padding are set to the bias exactly, and a call whose result holds Inf or NaN is
recomputed by ``direct`` (``im2col`` above rank 3), so special values land where the
definition puts them.

Plans: ``prepare_weights`` copies the weights as (K..., G, ICg, OCg), from the view of the
caller's array the registry hands it (a nearly contiguous read in the XIO layout); each
transform shape's weight
spectrum is computed by the first run that needs it and kept with the prepared weights
(the registry's hook knows neither the src extents, which decide the tile, nor the thread
count), so a plan transforms its weights once per tile shape. A one-shot call's weights
(``prepare_once``) wrap the caller's view instead of a copy.

Selection: the cost hook counts the transforms, the contraction, the weight spectrum read
per block, the copies, tiles and blocks, and the weights' transform (which a plan pays
once). "auto" and "tune" weigh fft from AUTO_MIN_KERNEL_TAPS kernel taps on.

Threads: where the contraction is the broadcast product and there are several groups
(depthwise layers), the groups are independent from the gather to the crop, and
(block, slice of groups) tasks each run the whole pipeline on one thread of the fft
pool (:func:`.fft_transforms.run_parallel`), the tasks shared by the threads. Otherwise
the transforms run in pieces of lines and the contraction in chunks of frequencies, both
shared by the threads of that pool (the BLAS at one thread meanwhile), and the gathers and
crops on the calling thread; nothing runs wide at the same time. The weights' transform
runs in chunks of filters, one thread each (see :func:`weight_spectrum`). The tile shape,
blocks, group slices, weight chunks, transform pieces and frequency chunks do not depend
on ``threads``, so every thread count gives the same result, bit for bit.

Buffers: a block's input tiles, their spectrum, the output spectrum and output tiles
live in the buffer im2col keeps per thread between calls (within the same workspace
limit), since fresh memory page-faults on every call.
"""
from __future__ import annotations

import math
import threading
from collections import OrderedDict
from dataclasses import dataclass
from functools import lru_cache
from itertools import product
from typing import Any

import numpy as np
import scipy.fft as sfft

from convlab.dispatch import cost_model
from convlab.dispatch.registry import get_algorithm, register_algorithm
from convlab.runtime.threads import available_cores, blas_limit
from convlab.strategies import fft_compiled, fft_transforms, im2col
from convlab.strategies.fft_geometry import (
    candidate_grid,
    stretched_kernel,
    whole_axis_length,
)

# --------------------------------------------------------------------------- constants

# The tile choice weighs the work of candidate tile shapes by these seconds per unit, of
# the order measured on one core of the AVX2 EPYC (pocketfft ~10 GFLOP/s counted as
# 2.5 N log2 N per real transform, plus a memory pass per axis; complex GEMM ~60 GFLOP/s,
# a broadcast complex product ~10 GFLOP/s, weight spectra streamed at ~10 GB/s, ~0.3 us
# per BLAS call, NumPy copies ~5 GB/s, ~15 us of Python per tile gathered and cropped).
# Only their ratios matter: they set where a larger transform's longer lines stop paying
# for the overlap it saves. They are not the fitted cost constants, which price the
# chosen tiling for "auto" (see cost_terms): the tile must not change when a calibration
# refits those, or the timings it was fitted on would no longer describe the runs.
TILE_CHOICE_SECONDS = {
    "fft_flops": 1.0e-10,
    "transform_points": 2.0e-10,
    "gemm_flops": 1.6e-11,
    "broadcast_flops": 1.0e-10,
    "spectrum_stream_bytes": 1.0e-10,
    "gemm_call": 3.0e-7,
    "copy_bytes": 2.0e-10,
    "tile": 1.5e-5,
    "block": 1.0e-4,
}

# Per axis, tiles of 1, 2, 3, 4, 6, 8, 12, ... outputs (a ratio of about sqrt(2)) and the
# whole axis are the candidates; the tile shape is the cheapest combination.
TILE_LADDER_RATIO = 1.5

# The contraction takes the broadcast product (one elementwise multiply-add per input
# channel of a group) when a group has one input channel or ICg * OCg is at most this;
# above it, one BLAS complex GEMM per group and frequency chunk.
BROADCAST_MAX_CHANNEL_PRODUCT = 16

# Frequencies per contraction chunk: the chunks the threads share. A chunk's X, W and Y
# slices take about this many bytes; fixed per problem so that results do not depend on
# the thread count.
CHUNK_BYTES = 256 * 2**10

# Where the output spectrum starts in a block's buffer: a cache line after the input.
WORKSPACE_ALIGN = 64

# Filters per weight-transform task: about this many bytes of kernel lines and spectrum,
# which stay in cache while one thread transforms them, and at least this many filters.
WEIGHT_TASK_BYTES = 2**20
WEIGHT_TASK_MIN_FILTERS = 16
# Chunks per core: 1 took RepLKNet's 13x13 stage's weights 0.76 ms, 2 0.86, 4 1.09 (2
# threads, AMD EPYC family 25 model 17; Python's cost per chunk).
WEIGHT_TASKS_PER_CORE = 1

# Weight spectra kept with prepared weights, per tile shape (a plan that sees many image
# sizes keeps the latest ones).
MAX_KEPT_SPECTRA = 4

# Real transform flops per point and log2 point (the usual 2.5 N log2 N count).
FFT_FLOPS_PER_POINT_LOG = 2.5
# Real flops per complex multiply-add.
COMPLEX_MAC_FLOPS = 8

# The worst float32 relative error ||y - ref|| / ||ref|| against the float64 reference,
# N(0, 1) data, 'same' pads, per spatial rank, over kernels 3 to 251 taps (1-D), 3x3 to
# 31x31 (2-D), 3^3 to 7^3 (3-D), IC 1 to 256 (1-D, 2-D) or 64 (3-D), dense and depthwise
# (python bench/fft_accuracy.py; bench/results/fft_accuracy_2026-11-26_epyc-avx2.txt on
# SciPy's pocketfft, bench/results/fft_accuracy_2026-11-26_epyc-avx2_ducc0.txt on ducc0,
# bench/results/fft_accuracy_2026-11-26_epyc-avx2_compiled.txt with the compiled pipeline
# on the depthwise and one-input-channel rows).
# It hardly depends on the kernel or the channels (1.7e-7 to 4.4e-7), where a plain
# sum's grows with both (direct: 3.5e-8 to 4.3e-6).
MEASURED_RELATIVE_ERROR_BY_RANK = {1: 4.3e-07, 2: 4.4e-07, 3: 3.1e-07}


# "auto" and "tune" consider fft only for kernels of at least this many taps (prod(K);
# dilation does not count: the zeros of a dilated kernel cost the transforms, not direct).
# Below it fft lost to the best of the others on every layer timed but one, time of fft /
# time of the best other (thread_time, 1 thread, AMD EPYC family 25 model 17, busy):
# ConvNeXt-T's 7x7 depthwise 4.1-6.2, GoogLeNet-v1's 5x5 layers at batch 8 as plans
# 0.92-1.58, 3-D 3x3 layers 1.9-2.2, Conformer's 31-tap depthwise 3.1, SincNet's 63-tap
# filters 2.6; the provisional cost constants (fitted on a busy machine, against the
# others' constants of another day) are no judge of such margins. A forced
# algorithm="fft" runs any kernel; 0 leaves the choice to the estimates alone.
AUTO_MIN_KERNEL_TAPS = 100


def auto_contender(problem) -> bool:
    """Whether "auto" and "tune" weigh fft on ``problem`` (AUTO_MIN_KERNEL_TAPS)."""
    return problem.kernel_size >= AUTO_MIN_KERNEL_TAPS


def _workspace_limit() -> int:
    """The bytes one call's buffers may take: im2col's workspace bound."""
    return im2col.get_workspace_limit()


@lru_cache(maxsize=1)
def _reference_parallelism() -> int:
    return available_cores()


# --------------------------------------------------------------------------- geometry

def spectrum_shape(fft_shape) -> tuple[int, ...]:
    """Frequencies per axis of a real transform of ``fft_shape`` (the last axis halved)."""
    return tuple(fft_shape[:-1]) + (fft_shape[-1] // 2 + 1,)


@dataclass(frozen=True)
class Tiling:
    """How a problem is cut: the transform shape, outputs per tile and tiles per axis,
    groups per chunk, (spatial tile, image) pairs per block, the contraction."""

    fft_shape: tuple[int, ...]
    tile_outputs: tuple[int, ...]
    tiles_per_axis: tuple[int, ...]
    group_chunk: int
    block_tiles: int
    contraction: str            # "gemm" or "broadcast"
    workspace_bytes: int        # the most one block's buffers take

    @property
    def spectrum_shape(self) -> tuple[int, ...]:
        return spectrum_shape(self.fft_shape)

    @property
    def spatial_tiles(self) -> int:
        return math.prod(self.tiles_per_axis)

    def describe(self) -> dict[str, Any]:
        return {"fft_shape": "x".join(map(str, self.fft_shape)),
                "tile_outputs": "x".join(map(str, self.tile_outputs)),
                "tiles": "x".join(map(str, self.tiles_per_axis)),
                "group_chunk": self.group_chunk, "block_tiles": self.block_tiles,
                "contraction": self.contraction, "workspace_bytes": self.workspace_bytes}


def _contraction(problem) -> str:
    icg, ocg = problem.in_channels_per_group, problem.out_channels_per_group
    return "broadcast" if icg == 1 or icg * ocg <= BROADCAST_MAX_CHANNEL_PRODUCT else "gemm"


def tile_bytes_per_group(problem, fft_shape) -> int:
    """Workspace of one tile and one group: the real input tile and its spectrum, the
    output spectrum and the real output tile (all four may be alive in a block)."""
    points = math.prod(fft_shape)
    freqs = math.prod(spectrum_shape(fft_shape))
    itemsize = problem.dtype.itemsize
    icg, ocg = problem.in_channels_per_group, problem.out_channels_per_group
    return itemsize * (points * (icg + ocg) + 2 * freqs * (icg + ocg))


def _axis_candidates(problem, axis: int, most: int) -> list[tuple[int, int]]:
    """(L, To) pairs for one axis: tiles of a ladder of output counts, each with the fast
    transform length that covers it (To then as many outputs as that length holds), and
    the whole axis in one tile. Lengths above ``most`` are left out."""
    outputs, stride = problem.output_shape[axis], problem.strides[axis]
    extent = stretched_kernel(problem)[axis]
    last = axis == problem.rank - 1
    found: dict[int, int] = {}
    whole = sfft.next_fast_len(whole_axis_length(problem, axis), real=last)
    if whole <= most:
        found[whole] = outputs
    count = 1
    while count < outputs:
        wanted = (count - 1) * stride + extent
        if wanted > most:
            break
        length = sfft.next_fast_len(wanted, real=last)
        if length > most or length >= whole:
            break
        held = min(outputs, (length - extent) // stride + 1)
        if held < outputs:
            found.setdefault(length, held)
        count = max(count + 1, int(count * TILE_LADDER_RATIO))
    return sorted(found.items())


def refusal(problem) -> str | None:
    """Why the smallest tile does not fit the workspace, or None."""
    extents = stretched_kernel(problem)
    smallest = tuple(sfft.next_fast_len(min(e, whole_axis_length(problem, axis)),
                                        real=(axis == problem.rank - 1))
                     for axis, e in enumerate(extents))
    need = tile_bytes_per_group(problem, smallest)
    limit = _workspace_limit()
    if need > limit:
        return (f"kernel extent {'x'.join(map(str, extents))} with IC/G + OC/G = "
                f"{problem.in_channels_per_group + problem.out_channels_per_group}: one "
                f"tile of one group needs {need} bytes, more than the workspace limit "
                f"{limit} (im2col.set_workspace_limit)")
    return None


def tiling(problem) -> Tiling:
    """The tile shape with the lowest operation-count estimate (TILE_CHOICE_SECONDS) among
    the candidates whose one-tile, one-group workspace fits the limit; then the group
    chunk and block size that fill the workspace."""
    return _tiling(problem, _workspace_limit(), _reference_parallelism())


@lru_cache(maxsize=256)
def _tiling(problem, limit: int, cores: int) -> Tiling:
    r = problem.rank
    per_point = problem.dtype.itemsize * (problem.in_channels_per_group
                                          + problem.out_channels_per_group)
    most = max(1, limit // max(1, per_point))
    axes = [_axis_candidates(problem, axis, most) for axis in range(r)]
    if any(not candidates for candidates in axes):
        raise ValueError(f"fft cannot run {problem.describe()}: {refusal(problem)}")
    lengths, outputs = candidate_grid(axes)
    contraction = _contraction(problem)
    chunk, block, per_group = _blocking(problem, lengths, outputs, limit)
    fits = per_group <= limit
    if not fits.any():
        raise ValueError(f"fft cannot run {problem.describe()}: {refusal(problem)}")
    counts = _counts(problem, lengths, outputs, chunk, block, contraction)
    s = TILE_CHOICE_SECONDS
    parallel = ((counts["forward_fft_flops"] + counts["inverse_fft_flops"]
                 + counts["weight_fft_flops"]) * s["fft_flops"]
                + counts["transform_points"] * s["transform_points"]
                + counts["spectrum_stream_bytes"] * s["spectrum_stream_bytes"]
                + counts["gemm_calls"] * s["gemm_call"]
                + counts["contraction_flops"] * (s["gemm_flops"] if contraction == "gemm"
                                                 else s["broadcast_flops"]))
    serial = (counts["copy_bytes"] * s["copy_bytes"] + counts["tiles"] * s["tile"]
              + counts["blocks"] * s["block"])
    seconds = np.where(fits, parallel / cores + serial, np.inf)
    best = int(np.argmin(seconds))
    fft_shape = tuple(int(v) for v in lengths[best])
    held = tuple(int(v) for v in outputs[best])
    tiles = tuple(-(-o // t) for o, t in zip(problem.output_shape, held))
    return Tiling(fft_shape, held, tiles, int(chunk[best]), int(block[best]), contraction,
                  int(per_group[best] * chunk[best] * block[best]))


def _blocking(problem, lengths, outputs, limit):
    """Per candidate (rows of ``lengths`` and ``outputs``): groups per chunk, (spatial
    tile, image) pairs per block, and one tile's workspace per group. All groups in one
    chunk and as many pairs as fill the workspace; when one tile of all groups does not
    fit, as many groups as do, one pair per block."""
    itemsize = problem.dtype.itemsize
    channels = problem.in_channels_per_group + problem.out_channels_per_group
    points = np.prod(lengths, axis=1)
    freqs = np.prod(lengths[:, :-1], axis=1) * (lengths[:, -1] // 2 + 1)
    per_group = itemsize * channels * (points + 2 * freqs)
    pairs = _ceil_div(np.asarray(problem.output_shape), outputs).prod(axis=1) * problem.batch
    groups = problem.groups
    whole = per_group * groups <= limit
    chunk = np.where(whole, groups, np.maximum(1, limit // per_group))
    block = np.where(whole, np.maximum(1, np.minimum(pairs, limit // (per_group * groups))), 1)
    return chunk, block, per_group


def _ceil_div(a, b):
    return -(-a // b)


def _counts(problem, lengths, outputs, chunk, block, contraction) -> dict[str, np.ndarray]:
    """What runs with the given tilings do (one row per tiling), in all: transform flops
    (2.5 N log2 N per real transform of N points), points the transforms pass over (one
    pass per axis), contraction flops, weight-spectrum bytes the contraction streams (all
    of it once per block), BLAS calls, the weights' transform flops, bytes gathered and
    cropped, tiles (a group chunk's copy of one spatial tile for the block's images) and
    blocks."""
    lengths = np.asarray(lengths, dtype=np.float64)
    r = problem.rank
    points = lengths.prod(axis=1)
    half = np.floor(lengths[:, -1] / 2) + 1
    freqs = lengths[:, :-1].prod(axis=1) * half
    spatial = _ceil_div(np.asarray(problem.output_shape), np.asarray(outputs)).prod(axis=1)
    pairs = spatial * problem.batch
    chunks = _ceil_div(problem.groups, chunk)
    blocks_per_chunk = _ceil_div(pairs, block)
    icg, ocg = problem.in_channels_per_group, problem.out_channels_per_group
    one = FFT_FLOPS_PER_POINT_LOG * points * np.log2(np.maximum(points, 2.0))
    itemsize = problem.dtype.itemsize
    spectrum_bytes = 2 * itemsize * freqs * problem.groups * icg * ocg
    # the weights' transform, axis by axis from the last, each pass over the lines the
    # previous ones made non-zero (the kernel folded onto the tile where it is longer)
    shape = np.minimum(np.asarray(stretched_kernel(problem), dtype=np.float64), lengths)
    weight = np.zeros(len(lengths))
    for axis in reversed(range(r)):
        lines = shape.prod(axis=1) / shape[:, axis]
        n = lengths[:, axis]
        weight += (lines * FFT_FLOPS_PER_POINT_LOG * n * np.log2(np.maximum(n, 2.0))
                   * (0.5 if axis == r - 1 else 1.0))
        shape[:, axis] = half if axis == r - 1 else n
    return {
        "forward_fft_flops": pairs * problem.in_channels * one,
        "inverse_fft_flops": pairs * problem.out_channels * one,
        "transform_points": pairs * (problem.in_channels + problem.out_channels) * points * r,
        "contraction_flops": pairs * freqs * COMPLEX_MAC_FLOPS * icg * ocg * problem.groups,
        "spectrum_stream_bytes": blocks_per_chunk * spectrum_bytes,
        # numpy.matmul calls the BLAS once per frequency and group, per block
        "gemm_calls": (blocks_per_chunk * freqs * problem.groups if contraction == "gemm"
                       else np.zeros(len(lengths))),
        "weight_fft_flops": weight * icg * problem.out_channels,
        "copy_bytes": itemsize * (pairs * points * problem.in_channels
                                  + problem.batch * problem.output_size * problem.out_channels),
        "tiles": spatial * chunks * _ceil_div(problem.batch, np.minimum(problem.batch, block)),
        "blocks": chunks * blocks_per_chunk,
    }


def work_counts(problem, t: Tiling) -> dict[str, float]:
    """:func:`_counts` of one tiling, as floats."""
    counts = _counts(problem, np.array([t.fft_shape]), np.array([t.tile_outputs]),
                     np.array([t.group_chunk]), np.array([t.block_tiles]), t.contraction)
    return {name: float(value[0]) for name, value in counts.items()}


# --------------------------------------------------------------------------- weights

class FFTWeights:
    """What ``prepare_weights`` hands to ``run``: the weights as (K..., G, ICg, OCg)
    (``by_tap``, a copy of the caller's), and the weight spectra computed so far, one per
    transform shape (at most MAX_KEPT_SPECTRA).

    A spectrum is (F, G, ICg, OCg) complex, conjugated and scaled by 1 / prod(L), so that
    the inverse transform needs no scaling."""

    __slots__ = ("problem", "by_tap", "_spectra", "_lock", "transforms", "one_call")

    def __init__(self, problem, by_tap: np.ndarray, one_call: bool = False):
        self.problem = problem
        self.by_tap = by_tap
        # a one-shot call's: its compiled spectra may live in a buffer the next call reuses
        self.one_call = one_call
        self._spectra: OrderedDict[tuple, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self.transforms = 0  # how many spectra were computed (for tests)

    def spectrum(self, fft_shape, threads: int) -> np.ndarray:
        key = tuple(fft_shape)
        return self._kept(key, lambda: weight_spectrum(self.problem, self.by_tap, key,
                                                       threads))

    def lane_spectrum(self, t: fft_compiled.LaneTiling, threads: int) -> np.ndarray:
        """The compiled pipeline's spectra for tiling ``t`` (kept like the others)."""
        return self._kept(("compiled", t.mode, t.fft_shape, t.lanes),
                          lambda: fft_compiled.spectra(self.problem, self.canonical, t,
                                                       threads, keep=not self.one_call))

    def _kept(self, key: tuple, compute) -> np.ndarray:
        """The spectrum kept under ``key``, else ``compute()``'s, kept (the latest
        MAX_KEPT_SPECTRA)."""
        with self._lock:
            found = self._spectra.get(key)
            if found is not None:
                self._spectra.move_to_end(key)
                return found
            spectrum = compute()
            self._spectra[key] = spectrum
            self.transforms += 1
            while len(self._spectra) > MAX_KEPT_SPECTRA:
                self._spectra.popitem(last=False)
            return spectrum

    @property
    def canonical(self) -> np.ndarray:
        """The weights as (G, K..., ICg, OCg) (a view), for the exact recomputation."""
        return np.moveaxis(self.by_tap, self.problem.rank, 0)


def weight_spectrum(problem, by_tap: np.ndarray, fft_shape, threads: int) -> np.ndarray:
    """conj(rfftn(stretched weights, fft_shape)) / prod(fft_shape) as (F, G, ICg, OCg).

    The filters are cut into chunks of about WEIGHT_TASK_BYTES (along G, or along OCg for
    one group), each transformed whole on one thread (:func:`_chunk_spectrum`), the chunks
    shared by the threads: the chunk's buffers stay in cache, and the backend's own
    threads split one call's lines poorly (a 240-line, 1200-point inverse: 1.14-1.26x
    faster on two threads than on one, where two threads on separate chunks ran 1.85x).
    The chunks depend on the problem only, so the result does not depend on ``threads``."""
    r = problem.rank
    filters = (problem.groups, problem.in_channels_per_group, problem.out_channels_per_group)
    complex_dtype = np.result_type(problem.dtype, np.complex64)
    spectrum = np.empty((*fft_shape[:-1], fft_shape[-1] // 2 + 1, *filters),
                        dtype=complex_dtype)
    split_axis = r if problem.groups > 1 else r + 2
    count = spectrum.shape[split_axis]
    per_filter = (math.prod(fft_shape) * problem.dtype.itemsize
                  + math.prod(spectrum_shape(fft_shape)) * complex_dtype.itemsize)
    per_slice = per_filter * math.prod(filters) // count
    # about WEIGHT_TASK_BYTES a chunk, and chunks enough for every core of the machine (not
    # of the call: the chunks must not depend on ``threads``); but at least
    # WEIGHT_TASK_MIN_FILTERS adjacent filters, or a chunk's writes into the spectrum land
    # a cache line apart (depthwise: one filter per group)
    step = max(-(-WEIGHT_TASK_MIN_FILTERS * count // math.prod(filters)),
               min(max(1, WEIGHT_TASK_BYTES // per_slice),
                   -(-count // (WEIGHT_TASKS_PER_CORE * _reference_parallelism()))))

    def work(lo, hi):
        part = (slice(None),) * split_axis + (slice(lo, hi),)
        _chunk_spectrum(problem, by_tap[part], fft_shape, spectrum[part])

    chunks = [(lo, min(count, lo + step)) for lo in range(0, count, step)]
    fft_transforms.run_parallel(work, chunks, threads)
    return spectrum.reshape(math.prod(spectrum_shape(fft_shape)), *filters)


def _chunk_spectrum(problem, by_tap: np.ndarray, fft_shape, out: np.ndarray) -> None:
    """``out`` (F..., filters...) = the scaled, conjugated spectrum of ``by_tap`` (K...,
    filters...), on one thread.

    The weights are scaled first (a small array), taps further apart than L along an axis
    folded onto each other (the circular correlation's kernel, for whole-axis tiles
    shorter than the kernel), the last axis reversed: its real transform is then the
    conjugate one, and the other axes take the unscaled inverse transform, which
    conjugates too. Each axis transforms only the lines the axes before it made non-zero."""
    r = problem.rank
    filters = by_tap.shape[r:]
    stretched = by_tap
    if any(d != 1 for d in problem.dilations):
        stretched = np.zeros((*stretched_kernel(problem), *filters), dtype=problem.dtype)
        stretched[tuple(slice(None, None, d) for d in problem.dilations)] = by_tap
    for axis, length in enumerate(fft_shape):
        extent = stretched.shape[axis]
        if extent > length:  # fold taps L apart onto each other
            laps = -(-extent // length)
            padded = np.zeros((*stretched.shape[:axis], laps * length,
                               *stretched.shape[axis + 1:]), dtype=problem.dtype)
            padded[(slice(None),) * axis + (slice(0, extent),)] = stretched
            stretched = padded.reshape(*stretched.shape[:axis], laps, length,
                                       *stretched.shape[axis + 1:]).sum(axis=axis)
            del padded
    last = r - 1
    scale = 1.0 / math.prod(fft_shape)
    reversed_last = np.zeros((*stretched.shape[:last], fft_shape[last], *filters),
                             dtype=problem.dtype)
    taps = stretched.shape[last]
    # tap j goes to position (-j) mod L, scaled on the way
    lead = (slice(None),) * last
    np.multiply(stretched[lead + (slice(0, 1),)], scale,
                out=reversed_last[lead + (slice(0, 1),)])
    if taps > 1:
        np.multiply(stretched[lead + (slice(taps - 1, 0, -1),)], scale,
                    out=reversed_last[lead + (slice(fft_shape[last] - taps + 1, None),)])
    box = tuple(slice(0, n) for n in stretched.shape[:last])
    del stretched
    fft_transforms.r2c(reversed_last, last, out[box], 1)
    del reversed_last
    transform_leading_axes(out, box, False, 1)


def prepare_weights(problem, weights) -> FFTWeights:
    """Copy the canonical weights (a view, ``weight_views``) as (K..., G, ICg, OCg). The
    spectra wait for the first run, which knows the tile shape and thread count."""
    # a copy even where the view is contiguous: a plan must not see later edits
    return FFTWeights(problem, np.array(_by_tap(problem, weights), order="C", copy=True))


def weights_for_one_call(problem, weights) -> FFTWeights:
    """``prepare_weights`` without the copy: a one-shot call's weights stay unchanged
    while it runs (on wav2vec 2.0's 19 MB the copy took 7.5 ms)."""
    return FFTWeights(problem, _by_tap(problem, weights), one_call=True)


def _by_tap(problem, weights) -> np.ndarray:
    """The canonical (G, K..., ICg, OCg) weights as a (K..., G, ICg, OCg) view."""
    return np.moveaxis(np.asarray(weights, dtype=problem.dtype), 0, problem.rank)


# --------------------------------------------------------------------------- tiles

@dataclass(frozen=True)
class AxisTile:
    """One tile along one axis: the source range it reads and where that lands in the
    buffer, and the outputs it writes."""

    src: slice
    buffer: slice
    out: slice
    count: int


def axis_tiles(problem, t: Tiling, axis: int) -> list[AxisTile]:
    """The tiles along ``axis`` that read some of src (a tile wholly in the padding
    writes outputs whose every tap is padding: those are set to the bias)."""
    extent = problem.input_shape[axis]
    stride, begin = problem.strides[axis], problem.pads_begin[axis]
    length, held = t.fft_shape[axis], t.tile_outputs[axis]
    found = []
    for index in range(t.tiles_per_axis[axis]):
        first = index * held
        count = min(held, problem.output_shape[axis] - first)
        start = first * stride - begin  # src position of buffer position 0
        # only what the kept outputs read: more could alias in a tile shorter than that
        needed = (count - 1) * stride + stretched_kernel(problem)[axis]
        lo, hi = max(start, 0), min(start + needed, extent)
        assert hi - start <= length, (hi, start, length)
        if lo >= hi:
            continue
        found.append(AxisTile(slice(lo, hi), slice(lo - start, hi - start),
                              slice(first, first + count), count))
    return found


def blocks(problem, t: Tiling):
    """Lists of (spatial tile, first image, images, first buffer row) segments, each list
    at most ``t.block_tiles`` (spatial tile, image) pairs."""
    per_axis = [axis_tiles(problem, t, axis) for axis in range(problem.rank)]
    block, used = [], 0
    for spatial in product(*per_axis):
        image = 0
        while image < problem.batch:
            take = min(problem.batch - image, t.block_tiles - used)
            block.append((spatial, image, take, used))
            used += take
            image += take
            if used == t.block_tiles:
                yield block
                block, used = [], 0
    if block:
        yield block


def padding_only(problem) -> list[np.ndarray]:
    """Per axis, the output positions whose every tap on that axis lies in the padding."""
    masks = []
    for axis in range(problem.rank):
        o = np.arange(problem.output_shape[axis], dtype=np.int64)
        stride, dilation = problem.strides[axis], problem.dilations[axis]
        first = o * stride - problem.pads_begin[axis]
        # the first tap at or after src position 0
        k = np.maximum(0, -(first // dilation))
        reads = (k < problem.kernel_shape[axis]) & (first + k * dilation
                                                    < problem.input_shape[axis])
        masks.append(~reads)
    return masks


def _fill_padding_only(problem, dst, bias) -> None:
    value = 0 if bias is None else bias
    for axis, where in _padding_only_positions(problem):
        dst[(slice(None),) * (1 + axis) + (where,)] = value


@lru_cache(maxsize=256)
def _padding_only_positions(problem) -> tuple[tuple[int, np.ndarray], ...]:
    """(axis, the positions of :func:`padding_only`) for the axes that have any (most
    problems have none: a call then skips the masks' few tens of microseconds)."""
    found = []
    for axis, mask in enumerate(padding_only(problem)):
        where = np.flatnonzero(mask)
        if where.size:
            where.setflags(write=False)
            found.append((axis, where))
    return tuple(found)


# --------------------------------------------------------------------------- contraction

def frequency_chunks(freqs: int, per_frequency_bytes: int) -> list[tuple[int, int]]:
    """Frequency ranges of about CHUNK_BYTES each (independent of the thread count)."""
    size = max(1, CHUNK_BYTES // max(1, per_frequency_bytes))
    return [(f, min(freqs, f + size)) for f in range(0, freqs, size)]


def contract(x: np.ndarray, w: np.ndarray, y: np.ndarray, groups: int, contraction: str,
             threads: int) -> None:
    """y[f, b, g*OCg + o] = sum_i x[f, b, g*ICg + i] * w[f, g, i, o] for a chunk of groups.

    ``x`` (F, B, gc*ICg), ``w`` (F, gc, ICg, OCg) and ``y`` (F, B, gc*OCg), complex."""
    freqs, rows = x.shape[0], x.shape[1]
    icg, ocg = w.shape[2], w.shape[3]
    per_frequency = x.itemsize * (rows * groups * (icg + ocg) + groups * icg * ocg)
    chunks = frequency_chunks(freqs, per_frequency)
    if contraction == "broadcast":
        x4 = x.reshape(freqs, rows, groups, icg)
        y4 = y.reshape(freqs, rows, groups, ocg)

        def work(lo, hi):
            out = y4[lo:hi]
            np.multiply(x4[lo:hi, :, :, 0:1], w[lo:hi, None, :, 0, :], out=out)
            for i in range(1, icg):
                out += x4[lo:hi, :, :, i:i + 1] * w[lo:hi, None, :, i, :]

        fft_transforms.run_parallel(work, chunks, threads)
        return

    def work(lo, hi):
        for g in range(groups):
            np.matmul(x[lo:hi, :, g * icg:(g + 1) * icg], w[lo:hi, g],
                      out=y[lo:hi, :, g * ocg:(g + 1) * ocg])

    with blas_limit(1):
        fft_transforms.run_parallel(work, chunks, threads)


# --------------------------------------------------------------------------- run

last_run: dict[str, Any] = {}
"""What the latest call did: tiling, blocks, whether it fell back (for tests, explain)."""


def _supports(problem) -> str | None:
    if problem.dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
        return f"dtype {problem.dtype}: fft computes float32 and float64"
    return refusal(problem)


def _exact_fallback(problem):
    return get_algorithm("direct" if problem.rank <= 3 else "im2col")


def run_prepared(problem, src, prepared: FFTWeights, bias, dst, threads) -> str:
    """Compute ``dst``; returns "fft", or the exact algorithm that recomputed a result
    holding Inf or NaN."""
    compiled = fft_compiled.tiling(problem, weights_per_call=prepared.one_call)
    if compiled is not None:
        if compiled.weight_chunks:
            finite = fft_compiled.run_one_shot(problem, src, prepared.canonical, bias, dst,
                                               threads, compiled)
        else:
            spectrum = prepared.lane_spectrum(compiled, threads)
            finite = fft_compiled.run(problem, src, spectrum, bias, dst, threads, compiled)
        info = dict(compiled.describe(), fallback=None, backend="fft_lanes")
    else:
        t = tiling(problem)
        spectrum = prepared.spectrum(t.fft_shape, threads)
        # Inf and NaN spread over whole tiles, with warnings; a result holding them is
        # recomputed exactly below
        with np.errstate(invalid="ignore", over="ignore"):
            block_count = _run_blocks(problem, src, spectrum, bias, dst, threads, t)
        info = dict(t.describe(), blocks=block_count, fallback=None,
                    backend=fft_transforms.BACKEND)
        finite = _all_finite(dst)
    # the compiled pipeline checked every value as it wrote it; the fill writes the bias
    # (finite where those values were) or zero
    _fill_padding_only(problem, dst, bias)
    if not finite:
        exact = _exact_fallback(problem)
        canonical = np.ascontiguousarray(prepared.canonical)
        exact.run(problem, src, exact.prepare_weights(problem, canonical), bias, dst, threads)
        info["fallback"] = exact.name
    last_run.clear()
    last_run.update(info)
    return info["fallback"] or "fft"


# Elements per slice of the finiteness check: its boolean temporary stays small.
FINITE_CHECK_ELEMENTS = 1 << 20


def _all_finite(dst: np.ndarray) -> bool:
    flat = dst.reshape(-1)
    return all(np.isfinite(flat[i:i + FINITE_CHECK_ELEMENTS]).all()
               for i in range(0, flat.size, FINITE_CHECK_ELEMENTS))


def _block_buffers(t: Tiling, rows: int, in_channels: int, out_channels: int, dtype,
                   complex_dtype) -> tuple[np.ndarray, ...]:
    """A block's four buffers, carved from the buffer im2col keeps per thread between
    calls (together ``tile_bytes_per_group`` per group and row, within
    ``t.workspace_bytes``): input tiles (L..., rows, IC of the chunk) and their spectrum
    (F..., rows, IC), the output spectrum (F..., rows, OC) and output tiles (L..., rows,
    OC).

    Fresh buffers cost a page fault per 4 KiB page on every call (im2col's ``_cache``
    says how much in this VM); on RepLKNet's 31x31 stage 1 reused ones took the input
    gather, transforms, product and inverse from 15 ms to 6.5 ms (thread time, one core).
    """
    dtype, complex_dtype = np.dtype(dtype), np.dtype(complex_dtype)
    shapes = (((*t.fft_shape, rows, in_channels), dtype),
              ((*t.spectrum_shape, rows, in_channels), complex_dtype),
              ((*t.spectrum_shape, rows, out_channels), complex_dtype),
              ((*t.fft_shape, rows, out_channels), dtype))
    offsets, total = [], 0
    for shape, kind in shapes:
        offsets.append(total)
        total += -(-math.prod(shape) * kind.itemsize // WORKSPACE_ALIGN) * WORKSPACE_ALIGN
    raw = im2col.thread_workspace(total, np.dtype(np.uint8))
    return tuple(raw[start:start + math.prod(shape) * kind.itemsize].view(kind).reshape(shape)
                 for start, (shape, kind) in zip(offsets, shapes))


def _run_blocks(problem, src, spectrum, bias, dst, threads, t: Tiling) -> int:
    """The tiles' transforms, contraction, inverse transforms and crops into ``dst``, block
    by block for each chunk of groups; returns the number of blocks.

    Where the contraction is the broadcast product and there are several groups, the
    groups are independent from the gather to the crop: each (block, slice of groups) is a
    task that runs the whole pipeline on one thread (:func:`_group_tasks`), the tasks
    shared by the threads. Otherwise each block runs its stages one after the other, each
    stage on all threads.
    """
    block_list = list(blocks(problem, t))
    split = _group_tasks(problem, t, len(block_list), threads)
    if split is not None:
        tasks, concurrent = split

        def work(b, g0, g1):
            _block_pipeline(problem, src, block_list[b], g0, g1, spectrum, bias, dst, t, 1)

        fft_transforms.run_parallel(work, tasks, concurrent)
        return len(block_list) * -(-problem.groups // t.group_chunk)
    block_count = 0
    for g0 in range(0, problem.groups, t.group_chunk):
        g1 = min(problem.groups, g0 + t.group_chunk)
        for block in block_list:
            block_count += 1
            _block_pipeline(problem, src, block, g0, g1, spectrum, bias, dst, t, threads)
    return block_count


# A group task's four buffers (input tiles and their spectrum, output spectrum and tiles)
# take at most this many bytes (when one group fits) and the groups are cut into at least
# GROUP_TASKS_MIN tasks where there are enough: tasks of ~0.5 MiB cost 10-20% more thread
# time than one pass over all groups on 3-D UX-Net's 12^3 and 6^3 stages (Python and
# SciPy's overhead per call, ~0.1 ms a task), while RepLKNet's 56x56 stage gained 20%
# (thread time, one core, AMD EPYC, load ~7).
GROUP_TASK_BYTES = 2 * 2**20
GROUP_TASKS_MIN = 4
# Fewer groups per task than this run on all threads stage by stage instead: 3-D UX-Net's
# 24^3 stage (27^3 tiles, 6 groups a task) took 1.06-1.14x the thread time and 1.06x the
# 2-thread time of the stage path (medians of 9-11 interleaved runs, load ~6); the
# transforms then batch few lines and the spectrum slices are narrower than a cache line.
GROUP_TASK_MIN_GROUPS = 8


def _group_tasks(problem, t: Tiling, block_count: int, threads: int):
    """(block, first group, end group) tasks and how many may run at once, or None where
    the stages should run one after the other on all threads instead: a contraction that
    mixes channels (GEMM), one group, or tiles so large that one group's buffers exceed
    GROUP_TASK_BYTES (one channel per transform then lost to transforms of a few channels
    on all threads: 3-D UX-Net's 48^3 stage, 54^3 tiles, ~0.75x) or that fewer tasks than
    the machine's cores fit the workspace at once. (Tasks of slices of one group's
    outputs, tried on banks of 1-D filters, one input channel and 80 outputs, took
    1.2-1.6x the stages' time at one and at two threads: SincNet, LEAF, AMD EPYC.)

    The split depends only on the problem, the tiling and the machine, so the results do
    not depend on ``threads``."""
    if t.contraction != "broadcast" or problem.groups == 1:
        return None
    rows = min(t.block_tiles, problem.batch * t.spatial_tiles)
    per_group = tile_bytes_per_group(problem, t.fft_shape) * rows
    if per_group > GROUP_TASK_BYTES:
        return None
    task_groups = max(1, min(t.group_chunk, -(-problem.groups // GROUP_TASKS_MIN),
                             GROUP_TASK_BYTES // per_group))
    if task_groups < GROUP_TASK_MIN_GROUPS:
        return None
    tasks = [(b, g0, min(problem.groups, g0 + task_groups))
             for g0 in range(0, problem.groups, task_groups) for b in range(block_count)]
    fit = t.workspace_bytes // (per_group * task_groups)
    # whether to split at all is decided for the machine's cores, not the call's threads:
    # the two paths batch the transforms differently, and the result must not depend on
    # the thread count
    if fit < min(_reference_parallelism(), len(tasks)):
        return None
    return tasks, max(1, min(threads, len(tasks), fit))


def _block_pipeline(problem, src, block, g0: int, g1: int, spectrum, bias, dst, t: Tiling,
                    threads: int) -> None:
    """One block of tiles for groups [g0, g1): gather, transform, contract, inverse
    transform, crop into ``dst`` (plus the bias)."""
    r = problem.rank
    icg, ocg = problem.in_channels_per_group, problem.out_channels_per_group
    freqs = math.prod(t.spectrum_shape)
    complex_dtype = np.result_type(problem.dtype, np.complex64)
    steps = tuple(slice(None, None, s) for s in problem.strides)
    ic0, ic1 = g0 * icg, g1 * icg
    oc0, oc1 = g0 * ocg, g1 * ocg
    chunk_bias = None if bias is None else bias[oc0:oc1]
    rows = sum(take for _, _, take, _ in block)
    tiles_in, x, y, out = _block_buffers(t, rows, ic1 - ic0, oc1 - oc0, problem.dtype,
                                         complex_dtype)
    columns = list(zip(*(axes for axes, _, _, _ in block)))  # the block's tiles, per axis
    # per axis, the buffer positions some tile of the block reads src into
    occupied = [(min(a.buffer.start for a in column), max(a.buffer.stop for a in column))
                for column in columns]
    box = tuple(slice(lo, hi) for lo, hi in occupied[:-1])
    tiles_in[box] = 0
    for axes, image, take, row in block:
        window = src[(slice(image, image + take), *(a.src for a in axes), slice(ic0, ic1))]
        target = tiles_in[(*(a.buffer for a in axes), slice(row, row + take))]
        np.copyto(target, np.moveaxis(window, 0, r))
    forward_transform(tiles_in, x, box, threads)
    contract(x.reshape(freqs, rows, ic1 - ic0), spectrum[:, g0:g1],
             y.reshape(freqs, rows, oc1 - oc0), g1 - g0, t.contraction, threads)
    # per axis, the positions the crop keeps
    kept_extent = [max((a.count - 1) * s + 1 for a in column)
                   for column, s in zip(columns, problem.strides)]
    inverse_transform(y, out, kept_extent, threads)
    for axes, image, take, row in block:
        kept = out[(*(slice(0, (a.count - 1) * s + 1) for a, s in zip(axes, problem.strides)),
                    slice(row, row + take))][steps]
        target = dst[(slice(image, image + take), *(a.out for a in axes), slice(oc0, oc1))]
        kept = np.moveaxis(kept, r, 0)
        if chunk_bias is None:
            np.copyto(target, kept)
        else:
            np.add(kept, chunk_bias, out=target)


def forward_transform(tiles: np.ndarray, spectrum: np.ndarray, box: tuple, threads: int):
    """``spectrum`` = rfftn of ``tiles`` over the leading spatial axes, where ``tiles`` is
    zero outside ``box`` on the axes before the last (a slice per axis).

    The last axis is transformed first, on the lines in the box only; each earlier axis
    then on the lines the passes before it made non-zero, the rest of ``spectrum`` set to
    zero. A 14x14 image in a 27x27 tile skips half the first pass's lines."""
    fft_transforms.r2c(tiles[box], len(box), spectrum[box], threads)
    transform_leading_axes(spectrum, box, True, threads)


def transform_leading_axes(spectrum: np.ndarray, box: tuple, forward: bool,
                           threads: int) -> None:
    """The unscaled complex transform of ``spectrum``, in place, over the axes before
    ``len(box)`` (the last spatial one, already transformed), where only ``box`` (a
    slice per axis) holds data: each axis from the last on the lines the passes before it
    made non-zero, what lies outside the box on it set to zero first."""
    for axis in range(len(box) - 1, -1, -1):
        lead = box[:axis]
        lo, hi = box[axis].start, box[axis].stop
        if lo > 0:
            spectrum[(*lead, slice(0, lo))] = 0
        if hi < spectrum.shape[axis]:
            spectrum[(*lead, slice(hi, None))] = 0
        view = spectrum[lead]
        fft_transforms.c2c(view, axis, forward, view, threads)


def inverse_transform(spectrum: np.ndarray, tiles: np.ndarray, kept: list[int],
                      threads: int) -> None:
    """``tiles[:kept...]`` = the unscaled irfftn of ``spectrum`` over the leading spatial
    axes, at the positions [0, kept) of each axis before the last (``spectrum`` is
    overwritten). Each axis from the first transforms only the lines whose positions on
    the axes before it are kept; the last axis comes out whole."""
    r = len(kept)
    for axis in range(r - 1):
        view = spectrum[tuple(slice(0, k) for k in kept[:axis])]
        fft_transforms.c2c(view, axis, False, view, threads)
    lead = tuple(slice(0, k) for k in kept[:-1])
    fft_transforms.c2r(spectrum[lead], r - 1, tiles.shape[r - 1], tiles[lead], threads)


# --------------------------------------------------------------------------- cost

def cost_terms(problem, threads) -> tuple:
    """The work of one ``convolve`` call, as :mod:`convlab.dispatch.cost_model` terms, and
    details for ``explain``. Transforms and the contraction run on ``threads`` threads; the
    gathers, crops and per-block calls on one, except where group tasks share them out
    (:func:`_group_tasks`): then the copies, tiles and tasks (counted as blocks) are
    divided among the threads too."""
    compiled = fft_compiled.tiling(problem)
    if compiled is not None:
        return _compiled_cost_terms(problem, threads, compiled)
    t = tiling(problem)
    counts = work_counts(problem, t)
    gemm = t.contraction == "gemm"
    blocks_per_chunk = -(-problem.batch * t.spatial_tiles // t.block_tiles)
    split = _group_tasks(problem, t, blocks_per_chunk, threads)
    serial = 1.0
    if split is not None:
        tasks, concurrent = split
        serial = float(concurrent)
        counts["blocks"] = float(len(tasks))
    terms = {
        **cost_model.FIXED_TERMS,
        "forward_fft_flops": counts["forward_fft_flops"] / threads,
        "inverse_fft_flops": counts["inverse_fft_flops"] / threads,
        "transform_points": counts["transform_points"] / threads,
        "gemm_flops": counts["contraction_flops"] / threads if gemm else 0.0,
        "broadcast_flops": 0.0 if gemm else counts["contraction_flops"] / threads,
        "spectrum_stream_bytes": counts["spectrum_stream_bytes"] / threads,
        "gemm_calls": counts["gemm_calls"] / threads,
        "copy_bytes": counts["copy_bytes"] / serial,
        "tiles": counts["tiles"] / serial,
        "blocks": counts["blocks"] / serial,
        # a plan transforms its weights once (cost_model.PREPARATION_TERMS)
        "weight_transform_flops": counts["weight_fft_flops"] / threads,
        **dict.fromkeys(COMPILED_TERMS, 0.0),
    }
    details = dict(t.describe(), threads=threads, group_tasks=0 if split is None
                   else len(split[0]), float32_relative_error=relative_error(problem),
                   transforms=fft_transforms.BACKEND)
    return terms, details


# The compiled pipeline's terms (fft_compiled.work_counts); zero on the Python pipeline's
# problems, as the Python pipeline's terms are on the compiled one's.
COMPILED_TERMS = ("lane_transform_flops", "lane_points", "lane_tasks",
                  "lane_weight_transform_flops")


def _compiled_cost_terms(problem, threads, t: fft_compiled.LaneTiling) -> tuple:
    """The compiled pipeline's work, shared by at most as many threads as it has tasks."""
    counts = fft_compiled.work_counts(problem, t)
    share = float(max(1, min(threads, counts["lane_tasks"])))
    weight_share = float(max(1, min(threads, fft_compiled.weight_tasks(problem, t))))
    terms = dict.fromkeys(PYTHON_TERMS, 0.0)
    terms.update(cost_model.FIXED_TERMS,
                 lane_transform_flops=counts["lane_transform_flops"] / share,
                 lane_points=counts["lane_points"] / share,
                 lane_tasks=counts["lane_tasks"] / share,
                 # a plan transforms its weights once (cost_model.PREPARATION_TERMS)
                 lane_weight_transform_flops=counts["lane_weight_transform_flops"]
                 / weight_share)
    details = dict(t.describe(), threads=threads,
                   float32_relative_error=relative_error(problem))
    return terms, details


# The Python pipeline's terms (cost_terms), zero on the compiled pipeline's problems.
PYTHON_TERMS = ("forward_fft_flops", "inverse_fft_flops", "transform_points", "gemm_flops",
                "broadcast_flops", "spectrum_stream_bytes", "gemm_calls", "copy_bytes",
                "tiles", "blocks", "weight_transform_flops")


def _cost(problem, threads):
    return cost_model.estimate("fft", threads, *cost_terms(problem, threads))


def relative_error(problem) -> float:
    by_rank = MEASURED_RELATIVE_ERROR_BY_RANK
    return by_rank.get(problem.rank, max(by_rank.values()))


@register_algorithm("fft", supports=_supports, cost=_cost, prepare_weights=prepare_weights,
                    prepare_once=weights_for_one_call,
                    relative_error=relative_error, weight_views=True, auto=auto_contender,
                    description="transforms of overlap-save tiles x complex GEMM over "
                                "channels (compiled for one input channel per group); any "
                                "rank, all attributes (strides decimate)")
def run_fft(problem, src, weights, bias, dst, threads):
    if not isinstance(weights, FFTWeights):
        weights = weights_for_one_call(problem, weights)
    run_prepared(problem, src, weights, bias, dst, threads)
