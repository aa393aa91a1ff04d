"""The problems a calibration times, chosen so that every cost term carries weight.

A constant is pinned only by timings in which its term is a sizeable share of the work,
and told apart from another only where the two terms do not grow together. So the design
holds, beside ordinary layers, problems where one term dominates: a tiny call (the fixed
cost of a call), a thin 3x3 (Winograd's tile transforms, direct's inner loops), weights
too large for L2 (streamed from further out), output channels that are not whole vectors
(direct packs its weights), a 1x1 on 2048 channels of 49 pixels (BLAS packs a large
operand for few rows) and one on 576 channels of 16 pixels (the packing from cache is
the work), a strided 1x1 (im2col's gather path), depthwise and grouped
layers, 1-D and 3-D problems (their own Winograd terms), and large kernels (15x15 to
31x31, 63 to 127 taps, 5^3 and 7^3), where fft's transforms and contraction weigh.
``why`` names the terms each problem is there for; ``tests/test_calibration.py`` checks
that every term of every algorithm's cost hook is non-zero in some problem of the core tier.

Problems run at batch 1 (batch4_3x3 at 4, grouped_4x4_3d at 2), float32, and take 0.01
to 5 ms per call on two cores of a current x86 server, so that a few rounds of the whole
design fit a one-minute budget.
The core tier pins every term; the extra tier adds shapes found in common networks, timed
when the budget leaves room for them. ``plan`` problems are also timed as plans (weights
prepared once), whose estimates leave out the weight-preparation terms: the two timings
together tell preparation apart from the rest.
"""
from __future__ import annotations

from dataclasses import dataclass

from convlab.problem import shapes

CORE, EXTRA = 0, 1


@dataclass(frozen=True)
class DesignProblem:
    name: str
    descriptor: str  # benchdnn convolution descriptor (convlab.problem.shapes)
    why: str
    tier: int = CORE
    plan: bool = False  # also time a plan (prepared weights)

    def layer(self) -> shapes.Layer:
        return shapes.parse_descriptor(f'{self.descriptor}n"calibration:{self.name}"')


