"""The tutorials' exercise checkers (convlab.viz.exercises): each says *right* for the
right answer, *wrong* with a reason naming the mismatch for the usual wrong answers, "no
answer yet" for a blank answer, and a clear reason for an answer of the wrong type, never
an exception into the notebook. The spectrum checkers are covered in test_viz_spectrum.py.
"""
from __future__ import annotations

import pytest

from convlab.viz import exercises

OUTPUT_LENGTH = dict(input_length=20, kernel_taps=4, stride=3, dilation=2, pads=(2, 1))
READS = dict(output_index=0, input_length=12, kernel_taps=3, stride=2, dilation=3,
             pads=(2, 0))
PADS = dict(input_length=16, kernel_taps=5, target=17)
AUTO_PADS = dict(input_length=10, kernel_taps=4, auto_pad="same_lower")
OUTPUT_SHAPE = dict(input_shape=(16, 20), kernel_shape=(3, 3), strides=(3, 2),
                    dilations=(2, 3), pads_begin=(1, 0), pads_end=(1, 0))
TILING = dict(first={"kernel": 2, "stride": 2}, second_kernel=3)
WEIGHTS = dict(in_channels=64, out_channels=64, kernel_shape=(3, 3), groups=4)
CONNECTED = dict(in_channels=8, out_channels=12, groups=4, output_channel=7)
COLUMNS = dict(src_shape=(2, 6, 6, 3), kernel_shape=(3, 3), strides=2, pads_begin=1,
               pads_end=1)
PANEL = dict(src_shape=(1, 56, 56, 64), kernel_shape=(3, 3), out_channels=64, pads_begin=1,
             pads_end=1)
CONTENDERS = dict(src_shape=(1, 14, 14, 8), weights_shape=(5, 5, 8, 8), strides=2)
EXCLUDED = dict(src_shape=(1, 28, 28, 16), weights_shape=(3, 3, 16, 16), precision="highest")
TRANSPOSED = dict(input_length=5, kernel_taps=4, stride=3, pads=(1, 1))
OUTPUT_PADDING = dict(input_length=10, kernel_taps=3, stride=2, pads=(1, 1))
WINOGRAD = ("winograd2", "winograd4", "winograd6")

# checker, its parameters, the right answer, and wrong answers with a word the reason
# must contain (the mismatch it found)
CASES = [
    (exercises.check_output_length, OUTPUT_LENGTH, 6,
     [(17, "I - K + 1"), (8, "floor((23 - 7) / 3) + 1 = 6"), (7, "floor, not ceil")]),
    (exercises.check_reads, READS, {1, 4},
     [({-2, 1, 4}, "zero padding"), ({0, 3}, "also reads {1, 4}"), ({1}, "also reads {4}")]),
    (exercises.check_pads_for_length, PADS, (2, 3),
     [((1, 1), "14 outputs, not 17"), ((3, 3), "fewer"), ((-20, 0), "refused")]),
    (exercises.check_auto_pads, AUTO_PADS, (2, 1),
     [((1, 2), "other 'same' mode"), ((3, 0), "(2, 1), not (3, 0)")]),
    (exercises.check_output_shape, OUTPUT_SHAPE, (5, 7),
     [((4, 7), "axis 0: 5, not 4"), ((5, 5), "axis 1: 7, not 5")]),
    (exercises.check_tiling_stride, TILING, 3,
     [(2, "overlap"), (4, "gaps"), (0, "at least 1"), (40, "too large"),
      (10 ** 9, "too large")]),
    (exercises.check_weight_count, WEIGHTS, 9 * 16 * 64,
     [(9 * 64 * 64, "ungrouped"), (9 * 16 * 16, "divides by G twice"), (100, "9216")]),
    (exercises.check_connected_inputs, CONNECTED, {4, 5},
     [({6, 7}, "group 2"), ({4, 5, 6}, "{4, 5}")]),
    (exercises.check_column_shape, COLUMNS, (18, 27),
     [((72, 27), "O = (3, 3)"), ((18, 9), "9 * 3")]),
    (exercises.check_panel_bytes, PANEL, 56 * 56 * 9 * 64 * 4,
     [(56 * 56 * 9 * 64, "element count"), (56 * 56 * 64 * 4, "7225344 bytes, not")]),
    (exercises.check_winograd_products, dict(m=4), 36,
     [(144, "direct sum"), (16, "36 products, not 16")]),
    (exercises.check_winograd_layer_products, dict(output_shape=(14, 14), m=4), 576,
     [(441, "partial"), (196 * 9, "16 tiles")]),
    (exercises.check_contenders, CONTENDERS, {"direct", "im2col"},
     [({"direct", "im2col", "winograd4"}, "winograd4 cannot run"),
      ({"direct", "im2col", "fft"}, "not an auto contender"),
      ({"direct"}, "{'im2col'} can run it"), ({"gemm"}, "not algorithms")]),
    (exercises.check_precision_excluded, EXCLUDED, set(WINOGRAD),
     [({"winograd4"}, "also keeps out"), ({*WINOGRAD, "direct"}, "direct meets")]),
    (exercises.check_transpose_length, TRANSPOSED, 14,
     [(15, "S*I"), (16, "pads crop"), (13, "14 outputs, not 13")]),
    (exercises.check_output_padding, OUTPUT_PADDING, 1,
     [(0, "gives 9 positions"), (2, "refused")]),
]
IDS = [case[0].__name__ for case in CASES]


