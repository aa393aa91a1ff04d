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
median call in a block of its own times its multiplicity) beside it, for convlab and
torch.

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


def onnxruntime_pass(onnx, ort, layers, threads):
    """The whole pass as one ONNX Runtime session: a graph of one Conv node per copy, each
    with an input and output of its own, run in sequence on one thread pool (a network's
    session; one session per layer would leave 53 thread pools spinning in turn)."""
    from onnx import TensorProto, helper, numpy_helper

    nodes, inputs, outputs, weights_init, feed = [], [], [], [], {}
    for index, (layer, src, weights) in enumerate(layer_arrays(layers)):
        geometry = benchmark.peer_geometry(layer)
        if geometry is None:
            print(f"onnxrt: not run on {layer.name} (no tap reads the input)")
            return None
        _, begins, ends = geometry
        src_ncx, weights_oix = ncx(layer, src, weights)
        x = benchmark._peer_src(src_ncx, geometry)
        names = [f"X{index}", f"W{index}", f"Y{index}"]
        nodes.append(helper.make_node(
            "Conv", names[:2], names[2:], kernel_shape=list(layer.kernel_shape),
            strides=list(layer.strides), dilations=list(layer.dilations),
            group=layer.groups, pads=begins + ends))
        inputs.append(helper.make_tensor_value_info(names[0], TensorProto.FLOAT,
                                                    list(x.shape)))
        outputs.append(helper.make_tensor_value_info(
            names[2], TensorProto.FLOAT, [1, layer.oc, *layer.output_shape]))
        weights_init.append(numpy_helper.from_array(np.ascontiguousarray(weights_oix),
                                                    names[1]))
        feed[names[0]] = x
    graph = helper.make_graph(nodes, "network", inputs, outputs, initializer=weights_init)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = min(model.ir_version, 9)
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
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


def per_layer_total(calls, layers, rounds):
    """Sum over layers of the median call (each copy timed in a block of its own, as the
    per-layer bench does) times the multiplicity: the per-layer bench's network total."""
    total, index = 0.0, 0
    for layer in layers:
        call = calls[index]
        times = []
        for _ in range(rounds):
            times += time_block(call, 3, min_seconds=0.1)
        total += statistics.median(times) * layer.multiplicity
        index += layer.multiplicity
    return total


def per_layer_table(layers, calls, call_times) -> None:
    """Each layer's median call within the passes (over its copies) against its median in
    a block of its own, in ms, per contender."""
    names = list(calls)
    print(f"{'layer':<24}" + "".join(f" {n[:12] + ' pass':>17} {'block':>7}" for n in names))
    index = 0
    for layer in layers:
        cells = []
        for name in names:
            copies = call_times[name][index:index + layer.multiplicity]
            in_pass = statistics.median(t for times in copies for t in times)
            block = statistics.median(time_block(calls[name][index], 3, min_seconds=0.1))
            cells.append(f" {in_pass * 1e3:17.3f} {block * 1e3:7.3f}")
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
    onnx = benchmark._try_import("onnx") if "onnxrt" in names else None
    ort = benchmark._try_import("onnxruntime") if "onnxrt" in names else None
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
            run = onnxruntime_pass(onnx, ort, layers, args.threads)
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
    for name in passes:
        ratios = "".join(f" {medians[peer] / medians[name]:>11.2f}x"
                         for peer in PEERS if peer in medians)
        total = (f"{per_layer_total(calls[name], layers, 3) * 1e3:19.2f}" if name in calls
                 else f"{'-':>19}")
        print(f"{name:<14} {medians[name] * 1e3:9.2f} {min(times[name]) * 1e3:9.2f} "
              f"{total}{ratios}", flush=True)
    if args.per_layer:
        per_layer_table(layers, calls, call_times)
    return 0


if __name__ == "__main__":
    sys.exit(main())

