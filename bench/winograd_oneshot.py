"""One-shot calls against plan calls: ``convlab.convolve(..., algorithm=X)``, which pays
the weight transform on every call, and a ``convlab.Convolution(..., algorithm=X)`` plan,
which pays it once, for direct and winograd2/4/6 on benchdnn layers.

    python bench/winograd_oneshot.py --layers resnet_50:res4a_branch2b,vgg_19:conv5_1
    python bench/winograd_oneshot.py --suites resnet_50,vgg_19 --csv run1.csv
    python bench/winograd_oneshot.py --combine before1.csv,before2.csv after1.csv,after2.csv
    PYTHONPATH=/tmp/old python bench/winograd_oneshot.py --before-package convlab_old

Each (algorithm, one-shot or plan) contender of a layer gets ``--rounds`` blocks of
``--repeats`` calls (after a pause and one untimed call, see
:func:`convlab.runtime.timing.time_block`); in every round the contenders take their blocks
in a new random order. A contender's time is the median of its block medians, its
spread the range of those block medians around it; the fastest single call is shown too
(on a busy machine, where other processes deschedule a thread at a barrier, the blocks'
medians measure the machine as much as the code). ``--suites`` takes every layer of the
suites that Winograd runs (kernel 3, stride 1). ``--combine`` reads the CSV files of
several runs made before and after a change (e.g. alternating between two checkouts)
and prints both side by side: per contender the median over the runs.

``--before-package`` times an older convlab in the same process and the same rounds, so
that both see the same machine (on a shared machine, separate runs minutes apart differed
more than the change did): a copy of the old checkout's ``convlab`` directory, built,
renamed (e.g. to ``convlab_old``) with its own imports rewritten to that name, on
PYTHONPATH. Its contenders are named ``before:winograd4`` and so on.

``--torch`` adds PyTorch's ``conv`` on the same data to the same rounds (one contender,
kind "oneshot"), and prints per algorithm the geo-mean over the layers of torch's time
over the algorithm's one-shot and plan times, and over those of the best Winograd tile of
each layer.
"""
from __future__ import annotations

import argparse
import csv
import pathlib
import random
import statistics
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

ALGORITHMS = ("direct", "winograd2", "winograd4", "winograd6")
KINDS = ("oneshot", "plan")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", default="resnet_50:res4a_branch2b,"
                        "resnet_50:res5a_branch2b,vgg_19:conv5_1",
                        help="suite:layer,suite:layer,...")
    parser.add_argument("--suites", help="every Winograd layer of these suites instead")
    parser.add_argument("--algorithms", default=",".join(ALGORITHMS))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--mb", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=5, help="blocks per contender")
    parser.add_argument("--repeats", type=int, default=7, help="calls per block")
    parser.add_argument("--clock", choices=("wall", "thread"), default="wall",
                        help="thread: CPU time of the calling thread (only for --threads 1, "
                             "which a busy machine disturbs less)")
    parser.add_argument("--torch", action="store_true",
                        help="time PyTorch on the same layers in the same rounds")
    parser.add_argument("--csv", help="write the per-contender results here")
    parser.add_argument("--combine", nargs=2, metavar=("BEFORE", "AFTER"),
                        help="comma-separated CSV files of runs before and after; no timing")
    parser.add_argument("--before-package",
                        help="an older convlab, renamed, to time alongside in the same rounds")
    return parser.parse_args(argv)


def layers_to_time(args):
    from convlab.problem import shapes
    from convlab.strategies import winograd

    if args.suites:
        found = []
        for suite in args.suites.split(","):
            for layer in shapes.load_suite(suite, mb=args.mb):
                if winograd._supports(layer.problem(args.mb)) is None:
                    found.append(layer)
        return found
    found = []
    for spec in args.layers.split(","):
        suite, name = spec.split(":", 1)
        found.append(next(layer for layer in shapes.load_suite(suite, mb=args.mb)
                          if layer.name == name or layer.name.endswith(":" + name)))
    return found


def block_seconds(call, repeats, clock):
    """Seconds of ``repeats`` calls after a pause and an untimed call (time_block), on the
    wall clock or the calling thread's CPU clock."""
    from convlab.runtime.timing import time_block

    if clock == "wall":
        return time_block(call, repeats)
    time_block(call, 1)  # the pause and an untimed call
    times = []
    for _ in range(repeats):
        start = time.thread_time()
        call()
        times.append(time.thread_time() - start)
    return times


