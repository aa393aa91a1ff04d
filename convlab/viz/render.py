"""Shared drawing pieces: the lazy matplotlib import, colours, cells, HTML and GIF output.

Figures are built with :class:`matplotlib.figure.Figure` directly, not through pyplot,
so nothing lingers in pyplot's global figure list and a notebook shows each figure
once (as the value of its cell).
"""
from __future__ import annotations

import importlib

# One colour per role, used by every figure so that a reader learns them once.
SRC_FACE = "#ffffff"
PAD_FACE = "#e3e3e3"          # zero padding
CROP_FACE = "#8c8c8c"         # src cropped away by a negative pad
TAP_FACE = "#f5a05a"          # src elements the current output reads
OUT_FACE = "#4e79a7"          # the current output
DONE_FACE = "#c6d7ea"         # outputs already computed
EDGE = "#404040"
GROUP_COLOURS = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948",
                 "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac")


def mpl(module: str = "matplotlib"):
    """Import a matplotlib module on first use, with a helpful error when it is missing."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(f"convlab.viz drawing functions need matplotlib ({exc}); install "
                          f"it with: pip install \"convlab[tutorials]\"") from None


def new_figure(figsize):
    """A Figure not registered with pyplot (see the module docstring)."""
    return mpl("matplotlib.figure").Figure(figsize=figsize, layout="constrained")


def group_colour(index: int) -> str:
    return GROUP_COLOURS[index % len(GROUP_COLOURS)]


def cell(ax, x, y, face, text=None, *, hatch=None, fontsize=9, text_colour="black",
         width=1.0, height=1.0, linewidth=0.8):
    """One square of a grid with its lower-left corner at (x, y), and an optional label.

    Returns the Rectangle and the Text (or None), for figures that update them later.
    """
    patches = mpl("matplotlib.patches")
    # Cells lie inside the axes limits, so the layout engine need not measure them; with
    # hundreds of labels, measuring them would dominate the drawing time.
    patch = ax.add_patch(patches.Rectangle((x, y), width, height, facecolor=face,
                                           edgecolor=EDGE, hatch=hatch, linewidth=linewidth))
    patch.set_in_layout(False)
    label = None
    if text is not None:
        label = ax.text(x + width / 2, y + height / 2, text, ha="center", va="center",
                        fontsize=fontsize, color=text_colour)
        label.set_in_layout(False)
    return patch, label


def bare(ax, xlim, ylim):
    """Equal aspect, no frame; grids set their own tick labels."""
    ax.set_xlim(*xlim)
    ax.set_ylim(*ylim)
    ax.set_aspect("equal")
    for spine in ax.spines.values():
        spine.set_visible(False)
    ax.tick_params(length=0)


def format_value(value) -> str:
    """Short numbers for cells: integers without a decimal point."""
    value = float(value)
    if value == int(value) and abs(value) < 1e6:
        return str(int(value))
    return f"{value:.3g}"


def to_html(animation, embed_limit_mb: float | None = None) -> str:
    """The animation as self-contained HTML with play controls, for ``IPython.display.HTML``."""
    if embed_limit_mb is not None:
        mpl().rcParams["animation.embed_limit"] = embed_limit_mb
    return animation.to_jshtml()


def save_gif(animation, path, fps: int = 2, dpi: int | None = None) -> None:
    """Write the animation as an animated GIF (needs Pillow)."""
    writer = mpl("matplotlib.animation").PillowWriter(fps=fps)
    animation.save(str(path), writer=writer, dpi=dpi)
