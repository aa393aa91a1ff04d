"""The fft strategy's one-axis transforms and pruned multi-axis passes, on every backend
this machine has (ducc0 where installed, SciPy's pocketfft module, public scipy.fft),
against NumPy's FFT in float64."""
from __future__ import annotations

import importlib.util

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
