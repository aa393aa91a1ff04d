"""Buffers convlab allocates itself (convlab.runtime._buffers)."""
import numpy as np
import pytest

import convlab
from convlab.runtime import _buffers as buffers


@pytest.mark.parametrize("shape", [(3,), (5, 7, 3), (1, 56, 56, 64)])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int8"])
def test_aligned_empty_starts_on_a_cache_line(shape, dtype):
    out = buffers.aligned_empty(shape, dtype)
    assert out.shape == shape and out.dtype == np.dtype(dtype)
    assert out.flags.c_contiguous and out.flags.writeable
    assert out.ctypes.data % buffers.CACHE_LINE == 0
    out[...] = 1  # the whole extent is usable memory
    assert out.sum() == out.size


def test_convolve_returns_a_large_dst_on_a_cache_line(rng):
    """The direct kernel streams a dst of 1 MiB or more only on a cache line; convlab
    allocates such a dst there."""
    src = rng.standard_normal((1, 32, 32, 16)).astype(np.float32)
    weights = rng.standard_normal((1, 1, 16, 256)).astype(np.float32)
    dst = convlab.convolve(src, weights, algorithm="direct")
    assert dst.nbytes >= buffers.ALIGN_FROM_BYTES
    assert dst.ctypes.data % buffers.CACHE_LINE == 0
    np.testing.assert_allclose(dst, np.einsum("nhwc,co->nhwo", src, weights[0, 0]),
                               rtol=1e-4, atol=1e-4)
