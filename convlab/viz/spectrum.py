"""The convolution theorem on one channel, with the ``fft`` strategy's own pieces.

For a tile ``x`` of L points (per axis) and a kernel ``k``, the circular cross-correlation

    y[p] = sum_j x[(p + j) mod L] * k[j]

is ``irfftn(rfftn(x) * conj(rfftn(k)))``: a pointwise product of spectra instead of a sum
over taps. The outputs whose window does not wrap around the tile's end are the
convolution's outputs. The functions here compute each stage for one channel:

* the input tile: the padded src, as the strategy lays it into its buffer;
* the kernel's spectrum: :func:`convlab.strategies.fft.weight_spectrum`, the very function
  a run uses (conjugated and scaled by 1 / prod(L), so the inverse transform is unscaled);
* the product, the inverse transform (``scipy.fft``, as the strategy calls it) and the
  crop to every S-th of the first outputs, checked against :func:`convlab.reference.convolve`
  and against ``convlab.convolve(..., algorithm="fft")``.

Then the strategy's overlap-save tiles (:func:`convlab.strategies.fft.axis_tiles`) and
the spectrum of a dilated (zero-stretched) kernel, and :func:`kernel_sweep`, which times
the algorithms against the kernel size on the machine it runs on.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.fft as sfft

import convlab
from convlab import params, registry
from convlab.runtime import timing
from convlab.runtime.threads import effective_threads
from convlab.strategies import fft as strategy
from convlab.viz import render


def _one_channel_problem(src_shape, kernel_shape, dtype, attributes):
    r = len(kernel_shape)
    if len(src_shape) != r:
        raise ValueError(f"src has {len(src_shape)} axes and kernel {r}; expected the same "
                         f"spatial rank (one channel, no batch axis)")
    return params.make_problem((1, *src_shape, 1), dtype, (*kernel_shape, 1, 1), dtype,
                               **attributes)


def _kernel_spectrum(problem, kernel: np.ndarray, fft_shape) -> np.ndarray:
    """The strategy's weight spectrum of a one-channel kernel, shaped (F...)."""
    by_tap = strategy.prepare_weights(problem, kernel.reshape(1, *kernel.shape, 1, 1)).by_tap
    spectrum = strategy.weight_spectrum(problem, by_tap, tuple(fft_shape), 1)
    return spectrum.reshape(strategy.spectrum_shape(fft_shape))


