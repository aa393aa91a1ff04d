"""convlab.viz.spectrum and convlab.viz.exercises (the convolution-theorem notebook).

The stages are checked against the theorem written out with SciPy and against the float64
reference; the overlap-save tiles against the reference over the whole signal; the
exercises' checkers with right answers and with the usual wrong ones, each of which must
be called wrong with its reason.
"""
from __future__ import annotations

import io

import numpy as np
import pytest
import scipy.fft as sfft

from convlab import viz
from convlab.viz import exercises

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")


def png(fig) -> None:
    fig.savefig(io.BytesIO(), format="png")


STAGE_CASES = [
    ((12, 10), (5, 3), {"pads_begin": (2, 1), "pads_end": (2, 1)}),
    ((40,), (5,), {"strides": 2, "dilations": 3, "pads_begin": 4, "pads_end": 1}),
    ((9, 8, 7), (3, 2, 4), {"pads_begin": (1, 0, -1), "pads_end": (2, 1, 3)}),
    ((30,), (7,), {}),
]


@pytest.mark.parametrize("case", STAGE_CASES, ids=str)
def test_the_stages_follow_the_theorem_and_the_crop_matches_the_reference(case):
    src_shape, kernel_shape, attributes = case
    rng = np.random.default_rng(3)
    s = viz.convolution_theorem(rng.standard_normal(src_shape),
                                rng.standard_normal(kernel_shape), **attributes)
    np.testing.assert_allclose(s.dst, s.reference, atol=1e-12)
    np.testing.assert_allclose(s.kernel_output, s.reference, atol=1e-12)
    # the strategy's spectrum is the conjugate transform of the stretched kernel, scaled
    stretched = np.zeros(tuple((k - 1) * d + 1 for k, d in
                               zip(kernel_shape, s.problem.dilations)))
    stretched[tuple(slice(None, None, d) for d in s.problem.dilations)] = s.kernel
    spectrum = sfft.rfftn(stretched, s=s.fft_shape) if all(
        e <= n for e, n in zip(stretched.shape, s.fft_shape)) else None
    if spectrum is not None:
        np.testing.assert_allclose(s.W, np.conj(spectrum) / np.prod(s.fft_shape), atol=1e-12)
    np.testing.assert_allclose(s.X, sfft.rfftn(s.x), atol=1e-12)
    np.testing.assert_allclose(s.y, sfft.irfftn(s.X * s.W, s=s.fft_shape, norm="forward"),
                               atol=1e-12)
    assert s.kept.sum() == s.dst.size


def test_a_short_transform_wraps_around_and_the_stages_show_it():
    rng = np.random.default_rng(4)
    signal, taps = rng.standard_normal(48), rng.standard_normal(9)
    assert viz.convolution_theorem(signal, taps).fft_shape == (48,)
    short = viz.convolution_theorem(signal, taps, fft_shape=(44,))
    wrong = np.flatnonzero(~np.isclose(short.dst, short.reference))
    # positions 36..39 read past 44 and wrap onto 0..3, and inputs 44..47 fold onto 0..3
    assert wrong.size and set(wrong) <= set(range(0, 4)) | set(range(36, 40))


@pytest.mark.parametrize("attributes", [{"pads_begin": 8, "pads_end": 8},
                                        {"strides": 2, "dilations": 2, "pads_begin": 3,
                                         "pads_end": -2}], ids=str)
def test_overlap_save_tiles_reassemble_the_reference(attributes):
    rng = np.random.default_rng(5)
    result = viz.overlap_save(rng.standard_normal(100), rng.standard_normal(9), 32,
                              **attributes)
    assert len(result.tiles) > 2
    np.testing.assert_allclose(result.dst, result.reference, atol=1e-12)
    written = np.concatenate([np.arange(t.out.start, t.out.stop) for t in result.tiles])
    assert len(set(written)) == len(written)   # kept outputs never overlap
    with pytest.raises(ValueError, match="length=4 is shorter"):
        viz.overlap_save(np.ones(20), np.ones(5), 4)


def test_a_dilated_kernel_has_the_undilated_spectrum_repeated():
    d = viz.dilated_spectrum([1.0, -2.0, 0.5, 3.0], 4, 64)
    np.testing.assert_allclose(d["dilated"], d["repeated"], atol=1e-12)
    assert d["stretched"].tolist() == [1, 0, 0, 0, -2, 0, 0, 0, 0.5, 0, 0, 0, 3]
    with pytest.raises(ValueError, match="dividing length"):
        viz.dilated_spectrum([1.0, 2.0], 3, 64)


