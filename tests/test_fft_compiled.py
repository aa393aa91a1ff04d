"""fft's compiled pipeline (convlab/strategies/fft_compiled.py on the kernels of
convlab/strategies/kernels/_fft.pyx, fft_lanes.h and fft_tiles.h).

What these tests cover:

* the 8- and 16-lane transforms (``_fft.lane_transform``) against ``numpy.fft`` for every
  radix mix, at every instruction-set level, the lengths they refuse,
  ``_fft.fast_length``;
* results against the float64 reference on depthwise layers (rank 1 to 3) and banks of
  filters on one input channel, over groups, batch, pads (asymmetric, negative, padding
  only outputs), dilation, kernels longer than the image, bias, XIO/OIX weights and
  NXC/NCX data, each checked to have run the compiled pipeline;
* several tiles per axis under a reduced workspace limit, and the Python pipeline where
  no tile fits;
* bit-identical results at any thread count, at every instruction-set level the machine
  runs; the lane count each level runs, and spectra made at one lane count (a plan
  prepared under one cap on the instruction set) run after the cap changes;
* plans (weight spectra transformed once), inputs left unchanged, Inf and NaN placed as
  direct places them;
* the problems the compiled pipeline leaves to the Python one.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

import convlab
from convlab.runtime import cpu
from convlab.runtime.threads import available_cores
from convlab.strategies import fft, fft_compiled, im2col
from convlab.strategies.kernels import _fft
from tests.helpers import (
    TEST_ISA_LEVELS,
    assert_matches_reference,
    call_from_threads,
    problem_of,
    random_tensors,
)

WORKSPACE_SETTING = pytest.mark.thread_unsafe(reason="changes the process-wide workspace "
                                                     "limit")

# The normwise bound ||y - ref|| / ||ref|| is this many times the float32 error fft
# documents for the problem's rank (fft.relative_error: 3.1e-7 to 4.4e-7, measured on
# N(0, 1) data), so at most ~2e-6. The compiled pipeline measured 1.3e-7 to 1.9e-7 on the
# problems below; a missing or misplaced tap is off by ~1 / sqrt(taps), far above it.
RELATIVE_ERROR_FACTOR = 4.5

# --------------------------------------------------------------------------- helpers


def _tensors(rng, *, batch=1, groups, ocg=1, icg=1, input_shape, kernel, bias=True,
             dtype="float32", data_format="NXC", weights_format="XIO", **attributes):
    """Standard-normal src, weights and bias for ``groups`` groups of ``icg`` input and
    ``ocg`` output channels, and the attributes of the call."""
    src, weights, b = random_tensors(
        rng, batch=batch, in_channels=groups * icg, out_channels=groups * ocg, groups=groups,
        input_shape=input_shape, kernel_shape=kernel, dtype=dtype, data_format=data_format,
        weights_format=weights_format, bias=bias)
    attributes = dict(attributes, groups=groups, data_format=data_format,
                      weights_format=weights_format)
    return src, weights, b, attributes


def _f64(value):
    return None if value is None else np.asarray(value, dtype=np.float64)


def normwise_error(got, src, weights, bias, attributes) -> float:
    """||got - ref|| / ||ref||, ref the float64 reference of the float64 inputs."""
    ref = convlab.reference.convolve(_f64(src), _f64(weights), _f64(bias), **attributes)
    assert got.shape == ref.shape
    return float(np.linalg.norm(got.astype(np.float64) - ref) / np.linalg.norm(ref))


def assert_accurate(got, src, weights, bias, attributes, context=""):
    """``got`` within RELATIVE_ERROR_FACTOR x fft's documented error, normwise, and within
    the suite's per-output fft tolerance (tests.helpers.assert_matches_reference)."""
    problem = problem_of(src, weights, bias, attributes)
    assert got.dtype == problem.dtype
    error = normwise_error(got, src, weights, bias, attributes)
    bound = RELATIVE_ERROR_FACTOR * fft.relative_error(problem)
    assert error <= bound, (f"normwise relative error {error:.3g} > {bound:.3g}: "
                            f"{problem.describe()} {attributes} {context}")
    assert_matches_reference(got, src, weights, bias, attributes, "fft", context)


def assert_compiled(expected_mode=None):
    """The latest fft call ran the compiled pipeline (in ``expected_mode`` if given)."""
    pipeline = fft.last_run.get("pipeline", "")
    assert pipeline.startswith("compiled"), fft.last_run
    if expected_mode is not None:
        assert pipeline == f"compiled ({expected_mode})", fft.last_run


def assert_python_pipeline():
    """The latest fft call ran the Python pipeline: its record has no "pipeline" entry
    (the compiled one's does) but the Python tiling's contraction and block count."""
    assert "pipeline" not in fft.last_run, fft.last_run
    assert {"contraction", "blocks"} <= set(fft.last_run), fft.last_run


def _tiles(last_run) -> tuple[int, ...]:
    return tuple(int(v) for v in last_run["tiles"].split("x"))


def _fft_call(src, weights, bias, attributes, **options):
    return convlab.convolve(src, weights, bias, algorithm="fft", **attributes, **options)


@pytest.fixture
def workspace():
    """Set the workspace limit with ``workspace(nbytes)``; the limit before the test is
    restored after it, whatever the test does."""
    previous = im2col.get_workspace_limit()
    try:
        yield im2col.set_workspace_limit
    finally:
        im2col.set_workspace_limit(previous)


def _per_thread_limit(nbytes: int) -> int:
    """A workspace limit that leaves each of the machine's cores ``nbytes`` of scratch
    (the compiled tiling must fit one scratch per core)."""
    return nbytes * available_cores()


# --------------------------------------------------------------------------- transforms

