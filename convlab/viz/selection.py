"""Maps of the automatic choice: which algorithm wins where, estimated and timed.

A *crossover map* asks the selector (:func:`convlab.dispatch.select.assess` and
:func:`convlab.dispatch.select.choose`, the functions behind ``algorithm="auto"``,
:func:`convlab.select_algorithm` and :func:`convlab.explain`) for its pick on a grid of
layers: square src ``(N, H, H, C)`` with ``C`` input and output channels, a ``K x K``
kernel with "same" pads, for each thread count. A *measured map* times every
contender on the same grid with :func:`convlab.convolve`. Comparing the two says how
often the estimate picks the fastest algorithm and what a wrong pick costs.
"""
from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

import convlab
from convlab.dispatch import select
from convlab.problem import params
from convlab.runtime import timing
from convlab.viz import render


@dataclass(frozen=True)
class CrossoverMap:
    """The winner at every grid point, and each algorithm's seconds there.

    Attributes
    ----------
    channels, spatial, threads : tuple of int
        The grid: IC = OC = C, H = W, thread counts.
    kernel, batch : int
    precision : str
    dtype : numpy.dtype
    source : str
        "estimated" (the selector's cost models) or "measured" (timed runs).
    winners : numpy.ndarray of str, shape ``(len(threads), len(channels), len(spatial))``
    seconds : dict of str to numpy.ndarray
        Per algorithm, seconds at each grid point (``inf`` where it is not a contender):
        for an estimated map the estimates as ``explain`` shows them; auto compares them
        times 1 + each algorithm's selection margin (:mod:`convlab.dispatch.cost_model`).
    """

    channels: tuple[int, ...]
    spatial: tuple[int, ...]
    threads: tuple[int, ...]
    kernel: int
    batch: int
    precision: str
    dtype: np.dtype
    source: str
    winners: np.ndarray
    seconds: dict[str, np.ndarray] = field(repr=False)

    def arguments(self, c: int, h: int) -> tuple:
        """``(src_shape, weights_shape, attributes)`` of the layer with C=c, H=h (NXC/XIO)."""
        return layer_arguments(c, h, self.kernel, self.batch)

    def problem(self, c: int, h: int) -> params.ConvProblem:
        src_shape, weights_shape, attributes = self.arguments(c, h)
        return params.make_problem(src_shape, self.dtype, weights_shape, self.dtype,
                                   **attributes)

    @property
    def names(self) -> list:
        """Algorithms that win somewhere, in registry order."""
        won = set(self.winners.ravel())
        return [name for name in convlab.algorithms() if name in won]


def layer_arguments(c: int, h: int, kernel: int = 3, batch: int = 1) -> tuple:
    """A square layer with C in and out channels and "same" pads, as convolve's arguments."""
    pad = (kernel - 1) // 2
    return ((batch, h, h, c), (kernel, kernel, c, c),
            {"pads_begin": pad, "pads_end": kernel - 1 - pad})


def crossover_map(channels: Sequence[int], spatial: Sequence[int],
                  threads: Sequence[int] = (1, 2), *, kernel: int = 3, batch: int = 1,
                  precision: str = "default", dtype=np.float32) -> CrossoverMap:
    """What ``algorithm="auto"`` picks at every (threads, C, H), and every estimate."""
    precision = select.parse_precision(precision)
    dtype = np.dtype(dtype)
    channels, spatial, threads = tuple(channels), tuple(spatial), tuple(threads)
    shape = (len(threads), len(channels), len(spatial))
    winners = np.empty(shape, dtype=object)
    seconds: dict[str, np.ndarray] = {}
    for t_index, t in enumerate(threads):
        for c_index, c in enumerate(channels):
            for h_index, h in enumerate(spatial):
                src_shape, weights_shape, attributes = layer_arguments(c, h, kernel, batch)
                problem = params.make_problem(src_shape, dtype, weights_shape, dtype,
                                              **attributes)
                rows = select.assess(problem, t, precision)
                winners[t_index, c_index, h_index] = select.choose(problem, t, rows, precision)
                for row in rows:
                    table = seconds.setdefault(row.name, np.full(shape, np.inf))
                    if row.contender:
                        table[t_index, c_index, h_index] = row.estimate.seconds
    return CrossoverMap(channels, spatial, threads, kernel, batch, precision, dtype,
                        "estimated", winners.astype(str), seconds)


