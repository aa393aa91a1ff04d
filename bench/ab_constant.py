"""A/B of one module constant: an algorithm's one-shot time on benchdnn layers with the
constant at one value and at another, in alternating blocks.

    python bench/ab_constant.py convlab.strategies.im2col TAP_SLAB_MIN_SAVING 0.0 2.0 \\
        --algorithm im2col --layers resnet_50:res5a_branch2b,googlenet_v2:inception_5a/3x3

Values are Python literals. The module's cached plans (its ``functools.lru_cache``
functions) are cleared on every switch, so each block runs with the value it names.
"""
from __future__ import annotations

import argparse
import ast
import contextlib
import functools
import importlib
import pathlib
import statistics
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

import convlab  # noqa: E402
from convlab.cli._bench_results import geo_mean  # noqa: E402
from convlab.problem import shapes  # noqa: E402
from convlab.runtime.timing import time_block  # noqa: E402


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("module")
    parser.add_argument("constant")
    parser.add_argument("value_a", type=ast.literal_eval)
    parser.add_argument("value_b", type=ast.literal_eval)
    parser.add_argument("--algorithm", required=True)
    parser.add_argument("--layers", required=True, help="suite:layer,suite:layer,...")
    add_block_options(parser, rounds=7, repeats=20, per="value")
    return parser.parse_args(argv)


def add_block_options(parser, rounds, repeats, per):
    """The options of a run in alternating blocks (see :func:`alternating_medians`)."""
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--mb", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=rounds, help=f"blocks per {per}")
    parser.add_argument("--repeats", type=int, default=repeats, help="calls per block")


def _set(module, name, value):
    setattr(module, name, value)
    for item in vars(module).values():
        if isinstance(item, functools._lru_cache_wrapper):
            item.cache_clear()


@contextlib.contextmanager
def constant_set_to(module, name, value):
    """Within the block, ``module.name`` is ``value``; the module's cached plans are
    cleared on the way in and on the way out, when the old value comes back."""
    saved = getattr(module, name)
    _set(module, name, value)
    try:
        yield
    finally:
        _set(module, name, saved)


def alternating_medians(call, settings, rounds, repeats):
    """Median seconds of ``call`` under each of two settings (functions returning a
    context manager): ``rounds`` blocks of ``repeats`` calls each, the order of the two
    alternating round by round; the median over a setting's block medians."""
    times = ([], [])
    for round_ in range(rounds):
        for which in (0, 1) if round_ % 2 == 0 else (1, 0):
            with settings[which]():
                times[which].append(statistics.median(time_block(call, repeats)))
    return tuple(statistics.median(t) for t in times)


def find_layer(spec, mb):
    suite, name = spec.split(":", 1)
    # the suite's layer names carry a network prefix, which may differ from the suite's
    return next(layer for layer in shapes.load_suite(suite, mb=mb)
                if layer.name == name or layer.name.endswith(":" + name))


def main(argv=None):
    args = parse_args(argv)
    module = importlib.import_module(args.module)
    a, b = args.value_a, args.value_b
    print(f"{args.module}.{args.constant}: A = {a!r}, B = {b!r}; {args.algorithm}, "
          f"{args.threads} threads, mb {args.mb}; median ms of {args.rounds} blocks of "
          f"{args.repeats} calls per value, A and B alternating in order\n")
    print(f"{'layer':40s} {'A':>8s} {'B':>8s} {'B/A':>6s}")
    ratios = []
    for spec in args.layers.split(","):
        layer = find_layer(spec, args.mb)
        src, weights, _ = layer.arrays(args.mb, seed=0)
        kwargs = layer.convolve_kwargs()

        def call():
            convlab.convolve(src, weights, algorithm=args.algorithm, threads=args.threads,
                             **kwargs)

        seconds_a, seconds_b = alternating_medians(
            call, [lambda v=v: constant_set_to(module, args.constant, v) for v in (a, b)],
            args.rounds, args.repeats)
        ms_a, ms_b = seconds_a * 1e3, seconds_b * 1e3
        ratios.append(ms_b / ms_a)
        print(f"{layer.name:40s} {ms_a:8.3f} {ms_b:8.3f} {ms_b / ms_a:6.3f}", flush=True)
    print(f"\nB time / A time: geo-mean {geo_mean(ratios):.3f} over {len(ratios)} layers")


if __name__ == "__main__":
    main()
