"""Float32 accuracy of Winograd F(m, 3) against the float64 reference, with direct alongside.

    python bench/winograd_accuracy.py             # the tables, as markdown, on stdout
    python bench/winograd_accuracy.py --write     # ... and into
                                                  # convlab/strategies/winograd_accuracy.md
    python bench/winograd_accuracy.py --points    # also compare interpolation point sets

The measure is the relative error ||y - ref||_2 / ||ref||_2 over the whole output, for
standard-normal src and weights (fixed seeds), batch 1, pads 1. The 2-D table is the one
the strategy quotes (``convlab.strategies.winograd.MEASURED_RELATIVE_ERROR``, printed at
the end for pasting); the 1-D table compares with published 1-D F(m, 3) figures. The
``--points`` section runs the same kernel with other Cook-Toom point sets, which is how
the sets in :mod:`convlab.strategies.winograd_transforms` were chosen.
"""
from __future__ import annotations

import argparse
import os
import sys
from fractions import Fraction

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import convlab  # noqa: E402
from convlab.problem import params  # noqa: E402
from convlab.strategies import winograd, winograd_transforms as wt  # noqa: E402

CHANNELS = (16, 64, 256, 512)
SPATIAL = (7, 14, 28, 56)
LENGTHS_1D = (56, 1024)
CHANNELS_3D = (16, 64, 256, 512)
SPATIAL_3D = (6, 10, 16)
OUT_CHANNELS = 16   # the error per output does not depend on OC; few keep the oracle quick
ALGORITHMS = ("direct", "winograd2", "winograd4", "winograd6")
HEADER = ("IC", "spatial") + ALGORITHMS

# Candidate point sets (finite points; infinity is always added). The first of each tile
# size is the one in use.
CANDIDATES = {
    4: {"0, ±1, 1/2, -2": (0, 1, -1, Fraction(1, 2), -2),
        "0, ±1, -1/2, 2": (0, 1, -1, Fraction(-1, 2), 2),
        "0, ±1, ±2": (0, 1, -1, 2, -2),
        "0, ±1, ±1/2": (0, 1, -1, Fraction(1, 2), Fraction(-1, 2)),
        "0, ±1, ±3": (0, 1, -1, 3, -3)},
    6: {"0, ±1, ±2, ±1/2": (0, 1, -1, 2, -2, Fraction(1, 2), Fraction(-1, 2)),
        "0, ±1, ±2, ±3": (0, 1, -1, 2, -2, 3, -3),
        "0, ±1, ±2, ±1/4": (0, 1, -1, 2, -2, Fraction(1, 4), Fraction(-1, 4)),
        "0, ±1, ±1/2, ±3/2": (0, 1, -1, Fraction(1, 2), Fraction(-1, 2), Fraction(3, 2),
                              Fraction(-3, 2))},
}


def data(rank, ic, extent, seed):
    rng = np.random.default_rng(seed)
    src = rng.standard_normal((1,) + (extent,) * rank + (ic,)).astype(np.float32)
    weights = rng.standard_normal((3,) * rank + (ic, OUT_CHANNELS)).astype(np.float32)
    reference = convlab.reference.convolve(src, weights, pads_begin=1, pads_end=1)
    return src, weights, reference


def relative_error(got, reference):
    return float(np.linalg.norm(got.astype(np.float64) - reference) / np.linalg.norm(reference))


def with_transform(transform, src, weights):
    """The strategy's kernel run with any Cook-Toom transform (same code path as winogradN)."""
    problem = convlab.make_problem(src.shape, src.dtype, weights.shape, weights.dtype,
                                   pads_begin=1, pads_end=1)
    prepared = winograd.prepare(transform, problem, params.canonical_weights(weights, problem))
    dst = np.empty((1, *problem.output_shape, problem.out_channels), np.float32)
    winograd.run_prepared(problem, params.canonical_src(src, problem), prepared, None, dst,
                          convlab.effective_threads())
    return dst


