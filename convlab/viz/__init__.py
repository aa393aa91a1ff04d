"""Figures for learning convolution, computed by convlab itself.

Nothing here is drawn by hand. Which input elements an output reads, how far a
receptive field reaches, which channels feed which: each answer comes from running
:func:`convlab.convolve` on one-hot inputs (or from the resolved
:class:`convlab.ConvProblem`), so a figure is right whenever the kernels are right,
for any parameters the reader picks.

Every topic comes in two halves:

* **computing** functions return NumPy arrays and small dataclasses and never touch
  matplotlib, so tests can check what they compute;
* **drawing** functions (``plot_*``, ``animate_*``) take those results and return a
  :class:`matplotlib.figure.Figure` or :class:`matplotlib.animation.FuncAnimation`.
  matplotlib is imported inside them, so ``import convlab.viz`` works without it.
  The figures are not registered with pyplot: in Jupyter run ``%matplotlib inline``
  once (or import pyplot) and a cell whose value is a figure shows it; elsewhere
  call ``fig.savefig(...)``. Animations become HTML with :func:`to_html` or a GIF
  with :func:`save_gif`.

Topics (one module each):

* :mod:`convlab.viz.windows`: the window of taps each output reads over the padded
  input, step by step and as an animation;
* :mod:`convlab.viz.receptive`: receptive fields through a chain of layers;
* :mod:`convlab.viz.channels`: which input channels feed which output channels
  (groups, depthwise);
* :mod:`convlab.viz.layout`: where each element of src and weights sits in memory for
  NCX/NXC and OIX/XIO;
* :mod:`convlab.viz.im2col`: the column matrix, built by the im2col strategy's own
  unfolding code, and the memory and chunking of its panels;
* :mod:`convlab.viz.winograd`: F(m x m, 3 x 3) stage by stage on one tile, with the
  library's transforms and prepared weights, and its accuracy per tile size;
* :mod:`convlab.viz.selection`: crossover maps of the automatic choice, from the
  selector's estimates and from timed runs;
* :mod:`convlab.viz.spectrum`: the convolution theorem on one channel with the fft
  strategy's own weight spectrum, its overlap-save tiles, the spectrum of a dilated
  kernel, and timings of the algorithms against the kernel size;
* :mod:`convlab.viz.exercises`: the tutorials' self-checking exercises, one module per
  topic, which work out the right answer with the library and say why the reader's is
  right or wrong;
* :mod:`convlab.viz.transpose`: transposed convolution as a scatter (found by running
  :func:`convlab.conv_transpose` on one-hot inputs) and as a forward convolution of the
  stretched input, and how many taps land on each output;
* :mod:`convlab.viz.explore`: an ipywidgets explorer of every attribute (rank, sizes,
  stride, dilation, pads, ``auto_pad``, groups, data dilation, padding mode, transposed):
  each change recomputes the windows with the kernels, fills in the output-extent
  formula, lists what one output reads and asks :func:`convlab.explain` what ``auto``
  would run. :func:`explorer_state` is its computing half; without ipywidgets or a
  Jupyter kernel :func:`explore` returns the static figure. ipywidgets comes with the
  ``tutorials`` extra;
* :mod:`convlab.viz.halos`: the chunks, receptive fields and halos of a
  :func:`convlab.dask.convolve` graph, read from the graph itself, and exercise checkers.
  It needs the ``dask`` extra and is not imported by ``import convlab.viz``.
"""
from convlab.viz.channels import channel_connectivity, plot_channel_groups
from convlab.viz.explore import (
    Explorer,
    ExplorerState,
    explore,
    explorer_state,
    plot_explorer,
)
from convlab.viz.im2col import (
    ColumnMatrix,
    PanelCost,
    column_matrix,
    panel_cost,
    plot_column_matrix,
    plot_panel_chunks,
)
from convlab.viz.layout import memory_order, plot_memory_layout, src_offsets, weights_offsets
from convlab.viz.receptive import Layer, ReceptiveField, plot_receptive_field, receptive_field
from convlab.viz.render import save_gif, to_html
from convlab.viz.selection import (
    CrossoverMap,
    agreement as selector_agreement,
    crossover_map,
    measured_map,
    plot_crossover_lines,
    plot_crossover_map,
)
from convlab.viz.spectrum import (
    KernelSweep,
    OverlapSave,
    SpectrumStages,
    convolution_theorem,
    dilated_spectrum,
    kernel_sweep,
    overlap_save,
    plot_convolution_theorem,
    plot_dilated_spectrum,
    plot_kernel_sweep,
    plot_overlap_save,
)
from convlab.viz.transpose import (
    Scatter,
    Stretched,
    overlap_counts,
    plot_overlap,
    plot_scatter,
    plot_stretched,
    scatter_contributions,
    stretched_view,
)
from convlab.viz.windows import Windows, animate_windows, plot_window, windows
from convlab.viz.winograd import (
    WinogradStages,
    multiplication_counts,
    plot_relative_errors as plot_winograd_relative_errors,
    plot_winograd_stages,
    relative_errors as winograd_relative_errors,
    winograd_stages,
)

__all__ = [
    "ColumnMatrix", "CrossoverMap", "Explorer", "ExplorerState", "KernelSweep", "Layer",
    "OverlapSave", "PanelCost",
    "ReceptiveField", "Scatter", "SpectrumStages", "Stretched", "Windows", "WinogradStages",
    "animate_windows", "channel_connectivity", "column_matrix", "convolution_theorem",
    "crossover_map", "dilated_spectrum", "explore", "explorer_state", "kernel_sweep",
    "measured_map", "memory_order",
    "overlap_save", "plot_convolution_theorem", "plot_dilated_spectrum",
    "plot_kernel_sweep", "plot_overlap_save",
    "multiplication_counts", "overlap_counts", "panel_cost", "plot_channel_groups",
    "plot_column_matrix", "plot_crossover_lines", "plot_crossover_map", "plot_explorer",
    "plot_memory_layout", "plot_overlap", "plot_panel_chunks", "plot_receptive_field",
    "plot_scatter", "plot_stretched", "plot_window", "plot_winograd_relative_errors",
    "plot_winograd_stages", "receptive_field", "save_gif", "scatter_contributions",
    "selector_agreement", "src_offsets", "stretched_view", "to_html", "weights_offsets",
    "windows", "winograd_relative_errors", "winograd_stages",
]
