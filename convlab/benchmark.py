"""Time convlab's algorithms against PyTorch and ONNX Runtime on real network layers.

    python -m convlab bench --suite resnet_50 --threads 2 --mb 1 --repeats 7
    python bench/bench_layers.py --suite mobilenet_dw --algorithms direct,auto --csv dw.csv

(``bench/bench_layers.py`` runs this module against the checkout it lives in.) The peers
are optional: without torch or onnxruntime installed their columns are left out.

Every contender runs in this one process on the same float32 data: each registered convlab
algorithm (``convlab.convolve(..., algorithm=name)`` on NXC/XIO arrays, the reference
excluded unless asked for), PyTorch ``conv1d/2d/3d`` on contiguous NCX tensors under
``torch.no_grad()``, and an ONNX Runtime session of a single ``Conv`` node. After one
warm-up call each, the contenders take turns within every repeat (the order rotates), so
machine noise spreads over all of them; the median is reported. Each result is checked once
against PyTorch (or the float64 reference without it), so a fast wrong kernel shows up.

This is a benchmark, not a test: it prints a table and exits 1 only when a check fails.
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import os
import platform
import random
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

import convlab
from convlab import cost_model, cpu, measure, shapes
from convlab.cli import refuse_empty_values
from convlab.threads import available_cores, effective_threads

# A result passes when max|got - want| <= CHECK_TOLERANCE * max|want|. Summation-order
# differences in float32 over up to ~5e3 products per output stay near 1e-6 of the largest
# output on random data in [-1, 1); a wrong tap or index is off by order 1.
CHECK_TOLERANCE = 1e-4


@dataclass
class Contender:
    label: str
    kind: str  # "convlab", "torch", "onnxruntime" or "gemm"
    call: Callable[[], object] | None = None  # None: cannot run this layer
    why_not: str = ""
    to_nxc: Callable[[object], np.ndarray] = lambda result: result
    times: list[float] = field(default_factory=list)
    error: float | None = None
    checked: bool = True  # False: not a convolution (a reference GEMM), nothing to compare
    first_call: float | None = None  # a plan's first call (its choice, its preparation)
    runs: str = ""  # the algorithm a plan runs

    @property
    def median(self) -> float | None:
        return statistics.median(self.times) if self.times else None

    @property
    def ok(self) -> bool:
        return self.error is None or self.error <= CHECK_TOLERANCE


# --------------------------------------------------------------------------- peers

def _try_import(name):
    try:
        return __import__(name)
    except ImportError:
        return None


def peer_geometry(layer):
    """Per spatial axis: the input rows the taps read, and the non-negative pads around them.

    PyTorch and ONNX take no negative pads, and PyTorch only symmetric ones. Rows that no
    tap reads change nothing, so the peers get src cropped to ``[start, stop)`` (outside the
    timing: it is data preparation, at most a row or two) with pads ``begin``/``end`` that
    give exactly the layer's output. ``None`` when no tap reads any input row.
    """
    crops, begins, ends = [], [], []
    for i, o, k, s, d, pb in zip(layer.input_shape, layer.output_shape, layer.kernel_shape,
                                 layer.strides, layer.dilations, layer.pads_begin):
        last_read = (o - 1) * s + (k - 1) * d - pb  # input index of the last tap
        start, stop = max(0, -pb), min(i, last_read + 1)
        if stop <= start:
            return None
        crops.append(slice(start, stop))
        begins.append(max(0, pb))
        ends.append(last_read + 1 - stop)
    return crops, begins, ends


def _peer_src(src_ncx, geometry):
    crops = geometry[0]
    return np.ascontiguousarray(src_ncx[(slice(None), slice(None), *crops)])


def torch_contender(torch, layer, src_ncx, weights_oix, threads) -> Contender:
    import torch.nn.functional as F

    conv = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}.get(layer.rank)
    geometry = peer_geometry(layer)
    if conv is None or geometry is None:
        return Contender("torch", "torch", why_not=f"rank {layer.rank}" if conv is None
                         else "no tap reads the input")
    _, begins, ends = geometry
    torch.set_num_threads(threads)
    x = torch.from_numpy(_peer_src(src_ncx, geometry))
    w = torch.from_numpy(np.ascontiguousarray(weights_oix))
    kwargs = dict(stride=layer.strides, dilation=layer.dilations, groups=layer.groups)
    symmetric_output = [(i + 2 * b - ((k - 1) * d + 1)) // s + 1 for i, b, k, d, s in zip(
        x.shape[2:], begins, layer.kernel_shape, layer.dilations, layer.strides)]
    if all(e <= b for e, b in zip(ends, begins)) \
            and tuple(symmetric_output) == layer.output_shape:
        # PyTorch pads symmetrically; end padding that no tap reads changes nothing.
        def call():
            with torch.no_grad():
                return conv(x, w, padding=begins, **kwargs)
    else:
        # Truly asymmetric: pad explicitly inside the timed call, since it is real work.
        flat = [v for b, e in reversed(list(zip(begins, ends))) for v in (b, e)]

        def call():
            with torch.no_grad():
                return conv(F.pad(x, flat), w, **kwargs)

    return Contender("torch", "torch", call,
                     to_nxc=lambda y: np.moveaxis(y.numpy(), 1, -1))


def onnxruntime_contender(onnx, ort, layer, src_ncx, weights_oix, threads) -> Contender:
    geometry = peer_geometry(layer)
    if geometry is None:
        return Contender("onnxrt", "onnxruntime", why_not="no tap reads the input")
    from onnx import TensorProto, helper, numpy_helper

    _, begins, ends = geometry
    x = _peer_src(src_ncx, geometry)
    dst_shape = [x.shape[0], layer.oc, *layer.output_shape]
    node = helper.make_node(
        "Conv", ["X", "W"], ["Y"], kernel_shape=list(layer.kernel_shape),
        strides=list(layer.strides), dilations=list(layer.dilations), group=layer.groups,
        pads=begins + ends)
    graph = helper.make_graph(
        [node], "conv", [helper.make_tensor_value_info("X", TensorProto.FLOAT, list(x.shape))],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, dst_shape)],
        initializer=[numpy_helper.from_array(np.ascontiguousarray(weights_oix), "W")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    # onnx may write a newer IR version than the installed runtime reads.
    model.ir_version = min(model.ir_version, 9)
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    feed = {"X": x}

    def call():
        return session.run(None, feed)[0]

    return Contender("onnxrt", "onnxruntime", call,
                     to_nxc=lambda y: np.moveaxis(y, 1, -1))


# Pseudo-algorithms: "auto" is convolve's own choice, one-shot (weights prepared on every
# call); "plan" is a convlab.Convolution built once, so its weights are prepared once, like
# an ONNX Runtime session's prepacked weights, and its first call times the close contenders
# (choose="measure"); "plan:<name>" is a plan forced to one algorithm, what "plan" is
# measured against. Plans are timed on the calls after their first, which is timed apart.
PSEUDO_ALGORITHMS = ("auto", "plan")
FORCED_PLAN = "plan:"


def is_plan(label: str) -> bool:
    return label == "plan" or label.startswith(FORCED_PLAN)


def is_algorithm(contender) -> bool:
    """A registered algorithm called one-shot (not auto, a plan or a peer library)."""
    return (contender.kind == "convlab" and contender.label not in PSEUDO_ALGORITHMS
            and not is_plan(contender.label))


def check_algorithm_names(names) -> None:
    """``--algorithms``: registered names, "auto", "plan" or "plan:<registered name>"."""
    known = convlab.algorithms()
    unknown = [a for a in names if a not in PSEUDO_ALGORITHMS and a not in known
               and not (a.startswith(FORCED_PLAN) and a[len(FORCED_PLAN):] in known)]
    if unknown:
        raise SystemExit(f"--algorithms: {unknown} not registered; expected "
                         f"{list(PSEUDO_ALGORITHMS)}, names from {known}, or "
                         f"'{FORCED_PLAN}<name>' for a plan forced to one of them")


MATMUL_CHILD = r"""
import json, statistics, sys, time
import numpy as np
from threadpoolctl import threadpool_limits
shapes, threads, repeats = json.loads(sys.argv[1])
rng = np.random.default_rng(0)
seconds = []
with threadpool_limits(threads, user_api="blas"):
    for groups, rows, depth, cols in shapes:
        a = rng.uniform(-1, 1, (groups, rows, depth)).astype(np.float32)
        b = rng.uniform(-1, 1, (groups, depth, cols)).astype(np.float32)
        c = np.empty((groups, rows, cols), np.float32)
        np.matmul(a, b, out=c)
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            np.matmul(a, b, out=c)
            times.append(time.perf_counter() - start)
        seconds.append(statistics.median(times))
