"""From the user's arguments to one frozen, canonical problem description.

Everything that selection and the algorithms consume is decided here, once:
attribute parsing (int or sequence forms), auto_pad resolution, formats, groups,
output shape and the compute dtype. Formulas follow docs/specification.md §1, §2 and §3.

The canonical memory layouts that every kernel sees are

* src ``(N, I_1..I_r, IC)`` and dst ``(N, O_1..O_r, OC)``, C-contiguous (NXC);
* weights ``(G, K_1..K_r, IC/G, OC/G)``, C-contiguous (grouped XIO).

Conversion to them happens in :func:`canonical_src` and :func:`canonical_weights`,
and back in :func:`user_dst`, at the API boundary only.
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
import numbers
import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Union, cast

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
    input_shape: tuple[int, ...]
    kernel_shape: tuple[int, ...]
    output_shape: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    pads_begin: tuple[int, ...]
    pads_end: tuple[int, ...]
    dtype: np.dtype
    has_bias: bool
    data_format: str = "NXC"
    weights_format: str = "XIO"
    # What the caller stores, when it differs from the compute dtype ``dtype``: float16 or
    # bfloat16 results computed in float32, or the dst dtype of an 8-bit problem (whose
    # ``dtype`` is the int32 accumulator). None: the result has dtype ``dtype``.
    result_dtype: np.dtype | None = None
    # Set when the src is materialised at the boundary (data dilation, or a padding_mode
    # other than "zeros": docs/specification.md §2.5, §2.6): the caller's spatial extents,
    # the data dilations and the pads written into the materialised src. ``input_shape``
    # and the pads above then describe the materialised src that every algorithm sees.
    source_shape: tuple[int, ...] | None = None
    data_dilations: tuple[int, ...] | None = None
    padding_mode: str = "zeros"
    materialized_pads: tuple[tuple[int, ...], tuple[int, ...]] | None = None

    @property
    def output_dtype(self) -> np.dtype:
        """The dtype of the returned dst (``dtype`` unless ``result_dtype`` says otherwise)."""
        return self.dtype if self.result_dtype is None else self.result_dtype

    @property
    def is_quantized(self) -> bool:
        """8-bit integer src and weights, accumulated in int32 (docs/specification.md §3.4)."""
        return self.dtype.kind == "i"

    def __hash__(self) -> int:
        # Problems key every per-call cache (choice, plans, kernel geometry); the generated
        # hash of all fields costs ~1.5 us per lookup, so it is computed once.
        try:
            return self.__dict__["_hash"]
        except KeyError:
            value = hash(tuple(getattr(self, f.name) for f in dataclasses.fields(self)))
            object.__setattr__(self, "_hash", value)
            return value

    def __getstate__(self):
        # string hashes differ between processes: a pickled problem recomputes its own
        state = dict(self.__dict__)
        state.pop("_hash", None)
        return state

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
    def src_shape(self) -> tuple[int, ...]:
        """src shape in the user's data_format."""
        spatial = self.input_shape if self.source_shape is None else self.source_shape
        return user_data_shape(self.batch, self.in_channels, spatial, self.data_format)

    @property
    def dst_shape(self) -> tuple[int, ...]:
        """dst shape in the user's data_format."""
        return user_data_shape(self.batch, self.out_channels, self.output_shape, self.data_format)

    @property
    def canonical_dst_shape(self) -> tuple[int, ...]:
        """dst shape in the canonical (N, O..., OC) layout the kernels write."""
        return (self.batch, *self.output_shape, self.out_channels)

    @property
    def weights_shape(self) -> tuple[int, ...]:
        """weights shape in the user's weights_format."""
        return user_weights_shape(self.out_channels, self.in_channels_per_group,
                              self.kernel_shape, self.weights_format)

    def describe(self) -> str:
        """One line in benchdnn's descriptor words (dilation shown 1-based, as ours)."""
        sp = "x".join
        return (f"mb{self.batch} g{self.groups} ic{self.in_channels} oc{self.out_channels} "
                f"i{sp(map(str, self.input_shape))} k{sp(map(str, self.kernel_shape))} "
                f"o{sp(map(str, self.output_shape))} s{sp(map(str, self.strides))} "
                f"d{sp(map(str, self.dilations))} pb{sp(map(str, self.pads_begin))} "
                f"pe{sp(map(str, self.pads_end))} {self.dtype.name}{self._describe_extras()}")

    def _describe_extras(self) -> str:
        # only what differs from a plain problem, so plain descriptions stay as they were
        sp = "x".join
        extras = []
        if self.result_dtype is not None:
            extras.append(f"->{self.result_dtype.name}")
        if self.source_shape is not None:
            extras.append(f" src{sp(map(str, self.source_shape))}")
        if self.data_dilations is not None:
            extras.append(f" ld{sp(map(str, self.data_dilations))}")
        if self.padding_mode != "zeros":
            assert self.materialized_pads is not None  # make_problem sets them for the mode
            begin, end = self.materialized_pads
            extras.append(f" {self.padding_mode}{sp(map(str, begin))}_{sp(map(str, end))}")
        return "".join(extras)


