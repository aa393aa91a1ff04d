"""Bad input: every case raises ValueError or TypeError whose message names the argument.

Each case runs through every public entry point that takes that argument (``convolve``,
``reference.convolve``, ``select_algorithm``, ``explain``). Absurd sizes use broadcast views
or shape-only objects, so no test allocates more than a few bytes for them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pytest

import convlab
from tests.helpers import MUTATES_REGISTRY, temporary_algorithm

SRC = (1, 5, 5, 4)  # NXC: N, H, W, IC
WEIGHTS = (3, 3, 4, 6)  # XIO: KH, KW, IC, OC


def zeros(shape, dtype=np.float32):
    return np.zeros(shape, dtype)


def huge_view(shape, dtype=np.float32):
    """A read-only array of any shape backed by one element (stride 0 on every axis)."""
    return np.broadcast_to(np.zeros((), dtype), shape)


class ShapeOnly:
    """What select_algorithm and explain accept: anything with shape and dtype."""

    def __init__(self, shape, dtype=np.float32):
        self.shape, self.dtype = tuple(shape), np.dtype(dtype)


ALL = ("convolve", "reference", "select", "explain")
DISPATCH = ("convolve",)  # arguments only convolve takes (out, algorithm)


@dataclass
class Bad:
    id: str
    error: type
    match: str
    src: Callable = lambda: zeros(SRC)
    weights: Callable = lambda: zeros(WEIGHTS)
    bias: Callable = lambda: None
    kwargs: dict = field(default_factory=dict)
    entries: tuple = ALL


CASES = [
    # ranks
    Bad("src-rank-2", ValueError, r"src has shape \(5, 4\).*rank >= 3", src=lambda: zeros((5, 4))),
    Bad("src-rank-0", ValueError, r"src has shape \(\)", src=lambda: np.float32(1.0)),
    Bad("weights-rank-mismatch", ValueError, r"weights has shape \(3, 4, 6\).*rank 4",
        weights=lambda: zeros((3, 4, 6))),
    Bad("weights-rank-mismatch-ncx", ValueError, r"weights has shape .*rank 3",
        src=lambda: zeros((1, 4, 5)), weights=lambda: zeros((6, 4, 3, 3)),
        kwargs=dict(data_format="NCX", weights_format="OIX")),
    # channels and groups
    Bad("channel-mismatch", ValueError, r"weights has IC/G=3.*IC=4",
        weights=lambda: zeros((3, 3, 3, 6))),
    Bad("channel-mismatch-oix", ValueError, r"weights has IC/G=4.*IC=8",
        src=lambda: zeros((1, 8, 5, 5)), weights=lambda: zeros((6, 4, 3, 3)),
        kwargs=dict(data_format="NCX", weights_format="OIX")),
    Bad("groups-not-dividing-ic", ValueError, r"groups=3 must divide IC=4", kwargs=dict(groups=3)),
    Bad("groups-not-dividing-oc", ValueError, r"groups=2 must divide OC=5",
        weights=lambda: zeros((3, 3, 2, 5)), kwargs=dict(groups=2)),
    Bad("groups-zero", ValueError, r"groups=0", kwargs=dict(groups=0)),
    Bad("groups-negative", ValueError, r"groups=-2", kwargs=dict(groups=-2)),
    Bad("groups-float", TypeError, r"groups=2\.0", kwargs=dict(groups=2.0)),
    Bad("groups-bool", TypeError, r"groups=True", kwargs=dict(groups=True)),
    Bad("groups-none", TypeError, r"groups=None", kwargs=dict(groups=None)),
    # strides, dilations, pads
    Bad("strides-zero", ValueError, r"strides=.*>= 1", kwargs=dict(strides=0)),
    Bad("strides-negative", ValueError, r"strides=.*>= 1", kwargs=dict(strides=(1, -2))),
    Bad("dilations-zero", ValueError, r"dilations=.*>= 1", kwargs=dict(dilations=(0, 1))),
    Bad("dilations-negative", ValueError, r"dilations=.*>= 1", kwargs=dict(dilations=-1)),
    Bad("strides-too-long", ValueError, r"strides=\(1, 1, 1\) must have 2 entries",
        kwargs=dict(strides=(1, 1, 1))),
    Bad("dilations-too-short", ValueError, r"dilations=\(2,\) must have 2 entries",
        kwargs=dict(dilations=[2])),
    Bad("pads-begin-wrong-length", ValueError, r"pads_begin=.*must have 2 entries",
        kwargs=dict(pads_begin=(1, 1, 1))),
    Bad("pads-end-wrong-length", ValueError, r"pads_end=.*must have 2 entries",
        kwargs=dict(pads_end=(1,))),
    Bad("strides-string", TypeError, r"strides='2'", kwargs=dict(strides="2")),
    Bad("strides-float", TypeError, r"strides=1\.5", kwargs=dict(strides=1.5)),
    Bad("strides-float-entry", TypeError, r"strides=1\.5", kwargs=dict(strides=(1, 1.5))),
    Bad("pads-none-entry", TypeError, r"pads_begin=None", kwargs=dict(pads_begin=(1, None))),
    Bad("kernel-larger-than-input", ValueError, r"spatial axis 0: the dilated kernel extent 7",
        weights=lambda: zeros((7, 7, 4, 6))),
    Bad("dilated-kernel-larger-than-padded", ValueError,
        r"spatial axis 1: the dilated kernel extent 9 .*padded input extent 7",
        kwargs=dict(dilations=(1, 4), pads_begin=1, pads_end=1)),
    Bad("negative-pads-crop-everything", ValueError, r"spatial axis 0: pads_begin=-3 and "
        r"pads_end=-3 crop", kwargs=dict(pads_begin=-3, pads_end=-3)),
    # formats and auto_pad
    Bad("data-format-unknown", ValueError, r"data_format='NHWC' is not known.*NCX",
        kwargs=dict(data_format="NHWC")),
    Bad("data-format-none", TypeError, r"data_format=None", kwargs=dict(data_format=None)),
    Bad("weights-format-unknown", ValueError, r"weights_format='OIHW' is not known",
        kwargs=dict(weights_format="OIHW")),
    Bad("auto-pad-unknown", ValueError, r"auto_pad='same' is not known",
        kwargs=dict(auto_pad="same")),
    Bad("auto-pad-int", TypeError, r"auto_pad=1", kwargs=dict(auto_pad=1)),
    # bias
    Bad("bias-wrong-length", ValueError, r"bias has shape \(7,\); expected \(6,\)",
        bias=lambda: zeros(7)),
    Bad("bias-2d", ValueError, r"bias has shape \(1, 6\)", bias=lambda: zeros((1, 6))),
    Bad("bias-scalar", ValueError, r"bias has shape \(\)", bias=lambda: np.float32(1.0)),
    # dtypes
    Bad("src-object", TypeError, r"src has dtype object", src=lambda: zeros(SRC, object)),
    Bad("src-string", TypeError, r"src has dtype <U1", src=lambda: np.full(SRC, "a")),
    Bad("src-complex", TypeError, r"src has dtype complex64", src=lambda: zeros(SRC, np.complex64)),
    Bad("weights-complex", TypeError, r"weights has dtype complex128",
        weights=lambda: zeros(WEIGHTS, complex)),
    Bad("bias-complex", TypeError, r"bias has dtype complex", bias=lambda: zeros(6, complex)),
    Bad("bias-object", TypeError, r"bias has dtype object", bias=lambda: zeros(6, object)),
    Bad("src-datetime", TypeError, r"src has dtype datetime64",
        src=lambda: zeros(SRC, "datetime64[s]")),
    # 8-bit integers are quantized convolution: both src and weights, or neither
    # (docs/specification.md §3.3)
    Bad("src-int8-float-weights", TypeError, r"weights has dtype float32 but src is 8-bit",
        src=lambda: zeros(SRC, np.int8)),
    Bad("weights-uint8-float-src", TypeError, r"src has dtype float32 but weights is 8-bit",
        weights=lambda: zeros(WEIGHTS, np.uint8)),
    Bad("src-float16-int8-weights", TypeError, r"src has dtype float16 but weights is 8-bit",
        src=lambda: zeros(SRC, np.float16), weights=lambda: zeros(WEIGHTS, np.int8)),
    Bad("dst-dtype-on-float", ValueError, r"dst_dtype='int8' applies to 8-bit",
        kwargs=dict(dst_dtype="int8")),
    Bad("dst-dtype-unsupported", ValueError, r"dst_dtype='float64' is not supported",
        src=lambda: zeros(SRC, np.uint8), weights=lambda: zeros(WEIGHTS, np.int8),
        kwargs=dict(dst_dtype="float64")),
    Bad("dst-dtype-not-a-dtype", TypeError, r"dst_dtype=3 is not a dtype",
        src=lambda: zeros(SRC, np.uint8), weights=lambda: zeros(WEIGHTS, np.int8),
        kwargs=dict(dst_dtype=3)),
    Bad("zero-point-on-float", ValueError, r"src_zero_point=3 applies to 8-bit",
        kwargs=dict(src_zero_point=3), entries=("convolve", "reference")),
    Bad("weights-zero-point-wrong-length", ValueError,
        r"weights_zero_point has shape \(4,\); expected a scalar or \(6,\)",
        src=lambda: zeros(SRC, np.uint8), weights=lambda: zeros(WEIGHTS, np.int8),
        kwargs=dict(weights_zero_point=np.zeros(4, np.int8)), entries=("convolve", "reference")),
    Bad("src-zero-point-out-of-range", ValueError, r"src_zero_point=300 is outside \[0, 255\]",
        src=lambda: zeros(SRC, np.uint8), weights=lambda: zeros(WEIGHTS, np.int8),
        kwargs=dict(src_zero_point=300), entries=("convolve", "reference")),
    Bad("zero-point-float", TypeError, r"dst_zero_point=0.5 has dtype float64",
        src=lambda: zeros(SRC, np.uint8), weights=lambda: zeros(WEIGHTS, np.int8),
        kwargs=dict(dst_zero_point=0.5), entries=("convolve", "reference")),
    Bad("output-scale-nan", ValueError, r"output_scale=nan must be finite",
        src=lambda: zeros(SRC, np.uint8), weights=lambda: zeros(WEIGHTS, np.int8),
        kwargs=dict(output_scale=float("nan")), entries=("convolve", "reference")),
    Bad("int8-algorithm-winograd", ValueError, r"algorithm='winograd2' cannot run 8-bit",
        src=lambda: zeros(SRC, np.uint8), weights=lambda: zeros(WEIGHTS, np.int8),
        kwargs=dict(algorithm="winograd2"), entries=DISPATCH),
    # data dilation and padding modes
    Bad("data-dilations-zero", ValueError, r"data_dilations=.*>= 1",
        kwargs=dict(data_dilations=0)),
    Bad("data-dilations-float", TypeError, r"data_dilations=2\.0", kwargs=dict(data_dilations=2.0)),
    Bad("padding-mode-unknown", ValueError, r"padding_mode='mirror' is not known",
        kwargs=dict(padding_mode="mirror")),
    Bad("reflect-pad-too-large", ValueError,
        r"pads_begin=5 on spatial axis 0 with padding_mode='reflect': expected at most 4",
        kwargs=dict(padding_mode="reflect", pads_begin=5)),
    # post-ops
    Bad("post-op-unknown", ValueError, r"post_ops\[1\]: 'relu6' is not a known post-op",
        kwargs=dict(post_ops=["relu", "relu6"]), entries=("convolve", "reference")),
    Bad("post-op-not-a-list", TypeError, r"post_ops='relu' must be a list",
        kwargs=dict(post_ops="relu"), entries=("convolve", "reference")),
    Bad("post-op-clip-missing-high", ValueError, r"post_ops\[0\]: 'clip' takes parameters",
        kwargs=dict(post_ops=[("clip", 0.0)]), entries=("convolve", "reference")),
    Bad("post-op-parameter-string", TypeError, r"post_ops\[0\]: negative_slope='x'",
        kwargs=dict(post_ops=[("relu", "x")]), entries=("convolve", "reference")),
    Bad("post-op-sum-without-out", ValueError, r"post_ops\[0\]: 'sum' .* pass out=",
        kwargs=dict(post_ops=["sum"]), entries=("convolve", "reference")),
    Bad("post-op-binary-shape", ValueError, r"post_ops\[0\]: the binary tensor of shape "
        r"\(5,\) does not broadcast", kwargs=dict(post_ops=[("add", np.zeros(5))]),
        entries=("convolve", "reference")),
    Bad("src-longdouble", TypeError, r"src has dtype float128|src has dtype longdouble",
        src=lambda: zeros(SRC, np.longdouble)),
    # not arrays
    Bad("src-none", TypeError, r"src must be an array", src=lambda: None),
    Bad("weights-string", TypeError, r"weights must be an array", weights=lambda: "weights"),
    Bad("src-ragged-list", TypeError, r"src could not be converted",
        src=lambda: [[[1.0], [1.0, 2.0]]]),
    # empty extents
    Bad("src-zero-extent", ValueError, r"src spatial axis 0 has extent 0",
        src=lambda: zeros((1, 0, 5, 4))),
    Bad("src-zero-channels", ValueError, r"src has IC=0", src=lambda: zeros((1, 5, 5, 0)),
        weights=lambda: zeros((3, 3, 0, 6))),
    Bad("weights-zero-oc", ValueError, r"weights has OC=0", weights=lambda: zeros((3, 3, 4, 0))),
    Bad("weights-zero-kernel", ValueError, r"weights kernel axis 1 has extent 0",
        weights=lambda: zeros((3, 0, 4, 6))),
    # absurd sizes: views of one element, nothing is allocated
    Bad("src-too-many-elements", ValueError, r"src would hold 1152921504606846976 elements",
        src=lambda: huge_view((1, 2**30, 2**30, 1)), weights=lambda: zeros((1, 1, 1, 2)),
        kwargs=dict(strides=2**30)),
    Bad("weights-too-many-elements", ValueError, r"weights would hold",
        src=lambda: huge_view((1, 1, 2**52)), weights=lambda: huge_view((1, 2**52, 4))),
    Bad("dst-too-many-elements-by-pads", ValueError, r"dst would hold",
        kwargs=dict(pads_end=2**40)),
    Bad("too-much-work", ValueError, r"multiply-adds",
        src=lambda: zeros((1, 1, 1)), weights=lambda: huge_view((2**23, 1, 1)),
        kwargs=dict(pads_end=2**40 + 2**23)),
    # index arithmetic that would overflow 64 bits inside a kernel
    Bad("strides-beyond-int64-arithmetic", ValueError, r"strides=",
        src=lambda: zeros((1, 1, 1)), weights=lambda: zeros((1, 1, 1)),
        kwargs=dict(strides=2**63, pads_end=2**64)),
    Bad("pads-wrapping-int64", ValueError, r"pads_end=",
        src=lambda: zeros((1, 1, 1)), weights=lambda: zeros((1, 1, 1)),
        kwargs=dict(strides=2**53, pads_end=2**64)),
    Bad("pads-begin-beyond-int64", ValueError, r"pads_begin=",
        kwargs=dict(pads_begin=2**70, pads_end=-2**70)),
    Bad("dilations-beyond-int64", ValueError, r"dilations=",
        src=lambda: zeros((1, 1, 1)), weights=lambda: zeros((1, 1, 1)),
        kwargs=dict(dilations=2**70)),
    Bad("auto-pad-beyond-int64", ValueError, r"auto_pad='same_upper'",
        src=lambda: zeros((1, 1, 1)), weights=lambda: huge_view((2**20, 1, 1)),
        kwargs=dict(auto_pad="same_upper", dilations=2**50)),
    # threads
    Bad("threads-zero", ValueError, r"threads=0", kwargs=dict(threads=0)),
    Bad("threads-too-negative", ValueError, r"threads=-100000",
        kwargs=dict(threads=-100000)),
    Bad("threads-float", TypeError, r"threads=1\.5", kwargs=dict(threads=1.5)),
    Bad("threads-string", TypeError, r"threads='2'", kwargs=dict(threads="2")),
    Bad("threads-bool", TypeError, r"threads=True", kwargs=dict(threads=True)),
    # out and algorithm: convolve only
    Bad("out-wrong-shape", ValueError, r"out has shape \(1, 3, 3, 5\); expected \(1, 3, 3, 6\)",
        kwargs=dict(out=zeros((1, 3, 3, 5))), entries=DISPATCH),
    Bad("out-wrong-layout", ValueError, r"out has shape \(1, 3, 3, 6\); expected \(1, 6, 3, 3\)",
        src=lambda: zeros((1, 4, 5, 5)), weights=lambda: zeros((6, 4, 3, 3)),
        kwargs=dict(out=zeros((1, 3, 3, 6)), data_format="NCX", weights_format="OIX"),
        entries=DISPATCH),
    Bad("out-wrong-dtype", ValueError, r"out has dtype float64; expected float32",
        kwargs=dict(out=zeros((1, 3, 3, 6), np.float64)), entries=DISPATCH),
    Bad("out-not-array", TypeError, r"out must be a numpy.ndarray",
        kwargs=dict(out=[[0.0]]), entries=DISPATCH),
    Bad("out-read-only", ValueError, r"out is read-only",
        kwargs=dict(out=huge_view((1, 3, 3, 6))), entries=DISPATCH),
    Bad("algorithm-unknown", ValueError, r"algorithm='no_such_algorithm' is not registered",
        kwargs=dict(algorithm="no_such_algorithm"), entries=DISPATCH),
    Bad("algorithm-none", TypeError, r"algorithm=None", kwargs=dict(algorithm=None),
        entries=DISPATCH),
    Bad("keyword-misspelt", TypeError, r"stride", kwargs=dict(stride=2)),
]

try:
    import ml_dtypes
except ImportError:  # pragma: no cover - ml_dtypes is optional
    ml_dtypes = None
if ml_dtypes is not None:
    CASES.append(Bad("src-bfloat16-int8-weights", TypeError,
                     r"src has dtype bfloat16 but weights is 8-bit",
                     src=lambda: zeros(SRC, ml_dtypes.bfloat16),
                     weights=lambda: zeros(WEIGHTS, np.int8)))

ENTRY_POINTS = {
    "convolve": convlab.convolve,
    "reference": convlab.reference.convolve,
    "select": convlab.select_algorithm,
    "explain": convlab.explain,
}
REFERENCE_KEYWORDS = {"strides", "pads_begin", "pads_end", "dilations", "auto_pad", "groups",
                      "data_format", "weights_format", "stride", "data_dilations",
                      "padding_mode", "dst_dtype", "src_zero_point", "weights_zero_point",
                      "output_scale", "dst_zero_point", "post_ops"}


def _params():
    for case in CASES:
        for entry in case.entries:
            if entry == "reference" and not set(case.kwargs) <= REFERENCE_KEYWORDS:
                continue  # the oracle takes no threads=
            yield pytest.param(case, entry, id=f"{case.id}-{entry}")


@pytest.mark.parametrize("case, entry", list(_params()))
def test_bad_input_raises_naming_the_argument(case, entry):
    with pytest.raises(case.error, match=case.match):
        ENTRY_POINTS[entry](case.src(), case.weights(), case.bias(), **case.kwargs)


def test_case_ids_are_unique():
    ids = [case.id for case in CASES]
    assert len(ids) == len(set(ids))


def test_out_overlapping_src_is_refused():
    buffer = np.zeros(200, np.float32)
    src = buffer[:100].reshape(SRC)
    out = buffer[100:154].reshape(1, 3, 3, 6)
    unrelated = buffer[:54].reshape(1, 3, 3, 6)  # aliases src itself
    assert not np.may_share_memory(src, out)
    convlab.convolve(src, zeros(WEIGHTS), out=out)
    with pytest.raises(ValueError, match="out overlaps src"):
        convlab.convolve(src, zeros(WEIGHTS), out=unrelated)


def test_out_overlapping_weights_or_bias_is_refused():
    weights = zeros(WEIGHTS)
    bias = zeros(54)[:6]
    with pytest.raises(ValueError, match="out overlaps weights"):
        convlab.convolve(zeros(SRC), weights, out=weights.reshape(-1)[:54].reshape(1, 3, 3, 6))
    with pytest.raises(ValueError, match="out overlaps bias"):
        convlab.convolve(zeros(SRC), weights, bias, out=bias.base.reshape(1, 3, 3, 6))


def test_unknown_algorithm_lists_the_known_names():
    with pytest.raises(ValueError) as error:
        convlab.convolve(zeros(SRC), zeros(WEIGHTS), algorithm="no_such_algorithm")
    for name in convlab.algorithms():
        assert repr(name) in str(error.value)


@MUTATES_REGISTRY
def test_algorithm_that_cannot_run_the_problem_says_why():
    calls = []

    def run(problem, src, weights, bias, dst, threads):
        calls.append(problem)

    reason = "rank 2: this mock only handles 1-D problems"
    with temporary_algorithm(run, supports=lambda p: None if p.rank == 1 else reason) as name:
        with pytest.raises(ValueError, match=rf"algorithm='{name}' cannot run.*{reason}"):
            convlab.convolve(zeros(SRC), zeros(WEIGHTS), algorithm=name)
        assert calls == []
        # and auto never picks it for that problem, even when it claims to be free
        assert convlab.select_algorithm(zeros(SRC), zeros(WEIGHTS)) != name


@MUTATES_REGISTRY
def test_no_algorithm_can_run_the_problem():
    """Every algorithm refusing a problem is a ValueError listing each one's reason."""
    saved = {name: convlab.dispatch.registry.get_algorithm(name) for name in convlab.algorithms()}
    try:
        for name in saved:
            convlab.unregister_algorithm(name)
        with temporary_algorithm(lambda *a: None, supports=lambda p: "never") as name:
            with pytest.raises(ValueError, match=rf"no registered algorithm.*{name}: never"):
                convlab.convolve(zeros(SRC), zeros(WEIGHTS))
    finally:
        for algorithm in saved.values():
            convlab.register_algorithm(algorithm, replace=True)
    assert convlab.algorithms() == list(saved)


