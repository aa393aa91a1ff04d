"""The compiled copy between the channels-first layout (NCX) and the kernels' channels-last
one: ``swap_last_axes`` (convlab/strategies/kernels/_layout.pyx), ``params.swap_channels``,
and the NCX calls that go through them."""
import numpy as np
import pytest

import convlab
from convlab.problem import params
from convlab.strategies.kernels._layout import PARALLEL_MIN_BYTES, swap_last_axes

ITEM_DTYPES = [np.uint8, np.int16, np.float16, np.float32, np.int32, np.float64,
               np.complex64, np.int64]


def _values(rng, shape, dtype):
    values = rng.standard_normal(shape) * 100
    if np.dtype(dtype).kind == "c":
        values = values + 1j * rng.standard_normal(shape)
    return values.astype(dtype)


@pytest.mark.parametrize("dtype", ITEM_DTYPES)
@pytest.mark.parametrize("shape", [(1, 1, 1), (2, 3, 5), (1, 17, 33), (3, 64, 100), (1, 5, 1)])
@pytest.mark.parametrize("threads", [1, 2])
def test_swap_last_axes_matches_numpys_transpose(rng, dtype, shape, threads):
    src = _values(rng, shape, dtype)
    before = src.copy()
    dst = np.full((shape[0], shape[2], shape[1]), 7, dtype)
    assert swap_last_axes(src, dst, threads) is dst
    np.testing.assert_array_equal(dst, src.transpose(0, 2, 1))
    np.testing.assert_array_equal(src, before)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_a_copy_large_enough_to_split_over_threads_matches(rng, threads):
    # ResNet-50 conv1's dst, (1, 112 * 112, 64) float32, and a batch of ragged tiles
    for shape in [(1, 112 * 112, 64), (3, 1001, 67)]:
        src = rng.standard_normal(shape).astype(np.float32)
        assert src.nbytes >= PARALLEL_MIN_BYTES
        dst = np.empty((shape[0], shape[2], shape[1]), np.float32)
        swap_last_axes(src, dst, threads)
        np.testing.assert_array_equal(dst, src.transpose(0, 2, 1))


def test_a_read_only_src_is_read(rng):
    src = rng.standard_normal((2, 9, 20)).astype(np.float32)
    src.flags.writeable = False
    dst = np.empty((2, 20, 9), np.float32)
    swap_last_axes(src, dst)
    np.testing.assert_array_equal(dst, src.transpose(0, 2, 1))


def test_empty_arrays_copy_nothing():
    dst = np.empty((0, 4, 3), np.float32)
    assert swap_last_axes(np.empty((0, 3, 4), np.float32), dst) is dst
    dst = np.empty((2, 0, 3), np.float32)
    swap_last_axes(np.empty((2, 3, 0), np.float32), dst)


@pytest.mark.parametrize("src, dst, error, words", [
    (np.zeros((2, 3, 4), np.float32), np.zeros((2, 3, 4), np.float32), ValueError,
     "dst of shape"),
    (np.zeros((3, 4), np.float32), np.zeros((4, 3), np.float32), ValueError, "dst of shape"),
    (np.zeros((2, 3, 4), np.float32), np.zeros((2, 4, 3), np.float64), TypeError, "dtype"),
    (np.zeros((2, 3, 4), np.complex128), np.zeros((2, 4, 3), np.complex128), TypeError,
     "1, 2, 4 or 8 bytes"),
    (np.zeros((2, 3, 8), np.float32)[:, :, ::2], np.zeros((2, 4, 3), np.float32), ValueError,
     "C-contiguous"),
    (np.zeros((2, 3, 4), np.float32), np.zeros((2, 4, 6), np.float32)[:, :, ::2], ValueError,
     "C-contiguous"),
    ([[[1.0]]], np.zeros((1, 1, 1)), TypeError, "numpy arrays"),
])
def test_bad_arrays_get_a_clear_error(src, dst, error, words):
    with pytest.raises(error, match=words):
        swap_last_axes(src, dst)


def test_a_read_only_dst_is_refused():
    dst = np.zeros((1, 2, 2), np.float32)
    dst.flags.writeable = False
    with pytest.raises(ValueError, match="writeable"):
        swap_last_axes(np.ones((1, 2, 2), np.float32), dst)
    assert not dst.any()


def test_threads_below_one_are_refused():
    with pytest.raises(ValueError, match="threads"):
        swap_last_axes(np.ones((1, 2, 2), np.float32), np.zeros((1, 2, 2), np.float32), 0)


@pytest.mark.parametrize("spatial", [(7,), (5, 6), (3, 4, 5)])
def test_swap_channels_moves_the_channel_axis_both_ways(rng, spatial):
    first = rng.standard_normal((2, 3, *spatial)).astype(np.float32)
    last = params.swap_channels(first, True, 2)
    np.testing.assert_array_equal(last, np.moveaxis(first, 1, -1))
    assert last.flags.c_contiguous
    back = params.swap_channels(last, False, 2)
    np.testing.assert_array_equal(back, first)
    into = np.empty_like(first)
    assert params.swap_channels(last, False, 1, into=into) is into
    np.testing.assert_array_equal(into, first)


