"""Decided calls: what a one-shot ``convolve`` decided for an argument signature seen before.

Everything a call decides before it computes (the arguments validated into a problem, the
algorithm chosen) follows from the shapes, dtypes and attributes alone, never from the
data. On a small layer deciding costs more than computing: on a 4-channel 8x8 layer the
kernel takes a few microseconds and the decisions about 15 more. So a call whose
arguments are plain (NumPy arrays; attributes that are None, str, int or tuples of int)
and that needs nothing beyond the kernel (no ``out``, post-ops, 8-bit or half-precision
output stage, "tune") is remembered after it succeeds, and a later call with the same
signature goes straight to the weights' preparation and the kernel.

Only exact builtin types enter a signature: ``True == 1`` and ``2.0 == 2`` hash alike,
yet a bool or float stride must still reach the validation that refuses it. A decision
made under other cost constants, ISA level or registry is not reused.
"""
from __future__ import annotations

import threading
from typing import Any, Callable

import numpy as np

from convlab.dispatch import cost_model
from convlab.dispatch.registry import FORWARD, Algorithm, keep_weights
from convlab.ops import postops
from convlab.ops._signature import signature as signature  # compiled: every call makes one
from convlab.problem import params
from convlab.problem.params import ConvProblem, canonical_src, user_dst_copy
from convlab.runtime import _buffers as buffers

# Signatures remembered at most; the oldest is forgotten first.
MAX_SIGNATURES = 512

# signature -> (problem, algorithm, what it was valid while, weight preparation, runner)
_decisions: dict[tuple, tuple[ConvProblem, Algorithm, tuple, Callable[[np.ndarray], Any],
                              Callable[[np.ndarray, Any, Any], np.ndarray]]] = {}
_lock = threading.Lock()


def _valid_while() -> tuple:
    """What a decision depends on besides its signature: the registry and the constants
    in force (which follow the ISA level)."""
    return FORWARD.changes, cost_model.generation()


def lookup(key: tuple | None) -> tuple[ConvProblem, Algorithm, Callable, Callable] | None:
    """The remembered problem, algorithm, weight preparation and :func:`runner` of
    ``key``, if still valid."""
    if key is None:
        return None
    entry = _decisions.get(key)
    if entry is None or entry[2] != _valid_while():
        return None
    return entry[0], entry[1], entry[3], entry[4]


def weight_preparation(problem: ConvProblem, chosen: Algorithm) -> Callable[[np.ndarray], Any]:
    """How a decided call readies the caller's weights for ``chosen``.

    An algorithm that multiplies the canonical weights as they are (``keep_weights``, as
    im2col does) on one group of XIO weights needs no more than a reshape to (1, K...,
    IC, OC) where the weights are aligned, C-contiguous and of the compute dtype: on a small
    layer the general route (a transpose, a contiguity check, the hook) took about a tenth
    of a decided call. Anything else takes :meth:`Algorithm.prepare`."""
    def general(weights):
        return chosen.prepare(problem, params.aligned(weights), once=True)

    if (chosen.prepare_weights is not keep_weights or problem.groups != 1
            or problem.weights_format != "XIO"):
        return general
    shape = (1, *problem.kernel_shape, problem.in_channels_per_group,
             problem.out_channels_per_group)
    dtype = problem.dtype

    def reshaped(weights):
        flags = weights.flags
        if flags.c_contiguous and flags.aligned and weights.dtype == dtype:
            return weights.reshape(shape)
        return general(weights)

    return reshaped


def remember(key: tuple | None, problem: ConvProblem, chosen: Algorithm,
             n_threads: int) -> None:
    """Keep the decision for ``key`` (a call with this signature just succeeded)."""
    if key is None:
        return
    with _lock:
        while len(_decisions) >= MAX_SIGNATURES:
            del _decisions[next(iter(_decisions))]
        _decisions[key] = (problem, chosen, _valid_while(), weight_preparation(problem, chosen),
                           runner(problem, chosen, n_threads))


def forget() -> None:
    """Drop every remembered decision."""
    with _lock:
        _decisions.clear()


def kernel_only(problem: ConvProblem, ops, out) -> bool:
    """Whether nothing follows the kernel: no ``out``, post-ops or output stage, N > 0
    (the case a :func:`runner` runs)."""
    return (out is None and not ops and problem.batch > 0
            and not postops.needs_stage(problem, ops, None))


def runner(problem: ConvProblem, chosen: Algorithm,
           n_threads: int) -> Callable[[np.ndarray, Any, Any], np.ndarray]:
    """The kernel alone into a new dst, as a function of (src, prepared weights, canonical
    bias), for a case with nothing after the kernel (no ``out``, post-ops or output stage,
    N > 0): what decided one-shot calls and plans run.

    Everything that follows from the problem is settled here, once: the algorithm's bound
    run, how dst is allocated, and, for channels-last src that needs no materialising,
    that a C-contiguous, aligned src of the compute dtype goes to the kernel as it is. On a
    layer of a few kflop these per-call steps together took longer than the kernel."""
    run = chosen.bound(problem, n_threads)
    shape, dtype = problem.canonical_dst_shape, problem.dtype
    if problem.data_format == "NCX" or problem.source_shape is not None:
        def general(src, prepared, bias):
            if problem.data_format == "NCX":  # copied to NCX before the call returns
                dst = buffers.staging("dst", shape, dtype)
            else:
                dst = buffers.empty(shape, dtype)
            run(canonical_src(src, problem, n_threads, staged=True), prepared, bias, dst)
            return user_dst_copy(dst, problem, n_threads)

        return general

    allocate = buffers.empty_allocator(shape, dtype)

    def channels_last(src, prepared, bias):
        flags = src.flags
        if not (flags.c_contiguous and flags.aligned and src.dtype == dtype):
            src = canonical_src(src, problem, n_threads, staged=True)
        dst = allocate()
        run(src, prepared, bias, dst)
        return dst

    return channels_last
