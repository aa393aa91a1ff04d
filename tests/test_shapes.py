"""The benchdnn shape-file parser: grammar rules, the shipped suites and their totals."""
import numpy as np
import pytest

import convlab
from convlab.problem import shapes
from convlab.problem.params import make_problem
from convlab.problem.shapes import Layer, parse_descriptor

# Active descriptor lines per file, as counted in shapes/README.txt.
ACTIVE_LINES = {
    "resnet_50": 20, "resnet_50_v1_5": 23, "mobilenet": 11, "mobilenet_dw": 9,
    "fused_mobilenet_stride_1": 11, "fused_mobilenet_stride_2": 8, "ssd_mobilenet": 38,
    "vgg_19": 9, "vgg_11": 10, "googlenet_v1": 51, "googlenet_v2": 40, "3d": 21,
    "3d_unet": 8, "1d": 31, "dilated": 42, "large_kernel": 21,
}


def all_layers():
    return [(suite, layer) for suite in shapes.suites() for layer in shapes.load_suite(suite)]


def total_gflop(suite, mb=None):
    return sum(layer.flops(mb) * layer.multiplicity for layer in shapes.load_suite(suite)) / 1e9


# --------------------------------------------------------------------------- suites

def test_shipped_suites_are_listed():
    assert set(ACTIVE_LINES) <= set(shapes.suites())


@pytest.mark.parametrize("suite", sorted(ACTIVE_LINES))
def test_every_active_line_parses(suite):
    assert len(shapes.load_suite(suite)) == ACTIVE_LINES[suite]


def test_readme_sanity_totals():
    # README.txt: resnet_50 (mb50) 385.6 GFLOP, resnet_50_v1_5 (default mb2) 16.3 GFLOP,
    # vgg_19 (mb64) 2497 GFLOP, all x multiplicity.
    assert round(total_gflop("resnet_50"), 1) == 385.6
    assert round(total_gflop("resnet_50_v1_5"), 1) == 16.3
    assert round(total_gflop("vgg_19")) == 2497
    assert round(total_gflop("resnet_50", mb=1), 2) == 7.71


def test_every_layer_gives_its_stated_output_in_convlab():
    for suite, layer in all_layers():
        problem = make_problem(layer.src_shape(1), np.float32, layer.weights_shape(),
                               np.float32, **layer.convolve_kwargs())
        assert problem.output_shape == layer.output_shape, (suite, layer.descriptor)
        assert problem.flops == layer.flops(1)
        assert layer.problem(mb=1) == problem


def test_every_layer_round_trips_through_the_canonical_form():
    for suite, layer in all_layers():
        assert parse_descriptor(layer.canonical()) == layer, (suite, layer.descriptor)


def test_dilated_suite_runs_through_the_reference():
    for layer in shapes.load_suite("dilated", mb=1):
        src, weights, bias = layer.arrays(bias=True)
        dst = convlab.reference.convolve(src, weights, bias, **layer.convolve_kwargs())
        assert dst.shape == layer.dst_shape(), layer.descriptor


def test_mb_override_and_unknown_suite():
    layers = shapes.load_suite("shapes_resnet_50.txt", mb=1)
    assert {layer.mb for layer in layers} == {1}
    assert layers == [layer.with_mb(1) for layer in shapes.load_suite("resnet_50")]
    with pytest.raises(ValueError, match="suite 'resnet_51' is not known"):
        shapes.load_suite("resnet_51")
    with pytest.raises(ValueError, match="mb=0 must be a positive int"):
        shapes.load_suite("resnet_50", mb=0)


def test_bad_line_names_source_and_line_number():
    lines = ["# header", "", "ic3oc3ih5kh3", "ic3oc3ih5kh3zz"]
    with pytest.raises(ValueError, match=r"mine\.txt, line 4: .*unexpected 'zz'"):
        shapes.parse_lines(lines, "mine.txt")


# --------------------------------------------------------------------------- grammar

def test_defaults():
    layer = parse_descriptor("ic3oc5ih7kh3")
    assert (layer.mb, layer.groups, layer.multiplicity, layer.name) == (2, 1, 1, "")
    assert layer.rank == 2
    assert layer.strides == (1, 1) and layer.dilations == (1, 1)
    assert layer.pads_begin == (0, 0) and layer.pads_end == (0, 0)
    assert layer.output_shape == (5, 5)


def test_square_rule_matches_the_explicit_form():
    implicit = parse_descriptor("mb1ic64ih56oc64oh56kh3ph1")
    explicit = parse_descriptor("mb1 ic64 ih56 iw56 oc64 oh56 ow56 kh3 kw3 sh1 sw1 ph1 pw1 "
                                "dh0 dw0".replace(" ", ""))
    assert implicit == explicit
    assert implicit.input_shape == (56, 56) and implicit.kernel_shape == (3, 3)


