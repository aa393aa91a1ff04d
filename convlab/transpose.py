"""Transposed convolution.

The documented import path of :mod:`convlab.ops.transpose`, which it re-exports."""
from convlab.ops.transpose import (
    COL2IM,
    COL2IM_WORKSPACE_BYTES,
    FORWARD,
    TRANSPOSE_WEIGHTS_FORMATS,
    TransposeProblem,
    algorithm_run,
    choose,
    col2im_cost,
    conv_transpose,
    execute,
    explain,
    forward_cost,
    forward_problem,
    forward_weights,
    grouped_weights,
    make_transpose_problem,
    parse_transpose_weights_format,
    resolve,
    run_col2im,
    run_col2im_algorithm,
    run_forward,
    split_total_pad,
    transpose_extent,
)

__all__ = [
    "algorithm_run", "choose", "COL2IM", "col2im_cost", "COL2IM_WORKSPACE_BYTES",
    "conv_transpose", "execute", "explain", "FORWARD", "forward_cost", "forward_problem",
    "forward_weights", "grouped_weights", "make_transpose_problem",
    "parse_transpose_weights_format", "resolve", "run_col2im", "run_col2im_algorithm",
    "run_forward", "split_total_pad", "transpose_extent", "TRANSPOSE_WEIGHTS_FORMATS",
    "TransposeProblem",
]
