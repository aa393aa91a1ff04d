"""From the user's arguments to one frozen, canonical problem description.

Everything that selection and the algorithms consume is decided here, once, by
:func:`make_problem`: attribute parsing (int or sequence forms) and auto_pad resolution
(``_attributes``), formats, groups, output shape (``_geometry``) and the compute dtype
(``_dtypes``). Formulas follow docs/specification.md §1, §2 and §3. The canonical memory
layouts every kernel sees, and the conversions to them, are ``_layouts``'; this module is
the problem package's public face and re-exports all of them.
"""
from __future__ import annotations

import functools
import inspect
import math

import numpy as np

from convlab.problem._attributes import (
    AUTO_PAD_ALIASES,
    AUTO_PADS,
    DATA_FORMATS,
    PADDING_MODES,
    WEIGHTS_FORMATS,
    IntOrSeq,
    as_int,
    parse_auto_pad,
    parse_choice,
    parse_data_format,
    parse_padding_mode,
    parse_weights_format,
    resolve_auto_pad,
    spatial_tuple,
)
from convlab.problem._dtypes import (
    FLOAT_TYPES,
    HALF_TYPES,
    QUANTIZED_DST_TYPES,
    check_dtype,
    compute_dtype,
    float_dtypes,
    half_dtype,
    is_8bit_integer,
    is_half,
    parse_dst_dtype,
    problem_dtypes,
    reject_8bit,
)
from convlab.problem._geometry import (
    MAX_ELEMENTS,
    ConvProblem,
    GroupedGeometry,
    output_extent,
    user_data_shape,
    user_weights_shape,
)
from convlab.problem._layouts import (
    OIX_COPY_MIN_BYTES,
    aligned,
    as_array,
    canonical_bias,
    canonical_src,
    canonical_view,
    canonical_weights,
    channels_last_axes,
    materialize,
    swap_channels,
    user_dst,
    user_dst_copy,
    write_user_dst,
)

__all__ = [
    "aligned", "as_array", "as_int", "AUTO_PAD_ALIASES", "AUTO_PADS", "canonical_bias",
    "canonical_src", "canonical_view", "canonical_weights", "channels_last_axes", "check_dtype",
    "compute_dtype", "ConvProblem", "DATA_FORMATS", "float_dtypes", "FLOAT_TYPES",
    "GroupedGeometry", "half_dtype", "HALF_TYPES", "IntOrSeq", "is_8bit_integer", "is_half",
    "make_problem", "materialize", "MAX_ELEMENTS", "OIX_COPY_MIN_BYTES", "output_extent",
    "PADDING_MODES",
    "parse_auto_pad", "parse_choice", "parse_data_format", "parse_dst_dtype",
    "parse_padding_mode", "parse_weights_format", "problem_dtypes", "QUANTIZED_DST_TYPES",
    "reject_8bit", "resolve_auto_pad", "spatial_tuple", "split_shapes", "swap_channels",
    "user_data_shape", "user_dst", "user_dst_copy", "user_weights_shape", "WEIGHTS_FORMATS",
    "write_user_dst",
]


def _memo_key(positional, attributes):
    """The arguments as an exact cache key (lists become tuples, which validate identically),
    or None when some value is not of a type the key can stand for.

    Only exact builtin types qualify: ``True == 1`` and ``1.0 == 1`` hash alike, yet a
    bool or float stride must still reach the validation that refuses it. None where None
    is the default says nothing and is left out. One flat loop, since a one-shot call on a
    small layer pays for it every time (9 us with a call per value, 3.5 us so).
    """
    key = [*positional]
    for name, value in attributes.items():
        if value is None and name in _NONE_BY_DEFAULT:
            continue
        key.append(name)
        key.append(value)
    for index, value in enumerate(key):
        kind = type(value)
        if kind is tuple or kind is list:
            for item in value:
                if type(item) is not int:
                    return None
            if kind is list:
                key[index] = tuple(value)
        elif not (value is None or kind is int or kind is str or isinstance(value, np.dtype)):
            return None
    return tuple(key)