print(json.dumps(seconds))
"""


def matmul_seconds(layers, threads, repeats) -> list[float]:
    """NumPy's matmul on each layer's same-sized GEMM, (N * prod(O), IC/G * prod(K)) @
    (IC/G * prod(K), OC/G) per group, BLAS at ``threads``: what an im2col run could reach
    if unfolding were free.

    Timed in a child process, in the same run: NumPy's OpenBLAS keeps its own thread pool,
    whose spinning threads slowed every other contender 2-20x when it ran in this process
    (measured on ResNet-50 res4a/res5a, 2 cores).
    """
    shapes = []
    for layer in layers:
        p = layer.problem()
        shapes.append((p.groups, p.batch * p.output_size, p.in_channels_per_group * p.kernel_size,
                       p.out_channels_per_group))
    done = subprocess.run([sys.executable, "-c", MATMUL_CHILD,
                           json.dumps([shapes, threads, repeats])],
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def convlab_contender(name, layer, src, weights, threads) -> Contender:
    kwargs = layer.convolve_kwargs()
    algorithm = name[len(FORCED_PLAN):] if name.startswith(FORCED_PLAN) else name
    if algorithm not in PSEUDO_ALGORITHMS:
        problem = layer.problem(mb=src.shape[0])
        reason = convlab.registry.get_algorithm(algorithm).supports(problem)
        if reason is not None:
            return Contender(name, "convlab", why_not=reason)
    if is_plan(name):
        plan = convlab.Convolution(weights, threads=threads,
                                   algorithm="auto" if name == "plan" else algorithm, **kwargs)
        time.sleep(IDLE_SECONDS)  # as before a block: no other pool spinning
        start = time.perf_counter()
        plan(src)
        first_call = time.perf_counter() - start
        return Contender(name, "convlab", lambda: plan(src), first_call=first_call,
                         runs=plan.algorithm_for(src))

    def call():
        return convlab.convolve(src, weights, algorithm=name, threads=threads, **kwargs)

    return Contender(name, "convlab", call)


# --------------------------------------------------------------------------- running

def relative_error(got: np.ndarray, want: np.ndarray) -> float:
    scale = float(np.max(np.abs(want))) or 1.0
    return float(np.max(np.abs(np.asarray(got, np.float64) - want))) / scale


# Pause before each contender's block of runs (see bench_layer): longer than the spin
# periods of libgomp (about 0.3 ms by default) and OpenBLAS.
IDLE_SECONDS = 0.05


def bench_layer(layer, algorithms, threads, repeats, warmup, torch, onnx, ort, seed,
                schedule="blocks", rounds=1, min_block_seconds=0.0):
    src, weights, _ = layer.arrays(seed=seed)
    r = layer.rank
    src_ncx = np.moveaxis(src, -1, 1)
    weights_oix = weights.transpose(r + 1, r, *range(r))
    contenders = [convlab_contender(name, layer, src, weights, threads) for name in algorithms]
    if torch is not None:
        contenders.append(torch_contender(torch, layer, src_ncx, weights_oix, threads))
    if ort is not None and onnx is not None:
        contenders.append(onnxruntime_contender(onnx, ort, layer, src_ncx, weights_oix,
                                                threads))
    runnable = [c for c in contenders if c.call is not None]

    want = None
    peer = next((c for c in runnable if c.kind == "torch"), None)
    if peer is not None:
        want = np.asarray(peer.to_nxc(peer.call()), np.float64)
    for contender in runnable:
        result = None
        for _ in range(warmup):
            result = contender.call()
        if result is None:
            result = contender.call()
        if not contender.checked:
            continue
        if want is None:
            want = convlab.reference.convolve(src.astype(np.float64),
                                              weights.astype(np.float64),
                                              **layer.convolve_kwargs())
        contender.error = relative_error(contender.to_nxc(result), want)

    if schedule == "interleaved":
        for repeat in range(repeats):
            shift = repeat % len(runnable)
            for contender in runnable[shift:] + runnable[:shift]:
                _time_once(contender)
        return contenders
    per_block = max(1, -(-repeats // rounds))
    if schedule == "mixed":
        # convlab's one-shot contenders (its algorithms and auto) share blocks, call by
        # call, so that the machine's drift falls on all of them alike and auto's regret
        # compares like with like; so do the plans ("plan" and the forced "plan:<name>"),
        # for the plan's regret. Each peer library keeps blocks of its own (their thread
        # pools must go idle in between). The orders
        # differ from layer to layer: with one seed per round for all of them, the same
        # order bias (about 10% between two runs of one kernel, 30 calls each) fell on the
        # same contender in every layer of a suite.
        shared = [c for c in runnable if c.kind == "convlab" and not is_plan(c.label)]
        plans = [c for c in runnable if c.kind == "convlab" and is_plan(c.label)]
        units = ([shared] if shared else []) + ([plans] if plans else []) + [
            [c] for c in runnable if c not in shared and c not in plans]
        for index in range(rounds):
            for unit in units if index % 2 == 0 else units[::-1]:
                for contender, times in zip(unit, time_rotation(
                        [c.call for c in unit], per_block, min_seconds=min_block_seconds,
                        seed=seed * rounds + index)):
                    contender.times.extend(times)
        return contenders
    # Several rounds of blocks, contenders in alternating order: a slow spell of the
    # machine then falls on several contenders' blocks rather than on one contender.
    for index in range(rounds):
        for contender in runnable if index % 2 == 0 else runnable[::-1]:
            contender.times.extend(time_block(contender.call, per_block,
                                              min_seconds=min_block_seconds))
    return contenders


def _time_once(contender) -> None:
    start = time.perf_counter()
    contender.call()
    contender.times.append(time.perf_counter() - start)


# Most calls one block takes when min_seconds asks for more than ``repeats``.
MAX_BLOCK_REPEATS = 2000


def _warm_up(pause: float, calls, repeats: int, min_seconds: float) -> int:
    """A block's start: the pause, one untimed call of each; then the rounds it runs,
    ``repeats`` or as many as take about ``min_seconds`` judged by that untimed round (at
    most MAX_BLOCK_REPEATS), whichever is more."""
    time.sleep(pause)
    start = time.perf_counter()
    for call in calls:
        call()
    first = time.perf_counter() - start
    if min_seconds > 0:
        repeats = max(repeats, min(MAX_BLOCK_REPEATS, math.ceil(min_seconds / max(first, 1e-7))))
    return repeats


def time_block(call: Callable[[], object], repeats: int, pause: float = IDLE_SECONDS,
               min_seconds: float = 0.0) -> list[float]:
    """Seconds of back-to-back calls, after a pause and one untimed call: ``repeats`` of
    them, or as many as take about ``min_seconds`` (judged by the untimed call, at most
    MAX_BLOCK_REPEATS), whichever is more. Tiny layers then get enough calls for a
    steady median.

    The pause lets the previous contender's thread pool go idle: OpenMP and OpenBLAS
    workers spin for a while after a call, and on 2 cores a spinning pool of another
    library slowed the next call 2-20x when contenders alternated call by call.
    """
    repeats = _warm_up(pause, [call], repeats, min_seconds)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return times


def time_rotation(calls: Sequence[Callable[[], object]], repeats: int,
                  pause: float = IDLE_SECONDS, min_seconds: float = 0.0,
                  seed: int = 0) -> list[list[float]]:
    """:func:`time_block` for several calls sharing one block: after the pause and one
    untimed call of each, ``repeats`` rounds (or as many as take about ``min_seconds``)
    of one timed call each, in a fresh random order every round. Each timed call follows
    an untimed call of itself, as in a block of its own: a call that followed another
    contender's inherited its caches (after a Winograd call on a depthwise layer, the
    direct kernel ran 2.3x slower), and with a few rounds per block the random order put
    one contender behind the slow ones more often than another (auto 2x slower than the
    direct kernel it runs, on MobileNet conv6/dw). Seconds per timed call."""
    repeats = _warm_up(pause, calls, repeats, min_seconds)
    shuffle = random.Random(seed).shuffle
    order = list(range(len(calls)))
    times: list[list[float]] = [[] for _ in calls]
    for _ in range(repeats):
        shuffle(order)
        for index in order:
            calls[index]()
            start = time.perf_counter()
            calls[index]()
            times[index].append(time.perf_counter() - start)
    return times


def geo_mean(values):
    values = [v for v in values if v is not None and v > 0]
    return math.exp(statistics.fmean(map(math.log, values))) if values else None


def fmt_rate(value, width=9, mark=""):
    """GFLOP/s with as many decimals as a tiny depthwise layer needs."""
    if value is None:
        return f"{'-':>{width}}"
    digits = 0 if value >= 100 else 1 if value >= 10 else 2
    return f"{value:>{width - len(mark)}.{digits}f}{mark}"


def fmt_ratio(value, width=9):
    return f"{'-':>{width}}" if value is None else f"{value:>{width - 1}.2f}x"


def display_names(layers) -> list[str]:
    """Names without the network prefix when every layer shares it (``resnet_50:``)."""
    prefixes = {layer.name.split(":", 1)[0] for layer in layers if ":" in layer.name}
    if len(prefixes) == 1 and all(":" in layer.name for layer in layers):
        return [layer.name.split(":", 1)[1] for layer in layers]
    return [layer.name or "(unnamed)" for layer in layers]


def cpu_model() -> str:
    return cpu.cpu_model()


def machine_lines() -> list[str]:
    """The CPU the run measured and where the selector's constants came from."""
    info = cpu.cpu_info()
    caches = ", ".join(f"{level} {_size_text(size)}" for level, size in info["caches"].items())
    describe = getattr(cost_model, "describe_constants", cost_model.source)
    return [f"cpu: {info['model']}, {info['machine']}; caches {caches or 'not reported'}; "
            f"ISA level detected {info['isa_detected']}, effective {info['isa_effective']}",
            f"cost constants: {describe()}",
            f"plans: first call times the contenders estimated within "
            f"{cost_model.measure_margin():.0%} of the lowest (at most "
            f"{measure.MAX_CONTENDERS}, none started after {measure.TIME_LIMIT_SECONDS:g} s)"]


