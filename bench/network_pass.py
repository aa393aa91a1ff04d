"""Whole-network passes: every layer of a suite, as many times as the network has it, each
copy with weights of its own, called one after the other; the time of the pass.

    python bench/network_pass.py --suite resnet_50 --threads 2 \
        --contenders plan,auto,torch,onnxrt --passes 5 --rounds 5

The per-layer bench (``python -m convlab bench``) runs each layer many times in a row, so
a layer's weights are in cache for all but its first call; in a network they are not:
between two calls of one layer's weights every other layer's pass through the caches. A
pass here keeps that order of events. Each contender runs ``--passes`` passes back to
back, after one untimed pass and a pause (as a block of the per-layer bench), contenders
alternating block by block over ``--rounds`` rounds; the median pass is reported with
the network total the per-layer bench would give from the same contenders (each layer's
median call in a block of its own times its multiplicity, the medians --per-layer
shows) beside it, for convlab and torch.

Contenders: ``plan`` (``convlab.Convolution`` with algorithm "auto", built and called once
before timing, so its first-call check is done), ``plan:<algorithm>``, ``auto`` and
``<algorithm>`` (``convlab.convolve``) and ``torch`` as in the per-layer bench, and
``onnxrt``: one ONNX Runtime session whose graph holds every copy as a Conv node of its
own, run in sequence. The layers are independent calls on random data (their shapes do
not chain), each contender on its own layout (NXC for convlab, NCX for the peers), as in
the per-layer bench; the copies of a layer run next to each other. Results are not
checked here: the per-layer bench checks every contender on every layer.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Callable

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402

from convlab.cli import benchmark  # noqa: E402
from convlab.cli._bench_args import select_layers  # noqa: E402
from convlab.cli._bench_tables import (  # noqa: E402
    command_line,
    core_round_trip_text,
    load_average,
    machine_lines,
)
from convlab.problem import shapes  # noqa: E402
from convlab.runtime.timing import time_block  # noqa: E402

PEERS = ("torch", "onnxrt")


def layer_arrays(layers):
    """(layer, src NXC, weights XIO) for every copy of every layer (seeds 0, 1, ...)."""
    for layer in layers:
        for copy in range(layer.multiplicity):
            src, weights, _ = layer.arrays(1, seed=copy)
            yield layer, src, weights


def ncx(layer, src, weights):
    r = layer.rank
    return np.moveaxis(src, -1, 1), weights.transpose(r + 1, r, *range(r))


def layer_calls(name, layers, threads, torch):
    """One call per copy of every layer, for a convlab contender or torch; None if the
    contender cannot run some layer."""
    calls = []
    for layer, src, weights in layer_arrays(layers):
        if name == "torch":
            contender = benchmark.torch_contender(torch, layer, *ncx(layer, src, weights),
                                                  threads)
        else:
            contender = benchmark.convlab_contender(name, layer, src, weights, threads)
        if contender.call is None:
            print(f"{name}: not run on {layer.name} ({contender.why_not})")
            return None
        calls.append(contender.call)
    return calls


def onnxruntime_pass(ort, layers, threads):
    """The whole pass as one ONNX Runtime session: a graph of one Conv node per copy, each
    with an input and output of its own, run in sequence on one thread pool (a network's
    session; one session per layer would leave 53 thread pools spinning in turn)."""
    convs = []
    for index, (layer, src, weights) in enumerate(layer_arrays(layers)):
        conv = benchmark.onnx_conv(layer, *ncx(layer, src, weights), suffix=str(index))
        if conv is None:
            print(f"onnxrt: not run on {layer.name} (no tap reads the input)")
            return None
        convs.append(conv)
    session, feed = benchmark.onnxruntime_session(ort, convs, threads)
    session.run(None, feed)
    return lambda: session.run(None, feed)


def network_pass(calls, call_times=None):
    """A pass over ``calls``; with ``call_times`` (a list per call) each call's seconds
    are appended to its list."""
    def run():
        for call in calls:
            call()

    def run_timed():
        for call, times in zip(calls, call_times):
            start = time.perf_counter()
            call()
            times.append(time.perf_counter() - start)
    return run if call_times is None else run_timed


def block_medians(calls, layers, rounds=3):
    """Each layer's median call in blocks of its own (its first copy, ``rounds`` blocks),
    as the per-layer bench times it."""
    medians, index = [], 0
    for layer in layers:
        times = []
        for _ in range(rounds):
            times += time_block(calls[index], 3, min_seconds=0.1)
        medians.append(statistics.median(times))
        index += layer.multiplicity
    return medians


def per_layer_table(layers, calls, call_times, blocks) -> None:
    """Each layer's median call within the passes (over its copies) against its median in
    a block of its own (``blocks``), in ms, per contender."""
    names = list(calls)
    print(f"{'layer':<24}" + "".join(f" {n[:12] + ' pass':>17} {'block':>7}" for n in names))
    index = 0
    for row, layer in enumerate(layers):
        cells = []
        for name in names:
            copies = call_times[name][index:index + layer.multiplicity]
            in_pass = statistics.median(t for times in copies for t in times)
            cells.append(f" {in_pass * 1e3:17.3f} {blocks[name][row] * 1e3:7.3f}")
        index += layer.multiplicity
        print(f"{layer.short_name[:24]:<24}" + "".join(cells), flush=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--suite", default="resnet_50")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--layers", default="", help="comma-separated names (default: all)")
    parser.add_argument("--contenders", default="plan,auto,torch,onnxrt")
    parser.add_argument("--passes", type=int, default=5, help="timed passes per block")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--per-layer", action="store_true",
                        help="also time each call inside the passes (convlab and torch) "
                             "and print each layer's median in a pass beside its median "
                             "in a block of its own")
    args = parser.parse_args(argv)
    names = args.contenders.split(",")
    torch = benchmark._try_import("torch") if "torch" in names else None
    ort = (benchmark._try_import("onnxruntime")
           if "onnxrt" in names and benchmark._try_import("onnx") else None)
    layers = select_layers(shapes.load_suite(args.suite), args.layers)
    print(f"command: {command_line()}")
    for line in machine_lines():
        print(line)
    print(f"{core_round_trip_text()}; load average {load_average()}")
    print(f"suite {args.suite}: {len(layers)} layers, "
          f"{sum(layer.multiplicity for layer in layers)} calls per pass; {args.threads} "
          f"threads, batch 1, float32; {args.rounds} rounds of {args.passes} passes")
    calls: dict[str, list] = {}
    passes: dict[str, Callable[[], object]] = {}
    call_times: dict[str, list[list[float]] | None] = {}
    for name in names:
        if name in PEERS and (torch if name == "torch" else ort) is None:
            print(f"{name}: not installed")
        elif name == "onnxrt":
            run = onnxruntime_pass(ort, layers, args.threads)
            if run is not None:
                passes[name] = run
        else:
            found = layer_calls(name, layers, args.threads, torch)
            if found is not None:
                calls[name] = found
                call_times[name] = [[] for _ in found] if args.per_layer else None
                passes[name] = network_pass(found, call_times[name])
    times: dict[str, list[float]] = {name: [] for name in passes}
    order = list(passes)
    for index in range(args.rounds):
        for name in order if index % 2 == 0 else order[::-1]:
            times[name] += time_block(passes[name], args.passes)
    medians = {name: statistics.median(values) for name, values in times.items()}
    print(f"{'contender':<14} {'pass ms':>9} {'min ms':>9} {'per-layer total ms':>19}"
          + "".join(f" {peer + '/this':>12}" for peer in PEERS if peer in medians))
    blocks = {name: block_medians(found, layers) for name, found in calls.items()}
    totals = {name: sum(median * layer.multiplicity for median, layer in zip(values, layers))
              for name, values in blocks.items()}
    for name in passes:
        ratios = "".join(f" {medians[peer] / medians[name]:>11.2f}x"
                         for peer in PEERS if peer in medians)
        total = f"{totals[name] * 1e3:19.2f}" if name in totals else f"{'-':>19}"
        print(f"{name:<14} {medians[name] * 1e3:9.2f} {min(times[name]) * 1e3:9.2f} "
              f"{total}{ratios}", flush=True)
    if args.per_layer:
        per_layer_table(layers, calls, call_times, blocks)
    return 0


if __name__ == "__main__":
    sys.exit(main())

