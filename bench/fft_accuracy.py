"""Float32 accuracy of the fft algorithm against the float64 reference, direct alongside.

    python bench/fft_accuracy.py              # the tables; writes
                                              # bench/results/fft_accuracy_<date>_<cpu>.txt
    python bench/fft_accuracy.py --test-bound # also the worst ratio to the test tolerance

Relative error: ``||y - ref||_2 / ||ref||_2`` over the whole output, standard-normal src
and weights (fixed seeds), batch 1, 'same' pads (K // 2 each side), OC 16; the worst over
the spatial extents of each row, per kernel size and input channel count, in 1-D, 2-D and
3-D, dense and depthwise. The worst per rank is what
``convlab.strategies.fft.MEASURED_RELATIVE_ERROR_BY_RANK`` quotes (printed at the end).

``--test-bound``: the quantity tests/conftest.py bounds, ``max |got - ref| / (eps *
sqrt(L) * max magnitude)`` (its normwise form, factor 1), on the problems the tests run:
the test grid, the edge shapes and random problems drawn as tests/test_properties.py
draws them (fixed seeds), float32 and float64. The tolerance factor is set from its worst
case with headroom.
"""
from __future__ import annotations

import argparse
import datetime
import math
import pathlib
import sys

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import convlab  # noqa: E402
from convlab.runtime import cpu  # noqa: E402
from convlab.strategies import fft_transforms  # noqa: E402

OUT_CHANNELS = 16
# (rank, kernel, channels, extents): extents at least twice the kernel, so that a tile
# holds interior outputs, and a large-kernel image several tiles wide
CASES = (
    (1, 3, (1, 16, 64, 256), (256, 4096)),
    (1, 63, (1, 16, 64, 256), (1024, 8192)),
    (1, 251, (1, 16, 64), (2048, 16000)),
    (2, 3, (1, 16, 64, 256), (14, 56)),
    (2, 7, (1, 16, 64, 256), (28, 56)),
    (2, 13, (1, 16, 64), (28, 56)),
    (2, 31, (1, 16, 64), (56, 128)),
    (3, 3, (1, 16, 64), (8, 16)),
    (3, 5, (1, 16, 64), (12, 24)),
    (3, 7, (1, 16, 64), (14, 24)),
)
DEPTHWISE_CHANNELS = 64


def relative_error(got, reference) -> float:
    return float(np.linalg.norm(got.astype(np.float64) - reference) / np.linalg.norm(reference))


