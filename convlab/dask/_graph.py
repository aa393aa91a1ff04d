"""``convlab.dask.convolve``: one Dask task per output chunk, fed its exact receptive field.

The graph holds, per output chunk, one task that receives its own input block, the halo
slabs of the neighbouring blocks its taps reach (one slice task per block face, shared by
every chunk reading through that face), the weights key and the bias key; the weights are
one key of the graph, whatever the number of chunks. docs/dask.md explains the
choices (output chunks, threads, what is refused).
"""
from __future__ import annotations

import inspect
import itertools
import operator
import warnings

import dask
import dask.array as da
import numpy as np
from dask.array.core import PerformanceWarning
from dask.base import tokenize
from dask.highlevelgraph import HighLevelGraph

import convlab
from convlab import effective_threads, make_problem
from convlab.dask import _halo
from convlab.dask._worker import BlockSpec, CallSpec, run_block

# The keywords of convlab.convolve that this function takes, and those it refuses.
_CONVOLVE_KEYWORDS = tuple(
    name for name, parameter in inspect.signature(convlab.convolve).parameters.items()
    if parameter.kind is parameter.KEYWORD_ONLY)
_SHAPE_KEYWORDS = ("strides", "pads_begin", "pads_end", "dilations", "auto_pad", "groups",
                   "data_format", "weights_format", "data_dilations", "padding_mode",
                   "dst_dtype")
# decided per chunk: the chunk's own pads and data dilation replace the global ones
_LOCAL_KEYWORDS = ("pads_begin", "pads_end", "auto_pad", "data_dilations", "padding_mode")
_BINARY_POST_OPS = ("add", "mul", "max", "min")


def convolve(src, weights, bias=None, **kwargs):
    """:func:`convlab.convolve` on a ``dask.array.Array``, built lazily, chunk by chunk.

    Parameters
    ----------
    src : dask.array.Array
        ``(N, I..., IC)`` for ``data_format="NXC"`` (default) or ``(N, IC, I...)``, any
        chunking. The batch axis keeps its chunks; each output chunk along a spatial axis
        follows the input chunk holding its windows' centres (a stride-1 "same"
        convolution keeps the input chunks) and reads exactly its receptive field, halos
        from neighbouring chunks included; the channel axis is merged into one chunk
        (with a ``PerformanceWarning`` when that copies).
    weights, bias : array_like
        NumPy arrays (a Dask array is computed once, here). Each is one key of the graph.
    **kwargs
        The keyword arguments of :func:`convlab.convolve`, except ``out`` (store the
        result with ``dask.array.store`` or ``to_zarr``). Padding modes apply at the edges
        of the whole array. Post-ops take no tensor that varies along the batch or spatial
        axes (per-channel ones are fine) and no ``"sum"``. ``threads=`` sets every task's
        thread count; by default each task takes its share of the cores (docs/dask.md).

    Returns
    -------
    dask.array.Array
        dst in ``data_format`` with the dtype :func:`convlab.convolve` returns.
    """
    if not isinstance(src, da.Array):
        raise TypeError(f"src must be a dask.array.Array, got {type(src).__name__}; for a "
                        f"NumPy array call convlab.convolve")
    unknown = sorted(set(kwargs) - set(_CONVOLVE_KEYWORDS))
    if unknown:
        raise TypeError(f"convlab.dask.convolve got unexpected keyword arguments {unknown}; "
                        f"it takes those of convlab.convolve: {list(_CONVOLVE_KEYWORDS)}")
    if kwargs.get("out") is not None:
        raise TypeError("out= is not taken by convlab.dask.convolve, which returns a lazy "
                        "dask array; write it with dask.array.store or to_zarr")
    kwargs.pop("out", None)
    # private copies: the graph runs later, and the caller may change their arrays meanwhile
    weights = np.array(weights, copy=True)
    bias = None if bias is None else np.array(bias, copy=True)
    _check_post_ops(kwargs.get("post_ops"), kwargs.get("data_format", "NXC"), src.ndim)

    problem = make_problem(src.shape, src.dtype, weights.shape, weights.dtype,
                           None if bias is None else bias.shape,
                           None if bias is None else bias.dtype,
                           **{k: v for k, v in kwargs.items() if k in _SHAPE_KEYWORDS})
    # Every other argument (zero points, post-ops, algorithm, threads, precision) is
    # checked now, by a call on an empty batch, rather than in the first task.
    empty = np.empty((0, *src.shape[1:]), dtype=src.dtype)
    convlab.convolve(empty, weights, bias, **kwargs)

    channel_axis = 1 if problem.data_format == "NCX" else src.ndim - 1
    if src.numblocks[channel_axis] > 1:
        warnings.warn(f"convlab.dask.convolve merges src's {src.numblocks[channel_axis]} "
                      f"chunks along the channel axis ({channel_axis}) into one, a copy; "
                      f"chunk src with all channels in each chunk to avoid it",
                      PerformanceWarning, stacklevel=2)
        src = src.rechunk({channel_axis: -1})
    return _build(src, weights, bias, kwargs, problem, channel_axis)


