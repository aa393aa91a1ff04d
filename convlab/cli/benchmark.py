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
This module runs the suite and times the contenders; the options are ``_bench_args``', the
report ``_bench_tables``' and the figures it shows ``_bench_results``'.
"""
from __future__ import annotations

import functools
import json
import math
import os
import platform
import subprocess
import sys
import time

import numpy as np

import convlab
from convlab.cli._bench_args import configure, parse_args
from convlab.cli._bench_results import (
    CHECK_TOLERANCE,
    FORCED_PLAN,
    PSEUDO_ALGORITHMS,
    Contender,
    is_plan,
    recheck_labels,
)
from convlab.cli._bench_tables import (
    Layout,
    command_line,
    core_round_trip_text,
    display_names,
    extra_columns,
    load_average,
    machine_lines,
    network_summary,
    row,
    selection_summary,
    summary_rows,
    torch_ratio,
    write_csv,
)
from convlab.runtime.threads import available_cores
from convlab.runtime.timing import settle, time_rotation

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


def onnx_conv(layer, src_ncx, weights_oix, suffix=""):
    """The layer as one ONNX Conv node with input X<suffix>, weights W<suffix> and output
    Y<suffix>: (node, input info, output info, weights initializer, src to feed), or None
    when no tap reads the input."""
    geometry = peer_geometry(layer)
    if geometry is None:
        return None
    from onnx import TensorProto, helper, numpy_helper

    _, begins, ends = geometry
    x = _peer_src(src_ncx, geometry)
    names = [f"X{suffix}", f"W{suffix}", f"Y{suffix}"]
    node = helper.make_node(
        "Conv", names[:2], names[2:], kernel_shape=list(layer.kernel_shape),
        strides=list(layer.strides), dilations=list(layer.dilations), group=layer.groups,
        pads=begins + ends)
    return (node, helper.make_tensor_value_info(names[0], TensorProto.FLOAT, list(x.shape)),
            helper.make_tensor_value_info(names[2], TensorProto.FLOAT,
                                          [x.shape[0], layer.oc, *layer.output_shape]),
            numpy_helper.from_array(np.ascontiguousarray(weights_oix), names[1]), x)


def onnxruntime_session(ort, convs, threads):
    """An ONNX Runtime session of a graph holding the ``onnx_conv`` nodes ``convs``, run in
    sequence on ``threads`` intra-op threads, and its feed."""
    from onnx import helper

    nodes, inputs, outputs, weights, feeds = zip(*convs)
    graph = helper.make_graph(list(nodes), "conv", list(inputs), list(outputs),
                              initializer=list(weights))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    # onnx may write a newer IR version than the installed runtime reads.
    model.ir_version = min(model.ir_version, 9)
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    return session, {value.name: x for value, x in zip(inputs, feeds)}


def onnxruntime_contender(onnx, ort, layer, src_ncx, weights_oix, threads) -> Contender:
    conv = onnx_conv(layer, src_ncx, weights_oix)
    if conv is None:
        return Contender("onnxrt", "onnxruntime", why_not="no tap reads the input")
    session, feed = onnxruntime_session(ort, [conv], threads)

    def call():
        return session.run(None, feed)[0]

    return Contender("onnxrt", "onnxruntime", call,
                     to_nxc=lambda y: np.moveaxis(y, 1, -1))


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
    admissible = True
    if algorithm not in PSEUDO_ALGORITHMS:
        problem = layer.problem(mb=src.shape[0])
        reason = convlab.dispatch.registry.get_algorithm(algorithm).supports(problem)
        if reason is not None:
            return Contender(name, "convlab", why_not=reason)
        admissible = algorithm in auto_may_run(problem, threads)
    if is_plan(name):
        plan = convlab.Convolution(weights, threads=threads,
                                   algorithm="auto" if name == "plan" else algorithm, **kwargs)
        settle()  # as before a block: no other pool spinning
        start = time.perf_counter()
        plan(src)
        first_call = time.perf_counter() - start
        return Contender(name, "convlab", lambda: plan(src), first_call=first_call,
                         runs=plan.algorithm_for(src), admissible=admissible,
                         measurement=plan.explain(src).measurement)

    def call():
        return convlab.convolve(src, weights, algorithm=name, threads=threads, **kwargs)

    runs = (convlab.select_algorithm(src, weights, threads=threads, **kwargs)
            if name == "auto" else "")
    return Contender(name, "convlab", call, runs=runs, admissible=admissible)


@functools.lru_cache(maxsize=16)
def auto_may_run(problem, threads) -> frozenset[str]:
    """The algorithms auto chooses among on this problem at precision "default" (a
    Winograd tile whose measured error exceeds that bound is not among them); assessed
    once per layer, not once per contender."""
    rows = convlab.dispatch.select.assess(problem, threads)
    return frozenset(row.name for row in convlab.dispatch.select.contenders(rows))


# --------------------------------------------------------------------------- running

def relative_error(got: np.ndarray, want: np.ndarray) -> float:
    scale = float(np.max(np.abs(want))) or 1.0
    return float(np.max(np.abs(np.asarray(got, np.float64) - want))) / scale


def bench_layer(layer, algorithms, threads, repeats, warmup, torch, onnx, ort, seed,
                schedule="blocks", rounds=1, min_block_seconds=0.0, recheck_rounds=0):
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
        for _ in range(max(1, warmup)):
            start = time.perf_counter()
            result = contender.call()
            seconds = time.perf_counter() - start
            contender.warm_seconds = min(seconds, contender.warm_seconds or math.inf)
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
        # compares like with like. The orders differ from layer to layer: with one seed
        # per round for all of them, the same order bias (about 10% between two runs of one
        # kernel, 30 calls each) fell on the same contender in every layer of a suite.
        # Contenders far slower than the fastest get blocks of their own (see
        # shared_block). Each peer library keeps blocks of its own (their thread pools
        # must go idle in between), and so does each plan ("plan", "plan:<name>"): a plan
        # keeps its weights between calls, as the peers' sessions do, and sharing a
        # rotation with plans of larger transformed weights took that away even right
        # after an untimed call of itself (ResNet-50 res5a_branch2b, Intel Xeon family 6
        # model 207, 2 threads: the winograd2 plan 0.65 ms in a block of its own, 1.33 ms
        # in a rotation with the winograd4 and winograd6 plans; 0.66 ms in one with direct).
        # On short calls plans share their blocks too (plan_units).
        shared = shared_block([c for c in runnable if c.kind == "convlab"
                               and not is_plan(c.label)])
        units = ([shared] if shared else []) + plan_units(
            [c for c in runnable if c not in shared])
        for contender, times in timed_rounds(units, rounds, per_block, min_block_seconds,
                                             seed):
            contender.round_times.append(times)
        recheck(contenders, recheck_rounds, per_block, min_block_seconds)
        return contenders
    # Several rounds of blocks, contenders in alternating order: a slow spell of the
    # machine then falls on several contenders' blocks rather than on one contender.
    for contender, times in timed_rounds([[c] for c in runnable], rounds, per_block,
                                         min_block_seconds):
        contender.round_times.append(times)
    recheck(contenders, recheck_rounds, per_block, min_block_seconds)
    return contenders


def recheck(contenders, rounds: int, per_block: int, min_block_seconds: float) -> None:
    """Time auto and the plan again, each with the fastest contenders its regret holds it
    against (:func:`recheck_labels`), in ``rounds`` more rounds, into their
    ``recheck_times``. Among a dozen contenders' blocks, a slow spell of the machine that
    lands on the plan's block or spares the fastest forced plan's decides plan regret: on
    a 2-core VM one forced plan's block medians differed by 1.3x from round to round
    (im2col on ResNet-50 res2a_branch1, 655 and 959 us), where the plan's first call had
    kept an algorithm 5-8% slower than the fastest; on the 3-D U-Net's 0.1 s layers,
    five calls each left auto 1.33x the algorithm it ran. The recheck is a second sample
    of the contenders that decide those regrets, which the reports pool with the rounds
    (:func:`convlab.cli._bench_results.rechecked_regret`). auto and the algorithms share their
    blocks call by call, as in the rounds; the plans take turns in blocks as
    :func:`plan_units` groups them. Every layer
    is rechecked, not only those that look slow, so that the figure is not chosen by its
    own noise."""
    if rounds <= 0:
        return
    by = {c.label: c for c in contenders if c.call is not None}
    for pseudo in ("auto", "plan"):
        chosen = [by[label] for label in recheck_labels(contenders, pseudo) if label in by]
        if len(chosen) < 2:
            continue
        units = [chosen] if pseudo == "auto" else plan_units(chosen)
        for contender, times in timed_rounds(units, rounds, per_block, min_block_seconds):
            contender.recheck_times.setdefault(pseudo, []).extend(times)


def timed_rounds(units, rounds: int, per_block: int, min_block_seconds: float, seed: int = 0):
    """``(contender, seconds of its timed calls)`` for every block of ``rounds`` rounds over
    ``units`` (lists of contenders that share a block call by call, see
    :func:`convlab.runtime.timing.time_rotation`), the units' order reversed every other
    round."""
    for index in range(rounds):
        for unit in units if index % 2 == 0 else units[::-1]:
            yield from zip(unit, time_rotation([c.call for c in unit], per_block,
                                               min_seconds=min_block_seconds,
                                               seed=seed * rounds + index))


# Contenders whose warm-up call took over this many times the fastest one's are timed in
# blocks of their own rather than in the shared rotation: next to a Winograd call of 30-40 ms
# on MobileNet's conv2_1/dw, a block held three rounds, and the direct kernel (0.14 ms) and
# auto (running the same kernel) came out 0.16 and 0.22 ms in one block, 0.33 and 0.33 in
# another; auto's regret read 1.45 where it is 1.00.
SHARED_BLOCK_FACTOR = 8.0


def shared_block(contenders):
    """Of contenders meant to share a block, those within SHARED_BLOCK_FACTOR of the
    fastest warm-up call (all of them when none was timed). One that looks slower is
    called once more, and only left out if that call is too: a single call can fall in a
    slow spell of the machine."""
    warm = [c.warm_seconds for c in contenders if c.warm_seconds is not None]
    if not warm:
        return contenders
    bound = SHARED_BLOCK_FACTOR * min(warm)
    kept = []
    for contender in contenders:
        seconds = _rechecked_warm_seconds(contender, bound)
        if seconds is None or seconds <= bound:
            kept.append(contender)
    return kept


def _rechecked_warm_seconds(contender, bound: float) -> float | None:
    """The contender's warm-up call, or where that took over ``bound``, the faster of it
    and one more call: a single call can fall in a slow spell (or still page in its
    output)."""
    if contender.warm_seconds is not None and contender.warm_seconds > bound:
        start = time.perf_counter()
        contender.call()
        contender.warm_seconds = min(contender.warm_seconds, time.perf_counter() - start)
    return contender.warm_seconds


# Plans share blocks where every plan's call takes at most this long (their weights then
# stay in cache across the rotation).
PAIRED_PLAN_SECONDS = 1e-3


def plan_units(contenders) -> list[list]:
    """One block each, except on short calls: where every plan ("plan" and the forced
    "plan:<name>") takes at most PAIRED_PLAN_SECONDS, all of them share their blocks, call
    by call, so that a slow spell of the machine falls on each of them alike; where only
    the auto plan and the forced plan of the algorithm it runs are that short, those two
    share. In blocks of their own, two plans of one algorithm on layers of 5-20 us read up
    to 1.3x apart (Intel Xeon family 6 model 207, 2 threads: slow spells lasting whole
    blocks), and plan regret compares the plan with every forced plan."""
    def short(contender) -> bool:
        # timed already (a recheck): its median; else its warm-up call
        seconds = (contender.median if contender.round_times
                   else _rechecked_warm_seconds(contender, PAIRED_PLAN_SECONDS))
        return (seconds or math.inf) <= PAIRED_PLAN_SECONDS

    plans = [c for c in contenders if c.label == "plan" or c.label.startswith(FORCED_PLAN)]
    plan = next((c for c in plans if c.label == "plan" and c.runs), None)
    twin = next((c for c in plans if plan is not None
                 and c.label == FORCED_PLAN + plan.runs), None)
    sharing: list = []
    if len(plans) >= 2 and all(short(c) for c in plans):
        sharing = plans
    elif twin is not None and short(plan) and short(twin):
        sharing = [plan, twin]
    units = []
    for contender in contenders:
        if contender not in sharing:
            units.append([contender])
        elif contender is sharing[0]:
            units.append(sharing)
    return units


def _time_once(contender) -> None:
    start = time.perf_counter()
    contender.call()
    contender.round_times.append([time.perf_counter() - start])


def main(argv=None, prog=None) -> int:
    args = parse_args(argv, prog)
    threads, layers, algorithms = configure(args)
    torch = None if args.no_torch else _try_import("torch")
    onnx = None if args.no_onnxruntime else _try_import("onnx")
    ort = None if args.no_onnxruntime else _try_import("onnxruntime")
    print_header(args, threads, layers, torch, onnx, ort)

    names = display_names(layers)
    labels = (algorithms + (["torch"] if torch else []) + (["onnxrt"] if ort and onnx else [])
              + (["matmul"] if args.gemm else []))
    ratio_labels = algorithms if torch else []
    layout, rule = print_table_header(names, labels, ratio_labels)

    started = time.perf_counter()
    matmul = matmul_seconds(layers, threads, args.repeats) if args.gemm else None
    results = []
    for index, (layer, name) in enumerate(progress(list(zip(layers, names)), args.suite)):
        contenders = bench_layer(layer, algorithms, threads, args.repeats, args.warmup,
                                 torch, onnx, ort, seed=index, schedule=args.schedule,
                                 rounds=args.rounds, min_block_seconds=args.min_block_time,
                                 recheck_rounds=args.recheck_rounds)
        if matmul is not None:
            contenders.append(Contender("matmul", "gemm", round_times=[[matmul[index]]],
                                        checked=False))
        results.append((layer, contenders))
        print(layer_row(layer, name, contenders, labels, ratio_labels, layout), flush=True)
    elapsed = time.perf_counter() - started
    print(rule)
    for lines in (summary_rows(results, labels, ratio_labels, layout),
                  network_summary(results), selection_summary(results, names)):
        for line in lines:
            print(line)
    wrong = print_checks(results, names)
    print(f"bench time {elapsed:.1f} s; load average after: {load_average()}; "
          f"{core_round_trip_text()}")
    if args.csv:
        write_csv(args.csv, args, threads, results)
        print(f"wrote {args.csv}")
    return 1 if wrong else 0


def print_header(args, threads, layers, torch, onnx, ort) -> None:
    """What ran where: the command, the machine, the versions, the suite and the check."""
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


def print_table_header(names, labels, ratio_labels) -> tuple[Layout, str]:
    """The table's column header; returns its layout and the rule under it."""
    width = max([len("geo-mean over layers")] + [min(len(n), 32) for n in names])
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
    rule = "-" * len(header)
    print(rule)
    return layout, rule