def time_layer(layer, args, rng):
    import importlib

    import convlab

    src, weights, _ = layer.arrays(args.mb, seed=0)
    kwargs = layer.convolve_kwargs()
    packages = [("", convlab)]
    if args.before_package:
        packages.append(("before:", importlib.import_module(args.before_package)))
    calls = {}
    for prefix, package in packages:
        for algorithm in args.algorithms.split(","):
            plan = package.Convolution(weights, algorithm=algorithm, threads=args.threads,
                                       **kwargs)
            plan(src)  # a plan's first call may skip storing U; the second stores it
            plan(src)
            calls[(prefix + algorithm, "oneshot")] = (
                lambda a=algorithm, package=package: package.convolve(
                    src, weights, algorithm=a, threads=args.threads, **kwargs))
            calls[(prefix + algorithm, "plan")] = lambda p=plan: p(src)
    if args.torch:
        import numpy as np
        import torch

        from convlab.cli.benchmark import torch_contender

        r = layer.rank
        peer = torch_contender(torch, layer, np.moveaxis(src, -1, 1),
                               weights.transpose(r + 1, r, *range(r)), args.threads)
        if peer.call is not None:
            calls[("torch", "oneshot")] = peer.call
    blocks = {key: [] for key in calls}
    for _ in range(args.rounds):
        order = list(calls)
        rng.shuffle(order)
        for key in order:
            blocks[key].append(block_seconds(calls[key], args.repeats, args.clock))
    return blocks


def summary(blocks):
    """(median, low, high) in ms of a contender's block medians, and its fastest call."""
    ms = [statistics.median(block) * 1e3 for block in blocks]
    return statistics.median(ms), min(ms), max(ms), min(min(block) for block in blocks) * 1e3


def geo_mean(values):
    from convlab.cli._bench_results import geo_mean as gm

    return gm(values)


def print_table(rows, algorithms):
    """rows: {(layer, algorithm, kind): (median, low, high)}."""
    layers = list(dict.fromkeys(key[0] for key in rows))
    print(f"{'layer':34s} {'algorithm':17s} {'one-shot ms (range) fastest':>32s} "
          f"{'plan ms (range) fastest':>32s} {'1shot/plan':>10s} {'1shot/direct':>12s}")
    for layer in layers:
        direct = rows.get((layer, "direct", "oneshot"))
        for algorithm in algorithms:
            one = rows.get((layer, algorithm, "oneshot"))
            plan = rows.get((layer, algorithm, "plan"))
            if one is None or plan is None:
                continue
            vs_direct = f"{one[0] / direct[0]:12.2f}" if direct else f"{'-':>12s}"
            print(f"{layer:34s} {algorithm:17s} "
                  f"{one[0]:8.3f} ({one[1]:6.3f}-{one[2]:6.3f}) {one[3]:7.3f} "
                  f"{plan[0]:8.3f} ({plan[1]:6.3f}-{plan[2]:6.3f}) {plan[3]:7.3f} "
                  f"{one[0] / plan[0]:10.2f} {vs_direct}")
    if len(layers) > 1:
        print(f"\ngeo-mean over {len(layers)} layers")
        for algorithm in algorithms:
            ratios = {"1shot/plan": [], "1shot/direct 1shot": [], "plan/direct plan": []}
            for layer in layers:
                one = rows.get((layer, algorithm, "oneshot"))
                plan = rows.get((layer, algorithm, "plan"))
                d_one = rows.get((layer, "direct", "oneshot"))
                d_plan = rows.get((layer, "direct", "plan"))
                if one and plan:
                    ratios["1shot/plan"].append(one[0] / plan[0])
                if one and d_one:
                    ratios["1shot/direct 1shot"].append(one[0] / d_one[0])
                if plan and d_plan:
                    ratios["plan/direct plan"].append(plan[0] / d_plan[0])
            print(f"  {algorithm:17s} " + "  ".join(
                f"{name} {geo_mean(values):.2f}" for name, values in ratios.items() if values))
    pairs = [(a, "before:" + a) for a in algorithms if "before:" + a in algorithms]
    if pairs:
        print("\nafter / before, same rounds (median ms)")
        geo = {kind: {a: [] for a, _ in pairs} for kind in KINDS}
        for layer in layers:
            for after, before in pairs:
                cells = []
                for kind in KINDS:
                    a, b = rows.get((layer, after, kind)), rows.get((layer, before, kind))
                    if a and b:
                        geo[kind][after].append(a[0] / b[0])
                        cells.append(f"{b[0]:8.3f} -> {a[0]:8.3f} ({a[0] / b[0]:5.2f})")
                    else:
                        cells.append(f"{'-':>28s}")
                print(f"{layer:34s} {after:10s} one-shot {cells[0]}  plan {cells[1]}")
        if len(layers) > 1:
            for after, _ in pairs:
                print(f"  geo-mean {after:10s} one-shot {geo_mean(geo['oneshot'][after]):.2f}"
                      f"  plan {geo_mean(geo['plan'][after]):.2f}")


