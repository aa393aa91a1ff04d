"""Data types: which the operation takes, the compute dtype they combine into, and the
dtype of the result (docs/specification.md §3)."""
from __future__ import annotations

import numpy as np

FLOAT_TYPES = (np.dtype(np.float32), np.dtype(np.float64))
# Stored in these, computed in float32 (docs/specification.md §3.2); bfloat16 is
# ml_dtypes' (NumPy kind "V").
HALF_TYPES = ("float16", "bfloat16")
# What an 8-bit problem may return: int32 unless a dst dtype is asked for
# (docs/specification.md §3.4).
QUANTIZED_DST_TYPES = ("int8", "uint8", "int32", "float32")


def is_half(dtype: np.dtype) -> bool:
    return dtype.name in HALF_TYPES


def is_8bit_integer(dtype: np.dtype) -> bool:
    return dtype.kind in "iu" and dtype.itemsize == 1


def check_dtype(name: str, dtype: np.dtype) -> None:
    if is_half(dtype) or is_8bit_integer(dtype):
        return
    if dtype.kind == "f" and dtype not in FLOAT_TYPES:
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
    return float_dtypes(named_dtypes)[0]


def float_dtypes(named_dtypes):
    """(compute dtype, result dtype or None) of a floating problem."""
    floats, stored = [], set()
    for name, dtype in named_dtypes:
        if dtype is None:
            continue
        # byte order is storage, not type: '>f4' data is float32, converted at the boundary
        dtype = dtype.newbyteorder("=") if dtype.kind != "V" else dtype
        check_dtype(name, dtype)
        stored.add(dtype.name)
        if is_half(dtype):
            floats.append(np.dtype(np.float32))
        else:
            floats.append(dtype if dtype.kind == "f" else np.dtype(np.float64))
    compute = np.result_type(*floats)
    # a half result only when every input is that half type: anything wider wins, as
    # numpy.result_type would decide
    if len(stored) == 1 and next(iter(stored)) in HALF_TYPES:
        return compute, half_dtype(next(iter(stored)))
    return compute, None


def half_dtype(name: str) -> np.dtype:
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
    return float_dtypes((src, weights, bias))


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