def make_problem(src_shape, src_dtype, weights_shape, weights_dtype, bias_shape=None,
                 bias_dtype=None, **attributes) -> ConvProblem:
    """Validate every argument and build the :class:`ConvProblem`.

    Raises ``ValueError`` or ``TypeError`` naming the argument, the value and what
    was expected. Valid argument sets are remembered, because a one-shot ``convolve`` on
    a small layer would otherwise spend a fifth of its time here (about 20 us of 100 on a
    MobileNet depthwise layer, measured with cProfile).
    """
    positional = (src_shape, src_dtype, weights_shape, weights_dtype, bias_shape, bias_dtype)
    key = _memo_key(positional, attributes)
    if key is None:
        return _build_problem(*positional, **attributes)
    return _cached_problem(key)


@functools.lru_cache(maxsize=256)
def _cached_problem(key) -> ConvProblem:
    # key: the six positional arguments, then the attributes as name, value, name, value...
    return _build_problem(*key[:6], **dict(zip(key[6::2], key[7::2])))


def split_shapes(src_shape, weights_shape, data_format: str, weights_channels_first: bool):
    """Check ranks and extents, and split the shapes by layout.

    Returns ``(batch, src channels, spatial extents)``, ``(w0, w1, kernel extents)`` where
    w0, w1 are the weights' two channel axes in the order the layout stores them from its
    channel end ((OC, IC/G) for OIX and XIO, (IC, OC/G) for ConvTranspose's IOX and XOI),
    and the spatial rank.
    """
    src_shape = tuple(int(d) for d in src_shape)
    weights_shape = tuple(int(d) for d in weights_shape)
    if len(src_shape) < 3:
        raise ValueError(f"src has shape {src_shape} (rank {len(src_shape)}); expected rank "
                         f">= 3: (N, C, spatial...) or (N, spatial..., C) for data_format="
                         f"{data_format!r}")
    rank = len(src_shape) - 2
    if len(weights_shape) != rank + 2:
        raise ValueError(f"weights has shape {weights_shape} (rank {len(weights_shape)}); "
                         f"expected rank {rank + 2} to match src's {rank} spatial axes")
    if data_format == "NCX":
        batch, channels, spatial = src_shape[0], src_shape[1], src_shape[2:]
    else:
        batch, channels, spatial = src_shape[0], src_shape[-1], src_shape[1:-1]
    if weights_channels_first:
        w0, w1, kernel = weights_shape[0], weights_shape[1], weights_shape[2:]
    else:
        w0, w1, kernel = weights_shape[-1], weights_shape[-2], weights_shape[:-2]
    for axis, extent in enumerate(spatial):
        if extent < 1:
            raise ValueError(f"src spatial axis {axis} has extent {extent}; expected >= 1")
    for axis, extent in enumerate(kernel):
        if extent < 1:
            raise ValueError(f"weights kernel axis {axis} has extent {extent}; expected >= 1")
    if channels < 1:
        raise ValueError(f"src has IC={channels} channels; expected >= 1")
    return (batch, channels, spatial), (w0, w1, kernel), rank


def _none_by_default(function) -> frozenset:
    return frozenset(name for name, parameter in inspect.signature(function).parameters.items()
                     if parameter.kind is parameter.KEYWORD_ONLY and parameter.default is None)