def _check_post_ops(post_ops, data_format, ndim) -> None:
    """Post-ops a chunk can apply alone: no sum (there is no out), and binary tensors
    constant along the batch and spatial axes."""
    if post_ops is None or isinstance(post_ops, (str, bytes)):
        return  # convlab.convolve names the error
    channel_axis = 1 if str(data_format).upper() == "NCX" else ndim - 1
    for index, entry in enumerate(post_ops):
        name = entry if isinstance(entry, str) else (
            entry[0] if isinstance(entry, tuple) and entry else None)
        if not isinstance(name, str):
            continue
        if name.lower() == "sum":
            raise ValueError(f"post_ops[{index}]: 'sum' needs out=, which "
                             f"convlab.dask.convolve does not take; add the prior dst with "
                             f"Dask arithmetic (result + scale * prior)")
        if name.lower() in _BINARY_POST_OPS and len(entry) == 2:
            shape = np.shape(entry[1])
            full = (1,) * (ndim - len(shape)) + tuple(shape)
            if len(full) > ndim or any(extent != 1 for axis, extent in enumerate(full)
                                       if axis != channel_axis):
                raise ValueError(f"post_ops[{index}]: the binary tensor of shape {shape} "
                                 f"varies along the batch or spatial axes; "
                                 f"convlab.dask.convolve takes per-channel tensors only "
                                 f"(apply others with Dask arithmetic on the result)")


def _axis_geometry(problem, source_extents):
    steps = problem.data_dilations or (1,) * problem.rank
    begins = (problem.materialized_pads[0] if problem.materialized_pads is not None
              else problem.pads_begin)
    return [_halo.AxisGeometry(source_extent=int(i), kernel=k, stride=s, dilation=d,
                               data_dilation=step, pad_begin=pb, output_extent=o)
            for i, k, s, d, step, pb, o in zip(
                source_extents, problem.kernel_shape, problem.strides, problem.dilations,
                steps, begins, problem.output_shape)]