def test_kernel_sweep_times_each_algorithm_where_it_runs():
    sweep = viz.kernel_sweep((3, 5), spatial=12, channels=2, repeats=1, threads=1)
    assert np.isfinite(sweep.seconds["winograd4"][0]) and np.isnan(sweep.seconds["winograd4"][1])
    for name in ("direct", "im2col", "fft"):
        assert np.isfinite(sweep.seconds[name]).all() and (sweep.seconds[name] > 0).all()
    assert len(sweep.fastest()) == 2
    made_up = viz.KernelSweep((3, 5, 7), 12, 2, False, 1,
                              {"direct": np.array([1.0, 2.0, 3.0]),
                               "fft": np.array([2.0, 1.0, 1.0])})
    assert made_up.fastest() == ["direct", "fft", "fft"] and made_up.crossover() == 5
    assert viz.KernelSweep((3,), 12, 2, False, 1, {"direct": np.array([1.0]),
                                                   "fft": np.array([2.0])}).crossover() is None


def test_the_drawings_render():
    rng = np.random.default_rng(6)
    png(viz.plot_convolution_theorem(viz.convolution_theorem(rng.standard_normal((10, 9)),
                                                             rng.standard_normal((3, 3)))))
    png(viz.plot_convolution_theorem(viz.convolution_theorem(rng.standard_normal(30),
                                                             rng.standard_normal(5))))
    png(viz.plot_overlap_save(viz.overlap_save(rng.standard_normal(60),
                                               rng.standard_normal(7), 24)))
    png(viz.plot_dilated_spectrum(viz.dilated_spectrum([1.0, 2.0, 1.0], 2, 16), 2))
    sweep = viz.KernelSweep((3, 5), 12, 2, False, 1, {"direct": np.array([1e-3, 2e-3]),
                                                      "fft": np.array([np.nan, 1e-3])})
    png(viz.plot_kernel_sweep(sweep))


# --------------------------------------------------------------------------- exercises

def test_transform_length_exercise_right_and_wrong(capsys):
    assert exercises.check_transform_length(50, input_length=50, kernel_taps=11)
    assert capsys.readouterr().out.startswith("right:")
    for answer, reason in [(60, "but L=50 already is"),     # I + K - 1: exact but not shortest
                           (49, "wrap around"), (40, "wrap around"),
                           (5, "shorter than the kernel"), (None, "no answer yet"),
                           (2.5, "whole number"), (True, "whole number")]:
        verdict = exercises.check_transform_length(answer, input_length=50, kernel_taps=11)
        assert not verdict and reason in verdict.reason, (answer, verdict)
        assert capsys.readouterr().out.startswith("wrong:")
    # the right answer is computed, not stored: another size has another one
    assert exercises.check_transform_length(30, input_length=30, kernel_taps=4)
    assert not exercises.check_transform_length(50, input_length=30, kernel_taps=4)


def _correlate(x, k):
    n = len(x)
    return sfft.irfft(sfft.rfft(x) * np.conj(sfft.rfft(k, n)), n)[:n - len(k) + 1]


def _convolve_instead(x, k):
    n = len(x)
    return sfft.irfft(sfft.rfft(x) * sfft.rfft(k, n), n)[len(k) - 1:]


def _too_short(x, k):
    n = len(x) - 2
    return sfft.irfft(sfft.rfft(x, n) * np.conj(sfft.rfft(k, n)), n)[:len(x) - len(k) + 1]


def _full_length(x, k):
    n = len(x)
    return sfft.irfft(sfft.rfft(x) * np.conj(sfft.rfft(k, n)), n)


def _complex_right(x, k):
    n = len(x)
    return sfft.ifft(sfft.fft(x) * np.conj(sfft.fft(k, n)))[:n - len(k) + 1]


def _complex_wrong(x, k):
    return _correlate(x, k) * 1j


def _raises(x, k):
    raise RuntimeError("not written yet")


def test_correlation_exercise_right_and_wrong(capsys):
    assert exercises.check_correlation(_correlate)
    assert exercises.check_correlation(lambda x, k: np.correlate(x, k, mode="valid"))
    assert exercises.check_correlation(_complex_right)   # imaginary parts are rounding
    assert capsys.readouterr().out.count("right:") == 3
    for answer, reason in [(_convolve_instead, "convolution (kernel flipped)"),
                           (_too_short, "wraps around"),
                           (_full_length, "expected (14,)"),
                           (_complex_wrong, "non-zero imaginary parts"),
                           (_raises, "RuntimeError: not written yet"),
                           (lambda x, k: None, "returned None"),
                           (None, "no answer yet"), (3, "not a function")]:
        verdict = exercises.check_correlation(answer)
        assert not verdict and reason in verdict.reason, (answer, verdict)
        assert capsys.readouterr().out.startswith("wrong:")