def _size_text(size: int) -> str:
    for unit, scale in (("MiB", 1024**2), ("KiB", 1024)):
        if size >= scale and size % scale == 0:
            return f"{size // scale} {unit}"
    return f"{size} B"


def load_average() -> str:
    try:
        return "/".join(f"{v:.2f}" for v in os.getloadavg()) + " (1/5/15 min)"
    except (AttributeError, OSError):
        return "unknown"


def core_round_trip_text() -> str:
    """The time a cache line takes between two of the kernels' threads and back: where the
    two cores share no cache it is several times as long, and every algorithm that passes
    data between its threads runs slower (Winograd's shared blocks, im2col's shared
    panels), so a run's figures depend on it."""
    from convlab.kernels._runtime import core_round_trip

    seconds = core_round_trip()
    if seconds is None:
        return "core-to-core round trip: not measured (two threads could not run at once)"
    return f"core-to-core round trip {seconds * 1e6:.3f} us"


def command_line() -> str:
    argv = getattr(sys, "orig_argv", None) or [sys.executable, *sys.argv]
    return " ".join(shlex.quote(a) for a in argv)


def parse_args(argv=None, prog=None):
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", default="resnet_50",
                        help=f"benchdnn shape suite, one of {shapes.suites()}")
    parser.add_argument("--threads", type=int, default=None,
                        help="threads per call for every contender (default: convlab's "
                             "effective thread count)")
    parser.add_argument("--mb", type=int, default=1,
                        help="minibatch for every layer (0: the file's own mb)")
    parser.add_argument("--repeats", type=int, default=7, help="timed runs per contender")
    parser.add_argument("--warmup", type=int, default=1, help="untimed runs per contender")
    parser.add_argument("--rounds", type=int, default=3,
                        help="mixed and blocks schedules: split each contender's runs into "
                             "this many blocks, contenders alternating between blocks")
    parser.add_argument("--min-block-time", type=float, default=0.1,
                        help="mixed and blocks schedules: seconds each block runs at least "
                             "(more runs on small layers)")
    parser.add_argument("--algorithms", default=None,
                        help="comma-separated convlab algorithms ('auto' and 'plan' allowed); "
                             "default: every registered one except 'reference', and 'auto'")
    parser.add_argument("--layers", default=None,
                        help="comma-separated layer names, with or without the "
                             "'network:' prefix; default: all")
    parser.add_argument("--no-torch", action="store_true", help="leave PyTorch out")
    parser.add_argument("--no-onnxruntime", action="store_true",
                        help="leave ONNX Runtime out")
    parser.add_argument("--schedule", choices=("mixed", "blocks", "interleaved"),
                        default="mixed",
                        help="mixed: convlab's one-shot contenders one call each in turn "
                             "inside shared blocks, plan and each peer library in blocks of "
                             "their own; blocks: each contender's runs back to back, after a "
                             "pause (as in production: one library at a time); interleaved: "
                             "one run each per round, rotating")
    parser.add_argument("--gemm", action="store_true",
                        help="add 'matmul': NumPy's matmul on each layer's same-sized GEMM, "
                             "and im2col's share of its rate")
    parser.add_argument("--csv", default=None,
                        help="also write one row per layer and contender to this path")
    args = parser.parse_args(argv)
    refuse_empty_values(parser, args)
    if args.repeats < 1 or args.warmup < 0 or args.mb < 0 or args.rounds < 1 \
            or args.min_block_time < 0:
        parser.error("--repeats and --rounds must be >= 1, --warmup, --mb and "
                     "--min-block-time >= 0")
    return args