SMOOTH_LENGTHS = [1, 2, 3, 4, 5, 8, 9, 12, 15, 16, 25, 27, 45, 64, 100, 128, 243, 360,
                  1024, 3456]


def _assert_lane_transforms(rng, n, lanes, inverse):
    """Each of the ``lanes`` lanes is the unscaled DFT of its own data (forward sign
    exp(-2 pi i jk / n); the inverse is n * numpy's ifft)."""
    data = (rng.standard_normal((n, lanes))
            + 1j * rng.standard_normal((n, lanes))).astype(np.complex64)
    re = np.ascontiguousarray(data.real)
    im = np.ascontiguousarray(data.imag)
    _fft.lane_transform(re, im, inverse)
    x = data.astype(np.complex128)
    want = n * np.fft.ifft(x, axis=0) if inverse else np.fft.fft(x, axis=0)
    got = re.astype(np.float64) + 1j * im.astype(np.float64)
    for lane in range(lanes):
        error = np.linalg.norm(got[:, lane] - want[:, lane]) / np.linalg.norm(want[:, lane])
        assert error < 1e-5, (n, lanes, lane, error)


@pytest.mark.parametrize("lanes", _fft.LANE_COUNTS, ids=[f"lanes{v}" for v in _fft.LANE_COUNTS])
@pytest.mark.parametrize("inverse", [False, True], ids=["forward", "inverse"])
@pytest.mark.parametrize("n", SMOOTH_LENGTHS, ids=[f"n{n}" for n in SMOOTH_LENGTHS])
def test_lane_transform_matches_numpy(rng, n, inverse, lanes):
    _assert_lane_transforms(rng, n, lanes, inverse)


@pytest.mark.parametrize("lanes", _fft.LANE_COUNTS, ids=[f"lanes{v}" for v in _fft.LANE_COUNTS])
def test_lane_transforms_match_numpy_at_every_isa_level(rng, isa_level, lanes):
    """Both lane counts run at every level (each level's copies of either)."""
    for n in (2, 45, 128, 360, 1024, 3456):
        for inverse in (False, True):
            _assert_lane_transforms(rng, n, lanes, inverse)


@pytest.mark.parametrize("lanes", _fft.LANE_COUNTS, ids=[f"lanes{v}" for v in _fft.LANE_COUNTS])
def test_lane_transform_round_trip_scales_by_n(rng, lanes):
    n = 360
    re = rng.standard_normal((n, lanes)).astype(np.float32)
    im = rng.standard_normal((n, lanes)).astype(np.float32)
    before = re + 1j * im
    _fft.lane_transform(re, im, False)
    _fft.lane_transform(re, im, True)
    np.testing.assert_allclose(re + 1j * im, n * before, rtol=0, atol=1e-4 * n)


@pytest.mark.parametrize("n", [7, 11, 14, 4097, 4320],
                         ids=["n7", "n11", "n14", "n4097", "n4320-too-long"])
def test_lane_transform_refuses_lengths_it_has_no_plan_for(n):
    re = np.zeros((n, 8), np.float32)
    im = np.zeros((n, 8), np.float32)
    with pytest.raises(ValueError, match="2\\^a 3\\^b 5\\^c"):
        _fft.lane_transform(re, im, False)


def test_lane_transform_refuses_arrays_of_the_wrong_shape():
    with pytest.raises(ValueError, match="re and im"):
        _fft.lane_transform(np.zeros((8, 4), np.float32), np.zeros((8, 4), np.float32), False)
    with pytest.raises(ValueError, match="re and im"):
        _fft.lane_transform(np.zeros((8, 8), np.float32), np.zeros((9, 8), np.float32), False)
    with pytest.raises(ValueError, match="re and im"):
        _fft.lane_transform(np.zeros((8, 16), np.float32), np.zeros((8, 8), np.float32),
                            False)
    with pytest.raises(ValueError, match="re and im"):
        _fft.lane_transform(np.zeros((8, 12), np.float32), np.zeros((8, 12), np.float32),
                            False)


def test_fast_length():
    assert _fft.fast_length(13) == 15
    assert _fft.fast_length(4097) == -1
    assert _fft.fast_length(4096) == 4096
    assert _fft.fast_length(1) == 1
    assert [_fft.fast_length(n) for n in (7, 11, 17, 49, 3457)] == [8, 12, 18, 50, 3600]


# --------------------------------------------------------------------------- correctness

