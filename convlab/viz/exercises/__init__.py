"""Self-checking exercises for the tutorials, one module per topic.

Each checker takes the reader's answer first, works out what is right for the exercise's
parameters with the library itself (never from a stored answer), prints *right* or
*wrong* with the reason it found, and returns a :class:`Verdict`. A missing answer
(``None``) prints "no answer yet"; an answer of the wrong type a wrong verdict naming
the type expected. Neither raises, so a notebook stored with blank answers still runs.

* :mod:`~convlab.viz.exercises.verdict`: the verdict and how answers are read.
* :mod:`~convlab.viz.exercises.shapes`: output sizes, padding, stride and dilation
  (notebooks 01-03).
* :mod:`~convlab.viz.exercises.channels`: groups and depthwise layers (04).
* :mod:`~convlab.viz.exercises.algorithms`: im2col, Winograd and the automatic choice
  (05-07).
* :mod:`~convlab.viz.exercises.transpose`: transposed convolution (08).
* :mod:`~convlab.viz.exercises.spectrum`: the convolution theorem (09).
"""
from convlab.viz.exercises.algorithms import (
    check_column_shape,
    check_contenders,
    check_panel_bytes,
    check_precision_excluded,
    check_winograd_layer_products,
    check_winograd_products,
)
from convlab.viz.exercises.channels import check_connected_inputs, check_weight_count
from convlab.viz.exercises.shapes import (
    check_auto_pads,
    check_output_length,
    check_output_shape,
    check_pads_for_length,
    check_reads,
    check_tiling_stride,
)
from convlab.viz.exercises.spectrum import (
    CORRELATION_CASES,
    TOLERANCE,
    check_correlation,
    check_transform_length,
)
from convlab.viz.exercises.transpose import check_output_padding, check_transpose_length
from convlab.viz.exercises.verdict import Verdict

__all__ = [
    "CORRELATION_CASES", "TOLERANCE", "Verdict", "check_auto_pads", "check_column_shape",
    "check_connected_inputs", "check_contenders", "check_correlation",
    "check_output_length", "check_output_padding", "check_output_shape",
    "check_pads_for_length", "check_panel_bytes", "check_precision_excluded",
    "check_reads", "check_tiling_stride", "check_transform_length",
    "check_transpose_length", "check_weight_count", "check_winograd_layer_products",
    "check_winograd_products",
]
