"""Transposed convolution.

The documented import path of :mod:`convlab.ops.transpose`, which it re-exports."""
from convlab.ops.transpose import (
                                   COL2IM,
                                   COL2IM_WORKSPACE_BYTES,
                                   TRANSPOSE_WEIGHTS_FORMATS,
                                   TransposeProblem,
                                   algorithm_run,
                                   choose,
                                   conv_transpose,
                                   execute,
                                   forward_weights,
                                   grouped_weights,
                                   make_transpose_problem,
                                   parse_transpose_weights_format,
                                   run_col2im,
                                   run_forward,
                                   split_total_pad,
                                   transpose_extent,
)

__all__ = ["algorithm_run", "choose", "COL2IM", "COL2IM_WORKSPACE_BYTES", "conv_transpose",
    "execute", "forward_weights", "grouped_weights", "make_transpose_problem",
    "parse_transpose_weights_format", "run_col2im", "run_forward", "split_total_pad",
    "transpose_extent", "TRANSPOSE_WEIGHTS_FORMATS", "TransposeProblem"]
