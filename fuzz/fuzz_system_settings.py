"""What the thread count is read from besides the call: ``OMP_NUM_THREADS`` and the
cgroup CPU quota files (v2 ``cpu.max``, v1 ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``).

Whatever they hold, reading them never raises: a value that is not a positive count is
ignored (None), as the OpenMP runtime and the kernel's own readers do.
"""
from __future__ import annotations

from fuzz_targets import text_of

from convlab.runtime import threads


def one_input(data: bytes) -> None:
    text = text_of(data)
    count = threads._parse_omp_num_threads(text)
    assert count is None or (type(count) is int and count >= 1), (text, count)
    first, _, second = text.partition("\n")
    for quota in (threads._parse_cpu_max(text), threads._parse_cfs_quota(first, second)):
        assert quota is None or (type(quota) is float and 0 < quota < float("inf")), (text,
                                                                                      quota)