def _build_problem(src_shape, src_dtype, weights_shape, weights_dtype, bias_shape=None,
                   bias_dtype=None, *, strides=None, pads_begin=None, pads_end=None,
                   dilations=None, auto_pad="none", groups=1, data_format="NXC",
                   weights_format="XIO", data_dilations=None, padding_mode="zeros",
                   dst_dtype=None) -> ConvProblem:
    data_format = parse_data_format(data_format)
    padding_mode = parse_padding_mode(padding_mode)
    weights_format = parse_weights_format(weights_format)
    auto_pad = parse_auto_pad(auto_pad)
    groups = as_int("groups", groups)
    if groups < 1:
        raise ValueError(f"groups={groups} must be >= 1")

    (batch, in_channels, input_shape), (out_channels, icg, kernel_shape), rank = split_shapes(
        src_shape, weights_shape, data_format, weights_format == "OIX")
    _check_channels(in_channels, out_channels, icg, groups, weights_format, bias_shape)

    strides = spatial_tuple("strides", strides, rank, 1, 1)
    dilations = spatial_tuple("dilations", dilations, rank, 1, 1)
    data_dilations, source_shape, input_shape = _stretch(
        spatial_tuple("data_dilations", data_dilations, rank, 1, 1), input_shape,
        batch * in_channels)
    if auto_pad == "none":
        pads_begin = spatial_tuple("pads_begin", pads_begin, rank, 0, None)
        pads_end = spatial_tuple("pads_end", pads_end, rank, 0, None)
    else:
        pads_begin, pads_end = resolve_auto_pad(auto_pad, input_shape, kernel_shape, strides,
                                                dilations)
    output_shape = _output_shape(input_shape, kernel_shape, strides, dilations, pads_begin,
                                 pads_end, auto_pad)

    materialized_pads = None
    if padding_mode != "zeros":
        _check_mode_pads(padding_mode, input_shape, pads_begin, pads_end)
        # the padded src is written out once at the boundary; algorithms see no pads
        materialized_pads = (tuple(pads_begin), tuple(pads_end))
        if source_shape is None:
            source_shape = tuple(input_shape)
        input_shape = tuple(i + pb + pe for i, pb, pe in zip(input_shape, pads_begin,
                                                             pads_end))
        pads_begin = pads_end = (0,) * rank
        if math.prod(input_shape) * batch * in_channels > MAX_ELEMENTS:
            raise ValueError(f"padding_mode={padding_mode!r} pads src to spatial extents "
                             f"{input_shape}; expected at most {MAX_ELEMENTS} elements")

    dtype, result_dtype = problem_dtypes(
        ("src", np.dtype(src_dtype)), ("weights", np.dtype(weights_dtype)),
        ("bias", None if bias_dtype is None else np.dtype(bias_dtype)), dst_dtype)
    _check_sizes(batch, in_channels, out_channels, icg, input_shape, kernel_shape, output_shape)

    return ConvProblem(
        batch=batch, in_channels=in_channels, out_channels=out_channels, groups=groups,
        input_shape=tuple(input_shape), kernel_shape=tuple(kernel_shape),
        output_shape=output_shape, strides=strides, dilations=dilations,
        pads_begin=tuple(pads_begin), pads_end=tuple(pads_end), dtype=np.dtype(dtype),
        has_bias=bias_shape is not None, data_format=data_format,
        weights_format=weights_format, result_dtype=result_dtype, source_shape=source_shape,
        data_dilations=data_dilations, padding_mode=padding_mode,
        materialized_pads=materialized_pads,
    )


def _check_channels(in_channels, out_channels, icg, groups, weights_format, bias_shape):
    if out_channels < 1:
        raise ValueError(f"weights has OC={out_channels} output channels; expected >= 1")
    if in_channels % groups:
        raise ValueError(f"groups={groups} must divide IC={in_channels} (src channels)")
    if out_channels % groups:
        raise ValueError(f"groups={groups} must divide OC={out_channels} (weights output "
                         f"channels)")
    if icg * groups != in_channels:
        raise ValueError(f"weights has IC/G={icg} input channels per group; expected "
                         f"IC/G={in_channels // groups} (IC={in_channels}, groups={groups}, "
                         f"weights_format={weights_format!r})")
    if bias_shape is not None:
        bias_shape = tuple(int(d) for d in bias_shape)
        if bias_shape != (out_channels,):
            raise ValueError(f"bias has shape {bias_shape}; expected ({out_channels},) (OC)")


