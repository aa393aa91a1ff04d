"""convlab.dask on a LocalCluster: streaming, batch scaling, and dask-image as the anchor.

    python bench/dask_scaling.py                  # full sizes (needs ~6 GB RAM, ~3 GB disk)
    python bench/dask_scaling.py --small          # a quick check that everything runs
    python bench/dask_scaling.py --output bench/results/dask_scaling_<date>_<cpu>.txt

Three experiments, each on a fresh ``LocalCluster`` of ``--workers`` worker processes with
one Dask thread each (the nanny sets ``OMP_NUM_THREADS=1`` in them, so each task runs one
OpenMP thread; docs/dask.md §4):

1. **Streaming.** A float32 single-channel 3-D volume ``--volume-factor`` times the workers'
   ``--memory-limit-mib`` is written to zarr, then convolved (3x3x3, "same", replicate
   padding) from zarr to zarr. Reported: wall time, each worker's peak resident memory
   (``ru_maxrss``, read from the worker process at the end) against the limit, and whether
   any worker was restarted (a worker over 95 % of its limit is killed by its nanny).
2. **Batch.** A ResNet-50 layer (``--layer``, default res3a_branch2b) at batch ``--batch``,
   chunked by ``--batch-chunk`` images: the cluster (src persisted on the workers, dst
   persisted there) against one ``convlab.convolve`` call with ``--workers`` threads in
   this process. Parallel efficiency = one call's time / the cluster's time (1.0: the
   workers are as fast as one call on the same total number of cores).
3. **Volume and anchor.** A single-channel float32 3-D volume of ``--anchor-mib``
   (persisted on the workers): convlab.dask against dask-image's ``ndfilters.convolve``
   (SciPy ``ndimage`` per chunk, ``map_overlap`` halos) with the same 5x5x5 kernel,
   boundary (replicate: ndimage's "nearest"), chunks and workers; and convlab.dask
   against one ``convlab.convolve`` call with ``--workers`` threads. ndimage flips the
   kernel (true convolution); convlab gets the flipped kernel, and the two results are
   compared on the first chunk.

Timings alternate between the contenders, ``--repeats`` rounds, medians reported; the
machine may be shared, so read them as such.
"""
from __future__ import annotations

import argparse
import logging
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import convlab  # noqa: E402
from convlab import shapes  # noqa: E402
from convlab.cli._bench_tables import machine_lines  # noqa: E402

MIB = 2**20


def peak_rss_mib() -> float:
    """This process's peak resident memory (Linux reports ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def start_cluster(workers: int, memory_limit):
    from dask.distributed import Client, LocalCluster

    cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                           memory_limit=memory_limit, dashboard_address=None,
                           silence_logs=logging.ERROR)
    return cluster, Client(cluster)


def warm_up(client) -> None:
    """Import convlab and Dask's array code on every worker before anything is timed."""
    def load():
        import convlab.dask  # noqa: F401
        return True
    client.run(load)


def volume_shape(mib: float) -> tuple[int, int, int]:
    """A (D, H, W) float32 volume of about ``mib`` MiB with H = W = 2 * D, rounded to 32."""
    voxels = mib * MIB / 4
    depth = max(32, int(round((voxels / 4) ** (1 / 3) / 32)) * 32)
    return depth, 2 * depth, 2 * depth


