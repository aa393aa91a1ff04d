"""Where each algorithm wins: measured winners against auto's picks over channels x size x threads.

    python bench/crossover.py --out bench/results/crossover.png --csv bench/results/crossover.csv

A grid of square float32 convolutions at batch 1 (IC = OC = C, H = W = size; 3x3 stride 1
pads 1 by default, or ``--kernel 1`` for 1x1) is timed with every auto contender at each
thread count, each in a block of runs after a pause (as ``python -m convlab bench`` does).
Each cell of the left maps shows the measured fastest algorithm; the right maps show what
``convlab.select_algorithm`` picks, with the regret of that pick (its measured time over the
fastest) printed in the cell. The summary line says how often auto is right, as SciPy's
``choose_conv_method`` documents its accuracy.
"""
from __future__ import annotations

import argparse
import csv
import pathlib
import statistics
import sys

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import convlab  # noqa: E402
from convlab.cli._bench_results import geo_mean  # noqa: E402
from convlab.cli._bench_tables import cpu_model  # noqa: E402
from convlab.dispatch import registry  # noqa: E402
from convlab.runtime.timing import time_block  # noqa: E402


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--channels", default="4,8,16,32,64,128,256,512")
    parser.add_argument("--sizes", default="7,14,28,56,112")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--kernel", type=int, default=3)
    parser.add_argument("--max-gflop", type=float, default=4.0,
                        help="skip grid points with more work than this")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", default="crossover.png")
    parser.add_argument("--csv", default=None)
    return parser.parse_args(argv)


def time_point(channels, size, kernel, threads, repeats):
    rng = np.random.default_rng(0)
    src = rng.uniform(-1, 1, (1, size, size, channels)).astype(np.float32)
    weights = rng.uniform(-1, 1, (kernel, kernel, channels, channels)).astype(np.float32)
    pad = kernel // 2
    kwargs = dict(pads_begin=pad, pads_end=pad)
    problem = convlab.make_problem(src.shape, src.dtype, weights.shape, weights.dtype, **kwargs)
    names = [a.name for a in registry.registered() if a.auto and a.supports(problem) is None]
    medians = {name: statistics.median(time_block(
        lambda: convlab.convolve(src, weights, algorithm=name, threads=threads, **kwargs),
        repeats)) for name in names}
    pick = convlab.select_algorithm(src, weights, threads=threads, **kwargs)
    return medians, pick


def draw(results, channels, sizes, thread_counts, kernel, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap

    names = sorted({n for r in results for n in r["medians"]})
    colour = {name: i for i, name in enumerate(names)}
    cmap = ListedColormap(plt.get_cmap("tab10").colors[:len(names)])
    fig, axes = plt.subplots(len(thread_counts), 2, figsize=(11, 4.2 * len(thread_counts)),
                             squeeze=False)
    for row, threads in enumerate(thread_counts):
        for column, what in enumerate(("measured fastest", "auto's pick")):
            ax = axes[row, column]
            grid = np.full((len(channels), len(sizes)), np.nan)
            for r in results:
                if r["threads"] != threads:
                    continue
                i, j = channels.index(r["channels"]), sizes.index(r["size"])
                winner = min(r["medians"], key=r["medians"].get) if column == 0 else r["pick"]
                grid[i, j] = colour[winner]
                if column == 1:
                    ax.text(j, i, f"{r['regret']:.2f}", ha="center", va="center", fontsize=7)
            ax.imshow(grid, cmap=cmap, vmin=-0.5, vmax=len(names) - 0.5, origin="lower",
                      aspect="auto")
            ax.set_xticks(range(len(sizes)))
            ax.set_xticklabels(sizes)
            ax.set_yticks(range(len(channels)))
            ax.set_yticklabels(channels)
            ax.set_xlabel("H = W")
            ax.set_ylabel("IC = OC")
            ax.set_title(f"{what}, {threads} thread(s)"
                         + (" (cell: regret)" if column == 1 else ""), fontsize=10)
    handles = [plt.Rectangle((0, 0), 1, 1, color=cmap(colour[n])) for n in names]
    fig.legend(handles, names, loc="lower center", ncol=len(names))
    fig.suptitle(f"{kernel}x{kernel} stride 1, batch 1, float32 ({cpu_model()}); "
                 f"blank: more than the work limit")
    fig.tight_layout(rect=(0, 0.05, 1, 0.96))
    fig.savefig(path, dpi=110)


def main(argv=None):
    args = parse_args(argv)
    channels = [int(c) for c in args.channels.split(",")]
    sizes = [int(s) for s in args.sizes.split(",")]
    thread_counts = [int(t) for t in args.threads.split(",")]
    print(f"command: python bench/crossover.py {' '.join(sys.argv[1:])}")
    results = []
    for threads in thread_counts:
        for c in channels:
            for size in sizes:
                gflop = 2 * c * c * size * size * args.kernel ** 2 / 1e9
                if gflop > args.max_gflop:
                    continue
                medians, pick = time_point(c, size, args.kernel, threads, args.repeats)
                fastest = min(medians.values())
                regret = medians[pick] / fastest
                results.append(dict(threads=threads, channels=c, size=size, medians=medians,
                                    pick=pick, regret=regret))
                best = min(medians, key=medians.get)
                print(f"threads {threads} C {c:4d} H=W {size:4d}: fastest {best:10s} "
                      f"pick {pick:10s} regret {regret:5.2f}", flush=True)
    regrets = [r["regret"] for r in results]
    right = sum(r["pick"] == min(r["medians"], key=r["medians"].get) for r in results)
    print(f"auto picks the measured fastest on {right}/{len(results)} points; within 5% on "
          f"{sum(g <= 1.05 for g in regrets)}/{len(results)}; regret geo-mean "
          f"{geo_mean(regrets):.3f}, worst {max(regrets):.2f}")
    if args.csv:
        with open(args.csv, "w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["threads", "channels", "size", "algorithm", "seconds", "pick"])
            for r in results:
                for name, seconds in r["medians"].items():
                    writer.writerow([r["threads"], r["channels"], r["size"], name,
                                     f"{seconds:.6g}", r["pick"]])
    draw(results, channels, sizes, thread_counts, args.kernel, args.out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
