"""The command line: ``python -m convlab demo|explain|bench ...`` (convlab.cli, the bench's
``parse_args``). The input is the argument list, one argument per line.

``explain`` runs for real (it only parses and estimates); ``demo`` and ``bench`` stop once
their arguments are parsed and resolved, before any timing.
"""
from __future__ import annotations

import contextlib
import io
from unittest import mock

from fuzz_targets import clear_errors_allowed, text_of

from convlab.cli import _bench_args as bench_args, benchmark, demo, main as cli
from convlab.runtime.threads import effective_threads


def arguments(data: bytes):
    text = text_of(data)
    if text.endswith("\n"):
        text = text[:-1]
    return text.split("\n") if text else []


def _demo_arguments_only(threads=None, repeats=5) -> int:
    assert threads is None or type(threads) is int, threads
    assert type(repeats) is int and repeats >= 1, repeats
    effective_threads(threads)  # --threads was accepted, so it must resolve
    return 0


def _bench_arguments_only(argv, prog=None) -> int:
    bench_args.configure(bench_args.parse_args(argv, prog))
    return 0


def one_input(data: bytes) -> None:
    argv = arguments(data)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()), \
            mock.patch.object(demo, "run_demo", _demo_arguments_only), \
            mock.patch.object(benchmark, "main", _bench_arguments_only):
        with clear_errors_allowed(usage_exit=True):
            status = cli.main(argv)
            assert status in (0, 2), f"main({argv!r}) returned {status!r}"
        with clear_errors_allowed(usage_exit=True):
            bench_args.configure(bench_args.parse_args(argv))