def select_layers(layers, spec):
    if not spec:
        return layers
    wanted = {w.strip() for w in spec.split(",") if w.strip()}
    names = display_names(layers)
    chosen = [layer for layer, shown in zip(layers, names)
              if wanted & {layer.name, layer.short_name, shown}]
    found = {n for layer, shown in zip(layers, names)
             for n in (layer.name, layer.short_name, shown)}
    missing = sorted(wanted - found)
    if missing:
        raise SystemExit(f"--layers: {missing} not in this suite; expected names from "
                         f"{names}")
    return chosen


def configure(args):
    """``(threads, layers, algorithms)`` the parsed arguments ask for; a bad name exits with
    a message."""
    threads = effective_threads(args.threads)
    layers = select_layers(shapes.load_suite(args.suite, mb=args.mb or None), args.layers)
    if args.algorithms:
        algorithms = [a.strip() for a in args.algorithms.split(",") if a.strip()]
        check_algorithm_names(algorithms)
    else:
        algorithms = [a for a in convlab.algorithms() if a != "reference"] + ["auto"]
    return threads, layers, algorithms


def main(argv=None, prog=None) -> int:
    args = parse_args(argv, prog)
    threads, layers, algorithms = configure(args)
    torch = None if args.no_torch else _try_import("torch")
    onnx = None if args.no_onnxruntime else _try_import("onnx")
    ort = None if args.no_onnxruntime else _try_import("onnxruntime")

    print(f"command: {command_line()}")
    print(f"machine: {os.cpu_count()} logical CPUs, {available_cores()} "
          f"available to this process; OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}, "
          f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}")
    versions = [f"python {platform.python_version()}", f"numpy {np.__version__}",
                f"convlab {convlab.__version__}",
                f"torch {torch.__version__}" if torch else "torch: not used",
                f"onnxruntime {ort.__version__} (onnx {onnx.__version__})" if ort and onnx
                else "onnxruntime: not used"]
    print("versions: " + ", ".join(versions))
    for line in machine_lines():
        print(line)
    print(f"load average before: {load_average()}; {core_round_trip_text()}")
    print(f"suite {args.suite}: {len(layers)} layers, mb "
          f"{args.mb if args.mb else 'from file'}, float32, {threads} thread(s), "
          f"{args.warmup} warm-up + median of {args.repeats} runs, schedule {args.schedule}"
          + (f" ({args.rounds} rounds of blocks, each at least {args.min_block_time:g} s)"
             if args.schedule != "interleaved" else ""))
    print(f"check: every result against {'torch' if torch else 'convlab.reference'}, "
          f"normwise tolerance {CHECK_TOLERANCE:g}")
    print()

    names = display_names(layers)
    width = max([len("geo-mean over layers")] + [min(len(n), 32) for n in names])
    labels = (algorithms + (["torch"] if torch else []) + (["onnxrt"] if ort and onnx else [])
              + (["matmul"] if args.gemm else []))
    ratio_labels = algorithms if torch else []
    layout = Layout(width, [max(9, len(label) + 1) for label in labels],
                    [max(9, len(label) + 3) for label in ratio_labels])
    left = f"{'layer':<{width}} {'xN':>3} {'GFLOP':>8} | "
    header = left + " ".join(f"{label:>{w}}" for label, w in zip(labels, layout.rates))
    if ratio_labels:
        header += " | " + " ".join(f"{'t/' + label:>{w}}"
                                   for label, w in zip(ratio_labels, layout.ratios))
        print(f"{'':<{len(left)}}{'GFLOP/s':<{sum(layout.rates) + len(labels) - 1}} | "
              f"torch time / time")
    print(header)
    print("-" * len(header))

    started = time.perf_counter()
    matmul = matmul_seconds(layers, threads, args.repeats) if args.gemm else None
    results = []
    for index, (layer, name) in enumerate(progress(list(zip(layers, names)), args.suite)):
        contenders = bench_layer(layer, algorithms, threads, args.repeats, args.warmup,
                                 torch, onnx, ort, seed=index, schedule=args.schedule,
                                 rounds=args.rounds, min_block_seconds=args.min_block_time)
        if matmul is not None:
            contenders.append(Contender("matmul", "gemm", times=[matmul[index]],
                                        checked=False))
        results.append((layer, contenders))
        by = {c.label: c for c in contenders}
        flops = layer.flops()
        rates = [None if by[label].median is None else flops / by[label].median / 1e9
                 for label in labels]
        ratios = [_ratio(by.get("torch"), by[label]) for label in ratio_labels]
        print(row(f"{name[:width]}", f"{layer.multiplicity}", f"{flops / 1e9:.3g}", layout,
                  rates, ratios, marks=["" if by[label].ok else "!" for label in labels])
              + extra_columns(contenders), flush=True)
    elapsed = time.perf_counter() - started
    print("-" * len(header))
    for line in summary_rows(results, labels, ratio_labels, layout):
        print(line)
    for line in network_summary(results):
        print(line)
    for line in selection_summary(results, names):
        print(line)

    wrong = [(name, c.label, c.error) for name, (_, cs) in zip(names, results) for c in cs
             if not c.ok]
    not_run = {}
    for name, (_, cs) in zip(names, results):
        skipped = {}
        for c in cs:
            if c.call is None and not c.times:
                skipped.setdefault(c.why_not, []).append(c.label)
        for why, skipped_labels in skipped.items():
            not_run.setdefault((", ".join(skipped_labels), why), []).append(name)
    for (skipped_labels, why), where in not_run.items():
        print(f"not run: {skipped_labels} on {', '.join(where)}: {why}")
    for name, label, error in wrong:
        print(f"WRONG (marked !): {label} on {name}: normwise error {error:.2e} > "
              f"{CHECK_TOLERANCE:g}")
    if not wrong:
        worst = max((c.error for _, cs in results for c in cs if c.error is not None),
                    default=0.0)
        print(f"all results agree (largest normwise error {worst:.1e})")
    print(f"bench time {elapsed:.1f} s; load average after: {load_average()}; "
          f"{core_round_trip_text()}")
    if args.csv:
        write_csv(args.csv, args, threads, results)
        print(f"wrote {args.csv}")
    return 1 if wrong else 0


