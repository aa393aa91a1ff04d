"""The effective thread count, decided in one place.

Order: the call's ``threads=``; else the OpenMP runtime's limit (which honours
``OMP_NUM_THREADS`` and ``threadpoolctl.threadpool_limits``), capped by the cores this
process may really use (affinity mask and cgroup CPU quota).
"""
from __future__ import annotations

import functools
import math
import numbers
import os

# The kernels take the count as a C int.
MAX_THREADS = 2**31 - 1


@functools.cache
def available_cores() -> int:
    """Cores this process may run on: affinity mask, then any cgroup v2/v1 CPU quota."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    quota = _cgroup_cpu_quota()
    if quota is not None:
        cores = min(cores, max(1, math.ceil(quota)))
    return max(1, cores)


@functools.lru_cache(maxsize=1)
def _cgroup_cpu_quota() -> float | None:
    # Read once per process: the files cost ~20 us per call, more than a small convolution.
    quota = _parse_cpu_max(_read_text("/sys/fs/cgroup/cpu.max"))
    if quota is None:
        quota = _parse_cfs_quota(_read_text("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"),
                                _read_text("/sys/fs/cgroup/cpu/cpu.cfs_period_us"))
    return quota


def _read_text(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read()
    except (OSError, ValueError):  # ValueError: not UTF-8
        return None


def _count(text: str) -> int | None:
    """A plain decimal count ("12"), else None; ``int`` alone would also take "1_2",
    non-ASCII digits, and fail on a long string."""
    text = text.strip()
    if not (text.isascii() and text.isdigit()) or len(text) > 18:
        return None
    return int(text)


def _parse_cpu_max(text: str | None) -> float | None:
    """CPUs a cgroup v2 ``cpu.max`` ("quota period") grants, None for "max" or a file
    that does not read as one."""
    fields = (text or "").split()
    if len(fields) != 2:
        return None
    quota, period = _count(fields[0]), _count(fields[1])
    return quota / period if quota and period else None


def _parse_cfs_quota(quota_text: str | None, period_text: str | None) -> float | None:
    """CPUs granted by cgroup v1's ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us`` (a quota
    of -1: no limit), None when there is no limit or the files do not read as counts."""
    quota, period = _count(quota_text or ""), _count(period_text or "")
    return quota / period if quota and period else None


def _parse_omp_num_threads(value: str) -> int | None:
    """The first level of ``OMP_NUM_THREADS`` ("4" or "4,2"), None when not a positive
    count (the OpenMP runtime ignores such a value too)."""
    count = _count(value.split(",")[0])
    return count if count else None


@functools.lru_cache(maxsize=1)
def _env_threads() -> int | None:
    # Read once, as the OpenMP runtime itself does at start-up; os.environ costs ~3 us a call.
    return _parse_omp_num_threads(os.environ.get("OMP_NUM_THREADS", ""))


def effective_threads(threads=None) -> int:
    """Resolve ``threads=`` (None, a positive int, or a negative int counted from the cores).

    ``-1`` means every available core, ``-2`` all but one, as SciPy's ``workers=``.
    """
    if type(threads) is int and 0 < threads <= MAX_THREADS:
        return threads  # the common explicit form, without the checks below (~1 us)
    cores = available_cores()
    if threads is None:
        from convlab.strategies.kernels._runtime import openmp_enabled, openmp_max_threads

        limit = openmp_max_threads() if openmp_enabled() else cores
        env = _env_threads()
        if env is not None:
            limit = min(limit, env)
        return max(1, min(limit, cores))
    if isinstance(threads, bool) or not isinstance(threads, numbers.Integral):
        raise TypeError(f"threads={threads!r} must be an int or None")
    threads = int(threads)
    if threads == 0:
        raise ValueError("threads=0 is not allowed; expected a positive count, a negative "
                         "count from the available cores (-1 = all), or None")
    if threads < 0:
        resolved = cores + 1 + threads
        if resolved < 1:
            raise ValueError(f"threads={threads} leaves no thread on {cores} available cores")
        return resolved
    if threads > MAX_THREADS:
        raise ValueError(f"threads={threads} is more than the kernels take; expected at most "
                         f"{MAX_THREADS} (more threads than work items are never started)")
    return threads


@functools.lru_cache(maxsize=1)
def blas_controller():
    """convlab's one threadpoolctl controller of the loaded libraries.

    A ThreadpoolController scans every loaded library (milliseconds); getting or setting a
    count on the controllers it found is one C call each (about a microsecond), so the scan
    is made once per process, after the BLAS libraries convlab calls are loaded: SciPy's
    (behind ``cython_blas``) and the scipy-openblas32 build :mod:`convlab.runtime.blas`
    loads privately when it is the one asked for.
    """
    import scipy.linalg  # noqa: F401  (loads SciPy's BLAS)
    from threadpoolctl import ThreadpoolController

    from convlab.runtime import blas

    try:
        if blas.requested() == "scipy-openblas32":
            blas.load_openblas()
    except ValueError:
        pass  # a bad CONVLAB_BLAS is reported where the kernel picks its library
    return ThreadpoolController()


def blas_libraries(path: str | None = None) -> list:
    """The BLAS controllers of :func:`blas_controller`: the library at ``path`` (a real
    path) when given and found; else those with 32-bit-int symbols, since SciPy's
    ``cython_blas`` takes 32-bit ints and a BLAS with 64-bit-int symbols (NumPy's
    ``...64_``) is not the one it calls; else every BLAS."""
    found = [lib for lib in blas_controller().lib_controllers if lib.user_api == "blas"]
    ours = [lib for lib in found
            if path is not None and os.path.realpath(lib.filepath) == path]
    lp64 = [lib for lib in found if "64" not in str(getattr(lib, "_symbol_suffix", ""))]
    return ours or lp64 or found


def blas_limit(threads: int):
    """A context manager holding every loaded BLAS at ``threads`` threads (the libraries of
    :func:`blas_controller`'s one scan)."""
    return blas_controller().limit(limits=threads, user_api="blas")
