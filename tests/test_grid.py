"""Every registered algorithm against the float64 oracle over a designed grid of problems.

The full product (dtype x data_format x weights_format x rank x groups x attribute case) has
576 cells per algorithm. The grid keeps every (dtype, formats, rank, groups) cell (72 per
algorithm) and assigns the attribute case by ``(rank/groups index + dtype/format index) % 8``.
With 9 rank/groups pairs and 8 dtype/format combinations, that meets every attribute case
with every rank/groups pair exactly once and with every dtype/format combination at least
once, per algorithm. The kernel is all-3 ("k3", what Winograd-style algorithms need) or of
mixed extents ("mixed", which exposes swapped axes), alternating so that every attribute
case, rank and format meets both (``test_grid_design_covers_every_pairing`` checks it).
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import convlab
from tests.helpers import (
    ALGORITHMS,
    assert_matches_reference,
    problem_of,
    random_tensors,
    skip_unless_supported,
)

BATCH = 2
# Extents differ per axis (and the mixed kernels are not cubes), so a swapped axis shows up.
INPUT_SHAPES = {1: (10,), 2: (7, 6), 3: (6, 6, 5)}
KERNEL_SHAPES = {"k3": {1: (3,), 2: (3, 3), 3: (3, 3, 3)},
                 "mixed": {1: (2,), 2: (3, 2), 3: (2, 3, 3)}}
# name -> (groups, IC, OC)
GROUPINGS = {"dense": (1, 3, 4), "grouped": (2, 4, 6), "depthwise": (4, 4, 4)}


def _axes(values, rank):
    return tuple(values[:rank])


# Each case: rank -> (attributes, with_bias). The auto_pad cases pass pads that must be
# ignored, and make at least one axis's total pad odd (ASYMMETRIC_WITH says with which
# kernel), which is where same_upper and same_lower differ. Only some cases use strides or
# dilations, so that algorithms restricted to unit strides and dilations meet the others.
ATTRIBUTE_CASES = {
    "strides": lambda r: (dict(strides=_axes((2, 3, 2), r)), True),
    "dilations": lambda r: (dict(dilations=_axes((2, 2, 1), r), pads_begin=1, pads_end=1),
                            False),
    # pads reaching beyond K - 1 give outputs whose every tap is padding
    "asymmetric_pads": lambda r: (dict(pads_begin=_axes((4, 0, 1), r),
                                       pads_end=_axes((0, 3, 2), r)), False),
    "same_upper": lambda r: (dict(auto_pad="same_upper", strides=2,
                                  pads_begin=7, pads_end=_axes((9, 9, 9), r)), False),
    "same_lower": lambda r: (dict(auto_pad="SAME_LOWER", pads_begin=7), False),
    "valid": lambda r: (dict(auto_pad="valid", pads_end=5), True),
    "bias": lambda r: (dict(pads_begin=1, pads_end=1), True),
    "negative_pads": lambda r: (dict(pads_begin=_axes((-1, -2, 0), r),
                                     pads_end=_axes((-2, 1, -1), r)), True),
}
CASE_NAMES = list(ATTRIBUTE_CASES)
ASYMMETRIC_WITH = {"same_upper": "k3", "same_lower": "mixed"}

DTYPE_FORMATS = list(itertools.product(("float32", "float64"), ("NCX", "NXC"), ("OIX", "XIO")))
RANK_GROUPS = list(itertools.product((1, 2, 3), GROUPINGS))


def grid_cells():
    for (c, (dtype, data_format, weights_format)), (p, (rank, grouping)) in itertools.product(
            enumerate(DTYPE_FORMATS), enumerate(RANK_GROUPS)):
        kernel = ("k3", "mixed")[(c + c // 4 + p) % 2]
        yield (dtype, data_format, weights_format, rank, grouping, kernel,
               CASE_NAMES[(p + c) % 8])


GRID = [pytest.param(algorithm, *cell, id="-".join([algorithm, *cell[:3], f"r{cell[3]}",
                                                     *cell[4:]]))
        for algorithm in ALGORITHMS for cell in grid_cells()]


def grid_problem(rng, dtype, data_format, weights_format, rank, grouping, kernel, case):
    groups, in_channels, out_channels = GROUPINGS[grouping]
    attributes, with_bias = ATTRIBUTE_CASES[case](rank)
    attributes = dict(attributes, groups=groups, data_format=data_format,
                      weights_format=weights_format)
    src, weights, bias = random_tensors(
        rng, batch=BATCH, in_channels=in_channels, out_channels=out_channels, groups=groups,
        input_shape=INPUT_SHAPES[rank], kernel_shape=KERNEL_SHAPES[kernel][rank], dtype=dtype,
        data_format=data_format, weights_format=weights_format, bias=with_bias)
    return src, weights, bias, attributes


@pytest.mark.parametrize(
    "algorithm, dtype, data_format, weights_format, rank, grouping, kernel, case", GRID)
def test_algorithm_matches_reference(rng, isa_level, algorithm, dtype, data_format,
                                     weights_format, rank, grouping, kernel, case):
    src, weights, bias, attributes = grid_problem(rng, dtype, data_format, weights_format,
                                                  rank, grouping, kernel, case)
    skip_unless_supported(algorithm, problem_of(src, weights, bias, attributes))
    got = convlab.convolve(src, weights, bias, algorithm=algorithm, **attributes)
    assert_matches_reference(got, src, weights, bias, attributes, algorithm)


@pytest.mark.parametrize("rank, grouping", RANK_GROUPS)
def test_auto_matches_reference(rng, rank, grouping):
    """algorithm="auto" (default) on every rank and grouping, in both layouts."""
    for data_format, weights_format in (("NXC", "XIO"), ("NCX", "OIX")):
        src, weights, bias, attributes = grid_problem(rng, "float32", data_format,
                                                      weights_format, rank, grouping, "k3",
                                                      "bias")
        got = convlab.convolve(src, weights, bias, **attributes)
        chosen = convlab.select_algorithm(src, weights, bias, **attributes)
        assert_matches_reference(got, src, weights, bias, attributes, chosen, "(auto)")


def test_grid_design_covers_every_pairing():
    cells = list(grid_cells())
    assert len(cells) == len(DTYPE_FORMATS) * len(RANK_GROUPS)
    for case in CASE_NAMES:
        mine = [cell for cell in cells if cell[-1] == case]
        assert {(cell[3], cell[4]) for cell in mine} == set(RANK_GROUPS), case
        assert {cell[:3] for cell in mine} == set(DTYPE_FORMATS), case
        assert {cell[5] for cell in mine} == set(KERNEL_SHAPES), case
    for rank, grouping in RANK_GROUPS:
        assert {cell[5] for cell in cells if cell[3:5] == (rank, grouping)} == set(KERNEL_SHAPES)
    for dtype_formats in DTYPE_FORMATS:
        assert {cell[5] for cell in cells if cell[:3] == dtype_formats} == set(KERNEL_SHAPES)


@pytest.mark.parametrize("kernel", list(KERNEL_SHAPES))
@pytest.mark.parametrize("case", CASE_NAMES)
@pytest.mark.parametrize("rank", [1, 2, 3])
def test_attribute_cases_are_valid_and_distinct(case, rank, kernel):
    """Every case builds a valid problem, and the auto_pad cases pad asymmetrically."""
    _, in_channels, out_channels = GROUPINGS["dense"]
    attributes, _ = ATTRIBUTE_CASES[case](rank)
    src = np.zeros((1, in_channels, *INPUT_SHAPES[rank]))
    weights = np.zeros((out_channels, in_channels, *KERNEL_SHAPES[kernel][rank]))
    problem = problem_of(src, weights, None, dict(attributes, data_format="NCX",
                                                  weights_format="OIX"))
    if ASYMMETRIC_WITH.get(case) == kernel:
        assert problem.pads_begin != problem.pads_end, problem.describe()
