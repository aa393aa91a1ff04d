"""The GEMM of a layer through each BLAS im2col can call, beside NumPy's matmul.

    python bench/blas_gemm.py --suite resnet_50 --layers res5a_branch2b,res4a_branch2b

For each layer: the (N * prod(O), prod(K) * IC/G) @ (prod(K) * IC/G, OC/G) product of its
im2col panel (group 0), timed at 1 and 2 BLAS threads through

- ``scipy``: SciPy's bundled OpenBLAS (``scipy.linalg.blas.sgemm``),
- ``scipy-openblas32``: the library :mod:`convlab.runtime.blas` loads for the im2col kernel
  (``sgemm_`` through ctypes, as the kernel calls it),
- ``numpy``: ``np.matmul`` (NumPy's bundled OpenBLAS),

in alternating blocks in one process (medians of ``--rounds`` blocks). This is the
measurement behind convlab/runtime/blas.py's choice of library.

``--depths 9,27,54,108`` times the product at these depths in place of the layer's own
(same rows and output channels) and fits ``time = a * (depth + h)`` over them per library
and thread count: h is the depth at which the GEMM runs at half its deep rate, which the
im2col cost model's ``gemm_output_passes`` term prices (convlab/strategies/im2col.py,
GEMM_HALF_RATE_DIM).
"""
from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import sys

import numpy as np
from scipy.linalg import blas as scipy_blas
from threadpoolctl import ThreadpoolController

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from convlab.cli._bench_args import select_layers  # noqa: E402
from convlab.cli._bench_tables import cpu_model  # noqa: E402
from convlab.problem import shapes  # noqa: E402
from convlab.runtime import blas  # noqa: E402
from convlab.runtime.timing import time_block  # noqa: E402


def fortran_sgemm(address):
    """A caller of the Fortran sgemm_ at ``address``: row-major c = a @ b."""
    pointer = ctypes.POINTER
    sgemm = ctypes.CFUNCTYPE(None, ctypes.c_char_p, ctypes.c_char_p, pointer(ctypes.c_int),
                             pointer(ctypes.c_int), pointer(ctypes.c_int),
                             pointer(ctypes.c_float), ctypes.c_void_p, pointer(ctypes.c_int),
                             ctypes.c_void_p, pointer(ctypes.c_int), pointer(ctypes.c_float),
                             ctypes.c_void_p, pointer(ctypes.c_int))(address)

    def call(a, b, c):
        rows, depth = a.shape
        cols = b.shape[1]
        m, n, k = ctypes.c_int(cols), ctypes.c_int(rows), ctypes.c_int(depth)
        one, zero = ctypes.c_float(1), ctypes.c_float(0)
        # column-major c^T = b^T a^T, as the im2col kernel calls it (see _im2col.pyx)
        sgemm(b"N", b"N", m, n, k, one, b.ctypes.data, ctypes.byref(ctypes.c_int(cols)),
              a.ctypes.data, ctypes.byref(ctypes.c_int(depth)), zero, c.ctypes.data,
              ctypes.byref(ctypes.c_int(cols)))
    return call


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="resnet_50")
    parser.add_argument("--layers", default="res5a_branch2b,res4a_branch2b,res3a_branch2b")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--depths", default="",
                        help="comma-separated GEMM depths to time in place of the layer's")
    args = parser.parse_args(argv)
    depths = [int(d) for d in args.depths.split(",") if d]

    openblas = blas.load_openblas()
    if openblas is None:
        print("scipy-openblas32 is not installed", file=sys.stderr)
        return 1
    libraries = ThreadpoolController()
    print(f"command: python bench/blas_gemm.py {' '.join(sys.argv[1:])}")
    print(f"machine: {cpu_model()}; {openblas['version']}")
    ours = fortran_sgemm(openblas["sgemm"])
    print(f"{'layer':28s} {'M x K x N':>18s} thr {'scipy':>9s} {'s-openblas32':>12s} "
          f"{'numpy':>9s}  (ms; medians of {args.rounds} blocks)")
    for layer in select_layers(shapes.load_suite(args.suite, mb=1), args.layers):
        problem = layer.problem(mb=1)
        rows = problem.batch * problem.output_size
        cols = problem.out_channels_per_group
        by_depth = {}
        for depth in depths or [problem.kernel_size * problem.in_channels_per_group]:
            by_depth[depth] = time_product(layer.short_name, rows, depth, cols, ours,
                                           libraries, args.rounds)
        if len(by_depth) > 1:
            print_half_rate_depths(by_depth)
    return 0


def time_product(name, rows, depth, cols, ours, libraries, rounds):
    """{(library, threads): median ms} of the rows x depth @ depth x cols product."""
    out = {}
    rng = np.random.default_rng(0)
    a = rng.standard_normal((rows, depth)).astype(np.float32)
    b = rng.standard_normal((depth, cols)).astype(np.float32)
    c = np.empty((rows, cols), np.float32)
    a_f, b_f = np.asfortranarray(a.T), np.asfortranarray(b.T)
    calls = {"scipy": lambda: scipy_blas.sgemm(1.0, b_f, a_f),
             "scipy-openblas32": lambda: ours(a, b, c),
             "numpy": lambda: np.matmul(a, b, out=c)}
    ours(a, b, c)
    assert np.allclose(c, a @ b, rtol=1e-3, atol=1e-2), "scipy-openblas32 sgemm_ is wrong"
    for threads in (1, 2):
        # every BLAS, scipy-openblas32 included (loaded before the controller looked)
        with libraries.limit(limits=threads, user_api="blas"):
            times = {lib: [] for lib in calls}
            for _ in range(rounds):
                for lib, call in calls.items():
                    times[lib].append(statistics.median(time_block(call, 10)))
        medians = {lib: statistics.median(v) * 1e3 for lib, v in times.items()}
        print(f"{name:28s} {f'{rows}x{depth}x{cols}':>18s} {threads:3d} "
              f"{medians['scipy']:9.3f} {medians['scipy-openblas32']:12.3f} "
              f"{medians['numpy']:9.3f}")
        out.update({(lib, threads): ms for lib, ms in medians.items()})
    return out


def print_half_rate_depths(by_depth):
    """Least squares of time = a * depth + b per library and thread count; h = b / a."""
    depths = np.array(sorted(by_depth), dtype=float)
    for key in by_depth[int(depths[0])]:
        times = np.array([by_depth[int(d)][key] for d in depths])
        slope, intercept = np.polyfit(depths, times, 1)
        print(f"  {key[0]} at {key[1]} thread(s): half-rate depth h = {intercept / slope:.1f} "
              f"({slope * 1e3:.1f} us per unit of depth)")


if __name__ == "__main__":
    sys.exit(main())