def test_swap_channels_declines_what_the_kernel_cannot_take(rng):
    array = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
    assert params.swap_channels(array[:, :, ::2], True) is None
    assert params.swap_channels(array.astype(np.complex128), True) is None
    assert params.swap_channels(array[0], True) is not None  # 3-D: one spatial axis
    wrong = np.empty((2, 8, 8, 4), np.float32)
    assert params.swap_channels(array, True, into=wrong) is None
    assert params.swap_channels(array, True, into=np.empty((2, 8, 8, 3))) is None


CASE = dict(strides=2, pads_begin=1, pads_end=2, algorithm="direct")


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_ncx_calls_match_nxc_calls(rng, dtype):
    """Through every NCX path: a new dst, a contiguous out, a strided out, a strided src."""
    src = rng.standard_normal((2, 5, 13, 11)).astype(dtype)
    weights = rng.standard_normal((6, 5, 3, 3)).astype(dtype)
    expected = convlab.convolve(np.ascontiguousarray(np.moveaxis(src, 1, -1)),
                                np.ascontiguousarray(weights.transpose(2, 3, 1, 0)), **CASE)
    expected = np.moveaxis(expected, -1, 1)
    kwargs = dict(CASE, data_format="NCX", weights_format="OIX")
    before = src.copy()
    result = convlab.convolve(src, weights, **kwargs)
    assert result.flags.c_contiguous
    np.testing.assert_array_equal(result, expected)
    out = np.empty_like(result)
    assert convlab.convolve(src, weights, out=out, **kwargs) is out
    np.testing.assert_array_equal(out, expected)
    wide = np.zeros(result.shape[:-1] + (2 * result.shape[-1],), result.dtype)
    convlab.convolve(src, weights, out=wide[..., ::2], **kwargs)
    np.testing.assert_array_equal(wide[..., ::2], expected)
    assert not wide[..., 1::2].any()
    strided = np.zeros(src.shape[:-1] + (2 * src.shape[-1],), dtype)
    strided[..., ::2] = src
    np.testing.assert_array_equal(convlab.convolve(strided[..., ::2], weights, **kwargs),
                                  expected)
    np.testing.assert_array_equal(src, before)
    plan = convlab.Convolution(weights, **kwargs)
    np.testing.assert_array_equal(plan(src), expected)
    np.testing.assert_array_equal(plan(src), expected)


@pytest.mark.parametrize("data_format", ["NCX", "NXC"])
@pytest.mark.parametrize("dtype, post_ops", [(np.float32, None), (np.float16, None),
                                             (np.float32, ["relu"])])
def test_results_never_share_staging_memory(rng, data_format, dtype, post_ops):
    """Staging buffers are reused by the next call in the thread: no result may be one."""
    weights = rng.standard_normal((6, 5, 3, 3)).astype(dtype)
    shape = (1, 5, 20, 20) if data_format == "NCX" else (1, 20, 20, 5)
    kwargs = dict(data_format=data_format, weights_format="OIX", pads_begin=1, pads_end=1,
                  post_ops=post_ops)
    sources = [rng.standard_normal(shape).astype(dtype) for _ in range(3)]
    plan = convlab.Convolution(weights, **kwargs)
    for call in (lambda s: convlab.convolve(s, weights, **kwargs), plan):
        results = [call(s) for s in sources]
        expected = [call(s) for s in sources]
        for result, again in zip(results, expected):
            np.testing.assert_array_equal(result, again)
        for one in range(3):
            for other in range(one + 1, 3):
                assert not np.shares_memory(results[one], results[other])


@pytest.mark.parametrize("out_channels, in_channels, kernel, groups", [
    (256, 128, (1, 1), 1), (128, 64, (3, 3), 1), (96, 96, (3, 3), 96), (128, 64, (3, 3), 4),
    (64, 64, (5,), 2), (32, 32, (3, 3, 3), 1)])
def test_large_oix_weights_convert_as_numpy_would(rng, out_channels, in_channels, kernel,
                                                  groups):
    weights = rng.standard_normal((out_channels, in_channels // groups, *kernel)) \
        .astype(np.float32)
    if weights.nbytes < params.OIX_COPY_MIN_BYTES:
        weights = np.concatenate([weights] * -(-params.OIX_COPY_MIN_BYTES // weights.nbytes))
        out_channels = weights.shape[0]
    src_shape = (1, in_channels, *(k + 2 for k in kernel))
    problem = params.make_problem(src_shape, np.float32, weights.shape, np.float32,
                                  data_format="NCX", weights_format="OIX", groups=groups)
    before = weights.copy()
    converted = params.canonical_weights(weights, problem)
    icg, ocg = in_channels // groups, out_channels // groups
    expected = np.moveaxis(weights, (0, 1), (-1, -2)).reshape(*kernel, icg, groups, ocg)
    expected = np.moveaxis(expected, -2, 0)
    assert converted.flags.c_contiguous
    np.testing.assert_array_equal(converted, expected)
    np.testing.assert_array_equal(weights, before)
