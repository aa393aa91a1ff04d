"""A/B of two builds of the direct kernel: another build of its extension module (a copy of
``convlab/strategies/kernels/_direct*.so`` kept from before a change) against the installed
one, both loaded in one process and timed in alternating blocks.

Times direct's kernel alone on prepared weights, as bench/direct_tiling.py does (what a
plan runs, or with --one-shot the layout a one-shot call runs on), at the ISA level in
effect (``CONVLAB_MAX_CPU_ISA`` caps both builds alike), after checking that both builds
give bit-identical results on each layer. Prints the median per layer and build, the
speed-up of the installed build, the geo-mean, and the totals over the network (each
layer's median times its multiplicity). Processes started one after the other see the
machine at different speeds; blocks in one process share its spells.

    cp convlab/strategies/kernels/_direct*.so /tmp/before/   # before rebuilding
    python bench/direct_build_ab.py /tmp/before/_direct.cpython-311-x86_64-linux-gnu.so \\
        --suite resnet_50 --layers res2a_branch1,res4a_branch2c --rounds 7
"""
from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import direct_tiling  # noqa: E402

from convlab.cli._bench_args import layer_script_parser, select_layers  # noqa: E402
from convlab.cli._bench_results import geo_mean  # noqa: E402
from convlab.cli._bench_tables import cpu_model  # noqa: E402
from convlab.problem import shapes  # noqa: E402
from convlab.runtime import cpu  # noqa: E402
from convlab.runtime.timing import medians_under_settings  # noqa: E402
from convlab.strategies import direct  # noqa: E402


def load_other_build(path):
    """The extension module at ``path``, loaded beside the installed one, set up as
    convlab.strategies.direct sets up its own (ISA level, pass and whole-pixel limits)."""
    name = direct._direct.__name__
    loader = importlib.machinery.ExtensionFileLoader(name, path)
    spec = importlib.util.spec_from_file_location(name, path, loader=loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    # Importing it made it the module the cap is applied to; the installed one is again.
    cpu.follow_cap(name, direct._direct._set_isa_cap)
    module._set_isa_cap(cpu.ISA_LEVELS.index(cpu.effective_isa()))
    module.set_pass_limit(direct.CACHED_WEIGHT_BYTES)
    module.set_whole_pixels(direct.WHOLE_PIXEL_MAX_BYTES)
    if module.get_isa() != direct._direct.get_isa():
        raise SystemExit(f"{path} runs at {module.get_isa()}, the installed build at "
                         f"{direct._direct.get_isa()}")
    return module


def use(module):
    direct._direct = module


def main(argv=None):
    parser = layer_script_parser(__doc__.split("\n")[0], rounds=7)
    parser.add_argument("other", help="the other build's _direct extension module (.so)")
    parser.add_argument("--mb", type=int, default=1)
    parser.add_argument("--block-seconds", type=float, default=0.15)
    parser.add_argument("--one-shot", action="store_true",
                        help="the weights as a one-shot call lays them out (never blocked)")
    args = parser.parse_args(argv)
    installed = direct._direct
    other = load_other_build(args.other)
    builds = (other, installed)
    layers = select_layers(shapes.load_suite(args.suite), args.layers)
    print(f"command: python {' '.join(sys.argv)}")
    print(f"machine: {cpu_model()}, {os.cpu_count()} logical CPUs; ISA level "
          f"{installed.get_isa()}; {args.threads} threads, mb {args.mb}, {args.rounds} "
          f"rounds of blocks of {args.block_seconds} s"
          f"{', one-shot weights' if args.one_shot else ', plan weights'}")
    speedups, totals = [], [0.0, 0.0]
    try:
        for layer in layers:
            call = direct_tiling.kernel_call(layer, args.mb, args.threads, args.one_shot)
            results = []
            for module in builds:
                use(module)
                results.append(np.array(call(), copy=True))
            if not np.array_equal(results[0], results[1]):
                raise SystemExit(f"{layer.short_name}: the two builds' results differ")
            medians = medians_under_settings(call, builds, use, args.rounds,
                                             args.block_seconds)
            ratio = medians[other] / medians[installed]
            speedups.append(ratio)
            for index, module in enumerate(builds):
                totals[index] += medians[module] * layer.multiplicity
            print(f"{layer.short_name:20s} x{layer.multiplicity:<2d} other "
                  f"{medians[other] * 1e3:8.3f} ms  installed {medians[installed] * 1e3:8.3f} "
                  f"ms  speed-up {ratio:5.3f}", flush=True)
    finally:
        use(installed)
    print(f"geo-mean speed-up of the installed build: {geo_mean(speedups):.3f}; network "
          f"total (x N) other {totals[0] * 1e3:.2f} ms, installed {totals[1] * 1e3:.2f} ms "
          f"({totals[0] / totals[1]:.3f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
