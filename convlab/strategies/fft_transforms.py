"""One-axis FFTs into caller-owned buffers, for the ``fft`` strategy.

The strategy runs its multi-dimensional transforms axis by axis so that each pass covers
only the lines that hold data (forward) or that the crop keeps (inverse), and writes every
pass into the workspace it keeps between calls: fresh result arrays would page-fault on
every call. Each function takes ``out`` (which may be ``a`` itself for :func:`c2c`) and a
thread count.

Results do not depend on the thread count. A backend's own threads would not give that:
ducc0 transforms lines in SIMD batches, and how its threads divide the lines decides
which lines fall in a batch and which in the remainder, computed another way (at AVX-512,
1 and 2 threads differed in the last bit on 13% of a convolution's outputs). So every
call is cut into pieces of about LINE_CHUNK_BYTES along an axis other than the
transformed one, fixed by the shapes alone, and the pieces are transformed one thread
each on this module's pool (:func:`run_parallel`), which the ``fft`` strategy's other
stages share.

Backends, the first found: ``ducc0.fft`` (pocketfft's successor by the same author, with
runtime SIMD dispatch: AVX2 lines of 8 floats where SciPy's build runs 4;
``pip install convlab[fft]``), SciPy's bundled pocketfft module (the same calls, no SIMD
dispatch), and the public ``scipy.fft`` functions with a copy into ``out``.
``CONVLAB_FFT_BACKEND=scipy`` skips ducc0. The backends round differently, each within
the error that :mod:`convlab.strategies.fft` documents.
"""
from __future__ import annotations

import math
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import scipy.fft as sfft

from convlab.runtime.threads import available_cores


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


# Bytes of input per piece of a transform call (see the module's docstring): a 1080 x 541
# complex transform along either axis ran 1.3-1.6x slower in 256 KiB pieces than whole, in
# 1 MiB pieces within the noise of whole (one thread, Intel Xeon family 6 model 207).
LINE_CHUNK_BYTES = 2**20
# Pieces hold a multiple of this many lines on the axis they are cut along: the widest
# batch of float32 lines a backend transforms at once (16 at AVX-512), so that no piece
# leaves a remainder that a whole call would not.
LINE_BATCH = 16

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=max(1, available_cores() - 1),
                                       thread_name_prefix="convlab-fft")
        return _pool


def run_parallel(work, chunks, threads: int) -> None:
    """``work(*chunk)`` on every chunk, on up to ``threads`` threads (the caller is one of
    them), each taking the next chunk not yet taken.

    A helper that has not started when the caller runs out of chunks is cancelled rather
    than waited for: on a busy machine waking a pool thread took milliseconds (4 ms a
    call, a 48x48, 16-channel layer at load 6), more than a small layer's contraction.
    Which thread computes a chunk does not change its result.
    """
    threads = max(1, min(threads, len(chunks)))
    if threads == 1:
        for chunk in chunks:
            work(*chunk)
        return
    pending = iter(chunks)
    lock = threading.Lock()

    def drain():
        while True:
            with lock:
                chunk = next(pending, None)
            if chunk is None:
                return
            work(*chunk)

    helpers = [_executor().submit(drain) for _ in range(threads - 1)]
    try:
        drain()
    finally:
        for helper in helpers:
            if not helper.cancel():
                helper.result()


def line_pieces(shape: tuple, axis: int, itemsize: int) -> tuple[int, list[tuple[int, int]]]:
    """The axis that a transform along ``axis`` of an array of ``shape`` is cut along, and
    the (start, stop) pieces on it: about LINE_CHUNK_BYTES each, each a multiple of
    LINE_BATCH lines where the split allows, on the outermost axis long enough for that many
    pieces (else the longest); a function of the shape alone."""
    others = [k for k in range(len(shape)) if k != axis and shape[k] > 1]
    if not others:
        return axis, [(0, shape[axis])]
    wanted = max(1, -(-itemsize * math.prod(shape) // LINE_CHUNK_BYTES))
    split = next((k for k in others if shape[k] >= wanted),
                 max(others, key=lambda k: shape[k]))
    # lines per index of the split axis (a backend runs the lines in row-major order)
    inner = math.prod(shape[k] for k in range(split + 1, len(shape)) if k != axis)
    unit = LINE_BATCH // math.gcd(LINE_BATCH, inner)
    units = -(-shape[split] // unit)
    count = min(wanted, units)
    bounds = [min(shape[split], units * i // count * unit) for i in range(count + 1)]
    return split, list(zip(bounds[:-1], bounds[1:]))


def _in_pieces(transform, a: np.ndarray, axis: int, out: np.ndarray, threads: int) -> None:
    """``transform(piece of a, piece of out)`` on the pieces of :func:`line_pieces`, shared
    by up to ``threads`` threads."""
    split, pieces = line_pieces(a.shape, axis, a.itemsize)
    if len(pieces) == 1:
        transform(a, out)
        return

    def work(lo, hi):
        box = (slice(None),) * split + (slice(lo, hi),)
        transform(a[box], out[box])

    run_parallel(work, pieces, threads)


def r2c(a: np.ndarray, axis: int, out: np.ndarray, threads: int) -> np.ndarray:
    """``out`` = the forward real-to-complex transform of ``a`` along ``axis``."""
    def transform(a, out):
        if _module is not None:
            _module.r2c(a, axes=(axis,), forward=True, inorm=0, out=out, nthreads=1)
        else:
            np.copyto(out, sfft.rfft(a, axis=axis))

    _in_pieces(transform, a, axis, out, threads)
    return out


def c2c(a: np.ndarray, axis: int, forward: bool, out: np.ndarray,
        threads: int) -> np.ndarray:
    """``out`` = the unscaled complex transform of ``a`` along ``axis`` (``out`` may be
    ``a``: in place)."""
    def transform(a, out):
        if _module is not None:
            _module.c2c(a, axes=(axis,), forward=forward, inorm=0, out=out, nthreads=1)
        elif forward:
            np.copyto(out, sfft.fft(a, axis=axis, norm="backward"))
        else:
            np.copyto(out, sfft.ifft(a, axis=axis, norm="forward"))

    _in_pieces(transform, a, axis, out, threads)
    return out


def c2r(a: np.ndarray, axis: int, length: int, out: np.ndarray,
        threads: int) -> np.ndarray:
    """``out`` = the unscaled inverse complex-to-real transform of ``a`` along ``axis``,
    ``length`` real points (``a`` is left unchanged)."""
    def transform(a, out):
        if _module is not None:
            _module.c2r(a, axes=(axis,), lastsize=length, forward=False, inorm=0, out=out,
                        nthreads=1)
        else:
            np.copyto(out, sfft.irfft(a, n=length, axis=axis, norm="forward"))

    _in_pieces(transform, a, axis, out, threads)
    return out
