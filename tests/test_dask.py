"""convlab.dask.convolve: chunked results equal one-machine convlab.convolve for random
attributes and random uneven chunkings; weights are one key of the graph; plans are built
once per worker, not per chunk; the threaded scheduler, a process LocalCluster and zarr."""
from __future__ import annotations

import pickle
import time
import warnings

import dask
import dask.array as da
import numpy as np
import pytest
from dask.array.core import PerformanceWarning
from hypothesis import HealthCheck, Phase, assume, given, settings, strategies as st

import convlab
import convlab.dask
from convlab.dask import _halo, _worker
from tests.helpers import assert_matches_reference, run_python_in_checkout

PLAN_CACHE = pytest.mark.thread_unsafe(
    reason="counts the plans of the process-wide cache, which other threads' calls fill")
GLOBAL_CONFIG = pytest.mark.thread_unsafe(
    reason="changes Dask's process-wide configuration under the other threads")
PROCESSES = pytest.mark.thread_unsafe(
    reason="starts a cluster of worker processes; one per thread would crowd the machine")


def test_importing_convlab_does_not_import_dask():
    run_python_in_checkout(
        "import sys, convlab\n"
        "assert not {'dask', 'distributed', 'zarr'} & set(sys.modules), "
        "sorted(m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed'))\n"
        "import convlab.dask\n"
        "assert 'dask' in sys.modules and 'distributed' not in sys.modules\n")


# --------------------------------------------------------------------------- random cases

def _partition(draw, extent: int, most: int = 4) -> tuple[int, ...]:
    """Random uneven chunk sizes summing to ``extent`` (sizes of 1 included)."""
    if extent <= 1:
        return (extent,)
    cuts = sorted(draw(st.sets(st.integers(1, extent - 1), max_size=min(extent - 1, most))))
    edges = [0, *cuts, extent]
    return tuple(b - a for a, b in zip(edges, edges[1:]))


def _per_axis(draw, rank, low, high):
    return tuple(draw(st.integers(low, high)) for _ in range(rank))


@st.composite
def float_cases(draw, dtype):
    rank = draw(st.integers(1, 3))
    data_format = draw(st.sampled_from(["NXC", "NCX"]))
    weights_format = draw(st.sampled_from(["XIO", "OIX"]))
    groups = draw(st.sampled_from([1, 1, 2, 3]))
    icg, ocg = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    batch = draw(st.integers(1, 3))
    extents = _per_axis(draw, rank, 1, {1: 23, 2: 11, 3: 6}[rank])
    kernel = _per_axis(draw, rank, 1, 4)
    attributes = dict(strides=_per_axis(draw, rank, 1, 3),
                      dilations=_per_axis(draw, rank, 1, 3),
                      groups=groups, data_format=data_format, weights_format=weights_format,
                      auto_pad=draw(st.sampled_from(["none", "none", "same_upper",
                                                     "same_lower", "valid"])),
                      pads_begin=_per_axis(draw, rank, -2, 4),
                      pads_end=_per_axis(draw, rank, -2, 4),
                      padding_mode=draw(st.sampled_from(["zeros", "zeros", "reflect",
                                                         "replicate", "circular"])))
    if draw(st.booleans()):
        attributes["data_dilations"] = _per_axis(draw, rank, 1, 3)
    oc = ocg * groups
    post_ops = draw(st.sampled_from([None, ["relu"], [("clip", -1.0, 1.0), "tanh"],
                                     "per-channel"]))
    if post_ops == "per-channel":
        scale = np.linspace(0.5, 2.0, oc).astype(dtype)
        post_ops = [("mul", scale if data_format == "NXC" else scale.reshape(oc, *[1] * rank))]
    if post_ops is not None:
        attributes["post_ops"] = post_ops
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    src_shape = ((batch, icg * groups, *extents) if data_format == "NCX"
                 else (batch, *extents, icg * groups))
    src = rng.standard_normal(src_shape).astype(dtype)
    weights = rng.standard_normal((oc, icg, *kernel) if weights_format == "OIX"
                                  else (*kernel, icg, oc)).astype(dtype)
    bias = rng.standard_normal(oc).astype(dtype) if draw(st.booleans()) else None
    shape_attributes = {k: v for k, v in attributes.items() if k != "post_ops"}
    try:
        convlab.make_problem(src.shape, src.dtype, weights.shape, weights.dtype,
                             None if bias is None else bias.shape,
                             None if bias is None else bias.dtype, **shape_attributes)
    except ValueError:
        assume(False)
    chunks = tuple(_partition(draw, extent) for extent in src.shape)
    channel_axis = 1 if data_format == "NCX" else src.ndim - 1
    if draw(st.integers(0, 9)):  # mostly whole channels; sometimes split, to be merged
        chunks = (*chunks[:channel_axis], (src.shape[channel_axis],), *chunks[channel_axis + 1:])
    return src, weights, bias, attributes, chunks


