"""The public one-shot entry points: ``convolve``, ``select_algorithm`` and ``explain``."""
from __future__ import annotations

from typing import Callable, Optional

import numpy as np

from convlab import params, select, tune
from convlab.params import ConvProblem, IntOrSeq
from convlab.registry import get_algorithm
from convlab.threads import effective_threads


def _describe_call(src, weights, bias, attributes) -> ConvProblem:
    """Validate the arguments' shapes, dtypes and attributes into a problem."""
    def shape_dtype(name, value):
        if not (hasattr(value, "shape") and hasattr(value, "dtype")):
            value = params.as_array(name, value)
        return tuple(value.shape), np.dtype(value.dtype)

    src_shape, src_dtype = shape_dtype("src", src)
    weights_shape, weights_dtype = shape_dtype("weights", weights)
    bias_shape, bias_dtype = (None, None) if bias is None else shape_dtype("bias", bias)
    return params.make_problem(src_shape, src_dtype, weights_shape, weights_dtype,
                               bias_shape, bias_dtype, **attributes)


def check_out(out, problem: ConvProblem, inputs) -> None:
    if not isinstance(out, np.ndarray):
        raise TypeError(f"out must be a numpy.ndarray, got {type(out).__name__}")
    if out.shape != problem.dst_shape:
        raise ValueError(f"out has shape {out.shape}; expected {problem.dst_shape} "
                         f"(dst in data_format={problem.data_format!r})")
    if out.dtype != problem.dtype:
        raise ValueError(f"out has dtype {out.dtype}; expected {problem.dtype} (the compute "
                         f"dtype of src, weights and bias)")
    if not out.flags.writeable:
        raise ValueError("out is read-only; expected a writeable array")
    for name, array in inputs:
        if array is not None and np.may_share_memory(out, array):
            raise ValueError(f"out overlaps {name}; expected separate memory, since inputs "
                             f"are never modified")


def convolve(src, weights, bias=None, *, strides: IntOrSeq = None, pads_begin: IntOrSeq = None,
             pads_end: IntOrSeq = None, dilations: IntOrSeq = None, auto_pad: str = "none",
             groups: int = 1, data_format: str = "NXC", weights_format: str = "XIO",
             algorithm: str = "auto", threads: Optional[int] = None,
             out: Optional[np.ndarray] = None, precision: str = "default") -> np.ndarray:
    """N-D convolution (cross-correlation) as in oneDNN Graph / OpenVINO Convolution-1.

    ``dst[n, g*OCg+oc, o] = bias[g*OCg+oc] + sum_{ic,k} src[n, g*ICg+ic, o*S + k*D - P_b]
    * weights[g*OCg+oc, ic, k]``, with zero padding and
    ``O = floor((I + P_b + P_e - ((K-1)*D + 1)) / S) + 1``.

    Parameters
    ----------
    src : array_like
        ``(N, I..., IC)`` for ``data_format="NXC"`` (default) or ``(N, IC, I...)`` for "NCX".
    weights : array_like
        ``(K..., IC/G, OC)`` for ``weights_format="XIO"`` (default) or ``(OC, IC/G, K...)``
        for "OIX".
    bias : array_like, optional
        Shape ``(OC,)``.
    strides, dilations : int or sequence of int, optional
        Per spatial axis, each >= 1; dilation 1 is a dense kernel.
    pads_begin, pads_end : int or sequence of int, optional
        Zeros added before/after each spatial axis (negative values crop).
    auto_pad : {"none", "same_upper", "same_lower", "valid"}
        ONNX spellings are accepted too. Other than "none", explicit pads are ignored.
    groups : int
        Must divide IC and OC. ``groups == IC`` with IC/G == 1 is depthwise.
    algorithm : str
        "auto" (estimated fastest), "tune" (timed fastest, remembered per problem; see
        :func:`convlab.set_tune_cache`) or a name from :func:`convlab.algorithms`.
    threads : int, optional
        Thread count for this call; default: the effective core count (OMP_NUM_THREADS
        honoured). Negative counts from the available cores (-1 = all).
    out : numpy.ndarray, optional
        Destination of the dst shape and compute dtype.
    precision : {"default", "highest"}
        Which algorithms "auto" and "tune" may pick: "default" admits Winograd tiles whose
        measured float32 relative error is within ``select.DEFAULT_RELATIVE_ERROR_BOUND``;
        "highest" admits plain summation only. A forced algorithm name runs regardless.

    Returns
    -------
    numpy.ndarray
        dst in ``data_format``, in the compute dtype (float32 unless an input is float64).
    """
    src = params.as_array("src", src)
    weights = params.as_array("weights", weights)
    bias = None if bias is None else params.as_array("bias", bias)
    problem = _describe_call(src, weights, bias, dict(
        strides=strides, pads_begin=pads_begin, pads_end=pads_end, dilations=dilations,
        auto_pad=auto_pad, groups=groups, data_format=data_format,
        weights_format=weights_format))
    n_threads = effective_threads(threads)
    precision = select.parse_precision(precision)
    if out is not None:
        check_out(out, problem, (("src", src), ("weights", weights), ("bias", bias)))
    canonical_bias = params.canonical_bias(bias, problem)
    prepared_by_name = {}

    def prepared_for(algorithm):
        if algorithm.name not in prepared_by_name:
            prepared_by_name[algorithm.name] = algorithm.prepare_weights(
                problem, params.canonical_weights(weights, problem))
        return prepared_by_name[algorithm.name]

    chosen = resolve_for_call(algorithm, problem, n_threads, precision, src, canonical_bias,
                              prepared_for)
    prepared = prepared_for(chosen) if problem.batch > 0 else None
    return execute(problem, chosen, src, prepared, canonical_bias, out, n_threads)


