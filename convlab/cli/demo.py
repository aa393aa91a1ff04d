"""``python -m convlab demo``: the ResNet-50 convolutions at batch 1, timed.

For each distinct layer of oneDNN's ``shapes_resnet_50.txt`` it prints the algorithm
``"auto"`` picks, the median time and GFLOP/s of :func:`convlab.convolve`, and the speed
against :func:`numpy_baseline`: the convolution you would write in plain NumPy without
convlab. The totals count every layer as often as it occurs in the network (its ``*N``).
Before timing anything it checks one small problem against the float64 reference.
"""
from __future__ import annotations

import functools
import math
import os
import statistics
import time
from collections.abc import Sequence

import numpy as np

import convlab
from convlab.dispatch import cost_model
from convlab.problem import shapes
from convlab.runtime.threads import available_cores, blas_limit, effective_threads
from convlab.runtime.timing import IDLE_SECONDS, time_block

SUITE = "resnet_50"
# The timed part must leave the whole demo well inside a minute even with a slow kernel:
# layers get fewer runs (at least one) once this budget would be exceeded.
TIME_BUDGET_SECONDS = 40.0
# Normwise error allowed against the float64 reference for the small float32 check
# (24 products per output; float32 rounding gives ~1e-7).
CHECK_TOLERANCE = 1e-5
# Normwise difference allowed between convlab and the NumPy baseline on ResNet-50 layers
# (float32, up to 4608 products per output, both summing in different orders).
AGREE_TOLERANCE = 1e-4


# --------------------------------------------------------------------------- baseline

def _pad_or_crop(src: np.ndarray, pads_begin, pads_end) -> np.ndarray:
    """src (N, I..., C) zero-padded on the spatial axes; negative pads crop."""
    crop = [slice(None)]
    widths = [(0, 0)]
    for extent, pb, pe in zip(src.shape[1:-1], pads_begin, pads_end):
        crop.append(slice(max(0, -pb), extent - max(0, -pe)))
        widths.append((max(0, pb), max(0, pe)))
    crop.append(slice(None))
    widths.append((0, 0))
    src = src[tuple(crop)]
    if any(w != (0, 0) for w in widths):
        src = np.pad(src, widths)
    return src


def numpy_baseline(src: np.ndarray, weights: np.ndarray, *, strides: Sequence[int],
                   dilations: Sequence[int], pads_begin: Sequence[int],
                   pads_end: Sequence[int], groups: int = 1) -> np.ndarray:
    """The convolution as one would write it in plain NumPy: pad once, then one GEMM
    (``tensordot``) per kernel tap and group, accumulated in float32.

    src is NXC ``(N, I..., IC)``, weights XIO ``(K..., IC/G, OC)``; all attributes are
    explicit per-axis sequences (dilations 1-based). This is the yardstick of the demo,
    not an oracle: :mod:`convlab.reference` is the oracle.
    """
    rank = src.ndim - 2
    kernel = weights.shape[:rank]
    icg, oc = weights.shape[-2:]
    ocg = oc // groups
    padded = _pad_or_crop(src, pads_begin, pads_end)
    out = [(p - ((k - 1) * d + 1)) // s + 1
           for p, k, s, d in zip(padded.shape[1:-1], kernel, strides, dilations)]
    dst = np.zeros((src.shape[0], *out, oc), dtype=np.result_type(src, weights))
    for tap in np.ndindex(*kernel):
        window = padded[(slice(None),) + tuple(
            slice(t * d, t * d + (o - 1) * s + 1, s)
            for t, d, s, o in zip(tap, dilations, strides, out))]
        for g in range(groups):
            dst[..., g * ocg:(g + 1) * ocg] += np.tensordot(
                window[..., g * icg:(g + 1) * icg], weights[tap][:, g * ocg:(g + 1) * ocg],
                axes=(-1, 0))
    return dst


# --------------------------------------------------------------------------- helpers

def _relative_error(got: np.ndarray, expected: np.ndarray) -> float:
    """max |got - expected| / max(1, max |expected|): a normwise error that does not blow
    up on near-zero entries."""
    expected = np.asarray(expected, dtype=np.float64)
    scale = max(1.0, float(np.max(np.abs(expected))))
    return float(np.max(np.abs(np.asarray(got, np.float64) - expected))) / scale


def _check_small_case(threads: int) -> bool:
    layer = shapes.parse_descriptor("g2mb2ic8ih9iw7oc6kh3kw2sh2sw1ph1pw0dh1")
    src, weights, bias = layer.arrays(bias=True, seed=7)
    kwargs = layer.convolve_kwargs()
    chosen = convlab.select_algorithm(src, weights, bias, threads=threads, **kwargs)
    expected = convlab.reference.convolve(src.astype(np.float64), weights.astype(np.float64),
                                          bias.astype(np.float64), **kwargs)
    error = _relative_error(convlab.convolve(src, weights, bias, threads=threads, **kwargs),
                            expected)
    baseline = numpy_baseline(src, weights, **kwargs) + bias
    baseline_error = _relative_error(baseline, expected)
    ok = error <= CHECK_TOLERANCE and baseline_error <= CHECK_TOLERANCE
    print(f"check: convlab.convolve (auto -> {chosen}) against convlab.reference (float64) on "
          f"{layer.canonical()} with bias:")
    print(f"       normwise error {error:.1e}, NumPy baseline {baseline_error:.1e} "
          f"(tolerance {CHECK_TOLERANCE:.0e}): {'OK' if ok else 'FAILED'}")
    return ok


def _blas_name() -> str:
    try:
        from threadpoolctl import threadpool_info

        apis = sorted({info.get("internal_api", "?") for info in threadpool_info()
                       if info.get("user_api") == "blas"})
        return "/".join(apis) or "no BLAS found"
    except Exception:  # threadpoolctl is optional here; the name is only informative
        return "BLAS unknown"