def test_shape_only_objects_of_absurd_size_are_refused_by_select():
    src = ShapeOnly((2**40, 2**40, 2**40, 3))
    weights = ShapeOnly((3, 3, 3, 4))
    with pytest.raises(ValueError, match=r"dst would hold"):
        convlab.select_algorithm(src, weights)
    with pytest.raises(ValueError, match=r"dst would hold"):
        convlab.explain(src, weights)


def test_shape_only_objects_of_reasonable_size_are_accepted_by_select():
    """The same path with a sane shape works without any data (ResNet-50 conv1)."""
    src, weights = ShapeOnly((1, 224, 224, 3)), ShapeOnly((7, 7, 3, 64))
    name = convlab.select_algorithm(src, weights, strides=2, pads_begin=3, pads_end=3)
    assert name in convlab.algorithms()


def test_duplicate_registration_is_refused():
    name = convlab.algorithms()[0]
    with pytest.raises(ValueError, match=rf"algorithm '{name}' is already registered"):
        convlab.register_algorithm(name)(lambda *a: None)


@pytest.mark.parametrize("name", ["", "auto", "tune", None, 3])
def test_reserved_or_invalid_algorithm_names_are_refused(name):
    with pytest.raises(ValueError, match="algorithm name"):
        convlab.register_algorithm(name)


