"""``im2col``: unfold the input into column panels and multiply them by the weights with BLAS.

For group g, row m of the panel is output position (n, o_1..o_r) in dst order and column
``t * IC/G + c`` is kernel tap t, channel c::

    panel_g[m, t*ICg + c] = src[n, o*S + k(t)*D - P_b, g*ICg + c]   (0 outside the input)
    dst[m, g*OCg:(g+1)*OCg] = panel_g @ W_g + bias[g*OCg:(g+1)*OCg]

where ``W_g`` is the canonical weights[g] read as a (prod(K) * ICg, OCg) matrix: the
canonical layout is already GEMM-ready, so ``prepare_weights`` does nothing.

Three paths, chosen per problem (``plan``):

* ``1x1-direct``: every K_i = 1, stride 1, no pads. The src rows *are* the panel: one
  GEMM per group reads src (N*P, IC) in place (group g = columns g*ICg.. with leading
  dimension IC) and writes dst (N*P, OC) in place. Nothing is copied.
* ``1x1-gather``: a 1x1 kernel with strides or pads. The rows a task needs are gathered
  once for all of its groups (zero rows where the pads are), then one GEMM per group.
* ``unfold``: the general case, any rank, groups, strides, dilations, pads (negative
  pads crop). The panel is built chunk by chunk: a chunk is a block of rows x all
  prod(K)*ICg columns; when even one row is too big for the workspace, the reduction
  is split into column blocks too and the GEMM accumulates (beta = 1).

Workspace: the panels of one call never hold more than the workspace limit (default
16 MiB; :func:`set_workspace_limit`, the ``CONVLAB_IM2COL_WORKSPACE`` environment
variable, or the :func:`workspace_limit` context manager), whatever the batch and
spatial sizes. A full panel of VGG-19 conv1_2 at batch 1 would take 110 MiB. The buffer
is kept for the next call (one per Python thread; :func:`release_workspace` frees it);
the fft strategy carves its blocks' buffers from the same one.

Chunks: about CHUNK_TARGET_BYTES of panel per thread, except where a few dozen rows
make a GEMM small enough for OpenBLAS's unpacked sgemm kernel (SMALL_GEMM_MNK: ResNet-50
conv1, narrow 1x1 layers); the chunks are then cut to that size.

Threads: OpenMP in the kernel and BLAS threads are never both at full width. The
kernel's OpenMP threads each run their own row chunks with single-threaded BLAS calls
(``rows`` mode), or, when there are too few rows to share, all threads unfold one
panel and then split the GEMM by output channels (``cols`` mode). The BLAS thread count
is set to 1 for the call through threadpoolctl, and restored afterwards.

BLAS: OpenBLAS from the scipy-openblas32 package when it is installed (a dependency), else
SciPy's ``cython_blas``; :mod:`convlab.runtime.blas` says why, and ``gemm_library`` which one runs.
"""
from __future__ import annotations

import os
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from convlab.dispatch import cost_model
from convlab.dispatch.registry import register_algorithm
from convlab.runtime import blas, cpu
from convlab.runtime.threads import available_cores, blas_libraries
from convlab.strategies.kernels import specialized

# --------------------------------------------------------------------------- workspace limit

DEFAULT_WORKSPACE_LIMIT = 16 * 2**20
WORKSPACE_ENV = "CONVLAB_IM2COL_WORKSPACE"
# Small enough to force one-row chunks and split reductions in tests, large enough to hold
# one float64 element for each of 32 threads.
MIN_WORKSPACE_LIMIT = 256

_SUFFIXES = {"k": 2**10, "m": 2**20, "g": 2**30}


def _parse_limit(value, source: str) -> int:
    """Bytes from an int, or a string with an optional K/M/G (binary) suffix."""
    text = value.strip().lower() if isinstance(value, str) else None
    if text is not None:
        scale = 1
        for suffix in ("kib", "mib", "gib", "kb", "mb", "gb", "k", "m", "g", "b"):
            if text.endswith(suffix):
                scale = _SUFFIXES.get(suffix[0], 1)
                text = text[:-len(suffix)].strip()
                break
        if not text.isdigit():
            raise ValueError(f"{source}={value!r} is not a byte count; expected an integer "
                             f"with an optional K, M or G suffix (e.g. '32M')")
        nbytes = int(text) * scale
    elif isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{source}={value!r} must be an int (bytes)")
    else:
        nbytes = int(value)
    if nbytes < MIN_WORKSPACE_LIMIT:
        raise ValueError(f"{source}={value!r} is {nbytes} bytes; expected at least "
                         f"{MIN_WORKSPACE_LIMIT}")
    return nbytes


def _initial_limit() -> int:
    value = os.environ.get(WORKSPACE_ENV)
    if value is None or not value.strip():
        return DEFAULT_WORKSPACE_LIMIT
    return _parse_limit(value, WORKSPACE_ENV)