def print_torch_ratios(rows, algorithms):
    """Geo-means over the layers of torch's median time over each contender's."""
    layers = [layer for layer in dict.fromkeys(key[0] for key in rows)
              if (layer, "torch", "oneshot") in rows]
    if not layers:
        return
    print(f"\ntorch time / convlab time, geo-mean over {len(layers)} layers (above 1: "
          f"convlab faster)")
    winograd = [a for a in algorithms if a.startswith("winograd")]
    for kind in KINDS:
        cells = []
        for algorithm in algorithms:
            ratios = [rows[(layer, "torch", "oneshot")][0] / rows[(layer, algorithm, kind)][0]
                      for layer in layers if (layer, algorithm, kind) in rows]
            if ratios:
                cells.append(f"{algorithm} {geo_mean(ratios):.2f}x")
        best = [rows[(layer, "torch", "oneshot")][0]
                / min(rows[(layer, a, kind)][0] for a in winograd if (layer, a, kind) in rows)
                for layer in layers if any((layer, a, kind) in rows for a in winograd)]
        if best:
            cells.append(f"best Winograd tile per layer {geo_mean(best):.2f}x")
        print(f"  {kind:8s} " + ", ".join(cells))


def write_csv(path, rows):
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["layer", "algorithm", "kind", "median_ms", "low_ms", "high_ms",
                         "fastest_ms"])
        for (layer, algorithm, kind), (median, low, high, fastest) in rows.items():
            writer.writerow([layer, algorithm, kind, f"{median:.4f}", f"{low:.4f}",
                             f"{high:.4f}", f"{fastest:.4f}"])


def read_runs(paths):
    """{key: (median over runs, lowest low, highest high)} from several CSV files."""
    collected = {}
    for path in paths.split(","):
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                key = (row["layer"], row["algorithm"], row["kind"])
                collected.setdefault(key, []).append(
                    (float(row["median_ms"]), float(row["low_ms"]), float(row["high_ms"]),
                     float(row["fastest_ms"])))
    return {key: (statistics.median(v[0] for v in values), min(v[1] for v in values),
                  max(v[2] for v in values), min(v[3] for v in values))
            for key, values in collected.items()}


def combine(before_paths, after_paths):
    before, after = read_runs(before_paths), read_runs(after_paths)
    algorithms = list(dict.fromkeys(key[1] for key in after))
    print(f"before: {before_paths}\nafter:  {after_paths}\n"
          f"(median over runs of each run's median of block medians; range: lowest and "
          f"highest block median of all runs; fastest: fastest call of all runs)\n")
    for title, rows in (("before", before), ("after", after)):
        print(f"== {title}")
        print_table(rows, algorithms)
        print()
    print("== after / before (median ms)")
    layers = list(dict.fromkeys(key[0] for key in after))
    print(f"{'layer':34s} {'algorithm':10s} {'one-shot':>18s} {'plan':>18s}")
    for layer in layers:
        for algorithm in algorithms:
            cells = []
            for kind in KINDS:
                a, b = after.get((layer, algorithm, kind)), before.get((layer, algorithm, kind))
                cells.append(f"{b[0]:7.3f}->{a[0]:7.3f}" if a and b else f"{'-':>16s}")
            print(f"{layer:34s} {algorithm:10s} {cells[0]:>18s} {cells[1]:>18s}")


def main(argv=None):
    args = parse_args(argv)
    if args.combine:
        combine(*args.combine)
        return
    from convlab.runtime import cpu

    if args.clock == "thread" and args.threads != 1:
        raise SystemExit("--clock thread measures one thread: use it with --threads 1")
    rng = random.Random(0)
    info = cpu.cpu_info()
    caches = ", ".join(f"{level} {size // 1024} KiB" for level, size in info["caches"].items())
    print(f"CPU: {info['model']}, {info['machine']}; ISA detected {info['isa_detected']}, "
          f"used {info['isa_effective']}; caches per core: {caches}")
    print("command: python " + " ".join(sys.argv))
    print(f"{args.threads} threads, mb {args.mb}, {args.clock} clock; median of {args.rounds} "
          f"blocks of {args.repeats} calls per contender, contenders in a new random order "
          f"every round\n", flush=True)
    rows = {}
    algorithms = args.algorithms.split(",")
    if args.before_package:
        algorithms += ["before:" + a for a in algorithms]
    for layer in layers_to_time(args):
        for (algorithm, kind), blocks in time_layer(layer, args, rng).items():
            rows[(layer.name, algorithm, kind)] = summary(blocks)
        print(f"  timed {layer.name}", file=sys.stderr, flush=True)
    print_table(rows, algorithms)
    print_torch_ratios(rows, [a for a in algorithms if not a.startswith("before:")])
    if args.csv:
        write_csv(args.csv, rows)


if __name__ == "__main__":
    main()
