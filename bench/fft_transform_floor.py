"""How fast fft could be at best on the large-kernel layers: the transforms alone.

    python bench/fft_transform_floor.py [--threads 2] [--rounds 7]
        # writes bench/results/fft_transform_floor_<date>_<cpu>.txt

For each layer of the large-kernel suite in the fft issue's scope (2-D K >= 11, 1-D
K >= 63, 3-D K >= 7; batch 1, float32), the *transform floor*: the time of only the
one-axis transforms that any overlap-save fft must run, each line priced at the fastest
rate the transform backend (:mod:`convlab.strategies.fft_transforms`) reaches on a large
batch of such lines (measured here: contiguous or interleaved lines, at ``--threads``
threads or one thread's rate times ``--threads``, whichever is fastest), minimised over
every tile shape of fast lengths. It leaves out the channel contraction, the gathers and
crops and all Python, and prunes every pass to the lines holding data (the input image or
the kernel) or kept by the crop, so no fft built on these transforms can run faster.
One-shot calls also transform the weights (OC x IC/G transforms); plans do not. Beside
it, direct, im2col and fft as shipped, timed in the same process (rounds alternating the
contenders, medians).

The ratio best(direct, im2col) / floor bounds what fft can gain over them on that layer.
"""
from __future__ import annotations

import argparse
import datetime
import math
import pathlib
import statistics
import sys
import time
from itertools import product

import numpy as np
import scipy.fft as sfft

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import convlab  # noqa: E402
from convlab.cli._bench_results import geo_mean  # noqa: E402
from convlab.problem import shapes  # noqa: E402
from convlab.runtime import cpu  # noqa: E402
from convlab.strategies import fft, fft_transforms  # noqa: E402

# Outputs per tile tried per axis: a ladder of this ratio, and the whole axis.
TILE_LADDER_RATIO = 1.15
# Lines per timed batch: enough to fill the threads, small enough to stay in L2.
BATCH_BYTES = 512 * 2**10


def in_scope(problem) -> bool:
    k = max(problem.kernel_shape)
    return {1: k >= 63, 2: k >= 11, 3: k >= 7}.get(problem.rank, False)


