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
from typing import Optional


@functools.lru_cache(maxsize=None)
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
def _cgroup_cpu_quota() -> Optional[float]:
    # Read once per process: the files cost ~20 us per call, more than a small convolution.
    try:
        with open("/sys/fs/cgroup/cpu.max") as f:
            quota, period = f.read().split()[:2]
        if quota != "max":
            return int(quota) / int(period)
    except (OSError, ValueError):
        pass
    try:
        with open("/sys/fs/cgroup/cpu/cpu.cfs_quota_us") as f:
            quota = int(f.read())
        with open("/sys/fs/cgroup/cpu/cpu.cfs_period_us") as f:
            period = int(f.read())
        if quota > 0 and period > 0:
            return quota / period
    except (OSError, ValueError):
        pass
    return None


@functools.lru_cache(maxsize=1)
def _env_threads() -> Optional[int]:
    # Read once, as the OpenMP runtime itself does at start-up; os.environ costs ~3 us a call.
    value = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    if value.isdigit() and int(value) > 0:
        return int(value)
    return None


def effective_threads(threads=None) -> int:
    """Resolve ``threads=`` (None, a positive int, or a negative int counted from the cores).

    ``-1`` means every available core, ``-2`` all but one, as SciPy's ``workers=``.
    """
    if type(threads) is int and threads > 0:
        return threads  # the common explicit form, without the checks below (~1 us)
    cores = available_cores()
    if threads is None:
        from convlab.kernels._runtime import openmp_enabled, openmp_max_threads

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
    return threads
