"""Soaks: many calls, from many threads, change neither results nor memory.

* One plan shared by ``THREAD_COUNT`` Python threads for ``SHARED_PLAN_CALLS`` calls in
  all, over mixed shapes, dtypes and out= buffers, returns bit for bit what a second plan
  returns to serial calls. The shared plan starts cold, so the threads race to fill its
  caches (choice, prepared weights, lean runners) while they call it.
* Every entry point called ``LEAK_CALLS`` times after a warm-up, in two halves, grows the
  process' resident memory by less than half of ``LEAK_BYTES`` in at least one half: a
  result, a buffer or a Python object kept per call grows both halves past it (the
  problems' results are 0.5-2 KiB), while the allocator taking one more block of heap
  once, which a long session can leave it needing at any call (once +2.2 MiB in one
  batch of a full-suite run on an AMD EPYC, not reproduced in the next run), grows one
  half only. These calls run with one
  OpenMP thread (two named entries pass threads=2): on a busy machine each parallel
  region of a two-thread call can wait for the other thread to be scheduled, which made
  tiny int8 and data-dilated calls tens of times slower, and the memory figure does not
  need the second thread.

Each test prints its figures (``pytest -s`` shows them): calls, wall time, and the growth.
"""
from __future__ import annotations

import gc
import threading
import time

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

import convlab
from tests.helpers import ALGORITHMS, assert_matches_reference

psutil = pytest.importorskip("psutil")

THREAD_COUNT = 8
SHARED_PLAN_CALLS = 10_000
LEAK_CALLS = 10_000
WARM_UP_CALLS = 1_000
LEAK_BYTES = 2 * 2**20

pytestmark = [
    pytest.mark.soak,
    # they measure the whole process (its threads, its memory): alone, not in parallel
    pytest.mark.thread_unsafe(reason="soaks measure the whole process's threads and memory"),
]


# --------------------------------------------------------------------------- shared plan

def _mixed_srcs(rng, channels):
    """NXC srcs of several batches, extents and dtypes (float64 prepares weights again),
    each with an out= buffer or not; auto picks more than one algorithm among them."""
    shapes = [(1, 4, 4), (2, 6, 5), (1, 7, 7), (3, 5, 6), (1, 9, 8), (2, 4, 7)]
    srcs = []
    for index, (n, h, w) in enumerate(shapes):
        for dtype in (np.float32, np.float64):
            src = rng.standard_normal((n, h, w, channels)).astype(dtype)
            srcs.append((src, index % 2 == 0))
    return srcs


@pytest.mark.parametrize("algorithm", ["auto"] + ALGORITHMS)
def test_shared_plan_gives_serial_results_bit_for_bit(algorithm):
    rng = np.random.default_rng(20)
    channels, out_channels = 8, 8
    weights = rng.standard_normal((3, 3, channels, out_channels)).astype(np.float32)
    bias = rng.standard_normal(out_channels).astype(np.float32)
    attributes = dict(pads_begin=1, pads_end=1, algorithm=algorithm)
    srcs = _mixed_srcs(rng, channels)

    # A measuring plan ("auto") may time a different winner than another plan of the same
    # weights; each result is compared with a serial plan forced to the algorithm the shared
    # plan runs for that shape.
    names = [algorithm] if algorithm != "auto" else ALGORITHMS
    expected_by_name = []
    for src, _ in srcs:
        results = {}
        for name in names:
            try:
                serial = convlab.Convolution(weights, bias, pads_begin=1, pads_end=1,
                                             algorithm=name)
                results[name] = serial(src)
            except ValueError:
                continue  # the algorithm cannot run this shape
            assert_matches_reference(results[name], src, weights, bias,
                                     dict(pads_begin=1, pads_end=1), name)
        expected_by_name.append(results)
    expected = [next(iter(results.values())) for results in expected_by_name]

    shared = convlab.Convolution(weights, bias, **attributes)
    per_thread = SHARED_PLAN_CALLS // THREAD_COUNT
    start = threading.Barrier(THREAD_COUNT)
    mismatches, errors, calls = [], [], [0] * THREAD_COUNT

    def worker(index):
        outs = [np.empty_like(result) for result in expected]
        try:
            start.wait()
            for step in range(per_thread):
                case = (index * 7 + step) % len(srcs)  # threads start on different shapes
                src, with_out = srcs[case]
                if with_out and step % 3 == 0:
                    got = shared(src, out=outs[case])
                    same = got is outs[case]
                else:
                    got = shared(src)
                    same = True
                calls[index] += 1
                want = expected_by_name[case].get(shared.algorithm_for(src))
                if not (same and want is not None and np.array_equal(got, want)):
                    mismatches.append((index, step, src.shape, src.dtype.name))
        except BaseException as error:  # reported below, with the thread that raised it
            errors.append((index, repr(error)))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(THREAD_COUNT)]
    began = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - began
    used = sorted({shared.algorithm_for(src) for src, _ in srcs})

    print(f"\nshared plan ({algorithm} -> {', '.join(used)}): {sum(calls)} calls from "
          f"{THREAD_COUNT} threads over {len(srcs)} shape/dtype cases in {seconds:.2f} s, "
          f"{len(mismatches)} differing from serial")
    assert not errors, errors[:3]
    assert sum(calls) == per_thread * THREAD_COUNT == SHARED_PLAN_CALLS
    assert not mismatches, mismatches[:5]


