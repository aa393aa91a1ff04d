"""Whether im2col's OpenBLAS keeps a pool of worker threads, and what that costs the calls.

convlab loads scipy-openblas32 at one thread (``convlab.runtime.blas.LOAD_ENVIRONMENT``)
and calls it from its own OpenMP threads, one single-threaded GEMM each. Loaded without
that setting, OpenBLAS starts a worker per further core, which it keeps when later set to
one thread. This script times the two side by side: each --processes pair runs one
child process per setting (the order alternating), and each child times --calls
back-to-back calls of a plan per algorithm of --algorithms on every layer, round after
round (--rounds), printing per layer and algorithm the median call, the 90th percentile
and the stalls (calls over 1.5x the median), then its threads and their CPU time. A
worker's cost falls on the calls made soon after the library loads (the first im2col
call), so the layers' order matters: the first named is timed first.

    python bench/openblas_pool.py --suite resnet_50 --layers res2a_branch2b,res3a_branch2c
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from convlab.cli._bench_args import layer_script_parser, select_layers  # noqa: E402
from convlab.cli._bench_tables import machine_lines  # noqa: E402
from convlab.problem import shapes  # noqa: E402

SETTINGS = ("one thread at load", "pool kept")
STALL = 1.5  # a call this many times the median stalled


def thread_ticks() -> dict[str, int]:
    """CPU clock ticks (user + system) of each thread of this process, by thread id."""
    ticks = {}
    for tid in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{tid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        ticks[tid] = int(fields[11]) + int(fields[12])
    return ticks


def child(setting: str, suite: str, layer_names: str, algorithms: list[str], threads: int,
          rounds: int, calls: int) -> dict:
    """Run in a fresh process: every plan's call times, and the threads' CPU ticks."""
    import convlab.runtime.blas as blas

    if setting == SETTINGS[1]:
        blas.LOAD_ENVIRONMENT = {}
    import convlab

    results: dict[str, dict[str, list[float]]] = {}
    before = None
    for layer in select_layers(shapes.load_suite(suite, mb=1), layer_names):
        src, weights, _ = layer.arrays(seed=0)
        plans = {name: convlab.Convolution(weights, threads=threads, algorithm=name,
                                           **layer.convolve_kwargs())
                 for name in algorithms}
        for plan in plans.values():
            plan(src)
        if before is None:
            before = thread_ticks()
        times: dict[str, list[float]] = {name: [] for name in plans}
        for _ in range(rounds):
            for name, plan in plans.items():
                for _ in range(calls):
                    start = time.perf_counter()
                    plan(src)
                    times[name].append(time.perf_counter() - start)
        results[layer.name] = times
    after = thread_ticks()
    return {"times": results,
            "ticks": sorted((after[t] - (before or {}).get(t, 0) for t in after),
                            reverse=True)}


def summary(times: list[float]) -> tuple[float, float, int]:
    median = statistics.median(times)
    ranked = sorted(times)
    return (median, ranked[int(0.9 * (len(ranked) - 1))],
            sum(t > STALL * median for t in times))


def main(argv=None) -> None:
    parser = layer_script_parser(__doc__.splitlines()[0], rounds=6)
    parser.add_argument("--algorithms", default="im2col,direct")
    parser.add_argument("--calls", type=int, default=8)
    parser.add_argument("--processes", type=int, default=3,
                        help="pairs of child processes, one per setting each")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    algorithms = [a.strip() for a in args.algorithms.split(",") if a.strip()]
    if args.child is not None:
        print(json.dumps(child(args.child, args.suite, args.layers, algorithms, args.threads,
                               args.rounds, args.calls)))
        return
    print("command: python bench/openblas_pool.py " + " ".join(sys.argv[1:] if argv is None
                                                                else argv))
    for line in machine_lines():
        print(line)
    base = [sys.executable, os.path.abspath(__file__), "--suite", args.suite, "--layers",
            args.layers, "--algorithms", ",".join(algorithms), "--threads",
            str(args.threads), "--rounds", str(args.rounds), "--calls", str(args.calls)]
    pooled: dict[str, dict[str, dict[str, list[float]]]] = {s: {} for s in SETTINGS}
    # a first process, not counted: the first of a run met stalls under either setting
    subprocess.run(base + ["--child", SETTINGS[0]], capture_output=True, check=True)
    for pair in range(args.processes):
        for setting in SETTINGS if pair % 2 == 0 else SETTINGS[::-1]:
            done = subprocess.run(base + ["--child", setting], capture_output=True,
                                  text=True, check=True)
            result = json.loads(done.stdout.strip().splitlines()[-1])
            ticks = " ".join(str(t) for t in result["ticks"])
            print(f"process {pair + 1}, {setting}: {len(result['ticks'])} threads, CPU ticks "
                  f"each while timing: {ticks}")
            for layer, times in result["times"].items():
                for name, runs in times.items():
                    pooled[setting].setdefault(layer, {}).setdefault(name, []).extend(runs)
                    median, p90, stalls = summary(runs)
                    print(f"  {layer} {name}: median {median * 1e6:.0f} us, 90th percentile "
                          f"{p90 * 1e6:.0f} us, stalls {stalls}/{len(runs)}")
    print(f"all processes (stall: a call over {STALL}x the median):")
    for layer in pooled[SETTINGS[0]]:
        for name in algorithms:
            parts = []
            for setting in SETTINGS:
                median, p90, stalls = summary(pooled[setting][layer][name])
                parts.append(f"{setting}: median {median * 1e6:.0f} us, 90th percentile "
                             f"{p90 * 1e6:.0f} us, stalls {stalls}/"
                             f"{len(pooled[setting][layer][name])}")
            print(f"  {layer} {name}: " + "; ".join(parts))


if __name__ == "__main__":
    main()
