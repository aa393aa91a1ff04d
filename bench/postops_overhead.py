"""What fused post-ops cost on top of the bare convolution (conv + sum + relu, ResNet's
residual pattern), against the same chain run as a separate output stage, and PyTorch's
conv2d followed by ``add_`` and ``relu_``.

    python bench/postops_overhead.py [--suite resnet_50] [--threads 2] [--repeats 15]

Per layer, plans (weights prepared once) write into a preallocated ``out``; each
contender runs in blocks after an idle pause (``convlab.benchmark.time_block``), and the
blocks of all contenders alternate for ``--rounds`` rounds, so a slow spell of the
machine falls on all of them. The figures are medians over every timed call.
"""
from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

import convlab  # noqa: E402
from convlab import benchmark, postops, shapes  # noqa: E402

CHAIN = ["sum", "relu"]


def staged_plan(weights, layer, algorithm, threads):
    """A plan whose post-ops run in the separate output stage (fusion switched off)."""
    plan = convlab.Convolution(weights, post_ops=CHAIN, algorithm=algorithm, threads=threads,
                               **layer.convolve_kwargs())

    def call(src, out):
        fuse = postops.epilogue
        postops.epilogue = lambda *args, **kwargs: None
        try:
            return plan(src, out=out)
        finally:
            postops.epilogue = fuse

    return call


def torch_calls(torch, layer, src, weights, threads):
    """PyTorch's conv alone, and followed by the same chain in place (add_, relu_)."""
    peer = benchmark.torch_contender(torch, layer, np.moveaxis(src, -1, 1),
                                     np.moveaxis(weights, (-1, -2), (0, 1)), threads)
    residual = torch.ones((layer.mb, layer.oc, *layer.output_shape))

    def fused():
        return peer.call().add_(residual).relu_()

    return peer.call, fused


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--suite", default="resnet_50")
    parser.add_argument("--layers", default=None, help="comma-separated layer names")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=15, help="timed calls per block")
    parser.add_argument("--rounds", type=int, default=3, help="blocks per contender")
    args = parser.parse_args(argv)
    try:
        import torch
    except ImportError:
        torch = None
    layers = shapes.load_suite(args.suite, mb=1)
    if args.layers:
        wanted = set(args.layers.split(","))
        layers = [layer for layer in layers if layer.short_name in wanted]
    print(f"command: python bench/postops_overhead.py {' '.join(argv or sys.argv[1:])}")
    print(f"machine: {benchmark.cpu_model()}, {os.cpu_count()} logical CPUs; "
          f"threads {args.threads}; chain {CHAIN}; float32, batch 1, NXC, plans with out=")
    print(f"median of {args.rounds} rounds x {args.repeats} calls per contender\n")
    header = (f"{'layer':<16} {'algorithm':<10} {'bare ms':>8} {'fused ms':>9} "
              f"{'fused':>7} {'staged':>7} {'torch':>7}")
    print(header + "\n" + "-" * len(header))
    overheads = {"fused": [], "staged": [], "torch": []}
    for layer in layers:
        src, weights, _ = layer.arrays(dtype=np.float32)
        kwargs = layer.convolve_kwargs()
        algorithm = convlab.Convolution(weights, threads=args.threads, **kwargs).algorithm_for(src)
        bare_plan = convlab.Convolution(weights, algorithm=algorithm, threads=args.threads,
                                        **kwargs)
        fused_plan = convlab.Convolution(weights, post_ops=CHAIN, algorithm=algorithm,
                                         threads=args.threads, **kwargs)
        staged = staged_plan(weights, layer, algorithm, args.threads)
        out = np.ones(layer.dst_shape(), np.float32)
        calls = {"bare": lambda: bare_plan(src, out=out),
                 "fused": lambda: fused_plan(src, out=out),
                 "staged": lambda: staged(src, out=out)}
        if torch is not None:
            calls["torch_bare"], calls["torch_fused"] = torch_calls(torch, layer, src, weights,
                                                                    args.threads)
        times = {name: [] for name in calls}
        for _ in range(args.rounds):
            for name, call in calls.items():
                times[name] += benchmark.time_block(call, args.repeats)
        median = {name: statistics.median(values) for name, values in times.items()}
        ratio = {"fused": median["fused"] / median["bare"],
                 "staged": median["staged"] / median["bare"]}
        if torch is not None:
            ratio["torch"] = median["torch_fused"] / median["torch_bare"]
        for name, value in ratio.items():
            overheads[name].append(value)
        print(f"{layer.short_name:<16} {algorithm:<10} {median['bare'] * 1e3:8.3f} "
              f"{median['fused'] * 1e3:9.3f} "
              + " ".join(f"{(ratio[k] - 1) * 100:+6.1f}%" if k in ratio else f"{'-':>7}"
                         for k in ("fused", "staged", "torch")))
    print("\ngeo-mean overhead of the chain over the bare convolution:")
    for name, values in overheads.items():
        if values:
            print(f"  {name:<7} {(benchmark.geo_mean(values) - 1) * 100:+.1f}%  "
                  f"(worst {(max(values) - 1) * 100:+.1f}%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