def _dask_convolve(src, chunks, weights, bias, **attributes):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PerformanceWarning)  # split channels, tested apart
        return convlab.dask.convolve(da.from_array(src, chunks=chunks), weights, bias,
                                     **attributes)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.filter_too_much,
                                                                  HealthCheck.too_slow])
@given(case=float_cases(np.float64))
def test_float64_equals_one_machine_for_random_chunkings(case):
    src, weights, bias, attributes, chunks = case
    expected = convlab.convolve(src, weights, bias, **attributes)
    lazy = _dask_convolve(src, chunks, weights, bias, **attributes)
    assert lazy.shape == expected.shape and lazy.dtype == expected.dtype
    got = lazy.compute()
    scale = max(1.0, float(np.abs(expected).max(initial=0.0)))
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-10 * scale,
                               err_msg=f"{attributes} chunks={chunks}")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.filter_too_much,
                                                                  HealthCheck.too_slow])
@given(case=float_cases(np.float32))
def test_float32_within_the_tolerance_for_random_chunkings(case):
    src, weights, bias, attributes, chunks = case
    # the float64 test covers post-ops; the reference bound here is the convolution's
    attributes.pop("post_ops", None)
    # "highest" keeps every chunk on plain summation, whose bound is the default one
    got = _dask_convolve(src, chunks, weights, bias, precision="highest",
                         **attributes).compute()
    assert_matches_reference(got, src, weights, bias, attributes, "direct",
                             context=f"chunks={chunks}")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.filter_too_much,
                                                                  HealthCheck.too_slow])
@given(data=st.data())
def test_int8_equals_one_machine_exactly(data):
    draw = data.draw
    rank = draw(st.integers(1, 2))
    extents = _per_axis(draw, rank, 2, 12)
    kernel = _per_axis(draw, rank, 1, 3)
    ic, oc = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    src = rng.integers(0, 256, (2, *extents, ic), dtype=np.uint8)
    weights = rng.integers(-128, 128, (*kernel, ic, oc), dtype=np.int8)
    attributes = dict(strides=_per_axis(draw, rank, 1, 2),
                      dilations=_per_axis(draw, rank, 1, 2),
                      pads_begin=_per_axis(draw, rank, -1, 2),
                      pads_end=_per_axis(draw, rank, -1, 2),
                      data_dilations=_per_axis(draw, rank, 1, 2),
                      padding_mode=draw(st.sampled_from(["zeros", "reflect", "replicate",
                                                         "circular"])),
                      src_zero_point=draw(st.sampled_from(
                          [0, 128, tuple(int(v) for v in rng.integers(0, 256, ic))])),
                      weights_zero_point=draw(st.sampled_from([0, 3])))
    if draw(st.booleans()):
        attributes.update(output_scale=0.01, dst_zero_point=7, dst_dtype="uint8",
                          post_ops=["relu"])
    bias = rng.integers(-1000, 1000, oc).astype(np.int32) if draw(st.booleans()) else None
    try:
        expected = convlab.convolve(src, weights, bias, **attributes)
    except ValueError:
        assume(False)
    chunks = tuple(_partition(draw, extent) for extent in src.shape[:-1]) + ((ic,),)
    got = convlab.dask.convolve(da.from_array(src, chunks=chunks), weights, bias,
                                **attributes).compute()
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected, err_msg=f"{attributes} chunks={chunks}")