def _prod(values) -> int:
    result = 1
    for v in values:
        result *= int(v)
    return result


def user_data_shape(n, c, spatial, data_format):
    return (n, c, *spatial) if data_format == "NCX" else (n, *spatial, c)


def user_weights_shape(oc, icg, kernel, weights_format):
    return (oc, icg, *kernel) if weights_format == "OIX" else (*kernel, icg, oc)


# --------------------------------------------------------------------------- parsing

def as_int(name: str, value) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name}={value!r} must be an integer")
    return operator.index(value)


def spatial_tuple(name: str, value: IntOrSeq, rank: int, default: int, minimum) -> tuple[int, ...]:
    """An int applies to every axis; a sequence must have exactly ``rank`` entries."""
    if value is None:
        return (default,) * rank
    if (isinstance(value, (numbers.Integral, np.integer))
            and not isinstance(value, (bool, np.bool_))):
        values = (operator.index(value),) * rank
    elif isinstance(value, (str, bytes)) or not hasattr(value, "__len__"):
        raise TypeError(f"{name}={value!r} must be an int or a sequence of {rank} ints")
    else:
        sequence = cast("Sequence[int]", value)  # an int took the first branch
        if len(sequence) != rank:
            raise ValueError(f"{name}={tuple(sequence)!r} must have {rank} entries, one per "
                             f"spatial axis (got {len(sequence)})")
        values = tuple(as_int(name, v) for v in sequence)
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


def parse_choice(name: str, value, choices, aliases=None) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name}={value!r} must be a string, one of {list(choices)}")
    key = value.lower()
    key = (aliases or {}).get(key, key)
    for choice in choices:
        if key == choice.lower():
            return choice
    raise ValueError(f"{name}={value!r} is not known; expected one of {list(choices)}")


def parse_data_format(value) -> str:
    return parse_choice("data_format", value, DATA_FORMATS)


def parse_weights_format(value) -> str:
    return parse_choice("weights_format", value, WEIGHTS_FORMATS)


def parse_auto_pad(value) -> str:
    return parse_choice("auto_pad", value, AUTO_PADS, _AUTO_PAD_ALIASES)


