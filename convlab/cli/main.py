"""``python -m convlab <command>``: ``demo`` (the main job), ``explain``, ``bench`` and
``calibrate``.

    python -m convlab demo [--threads N] [--repeats N]
    python -m convlab calibrate [--budget S] [--threads N]
    python -m convlab explain "mb1ic64ih56oc64oh56kh3ph1n\"resnet_50:res2a_branch2b\"" [--threads N]
    python -m convlab bench --suite resnet_50 [--mb N] [--threads N]
"""
from __future__ import annotations

import argparse
import math
import os
import time
from collections.abc import Sequence

from convlab.cli._args import refuse_empty_values


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
    from convlab.runtime.threads import effective_threads

    try:
        effective_threads(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return value


# Rounds whose median slowdowns (run.DesignTimings.round_slowdowns) lie further apart
# than this mean load came and went while the calibration timed.
BUSY_ROUND_SPREAD = 1.2


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text} must be a positive number of seconds")
    return value


def main(argv: Sequence[str] | None = None) -> int:
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
    explain = commands.add_parser(
        "explain", help="explain the algorithm choice for a benchdnn problem descriptor",
        description="Parse a oneDNN benchdnn convolution descriptor (e.g. "
                    "mb1ic64ih56oc64oh56kh3ph1) and show every algorithm's verdict and "
                    "estimate, and the choice.")
    explain.add_argument("descriptor", help="benchdnn descriptor; dilation is 0-based there")
    explain.add_argument("--mb", type=_positive_int, default=None,
                         help="override the descriptor's minibatch")
    explain.add_argument("--threads", type=_thread_count, default=None,
                         help="thread count to explain for (default: effective core count)")
    explain.add_argument("--precision", choices=["default", "highest"], default="default")
    calibrate = commands.add_parser(
        "calibrate", help="fit the algorithm selector's cost constants to this machine",
        description="Time every algorithm on a designed set of problems and fit the cost "
                    "constants that 'auto' chooses by; they are stored in the user's cache "
                    "directory ($CONVLAB_CACHE_DIR overrides it) for this CPU, ISA level, "
                    "thread count, BLAS kernels and convlab version, and used from then on.")
    calibrate.add_argument("--budget", type=_seconds, default=60.0,
                           help="wall-time budget in seconds, start-up included (default: 60)")
    calibrate.add_argument("--threads", type=_thread_count, default=None,
                           help="thread count to calibrate for (default: the effective core "
                                "count)")
    commands.add_parser(
        "bench", add_help=False,
        help="time every algorithm (and PyTorch/ONNX Runtime when installed) on a suite; "
             "see 'python -m convlab bench --help'")
    args, rest = parser.parse_known_args(argv)
    if args.command != "bench":
        refuse_empty_values(commands.choices[args.command], args)
    if args.command == "bench":
        from convlab.cli.benchmark import main as bench_main

        return bench_main(rest, prog="python -m convlab bench")
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    if args.command == "demo":
        from convlab.cli.demo import run_demo

        return run_demo(threads=args.threads, repeats=args.repeats)
    if args.command == "explain":
        return _explain(args)
    if args.command == "calibrate":
        return _calibrate(args)
    return 2


def _seconds_since_start() -> float:
    """Wall time since this process started (interpreter start-up and imports), from
    /proc where there is one; elsewhere the CPU time so far, which start-up mostly is."""
    try:
        with open("/proc/self/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return max(0.0, uptime - int(fields[19]) / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return time.process_time()


def _calibrate(args) -> int:
    import convlab
    from convlab.dispatch import cost_model

    budget = args.budget - _seconds_since_start()
    try:
        result = convlab.calibrate(budget, args.threads)
    except (ValueError, RuntimeError) as exc:
        print(f"error: {exc}")
        return 2
    provenance = result.provenance
    print(result)
    print(f"key: {result.key}")
    for name, by_threads in provenance["residuals"].items():
        for r in by_threads.values():
            print(f"  {name:10s} {r['timings']:3d} timings, estimate/measured median "
                  f"{r['median_ratio']:.2f}, 10-90% {r['p10_ratio']:.2f}-{r['p90_ratio']:.2f}")
    labels = {"calibrated": "the calibrated constants (in sample)",
              "calibrated_held_out": "the calibrated fit, each problem held out of it",
              "shipped": "the shipped constants"}
    for label, regret in provenance["regret"].items():
        if regret.get("cases"):
            print(f"  regret with {labels.get(label, label)}: geo-mean "
                  f"{regret['geo_mean']:.3f}, worst {regret['worst']:.2f} over "
                  f"{regret['cases']} cases")
    paired = provenance.get("shipped_over_held_out") or {}
    if paired.get("cases") and paired.get("standard_error") is not None:
        print(f"  shipped picks' regret over the held-out fit's, case by case: "
              f"{math.exp(paired['mean']):.3f}x geo-mean (standard error "
              f"{paired['standard_error']:.3f} in log) over {paired['cases']} cases")
    if provenance.get("kept_shipped_set"):
        print("  the shipped constants' picks regret less on these timings than the fit's "
              "held out, case by case and beyond the spread between cases: the shipped set "
              "is kept for this machine")
    load, slowdowns = provenance["load_average"][0], provenance["round_slowdowns"]
    rounds_apart = max(slowdowns) / min(slowdowns) if len(slowdowns) > 1 else 1.0
    print(f"  each round's time over the contenders' medians (median over contenders): "
          f"{', '.join(f'{x:.2f}' for x in slowdowns)}")
    if (load is not None and load > provenance["cores"]) or rounds_apart > BUSY_ROUND_SPREAD:
        print(f"  warning: the machine was busy (load average {load}, {provenance['cores']} "
              f"cores; rounds {rounds_apart:.2f}x apart): the constants fit that load; run "
              f"it again when the machine is quiet")
    if provenance["skipped_problems"]:
        print(f"  left out for the budget: {', '.join(provenance['skipped_problems'])}")
    print(f"constants now in force: {cost_model.describe_constants(result.key['threads'])}")
    return 0


def _explain(args) -> int:
    from convlab.dispatch import select
    from convlab.problem import shapes
    from convlab.runtime.threads import effective_threads

    try:
        layer = shapes.parse_descriptor(args.descriptor)
        problem = layer.problem(mb=args.mb)  # sizes beyond what convlab computes are refused
    except ValueError as exc:
        print(f"error: descriptor: {exc}")
        return 2
    print(f"descriptor: {layer.canonical()}")
    print(select.explain_problem(problem, effective_threads(args.threads), args.precision))
    return 0
