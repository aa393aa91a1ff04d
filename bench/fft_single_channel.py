"""Single-channel images: convlab's fft against scipy.signal.fftconvolve and oaconvolve.

    python bench/fft_single_channel.py [--threads 2] [--rounds 7]

The issue's cases: a 1024 x 1024 image under a 31 x 31 kernel and a 128^3 volume under a
9^3 kernel, float32. SciPy convolves, convlab correlates: SciPy gets the kernel flipped
and mode 'same', convlab 'same' pads (K // 2 each side), so all three compute the same
output (checked). Each round times every contender once, in a fresh random order, after
an untimed call of itself; the table gives the medians over rounds (interleaved blocks
on a machine other jobs may share). SciPy's two functions have no thread argument
(pocketfft runs them on one thread); convlab runs ``--threads``. Writes
bench/results/fft_single_channel_<date>_<cpu>.txt.
"""
from __future__ import annotations

import argparse
import datetime
import pathlib
import random
import statistics
import sys
import time

import numpy as np
import scipy
import scipy.signal

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import convlab  # noqa: E402
from convlab.runtime import cpu  # noqa: E402

CASES = {"2-D 1024^2, 31^2 kernel": ((1024, 1024), (31, 31)),
         "3-D 128^3, 9^3 kernel": ((128, 128, 128), (9, 9, 9))}


def contenders(image, kernel, threads):
    flipped = np.ascontiguousarray(kernel[(slice(None, None, -1),) * kernel.ndim])
    src = image[None, ..., None]
    weights = kernel[..., None, None]
    pads = [k // 2 for k in kernel.shape]
    plan = convlab.Convolution(weights, algorithm="fft", threads=threads, pads_begin=pads,
                               pads_end=pads)
    return {
        "convlab fft": lambda: convlab.convolve(src, weights, algorithm="fft",
                                                threads=threads, pads_begin=pads,
                                                pads_end=pads)[0, ..., 0],
        "convlab fft plan": lambda: plan(src)[0, ..., 0],
        "convlab auto": lambda: convlab.convolve(src, weights, threads=threads,
                                                 pads_begin=pads, pads_end=pads)[0, ..., 0],
        "scipy fftconvolve": lambda: scipy.signal.fftconvolve(image, flipped, mode="same"),
        "scipy oaconvolve": lambda: scipy.signal.oaconvolve(image, flipped, mode="same"),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    date = datetime.date.today().isoformat()
    name = f"fft_single_channel_{date}_{cpu.cpu_slug()}.txt"
    out = pathlib.Path(args.out or HERE / "results" / name)
    lines = ["# fft on single-channel images against scipy.signal, float32", "",
             f"command: python bench/fft_single_channel.py {' '.join(sys.argv[1:])}",
             f"machine: {cpu.cpu_model()}, ISA {cpu.effective_isa()}; numpy {np.__version__}, "
             f"scipy {scipy.__version__}; convlab threads {args.threads}; date {date}",
             f"medians over {args.rounds} interleaved rounds, milliseconds", ""]
    rng = np.random.default_rng(0)
    shuffle = random.Random(0)
    for label, (shape, kernel_shape) in CASES.items():
        image = rng.standard_normal(shape).astype(np.float32)
        kernel = rng.standard_normal(kernel_shape).astype(np.float32)
        calls = contenders(image, kernel, args.threads)
        want = calls["scipy fftconvolve"]().astype(np.float64)
        for name, call in calls.items():
            got = call()
            error = np.abs(got - want).max() / np.abs(want).max()
            assert got.shape == want.shape and error < 1e-4, (label, name, error)
        times = {name: [] for name in calls}
        for _ in range(args.rounds):
            order = list(calls)
            shuffle.shuffle(order)
            for name in order:
                calls[name]()
                start = time.perf_counter()
                calls[name]()
                times[name].append(time.perf_counter() - start)
        medians = {name: statistics.median(t) * 1e3 for name, t in times.items()}
        lines.append(f"## {label}")
        lines.append("| contender | ms | scipy fftconvolve / it | scipy oaconvolve / it |")
        lines.append("|---|---|---|---|")
        for name, ms in medians.items():
            lines.append(f"| {name} | {ms:.2f} | {medians['scipy fftconvolve'] / ms:.2f} | "
                         f"{medians['scipy oaconvolve'] / ms:.2f} |")
        lines.append("")
        print("\n".join(lines[-len(medians) - 4:]), flush=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
