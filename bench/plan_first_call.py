"""What a plan's first call costs: choose="measure" against choose="estimate", per layer.

    python bench/plan_first_call.py --suite resnet_50 --layers conv1,res2a_branch2b --threads 2

For each layer and each ``choose``, a fresh ``convlab.Convolution`` is built and its first
call timed (the choice, with "measure" the timing of the close contenders, the weights'
preparation and the run), then the median of ``--repeats`` later calls. Both kinds of plan
are built ``--trials`` times, alternating, after a pause each (the first call is one call:
only alternation and repetition keep the machine's drift off one side). Prints medians over
the trials, and which algorithm each kind chose.
"""
from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import sys
import time
from collections import Counter

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import convlab  # noqa: E402
from convlab.cli._bench_args import select_layers  # noqa: E402
from convlab.cli._bench_tables import command_line, cpu_model, load_average  # noqa: E402
from convlab.dispatch import cost_model, measure  # noqa: E402
from convlab.problem import shapes  # noqa: E402
from convlab.runtime.threads import effective_threads  # noqa: E402
from convlab.runtime.timing import IDLE_SECONDS  # noqa: E402

CHOICES = ("measure", "estimate")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="resnet_50")
    parser.add_argument("--layers", default="conv1,res2a_branch2a,res2a_branch2b,"
                                            "res4a_branch2b,res5a_branch2b,res5a_branch2c")
    parser.add_argument("--mb", type=int, default=1)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--trials", type=int, default=5, help="plans built per choose")
    parser.add_argument("--repeats", type=int, default=5, help="later calls timed per plan")
    return parser.parse_args(argv)


def one_plan(layer, src, weights, threads, choose, repeats):
    plan = convlab.Convolution(weights, threads=threads, choose=choose,
                               **layer.convolve_kwargs())
    time.sleep(IDLE_SECONDS)
    start = time.perf_counter()
    plan(src)
    first = time.perf_counter() - start
    later = []
    for _ in range(repeats):
        start = time.perf_counter()
        plan(src)
        later.append(time.perf_counter() - start)
    return first, statistics.median(later), plan.algorithm_for(src)


def main(argv=None):
    args = parse_args(argv)
    threads = effective_threads(args.threads)
    layers = select_layers(shapes.load_suite(args.suite, mb=args.mb), args.layers)
    print(f"command: {command_line()}")
    print(f"machine: {cpu_model()}, {os.cpu_count()} logical CPUs; OMP_WAIT_POLICY="
          f"{os.environ.get('OMP_WAIT_POLICY')}; load average before: {load_average()}")
    print(f"plans: measure margin {cost_model.measure_margin():.0%}, at most "
          f"{measure.MAX_CONTENDERS} contenders, none started after "
          f"{measure.TIME_LIMIT_SECONDS:g} s, {measure.TIMED_RUNS} timed runs each")
    print(f"{args.suite} mb{args.mb}, {threads} thread(s), {args.trials} plans per choose "
          f"(alternating), median of {args.repeats} later calls each; medians over the plans\n")
    header = (f"{'layer':<16} {'choose':<9} {'first ms':>9} {'later ms':>9} {'first/later':>11}"
              f"  {'chosen':<24}")
    print(header)
    print("-" * len(header))
    for layer in layers:
        src, weights, _ = layer.arrays(args.mb, seed=0)
        runs = {choose: [] for choose in CHOICES}
        for trial in range(args.trials):
            for choose in CHOICES if trial % 2 == 0 else CHOICES[::-1]:
                runs[choose].append(one_plan(layer, src, weights, threads, choose,
                                             args.repeats))
        for choose in CHOICES:
            first = statistics.median(r[0] for r in runs[choose])
            later = statistics.median(r[1] for r in runs[choose])
            picks = Counter(r[2] for r in runs[choose])
            print(f"{layer.short_name:<16} {choose:<9} {first * 1e3:9.2f} {later * 1e3:9.3f} "
                  f"{first / later:10.1f}x  "
                  f"{', '.join(f'{n} x{c}' for n, c in picks.most_common())}")
    print(f"\nload average after: {load_average()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
