"""Hypothesis: random valid problems, every algorithm against the float64 oracle."""
from __future__ import annotations

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

import convlab  # noqa: E402
from convlab.dispatch import registry  # noqa: E402
from tests.helpers import ALGORITHMS, assert_matches_reference, problem_of, random_tensors  # noqa: E402

AUTO_PADS = ["none", "same_upper", "same_lower", "valid", "NOTSET", "SAME_UPPER", "SAME_LOWER",
             "VALID"]


@st.composite
def problems(draw):
    """A valid problem of rank 1-3 with small extents, and its attributes.

    Input extents are drawn above the smallest extent that still gives a non-empty output,
    so explicit pads (negative ones included) never make the problem invalid.
    """
    rank = draw(st.integers(1, 3))
    groups = draw(st.integers(1, 3))
    icg = draw(st.integers(1, 3))
    ocg = draw(st.integers(1, 3))

    def per_axis(low, high):
        """An int (same on every axis) or one int per axis; returns (argument, per-axis)."""
        value = draw(st.one_of(st.integers(low, high),
                               st.lists(st.integers(low, high), min_size=rank,
                                        max_size=rank)))
        return value, [value] * rank if isinstance(value, int) else value

    # Half the problems are dense 3-kernels with unit strides and dilations, the shape
    # that restricted algorithms (Winograd F(m, 3)) accept, so they get examples too.
    if draw(st.booleans()):
        kernel, strides, (dilations, dilation_axes) = [3] * rank, 1, (1, [1] * rank)
    else:
        kernel = draw(st.lists(st.integers(1, 3), min_size=rank, max_size=rank))
        strides, _ = per_axis(1, 3)
        dilations, dilation_axes = per_axis(1, 3)
    pads_begin, begin_axes = per_axis(-2, 3)
    pads_end, end_axes = per_axis(-2, 3)
    auto_pad = draw(st.sampled_from(AUTO_PADS))
    explicit = auto_pad.lower() in ("none", "notset")
    input_shape = []
    for k, d, pb, pe in zip(kernel, dilation_axes, begin_axes, end_axes):
        extent = (k - 1) * d + 1
        smallest = max(1, extent - (pb + pe) if explicit else extent)
        input_shape.append(draw(st.integers(smallest, smallest + 5)))
    attributes = dict(strides=strides, dilations=dilations, auto_pad=auto_pad, groups=groups,
                      data_format=draw(st.sampled_from(["NCX", "NXC"])),
                      weights_format=draw(st.sampled_from(["OIX", "XIO"])))
    if explicit:
        attributes.update(pads_begin=pads_begin, pads_end=pads_end)
    shapes = dict(batch=draw(st.integers(1, 2)), in_channels=groups * icg,
                  out_channels=groups * ocg, groups=groups, input_shape=input_shape,
                  kernel_shape=kernel, dtype=draw(st.sampled_from(["float32", "float64"])),
                  data_format=attributes["data_format"],
                  weights_format=attributes["weights_format"], bias=draw(st.booleans()))
    return shapes, attributes, draw(st.integers(0, 2**32 - 1))


@pytest.mark.parametrize("algorithm", ALGORITHMS)
# isa_level (conftest) holds one instruction-set cap for all of a test's examples
@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.filter_too_much,
                                 HealthCheck.function_scoped_fixture])
@given(case=problems())
def test_random_problems_match_reference(isa_level, algorithm, case):
    shapes, attributes, seed = case
    src, weights, bias = random_tensors(np.random.default_rng(seed), **shapes)
    problem = problem_of(src, weights, bias, attributes)
    hypothesis.assume(registry.get_algorithm(algorithm).supports(problem) is None)
    got = convlab.convolve(src, weights, bias, algorithm=algorithm, **attributes)
    assert_matches_reference(got, src, weights, bias, attributes, algorithm)