_workspace_limit = _initial_limit()


def get_workspace_limit() -> int:
    """The most bytes the column panels of one call may hold."""
    return _workspace_limit


def set_workspace_limit(nbytes) -> int:
    """Bound the column panels of each later call to ``nbytes``; returns the old bound.

    ``nbytes`` is an int or a string such as ``"32M"``; at least
    ``MIN_WORKSPACE_LIMIT`` bytes.
    """
    global _workspace_limit
    previous = _workspace_limit
    _workspace_limit = _parse_limit(nbytes, "nbytes")
    return previous


@contextmanager
def workspace_limit(nbytes) -> Iterator[int]:
    """Temporarily set the workspace limit (tests use it to force tiny chunks)."""
    previous = set_workspace_limit(nbytes)
    try:
        yield _workspace_limit
    finally:
        set_workspace_limit(previous)


# The panels' memory is kept between calls, one buffer per Python thread and never more
# than the workspace limit. Fresh memory costs a page fault per 4 KiB page when first
# touched, and in this project's VM that was measured at up to ~8 us a page once other
# allocations (another library's, between two calls) had returned the heap to the system:
# 2 MiB of panels then cost milliseconds, more than a small layer's arithmetic.
_cache = threading.local()


def thread_workspace(elements: int, dtype: np.dtype) -> np.ndarray:
    """A buffer of `elements` of `dtype` from the one this Python thread keeps between
    calls (grown when too small, replaced when above the workspace limit)."""
    buffer = getattr(_cache, "buffer", None)
    if buffer is not None and buffer.nbytes <= _workspace_limit:
        last = _cache.last
        if last.size == elements and last.dtype == dtype:
            return last  # the same view as the last call's (small layers, every call)
    nbytes = elements * dtype.itemsize
    if buffer is None or buffer.nbytes < nbytes or buffer.nbytes > _workspace_limit:
        _cache.buffer = _cache.last = None  # drop the old buffer first: never two at once
        buffer = _cache.buffer = np.empty(nbytes, np.uint8)
    _cache.last = buffer[:nbytes].view(dtype)
    return _cache.last


def release_workspace() -> None:
    """Free the panel buffer this Python thread keeps between calls."""
    _cache.buffer = _cache.last = None


# --------------------------------------------------------------------------- planning