def progress(items, suite):
    """Layers with a progress bar on stderr when tqdm is installed and stderr is a terminal."""
    try:
        from tqdm import tqdm
    except ImportError:
        return items
    return tqdm(items, desc=suite, unit="layer", leave=False, file=sys.stderr,
                disable=not sys.stderr.isatty())


def regret(contenders) -> float | None:
    """auto's time over the fastest registered algorithm's time on this layer (1 = ideal)."""
    by = {c.label: c for c in contenders}
    auto = by.get("auto")
    times = [c.median for c in contenders if is_algorithm(c) and c.median is not None]
    if auto is None or auto.median is None or not times:
        return None
    return auto.median / min(times)


def fastest(contenders) -> str | None:
    runs = [c for c in contenders if is_algorithm(c) and c.median is not None]
    return min(runs, key=lambda c: c.median).label if runs else None


def plan_regret(contenders) -> tuple[float, str, str] | None:
    """The plan's time (calls after its first) over the fastest of the plans forced to one
    algorithm ("plan:<name>", weights prepared alike), or, without those, of the one-shot
    algorithms (which also prepare the weights on every call: a looser bar); and that
    fastest contender's label, and the algorithm the plan runs."""
    by = {c.label: c for c in contenders}
    plan = by.get("plan")
    if plan is None or plan.median is None:
        return None
    forced = [c for c in contenders if c.label.startswith(FORCED_PLAN) and c.median is not None]
    pool = forced or [c for c in contenders if is_algorithm(c) and c.median is not None]
    if not pool:
        return None
    best = min(pool, key=lambda c: c.median)
    return plan.median / best.median, best.label, plan.runs