def measure(rank, kernel, ic, extent, depthwise=False):
    rng = np.random.default_rng(rank * 10**7 + kernel * 10**4 + ic * 10 + extent)
    oc = ic if depthwise else OUT_CHANNELS
    groups = ic if depthwise else 1
    src = rng.standard_normal((1,) + (extent,) * rank + (ic,)).astype(np.float32)
    weights = rng.standard_normal((kernel,) * rank + (ic // groups, oc)).astype(np.float32)
    attributes = dict(pads_begin=kernel // 2, pads_end=kernel // 2, groups=groups)
    reference = convlab.reference.convolve(src, weights, **attributes)
    errors = {}
    for name in ("direct", "fft"):
        errors[name] = relative_error(convlab.convolve(src, weights, algorithm=name,
                                                       **attributes), reference)
    from convlab.strategies import fft
    return errors, fft.last_run["fft_shape"]


def tables():
    lines, worst = [], {}
    header = "| rank | K | IC | extent | fft shape | direct | fft |"
    lines += ["## Dense (OC 16)", "", header, "|---|---|---|---|---|---|---|"]
    for rank, kernel, channels, extents in CASES:
        for ic in channels:
            for extent in extents:
                errors, shape = measure(rank, kernel, ic, extent)
                worst[rank] = max(worst.get(rank, 0.0), errors["fft"])
                lines.append(f"| {rank} | {kernel} | {ic} | {extent} | {shape} | "
                             f"{errors['direct']:.2e} | {errors['fft']:.2e} |")
                print(lines[-1], flush=True)
    lines += ["", f"## Depthwise (IC = OC = G = {DEPTHWISE_CHANNELS})", "", header,
              "|---|---|---|---|---|---|---|"]
    for rank, kernel, _, extents in CASES:
        for extent in extents:
            errors, shape = measure(rank, kernel, DEPTHWISE_CHANNELS, extent, depthwise=True)
            worst[rank] = max(worst.get(rank, 0.0), errors["fft"])
            lines.append(f"| {rank} | {kernel} | {DEPTHWISE_CHANNELS} | {extent} | {shape} | "
                         f"{errors['direct']:.2e} | {errors['fft']:.2e} |")
            print(lines[-1], flush=True)
    return lines, worst


# --------------------------------------------------------------------------- test bound

def _test_problems(random_count):
    """(src, weights, bias, attributes) of the grid, the edge shapes and random problems."""
    from tests import test_edge_cases, test_grid
    from tests.helpers import random_tensors

    rng = np.random.default_rng(20261126)
    for cell in test_grid.grid_cells():
        yield ("grid",) + tuple(test_grid.grid_problem(rng, *cell))
    for case in test_edge_cases.EDGE_SHAPES:
        for dtype in ("float32", "float64"):
            yield ("edge",) + tuple(test_edge_cases.edge_case(rng, case, dtype))
    for index in range(random_count):
        yield ("random",) + tuple(_random_problem(np.random.default_rng(index), random_tensors))


def _random_problem(rng, random_tensors):
    """A problem drawn as tests/test_properties.py's strategy draws them."""
    rank = int(rng.integers(1, 4))
    groups, icg, ocg = (int(v) for v in rng.integers(1, 4, size=3))
    if rng.random() < 0.5:
        kernel, strides, dilations = [3] * rank, [1] * rank, [1] * rank
    else:
        kernel = [int(v) for v in rng.integers(1, 4, size=rank)]
        strides = [int(v) for v in rng.integers(1, 4, size=rank)]
        dilations = [int(v) for v in rng.integers(1, 4, size=rank)]
    pads_begin = [int(v) for v in rng.integers(-2, 4, size=rank)]
    pads_end = [int(v) for v in rng.integers(-2, 4, size=rank)]
    auto_pad = str(rng.choice(["none", "same_upper", "same_lower", "valid"]))
    explicit = auto_pad == "none"
    input_shape = []
    for k, d, pb, pe in zip(kernel, dilations, pads_begin, pads_end):
        extent = (k - 1) * d + 1
        smallest = max(1, extent - (pb + pe) if explicit else extent)
        input_shape.append(int(rng.integers(smallest, smallest + 6)))
    attributes = dict(strides=strides, dilations=dilations, auto_pad=auto_pad, groups=groups)
    if explicit:
        attributes.update(pads_begin=pads_begin, pads_end=pads_end)
    src, weights, bias = random_tensors(
        rng, batch=int(rng.integers(1, 3)), in_channels=groups * icg,
        out_channels=groups * ocg, groups=groups, input_shape=input_shape,
        kernel_shape=kernel, dtype=str(rng.choice(["float32", "float64"])),
        data_format="NXC", weights_format="XIO", bias=bool(rng.random() < 0.5))
    return src, weights, bias, attributes


def normwise_ratio(got, src, weights, bias, attributes) -> float:
    """tests/conftest.py's error over its scale="output" allowance at factor 1."""
    problem = convlab.make_problem(src.shape, src.dtype, weights.shape, weights.dtype,
                                   None if bias is None else bias.shape,
                                   None if bias is None else bias.dtype,
                                   **{k: v for k, v in attributes.items()})
    expected = convlab.reference.convolve(src, weights, bias, **attributes)
    magnitude = convlab.reference.convolve(
        np.abs(src.astype(np.float64)), np.abs(weights.astype(np.float64)),
        None if bias is None else np.abs(bias.astype(np.float64)), **attributes)
    length = problem.in_channels_per_group * problem.kernel_size + int(bias is not None)
    allowance = np.finfo(problem.dtype).eps * math.sqrt(length) * magnitude.max()
    error = np.abs(got.astype(np.float64) - expected).max()
    return float(error / allowance) if allowance > 0 else float(error > 0) * math.inf


def test_bound(random_count):
    worst = {}
    for kind, src, weights, bias, attributes in _test_problems(random_count):
        got = convlab.convolve(src, weights, bias, algorithm="fft", **attributes)
        ratio = normwise_ratio(got, src, weights, bias, attributes)
        key = (kind, np.dtype(src.dtype).name)
        worst[key] = max(worst.get(key, 0.0), ratio)
    lines = ["## Test tolerance ratio (factor 1, scale='output')", "",
             "| problems | dtype | worst ratio |", "|---|---|---|"]
    for (kind, dtype), ratio in sorted(worst.items()):
        lines.append(f"| {kind} | {dtype} | {ratio:.3g} |")
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--test-bound", action="store_true")
    parser.add_argument("--random", type=int, default=750,
                        help="random problems for --test-bound (5 x 150 by default)")
    parser.add_argument("--out", help="result file (default bench/results/"
                                      "fft_accuracy_<date>_<cpu>.txt)")
    args = parser.parse_args(argv)
    date = datetime.date.today().isoformat()
    out = pathlib.Path(args.out or HERE / "results" / f"fft_accuracy_{date}_{cpu.cpu_slug()}.txt")
    lines = ["# fft accuracy, float32 against the float64 reference", "",
             f"command: python bench/fft_accuracy.py {' '.join(sys.argv[1:])}",
             f"machine: {cpu.cpu_model()}, ISA {cpu.effective_isa()}; numpy "
             f"{np.__version__}, scipy {__import__('scipy').__version__}; fft transforms "
             f"{fft_transforms.BACKEND}; date {date}", ""]
    rows, worst = tables()
    lines += rows
    lines += ["", "Worst fft relative error per rank (MEASURED_RELATIVE_ERROR_BY_RANK):",
              "    " + repr({rank: float(f"{value:.2g}") for rank, value in sorted(worst.items())})]
    if args.test_bound:
        lines += [""] + test_bound(args.random)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines[-12:]))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
