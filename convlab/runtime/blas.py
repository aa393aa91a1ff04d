"""Which BLAS library the ``im2col`` kernel multiplies with.

SciPy's ``cython_blas`` is always there, but SciPy 1.17's wheel bundles OpenBLAS 0.3.30,
whose single-thread sgemm is slow on the short, deep products of small images: 49 x 4608
x 512 (ResNet-50 res5a_branch2b) took 4.6-5.3 ms against 3.2-3.6 ms for NumPy's matmul
(OpenBLAS 0.3.31) in the same process, and 3.4-3.6 ms through OpenBLAS 0.3.34. So when
the ``scipy-openblas32`` package (the OpenBLAS build NumPy and SciPy themselves are built
against, with 32-bit integers like ``cython_blas``) is installed, the kernel calls its
``sgemm_``/``dgemm_`` instead.

The library is loaded with ``RTLD_LOCAL``, not by importing ``scipy_openblas32`` (which
loads it into the global namespace, where its symbols would displace SciPy's own BLAS for
every caller in the process), and at one thread (:data:`LOAD_ENVIRONMENT`): the kernel
runs it single-threaded from its own OpenMP threads, so a pool of OpenBLAS workers would
only compete with them. Set ``CONVLAB_BLAS=scipy`` to keep SciPy's BLAS.

The instruction-set cap (:mod:`convlab.runtime.cpu`) reaches this library too: OpenBLAS
picks its kernels once, when it is loaded, from ``OPENBLAS_CORETYPE`` or else the CPU, so
it is loaded with the core of the level in force then (``Haswell`` for avx2, ``Prescott``
for baseline) where that level is below the CPU's. A cap set after the first im2col call
does not change it (``gemm_library["core"]`` says which core runs), and SciPy's own BLAS,
loaded by SciPy, is never capped. An ``OPENBLAS_CORETYPE`` set by the user is left as is.
"""
from __future__ import annotations

import ctypes
import functools
import importlib.util
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

PACKAGE = "scipy_openblas32"
SYMBOL_PREFIX = "scipy_"
ENVIRONMENT = "CONVLAB_BLAS"
CHOICES = ("scipy-openblas32", "scipy")

def _library_file() -> Path | None:
    """The package's shared library, found without importing the package."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    lib_dir = Path(next(iter(spec.submodule_search_locations))) / "lib"
    if not lib_dir.is_dir():
        return None
    files = sorted(p for p in lib_dir.iterdir()
                   if p.name.startswith("libscipy_openblas") and p.suffix in (".so", ".dylib"))
    return files[0] if files else None


def requested() -> str:
    """The library asked for by ``CONVLAB_BLAS`` (default: scipy-openblas32 when installed)."""
    value = os.environ.get(ENVIRONMENT, CHOICES[0]).strip().lower() or CHOICES[0]
    if value not in CHOICES:
        raise ValueError(f"{ENVIRONMENT}={value!r} is not known; expected one of "
                         f"{list(CHOICES)}")
    return value


# OpenBLAS's name for the kernels of each capped level (x86-64: its DYNAMIC_ARCH cores).
CORE_FOR_LEVEL = {"avx2": "Haswell", "baseline": "Prescott"}
CORE_ENVIRONMENT = "OPENBLAS_CORETYPE"
# The variables OpenBLAS reads as it loads to choose its kernels and their cache blocking
# in place of the CPU's own; reports name those set.
KERNEL_ENVIRONMENT = (CORE_ENVIRONMENT, "OPENBLAS_L2_SIZE")


def kernel_settings() -> list[str]:
    """``NAME=value`` for each of :data:`KERNEL_ENVIRONMENT` set in the environment. SciPy's
    own BLAS is an OpenBLAS too and reads the same variables."""
    return [f"{name}={os.environ[name]}" for name in KERNEL_ENVIRONMENT if os.environ.get(name)]


def kernel_source() -> str:
    """What chooses im2col's GEMM kernels in this process, read without loading a library:
    the library a first im2col call loads, followed by :func:`kernel_settings`. Where none
    is set, OpenBLAS chooses by the CPU and the level in force, which a calibration's key
    names already.

    Timings of im2col describe these kernels: with ``OPENBLAS_CORETYPE=Haswell`` on an
    AVX-512 EPYC, ResNet-50's im2col took 46.0 ms against 27.4 ms without
    (bench/results/resnet_50_2026-12-02_epyc-zen5-avx512-openblas-haswell-env.txt)."""
    try:
        library = (CHOICES[0] if requested() == CHOICES[0] and _library_file() is not None
                   else "scipy")
    except ValueError:  # an unknown choice: the first im2col call reports it, a key names it
        library = f"{ENVIRONMENT}={os.environ.get(ENVIRONMENT, '').strip().lower()}"
    return " ".join([library, *kernel_settings()])


# What OpenBLAS reads as it loads, set for that moment only. One thread: loaded with its
# default pool (a worker per further core), the worker kept taking CPU time for a while
# after the load beside the kernel's OpenMP threads; on a 2-core Zen 3 EPYC, the layer
# timed first stalled (a call over 1.5x the median) on 27 of 192 im2col calls and 17 of
# 192 direct calls, against 1 and 0 loaded at one thread
# (bench/results/openblas_pool_2026-12-03_zen3-avx2.txt).
LOAD_ENVIRONMENT = {"OPENBLAS_NUM_THREADS": "1"}


@contextmanager
def _environment(settings: dict[str, str]) -> Iterator[None]:
    """``settings`` in ``os.environ`` inside the block; the previous values after it."""
    before = {name: os.environ.get(name) for name in settings}
    os.environ.update(settings)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _capped_core() -> str | None:
    """The OpenBLAS core for the instruction-set level in force, where that is below the
    CPU's and the user has not chosen a core; else None (OpenBLAS picks by the CPU). Only
    x86-64 has levels above baseline, so elsewhere there is no cap below the CPU's."""
    from convlab.runtime import cpu

    if os.environ.get(CORE_ENVIRONMENT):
        return None
    effective = cpu.effective_isa()
    if effective == cpu.detected_isa():
        return None
    return CORE_FOR_LEVEL.get(effective)


