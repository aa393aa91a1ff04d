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
spatial sizes. A full panel of VGG-19 conv1_2 at batch 1 would take 110 MiB.

Threads: OpenMP in the kernel and BLAS threads are never both at full width. The
kernel's OpenMP threads each run their own row chunks with single-threaded BLAS calls
(``rows`` mode), or, when there are too few rows to share, all threads unfold one
panel and then split the GEMM by output channels (``cols`` mode). The BLAS thread count
is set to 1 for the call through threadpoolctl, and restored afterwards.
"""
from __future__ import annotations

import math
import os
from collections import Counter
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any, Dict, Iterator, Optional

import numpy as np

from convlab.kernels import _im2col
from convlab.registry import Estimate, register_algorithm
from convlab.threads import available_cores

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


# --------------------------------------------------------------------------- planning

# Measured on the project machine (2 cores, AVX-512, OpenBLAS SkylakeX), with
# /tmp/im2col_work/sweep_chunk.py (see the [im2col] report): a panel per thread of about
# this size stays in the 2 MiB L2 between the unfold and the GEMM.
CHUNK_TARGET_BYTES = 1 * 2**20
# Below this many rows per thread, splitting output channels beats splitting rows.
MIN_ROWS_PER_THREAD = 64
# Rows per chunk when a row is too wide for the workspace and the reduction is split.
REDUCTION_ROWS = 64
# COLS mode splits output channels in blocks of at least this many (whole AVX-512 vectors).
OC_BLOCK_MIN = 16
# sgemm/dgemm take 32-bit int sizes and leading dimensions.
BLAS_INT_MAX = 2**31 - 1

PATH_NAMES = {_im2col.PATH_DIRECT: "1x1-direct", _im2col.PATH_GATHER: "1x1-gather",
              _im2col.PATH_UNFOLD: "unfold"}
MODE_NAMES = {_im2col.MODE_ROWS: "rows", _im2col.MODE_COLS: "cols", _im2col.MODE_BLAS: "blas"}

# Overrides for experiments and tests: force a thread mode ("rows", "cols", "blas").
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

    def describe(self, itemsize: int) -> Dict[str, Any]:
        info = asdict(self)
        info["path"] = PATH_NAMES[self.path]
        info["mode"] = MODE_NAMES[self.mode]
        info["workspace_bytes"] = self.work_elements * itemsize
        return info


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _balanced_rows(total: int, rows_cap: int, parts: int) -> int:
    """Rows per chunk <= rows_cap, with a chunk count that is a multiple of ``parts``."""
    chunks = _ceil_div(_ceil_div(total, max(1, rows_cap)), parts) * parts
    return max(1, _ceil_div(total, chunks))


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


def plan(problem, threads: int, limit_bytes: Optional[int] = None,
         cores: Optional[int] = None) -> Plan:
    """Choose path, thread mode and chunk sizes so that the panels fit ``limit_bytes``.

    The work grid (chunks, group blocks, output-channel blocks, reduction blocks) is
    sized for ``cores`` (default: the cores this process may use), not for ``threads``:
    every GEMM call then has the same shape whatever the thread count, so the result is
    the same bit for bit. ``threads`` only says how many threads share the grid.
    """
    limit_bytes = _workspace_limit if limit_bytes is None else limit_bytes
    cores = _reference_parallelism() if cores is None else max(1, int(cores))
    itemsize = problem.dtype.itemsize
    limit = max(1, limit_bytes // itemsize)
    m_total = problem.batch * problem.output_size
    kt = problem.kernel_size
    icg, ocg, groups = (problem.in_channels_per_group, problem.out_channels_per_group,
                        problem.groups)
    width = kt * icg
    target = max(1, CHUNK_TARGET_BYTES // itemsize)

    if kt == 1 and all(s == 1 for s in problem.strides) and \
            not any(problem.pads_begin) and not any(problem.pads_end):
        path = _im2col.PATH_DIRECT
    elif kt == 1 and problem.in_channels * min(m_total, REDUCTION_ROWS) <= limit // cores:
        path = _im2col.PATH_GATHER
    else:
        path = _im2col.PATH_UNFOLD

    few_rows = m_total < cores * MIN_ROWS_PER_THREAD
    if _forced_mode is not None:
        mode = {v: k for k, v in MODE_NAMES.items()}[_forced_mode]
    elif cores > 1 and few_rows and ocg >= 2 * OC_BLOCK_MIN:
        mode = _im2col.MODE_COLS
    else:
        mode = _im2col.MODE_ROWS

    groups_per_task, oc_blocks, cols, per_thread = groups, 1, width, 0
    if mode == _im2col.MODE_ROWS:
        if few_rows and groups > 1:
            # too few rows to share among the cores: share the groups instead
            groups_per_task = _ceil_div(groups, min(groups, cores * 4))
        if path == _im2col.PATH_DIRECT:
            rows = _balanced_rows(m_total, max(1, m_total // (cores * 4)), cores) \
                if cores > 1 else m_total
        else:
            row_width = groups_per_task * icg if path == _im2col.PATH_GATHER else width
            wanted = max(1, min(_ceil_div(m_total, cores),
                                max(target // row_width, REDUCTION_ROWS)))
            rows, cols = _panel_shape(row_width, max(1, min(limit // cores, target)), wanted)
            if path == _im2col.PATH_GATHER:
                cols = width
            if cores > 1 and not few_rows:
                rows = _balanced_rows(m_total, rows, cores)
            per_thread = rows * (row_width if path == _im2col.PATH_GATHER else cols)
    else:
        if mode == _im2col.MODE_COLS:
            oc_blocks = min(cores, _ceil_div(ocg, OC_BLOCK_MIN))
        if path == _im2col.PATH_DIRECT:
            rows = m_total
        else:
            row_width = problem.in_channels if path == _im2col.PATH_GATHER else width
            wanted = m_total if mode == _im2col.MODE_COLS else \
                max(REDUCTION_ROWS, target * cores // row_width)
            rows, cols = _panel_shape(row_width, limit, min(m_total, wanted))
            if path == _im2col.PATH_GATHER:
                cols = width
            per_thread = rows * (row_width if path == _im2col.PATH_GATHER else cols)
    rows = min(rows, BLAS_INT_MAX)
    chunks = _ceil_div(m_total, rows)
    threads = max(1, int(threads))
    if mode == _im2col.MODE_ROWS:
        tasks = chunks * _ceil_div(groups, groups_per_task)
        # one panel per thread: no more threads than tasks, nor than the workspace holds
        threads = min(threads, tasks, limit // per_thread if per_thread else threads)
        work = per_thread * threads
    else:
        work = per_thread
    return Plan(path=path, mode=mode, threads=max(1, threads), rows=rows,
                groups_per_task=groups_per_task, oc_blocks=oc_blocks, cols_per_block=cols,
                work_per_thread=per_thread, work_elements=work, chunks=chunks,
                reduction_blocks=_ceil_div(width, cols))


# --------------------------------------------------------------------------- BLAS threads

_blas_libraries = None


def _blas_controllers():
    """threadpoolctl's BLAS controllers, found once (after SciPy's BLAS has loaded).

    A ThreadpoolController scans every loaded library (milliseconds); setting a count on
    the controllers it found is one C call each (about a microsecond), so the scan is
    done once and reused.
    """
    global _blas_libraries
    if _blas_libraries is None:
        from threadpoolctl import ThreadpoolController

        _blas_libraries = [lib for lib in ThreadpoolController().lib_controllers
                           if lib.user_api == "blas"]
    return _blas_libraries


@contextmanager
def blas_threads(count: int) -> Iterator[None]:
    """Every loaded BLAS at ``count`` threads inside the block; untouched when already so."""
    changed = []
    for lib in _blas_controllers():
        current = lib.get_num_threads()
        if current != count:
            lib.set_num_threads(count)
            changed.append((lib, current))
    try:
        yield
    finally:
        for lib, previous in changed:
            lib.set_num_threads(previous)


# --------------------------------------------------------------------------- registration

INT32_GUARD = BLAS_INT_MAX

last_run: Dict[str, Any] = {}
"""What the latest call did: path, mode, chunks, workspace bytes... (for tests, explain)."""

path_counts: Counter = Counter()
"""How many calls took each path since import."""


def _supports(problem):
    if problem.dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
        return f"dtype {problem.dtype}: im2col computes float32 and float64"
    if problem.in_channels > INT32_GUARD or problem.out_channels > INT32_GUARD:
        return (f"IC={problem.in_channels}, OC={problem.out_channels}: BLAS leading "
                f"dimensions are 32-bit, expected channels below 2**31")
    return None


# Provisional cost constants, to be fitted in [selection] from bench runs; for now set
# from /tmp/im2col_work measurements on the project machine (see the [im2col] report).
# Sustained single-thread sgemm GFLOP/s of OpenBLAS on large, square-ish products.
GEMM_GFLOPS_PER_THREAD = 80.0
# A GEMM dimension d (output channels per group, reduction depth, rows) runs at
# d / (d + GEMM_HALF_RATE_DIM) of the full rate: skinny products waste the microkernel.
GEMM_HALF_RATE_DIM = 24.0
# Bytes per second one thread moves when unfolding (panel write + src read).
UNFOLD_BYTES_PER_SECOND_PER_THREAD = 6e9
# Fixed cost of one BLAS call (argument checks, packing set-up).
GEMM_CALL_SECONDS = 1.5e-6


def _cost(problem, threads):
    p = plan(problem, threads)
    itemsize = problem.dtype.itemsize
    m_total = problem.batch * problem.output_size
    width = problem.kernel_size * problem.in_channels_per_group
    h = GEMM_HALF_RATE_DIM
    ocg = problem.out_channels_per_group
    rows_per_call = min(p.rows, m_total)
    if p.mode == _im2col.MODE_COLS:
        ocg = max(1, ocg // p.threads)
    efficiency = (ocg / (ocg + h)) * (width / (width + h)) * (rows_per_call / (rows_per_call + h))
    rate = GEMM_GFLOPS_PER_THREAD * 1e9 * p.threads * (itemsize and 4 / itemsize) * efficiency
    gemm_seconds = problem.flops / rate
    if p.path == _im2col.PATH_DIRECT:
        unfold_bytes = 0
    elif p.path == _im2col.PATH_GATHER:
        unfold_bytes = 2 * m_total * problem.in_channels * itemsize
    else:
        unfold_bytes = 2 * m_total * width * problem.groups * itemsize
    unfold_seconds = unfold_bytes / (UNFOLD_BYTES_PER_SECOND_PER_THREAD * p.threads)
    calls = p.chunks * problem.groups * p.reduction_blocks
    call_seconds = calls * GEMM_CALL_SECONDS / p.threads
    seconds = gemm_seconds + unfold_seconds + call_seconds
    return Estimate(seconds, {
        "path": PATH_NAMES[p.path], "mode": MODE_NAMES[p.mode], "threads": p.threads,
        "gemm_efficiency": round(efficiency, 3), "gemm_ms": round(gemm_seconds * 1e3, 4),
        "unfold_mb": round(unfold_bytes / 2**20, 2), "unfold_ms": round(unfold_seconds * 1e3, 4),
        "gemm_calls": calls, "workspace_mb": round(p.work_elements * itemsize / 2**20, 2)})


@register_algorithm("im2col", supports=_supports, cost=_cost,
                    description="unfold into column panels (bounded workspace) x BLAS GEMM; "
                                "1x1 as plain GEMM; any rank, all attributes")
def run_im2col(problem, src, weights, bias, dst, threads):
    p = plan(problem, threads)
    work = np.empty(p.work_elements, dtype=problem.dtype)
    blas_count = p.threads if p.mode == _im2col.MODE_BLAS else 1
    with blas_threads(blas_count):
        _im2col.conv_im2col(
            src.reshape(-1), weights.reshape(-1), bias, dst.reshape(-1), work,
            problem.input_shape, problem.output_shape, problem.kernel_shape, problem.strides,
            problem.dilations, problem.pads_begin, problem.batch, problem.in_channels,
            problem.out_channels, problem.groups, p.path, p.mode, p.rows, p.groups_per_task,
            p.oc_blocks, p.cols_per_block, p.work_per_thread, p.threads)
    info = p.describe(problem.dtype.itemsize)
    last_run.clear()
    last_run.update(info)
    path_counts[info["path"]] += 1


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
    _im2col.unfold_panel(src.reshape(-1), out, problem.input_shape, problem.output_shape,
                         problem.kernel_shape, problem.strides, problem.dilations,
                         problem.pads_begin, problem.batch, problem.in_channels,
                         problem.groups, group, r0, c0)
    return out