def measured_map(channels: Sequence[int], spatial: Sequence[int],
                 threads: Sequence[int] = (1, 2), *, kernel: int = 3, batch: int = 1,
                 precision: str = "default", dtype=np.float32, repeats: int = 3,
                 algorithms: Sequence[str] | None = None, seed: int = 0) -> CrossoverMap:
    """Time each contender with :func:`convlab.convolve` at every grid point.

    The contenders are those auto would consider there (or ``algorithms``); each runs
    once to warm up, then ``repeats`` times (taking turns with the others), and the
    fastest run counts (as in
    ``algorithm="tune"``: on a shared machine noise only ever adds time). Times include
    what a one-shot ``convolve`` pays (weight preparation, layout checks).
    """
    precision = select.parse_precision(precision)
    dtype = np.dtype(dtype)
    if repeats < 1:
        raise ValueError(f"repeats={repeats} must be >= 1")
    channels, spatial, threads = tuple(channels), tuple(spatial), tuple(threads)
    shape = (len(threads), len(channels), len(spatial))
    rng = np.random.default_rng(seed)
    winners = np.empty(shape, dtype=object)
    seconds: dict[str, np.ndarray] = {}
    for c_index, c in enumerate(channels):
        for h_index, h in enumerate(spatial):
            src_shape, weights_shape, attributes = layer_arguments(c, h, kernel, batch)
            src = rng.standard_normal(src_shape).astype(dtype)
            weights = rng.standard_normal(weights_shape).astype(dtype)
            problem = params.make_problem(src_shape, dtype, weights_shape, dtype, **attributes)
            for t_index, t in enumerate(threads):
                names = algorithms or [row.name for row in select.contenders(
                    select.assess(problem, t, precision))]
                best = timing.fastest_in_rounds(
                    {name: functools.partial(convlab.convolve, src, weights, algorithm=name,
                                             threads=t, **attributes) for name in names},
                    repeats)
                for name in names:
                    table = seconds.setdefault(name, np.full(shape, np.inf))
                    table[t_index, c_index, h_index] = best[name]
                winners[t_index, c_index, h_index] = min(best, key=best.get)
    return CrossoverMap(channels, spatial, threads, kernel, batch, precision, dtype,
                        "measured", winners.astype(str), seconds)


def agreement(estimated: CrossoverMap, measured: CrossoverMap) -> dict:
    """How often the estimate picks the measured fastest, and what its picks cost.

    Returns ``{"points", "agree", "fraction", "regret"}``; ``regret`` is per grid point
    (measured time of the estimated pick) / (measured best), 1.0 where they agree.
    """
    if (estimated.channels, estimated.spatial, estimated.threads) != \
            (measured.channels, measured.spatial, measured.threads):
        raise ValueError("estimated and measured maps cover different grids; expected the "
                         "same channels, spatial and threads")
    regret = np.ones(estimated.winners.shape)
    for index in np.ndindex(estimated.winners.shape):
        pick, best = estimated.winners[index], measured.winners[index]
        timed = measured.seconds.get(pick)
        if timed is not None and np.isfinite(timed[index]):
            regret[index] = timed[index] / measured.seconds[best][index]
        elif pick != best:
            regret[index] = np.nan  # the pick was not timed
    agree = int(np.sum(estimated.winners == measured.winners))
    return {"points": estimated.winners.size, "agree": agree,
            "fraction": agree / estimated.winners.size, "regret": regret}


# --------------------------------------------------------------------------- drawing

def _colours(names):
    order = convlab.algorithms()
    return {name: render.group_colour(order.index(name) if name in order else 9)
            for name in names}


