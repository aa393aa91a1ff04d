"""``python -m convlab <command>``: the demo workload (more commands come with [selection])."""
from __future__ import annotations

import argparse
from typing import Optional, Sequence


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m convlab",
                                     description="N-D convolutions on the CPU.")
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="run the ResNet-50 layers and report speed")
    demo.add_argument("--threads", type=int, default=None, help="threads per call")
    demo.add_argument("--repeats", type=int, default=5, help="timed runs per layer (median)")
    args = parser.parse_args(argv)
    if args.command == "demo":
        from convlab.demo import run_demo

        return run_demo(threads=args.threads, repeats=args.repeats)
    return 2