def first_call_ratio(contenders) -> float | None:
    """The plan's first call (choosing, preparing, running) over a later call."""
    plan = next((c for c in contenders if c.label == "plan"), None)
    if plan is None or plan.first_call is None or plan.median is None:
        return None
    return plan.first_call / plan.median


def _ort_over_plan(contenders) -> float | None:
    by = {c.label: c for c in contenders}
    plan, ort = by.get("plan"), by.get("onnxrt")
    if plan is None or ort is None or plan.median is None or ort.median is None:
        return None
    return ort.median / plan.median


def extra_columns(contenders) -> str:
    text = ""
    value = regret(contenders)
    if value is not None:
        text += f" | regret {value:5.2f} (best {fastest(contenders)})"
    value = plan_regret(contenders)
    if value is not None:
        text += f" | plan/best {value[0]:5.2f} (best {value[1]}; plan runs {value[2]})"
    value = first_call_ratio(contenders)
    if value is not None:
        text += f" | first call {value:5.1f}x"
    value = _ort_over_plan(contenders)
    if value is not None:
        text += f" | ort/plan {value:5.2f}x"
    value = im2col_over_matmul(contenders)
    if value is not None:
        text += f" | im2col/matmul {value:4.0%}"
    return text


def _best_family_ratio(contenders, prefix) -> float | None:
    """torch's time over the fastest contender whose name starts with ``prefix``."""
    by = {c.label: c for c in contenders}
    family = [c.median for c in contenders
              if c.label.startswith(prefix) and c.median is not None]
    torch_run = by.get("torch")
    if not family or torch_run is None or torch_run.median is None:
        return None
    return torch_run.median / min(family)


# "GEMM-bound layers", whose im2col rate is held against NumPy's
# matmul: a GEMM of at least this many flops, 50 us at the ~200 GFLOP/s of the development
# machine, about three times the 18 us a one-shot convolve spends around its kernel
# (bench/results/overhead_2026-11-25_1063cac.txt). Below it the call, not the GEMM, sets
# the pace: on GoogLeNet's loss2/conv (1 MFLOP) the matmul alone takes 10 us.
GEMM_BOUND_MIN_FLOPS = 10_000_000