@pytest.mark.parametrize(("check", "parameters", "right", "wrong"), CASES, ids=IDS)
def test_right_answer_is_right(check, parameters, right, wrong, capsys):
    verdict = check(right, **parameters)
    assert verdict.right, verdict.reason
    assert str(verdict) in capsys.readouterr().out   # the notebook shows it


@pytest.mark.parametrize(("check", "parameters", "right", "wrong"), CASES, ids=IDS)
def test_usual_wrong_answers_are_wrong_with_the_mismatch(check, parameters, right, wrong):
    for answer, mentioned in wrong:
        verdict = check(answer, **parameters)
        assert not verdict.right, answer
        assert mentioned in verdict.reason, (answer, verdict.reason)


@pytest.mark.parametrize(("check", "parameters", "right", "wrong"), CASES, ids=IDS)
def test_blank_answer_is_not_right_and_does_not_raise(check, parameters, right, wrong,
                                                       capsys):
    for blank in (None, ...):
        verdict = check(blank, **parameters)
        assert not verdict.right
        assert "no answer yet" in verdict.reason
    assert "no answer yet" in capsys.readouterr().out


BAD_TYPES = ["six", 6.5, True, object(), [1, "a"], {"k": 1}, (1, 2, 3, 4)]


@pytest.mark.parametrize(("check", "parameters", "right", "wrong"), CASES, ids=IDS)
def test_bad_typed_answers_are_wrong_with_a_reason(check, parameters, right, wrong):
    for answer in BAD_TYPES:
        verdict = check(answer, **parameters)   # must not raise
        assert not verdict.right, answer
        assert verdict.reason
        if not isinstance(right, (set, frozenset)):
            assert "expected" in verdict.reason, (answer, verdict.reason)


def test_any_pads_of_the_right_sum_are_right():
    for pads in ((0, 5), (5, 0), (3, 2)):
        assert exercises.check_pads_for_length(pads, **PADS)
    assert "centred" in exercises.check_pads_for_length((0, 5), **PADS).reason


def test_checkers_follow_their_parameters():
    """The right answer is computed, not stored: other parameters, other answers."""
    assert exercises.check_output_length(8, input_length=10, kernel_taps=3)
    assert exercises.check_winograd_products(16, m=2)
    assert exercises.check_winograd_products(6, m=4, rank=1)
    assert exercises.check_tiling_stride(2, first={"kernel": 3, "stride": 3}, second_kernel=2)
    assert exercises.check_weight_count(9 * 32, in_channels=32, out_channels=32,
                                        kernel_shape=(3, 3), groups=32)
    assert exercises.check_contenders({"direct", "im2col", "winograd2", "winograd4",
                                       "winograd6"} - set(), src_shape=(1, 28, 28, 16),
                                      weights_shape=(3, 3, 16, 16), precision="highest") \
        .right is False
    assert exercises.check_contenders({"direct", "im2col"}, src_shape=(1, 28, 28, 16),
                                      weights_shape=(3, 3, 16, 16), precision="highest")
    assert exercises.check_transpose_length(9, input_length=4, kernel_taps=3, stride=2)
    assert exercises.check_output_padding(0, input_length=9, kernel_taps=3, stride=2,
                                          pads=(1, 1))


def test_bad_exercise_parameters_raise():
    """The notebook's own parameters are not the reader's answer: they raise."""
    with pytest.raises(ValueError, match="groups"):
        exercises.check_weight_count(1, in_channels=6, out_channels=6, kernel_shape=(3,),
                                     groups=4)
    with pytest.raises(ValueError, match="m="):
        exercises.check_winograd_products(1, m=5)
    with pytest.raises(ValueError, match="output_index"):
        exercises.check_reads({0}, output_index=99, input_length=12, kernel_taps=3)


def test_old_import_path_still_works():
    from convlab.viz.exercises import Verdict, check_transform_length
    assert isinstance(check_transform_length(None), Verdict)