def _input_tile(problem, src: np.ndarray, fft_shape) -> np.ndarray:
    """The padded src window of the whole output, folded onto L points per axis.

    Buffer position p holds padded position p (src position p - P_b). Where L is shorter
    than the window, positions L apart land on each other: a spectrum sampled at L
    frequencies cannot tell them apart. For the strategy's own lengths the folded
    positions are padding, so nothing is added.
    """
    spans = [(o - 1) * s + e for o, s, e in zip(problem.output_shape, problem.strides,
                                                strategy.stretched_kernel(problem))]
    window = np.zeros(spans, dtype=np.float64)
    source, target = [], []
    for axis, span in enumerate(spans):
        begin = problem.pads_begin[axis]
        lo, hi = max(0, -begin), min(problem.input_shape[axis], span - begin)
        source.append(slice(lo, max(lo, hi)))
        target.append(slice(lo + begin, max(lo, hi) + begin))
    window[tuple(target)] = src[tuple(source)]
    for axis, length in enumerate(fft_shape):
        laps = -(-window.shape[axis] // length)
        padded = np.zeros((*window.shape[:axis], laps * length, *window.shape[axis + 1:]))
        padded[(slice(None),) * axis + (slice(0, window.shape[axis]),)] = window
        window = padded.reshape(*window.shape[:axis], laps, length,
                                *window.shape[axis + 1:]).sum(axis=axis)
    return window


@dataclass(frozen=True)
class SpectrumStages:
    """Every stage of one tile's convolution by the theorem, in float64, one channel.

    Attributes
    ----------
    problem : convlab.ConvProblem
        The one-channel problem (batch 1, IC = OC = 1).
    fft_shape : tuple
        L per axis: the transform shape.
    x : numpy.ndarray, ``fft_shape``
        The input tile: the padded src from padded position 0.
    X : numpy.ndarray, complex
        ``rfftn(x)``: the last axis holds L // 2 + 1 frequencies.
    kernel : numpy.ndarray
        The kernel as given (undilated).
    W : numpy.ndarray, complex
        The strategy's weight spectrum: ``conj(rfftn(stretched kernel)) / prod(L)``.
    Y : numpy.ndarray, complex
        ``X * W``, one product per frequency.
    y : numpy.ndarray, ``fft_shape``
        ``irfftn(Y)``: the circular cross-correlation of the tile with the kernel.
    kept : numpy.ndarray of bool, ``fft_shape``
        The positions the crop keeps (every S-th of the first ones). Their windows either
        stay inside the tile or wrap only onto padding, which is zero.
    dst : numpy.ndarray
        The crop: every S-th of the first positions, the convolution's outputs.
    reference, kernel_output : numpy.ndarray
        :func:`convlab.reference.convolve` and ``convlab.convolve(..., algorithm="fft")``.
    """

    problem: object
    fft_shape: tuple
    x: np.ndarray
    X: np.ndarray
    kernel: np.ndarray
    W: np.ndarray
    Y: np.ndarray
    y: np.ndarray
    kept: np.ndarray
    dst: np.ndarray
    reference: np.ndarray
    kernel_output: np.ndarray

    @property
    def kernel_magnitude(self) -> np.ndarray:
        """``|rfftn(stretched kernel)|``: the kernel's gain at each frequency."""
        return np.abs(self.W) * math.prod(self.fft_shape)


def convolution_theorem(src, kernel, *, strides=None, pads_begin=None, pads_end=None,
                        dilations=None, fft_shape: Sequence[int] | None = None
                        ) -> SpectrumStages:
    """Convolve one channel by the theorem, stage by stage, in one tile.

    ``src`` and ``kernel`` hold only spatial axes (``src`` (I...), ``kernel`` (K...)).
    ``fft_shape`` defaults to what the strategy takes for a tile holding the whole output
    (``scipy.fft.next_fast_len`` of :func:`convlab.strategies.fft.whole_axis_length`); a
    shorter one shows the wrap-around: ``dst`` then differs from ``reference``.
    """
    src = np.asarray(src, dtype=np.float64)
    kernel = np.asarray(kernel, dtype=np.float64)
    attributes = dict(strides=strides, pads_begin=pads_begin, pads_end=pads_end,
                      dilations=dilations)
    problem = _one_channel_problem(src.shape, kernel.shape, np.float64, attributes)
    r = problem.rank
    if fft_shape is None:
        fft_shape = tuple(sfft.next_fast_len(strategy.whole_axis_length(problem, axis),
                                             real=axis == r - 1) for axis in range(r))
    fft_shape = tuple(int(n) for n in fft_shape)
    if len(fft_shape) != r or min(fft_shape) < 1:
        raise ValueError(f"fft_shape={fft_shape}: expected {r} positive lengths")
    x = _input_tile(problem, src, fft_shape)
    X = sfft.rfftn(x)
    W = _kernel_spectrum(problem, kernel, fft_shape)
    Y = X * W
    y = sfft.irfftn(Y, s=fft_shape, norm="forward")
    steps = tuple(slice(0, (o - 1) * s + 1, s) for o, s in
                  zip(problem.output_shape, problem.strides))
    wide = np.zeros([max(a, (o - 1) * s + 1) for a, o, s in
                     zip(fft_shape, problem.output_shape, problem.strides)])
    wide[tuple(slice(0, n) for n in fft_shape)] = y   # positions past L: never computed
    dst = wide[steps]
    kept = np.zeros(wide.shape, dtype=bool)
    kept[steps] = True
    kept = kept[tuple(slice(0, n) for n in fft_shape)]
    call = dict(attributes, src=src[None, ..., None], weights=kernel[..., None, None])
    reference = convlab.reference.convolve(**call)[0, ..., 0]
    kernel_output = convlab.convolve(**call, algorithm="fft")[0, ..., 0]
    return SpectrumStages(problem, fft_shape, x, X, kernel, W, Y, y, kept, dst, reference,
                          kernel_output)


# --------------------------------------------------------------------------- tiles

@dataclass(frozen=True)
class OverlapSave:
    """One axis cut into the strategy's overlap-save tiles, each computed on its own.

    Attributes
    ----------
    problem : convlab.ConvProblem
        The one-channel 1-D problem.
    length : int
        L, the transform length of every tile.
    tiles : list of convlab.strategies.fft.AxisTile
        From :func:`convlab.strategies.fft.axis_tiles`: the src range each tile reads, where
        it lands in the tile, and the outputs it writes.
    outputs : list of numpy.ndarray
        Each tile's outputs, by :func:`convolution_theorem` on the tile's src range.
    dst, reference : numpy.ndarray
        The tiles' outputs put together, and the reference over the whole signal.
    """

    problem: object
    length: int
    tiles: list
    outputs: list
    dst: np.ndarray
    reference: np.ndarray

    @property
    def outputs_per_tile(self) -> int:
        return self.problem.output_shape[0] if len(self.tiles) <= 1 else self.tiles[0].count


def overlap_save(src, kernel, length: int, *, strides=None, pads_begin=None, pads_end=None,
                 dilations=None) -> OverlapSave:
    """Cut a 1-D convolution into tiles of ``length`` points as the strategy does, and run
    each tile by the theorem.

    A tile of L points holds ``(L - Ke) // S + 1`` outputs whose windows do not wrap; the
    next tile starts that many outputs (times S inputs) later, so consecutive tiles read
    overlapping inputs (Ke - S of them) and their kept outputs do not overlap.
    """
    src = np.asarray(src, dtype=np.float64)
    kernel = np.asarray(kernel, dtype=np.float64)
    if src.ndim != 1 or kernel.ndim != 1:
        raise ValueError(f"src and kernel have {src.ndim} and {kernel.ndim} axes; expected "
                         f"1-D signals")
    attributes = dict(strides=strides, pads_begin=pads_begin, pads_end=pads_end,
                      dilations=dilations)
    problem = _one_channel_problem(src.shape, kernel.shape, np.float64, attributes)
    extent = strategy.stretched_kernel(problem)[0]
    stride = problem.strides[0]
    if length < extent:
        raise ValueError(f"length={length} is shorter than the (dilated) kernel extent "
                         f"{extent}; expected at least {extent}")
    held = min(problem.output_shape[0], (length - extent) // stride + 1)
    tiling = strategy.Tiling((length,), (held,), (-(-problem.output_shape[0] // held),), 1, 1,
                             "broadcast", 0)
    tiles = strategy.axis_tiles(problem, tiling, 0)
    dst = np.zeros(problem.output_shape)
    outputs = []
    for tile in tiles:
        # the tile's own src range, placed where the strategy's buffer puts it
        piece = np.zeros(length)
        piece[tile.buffer] = src[tile.src]
        stages = convolution_theorem(piece, kernel, strides=stride, dilations=dilations,
                                     fft_shape=(length,))
        outputs.append(stages.dst[:tile.count])
        dst[tile.out] = outputs[-1]
    reference = convlab.reference.convolve(src[None, :, None], kernel[:, None, None],
                                           **attributes)[0, :, 0]
    return OverlapSave(problem, length, tiles, outputs, dst, reference)


# --------------------------------------------------------------------------- dilation

def dilated_spectrum(kernel, dilation: int, length: int) -> dict:
    """The spectrum of a kernel dilated by D, as the strategy computes it (the kernel
    stretched with D - 1 zeros between taps, then transformed), next to the undilated
    kernel's spectrum at L / D points repeated D times: the same numbers when D divides L.

    Returns ``{"stretched", "dilated", "undilated", "repeated"}`` (the zero-stretched
    kernel and three magnitude spectra, unscaled).
    """
    kernel = np.asarray(kernel, dtype=np.float64)
    if kernel.ndim != 1 or dilation < 1 or length % dilation:
        raise ValueError(f"kernel of {kernel.ndim} axes, dilation={dilation}, "
                         f"length={length}: expected a 1-D kernel, dilation >= 1 dividing "
                         f"length")
    extent = (kernel.size - 1) * dilation + 1
    if extent > length:
        raise ValueError(f"length={length} is shorter than the dilated kernel ({extent})")
    dilated = _one_channel_problem((length,), kernel.shape, np.float64,
                                   {"dilations": dilation})
    plain = _one_channel_problem((length // dilation,), kernel.shape, np.float64, {})
    stretched = np.zeros(extent)
    stretched[::dilation] = kernel
    spectrum = np.abs(_kernel_spectrum(dilated, kernel, (length,))) * length
    short = length // dilation
    undilated = np.abs(_kernel_spectrum(plain, kernel, (short,))) * short
    # the full spectrum of a real signal from its half: |X[L - f]| = |X[f]|
    full = np.concatenate([undilated, undilated[1:(short + 1) // 2][::-1]])
    repeated = np.tile(full, dilation)[:length // 2 + 1]
    return {"stretched": stretched, "dilated": spectrum, "undilated": undilated,
            "repeated": repeated}


# --------------------------------------------------------------------------- timing

@dataclass(frozen=True)
class KernelSweep:
    """Timed seconds per call against the kernel size K (K x K in 2-D).

    ``seconds[name]`` holds one time per K (NaN where the algorithm cannot run: Winograd
    only has 3-tap transforms). Times are the fastest of the repeats, one-shot calls
    (weights prepared in the call).
    """

    kernel_sizes: tuple
    spatial: int
    channels: int
    depthwise: bool
    threads: int
    seconds: dict

    def fastest(self) -> list:
        """The fastest algorithm at each K."""
        names = list(self.seconds)
        table = np.array([self.seconds[n] for n in names])
        table = np.where(np.isnan(table), np.inf, table)
        return [names[int(i)] for i in np.argmin(table, axis=0)]

    def crossover(self, name: str = "fft") -> int | None:
        """The smallest K from which ``name`` is the fastest at every larger K timed."""
        found = None
        for k, winner in zip(reversed(self.kernel_sizes), reversed(self.fastest())):
            if winner != name:
                break
            found = k
        return found


def kernel_sweep(kernel_sizes: Sequence[int] = (3, 5, 7, 9, 11, 15), *, spatial: int = 48,
                 channels: int = 16, depthwise: bool = False, threads: int | None = None,
                 repeats: int = 3, algorithms: Sequence[str] = ("direct", "im2col",
                                                                "winograd4", "fft"),
                 seed: int = 0) -> KernelSweep:
    """Time ``convlab.convolve`` on an H = W = ``spatial`` image with ``channels`` channels
    in and out ('same' pads) for each K x K kernel and algorithm, taking turns.

    Each algorithm runs once to warm up at each K, then ``repeats`` rounds; the fastest
    run counts (noise from other processes only ever adds time).
    """
    if repeats < 1:
        raise ValueError(f"repeats={repeats}: expected at least 1")
    threads = effective_threads(threads)
    rng = np.random.default_rng(seed)
    groups = channels if depthwise else 1
    src = rng.standard_normal((1, spatial, spatial, channels)).astype(np.float32)
    seconds = {name: np.full(len(kernel_sizes), np.nan) for name in algorithms}
    for index, k in enumerate(kernel_sizes):
        weights = rng.standard_normal((k, k, channels // groups, channels)).astype(np.float32)
        attributes = dict(pads_begin=(k - 1) // 2, pads_end=k // 2, groups=groups)
        problem = params.make_problem(src.shape, src.dtype, weights.shape, weights.dtype,
                                      **attributes)
        names = [n for n in algorithms if registry.get_algorithm(n).supports(problem) is None]
        best = timing.fastest_in_rounds(
            {name: functools.partial(convlab.convolve, src, weights, algorithm=name,
                                     threads=threads, **attributes) for name in names},
            repeats)
        for name in names:
            seconds[name][index] = best[name]
    return KernelSweep(tuple(kernel_sizes), spatial, channels, depthwise, threads, seconds)


# --------------------------------------------------------------------------- drawing

def _log_magnitude(values: np.ndarray) -> np.ndarray:
    return np.log10(np.abs(values) + 1e-12)


def plot_convolution_theorem(stages: SpectrumStages, *, figsize=None):
    """2-D stages in two rows: input tile, kernel, tile's circular correlation (the kept
    region outlined), and the spectra |X|, |K|, |X·W| (log10), then the crop against the
    reference in the last panel's title. 1-D stages as curves.

    Returns
    -------
    matplotlib.figure.Figure
    """
    s = stages
    if s.problem.rank == 1:
        return _plot_theorem_1d(s, figsize)
    if s.problem.rank != 2:
        raise ValueError(f"rank {s.problem.rank}: the drawing shows 1-D and 2-D stages")
    fig = render.new_figure(figsize or (10.5, 6.2))
    axes = fig.subplots(2, 4)
    L = "x".join(map(str, s.fft_shape))
    panels = [
        (axes[0, 0], s.x, f"input tile x ({L}, padded)", "viridis"),
        (axes[0, 1], s.kernel, f"kernel k ({'x'.join(map(str, s.kernel.shape))})", "RdBu_r"),
        (axes[0, 2], s.y, "y = irfftn(Y): circular\ncorrelation, kept part boxed", "viridis"),
        (axes[0, 3], s.dst, f"crop: dst {'x'.join(map(str, s.dst.shape))}", "viridis"),
        (axes[1, 0], _log_magnitude(s.X), "log10 |X| = |rfftn(x)|", "magma"),
        (axes[1, 1], _log_magnitude(s.kernel_magnitude), "log10 |K| (weight_spectrum)",
         "magma"),
        (axes[1, 2], _log_magnitude(s.Y * math.prod(s.fft_shape)), "log10 |X·K|: product "
                                                                     "per frequency", "magma"),
    ]
    for ax, values, title, cmap in panels:
        top = float(np.abs(values).max()) or 1.0
        kw = dict(vmin=-top, vmax=top) if cmap == "RdBu_r" else {}
        ax.imshow(values, cmap=cmap, interpolation="nearest", **kw)
        ax.set_title(title, fontsize=8)
        ax.set_xticks([])
        ax.set_yticks([])
    rows, cols = np.nonzero(s.kept)
    if rows.size:
        patches = render.mpl("matplotlib.patches")
        axes[0, 2].add_patch(patches.Rectangle((-0.5, -0.5), cols.max() + 1, rows.max() + 1,
                                               fill=False, edgecolor=render.TAP_FACE, lw=2))
    error = float(np.abs(s.dst - s.reference).max())
    library = float(np.abs(s.kernel_output - s.reference).max())
    ax = axes[1, 3]
    ax.imshow(s.dst - s.reference, cmap="RdBu_r", interpolation="nearest",
              vmin=-max(error, 1e-300), vmax=max(error, 1e-300))
    ax.set_title(f"dst − reference\nmax {error:.1e}; fft strategy {library:.1e}", fontsize=8)
    ax.set_xticks([])
    ax.set_yticks([])
    fig.suptitle("convolution theorem: y = irfftn(rfftn(x) · conj(rfftn(k))), then the crop",
                 fontsize=10)
    return fig


def _plot_theorem_1d(s: SpectrumStages, figsize):
    fig = render.new_figure(figsize or (9.5, 5.2))
    axes = fig.subplots(2, 2)
    ax = axes[0, 0]
    ax.plot(s.x, color=render.group_colour(0), lw=1, label="input tile x")
    ax.stem(np.arange(s.kernel.size) * s.problem.dilations[0], s.kernel,
            linefmt="C1-", markerfmt="C1.", basefmt=" ", label="kernel k")
    ax.set_title(f"time: tile of L = {s.fft_shape[0]} points", fontsize=9)
    ax.legend(fontsize=7)
    ax = axes[0, 1]
    f = np.arange(s.X.size)
    ax.semilogy(f, np.abs(s.X) + 1e-12, label="|X|")
    ax.semilogy(f, s.kernel_magnitude + 1e-12, label="|K|")
    ax.semilogy(f, np.abs(s.Y) * s.fft_shape[0] + 1e-12, label="|X·K|")
    ax.set_title("spectra (L // 2 + 1 frequencies)", fontsize=9)
    ax.set_xlabel("frequency index", fontsize=8)
    ax.legend(fontsize=7)
    ax = axes[1, 0]
    p = np.arange(s.fft_shape[0])
    ax.plot(p, s.y, color="grey", lw=1, label="y = irfft(Y), all L positions")
    ax.plot(p[s.kept], s.y[s.kept], ".", color=render.OUT_FACE, ms=3,
            label="kept by the crop")
    ax.set_title("circular correlation", fontsize=9)
    ax.legend(fontsize=7)
    ax = axes[1, 1]
    ax.plot(s.reference, color="black", lw=2.5, alpha=0.3, label="reference")
    ax.plot(s.dst, ".", color=render.OUT_FACE, ms=3, label="crop")
    error = float(np.abs(s.dst - s.reference).max())
    ax.set_title(f"crop vs reference: max |difference| {error:.1e}", fontsize=9)
    ax.legend(fontsize=7)
    return fig


def plot_overlap_save(result: OverlapSave, *, figsize=None):
    """Each tile as a bar over the input positions it reads (the part whose outputs are
    kept, then the Ke - 1 positions that only feed them), and below, the outputs put
    together against the reference.

    Returns
    -------
    matplotlib.figure.Figure
    """
    r = result
    fig = render.new_figure(figsize or (9.0, 1.6 + 0.35 * len(r.tiles) + 2.0))
    top, bottom = fig.subplots(2, 1, height_ratios=[0.35 * len(r.tiles) + 0.8, 2.0])
    stride, begin = r.problem.strides[0], r.problem.pads_begin[0]
    extent = strategy.stretched_kernel(r.problem)[0]
    for number, tile in enumerate(r.tiles):
        start = tile.out.start * stride - begin          # src position of the tile's start
        kept = (tile.count - 1) * stride + 1
        colour = render.group_colour(number)
        top.broken_barh([(start, kept), (start + kept, extent - 1)], (number - 0.35, 0.7),
                        facecolors=[colour, "none"], edgecolors=[colour, colour])
        top.broken_barh([(start + kept + extent - 1, r.length - kept - extent + 1)],
                        (number - 0.35, 0.7), facecolors="none", edgecolors="grey",
                        linestyles=":")
        top.text(start + kept / 2, number, f"outputs {tile.out.start}..{tile.out.stop - 1}",
                 ha="center", va="center", fontsize=7, color="white")
    top.axvspan(0, r.problem.input_shape[0], color=render.PAD_FACE, alpha=0.4, zorder=0)
    top.set_yticks(range(len(r.tiles)), [f"tile {i}" for i in range(len(r.tiles))],
                   fontsize=7)
    top.invert_yaxis()
    top.set_xlabel("src position (grey band: the signal; outside it, padding)", fontsize=8)
    top.set_title(f"overlap-save: tiles of L = {r.length}, kernel extent {extent}, "
                  f"{r.outputs_per_tile} outputs kept per tile", fontsize=9)
    bottom.plot(r.reference, color="black", lw=2.5, alpha=0.3, label="reference")
    for number, (tile, out) in enumerate(zip(r.tiles, r.outputs)):
        bottom.plot(np.arange(tile.out.start, tile.out.stop), out, ".",
                    color=render.group_colour(number), ms=3)
    error = float(np.abs(r.dst - r.reference).max())
    bottom.set_title(f"tiles' outputs put together: max |difference| {error:.1e}",
                     fontsize=9)
    bottom.set_xlabel("output position", fontsize=8)
    return fig


def plot_dilated_spectrum(result: dict, dilation: int, *, figsize=None):
    """The zero-stretched kernel, and its magnitude spectrum over the undilated kernel's
    spectrum repeated ``dilation`` times.

    Returns
    -------
    matplotlib.figure.Figure
    """
    fig = render.new_figure(figsize or (9.0, 3.0))
    left, right = fig.subplots(1, 2, width_ratios=[1, 2])
    stretched = result["stretched"]
    left.stem(np.arange(stretched.size), stretched, basefmt=" ")
    left.set_title(f"kernel dilated by {dilation}: zeros between taps", fontsize=9)
    f = np.arange(result["dilated"].size)
    right.plot(f, result["repeated"], color="black", lw=3, alpha=0.25,
               label=f"undilated spectrum, repeated {dilation}x")
    right.plot(f, result["dilated"], ".-", ms=3, lw=0.8, label="dilated kernel's spectrum")
    right.set_xlabel("frequency index", fontsize=8)
    right.set_title("|spectrum|", fontsize=9)
    right.legend(fontsize=7)
    return fig


def plot_kernel_sweep(sweep: KernelSweep, *, figsize=None):
    """Milliseconds per call against K, one line per algorithm (log scale), the first K
    from which fft stays fastest marked.

    Returns
    -------
    matplotlib.figure.Figure
    """
    fig = render.new_figure(figsize or (7.0, 3.8))
    ax = fig.subplots()
    k = np.array(sweep.kernel_sizes)
    for number, (name, seconds) in enumerate(sweep.seconds.items()):
        shown = ~np.isnan(seconds)
        style = "s" if shown.sum() == 1 else "o-"
        ax.plot(k[shown], seconds[shown] * 1e3, style, color=render.group_colour(number),
                label=name)
    crossing = sweep.crossover("fft")
    if crossing is not None:
        ax.axvline(crossing, color="grey", ls=":", lw=1)
        ax.text(crossing, ax.get_ylim()[1], f" fft fastest from K={crossing}", fontsize=8,
                va="top")
    ax.set_yscale("log")
    ax.set_xticks(list(k), [str(v) for v in k])
    ax.set_xlabel("K (a K x K kernel)", fontsize=9)
    ax.set_ylabel("milliseconds per call", fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    kind = "depthwise" if sweep.depthwise else "dense"
    ax.set_title(f"{kind}, C={sweep.channels}, {sweep.spatial}x{sweep.spatial}, "
                 f"threads={sweep.threads}, timed on this machine", fontsize=10)
    return fig
