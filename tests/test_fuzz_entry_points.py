"""Hypothesis fuzzing of every public entry point over the whole attribute space.

Each test draws a problem of rank 1-3 in either layout, degenerate values included
(zero-sized batch, spatial and channel axes; kernels larger than the input; pads that crop
everything; strides and dilations beyond the input; groups == channels; size-1 axes), with
arrays in any memory layout (non-contiguous, negative strides, read-only, big-endian) and
sometimes one argument made invalid on purpose. Whatever is drawn, the call must

* return the oracle's result within the suite's bounds (helpers.TOLERANCES; exact for
  8-bit problems), or
* raise ValueError or TypeError whose message names an offending argument. Which names
  qualify comes from :class:`Expected`, worked out here from the rules of
  docs/specification.md for the drawn arguments, independently of convlab's validation;

and it must leave every input untouched, and neither crash nor hang: a watchdog ends the
process with every thread's traceback after ``EXAMPLE_TIMEOUT`` seconds.

A zero batch is computed (an empty result); a zero-sized spatial, channel or kernel axis
is a ValueError naming the array that holds it (tests/test_zero_sized.py).

Examples per test: tests/fuzz_profiles.py (``HYPOTHESIS_PROFILE=ci``, the default, or
``long``).
"""
from __future__ import annotations

import contextlib
import faulthandler
import itertools
import json
import math
import re
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pytest
from hypothesis import event, given, note, strategies as st

import convlab
from convlab.dispatch import registry, select
from convlab.dispatch.registry import INT8
from convlab.ops import transpose
from convlab.problem import params
from convlab.runtime.threads import effective_threads
from tests.fuzz_profiles import fuzz_settings
from tests.helpers import (
    ALGORITHMS,
    assert_matches_reference,
    problem_of,
    to_data_format,
    to_weights_format,
    tolerance,
)
from tests.test_inputs import permuted_view, read_only, reversed_view
from tests.test_transpose import assert_transpose_matches, forward_problem, scatter_reference

try:
    import ml_dtypes
except ImportError:  # pragma: no cover - ml_dtypes is a test extra
    ml_dtypes = None

pytestmark = pytest.mark.thread_unsafe(
    reason="the per-example watchdog (faulthandler.dump_traceback_later) is one per process")

# Seconds one example may take before the watchdog dumps every thread's stack and ends the
# process: far above the slowest example (well under a second in a release build), so
# only a hang, or a sanitizer build on a very slow machine, reaches it.
EXAMPLE_TIMEOUT = 300

AUTO_PADS = ("none", "same_upper", "same_lower", "valid", "NOTSET", "SAME_UPPER",
             "SAME_LOWER", "VALID", "explicit")
PADDING_MODES = ("zeros", "reflect", "replicate", "circular", "REFLECT")
THREADS = (None, 1, 2, -1)
PRECISIONS = ("default", "highest")
FLOAT_TYPES = ("float32", "float64", ">f4", ">f8", "float16", "int16") + \
    (("bfloat16",) if ml_dtypes is not None else ())
TRANSPOSE_ALGORITHMS = ("auto", transpose.COL2IM)

# Every name an error about the problem's geometry may give.
GEOMETRY_NAMES = frozenset({"src", "weights", "strides", "dilations", "pads_begin",
                            "pads_end", "auto_pad", "data_dilations", "padding_mode",
                            "groups"})


@contextlib.contextmanager
def watchdog():
    faulthandler.dump_traceback_later(EXAMPLE_TIMEOUT, exit=True)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()


def weighted(*branches):
    """One of several strategies, each drawn with its integer weight. Shrinking goes to
    the first branch, so list the ordinary values first."""
    pool = [strategy for weight, strategy in branches for _ in range(weight)]
    return st.sampled_from(pool).flatmap(lambda strategy: strategy)


# --------------------------------------------------------------------------- expectations

@dataclass(frozen=True)
class Expected:
    """What a call may do. ``definite``: it must raise, naming one of these (or of
    ``maybe``). ``maybe``: it may raise naming one of these, or succeed (a plan's
    construction, which cannot know the src). ``errors``: the exception types of the
    definite causes (the call raises for one of them)."""

    definite: frozenset[str] = frozenset()
    maybe: frozenset[str] = frozenset()
    errors: frozenset[type] = frozenset()

    def __or__(self, other: Expected) -> Expected:
        return Expected(self.definite | other.definite, self.maybe | other.maybe,
                        self.errors | other.errors)


VALID = Expected()


def _named(message: str, names) -> bool:
    return any(re.search(rf"(?<![\w]){re.escape(name)}(?![\w])", message) for name in names)


def outcome(call: Callable, expected: Expected, refusal: str | None = None):
    """``call()``'s result, or None when it raised as ``expected`` allows.

    ``refusal``: why the forced algorithm cannot run this (otherwise valid) problem; the
    call must then raise naming ``algorithm``.
    """
    try:
        result = call()
    except (ValueError, TypeError) as error:
        event(f"refused: {type(error).__name__}")
        message = str(error)
        names = expected.definite | expected.maybe | ({"algorithm"} if refusal else set())
        assert names, f"a valid call raised {type(error).__name__}: {message}"
        assert message.strip(), f"{type(error).__name__} with an empty message"
        assert _named(message, names), (f"{type(error).__name__}: {message!r} names none of "
                                        f"{sorted(names)}")
        if expected.errors and not refusal and not expected.maybe:
            assert isinstance(error, tuple(expected.errors)), \
                f"{type(error).__name__}: {message}; expected one of {expected.errors}"
        return None
    assert not expected.definite, (f"accepted a call that should raise naming one of "
                                   f"{sorted(expected.definite)}")
    assert refusal is None, f"ran although the algorithm refuses the problem: {refusal}"
    event("computed")
    return result


def _axes(value, rank, default):
    """A keyword's per-axis values (docs/specification.md §2.1: int or one int per axis)."""
    if value is None:
        return (default,) * rank
    if isinstance(value, (int, np.integer)):
        return (int(value),) * rank
    return tuple(int(v) for v in value)