# The constants below come from single-thread sweeps on a 2-core AVX-512 machine
# (OpenBLAS SkylakeX kernels); the cost model's fitted constants absorb how far another
# CPU departs from them.
# A panel per thread of about half a core's L2 stays there between its unfold and its
# GEMM (on a 2 MiB L2, panels of 256-512 rows of 576 columns ran ~25% faster than one
# 3136-row panel). This CPU's L2, 2 MiB where the OS does not say.
CHUNK_TARGET_BYTES = cpu.cache_bytes("L2", 2 * 2**20) // 2
# Rows per GEMM call below which single-thread OpenBLAS sgemm loses speed on ResNet-50
# shapes (196x2304x256: 123 GFLOP/s in one call, 97 in 98-row calls); with fewer rows
# than this per core, the cores split output channels instead.
MIN_GEMM_ROWS = 256
# The same bound where the GEMM reads a panel (unfold and gather paths). Splitting output
# channels then makes every thread read the panel rows the others unfolded, and where the
# two cores share no cache that exchange doubled the time (the slow spells: a cache line
# took 0.34 us to go between the cores and back instead of about 0.1 us, measured as
# kernels._runtime.core_round_trip does). Split by rows, each thread multiplies the
# rows it unfolded. On an AMD EPYC (Zen 4),
# im2col one-shot at 2 threads, time with 64 / with 256 over the 19 layers it changes
# (bench/ab_constant.py; bench/results/panel_gemm_rows_2026-11-25_epyc-zen4.txt): geo-mean
# 0.91, GoogLeNet's 14x14 3x3 layers 0.88-0.94 (28x28 ones 0.55-0.66), res4a_branch1 1.08;
# 16 instead of 64 lost 1% over the 28 layers that changes (7x7 layers 1.03-1.13).
MIN_PANEL_GEMM_ROWS = 64
# Rows per chunk when a row is too wide for the workspace and the reduction is split.
REDUCTION_ROWS = 64
# COLS mode splits output channels in blocks of at least this many (whole vectors). With
# blocks of 16, two threads sharing the panel of a short layer with 32 outputs ran slower
# than one thread alone: on the 12 layers of the 1d suite the bound of 32 sends to ROWS
# mode, im2col one-shot at 2 threads took 0.78-0.81x the time (Intel Xeon, at avx512 and
# capped at avx2; bench/results/oc_block_min_2026-11-26_xeon-emr-avx512.txt and
# bench/results/oc_block_min_2026-11-26_xeon-emr-avx2.txt).
OC_BLOCK_MIN = 32
# sgemm/dgemm take 32-bit int sizes and leading dimensions.
BLAS_INT_MAX = 2**31 - 1
# OpenBLAS (0.3.30, SkylakeX, as SciPy ships it; measured before the kernel moved to
# scipy-openblas32's 0.3.34, with which later bench runs keep the cut) runs an
# sgemm with m*n*k up to 100**3 through a kernel that reads the operands in place
# instead of packing them, and zeroes no C beforehand. Where a chunk of at least
# SMALL_GEMM_MIN_ROWS rows fits that bound, ROWS mode cuts the rows so that it does.
# Measured with the kernel alone: _im2col.conv_im2col on the layer's arrays with
# rows_per_chunk forced, MODE_ROWS, 2 threads, BLAS at 1 thread, median of 7-9
# benchmark.time_block(call, 20) blocks:
#   conv1 (K=147, OC=64): 48..104 rows 1.10-1.23 ms, 107 rows 1.96 ms, 2091 rows 1.50 ms;
#   res2a_branch2a (1x1 64->64, 3136 rows): 128..244 rows 0.099-0.104 ms, 245 rows
#   0.177 ms, 392 rows 0.167 ms; res2b_branch2a (1x1 256->64): 61 rows 0.567 ms against
#   392 rows 0.569 ms (no gain at ~60 rows, hence the minimum); 32-row chunks of conv1
#   1.48 ms (too many calls). In `python -m convlab bench --threads 2 --suite resnet_50
#   --mb 1 --repeats 15 --algorithms im2col --no-onnxruntime`, 12 runs alternating with
#   the cut disabled: torch/im2col on conv1 0.64x -> 0.77x, res2a_branch2a 1.35x -> 1.74x
#   (medians). Other BLAS libraries just see smaller chunks.
SMALL_GEMM_MNK = 100**3
SMALL_GEMM_MIN_ROWS = 64
# COLS mode multiplies slab by slab of the first axis' kernel taps, leaving out the panel
# rows a slab would read from the padding, when that saves at least this share of the
# GEMM. `python bench/ab_constant.py convlab.strategies.im2col TAP_SLAB_MIN_SAVING 2.0 0.0
# --algorithm im2col --layers ...` on every layer of five suites that slabs would touch
# (bench/results/tap_slabs_2026-11-25.txt), time with slabs / without: 7x7 3x3 layers (9.5%
# saved) 0.87-0.96, 14x14 (4.8%) 0.94-1.00 but for one 1.12 that a rerun put at 0.97,
# 1-D and dilated layers saving 9.5-27% 0.59-0.91 but for one 1.13; 28x28 (2.4%) 0.99,
# 1-D layers saving 0.8-2.9% 1.01-1.39: three GEMM calls cost more than they save there.
TAP_SLAB_MIN_SAVING = 0.04

# Plan codes shared with the kernel, which is checked against them when it loads.
PATH_DIRECT, PATH_GATHER, PATH_UNFOLD = 0, 1, 2
MODE_ROWS, MODE_COLS, MODE_BLAS = 0, 1, 2
PATH_NAMES = {PATH_DIRECT: "1x1-direct", PATH_GATHER: "1x1-gather", PATH_UNFOLD: "unfold"}
MODE_NAMES = {MODE_ROWS: "rows", MODE_COLS: "cols", MODE_BLAS: "blas"}

_kernel_module = None
gemm_library: dict[str, Any] = {}
"""The BLAS the kernel multiplies with (:mod:`convlab.runtime.blas`): name, version, path."""


def _kernel():
    """The compiled kernel, imported on first use: it loads a BLAS, which takes a
    noticeable part of a second, and ``import convlab`` should not pay for that."""
    global _kernel_module
    if _kernel_module is None:
        from convlab.strategies.kernels import _im2col as kernel

        theirs = (kernel.PATH_DIRECT, kernel.PATH_GATHER, kernel.PATH_UNFOLD,
                  kernel.MODE_ROWS, kernel.MODE_COLS, kernel.MODE_BLAS)
        ours = (PATH_DIRECT, PATH_GATHER, PATH_UNFOLD, MODE_ROWS, MODE_COLS, MODE_BLAS)
        if theirs != ours:
            raise ImportError(f"kernels._im2col plan codes {theirs} do not match "
                              f"convlab.strategies.im2col's {ours}; rebuild the kernels")
        gemm_library.update(blas.install(kernel))
        _kernel_module = kernel
    return _kernel_module


def blas_library() -> dict[str, Any]:
    """What the kernel multiplies with (``gemm_library``), loading it, under the
    instruction-set cap in force, if no call has yet."""
    _kernel()
    return dict(gemm_library)


