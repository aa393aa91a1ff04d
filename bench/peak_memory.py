"""Peak extra memory of one convolve call per layer and algorithm (Linux only).

    python bench/peak_memory.py --suite vgg_19 --layers conv1_2 --algorithms im2col,direct
    python bench/peak_memory.py --suite 3d_unet --algorithms im2col

Each (layer, algorithm) runs in a fresh subprocess, so nothing one run caches can hide in
another's figure. The child allocates src, weights and an NXC ``out`` (so dst is written in
place and not counted), warms the algorithm up on a tiny problem (BLAS and OpenMP allocate
their thread buffers on first use; those do not grow with the problem), touches every
input page, then resets the kernel's peak-RSS counter (``/proc/self/clear_refs``) and runs
the layer once. Extra memory = peak RSS during the call minus RSS before it: workspace,
packed or transformed weights, and any temporary a strategy makes.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent

CHILD = r"""
import json, sys
import numpy as np
sys.path.insert(0, {root!r})
import convlab
from convlab.problem import shapes

def status(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(field)

layer = next(l for l in shapes.load_suite({suite!r}, mb={mb}) if l.name == {name!r})
src, weights, _ = layer.arrays({mb}, seed=0)
kwargs = layer.convolve_kwargs()
out = np.empty(layer.dst_shape({mb}), np.float32)
out.fill(0)
tiny_src = np.ones((1,) + (5,) * layer.rank + (src.shape[-1],), np.float32)
tiny_weights = np.ones((3,) * layer.rank + weights.shape[-2:], np.float32)
try:
    convlab.convolve(tiny_src, tiny_weights, algorithm={algorithm!r}, threads={threads},
                     groups=layer.groups, pads_begin=1, pads_end=1)
except ValueError:
    pass  # the tiny probe may not suit this algorithm; the layer itself decides below
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")
before = status("VmRSS")
convlab.convolve(src, weights, algorithm={algorithm!r}, threads={threads}, out=out, **kwargs)
peak = status("VmHWM")
print(json.dumps(dict(extra=peak - before, src=src.nbytes, weights=weights.nbytes,
                      dst=out.nbytes)))
"""


def measure(suite, name, mb, algorithm, threads):
    code = CHILD.format(root=str(HERE.parent), suite=suite, name=name, mb=mb,
                        algorithm=algorithm, threads=threads)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["failed"])[-1]
        return None, last
    return json.loads(done.stdout.strip().splitlines()[-1]), None


def main(argv=None):
    sys.path.insert(0, str(HERE.parent))
    from convlab.problem import shapes

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="vgg_19")
    parser.add_argument("--layers", default=None, help="comma-separated names; default all")
    parser.add_argument("--algorithms", default="im2col")
    parser.add_argument("--mb", type=int, default=1)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    layers = shapes.load_suite(args.suite, mb=args.mb)
    if args.layers:
        wanted = set(args.layers.split(","))
        layers = [layer for layer in layers if wanted & {layer.name, layer.short_name}]
    algorithms = args.algorithms.split(",")
    mib = 2.0 ** 20
    print(f"command: python bench/peak_memory.py {' '.join(sys.argv[1:])}")
    print(f"suite {args.suite}, mb {args.mb}, {args.threads} threads; MiB")
    print(f"{'layer':28s} {'src':>8s} {'weights':>8s} {'dst':>8s} | "
          + " ".join(f"{a:>10s}" for a in algorithms))
    for layer in layers:
        cells, sizes = [], None
        for algorithm in algorithms:
            result, error = measure(args.suite, layer.name, args.mb, algorithm, args.threads)
            if result is None:
                cells.append(f"{'-':>10s}")
                print(f"  {algorithm} on {layer.short_name}: {error}", file=sys.stderr)
                continue
            sizes = result
            cells.append(f"{result['extra'] / mib:10.2f}")
        size_text = (" ".join(f"{sizes[k] / mib:8.2f}" for k in ("src", "weights", "dst"))
                     if sizes else " " * 26)
        print(f"{layer.short_name[:28]:28s} {size_text} | " + " ".join(cells), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