def timed(call) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def stream(args, out) -> None:
    import dask.array as da
    import zarr

    import convlab.dask

    limit = args.memory_limit_mib * MIB
    depth, height, width = volume_shape(args.volume_factor * args.memory_limit_mib)
    chunk = args.stream_chunk
    nbytes = depth * height * width * 4
    workdir = tempfile.mkdtemp(prefix="convlab-dask-", dir=args.tmpdir)
    try:
        source, target = os.path.join(workdir, "in.zarr"), os.path.join(workdir, "out.zarr")
        noise = da.random.default_rng(0).random((1, depth, height, width, 1),
                                                chunks=(1, chunk, chunk, chunk, 1),
                                                dtype=np.float32)
        written = timed(lambda: noise.to_zarr(source))
        weights = np.random.default_rng(1).random((3, 3, 3, 1, 1)).astype(np.float32)
        cluster, client = start_cluster(args.workers, limit)
        with cluster, client:
            warm_up(client)
            before = set(client.scheduler_info()["workers"])
            baseline = client.run(peak_rss_mib)
            src = da.from_zarr(source)
            dst = convlab.dask.convolve(src, weights, pads_begin=1, pads_end=1,
                                        padding_mode="replicate")
            seconds = timed(lambda: dst.to_zarr(target))
            after = set(client.scheduler_info()["workers"])
            peaks = client.run(peak_rss_mib)
        check = (slice(0, 1), slice(0, min(depth, 8)), slice(0, 16), slice(0, 16), slice(0, 1))
        head = np.asarray(zarr.open_array(source, mode="r")[:, :10, :18, :18, :])
        expected = convlab.convolve(head, weights, pads_begin=1, pads_end=1,
                                    padding_mode="replicate")[check]
        got = np.asarray(zarr.open_array(target, mode="r")[check])
        agrees = np.allclose(got, expected, rtol=1e-4, atol=1e-4)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    out(f"## 1. streaming: zarr -> convlab.dask.convolve -> zarr, {args.workers} workers x "
        f"1 thread, memory limit {args.memory_limit_mib} MiB each")
    out(f"volume (1, {depth}, {height}, {width}, 1) float32 = {nbytes / MIB:.0f} MiB "
        f"({nbytes / limit:.1f}x one worker's limit), chunks {chunk}^3 "
        f"({chunk ** 3 * 4 / MIB:.0f} MiB), kernel 3x3x3, replicate padding")
    out(f"writing the input zarr: {written:.1f} s; convolving zarr to zarr: {seconds:.1f} s "
        f"({nbytes / MIB / seconds:.0f} MiB/s)")
    for address in sorted(peaks):
        out(f"  worker {address}: peak RSS {peaks[address]:.0f} MiB "
            f"({peaks[address] / args.memory_limit_mib:.0%} of the limit; "
            f"{baseline.get(address, float('nan')):.0f} MiB after start-up)")
    out(f"workers restarted: {'none' if before == after else sorted(before ^ after)}; "
        f"result agrees with convlab.convolve on the first corner: {agrees}")
    out("")


def batch(args, out) -> None:
    import dask.array as da
    from dask.distributed import wait

    import convlab.dask

    layer = next(item for item in shapes.load_suite("resnet_50", mb=args.batch)
                 if item.short_name.split("*")[0] == args.layer)
    _, weights, _ = layer.arrays(1, seed=0)
    kwargs = layer.convolve_kwargs()
    cluster, client = start_cluster(args.workers, 0)
    with cluster, client:
        warm_up(client)
        # made on the workers (a NumPy src would travel inside the graph)
        chunked = da.random.default_rng(0).uniform(
            -1, 1, layer.src_shape(args.batch),
            chunks=(args.batch_chunk, -1, -1, -1)).astype(np.float32).persist()
        wait(chunked)
        src = chunked.compute()
        lazy = convlab.dask.convolve(chunked, weights, **kwargs)

        def on_cluster():
            result = lazy.persist()
            wait(result)
            del result

        def one_call():
            convlab.convolve(src, weights, threads=args.workers, **kwargs)

        single, spread = measure(args.repeats, one_call, on_cluster)
        got = lazy[:1].compute()
    agrees = np.allclose(got, convlab.convolve(src[:1], weights, **kwargs), rtol=1e-4,
                         atol=1e-3)
    out(f"## 2. batch: resnet_50:{layer.short_name} at batch {args.batch}, chunks of "
        f"{args.batch_chunk} images")
    out(f"src {layer.src_shape(args.batch)} NXC, weights {weights.shape} XIO, {kwargs}")
    out(f"one convlab.convolve call, threads={args.workers}: {single * 1e3:.1f} ms")
    out(f"convlab.dask on {args.workers} workers x 1 thread (src and dst on the workers): "
        f"{spread * 1e3:.1f} ms")
    out(f"parallel efficiency (one call / cluster): {single / spread:.2f}; result agrees: "
        f"{agrees}")
    out("")


def measure(repeats: int, first, second) -> tuple[float, float]:
    """Medians of ``first`` and ``second`` run alternately (after one untimed run each)."""
    first()
    second()
    times: tuple[list, list] = ([], [])
    for index in range(repeats):
        order = (0, 1) if index % 2 == 0 else (1, 0)
        for which in order:
            times[which].append(timed((first, second)[which]))
    return statistics.median(times[0]), statistics.median(times[1])