def resolve_auto_pad(auto_pad, input_shape, kernel_shape, strides, dilations):
    """docs/specification.md §2.3: O = ceil(I/S), total pad split at the end or start."""
    pads_begin, pads_end = [], []
    for i, k, s, d in zip(input_shape, kernel_shape, strides, dilations):
        if auto_pad == "valid":
            pads_begin.append(0)
            pads_end.append(0)
            continue
        out = -(-i // s)
        total = max(0, (out - 1) * s + (k - 1) * d + 1 - i)
        begin = total // 2 if auto_pad == "same_upper" else total - total // 2
        pads_begin.append(begin)
        pads_end.append(total - begin)
    return tuple(pads_begin), tuple(pads_end)


def output_extent(i, k, s, d, pb, pe) -> int:
    """docs/specification.md §1.2: floor((I + P_b + P_e - ((K-1)*D + 1)) / S) + 1, with
    true floor division."""
    return (i + pb + pe - ((k - 1) * d + 1)) // s + 1


# --------------------------------------------------------------------------- dtypes

_FLOAT_TYPES = (np.dtype(np.float32), np.dtype(np.float64))
# Stored in these, computed in float32 (docs/specification.md §3.2); bfloat16 is
# ml_dtypes' (NumPy kind "V").
HALF_TYPES = ("float16", "bfloat16")
# What an 8-bit problem may return: int32 unless a dst dtype is asked for
# (docs/specification.md §3.4).
QUANTIZED_DST_TYPES = ("int8", "uint8", "int32", "float32")
PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


def is_half(dtype: np.dtype) -> bool:
    return dtype.name in HALF_TYPES


def is_8bit_integer(dtype: np.dtype) -> bool:
    return dtype.kind in "iu" and dtype.itemsize == 1


def _check_dtype(name: str, dtype: np.dtype) -> None:
    if is_half(dtype) or is_8bit_integer(dtype):
        return
    if dtype.kind == "f" and dtype not in _FLOAT_TYPES:
        raise TypeError(f"{name} has dtype {dtype}; expected float16, bfloat16, float32 or "
                        f"float64")
    if dtype.kind not in "fiub":
        raise TypeError(f"{name} has dtype {dtype}; expected a real numeric dtype "
                        f"(float32 or float64, float16/bfloat16, or 8-bit integers)")


def reject_8bit(operation: str, *named_arrays) -> None:
    """8-bit integer tensors are quantized data, which only :func:`convlab.convolve` takes
    (docs/specification.md §3.4); elsewhere they are a TypeError naming the argument rather
    than a silent conversion to float."""
    for name, array in named_arrays:
        if array is not None and array.dtype.kind in "iu" and array.dtype.itemsize == 1:
            raise TypeError(f"{name} has dtype {array.dtype}; {operation} takes floating-point "
                            f"tensors (8-bit quantized inputs are supported by convolve only): "
                            f"cast {name} to a float type")


def compute_dtype(*named_dtypes) -> np.dtype:
    """docs/specification.md §3.3: floats combine by numpy.result_type; other integers and
    bools become float64; float16 and bfloat16 compute in float32 (§3.2). (8-bit problems
    go through :func:`problem_dtypes`.)"""
    return _float_dtypes(named_dtypes)[0]


def _float_dtypes(named_dtypes):
    """(compute dtype, result dtype or None) of a floating problem."""
    floats, stored = [], set()
    for name, dtype in named_dtypes:
        if dtype is None:
            continue
        # byte order is storage, not type: '>f4' data is float32, converted at the boundary
        dtype = dtype.newbyteorder("=") if dtype.kind != "V" else dtype
        _check_dtype(name, dtype)
        stored.add(dtype.name)
        if is_half(dtype):
            floats.append(np.dtype(np.float32))
        else:
            floats.append(dtype if dtype.kind == "f" else np.dtype(np.float64))
    compute = np.result_type(*floats)
    # a half result only when every input is that half type: anything wider wins, as
    # numpy.result_type would decide
    if len(stored) == 1 and next(iter(stored)) in HALF_TYPES:
        return compute, _half_dtype(next(iter(stored)))
    return compute, None


def _half_dtype(name: str) -> np.dtype:
    if name == "float16":
        return np.dtype(np.float16)
    import ml_dtypes  # optional: only someone holding a bfloat16 array gets here

    return np.dtype(ml_dtypes.bfloat16)


def problem_dtypes(src, weights, bias, dst_dtype):
    """(compute dtype, result dtype or None) for the named (name, dtype) inputs.

    8-bit integer src and weights make a quantized problem: int32 accumulation, result
    ``dst_dtype`` (default int32). Mixing 8-bit integers with other types is refused.
    """
    src_name, src_dtype = src
    weights_name, weights_dtype = weights
    eight = [is_8bit_integer(d) for d in (src_dtype, weights_dtype)]
    if any(eight):
        if not all(eight):
            other, dtype = (weights if eight[0] else src)
            raise TypeError(f"{other} has dtype {dtype} but "
                            f"{src_name if eight[0] else weights_name} is 8-bit "
                            f"({src_dtype if eight[0] else weights_dtype}); quantized "
                            f"convolution expects int8 or uint8 src and weights")
        bias_name, bias_dtype = bias
        if bias_dtype is not None and not (bias_dtype.kind in "iuf" or is_half(bias_dtype)):
            raise TypeError(f"bias has dtype {bias_dtype}; expected an integer bias "
                            f"(added to the int32 accumulator) or a floating one "
                            f"(added after output_scale)")
        result = np.dtype(np.int32) if dst_dtype is None else parse_dst_dtype(dst_dtype)
        return np.dtype(np.int32), (None if result == np.dtype(np.int32) else result)
    if dst_dtype is not None:
        raise ValueError(f"dst_dtype={dst_dtype!r} applies to 8-bit integer src and weights; "
                         f"src has dtype {src_dtype}, and a floating problem returns its "
                         f"compute dtype")
    return _float_dtypes((src, weights, bias))


def parse_dst_dtype(value) -> np.dtype:
    try:
        dtype = np.dtype(value)
    except TypeError:
        raise TypeError(f"dst_dtype={value!r} is not a dtype; expected one of "
                        f"{list(QUANTIZED_DST_TYPES)}") from None
    if dtype.name not in QUANTIZED_DST_TYPES:
        raise ValueError(f"dst_dtype={value!r} is not supported; expected one of "
                         f"{list(QUANTIZED_DST_TYPES)}")
    return dtype


def parse_padding_mode(value) -> str:
    return parse_choice("padding_mode", value, PADDING_MODES)


# --------------------------------------------------------------------------- arrays

def as_array(name: str, value) -> np.ndarray:
    """Accept arrays and nested sequences; refuse what cannot be a numeric tensor.

    An array at an address that is not a multiple of its item size is copied: the kernels
    read elements through typed C pointers, which must be aligned (and reshaping it keeps
    it where it is).
    """
    if isinstance(value, np.ndarray):
        return aligned(value)
    if value is None or isinstance(value, (str, bytes, dict, set)):
        raise TypeError(f"{name} must be an array (numpy.ndarray or nested sequence), "
                        f"got {type(value).__name__}")
    try:
        array = np.asarray(value)
    except (ValueError, TypeError) as exc:
        raise TypeError(f"{name} could not be converted to an array: {exc}") from None
    return array


def aligned(array: np.ndarray) -> np.ndarray:
    """``array``, or an aligned copy of it when its elements are not aligned."""
    return array if array.flags.aligned else array.copy()


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

    strides = spatial_tuple("strides", strides, rank, 1, 1)
    dilations = spatial_tuple("dilations", dilations, rank, 1, 1)
    data_dilations = spatial_tuple("data_dilations", data_dilations, rank, 1, 1)
    if max(data_dilations, default=1) == 1:
        data_dilations = None
    else:
        # docs/specification.md §2.5 (nGraph): L - 1 zeros between neighbours, extent
        # L * (I - 1) + 1
        source_shape: tuple[int, ...] | None = tuple(input_shape)
        input_shape = tuple(step * (i - 1) + 1 for step, i in zip(data_dilations, input_shape))
        if _prod(input_shape) * batch * in_channels > MAX_ELEMENTS:
            raise ValueError(f"data_dilations={data_dilations!r} stretch src to spatial "
                             f"extents {input_shape}; expected at most {MAX_ELEMENTS} "
                             f"elements in all")
    if auto_pad == "none":
        pads_begin = spatial_tuple("pads_begin", pads_begin, rank, 0, None)
        pads_end = spatial_tuple("pads_end", pads_end, rank, 0, None)
    else:
        pads_begin, pads_end = resolve_auto_pad(auto_pad, input_shape, kernel_shape, strides,
                                                dilations)

    output_extents = []
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
            # name the arguments behind each figure: weights (K), dilations, src (I), pads
            raise ValueError(f"spatial axis {axis}: the dilated kernel extent "
                             f"{(k - 1) * d + 1} (weights K={k}, dilations D={d}) is larger "
                             f"than the padded input extent {padded} (src I={i}, pads_begin="
                             f"{pb}, pads_end={pe}, auto_pad={auto_pad!r}); the output would "
                             f"be empty")
        output_extents.append(o)
    output_shape = tuple(output_extents)

    materialized_pads = None
    if padding_mode != "zeros":
        _check_mode_pads(padding_mode, input_shape, pads_begin, pads_end)
        # the padded src is written out once at the boundary; algorithms see no pads
        materialized_pads = (tuple(pads_begin), tuple(pads_end))
        if data_dilations is None:
            source_shape = tuple(input_shape)
        input_shape = tuple(i + pb + pe for i, pb, pe in zip(input_shape, pads_begin,
                                                             pads_end))
        pads_begin = pads_end = (0,) * rank
        if _prod(input_shape) * batch * in_channels > MAX_ELEMENTS:
            raise ValueError(f"padding_mode={padding_mode!r} pads src to spatial extents "
                             f"{input_shape}; expected at most {MAX_ELEMENTS} elements")
    elif data_dilations is None:
        source_shape = None

    dtype, result_dtype = problem_dtypes(
        ("src", np.dtype(src_dtype)), ("weights", np.dtype(weights_dtype)),
        ("bias", None if bias_dtype is None else np.dtype(bias_dtype)), dst_dtype)

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
        weights_format=weights_format, result_dtype=result_dtype, source_shape=source_shape,
        data_dilations=data_dilations, padding_mode=padding_mode,
        materialized_pads=materialized_pads,
    )


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