# name: (expected mode, _tensors arguments)
CASES = {
    "dw1d-k31-same": ("depthwise", dict(groups=24, input_shape=(200,), kernel=(31,),
                                         pads_begin=15, pads_end=15)),
    "dw1d-pad-only-outputs": ("depthwise", dict(groups=16, input_shape=(20,), kernel=(3,),
                                                 pads_begin=6, pads_end=5)),
    "dw2d-g20-batch3": ("depthwise", dict(batch=3, groups=20, input_shape=(19, 23),
                                          kernel=(7, 5), pads_begin=(3, 2),
                                          pads_end=(3, 2))),
    "dw2d-g9-k31-longer-than-image": ("depthwise", dict(groups=9, input_shape=(14, 14),
                                                        kernel=(31, 31), pads_begin=15,
                                                        pads_end=15)),
    "dw2d-negative-asymmetric-pads": ("depthwise", dict(batch=2, groups=17,
                                                        input_shape=(21, 18), kernel=(5, 7),
                                                        pads_begin=(-1, 4),
                                                        pads_end=(3, -2))),
    "dw2d-no-pads-no-bias": ("depthwise", dict(groups=8, input_shape=(12, 16),
                                               kernel=(5, 5), bias=False)),
    "dw2d-dilation-2x3": ("depthwise", dict(groups=32, input_shape=(24, 20), kernel=(5, 3),
                                            pads_begin=(4, 3), pads_end=(4, 3),
                                            dilations=(2, 3))),
    "dw2d-ncx-oix": ("depthwise", dict(batch=2, groups=20, input_shape=(15, 13),
                                       kernel=(7, 7), pads_begin=3, pads_end=(2, 4),
                                       data_format="NCX", weights_format="OIX")),
    "dw3d-k7": ("depthwise", dict(groups=16, input_shape=(10, 9, 8), kernel=(7, 7, 7),
                                  pads_begin=3, pads_end=3)),
    "dw3d-g9-dilation3-ncx": ("depthwise", dict(batch=2, groups=9, input_shape=(9, 8, 10),
                                                kernel=(3, 3, 3), dilations=3, pads_begin=3,
                                                pads_end=(2, 3, 1), data_format="NCX")),
    "bank1d-oc20-batch3": ("bank", dict(batch=3, groups=1, ocg=20, input_shape=(300,),
                                        kernel=(63,), pads_begin=31, pads_end=31)),
    "bank1d-oc40-dilation2-no-bias": ("bank", dict(groups=1, ocg=40, input_shape=(150,),
                                                   kernel=(25,), dilations=2, pads_begin=24,
                                                   pads_end=24, bias=False)),
    "bank1d-oc8-k25-longer-than-image": ("bank", dict(batch=2, groups=1, ocg=8,
                                                      input_shape=(10,), kernel=(25,),
                                                      pads_begin=12, pads_end=12)),
    "bank1d-g2-oc33-oix": ("bank", dict(groups=2, ocg=33, input_shape=(90,), kernel=(17,),
                                        pads_begin=-2, pads_end=9, weights_format="OIX")),
    "bank2d-g3-oc8-negative-pad": ("bank", dict(batch=2, groups=3, ocg=8,
                                                input_shape=(17, 15), kernel=(5, 5),
                                                pads_begin=(2, 1), pads_end=(-1, 3))),
    "bank2d-ncx-dilation3": ("bank", dict(groups=1, ocg=16, input_shape=(16, 14),
                                          kernel=(3, 3), dilations=3, pads_begin=3,
                                          pads_end=3, data_format="NCX")),
    "bank3d-g2-oc9": ("bank", dict(groups=2, ocg=9, input_shape=(6, 7, 8),
                                   kernel=(3, 3, 3), pads_begin=1, pads_end=1)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_compiled_pipeline_matches_reference(rng, name):
    expected_mode, arguments = CASES[name]
    src, weights, bias, attributes = _tensors(rng, **arguments)
    problem = problem_of(src, weights, bias, attributes)
    assert fft_compiled.mode(problem) == expected_mode
    assert fft_compiled.tiling(problem) is not None
    got = _fft_call(src, weights, bias, attributes)
    assert_compiled(expected_mode)
    assert fft.last_run["fallback"] is None
    assert_accurate(got, src, weights, bias, attributes, name)


def test_outputs_whose_taps_are_all_padding_are_the_bias_exactly(rng):
    src, weights, bias, attributes = _tensors(rng, groups=16, input_shape=(20,),
                                              kernel=(3,), pads_begin=6, pads_end=5)
    got = _fft_call(src, weights, bias, attributes)
    assert_compiled("depthwise")
    # 29 outputs; output o reads src [o - 6, o - 3): only padding for o <= 3 and o >= 26
    assert got.shape == (1, 29, 16)
    for o in (0, 1, 2, 3, 26, 27, 28):
        np.testing.assert_array_equal(got[0, o], bias)


def test_the_out_argument_receives_the_result(rng):
    """A preallocated NCX ``out`` (its NXC view not C-contiguous) receives the result."""
    src, weights, bias, attributes = _tensors(rng, groups=16, input_shape=(11, 12),
                                              kernel=(5, 5), pads_begin=2, pads_end=2,
                                              data_format="NCX")
    out = np.full((1, 16, 11, 12), np.nan, np.float32)
    got = _fft_call(src, weights, bias, attributes, out=out)
    assert_compiled("depthwise")
    assert np.shares_memory(got, out)
    assert_accurate(out, src, weights, bias, attributes)


# --------------------------------------------------------------------------- tiles

# name: (expected mode, _tensors arguments, per-thread scratch bytes)
TILED_CASES = {
    "dw2d": ("depthwise", dict(batch=2, groups=20, input_shape=(60, 50), kernel=(9, 9),
                               pads_begin=4, pads_end=4), 160 * 2**10),
    "dw2d-negative-pads-dilation": ("depthwise", dict(groups=16, input_shape=(45, 40),
                                                      kernel=(5, 4), dilations=(2, 3),
                                                      pads_begin=(-2, 5), pads_end=(6, -1)),
                                    96 * 2**10),
    "dw3d": ("depthwise", dict(groups=16, input_shape=(16, 14, 12), kernel=(5, 5, 5),
                               pads_begin=2, pads_end=2), 160 * 2**10),
    "dw1d": ("depthwise", dict(batch=2, groups=24, input_shape=(700,), kernel=(41,),
                               pads_begin=20, pads_end=20), 40 * 2**10),
    "bank1d": ("bank", dict(batch=2, groups=1, ocg=20, input_shape=(1000,), kernel=(63,),
                            pads_begin=31, pads_end=31), 40 * 2**10),
    "bank2d-g2": ("bank", dict(groups=2, ocg=12, input_shape=(40, 36), kernel=(7, 7),
                               pads_begin=3, pads_end=3, bias=False), 64 * 2**10),
    "bank3d": ("bank", dict(groups=1, ocg=16, input_shape=(12, 12, 12), kernel=(3, 3, 3),
                            pads_begin=1, pads_end=1), 64 * 2**10),
}


@WORKSPACE_SETTING
@pytest.mark.parametrize("name", list(TILED_CASES))
def test_several_tiles_per_axis_under_a_small_workspace(rng, workspace, name):
    expected_mode, arguments, per_thread = TILED_CASES[name]
    src, weights, bias, attributes = _tensors(rng, **arguments)
    problem = problem_of(src, weights, bias, attributes)
    limit = _per_thread_limit(per_thread)
    workspace(limit)
    t = fft_compiled.tiling(problem)
    assert t is not None and max(t.tiles_per_axis) > 1, t
    got = _fft_call(src, weights, bias, attributes)
    assert_compiled(expected_mode)
    assert _tiles(fft.last_run) == t.tiles_per_axis
    assert max(_tiles(fft.last_run)) > 1
    assert fft.last_run["workspace_bytes"] * available_cores() <= limit
    assert_accurate(got, src, weights, bias, attributes, f"{name}, tiles {t.tiles_per_axis}")


@WORKSPACE_SETTING
def test_no_tile_fitting_the_workspace_leaves_the_problem_to_the_python_pipeline(rng,
                                                                                workspace):
    src, weights, bias, attributes = _tensors(rng, groups=16, input_shape=(30, 30),
                                              kernel=(9, 9), pads_begin=4, pads_end=4)
    problem = problem_of(src, weights, bias, attributes)
    assert fft_compiled.mode(problem) == "depthwise"
    workspace(8192)
    assert fft_compiled.tiling(problem) is None
    got = _fft_call(src, weights, bias, attributes)
    assert_python_pipeline()
    assert_accurate(got, src, weights, bias, attributes)


@WORKSPACE_SETTING
def test_one_shot_spectra_are_kept_for_the_next_call_only_within_a_bound(rng, workspace):
    """One-shot bank calls compute their spectra in a buffer the thread keeps for the next
    call, up to KEPT_SPECTRA_WORKSPACES workspace limits."""
    # from no buffer: one that an earlier test left could hold the large spectra below
    fft_compiled.drop_kept_spectra()
    small = _tensors(rng, groups=1, ocg=16, input_shape=(40,), kernel=(7,), pads_begin=3,
                     pads_end=3)
    got = _fft_call(*small)
    assert_compiled("bank")
    kept = fft_compiled.kept_spectra_bytes()
    assert kept >= 4 * fft_compiled.tiling(problem_of(*small)).spectrum_floats
    # many groups of a tiny image: spectra above KEPT_SPECTRA_WORKSPACES limits
    cores = available_cores()
    workspace(_per_thread_limit(64 * 1024))
    large = _tensors(rng, groups=2 * (32 * cores + 1), ocg=16, input_shape=(6, 6),
                     kernel=(5, 5), pads_begin=2, pads_end=2)
    t = fft_compiled.tiling(problem_of(*large))
    assert t is not None
    assert (4 * t.spectrum_floats
            > fft_compiled.KEPT_SPECTRA_WORKSPACES * im2col.get_workspace_limit())
    got_large = _fft_call(*large)
    assert_compiled("bank")
    assert fft_compiled.kept_spectra_bytes() == 0
    assert_accurate(got_large, *large)
    # the small problem's result does not depend on which buffer its spectra used
    np.testing.assert_array_equal(_fft_call(*small), got)


ONE_SHOT_DEPTHWISE_CASES = {
    name: arguments for name, (mode, arguments) in CASES.items() if mode == "depthwise"}


@WORKSPACE_SETTING
@pytest.mark.parametrize("limit", ["default", "tiled"])
@pytest.mark.parametrize("name", list(ONE_SHOT_DEPTHWISE_CASES))
def test_one_shot_depthwise_transforms_its_kernels_in_each_task(rng, workspace, name,
                                                                limit):
    """A one-shot depthwise call keeps no spectra: each task transforms its channel
    block's kernels in its scratch (``weight_chunks`` tasks per block). Its result matches
    the reference and the plan's, which runs on spectra transformed once."""
    src, weights, bias, attributes = _tensors(rng, **ONE_SHOT_DEPTHWISE_CASES[name])
    if limit == "tiled":
        workspace(_per_thread_limit(48 * 2**10))
    problem = problem_of(src, weights, bias, attributes)
    t = fft_compiled.tiling(problem)
    if t is None:
        pytest.skip("no compiled tile fits the small workspace")
    assert t.weight_chunks >= 1
    assert fft_compiled.tiling(problem, weights_per_call=False).weight_chunks == 0
    fft_compiled.drop_kept_spectra()
    got = _fft_call(src, weights, bias, attributes)
    assert_compiled("depthwise")
    assert fft.last_run["weight_chunks"] == t.weight_chunks
    assert fft_compiled.kept_spectra_bytes() == 0
    assert_accurate(got, src, weights, bias, attributes, name)
    planned = convlab.Convolution(weights, bias, algorithm="fft", **attributes)(src)
    assert "weight_chunks" not in fft.last_run
    bound = RELATIVE_ERROR_FACTOR * fft.relative_error(problem)
    assert np.linalg.norm(got - planned) <= bound * np.linalg.norm(planned)


def test_one_shot_depthwise_cuts_few_channel_blocks_among_the_cores(rng):
    """One block of channels and several images: the block's units are cut into several
    tasks (each transforming the kernels again) so that the threads share them."""
    src, weights, bias, attributes = _tensors(rng, batch=3, groups=16, input_shape=(21, 18),
                                              kernel=(9, 9), pads_begin=4, pads_end=4)
    problem = problem_of(src, weights, bias, attributes)
    t = fft_compiled.tiling(problem)
    assert t is not None and t.depthwise
    units = problem.batch * math.prod(t.tiles_per_axis)
    assert 1 < t.weight_chunks <= units
    assert fft_compiled.weight_tasks(problem, t) == t.weight_chunks  # one block
    results = [_fft_call(src, weights, bias, attributes, threads=n) for n in (1, 2)]
    assert fft.last_run["weight_chunks"] == t.weight_chunks
    assert np.array_equal(results[0], results[1])
    assert_accurate(results[0], src, weights, bias, attributes)


# --------------------------------------------------------------------------- threads

THREAD_CASES = {
    "depthwise-2d": dict(batch=2, groups=40, input_shape=(33, 29), kernel=(9, 7),
                         pads_begin=(4, 3), pads_end=(4, 3)),
    "depthwise-3d": dict(groups=24, input_shape=(9, 10, 11), kernel=(5, 3, 5),
                         pads_begin=2, pads_end=(2, 1, 2)),
    "bank-1d": dict(batch=3, groups=1, ocg=40, input_shape=(500,), kernel=(63,),
                    pads_begin=31, pads_end=31),
    "bank-2d-g3": dict(batch=2, groups=3, ocg=20, input_shape=(21, 19), kernel=(5, 5),
                       pads_begin=2, pads_end=2),
}


@WORKSPACE_SETTING
@pytest.mark.parametrize("limit", ["default", "tiled"])
@pytest.mark.parametrize("name", list(THREAD_CASES))
def test_thread_counts_give_the_same_bits(rng, workspace, name, limit):
    src, weights, bias, attributes = _tensors(rng, **THREAD_CASES[name])
    if limit == "tiled":
        workspace(_per_thread_limit(48 * 2**10))
    results = []
    for threads in (1, 2, 3):
        results.append(_fft_call(src, weights, bias, attributes, threads=threads))
        assert_compiled()
        if limit == "tiled":
            assert max(_tiles(fft.last_run)) > 1, fft.last_run
    for other in results[1:]:
        assert np.array_equal(other, results[0])
    assert_accurate(results[0], src, weights, bias, attributes, name)


# --------------------------------------------------------------------------- ISA levels

ISA_CASES = {
    "depthwise-2d-g20": dict(batch=2, groups=20, input_shape=(17, 19), kernel=(7, 7),
                             pads_begin=3, pads_end=(2, 4)),
    "depthwise-3d": dict(groups=16, input_shape=(8, 9, 7), kernel=(3, 5, 3),
                         dilations=(1, 2, 1), pads_begin=(1, 4, 1), pads_end=(1, 4, 1)),
    "bank-1d-oc20": dict(batch=2, groups=1, ocg=20, input_shape=(200,), kernel=(31,),
                         pads_begin=15, pads_end=15),
    "bank-2d-g2-oix": dict(groups=2, ocg=9, input_shape=(14, 12), kernel=(5, 3),
                           pads_begin=(2, 1), pads_end=(2, 1), weights_format="OIX"),
}


@pytest.mark.parametrize("name", list(ISA_CASES))
def test_every_isa_level_matches_reference(rng, isa_level, name):
    """``isa_level`` (tests/conftest.py) runs the test at every level this machine
    supports, with the kernels capped there."""
    levels = cpu.kernel_isa_levels()["fft_tiles"]
    if isa_level in levels["built"]:
        assert levels["now"] == isa_level
    src, weights, bias, attributes = _tensors(rng, **ISA_CASES[name])
    got = _fft_call(src, weights, bias, attributes)
    assert_compiled()
    assert_accurate(got, src, weights, bias, attributes, f"{name} (isa {isa_level})")


# --------------------------------------------------------------------------- lane counts

def _expected_lanes(isa_level: str) -> int:
    """The lane count of the level: 16 where the module has an AVX-512 copy to run."""
    built = cpu.kernel_isa_levels()["fft_tiles"]["built"]
    return 16 if isa_level == "avx512" and "avx512" in built else 8


# (mode, arguments, whether the level's widest lanes are the cheaper)
LANE_CASES = {
    "depthwise-g64": ("depthwise", dict(batch=2, groups=64, input_shape=(17, 19),
                                        kernel=(7, 7), pads_begin=3, pads_end=3), True),
    "bank-oc64": ("bank", dict(groups=1, ocg=64, input_shape=(150,), kernel=(31,),
                               pads_begin=15, pads_end=15), True),
    # channels that one 8-lane transform holds: 16 lanes would cost more for them
    "depthwise-g16": ("depthwise", dict(groups=16, input_shape=(17, 19), kernel=(7, 7),
                                        pads_begin=3, pads_end=3), False),
    "bank-oc12": ("bank", dict(groups=2, ocg=12, input_shape=(150,), kernel=(31,),
                               pads_begin=15, pads_end=15), False),
}


@pytest.mark.parametrize("name", list(LANE_CASES))
def test_the_lane_count_follows_the_level(rng, isa_level, name):
    expected_mode, arguments, wide = LANE_CASES[name]
    src, weights, bias, attributes = _tensors(rng, **arguments)
    problem = problem_of(src, weights, bias, attributes)
    expected = _expected_lanes(isa_level) if wide else 8
    assert _fft.lanes() == _expected_lanes(isa_level)
    assert fft_compiled.lane_counts() == tuple(
        count for count in _fft.LANE_COUNTS if count <= _expected_lanes(isa_level))
    t = fft_compiled.tiling(problem)
    assert t is not None and t.lanes == expected
    assert t.geometry[0] == expected
    got = _fft_call(src, weights, bias, attributes)
    assert_compiled(expected_mode)
    assert fft.last_run["lanes"] == expected
    assert_accurate(got, src, weights, bias, attributes, f"{name} (isa {isa_level})")


@pytest.mark.parametrize("lanes", _fft.LANE_COUNTS, ids=[f"lanes{v}" for v in _fft.LANE_COUNTS])
@pytest.mark.parametrize("name", ["depthwise-g64", "bank-oc64"])
def test_every_level_runs_either_lane_count(rng, isa_level, monkeypatch, name, lanes):
    """The kernels run the lane count the geometry says, whatever the level (a cap changed
    between the tiling and the run), with that level's copy or a portable one."""
    monkeypatch.setattr(fft_compiled, "lane_counts", lambda: (lanes,))
    expected_mode, arguments, _ = LANE_CASES[name]
    src, weights, bias, attributes = _tensors(rng, **arguments)
    got = _fft_call(src, weights, bias, attributes)
    assert_compiled(expected_mode)
    assert fft.last_run["lanes"] == lanes
    assert_accurate(got, src, weights, bias, attributes,
                    f"{name}, {lanes} lanes (isa {isa_level})")


@pytest.mark.thread_unsafe(reason="changes the process-wide instruction-set cap")
@pytest.mark.skipif(not {"avx2", "avx512"} <= set(TEST_ISA_LEVELS)
                    or "avx512" not in cpu.kernel_isa_levels()["fft_tiles"]["built"],
                    reason="needs the AVX-512 and AVX2 levels")
@pytest.mark.parametrize("name", ["depthwise-g64", "bank-oc64"])
def test_a_plan_prepared_at_avx512_runs_after_the_cap_drops_to_avx2(rng, name):
    """The spectra are kept per lane count: the plan transforms its weights once more for
    8 lanes, and again none when the cap goes back."""
    expected_mode, arguments, _ = LANE_CASES[name]
    src, weights, bias, attributes = _tensors(rng, **arguments)
    previous = cpu.set_max_isa("avx512")
    try:
        plan = convlab.Convolution(weights, bias, algorithm="fft", **attributes)
        wide = plan(src)
        assert_compiled(expected_mode)
        assert fft.last_run["lanes"] == 16
        (prepared,) = plan._prepared.values()  # the plan's FFTWeights
        assert prepared.transforms == 1
        cpu.set_max_isa("avx2")
        narrow = plan(src)
        assert_compiled(expected_mode)
        assert fft.last_run["lanes"] == 8
        assert prepared.transforms == 2
        cpu.set_max_isa("avx512")
        assert np.array_equal(plan(src), wide)
        assert prepared.transforms == 2
    finally:
        cpu.set_max_isa(previous)
    assert_accurate(wide, src, weights, bias, attributes, f"{name} at avx512")
    assert_accurate(narrow, src, weights, bias, attributes, f"{name} at avx2")
    bound = RELATIVE_ERROR_FACTOR * fft.relative_error(problem_of(src, weights, bias,
                                                                  attributes))
    assert np.linalg.norm(narrow - wide) <= bound * np.linalg.norm(wide)


def test_the_work_counts_price_the_same_work_alike_at_either_lane_count(rng):
    """Channels that fill the lanes at either count, and (banks) at most 8 (image, tile)
    units, which one task of either count holds: the same tiles give the same flops and
    lane points at 8 and 16 lanes, and half the tasks."""
    for arguments in (dict(groups=64, input_shape=(30, 30), kernel=(7, 7)),
                      dict(groups=1, ocg=64, input_shape=(300,), kernel=(31,))):
        problem = problem_of(*_tensors(rng, **arguments))
        found = fft_compiled._tiling_at(problem, 1 << 30, 1, 8)
        assert found is not None
        eight = dataclasses.replace(found[1], out_blocks_per_task=1)
        assert math.prod(eight.tiles_per_axis) <= 8
        narrow = fft_compiled.work_counts(problem, eight)
        wide = fft_compiled.work_counts(problem, dataclasses.replace(eight, lanes=16))
        for term in ("lane_transform_flops", "lane_points", "lane_weight_transform_flops",
                     "lane_weight_points"):
            assert wide[term] == pytest.approx(narrow[term]), term
        assert wide["lane_tasks"] * 2 == narrow["lane_tasks"]


def test_the_tile_choice_prices_threads_left_idle():
    """Equal tasks on the cores: a last round with fewer tasks than cores costs a round."""
    np.testing.assert_allclose(fft_compiled._idle(np.array([1, 2, 3, 4, 5]), 2),
                               [2.0, 1.0, 4 / 3, 1.0, 6 / 5])
    np.testing.assert_allclose(fft_compiled._idle(np.array([1, 7]), 1), [1.0, 1.0])


@pytest.mark.parametrize("cores", [1, 2, 4])
def test_bank_tasks_write_every_output_of_their_units_while_the_units_go_round(rng, cores):
    """Bank tasks cut their (image, tile) units before their blocks of 2l outputs: with
    at least one unit per core, every task takes every block (it owns whole rows of dst);
    with fewer units than cores, tasks of one unit share out the blocks."""
    sincnet_like = problem_of(*_tensors(rng, groups=1, ocg=80, input_shape=(3200,),
                                        kernel=(63,)))
    for lanes in fft_compiled.lane_counts():
        found = fft_compiled._tiling_at(sincnet_like, 1 << 30, cores, lanes)
        assert found is not None
        t = found[1]
        units = math.prod(t.tiles_per_axis)
        out_blocks = -(-80 // (2 * lanes))
        assert units >= cores
        assert t.out_blocks_per_task == out_blocks, t
        assert 1 <= t.units_per_task <= lanes
        assert -(-units // t.units_per_task) >= min(units, fft_compiled.TASKS_PER_CORE * cores)
    # 96 outputs: six blocks of 16 at 8 lanes, on 4 cores, with 1, 2, 3 and 9 tiles
    few = problem_of(*_tensors(rng, groups=1, ocg=96, input_shape=(40,), kernel=(9,)))
    units, blocks = fft_compiled._bank_split(few, np.array([1.0, 2.0, 3.0, 9.0]), 4, 8)
    np.testing.assert_array_equal(units, [1, 1, 1, 1])
    np.testing.assert_array_equal(blocks, [2, 3, 3, 6])


@pytest.mark.parametrize("depthwise", [True, False], ids=["depthwise", "bank"])
def test_the_kernel_says_whether_it_wrote_inf_or_nan(rng, depthwise):
    """``_fft.run`` checks the values it writes: True for finite data, False once one
    input value is Inf (it spreads over its tiles), the same at any thread count."""
    arguments = (dict(groups=16, input_shape=(40,), kernel=(9,)) if depthwise
                 else dict(groups=1, ocg=20, input_shape=(40,), kernel=(9,)))
    src, weights, bias, attributes = _tensors(rng, **arguments)
    problem = problem_of(src, weights, bias, attributes)
    t = fft_compiled.tiling(problem, weights_per_call=False)
    assert t is not None and t.depthwise == depthwise
    canonical = np.moveaxis(np.asarray(weights), problem.rank, 0)
    spectrum = fft_compiled.spectra(problem, canonical, t, 1)
    dst = np.empty((1, *problem.output_shape, problem.out_channels), np.float32)
    for threads in (1, 2):
        assert fft_compiled.run(problem, src, spectrum, bias, dst, threads, t)
        assert np.isfinite(dst).all()
        bad = src.copy()
        bad[0, 20, 0] = np.inf
        assert not fft_compiled.run(problem, bad, spectrum, bias, dst, threads, t)
        assert not np.isfinite(dst).all()


# --------------------------------------------------------------------------- plans

def test_a_plan_transforms_its_weights_once(rng):
    src, weights, bias, attributes = _tensors(rng, groups=16, input_shape=(20, 20),
                                              kernel=(31, 31), pads_begin=15, pads_end=15)
    one_shot = _fft_call(src, weights, bias, attributes)
    assert_compiled("depthwise")
    plan = convlab.Convolution(weights, bias, algorithm="fft", **attributes)
    first = plan(src)
    assert_compiled("depthwise")
    (prepared,) = plan._prepared.values()  # the plan's FFTWeights
    assert isinstance(prepared, fft.FFTWeights)
    assert prepared.transforms == 1
    second = plan(src)
    assert_compiled("depthwise")
    assert prepared.transforms == 1
    assert np.array_equal(first, second)
    assert_accurate(first, src, weights, bias, attributes)
    bound = RELATIVE_ERROR_FACTOR * fft.relative_error(problem_of(src, weights, bias,
                                                                  attributes))
    assert np.linalg.norm(first - one_shot) <= bound * np.linalg.norm(one_shot)
    # a smaller image: another tile shape, one more transform; the first one is kept
    small = np.ascontiguousarray(src[:, :12, :14])
    got_small = plan(small)
    assert_compiled("depthwise")
    assert prepared.transforms == 2
    assert_accurate(got_small, small, weights, bias, attributes)
    assert np.array_equal(plan(src), first)
    assert prepared.transforms == 2


@pytest.mark.parametrize("name", ["depthwise-g64", "bank-oc64"])
def test_a_plan_tiles_without_pricing_the_weights_transform(rng, name):
    """A one-shot call's tiling counts the weights' transform, which it makes; a plan's
    does not (it made them once)."""
    expected_mode, arguments, _ = LANE_CASES[name]
    src, weights, bias, attributes = _tensors(rng, **arguments)
    problem = problem_of(src, weights, bias, attributes)
    for weights_per_call in (True, False):
        t = fft_compiled.tiling(problem, weights_per_call=weights_per_call)
        if weights_per_call:
            got = _fft_call(src, weights, bias, attributes)
        else:
            got = convlab.Convolution(weights, bias, algorithm="fft", **attributes)(src)
        assert_compiled(expected_mode)
        assert fft.last_run["fft_shape"] == "x".join(map(str, t.fft_shape))
        assert fft.last_run["lanes"] == t.lanes
        assert_accurate(got, src, weights, bias, attributes, f"{weights_per_call=}")
    # the estimate of any tiling drops by the weights' share
    limit, cores = im2col.get_workspace_limit(), available_cores()
    for lanes in fft_compiled.lane_counts():
        one_shot = fft_compiled._tiling_at(problem, limit, cores, lanes, True)
        planned = fft_compiled._tiling_at(problem, limit, cores, lanes, False)
        assert one_shot is not None and planned is not None
        assert planned[0] < one_shot[0]


def test_a_plan_does_not_see_later_edits_of_the_weights(rng):
    src, weights, bias, attributes = _tensors(rng, groups=1, ocg=20, input_shape=(120,),
                                              kernel=(21,), pads_begin=10, pads_end=10)
    original = weights.copy()
    plan = convlab.Convolution(weights, bias, algorithm="fft", **attributes)
    first = plan(src)
    assert_compiled("bank")
    weights[...] = 0
    assert np.array_equal(plan(src), first)
    assert_accurate(first, src, original, bias, attributes)


def test_concurrent_calls_from_python_threads(rng):
    """One-shot calls (each Python thread's own scratch) and one plan shared by several
    Python threads give the single-threaded results (one-shot depthwise calls transform
    their kernels in each task, a plan once: the two round apart)."""
    src, weights, bias, attributes = _tensors(rng, batch=2, groups=24, input_shape=(21, 20),
                                              kernel=(9, 9), pads_begin=4, pads_end=4)
    want = _fft_call(src, weights, bias, attributes, threads=1)
    assert_compiled("depthwise")
    plan = convlab.Convolution(weights, bias, algorithm="fft", threads=1, **attributes)
    want_plan = plan(src)
    for got in call_from_threads(lambda: _fft_call(src, weights, bias, attributes,
                                                   threads=1), count=4):
        assert np.array_equal(got, want)
    for got in call_from_threads(lambda: plan(src), count=4):
        assert np.array_equal(got, want_plan)
    assert_accurate(want, src, weights, bias, attributes)
    assert_accurate(want_plan, src, weights, bias, attributes)


# --------------------------------------------------------------------------- inputs

@pytest.mark.parametrize("layout", ["nxc-xio", "ncx-oix"])
@pytest.mark.parametrize("kind", ["depthwise", "bank"])
def test_inputs_are_not_modified(rng, kind, layout):
    data_format, weights_format = layout.upper().split("-")
    shape = dict(groups=20, input_shape=(13, 11)) if kind == "depthwise" else dict(
        groups=2, ocg=12, input_shape=(13, 11))
    src, weights, bias, attributes = _tensors(rng, kernel=(5, 3), pads_begin=(2, 1),
                                              pads_end=(2, 1), data_format=data_format,
                                              weights_format=weights_format, **shape)
    copies = [src.copy(), weights.copy(), bias.copy()]
    got = _fft_call(src, weights, bias, attributes)
    assert_compiled(kind)
    for before, after in zip(copies, (src, weights, bias)):
        assert np.array_equal(before, after)
    # and a second call (the one-call spectrum buffer reused) leaves them alone too
    again = _fft_call(src, weights, bias, attributes)
    assert np.array_equal(again, got)
    for before, after in zip(copies, (src, weights, bias)):
        assert np.array_equal(before, after)
    assert_accurate(got, src, weights, bias, attributes)


def test_strided_views_as_inputs(rng):
    """Non-contiguous src, weights and bias views give the result of their copies."""
    src, weights, bias, attributes = _tensors(rng, batch=2, groups=40, input_shape=(20, 18),
                                              kernel=(5, 5), pads_begin=2, pads_end=2)
    src_view, weights_view, bias_view = src[..., ::2], weights[..., ::2], bias[::2]
    attributes = dict(attributes, groups=20)
    got = _fft_call(src_view, weights_view, bias_view, attributes)
    assert_compiled("depthwise")
    want = _fft_call(*(np.ascontiguousarray(a) for a in (src_view, weights_view, bias_view)),
                     attributes)
    assert np.array_equal(got, want)
    assert_accurate(got, src_view, weights_view, bias_view, attributes)


# --------------------------------------------------------------------------- special values

SPECIAL_CASES = {
    "depthwise-2d-inf": (np.inf, dict(batch=2, groups=20, input_shape=(16, 15),
                                      kernel=(5, 5), pads_begin=2, pads_end=2)),
    "depthwise-1d-nan": (np.nan, dict(groups=16, input_shape=(100,), kernel=(21,),
                                      pads_begin=10, pads_end=10)),
    "bank-1d-nan": (np.nan, dict(batch=2, groups=1, ocg=20, input_shape=(120,),
                                 kernel=(31,), pads_begin=15, pads_end=15)),
    "bank-2d-inf": (-np.inf, dict(groups=2, ocg=8, input_shape=(14, 13), kernel=(3, 5),
                                  pads_begin=1, pads_end=2)),
}


@pytest.mark.parametrize("name", list(SPECIAL_CASES))
def test_a_special_value_lands_where_direct_puts_it(rng, name):
    value, arguments = SPECIAL_CASES[name]
    src, weights, bias, attributes = _tensors(rng, **arguments)
    index = tuple(extent // 2 for extent in src.shape[:-1]) + (src.shape[-1] - 1,)
    src[index] = value
    got = _fft_call(src, weights, bias, attributes)
    assert_compiled()
    assert fft.last_run["fallback"] == "direct"
    want = convlab.convolve(src, weights, bias, algorithm="direct", **attributes)
    assert (~np.isfinite(want)).any()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    np.testing.assert_array_equal(got, want)


# --------------------------------------------------------------------------- not compiled

PYTHON_CASES = {
    "float64-depthwise": dict(groups=16, input_shape=(15, 14), kernel=(5, 5), pads_begin=2,
                              pads_end=2, dtype="float64"),
    "stride2-depthwise": dict(groups=16, input_shape=(17, 16), kernel=(5, 5), pads_begin=2,
                              pads_end=2, strides=2),
    "icg2-grouped": dict(groups=8, icg=2, ocg=2, input_shape=(15, 14), kernel=(5, 5),
                         pads_begin=2, pads_end=2),
    "depthwise-groups4": dict(groups=4, input_shape=(15, 14), kernel=(5, 5), pads_begin=2,
                              pads_end=2),
    "bank-oc4": dict(groups=1, ocg=4, input_shape=(80,), kernel=(15,), pads_begin=7,
                     pads_end=7),
    "depthwise-4d": dict(groups=16, input_shape=(4, 5, 4, 5), kernel=(3, 3, 3, 3),
                         pads_begin=1, pads_end=1),
}


@pytest.mark.parametrize("name", list(PYTHON_CASES))
def test_other_problems_run_the_python_pipeline(rng, name):
    src, weights, bias, attributes = _tensors(rng, **PYTHON_CASES[name])
    problem = problem_of(src, weights, bias, attributes)
    assert fft_compiled.mode(problem) is None
    assert fft_compiled.tiling(problem) is None
    got = _fft_call(src, weights, bias, attributes)
    assert_python_pipeline()
    assert_accurate(got, src, weights, bias, attributes, name)
