"""From the user's arguments to one frozen, canonical problem description.

Everything that selection and the algorithms consume is decided here, once:
attribute parsing (int or sequence forms), auto_pad resolution, formats, groups,
output shape and the compute dtype. Formulas follow ``shared/SPEC.md`` §1–3.

The canonical memory layouts that every kernel sees are

* src ``(N, I_1..I_r, IC)`` and dst ``(N, O_1..O_r, OC)``, C-contiguous (NXC);
* weights ``(G, K_1..K_r, IC/G, OC/G)``, C-contiguous (grouped XIO).

Conversion to them happens in :func:`canonical_src` and :func:`canonical_weights`,
and back in :func:`user_dst`, at the API boundary only.
"""
from __future__ import annotations

import functools
import numbers
import operator
from dataclasses import dataclass
from typing import Optional, Sequence, Tuple, Union

import numpy as np

IntOrSeq = Union[int, Sequence[int], None]

DATA_FORMATS = ("NCX", "NXC")
WEIGHTS_FORMATS = ("OIX", "XIO")
AUTO_PADS = ("none", "same_upper", "same_lower", "valid")
# ONNX spells "none" as NOTSET; every other spelling matches ours up to case.
_AUTO_PAD_ALIASES = {"notset": "none", "explicit": "none"}

# Beyond this many elements an index no longer fits the kernels' signed 64-bit
# arithmetic with headroom for offsets; such a problem is refused up front.
MAX_ELEMENTS = 2**53


@dataclass(frozen=True)
class ConvProblem:
    """A fully resolved convolution: shapes, attributes and compute dtype.

    All spatial tuples have length ``rank``. Pads are explicit here: any auto_pad
    has already been resolved into ``pads_begin``/``pads_end``.
    """

    batch: int
    in_channels: int
    out_channels: int
    groups: int
    input_shape: Tuple[int, ...]
    kernel_shape: Tuple[int, ...]
    output_shape: Tuple[int, ...]
    strides: Tuple[int, ...]
    dilations: Tuple[int, ...]
    pads_begin: Tuple[int, ...]
    pads_end: Tuple[int, ...]
    dtype: np.dtype
    has_bias: bool
    data_format: str = "NXC"
    weights_format: str = "XIO"

    @property
    def rank(self) -> int:
        return len(self.input_shape)

    @property
    def in_channels_per_group(self) -> int:
        return self.in_channels // self.groups

    @property
    def out_channels_per_group(self) -> int:
        return self.out_channels // self.groups

    @property
    def is_depthwise(self) -> bool:
        return self.groups == self.in_channels and self.in_channels_per_group == 1 \
            and self.groups > 1

    @property
    def kernel_size(self) -> int:
        return _prod(self.kernel_shape)

    @property
    def output_size(self) -> int:
        return _prod(self.output_shape)

    @property
    def flops(self) -> int:
        """2 * N * OC * prod(O) * IC/G * prod(K), the benchdnn convention."""
        return (2 * self.batch * self.out_channels * self.output_size
                * self.in_channels_per_group * self.kernel_size)

    @property
    def src_shape(self) -> Tuple[int, ...]:
        """src shape in the user's data_format."""
        return _data_shape(self.batch, self.in_channels, self.input_shape, self.data_format)

    @property
    def dst_shape(self) -> Tuple[int, ...]:
        """dst shape in the user's data_format."""
        return _data_shape(self.batch, self.out_channels, self.output_shape, self.data_format)

    @property
    def weights_shape(self) -> Tuple[int, ...]:
        """weights shape in the user's weights_format."""
        return _weights_shape(self.out_channels, self.in_channels_per_group,
                              self.kernel_shape, self.weights_format)

    def describe(self) -> str:
        """One line in benchdnn's descriptor words (dilation shown 1-based, as ours)."""
        sp = "x".join
        return (f"mb{self.batch} g{self.groups} ic{self.in_channels} oc{self.out_channels} "
                f"i{sp(map(str, self.input_shape))} k{sp(map(str, self.kernel_shape))} "
                f"o{sp(map(str, self.output_shape))} s{sp(map(str, self.strides))} "
                f"d{sp(map(str, self.dilations))} pb{sp(map(str, self.pads_begin))} "
                f"pe{sp(map(str, self.pads_end))} {self.dtype.name}")


def _prod(values) -> int:
    result = 1
    for v in values:
        result *= int(v)
    return result


def _data_shape(n, c, spatial, data_format):
    return (n, c, *spatial) if data_format == "NCX" else (n, *spatial, c)