# --------------------------------------------------------------------------- layouts

# Axis permutations as plain tuples: ``ndarray.transpose`` with a ready permutation costs
# well under a microsecond, ``np.moveaxis`` several, and these run on every call.
@functools.lru_cache(maxsize=16)
def channels_last_axes(ndim: int) -> tuple[int, ...]:
    """(N, C, X...) -> (N, X..., C)."""
    return (0, *range(2, ndim), 1)


@functools.lru_cache(maxsize=16)
def _channels_first(ndim: int) -> tuple[int, ...]:
    """(N, X..., C) -> (N, C, X...)."""
    return (0, ndim - 1, *range(1, ndim - 1))


@functools.lru_cache(maxsize=16)
def _oix_to_xio(ndim: int) -> tuple[int, ...]:
    """(OC, ICg, K...) -> (K..., ICg, OC)."""
    return (*range(2, ndim), 1, 0)


@functools.lru_cache(maxsize=16)
def _group_first(ndim: int) -> tuple[int, ...]:
    """(K..., ICg, G, OCg) -> (G, K..., ICg, OCg)."""
    return (ndim - 2, *range(ndim - 2), ndim - 1)


def canonical_src(src: np.ndarray, problem: ConvProblem) -> np.ndarray:
    """src as (N, I..., IC), C-contiguous, compute dtype. Never a writable alias users see
    modified: kernels only read it. Data dilation and padding modes are materialised here
    (see :func:`materialize`)."""
    if problem.data_format == "NCX":
        src = src.transpose(channels_last_axes(src.ndim))
    if problem.source_shape is not None:
        return materialize(src.astype(problem.dtype, copy=False), problem)
    # aligned again: a plan's repeated calls reach here without as_array
    return aligned(np.ascontiguousarray(src, dtype=problem.dtype))