def im2col_over_matmul(contenders) -> float | None:
    """im2col's rate as a share of NumPy matmul's on the same-sized product."""
    by = {c.label: c for c in contenders}
    im2col, matmul = by.get("im2col"), by.get("matmul")
    if im2col is None or matmul is None or im2col.median is None or matmul.median is None:
        return None
    return matmul.median / im2col.median


def selection_summary(results, names) -> list[str]:
    """How good auto's choice was over the suite, and plan against ONNX Runtime."""
    lines = []
    regrets = [(regret(cs), name) for name, (_, cs) in zip(names, results)]
    regrets = [(r, name) for r, name in regrets if r is not None]
    if regrets:
        worst, where = max(regrets)
        right = sum(1 for r, _ in regrets if r <= 1.05)
        lines.append(f"auto regret (auto time / fastest algorithm's time): geo-mean "
                     f"{geo_mean([r for r, _ in regrets]):.3f}, worst {worst:.2f} ({where}); "
                     f"within 5% of the fastest on {right}/{len(regrets)} layers")
    plans = [(plan_regret(cs), name) for name, (_, cs) in zip(names, results)]
    plans = [(r, name) for r, name in plans if r is not None]
    if plans:
        worst, where = max(plans, key=lambda item: item[0][0])
        against = ("the fastest forced plan's (plan:<name>)"
                   if any(r[1].startswith(FORCED_PLAN) for r, _ in plans)
                   else "the fastest one-shot algorithm's")
        lines.append(f"plan regret (plan time after its first call / {against} time): "
                     f"geo-mean {geo_mean([r[0] for r, _ in plans]):.3f}, worst "
                     f"{worst[0]:.2f} ({where}, best {worst[1]}, plan runs {worst[2]}); "
                     f"within 10% on {sum(r[0] <= 1.10 for r, _ in plans)}/{len(plans)} "
                     f"layers")
    firsts = [(first_call_ratio(cs), name, layer,
               next((c for c in cs if c.label == "plan"), None))
              for name, (layer, cs) in zip(names, results)]
    firsts = [f for f in firsts if f[0] is not None]
    if firsts:
        highest = max(firsts, key=lambda f: f[0])
        first_total = sum(p.first_call * layer.multiplicity for _, _, layer, p in firsts)
        later_total = sum(p.median * layer.multiplicity for _, _, layer, p in firsts)
        lines.append(f"plan first call / later call: geo-mean "
                     f"{geo_mean([f[0] for f in firsts]):.1f}x, "
                     f"highest {highest[0]:.1f}x ({highest[1]}); over the network (one plan "
                     f"per occurrence) first calls {first_total * 1e3:.1f} ms against "
                     f"{later_total * 1e3:.1f} ms a later pass")
    ratios = [_ort_over_plan(cs) for _, cs in results]
    ratios = [r for r in ratios if r is not None]
    if ratios:
        lines.append(f"plan vs ONNX Runtime session (onnxrt time / plan time): geo-mean "
                     f"{geo_mean(ratios):.2f}x, lowest {min(ratios):.2f}x")
    best = [(_best_family_ratio(cs, "winograd"), name) for name, (_, cs) in zip(names, results)]
    best = [(ratio, name) for ratio, name in best if ratio is not None]
    if best:
        lowest, where = min(best)
        lines.append(f"best Winograd tile against torch (torch time / best winograd* time): "
                     f"geo-mean {geo_mean([r for r, _ in best]):.2f}x, lowest {lowest:.2f}x "
                     f"({where}), over {len(best)} layers")
    shares = [(im2col_over_matmul(cs), name, layer.flops() >= GEMM_BOUND_MIN_FLOPS)
              for name, (layer, cs) in zip(names, results)]
    shares = [share for share in shares if share[0] is not None]
    if shares:
        lines.append("im2col rate / NumPy matmul rate on the same-sized GEMM: "
                     + gemm_share_summary(shares))
    return lines


def gemm_share_summary(shares) -> str:
    """``shares``: (im2col rate / matmul rate, layer, GEMM-bound?) per layer; the geo-mean
    and lowest over all of them, then over the GEMM-bound ones only."""
    def over(subset):
        lowest, where, _ = min(subset)
        return (f"geo-mean {geo_mean([s for s, _, _ in subset]):.0%}, lowest {lowest:.0%} "
                f"({where}), below 70% on {sum(s < 0.7 for s, _, _ in subset)}")
    bound = [share for share in shares if share[2]]
    text = f"{over(shares)} of {len(shares)} layers"
    if bound:
        text += (f"; GEMM-bound layers (at least {GEMM_BOUND_MIN_FLOPS / 1e6:g} MFLOP): "
                 f"{over(bound)} of {len(bound)}")
    return text


def _ratio(torch_contender: Contender | None, contender: Contender) -> float | None:
    if torch_contender is None or torch_contender.median is None or contender.median is None:
        return None
    return torch_contender.median / contender.median


@dataclass
class Layout:
    name: int  # width of the layer-name column
    rates: list[int]  # width of each GFLOP/s column
    ratios: list[int]  # width of each torch-ratio column


def row(name, count, work, layout, rates, ratios, marks=None) -> str:
    marks = marks or [""] * len(rates)
    text = f"{name:<{layout.name}} {count:>3} {work:>8} | " + " ".join(
        fmt_rate(rate, w, mark) for rate, w, mark in zip(rates, layout.rates, marks))
    if ratios:
        text += " | " + " ".join(fmt_ratio(r, w) for r, w in zip(ratios, layout.ratios))
    return text


