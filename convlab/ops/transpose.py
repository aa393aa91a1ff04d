"""``conv_transpose``: transposed convolution (oneDNN "deconvolution", ONNX ``ConvTranspose``).

Every src element scatters a weighted copy of the kernel into dst (docs/specification.md §5.1)::

    dst[n, g*OCg + oc, x*S + k*D - P_b] += src[n, g*ICg + ic, x] * weights[g*ICg + ic, oc, k]

    O = S * (I - 1) + (K - 1) * D + 1 + output_padding - P_b - P_e

Weights are IOX ``(IC, OC/G, K...)`` as in ONNX and PyTorch, or XOI ``(K..., OC/G, IC)``,
its channels-last mirror. Two ways to compute it:

* **forward** (any registered algorithm): the same sum is a forward convolution, stride 1
  and dilation D, of the input stretched by S (S - 1 zeros between neighbours), padded by
  ``(K-1)*D - P_b`` before and ``(K-1)*D - P_e + output_padding`` after, with the kernel
  flipped on every spatial axis and IC/OC swapped within each group. It runs through
  :func:`convlab.convolve`, so ``algorithm="direct"``, ``"im2col"``, ``"winograd..."``
  (the stretched problem always has stride 1) or any third-party strategy computes it.
  With S = 1 nothing is stretched: the src is used as it is. With S > 1 the stretched
  copy is S^r times the src and the forward algorithm multiplies those zeros too.
* **col2im** (``algorithm="col2im"``): one GEMM per group, src ``(N*prod(I), IC/G)`` by
  the weights ``(IC/G, prod(K)*OC/G)``, gives every tap's contribution; each kernel tap is
  then one strided add into dst. It does only the real multiply-adds, so it is what
  ``"auto"`` runs when a stride is above 1.

Both are the algorithms of the transposed registry
(:data:`convlab.dispatch.registry.TRANSPOSED`), chosen by :mod:`convlab.dispatch.select`
as the forward ones are: ``col2im`` is an "auto" contender where a stride exceeds 1,
``forward`` where none does (the stretched input would make the forward algorithm
multiply S^r - 1 zeros per real product), so that rule needs no constant; :func:`explain`
shows the estimates (forward's is that of the forward algorithm it would run).
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from convlab.dispatch import select
from convlab.dispatch.registry import (
    TRANSPOSED,
    Algorithm,
    Estimate,
    get_algorithm,
    register_algorithm,
)
from convlab.ops._convolve import convolve
from convlab.problem import params
from convlab.problem.params import IntOrSeq
from convlab.runtime.threads import blas_limit, effective_threads

TRANSPOSE_WEIGHTS_FORMATS = ("IOX", "XOI")
COL2IM = "col2im"
# The transposed registry's name for "run a forward algorithm on the stretched input".
FORWARD = "forward"
# col2im's tap contributions for one batch chunk stay below this many bytes (one image
# at a time when a single image needs more).
COL2IM_WORKSPACE_BYTES = 64 * 2**20


@dataclass(frozen=True)
class TransposeProblem(params.GroupedGeometry):
    """A fully resolved transposed convolution. Pads are explicit (output_shape and auto_pad
    already turned into them); ``in_channels`` are src's channels, ``out_channels`` dst's."""

    output_padding: tuple[int, ...]
    dtype: np.dtype
    has_bias: bool
    data_format: str = "NXC"
    weights_format: str = "XOI"

    @property
    def dst_shape(self) -> tuple[int, ...]:
        """dst shape in the user's data_format."""
        return params.user_data_shape(self.batch, self.out_channels, self.output_shape,
                                  self.data_format)

    @property
    def flops(self) -> int:
        """2 * N * IC * prod(I) * OC/G * prod(K): each src element scatters its kernel."""
        return (2 * self.batch * self.in_channels * math.prod(self.input_shape)
                * self.out_channels_per_group * self.kernel_size)

    def describe(self) -> str:
        """One line in benchdnn's descriptor words, as :meth:`ConvProblem.describe`."""
        return (f"transposed {self.geometry_words()} "
                f"op{'x'.join(map(str, self.output_padding))} {self.dtype.name}")

    @property
    def stretched_shape(self) -> tuple[int, ...]:
        """Spatial extent of src with S - 1 zeros between neighbours: S * (I - 1) + 1."""
        return tuple(s * (i - 1) + 1 for s, i in zip(self.strides, self.input_shape))

    @property
    def forward_pads(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """Pads of the equivalent forward convolution over the stretched src."""
        span = [(k - 1) * d for k, d in zip(self.kernel_shape, self.dilations)]
        begin = tuple(w - pb for w, pb in zip(span, self.pads_begin))
        end = tuple(w - pe + op for w, pe, op in zip(span, self.pads_end, self.output_padding))
        return begin, end


def parse_transpose_weights_format(value) -> str:
    return params.parse_choice("weights_format", value, TRANSPOSE_WEIGHTS_FORMATS)


def transpose_extent(i, k, s, d, pb, pe, op) -> int:
    """docs/specification.md §5.1: S * (I - 1) + (K - 1) * D + 1 + output_padding - P_b - P_e."""
    return s * (i - 1) + (k - 1) * d + 1 + op - pb - pe


def split_total_pad(total: int, upper: bool) -> tuple[int, int]:
    """docs/specification.md §5.1: same_upper puts the odd extra at the end, otherwise at the
    beginning.
    ``//`` floors, so a negative total (more output than the scatter covers) follows suit."""
    if upper:
        begin = total // 2
        return begin, total - begin
    end = total // 2
    return total - end, end


def make_transpose_problem(src_shape, src_dtype, weights_shape, weights_dtype, bias_shape=None,
                           bias_dtype=None, *, strides=None, pads_begin=None, pads_end=None,
                           dilations=None, auto_pad="none", groups=1, output_padding=None,
                           output_shape=None, data_format="NXC",
                           weights_format="XOI") -> TransposeProblem:
    """Validate every argument of :func:`conv_transpose` into a :class:`TransposeProblem`.

    Raises ``ValueError`` or ``TypeError`` naming the argument, the value and what was
    expected.
    """
    data_format = params.parse_data_format(data_format)
    weights_format = parse_transpose_weights_format(weights_format)
    auto_pad = params.parse_auto_pad(auto_pad)
    groups = params.as_int("groups", groups)
    if groups < 1:
        raise ValueError(f"groups={groups} must be >= 1")

    (batch, in_channels, input_shape), (w_in, ocg, kernel_shape), rank = params.split_shapes(
        src_shape, weights_shape, data_format, weights_format == "IOX")
    out_channels = _transpose_channels(in_channels, w_in, ocg, groups, weights_shape,
                                       weights_format, bias_shape)
    strides = params.spatial_tuple("strides", strides, rank, 1, 1)
    dilations = params.spatial_tuple("dilations", dilations, rank, 1, 1)
    output_padding = params.spatial_tuple("output_padding", output_padding, rank, 0, 0)
    for axis, (op, s, d) in enumerate(zip(output_padding, strides, dilations)):
        if op >= max(s, d):
            raise ValueError(f"output_padding={output_padding!r}: entry {op} on spatial axis "
                             f"{axis} must be < max(stride, dilation) = {max(s, d)}")
    full = [transpose_extent(i, k, s, d, 0, 0, op) for i, k, s, d, op in
            zip(input_shape, kernel_shape, strides, dilations, output_padding)]

    pads_begin, pads_end = _transpose_pads(output_shape, auto_pad, pads_begin, pads_end, full,
                                           input_shape, strides, rank)
    out_shape = _transpose_output_shape(full, pads_begin, pads_end)

    dtype = params.compute_dtype(("src", np.dtype(src_dtype)),
                                 ("weights", np.dtype(weights_dtype)),
                                 ("bias", None if bias_dtype is None else np.dtype(bias_dtype)))
    return TransposeProblem(
        batch=batch, in_channels=in_channels, out_channels=out_channels, groups=groups,
        input_shape=tuple(input_shape), kernel_shape=tuple(kernel_shape),
        output_shape=tuple(out_shape), strides=strides, dilations=dilations,
        pads_begin=tuple(pads_begin), pads_end=tuple(pads_end),
        output_padding=output_padding, dtype=np.dtype(dtype), has_bias=bias_shape is not None,
        data_format=data_format, weights_format=weights_format)


def _transpose_channels(in_channels, w_in, ocg, groups, weights_shape, weights_format,
                        bias_shape) -> int:
    """Check the channel counts and the bias; returns OC (dst channels)."""
    weights_shape = tuple(int(d) for d in weights_shape)
    if ocg < 1:
        raise ValueError(f"weights has OC/G={ocg} output channels per group; expected >= 1")
    if in_channels % groups:
        raise ValueError(f"groups={groups} must divide IC={in_channels} (src channels)")
    if w_in != in_channels:
        layout = "(IC, OC/G, K...)" if weights_format == "IOX" else "(K..., OC/G, IC)"
        raise ValueError(f"weights has shape {weights_shape} with IC={w_in} input channels; "
                         f"expected IC={in_channels} to match src (weights_format="
                         f"{weights_format!r} is {layout})")
    out_channels = ocg * groups
    if bias_shape is not None:
        bias_shape = tuple(int(d) for d in bias_shape)
        if bias_shape != (out_channels,):
            raise ValueError(f"bias has shape {bias_shape}; expected ({out_channels},) "
                             f"(OC = OC/G * groups = {ocg} * {groups})")
    return out_channels


def _transpose_pads(output_shape, auto_pad, pads_begin, pads_end, full, input_shape, strides,
                    rank):
    """docs/specification.md §5.1: the pads from output_shape, auto_pad or as given."""
    if output_shape is not None:
        requested = params.spatial_tuple("output_shape", output_shape, rank, 1, 1)
        if auto_pad == "valid":
            if tuple(requested) != tuple(full):
                raise ValueError(f"output_shape={requested!r} disagrees with auto_pad='valid', "
                                 f"whose zero pads give {tuple(full)}")
            pads_begin_, pads_end_ = (0,) * rank, (0,) * rank
        else:
            split = [split_total_pad(f - o, auto_pad == "same_upper")
                     for f, o in zip(full, requested)]
            pads_begin_ = tuple(b for b, _ in split)
            pads_end_ = tuple(e for _, e in split)
            if auto_pad == "none":
                # Explicit pads alongside output_shape are accepted only when they agree.
                for name, given, derived in (("pads_begin", pads_begin, pads_begin_),
                                             ("pads_end", pads_end, pads_end_)):
                    if given is not None and \
                            params.spatial_tuple(name, given, rank, 0, None) != derived:
                        raise ValueError(f"{name}={given!r} disagrees with output_shape="
                                         f"{requested!r}, which needs {name}={derived!r}; "
                                         f"pass one or the other")
        pads_begin, pads_end = pads_begin_, pads_end_
    elif auto_pad in ("same_upper", "same_lower"):
        split = [split_total_pad(f - i * s, auto_pad == "same_upper")
                 for f, i, s in zip(full, input_shape, strides)]
        pads_begin = tuple(b for b, _ in split)
        pads_end = tuple(e for _, e in split)
    elif auto_pad == "valid":
        pads_begin, pads_end = (0,) * rank, (0,) * rank
    else:
        pads_begin = params.spatial_tuple("pads_begin", pads_begin, rank, 0, None)
        pads_end = params.spatial_tuple("pads_end", pads_end, rank, 0, None)
    return tuple(pads_begin), tuple(pads_end)


def _transpose_output_shape(full, pads_begin, pads_end) -> tuple[int, ...]:
    """The full scatter extents cropped by the pads, each checked."""
    out_shape = []
    for axis in range(len(full)):
        o = full[axis] - pads_begin[axis] - pads_end[axis]
        if o < 1:
            raise ValueError(f"spatial axis {axis}: pads_begin={pads_begin[axis]} and "
                             f"pads_end={pads_end[axis]} crop the full output extent "
                             f"{full[axis]} to {o}; expected an output extent >= 1")
        if o > params.MAX_ELEMENTS or max(abs(pads_begin[axis]), abs(pads_end[axis])) \
                > params.MAX_ELEMENTS:
            raise ValueError(f"spatial axis {axis}: output extent {o} (pads_begin="
                             f"{pads_begin[axis]}, pads_end={pads_end[axis]}) must be at "
                             f"most 2**53")
        out_shape.append(o)
    return tuple(out_shape)


# --------------------------------------------------------------------------- layouts

def grouped_weights(weights: np.ndarray, problem: TransposeProblem) -> np.ndarray:
    """IOX or XOI weights as (G, IC/G, K..., OC/G), C-contiguous, compute dtype: row
    (g, ic) is the GEMM-ready (prod(K) * OC/G) scatter pattern of one src channel."""
    r, g = problem.rank, problem.groups
    icg, ocg = problem.in_channels_per_group, problem.out_channels_per_group
    if problem.weights_format == "IOX":
        w = weights.reshape(g, icg, ocg, *problem.kernel_shape)
        w = np.moveaxis(w, 2, -1)
    else:
        w = weights.reshape(*problem.kernel_shape, ocg, g, icg)
        w = np.moveaxis(w, (r + 1, r + 2), (0, 1))
    return np.ascontiguousarray(w, dtype=problem.dtype)


def forward_weights(grouped: np.ndarray, problem: TransposeProblem) -> np.ndarray:
    """The equivalent forward convolution's XIO weights (K..., IC/G, OC): every spatial axis
    flipped, the src channels of a group becoming its reduction channels."""
    r = problem.rank
    flipped = np.flip(grouped, axis=tuple(range(2, 2 + r)))
    # (G, ICg, K..., OCg) -> (K..., ICg, G, OCg); OC index = g * OCg + oc as in convolve
    xio = np.moveaxis(flipped, (0, 1), (r + 1, r))
    return np.ascontiguousarray(xio).reshape(
        *problem.kernel_shape, problem.in_channels_per_group, problem.out_channels)


def _canonical_src(src: np.ndarray, problem: TransposeProblem) -> np.ndarray:
    if problem.data_format == "NCX":
        src = np.moveaxis(src, 1, -1)
    return np.ascontiguousarray(src, dtype=problem.dtype)


# --------------------------------------------------------------------------- computing

def _forward_data_format(problem: TransposeProblem) -> str:
    """The layout run_forward hands convolve: src as given when nothing is stretched, else
    the channels-last stretched copy it builds."""
    return problem.data_format if max(problem.strides) == 1 else "NXC"


def run_forward(problem: TransposeProblem, src: np.ndarray, grouped: np.ndarray, bias,
                dst: np.ndarray, threads, algorithm: str = "auto",
                precision: str = "default") -> None:
    """The transposed convolution as a forward one through :func:`convlab.convolve`, into
    ``dst`` (the caller's layout)."""
    data_format = _forward_data_format(problem)
    if max(problem.strides) == 1:
        stretched = src  # nothing to stretch: src goes in as the user laid it out
    else:
        canonical = _canonical_src(src, problem)
        stretched = np.zeros((problem.batch, *problem.stretched_shape, problem.in_channels),
                             dtype=problem.dtype)
        every_stride = tuple(slice(None, None, s) for s in problem.strides)
        stretched[(slice(None),) + every_stride] = canonical
    pads_begin, pads_end = problem.forward_pads
    same_layout = data_format == problem.data_format
    result = convolve(stretched, forward_weights(grouped, problem), bias, strides=1,
                      pads_begin=pads_begin, pads_end=pads_end, dilations=problem.dilations,
                      groups=problem.groups, data_format=data_format, weights_format="XIO",
                      algorithm=algorithm, threads=threads, precision=precision,
                      out=dst if same_layout else None)
    if not same_layout:
        dst[...] = np.moveaxis(result, -1, 1)  # NXC stretched -> the caller's NCX


def forward_problem(problem: TransposeProblem) -> params.ConvProblem:
    """The forward convolution :func:`run_forward` runs (over the stretched src)."""
    data_format = _forward_data_format(problem)
    pads_begin, pads_end = problem.forward_pads
    return params.make_problem(
        params.user_data_shape(problem.batch, problem.in_channels, problem.stretched_shape,
                               data_format), problem.dtype,
        (*problem.kernel_shape, problem.in_channels_per_group, problem.out_channels),
        problem.dtype, (problem.out_channels,) if problem.has_bias else None,
        problem.dtype if problem.has_bias else None, strides=1, pads_begin=pads_begin,
        pads_end=pads_end, dilations=problem.dilations, groups=problem.groups,
        data_format=data_format, weights_format="XIO")


def forward_cost(problem: TransposeProblem, threads: int) -> Estimate:
    """The estimate of the forward algorithm "auto" would run on the stretched input."""
    forward = forward_problem(problem)
    name = select.choose(forward, threads)
    estimate = get_algorithm(name).cost(forward, threads)
    return Estimate(estimate.seconds, {"forward": name, **estimate.inputs})


register_algorithm(Algorithm(
    FORWARD, run_forward, cost=forward_cost, auto=lambda problem: max(problem.strides) == 1,
    description="a forward algorithm on the input stretched by the strides"),
    registry=TRANSPOSED)


def _tap_slices(problem: TransposeProblem, tap: Sequence[int]):
    """For kernel tap k: the src positions x whose y = x*S + k*D - P_b lands in [0, O), and
    those y, per axis as (x slice, y slice); None when no src position lands."""
    xs, ys = [], []
    for k, i, o, s, d, pb in zip(tap, problem.input_shape, problem.output_shape,
                                 problem.strides, problem.dilations, problem.pads_begin):
        shift = k * d - pb
        first = max(0, -(shift // s))          # ceil(-shift / s)
        last = min(i - 1, (o - 1 - shift) // s)
        if last < first:
            return None
        xs.append(slice(first, last + 1))
        ys.append(slice(first * s + shift, last * s + shift + 1, s))
    return tuple(xs), tuple(ys)


def run_col2im(problem: TransposeProblem, src: np.ndarray, grouped: np.ndarray,
               bias, dst: np.ndarray | None = None) -> np.ndarray:
    """GEMM of src by the weights, then one strided scatter-add per kernel tap, into
    ``dst`` (N, O..., OC) or a new array."""
    g = problem.groups
    icg, ocg = problem.in_channels_per_group, problem.out_channels_per_group
    canonical = _canonical_src(src, problem)
    if dst is None:
        dst = np.empty((problem.batch, *problem.output_shape, problem.out_channels),
                       dtype=problem.dtype)
    if bias is not None:
        dst[...] = np.asarray(bias, dtype=problem.dtype)
    else:
        dst.fill(0)
    kernel_size = int(np.prod(problem.kernel_shape))
    pixels = int(np.prod(problem.input_shape))
    matrix = grouped.reshape(g, icg, kernel_size * ocg)
    taps = [(t, _tap_slices(problem, k)) for t, k in
            enumerate(np.ndindex(*problem.kernel_shape))]
    taps = [(t, sl) for t, sl in taps if sl is not None]
    per_image = pixels * kernel_size * problem.out_channels * problem.dtype.itemsize
    chunk = max(1, COL2IM_WORKSPACE_BYTES // max(1, per_image))
    for start in range(0, problem.batch, chunk):
        stop = min(problem.batch, start + chunk)
        n = stop - start
        rows = canonical[start:stop].reshape(n * pixels, g, icg)
        # (G, n*P, ICg) @ (G, ICg, prod(K)*OCg): one GEMM per group
        cols = np.matmul(rows.transpose(1, 0, 2), matrix)
        cols = cols.reshape(g, n, *problem.input_shape, kernel_size, ocg)
        cols = np.moveaxis(cols, 0, -2)            # (n, I..., prod(K), G, OCg), a view
        target = dst[start:stop].reshape(n, *problem.output_shape, g, ocg)
        for t, (xs, ys) in taps:
            target[(slice(None),) + ys] += cols[(slice(None),) + xs + (t,)]
    return dst


def run_col2im_algorithm(problem: TransposeProblem, src: np.ndarray, grouped: np.ndarray,
                         bias, dst: np.ndarray, threads, **forward_options) -> None:
    """:func:`run_col2im` into ``dst`` (the caller's layout), its GEMMs on ``threads``
    BLAS threads when given."""
    def compute():
        if problem.data_format == "NXC":
            run_col2im(problem, src, grouped, bias, dst)
        else:
            dst[...] = np.moveaxis(run_col2im(problem, src, grouped, bias), -1, 1)

    if threads is None:
        compute()
    else:
        with blas_limit(effective_threads(threads)):
            compute()


def col2im_cost(problem: TransposeProblem, threads: int) -> Estimate:
    # col2im has no fitted constants: it is the only contender where it is one.
    return Estimate(float("inf"), {"note": "no cost model; the contender where a stride "
                                           "exceeds 1"})


register_algorithm(Algorithm(
    COL2IM, run_col2im_algorithm, cost=col2im_cost,
    auto=lambda problem: max(problem.strides) > 1,
    description="a GEMM per group, then a strided scatter-add per kernel tap"),
    registry=TRANSPOSED)


def conv_transpose(src, weights, bias=None, *, strides: IntOrSeq = None,
                   pads_begin: IntOrSeq = None, pads_end: IntOrSeq = None,
                   dilations: IntOrSeq = None, auto_pad: str = "none", groups: int = 1,
                   output_padding: IntOrSeq = None,
                   output_shape: int | Sequence[int] | None = None,
                   data_format: str = "NXC", weights_format: str = "XOI",
                   algorithm: str = "auto", threads: int | None = None,
                   precision: str = "default") -> np.ndarray:
    """N-D transposed convolution, ONNX ``ConvTranspose`` (docs/specification.md §5.1).

    ``dst[n, g*OCg+oc, x*S + k*D - P_b] += src[n, g*ICg+ic, x] * weights[g*ICg+ic, oc, k]``
    plus bias, with ``O = S*(I-1) + (K-1)*D + 1 + output_padding - P_b - P_e``.

    Parameters
    ----------
    src : array_like
        ``(N, I..., IC)`` for ``data_format="NXC"`` (default) or ``(N, IC, I...)`` for "NCX".
    weights : array_like
        ``(K..., OC/G, IC)`` for ``weights_format="XOI"`` (default) or ``(IC, OC/G, K...)``
        for "IOX" (ONNX and PyTorch).
    bias : array_like, optional
        Shape ``(OC,)``.
    strides, dilations : int or sequence of int, optional
        Per spatial axis, each >= 1.
    pads_begin, pads_end : int or sequence of int, optional
        Output rows removed at the start/end of each axis (negative values add rows).
    auto_pad : {"none", "same_upper", "same_lower", "valid"}
        "same_*" makes the output ``I * S`` (or ``output_shape``), splitting the total pad
        with the odd extra at the end (upper) or the start (lower).
    groups : int
        Must divide IC.
    output_padding : int or sequence of int, optional
        Extra rows at the end of each axis, each ``< max(stride, dilation)``.
    output_shape : sequence of int, optional
        Spatial output extents; the pads are then derived from it (docs/specification.md §5.1).
    algorithm : str
        "auto", "col2im", or a forward algorithm of :func:`convlab.algorithms` run on the
        stretched input ("tune" times the forward algorithms).
    threads : int, optional
        Thread count for this call (see :func:`convlab.convolve`).
    precision : {"default", "highest"}
        Passed to the forward algorithm choice.

    Returns
    -------
    numpy.ndarray
        dst in ``data_format``, in the compute dtype.
    """
    src = params.as_array("src", src)
    weights = params.as_array("weights", weights)
    bias = None if bias is None else params.as_array("bias", bias)
    params.reject_8bit("conv_transpose", ("src", src), ("weights", weights), ("bias", bias))
    problem = make_transpose_problem(
        src.shape, src.dtype, weights.shape, weights.dtype,
        None if bias is None else bias.shape, None if bias is None else bias.dtype,
        strides=strides, pads_begin=pads_begin, pads_end=pads_end, dilations=dilations,
        auto_pad=auto_pad, groups=groups, output_padding=output_padding,
        output_shape=output_shape, data_format=data_format, weights_format=weights_format)
    effective_threads(threads)  # validates threads= for the col2im path too
    precision = select.parse_precision(precision)
    if algorithm not in ("auto", "tune", COL2IM):
        get_algorithm(algorithm)
    grouped = grouped_weights(weights, problem)
    canonical_bias = None if bias is None else np.ascontiguousarray(bias, dtype=problem.dtype)
    if problem.batch == 0:
        return np.zeros(problem.dst_shape, dtype=problem.dtype)
    return execute(problem, src, grouped, canonical_bias, algorithm, threads, precision)


def resolve(problem: TransposeProblem, algorithm: str, threads=None,
            precision: str = "default") -> tuple[Algorithm, dict]:
    """The transposed algorithm a call runs, and the keywords its ``run`` takes: "auto"
    chooses in the transposed registry; "col2im" is col2im; "tune" or a forward name runs
    that on the stretched input."""
    if algorithm == "auto":
        chosen = select.resolve("auto", problem, effective_threads(threads), precision,
                                registry=TRANSPOSED)
        return chosen, ({} if chosen.name == COL2IM else {"algorithm": "auto"})
    if algorithm == COL2IM:
        return TRANSPOSED.get(COL2IM), {}
    return TRANSPOSED.get(FORWARD), {"algorithm": algorithm}


def choose(problem: TransposeProblem, algorithm: str) -> str:
    """What ``algorithm`` means here: "col2im", or the forward algorithm ("auto": the
    forward convolution's own choice) run on src stretched by the strides."""
    chosen, options = resolve(problem, algorithm)
    return chosen.name if chosen.name == COL2IM else options["algorithm"]


def explain(problem: TransposeProblem, threads=None,
            precision: str = "default") -> select.Explanation:
    """Why "auto" runs what it runs for ``problem``: the transposed registry's account."""
    return select.explain_problem(problem, effective_threads(threads),
                                  select.parse_precision(precision), registry=TRANSPOSED)


def algorithm_run(problem: TransposeProblem, algorithm: str = "auto", threads=None,
                  precision: str = "default") -> str:
    """The name of what :func:`conv_transpose` runs for ``problem``: "col2im", or the forward
    algorithm applied to the stretched input (what "auto" picks there, resolved)."""
    chosen = choose(problem, algorithm)
    if chosen != "auto":
        return chosen
    return select.choose(forward_problem(problem), effective_threads(threads),
                         precision=select.parse_precision(precision))


def execute(problem: TransposeProblem, src, grouped, bias, algorithm, threads,
            precision="default") -> np.ndarray:
    """Run a validated problem: ``grouped`` from :func:`grouped_weights`, ``bias`` canonical."""
    chosen, options = resolve(problem, algorithm, threads, precision)
    dst = np.empty(problem.dst_shape, dtype=problem.dtype)
    chosen.run(problem, src, grouped, bias, dst, threads, precision=precision, **options)
    return dst