def _weights_shape(oc, icg, kernel, weights_format):
    return (oc, icg, *kernel) if weights_format == "OIX" else (*kernel, icg, oc)


# --------------------------------------------------------------------------- parsing

def _as_int(name: str, value) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name}={value!r} must be an integer")
    return operator.index(value)


def _spatial_tuple(name: str, value: IntOrSeq, rank: int, default: int, minimum) -> Tuple[int, ...]:
    """An int applies to every axis; a sequence must have exactly ``rank`` entries."""
    if value is None:
        return (default,) * rank
    if isinstance(value, (numbers.Integral, np.integer)) and not isinstance(value, (bool, np.bool_)):
        values = (operator.index(value),) * rank
    elif isinstance(value, (str, bytes)) or not hasattr(value, "__len__"):
        raise TypeError(f"{name}={value!r} must be an int or a sequence of {rank} ints")
    else:
        if len(value) != rank:
            raise ValueError(f"{name}={tuple(value)!r} must have {rank} entries, one per "
                             f"spatial axis (got {len(value)})")
        values = tuple(_as_int(name, v) for v in value)
    if minimum is not None:
        for axis, v in enumerate(values):
            if v < minimum:
                raise ValueError(f"{name}={values!r}: entry {v} on spatial axis {axis} must be "
                                 f">= {minimum}")
    for axis, v in enumerate(values):
        # kernels form o*S + k*D - P_b in signed 64-bit arithmetic; bounded terms cannot wrap
        if abs(v) > MAX_ELEMENTS:
            raise ValueError(f"{name}={values!r}: entry {v} on spatial axis {axis} must be "
                             f"at most 2**53 in magnitude")
    return values


def _choice(name: str, value, choices, aliases=None) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name}={value!r} must be a string, one of {list(choices)}")
    key = value.lower()
    key = (aliases or {}).get(key, key)
    for choice in choices:
        if key == choice.lower():
            return choice
    raise ValueError(f"{name}={value!r} is not known; expected one of {list(choices)}")


def parse_data_format(value) -> str:
    return _choice("data_format", value, DATA_FORMATS)


def parse_weights_format(value) -> str:
    return _choice("weights_format", value, WEIGHTS_FORMATS)


def parse_auto_pad(value) -> str:
    return _choice("auto_pad", value, AUTO_PADS, _AUTO_PAD_ALIASES)