DESIGN: tuple[DesignProblem, ...] = (
    # --- core: every term of every algorithm -----------------------------------------
    DesignProblem("tiny_3x3", "mb1ic8ih8oc8oh8kh3ph1",
                  "call and oneshot_call: the fixed cost of a call, all algorithms, with "
                  "its weights prepared (a plan's) and without", plan=True),
    DesignProblem("tiny_1x1", "mb1ic8ih8oc8oh8kh1ph0", "call and oneshot_call, for the "
                  "1x1 paths", plan=True),
    DesignProblem("tiny_1d", "mb1ic4iw32oc4ow32kw3pw1", "call and oneshot_call, in 1-D",
                  plan=True),
    DesignProblem("tiny_3d", "mb1ic4oc4_id4ih4iw4_kd3kh3kw3_pd1ph1pw1", "call, in 3-D"),
    DesignProblem("small_3x3", "mb1ic16ih14oc16oh14kh3ph1",
                  "call against the work of a small layer"),
    DesignProblem("small_3x3_7", "mb1ic32ih7oc32oh7kh3ph1",
                  "call against the work of a small layer; Winograd short_gemm_flops"),
    DesignProblem("dense_3x3_56", "mb1ic64ih56oc64oh56kh3ph1",
                  "direct dense_flops, weight_stream_bytes_cached; im2col gemm_flops, "
                  "unfold_bytes; Winograd gemm_flops, transform_flops"),
    DesignProblem("dense_3x3_28", "mb1ic128ih28oc128oh28kh3ph1",
                  "GEMM-bound 3x3 with weights in L2; Winograd u_stream_bytes"),
    DesignProblem("dense_3x3_14", "mb1ic256ih14oc256oh14kh3ph1",
                  "direct weight_stream_bytes_uncached (2.4 MB of weights); Winograd "
                  "short_gemm_flops, u_stream_bytes", plan=True),
    DesignProblem("dense_3x3_7", "mb1ic512ih7oc512oh7kh3ph1",
                  "Winograd weight_transform_flops, short_gemm_flops; im2col "
                  "packed_weight_bytes (9.4 MB of weights, 49 rows)", plan=True),
    DesignProblem("unpadded_oc_3x3", "mb1ic256ih14oc250oh14kh3ph1",
                  "direct weight_pack_bytes: 250 output channels are not whole vectors",
                  plan=True),
    DesignProblem("thin_3x3", "mb1ic16ih112oc16oh112kh3ph1",
                  "Winograd transform_flops, tiles; direct inner_loops; im2col "
                  "unfold_bytes"),
    DesignProblem("narrow_oc_3x3", "mb1ic64ih56oc8oh56kh3ph1",
                  "im2col unfold_bytes (a wide panel for 8 outputs); direct src_bytes"),
    DesignProblem("grouped_3x3", "g32mb1ic128ih28oc128oh28kh3ph1",
                  "direct inner_loops (4 channels a group); im2col small_gemm_calls; Winograd "
                  "tiles (a tile set per group)"),
    DesignProblem("depthwise_3x3", "g64mb1ic64ih56oc64oh56kh3ph1",
                  "direct depthwise_flops; Winograd tiles; im2col small_gemm_calls, gemv_flops"),
    DesignProblem("depthwise_3x3_s2", "g128mb1ic128ih56oc128oh28kh3sh2ph1",
                  "direct depthwise_flops, src_bytes (stride 2)"),
    DesignProblem("pointwise_56", "mb1ic64ih56oc256oh56kh1ph0",
                  "direct pointwise_flops, dst_bytes; im2col 1x1 GEMM"),
    DesignProblem("pointwise_7_wide", "mb1ic2048ih7oc512oh7kh1ph0",
                  "im2col packed_weight_bytes (4 MB of weights, 49 rows); direct "
                  "weight_stream_bytes_uncached", plan=True),
    DesignProblem("pointwise_4_deep", "mb1ic576ih4oc128oh4kh1ph0",
                  "im2col packed_weight_bytes where the weights (295 KB) stay in cache "
                  "and one GEMM is all the work; direct's call against it (GoogLeNet's "
                  "loss heads: 16 pixels, 576 channels)", EXTRA),
    DesignProblem("pointwise_2_wide", "mb1ic1024ih2oc128oh2kh1ph0",
                  "im2col gemm_flops on 4 rows and packed_weight_bytes of 512 KB of weights "
                  "in cache, against direct's call (GoogLeNet-v2's loss2/conv, where im2col "
                  "ran 20 us and direct 31 us on an AMD EPYC family 25 model 17 at avx512, "
                  "and the fits with pointwise_4_deep alone ran direct)", EXTRA),
    DesignProblem("strided_1x1", "g1mb1ic256ih56iw56oc128oh28ow28kh1kw1sh2sw2ph0pw0",
                  "im2col gather_gemm_flops; direct src_bytes (3/4 of src unread)"),
    DesignProblem("few_in_channels_1x1", "mb1ic4ih56oc256oh56kh1ph0",
                  "direct dst_bytes, inner_loops (4 input channels, 256 outputs)"),
    DesignProblem("stem_7x7_s2", "g1mb1ic3ih112iw112oc64oh56ow56kh7kw7sh2sw2ph3pw3",
                  "direct inner_loops (3 input channels); im2col unfold_bytes"),
    DesignProblem("small_1d_6", "mb1ic32iw121oc32ow116kw6pw0",
                  "call against the work of a small 1-D layer (the 1d suite's conv1d:11, "
                  "40-80 us): direct's fixed cost against im2col's gemm_calls"),
    DesignProblem("conv1d", "mb1ic64iw1024oc64ow1024kw3pw1",
                  "Winograd gemm_flops_1d; 1-D direct and im2col"),
    DesignProblem("conv1d_thin", "mb1ic16iw8192oc16ow8192kw3pw1",
                  "Winograd transform_flops_1d, tiles"),
    DesignProblem("conv1d_short_wide", "mb1ic256iw32oc256ow32kw3pw1",
                  "Winograd weight_transform_flops, short_gemm_flops in 1-D; im2col "
                  "packed_weight_bytes", plan=True),
    DesignProblem("conv1d_wide", "mb1ic256iw512oc256ow512kw3pw1",
                  "Winograd gemm_flops_1d where the GEMM is most of the work (the 1d "
                  "suite's 512-channel layers): fitted on the other 1-D problems alone "
                  "it came out 0, and F(6) was estimated 2.5x below its time there"),
    DesignProblem("conv3d", "mb1ic32oc32_id16ih16iw16_kd3kh3kw3_pd1ph1pw1",
                  "Winograd transform_flops_3d against the GEMM in 3-D"),
    DesignProblem("conv3d_64", "mb1ic64oc64_id8ih16iw16_kd3kh3kw3_pd1ph1pw1",
                  "Winograd u_stream_bytes against its 3-D transforms "
                  "with 64 channels (the 3-D U-Net's middle layers, where F(2) runs 1.8x "
                  "faster than direct)", EXTRA),
    DesignProblem("conv3d_wide", "mb1ic128oc128_id6ih6iw6_kd3kh3kw3_pd1ph1pw1",
                  "Winograd weight_transform_flops_3d (large filter, few tiles)", plan=True),
    DesignProblem("conv3d_thin", "mb1ic8oc8_id16ih32iw32_kd3kh3kw3_pd1ph1pw1",
                  "Winograd transform_flops_3d, tiles in 3-D"),
    # large kernels, where fft competes: its terms, and direct's and im2col's there
    DesignProblem("depthwise_15x15", "g16mb1ic16ih24oc16oh24kh15ph7",
                  "fft broadcast_flops, forward and inverse transforms of mid-sized tiles; "
                  "direct depthwise_flops and inner_loops on a large kernel"),
    DesignProblem("depthwise_31x31", "g16mb1ic16ih24oc16oh24kh31ph15",
                  "fft transforms of a whole-image tile shortened by the padding, "
                  "weight_transform_flops (a third of a one-shot call)", plan=True),
    DesignProblem("sinc_1d_127", "mb1ic1iw2048oc32kw127pw0",
                  "fft inverse_fft_flops (32 outputs of 1 input), tiles and blocks in 1-D"),
    DesignProblem("grouped_1d_63", "g8mb1ic64iw256oc64kw63pw31",
                  "fft gemm_flops and spectrum_stream_bytes (8x8 channels a group, few "
                  "tiles per block)"),
    DesignProblem("dense_5x5x5", "mb1ic8oc8_id12kd5pd2",
                  "fft transform_points in 3-D, gemm_flops; direct dense_flops on a 5^3 "
                  "kernel", plan=True),
    DesignProblem("depthwise_7x7x7", "g8mb1ic8oc8_id10kd7pd3",
                  "fft 3-D transforms, copy_bytes; direct depthwise_flops in 3-D"),
    DesignProblem("grouped_4x4_5x5", "g16mb1ic64ih28oc64oh28kh5ph2",
                  "fft broadcast_flops with 4 input channels a group (a multiply-add pass "
                  "per channel)"),
    DesignProblem("grouped_4x4_3d", "g6mb2ic24oc24_id12kd3pd1",
                  "fft broadcast_flops in 3-D, two images a block"),
    DesignProblem("depthwise_27x27_wide", "g128mb1ic128ih14oc128oh14kh27ph13",
                  "fft's compiled pipeline with many tasks: lane_transform_flops, "
                  "lane_points, lane_weight_transform_flops; direct depthwise_flops",
                  plan=True),
    DesignProblem("bank_1d_251", "mb1ic1iw2048oc64kw251pw0",
                  "fft's compiled pipeline on a bank of 1-D filters: several tiles a "
                  "task, lane_tasks; direct and im2col on one input channel"),
    # --- extra: common network shapes, when the budget allows -------------------------
    DesignProblem("reduce_1x1_56", "mb1ic256ih56oc64oh56kh1ph0",
                  "1x1 reducing 256 channels to 64", EXTRA),
    DesignProblem("pointwise_56_narrow", "mb1ic64ih56oc64oh56kh1ph0",
                  "1x1, 64 to 64 channels on 56x56 (ResNet-50's res2a_branch2a, GoogLeNet's "
                  "conv2/3x3_reduce): src, dst and weights stay in L2 between calls, where "
                  "BLAS ran 1.2-1.4x faster than direct on a Xeon whose design-fitted "
                  "constants priced them the other way round", EXTRA),
    DesignProblem("reduce_1x1_28", "mb1ic512ih28oc128oh28kh1ph0",
                  "1x1 reducing 512 channels to 128", EXTRA),
    DesignProblem("expand_1x1_14", "mb1ic256ih14oc1024oh14kh1ph0",
                  "1x1 expanding 256 channels to 1024 (1 MB of weights)", EXTRA),
    DesignProblem("reduce_1x1_14", "mb1ic1024ih14oc256oh14kh1ph0",
                  "1x1 reducing 1024 channels to 256", EXTRA),
    DesignProblem("strided_1x1_wide", "g1mb1ic1024ih14iw14oc2048oh7ow7kh1kw1sh2sw2ph0pw0",
                  "strided 1x1 with 8 MB of weights for 49 rows", EXTRA, plan=True),
    DesignProblem("strided_3x3", "mb1ic128ih56oc128oh28kh3sh2ph1",
                  "3x3 stride 2 (no Winograd)", EXTRA),
    DesignProblem("dilated_3x3", "mb1ic64ih28oc64oh28kh3ph2dh1",
                  "3x3 dilation 2 (no Winograd)", EXTRA),
    DesignProblem("dilated_3x3_7", "mb1ic64ih11oc128oh7kh3ph1dh2",
                  "3x3 dilation 3 on 49 output pixels (the dilated suite's dilated_conv:21): "
                  "im2col's GEMM of few rows on an unfolded panel against direct, where "
                  "pointwise_2_wide alone priced im2col below direct and auto ran it 1.5x "
                  "slower", EXTRA),
    DesignProblem("dense_5x5", "mb1ic32ih28oc64oh28kh5ph2",
                  "5x5 (no Winograd)", EXTRA),
    DesignProblem("rgb_3x3_112", "mb1ic3ih112oc64oh112kh3ph1",
                  "3 input channels, 3x3 stride 1 on a large image (VGG-19 conv1_1, "
                  "3d_unet conv_1): direct's dense_flops against dst_bytes, which "
                  "few_in_channels_1x1 alone sets where writing dst is all the work", EXTRA),
    DesignProblem("gray_3x3_224", "mb1ic1ih224oc32oh224kh3ph1",
                  "1 input channel, 3x3 on a 224x224 image (a grayscale network's first "
                  "layer): with rgb_3x3_112, two problems where direct's dst_bytes and "
                  "im2col's gemm_output_passes are most of the time, so that each still "
                  "pins them when the other is held out", EXTRA),
    DesignProblem("dense_3x3_112", "mb1ic64ih112oc64oh112kh3ph1",
                  "3x3 on a large image (VGG-19's conv1_2 at a quarter of its size): "
                  "Winograd's per-tile terms over 361 (F(6)) to 3136 (F(2)) tiles, where the "
                  "small layers' fixed costs weigh nothing", EXTRA),
    DesignProblem("dense_3x3_14_160", "mb1ic160ih14oc160oh14kh3ph1",
                  "3x3 on 14x14 with 160 channels (GoogLeNet's inception_4*): Winograd's "
                  "fixed and weight-transform costs against direct's", EXTRA),
    DesignProblem("dense_3x3_28_96", "mb1ic96ih28oc128oh28kh3ph1",
                  "3x3, 96 input channels", EXTRA),
    DesignProblem("depthwise_3x3_112", "g32mb1ic32ih112oc32oh112kh3ph1",
                  "depthwise on a large image", EXTRA),
    DesignProblem("batch4_3x3", "mb4ic64ih28oc64oh28kh3ph1",
                  "batch 4: 1-D and 2-D batches run as one image's depth slices", EXTRA),
    DesignProblem("grouped_1d", "g8mb1ic64iw256oc64ow256kw3pw1",
                  "grouped 1-D", EXTRA),
    DesignProblem("grouped_1x1_1d_tiny", "g100mb1ic400iw15oc400ow15kw1pw0",
                  "im2col small_in_place_gemm_calls: 100 GEMMs of 15 x 4 x 4 on the input "
                  "as it lies (the 1d suite's grouped 1x1)", EXTRA),
    DesignProblem("conv3d_5_deep", "mb1ic256oc256_id4ih8iw8_kd5kh5kw5_pd2ph2pw2",
                  "3-D 5x5x5 on 256 channels of 4x8x8 (V-Net's stage 5): direct streams "
                  "33 MB of weights for every block of outputs; im2col's tap slabs", EXTRA),
    DesignProblem("conv3d_unet_mid", "mb1ic32oc64_id24ih32iw32_kd3kh3kw3_pd0ph0pw0",
                  "3-D 3x3x3 unpadded, 32 to 64 channels on 24x32x32 (the 3-D U-Net's "
                  "first levels, at a tenth of their size): Winograd's 3-D terms on many "
                  "tiles", EXTRA),
    DesignProblem("grouped_1d_128_wide", "g16mb1ic768iw499oc768ow500kw128pw64",
                  "grouped 1-D, 48 channels a group, 128 taps (wav2vec 2.0's positional "
                  "convolution): fft's per-group GEMMs against direct's and im2col's", EXTRA),
    DesignProblem("asymmetric_1x7", "mb1ic128ih17iw17oc128oh17ow17kh1kw7ph0pw3",
                  "1x7 (Inception-v3)", EXTRA),
)


def problems(tiers=(CORE, EXTRA)) -> list[DesignProblem]:
    """The design's problems of the given tiers, core first."""
    return sorted((p for p in DESIGN if p.tier in tiers), key=lambda p: p.tier)
