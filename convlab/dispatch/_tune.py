"""``algorithm="tune"``: time the viable candidates once per problem and remember the winner.

Winners live in memory for the process, and, when the user names a file with
:func:`set_tune_cache`, in a JSON file that later processes read back. An entry is keyed
by the problem's description, the thread count and the precision, so a change in any of
them tunes again. ``explain`` shows the tuned times next to the estimates.
"""
from __future__ import annotations

import json
import math
import os
import tempfile
import threading
import time
from typing import Callable

from convlab.problem.params import ConvProblem

# One warm-up run, then this many timed runs; the minimum is kept, since noise only
# ever adds time.
TIMED_RUNS = 2

_lock = threading.Lock()
_entries: dict[str, dict] = {}
_cache_path: str | None = None


def tune_key(problem: ConvProblem, threads: int, precision: str) -> str:
    return f"{problem.describe()} threads={threads} precision={precision}"


def set_tune_cache(path: str | None) -> None:
    """Remember tuned winners in the JSON file ``path`` too (None: in memory only).

    Entries already in the file are loaded now; new ones are written as they are found.
    A file that is not a tune cache raises ``ValueError`` and changes nothing.
    """
    global _cache_path
    with _lock:
        path = None if path is None else os.fspath(path)
        if path is not None and os.path.exists(path):
            _entries.update(_read_cache(path))
        _cache_path = path


def _read_cache(path: str) -> dict[str, dict]:
    """The entries of a cache file, each checked to be what :func:`choose_by_timing`
    writes: ``{key: {"choice": name, "seconds": {name: seconds}}}``."""
    try:
        with open(path, encoding="utf-8") as f:
            stored = json.load(f)
    except (OSError, ValueError, RecursionError) as exc:  # ValueError: bad JSON or UTF-8
        raise ValueError(f"tune cache {path!r} is not a readable JSON file: "
                         f"{type(exc).__name__}: {exc}") from None
    if not isinstance(stored, dict):
        raise ValueError(f"tune cache {path!r} holds {type(stored).__name__}; expected a "
                         f"JSON object")
    for key, entry in stored.items():
        seconds = entry.get("seconds") if isinstance(entry, dict) else None
        if not (isinstance(entry, dict) and isinstance(entry.get("choice"), str)
                and isinstance(seconds, dict)
                and all(type(t) in (int, float) and 0 <= t < math.inf
                        for t in seconds.values())):
            raise ValueError(f"tune cache {path!r}: entry {key!r:.120} is not "
                             f"{{\"choice\": name, \"seconds\": {{name: non-negative "
                             f"finite seconds}}}}")
    return stored


def clear_tune_cache() -> None:
    """Forget every tuned winner held in memory (the file, if any, is left as it is)."""
    with _lock:
        _entries.clear()


def tuned(problem: ConvProblem, threads: int, precision: str) -> dict | None:
    """``{"choice": name, "seconds": {name: time}}`` if this problem was tuned, else None."""
    return _entries.get(tune_key(problem, threads, precision))


def _save() -> None:
    if _cache_path is None:
        return
    folder = os.path.dirname(os.path.abspath(_cache_path))
    handle, temporary = tempfile.mkstemp(dir=folder, suffix=".json")
    with os.fdopen(handle, "w") as f:
        json.dump(_entries, f, indent=1, sort_keys=True)
    os.replace(temporary, _cache_path)  # readers never see a half-written file


def choose_by_timing(problem: ConvProblem, threads: int, precision: str, names,
                     run_once: Callable[[str], None]) -> str:
    """Time ``run_once(name)`` for each candidate name and record the fastest."""
    cached = tuned(problem, threads, precision)
    if cached is not None and cached["choice"] in names:
        return cached["choice"]
    seconds = {}
    for name in names:
        run_once(name)
        best = float("inf")
        for _ in range(TIMED_RUNS):
            start = time.perf_counter()
            run_once(name)
            best = min(best, time.perf_counter() - start)
        seconds[name] = best
    choice = min(seconds, key=seconds.__getitem__)
    with _lock:
        _entries[tune_key(problem, threads, precision)] = {"choice": choice, "seconds": seconds}
        _save()
    return choice
