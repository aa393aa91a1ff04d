"""Backward passes of :func:`convlab.convolve`, for training (docs/specification.md §5.2, §5.3).

With the forward ``dst = convolve(src, weights, bias, **attributes)`` and a loss gradient
``diff_dst`` of dst's shape:

* :func:`convolve_backward_data` gives ``diff_src``: the transposed convolution of
  ``diff_dst`` with the same weights and attributes. Forward OIX weights
  ``(OC, IC/G, K...)`` *are* IOX weights of that transposed convolution (its input
  channels are the forward OC), and XIO are XOI, so nothing is repacked. Its
  ``output_padding`` is the remainder the forward floor division dropped, so diff_src gets
  src's shape; input rows the forward pass never read get 0.
* :func:`convolve_backward_weights` gives ``(diff_weights, diff_bias)``::

      diff_weights[g*OCg+oc, ic, k] = sum_{n, o} diff_dst[n, g*OCg+oc, o]
                                                * src[n, g*ICg+ic, o*S + k*D - P_b]
      diff_bias[oc] = sum_{n, o} diff_dst[n, oc, o]

  computed one kernel tap at a time: the strided window of the zero-padded src that tap
  reads (an im2col column block) times diff_dst, one GEMM per group.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from convlab.ops import transpose
from convlab.problem import params
from convlab.problem.params import ConvProblem
from convlab.runtime.threads import blas_limit, effective_threads

_FORWARD_TO_TRANSPOSED = {"OIX": "IOX", "XIO": "XOI"}


def _forward_problem(src_shape, src_dtype, weights_shape, weights_dtype,
                     attributes) -> ConvProblem:
    return params.make_problem(src_shape, src_dtype, weights_shape, weights_dtype,
                               **attributes)


def _check_shape(name: str, shape, expected, problem: ConvProblem) -> None:
    if tuple(shape) != tuple(expected):
        raise ValueError(f"{name} has shape {tuple(shape)}; expected {tuple(expected)} "
                         f"(the forward dst of src {problem.src_shape} in data_format="
                         f"{problem.data_format!r})")


def _shape_argument(name: str, value) -> tuple[int, ...]:
    if isinstance(value, (str, bytes)) or not hasattr(value, "__len__"):
        raise TypeError(f"{name}={value!r} must be a sequence of ints (an array shape)")
    return tuple(params.as_int(name, v) for v in value)


def convolve_backward_data(diff_dst, weights, src_shape: Sequence[int], *,
                           strides=None, pads_begin=None, pads_end=None, dilations=None,
                           auto_pad: str = "none", groups: int = 1, data_format: str = "NXC",
                           weights_format: str = "XIO", algorithm: str = "auto",
                           threads: int | None = None,
                           precision: str = "default") -> np.ndarray:
    """Gradient of the loss with respect to ``src`` of :func:`convlab.convolve`.

    Parameters
    ----------
    diff_dst : array_like
        Gradient with respect to dst, in dst's shape and ``data_format``.
    weights : array_like
        The forward weights, in ``weights_format`` ("XIO" or "OIX").
    src_shape : sequence of int
        The forward src's shape, in ``data_format``.
    strides, pads_begin, pads_end, dilations, auto_pad, groups, data_format, weights_format
        The forward call's attributes.
    algorithm, threads, precision
        As in :func:`convlab.conv_transpose`, which computes the result.

    Returns
    -------
    numpy.ndarray
        diff_src, of shape ``src_shape``, in the compute dtype of diff_dst and weights.
    """
    diff_dst = params.as_array("diff_dst", diff_dst)
    weights = params.as_array("weights", weights)
    src_shape = _shape_argument("src_shape", src_shape)
    params.reject_8bit("convolve_backward_data", ("diff_dst", diff_dst), ("weights", weights))
    params.compute_dtype(("diff_dst", diff_dst.dtype))
    problem = _forward_problem(src_shape, diff_dst.dtype, weights.shape, weights.dtype, dict(
        strides=strides, pads_begin=pads_begin, pads_end=pads_end, dilations=dilations,
        auto_pad=auto_pad, groups=groups, data_format=data_format,
        weights_format=weights_format))
    _check_shape("diff_dst", diff_dst.shape, problem.dst_shape, problem)

    # The forward O = floor(...) / S + 1 dropped a remainder in [0, S): the transposed
    # convolution restores it as output_padding, so diff_src gets src's extent exactly.
    output_padding = []
    for i, o, k, s, d, pb, pe in zip(problem.input_shape, problem.output_shape,
                                     problem.kernel_shape, problem.strides, problem.dilations,
                                     problem.pads_begin, problem.pads_end):
        output_padding.append(i - transpose.transpose_extent(o, k, s, d, pb, pe, 0))
    tp = transpose.TransposeProblem(
        batch=problem.batch, in_channels=problem.out_channels,
        out_channels=problem.in_channels, groups=problem.groups,
        input_shape=problem.output_shape, kernel_shape=problem.kernel_shape,
        output_shape=problem.input_shape, strides=problem.strides,
        dilations=problem.dilations, pads_begin=problem.pads_begin,
        pads_end=problem.pads_end, output_padding=tuple(output_padding), dtype=problem.dtype,
        has_bias=False, data_format=problem.data_format,
        weights_format=_FORWARD_TO_TRANSPOSED[problem.weights_format])
    from convlab.dispatch.registry import get_algorithm
    from convlab.dispatch.select import parse_precision

    effective_threads(threads)
    precision = parse_precision(precision)
    if algorithm not in ("auto", "tune", transpose.COL2IM):
        get_algorithm(algorithm)
    if problem.batch == 0:
        return np.zeros(src_shape, dtype=problem.dtype)
    grouped = transpose.grouped_weights(weights, tp)
    return transpose.execute(tp, diff_dst, grouped, None, algorithm, threads, precision)


def convolve_backward_weights(src, diff_dst, weights_shape: Sequence[int], *,
                              strides=None, pads_begin=None, pads_end=None, dilations=None,
                              auto_pad: str = "none", groups: int = 1,
                              data_format: str = "NXC", weights_format: str = "XIO",
                              threads: int | None = None
                              ) -> tuple[np.ndarray, np.ndarray]:
    """Gradients of the loss with respect to ``weights`` and ``bias`` of
    :func:`convlab.convolve`.

    Parameters
    ----------
    src : array_like
        The forward src, in ``data_format``.
    diff_dst : array_like
        Gradient with respect to dst, in dst's shape and ``data_format``.
    weights_shape : sequence of int
        The forward weights' shape, in ``weights_format``.
    strides, pads_begin, pads_end, dilations, auto_pad, groups, data_format, weights_format
        The forward call's attributes.
    threads : int, optional
        BLAS threads for the GEMMs of this call.

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)
        diff_weights of shape ``weights_shape`` and diff_bias of shape (OC,), in the compute
        dtype of src and diff_dst.
    """
    src = params.as_array("src", src)
    diff_dst = params.as_array("diff_dst", diff_dst)
    weights_shape = _shape_argument("weights_shape", weights_shape)
    params.reject_8bit("convolve_backward_weights", ("src", src), ("diff_dst", diff_dst))
    dtype = params.compute_dtype(("src", src.dtype), ("diff_dst", diff_dst.dtype))
    problem = _forward_problem(src.shape, src.dtype, weights_shape, dtype, dict(
        strides=strides, pads_begin=pads_begin, pads_end=pads_end, dilations=dilations,
        auto_pad=auto_pad, groups=groups, data_format=data_format,
        weights_format=weights_format))
    _check_shape("diff_dst", diff_dst.shape, problem.dst_shape, problem)
    n_threads = effective_threads(threads)
    if threads is None:
        return _backward_weights(problem, src, diff_dst)
    with blas_limit(n_threads):
        return _backward_weights(problem, src, diff_dst)


def _padded_src(src: np.ndarray, problem: ConvProblem) -> np.ndarray:
    """Canonical (N, I..., IC) src in zeros of extent I + P_b + P_e; negative pads crop."""
    if all(b == 0 and e == 0 for b, e in zip(problem.pads_begin, problem.pads_end)):
        return src
    padded = np.zeros((problem.batch, *(i + b + e for i, b, e in zip(
        problem.input_shape, problem.pads_begin, problem.pads_end)), problem.in_channels),
        dtype=problem.dtype)
    target, source = [slice(None)], [slice(None)]
    for i, b, e in zip(problem.input_shape, problem.pads_begin, problem.pads_end):
        # max(): pads that crop the whole input copy nothing (first > last would make the
        # target slice's end go negative and wrap around)
        first = max(0, -b)
        last = max(first, min(i, i + e))
        source.append(slice(first, last))
        target.append(slice(first + b, last + b))
    padded[tuple(target)] = src[tuple(source)]
    return padded


def _backward_weights(problem: ConvProblem, src, diff_dst) -> tuple[np.ndarray, np.ndarray]:
    g = problem.groups
    icg, ocg = problem.in_channels_per_group, problem.out_channels_per_group
    dtype = problem.dtype
    diff = np.moveaxis(diff_dst, 1, -1) if problem.data_format == "NCX" else diff_dst
    diff = np.ascontiguousarray(diff, dtype=dtype)
    # float64 accumulation: N * prod(O) terms per channel, summed down a strided axis
    diff_bias = diff.reshape(-1, problem.out_channels).sum(axis=0, dtype=np.float64).astype(dtype)
    grads = np.zeros((g, *problem.kernel_shape, icg, ocg), dtype=dtype)
    if problem.batch == 0:
        return _user_weights(grads, problem), diff_bias
    padded = _padded_src(params.canonical_src(src, problem), problem)
    rows = problem.batch * problem.output_size
    # (G, N*P, OCg): the right-hand GEMM operand of every tap
    right = np.ascontiguousarray(diff.reshape(rows, g, ocg).transpose(1, 0, 2))
    depthwise = icg == 1 and ocg == 1
    for tap in np.ndindex(*problem.kernel_shape):
        window = tuple(slice(k * d, k * d + (o - 1) * s + 1, s) for k, d, s, o in zip(
            tap, problem.dilations, problem.strides, problem.output_shape))
        columns = padded[(slice(None),) + window].reshape(rows, g, icg)
        if depthwise:
            # A (1 x rows) @ (rows x 1) product per group is a dot product; matmul would
            # loop over G tiny GEMMs.
            grads[(slice(None),) + tap] = np.einsum(
                "pg,gp->g", columns[:, :, 0], right[:, :, 0])[:, None, None]
        else:
            grads[(slice(None),) + tap] = np.matmul(columns.transpose(1, 2, 0), right)
    return _user_weights(grads, problem), diff_bias


def _user_weights(grads: np.ndarray, problem: ConvProblem) -> np.ndarray:
    """Canonical (G, K..., IC/G, OC/G) back to the user's OIX or XIO."""
    r = problem.rank
    xio = np.moveaxis(grads, 0, r + 1).reshape(*problem.kernel_shape,
                                                problem.in_channels_per_group,
                                                problem.out_channels)
    if problem.weights_format == "OIX":
        xio = np.moveaxis(xio, (r + 1, r), (0, 1))
    return np.ascontiguousarray(xio)
