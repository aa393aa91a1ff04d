"""The public one-shot entry points: ``convolve``, ``select_algorithm`` and ``explain``."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Callable

import numpy as np

from convlab.dispatch import _tune as tune, select
from convlab.dispatch.registry import FORWARD, INT8, Algorithm, get_algorithm
from convlab.ops import _decided as decided, _quantized as quantized, postops
from convlab.problem import params
from convlab.problem.params import ConvProblem, IntOrSeq
from convlab.runtime import _buffers as buffers
from convlab.runtime.threads import effective_threads


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
    if out.dtype != problem.output_dtype:
        raise ValueError(f"out has dtype {out.dtype}; expected {problem.output_dtype} (the "
                         f"dst dtype of src, weights and bias)")
    if not out.flags.writeable:
        raise ValueError("out is read-only; expected a writeable array")
    for name, array in inputs:
        if array is not None and np.may_share_memory(out, array):
            raise ValueError(f"out overlaps {name}; expected separate memory, since inputs "
                             f"are never modified")


def convolve(src, weights, bias=None, *, strides: IntOrSeq = None, pads_begin: IntOrSeq = None,
             pads_end: IntOrSeq = None, dilations: IntOrSeq = None, auto_pad: str = "none",
             groups: int = 1, data_format: str = "NXC", weights_format: str = "XIO",
             data_dilations: IntOrSeq = None, padding_mode: str = "zeros",
             src_zero_point=None, weights_zero_point=None, output_scale=None,
             dst_zero_point=None, dst_dtype=None, post_ops: Sequence | None = None,
             algorithm: str = "auto", threads: int | None = None,
             out: np.ndarray | None = None, precision: str = "default") -> np.ndarray:
    """N-D convolution (cross-correlation) as in oneDNN Graph / OpenVINO Convolution-1.

    ``dst[n, g*OCg+oc, o] = bias[g*OCg+oc] + sum_{ic,k} src[n, g*ICg+ic, o*S + k*D - P_b]
    * weights[g*OCg+oc, ic, k]``, with zero padding and
    ``O = floor((I + P_b + P_e - ((K-1)*D + 1)) / S) + 1``.

    Parameters
    ----------
    src : array_like
        ``(N, I..., IC)`` for ``data_format="NXC"`` (default) or ``(N, IC, I...)`` for "NCX".
        float32/float64; float16/bfloat16 (computed in float32, returned in their type);
        int8/uint8 with int8/uint8 weights for quantized convolution (docs/specification.md §3.4).
    weights : array_like
        ``(K..., IC/G, OC)`` for ``weights_format="XIO"`` (default) or ``(OC, IC/G, K...)``
        for "OIX".
    bias : array_like, optional
        Shape ``(OC,)``. For 8-bit inputs an integer bias is added to the int32
        accumulator, a floating one after ``output_scale``.
    strides, dilations : int or sequence of int, optional
        Per spatial axis, each >= 1; dilation 1 is a dense kernel.
    pads_begin, pads_end : int or sequence of int, optional
        Pads added before/after each spatial axis (negative values crop).
    auto_pad : {"none", "same_upper", "same_lower", "valid"}
        ONNX spellings are accepted too. Other than "none", explicit pads are ignored.
    groups : int
        Must divide IC and OC. ``groups == IC`` with IC/G == 1 is depthwise.
    data_dilations : int or sequence of int, optional
        nGraph's data (input) dilation L >= 1: L - 1 zeros between neighbouring src
        elements, extent L * (I - 1) + 1. The stretched src is materialised once.
    padding_mode : {"zeros", "reflect", "replicate", "circular"}
        What the pads hold, as in PyTorch. Other than "zeros" the padded src is
        materialised once (a copy of N * IC * prod(I + P_b + P_e) elements) and the
        algorithms run it with zero pads.
    src_zero_point, weights_zero_point, dst_zero_point : int or array_like, optional
        8-bit inputs only: scalars or per channel (IC, OC, OC).
    output_scale : float or array_like, optional
        8-bit inputs only: multiplies the int32 accumulator (scalar or per OC).
    dst_dtype : {"int32", "int8", "uint8", "float32"}, optional
        8-bit inputs only: the result type (default int32); rounded half to even and
        saturated when integer.
    post_ops : list, optional
        Post-ops (docs/specification.md §4), applied in the order given (see
        :mod:`convlab.ops.postops`):
        ``["relu", ("sum", 1.0), ("add", tensor), ...]``. A "sum" needs ``out``.
    algorithm : str
        "auto" (estimated fastest), "tune" (timed fastest, remembered per problem; see
        :func:`convlab.set_tune_cache`) or a name from :func:`convlab.algorithms`.
        8-bit problems: "auto", "direct", "im2col" or "reference".
    threads : int, optional
        Thread count for this call; default: the effective core count (OMP_NUM_THREADS
        honoured). Negative counts from the available cores (-1 = all).
    out : numpy.ndarray, optional
        Destination of the dst shape and dtype.
    precision : {"default", "highest"}
        Which algorithms "auto" and "tune" may pick: "default" admits Winograd tiles whose
        measured float32 relative error is within ``select.DEFAULT_RELATIVE_ERROR_BOUND``;
        "highest" admits plain summation only. A forced algorithm name runs regardless.

    Returns
    -------
    numpy.ndarray
        dst in ``data_format``, in the compute dtype (float32 unless an input is float64),
        the half type of half inputs, or the dst dtype of 8-bit inputs.
    """
    n_threads = effective_threads(threads)
    key = None
    if (out is None and post_ops is None and src_zero_point is None
            and weights_zero_point is None and output_scale is None and dst_zero_point is None):
        key = decided.signature(src, weights, bias, (
            strides, pads_begin, pads_end, dilations, auto_pad, groups, data_format,
            weights_format, data_dilations, padding_mode, dst_dtype), algorithm, n_threads,
            precision)
        known = decided.lookup(key)
        if known is not None:
            problem, _, prepare, run = known
            return run(src, prepare(weights), params.canonical_bias(bias, problem))
    src = params.as_array("src", src)
    weights = params.as_array("weights", weights)
    bias = None if bias is None else params.as_array("bias", bias)
    problem = _describe_call(src, weights, bias, dict(
        strides=strides, pads_begin=pads_begin, pads_end=pads_end, dilations=dilations,
        auto_pad=auto_pad, groups=groups, data_format=data_format,
        weights_format=weights_format, data_dilations=data_dilations,
        padding_mode=padding_mode, dst_dtype=dst_dtype))
    q = quantized.parse(problem, src.dtype, weights.dtype, bias,
                        src_zero_point=src_zero_point, weights_zero_point=weights_zero_point,
                        output_scale=output_scale, dst_zero_point=dst_zero_point)
    ops = postops.parse(post_ops, problem, out)
    parsed_precision = select.parse_precision(precision)
    if out is not None:
        check_out(out, problem, (("src", src), ("weights", weights), ("bias", bias)))
    if q is not None:
        chosen = select.resolve(algorithm, problem, n_threads, parsed_precision,
                                registry=INT8)
        shifted = quantized.shifted_weights(weights, problem, q)
        return execute_quantized(problem, chosen, src, shifted, q, ops, out, n_threads)
    canonical_bias = params.canonical_bias(bias, problem)
    prepared_by_name = {}

    def prepared_for(algorithm):
        if algorithm.name not in prepared_by_name:
            prepared_by_name[algorithm.name] = algorithm.prepare(problem, weights, once=True)
        return prepared_by_name[algorithm.name]

    chosen = resolve_for_call(algorithm, problem, n_threads, parsed_precision, src,
                              canonical_bias, prepared_for)
    prepared = prepared_for(chosen) if problem.batch > 0 else None
    result = execute(problem, chosen, src, prepared, canonical_bias, out, n_threads, ops)
    if algorithm != "tune" and decided.kernel_only(problem, ops, out):
        decided.remember(key, problem, chosen, n_threads)
    return result


def resolve_for_call(algorithm, problem: ConvProblem, n_threads: int, precision: str, src,
                     bias, prepared_for: Callable, prepared: bool = False):
    """:func:`select.resolve`, plus the timing run that "tune" needs on its first call.
    ``prepared``: the caller (a plan) prepares the weights once (see :func:`select.choose`)."""
    try:
        return select.resolve(algorithm, problem, n_threads, precision, prepared)
    except LookupError:
        pass
    names = [c.name for c in select.contenders(select.assess(problem, n_threads, precision))]
    if problem.batch == 0 or len(names) == 1:
        # Nothing to time, or nothing to choose between: take auto's pick, remember nothing.
        return get_algorithm(select.choose(problem, n_threads, precision=precision,
                                           prepared=prepared))
    src_canonical = params.canonical_src(src, problem, n_threads)
    scratch = np.empty(problem.canonical_dst_shape, dtype=problem.dtype)

    def run_once(name):
        candidate = get_algorithm(name)
        candidate.run(problem, src_canonical, prepared_for(candidate), bias, scratch, n_threads)

    return get_algorithm(tune.choose_by_timing(problem, n_threads, precision, names, run_once))


def execute(problem: ConvProblem, chosen, src: np.ndarray, prepared, bias, out, n_threads: int,
            ops=()):
    """Run a resolved algorithm on validated arrays: the part shared by one-shot calls and plans.

    ``out`` is already checked; ``prepared`` are the algorithm's prepared weights and
    ``bias`` is canonical. Post-ops go into the kernel's epilogue when the algorithm fuses
    them (:func:`convlab.ops.postops.epilogue`). The kernel writes straight into ``out`` when it
    is NXC and C-contiguous and nothing follows the kernel; otherwise into a canonical
    buffer that the output stage (post-ops not fused, half conversion:
    :func:`convlab.ops.postops.finish`) or a copy turns into the user's dst.
    """
    epilogue = postops.epilogue(problem, ops, chosen, out) if ops else None
    staged = epilogue is None and postops.needs_stage(problem, ops, None)
    writes_in_place = (not staged and out is not None and problem.data_format == "NXC"
                       and out.flags.c_contiguous and out.flags.aligned)
    if writes_in_place:
        dst = out
    elif epilogue is not None and epilogue.seeds_sum:
        # the fused sum reads the prior dst from the kernel's own buffer
        dst = params.aligned(np.ascontiguousarray(params.canonical_view(out, problem)))
    elif staged or problem.data_format == "NCX":
        # read by the output stage or copied to NCX before the call returns
        dst = buffers.staging("dst", problem.canonical_dst_shape, problem.dtype)
    else:
        dst = buffers.empty(problem.canonical_dst_shape, problem.dtype)
    if problem.batch > 0:
        # only algorithms that fuse post-ops take the keyword
        fused = {} if epilogue is None else {"epilogue": epilogue}
        chosen.run(problem, params.canonical_src(src, problem, n_threads, staged=True),
                   prepared, bias, dst, n_threads, **fused)
    if writes_in_place:
        return out
    if staged:
        return _finish(problem, dst, out, ops, None, n_threads)
    if out is not None:
        params.write_user_dst(dst, problem, out, n_threads)
        return out
    return params.user_dst_copy(dst, problem, n_threads)


def _finish(problem: ConvProblem, acc: np.ndarray, out, ops, requant,
            n_threads: int) -> np.ndarray:
    """The output stage into ``out`` (through its canonical view) or a new array."""
    if out is not None:
        view = params.canonical_view(out, problem)
        postops.finish(problem, acc, view, ops, requant, dst_before=view)
        return out
    result = np.empty(acc.shape, problem.output_dtype)
    postops.finish(problem, acc, result, ops, requant)
    return params.user_dst_copy(result, problem, n_threads)


def execute_quantized(problem: ConvProblem, chosen: Algorithm, src: np.ndarray, weights, q,
                      ops, out, n_threads: int) -> np.ndarray:
    """An 8-bit problem: int32 accumulation by ``chosen`` (of the 8-bit registry), then the
    float stage if any. ``weights`` are :func:`quantized.shifted_weights`."""
    acc = np.empty(problem.canonical_dst_shape, np.int32)
    if problem.batch > 0:
        chosen.run(problem, quantized.shifted_src(src, problem, q), weights, q.int_bias, acc,
                   n_threads)
    if postops.needs_stage(problem, ops, q.requant):
        return _finish(problem, acc, out, ops, q.requant, n_threads)
    if out is not None:
        params.write_user_dst(acc, problem, out, n_threads)
        return out
    return params.user_dst_copy(acc, problem, n_threads)


# Keywords that describe data, not the problem's shape: selection ignores them.
_DATA_KEYWORDS = ("src_zero_point", "weights_zero_point", "output_scale", "dst_zero_point",
                  "post_ops")


def _problem_and_threads(src, weights, bias, threads, attributes):
    attributes = {k: v for k, v in attributes.items() if k not in _DATA_KEYWORDS}
    return _describe_call(src, weights, bias, attributes), effective_threads(threads)


def select_algorithm(src, weights, bias=None, *, threads: int | None = None,
                     precision: str = "default", **attributes) -> str:
    """The name of the algorithm ``algorithm="auto"`` would run for these arguments.

    ``src`` and ``weights`` may be arrays or anything with ``shape`` and ``dtype``.
    """
    problem, n_threads = _problem_and_threads(src, weights, bias, threads, attributes)
    precision = select.parse_precision(precision)
    return select.choose(problem, n_threads, precision=precision,
                         registry=INT8 if problem.is_quantized else FORWARD)


def explain(src, weights, bias=None, *, threads: int | None = None,
            precision: str = "default", **attributes) -> select.Explanation:
    """A readable account of the choice: each algorithm's verdict, estimate, and the pick.

    ``print()`` it for text, or call ``.to_dict()``.
    """
    problem, n_threads = _problem_and_threads(src, weights, bias, threads, attributes)
    precision = select.parse_precision(precision)
    return select.explain_problem(problem, n_threads, precision,
                                  registry=INT8 if problem.is_quantized else FORWARD)