class LineCosts:
    """Seconds per transform line, by (kind, length), at the backend's best layout."""

    def __init__(self, threads: int, repeats: int = 15):
        self.threads, self.repeats, self._found = threads, repeats, {}

    def __call__(self, kind: str, n: int) -> float:
        key = (kind, n)
        if key not in self._found:
            self._found[key] = self._measure(kind, n)
        return self._found[key]

    def _measure(self, kind: str, n: int) -> float:
        # the lower of the rate at the threads and one thread's rate times the threads
        return min(self._line_seconds(kind, n, self.threads),
                   self._line_seconds(kind, n, 1) / self.threads)

    def _line_seconds(self, kind: str, n: int, threads: int) -> float:
        lines = max(8, BATCH_BYTES // (8 * n))
        best = math.inf
        for contiguous in (True, False):
            shape = (lines, n) if contiguous else (n, lines)
            axis = 1 if contiguous else 0
            half = (lines, n // 2 + 1) if contiguous else (n // 2 + 1, lines)
            if kind == "r2c":
                a = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
                out = np.empty(half, np.complex64)
                run = lambda: fft_transforms.r2c(a, axis, out, threads)  # noqa: E731
            elif kind == "c2r":
                a = np.ones(half, np.complex64)
                out = np.empty(shape, np.float32)
                run = lambda: fft_transforms.c2r(a, axis, n, out, threads)  # noqa: E731
            else:
                a = np.ones(shape, np.complex64)
                run = lambda: fft_transforms.c2c(a, axis, True, a, threads)  # noqa: E731
            run()
            times = []
            for _ in range(self.repeats):
                t0 = time.perf_counter()
                run()
                times.append(time.perf_counter() - t0)
            best = min(best, min(times) / lines)
        return best


def axis_options(problem, axis: int) -> list[tuple[int, int]]:
    """(L, outputs per tile) along one axis: a ladder of tile outputs, and the whole axis
    (whose length the padding may shorten, fft.whole_axis_length)."""
    outputs = problem.output_shape[axis]
    extent = fft.stretched_kernel(problem)[axis]
    real = axis == problem.rank - 1
    found = {sfft.next_fast_len(fft.whole_axis_length(problem, axis), real=real): outputs}
    count = 1
    while count < outputs:
        length = sfft.next_fast_len(count + extent - 1, real=real)
        held = min(outputs, length - extent + 1)
        found.setdefault(length, held)
        count = max(count + 1, int(count * TILE_LADDER_RATIO))
    return sorted(found.items())


def forward_seconds(lengths, box, cost) -> float:
    """One r-D real transform of data in ``box`` (extents per axis) padded to ``lengths``:
    the last axis over the lines holding data, each earlier one over the lines the passes
    after it made non-zero."""
    r = len(lengths)
    spectrum = list(lengths[:-1]) + [lengths[-1] // 2 + 1]
    total = math.prod(box[:-1]) * cost("r2c", lengths[-1])
    for axis in range(r - 2, -1, -1):
        lines = math.prod(box[:axis]) * math.prod(spectrum[axis + 1:])
        total += lines * cost("c2c", lengths[axis])
    return total


def inverse_seconds(lengths, kept, cost) -> float:
    """One r-D inverse real transform whose crop keeps ``kept`` positions per axis."""
    r = len(lengths)
    spectrum = list(lengths[:-1]) + [lengths[-1] // 2 + 1]
    total = 0.0
    for axis in range(r - 1):
        lines = math.prod(kept[:axis]) * math.prod(spectrum[axis + 1:])
        total += lines * cost("c2c", lengths[axis])
    return total + math.prod(kept[:-1]) * cost("c2r", lengths[-1])


def floors(problem, cost) -> tuple[float, float, str]:
    """(one-shot floor, plan floor, the one-shot floor's tile lengths) in seconds."""
    best_call, best_plan, shape = math.inf, math.inf, ""
    extents = fft.stretched_kernel(problem)
    for combo in product(*(axis_options(problem, a) for a in range(problem.rank))):
        lengths = [length for length, _ in combo]
        held = [h for _, h in combo]
        tiles = math.prod(-(-o // h) for o, h in zip(problem.output_shape, held))
        image_box = [min(n, i) for n, i in zip(lengths, problem.input_shape)]
        kernel_box = [min(n, k) for n, k in zip(lengths, extents)]
        per_tile = (problem.in_channels * forward_seconds(lengths, image_box, cost)
                    + problem.out_channels * inverse_seconds(lengths, held, cost))
        plan = problem.batch * tiles * per_tile
        weights = (problem.out_channels * problem.in_channels_per_group
                   * forward_seconds(lengths, kernel_box, cost))
        if plan + weights < best_call:
            best_call, shape = plan + weights, "x".join(map(str, lengths))
        best_plan = min(best_plan, plan)
    return best_call, best_plan, shape


def timed(layer, threads: int, rounds: int) -> dict[str, float]:
    x, w, _ = layer.arrays(seed=0)
    kw = layer.convolve_kwargs()
    calls = {name: (lambda name=name: convlab.convolve(x, w, threads=threads, algorithm=name,
                                                       **kw))
             for name in ("direct", "im2col", "fft")}
    for call in calls.values():
        call()
    times: dict[str, list[float]] = {name: [] for name in calls}
    for r in range(rounds):
        order = list(calls) if r % 2 == 0 else list(reversed(calls))
        for name in order:
            runs = []
            for _ in range(3):
                t0 = time.perf_counter()
                calls[name]()
                runs.append(time.perf_counter() - t0)
            times[name].append(min(runs))
    return {name: statistics.median(v) for name, v in times.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    info = cpu.cpu_info()
    cost = LineCosts(args.threads)
    lines = [f"# fft transform floor, large-kernel suite in scope, batch 1, float32, "
             f"{args.threads} threads, {datetime.date.today().isoformat()}",
             f"# CPU: {info.get('model')}; ISA level {info.get('isa_effective')}; "
             f"caches {info.get('caches')}; transforms {fft_transforms.BACKEND}",
             "# ms; floor = the pruned transforms alone at the backend's best line rate, "
             "best tile shape; best = min(direct, im2col)",
             f"{'layer':32s} {'direct':>8s} {'im2col':>8s} {'fft':>8s} {'floor':>8s} "
             f"{'planflr':>8s}  {'best/fft':>8s} {'best/flr':>8s} {'best/pflr':>9s}  tile"]
    ratios = {"fft": [], "floor": [], "plan": []}
    for layer in shapes.load_suite("large_kernel", mb=1):
        problem = layer.problem()
        if not in_scope(problem):
            continue
        call_floor, plan_floor, shape = floors(problem, cost)
        t = timed(layer, args.threads, args.rounds)
        best = min(t["direct"], t["im2col"])
        ratios["fft"].append(best / t["fft"])
        ratios["floor"].append(best / call_floor)
        ratios["plan"].append(best / plan_floor)
        lines.append(f"{layer.name[:32]:32s} {t['direct']*1e3:8.3f} {t['im2col']*1e3:8.3f} "
                     f"{t['fft']*1e3:8.3f} {call_floor*1e3:8.3f} {plan_floor*1e3:8.3f}  "
                     f"{ratios['fft'][-1]:8.2f} {ratios['floor'][-1]:8.2f} "
                     f"{ratios['plan'][-1]:9.2f}  {shape}")
        print(lines[-1], flush=True)
    lines.append(f"geo-mean over {len(ratios['fft'])} layers: best/fft "
                 f"{geo_mean(ratios['fft']):.2f}x, best/one-shot floor "
                 f"{geo_mean(ratios['floor']):.2f}x, "
                 f"best/plan floor {geo_mean(ratios['plan']):.2f}x")
    text = "\n".join(lines) + "\n"
    print(lines[-1])
    tag = cpu.cpu_slug()
    out = HERE / "results" / f"fft_transform_floor_{datetime.date.today().isoformat()}_{tag}.txt"
    out.write_text(text)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
