"""Timing calls on a shared machine: blocks of back-to-back calls after an idle pause,
and rotations of several calls sharing a block. The bench (:mod:`convlab.cli.benchmark`),
:func:`convlab.calibrate` and the scripts in ``bench/`` time with these."""
from __future__ import annotations

import math
import random
import statistics
import time
from collections.abc import Sequence
from typing import Callable

# Pause before each contender's block of runs (see bench_layer): longer than the spin
# periods of libgomp (about 0.3 ms by default) and OpenBLAS. Pools that spin longer are
# waited out by settle().
IDLE_SECONDS = 0.05

# settle() waits in slices of this many seconds until the process uses less than
# QUIET_SHARE of one core over a slice, for at most MAX_SETTLE_SECONDS after the pause.
# ONNX Runtime's intra-op workers spin on after a run by default: its process used 40-60 ms
# of CPU in the 100 ms after a 2 ms Conv run, and up to 20 ms in the 100 ms after a 50 ms
# pause (2 intra-op threads, AMD EPYC), time the next contender's block would share.
SETTLE_SLICE_SECONDS = 0.005
QUIET_SHARE = 0.05
MAX_SETTLE_SECONDS = 1.0


def settle(pause: float = IDLE_SECONDS, quiet: bool = True) -> None:
    """Sleep ``pause`` seconds, then (``quiet``) on until no thread of this process is
    spinning, for at most MAX_SETTLE_SECONDS more: what a block waits for before it
    starts. ``pause`` 0 returns at once."""
    if pause <= 0:
        return
    time.sleep(pause)
    if not quiet:
        return
    deadline = time.perf_counter() + MAX_SETTLE_SECONDS
    while True:
        cpu, wall = time.process_time(), time.perf_counter()
        time.sleep(SETTLE_SLICE_SECONDS)
        now = time.perf_counter()
        if time.process_time() - cpu < QUIET_SHARE * (now - wall) or now > deadline:
            return


# Most calls one block takes when min_seconds asks for more than ``repeats``.
MAX_BLOCK_REPEATS = 2000


def _warm_up(pause: float, quiet: bool, calls, repeats: int, min_seconds: float) -> int:
    """A block's start: the pause, one untimed call of each; then the rounds it runs,
    ``repeats`` or as many as take about ``min_seconds`` judged by that untimed round (at
    most MAX_BLOCK_REPEATS), whichever is more."""
    settle(pause, quiet)
    start = time.perf_counter()
    for call in calls:
        call()
    first = time.perf_counter() - start
    if min_seconds > 0:
        repeats = max(repeats, min(MAX_BLOCK_REPEATS, math.ceil(min_seconds / max(first, 1e-7))))
    return repeats


def time_block(call: Callable[[], object], repeats: int, pause: float = IDLE_SECONDS,
               min_seconds: float = 0.0, quiet: bool = True) -> list[float]:
    """Seconds of back-to-back calls, after a pause and one untimed call: ``repeats`` of
    them, or as many as take about ``min_seconds`` (judged by the untimed call, at most
    MAX_BLOCK_REPEATS), whichever is more. Tiny layers then get enough calls for a
    steady median.

    The pause lets the previous contender's thread pool go idle: OpenMP and OpenBLAS
    workers spin for a while after a call, and on 2 cores a spinning pool of another
    library slowed the next call 2-20x when contenders alternated call by call. With
    ``quiet`` the block also waits for pools that spin longer (:func:`settle`).
    """
    repeats = _warm_up(pause, quiet, [call], repeats, min_seconds)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return times


def time_rotation(calls: Sequence[Callable[[], object]], repeats: int,
                  pause: float = IDLE_SECONDS, min_seconds: float = 0.0,
                  seed: int = 0, quiet: bool = True) -> list[list[float]]:
    """:func:`time_block` for several calls sharing one block: after the pause and one
    untimed call of each, ``repeats`` rounds (or as many as take about ``min_seconds``)
    of one timed call each, in a fresh random order every round. Each timed call follows
    an untimed call of itself, as in a block of its own: a call that followed another
    contender's inherited its caches (after a Winograd call on a depthwise layer, the
    direct kernel ran 2.3x slower), and with a few rounds per block the random order put
    one contender behind the slow ones more often than another (auto 2x slower than the
    direct kernel it runs, on MobileNet conv6/dw). Seconds per timed call; a call alone
    is timed as :func:`time_block` times it, since it follows itself anyway."""
    if len(calls) == 1:
        return [time_block(calls[0], repeats, pause, min_seconds, quiet)]
    repeats = _warm_up(pause, quiet, calls, repeats, min_seconds)
    shuffle = random.Random(seed).shuffle
    order = list(range(len(calls)))
    times: list[list[float]] = [[] for _ in calls]
    for _ in range(repeats):
        shuffle(order)
        for index in order:
            calls[index]()
            start = time.perf_counter()
            calls[index]()
            times[index].append(time.perf_counter() - start)
    return times


def medians_under_settings(call: Callable[[], object], settings: Sequence,
                           apply: Callable[[object], object], rounds: int,
                           min_seconds: float) -> dict:
    """The median seconds of ``call`` under each setting: ``rounds`` blocks of at least
    ``min_seconds`` per setting, ``apply(setting)`` before each, the settings in turns
    whose order reverses every round. No pause between blocks: every block runs the same
    code, so no other pool is left spinning (the A/B scripts in ``bench/``)."""
    times: dict = {setting: [] for setting in settings}
    for index in range(rounds):
        for setting in settings if index % 2 == 0 else settings[::-1]:
            apply(setting)
            times[setting] += time_block(call, 1, pause=0.0, min_seconds=min_seconds)
    return {setting: statistics.median(values) for setting, values in times.items()}


def fastest_in_rounds(calls: dict[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    """Each call's fastest of ``repeats`` timed runs, after one untimed run each, the calls
    taking turns (round robin): a burst of load from other processes then slows every
    contender alike instead of all the runs of one."""
    for call in calls.values():
        call()
    best = dict.fromkeys(calls, math.inf)
    for _ in range(repeats):
        for name, call in calls.items():
            start = time.perf_counter()
            call()
            best[name] = min(best[name], time.perf_counter() - start)
    return best
