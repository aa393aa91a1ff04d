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


def test_staging_reuses_a_slots_memory_within_a_thread():
    first = buffers.staging("test-slot", (4, 5), np.float32)
    assert first.ctypes.data % buffers.CACHE_LINE == 0 and first.flags.c_contiguous
    first[...] = 1
    again = buffers.staging("test-slot", (2, 3), np.float64)  # smaller: the same memory
    assert again.ctypes.data == first.ctypes.data
    other = buffers.staging("another-slot", (4, 5), np.float32)
    assert not np.shares_memory(other, first)
    larger = buffers.staging("test-slot", (64, 64), np.float32)
    assert larger.shape == (64, 64) and larger.ctypes.data % buffers.CACHE_LINE == 0
    larger[...] = 2  # the whole extent is usable memory
    assert larger.sum() == 2 * larger.size


def test_staging_gives_each_thread_its_own_memory():
    import threading
    seen = {}
    both_asked = threading.Barrier(2)

    def ask(name):
        seen[name] = buffers.staging("test-thread-slot", (8, 8), np.float32).ctypes.data
        if name != "main":
            both_asked.wait(timeout=30)  # neither thread ends (freeing its memory) before

    ask("main")  # kept by this thread, which outlives the others
    threads = [threading.Thread(target=ask, args=(name,)) for name in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(seen.values())) == 3


def test_staging_keeps_nothing_above_its_limit(monkeypatch):
    monkeypatch.setattr(buffers, "STAGING_MAX_BYTES", 1024)
    big = buffers.staging("test-big-slot", (512,), np.float32)
    again = buffers.staging("test-big-slot", (512,), np.float32)
    assert big.ctypes.data % buffers.CACHE_LINE == 0
    assert not np.shares_memory(big, again)


def _off_a_cache_line(values: np.ndarray) -> np.ndarray:
    """A C-contiguous copy of ``values`` starting 16 bytes past a cache line."""
    step = 16 // values.itemsize
    raw = buffers.aligned_empty((values.size + step,), values.dtype)
    out = raw[step:step + values.size].reshape(values.shape)
    out[...] = values
    assert out.ctypes.data % buffers.CACHE_LINE == 16
    return out


@pytest.mark.parametrize("dtype", ["float32", "float64", "int8", "complex64"])
def test_aligned_copy_is_an_equal_copy_on_a_cache_line(rng, dtype):
    values = _off_a_cache_line((rng.standard_normal((3, 5, 7)) * 50).astype(dtype))
    copy = buffers.aligned_copy(values[:, ::2])  # strided: any layout is copied
    assert copy.ctypes.data % buffers.CACHE_LINE == 0 and copy.flags.c_contiguous
    np.testing.assert_array_equal(copy, values[:, ::2])
    assert not np.shares_memory(copy, values)
    objects = buffers.aligned_copy(np.array([1, "a"], dtype=object))
    assert objects.tolist() == [1, "a"]


def test_aligned_contiguous_copies_only_what_is_off_a_cache_line(rng):
    values = rng.standard_normal((4, 64)).astype(np.float32)
    aligned = buffers.aligned_copy(values)
    assert buffers.aligned_contiguous(aligned) is aligned
    moved = buffers.aligned_contiguous(_off_a_cache_line(values))
    assert moved.ctypes.data % buffers.CACHE_LINE == 0
    np.testing.assert_array_equal(moved, values)


def test_plans_keep_direct_weights_on_a_cache_line(rng):
    """The direct kernel ran 15% slower on dense weights 16 bytes off a cache line; a plan
    copies the weights anyway, so it keeps them on one whatever the caller's alignment."""
    from convlab.strategies import direct
    src = rng.standard_normal((1, 8, 8, 32)).astype(np.float32)
    weights = _off_a_cache_line(rng.standard_normal((1, 1, 32, 64)).astype(np.float32))
    expected = convlab.reference.convolve(src, weights)
    plans, spacers = [], []
    for size in range(1, 13):  # NumPy's allocations start 16 bytes apart: one in four fits
        plans.append(convlab.Convolution(weights, algorithm="direct"))
        np.testing.assert_allclose(plans[-1](src), expected, rtol=1e-4, atol=1e-4)
        spacers.append(np.empty(size * 4, np.float32))
    for plan in plans:
        prepared = [p for p in plan._prepared.values() if isinstance(p, direct.PreparedWeights)]
        assert len(prepared) == 1 and prepared[0].array.ctypes.data % buffers.CACHE_LINE == 0