# --------------------------------------------------------------------------- halos

def test_chunks_smaller_than_the_halo_gather_from_several_neighbours():
    rng = np.random.default_rng(1)
    src = rng.standard_normal((1, 40, 2))
    weights = rng.standard_normal((5, 2, 3))
    attributes = dict(dilations=3, pads_begin=6, pads_end=6)  # span 13: halos of 6
    expected = convlab.convolve(src, weights, **attributes)
    lazy = convlab.dask.convolve(da.from_array(src, chunks=(1, 1, 2)), weights, **attributes)
    assert lazy.chunks[1] == (1,) * 40  # a stride-1 "same" convolution keeps the chunks
    np.testing.assert_allclose(lazy.compute(), expected, rtol=1e-12, atol=1e-12)


def test_output_chunks_follow_the_input_chunks():
    axis = _halo.AxisGeometry(source_extent=12, kernel=3, stride=2, dilation=1,
                              data_dilation=1, pad_begin=1, output_extent=6)
    assert _halo.output_boundaries(axis, (4, 4, 4)) == (2, 2, 2)
    same = _halo.AxisGeometry(source_extent=10, kernel=5, stride=1, dilation=1,
                              data_dilation=1, pad_begin=2, output_extent=10)
    assert _halo.output_boundaries(same, (3, 3, 4)) == (3, 3, 4)


def test_each_output_chunk_reads_exactly_its_receptive_field():
    # K=3, D=2, S=2, P_b=1: outputs 2..3 read padded 4..10, source 3..9
    axis = _halo.AxisGeometry(source_extent=20, kernel=3, stride=2, dilation=2,
                              data_dilation=1, pad_begin=1, output_extent=9)
    window = _halo.zero_pad_window(axis, 2, 4)
    assert (window.start, window.stop, window.pad_begin, window.pad_end) == (3, 10, 0, 0)
    edge = _halo.zero_pad_window(axis, 0, 2)
    assert (edge.start, edge.stop, edge.pad_begin) == (0, 6, 1)
    assert _halo.pieces(((3, 10),), (4, 4, 12)) == ((0, 3, 4, 0), (1, 0, 4, 1),
                                                   (2, 0, 2, 5))


def test_neighbours_send_face_slabs_not_slices_per_neighbour():
    # a corner neighbour's piece travels in the face slab along its thinnest axis
    assert _halo.halo_slab(((6, 8), (6, 8), (6, 8)), (8, 8, 8)) == ((6, 8), (0, 8), (0, 8))
    assert _halo.halo_slab(((0, 8), (0, 3), (7, 8)), (8, 8, 8)) == ((0, 8), (0, 8), (7, 8))
    assert _halo.halo_slab(((0, 8), (0, 8)), (8, 8)) is None
    # the graph: at most two slabs per block and axis, and the halo slab tasks are the
    # only extra tasks (one per slab, not one per neighbour: 26 in 3-D)
    src = da.zeros((1, 32, 32, 32, 1), chunks=(1, 8, 8, 8, 1))
    lazy = convlab.dask.convolve(src, np.ones((5, 5, 5, 1, 1)), pads_begin=2, pads_end=2)
    layer = lazy.dask.layers[lazy.name]
    slabs = [task for task in (layer[key] for key in layer) if task[0] is not _worker.run_block]
    assert lazy.npartitions == 64
    assert len(slabs) == len(layer) - 64 <= 2 * 3 * 64
    for key in layer:
        task = layer[key]
        if task[0] is _worker.run_block:
            whole = [dep for dep in task[5:] if dep[0] == src.name]
            assert whole == [(src.name, *key[1:])]  # its own block, no neighbour's


