"""A/B of the direct kernel's tiling knobs: the input-channel pass size (cl_pass_bytes,
cl_pass_min_channels in direct_microkernel.h), the dst size from which it writes with
non-temporal stores (cl_stream_min_bytes), the src size from which 1x1 convolutions
prefetch the next pixel block's src (cl_prefetch_min_bytes) and the weight size up to which
an item takes every channel chunk of its group (cl_whole_pixel_bytes).

Times direct's kernel alone on prepared weights (what a plan runs, or with --one-shot the
layout a one-shot call runs on; dst 64-byte aligned, as convlab allocates a large one) for
each setting, in alternating blocks of at least
--block-seconds each, --rounds rounds, and prints the median per layer and setting with
its speed-up over the first setting, then the geo-mean.

    python bench/direct_tiling.py --suite resnet_50 --settings pass=32768 pass=262144
    python bench/direct_tiling.py --suite resnet_50 --mb 8 --settings stream=0 stream=1
    python bench/direct_tiling.py --suite resnet_50 --mb 8 --settings prefetch=0 \
        prefetch=16777216
    python bench/direct_tiling.py --suite resnet_50 --one-shot --settings whole=32768 \
        whole=131072

A setting is comma-separated KEY=VALUE pairs, keys pass (bytes), min_channels, pass_limit
(bytes), stream, prefetch and whole (bytes, 0 for never); a key left out keeps the kernel's
default. Plans block weights above the whole-pixel limit in force when they prepare them
(direct.BLOCKED_MIN_BYTES), so --one-shot is the way to vary that limit.
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from convlab.cli._bench_args import layer_script_parser, select_layers  # noqa: E402
from convlab.cli._bench_results import geo_mean  # noqa: E402
from convlab.cli._bench_tables import cpu_model  # noqa: E402
from convlab.problem import params, shapes  # noqa: E402
from convlab.runtime import _buffers as buffers  # noqa: E402
from convlab.runtime.timing import medians_under_settings  # noqa: E402
from convlab.strategies import direct  # noqa: E402
from convlab.strategies.kernels import _direct  # noqa: E402

KNOBS = ("pass", "min_channels", "pass_limit", "stream", "prefetch", "whole")


def current_knobs():
    """The kernel's knobs as they are now (read by setting and restoring them)."""
    pass_size = _direct.set_pass_size(1, 1)
    _direct.set_pass_size(*pass_size)
    pass_limit = _direct.set_pass_limit(0)
    _direct.set_pass_limit(pass_limit)
    stream = _direct.set_streaming(0)
    _direct.set_streaming(stream)
    prefetch = _direct.set_prefetch(0)
    _direct.set_prefetch(prefetch)
    whole = _direct.set_whole_pixels(0)
    _direct.set_whole_pixels(whole)
    return dict(zip(KNOBS, pass_size + (pass_limit, stream, prefetch, whole)))


def parse_setting(text, defaults):
    """KEY=VALUE pairs over ``defaults``, as a tuple of values in KNOBS order."""
    setting = dict(defaults)
    for pair in text.split(","):
        key, _, value = pair.partition("=")
        if key not in KNOBS or not value.isdigit():
            raise SystemExit(f"setting {text!r}: expected KEY=VALUE pairs, keys "
                             f"{', '.join(KNOBS)}")
        setting[key] = int(value)
    return tuple(setting[key] for key in KNOBS)


def apply_setting(setting):
    pass_bytes, min_channels, pass_limit, stream, prefetch, whole = setting
    _direct.set_pass_size(pass_bytes, min_channels)
    _direct.set_pass_limit(pass_limit)
    _direct.set_streaming(stream)
    _direct.set_prefetch(prefetch)
    _direct.set_whole_pixels(whole)


def layer_problem(layer, mb):
    """The layer's src and weights at batch ``mb``, and its problem."""
    src, weights, _ = layer.arrays(mb)
    problem = params.make_problem(src.shape, src.dtype, weights.shape, weights.dtype,
                                  **layer.convolve_kwargs())
    return src, weights, problem


def kernel_call(layer, mb, threads, one_shot=False):
    src, weights, problem = layer_problem(layer, mb)
    prepared = direct.prepare_weights(problem, params.canonical_weights(weights, problem),
                                      one_shot=one_shot)
    src = params.canonical_src(src, problem)
    dst = buffers.aligned_empty(problem.canonical_dst_shape, problem.dtype)

    def call():
        direct.run_direct(problem, src, prepared, None, dst, threads)
        return dst
    return call


def cuts(layer, mb, threads, settings):
    """direct.kernel_cut of the layer under each setting, as comparable tuples."""
    problem = layer_problem(layer, mb)[2]
    found = []
    for setting in settings:
        apply_setting(setting)
        found.append(tuple(sorted(direct.kernel_cut(problem, threads).items())))
    return found


def main(argv=None):
    parser = layer_script_parser(__doc__.split("\n")[0])
    parser.add_argument("--settings", nargs="+", default=["pass=32768", "pass=262144"],
                        help="KEY=VALUE[,KEY=VALUE...] each")
    parser.add_argument("--mb", type=int, default=1)
    parser.add_argument("--block-seconds", type=float, default=0.15)
    parser.add_argument("--one-shot", action="store_true",
                        help="the weights as a one-shot call lays them out (never blocked)")
    parser.add_argument("--changed-only", action="store_true",
                        help="only the layers whose cut (direct.kernel_cut) differs between "
                             "the settings")
    args = parser.parse_args(argv)
    default = current_knobs()
    settings = [parse_setting(text, default) for text in args.settings]
    layers = select_layers(shapes.load_suite(args.suite), args.layers)
    print(f"command: python {' '.join(sys.argv)}")
    print(f"machine: {cpu_model()}, {os.cpu_count()} logical CPUs; {args.threads} threads, "
          f"mb {args.mb}, {args.rounds} rounds of blocks of {args.block_seconds} s"
          f"{', one-shot weights' if args.one_shot else ''}")
    labels = args.settings
    speedups = []
    try:
        for layer in layers:
            if args.changed_only and len(set(cuts(layer, args.mb, args.threads,
                                                  settings))) == 1:
                continue
            call = kernel_call(layer, args.mb, args.threads, args.one_shot)
            medians = medians_under_settings(call, settings, apply_setting, args.rounds,
                                             args.block_seconds)
            first = medians[settings[0]]
            ratios = [first / medians[s] for s in settings]
            speedups.append(ratios)
            print(f"{layer.short_name:20s} " + "  ".join(
                f"{label}: {medians[s] * 1e3:8.3f} ms ({r:4.2f}x)"
                for label, s, r in zip(labels, settings, ratios)), flush=True)
    finally:
        apply_setting(tuple(default[key] for key in KNOBS))
    print(f"geo-mean speed-up over {labels[0]}: " + "  ".join(
        f"{label}: {geo_mean(column):.3f}" for label, column in zip(labels, zip(*speedups))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