# --------------------------------------------------------------------------- memory

def _entry_points():
    """name -> a no-argument call of one entry point on a tiny problem."""
    rng = np.random.default_rng(21)
    src = rng.standard_normal((1, 6, 6, 4)).astype(np.float32)           # NXC
    weights = rng.standard_normal((3, 3, 4, 8)).astype(np.float32)       # XIO
    bias = rng.standard_normal(8).astype(np.float32)
    pads = dict(pads_begin=1, pads_end=1)
    plan = convlab.Convolution(weights, bias, **pads)
    two_thread_plan = convlab.Convolution(weights, bias, threads=2, **pads)
    out = np.empty((1, 6, 6, 8), np.float32)
    fused_plan = convlab.Convolution(weights, bias, post_ops=["sum", "relu"], **pads)
    src_u8 = rng.integers(0, 256, (1, 6, 6, 4), dtype=np.uint8)
    weights_s8 = rng.integers(-128, 128, (3, 3, 4, 8), dtype=np.int8)
    half_src, half_weights = src.astype(np.float16), weights.astype(np.float16)
    up_weights = rng.standard_normal((3, 3, 2, 4)).astype(np.float32)  # XOI: OC/G 2, IC 4
    diff_dst = rng.standard_normal((1, 3, 3, 8)).astype(np.float32)
    forward = dict(strides=2, pads_begin=1, pads_end=1)
    residual = rng.standard_normal((1, 6, 6, 8)).astype(np.float32)
    return {
        "convolve": lambda: convlab.convolve(src, weights, bias, **pads),
        "convolve(direct)": lambda: convlab.convolve(src, weights, bias, algorithm="direct",
                                                     **pads),
        "convolve(im2col)": lambda: convlab.convolve(src, weights, bias, algorithm="im2col",
                                                     **pads),
        "convolve(winograd4)": lambda: convlab.convolve(src, weights, bias,
                                                        algorithm="winograd4", **pads),
        "convolve(post_ops, out=)": lambda: convlab.convolve(
            src, weights, bias, post_ops=[("sum", 0.5), "relu", ("add", residual)],
            out=out, **pads),
        "convolve(reflect, data_dilations)": lambda: convlab.convolve(
            src, weights, bias, padding_mode="reflect", data_dilations=2, **pads),
        "convolve(int8)": lambda: convlab.convolve(
            src_u8, weights_s8, src_zero_point=128, output_scale=0.01, dst_zero_point=3,
            dst_dtype="uint8", **pads),
        "convolve(float16)": lambda: convlab.convolve(half_src, half_weights, **pads),
        "convolve(2 threads)": lambda: convlab.convolve(src, weights, bias, threads=2, **pads),
        "Convolution()": lambda: plan(src),
        "Convolution(threads=2)": lambda: two_thread_plan(src),
        "Convolution(out=)": lambda: plan(src, out=out),
        "Convolution(post_ops)": lambda: fused_plan(src, out=out),
        "conv_transpose(col2im)": lambda: convlab.conv_transpose(src, up_weights, strides=2,
                                                                 **pads),
        "conv_transpose(forward)": lambda: convlab.conv_transpose(src, up_weights, **pads),
        "convolve_backward_data": lambda: convlab.convolve_backward_data(
            diff_dst, weights, src.shape, **forward),
        "convolve_backward_weights": lambda: convlab.convolve_backward_weights(
            src, diff_dst, weights.shape, **forward),
        "select_algorithm": lambda: convlab.select_algorithm(src, weights, bias, **pads),
        "explain": lambda: str(convlab.explain(src, weights, bias, **pads)),
    }


ENTRY_POINTS = list(_entry_points())


def _resident_bytes() -> int:
    gc.collect()
    return psutil.Process().memory_info().rss


@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_repeated_calls_do_not_grow_memory(entry):
    call = _entry_points()[entry]
    half = LEAK_CALLS // 2
    with threadpool_limits(limits=1, user_api="openmp"):
        for _ in range(WARM_UP_CALLS):
            call()
        resident = [_resident_bytes()]
        began = time.perf_counter()
        for _ in range(2):
            for _ in range(half):
                call()
            resident.append(_resident_bytes())
        seconds = time.perf_counter() - began
    growths = [after - before for before, after in zip(resident, resident[1:])]
    print(f"\n{entry}: {2 * half} calls in {seconds:.2f} s "
          f"({seconds / (2 * half) * 1e6:.0f} us each), resident memory "
          + ", ".join(f"{growth / 2**20:+.3f}" for growth in growths) + " MiB per half")
    assert min(growths) < LEAK_BYTES // 2, (
        f"{entry}: each half of {half} calls grew resident memory, by "
        + " and ".join(f"{growth / 2**20:.2f}" for growth in growths) + " MiB")