def test_padding_modes_read_across_the_whole_array_not_the_chunk():
    axis = _halo.AxisGeometry(source_extent=8, kernel=3, stride=1, dilation=1,
                              data_dilation=1, pad_begin=1, output_extent=8)
    first = _halo.gathered_window(axis, 0, 2, "circular")  # reads 7, 0, 1, 2
    assert first.runs == ((0, 3), (7, 8)) and first.take == (3, 0, 1, 2)
    assert _halo.gathered_window(axis, 0, 2, "reflect").take == (1, 0, 1, 2)
    assert _halo.gathered_window(axis, 3, 5, "reflect").take is None


# --------------------------------------------------------------------------- graph

def test_weights_are_one_key_of_the_graph_and_it_pickles_small():
    # 3x3x256x512 float32: 4.5 MiB; 16 spatial chunks
    weights = np.random.default_rng(0).standard_normal((3, 3, 256, 512)).astype(np.float32)
    src = da.ones((1, 64, 64, 256), chunks=(1, 16, 16, 256), dtype=np.float32)
    lazy = convlab.dask.convolve(src, weights, pads_begin=1, pads_end=1)
    assert lazy.numblocks == (1, 4, 4, 1)
    graph = dict(lazy.__dask_graph__())
    holding = [key for key, value in graph.items()
               if isinstance(getattr(value, "value", value), np.ndarray)
               and np.array_equal(getattr(value, "value", value), weights)]
    assert len(holding) == 1, holding
    size = len(pickle.dumps(graph, protocol=pickle.HIGHEST_PROTOCOL))
    weights[...] = 0  # the graph holds its own copy
    assert not np.array_equal(lazy[:, :16, :16, :].compute(), np.zeros((1, 16, 16, 512)))
    assert size < 2 * weights.nbytes + 2**20, f"graph pickles to {size} bytes"


@PLAN_CACHE
def test_plans_are_built_per_pad_set_not_per_chunk():
    rng = np.random.default_rng(2)
    src = rng.standard_normal((2, 64, 4)).astype(np.float32)
    weights = rng.standard_normal((3, 4, 8)).astype(np.float32)
    lazy = convlab.dask.convolve(da.from_array(src, chunks=(1, 8, 4)), weights,
                                 pads_begin=1, pads_end=1, threads=1)
    assert lazy.npartitions == 16
    _worker.clear_plans()
    lazy.compute()
    # first, interior and last chunk of the axis differ in their local pads
    assert _worker.plans_built() == 3
    lazy.compute()
    assert _worker.plans_built() == 3


def test_split_channels_are_merged_with_a_warning():
    rng = np.random.default_rng(3)
    src = rng.standard_normal((2, 6, 9, 9))
    weights = rng.standard_normal((4, 6, 3, 3))
    with pytest.warns(PerformanceWarning, match="channel axis"):
        lazy = convlab.dask.convolve(da.from_array(src, chunks=(1, 2, 5, 4)), weights,
                                     data_format="NCX", weights_format="OIX")
    np.testing.assert_allclose(lazy.compute(), convlab.convolve(
        src, weights, data_format="NCX", weights_format="OIX"), rtol=1e-12, atol=1e-12)


@GLOBAL_CONFIG
def test_threaded_scheduler_budget_shares_the_cores():
    cores = convlab.effective_threads()
    with dask.config.set(num_workers=1):
        assert convlab.dask._graph._local_threads(n_tasks=16) == cores
    with dask.config.set(num_workers=cores):
        assert convlab.dask._graph._local_threads(n_tasks=16) == 1
        assert convlab.dask._graph._local_threads(n_tasks=1) == cores


# --------------------------------------------------------------------------- bad input