def test_cubic_rule():
    layer = parse_descriptor("ic3oc4id10kd3sd2pd1")
    assert layer.rank == 3
    assert layer.input_shape == (10, 10, 10) and layer.kernel_shape == (3, 3, 3)
    assert layer.strides == (2, 2, 2) and layer.pads_begin == (1, 1, 1)
    assert layer.output_shape == (5, 5, 5)  # (10 - 3 + 2) / 2 + 1
    assert layer.pads_end == (0, 0, 0)      # 4*2 - 10 + 3 - 1


def test_explicit_3d_axes_in_any_order():
    # 3d_unet writes ih iw id and kh kw kd
    layer = parse_descriptor('mb1ic3ih132iw132id116oc32kh3kw3kd3ph0pw0pd0sh1sw1sd1n"u:c1"')
    assert layer.input_shape == (116, 132, 132)
    assert layer.output_shape == (114, 130, 130)


def test_one_d():
    layer = parse_descriptor('ic8oc8_iw5ow2kw3sw1dw2pw3n"conv1d_gemm:1"')
    assert layer.rank == 1
    assert layer.dilations == (3,)        # benchdnn dw2 == dilation 3, extent 7
    assert layer.output_shape == (2,)
    assert layer.pads_begin == (3,)
    assert layer.pads_end == (0,)         # (2-1)*1 - 5 + 7 - 3


def test_dilation_is_converted_to_one_based():
    assert parse_descriptor("ic1oc1ih9kh3dh1").dilations == (2, 2)
    assert parse_descriptor("ic1oc1ih9kh3dh1").output_shape == (5, 5)
    layer = parse_descriptor("mb2_ic3oc48_ih227oh110kh5sh2ph0dh1_iw227ow72kw5sw3pw0dw2_n\"x\"")
    assert layer.dilations == (2, 3)
    assert layer.pads_end == (0, -1)      # w: 71*3 - 227 + 13 - 0


def test_output_given_padding_computed_and_right_padding_derived():
    layer = parse_descriptor("ic1oc1ih5oh5kh3")
    assert layer.pads_begin == (1, 1) and layer.pads_end == (1, 1)
    # p = (111*2 - 224 + 7) / 2 = 2 and the remaining 3 rows go to the end
    layer = parse_descriptor("ic1oc1ih224oh112kh7sh2")
    assert layer.pads_begin == (2, 2) and layer.pads_end == (3, 3)
    # given padding and output: the end padding is whatever gives that output
    conv1 = parse_descriptor("g1mb50ic3ih224iw224oc64oh112ow112kh7kw7sh2sw2ph3pw3")
    assert conv1.pads_end == (2, 2)
    downsample = parse_descriptor("mb50ic256ih56oc512oh28kh1sh2ph0")
    assert downsample.pads_end == (-1, -1)  # the last input row is never read


def test_divisions_truncate_toward_zero_as_in_c():
    # pad = (0*2 - 4 + 1) / 2 = -3/2 -> -1 in C (floor division would give -2)
    layer = parse_descriptor("ic1oc1ih4oh1kh1sh2")
    assert layer.pads_begin == (-1, -1) and layer.pads_end == (-2, -2)
    # output = (4 - 7 + 2) / 2 + 1 = -1/2 + 1 -> 1 in C
    layer = parse_descriptor("ic1oc1ih4kh7sh2ph1")
    assert layer.output_shape == (1, 1) and layer.pads_end == (2, 2)


def test_negative_derived_padding_round_trips_through_the_canonical_form():
    for text in ("ic1oc1ih4oh1kh1sh2", "ic64id8ih56iw56oc64od4oh56ow54kd3kh3kw3"):
        layer = parse_descriptor(text)
        assert min(layer.pads_begin) < 0
        assert parse_descriptor(layer.canonical()) == layer


def test_multiplicity_name_quotes_and_separators():
    layer = parse_descriptor('mb50ic64ih56oc256oh56kh1ph0n"resnet_50:res2a_branch1*4"')
    assert layer.name == "resnet_50:res2a_branch1" and layer.multiplicity == 4
    assert layer.short_name == "res2a_branch1"
    assert layer.flops() * 4 == sum(
        parse_descriptor(layer.descriptor.replace("*4", "")).flops() for _ in range(4))
    assert parse_descriptor("ic1oc1ih5kh3nplain*2").name == "plain"
    assert parse_descriptor("ic1oc1ih5kh3nplain*2").multiplicity == 2
    assert parse_descriptor("_ic1_oc1_ih5_kh3_") == parse_descriptor("ic1oc1ih5kh3")
    assert parse_descriptor("kh3ih5oc1ic1") == parse_descriptor("ic1oc1ih5kh3")
    named = parse_descriptor('ic1oc1ih5kh3n"a b # c"   # trailing comment')
    assert named.name == "a b # c"


