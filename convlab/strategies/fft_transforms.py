"""One-axis FFTs into caller-owned buffers, for the ``fft`` strategy.

The strategy runs its multi-dimensional transforms axis by axis so that each pass covers
only the lines that hold data (forward) or that the crop keeps (inverse), and writes every
pass into the workspace it keeps between calls: fresh result arrays would page-fault on
every call. Each function takes ``out`` (which may be ``a`` itself for :func:`c2c`) and a
thread count; results do not depend on the thread count (each line is one transform).

Backends, the first found: ``ducc0.fft`` (pocketfft's successor by the same author, with
runtime SIMD dispatch: AVX2 lines of 8 floats where SciPy's build runs 4;
``pip install convlab[fft]``), SciPy's bundled pocketfft module (the same calls, no SIMD
dispatch), and the public ``scipy.fft`` functions with a copy into ``out``.
``CONVLAB_FFT_BACKEND=scipy`` skips ducc0. The backends round differently, each within
the error that :mod:`convlab.strategies.fft` documents.
"""
from __future__ import annotations

import os

import numpy as np
import scipy.fft as sfft


def _load():
    if os.environ.get("CONVLAB_FFT_BACKEND", "").strip().lower() != "scipy":
        try:
            import ducc0.fft as module
            return "ducc0", module
        except ImportError:
            pass
    try:
        from scipy.fft._pocketfft import pypocketfft as module
        return "scipy-pocketfft", module
    except ImportError:
        return "scipy.fft", None


BACKEND, _module = _load()
"""The backend's name (``explain`` and bench files report it)."""


def r2c(a: np.ndarray, axis: int, out: np.ndarray, threads: int) -> np.ndarray:
    """``out`` = the forward real-to-complex transform of ``a`` along ``axis``."""
    if _module is not None:
        return _module.r2c(a, axes=(axis,), forward=True, inorm=0, out=out, nthreads=threads)
    np.copyto(out, sfft.rfft(a, axis=axis, workers=threads))
    return out


def c2c(a: np.ndarray, axis: int, forward: bool, out: np.ndarray,
        threads: int) -> np.ndarray:
    """``out`` = the unscaled complex transform of ``a`` along ``axis`` (``out`` may be
    ``a``: in place)."""
    if _module is not None:
        return _module.c2c(a, axes=(axis,), forward=forward, inorm=0, out=out,
                           nthreads=threads)
    transform = sfft.fft if forward else sfft.ifft
    norm = "backward" if forward else "forward"
    np.copyto(out, transform(a, axis=axis, norm=norm, workers=threads))
    return out


def c2r(a: np.ndarray, axis: int, length: int, out: np.ndarray,
        threads: int) -> np.ndarray:
    """``out`` = the unscaled inverse complex-to-real transform of ``a`` along ``axis``,
    ``length`` real points (``a`` is left unchanged)."""
    if _module is not None:
        return _module.c2r(a, axes=(axis,), lastsize=length, forward=False, inorm=0,
                           out=out, nthreads=threads)
    np.copyto(out, sfft.irfft(a, n=length, axis=axis, norm="forward", workers=threads))
    return out
