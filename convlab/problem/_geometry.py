"""The frozen :class:`ConvProblem` and the geometry it shares with the other problems.

:class:`GroupedGeometry` is the one definition of the shapes and attributes every
convolution problem has, and of what follows from them (rank, channels per group, kernel
and output sizes); :class:`ConvProblem` and :class:`convlab.ops.transpose.TransposeProblem`
extend it. :func:`is_depthwise` is the one definition of "depthwise"
(docs/specification.md §2.7), which :class:`convlab.shapes.Layer` uses too.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

# Beyond this many elements an index no longer fits the kernels' signed 64-bit
# arithmetic with headroom for offsets; such a problem is refused up front.
MAX_ELEMENTS = 2**53



def is_depthwise(groups: int, in_channels: int) -> bool:
    """One src channel per group, several groups: ``groups == in_channels > 1``, any channel
    multiplier (docs/specification.md §2.7)."""
    return groups > 1 and in_channels == groups


@dataclass(frozen=True)
class GroupedGeometry:
    """The shapes and attributes every convolution problem has (forward and transposed:
    ``in_channels`` are src's channels, ``out_channels`` dst's; pads explicit), and what
    follows from them."""

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
    def kernel_size(self) -> int:
        return math.prod(self.kernel_shape)

    @property
    def output_size(self) -> int:
        return math.prod(self.output_shape)

    @property
    def is_depthwise(self) -> bool:
        return is_depthwise(self.groups, self.in_channels)

    def geometry_words(self) -> str:
        """The shapes and attributes in benchdnn's descriptor words (dilation 1-based)."""
        sp = "x".join
        return (f"mb{self.batch} g{self.groups} ic{self.in_channels} oc{self.out_channels} "
                f"i{sp(map(str, self.input_shape))} k{sp(map(str, self.kernel_shape))} "
                f"o{sp(map(str, self.output_shape))} s{sp(map(str, self.strides))} "
                f"d{sp(map(str, self.dilations))} pb{sp(map(str, self.pads_begin))} "
                f"pe{sp(map(str, self.pads_end))}")


@dataclass(frozen=True)
class ConvProblem(GroupedGeometry):
    """A fully resolved convolution: shapes, attributes and compute dtype.

    All spatial tuples have length ``rank``. Pads are explicit here: any auto_pad
    has already been resolved into ``pads_begin``/``pads_end``.
    """

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
        return f"{self.geometry_words()} {self.dtype.name}{self._describe_extras()}"

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


def user_data_shape(n, c, spatial, data_format):
    return (n, c, *spatial) if data_format == "NCX" else (n, *spatial, c)


def user_weights_shape(oc, icg, kernel, weights_format):
    return (oc, icg, *kernel) if weights_format == "OIX" else (*kernel, icg, oc)


def output_extent(i, k, s, d, pb, pe) -> int:
    """docs/specification.md §1.2: floor((I + P_b + P_e - ((K-1)*D + 1)) / S) + 1, with
    true floor division."""
    return (i + pb + pe - ((k - 1) * d + 1)) // s + 1
