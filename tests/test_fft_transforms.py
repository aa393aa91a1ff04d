"""The fft strategy's one-axis transforms and pruned multi-axis passes, on every backend
this machine has (ducc0 where installed, SciPy's pocketfft module, public scipy.fft),
against NumPy's FFT in float64."""
from __future__ import annotations

import importlib.util
import math

import numpy as np
import pytest

from convlab.strategies import fft, fft_transforms

BACKENDS = ["installed", "scipy.fft"]
BACKEND_SETTING = pytest.mark.thread_unsafe(reason="swaps the module-wide FFT backend")


@pytest.fixture(params=BACKENDS)
def backend(request, monkeypatch):
    if request.param == "scipy.fft":
        monkeypatch.setattr(fft_transforms, "_module", None)
    return request.param


def _close(got, want, dtype):
    tolerance = 2e-6 if dtype == np.float32 else 1e-12
    scale = max(np.abs(want).max(), 1.0)
    np.testing.assert_allclose(got, want, rtol=0, atol=tolerance * scale * 8)


@BACKEND_SETTING
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("length", [1, 2, 15, 27, 64, 225])
def test_one_axis_transforms_match_numpy(rng, backend, dtype, length):
    complex_dtype = np.result_type(dtype, np.complex64)
    a = rng.standard_normal((3, length, 5)).astype(dtype)
    spectrum = np.empty((3, length // 2 + 1, 5), complex_dtype)
    fft_transforms.r2c(a, 1, spectrum, 2)
    _close(spectrum, np.fft.rfft(a.astype(np.float64), axis=1), dtype)
    z = (rng.standard_normal((4, length)) + 1j * rng.standard_normal((4, length)))
    z = z.astype(complex_dtype)
    for forward in (True, False):
        out = z.copy()
        fft_transforms.c2c(out, 1, forward, out, 1)  # in place
        want = (np.fft.fft(z.astype(np.complex128), axis=1) if forward
                else np.fft.ifft(z.astype(np.complex128), axis=1) * length)
        _close(out, want, dtype)
    before = spectrum.copy()
    real = np.empty_like(a)
    fft_transforms.c2r(spectrum, 1, length, real, 2)
    np.testing.assert_array_equal(spectrum, before)  # the input is left as it was
    _close(real, a.astype(np.float64) * length, dtype)


@BACKEND_SETTING
@pytest.mark.parametrize("shape, box, kept", [
    ((27,), (), [14]),
    ((27, 27), ((6, 20),), [14, 14]),
    ((9, 10, 15), ((0, 6), (3, 9)), [6, 5, 7]),
    ((8, 12), ((0, 8),), [8, 12]),
])
def test_pruned_passes_equal_whole_transforms(rng, backend, shape, box, kept):
    """The forward pass skips lines outside the box (zero there), the inverse pass
    computes the kept positions only: both agree with NumPy's whole transforms there."""
    r = len(shape)
    tiles = np.zeros((*shape, 2, 3), np.float64)
    region = tuple(slice(lo, hi) for lo, hi in box)
    tiles[region] = rng.standard_normal(tiles[region].shape)
    spectrum = np.full((*shape[:-1], shape[-1] // 2 + 1, 2, 3), np.nan, np.complex128)
    fft.forward_transform(tiles, spectrum, region, 1)
    want = np.fft.rfftn(tiles, axes=tuple(range(r)))
    _close(spectrum, want, np.float64)
    out = np.full(tiles.shape, np.nan)
    fft.inverse_transform(spectrum, out, kept, 2)
    lead = tuple(slice(0, k) for k in kept[:-1])
    _close(out[lead], tiles[lead] * np.prod(shape), np.float64)


def test_the_environment_variable_keeps_ducc0_out(monkeypatch):
    monkeypatch.setenv("CONVLAB_FFT_BACKEND", "scipy")
    name, _ = fft_transforms._load()
    assert name in ("scipy-pocketfft", "scipy.fft")
    monkeypatch.delenv("CONVLAB_FFT_BACKEND")
    name, _ = fft_transforms._load()
    assert name == ("ducc0" if importlib.util.find_spec("ducc0") else "scipy-pocketfft")


@BACKEND_SETTING
@pytest.mark.parametrize("shape, axis", [((5, 140, 54, 12), 1), ((5, 140, 54, 12), 2),
                                         ((35, 270, 64), 0), ((2, 3, 1000, 100), 3)])
def test_every_thread_count_gives_the_same_bits(rng, backend, shape, axis):
    """Large enough to be cut into pieces; ducc0's own threads gave other bits at AVX-512."""
    a = rng.standard_normal(shape).astype(np.float32)
    z = (a + 1j * rng.standard_normal(shape)).astype(np.complex64)
    half = list(shape)
    half[axis] = shape[axis] // 2 + 1
    assert len(fft_transforms.line_pieces(z.shape, axis, z.itemsize)[1]) > 1
    results = []
    for threads in (1, 2, 3, 8):
        spectrum = np.empty(half, np.complex64)
        fft_transforms.r2c(a, axis, spectrum, threads)
        lines = np.empty_like(z)
        fft_transforms.c2c(z, axis, True, lines, threads)
        real = np.empty_like(a)
        fft_transforms.c2r(spectrum, axis, shape[axis], real, threads)
        results.append((spectrum, lines, real))
    for other in results[1:]:
        for got, want in zip(other, results[0]):
            np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("shape, axis", [
    ((5, 70, 27, 6), 1), ((1, 1, 9), 2), ((7,), 0), ((3, 1, 50000), 2), ((400, 300), 0),
    ((2000, 700), 1), ((3, 900, 700), 0), ((1080, 541), 0), ((1080, 541), 1)])
def test_line_pieces_cover_the_other_axis_once(shape, axis):
    split, pieces = fft_transforms.line_pieces(shape, axis, 8)
    assert pieces[0][0] == 0 and pieces[-1][1] == shape[split]
    assert all(lo < hi for lo, hi in pieces)
    assert all(a[1] == b[0] for a, b in zip(pieces, pieces[1:]))
    assert split != axis or len(pieces) == 1
    # every piece but the last holds whole batches of lines
    inner = math.prod(shape[k] for k in range(split + 1, len(shape)) if k != axis)
    assert all((hi - lo) * inner % fft_transforms.LINE_BATCH == 0 for lo, hi in pieces[:-1])
