"""Attribute normalisation: the int-or-sequence spatial attributes, the named choices
(data and weights formats, auto_pad, padding mode) and auto_pad's resolution into pads
(docs/specification.md §2)."""
from __future__ import annotations

import numbers
import operator
from collections.abc import Sequence
from typing import Union, cast

import numpy as np

from convlab.problem._geometry import MAX_ELEMENTS

IntOrSeq = Union[int, Sequence[int], None]

DATA_FORMATS = ("NCX", "NXC")
WEIGHTS_FORMATS = ("OIX", "XIO")
AUTO_PADS = ("none", "same_upper", "same_lower", "valid")
# ONNX spells "none" as NOTSET; every other spelling matches ours up to case.
AUTO_PAD_ALIASES = {"notset": "none", "explicit": "none"}

PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


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
    return parse_choice("auto_pad", value, AUTO_PADS, AUTO_PAD_ALIASES)


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


def parse_padding_mode(value) -> str:
    return parse_choice("padding_mode", value, PADDING_MODES)
