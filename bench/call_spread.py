"""How widely back-to-back calls of one forced plan spread, whether page faults explain it,
and how widely a plain BLAS GEMM spreads on the same machine at the same time.

    python bench/call_spread.py --suite vgg_19 --layers conv3_1,conv5_1 \\
        --algorithms direct,winograd4,winograd6 --calls 40

For each layer and algorithm: a forced plan (``convlab.Convolution(algorithm=name)``)
makes its first call, then ``--calls`` calls back to back; printed are the fastest,
median and 90th-percentile call and the minor page faults per call (``getrusage``: a
call that writes freshly mapped memory faults once per page it first touches). Then,
as a control that shares none of convlab's code, NumPy's float32 matmul of two
1024x1024 matrices at one thread and at ``--threads`` (threadpoolctl), the same way.
Where the plans' medians lie far above their fastest calls with no faults, and the
matmul spreads as widely at the same thread count, the spread is the machine's (its
other tenants, the hypervisor's scheduling), and a single block's median can put any
contender ahead.
"""
from __future__ import annotations

import resource
import statistics
import time

import numpy as np
from threadpoolctl import threadpool_limits

import convlab
from convlab.cli._bench_args import layer_script_parser, select_layers
from convlab.problem import shapes
from convlab.runtime import cpu


def minor_faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def spread(call, calls: int) -> tuple[list[float], list[int]]:
    """Seconds and minor page faults of ``calls`` back-to-back calls, after one untimed."""
    call()
    seconds, faults = [], []
    for _ in range(calls):
        faults_before = minor_faults()
        start = time.perf_counter()
        call()
        seconds.append(time.perf_counter() - start)
        faults.append(minor_faults() - faults_before)
    return seconds, faults


def line(label: str, seconds: list[float], faults: list[int]) -> str:
    ranked = sorted(seconds)
    p90 = ranked[min(len(ranked) - 1, int(0.9 * len(ranked)))]
    return (f"{label}: fastest {ranked[0] * 1e3:.2f} ms, median "
            f"{statistics.median(ranked) * 1e3:.2f}, 90th percentile {p90 * 1e3:.2f} "
            f"(median / fastest {statistics.median(ranked) / ranked[0]:.2f}); minor faults "
            f"per call median {statistics.median(faults):.0f}, most {max(faults)}")


def main(argv=None) -> None:
    parser = layer_script_parser(__doc__.splitlines()[0], layers_required=True)
    parser.add_argument("--algorithms", default="direct,winograd4,winograd6")
    parser.add_argument("--calls", type=int, default=40)
    args = parser.parse_args(argv)
    layers = select_layers(shapes.load_suite(args.suite, mb=1), args.layers)
    print(f"cpu: {cpu.summary()}; {args.threads} threads; {args.calls} calls each")
    for layer in layers:
        src, weights, _ = layer.arrays(seed=0)
        for name in args.algorithms.split(","):
            plan = convlab.Convolution(weights, threads=args.threads, algorithm=name,
                                       **layer.convolve_kwargs())
            seconds, faults = spread(lambda: plan(src), args.calls)
            print(line(f"{layer.name} plan:{name}", seconds, faults), flush=True)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((1024, 1024), dtype=np.float32)
    b = rng.standard_normal((1024, 1024), dtype=np.float32)
    for threads in sorted({1, args.threads}):
        with threadpool_limits(threads):
            seconds, faults = spread(lambda: a @ b, args.calls)
        print(line(f"control: numpy matmul 1024^3 float32, {threads} thread(s)", seconds,
                   faults), flush=True)


if __name__ == "__main__":
    main()