def summary_rows(results, labels, ratio_labels, layout) -> list[str]:
    """Geo-means over layers, and network totals that count each layer ``multiplicity``
    times (only when a contender ran every layer, else the total would not compare)."""
    def contender(cs, label):
        return next(c for c in cs if c.label == label)

    geo, totals = [], []
    for label in labels:
        runs = [(layer, contender(cs, label).median) for layer, cs in results]
        geo.append(geo_mean([layer.flops() / t / 1e9 for layer, t in runs if t]))
        if all(t for _, t in runs):
            work = sum(layer.flops() * layer.multiplicity for layer, _ in runs)
            totals.append(work / sum(t * layer.multiplicity for layer, t in runs) / 1e9)
        else:
            totals.append(None)
    geo_ratio, total_ratio = [], []
    for label in ratio_labels:
        runs = [(layer, contender(cs, "torch").median, contender(cs, label).median)
                for layer, cs in results]
        geo_ratio.append(geo_mean([tt / tc for _, tt, tc in runs if tt and tc]))
        complete = all(tt and tc for _, tt, tc in runs)
        total_ratio.append(sum(tt * layer.multiplicity for layer, tt, _ in runs)
                           / sum(tc * layer.multiplicity for layer, _, tc in runs)
                           if complete else None)
    occurrences = sum(layer.multiplicity for layer, _ in results)
    work = sum(layer.flops() * layer.multiplicity for layer, _ in results) / 1e9
    seconds = network_seconds(results)
    return [row("geo-mean over layers", "", "", layout, geo, geo_ratio),
            row("network total (xN)", f"{occurrences}", f"{work:.3g}", layout, totals,
                total_ratio),
            row("network time, ms (xN)", f"{occurrences}", "", layout,
                [None if seconds.get(label) is None else seconds[label] * 1e3
                 for label in labels], [])]


def network_seconds(results):
    """{label: sum over layers of its median time x the layer's multiplicity}, None for a
    contender that did not run every layer (its total would not compare)."""
    totals = {}
    for layer, contenders in results:
        for c in contenders:
            if c.median is None:
                totals[c.label] = None
            elif totals.get(c.label, 0.0) is not None:
                totals[c.label] = totals.get(c.label, 0.0) + c.median * layer.multiplicity
    return totals


def _fastest_seconds(results, pick) -> float | None:
    """The network time of the fastest contender among ``pick`` on each layer."""
    total = 0.0
    for layer, contenders in results:
        times = [c.median for c in contenders if pick(c) and c.median is not None]
        if not times:
            return None
        total += min(times) * layer.multiplicity
    return total


def network_summary(results) -> list[str]:
    """Network times (each layer's median x its multiplicity, summed) per contender, the
    fastest algorithm per layer's, and the torch/convlab and onnxrt/plan ratios of them."""
    seconds = network_seconds(results)
    complete = {label: t for label, t in seconds.items() if t is not None}
    parts = [f"{label} {t * 1e3:.2f} ms" for label, t in complete.items()]
    best = _fastest_seconds(results, is_algorithm)
    if best is not None:
        parts.append(f"fastest algorithm per layer {best * 1e3:.2f} ms")
    best_plan = _fastest_seconds(results, lambda c: c.label.startswith(FORCED_PLAN))
    if best_plan is not None:
        parts.append(f"fastest forced plan per layer {best_plan * 1e3:.2f} ms")
    missing = [label for label, t in seconds.items() if t is None]
    lines = ["network time (each layer's median x its multiplicity, summed): "
             + ", ".join(parts) + (f"; no total for {', '.join(missing)} (not run on every "
                                   f"layer)" if missing else "")]
    ratios = []
    for peer, mine in [("torch", label) for label in complete if label not in
                       ("torch", "onnxrt", "matmul")] + [("onnxrt", "plan")]:
        if peer in complete and mine in complete and complete[mine] > 0:
            ratios.append(f"{peer}/{mine} {complete[peer] / complete[mine]:.2f}x")
    if ratios:
        lines.append("network time ratios (above 1: convlab faster): " + ", ".join(ratios))
    return lines


def write_csv(path, args, threads, results) -> None:
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["suite", "layer", "multiplicity", "mb", "rank", "descriptor",
                         "gflop", "threads", "contender", "median_ms", "min_ms", "gflops",
                         "torch_time_over_this", "check_error", "check_ok", "not_run_reason",
                         "first_call_ms", "plan_runs"])
        for layer, contenders in results:
            torch_run = next((c for c in contenders if c.label == "torch"), None)
            for c in contenders:
                t = c.median
                ratio = _ratio(torch_run, c)
                writer.writerow([
                    args.suite, layer.name, layer.multiplicity, layer.mb, layer.rank,
                    layer.canonical(), f"{layer.flops() / 1e9:.6f}", threads, c.label,
                    "" if t is None else f"{t * 1e3:.4f}",
                    "" if not c.times else f"{min(c.times) * 1e3:.4f}",
                    "" if t is None else f"{layer.flops() / t / 1e9:.3f}",
                    "" if ratio is None else f"{ratio:.4f}",
                    "" if c.error is None else f"{c.error:.3e}", c.ok, c.why_not,
                    "" if c.first_call is None else f"{c.first_call * 1e3:.4f}", c.runs])


if __name__ == "__main__":
    raise SystemExit(main())
