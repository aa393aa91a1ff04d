"""Special values (NaN, Inf), empty batches and extreme but valid shapes, per algorithm."""
from __future__ import annotations

import math

import numpy as np
import pytest

import convlab
from tests.helpers import (
    ALGORITHMS,
    assert_matches_reference,
    problem_of,
    random_tensors,
    skip_unless_supported,
    to_data_format,
    to_weights_format,
)

FORMATS = [pytest.param("NCX", "OIX", id="NCX-OIX"), pytest.param("NXC", "XIO", id="NXC-XIO")]
DTYPES = ["float32", "float64"]
# pytest-run-parallel runs each test in several threads at once: not these
KERNEL_SETTING = pytest.mark.thread_unsafe(reason="changes a process-wide setting of the "
                                                   "direct kernel")


def run(algorithm, src, weights, bias=None, **attributes):
    skip_unless_supported(algorithm, problem_of(src, weights, bias, attributes))
    return convlab.convolve(src, weights, bias, algorithm=algorithm, **attributes)


def assert_same_special_values(got, expected):
    for kind in (np.isnan, np.isposinf, np.isneginf):
        mismatch = kind(got) != kind(expected)
        if mismatch.any():
            raise AssertionError(
                f"{kind.__name__} differs from the reference at {int(mismatch.sum())} of "
                f"{mismatch.size} elements, first {np.argwhere(mismatch)[:5].tolist()}")


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
@pytest.mark.parametrize("data_format, weights_format", FORMATS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_nan_and_inf_in_src_reach_exactly_their_windows(rng, algorithm, dtype, data_format,
                                                        weights_format):
    src = rng.standard_normal((2, 2, 7, 9)).astype(dtype)
    # positive weights: an infinity keeps its sign through every product
    weights = (np.abs(rng.standard_normal((3, 2, 3, 3))) + 0.5).astype(dtype)
    src[0, 1, 2, 3] = np.nan
    src[1, 0, 1, 1] = np.inf
    src[1, 1, 2, 2] = -np.inf  # its windows overlap the +inf ones: inf - inf is NaN there
    src[1, 0, 6, 8] = -np.inf
    attributes = dict(pads_begin=1, pads_end=(0, 2), data_format=data_format,
                      weights_format=weights_format)
    src, weights = to_data_format(src, data_format), to_weights_format(weights, weights_format)
    got = run(algorithm, src, weights, **attributes)
    expected = convlab.reference.convolve(src, weights, **attributes)
    for kind in (np.isnan, np.isposinf, np.isneginf):  # the design hits every kind
        assert kind(expected).any() and not kind(expected).all()
    assert_same_special_values(got, expected)
    finite = np.isfinite(expected)
    np.testing.assert_allclose(got[finite], expected[finite], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("data_format, weights_format", FORMATS)
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_nan_and_inf_in_weights_and_bias_fill_their_channels(rng, algorithm, data_format,
                                                             weights_format):
    src = rng.standard_normal((2, 4, 6, 5)).astype(np.float32)
    weights = rng.standard_normal((6, 2, 3, 3)).astype(np.float32)
    bias = rng.standard_normal(6).astype(np.float32)
    weights[1, 0, 1, 1] = np.nan  # no padding: every window multiplies this tap by real data
    bias[3] = np.inf
    bias[4] = -np.inf
    bias[5] = np.nan
    attributes = dict(groups=2, data_format=data_format, weights_format=weights_format)
    src, weights = to_data_format(src, data_format), to_weights_format(weights, weights_format)
    got = run(algorithm, src, weights, bias, **attributes)
    channels = np.moveaxis(got, 1 if data_format == "NCX" else -1, 0)
    assert np.isnan(channels[1]).all() and np.isnan(channels[5]).all()
    assert np.isposinf(channels[3]).all() and np.isneginf(channels[4]).all()
    assert np.isfinite(channels[[0, 2]]).all()
    assert_same_special_values(got, convlab.reference.convolve(src, weights, bias, **attributes))


@pytest.mark.parametrize("data_format, weights_format", FORMATS)
@pytest.mark.parametrize("rank", [1, 2, 3])
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_empty_batch_gives_empty_result_of_the_right_shape(algorithm, rank, data_format,
                                                           weights_format):
    input_shape, kernel = (6, 5, 4)[:rank], (3, 3, 3)[:rank]
    src = np.zeros((0, 4, *input_shape), np.float32)
    weights = np.ones((6, 2, *kernel), np.float32)
    src, weights = to_data_format(src, data_format), to_weights_format(weights, weights_format)
    attributes = dict(groups=2, pads_begin=1, data_format=data_format,
                      weights_format=weights_format)
    output = tuple(i + 1 - k + 1 for i, k in zip(input_shape, kernel))
    expected_shape = (0, 6, *output) if data_format == "NCX" else (0, *output, 6)
    got = run(algorithm, src, weights, np.ones(6, np.float32), **attributes)
    assert got.shape == expected_shape and got.dtype == np.float32
    out = np.empty(expected_shape, np.float32)
    assert run(algorithm, src, weights, out=out, **attributes) is out
    got64 = run(algorithm, src.astype(np.float64), weights, **attributes)
    assert got64.shape == expected_shape and got64.dtype == np.float64


# (batch, groups, IC, OC, input, kernel, attributes): small corners of the problem space
EDGE_SHAPES = {
    "all-ones": (1, 1, 1, 1, (1,), (1,), {}),
    "kernel-equals-input": (2, 1, 3, 2, (4, 5), (4, 5), {}),
    "stride-beyond-input": (1, 1, 2, 3, (5, 4), (2, 2), dict(strides=(7, 9))),
    "pad-only-windows": (1, 1, 2, 2, (2,), (2,), dict(pads_begin=5, pads_end=5)),
    "depthwise-multiplier-3": (2, 4, 4, 12, (5, 6), (3, 3), dict(pads_begin=1, pads_end=1)),
    "one-output-channel": (1, 1, 5, 1, (3, 3, 3), (2, 2, 2), {}),
    "many-channels-1x1": (1, 1, 64, 48, (3, 4), (1, 1), {}),
    "grouped-ocg-1": (1, 5, 10, 5, (7,), (3,), dict(dilations=3)),
    "crop-to-one": (1, 1, 2, 2, (5, 5), (1, 1), dict(pads_begin=-2, pads_end=-2)),
    "dilation-beyond-input-with-pads": (1, 1, 2, 2, (3,), (2,), dict(dilations=6, pads_end=4)),
    "long-1d": (1, 1, 3, 4, (257,), (5,), dict(strides=3, auto_pad="same_lower")),
    "long-1d-k3": (2, 1, 3, 4, (131,), (3,), dict(auto_pad="same_lower")),
    "k3-single-output": (1, 1, 3, 2, (3, 3), (3, 3), {}),
    "k3-pads-beyond-kernel": (1, 2, 4, 6, (4, 5), (3, 3), dict(pads_begin=4,
                                                                pads_end=(0, 3))),
    "k3-3d-crop": (2, 1, 2, 3, (5, 6, 7), (3, 3, 3), dict(pads_begin=-1, pads_end=(0, 1, -2))),
    "k3-wide-channels": (1, 1, 40, 24, (6, 9), (3, 3), dict(pads_begin=1, pads_end=1)),
    "same-upper-stride-4": (1, 1, 2, 3, (9, 10), (3, 4), dict(auto_pad="same_upper",
                                                               strides=4)),
    # More output channels than one register block: direct copies each pass's weights
    # per channel chunk, the last chunk partial (200 = 12.5 float32 vectors).
    "wide-output-channels-1x1": (1, 1, 24, 200, (5, 7), (1, 1), {}),
    "grouped-strided-1x1-3d": (2, 2, 40, 48, (3, 7, 9), (1, 1, 1), dict(strides=(1, 2, 2))),
    "grouped-wide-k3": (2, 2, 12, 160, (6, 7), (3, 3), dict(pads_begin=1, pads_end=1)),
    # 3x3 x 150 channels x 4 vectors: two passes of 75 in direct (256 KiB a pass)
    "input-channels-in-two-passes": (1, 1, 150, 70, (5, 7), (3, 3), dict(strides=(1, 2))),
}


def edge_case(rng, case, dtype, data_format="NXC", weights_format="XIO"):
    """Random src, weights and bias for EDGE_SHAPES[case] in the given layouts, and the
    call's attributes."""
    batch, groups, ic, oc, input_shape, kernel, extra = EDGE_SHAPES[case]
    src, weights, bias = random_tensors(
        rng, batch=batch, in_channels=ic, out_channels=oc, groups=groups,
        input_shape=input_shape, kernel_shape=kernel, dtype=dtype,
        data_format=data_format, weights_format=weights_format, bias=True)
    attributes = dict(extra, groups=groups, data_format=data_format,
                      weights_format=weights_format)
    return src, weights, bias, attributes


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", list(EDGE_SHAPES))
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_edge_shapes_match_reference(rng, algorithm, case, dtype):
    for data_format, weights_format in (("NCX", "OIX"), ("NXC", "XIO")):
        src, weights, bias, attributes = edge_case(rng, case, dtype, data_format,
                                                   weights_format)
        got = run(algorithm, src, weights, bias, **attributes)
        assert_matches_reference(got, src, weights, bias, attributes, algorithm, case)


def test_pad_only_windows_hold_exactly_the_bias():
    """Outputs whose every tap reads padding are the bias (reference checked by hand)."""
    src = np.ones((1, 1, 2), np.float64)
    weights = np.ones((1, 1, 2), np.float64)
    got = convlab.reference.convolve(src, weights, np.array([0.5]), pads_begin=3, pads_end=1,
                                     data_format="NCX", weights_format="OIX")
    np.testing.assert_array_equal(got.ravel(), [0.5, 0.5, 1.5, 2.5, 1.5])


@pytest.mark.parametrize("algorithm", [a for a in ALGORITHMS if a != "reference"])
def test_huge_strides_and_pads_within_limits_compute_exactly(algorithm):
    """o*S near 2**53 must not wrap inside a kernel: only output 0 reads src.

    The reference is left out: it materialises the padded input, 2**53 elements here.
    """
    src = np.full((1, 1, 1), 3.0)
    weights = np.full((1, 1, 1), 2.0)
    attributes = dict(strides=2**50, pads_end=2**53 - 1, data_format="NCX",
                      weights_format="OIX")
    got = run(algorithm, src, weights, **attributes)
    np.testing.assert_array_equal(got.ravel(), [6.0] + [0.0] * 7)


def _equal_passes(channels, most):
    """Channels per pass when ``channels`` go in passes of equal size, at most ``most``."""
    passes = -(-channels // most)
    return -(-channels // passes)


@KERNEL_SETTING
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("pass_bytes, min_channels, per_pass", [
    (1, 7, 7),             # 22 passes of 7 (150 = 21 * 7 + 3 would leave a pass of 3)
    (1, 64, 50),           # 3 passes of 50 rather than 64 + 64 + 22
    # the default: as many channels as keep a pass's weights (taps x channels x the
    # vectors of a block) within 256 KiB, at least 64; with AVX-512's vectors 2 passes of
    # 75 rather than 113 + 37, with narrower ones a single pass
    (256 * 1024, 64, None),
    (1 << 30, 1, 150),     # one pass
])
def test_direct_results_do_not_depend_on_its_input_channel_passes(rng, isa_level, dtype,
                                                                   pass_bytes, min_channels,
                                                                   per_pass):
    """direct sums the input channels of a dense item in passes of equal size (see cl_plan);
    however they are cut, the result matches the reference."""
    from convlab.strategies import direct
    from convlab.strategies.kernels import _direct
    src, weights, bias, attributes = edge_case(rng, "input-channels-in-two-passes", dtype)
    problem = problem_of(src, weights, bias, attributes)
    previous = _direct.set_pass_size(pass_bytes, min_channels)
    try:
        cut = direct.kernel_cut(problem, 2)
        if per_pass is None:
            block_bytes = (problem.kernel_size * cut["vectors_per_block"] * cut["lanes"]
                           * problem.dtype.itemsize)
            most = min(max(pass_bytes // block_bytes, min_channels),
                       problem.in_channels_per_group)
            per_pass = _equal_passes(problem.in_channels_per_group, most)
            if cut["isa"] == "avx512":
                assert per_pass == 75
        assert cut["input_channels_per_pass"] == per_pass
        got = convlab.convolve(src, weights, bias, algorithm="direct", **attributes)
    finally:
        _direct.set_pass_size(*previous)
    assert_matches_reference(got, src, weights, bias, attributes, "direct")


@KERNEL_SETTING
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", ["many-channels-1x1", "grouped-wide-k3",
                                  "input-channels-in-two-passes", "wide-output-channels-1x1"])
@pytest.mark.parametrize("offset", [0, 1], ids=["aligned-dst", "misaligned-dst"])
def test_direct_streamed_dst_matches_cached_stores(rng, dtype, case, offset):
    """direct writes a large dst with non-temporal stores (cl_stream_min_bytes), for whole
    vectors at aligned addresses only: forced on for every size, the result is the same,
    bit for bit, as with ordinary stores, whatever dst's alignment. A build without them
    (the portable one, as on AArch64) never streams."""
    from convlab.runtime import _buffers as buffers
    from convlab.strategies import direct
    from convlab.strategies.kernels import _direct
    src, weights, bias, attributes = edge_case(rng, case, dtype)
    problem = problem_of(src, weights, bias, attributes)
    results = []
    for min_bytes in (0, 1):
        # out= in place (NXC, C-contiguous), at 64-byte alignment plus `offset` elements
        size = math.prod(problem.canonical_dst_shape)
        out = buffers.aligned_empty((size + 1,), dtype)[offset:offset + size].reshape(
            problem.canonical_dst_shape)
        previous = _direct.set_streaming(min_bytes)
        try:
            assert direct.kernel_cut(problem, 2)["streamed_dst"] == (
                bool(min_bytes) and _direct.CAN_STREAM)
            results.append(convlab.convolve(src, weights, bias, algorithm="direct", out=out,
                                            **attributes))
        finally:
            _direct.set_streaming(previous)
        assert results[-1] is out
    np.testing.assert_array_equal(results[1], results[0])
    assert_matches_reference(results[1], src, weights, bias, attributes, "direct")


@KERNEL_SETTING
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", ["many-channels-1x1", "wide-output-channels-1x1",
                                  "grouped-strided-1x1-3d"])
def test_direct_src_prefetch_leaves_results_unchanged(rng, dtype, case):
    """direct prefetches the next pixel block's src in 1x1 convolutions with a large src
    (cl_prefetch_min_bytes), in steps of a cache line: forced on for every size, the result
    is the same, bit for bit, as without, and matches the reference."""
    from convlab.strategies import direct
    from convlab.strategies.kernels import _direct
    src, weights, bias, attributes = edge_case(rng, case, dtype)
    problem = problem_of(src, weights, bias, attributes)
    results = []
    for min_bytes in (0, 1):
        previous = _direct.set_prefetch(min_bytes)
        try:
            assert direct.kernel_cut(problem, 2)["prefetched_src"] == bool(min_bytes)
            results.append(convlab.convolve(src, weights, bias, algorithm="direct",
                                            **attributes))
        finally:
            _direct.set_prefetch(previous)
    np.testing.assert_array_equal(results[1], results[0])
    assert_matches_reference(results[1], src, weights, bias, attributes, "direct")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_pack_dense_reads_any_strides(rng, dtype):
    """direct packs grouped XIO weights through their canonical view, whose groups lie
    OCg apart; strided rows, reversed axes and a contiguous array pack alike."""
    from convlab.strategies.kernels import _direct

    base = rng.standard_normal((3, 5, 4 * 7)).astype(dtype)
    views = {"groups interleaved": base.reshape(3 * 5, 7, 4).transpose(1, 0, 2),
             "strided channels": base[:, :, ::4],
             "reversed": base[::-1, ::-1, :7],
             "contiguous": np.ascontiguousarray(base[:, :, :7])}
    for name, view in views.items():
        want = np.zeros((view.shape[0] * view.shape[1], 16), dtype)
        want[:, :view.shape[2]] = view.reshape(-1, view.shape[2])
        got = _direct.pack_dense(view, 16)
        np.testing.assert_array_equal(got, want, err_msg=name)
        assert got.ctypes.data % 64 == 0
    exact = np.ascontiguousarray(base[:, :, :16])
    np.testing.assert_array_equal(_direct.pack_dense(exact, 16), exact.reshape(-1, 16))


# Few input channels, as in a network's first layer: direct runs interior pixel blocks over
# one flat list of (tap, input channel) terms, and an item takes every channel chunk of its
# group when the weights are small (cl_plan). Odd extents, pads, strides and dilations put
# pixel blocks across rows and the borders; OC 40 and 72 leave chunks of unequal width and
# a partial last vector at every ISA level.
SMALL_INPUT_CHANNEL_CASES = {
    "ic3-k3-pads": dict(ic=3, oc=64, groups=1, input_shape=(13, 11), kernel=(3, 3),
                        strides=1, dilations=1, pads_begin=1, pads_end=1),
    "ic3-k7-s2": dict(ic=3, oc=72, groups=1, input_shape=(17, 15), kernel=(7, 7),
                      strides=2, dilations=1, pads_begin=3, pads_end=2),
    "ic3-k5-s2x3-d1x2": dict(ic=3, oc=40, groups=1, input_shape=(19, 21), kernel=(5, 5),
                             strides=(2, 3), dilations=(1, 2), pads_begin=(1, 0),
                             pads_end=(0, 1)),
    "ic1-k3-d2": dict(ic=1, oc=24, groups=1, input_shape=(9, 10), kernel=(3, 3),
                      strides=1, dilations=2, pads_begin=2, pads_end=1),
    "ic6-g2-k3": dict(ic=6, oc=40, groups=2, input_shape=(10, 9), kernel=(3, 3),
                      strides=1, dilations=1, pads_begin=1, pads_end=1),
    "ic2-k3x3x3-3d": dict(ic=2, oc=36, groups=1, input_shape=(5, 6, 7), kernel=(3, 3, 3),
                          strides=(1, 2, 1), dilations=1, pads_begin=1, pads_end=(0, 1, 1)),
    "ic3-k3-1d": dict(ic=3, oc=48, groups=1, input_shape=(29,), kernel=(3,),
                      strides=1, dilations=3, pads_begin=2, pads_end=2),
    # rows wide enough (over 48 interior columns) that items cut their pixels into runs of
    # interior and of border columns (dense_run_end)
    "ic3-k7-s2-wide": dict(ic=3, oc=72, groups=1, input_shape=(9, 131), kernel=(7, 7),
                           strides=2, dilations=1, pads_begin=3, pads_end=2),
    "ic1-k5-s3-wide": dict(ic=1, oc=40, groups=1, input_shape=(7, 170), kernel=(5, 5),
                           strides=(1, 3), dilations=1, pads_begin=2, pads_end=(2, 1)),
    "ic4-k3-wide-1d": dict(ic=4, oc=24, groups=1, input_shape=(107,), kernel=(3,),
                           strides=1, dilations=1, pads_begin=1, pads_end=0),
}


@KERNEL_SETTING
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", list(SMALL_INPUT_CHANNEL_CASES))
@pytest.mark.parametrize("post_ops", [None, "sum-relu"])
def test_direct_small_input_channels_match_on_every_path(rng, isa_level, dtype, case,
                                                         post_ops):
    """With the flat tap list and whole-pixel items each forced on and off, direct's
    result matches the reference (with a bias, a batch of 2 and fused post-ops)."""
    from convlab.strategies import direct
    from convlab.strategies.kernels import _direct
    spec = dict(SMALL_INPUT_CHANNEL_CASES[case])
    ic, oc, groups = spec.pop("ic"), spec.pop("oc"), spec.pop("groups")
    input_shape, kernel = spec.pop("input_shape"), spec.pop("kernel")
    src, weights, bias = random_tensors(
        rng, batch=2, in_channels=ic, out_channels=oc, groups=groups,
        input_shape=input_shape, kernel_shape=kernel, dtype=dtype, data_format="NXC",
        weights_format="XIO", bias=True)
    attributes = dict(spec, groups=groups)
    problem = problem_of(src, weights, bias, attributes)
    prior = rng.standard_normal(problem.dst_shape).astype(dtype)
    results = []
    for flat, whole in [((0, 0), 0), ((1024, 64), 0), ((0, 0), 1 << 30),
                        ((1024, 64), 1 << 30)]:
        previous = _direct.set_flat_taps(*flat), _direct.set_whole_pixels(whole)
        try:
            cut = direct.kernel_cut(problem, 2)
            # at most CL_WHOLE_PIXEL_CHUNKS (16) chunks take the whole-pixel path
            assert cut["whole_pixels"] == (bool(whole) and 1 < cut["chunks"] <= 16)
            if post_ops is None:
                got = convlab.convolve(src, weights, bias, algorithm="direct", **attributes)
            else:
                out = prior.copy()
                got = convlab.convolve(src, weights, bias, algorithm="direct", out=out,
                                       post_ops=[("sum", 0.5), "relu"], **attributes)
        finally:
            _direct.set_flat_taps(*previous[0])
            _direct.set_whole_pixels(previous[1])
        results.append(got)
    for got in results:
        if post_ops is None:
            assert_matches_reference(got, src, weights, bias, attributes, "direct")
        else:
            want = convlab.convolve(src, weights, bias, algorithm="reference", **attributes)
            np.testing.assert_allclose(got, np.maximum(want + 0.5 * prior, 0),
                                       rtol=1e-4 if dtype == "float32" else 1e-10,
                                       atol=1e-4 if dtype == "float32" else 1e-10)


# Small images on wide layers (ResNet-50's res5 stage): a one-shot call whose weights lie
# beyond the pass limit gives each item a copy group of adjacent channel chunks, copied
# row by row with prefetches ahead (cl_copy_group_bytes). OC 200 leaves a short last group
# and chunks of unequal width at every level; a tiny pass limit puts these small weights
# "beyond L2", and small passes make several accumulate into dst.
COPY_GROUP_CASES = {
    "3x3-7x7": dict(ic=48, oc=200, input_shape=(7, 7), kernel=(3, 3), strides=1, pads=1),
    "1x1-s2": dict(ic=40, oc=200, input_shape=(11, 13), kernel=(1, 1), strides=2, pads=0),
    "1d-k5": dict(ic=36, oc=200, input_shape=(40,), kernel=(5,), strides=1, pads=2),
}


@KERNEL_SETTING
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", list(COPY_GROUP_CASES))
@pytest.mark.parametrize("threads", [1, 2])
def test_direct_copy_groups_match_one_chunk_per_item(rng, isa_level, dtype, case, threads):
    """With copy groups on and off and the copy's prefetch on and off, direct's one-shot
    result matches the reference, and its plan's (blocked weights, no copies)."""
    from convlab.strategies import direct
    from convlab.strategies.kernels import _direct
    spec = dict(COPY_GROUP_CASES[case])
    pads = spec.pop("pads")
    src, weights, bias = random_tensors(
        rng, batch=1, in_channels=spec["ic"], out_channels=spec["oc"], groups=1,
        input_shape=spec["input_shape"], kernel_shape=spec["kernel"], dtype=dtype,
        data_format="NXC", weights_format="XIO", bias=True)
    attributes = dict(strides=spec["strides"], pads_begin=pads, pads_end=pads)
    problem = problem_of(src, weights, bias, attributes)
    results, grouped = [], []
    previous_limit = _direct.set_pass_limit(1024)
    previous_size = _direct.set_pass_size(4096, 1)
    previous_whole = _direct.set_whole_pixels(0)  # items that take every chunk copy nothing
    try:
        for group_bytes, ahead in [(0, 0), (1 << 20, 0), (1 << 20, 8), (1 << 20, 100)]:
            previous = _direct.set_copy_group(group_bytes, ahead)
            try:
                cut = direct.kernel_cut(problem, threads)
                grouped.append(cut["chunks_per_item"])
                results.append(convlab.convolve(src, weights, bias, algorithm="direct",
                                                threads=threads, **attributes))
            finally:
                _direct.set_copy_group(*previous)
        plan = convlab.Convolution(weights, bias, algorithm="direct", threads=threads,
                                   **attributes)
        results.append(plan(src))
        cut = direct.kernel_cut(problem, threads)
    finally:
        _direct.set_pass_limit(previous_limit)
        _direct.set_pass_size(*previous_size)
        _direct.set_whole_pixels(previous_whole)
    assert grouped[0] == 1
    if cut["chunks"] >= 4 * threads and cut["weights_copied_per_pass"]:
        # at least two groups per thread, each of several chunks, in several passes
        assert all(1 < chunks <= cut["chunks"] // (2 * threads) for chunks in grouped[1:])
        assert cut["input_channels_per_pass"] < spec["ic"]
    for got in results:
        assert_matches_reference(got, src, weights, bias, attributes, "direct")


def test_direct_copy_group_refuses_bad_values():
    from convlab.strategies.kernels import _direct
    with pytest.raises(ValueError, match="row_bytes"):
        _direct.set_copy_group(-1)
    with pytest.raises(ValueError, match="prefetch_rows"):
        _direct.set_copy_group(1024, -2)


def test_direct_knobs_refuse_bad_values():
    from convlab.strategies.kernels import _direct
    with pytest.raises(ValueError, match="max_taps"):
        _direct.set_flat_taps(-1, 64)
    with pytest.raises(ValueError, match="max_taps"):
        _direct.set_flat_taps(1 << 20, 64)
    with pytest.raises(ValueError, match="max_weight_bytes"):
        _direct.set_whole_pixels(-1)