_NUMPY_PAD_MODES: dict[str, Literal["reflect", "edge", "wrap"]] = {
    "reflect": "reflect", "replicate": "edge", "circular": "wrap"}


def materialize(src: np.ndarray, problem: ConvProblem) -> np.ndarray:
    """The caller's channels-last src (N, source extents..., C) as the algorithms see it.

    Data dilation writes src into every L-th position of zeros; a padding mode other than
    "zeros" then pads by that mode (positive pads; negative ones crop). The result holds
    N * IC * prod(input_shape) elements, a full copy of the stretched, padded src: the
    price of letting every algorithm run these problems unchanged, with zero pads.
    """
    if problem.source_shape is None:
        return np.ascontiguousarray(src)
    if problem.data_dilations is not None:
        stretched = np.zeros((src.shape[0], *_dilated_extents(problem), src.shape[-1]),
                             dtype=src.dtype)
        every_step = tuple(slice(None, None, step) for step in problem.data_dilations)
        stretched[(slice(None), *every_step)] = src
        src = stretched
    if problem.materialized_pads is not None:
        begin, end = problem.materialized_pads
        widths = [(0, 0)] + [(max(b, 0), max(e, 0)) for b, e in zip(begin, end)] + [(0, 0)]
        src = np.pad(src, widths, mode=_NUMPY_PAD_MODES[problem.padding_mode])
        src = src[(slice(None), *(slice(max(-b, 0), src.shape[1 + axis] - max(-e, 0))
                                  for axis, (b, e) in enumerate(zip(begin, end))))]
    return np.ascontiguousarray(src)


