"""``direct``: the Cython/OpenMP direct kernel on canonical NXC layouts.

The kernel is written for three spatial axes; 1-D and 2-D problems are lifted
to 3-D by adding unit axes (free reshapes, no copies). A pointwise problem
(every K_i == 1, stride 1, no pads) is passed as one image of N * prod(I) pixels,
and other 1-D and 2-D batches as one image whose depth slices are the batch entries, so
the kernel's runs of pixels also span batch entries.

``prepare_weights`` repacks the canonical (G, K..., IC/G, OC/G) weights for the
microkernels (see ``convlab/strategies/kernels/_direct.pyx``): the channel axis the kernel
vectorises over is zero-padded to 64 bytes, and depthwise weights become (K..., C)
so that consecutive channels sit next to each other, as they do in NXC src. A plan's dense
weights are further blocked by the kernel's chunks of output channels (``_blocked``), so
that each work item streams one contiguous run of them.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from convlab.dispatch import cost_model
from convlab.dispatch.registry import register_algorithm
from convlab.runtime import _buffers as buffers, cpu
from convlab.strategies.kernels import _direct, specialized

KERNEL_RANK = 3
# 1-D and 2-D batches run as the depth slices of one image, so that a run of pixels (and a
# register block of them) spans images: the tail block of each small image no longer runs
# short, and each pass's weights are copied once per run rather than once per image. On
# an AMD EPYC (Zen 4), direct at batch 8, 2 threads, time with / without (python
# bench/ab_constant.py convlab.strategies.direct BATCH_AS_DEPTH False True --algorithm
# direct --mb 8 ...; bench/results/batch_as_depth_2026-11-25_epyc-zen4.txt): res5a_branch1 0.90,
# res5a_branch2b 0.93, res4a_branch1 0.97, the other ResNet-50 layers 0.995-1.01. A
# switch so that the experiment can be repeated.
BATCH_AS_DEPTH = True

def lift(shape, rank):
    """Insert unit spatial axes after the leading axis so rank becomes KERNEL_RANK."""
    return shape[:1] + (1,) * (KERNEL_RANK - rank) + shape[1:]


def lift_spatial(values, rank, fill):
    return (fill,) * (KERNEL_RANK - rank) + tuple(values)


def is_depthwise(problem) -> bool:
    """One input and one output channel per group: the channel-vectorised kernel."""
    return (problem.groups > 1 and problem.in_channels_per_group == 1
            and problem.out_channels_per_group == 1)


def is_pointwise_flat(problem) -> bool:
    """K_i == 1, S_i == 1 and no pads: output pixel p reads input pixel p only."""
    # max/any rather than generator expressions: this runs on every call.
    return (max(problem.kernel_shape) == 1 and max(problem.strides) == 1
            and not any(problem.pads_begin) and not any(problem.pads_end))


@dataclass(frozen=True)
class PreparedWeights:
    """Weights in the microkernel layout.

    ``depthwise`` False: (G, KD, KH, KW, ICg, OCgp); True: (KD, KH, KW, Cp). The spatial
    axes are already lifted to three. ``blocks``, when not None: the dense array holds the
    same values blocked by the chunks of output channels the kernel cuts at one level
    (see _blocked), under the same shape: (that level, lanes per vector, vectors per
    chunk), as ``_direct.dense_chunks`` gave them.
    """

    depthwise: bool
    array: np.ndarray
    blocks: tuple[int, int, tuple[int, ...]] | None = None

    @property
    def zero_bias(self) -> np.ndarray:
        """The bias the kernel reads when there is none (shared and read-only)."""
        shape = self.array.shape[-1:] if self.depthwise else (self.array.shape[0],
                                                              self.array.shape[-1])
        return _zeros(shape, self.array.dtype)


@functools.lru_cache(maxsize=64)
def _zeros(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """A read-only array of zeros, made once per shape: one-shot calls on small layers
    spent a microsecond or two allocating a fresh one."""
    zeros = np.zeros(shape, dtype=dtype)
    zeros.flags.writeable = False
    return zeros


@functools.lru_cache(maxsize=256)
def _weight_layout(problem) -> tuple[tuple[int, ...], int, bool, bool]:
    """The kernel shape lifted to three axes, the padded channel count, whether the
    problem is depthwise, and whether its dense weights need no packing (whole vectors of
    output channels): worked out once per problem, as they are on every one-shot call."""
    kernel = lift_spatial(problem.kernel_shape, problem.rank, 1)
    itemsize = problem.dtype.itemsize
    if is_depthwise(problem):
        return kernel, _direct.depthwise_padded_channels(problem.groups, itemsize), True, False
    ocg = problem.out_channels_per_group
    padded = _direct.padded_channels(ocg, itemsize)
    return kernel, padded, False, padded == ocg


def _reuses_weights(problem) -> bool:
    """Dense weights whose OC/G fills whole vectors need no packing (prepare_weights)."""
    return _weight_layout(problem)[3]


def _chunk_columns(lanes: int, chunks: tuple[int, ...]):
    """Per chunk of ``chunks`` vectors of ``lanes`` channels: its first channel and width."""
    start = 0
    for vectors in chunks:
        yield start, vectors * lanes
        start += vectors * lanes


def _blocked(packed: np.ndarray, lanes: int, chunks: tuple[int, ...]) -> np.ndarray:
    """Packed (G, KD, KH, KW, ICg, OCgp) weights laid out chunk by chunk: each chunk's
    (tap, input channel) rows of its vectors * lanes channels together, chunks in order
    (cl_geom.blocked), under the same shape. Each work item then streams one contiguous
    run of weights."""
    groups, padded = packed.shape[0], packed.shape[-1]
    rows = packed.reshape(groups, -1, padded)
    count = rows.shape[1]
    # on a cache line, as the kernel's 64-byte vectors need (see buffers.aligned_empty)
    out = buffers.aligned_empty((groups, count * padded), packed.dtype)
    out[:, count * lanes * sum(chunks):] = 0  # vectors past OCg, never read
    for start, width in _chunk_columns(lanes, chunks):
        out[:, start * count:(start + width) * count] = \
            rows[:, :, start:start + width].reshape(groups, -1)
    return out.reshape(packed.shape)


def _unblocked(prepared: PreparedWeights) -> np.ndarray:
    """The packed layout of blocked weights, for a call at another level than the one
    they were blocked for (the instruction-set cap changed since)."""
    assert prepared.blocks is not None
    _, lanes, chunks = prepared.blocks
    packed = prepared.array
    groups, padded = packed.shape[0], packed.shape[-1]
    count = math.prod(packed.shape[1:-1])
    blocked = packed.reshape(groups, -1)
    out = np.zeros((groups, count, padded), dtype=packed.dtype)
    for start, width in _chunk_columns(lanes, chunks):
        out[:, :, start:start + width] = \
            blocked[:, start * count:(start + width) * count].reshape(groups, count, width)
    return out.reshape(packed.shape)


def _blocks(problem, packed: np.ndarray) -> PreparedWeights:
    """Plan weights, blocked where the kernel cuts several chunks of a large group."""
    blocks = _direct.dense_chunks(problem.out_channels_per_group, problem.dtype.itemsize)
    if len(blocks[2]) < 2 or packed.nbytes // problem.groups <= BLOCKED_MIN_BYTES:
        return PreparedWeights(False, packed)
    return PreparedWeights(False, _blocked(packed, *blocks[1:]), blocks=blocks)


def prepare_weights(problem, weights, one_shot: bool = False) -> PreparedWeights:
    """Repack canonical (G, K..., ICg, OCg) weights (a view is fine) for the microkernels.

    ``one_shot``: for one call only, so dense weights already in the kernel's layout up to
    the strides (a grouped view of XIO weights) are read in place rather than copied."""
    kernel, padded, depthwise, reuses = _weight_layout(problem)
    g, icg, ocg = problem.groups, problem.in_channels_per_group, problem.out_channels_per_group
    if depthwise:
        # (taps, channels): XIO weights already lie so, and the canonical (G, taps) is a
        # transposed view of them; then whole vectors of channels need no copy at all.
        by_tap = np.asarray(weights, dtype=problem.dtype).reshape(g, -1).T
        if padded == g and by_tap.flags.c_contiguous:
            return PreparedWeights(True, by_tap.reshape(*kernel, padded))
        packed = specialized(_direct.pack_depthwise, by_tap.dtype)(by_tap, padded)
        return PreparedWeights(True, packed.reshape(*kernel, padded))
    if reuses:
        # Already in the kernel's layout (the canonical one, whole vectors of channels):
        # a one-shot call then skips copying the weights, which on weight-heavy layers
        # costs about as much as a tenth of the convolution. Beyond CACHED_WEIGHT_BYTES the
        # copy pays: a strided view spreads each group's rows over the pages and cache sets
        # of the whole array, and wav2vec 2.0's positional convolution (16 groups, 19 MB)
        # ran 47-63 ms in place against 25 ms copied (2 threads, Intel Xeon family 6
        # model 207).
        weights = np.asarray(weights, dtype=problem.dtype).reshape(g, *kernel, icg, padded)
        if not one_shot:
            # on a cache line: the kernel's dense loops ran 15% slower on 16-byte-aligned
            # weights (GoogLeNet-v2 inception_3b/1x1, 2 threads, Intel Xeon family 6 model 207)
            return _blocks(problem, buffers.aligned_contiguous(weights))
        if not (weights.nbytes <= CACHED_WEIGHT_BYTES and _kernel_reads_in_place(weights)):
            weights = np.ascontiguousarray(weights)
        return PreparedWeights(False, weights)
    # a view where the canonical layout allows (pack_dense takes any strides)
    by_tap = np.asarray(weights, dtype=problem.dtype).reshape(g, -1, ocg)
    packed = specialized(_direct.pack_dense, by_tap.dtype)(by_tap, padded)
    packed = packed.reshape(g, *kernel, icg, padded)
    return PreparedWeights(False, packed) if one_shot else _blocks(problem, packed)


def _kernel_reads_in_place(weights: np.ndarray) -> bool:
    """Whether the kernel reads these (G, KD, KH, KW, ICg, OCg) weights where they lie
    (_direct.weight_row_strides): a grouped view of XIO weights does, its rows OC apart.
    Copying it into group-major order (ResNeXt-like and grouped dilated layers, 0.8 MB)
    cost a one-shot call 40-60 us, and the kernel then ran 80 us slower on the freshly
    written weights (2 threads, AMD EPYC)."""
    try:
        _direct.weight_row_strides(weights.shape, weights.strides, weights.itemsize)
    except ValueError:
        return False
    return True


def _padded_bias(problem, bias, prepared):
    if bias is None:
        return prepared.zero_bias
    if prepared.depthwise:
        padded = np.zeros(prepared.array.shape[-1], dtype=problem.dtype)
        padded[:problem.out_channels] = bias
        return padded
    g, ocg = problem.groups, problem.out_channels_per_group
    padded = np.zeros((g, prepared.array.shape[-1]), dtype=problem.dtype)
    padded[:, :ocg] = np.asarray(bias).reshape(g, ocg)
    return padded


def _supports(problem):
    if problem.rank > KERNEL_RANK:
        return f"rank {problem.rank}: the direct kernel handles 1 to {KERNEL_RANK} spatial axes"
    return None


# Output pixels that share one read of the weights. The register blocks hold up to 12
# pixels (AVX-512 with 1-2 channel vectors, AVX2 with 1) and 4-8 at baseline (the
# CL_DENSE_PMAX_TABLEs in direct_microkernel.h); edges and wider vector counts take fewer.
# Only the term's scale depends on it, and the fitted constant absorbs that.
PIXELS_PER_BLOCK = 8
# Half of a core's L2 (this CPU's, 2 MiB where the OS does not say; 1 MiB on the 2 MiB L2
# the constants were first fitted with): beyond it, streamed weights come from L3.
CACHED_WEIGHT_BYTES = cpu.cache_bytes("L2", 2 * 2**20) // 2
# The kernel's passes over input channels stay within the same half of L2
# (cl_pass_max_bytes in direct_microkernel.h), leaving the rest to src and dst.
_direct.set_pass_limit(CACHED_WEIGHT_BYTES)
# An item takes every channel chunk of its group (cl_whole_pixel_bytes) while the group's
# weights, which each of its pixel blocks reads, take at most a quarter of L2 and at most
# 64 KiB. On an AMD EPYC (Zen 3, 512 KiB L2), direct's kernel on one-shot weights, 2
# threads, against the 32 KiB (L1) limit it had (python bench/direct_tiling.py --one-shot
# --changed-only --settings whole=32768 whole=65536 whole=131072 --suite S;
# bench/results/direct_whole_pixels_2026-11-27_zen3-avx2.txt): ResNet-50 conv1 (37 KiB)
# and GoogLeNet-v2 conv1/7x7_s2 1.08x, res2a_branch1 1.10x, inception_3b/1x1 1.25x, none
# slower; 128 KiB gained on some layers and lost up to 17% on others in repeated runs.
WHOLE_PIXEL_MAX_BYTES = min(64 * 1024, cpu.cache_bytes("L2", 2 * 2**20) // 4)
_direct.set_whole_pixels(WHOLE_PIXEL_MAX_BYTES)
# A plan's dense weights are blocked by the kernel's chunks of output channels (see
# _blocked) when it cuts them into several chunks and a group's weights take more than
# WHOLE_PIXEL_MAX_BYTES, below which an item takes every chunk and reads the packed
# layout. Each work item then reads its chunk's weights as one contiguous run and copies
# nothing: direct's kernel alone on plan weights, 2 threads, Intel Xeon family 6 model 207
# (bench/results/direct_blocked_weights_2026-11-27_xeon-emr.txt): ResNet-50 res5 layers
# 1.3x faster, geo-mean 1.18x over its layers with several chunks, GoogLeNet-v2 1.17x, the
# 1d suite 1.35x, VGG-19 1.05x, none slower.
BLOCKED_MIN_BYTES = WHOLE_PIXEL_MAX_BYTES


def kernel_cut(problem, threads) -> dict:
    """How run_direct's call would be cut up (``_direct.plan_summary``: work items, input
    channels per pass, ...), on the geometry it launches (a 1x1 layer as one image of
    N * prod(I) pixels)."""
    src_shape, dst_shape, strides, dilations, pads = _kernel_geometry(problem)
    return _direct.plan_summary(
        src_shape[0], src_shape[1:-1], problem.in_channels,
        lift_spatial(problem.kernel_shape, problem.rank, 1), problem.out_channels,
        dst_shape[1:-1], problem.groups, strides, dilations, pads, is_depthwise(problem),
        problem.dtype.itemsize, threads)


# The kernel's defaults for its flat list of taps (cl_flat_max_taps, cl_flat_max_run in
# direct_microkernel.h): at most this many (tap, input channel) terms per group, and runs
# of adjacent W taps shorter than this.
FLAT_MAX_TAPS = 1024
FLAT_MAX_RUN = 64


def runs_flat_taps(problem, cut) -> bool:
    """Whether interior pixel blocks run their reduction as one flat list of taps (the
    kernel's rule in dense_item, at its default settings): one pass over the input channels
    of a group, several taps, few terms, and short runs of adjacent W taps."""
    if is_depthwise(problem) or problem.kernel_size == 1:
        return False
    icg = problem.in_channels_per_group
    terms = problem.kernel_size * icg
    merged = problem.dilations[-1] == 1 and problem.groups == 1
    run = problem.kernel_shape[-1] * icg if merged else icg
    return (cut["input_channels_per_pass"] == icg and terms <= FLAT_MAX_TAPS
            and run < FLAT_MAX_RUN)


def cost_terms(problem, threads) -> dict:
    """The work of one run, as :mod:`convlab.dispatch.cost_model` terms (per thread where parallel),
    and details for ``explain``.

    Multiply-adds are counted over the channel axis as the kernel pads it (whole 64-byte
    vectors), since padded lanes cost as much as real ones. ``inner_loops`` counts the
    kernel's innermost runs (one per output pixel, tap and channel vector of a group, or per
    output pixel and channel vector where the taps run as one flat list), whose start-up
    dominates when IC/G is small.
    """
    itemsize = problem.dtype.itemsize
    lanes = 64 // itemsize
    cut = kernel_cut(problem, threads)
    # a flat list of taps makes an interior block's whole reduction one run
    runs_per_pixel = 1 if runs_flat_taps(problem, cut) else problem.kernel_size
    # the kernel starts no more threads than it has work items
    threads = max(1, min(threads, cut["items"]))
    if is_depthwise(problem):
        # the depthwise kernel multiplies only the taps that land in src (its tap box);
        # its inner loops stay counted over every tap. On the heavily padded large-kernel
        # layers that prices direct at 0.5-1.3x its time, where multiply-adds counted over
        # every tap priced it 2x too slow and "auto" ran fft, 1.4x slower
        # (bench/results/large_kernel_2026-11-26_epyc-zen4-avx2_shipped_s9.txt)
        visited = visited_tap_fraction(problem)
        shown = {"visited_taps": round(visited, 4)}
        vectors = _direct.padded_channels(problem.groups, itemsize) // lanes
        padded_flops = problem.flops * vectors * lanes / problem.groups * visited
        loops = problem.batch * problem.output_size * problem.kernel_size * vectors
        flops_term = "depthwise_flops"
    else:
        shown = {}
        vectors = _direct.padded_channels(problem.out_channels_per_group, itemsize) // lanes
        padded_flops = problem.flops * vectors * lanes / problem.out_channels_per_group
        loops = problem.batch * problem.output_size * runs_per_pixel * problem.groups * vectors
        flops_term = "dense_flops"
    src_bytes = itemsize * problem.batch * problem.in_channels * math.prod(problem.input_shape)
    dst_bytes = itemsize * problem.batch * problem.out_channels * problem.output_size
    weight_bytes = (itemsize * problem.out_channels * problem.in_channels_per_group
                    * problem.kernel_size)
    # Each register block of output pixels reads its weights again: from L2 while they fit
    # in half of it, from further out beyond that (small images on wide layers, res5*).
    # A one-shot call's kernel copies a pass's weights per channel chunk (cl_geom.wpack),
    # a plan's reads them blocked by chunk; the fitted constant of each kind of
    # stream absorbs that (convlab/dispatch/cost_constants/ names the timings it was fitted on).
    streamed = weight_bytes * -(-problem.batch * problem.output_size // PIXELS_PER_BLOCK)
    cached = weight_bytes <= CACHED_WEIGHT_BYTES
    # A one-shot call's kernel copies each pass's weights for its items (cl_geom.wpack)
    # from rows a whole row of channels apart, once per item's run of pixels; from beyond
    # L2 that copy waits on memory (perf, AMD EPYC Zen 3: half of direct's one-shot time on
    # ResNet-50's res5 layers while items copied one chunk each), where a plan's weights,
    # blocked by chunk, stream.
    gathered = 0.0
    if cut["weights_copied_per_pass"] and not cached:
        groups_of_chunks = -(-cut["chunks"] // cut["chunks_per_item"])
        gathered = weight_bytes * cut["items"] / (problem.groups * groups_of_chunks)
    terms = {**cost_model.FIXED_TERMS, "dense_flops": 0.0, "depthwise_flops": 0.0,
             "inner_loops": loops / threads, "src_bytes": src_bytes / threads,
             # written once, at a bandwidth the threads share: not divided by them
             "dst_bytes": dst_bytes,
             # a one-shot call packs the weights on one thread (a plan packs them once),
             # unless they already come in whole vectors of channels
             "weight_pack_bytes": 0.0 if _reuses_weights(problem) else weight_bytes,
             "weight_gather_bytes": gathered / threads,
             "weight_stream_bytes_cached": streamed / threads if cached else 0.0,
             "weight_stream_bytes_uncached": 0.0 if cached else streamed / threads}
    terms[flops_term] = padded_flops / threads
    # 1x1 runs take the flattened-pixel path, whose rate differs from the windowed one
    terms["pointwise_flops"] = terms["dense_flops"] if problem.kernel_size == 1 else 0.0
    return terms, {"threads": threads, "isa": cut["isa"], "work_items": cut["items"],
                   "channel_vectors": vectors, **shown}


def visited_tap_fraction(problem) -> float:
    """The share of (output pixel, tap) pairs whose tap lands in src rather than in the
    padding: per axis, the in-bounds taps summed over the outputs, over O * K; the product
    over the axes (the in-bounds taps of a pixel form a box). A 27x27 kernel with 'same'
    pads on a 14x14 image: 0.27."""
    fraction = 1.0
    for axis in range(problem.rank):
        first = (np.arange(problem.output_shape[axis]) * problem.strides[axis]
                 - problem.pads_begin[axis])
        taps = first[:, None] + np.arange(problem.kernel_shape[axis]) * problem.dilations[axis]
        inside = (taps >= 0) & (taps < problem.input_shape[axis])
        fraction *= float(inside.mean())
    return fraction


def _cost(problem, threads):
    return cost_model.estimate("direct", threads, *cost_terms(problem, threads))


def _fuses_post_ops(problem, seeds_sum) -> bool:
    # The depthwise kernel writes some channels twice (overlapping edge vectors), which
    # is harmless only when each write starts from the bias, not from dst (_direct.pyx):
    # it cannot seed a sum.
    return not (seeds_sum and is_depthwise(problem))


def _prepare_once(problem, weights) -> PreparedWeights:
    return prepare_weights(problem, weights, one_shot=True)


@register_algorithm("direct", supports=_supports, cost=_cost, prepare_weights=prepare_weights,
                    prepare_once=_prepare_once, fuse_post_ops=_fuses_post_ops,
                    weight_views=True,
                    description="Cython/OpenMP loops over output blocks; ranks 1-3, all attributes")
def run_direct(problem, src, weights, bias, dst, threads, epilogue=None):
    if not isinstance(weights, PreparedWeights):
        weights = prepare_weights(problem, weights, one_shot=True)
    if not dst.flags.c_contiguous:
        # The reshapes below must be views of dst, or the result would be lost.
        raise ValueError("dst must be C-contiguous (the canonical layout)")
    src_shape, dst_shape, strides, dilations, pads = _kernel_geometry(problem)
    kernel = specialized(_direct.conv_depthwise if weights.depthwise else _direct.conv_direct,
                         problem.dtype)
    bias = _padded_bias(problem, bias, weights)
    if weights.depthwise:
        kernel(_depthwise_src(problem, src.reshape(src_shape)), weights.array, bias,
               dst.reshape(dst_shape), strides, dilations, pads, threads, epilogue)
        return
    array, level = weights.array, -1
    if weights.blocks is not None:
        # Several chunks mean more channels than any narrower vector holds, so the call
        # runs at the level in effect itself (conv_direct checks it again).
        level = weights.blocks[0]
        if _direct.ISA_NAMES[level] != _direct.get_isa():
            array, level = _unblocked(weights), -1
    kernel(src.reshape(src_shape), array, bias, dst.reshape(dst_shape), strides, dilations,
           pads, threads, epilogue, level)


# A depthwise pixel's taps read src one pixel (IC channels) apart. Where that is a multiple
# of 4 KiB they all fall in one L1 set and a large kernel's window is evicted before the
# next pixel reuses it; a copy with pixels one cache line further apart pays for itself
# from 7x7 kernels up: 1.21-1.32x on 1024-2048 channels of 7x7 to 28x28 images, where
# 5x5 kernels came out at 0.95-1.05x and 3x3 ones lost to the copy (2 threads, AMD EPYC
# Zen 3, AVX2; bench/results/depthwise_aliasing_2026-11-28_zen3-avx2.txt).
SRC_ALIAS_BYTES = 4096
SRC_ALIAS_MIN_TAPS = 49


def _depthwise_src(problem, src: np.ndarray) -> np.ndarray:
    """src as the depthwise kernel reads it: where a pixel's channels span a multiple of
    SRC_ALIAS_BYTES under a kernel of SRC_ALIAS_MIN_TAPS taps or more, a copy (in this
    thread's staging buffer) whose pixels lie one cache line further apart, viewed down
    to its channels."""
    channels, itemsize = src.shape[-1], src.dtype.itemsize
    # a row of one pixel would leave the kernel no stride to read the pixel step from
    if (channels * itemsize % SRC_ALIAS_BYTES or problem.kernel_size < SRC_ALIAS_MIN_TAPS
            or src.shape[-2] < 2):
        return src
    # as wide as the weights' rows: one line more (SRC_ALIAS_BYTES is a multiple of
    # _direct.ALIAS_BYTES)
    wide = buffers.staging("depthwise_src",
                           (*src.shape[:-1], _direct.depthwise_padded_channels(channels,
                                                                               itemsize)),
                           src.dtype)
    wide[..., channels:] = 0
    wide[..., :channels] = src
    return wide[..., :channels]


@functools.lru_cache(maxsize=256)
def _kernel_geometry(problem):
    """src and dst shapes, strides, dilations and pads as the 3-D kernel takes them.
    Remembered per problem: worked out afresh, they cost a small layer's run 2-3 us."""
    if is_pointwise_flat(problem):
        # Output pixel p reads input pixel p: one image of N * prod(I) pixels.
        pixels = problem.batch * math.prod(problem.input_shape)
        return ((1, 1, 1, pixels, problem.in_channels), (1, 1, 1, pixels, problem.out_channels),
                (1, 1, 1), (1, 1, 1), (0, 0, 0))
    r = problem.rank
    if BATCH_AS_DEPTH and r < KERNEL_RANK:
        # KD == 1 with no depth pads: output slice d reads input slice d only, so the
        # images can stand as depth slices of one image, and runs of pixels span them.
        inner = KERNEL_RANK - 1
        return ((1, problem.batch, *lift_spatial(problem.input_shape, r, 1)[-inner:],
                 problem.in_channels),
                (1, problem.batch, *lift_spatial(problem.output_shape, r, 1)[-inner:],
                 problem.out_channels),
                (1, *lift_spatial(problem.strides, r, 1)[-inner:]),
                (1, *lift_spatial(problem.dilations, r, 1)[-inner:]),
                (0, *lift_spatial(problem.pads_begin, r, 0)[-inner:]))
    return ((problem.batch, *lift_spatial(problem.input_shape, r, 1), problem.in_channels),
            (problem.batch, *lift_spatial(problem.output_shape, r, 1), problem.out_channels),
            lift_spatial(problem.strides, r, 1), lift_spatial(problem.dilations, r, 1),
            lift_spatial(problem.pads_begin, r, 0))