def resolve_for_call(algorithm, problem: ConvProblem, n_threads: int, precision: str, src,
                     bias, prepared_for: Callable):
    """:func:`select.resolve`, plus the timing run that "tune" needs on its first call."""
    try:
        return select.resolve(algorithm, problem, n_threads, precision)
    except LookupError:
        pass
    names = [c.name for c in select.contenders(select.assess(problem, n_threads, precision))]
    if problem.batch == 0 or len(names) == 1:
        # Nothing to time, or nothing to choose between: take auto's pick, remember nothing.
        return get_algorithm(select.choose(problem, n_threads, precision=precision))
    src_canonical = params.canonical_src(src, problem)
    scratch = np.empty((problem.batch, *problem.output_shape, problem.out_channels),
                       dtype=problem.dtype)

    def run_once(name):
        candidate = get_algorithm(name)
        candidate.run(problem, src_canonical, prepared_for(candidate), bias, scratch, n_threads)

    return get_algorithm(tune.choose_by_timing(problem, n_threads, precision, names, run_once))


def execute(problem: ConvProblem, chosen, src: np.ndarray, prepared, bias, out, n_threads: int):
    """Run a resolved algorithm on validated arrays: the part shared by one-shot calls and plans.

    ``out`` is already checked; ``prepared`` are the algorithm's prepared weights and
    ``bias`` is canonical. The kernel writes straight into ``out`` when it is NXC and
    C-contiguous; otherwise into a canonical buffer that is copied to the user's layout.
    """
    writes_in_place = (out is not None and problem.data_format == "NXC"
                       and out.flags.c_contiguous)
    if writes_in_place:
        dst = out
    else:
        dst = np.empty((problem.batch, *problem.output_shape, problem.out_channels),
                       dtype=problem.dtype)
    if problem.batch > 0:
        chosen.run(problem, params.canonical_src(src, problem), prepared, bias, dst, n_threads)
    if writes_in_place:
        return out
    result = params.user_dst(dst, problem)
    if out is not None:
        out[...] = result
        return out
    return np.ascontiguousarray(result)


def _problem_and_threads(src, weights, bias, threads, attributes):
    return _describe_call(src, weights, bias, attributes), effective_threads(threads)


def select_algorithm(src, weights, bias=None, *, threads: Optional[int] = None,
                     precision: str = "default", **attributes) -> str:
    """The name of the algorithm ``algorithm="auto"`` would run for these arguments.

    ``src`` and ``weights`` may be arrays or anything with ``shape`` and ``dtype``.
    """
    problem, n_threads = _problem_and_threads(src, weights, bias, threads, attributes)
    return select.choose(problem, n_threads, precision=select.parse_precision(precision))


def explain(src, weights, bias=None, *, threads: Optional[int] = None,
            precision: str = "default", **attributes) -> select.Explanation:
    """A readable account of the choice: each algorithm's verdict, estimate, and the pick.

    ``print()`` it for text, or call ``.to_dict()``.
    """
    problem, n_threads = _problem_and_threads(src, weights, bias, threads, attributes)
    return select.explain_problem(problem, n_threads, select.parse_precision(precision))
