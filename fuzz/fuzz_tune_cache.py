"""The tune cache file (``convlab.set_tune_cache``): the input is the file's content.

A file must be refused with a ValueError when it is loaded, or be safe to use: once it is
loaded, looking a problem up, explaining it and tuning it must all work, and a remembered
winner is only ever run where it could have won (it supports the problem and the
precision admits it).
"""
from __future__ import annotations

import atexit
import os
import shutil
import tempfile

import numpy as np
from fuzz_targets import clear_errors_allowed

from convlab.dispatch import _tune as tune, select
from convlab.problem.params import make_problem

# Small problems whose keys the seed files hold, so that the fuzzer starts from entries that
# are looked up: one every algorithm runs, and one Winograd cannot (a 5-tap kernel).
PROBLEMS = (make_problem((1, 6, 6, 4), np.float32, (3, 3, 4, 4), np.float32, None, None),
            make_problem((1, 9, 2), np.float32, (5, 2, 2), np.float32, None, None))
THREADS = 1

_folder = tempfile.mkdtemp(prefix="convlab-fuzz-tune-")
atexit.register(shutil.rmtree, _folder, ignore_errors=True)
_path = os.path.join(_folder, "tune.json")


def keys():
    return [tune.tune_key(problem, THREADS, precision)
            for problem in PROBLEMS for precision in select.PRECISIONS]


def use_the_cache() -> None:
    for problem in PROBLEMS:
        for precision in select.PRECISIONS:
            names = [c.name
                     for c in select.contenders(select.assess(problem, THREADS, precision))]
            entry = tune.tuned(problem, THREADS, precision)
            assert entry is None or isinstance(entry["choice"], str), entry
            try:
                chosen = select.resolve("tune", problem, THREADS, precision)
                assert chosen.name in names, f"tuned {chosen.name} runs; contenders {names}"
            except LookupError:
                pass  # not tuned, or the winner read cannot run here: timed again
            explanation = select.explain_problem(problem, THREADS, precision)
            str(explanation)
            explanation.to_dict()
            choice = tune.choose_by_timing(problem, THREADS, precision, names,
                                           lambda name: None)
            assert choice in names, (choice, names)


def one_input(data: bytes) -> None:
    with open(_path, "wb") as f:
        f.write(data)
    loaded = False
    try:
        with clear_errors_allowed():
            tune.set_tune_cache(_path)
            loaded = True
        if loaded:
            use_the_cache()
    finally:
        tune.set_tune_cache(None)
        tune.clear_tune_cache()