def anchor(args, out) -> None:
    import dask.array as da
    from dask.distributed import wait
    from dask_image import ndfilters

    import convlab.dask

    depth, height, width = volume_shape(args.anchor_mib)
    chunk = args.anchor_chunk
    kernel = np.random.default_rng(2).random((5, 5, 5)).astype(np.float32)
    flipped = np.ascontiguousarray(kernel[::-1, ::-1, ::-1])[..., None, None]   # XIO
    attributes = dict(pads_begin=2, pads_end=2, padding_mode="replicate")
    cluster, client = start_cluster(args.workers, 0)
    with cluster, client:
        warm_up(client)
        # made on the workers (a NumPy volume would travel inside the graph)
        image = da.random.default_rng(3).random((depth, height, width), chunks=chunk,
                                                 dtype=np.float32).persist()
        wait(image)
        volume = image.compute()
        ours = convlab.dask.convolve(image[None, ..., None], flipped, **attributes)
        theirs = ndfilters.convolve(image, kernel, mode="nearest")

        def run(lazy):
            def call():
                result = lazy.persist()
                wait(result)
                del result
            return call

        ours_s, theirs_s = measure(args.repeats, run(ours), run(theirs))
        first = tuple(slice(0, c[0]) for c in image.chunks)
        agrees = np.allclose(ours[(0, *first, 0)].compute(), theirs[first].compute(),
                             rtol=1e-4, atol=1e-3)
        single, spread = measure(args.repeats, lambda: convlab.convolve(
            volume[None, ..., None], flipped, threads=args.workers, **attributes), run(ours))
    nbytes = volume.nbytes
    out(f"## 3. single-channel volume ({depth}, {height}, {width}) float32 = "
        f"{nbytes / MIB:.0f} MiB, chunks {chunk}^3, kernel 5x5x5, replicate "
        f"(ndimage 'nearest'), {args.workers} workers x 1 thread, volume on the workers")
    out(f"dask-image ndfilters.convolve: {theirs_s:.2f} s; convlab.dask.convolve: "
        f"{ours_s:.2f} s; speed-up {theirs_s / ours_s:.1f}x; first chunk agrees: {agrees}")
    out(f"one convlab.convolve call, threads={args.workers}, on the whole volume: "
        f"{single:.2f} s; convlab.dask: {spread:.2f} s; parallel efficiency "
        f"{single / spread:.2f}")
    out("")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small", action="store_true",
                        help="small sizes, to check the script runs (a minute or two)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--memory-limit-mib", type=int, default=None)
    parser.add_argument("--volume-factor", type=float, default=None,
                        help="streamed volume / one worker's memory limit (default 4)")
    parser.add_argument("--stream-chunk", type=int, default=None)
    parser.add_argument("--layer", default="res3a_branch2b")
    parser.add_argument("--batch", type=int, default=None)
    parser.add_argument("--batch-chunk", type=int, default=None)
    parser.add_argument("--anchor-mib", type=float, default=None)
    parser.add_argument("--anchor-chunk", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--experiments", default="stream,batch,anchor")
    parser.add_argument("--tmpdir", default=None, help="where the zarr volumes go")
    parser.add_argument("--output", help="also write the report to this file")
    args = parser.parse_args(argv)
    sizes = (dict(memory_limit_mib=256, volume_factor=1.25, stream_chunk=96, batch=8,
                  batch_chunk=2, anchor_mib=32, anchor_chunk=64, repeats=3) if args.small
             else dict(memory_limit_mib=512, volume_factor=4, stream_chunk=128, batch=64,
                       batch_chunk=8, anchor_mib=1024, anchor_chunk=128, repeats=5))
    for name, value in sizes.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    lines: list[str] = []

    def out(line: str) -> None:
        print(line, flush=True)
        lines.append(line)

    out(f"# bench/dask_scaling.py {' '.join(sys.argv[1:])}")
    for line in machine_lines():
        out(line)
    import dask
    import distributed
    out(f"dask {dask.__version__}, distributed {distributed.__version__}; "
        f"cores available: {convlab.effective_threads()}")
    out("")
    experiments = {"stream": stream, "batch": batch, "anchor": anchor}
    for name in args.experiments.split(","):
        experiments[name.strip()](args, out)
    if args.output:
        with open(args.output, "w") as f:
            f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
