"""Inputs in any memory layout give the same result as contiguous copies and stay untouched;
``out=`` is written and returned; dtypes combine as docs/specification.md §3.3 says."""
from __future__ import annotations

import numpy as np
import pytest

import convlab
from tests.helpers import ALGORITHMS, assert_matches_reference, problem_of, skip_unless_supported


def reversed_view(a):
    """Same values as ``a``, read through negative strides on every axis."""
    every = (slice(None, None, -1),) * a.ndim
    return np.ascontiguousarray(a[every])[every]


def strided_view(a):
    """Same values as ``a``, every other element of a larger buffer on each axis."""
    big = np.full(tuple(2 * n for n in a.shape), -7, a.dtype)
    view = big[(slice(None, None, 2),) * a.ndim]
    view[...] = a
    return view


def read_only(a):
    a = a.copy()
    a.flags.writeable = False
    return a


def unaligned(a):
    """Same values, at an address that is not a multiple of the item size."""
    raw = np.zeros(a.nbytes + 1, np.uint8)[1:]
    view = raw.view(a.dtype).reshape(a.shape)
    view[...] = a
    assert not view.flags.aligned
    return view


def permuted_view(a):
    """Same values, through a transposed (neither C nor Fortran) view."""
    axes = tuple(range(a.ndim))[::-1]
    return np.ascontiguousarray(a.transpose(axes)).transpose(axes)


VARIANTS = {
    "read-only": read_only,
    "fortran": np.asfortranarray,
    "negative-strides": reversed_view,
    "strided-slice": strided_view,
    "permuted": permuted_view,
    "unaligned": unaligned,
    "byteswapped": lambda a: a.astype(a.dtype.newbyteorder(">" if a.dtype.byteorder != ">"
                                                            else "<")),
    "broadcast": lambda a: np.broadcast_to(a[:1], a.shape),  # zero strides, read-only
    "python-list": lambda a: a.tolist(),
    "int64": lambda a: np.rint(4 * a).astype(np.int64),
}


def contiguous_copy(value):
    """The plain C-contiguous, native-endian array the variant stands for."""
    array = np.array(value)
    return np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("="))


def snapshot(value):
    if isinstance(value, list):
        return repr(value)
    return (value.shape, value.strides, value.dtype.str, np.array(value).tobytes())


def base_problem(rng, data_format):
    src = rng.standard_normal((2, 4, 5, 6)).astype(np.float32)
    weights = rng.standard_normal((6, 2, 3, 3)).astype(np.float32)
    bias = rng.standard_normal(6).astype(np.float32)
    if data_format == "NXC":
        src, weights = np.moveaxis(src, 1, -1).copy(), np.moveaxis(weights, (0, 1), (-1, -2)).copy()
    attributes = dict(groups=2, pads_begin=(1, 0), pads_end=(0, 2),
                      data_format=data_format, weights_format="OIX" if data_format == "NCX"
                      else "XIO")
    return dict(src=src, weights=weights, bias=bias), attributes


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("argument", ["src", "weights", "bias"])
@pytest.mark.parametrize("data_format", ["NCX", "NXC"])
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_any_input_layout_gives_the_contiguous_result_and_is_untouched(
        rng, algorithm, data_format, argument, variant):
    arrays, attributes = base_problem(rng, data_format)
    arrays[argument] = VARIANTS[variant](arrays[argument])
    before = {name: snapshot(value) for name, value in arrays.items()}
    bases = [np.array(v.base).tobytes() for v in arrays.values()
             if isinstance(v, np.ndarray) and v.base is not None]
    skip_unless_supported(algorithm, problem_of(**arrays, attributes=attributes))

    got = convlab.convolve(**arrays, algorithm=algorithm, **attributes)

    copies = {name: contiguous_copy(value) for name, value in arrays.items()}
    expected = convlab.convolve(**copies, algorithm=algorithm, **attributes)
    assert got.dtype == expected.dtype and got.dtype.isnative
    assert got.flags.c_contiguous
    np.testing.assert_array_equal(got, expected, strict=True)
    assert {name: snapshot(value) for name, value in arrays.items()} == before
    assert [np.array(v.base).tobytes() for v in arrays.values()
            if isinstance(v, np.ndarray) and v.base is not None] == bases


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_read_only_inputs_everywhere(rng, algorithm):
    """All three inputs read-only at once (arrays from a memory-mapped file behave so)."""
    arrays, attributes = base_problem(rng, "NXC")
    skip_unless_supported(algorithm, problem_of(**arrays, attributes=attributes))
    frozen = {name: read_only(value) for name, value in arrays.items()}
    got = convlab.convolve(**frozen, algorithm=algorithm, **attributes)
    np.testing.assert_array_equal(got, convlab.convolve(**arrays, algorithm=algorithm,
                                                        **attributes))
    for name in arrays:
        np.testing.assert_array_equal(frozen[name], arrays[name])


