"""The canonical memory layouts every kernel sees, and the conversions to and from the
caller's at the API boundary:

* src ``(N, I_1..I_r, IC)`` and dst ``(N, O_1..O_r, OC)``, C-contiguous (NXC);
* weights ``(G, K_1..K_r, IC/G, OC/G)``, C-contiguous (grouped XIO).

Conversion to them happens in :func:`canonical_src` and :func:`canonical_weights`, and
back in :func:`user_dst` (a view) or :func:`user_dst_copy`. Between NCX and the canonical
layout, data is copied by a compiled, tiled transpose (:func:`swap_channels`) wherever the
array allows it: NumPy's copy of a transposed view is many times slower.
"""
from __future__ import annotations

import functools
import math
from typing import Literal

import numpy as np

from convlab.problem._geometry import ConvProblem
from convlab.runtime import _buffers as buffers


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


def _channels_last_shape(shape: tuple[int, ...]) -> tuple[int, ...]:
    return (shape[0], *shape[2:], shape[1])


def _swappable(array: np.ndarray) -> bool:
    return (array.ndim >= 3 and array.flags.c_contiguous and array.flags.aligned
            and array.dtype.itemsize in (1, 2, 4, 8) and not array.dtype.hasobject)


def swap_channels(array: np.ndarray, to_last: bool, threads: int = 1,
                  into: np.ndarray | None = None) -> np.ndarray | None:
    """A C-contiguous copy of ``array`` (N, C, X...) as (N, X..., C) when ``to_last``, or
    of (N, X..., C) as (N, C, X...), new or written into ``into``; None where the compiled
    copy cannot take the arrays (not C-contiguous, dtypes that differ, an item size other
    than 1, 2, 4 or 8 bytes)."""
    shape = array.shape
    if not _swappable(array):
        return None
    pixels = math.prod(shape[2:] if to_last else shape[1:-1])
    if to_last:
        rows, cols, result_shape = shape[1], pixels, _channels_last_shape(shape)
    else:
        rows, cols, result_shape = pixels, shape[-1], (shape[0], shape[-1], *shape[1:-1])
    if into is None:
        into = buffers.empty(result_shape, array.dtype)
    elif (not _swappable(into) or into.dtype != array.dtype or into.shape != result_shape
          or not into.flags.writeable):
        return None
    # imported here: the kernels' package registers the algorithms, which describe
    # problems with this module
    from convlab.strategies.kernels._layout import swap_last_axes
    swap_last_axes(array.reshape(shape[0], rows, cols),
                   into.reshape(shape[0], cols, rows), threads)
    return into


def canonical_src(src: np.ndarray, problem: ConvProblem, threads: int = 1,
                  staged: bool = False) -> np.ndarray:
    """src as (N, I..., IC), C-contiguous, compute dtype. Never a writable alias users see
    modified: kernels only read it. Data dilation and padding modes are materialised here
    (see :func:`materialize`). ``threads`` may share the copy from NCX; ``staged``: the
    copy may go to this thread's staging buffer (``buffers.staging``), for a caller done
    with it before it asks for another."""
    if problem.data_format == "NCX":
        if src.dtype == problem.dtype and problem.source_shape is None:
            into = None
            if staged and _swappable(src):
                into = buffers.staging("src", _channels_last_shape(src.shape), src.dtype)
            swapped = swap_channels(src, True, threads, into)
            if swapped is not None:
                return swapped
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
        if weights.dtype == problem.dtype:
            copied = _oix_copy(weights, problem)
            if copied is not None:
                return copied
        weights = weights.transpose(_oix_to_xio(weights.ndim))
    grouped = weights.reshape(*problem.kernel_shape, problem.in_channels_per_group,
                              problem.groups, problem.out_channels_per_group)
    grouped = grouped.transpose(_group_first(grouped.ndim))
    if not contiguous:
        return grouped.astype(problem.dtype, copy=False)
    return np.ascontiguousarray(grouped, dtype=problem.dtype)


# ResNet-50 conv1's 37 KiB of OIX weights: 4 us through NumPy, 13 us here.
OIX_COPY_MIN_BYTES = 1 << 16


def _oix_copy(weights: np.ndarray, problem: ConvProblem) -> np.ndarray | None:
    """OIX weights as a new canonical array, through the compiled transpose (a strided
    NumPy copy of ResNet-50 res5a_branch1's 8 MiB of weights took 10 ms); None where it
    cannot take them, or where they are small enough for NumPy's copy to take less time
    than setting up this one (below OIX_COPY_MIN_BYTES)."""
    if weights.nbytes < OIX_COPY_MIN_BYTES or not _swappable(weights):
        return None
    groups, ocg, icg = (problem.groups, problem.out_channels_per_group,
                        problem.in_channels_per_group)
    taps = math.prod(problem.kernel_shape)
    # (G, OCg, ICg * taps) -> (G, ICg * taps, OCg): OC becomes the fastest axis
    by_input = np.empty((groups, icg * taps, ocg), weights.dtype)
    from convlab.strategies.kernels._layout import swap_last_axes  # see swap_channels
    swap_last_axes(weights.reshape(groups, ocg, icg * taps), by_input)
    canonical_shape = (groups, *problem.kernel_shape, icg, ocg)
    if icg == 1 or taps == 1:
        return by_input.reshape(canonical_shape)
    # (G, ICg, taps, OCg) -> (G, taps, ICg, OCg): rows of OCg elements move whole
    return np.ascontiguousarray(by_input.reshape(groups, icg, taps, ocg)
                                .transpose(0, 2, 1, 3)).reshape(canonical_shape)


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


def user_dst_copy(dst_canonical: np.ndarray, problem: ConvProblem,
                  threads: int = 1) -> np.ndarray:
    """The canonical (N, O..., OC) result as a C-contiguous array in the user's
    data_format: ``dst_canonical`` itself for NXC, a new array for NCX (so an NCX call's
    dst may be a staging buffer)."""
    if problem.data_format == "NCX":
        swapped = swap_channels(dst_canonical, False, threads)
        if swapped is not None:
            return swapped
        return np.array(user_dst(dst_canonical, problem), order="C")
    return np.ascontiguousarray(dst_canonical)


def write_user_dst(dst_canonical: np.ndarray, problem: ConvProblem, out: np.ndarray,
                   threads: int = 1) -> None:
    """Copy the canonical (N, O..., OC) result into the caller's ``out`` (user layout)."""
    if problem.data_format != "NCX" or swap_channels(dst_canonical, False, threads,
                                                     into=out) is None:
        out[...] = user_dst(dst_canonical, problem)