def table(rank, extents, channels=CHANNELS):
    rows = []
    for ic in channels:
        for extent in extents:
            src, weights, reference = data(rank, ic, extent, seed=ic * 1000 + extent)
            errors = [relative_error(convlab.convolve(src, weights, pads_begin=1, pads_end=1,
                                                      algorithm=a), reference)
                      for a in ALGORITHMS]
            rows.append((ic, extent, *errors))
    return rows


def markdown(rows, header):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        cells = [str(v) if isinstance(v, int) else f"{v:.2e}" for v in row]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def worst_per_channels(rows):
    result = {a: {} for a in ALGORITHMS}
    for ic, _, *errors in rows:
        for a, e in zip(ALGORITHMS, errors):
            result[a][ic] = max(result[a].get(ic, 0.0), e)
    return result


def points_section():
    lines = ["## Interpolation points (2-D, spatial 28)", "",
             "| tile | points (+ infinity) | IC 64 | IC 256 |", "|---|---|---|---|"]
    for m, sets in CANDIDATES.items():
        for label, points in sets.items():
            transform = wt.cook_toom(m, wt.KERNEL, points)
            errors = []
            for ic in (64, 256):
                src, weights, reference = data(2, ic, 28, seed=ic * 1000 + 28)
                errors.append(relative_error(with_transform(transform, src, weights),
                                             reference))
            lines.append(f"| F({m}) | {label} | {errors[0]:.2e} | {errors[1]:.2e} |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--write", action="store_true",
                        help="also write the tables to convlab/strategies/winograd_accuracy.md")
    parser.add_argument("--points", action="store_true",
                        help="compare interpolation point sets for F(4) and F(6)")
    args = parser.parse_args(argv)

    rows2 = table(2, SPATIAL)
    rows1 = table(1, LENGTHS_1D)
    rows3 = table(3, SPATIAL_3D, CHANNELS_3D)
    text = [
        "# Winograd accuracy (float32)",
        "",
        ("Relative error ||y - ref||_2 / ||ref||_2 against the float64 reference, N(0, 1) "
         "src and weights, batch 1, pads 1, OC 16. Produced by "
         "`python bench/winograd_accuracy.py --write`."),
        "",
        "## 2-D, F(m x m, 3 x 3)",
        "",
        markdown(rows2, HEADER),
        "",
        "## 1-D, F(m, 3)",
        "",
        ("Published 1-D float32 figures for orientation: F(2,3) 7.7e-8, F(4,3) 3.3e-7, "
         "F(6,3) 8.8e-7, direct 4.6e-8."),
        "",
        markdown(rows1, ("IC", "length") + ALGORITHMS),
        "",
        "## 3-D, F(m x m x m, 3 x 3 x 3) (nested)",
        "",
        ("Three nested transforms round more than two: `precision=\"default\"` judges each "
         "rank by its own worst case (``MEASURED_RELATIVE_ERROR_BY_RANK``)."),
        "",
        markdown(rows3, ("IC", "spatial") + ALGORITHMS),
    ]
    if args.points:
        text += ["", points_section()]
    out = "\n".join(text) + "\n"
    print(out)
    worst = worst_per_channels(rows2)
    print("MEASURED_RELATIVE_ERROR = {")
    for a in ALGORITHMS:
        inner = ", ".join(f"{ic}: {e:.1e}" for ic, e in worst[a].items())
        print(f'    "{a}": {{{inner}}},')
    print("}")
    print("MEASURED_RELATIVE_ERROR_BY_RANK = {")
    for a in ALGORITHMS:
        inner = ", ".join(f"{rank}: {max(worst_per_channels(rows)[a].values()):.1e}"
                          for rank, rows in ((1, rows1), (2, rows2), (3, rows3)))
        print(f'    "{a}": {{{inner}}},')
    print("}")
    if args.write:
        path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                            "convlab", "strategies", "winograd_accuracy.md")
        with open(path, "w") as f:
            f.write(out)
        print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
