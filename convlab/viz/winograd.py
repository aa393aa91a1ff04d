"""Winograd F(m x m, 3 x 3) on one real tile, stage by stage, with the library's matrices.

For one alpha x alpha input tile ``d`` (alpha = m + 2) and a 3 x 3 filter ``g``:

    V = B^T d B          (input transform)
    U = G g G^T          (weight transform; the library's ``prepare_weights`` computes it)
    M = U ⊙ V            (alpha^2 multiplications: the only ones that touch both)
    Y = A^T M A          (output transform: the m x m outputs)

and ``Y`` is the valid cross-correlation of ``d`` with ``g``. The matrices are those of
:mod:`convlab.strategies.winograd_transforms` (generated in exact rational arithmetic), ``U`` is
read back from the weights the ``winograd{m}`` strategy prepares, and ``Y`` is checked
against :func:`convlab.reference.convolve` and against the strategy's own run on the
same tile.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

import convlab
from convlab.dispatch import registry
from convlab.problem import params
from convlab.strategies import winograd as strategy, winograd_transforms as wt
from convlab.viz import render


@dataclass(frozen=True)
class WinogradStages:
    """Every intermediate of F(m x m, 3 x 3) on one tile, in float64.

    Attributes
    ----------
    m, alpha : int
        Output tile and input tile extents (alpha = m + 2).
    AT, G, BT : numpy.ndarray
        The library's transforms: ``(m, alpha)``, ``(alpha, 3)``, ``(alpha, alpha)``.
    d : numpy.ndarray, ``(alpha, alpha)``
        The input tile.
    g : numpy.ndarray, ``(3, 3)``
        The filter (``weights[k0, k1]``, one input and one output channel).
    V, U, M : numpy.ndarray, ``(alpha, alpha)``
        ``B^T d B``; ``G g G^T`` as the strategy's ``prepare_weights`` computed it; ``U ⊙ V``.
    Y : numpy.ndarray, ``(m, m)``
        ``A^T M A``.
    reference : numpy.ndarray, ``(m, m)``
        :func:`convlab.reference.convolve` of ``d`` with ``g`` (no pads).
    kernel_output : numpy.ndarray, ``(m, m)``
        ``convlab.convolve(..., algorithm="winograd{m}")`` on the same tile.
    """

    m: int
    alpha: int
    AT: np.ndarray
    G: np.ndarray
    BT: np.ndarray
    d: np.ndarray
    g: np.ndarray
    V: np.ndarray
    U: np.ndarray
    M: np.ndarray
    Y: np.ndarray
    reference: np.ndarray
    kernel_output: np.ndarray

    @property
    def multiplications(self) -> dict:
        """Multiplications of this tile: direct ``m^2 * 9``, Winograd ``alpha^2``."""
        return multiplication_counts(self.m, rank=2)


def winograd_stages(m: int, d=None, g=None, *, seed: int = 0) -> WinogradStages:
    """Run F(m x m, 3 x 3) stage by stage on one tile.

    ``d`` (alpha x alpha) and ``g`` (3 x 3) default to small random integers, so that
    every stage is easy to read and the reference is exact.
    """
    if m not in wt.TRANSFORMS:
        raise ValueError(f"m={m!r} has no Winograd transform; expected one of "
                         f"{sorted(wt.TRANSFORMS)}")
    transform = wt.TRANSFORMS[m]
    alpha = transform.alpha
    rng = np.random.default_rng(seed)
    d = rng.integers(0, 10, (alpha, alpha)) if d is None else d
    g = rng.integers(-2, 3, (3, 3)) if g is None else g
    d = np.asarray(d, dtype=np.float64)
    g = np.asarray(g, dtype=np.float64)
    if d.shape != (alpha, alpha):
        raise ValueError(f"d has shape {d.shape}; expected the input tile ({alpha}, {alpha}) "
                         f"of F({m}x{m}, 3x3)")
    if g.shape != (3, 3):
        raise ValueError(f"g has shape {g.shape}; expected the filter (3, 3)")
    AT, G, BT = transform.arrays(np.float64)

    src = d.reshape(1, alpha, alpha, 1)
    weights = g.reshape(3, 3, 1, 1)                     # XIO
    problem = params.make_problem(src.shape, np.float64, weights.shape, np.float64)
    name = f"winograd{m}"
    algorithm = registry.get_algorithm(name)
    prepared = algorithm.prepare_weights(problem, params.canonical_weights(weights, problem))
    # (G, P, ICg, OCg) -> the alpha x alpha positions of the one (ic, oc) pair
    U = strategy.unpack(prepared)[0, :, 0, 0].reshape(alpha, alpha)

    V = BT @ d @ BT.T
    M = U * V
    Y = AT @ M @ AT.T
    reference = convlab.reference.convolve(src, weights)[0, :, :, 0]
    kernel_output = convlab.convolve(src, weights, algorithm=name)[0, :, :, 0]
    return WinogradStages(m, alpha, AT, G, BT, d, g, V, U, M, Y, reference, kernel_output)


def multiplication_counts(m: int, rank: int = 2, r: int = wt.KERNEL) -> dict:
    """Multiplications per output tile of F(m^rank, r^rank) and of the direct sum.

    Per (input channel, output channel) pair: direct ``(m * r)^rank``, Winograd
    ``(m + r - 1)^rank`` (the transforms are shared across channels and not counted).
    """
    alpha = m + r - 1
    direct, winograd = (m * r) ** rank, alpha ** rank
    return {"m": m, "alpha": alpha, "outputs": m ** rank, "direct": direct,
            "winograd": winograd, "saving": direct / winograd}


def relative_errors(channels: Sequence[int] = (16, 64), *, spatial: int = 16,
                    algorithms: Sequence[str] = ("direct", "winograd2", "winograd4",
                                                 "winograd6"),
                    dtype=np.float32, seed: int = 0) -> dict:
    """Measure ``||y - ref|| / ||ref||`` of each algorithm against the float64 reference.

    N(0, 1) src ``(1, spatial, spatial, IC)`` and weights ``(3, 3, IC, IC)``, pads 1, in
    ``dtype``. Returns ``{name: [error per IC]}`` (the same measure as the library's
    ``MEASURED_RELATIVE_ERROR`` table, on a much smaller problem).
    """
    rng = np.random.default_rng(seed)
    errors = {name: [] for name in algorithms}
    for ic in channels:
        src = rng.standard_normal((1, spatial, spatial, ic)).astype(dtype)
        weights = rng.standard_normal((3, 3, ic, ic)).astype(dtype)
        ref = convlab.reference.convolve(src.astype(np.float64), weights.astype(np.float64),
                                         pads_begin=1, pads_end=1)
        for name in algorithms:
            y = convlab.convolve(src, weights, pads_begin=1, pads_end=1, algorithm=name)
            errors[name].append(float(np.linalg.norm(y - ref) / np.linalg.norm(ref)))
    return errors


# --------------------------------------------------------------------------- drawing

def _matrix(ax, values, title, *, highlight: tuple | None = None, fontsize=None):
    """Numbers in cells, shaded by sign and size (red positive, blue negative)."""
    cmap = render.mpl("matplotlib").colormaps["RdBu_r"]
    colors = render.mpl("matplotlib.colors")
    rows, cols = values.shape
    top = float(np.abs(values).max()) or 1.0
    size = fontsize or (8 if max(rows, cols) <= 4 else 7 if max(rows, cols) <= 6 else 5.5)
    for i in range(rows):
        for j in range(cols):
            v = float(values[i, j])
            face = cmap(0.5 + 0.45 * v / top)
            r, gr, b = colors.to_rgb(face)
            ink = "black" if 0.299 * r + 0.587 * gr + 0.114 * b > 0.5 else "white"
            text = _short(v)
            render.cell(ax, j, rows - 1 - i, face, text, fontsize=size, text_colour=ink)
    if highlight is not None:
        (r0, r1), (c0, c1) = highlight
        patches = render.mpl("matplotlib.patches")
        box = ax.add_patch(patches.Rectangle((c0, rows - r1), c1 - c0, r1 - r0, fill=False,
                                             edgecolor=render.TAP_FACE, linewidth=2.5))
        box.set_in_layout(False)
    render.bare(ax, (-0.1, cols + 0.1), (-0.1, rows + 0.1))
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_title(title, fontsize=9)


def _difference(value: float) -> str:
    return "0 (exact)" if value == 0 else f"{value:.0e}"


def _short(v: float) -> str:
    if abs(v - round(v)) < 1e-9 and abs(v) < 1e5:
        return str(round(v))
    text = f"{v:.3g}"
    return text[1:] if text.startswith("0.") else text.replace("-0.", "-.")


def plot_winograd_stages(stages: WinogradStages, *, show_matrices: bool = True, figsize=None):
    """The tile's journey in three rows: input ``d -> B^T d B``, filter ``g -> G g G^T``,
    then ``U ⊙ V -> A^T M A``, with the library's B^T, G and A^T in the middle column
    (``show_matrices``). The last panel's title compares Y with the reference.

    Returns
    -------
    matplotlib.figure.Figure
    """
    s = stages
    a = s.alpha
    cols = 3 if show_matrices else 2
    fig = render.new_figure(figsize or ((0.42 * a + 0.6) * cols + 1.0, 3 * (0.42 * a + 0.9)))
    axes = fig.subplots(3, cols)
    first, middle, last = 0, 1, cols - 1
    _matrix(axes[0, first], s.d, f"input tile d ({a}x{a})")
    _matrix(axes[0, last], s.V, "V = Bᵀ d B")
    # the filter is 3x3; draw it in an alpha-wide frame so that the rows line up
    _matrix(axes[1, first], s.g, "filter g (3x3)")
    axes[1, first].set_xlim(-(a - 3) / 2 - 0.1, 3 + (a - 3) / 2 + 0.1)
    axes[1, first].set_ylim(-(a - 3) / 2 - 0.1, 3 + (a - 3) / 2 + 0.1)
    _matrix(axes[1, last], s.U, "U = G g Gᵀ (prepare_weights)")
    _matrix(axes[2, first], s.M, f"M = U ⊙ V ({a * a} products)")
    error = float(np.abs(s.Y - s.reference).max())
    kernel = float(np.abs(s.kernel_output - s.reference).max())
    _matrix(axes[2, last], s.Y, f"Y = Aᵀ M A ({s.m}x{s.m})\nmax |Y − reference| = "
                                f"{_difference(error)}\nmax |winograd{s.m} − reference| = "
                                f"{_difference(kernel)}")
    axes[2, last].set_xlim(-(a - s.m) / 2 - 0.1, s.m + (a - s.m) / 2 + 0.1)
    axes[2, last].set_ylim(-(a - s.m) / 2 - 0.1, s.m + (a - s.m) / 2 + 0.1)
    if show_matrices:
        _matrix(axes[0, middle], s.BT, f"Bᵀ ({a}x{a})")
        _matrix(axes[1, middle], s.G, f"G ({a}x3)")
        _matrix(axes[2, middle], s.AT, f"Aᵀ ({s.m}x{a})")
        for ax, (rows, width) in zip(axes[:, middle], ((a, a), (a, 3), (s.m, a))):
            ax.set_xlim(-(a - width) / 2 - 0.1, width + (a - width) / 2 + 0.1)
            ax.set_ylim(-(a - rows) / 2 - 0.1, rows + (a - rows) / 2 + 0.1)
    counts = s.multiplications
    fig.suptitle(f"Winograd F({s.m}x{s.m}, 3x3): {counts['winograd']} multiplications for "
                 f"{counts['outputs']} outputs instead of {counts['direct']} "
                 f"({counts['saving']:.2f}x fewer)", fontsize=10)
    return fig


def plot_relative_errors(errors: dict, channels: Sequence[int], *, table: dict | None = None,
                         bound: float | None = None, figsize=None):
    """Measured relative error per algorithm against IC (log scale). ``table`` (e.g.
    ``convlab.strategies.winograd.MEASURED_RELATIVE_ERROR``) adds the library's published
    values as hollow markers, for the ICs it lists; ``bound`` draws a horizontal line
    (e.g. ``convlab.dispatch.select.DEFAULT_RELATIVE_ERROR_BOUND``).

    Returns
    -------
    matplotlib.figure.Figure
    """
    fig = render.new_figure(figsize or (7.5, 3.6))
    ax = fig.subplots()
    if bound is not None:
        ax.axhline(bound, color="#404040", ls=":", lw=1.0,
                   label=f"precision='default' bound {bound:.0e}")
    for number, (name, values) in enumerate(errors.items()):
        colour = render.group_colour(number)
        ax.plot(channels, values, "o-", color=colour, label=f"{name} (measured now)")
        if table and name in table:
            known = sorted(table[name].items())
            ax.plot([k for k, _ in known], [v for _, v in known], "s--", mfc="none",
                    color=colour, alpha=0.6, lw=0.8)
    if table:
        ax.plot([], [], "s--", mfc="none", color="grey", lw=0.8,
                label="library table (larger problems)")
    ax.set_xscale("log", base=2)
    shown = sorted(set(channels) | {k for v in (table or {}).values() for k in v})
    ax.set_xticks(shown, [str(c) for c in shown])
    ax.minorticks_off()
    ax.set_yscale("log")
    ax.set_xlabel("IC (input channels summed per output)", fontsize=9)
    ax.set_ylabel("‖y − ref‖ / ‖ref‖ (float32)", fontsize=9)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    ax.set_title("accuracy against tile size", fontsize=10)
    return fig