def plot_crossover_map(estimated: CrossoverMap, measured: CrossoverMap | None = None, *,
                       figsize=None):
    """One panel per thread count: C down, H across, each cell coloured by the winner.

    With ``measured`` (on the same grid), each cell also names the measured winner
    (second line); cells where the two differ get a thick black frame and say how much
    slower the estimated pick ran than the timed winner.

    Returns
    -------
    matplotlib.figure.Figure
    """
    patches = render.mpl("matplotlib.patches")
    if measured is not None and (measured.channels, measured.spatial, measured.threads) != \
            (estimated.channels, estimated.spatial, estimated.threads):
        raise ValueError("measured covers a different grid than estimated; expected the same "
                         "channels, spatial and threads")
    n_t, n_c, n_h = estimated.winners.shape
    names = sorted(set(estimated.names) | set(measured.names if measured else ()),
                   key=convlab.algorithms().index)
    colours = _colours(names)
    cell_w = 1.25 if measured is None else 1.6
    cell_h = 1.0 if measured is None else 1.25
    fig = render.new_figure(figsize or (n_t * (cell_w * 0.62 * n_h + 1.2) + 0.5,
                                        0.5 * cell_h * n_c + 2.2))
    axes = np.atleast_1d(fig.subplots(1, n_t, squeeze=False)[0])
    for t_index, ax in enumerate(axes):
        for c_index in range(n_c):
            for h_index in range(n_h):
                pick = estimated.winners[t_index, c_index, h_index]
                y = (n_c - 1 - c_index) * cell_h
                text = pick.replace("winograd", "wino")
                differ = False
                if measured is not None:
                    timed = measured.winners[t_index, c_index, h_index]
                    differ = timed != pick
                    text += "\n" + ("= timed" if not differ else
                                    "timed: " + timed.replace("winograd", "wino"))
                    if differ:
                        index = (t_index, c_index, h_index)
                        mine = measured.seconds.get(pick)
                        slower = (mine[index] / measured.seconds[timed][index]
                                  if mine is not None else np.nan)
                        text += f"\npick {slower:.2f}x slower" if np.isfinite(slower) \
                            else "\npick not timed"
                render.cell(ax, h_index * cell_w, y, colours[pick], text, width=cell_w,
                            height=cell_h, fontsize=7, text_colour="white")
                if differ:
                    frame = ax.add_patch(patches.Rectangle(
                        (h_index * cell_w + 0.06, y + 0.06), cell_w - 0.12, cell_h - 0.12,
                        fill=False, edgecolor="black", linewidth=2.2))
                    frame.set_in_layout(False)
        render.bare(ax, (-0.05, n_h * cell_w + 0.05), (-0.05, n_c * cell_h + 0.05))
        ax.set_xticks((np.arange(n_h) + 0.5) * cell_w, [str(h) for h in estimated.spatial],
                      fontsize=8)
        ax.set_yticks((n_c - 1 - np.arange(n_c) + 0.5) * cell_h,
                      [str(c) for c in estimated.channels],
                      fontsize=8)
        ax.set_xlabel("H = W (spatial extent)", fontsize=9)
        if t_index == 0:
            ax.set_ylabel("C = IC = OC", fontsize=9)
        ax.set_title(f"threads = {estimated.threads[t_index]}", fontsize=9)
    handles = [patches.Patch(facecolor=colours[n], label=n) for n in names]
    fig.legend(handles=handles, loc="outside lower center", ncol=len(names), fontsize=8,
               frameon=False)
    what = "auto's pick (estimated)" + (", and the timed winner" if measured else "")
    fig.suptitle(f"{what}: {estimated.kernel}x{estimated.kernel} 'same' layers, N="
                 f"{estimated.batch}, {estimated.dtype}, precision={estimated.precision!r}",
                 fontsize=9)
    # Without the extra room the panel titles touch the figure title (seen in the render).
    fig.get_layout_engine().set(h_pad=0.12)
    return fig


def plot_crossover_lines(estimated: CrossoverMap, measured: CrossoverMap | None = None, *,
                         channels: int | None = None, threads: int | None = None,
                         figsize=None):
    """Seconds against H for one C and thread count: lines for the estimates, dots for the
    timings. Where two lines cross, auto's choice changes.

    Returns
    -------
    matplotlib.figure.Figure
    """
    c = estimated.channels[-1] if channels is None else channels
    t = estimated.threads[-1] if threads is None else threads
    if c not in estimated.channels or t not in estimated.threads:
        raise ValueError(f"channels={c}, threads={t}: expected values on the map's grid "
                         f"(channels {estimated.channels}, threads {estimated.threads})")
    ci, ti = estimated.channels.index(c), estimated.threads.index(t)
    names = [n for n in convlab.algorithms()
             if np.isfinite(estimated.seconds.get(n, np.full(1, np.inf))).any()
             or (measured is not None and n in measured.seconds)]
    colours = _colours(names)
    fig = render.new_figure(figsize or (6.8, 3.8))
    ax = fig.subplots()
    h = np.array(estimated.spatial)
    for name in names:
        est = estimated.seconds.get(name)
        if est is not None and np.isfinite(est[ti, ci]).any():
            ax.plot(h, est[ti, ci] * 1e3, "-", color=colours[name], label=f"{name} (estimated)")
        if measured is not None and name in measured.seconds:
            mi_c, mi_t = measured.channels.index(c), measured.threads.index(t)
            ax.plot(measured.spatial, measured.seconds[name][mi_t, mi_c] * 1e3, "o--",
                    color=colours[name], lw=0.8, label=f"{name} (timed)")
    ax.set_xscale("log", base=2)
    ax.set_xticks(list(h), [str(v) for v in h])
    ax.minorticks_off()
    ax.set_yscale("log")
    ax.set_xlabel("H = W", fontsize=9)
    ax.set_ylabel("milliseconds per call", fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    ax.set_title(f"C={c}, threads={t}, {estimated.kernel}x{estimated.kernel}", fontsize=10)
    return fig