def spec_pads(auto_pad, extents, kernel, strides, dilations, pads_begin, pads_end):
    """docs/specification.md §2.3."""
    mode = {"notset": "none", "explicit": "none"}.get(auto_pad.lower(), auto_pad.lower())
    if mode == "none":
        return pads_begin, pads_end
    if mode == "valid":
        return (0,) * len(extents), (0,) * len(extents)
    begin, end = [], []
    for i, k, s, d in zip(extents, kernel, strides, dilations):
        total = max(0, (-(-i // s) - 1) * s + (k - 1) * d + 1 - i)
        b = total // 2 if mode == "same_upper" else total - total // 2
        begin.append(b)
        end.append(total - b)
    return tuple(begin), tuple(end)


def empty_axes(icg, ocg, input_shape, kernel_shape) -> Expected:
    """A zero-sized channel, spatial or kernel axis: a ValueError naming src or weights."""
    names = set()
    if icg == 0 or 0 in input_shape:
        names.add("src")
    if icg == 0 or ocg == 0 or 0 in kernel_shape:
        names.add("weights")
    return Expected(frozenset(names), errors=frozenset({ValueError})) if names else VALID


# --------------------------------------------------------------------------- geometry

@dataclass
class Geometry:
    """A forward problem's sizes and keywords, as drawn (keywords in the user's forms)."""

    rank: int
    batch: int
    groups: int
    icg: int
    ocg: int
    input_shape: tuple[int, ...]
    kernel_shape: tuple[int, ...]
    attributes: dict = field(default_factory=dict)

    @property
    def in_channels(self):
        return self.groups * self.icg

    @property
    def out_channels(self):
        return self.groups * self.ocg

    @property
    def data_format(self):
        return params.parse_data_format(self.attributes.get("data_format", "NXC"))

    @property
    def weights_format(self):
        return params.parse_weights_format(self.attributes.get("weights_format", "XIO"))

    def zero_sized(self) -> Expected:
        """Zero-sized axes other than the batch are refused, naming the array."""
        return empty_axes(self.icg, self.ocg, self.input_shape, self.kernel_shape)

    def expected(self) -> Expected:
        """docs/specification.md §1.2, §2.4, §2.6: pads that crop an axis to nothing, an
        empty output, or padding-mode pads beyond what the mode can reach are refused."""
        zero = self.zero_sized()
        if zero.definite:
            return zero
        a, r = self.attributes, self.rank
        strides = _axes(a.get("strides"), r, 1)
        dilations = _axes(a.get("dilations"), r, 1)
        stretch = _axes(a.get("data_dilations"), r, 1)
        extents = tuple(step * (i - 1) + 1 for step, i in zip(stretch, self.input_shape))
        auto_pad = a.get("auto_pad", "none")
        explicit = auto_pad.lower() in ("none", "notset", "explicit")
        begin, end = spec_pads(auto_pad, extents, self.kernel_shape, strides, dilations,
                               _axes(a.get("pads_begin") if explicit else None, r, 0),
                               _axes(a.get("pads_end") if explicit else None, r, 0))
        definite = set()
        for i, k, s, d, pb, pe in zip(extents, self.kernel_shape, strides, dilations,
                                      begin, end):
            padded = i + pb + pe
            if padded < 1:
                definite |= {"pads_begin", "pads_end"}
            elif (padded - (k - 1) * d - 1) // s + 1 < 1:
                definite |= {"src", "weights", "dilations", "pads_begin", "pads_end"}
        reach = {"reflect": 1, "circular": 0}.get(a.get("padding_mode", "zeros").lower())
        if reach is not None and any(p > i - reach for i, pb, pe in zip(extents, begin, end)
                                     for p in (pb, pe)):
            definite |= {"pads_begin", "pads_end"}
        return Expected(frozenset(definite),
                        errors=frozenset({ValueError} if definite else ()))

    def src_shape(self):
        return params.user_data_shape(self.batch, self.in_channels, self.input_shape,
                                  self.data_format)


def empty_axis():
    """Which axis is zero-sized, if any (one problem in eight)."""
    return weighted((7, st.just(None)), (1, st.sampled_from(
        ("batch", "in-channels", "out-channels", "spatial", "kernel"))))


def with_empty_axis(draw, empty, extents, kernel):
    """(extents, kernel) with one of them zero on one axis when ``empty`` says so."""
    extents, kernel = list(extents), list(kernel)
    if empty in ("spatial", "kernel"):
        target = extents if empty == "spatial" else kernel
        target[draw(st.integers(0, len(target) - 1))] = 0
    return tuple(extents), tuple(kernel)


def per_axis(draw, rank, values, default_ok=True):
    """A keyword as a user writes it: None (default), an int for every axis, or one per
    axis in a tuple, a list or a NumPy array. Returns (argument, per-axis values or None)."""
    forms = ("int", "tuple", "list", "array")
    form = draw(st.sampled_from(forms + ("none",) if default_ok else forms))
    if form == "none":
        return None, None
    if form == "int":
        value = draw(values)
        return value, (value,) * rank
    entries = tuple(draw(values) for _ in range(rank))
    argument = {"tuple": entries, "list": list(entries), "array": np.array(entries)}[form]
    return argument, entries


def _put(attributes, key, argument):
    if argument is not None:
        attributes[key] = argument


@st.composite
def forward_geometries(draw, extended=True):
    """A forward problem. Half of them fit (extents drawn above the smallest one that gives
    a non-empty output), half are drawn freely, degenerate values included; half have
    dense 3-kernels with unit strides and dilations (what Winograd runs)."""
    rank = draw(st.integers(1, 3))
    typical = {1: 7, 2: 5, 3: 3}[rank]
    empty = draw(empty_axis())
    batch = 0 if empty == "batch" else draw(st.integers(1, 2))
    if draw(weighted((3, st.just(False)), (1, st.just(True)))):  # depthwise, groups == IC
        groups, icg = draw(st.integers(2, 6)), 1
    else:
        groups, icg = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    icg = 0 if empty == "in-channels" else icg
    ocg = 0 if empty == "out-channels" else draw(weighted((8, st.integers(1, 2)),
                                                          (1, st.just(3))))
    fit = draw(st.booleans())
    attributes = {}
    if draw(st.booleans()):
        kernel = (3,) * rank
        strides = dilations = (1,) * rank
        _put(attributes, "strides", draw(st.sampled_from((None, 1, (1,) * rank))))
        _put(attributes, "dilations", draw(st.sampled_from((None, 1, [1] * rank))))
    else:
        big_kernel = (4, 6) if rank < 3 else (4, 4)
        kernel = tuple(draw(weighted((8, st.integers(1, 3)), (1, st.integers(*big_kernel))))
                       for _ in range(rank))
        argument, strides = per_axis(draw, rank, weighted((16, st.integers(1, 3)),
                                                          (2, st.integers(4, 9)),
                                                          (1, st.just(2**30))))
        _put(attributes, "strides", argument)
        strides = strides or (1,) * rank
        argument, dilations = per_axis(draw, rank, weighted(
            (8, st.integers(1, 3)), (1, st.integers(4, 9 if rank < 3 else 5))))
        _put(attributes, "dilations", argument)
        dilations = dilations or (1,) * rank
    auto_pad = draw(weighted((3, st.just(None)), (1, st.sampled_from(AUTO_PADS))))
    _put(attributes, "auto_pad", auto_pad)
    explicit = auto_pad is None or auto_pad.lower() in ("none", "notset", "explicit")
    stretch = (1,) * rank
    if extended:
        if draw(weighted((5, st.just(False)), (1, st.just(True)))):
            argument, stretch = per_axis(draw, rank, st.integers(1, 3), default_ok=False)
            _put(attributes, "data_dilations", argument)
        _put(attributes, "padding_mode", draw(weighted((6, st.just(None)),
                                                      (2, st.sampled_from(PADDING_MODES)))))
    mode = attributes.get("padding_mode", "zeros").lower()
    pads = weighted((8, st.integers(-2, 3)), (1, st.integers(-9, -3)), (1, st.integers(4, 8)))
    begin_argument, begin = per_axis(draw, rank, pads)
    end_argument, end = per_axis(draw, rank, pads)
    if begin and end and mode == "zeros" and draw(weighted((15, st.just(False)),
                                                           (1, st.just(True)))):
        # pads far beyond the input that cancel: the same padded extent, all of it padding
        begin_argument = begin = tuple(b + 2**40 for b in begin)
        end_argument = end = tuple(e - 2**40 for e in end)
    if explicit or draw(st.booleans()):  # ignored under auto_pad, which must not mind
        _put(attributes, "pads_begin", begin_argument)
        _put(attributes, "pads_end", end_argument)
    begin = begin if explicit and begin else (0,) * rank
    end = end if explicit and end else (0,) * rank
    extents = []
    for k, d, pb, pe, step in zip(kernel, dilations, begin, end, stretch):
        if not fit:
            extents.append(draw(st.integers(1, typical)))
            continue
        need = max(1, (k - 1) * d + 1 - (pb + pe if explicit else 0), 1 - pb - pe)
        if mode in ("reflect", "circular") and explicit:
            need = max(need, pb + 1, pe + 1)
        smallest = -(-(need - 1) // step) + 1   # L * (I - 1) + 1 >= need
        extents.append(smallest + draw(st.integers(0, typical)))
    groups_argument = draw(st.sampled_from((groups, groups, np.int64(groups)))) \
        if groups > 1 else draw(st.sampled_from((None, 1)))
    _put(attributes, "groups", groups_argument)
    _put(attributes, "data_format", draw(st.sampled_from((None, "NXC", "NCX", "ncx"))))
    _put(attributes, "weights_format", draw(st.sampled_from((None, "XIO", "OIX", "oix"))))
    extents, kernel = with_empty_axis(draw, empty, extents, kernel)
    return Geometry(rank, batch, groups, icg, ocg, extents, kernel, attributes)


# --------------------------------------------------------------------------- arrays

def strided_view(a):
    """Same values as ``a``, every other element of a larger buffer on each axis (the
    elements between hold 7, which a kernel reading them would show)."""
    big = np.full(tuple(2 * n for n in a.shape), 7, a.dtype)
    view = big[(slice(None, None, 2),) * a.ndim]
    view[...] = a
    return view


VIEWS = {
    "contiguous": lambda a: a,
    "fortran": np.asfortranarray,
    "negative-strides": reversed_view,
    "strided": strided_view,
    "permuted": permuted_view,
    "read-only": read_only,
}


def _cast(values: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "bfloat16":
        return values.astype(ml_dtypes.bfloat16)
    if dtype == "int16":  # a non-8-bit integer: computed as float64 (docs/specification.md §3.3)
        return np.rint(4 * values).astype(np.int16)
    return values.astype(dtype)


def _view(draw, array):
    name = draw(weighted((3, st.just("contiguous")), (1, st.sampled_from(list(VIEWS)))))
    return VIEWS[name](array), name


@dataclass
class Call:
    """One call's arguments: ``arrays`` (src, weights, bias), ``attributes`` (what the
    oracle takes too), ``keywords`` (algorithm, threads, precision, out, ...)."""

    geometry: Geometry
    arrays: dict
    attributes: dict
    keywords: dict
    expected: Expected
    views: dict = field(default_factory=dict)
    violation: Violation | None = None

    def describe(self) -> str:
        g = self.geometry
        arrays = {k: None if v is None else (getattr(v, "shape", None),
                                            str(getattr(v, "dtype", type(v).__name__)))
                  for k, v in self.arrays.items()}
        keywords = {k: (v.shape, str(v.dtype)) if isinstance(v, np.ndarray) else v
                    for k, v in self.keywords.items()}
        return (f"N={g.batch} G={g.groups} ICg={g.icg} OCg={g.ocg} I={g.input_shape} "
                f"K={g.kernel_shape} arrays={arrays} views={self.views} "
                f"attributes={self.attributes} keywords={keywords} violation={self.violation} "
                f"expected={self.expected}")


def float_arrays(draw, g: Geometry, icg=None, oc=None):
    """src, weights, bias (float, any dtype of FLOAT_TYPES) in the geometry's layouts."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    src_type = draw(weighted((4, st.sampled_from(("float32", "float64"))),
                             (2, st.sampled_from(FLOAT_TYPES))))
    weights_type = draw(weighted((3, st.just(src_type)), (1, st.sampled_from(FLOAT_TYPES))))
    icg = g.icg if icg is None else icg
    oc = g.out_channels if oc is None else oc
    src = rng.standard_normal((g.batch, g.in_channels, *g.input_shape))
    weights = rng.standard_normal((oc, icg, *g.kernel_shape))
    src = _cast(to_data_format(src, g.data_format), src_type)
    weights = _cast(to_weights_format(weights, g.weights_format), weights_type)
    bias = None
    if draw(st.booleans()):
        bias = _cast(rng.standard_normal(oc), draw(st.sampled_from((src_type, weights_type))))
    views = {}
    src, views["src"] = _view(draw, src)
    weights, views["weights"] = _view(draw, weights)
    if bias is not None:
        bias, views["bias"] = _view(draw, bias)
    return dict(src=src, weights=weights, bias=bias), views


def snapshot(*values):
    """Everything about the arrays that a call must leave unchanged."""
    state = []
    for value in values:
        if isinstance(value, np.ndarray):
            base = value.base if isinstance(value.base, np.ndarray) else None
            state.append((value.shape, value.strides, value.dtype.str, value.flags.writeable,
                          np.array(value).tobytes(),
                          None if base is None else np.array(base).tobytes()))
    return state


def _problem_or_none(arrays, attributes):
    try:
        return problem_of(arrays["src"], arrays["weights"], arrays.get("bias"), attributes)
    except (ValueError, TypeError):
        return None


def _out_buffer(draw, shape, dtype, fill=np.nan):
    kind = draw(st.sampled_from(("c-contiguous", "fortran", "strided", "negative-strides")))
    if kind == "fortran":
        return np.asfortranarray(np.full(shape, fill, dtype))
    if kind == "strided":
        return np.full(tuple(2 * n for n in shape), fill, dtype)[(slice(None, None, 2),)
                                                                  * len(shape)]
    if kind == "negative-strides":
        return np.full(shape, fill, dtype)[..., ::-1]
    return np.full(shape, fill, dtype)


# --------------------------------------------------------------------------- violations

@dataclass(frozen=True)
class Violation:
    """One argument made invalid: ``apply(call)`` changes the call, which must then raise
    ``error`` naming one of ``names``. ``entries``: the entry points that take it."""

    label: str
    apply: Callable
    error: type
    names: frozenset[str]
    entries: frozenset[str]
    when: Callable = lambda call: True

    def __repr__(self):
        return f"Violation({self.label})"


ALL_ENTRIES = frozenset({"convolve", "plan", "select", "backward_data", "backward_weights"})
RUNS = frozenset({"convolve", "plan", "backward_data"})
DATA = frozenset({"convolve", "plan"})


def _explicit(call):
    auto_pad = call.attributes.get("auto_pad", "none").lower()
    return auto_pad in ("none", "notset", "explicit")


def _floating(call):
    return np.dtype(call.arrays["src"].dtype).itemsize > 1


def _setting(key, value, error=ValueError, entries=ALL_ENTRIES, where="attributes",
             names=None, when=lambda call: True):
    def apply(call):
        getattr(call, where)[key] = value(call.geometry) if callable(value) else value
    label = f"{key}={'<per rank>' if callable(value) else repr(value)}"
    return Violation(label, apply, error, frozenset(names or {key}), entries, when)


def _replace_array(name, make, error, names, entries=DATA, when=lambda call: True):
    def apply(call):
        call.arrays[name] = make(call)
    return Violation(f"{name}:{make.__name__}", apply, error, frozenset(names), entries, when)


def _bias_too_long(call):
    return np.zeros(call.geometry.out_channels + 1, np.float32)


def _bias_2d(call):
    return np.zeros((1, call.geometry.out_channels), np.float32)


def _complex_src(call):
    return np.asarray(call.arrays["src"]).astype(np.complex64)


def _object_weights(call):
    return np.asarray(call.arrays["weights"], dtype=np.float64).astype(object)


def _int8_src(call):
    return np.zeros(np.shape(call.arrays["src"]), np.int8)


def _weights_channel_too_many(call):
    g = call.geometry
    weights = np.zeros((g.out_channels, g.icg + 1, *g.kernel_shape), np.float32)
    return to_weights_format(weights, g.weights_format)


def _out(make, label, error=ValueError):
    def apply(call):
        problem = _problem_or_none(call.arrays, call.attributes)
        shape = (1,) if problem is None else problem.dst_shape
        dtype = np.float32 if problem is None else problem.output_dtype
        call.keywords["out"] = make(shape, dtype)
    return Violation(f"out:{label}", apply, error, frozenset({"out"}),
                     frozenset({"convolve", "plan"}))


def _read_only_out(shape, dtype):
    out = np.zeros(shape, dtype)
    out.flags.writeable = False
    return out


FORWARD_VIOLATIONS = [
    _setting("groups", 0), _setting("groups", -2), _setting("groups", 2.0, TypeError),
    _setting("groups", True, TypeError),
    _setting("strides", 0), _setting("strides", lambda g: (1,) * (g.rank + 1)),
    _setting("strides", 1.5, TypeError), _setting("strides", "2", TypeError),
    _setting("dilations", lambda g: [-1] * g.rank), _setting("dilations", 0),
    _setting("pads_begin", lambda g: (0,) * (g.rank + 1), when=_explicit),
    _setting("pads_end", lambda g: (None,) * g.rank, TypeError, when=_explicit),
    _setting("data_format", "NHWC"), _setting("data_format", None, TypeError),
    _setting("weights_format", "OIHW"), _setting("auto_pad", "same"),
    _setting("auto_pad", 1, TypeError),
    _setting("data_dilations", 0, entries=DATA | {"select"}),
    _setting("data_dilations", 2.0, TypeError, entries=DATA | {"select"}),
    _setting("padding_mode", "mirror", entries=DATA | {"select"}),
    _setting("dst_dtype", "int8", entries=DATA | {"select"}, when=_floating),
    _setting("threads", 0, where="keywords"),
    _setting("threads", -100000, where="keywords"),
    _setting("threads", 1.5, TypeError, where="keywords"),
    _setting("precision", "low", where="keywords",
             entries=frozenset({"convolve", "plan", "select", "backward_data"})),
    _setting("algorithm", "no_such_algorithm", where="keywords", entries=RUNS),
    _setting("algorithm", None, TypeError, where="keywords", entries=RUNS),
    _setting("src_zero_point", 3, where="keywords", entries=DATA),
    _setting("output_scale", 0.5, where="keywords", entries=DATA),
    _setting("post_ops", ["relu6"], where="keywords", entries=DATA),
    _setting("post_ops", "relu", TypeError, where="keywords", entries=DATA),
    _setting("post_ops", [("clip", 1.0)], where="keywords", entries=DATA),
    _replace_array("bias", _bias_too_long, ValueError, {"bias"},
                   entries=frozenset({"convolve", "plan", "select"})),
    _replace_array("bias", _bias_2d, ValueError, {"bias"},
                   entries=frozenset({"convolve", "plan", "select"})),
    _replace_array("src", _complex_src, TypeError, {"src"},
                   entries=frozenset({"convolve", "plan", "select"})),
    _replace_array("weights", _object_weights, TypeError, {"weights"},
                   entries=frozenset({"convolve", "plan", "select"})),
    _replace_array("src", _int8_src, TypeError, {"src", "weights"},
                   entries=frozenset({"convolve", "plan", "select"}), when=_floating),
    _replace_array("weights", _weights_channel_too_many, ValueError, {"weights"},
                   entries=frozenset({"convolve", "plan", "select", "backward_data"})),
    _out(lambda shape, dtype: np.zeros(tuple(n + 1 for n in shape), dtype), "shape"),
    _out(lambda shape, dtype: np.zeros(shape, np.complex64), "dtype"),
    _out(_read_only_out, "read-only"),
    _out(lambda shape, dtype: np.zeros(shape, dtype).tolist(), "list", TypeError),
]


def violations(entry, call: Call):
    """None most of the time; else a violation that ``entry`` takes and ``call`` allows."""
    usable = [v for v in FORWARD_VIOLATIONS if entry in v.entries and v.when(call)]
    return weighted((5, st.just(None)), (1, st.sampled_from(usable)))


def apply_violation(call: Call, violation: Violation | None) -> None:
    if violation is None:
        return
    violation.apply(call)
    call.violation = violation
    call.expected = call.expected | Expected(violation.names,
                                             errors=frozenset({violation.error}))


# --------------------------------------------------------------------------- checks

def chosen_algorithm(call: Call, algorithm: str) -> str:
    """The algorithm whose tolerance applies: the forced one, or auto's pick."""
    if algorithm != "auto":
        return algorithm
    return convlab.select_algorithm(
        call.arrays["src"], call.arrays["weights"], call.arrays["bias"],
        threads=call.keywords.get("threads"), precision=call.keywords.get("precision",
                                                                          "default"),
        **call.attributes)


def forced_refusal(problem, algorithm) -> str | None:
    if problem is None or algorithm in ("auto", "tune"):
        return None
    try:
        return registry.get_algorithm(algorithm).supports(problem)
    except (ValueError, TypeError, KeyError):  # not registered: the call says so
        return None


def check_half(got, arrays, attributes, algorithm, problem):
    """tests/test_half.py's bound: the float32 bound, then one rounding to the half type."""
    from tests.test_half import half_bound

    src, weights, bias = arrays["src"], arrays["weights"], arrays["bias"]
    assert got.dtype == problem.output_dtype, (got.dtype, problem.output_dtype)
    expected = convlab.reference.convolve(src, weights, bias, **attributes)
    magnitude = convlab.reference.convolve(
        np.abs(np.asarray(src, np.float64)), np.abs(np.asarray(weights, np.float64)),
        None if bias is None else np.abs(np.asarray(bias, np.float64)), **attributes)
    assert got.shape == expected.shape, (got.shape, expected.shape)
    allowed = half_bound(algorithm, problem.output_dtype.name, problem, expected, magnitude)
    error = np.abs(got.astype(np.float64) - expected)
    bad = ~(error <= allowed)
    assert not bad.any(), (f"{algorithm}: {int(bad.sum())} of {bad.size} beyond the half "
                           f"bound; {problem.describe()}")


def check_forward(got, call: Call, algorithm: str, out=None) -> None:
    """A forward result against the float64 oracle within ``algorithm``'s tolerance."""
    problem = problem_of(call.arrays["src"], call.arrays["weights"], call.arrays["bias"],
                         call.attributes)
    if out is not None:
        assert got is out, "out= was given but another array came back"
    else:
        assert isinstance(got, np.ndarray) and got.flags.c_contiguous
    assert got.dtype.isnative or got.dtype.kind == "V", got.dtype
    if problem.result_dtype is not None and params.is_half(problem.result_dtype):
        check_half(got, call.arrays, call.attributes, algorithm, problem)
    else:
        assert_matches_reference(got, call.arrays["src"], call.arrays["weights"],
                                 call.arrays["bias"], call.attributes, algorithm)


def assert_close(got, expected, magnitude, length, dtype, algorithm, label):
    """The suite's bound (:class:`helpers.Tolerance`) for results the oracle of this module
    computes: eps(dtype) * factor * sqrt(length) times each element's magnitude."""
    bound = tolerance(algorithm)
    dtype = np.dtype(dtype)
    rtol = bound.factor(dtype) * np.finfo(dtype).eps * math.sqrt(max(length, 1))
    if bound.scale == "output" and magnitude.size:
        magnitude = np.full_like(magnitude, magnitude.max())
    assert got.shape == expected.shape, (label, got.shape, expected.shape)
    assert got.dtype == dtype, (label, got.dtype, dtype)
    error = np.abs(got.astype(np.float64) - expected)
    bad = ~(error <= rtol * magnitude)
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        raise AssertionError(f"{label}: {int(bad.sum())} of {bad.size} differ; first at "
                             f"{where}: got {got[where]!r}, expected {expected[where]!r}, "
                             f"allowed {rtol * magnitude[where]:.3g}")


# --------------------------------------------------------------------------- convolve

@st.composite
def forward_calls(draw, entry="convolve", extended=True, violate=True, eight_bit=False):
    """A forward call for ``entry``; ``eight_bit``: sometimes with 8-bit src and weights."""
    g = draw(forward_geometries(extended=extended))
    arrays, views = float_arrays(draw, g)
    if eight_bit and draw(st.booleans()):
        arrays["src"] = np.zeros(g.src_shape(), draw(st.sampled_from((np.uint8, np.int8))))
        arrays["weights"] = np.zeros(np.shape(arrays["weights"]), np.int8)
    keywords = {}
    _put(keywords, "threads", draw(st.sampled_from(THREADS)))
    _put(keywords, "precision", draw(st.sampled_from((None,) + PRECISIONS)))
    call = Call(g, arrays, dict(g.attributes), keywords, g.expected(), views)
    if violate:
        apply_violation(call, draw(violations(entry, call)))
    return call


def _with_out(draw, problem) -> np.ndarray | None:
    """Sometimes an out= buffer for the problem's dst, in any memory layout."""
    if problem is None or not draw(st.booleans()):
        return None
    return _out_buffer(draw, problem.dst_shape, problem.output_dtype)


@pytest.mark.parametrize("algorithm", ["auto"] + ALGORITHMS)
@fuzz_settings()
@given(call=forward_calls(), data=st.data())
def test_convolve(algorithm, call, data):
    problem = _problem_or_none(call.arrays, call.attributes)
    keywords = dict(call.keywords)
    keywords.setdefault("algorithm", algorithm)
    if "out" not in keywords:
        keywords["out"] = _with_out(data.draw, problem)
    note(call.describe())
    before = snapshot(*call.arrays.values())
    with watchdog():
        got = outcome(lambda: convlab.convolve(**call.arrays, **call.attributes, **keywords),
                      call.expected, forced_refusal(problem, keywords["algorithm"]))
    assert snapshot(*call.arrays.values()) == before, "an input was modified"
    if got is not None:
        check_forward(got, call, chosen_algorithm(call, algorithm), keywords["out"])


# --------------------------------------------------------------------------- plans

# Violations a plan can only see when it is called: they concern the src or out.
_CALL_TIME = ("src:", "out:")


@fuzz_settings()
@given(call=forward_calls(entry="plan"), data=st.data())
def test_plan(call, data):
    """A plan built once and called on up to three srcs (other batch and spatial extents,
    the same channels); each result matches the oracle, and a repeated call gives the
    same bits. Attributes that suit some src never fail the construction."""
    g = call.geometry
    keywords = dict(call.keywords)
    out = keywords.pop("out", None)
    keywords.setdefault("algorithm", data.draw(st.sampled_from(["auto"]
                                                               + convlab.algorithms())))
    weights, bias = call.arrays["weights"], call.arrays["bias"]
    note(call.describe())
    before = snapshot(*call.arrays.values())
    with watchdog():
        plan = outcome(lambda: convlab.Convolution(weights, bias, **call.attributes,
                                                   **keywords),
                       Expected(maybe=call.expected.definite | call.expected.maybe))
    assert snapshot(*call.arrays.values()) == before, "building the plan modified an input"
    if plan is None:
        violation = call.violation
        assert (violation is not None and not violation.label.startswith(_CALL_TIME)) \
            or (g.icg == 0 or g.ocg == 0 or 0 in g.kernel_shape), \
            "the plan refused attributes that suit some src"
        return
    cases = [call]
    if call.violation is None:
        for _ in range(data.draw(st.integers(0, 2))):
            other = Geometry(g.rank, data.draw(st.integers(0, 2)), g.groups, g.icg, g.ocg,
                             tuple(data.draw(st.integers(max(1, i - 1), i + 2))
                                   for i in g.input_shape), g.kernel_shape, g.attributes)
            arrays, views = float_arrays(data.draw, other)
            arrays.update(weights=weights, bias=bias)
            cases.append(Call(other, arrays, call.attributes, keywords, other.expected(),
                              views))
    for case in cases:
        problem = _problem_or_none(case.arrays, case.attributes)
        if case is not call or out is None:
            out = _with_out(data.draw, problem) if case.expected == VALID else None
        src = case.arrays["src"]
        src_before = snapshot(src)
        with watchdog():
            got = outcome(lambda: plan(src, out=out), case.expected,  # noqa: B023 (called now)
                          forced_refusal(problem, keywords["algorithm"]))
            again = None if got is None or out is not None else plan(src)
        assert snapshot(src) == src_before, "a plan call modified src"
        if got is None:
            continue
        check_forward(got, case, plan.algorithm_for(src), out)
        if again is not None:
            assert np.array_equal(got, again, equal_nan=True), "a repeated call differs"
    assert snapshot(*call.arrays.values()) == before, "a plan call modified an input"


# --------------------------------------------------------------------------- select, explain

class ShapeOnly:
    """What select_algorithm and explain accept instead of an array."""

    def __init__(self, shape, dtype):
        self.shape, self.dtype = tuple(shape), np.dtype(dtype)


def _shape_only(value):
    return ShapeOnly(value.shape, value.dtype) if isinstance(value, np.ndarray) else value


@fuzz_settings()
@given(call=forward_calls(entry="select", eight_bit=True), data=st.data())
def test_select_algorithm_and_explain(call, data):
    """The pick is a registered algorithm that supports the problem, the one explain names,
    and within precision="highest" a plain sum; explain prints and serialises."""
    arguments = dict(call.arrays)
    if data.draw(st.booleans()):
        arguments = {k: _shape_only(v) for k, v in arguments.items()}
    keywords = {k: v for k, v in call.keywords.items() if k in ("threads", "precision")}
    note(call.describe())
    before = snapshot(*call.arrays.values())
    with watchdog():
        name = outcome(lambda: convlab.select_algorithm(**arguments, **call.attributes,
                                                        **keywords), call.expected)
        explanation = outcome(lambda: convlab.explain(**arguments, **call.attributes,
                                                      **keywords), call.expected)
    assert snapshot(*call.arrays.values()) == before, "an input was modified"
    assert (name is None) == (explanation is None), "select_algorithm and explain disagree"
    if name is None:
        return
    problem = problem_of(call.arrays["src"], call.arrays["weights"], call.arrays["bias"],
                         call.attributes)
    if problem.is_quantized:
        assert name in INT8.names() and INT8.get(name).supports(problem) is None
    else:
        assert name in convlab.algorithms()
        chosen = registry.get_algorithm(name)
        assert chosen.supports(problem) is None, name
        if keywords.get("precision") == "highest":
            assert chosen.relative_error_for(problem) is None, name
    assert explanation.choice == name
    assert f"choice: {name}" in str(explanation)
    assert json.loads(json.dumps(explanation.to_dict(), default=str))["choice"] == name


# --------------------------------------------------------------------------- post-ops

TAME_ELTWISE = [
    st.just("relu"), st.tuples(st.just("relu"), st.floats(-1, 1)), st.just("tanh"),
    st.just("sigmoid"), st.tuples(st.just("elu"), st.floats(0, 2)), st.just("gelu_erf"),
    st.just("gelu_tanh"), st.tuples(st.just("swish"), st.floats(0.25, 2)),
    st.tuples(st.just("clip"), st.floats(-2, 0), st.floats(0, 2)),
    st.tuples(st.just("linear"), st.floats(-2, 2), st.floats(-1, 1)), st.just("abs"),
]


@st.composite
def post_op_chains(draw, problem, exact=False):
    """A list of post-ops for ``problem``: eltwise ones that keep errors in proportion,
    binary operands broadcast per channel, per pixel, as a scalar or in full, sums, and at
    most one amplifying op at the end (exp of a clipped value, square, log of a value of at
    least 2, where its condition number is below 1.5). ``exact``:
    only ops that float32 evaluates identically however written (8-bit problems)."""
    shape, axis = problem.dst_shape, 1 if problem.data_format == "NCX" else len(
        problem.dst_shape) - 1
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))

    def operand():
        form = draw(st.sampled_from(("channel", "pixel", "scalar", "full", "python")))
        if form == "python":
            return float(draw(st.floats(-2, 2)))
        if form == "scalar":
            return np.float32(draw(st.floats(-2, 2)))
        if form == "full":
            target = shape
        else:
            target = [1] * len(shape)
            if form == "channel":
                target[axis] = shape[axis]
            else:
                target = list(shape)
                target[axis] = 1
        return rng.standard_normal(tuple(target)).astype(draw(st.sampled_from(
            ("float32", "float64"))))

    eltwise = [st.just("relu"), st.tuples(st.just("relu"), st.floats(-1, 1)),
               st.tuples(st.just("clip"), st.floats(-2, 0), st.floats(0, 2)),
               st.tuples(st.just("linear"), st.floats(-2, 2), st.floats(-1, 1)),
               st.just("abs")] if exact else TAME_ELTWISE
    ops = []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(("eltwise", "eltwise", "binary", "sum")))
        if kind == "eltwise":
            ops.append(draw(st.one_of(eltwise)))
        elif kind == "binary":
            ops.append((draw(st.sampled_from(("add", "mul", "max", "min"))), operand()))
        else:
            ops.append(draw(st.sampled_from(("sum", ("sum", draw(st.floats(-2, 2)))))))
    if not exact and draw(weighted((3, st.just(False)), (1, st.just(True)))):
        last = draw(st.sampled_from(("exp", "square", "log")))
        ops += [("clip", -4.0, 4.0), "exp"] if last == "exp" else \
            [("abs",), ("linear", 1.0, 2.0), "log"] if last == "log" else ["square"]
    return ops


def describe_post_ops(ops):
    return [(op[0], op[1].shape, str(op[1].dtype)) if isinstance(op, tuple) and len(op) == 2
            and isinstance(op[1], np.ndarray) else op for op in ops or ()]


def _ncx(array, problem):
    array = np.asarray(array)
    return array if problem.data_format == "NCX" else np.moveaxis(array, -1, 1)


def unfused(plain, ops, problem, dst_before):
    """The oracle's post-op formulas on a plain result, in its own dtype (so an overflow
    to inf happens where the kernel's does): the plain result, then the value after each
    post-op, the last being the result, in the user's layout."""
    from convlab.ops import postops

    before = None if dst_before is None else _ncx(dst_before, problem)
    stages = [_ncx(plain, problem).copy()]
    for op in postops.parse(ops, problem, dst_before):
        stages.append(convlab.reference.apply_post_ops(stages[-1], (op,), before))
    if problem.data_format == "NXC":
        stages = [np.moveaxis(stage, 1, -1) for stage in stages]
    return stages


# tests/test_post_ops.py: fused chains against the same algorithm's plain result followed
# by the output stage, RTOL[dtype] * 8 relative to each value and to the largest one.
POST_OP_RTOL = {"float32": 2e-6 * 8, "float64": 1e-13 * 8}


@fuzz_settings()
@given(call=forward_calls(entry="convolve", violate=False), data=st.data())
def test_post_ops(call, data):
    """Post-op chains (fused by the kernels where they can) equal the plain result of the
    same algorithm followed by the oracle's formulas; the plain result matches the oracle."""
    for name in ("src", "weights", "bias"):  # float32/float64 results (half: test_half)
        value = call.arrays[name]
        if value is not None and np.dtype(value.dtype).name not in ("float32", "float64"):
            call.arrays[name] = np.asarray(value, np.float32)
    problem = _problem_or_none(call.arrays, call.attributes)
    if problem is None or call.expected != VALID:
        event("not a valid problem")
        return
    algorithm = data.draw(st.sampled_from(["auto"] + convlab.algorithms()))
    if forced_refusal(problem, algorithm):
        event("the algorithm refuses the problem")
        return
    event("computed")
    ops = data.draw(post_op_chains(problem))
    dtype = problem.dtype
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    before_values = rng.standard_normal(problem.dst_shape).astype(dtype)
    needs_out = any(op == "sum" or op[0] == "sum" for op in ops)
    out = None
    if needs_out or data.draw(st.booleans()):
        out = _out_buffer(data.draw, problem.dst_shape, dtype)
        out[...] = before_values
    keywords = dict(call.keywords, algorithm=algorithm)
    operands = [op[1] for op in ops if isinstance(op, tuple) and len(op) == 2
                and isinstance(op[1], np.ndarray)]
    note(f"{call.describe()} post_ops={describe_post_ops(ops)}")
    before = snapshot(*call.arrays.values(), *operands)
    plan = data.draw(st.booleans())
    with watchdog():
        if plan:
            run = convlab.Convolution(call.arrays["weights"], call.arrays["bias"], post_ops=ops,
                                      **call.attributes, **keywords)
            got = run(call.arrays["src"], out=out)
            chosen = run.algorithm_for(call.arrays["src"])
        else:
            got = convlab.convolve(**call.arrays, **call.attributes, post_ops=ops, out=out,
                                   **keywords)
            chosen = chosen_algorithm(call, algorithm)
        plain = convlab.convolve(**call.arrays, **call.attributes,
                                 **dict(keywords, algorithm=chosen))
    assert snapshot(*call.arrays.values(), *operands) == before, "an input was modified"
    if out is not None:
        assert got is out
    check_forward(plain, call, chosen)
    stages = unfused(plain, ops, problem, before_values if needs_out else None)
    expected = stages[-1]
    rtol = POST_OP_RTOL[dtype.name]
    # rounding at any step is relative to the values at that step: a chain that cancels
    # (sigmoid near 0.5, then linear(2, -1)) keeps the absolute error of the larger ones
    scale = max((np.abs(stage[np.isfinite(stage)]).max(initial=0.0) for stage in stages),
                default=0.0)
    np.testing.assert_allclose(got, expected, rtol=rtol, atol=rtol * scale,
                               err_msg=f"{chosen} {'plan' if plan else 'convolve'} {ops}")


# --------------------------------------------------------------------------- int8

def _integers(rng, dtype, shape):
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, shape, dtype=dtype)


@st.composite
def quantized_calls(draw):
    g = draw(forward_geometries())
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    src_type = draw(st.sampled_from((np.uint8, np.int8)))
    weights_type = draw(weighted((3, st.just(np.int8)), (1, st.just(np.uint8))))
    src = to_data_format(_integers(rng, src_type, (g.batch, g.in_channels, *g.input_shape)),
                         g.data_format)
    weights = to_weights_format(_integers(rng, weights_type,
                                          (g.out_channels, g.icg, *g.kernel_shape)),
                                g.weights_format)
    oc, ic = g.out_channels, g.in_channels
    bias = draw(st.sampled_from((None, "int32", "float32")))
    if bias == "int32":
        bias = rng.integers(-2**20, 2**20, oc).astype(np.int32)
    elif bias == "float32":
        bias = rng.standard_normal(oc).astype(np.float32) * 100
    views = {}
    src, views["src"] = _view(draw, src)
    weights, views["weights"] = _view(draw, weights)
    attributes = dict(g.attributes)
    dst_dtype = draw(st.sampled_from((None, "int8", "uint8", "int32", "float32",
                                      np.dtype(np.uint8))))
    _put(attributes, "dst_dtype", dst_dtype)
    keywords = {}
    expected = g.expected()

    def zero_point(dtype, channels):
        info = np.iinfo(dtype)
        form = draw(st.sampled_from((None, "scalar", "channels", "one")))
        if form == "scalar":
            return int(draw(st.integers(int(info.min), int(info.max))))
        if form in ("channels", "one"):
            return _integers(rng, dtype, (channels if form == "channels" else 1,))
        return None

    _put(keywords, "src_zero_point", zero_point(src_type, ic))
    _put(keywords, "weights_zero_point", zero_point(weights_type, oc))
    scale = draw(st.sampled_from((None, "scalar", "channels")))
    if scale == "scalar":
        keywords["output_scale"] = draw(st.floats(1e-4, 0.5))
    elif scale == "channels":
        keywords["output_scale"] = rng.uniform(1e-4, 0.5, oc).astype(np.float32)
    dst_type = np.dtype(dst_dtype or "int32")
    _put(keywords, "dst_zero_point", zero_point(dst_type if dst_type.kind in "iu"
                                                else np.int32, oc))
    if draw(weighted((6, st.just(False)), (1, st.just(True)))):
        broken = draw(st.sampled_from(("src_zero_point", "weights_zero_point",
                                       "dst_zero_point", "output_scale", "dst_dtype")))
        if broken == "dst_dtype":
            attributes["dst_dtype"] = "float64"
        elif broken == "output_scale":
            keywords["output_scale"] = float("inf")
        else:
            keywords[broken] = 1000  # outside every 8-bit range
            if broken == "dst_zero_point" and dst_type in (np.int32, np.float32):
                keywords[broken] = 2**40
        expected = expected | Expected(frozenset({broken}), errors=frozenset({ValueError}))
    _put(keywords, "threads", draw(st.sampled_from(THREADS)))
    algorithm = draw(weighted((4, st.sampled_from(("auto", *INT8.names()))),
                              (1, st.sampled_from(convlab.algorithms()))))
    keywords["algorithm"] = algorithm
    return Call(g, dict(src=src, weights=weights, bias=bias), attributes, keywords, expected,
                views)


@fuzz_settings()
@given(call=quantized_calls(), data=st.data())
def test_int8(call, data):
    """8-bit problems (ConvInteger / QLinearConv) equal the oracle exactly, zero points,
    scales, biases, exact post-ops, out= and plans included."""
    problem = _problem_or_none(call.arrays, call.attributes)
    algorithm = call.keywords["algorithm"]
    refusal = None
    if problem is not None:
        refusal = ("not an 8-bit algorithm" if algorithm not in ("auto", *INT8.names())
                   else None if algorithm == "auto" else INT8.get(algorithm).supports(problem))
    ops, out, before_values = None, None, None
    if problem is not None and data.draw(st.booleans()):
        ops = data.draw(post_op_chains(problem, exact=True))
    if problem is not None and (data.draw(st.booleans()) or (ops and any(
            op == "sum" or op[0] == "sum" for op in ops))):
        rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
        dtype = problem.output_dtype
        before_values = (rng.standard_normal(problem.dst_shape) * 50).astype(dtype) \
            if dtype.kind == "f" else _integers(rng, dtype, problem.dst_shape)
        out = _out_buffer(data.draw, problem.dst_shape, dtype, fill=0)
        out[...] = before_values
    keywords = dict(call.keywords)
    quantization = {k: v for k, v in keywords.items() if k in (
        "src_zero_point", "weights_zero_point", "output_scale", "dst_zero_point")}
    plan = data.draw(st.booleans())
    note(f"{call.describe()} post_ops={describe_post_ops(ops)} plan={plan}")
    before = snapshot(*call.arrays.values(), *(v for v in quantization.values()))
    with watchdog():
        if plan:
            def run():
                made = convlab.Convolution(call.arrays["weights"], call.arrays["bias"],
                                           post_ops=ops, **call.attributes, **keywords)
                return made(call.arrays["src"], out=out)
        else:
            def run():
                return convlab.convolve(**call.arrays, **call.attributes, post_ops=ops,
                                        out=out, **keywords)
        got = outcome(run, call.expected, refusal)
    assert snapshot(*call.arrays.values(), *(v for v in quantization.values())) == before
    if got is None:
        return
    expected = convlab.reference.convolve(**call.arrays, **call.attributes, **quantization,
                                          post_ops=ops, dst_before=before_values)
    if out is not None:
        assert got is out
    assert got.dtype == expected.dtype, (got.dtype, expected.dtype)
    np.testing.assert_array_equal(got, expected)


# --------------------------------------------------------------------------- transposed

@dataclass
class TransposeCall:
    arrays: dict
    attributes: dict
    keywords: dict
    expected: Expected
    label: str


@st.composite
def transpose_calls(draw):
    rank = draw(st.integers(1, 3))
    typical = {1: 5, 2: 3, 3: 2}[rank]
    empty = draw(empty_axis())
    batch = 0 if empty == "batch" else draw(st.integers(1, 2))
    groups = draw(st.integers(1, 3))
    icg = 0 if empty == "in-channels" else draw(st.integers(1, 3))
    ocg = 0 if empty == "out-channels" else draw(weighted((8, st.integers(1, 2)),
                                                          (1, st.just(3))))
    dense3 = draw(st.booleans())  # 3-kernels, dilation 1: what forward Winograd runs
    extents, kernel = with_empty_axis(draw, empty, tuple(
        draw(st.integers(1, typical)) for _ in range(rank)), (3,) * rank if dense3 else tuple(
        draw(weighted((8, st.integers(1, 3)), (1, st.integers(4, 5)))) for _ in range(rank)))
    attributes = {}
    argument, strides = per_axis(draw, rank, weighted((6, st.integers(1, 3)),
                                                      (1, st.integers(4, 6))))
    _put(attributes, "strides", argument)
    strides = strides or (1,) * rank
    dilations = (1,) * rank
    if not dense3:
        argument, dilations = per_axis(draw, rank, weighted((6, st.integers(1, 2)),
                                                            (1, st.integers(3, 5))))
        _put(attributes, "dilations", argument)
        dilations = dilations or (1,) * rank
    definite = set()
    # output_padding < max(stride, dilation); sometimes not
    room = [max(s, d) for s, d in zip(strides, dilations)]
    padding_form = draw(weighted((4, st.just(None)), (2, st.just("valid")),
                                 (1, st.just("too-large"))))
    output_padding = (0,) * rank
    if padding_form == "valid":
        output_padding = tuple(draw(st.integers(0, m - 1)) for m in room)
        attributes["output_padding"] = output_padding if draw(st.booleans()) else \
            list(output_padding)
    elif padding_form == "too-large":
        output_padding = tuple(draw(st.integers(m, m + 1)) for m in room)
        attributes["output_padding"] = output_padding
        definite.add("output_padding")
    auto_pad = draw(weighted((4, st.just(None)), (1, st.sampled_from(AUTO_PADS))))
    _put(attributes, "auto_pad", auto_pad)
    mode = {"notset": "none", "explicit": "none"}.get((auto_pad or "none").lower(),
                                                      (auto_pad or "none").lower())
    full = [s * (i - 1) + (k - 1) * d + 1 + op for i, k, s, d, op in
            zip(extents, kernel, strides, dilations, output_padding)]
    pads = weighted((6, st.integers(-2, 2)), (1, st.integers(3, 8)))
    if draw(weighted((4, st.just(False)), (1, st.just(True)))):
        shape = tuple(max(1, f + draw(st.integers(-2, 3))) for f in full)
        attributes["output_shape"] = shape if draw(st.booleans()) else list(shape)
        if mode == "valid" and tuple(shape) != tuple(full):
            definite.add("output_shape")
        outputs = shape
    else:
        begin_argument, begin = per_axis(draw, rank, pads)
        end_argument, end = per_axis(draw, rank, pads)
        if mode == "none" or draw(st.booleans()):
            _put(attributes, "pads_begin", begin_argument)
            _put(attributes, "pads_end", end_argument)
        if mode in ("same_upper", "same_lower"):
            outputs = [i * s for i, s in zip(extents, strides)]
        elif mode == "valid":
            outputs = full
        else:
            outputs = [f - b - e for f, b, e in zip(full, begin or (0,) * rank,
                                                    end or (0,) * rank)]
        if any(o < 1 for o in outputs):
            definite |= {"pads_begin", "pads_end"}
    empty = empty_axes(icg, ocg, extents, kernel)
    data_format = draw(st.sampled_from(("NXC", "NCX")))
    weights_format = draw(st.sampled_from(("XOI", "IOX", "iox")))
    _put(attributes, "groups", groups if groups > 1 or draw(st.booleans()) else None)
    attributes.update(data_format=data_format, weights_format=weights_format)
    if draw(st.booleans()):
        attributes.pop("data_format") if data_format == "NXC" else None
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    dtype = draw(weighted((4, st.sampled_from(("float32", "float64"))),
                          (1, st.sampled_from(FLOAT_TYPES))))
    src = _cast(to_data_format(rng.standard_normal((batch, groups * icg, *extents)),
                               data_format), dtype)
    iox = rng.standard_normal((groups * icg, ocg, *kernel))
    if weights_format == "XOI":
        iox = np.moveaxis(iox, (0, 1), (-1, -2))
    weights = _cast(np.ascontiguousarray(iox), dtype)
    bias = _cast(rng.standard_normal(groups * ocg), dtype) if draw(st.booleans()) else None
    views = {}
    src, views["src"] = _view(draw, src)
    weights, views["weights"] = _view(draw, weights)
    keywords = {}
    _put(keywords, "threads", draw(st.sampled_from(THREADS)))
    _put(keywords, "precision", draw(st.sampled_from((None,) + PRECISIONS)))
    keywords["algorithm"] = draw(st.sampled_from(TRANSPOSE_ALGORITHMS
                                                 + tuple(convlab.algorithms())))
    expected = empty | Expected(frozenset(definite),
                                errors=frozenset({ValueError} if definite else ()))
    label = (f"N={batch} G={groups} ICg={icg} OCg={ocg} I={extents} K={kernel} "
             f"dtype={dtype} views={views} {attributes} {keywords}")
    return TransposeCall(dict(src=src, weights=weights, bias=bias), attributes, keywords,
                         expected, label)


def _transpose_algorithm(tp, algorithm, threads, precision) -> str:
    """Whose tolerance applies: col2im's plain sums, the forced forward algorithm, or the
    one the forward convolve's auto picks (stride 1)."""
    if algorithm == transpose.COL2IM or tp.batch == 0:
        return ""
    if algorithm == "auto":
        if max(tp.strides) > 1:
            return ""
        return select.choose(forward_problem(tp), effective_threads(threads),
                             precision=precision or "default")
    return algorithm


def _forward_refusal(tp, algorithm) -> str | None:
    if algorithm in TRANSPOSE_ALGORITHMS:
        return None
    return registry.get_algorithm(algorithm).supports(forward_problem(tp))


@fuzz_settings()
@given(call=transpose_calls())
def test_conv_transpose(call):
    note(call.label)
    arrays, attributes, keywords = call.arrays, call.attributes, call.keywords
    try:
        tp = transpose.make_transpose_problem(
            arrays["src"].shape, arrays["src"].dtype, arrays["weights"].shape,
            arrays["weights"].dtype, None if arrays["bias"] is None else arrays["bias"].shape,
            None if arrays["bias"] is None else arrays["bias"].dtype, **attributes)
    except (ValueError, TypeError):
        tp = None
    refusal = None if tp is None or tp.batch == 0 else _forward_refusal(tp,
                                                                        keywords["algorithm"])
    before = snapshot(*arrays.values())
    with watchdog():
        got = outcome(lambda: convlab.conv_transpose(**arrays, **attributes, **keywords),
                      call.expected, refusal)
    assert snapshot(*arrays.values()) == before, "an input was modified"
    if got is None:
        return
    assert got.flags.c_contiguous and got.dtype.isnative
    name = _transpose_algorithm(tp, keywords["algorithm"], keywords.get("threads"),
                                keywords.get("precision"))
    assert_transpose_matches(got, arrays["src"], arrays["weights"], arrays["bias"],
                             attributes, name)


# --------------------------------------------------------------------------- backward

def _backward_transpose_problem(problem):
    """The transposed problem convolve_backward_data runs (its output_padding restores the
    remainder the forward floor division dropped)."""
    output_padding = tuple(i - transpose.transpose_extent(o, k, s, d, pb, pe, 0)
                           for i, o, k, s, d, pb, pe in zip(
                               problem.input_shape, problem.output_shape,
                               problem.kernel_shape, problem.strides, problem.dilations,
                               problem.pads_begin, problem.pads_end))
    return transpose.TransposeProblem(
        batch=problem.batch, in_channels=problem.out_channels,
        out_channels=problem.in_channels, groups=problem.groups,
        input_shape=problem.output_shape, kernel_shape=problem.kernel_shape,
        output_shape=problem.input_shape, strides=problem.strides,
        dilations=problem.dilations, pads_begin=problem.pads_begin,
        pads_end=problem.pads_end, output_padding=output_padding, dtype=problem.dtype,
        has_bias=False)


def _diff_dst(draw, call: Call, problem, rng):
    """A gradient of the forward dst's shape (a guess of it when the problem is invalid),
    sometimes of the wrong shape."""
    g = call.geometry
    shape = problem.dst_shape if problem is not None else params.user_data_shape(
        g.batch, g.out_channels, (1,) * g.rank, g.data_format)
    if draw(weighted((8, st.just(False)), (1, st.just(True)))):
        shape = shape[:-1] + (shape[-1] + 1,)
        call.expected = call.expected | Expected(frozenset({"diff_dst"}),
                                                 errors=frozenset({ValueError}))
    dtype = call.arrays["src"].dtype
    values = rng.standard_normal(shape)
    diff, _ = _view(draw, (np.rint(4 * values) if dtype.kind in "iu" else values).astype(dtype))
    return diff


@fuzz_settings()
@given(call=forward_calls(entry="backward_data", extended=False), data=st.data())
def test_convolve_backward_data(call, data):
    """diff_src against the scatter oracle of tests/test_transpose.py: the transposed
    convolution of diff_dst with the forward weights, over src's extents."""
    problem = _problem_or_none(call.arrays, call.attributes)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    diff_dst = _diff_dst(data.draw, call, problem, rng)
    src_shape = tuple(np.shape(call.arrays["src"]))
    if data.draw(weighted((8, st.just(False)), (1, st.just(True)))):
        src_shape = src_shape[:-1] + (float(src_shape[-1]),)
        call.expected = call.expected | Expected(frozenset({"src_shape"}),
                                                 errors=frozenset({TypeError}))
    weights = call.arrays["weights"]
    keywords = dict(call.keywords)
    keywords.setdefault("algorithm", data.draw(st.sampled_from(
        TRANSPOSE_ALGORITHMS + tuple(convlab.algorithms()))))
    try:  # the forward problem as convolve_backward_data sees it: no bias, diff_dst's dtype
        problem = problem_of(ShapeOnly(src_shape, diff_dst.dtype), weights, None,
                             call.attributes)
    except (ValueError, TypeError):
        problem = None
    refusal = None
    if problem is not None and problem.batch > 0 and \
            keywords["algorithm"] in TRANSPOSE_ALGORITHMS + tuple(convlab.algorithms()):
        refusal = _forward_refusal(_backward_transpose_problem(problem), keywords["algorithm"])
    note(call.describe())
    before = snapshot(diff_dst, weights)
    with watchdog():
        got = outcome(lambda: convlab.convolve_backward_data(
            diff_dst, weights, src_shape, **call.attributes, **keywords), call.expected,
            refusal)
    assert snapshot(diff_dst, weights) == before, "an input was modified"
    if got is None:
        return
    assert got.shape == src_shape and got.flags.c_contiguous
    tp = _backward_transpose_problem(problem)
    name = _transpose_algorithm(tp, keywords["algorithm"], keywords.get("threads"),
                                keywords.get("precision"))
    diff = _ncx(diff_dst, problem)
    w = np.asarray(weights) if problem.weights_format == "OIX" else \
        np.moveaxis(np.asarray(weights), (-1, -2), (0, 1))
    oracle = (problem.strides, problem.dilations, problem.pads_begin, problem.input_shape,
              problem.groups)
    expected = scatter_reference(diff, w, None, *oracle)
    magnitude = scatter_reference(np.abs(np.asarray(diff, np.float64)),
                                  np.abs(np.asarray(w, np.float64)), None, *oracle)
    length = problem.out_channels_per_group * problem.kernel_size
    assert_close(_ncx(got, problem), expected, magnitude, length, problem.dtype, name,
                 f"diff_src {keywords['algorithm']}")


def backward_weights_oracle(src_ncx, diff_ncx, problem):
    """docs/specification.md §5.3, float64: diff_weights[g*OCg+oc, ic, k] = sum over n, o of
    diff_dst[n, g*OCg+oc, o] * src[n, g*ICg+ic, o*S + k*D - P_b]; diff_bias sums diff_dst."""
    src_ncx = np.asarray(src_ncx, np.float64)
    diff_ncx = np.asarray(diff_ncx, np.float64)
    padded = convlab.reference.zero_padded(src_ncx, problem.pads_begin, problem.pads_end)
    g, icg, ocg = problem.groups, problem.in_channels_per_group, \
        problem.out_channels_per_group
    grads = np.zeros((problem.out_channels, icg, *problem.kernel_shape))
    for k in itertools.product(*map(range, problem.kernel_shape)):
        window = tuple(slice(kk * d, kk * d + (o - 1) * s + 1, s) for kk, d, s, o in
                       zip(k, problem.dilations, problem.strides, problem.output_shape))
        for group in range(g):
            taps = padded[(slice(None), slice(group * icg, (group + 1) * icg)) + window]
            diff = diff_ncx[:, group * ocg:(group + 1) * ocg]
            grads[(slice(group * ocg, (group + 1) * ocg), slice(None)) + k] = np.einsum(
                "ncp,nop->oc", taps.reshape(*taps.shape[:2], problem.output_size),
                diff.reshape(*diff.shape[:2], problem.output_size))
    return grads, diff_ncx.sum(axis=tuple(i for i in range(diff_ncx.ndim) if i != 1))


@fuzz_settings()
@given(call=forward_calls(entry="backward_weights", extended=False), data=st.data())
def test_convolve_backward_weights(call, data):
    problem = _problem_or_none(call.arrays, call.attributes)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    diff_dst = _diff_dst(data.draw, call, problem, rng)
    src = call.arrays["src"]
    weights_shape = tuple(np.shape(call.arrays["weights"]))
    if data.draw(weighted((8, st.just(False)), (1, st.just(True)))):
        weights_shape = "weights"
        call.expected = call.expected | Expected(frozenset({"weights_shape"}),
                                                 errors=frozenset({TypeError}))
    keywords = {k: v for k, v in call.keywords.items() if k == "threads"}
    note(call.describe())
    before = snapshot(src, diff_dst)
    with watchdog():
        got = outcome(lambda: convlab.convolve_backward_weights(
            src, diff_dst, weights_shape, **call.attributes, **keywords), call.expected)
    assert snapshot(src, diff_dst) == before, "an input was modified"
    if got is None:
        return
    diff_weights, diff_bias = got
    dtype = params.compute_dtype(("src", src.dtype), ("diff_dst", diff_dst.dtype))
    problem = problem_of(src, ShapeOnly(weights_shape, dtype), None, call.attributes)
    assert diff_weights.shape == weights_shape and diff_bias.shape == (problem.out_channels,)
    expected_w, expected_b = backward_weights_oracle(
        _ncx(src, problem), _ncx(diff_dst, problem), problem)
    magnitude_w, magnitude_b = backward_weights_oracle(
        np.abs(np.asarray(_ncx(src, problem), np.float64)),
        np.abs(np.asarray(_ncx(diff_dst, problem), np.float64)), problem)
    w = diff_weights if problem.weights_format == "OIX" else \
        np.moveaxis(diff_weights, (-1, -2), (0, 1))
    length = problem.batch * problem.output_size
    assert_close(w, expected_w, magnitude_w, length, problem.dtype, "", "diff_weights")
    assert_close(diff_bias, expected_b, magnitude_b, length, problem.dtype, "", "diff_bias")


# --------------------------------------------------------------------------- found by fuzzing

def test_empty_output_error_names_the_arguments():
    """The error for a kernel wider than the padded input names the arguments behind each
    figure (it once gave only K, D, I, P_b, P_e)."""
    src, weights = np.zeros((1, 4, 1), np.float32), np.zeros((6, 1, 1), np.float32)  # NXC, XIO
    with pytest.raises(ValueError, match=r"weights K=6, dilations D=1\) is larger than the "
                                         r"padded input extent 5 \(src I=4, pads_begin=1, "
                                         r"pads_end=0, auto_pad='none'\)"):
        convlab.convolve(src, weights, pads_begin=1)
    with pytest.raises(ValueError, match=r"auto_pad='valid'"):
        convlab.explain(src, weights, auto_pad="VALID")


@pytest.mark.parametrize("entry", ["convolve", "plan", "conv_transpose", "backward_data"])
@pytest.mark.parametrize("algorithm", [None, 3, ["direct"]])
def test_algorithm_that_is_not_a_string_is_a_type_error(entry, algorithm):
    """Every entry point that takes algorithm= refuses a non-string with TypeError (plans,
    conv_transpose and convolve_backward_data once raised ValueError)."""
    src, weights = np.zeros((1, 3, 2), np.float32), np.zeros((1, 2, 2), np.float32)
    calls = {
        "convolve": lambda: convlab.convolve(src, weights, algorithm=algorithm),
        "plan": lambda: convlab.Convolution(weights, algorithm=algorithm),
        "conv_transpose": lambda: convlab.conv_transpose(src, weights, algorithm=algorithm),
        "backward_data": lambda: convlab.convolve_backward_data(
            np.zeros((1, 3, 2), np.float32), weights, (1, 3, 2), algorithm=algorithm),
    }
    with pytest.raises(TypeError, match=re.escape(f"algorithm={algorithm!r} must be a string")):
        calls[entry]()


@pytest.mark.parametrize("data_format, weights_format", [("NXC", "XIO"), ("NCX", "OIX")])
def test_backward_weights_when_pads_crop_the_whole_input(data_format, weights_format):
    """pads_begin=-2 crops more than an extent of 1, pads_end=4 pads it back to 3: every tap
    reads padding, so diff_weights is zero (the padded copy once failed to broadcast)."""
    rng = np.random.default_rng(5)
    src = to_data_format(rng.standard_normal((2, 2, 1, 4)), data_format)  # N=2, IC=2, 1x4
    weights_shape = to_weights_format(np.zeros((3, 2, 3, 2)), weights_format).shape
    attributes = dict(pads_begin=(-2, 0), pads_end=(4, 1), data_format=data_format,
                      weights_format=weights_format)
    problem = problem_of(src, ShapeOnly(weights_shape, src.dtype), None, attributes)
    assert problem.output_shape == (1, 4)
    diff_dst = rng.standard_normal(problem.dst_shape)
    diff_weights, diff_bias = convlab.convolve_backward_weights(src, diff_dst, weights_shape,
                                                                **attributes)
    expected_w, expected_b = backward_weights_oracle(_ncx(src, problem), _ncx(diff_dst, problem),
                                                     problem)
    assert not expected_w.any()
    np.testing.assert_array_equal(diff_weights, 0.0)
    np.testing.assert_allclose(diff_bias, expected_b, rtol=1e-12)


@pytest.mark.parametrize("attributes", [
    dict(pads_begin=np.array([1, 0]), pads_end=np.array([0, 2])),  # once a NumPy error
    dict(pads_begin=2**40, pads_end=-2**40),  # refused as "dst would hold ..." elements
    dict(strides=2**30),                       # refused as "src would hold ..." elements
    dict(dilations=(1, 3), padding_mode="reflect", pads_begin=(2, 1), data_dilations=2),
], ids=["array-pads", "huge-pads-that-cancel", "huge-strides", "reflect-dilated"])
def test_a_plan_accepts_what_convolve_accepts(attributes):
    """Plans validate their attributes against the smallest src those accept; they once
    probed with a src widened by every pad and stride, which refused valid huge ones."""
    rng = np.random.default_rng(6)
    src = rng.standard_normal((2, 7, 6, 3)).astype(np.float32)
    weights = rng.standard_normal((3, 2, 3, 4)).astype(np.float32)
    expected = convlab.convolve(src, weights, algorithm="direct", **attributes)
    plan = convlab.Convolution(weights, algorithm="direct", **attributes)
    np.testing.assert_array_equal(plan(src), expected)


@pytest.mark.parametrize("weights, attributes, error, match", [
    (np.zeros((3, 3, 2, 4), object), {}, TypeError, r"weights has dtype object"),
    (np.zeros((3, 3, 2, 4), complex), {}, TypeError, r"weights has dtype complex128"),
    (np.zeros((3, 3, 2, 4)), dict(pads_begin=[1, [2]]), TypeError, r"pads_begin=\[2\]"),
    (np.zeros((3, 3, 2, 4)), dict(dilations=(1, 0)), ValueError, r"dilations=\(1, 0\)"),
], ids=["object-weights", "complex-weights", "ragged-pads", "zero-dilation"])
def test_a_plan_names_the_wrong_argument(weights, attributes, error, match):
    """Plans once named the probe's src for a weights dtype no array may have, and passed a
    ragged pads_begin to NumPy, whose message named nothing."""
    with pytest.raises(error, match=match):
        convlab.Convolution(weights, **attributes)