def _dilated_extents(problem: ConvProblem) -> tuple[int, ...]:
    assert problem.data_dilations is not None and problem.source_shape is not None
    return tuple(step * (i - 1) + 1
                 for step, i in zip(problem.data_dilations, problem.source_shape))


def canonical_weights(weights: np.ndarray, problem: ConvProblem,
                      contiguous: bool = True) -> np.ndarray:
    """weights as (G, K..., IC/G, OC/G) in the compute dtype: C-contiguous, or with
    ``contiguous=False`` a view of ``weights`` where the dtype allows (for the
    ``prepare_weights`` hooks of algorithms registered with ``weight_views=True``)."""
    if problem.weights_format == "OIX":
        weights = weights.transpose(_oix_to_xio(weights.ndim))
    grouped = weights.reshape(*problem.kernel_shape, problem.in_channels_per_group,
                              problem.groups, problem.out_channels_per_group)
    grouped = grouped.transpose(_group_first(grouped.ndim))
    if not contiguous:
        return grouped.astype(problem.dtype, copy=False)
    return np.ascontiguousarray(grouped, dtype=problem.dtype)


def canonical_bias(bias: np.ndarray | None, problem: ConvProblem) -> np.ndarray | None:
    if bias is None:
        return None
    return np.ascontiguousarray(bias, dtype=problem.dtype)


def canonical_view(dst_user: np.ndarray, problem: ConvProblem) -> np.ndarray:
    """A (N, O..., OC) view of a dst in the user's data_format (writes go through)."""
    if problem.data_format == "NCX":
        return dst_user.transpose(channels_last_axes(dst_user.ndim))
    return dst_user


def user_dst(dst_canonical: np.ndarray, problem: ConvProblem) -> np.ndarray:
    """A view of the canonical (N, O..., OC) result in the user's data_format."""
    if problem.data_format == "NCX":
        return dst_canonical.transpose(_channels_first(dst_canonical.ndim))
    return dst_canonical