# ---------------------------------------------------------------------------- out=

def _out_buffers(shape, dtype):
    yield "c-contiguous", np.full(shape, np.nan, dtype)
    yield "fortran", np.asfortranarray(np.full(shape, np.nan, dtype))
    big = np.full(tuple(2 * n for n in shape), np.nan, dtype)
    yield "strided", big[(slice(None, None, 2),) * len(shape)]
    yield "negative-strides", np.full(shape, np.nan, dtype)[..., ::-1]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("data_format", ["NCX", "NXC"])
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_out_is_written_and_returned(rng, algorithm, data_format, dtype):
    arrays, attributes = base_problem(rng, data_format)
    arrays = {name: value.astype(dtype) for name, value in arrays.items()}
    skip_unless_supported(algorithm, problem_of(**arrays, attributes=attributes))
    expected = convlab.convolve(**arrays, algorithm=algorithm, **attributes)
    for kind, out in _out_buffers(expected.shape, dtype):
        base = out.base if out.base is not None else out
        got = convlab.convolve(**arrays, algorithm=algorithm, out=out, **attributes)
        assert got is out, kind
        np.testing.assert_array_equal(out, expected, err_msg=kind)
        if kind == "strided":  # the elements between the view's stay untouched
            mask = np.ones(base.shape, bool)
            mask[(slice(None, None, 2),) * base.ndim] = False
            assert np.isnan(base[mask]).all()


def test_out_is_not_touched_when_the_call_is_refused():
    out = np.full((1, 3, 3, 6), 5.0, np.float32)
    with pytest.raises(ValueError, match="algorithm='no_such_algorithm'"):
        convlab.convolve(np.zeros((1, 5, 5, 4), np.float32), np.zeros((3, 3, 4, 6), np.float32),
                         out=out, algorithm="no_such_algorithm")
    assert (out == 5.0).all()


# ---------------------------------------------------------------------------- dtypes

@pytest.mark.parametrize("src_dtype, weights_dtype, bias_dtype, expected", [
    ("float32", "float32", None, "float32"),
    ("float32", "float32", "float32", "float32"),
    ("float64", "float32", None, "float64"),
    ("float32", "float64", None, "float64"),
    ("float32", "float32", "float64", "float64"),
    # docs/specification.md §3.3: other integers compute as float64
    ("int64", "float32", None, "float64"),
    ("int32", "int16", None, "float64"),
    ("bool", "float32", None, "float64"),
    ("uint16", "float32", "int64", "float64"),
])
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_dtypes_combine_as_specified(algorithm, src_dtype, weights_dtype, bias_dtype, expected):
    rng = np.random.default_rng(7)
    src = (rng.integers(0, 2, (1, 4, 5, 3)) if src_dtype == "bool"
           else rng.integers(-3, 4, (1, 4, 5, 3))).astype(src_dtype)
    weights = rng.integers(-3, 4, (3, 3, 3, 2)).astype(weights_dtype)
    bias = None if bias_dtype is None else rng.integers(-3, 4, 2).astype(bias_dtype)
    skip_unless_supported(algorithm, problem_of(src, weights, bias))
    got = convlab.convolve(src, weights, bias, algorithm=algorithm)
    assert got.dtype == np.dtype(expected)
    assert_matches_reference(got, src, weights, bias, {}, algorithm)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_unaligned_out_and_plan_src_reach_the_kernels_aligned(rng, algorithm):
    """Kernels read and write through typed C pointers: an array whose elements are not
    aligned is copied (in) or staged (out), never handed over as it is. The sanitizer build
    (tools/sanitize.sh) reports any misaligned access; here the results must still agree."""
    arrays, attributes = base_problem(rng, "NXC")
    skip_unless_supported(algorithm, problem_of(**arrays, attributes=attributes))
    expected = convlab.convolve(**arrays, algorithm=algorithm, **attributes)
    out = unaligned(np.zeros_like(expected))
    got = convlab.convolve(**arrays, algorithm=algorithm, out=out, **attributes)
    assert got is out
    np.testing.assert_array_equal(out, expected)
    plan = convlab.Convolution(arrays["weights"], arrays["bias"], algorithm=algorithm,
                               **attributes)
    plan(arrays["src"])  # the plan's lean path for this shape is set up
    np.testing.assert_array_equal(plan(unaligned(arrays["src"])), expected)