def _load_note() -> str:
    """Other work on the machine skews timings; say how busy it was."""
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):
        return ""
    return f" (1-minute load average {load:.1f} on {available_cores()} cores)"


def constants_note(threads: int) -> str:
    """Which cost constants "auto" chose with, and how to fit this machine's own."""
    chosen = cost_model.in_force(threads)
    note = f"auto's cost constants: {cost_model.describe_constants(threads)}"
    if chosen.origin != "calibrated":
        note += (f"\n  (to fit them to this machine, about a minute: python -m convlab "
                 f"calibrate --threads {threads})")
    return note


# --------------------------------------------------------------------------- the demo

def run_demo(threads: int | None = None, repeats: int = 5) -> int:
    """Run the demo workload and print a table; returns a process exit code (0 = fine)."""
    started = time.perf_counter()
    if repeats < 1:
        raise ValueError(f"repeats={repeats} must be >= 1")
    n_threads = effective_threads(threads)
    layers = shapes.load_suite(SUITE, mb=1)
    print(f"convlab {convlab.__version__} demo: the {len(layers)} distinct convolutions of "
          f"ResNet-50 (benchdnn shapes_{SUITE}.txt),")
    print(f"batch 1, float32, NXC/XIO, {n_threads} thread(s), median of {repeats} run(s); "
          f"baseline: NumPy {np.__version__} pad + tensordot per kernel tap ({_blas_name()})")
    print(constants_note(n_threads))
    if not _check_small_case(n_threads):
        print("stopping: convlab disagrees with the reference")
        return 1
    print()

    header = (f"{'layer':<17} {'xN':>3} {'GFLOP':>6}  {'algorithm':<10} {'ms':>8} "
              f"{'GFLOP/s':>8}  {'NumPy ms':>9} {'GFLOP/s':>8}  {'speedup':>7}")
    print(header)
    print("-" * len(header))
    rows = []
    worst = 0.0
    reduced = False
    timed_start = time.perf_counter()
    cases = []
    with blas_limit(n_threads):
        # Two passes, convlab's layers and then the NumPy baseline's: OpenBLAS workers spin
        # for about 0.1 s after a call, and alternating the two let them starve convlab's
        # OpenMP threads (calls took whole 4 ms scheduler ticks on 2 cores).
        for index, layer in enumerate(layers):
            src, weights, _ = layer.arrays(seed=index)
            kwargs = layer.convolve_kwargs()
            algorithm = convlab.select_algorithm(src, weights, threads=n_threads, **kwargs)
            run_convlab = functools.partial(convlab.convolve, src, weights,
                                            threads=n_threads, **kwargs)
            warm = time.perf_counter()
            result = run_convlab()
            warm = time.perf_counter() - warm
            left = TIME_BUDGET_SECONDS / 2 - (time.perf_counter() - timed_start)
            affordable = int(left / (len(layers) - index) / max(warm, 1e-9))
            runs = max(1, min(repeats, affordable))
            reduced |= runs < repeats
            cases.append((layer, src, weights, kwargs, algorithm, result, runs,
                          statistics.median(time_block(run_convlab, runs, pause=0))))
        time.sleep(IDLE_SECONDS)
        for layer, src, weights, kwargs, algorithm, result, runs, t_convlab in cases:
            run_numpy = functools.partial(numpy_baseline, src, weights, **kwargs)
            worst = max(worst, _relative_error(result, run_numpy()))
            t_numpy = statistics.median(time_block(run_numpy, runs, pause=0))
            flops = layer.flops()
            rows.append((layer, flops, t_convlab, t_numpy))
            mark = "*" if runs < repeats else " "
            print(f"{layer.short_name:<17} {layer.multiplicity:>3} {flops / 1e9:>6.3f}  "
                  f"{algorithm:<10} {t_convlab * 1e3:>8.2f} {flops / t_convlab / 1e9:>8.1f}  "
                  f"{t_numpy * 1e3:>9.2f} {flops / t_numpy / 1e9:>8.1f}  "
                  f"{t_numpy / t_convlab:>6.2f}x{mark}")
    print("-" * len(header))

    total_flops = sum(flops * layer.multiplicity for layer, flops, _, _ in rows)
    total_convlab = sum(t * layer.multiplicity for layer, _, t, _ in rows)
    total_numpy = sum(t * layer.multiplicity for layer, _, _, t in rows)
    occurrences = sum(layer.multiplicity for layer, _, _, _ in rows)
    geo_mean = math.exp(statistics.fmean(math.log(tn / tc) for _, _, tc, tn in rows))
    print(f"{'network total':<17} {occurrences:>3} {total_flops / 1e9:>6.3f}  {'':<10} "
          f"{total_convlab * 1e3:>8.2f} {total_flops / total_convlab / 1e9:>8.1f}  "
          f"{total_numpy * 1e3:>9.2f} {total_flops / total_numpy / 1e9:>8.1f}  "
          f"{total_numpy / total_convlab:>6.2f}x")
    print(f"geo-mean speedup over the {len(rows)} distinct layers: {geo_mean:.2f}x")
    if reduced:
        print(f"* fewer runs than --repeats {repeats}, to keep the demo inside its "
              f"{TIME_BUDGET_SECONDS:.0f} s timing budget")
    agree = worst <= AGREE_TOLERANCE
    print(f"largest normwise difference between convlab and the NumPy baseline: "
          f"{worst:.1e} (tolerance {AGREE_TOLERANCE:.0e}): {'OK' if agree else 'FAILED'}")
    print(f"demo finished in {time.perf_counter() - started:.1f} s{_load_note()}")
    return 0 if agree else 1