@functools.lru_cache(maxsize=1)
def load_openblas() -> dict[str, object] | None:
    """``{"name", "version", "core", "path", "sgemm", "dgemm"}`` of scipy-openblas32
    (function addresses as ints), loaded once and kept loaded; None when it is not
    installed."""
    path = _library_file()
    if path is None:
        return None
    settings = dict(LOAD_ENVIRONMENT)
    core = _capped_core()
    if core is not None:
        settings[CORE_ENVIRONMENT] = core
    with _environment(settings):
        handle = ctypes.CDLL(str(path), mode=ctypes.RTLD_LOCAL)
    config = getattr(handle, SYMBOL_PREFIX + "openblas_get_config")
    config.restype = ctypes.c_char_p
    corename = getattr(handle, SYMBOL_PREFIX + "openblas_get_corename")
    corename.restype = ctypes.c_char_p
    # convlab is the library's only caller, and the kernel calls it from its own OpenMP
    # threads, one single-threaded GEMM each: at 1 thread between calls, a call finds it
    # there and sets nothing (each set-and-restore cost ~10 us through threadpoolctl on
    # every call). Loaded at 1 thread (LOAD_ENVIRONMENT), it has no pool to set.
    getattr(handle, SYMBOL_PREFIX + "openblas_set_num_threads")(1)
    return {"name": "scipy-openblas32", "version": config().decode(),
            "core": corename().decode(), "path": str(path.resolve()), "handle": handle,
            "sgemm": ctypes.cast(getattr(handle, SYMBOL_PREFIX + "sgemm_"),
                                 ctypes.c_void_p).value,
            "dgemm": ctypes.cast(getattr(handle, SYMBOL_PREFIX + "dgemm_"),
                                 ctypes.c_void_p).value}


def thread_count_reader():
    """A function returning scipy-openblas32's current thread count (a direct call into
    the library loaded by :func:`load_openblas`), or None when it is not loaded."""
    openblas = load_openblas()
    if openblas is None:
        return None
    reader = getattr(openblas["handle"], SYMBOL_PREFIX + "openblas_get_num_threads")
    reader.restype = ctypes.c_int
    reader.argtypes = ()
    return reader


def install(kernel, choice: str | None = None) -> dict[str, str]:
    """Point ``kernel`` (convlab.strategies.kernels._im2col) at the chosen library's GEMMs; returns
    ``{"name", "version", "core", "path"}`` of what it now calls ("core" and "path" are
    None for SciPy's: threadpoolctl finds it by itself)."""
    choice = requested() if choice is None else choice
    if choice not in CHOICES:
        raise ValueError(f"BLAS {choice!r} is not known; expected one of {list(CHOICES)}")
    openblas = load_openblas() if choice == "scipy-openblas32" else None
    if openblas is None:
        kernel.use_gemm(0, 0)
        import scipy

        return {"name": "scipy", "version": f"scipy {scipy.__version__} cython_blas",
                "core": None, "path": None}
    kernel.use_gemm(openblas["sgemm"], openblas["dgemm"])
    return {key: openblas[key] for key in ("name", "version", "core", "path")}