def use_blas(choice: str) -> dict[str, Any]:
    """Multiply with ``choice`` ("scipy-openblas32" or "scipy") from now on, for A/B
    runs and tests; returns what the kernel now calls. Not while a convolution runs."""
    global _blas_libraries
    with _switch_lock:
        installed = blas.install(_kernel(), choice)  # a bad choice leaves it as it was
        gemm_library.clear()
        gemm_library.update(installed)
        _blas_libraries = None
    return dict(gemm_library)


_switch_lock = threading.Lock()

# Overrides for experiments and tests: force a thread mode ("rows", "cols", "blas"). The
# planner never picks "blas" (one BLAS-threaded GEMM per chunk after an OpenMP unfold,
# the other design the issue names); it is kept, tested, to compare the two.
_forced_mode = None


@dataclass(frozen=True)
class Plan:
    """How one call is carried out; ``work_elements`` is the whole workspace."""

    path: int
    mode: int
    threads: int             # OpenMP threads the kernel runs
    rows: int                # output positions per chunk
    groups_per_task: int     # ROWS mode: groups per task
    oc_blocks: int           # COLS mode: blocks of each group's output channels
    cols_per_block: int      # reduction columns per panel block (UNFOLD)
    work_per_thread: int     # panel elements per thread (ROWS) or shared (COLS, BLAS)
    work_elements: int
    chunks: int
    reduction_blocks: int
    tap_slabs: int = 1       # COLS mode: GEMMs per slab of the first axis' taps (1: one)

    def describe(self, itemsize: int) -> dict[str, Any]:
        # by hand: dataclasses.asdict deep-copies, and this runs on every call
        return {"path": PATH_NAMES[self.path], "mode": MODE_NAMES[self.mode],
                "threads": self.threads, "rows": self.rows,
                "groups_per_task": self.groups_per_task, "oc_blocks": self.oc_blocks,
                "cols_per_block": self.cols_per_block, "work_per_thread": self.work_per_thread,
                "work_elements": self.work_elements, "chunks": self.chunks,
                "reduction_blocks": self.reduction_blocks, "tap_slabs": self.tap_slabs,
                "workspace_bytes": self.work_elements * itemsize}


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _chunk_rows(total: int, wanted: int, most: int, parts: int) -> int:
    """Rows per chunk near ``wanted``, at most ``most``, in a chunk count divisible by parts.

    Larger chunks are preferred to more of them: a GEMM call loses speed below
    MIN_GEMM_ROWS rows.
    """
    most = max(1, most)
    chunks = max(parts, total // max(1, wanted) // parts * parts)
    while _ceil_div(total, chunks) > most:
        chunks += parts
    return max(1, min(most, _ceil_div(total, chunks)))


def _panel_shape(width: int, budget: int, rows_wanted: int):
    """(rows, columns per block) of a panel of at most ``budget`` elements, rows ``width`` wide.

    Whole rows when at least min(rows_wanted, REDUCTION_ROWS) of them fit; otherwise the
    row is split into column blocks (the GEMM then accumulates over the blocks).
    """
    full_rows = budget // width
    if full_rows >= min(rows_wanted, REDUCTION_ROWS):
        return max(1, min(full_rows, rows_wanted)), width
    rows = max(1, min(rows_wanted, REDUCTION_ROWS, budget))
    return rows, max(1, min(width, budget // rows))


@lru_cache(maxsize=1)
def _reference_parallelism() -> int:
    return available_cores()


def plan(problem, threads: int, limit_bytes: int | None = None,
         cores: int | None = None, small_gemm: bool = True) -> Plan:
    """Choose path, thread mode and chunk sizes so that the panels fit ``limit_bytes``.

    The work grid (chunks, group blocks, output-channel blocks, reduction blocks) is
    sized for ``cores`` (default: the cores this process may use), not for ``threads``:
    every GEMM call then has the same shape whatever the thread count, so the result is
    the same bit for bit. ``threads`` only says how many threads share the grid.
    ``small_gemm=False`` leaves out the SMALL_GEMM_MNK row cut (the cost model's view).
    """
    limit_bytes = _workspace_limit if limit_bytes is None else limit_bytes
    cores = _reference_parallelism() if cores is None else max(1, int(cores))
    return _plan(problem, max(1, int(threads)), limit_bytes, cores, _forced_mode,
                 small_gemm)


def _small_gemm_rows(problem, depth: int) -> int:
    """Most rows per GEMM call that keep OpenBLAS's unpacked sgemm (SMALL_GEMM_MNK), or 0
    when fewer than SMALL_GEMM_MIN_ROWS would (the packed GEMM is then as fast or faster)."""
    if problem.dtype != np.dtype(np.float32):
        return 0  # measured for sgemm only
    rows = SMALL_GEMM_MNK // max(1, problem.out_channels_per_group * depth)
    return rows if rows >= SMALL_GEMM_MIN_ROWS else 0


@lru_cache(maxsize=256)
def _plan(problem, threads: int, limit_bytes: int, cores: int, forced_mode,
          small_gemm: bool = True) -> Plan:
    # cached: a network calls the same layers over and over, and planning is pure Python
    itemsize = problem.dtype.itemsize
    limit = max(1, limit_bytes // itemsize)
    m_total = problem.batch * problem.output_size
    kt = problem.kernel_size
    icg, ocg, groups = (problem.in_channels_per_group, problem.out_channels_per_group,
                        problem.groups)
    width = kt * icg

    if kt == 1 and all(s == 1 for s in problem.strides) and \
            not any(problem.pads_begin) and not any(problem.pads_end):
        path = PATH_DIRECT
    elif kt == 1 and problem.in_channels * min(m_total, REDUCTION_ROWS) <= limit // cores:
        path = PATH_GATHER
    else:
        path = PATH_UNFOLD

    # Too few rows to give every core a GEMM of MIN_GEMM_ROWS rows (MIN_PANEL_GEMM_ROWS
    # where the GEMM reads a panel): split output channels (one shared panel), or failing
    # that groups, rather than rows.
    few_rows = m_total < cores * (MIN_GEMM_ROWS if path == PATH_DIRECT else MIN_PANEL_GEMM_ROWS)
    if forced_mode is not None:
        mode = {v: k for k, v in MODE_NAMES.items()}[forced_mode]
    elif cores > 1 and few_rows and ocg >= 2 * OC_BLOCK_MIN:
        mode = MODE_COLS
    else:
        mode = MODE_ROWS

    groups_per_task, oc_blocks, cols, per_thread = groups, 1, width, 0
    if mode == MODE_ROWS:
        if few_rows and groups > 1:
            groups_per_task = _ceil_div(groups, min(groups, cores * 4))
        row_width = {PATH_DIRECT: 0, PATH_GATHER: groups_per_task * icg,
                     PATH_UNFOLD: width}[path]
        parts = 1 if few_rows else cores
        # one GEMM's depth: a group's channels (1x1) or its whole panel row
        small = _small_gemm_rows(problem, icg if path != PATH_UNFOLD else width) \
            if small_gemm else 0
        if path == PATH_DIRECT:
            wanted = max(MIN_GEMM_ROWS, m_total // (cores * 4))
            rows = _chunk_rows(m_total, min(wanted, small or wanted), small or m_total, parts)
        else:
            budget = max(1, limit // cores)
            wanted = max(MIN_GEMM_ROWS, CHUNK_TARGET_BYTES // (row_width * itemsize))
            rows, cols = _panel_shape(row_width, budget, min(wanted, m_total))
            if cols == row_width:
                most = budget // row_width
                if small:
                    rows, most = min(rows, small), min(most, small)
                rows = _chunk_rows(m_total, rows, most, parts)
            per_thread = rows * cols
            if path == PATH_GATHER:
                cols = width
    else:
        if mode == MODE_COLS:
            oc_blocks = min(cores, _ceil_div(ocg, OC_BLOCK_MIN))
        if path == PATH_DIRECT:
            rows = m_total
        else:
            row_width = problem.in_channels if path == PATH_GATHER else width
            wanted = m_total if mode == MODE_COLS else \
                max(MIN_GEMM_ROWS * cores, CHUNK_TARGET_BYTES * cores // (row_width * itemsize))
            rows, cols = _panel_shape(row_width, limit, min(m_total, wanted))
            per_thread = rows * cols
            if path == PATH_GATHER:
                cols = width
    rows, cols = min(rows, BLAS_INT_MAX), min(cols, BLAS_INT_MAX)
    chunks = _ceil_div(m_total, rows)
    if mode == MODE_ROWS:
        tasks = chunks * _ceil_div(groups, groups_per_task)
        # one panel per thread: no more threads than tasks, nor than the workspace holds
        threads = min(threads, tasks, limit // per_thread if per_thread else threads)
        work = per_thread * threads
    else:
        work = per_thread
    slabs = 1
    if (mode == MODE_COLS and path == PATH_UNFOLD and cols == width
            and (problem.batch == 1 or problem.output_size % rows == 0)):
        saving = padded_row_fraction(problem)
        if saving > 0 and saving >= TAP_SLAB_MIN_SAVING:
            slabs = problem.kernel_shape[0]
    return Plan(path=path, mode=mode, threads=max(1, threads), rows=rows,
                groups_per_task=groups_per_task, oc_blocks=oc_blocks, cols_per_block=cols,
                work_per_thread=per_thread, work_elements=work, chunks=chunks,
                reduction_blocks=_ceil_div(width, cols), tap_slabs=slabs)


def padded_row_fraction(problem) -> float:
    """The share of the panel's (row, first-axis tap) pairs whose tap reads the padding:
    the GEMM work that tap slabs (Plan.tap_slabs) leave out."""
    k0, d0 = problem.kernel_shape[0], problem.dilations[0]
    s0, p0 = problem.strides[0], problem.pads_begin[0]
    i0, o0 = problem.input_shape[0], problem.output_shape[0]
    inside = sum(1 for slab in range(k0) for o in range(o0) if 0 <= o * s0 - p0 + slab * d0 < i0)
    return 1.0 - inside / (k0 * o0)


# --------------------------------------------------------------------------- BLAS threads

_blas_libraries = None
# The thread count of the kernel's own BLAS read straight from the library, when the
# controllers are exactly that library: the check runs on every call, and through
# threadpoolctl it cost about a microsecond.
_own_blas_threads = None


def _blas_controllers():
    """The controllers of the BLAS libraries the kernel may call (the library at
    ``gemm_library["path"]`` when there is one: :func:`convlab.runtime.threads.blas_libraries`),
    picked once, after the kernel has loaded its BLAS."""
    global _blas_libraries, _own_blas_threads
    if _blas_libraries is None:
        _kernel()
        path = gemm_library.get("path")
        libraries = blas_libraries(path)
        own = [lib for lib in libraries
               if path is not None and os.path.realpath(lib.filepath) == path]
        _own_blas_threads = blas.thread_count_reader() if own == libraries else None
        _blas_libraries = libraries
    return _blas_libraries


def _set_blas_threads(count: int):
    """Set every controlled BLAS to ``count`` threads; returns what to restore, and whether
    the count took effect (threadpoolctl lets only one Python thread steer a pthreads
    OpenBLAS; another thread's request is silently dropped)."""
    libraries = _blas_controllers()
    if _own_blas_threads is not None and _own_blas_threads() == count:
        return (), True
    changed, effective = [], True
    for lib in libraries:
        current = lib.get_num_threads()
        if current is not None and current != count:
            lib.set_num_threads(count)
            if lib.get_num_threads() == count:
                changed.append((lib, current))
            else:
                effective = False
    return changed, effective


def _restore_blas_threads(changed) -> None:
    for lib, previous in changed:
        lib.set_num_threads(previous)
        clear = getattr(type(lib), "clear_controlling_thread", None)
        if clear is not None:
            # as threadpool_limits does on exit: let other Python threads steer it again
            clear()


@contextmanager
def blas_threads(count: int) -> Iterator[bool]:
    """The kernel's BLAS at ``count`` threads inside the block (untouched when already so).

    Yields False when the count could not be set (another Python thread controls the
    BLAS); the caller then keeps OpenMP to one thread so that both never run wide.
    """
    changed, effective = _set_blas_threads(count)
    try:
        yield effective
    finally:
        _restore_blas_threads(changed)


# --------------------------------------------------------------------------- registration

last_run: dict[str, Any] = {}
"""What the latest call did: path, mode, chunks, workspace bytes... (for tests, explain)."""

path_counts: Counter = Counter()
"""How many calls took each path since import."""


def _supports(problem):
    if problem.dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
        return f"dtype {problem.dtype}: im2col computes float32 and float64"
    if problem.in_channels > BLAS_INT_MAX or problem.out_channels > BLAS_INT_MAX:
        return (f"IC={problem.in_channels}, OC={problem.out_channels}: BLAS leading "
                f"dimensions are 32-bit, expected channels below 2**31")
    return None


# A GEMM dimension d (output channels per group, reduction depth, rows per call) runs at
# d / (d + GEMM_HALF_RATE_DIM) of the full rate: skinny products waste the microkernel.
# Read off single-thread OpenBLAS sgemm sweeps over ResNet-50 layer shapes at batch 1;
# bench/fit_cost_model.py fits the rate itself and keeps this shape. A sweep refitting on
# the same timings each time
# (bench/results/gemm_half_rate_2026-11-25.txt), in-sample regret over all 385 timings / ResNet-50
# at batch 8: 6: 1.025 / 1.020, 12: 1.023 / 1.003, 16: 1.020 / 1.014, 24: 1.021 / 1.017,
# 48: 1.035 / 1.069. 24 and 16 had auto run im2col on 1x1 layers at batch 8 where direct
# was 6-17% faster (res4a_branch2c, res5a_branch2c, res5b_branch2a); 12 did not.
#
# The depth's share is a cost term of its own rather than a factor: work / (d / (d + h)) is
# work + h * work / d, so ``gemm_output_passes`` (work / d: each pass of a GEMM over its
# output block) with the constant h x gemm_flops's is the same estimate, and a fit finds
# each machine's h. The avx2 and baseline sets carry 12 x gemm_flops's constant (the
# avx512 set's two-thread constants, refitted with the term, 15.7); on an AVX2-only
# Zen 3, OpenBLAS's sgemm reaches half its deep rate at depth 23-32, and calibrations
# there fit h = 14-22 (bench/results/im2col_output_passes_2026-11-28_zen3-avx2.txt).
GEMM_HALF_RATE_DIM = 12.0


def _efficiency(d: float) -> float:
    return d / (d + GEMM_HALF_RATE_DIM)


def cost_terms(problem, threads) -> dict:
    """The work of one run, as :mod:`~convlab.dispatch.cost_model` terms, and their plan."""
    # The fitted constants predate the small-GEMM row cut, and its chunks make many more
    # calls that pack nothing: the terms are those of the packed plan, the slower one
    # wherever it was measured (SMALL_GEMM_MNK), until the constants are refitted with
    # the cut.
    p = plan(problem, threads, small_gemm=False)
    itemsize = problem.dtype.itemsize
    m_total = problem.batch * problem.output_size
    width = problem.kernel_size * problem.in_channels_per_group
    ocg = problem.out_channels_per_group
    if p.mode == MODE_COLS:
        ocg = max(1, ocg // p.oc_blocks)
    depth = min(width, p.cols_per_block)
    # the depth's share of the efficiency is gemm_output_passes (see GEMM_HALF_RATE_DIM)
    efficiency = _efficiency(ocg) * _efficiency(min(p.rows, m_total))
    parallel = min(p.threads, p.chunks * _ceil_div(problem.groups, p.groups_per_task)
                   if p.mode == MODE_ROWS else p.threads)
    if p.path == PATH_DIRECT:
        unfold_bytes = 0
    elif p.path == PATH_GATHER:
        unfold_bytes = m_total * problem.in_channels * itemsize
    else:
        unfold_bytes = m_total * width * problem.groups * itemsize
    calls = p.chunks * problem.groups * p.reduction_blocks * p.oc_blocks * p.tap_slabs
    call_depth = depth // p.tap_slabs
    # Calls within SMALL_GEMM_MNK (which OpenBLAS runs unpacked) have a fixed cost of
    # their own, and another again where each first fills a panel: 100 groups of a
    # 15 x 4 x 4 GEMM on the input as it lies take 22 us in all (the 1d suite's 1x1
    # 1d_gconv_channel-block-4), where a constant for every call put them at 440 us.
    small = min(p.rows, m_total) * ocg * call_depth <= SMALL_GEMM_MNK
    in_place = small and p.path == PATH_DIRECT
    # BLAS packs its B operand (the weights block) on every call: costly when few rows
    # share it (res5*, short 1-D sequences); tap slabs pack a slab each. Small calls,
    # which read it in place, are counted too: every shipped set was fitted so.
    packed_bytes = calls * call_depth * ocg * itemsize
    multiplied = problem.flops * (1.0 - padded_row_fraction(problem) if p.tap_slabs > 1
                                  else 1.0)
    # float64 GEMM does half the multiply-adds per vector instruction
    gemm_flops = multiplied * itemsize / 4 / (efficiency * parallel)
    terms = {**cost_model.FIXED_TERMS,
             "gemm_flops": gemm_flops,
             "gemm_output_passes": gemm_flops / depth,
             "unfold_bytes": unfold_bytes / p.threads,
             "gemm_calls": 0.0 if small else calls / p.threads,
             "small_gemm_calls": calls / p.threads if small and not in_place else 0.0,
             "small_in_place_gemm_calls": calls / p.threads if in_place else 0.0,
             "packed_weight_bytes": packed_bytes / p.threads}
    # the rates below come on top of the GEMM's, and were fitted to its work with the
    # depth's share in it
    full_gemm_flops = gemm_flops / _efficiency(depth)
    # A strided 1x1's GEMM on its gathered rows runs at its own rate: with the shared
    # constant the model put it 13-20% faster than measured at batch 8 (res3a_branch1,
    # res4a_branch1, res5a_branch1: 6.9 ms estimated, 8.4-8.6 ms measured;
    # bench/results/cost_timings_mb8_2026-11-25_86fe200_run*.csv), so auto chose it over
    # direct, which was 10% faster there, as on most gathered layers at batch 1.
    terms["gather_gemm_flops"] = full_gemm_flops if p.path == PATH_GATHER else 0.0
    # One output channel per group makes each GEMM a matrix-vector product, which runs
    # at its own, memory-bound rate: depthwise 3x3 on 64 channels of 56x56 takes 4.0 ms
    # where the GEMM rate puts it at 1.3 ms (Intel Xeon family 6 model 207, 2 threads,
    # bench/results/design_timings_avx512_2026-11-27_xeon-emr_fft16.csv).
    terms["gemv_flops"] = full_gemm_flops if ocg == 1 else 0.0
    # the unpacked kernel's own rate, on top of the packed one's (the terms stay those of
    # the packed plan: docs/selection.md, "Selection margins")
    terms["small_gemm_flops"] = full_gemm_flops if small and ocg > 1 else 0.0
    details = {"path": PATH_NAMES[p.path], "mode": MODE_NAMES[p.mode], "threads": p.threads,
               "gemm_efficiency": round(efficiency * _efficiency(depth), 3),
               "gemm_calls": calls,
               "workspace_mb": round(p.work_elements * itemsize / 2**20, 2)}
    return terms, details


def _cost(problem, threads):
    terms, details = cost_terms(problem, threads)
    return cost_model.estimate("im2col", threads, terms, details)


def _fuses_post_ops(problem, seeds_sum) -> bool:
    # every path finishes disjoint blocks of dst after their last GEMM, and can start a
    # block's first GEMM from its prior contents (_im2col.pyx)
    return True


def _bind(problem, threads):
    """``run_im2col`` on ``problem`` at ``threads`` with its launch looked up once (while
    the workspace limit and forced mode stay those it was planned under)."""
    limit, forced = _workspace_limit, _forced_mode
    launch = _launch(problem, threads, limit, forced)

    def run(src, weights, bias, dst):
        if _workspace_limit == limit and _forced_mode == forced:
            _run(launch, problem.dtype, src, weights, bias, dst, None)
        else:
            run_im2col(problem, src, weights, bias, dst, threads)

    return run


@register_algorithm("im2col", supports=_supports, cost=_cost, fuse_post_ops=_fuses_post_ops,
                    bind=_bind,
                    description="unfold into column panels (bounded workspace) x BLAS GEMM; "
                                "1x1 as plain GEMM; any rank, all attributes")
def run_im2col(problem, src, weights, bias, dst, threads, epilogue=None):
    _run(_launch(problem, threads, _workspace_limit, _forced_mode), problem.dtype, src,
         weights, bias, dst, epilogue)


_reported: dict | None = None  # the launch info last_run holds


def _run(launch, dtype, src, weights, bias, dst, epilogue) -> None:
    global _reported
    p = launch.plan
    work = thread_workspace(p.work_elements, dtype)
    changed, effective = _set_blas_threads(p.threads if p.mode == MODE_BLAS else 1)
    omp_threads = p.threads if effective or p.mode == MODE_BLAS else 1
    try:
        launch.kernel(src.reshape(-1), weights.reshape(-1), bias, dst.reshape(-1), work,
                      *launch.arguments, omp_threads, epilogue, p.tap_slabs)
    finally:
        _restore_blas_threads(changed)
    if _reported is not launch.info or not last_run:  # repeated calls skip the refill
        last_run.clear()
        last_run.update(launch.info)
        _reported = launch.info
    path_counts[launch.info["path"]] += 1


def forget_plans() -> None:
    """Drop the cached plans (after changing a planning constant, in experiments and tests)."""
    _plan.cache_clear()
    _launch.cache_clear()


@dataclass(frozen=True)
class _Launch:
    plan: Plan
    kernel: Callable  # conv_im2col for the problem's dtype
    arguments: tuple  # the kernel's geometry and plan arguments, in its order
    info: dict        # what last_run reports


@lru_cache(maxsize=256)
def _launch(problem, threads: int, limit_bytes: int, forced_mode) -> _Launch:
    # once per layer: a small layer's kernel takes a few microseconds, and gathering these
    # two dozen values took about one more
    p = plan(problem, threads, limit_bytes)  # which reads the forced mode itself
    arguments = (problem.input_shape, problem.output_shape, problem.kernel_shape,
                 problem.strides, problem.dilations, problem.pads_begin, problem.batch,
                 problem.in_channels, problem.out_channels, problem.groups, p.path, p.mode,
                 p.rows, p.groups_per_task, p.oc_blocks, p.cols_per_block, p.work_per_thread)
    return _Launch(p, specialized(_kernel().conv_im2col, problem.dtype), arguments,
                   p.describe(problem.dtype.itemsize))


def unfold(problem, src, group: int = 0, rows=None, cols=None) -> np.ndarray:
    """The column panel of ``group`` (or a block of it), as the kernel builds it.

    ``src`` is canonical (N, I..., IC); ``rows``/``cols`` are slices of the panel's
    (N * prod(O), prod(K) * IC/G) extent. For teaching and tests: the convolution itself
    never holds the whole panel.
    """
    m_total = problem.batch * problem.output_size
    width = problem.kernel_size * problem.in_channels_per_group
    r0, r1, _ = (rows or slice(None)).indices(m_total)
    c0, c1, _ = (cols or slice(None)).indices(width)
    src = np.ascontiguousarray(src, dtype=problem.dtype)
    out = np.empty((max(0, r1 - r0), max(0, c1 - c0)), dtype=problem.dtype)
    _kernel().unfold_panel(src.reshape(-1), out, problem.input_shape, problem.output_shape,
                         problem.kernel_shape, problem.strides, problem.dilations,
                         problem.pads_begin, problem.batch, problem.in_channels,
                         problem.groups, group, r0, c0)
    return out
