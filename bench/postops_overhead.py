"""What fused post-ops cost on top of the bare convolution, against the same chain run as
a separate output stage, and PyTorch's conv followed by the same ops in place.

    python bench/postops_overhead.py [--suite resnet_50] [--chain sum,relu] [--threads 2]

The default chain is conv + sum + relu, ResNet's residual pattern; ``--chain relu`` is
the other one ResNet uses. Whether the chain was fused (see ``fuse_post_ops`` in the
registry) is printed per layer.

Per layer, plans (weights prepared once) write into a preallocated ``out``; each
contender runs in blocks after an idle pause (``convlab.runtime.timing.time_block``), and the
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
from convlab.cli import benchmark  # noqa: E402
from convlab.cli._bench_results import geo_mean  # noqa: E402
from convlab.cli._bench_tables import cpu_model  # noqa: E402
from convlab.dispatch import registry  # noqa: E402
from convlab.ops import postops  # noqa: E402
from convlab.problem import shapes  # noqa: E402
from convlab.runtime.timing import time_block  # noqa: E402

TORCH_OPS = {"relu": lambda y, residual: y.relu_(),
             "sum": lambda y, residual: y.add_(residual)}


def staged_plan(weights, layer, chain, algorithm, threads):
    """A plan whose post-ops run in the separate output stage (fusion switched off)."""
    plan = convlab.Convolution(weights, post_ops=chain, algorithm=algorithm, threads=threads,
                               **layer.convolve_kwargs())

    def call(src, out):
        fuse = postops.epilogue
        postops.epilogue = lambda *args, **kwargs: None
        try:
            return plan(src, out=out)
        finally:
            postops.epilogue = fuse

    return call


def torch_calls(torch, layer, src, weights, chain, threads):
    """PyTorch's conv alone, and followed by the same chain in place (add_, relu_)."""
    peer = benchmark.torch_contender(torch, layer, np.moveaxis(src, -1, 1),
                                     np.moveaxis(weights, (-1, -2), (0, 1)), threads)
    residual = torch.ones((layer.mb, layer.oc, *layer.output_shape))

    def fused():
        y = peer.call()
        for name in chain:
            y = TORCH_OPS[name](y, residual)
        return y

    return peer.call, fused


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--suite", default="resnet_50")
    parser.add_argument("--layers", default=None, help="comma-separated layer names")
    parser.add_argument("--chain", default="sum,relu",
                        help=f"comma-separated post-ops among {sorted(TORCH_OPS)}")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=15, help="timed calls per block")
    parser.add_argument("--rounds", type=int, default=5, help="blocks per contender")
    parser.add_argument("--min-block-time", type=float, default=0.2,
                        help="seconds each block runs at least (more calls on small layers)")
    args = parser.parse_args(argv)
    chain = args.chain.split(",")
    if not set(chain) <= set(TORCH_OPS):
        parser.error(f"--chain={args.chain!r}: expected post-ops among {sorted(TORCH_OPS)}")
    try:
        import torch
    except ImportError:
        torch = None
    layers = shapes.load_suite(args.suite, mb=1)
    if args.layers:
        wanted = set(args.layers.split(","))
        layers = [layer for layer in layers if layer.short_name in wanted]
    print(f"command: python bench/postops_overhead.py {' '.join(argv or sys.argv[1:])}")
    print(f"machine: {cpu_model()}, {os.cpu_count()} logical CPUs; "
          f"threads {args.threads}; chain {chain}; float32, batch 1, NXC, plans with out=")
    print(f"median of {args.rounds} rounds x (at least {args.repeats} calls, "
          f"{args.min_block_time:g} s) per contender\n")
    header = (f"{'layer':<16} {'algorithm':<10} {'in kernel':>9} {'bare ms':>8} "
              f"{'chain ms':>9} {'chain':>7} {'staged':>7} {'torch':>7}")
    print(header + "\n" + "-" * len(header))
    overheads = {"chain": [], "staged": [], "torch": []}
    for layer in layers:
        src, weights, _ = layer.arrays(dtype=np.float32)
        kwargs = layer.convolve_kwargs()
        algorithm = convlab.Convolution(weights, threads=args.threads, **kwargs).algorithm_for(src)
        bare_plan = convlab.Convolution(weights, algorithm=algorithm, threads=args.threads,
                                        **kwargs)
        fused_plan = convlab.Convolution(weights, post_ops=chain, algorithm=algorithm,
                                         threads=args.threads, **kwargs)
        staged = staged_plan(weights, layer, chain, algorithm, args.threads)
        out = np.ones(layer.dst_shape(), np.float32)
        calls = {"bare": lambda: bare_plan(src, out=out),
                 "fused": lambda: fused_plan(src, out=out),
                 "staged": lambda: staged(src, out=out)}
        if torch is not None:
            calls["torch_bare"], calls["torch_fused"] = torch_calls(
                torch, layer, src, weights, chain, args.threads)
        times = {name: [] for name in calls}
        for _ in range(args.rounds):
            for name, call in calls.items():
                times[name] += time_block(call, args.repeats,
                                                    min_seconds=args.min_block_time)
        median = {name: statistics.median(values) for name, values in times.items()}
        ratio = {"chain": median["fused"] / median["bare"],
                 "staged": median["staged"] / median["bare"]}
        if torch is not None:
            ratio["torch"] = median["torch_fused"] / median["torch_bare"]
        for name, value in ratio.items():
            overheads[name].append(value)
        problem = convlab.make_problem(src.shape, src.dtype, weights.shape, weights.dtype,
                                       None, None, **kwargs)
        ops = postops.parse(chain, problem, out)
        fused = postops.epilogue(problem, ops, registry.get_algorithm(algorithm), out)
        print(f"{layer.short_name:<16} {algorithm:<10} {'yes' if fused else 'no':>9} "
              f"{median['bare'] * 1e3:8.3f} "
              f"{median['fused'] * 1e3:9.3f} "
              + " ".join(f"{(ratio[k] - 1) * 100:+6.1f}%" if k in ratio else f"{'-':>7}"
                         for k in ("chain", "staged", "torch")))
    print("\ngeo-mean overhead of the chain over the bare convolution:")
    for name, values in overheads.items():
        if values:
            print(f"  {name:<7} {(geo_mean(values) - 1) * 100:+.1f}%  "
                  f"(worst {(max(values) - 1) * 100:+.1f}%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