def layer_row(layer, name, contenders, labels, ratio_labels, layout: Layout) -> str:
    """One layer's row: GFLOP/s per contender, torch's time over each algorithm's."""
    by = {c.label: c for c in contenders}
    flops = layer.flops()
    rates = [None if by[label].median is None else flops / by[label].median / 1e9
             for label in labels]
    ratios = [torch_ratio(by.get("torch"), by[label]) for label in ratio_labels]
    return (row(f"{name[:layout.name]}", f"{layer.multiplicity}", f"{flops / 1e9:.3g}",
                layout, rates, ratios, marks=["" if by[label].ok else "!" for label in labels])
            + extra_columns(contenders))


def print_checks(results, names) -> list:
    """What did not run and why, and which results disagree with the check; returns those."""
    wrong = [(name, c.label, c.error) for name, (_, cs) in zip(names, results) for c in cs
             if not c.ok]
    not_run: dict[tuple[str, str], list[str]] = {}
    for name, (_, cs) in zip(names, results):
        skipped: dict[str, list[str]] = {}
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
    return wrong


def progress(items, suite):
    """Layers with a progress bar on stderr when tqdm is installed and stderr is a terminal."""
    try:
        from tqdm import tqdm
    except ImportError:
        return items
    return tqdm(items, desc=suite, unit="layer", leave=False, file=sys.stderr,
                disable=not sys.stderr.isatty())


if __name__ == "__main__":
    raise SystemExit(main())
