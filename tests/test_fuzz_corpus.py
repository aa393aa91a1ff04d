"""Every fuzz target's seed corpus, run as plain tests (atheris not needed).

Each seed must be parsed or refused with a clear error (see fuzz/fuzz_targets.py); the
``regression_*`` seeds are inputs the fuzzers once found mishandled.
"""
from __future__ import annotations

import os
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "fuzz"))

import fuzz_targets  # noqa: E402

SEEDS = [(target, path.name)
         for target in sorted(fuzz_targets.TARGETS)
         for path in sorted(pathlib.Path(fuzz_targets.corpus_dir(target)).iterdir())]


def test_every_target_has_seeds():
    for target in fuzz_targets.TARGETS:
        assert any(t == target for t, _ in SEEDS), f"no seeds for fuzz target {target!r}"


@pytest.mark.parametrize("target, seed", SEEDS)
def test_seed(target, seed):
    one_input = fuzz_targets.load(target)
    with open(os.path.join(fuzz_targets.corpus_dir(target), seed), "rb") as f:
        one_input(f.read())
