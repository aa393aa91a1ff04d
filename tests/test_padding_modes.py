"""padding_mode (PyTorch's zeros/reflect/replicate/circular), data dilation (nGraph) and
negative pads (docs/specification.md §2.4, §2.5, §2.6), through every algorithm.

The oracle's padding modes are checked against torch.nn.functional.pad, its data dilation
against a src stretched by hand; every algorithm is then held to the suite's bound
(tests/helpers.py) against the oracle with the same keywords.
"""
from __future__ import annotations

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

MODES = ["zeros", "reflect", "replicate", "circular"]
INPUT = {1: (9,), 2: (7, 6), 3: (5, 6, 4)}
# asymmetric, one negative pad per rank to show that cropping composes with every mode
PADS = {1: ((2,), (-1,)), 2: ((1, 3), (2, -1)), 3: ((1, 0, 2), (-1, 2, 1))}


def _case(rng, rank, groups=2, dtype="float32", **attributes):
    kernel = (3, 3, 3)[:rank]
    src, weights, bias = random_tensors(
        rng, batch=2, in_channels=4, out_channels=6, groups=groups, input_shape=INPUT[rank],
        kernel_shape=kernel, dtype=dtype, data_format="NCX", weights_format="OIX", bias=True)
    return src, weights, bias, dict(attributes, groups=groups, data_format="NCX",
                                    weights_format="OIX")


@pytest.mark.parametrize("rank", [1, 2, 3])
@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_reference_modes_match_torch(rng, rank, mode):
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    src, weights, bias, attributes = _case(rng, rank, dtype="float64")
    begin, end = (1, 2, 1)[:rank], (2, 1, 2)[:rank]
    got = convlab.reference.convolve(src, weights, bias, padding_mode=mode, pads_begin=begin,
                                     pads_end=end, **attributes)
    widths = [p for b, e in zip(reversed(begin), reversed(end)) for p in (b, e)]
    padded = F.pad(torch.from_numpy(src), widths, mode=mode)
    conv = (F.conv1d, F.conv2d, F.conv3d)[rank - 1]
    expected = conv(padded, torch.from_numpy(weights), torch.from_numpy(bias), groups=2)
    np.testing.assert_allclose(got, expected.numpy(), rtol=1e-12, atol=1e-12)


def test_reference_data_dilation_is_a_stretched_src(rng):
    src, weights, bias, attributes = _case(rng, 2, dtype="float64")
    stretched = np.zeros((2, 4, 2 * 6 + 1, 3 * 5 + 1))
    stretched[:, :, ::2, ::3] = src
    got = convlab.reference.convolve(src, weights, bias, data_dilations=(2, 3), pads_begin=1,
                                     pads_end=(0, -1), **attributes)
    expected = convlab.reference.convolve(stretched, weights, bias, pads_begin=1,
                                          pads_end=(0, -1), **attributes)
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("data_format", ["NCX", "NXC"])
@pytest.mark.parametrize("rank", [1, 2, 3])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_padding_modes_every_algorithm(rng, algorithm, mode, rank, data_format):
    src, weights, bias, attributes = _case(rng, rank)
    begin, end = PADS[rank]
    attributes.update(padding_mode=mode, pads_begin=begin, pads_end=end)
    if data_format == "NXC":
        src = np.ascontiguousarray(np.moveaxis(src, 1, -1))
        attributes["data_format"] = "NXC"
    skip_unless_supported(algorithm, problem_of(src, weights, bias, attributes))
    got = convlab.convolve(src, weights, bias, algorithm=algorithm, **attributes)
    assert_matches_reference(got, src, weights, bias, attributes, algorithm)


@pytest.mark.parametrize("rank", [1, 2, 3])
@pytest.mark.parametrize("case", ["dilated", "dilated+reflect", "dilated+strided"])
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_data_dilations_every_algorithm(rng, algorithm, case, rank):
    src, weights, bias, attributes = _case(rng, rank)
    attributes.update(data_dilations=(2, 3, 2)[:rank], pads_begin=1, pads_end=(2, -1, 0)[:rank])
    if case == "dilated+reflect":
        attributes["padding_mode"] = "reflect"
    if case == "dilated+strided":
        attributes["strides"] = 2
    problem = problem_of(src, weights, bias, attributes)
    assert problem.src_shape == src.shape
    skip_unless_supported(algorithm, problem)
    got = convlab.convolve(src, weights, bias, algorithm=algorithm, **attributes)
    assert_matches_reference(got, src, weights, bias, attributes, algorithm)


def test_materialised_problem_describes_itself(rng):
    src, weights, bias, attributes = _case(rng, 2)
    problem = problem_of(src, weights, bias, dict(attributes, padding_mode="reflect",
                                                  pads_begin=1, pads_end=2,
                                                  data_dilations=2))
    # algorithms see the stretched, padded src (13 + 3, 11 + 3) and no pads
    assert problem.input_shape == (16, 14) and problem.pads_begin == problem.pads_end == (0, 0)
    assert problem.source_shape == (7, 6) and problem.src_shape == (2, 4, 7, 6)
    assert "ld2x2 reflect1x1_2x2" in problem.describe()


def test_plan_passes_padding_mode_and_data_dilations(rng):
    src, weights, bias, attributes = _case(rng, 2)
    attributes.update(padding_mode="circular", pads_begin=2, pads_end=1, data_dilations=2)
    plan = convlab.Convolution(weights, bias, **attributes)
    np.testing.assert_allclose(plan(src), convlab.convolve(src, weights, bias, **attributes),
                               rtol=1e-5, atol=1e-5)
    assert plan(src).shape == problem_of(src, weights, bias, attributes).dst_shape


def test_zeros_mode_is_the_default():
    src = np.arange(10, dtype=np.float64).reshape(1, 1, 10)
    weights = np.ones((1, 1, 3))
    keywords = dict(data_format="NCX", weights_format="OIX", pads_begin=2, pads_end=1)
    np.testing.assert_array_equal(
        convlab.convolve(src, weights, padding_mode="zeros", **keywords),
        convlab.convolve(src, weights, **keywords))
    # precision="highest": exact sums, whichever algorithm auto would otherwise pick.
    reflect = convlab.convolve(src, weights, padding_mode="REFLECT", precision="highest",
                               **keywords).ravel()
    # padded: 2 1 | 0 1 ... 9 | 8, summed three at a time
    assert reflect.tolist() == [3.0, 2.0, 3.0, 6.0, 9.0, 12.0, 15.0, 18.0, 21.0, 24.0, 25.0]
