"""``python -m convlab <command>``: the demo workload (more commands come with [selection])."""
from __future__ import annotations

import argparse
from typing import Optional, Sequence


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be >= 1")
    return value


def _thread_count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    from convlab.threads import effective_threads

    try:
        effective_threads(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return value


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m convlab",
                                     description="N-D convolutions on the CPU.")
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser(
        "demo", help="run the ResNet-50 layers and report speed",
        description="Time convlab on the ResNet-50 convolutions (batch 1, float32) against a "
                    "plain NumPy implementation, after checking it against the reference.")
    demo.add_argument("--threads", type=_thread_count, default=None,
                      help="threads per call (default: the effective core count; negative "
                           "counts from the available cores, -1 = all)")
    demo.add_argument("--repeats", type=_positive_int, default=5,
                      help="timed runs per layer, the median is shown (default: 5)")
    args = parser.parse_args(argv)
    if args.command == "demo":
        from convlab.demo import run_demo

        return run_demo(threads=args.threads, repeats=args.repeats)
    return 2
