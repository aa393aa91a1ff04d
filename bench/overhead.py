"""What convlab's Python layer costs per call: the selector, a one-shot call, a plan call.

    python bench/overhead.py

For a small layer (default 1x8x8x16 -> 16, 3x3 pads 1, float32) it times, as medians of
many calls:

- ``select.choose`` on a problem seen before (auto's cached choice) and on a fresh problem
  (every cost hook runs);
- the chosen strategy's ``run`` on canonical arrays with prepared weights: the kernel alone;
- a plan call ``plan(src)`` and a one-shot ``convolve``, and their ratios to the kernel.
"""
from __future__ import annotations

import argparse
import pathlib
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

import convlab  # noqa: E402
from convlab.dispatch import registry, select  # noqa: E402
from convlab.problem import params  # noqa: E402
from convlab.runtime.threads import effective_threads  # noqa: E402


def per_call(function, calls, rounds=9):
    """Median over rounds of the mean time per call, in seconds."""
    means = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            function()
        means.append((time.perf_counter() - start) / calls)
    return statistics.median(means)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="1,8,8,16", help="src N,H,W,IC")
    parser.add_argument("--oc", type=int, default=16)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args(argv)
    threads = effective_threads(args.threads)
    n, h, w, ic = (int(v) for v in args.shape.split(","))
    rng = np.random.default_rng(0)
    src = rng.standard_normal((n, h, w, ic)).astype(np.float32)
    weights = rng.standard_normal((3, 3, ic, args.oc)).astype(np.float32)
    attrs = dict(pads_begin=1, pads_end=1)
    problem = params.make_problem(src.shape, src.dtype, weights.shape, weights.dtype, **attrs)
    print(f"command: python bench/overhead.py {' '.join(sys.argv[1:])}")
    print(f"layer: {problem.describe()}, {threads} thread(s)")

    cached = per_call(lambda: select.choose(problem, threads), args.calls * 10)
    fresh = per_call(lambda: select.choose(problem, threads, select.assess(problem, threads)),
                     args.calls // 4)
    print(f"selector, cached choice:      {cached * 1e6:8.2f} us")
    print(f"selector, every cost hook:    {fresh * 1e6:8.2f} us")

    plan = convlab.Convolution(weights, threads=threads, **attrs)
    name = plan.algorithm_for(src)
    algorithm = registry.get_algorithm(name)
    prepared = algorithm.prepare_weights(problem, params.canonical_weights(weights, problem))
    dst = np.empty((n, h, w, args.oc), np.float32)
    contenders = {
        "kernel": lambda: algorithm.run(problem, src, prepared, None, dst, threads),
        "plan": lambda: plan(src),
        "convolve": lambda: convlab.convolve(src, weights, threads=threads, **attrs),
    }
    # Rounds alternate between the three, so that a noisy moment hits all of them; the
    # ratios are taken within each round, then their median is reported.
    times = {label: [] for label in contenders}
    for function in contenders.values():
        function()
    for _ in range(31):
        for label, function in contenders.items():
            times[label].append(per_call(function, args.calls // 10, rounds=1))
    kernel = statistics.median(times["kernel"])
    print(f"kernel alone ({name} run):  {kernel * 1e6:8.2f} us")
    for label in ("plan", "convolve"):
        ratio = statistics.median(t / k for t, k in zip(times[label], times["kernel"]))
        shown = "plan(src):" if label == "plan" else "convolve(src, weights):"
        print(f"{shown:29s} {statistics.median(times[label]) * 1e6:8.2f} us  "
              f"({ratio:.2f}x the kernel, median of per-round ratios; fastest rounds: "
              f"{min(times[label]) / min(times['kernel']):.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
