"""Two exact schedules of one run, tried in turn on a plan's first calls; the faster is kept.

Some runs can cut their work two ways that compute the same result (Winograd's threads
sharing each block of tiles, or taking whole blocks each), and which is faster depends on
the machine more than on anything a rule can read from it: on 56x56 ResNet/GoogLeNet
layers shared blocks ran 0.90-0.97x the per-thread time on a Zen 4 EPYC and 1.3-1.4x it
on a Zen 3 EPYC (bench/results/shared_tiles_2026-11-25.txt,
bench/results/work_split_2026-11-28_zen3-avx2.txt). A plan runs the same problem many
times, so, as its first call times whole algorithms (:mod:`convlab.dispatch.measure`),
its Winograd runs time the two splits where the rule's choice is open: they alternate
(the rule's first, then ABBA, so that warming caches favour neither) for
:data:`TRIALS_EACH` runs each, then keep the one with the lower median time. A one-shot
``convolve`` runs once and follows the rule.
"""
from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable, Hashable

# Timed runs of each schedule before the choice is made.
TRIALS_EACH = 3

# The clock the trials read; tests replace it to make them deterministic.
clock = time.perf_counter


class ScheduleTrials:
    """Per key (a problem and thread count), the timed runs of schedules ``True`` (the
    rule's) and ``False`` (the other) until both have :data:`TRIALS_EACH`, then the choice."""

    __slots__ = ("_lock", "_times", "_choices")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._times: dict[Hashable, dict[bool, list[float]]] = {}
        self._choices: dict[Hashable, bool] = {}

    def choice(self, key: Hashable) -> bool | None:
        """True (the rule's schedule) or False once decided for ``key``, else None."""
        return self._choices.get(key)

    def times(self, key: Hashable) -> dict[bool, list[float]]:
        """The seconds each schedule took on its trial runs for ``key`` (a copy)."""
        with self._lock:
            return {schedule: list(runs)
                    for schedule, runs in self._times.get(key, {}).items()}

    def _next(self, key: Hashable) -> bool:
        done = self._times.setdefault(key, {True: [], False: []})
        count = len(done[True]) + len(done[False])
        # ABBA order from the rule's schedule: True, False, False, True, True, False...
        return ((count + 1) // 2) % 2 == 0

    def run(self, key: Hashable, call: Callable[[bool], object]) -> object:
        """``call(schedule)`` with the decided schedule, or, while undecided, with the next
        one to try, timed and recorded; returns what ``call`` returns."""
        decided = self._choices.get(key)
        if decided is not None:
            return call(decided)
        with self._lock:
            schedule = self._next(key)
        begin = clock()
        result = call(schedule)
        seconds = clock() - begin
        with self._lock:
            runs = self._times[key]  # created by _next
            runs[schedule].append(seconds)
            if key not in self._choices and all(len(r) >= TRIALS_EACH for r in runs.values()):
                self._choices[key] = (statistics.median(runs[True])
                                      <= statistics.median(runs[False]))
        return result