def _stretch(data_dilations, input_shape, batch_channels: int):
    """(data dilations or None when all are 1, the caller's extents or None, the extents
    the algorithms see): docs/specification.md §2.5 (nGraph), L - 1 zeros between
    neighbours, extent L * (I - 1) + 1."""
    if max(data_dilations, default=1) == 1:
        return None, None, input_shape
    stretched = tuple(step * (i - 1) + 1 for step, i in zip(data_dilations, input_shape))
    if math.prod(stretched) * batch_channels > MAX_ELEMENTS:
        raise ValueError(f"data_dilations={data_dilations!r} stretch src to spatial "
                         f"extents {stretched}; expected at most {MAX_ELEMENTS} "
                         f"elements in all")
    return data_dilations, tuple(input_shape), stretched


def _output_shape(input_shape, kernel_shape, strides, dilations, pads_begin, pads_end,
                  auto_pad) -> tuple[int, ...]:
    """docs/specification.md §1.2 per axis, each figure checked and named when wrong."""
    output_extents = []
    for axis, (i, k, s, d, pb, pe) in enumerate(zip(input_shape, kernel_shape, strides,
                                                    dilations, pads_begin, pads_end)):
        padded = i + pb + pe
        if padded > MAX_ELEMENTS or max(abs(pb), abs(pe)) > MAX_ELEMENTS:
            raise ValueError(f"spatial axis {axis}: pads_begin={pb} and pads_end={pe} "
                             f"(auto_pad={auto_pad!r}) pad the input extent {i} to {padded}; "
                             f"expected pads and padded extent of at most 2**53")
        if padded < 1:
            raise ValueError(f"spatial axis {axis}: pads_begin={pb} and pads_end={pe} crop "
                             f"the input extent {i} to {padded}; expected a padded extent >= 1")
        o = output_extent(i, k, s, d, pb, pe)
        if o < 1:
            # name the arguments behind each figure: weights (K), dilations, src (I), pads
            raise ValueError(f"spatial axis {axis}: the dilated kernel extent "
                             f"{(k - 1) * d + 1} (weights K={k}, dilations D={d}) is larger "
                             f"than the padded input extent {padded} (src I={i}, pads_begin="
                             f"{pb}, pads_end={pe}, auto_pad={auto_pad!r}); the output would "
                             f"be empty")
        output_extents.append(o)
    return tuple(output_extents)


def _check_sizes(batch, in_channels, out_channels, icg, input_shape, kernel_shape,
                 output_shape) -> None:
    """Every tensor indexable by the kernels, and the work countable."""
    for what, count in (("dst", batch * out_channels * math.prod(output_shape)),
                        ("src", batch * in_channels * math.prod(input_shape)),
                        ("weights", out_channels * icg * math.prod(kernel_shape))):
        if count > MAX_ELEMENTS:
            raise ValueError(f"{what} would hold {count} elements; expected at most "
                             f"{MAX_ELEMENTS} (the problem is too large to index)")
    work = batch * out_channels * math.prod(output_shape) * icg * math.prod(kernel_shape)
    if work > 2**62:
        raise ValueError(f"the problem needs {work} multiply-adds; expected at most 2**62")


_NONE_BY_DEFAULT = _none_by_default(_build_problem)


def _check_mode_pads(padding_mode, extents, pads_begin, pads_end) -> None:
    """reflect mirrors without repeating the edge, so it reaches at most I - 1 elements;
    circular wraps once, at most I (PyTorch's limits). Negative pads crop in every mode."""
    most = {"reflect": 1, "circular": 0}.get(padding_mode)
    if most is None:
        return
    for axis, (i, pb, pe) in enumerate(zip(extents, pads_begin, pads_end)):
        for name, pad in (("pads_begin", pb), ("pads_end", pe)):
            if pad > i - most:
                raise ValueError(f"{name}={pad} on spatial axis {axis} with padding_mode="
                                 f"{padding_mode!r}: expected at most {i - most} (the "
                                 f"input extent {i}"
                                 f"{' - 1' if most else ''})")