@pytest.mark.parametrize("valid, invalid", [
    (dict(strides=1), dict(strides=True)),
    (dict(strides=[1, 1]), dict(strides=[1.0, 1])),
    (dict(groups=1), dict(groups=1.0)),
    (dict(pads_begin=(1, 1)), dict(pads_begin=(True, 1))),
])
def test_remembered_problems_do_not_hide_type_errors(valid, invalid):
    """make_problem remembers valid argument sets; an equal-hashing bool or float must
    still be refused after its valid twin was seen."""
    src, weights = zeros(SRC), zeros(WEIGHTS)
    convlab.convolve(src, weights, **valid)
    with pytest.raises(TypeError, match=next(iter(invalid))):
        convlab.convolve(src, weights, **invalid)


@pytest.mark.parametrize("operation, arguments, argument", [
    ("conv_transpose", lambda q, f: ((q((1, 6, 7, 7), np.uint8), f((6, 4, 3, 3))),
                                     dict(strides=2, weights_format="IOX")), "src"),
    ("conv_transpose", lambda q, f: ((f((1, 6, 7, 7)), q((6, 4, 3, 3), np.int8)),
                                     dict(weights_format="IOX")), "weights"),
    ("convolve_backward_data", lambda q, f: ((q((1, 6, 7, 7), np.int8), f((6, 4, 3, 3)),
                                              (1, 4, 9, 9)), dict(weights_format="OIX")),
     "diff_dst"),
    ("convolve_backward_weights", lambda q, f: ((f((1, 4, 9, 9)), q((1, 6, 7, 7), np.uint8),
                                                 (6, 4, 3, 3)), dict(weights_format="OIX")),
     "diff_dst"),
])
def test_8bit_inputs_outside_convolve_are_type_errors_naming_the_argument(operation, arguments,
                                                                          argument):
    """Quantized data is a forward-convolution feature: elsewhere 8-bit tensors are refused,
    not silently computed as float64."""
    positional, keywords = arguments(lambda shape, dtype: np.ones(shape, dtype),
                                     lambda shape: np.ones(shape))
    with pytest.raises(TypeError, match=f"^{argument} has dtype u?int8"):
        getattr(convlab, operation)(*positional, data_format="NCX", **keywords)
