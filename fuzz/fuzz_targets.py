"""The fuzz targets: one function per parser that takes raw bytes and must not fail badly.

Each target's ``one_input(data)`` feeds ``data`` to a parser the way a user could (a
descriptor, a command line, a cache file) and returns normally, or raises a *clear error*:
``ValueError``, ``TypeError`` or ``OSError`` with a message, or the ``SystemExit`` of a
command-line usage error. Anything else escaping is a bug for the fuzzer to report.

    python fuzz/run.py descriptor -max_total_time=600      # coverage-guided, needs atheris
    python -m pytest tests/test_fuzz_corpus.py             # the seed corpora, no atheris

To add a target: a module here with ``one_input(data: bytes) -> None``, one line in
``TARGETS``, and a few seed files in ``tests/data/fuzz/<name>/``.
"""
from __future__ import annotations

import contextlib
import importlib
import os
import sys

# target name -> module in this folder that defines one_input(data: bytes)
TARGETS = {
    "descriptor": "fuzz_descriptor",
    "cli": "fuzz_cli",
    "tune_cache": "fuzz_tune_cache",
    "system_settings": "fuzz_system_settings",
}

CLEAR_ERRORS = (ValueError, TypeError, OSError)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def corpus_dir(name: str) -> str:
    """The seed corpus of a target, kept with the test data."""
    return os.path.join(ROOT, "tests", "data", "fuzz", name)


def load(name: str):
    """The one-input function of target ``name``."""
    if name not in TARGETS:
        raise ValueError(f"fuzz target {name!r} is not known; expected one of {sorted(TARGETS)}")
    for folder in (ROOT, HERE):  # convlab from this checkout, targets from this folder
        if folder not in sys.path:
            sys.path.insert(0, folder)
    return importlib.import_module(TARGETS[name]).one_input


def text_of(data: bytes) -> str:
    """Bytes as the text a user could type or a file could hold (invalid UTF-8 replaced)."""
    return data.decode("utf-8", errors="replace")


@contextlib.contextmanager
def clear_errors_allowed(usage_exit: bool = False):
    """Let a clear error through silently; turn an unclear one into an AssertionError.

    ``usage_exit``: a command line's ``SystemExit`` counts as clear too when it is argparse's
    usage error (2), the end of ``--help`` (0) or carries a message (how the command line
    reports a bad value).
    """
    try:
        yield
    except CLEAR_ERRORS as exc:
        if not str(exc).strip():
            raise AssertionError(f"{type(exc).__name__} without a message") from exc
    except SystemExit as exc:
        if not usage_exit:
            raise AssertionError(f"SystemExit({exc.code!r}) from a library call") from exc
        if exc.code not in (0, 2) and not (isinstance(exc.code, str) and exc.code.strip()):
            raise AssertionError(f"SystemExit({exc.code!r}) is neither a usage error (2), "
                                 f"--help (0) nor a message") from exc