def test_trivial_values_on_unused_axes_are_accepted():
    # benchdnn: "pd0", "sh1", "dh0" alone do not make an axis used
    layer = parse_descriptor("ic3oc3iw5kw3ph0dh0sh1pd0")
    assert layer.rank == 1 and layer.output_shape == (3,)


def test_groups_and_depthwise():
    layer = parse_descriptor("g32mb1ic32ih112iw112oc32oh112ow112kh3kw3sh1sw1ph1pw1")
    assert layer.is_depthwise and layer.weights_shape() == (3, 3, 1, 32)
    assert layer.flops() == 2 * 32 * 112 * 112 * 9


def test_arrays_and_kwargs_fit_convolve():
    layer = parse_descriptor("g2mb3ic4oc6ih7iw6kh3kw2sh2dh1ph1")
    src, weights, bias = layer.arrays(bias=True, seed=1)
    assert src.shape == (3, 7, 6, 4) and weights.shape == (3, 2, 2, 6) and bias.shape == (6,)
    assert src.dtype == np.float32 and np.abs(src).max() <= 1
    dst = convlab.reference.convolve(src, weights, bias, **layer.convolve_kwargs())
    assert dst.shape == layer.dst_shape()
    assert layer.arrays(mb=1)[0].shape == (1, 7, 6, 4) and layer.arrays()[2] is None


@pytest.mark.parametrize("text, message", [
    ("", "is empty"),
    ("   # only a comment", "is empty"),
    ("oc3ih5kh3", "ic is missing"),
    ("ic3ih5kh3", "oc is missing"),
    ("ic3oc3", "no spatial axis"),
    ("mb2ic3oc3ph0", "no spatial axis"),
    ("ic3oc3ih5", "kh is missing"),
    ("ic3oc3kw3", "iw is missing"),
    ("ic3oc3id5kd3ih5kh3", "needs both the h and w axes or neither"),
    ("ic3oc3ih5kh3zz", "unexpected 'zz'"),
    ("ic3oc3ih5kh3 n\"x\"", "unexpected ' n"),
    ("ic3oc3ihkh3", "'ih' at position 6 has no value"),
    ("ic3oc3ih5kh3ph-1", "ph=-1 is negative"),
    ("ic3ih5oc3kh3ih6", "ih is given twice"),
    ("g2ic3oc4ih5kh3", "g=2 must divide ic=3 and oc=4"),
    ("ic3oc3ih2kh5", "the h output would be -2"),
    ("ic3oc3ih4kh3dh1", "the h output would be 0"),
    ("ic3oc3ih5kh3sh0", "sh=0 must be >= 1"),
    ("mb0ic3oc3ih5kh3", "mb=0 must be >= 1"),
    ("ic3oc3ih5kh3pw1", "iw is missing; the w axis is used \\(pw given\\)"),
    ("ic3oc3iw5kw3sh2", "ih is missing; the h axis is used \\(sh given\\)"),
    ("ic3oc3ih5kh3ph1pw0", "pw=0 is overridden by 1"),
    ("ic3oc3ih5kh3sh2sw1", "sw=1 is overridden by 2"),
    ('ic3oc3ih5kh3n"x*0"', r"multiplicity \*0"),
    ('ic3oc3ih5kh3n"a"b#c"', "holds a double quote or a line break"),
    ('ic3oc3ih5kh3n"two\nlines"', "holds a double quote or a line break"),
])
def test_bad_descriptors_raise_value_error(text, message):
    with pytest.raises(ValueError, match=message):
        parse_descriptor(text)


def test_flops_of_huge_layers_are_exact():
    side = 2**62  # the product of the sizes overflows int64
    layer = parse_descriptor(f"ic1oc1ih{side}kh1iw{side}kw1")
    assert layer.flops() == 2 * layer.mb * side * side


def test_layer_is_frozen():
    layer = parse_descriptor("ic1oc1ih5kh3")
    assert isinstance(layer, Layer)
    with pytest.raises(AttributeError):
        layer.mb = 4


def test_demo_numpy_baseline_matches_the_reference_on_dilated_and_1d_layers():
    # The demo's yardstick must be right on every geometry the files hold: 1-D to 3-D,
    # dilation, groups, asymmetric and negative derived pads.
    from convlab.cli.demo import numpy_baseline

    for layer in shapes.load_suite("dilated", mb=1) + shapes.load_suite("1d", mb=1):
        src, weights, _ = layer.arrays(seed=3)
        expected = convlab.reference.convolve(src.astype(np.float64),
                                              weights.astype(np.float64),
                                              **layer.convolve_kwargs())
        got = numpy_baseline(src, weights, **layer.convolve_kwargs())
        assert got.dtype == np.float32 and got.shape == expected.shape, layer.descriptor
        np.testing.assert_allclose(got, expected, rtol=1e-4,
                                   atol=1e-5 * max(1.0, np.abs(expected).max()),
                                   err_msg=layer.descriptor)