def test_a_numpy_src_points_to_convlab_convolve():
    with pytest.raises(TypeError, match="convlab.convolve"):
        convlab.dask.convolve(np.zeros((1, 4, 4, 2)), np.zeros((3, 3, 2, 2)))


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(out=np.zeros((1, 2, 2, 2))), TypeError, "out="),
    (dict(post_ops=[("sum", 1.0)]), ValueError, "'sum' needs out="),
    (dict(post_ops=[("add", np.ones((1, 2, 2, 2)))]), ValueError, "per-channel"),
    (dict(groups=3), ValueError, "groups=3"),
    (dict(stride=2), TypeError, "unexpected keyword"),
    (dict(post_ops=["nope"]), ValueError, "not a known post-op"),
    (dict(threads=0), ValueError, "threads"),
])
def test_bad_arguments_are_named_before_any_task_runs(kwargs, error, match):
    src = da.zeros((1, 4, 4, 2), chunks=2)
    with pytest.raises(error, match=match):
        convlab.dask.convolve(src, np.zeros((3, 3, 2, 2)), **kwargs)


# --------------------------------------------------------------------------- cluster, zarr

def _drawn_cases(strategy, count: int) -> list:
    """``count`` cases drawn by ``strategy``, the same on every run."""
    cases: list = []

    @settings(max_examples=count, derandomize=True, database=None, deadline=None,
              phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    @given(case=strategy)
    def collect(case):
        cases.append(case)

    collect()
    return cases


@PROCESSES
def test_random_chunkings_equal_one_machine_on_a_process_local_cluster():
    distributed = pytest.importorskip("distributed")
    cases = _drawn_cases(float_cases(np.float64), 24)
    assert len(cases) == 24
    lazies = [_dask_convolve(src, chunks, weights, bias, **attributes)
              for src, weights, bias, attributes, chunks in cases]
    threaded = dask.compute(*lazies, scheduler="threads")
    started = time.perf_counter()
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        on_cluster = client.gather(client.compute(lazies))
    elapsed = time.perf_counter() - started
    for (src, weights, bias, attributes, chunks), local, remote in zip(cases, threaded,
                                                                       on_cluster):
        expected = convlab.convolve(src, weights, bias, **attributes)
        scale = max(1.0, float(np.abs(expected).max(initial=0.0)))
        for got, where in ((local, "threads"), (remote, "LocalCluster")):
            assert got.shape == expected.shape and got.dtype == expected.dtype
            np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-10 * scale,
                                       err_msg=f"{where}: {attributes} chunks={chunks}")
    assert elapsed < 60, f"the cluster test took {elapsed:.1f} s"


@PROCESSES
def test_process_local_cluster_and_zarr_round_trip(tmp_path):
    distributed = pytest.importorskip("distributed")
    zarr = pytest.importorskip("zarr")
    rng = np.random.default_rng(4)
    volume = rng.standard_normal((1, 20, 18, 16, 3)).astype(np.float32)
    weights = rng.standard_normal((3, 3, 3, 3, 5)).astype(np.float32)
    bias = rng.standard_normal(5).astype(np.float32)
    attributes = dict(strides=(1, 2, 1), pads_begin=1, pads_end=1, padding_mode="reflect",
                      precision="highest")
    source = zarr.open_array(str(tmp_path / "in.zarr"), mode="w", shape=volume.shape,
                             chunks=(1, 7, 9, 8, 3), dtype="float32")
    source[...] = volume
    started = time.perf_counter()
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        src = da.from_zarr(str(tmp_path / "in.zarr"))
        result = convlab.dask.convolve(src, weights, bias, **attributes)
        result.to_zarr(str(tmp_path / "out.zarr"))
        built = client.run(_worker.plans_built)
        threads = client.run(lambda: convlab.effective_threads())
    elapsed = time.perf_counter() - started
    got = np.asarray(zarr.open_array(str(tmp_path / "out.zarr"), mode="r"))
    attributes.pop("precision")
    assert_matches_reference(got, volume, weights, bias, attributes, "direct")
    n_chunks = result.npartitions
    # each worker builds a plan per local pad set it meets, far fewer than its chunks
    assert all(0 <= count < n_chunks for count in built.values()), (built, n_chunks)
    assert sum(built.values()) >= 1
    # the nanny limits OpenMP to one thread per worker process by default
    assert all(count >= 1 for count in threads.values())
    assert elapsed < 60, f"the cluster test took {elapsed:.1f} s"