def _local_threads(n_tasks: int) -> int:
    """Per-task threads under the threaded scheduler: the cores shared by the tasks that
    can run at once (the pool's threads, or fewer tasks)."""
    pool = dask.config.get("num_workers", None) or dask.system.CPU_COUNT
    return max(1, effective_threads(None) // max(1, min(n_tasks, int(pool))))


def _fill_value(kwargs, problem):
    """What an inserted data-dilation zero holds in a gathered window: the src zero point
    of an 8-bit problem (docs/specification.md §3.4), else zero."""
    if problem.is_quantized and kwargs.get("src_zero_point") is not None:
        fill = np.asarray(kwargs["src_zero_point"])
        return fill if fill.ndim else fill.item()
    return 0


def _build(src, weights, bias, kwargs, problem, channel_axis):
    rank = problem.rank
    first_spatial = 2 if problem.data_format == "NCX" else 1
    spatial_axes = [first_spatial + a for a in range(rank)]
    geometry = _axis_geometry(problem, [src.shape[a] for a in spatial_axes])
    gathered = problem.padding_mode != "zeros"
    input_chunks = [src.chunks[a] for a in spatial_axes]

    # per axis: output chunk sizes, each chunk's window and its pieces of the input blocks
    out_chunks, windows, axis_pieces = [], [], []
    for axis, chunks in zip(geometry, input_chunks):
        sizes = _halo.output_boundaries(axis, chunks)
        starts = np.concatenate([[0], np.cumsum(sizes)]).astype(int)
        spans = list(zip(starts[:-1], starts[1:]))
        if gathered:
            found = [_halo.gathered_window(axis, int(a), int(b), problem.padding_mode)
                     for a, b in spans]
        else:
            found = [_halo.zero_pad_window(axis, int(a), int(b)) for a, b in spans]
        out_chunks.append(sizes)
        windows.append(found)
        axis_pieces.append([_halo.pieces(w.runs, chunks) for w in found])

    weights_node = dask.delayed(weights, pure=True)
    bias_node = None if bias is None else dask.delayed(bias, pure=True)
    bias_key = None if bias_node is None else bias_node.key
    call_kwargs = {k: v for k, v in kwargs.items()
                   if k not in _LOCAL_KEYWORDS and k != "threads"}
    token = tokenize(src.name, weights_node.key, bias_key, sorted(kwargs.items(), key=str))
    batch_chunks = src.chunks[0]
    n_tasks = len(batch_chunks) * int(np.prod([len(c) for c in out_chunks]))
    call = CallSpec(
        token=f"{weights_node.key}-{bias_key}-{tokenize(sorted(call_kwargs.items(), key=str))}",
        plan_kwargs=tuple(call_kwargs.items()), data_format=problem.data_format, rank=rank,
        src_dtype=src.dtype, fill=_fill_value(kwargs, problem),
        threads=None if kwargs.get("threads") is None else effective_threads(kwargs["threads"]),
        local_threads=_local_threads(n_tasks))

    name = f"convlab-convolve-{token}"
    halo_name = f"convlab-halo-{token}"
    layer: dict = {}

    def block_key(batch_block, spatial_blocks):
        if problem.data_format == "NCX":
            return (batch_block, 0, *spatial_blocks)
        return (batch_block, *spatial_blocks, 0)

    slab_keys: dict = {}

    def piece_source(batch_block, parts):
        """The input block itself, or the halo slab of it that holds the piece (one task,
        shared by every chunk whose piece it holds), and where the piece lies in it
        (None: all of it)."""
        blocks = tuple(p[0] for p in parts)
        wanted = tuple((p[1], p[2]) for p in parts)
        source_key = (src.name, *block_key(batch_block, blocks))
        slab = _halo.halo_slab(wanted, tuple(c[b] for c, b in zip(input_chunks, blocks)))
        if slab is None:
            return source_key, None
        key = slab_keys.get((batch_block, blocks, slab))
        if key is None:
            key = slab_keys[batch_block, blocks, slab] = (halo_name, len(slab_keys))
            index: list = [slice(None)] * src.ndim
            for axis, (start, stop) in zip(spatial_axes, slab):
                index[axis] = slice(start, stop)
            layer[key] = (operator.getitem, source_key, tuple(index))
        local = tuple((lo - s0, hi - s0) for (lo, hi), (s0, _) in zip(wanted, slab))
        whole = all(lo == 0 and hi == s1 - s0 for (lo, hi), (s0, s1) in zip(local, slab))
        return key, None if whole else local

    for batch_block, batch in enumerate(batch_chunks):
        for combo in itertools.product(*[range(len(c)) for c in out_chunks]):
            found = [windows[a][i] for a, i in enumerate(combo)]
            keys, offsets, selections = [], [], []
            for parts in itertools.product(*[axis_pieces[a][i]
                                             for a, i in enumerate(combo)]):
                key, selection = piece_source(batch_block, parts)
                keys.append(key)
                selections.append(selection)
                offsets.append(tuple(p[3] for p in parts))
            if gathered:
                compact = tuple(w.compact_extent for w in found)
                takes = tuple(w.take for w in found)
                local = (("pads_begin", (0,) * rank), ("pads_end", (0,) * rank),
                         ("data_dilations", None))
            else:
                compact = tuple(w.stop - w.start for w in found)
                takes = None
                local = (("pads_begin", tuple(w.pad_begin for w in found)),
                         ("pads_end", tuple(w.pad_end for w in found)),
                         ("data_dilations", problem.data_dilations))
            block = BlockSpec(call=call, batch=int(batch), compact_shape=compact,
                              offsets=tuple(offsets), selections=tuple(selections),
                              takes=None if takes is None or all(t is None for t in takes)
                              else takes,
                              local_attributes=local)
            layer[(name, *block_key(batch_block, combo))] = (
                run_block, block, problem.in_channels, weights_node.key, bias_key, *keys)

    dependencies = [src, weights_node] + ([] if bias_node is None else [bias_node])
    graph = HighLevelGraph.from_collections(name, layer, dependencies=dependencies)
    channel_chunks = ((problem.out_channels,),)
    spatial_chunks = tuple(tuple(c) for c in out_chunks)
    if problem.data_format == "NCX":
        chunks = (tuple(batch_chunks), *channel_chunks, *spatial_chunks)
    else:
        chunks = (tuple(batch_chunks), *spatial_chunks, *channel_chunks)
    dtype = problem.output_dtype
    return da.Array(graph, name, chunks, dtype=dtype, meta=np.empty((0,) * src.ndim, dtype))