def resolve_auto_pad(auto_pad, input_shape, kernel_shape, strides, dilations):
    """SPEC §2 'Decision (auto_pad)': O = ceil(I/S), total pad split at the end or start."""
    pads_begin, pads_end = [], []
    for i, k, s, d in zip(input_shape, kernel_shape, strides, dilations):
        if auto_pad == "valid":
            pads_begin.append(0)
            pads_end.append(0)
            continue
        out = -(-i // s)
        total = max(0, (out - 1) * s + (k - 1) * d + 1 - i)
        if auto_pad == "same_upper":
            begin = total // 2
        else:
            begin = total - total // 2
        pads_begin.append(begin)
        pads_end.append(total - begin)
    return tuple(pads_begin), tuple(pads_end)


def output_extent(i, k, s, d, pb, pe) -> int:
    """SPEC §1: floor((I + P_b + P_e - ((K-1)*D + 1)) / S) + 1, with true floor division."""
    return (i + pb + pe - ((k - 1) * d + 1)) // s + 1


# --------------------------------------------------------------------------- dtypes

_FLOAT_TYPES = (np.dtype(np.float32), np.dtype(np.float64))


def _check_dtype(name: str, dtype: np.dtype) -> None:
    if dtype.name in ("bfloat16", "float16"):
        raise TypeError(f"{name} has dtype {dtype.name}: half-precision convolution is not "
                        f"available yet; pass float32 or float64")
    if dtype.kind in "iu" and dtype.itemsize == 1:
        raise TypeError(f"{name} has dtype {dtype}: 8-bit integer (quantized) convolution is "
                        f"not available yet; pass float32 or float64")
    if dtype.kind == "f" and dtype not in _FLOAT_TYPES:
        raise TypeError(f"{name} has dtype {dtype}; expected float32 or float64")
    if dtype.kind not in "fiub":
        raise TypeError(f"{name} has dtype {dtype}; expected a real numeric dtype "
                        f"(float32 or float64)")


def compute_dtype(*named_dtypes) -> np.dtype:
    """SPEC §3: floats combine by numpy.result_type; other integers and bools become float64."""
    floats = []
    for name, dtype in named_dtypes:
        if dtype is None:
            continue
        # byte order is storage, not type: '>f4' data is float32, converted at the boundary
        dtype = dtype.newbyteorder("=")
        _check_dtype(name, dtype)
        floats.append(dtype if dtype.kind == "f" else np.dtype(np.float64))
    return np.result_type(*floats)


# --------------------------------------------------------------------------- arrays

def as_array(name: str, value) -> np.ndarray:
    """Accept arrays and nested sequences; refuse what cannot be a numeric tensor."""
    if isinstance(value, np.ndarray):
        return value
    if value is None or isinstance(value, (str, bytes, dict, set)):
        raise TypeError(f"{name} must be an array (numpy.ndarray or nested sequence), "
                        f"got {type(value).__name__}")
    try:
        array = np.asarray(value)
    except (ValueError, TypeError) as exc:
        raise TypeError(f"{name} could not be converted to an array: {exc}") from None
    return array


class _NotCacheable(Exception):
    pass


def _memo_key(value):
    """``value`` as an exact cache key; lists become tuples, which validate identically.

    Only exact builtin types qualify: ``True == 1`` and ``1.0 == 1`` hash alike, yet a
    bool or float stride must still reach the validation that refuses it.
    """
    if value is None or type(value) is str or type(value) is int or isinstance(value, np.dtype):
        return value
    if type(value) in (tuple, list) and all(type(v) is int for v in value):
        return tuple(value)
    raise _NotCacheable


def make_problem(src_shape, src_dtype, weights_shape, weights_dtype, bias_shape=None,
                 bias_dtype=None, **attributes) -> ConvProblem:
    """Validate every argument and build the :class:`ConvProblem`.

    Raises ``ValueError`` or ``TypeError`` naming the argument, the value and what
    was expected. Valid argument sets are remembered, because a one-shot ``convolve`` on
    a small layer would otherwise spend a fifth of its time here (about 20 us of 100 on a
    MobileNet depthwise layer, measured with cProfile).
    """
    positional = (src_shape, src_dtype, weights_shape, weights_dtype, bias_shape, bias_dtype)
    try:
        key = (tuple(map(_memo_key, positional)),
               tuple((name, _memo_key(value)) for name, value in sorted(attributes.items())))
    except _NotCacheable:
        return _build_problem(*positional, **attributes)
    return _cached_problem(key)


@functools.lru_cache(maxsize=256)
def _cached_problem(key) -> ConvProblem:
    positional, attributes = key
    return _build_problem(*positional, **dict(attributes))


def _build_problem(src_shape, src_dtype, weights_shape, weights_dtype, bias_shape=None,
                   bias_dtype=None, *, strides=None, pads_begin=None, pads_end=None,
                   dilations=None, auto_pad="none", groups=1, data_format="NXC",
                   weights_format="XIO") -> ConvProblem:
    data_format = parse_data_format(data_format)
    weights_format = parse_weights_format(weights_format)
    auto_pad = parse_auto_pad(auto_pad)
    groups = _as_int("groups", groups)
    if groups < 1:
        raise ValueError(f"groups={groups} must be >= 1")

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
        batch, in_channels, input_shape = src_shape[0], src_shape[1], src_shape[2:]
    else:
        batch, in_channels, input_shape = src_shape[0], src_shape[-1], src_shape[1:-1]
    if weights_format == "OIX":
        out_channels, icg, kernel_shape = weights_shape[0], weights_shape[1], weights_shape[2:]
    else:
        out_channels, icg, kernel_shape = weights_shape[-1], weights_shape[-2], weights_shape[:-2]

    for axis, extent in enumerate(input_shape):
        if extent < 1:
            raise ValueError(f"src spatial axis {axis} has extent {extent}; expected >= 1")
    for axis, extent in enumerate(kernel_shape):
        if extent < 1:
            raise ValueError(f"weights kernel axis {axis} has extent {extent}; expected >= 1")
    if in_channels < 1:
        raise ValueError(f"src has IC={in_channels} channels; expected >= 1")
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

    strides = _spatial_tuple("strides", strides, rank, 1, 1)
    dilations = _spatial_tuple("dilations", dilations, rank, 1, 1)
    if auto_pad == "none":
        pads_begin = _spatial_tuple("pads_begin", pads_begin, rank, 0, None)
        pads_end = _spatial_tuple("pads_end", pads_end, rank, 0, None)
    else:
        pads_begin, pads_end = resolve_auto_pad(auto_pad, input_shape, kernel_shape, strides,
                                                dilations)

    output_shape = []
    for axis in range(rank):
        i, k, s, d = input_shape[axis], kernel_shape[axis], strides[axis], dilations[axis]
        pb, pe = pads_begin[axis], pads_end[axis]
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
            raise ValueError(f"spatial axis {axis}: the dilated kernel extent "
                             f"{(k - 1) * d + 1} (K={k}, D={d}) is larger than the padded "
                             f"input extent {padded} (I={i}, P_b={pb}, P_e={pe}); the output "
                             f"would be empty")
        output_shape.append(o)
    output_shape = tuple(output_shape)

    dtype = compute_dtype(("src", np.dtype(src_dtype)), ("weights", np.dtype(weights_dtype)),
                          ("bias", None if bias_dtype is None else np.dtype(bias_dtype)))

    for what, count in (("dst", batch * out_channels * _prod(output_shape)),
                        ("src", batch * in_channels * _prod(input_shape)),
                        ("weights", out_channels * icg * _prod(kernel_shape))):
        if count > MAX_ELEMENTS:
            raise ValueError(f"{what} would hold {count} elements; expected at most "
                             f"{MAX_ELEMENTS} (the problem is too large to index)")
    work = batch * out_channels * _prod(output_shape) * icg * _prod(kernel_shape)
    if work > 2**62:
        raise ValueError(f"the problem needs {work} multiply-adds; expected at most 2**62")

    return ConvProblem(
        batch=batch, in_channels=in_channels, out_channels=out_channels, groups=groups,
        input_shape=tuple(input_shape), kernel_shape=tuple(kernel_shape),
        output_shape=output_shape, strides=strides, dilations=dilations,
        pads_begin=tuple(pads_begin), pads_end=tuple(pads_end), dtype=np.dtype(dtype),
        has_bias=bias_shape is not None, data_format=data_format,
        weights_format=weights_format,
    )


# --------------------------------------------------------------------------- layouts

# Axis permutations as plain tuples: ``ndarray.transpose`` with a ready permutation costs
# well under a microsecond, ``np.moveaxis`` several, and these run on every call.
@functools.lru_cache(maxsize=16)
def _channels_last(ndim: int) -> Tuple[int, ...]:
    """(N, C, X...) -> (N, X..., C)."""
    return (0, *range(2, ndim), 1)


@functools.lru_cache(maxsize=16)
def _channels_first(ndim: int) -> Tuple[int, ...]:
    """(N, X..., C) -> (N, C, X...)."""
    return (0, ndim - 1, *range(1, ndim - 1))


@functools.lru_cache(maxsize=16)
def _oix_to_xio(ndim: int) -> Tuple[int, ...]:
    """(OC, ICg, K...) -> (K..., ICg, OC)."""
    return (*range(2, ndim), 1, 0)


@functools.lru_cache(maxsize=16)
def _group_first(ndim: int) -> Tuple[int, ...]:
    """(K..., ICg, G, OCg) -> (G, K..., ICg, OCg)."""
    return (ndim - 2, *range(ndim - 2), ndim - 1)


def canonical_src(src: np.ndarray, problem: ConvProblem) -> np.ndarray:
    """src as (N, I..., IC), C-contiguous, compute dtype. Never a writable alias users see
    modified: kernels only read it."""
    if problem.data_format == "NCX":
        src = src.transpose(_channels_last(src.ndim))
    return np.ascontiguousarray(src, dtype=problem.dtype)


def canonical_weights(weights: np.ndarray, problem: ConvProblem) -> np.ndarray:
    """weights as (G, K..., IC/G, OC/G), C-contiguous, compute dtype."""
    if problem.weights_format == "OIX":
        weights = weights.transpose(_oix_to_xio(weights.ndim))
    grouped = weights.reshape(*problem.kernel_shape, problem.in_channels_per_group,
                              problem.groups, problem.out_channels_per_group)
    grouped = grouped.transpose(_group_first(grouped.ndim))
    return np.ascontiguousarray(grouped, dtype=problem.dtype)


def canonical_bias(bias: Optional[np.ndarray], problem: ConvProblem) -> Optional[np.ndarray]:
    if bias is None:
        return None
    return np.ascontiguousarray(bias, dtype=problem.dtype)


def user_dst(dst_canonical: np.ndarray, problem: ConvProblem) -> np.ndarray:
    """A view of the canonical (N, O..., OC) result in the user's data_format."""
    if problem.data_format == "NCX":
        return dst_canonical.transpose(_channels_first(dst_canonical.ndim))
    return dst_canonical
