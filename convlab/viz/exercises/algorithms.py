"""Exercises on the algorithms: im2col's column matrix, Winograd's multiplications and
the automatic choice (notebooks 05 to 07).

The right answers come from the strategies themselves: the column matrix from
:func:`convlab.viz.im2col.column_matrix` and :func:`convlab.viz.im2col.panel_cost`, the
Winograd counts from :mod:`convlab.strategies.winograd` and the transforms it multiplies
by, the contenders from :func:`convlab.explain`.
"""
from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np

import convlab
from convlab import winograd_transforms
from convlab.strategies import fft, winograd
from convlab.viz.exercises.verdict import (
    Verdict,
    checker,
    listed,
    name_set,
    whole_number,
    whole_numbers,
)
from convlab.viz.im2col import column_matrix, panel_cost

# --------------------------------------------------------------------------- im2col

@checker
def check_column_shape(answer, *, src_shape: tuple[int, ...], kernel_shape: tuple[int, ...],
                       groups: int = 1, **attributes) -> Verdict:
    """Exercise: the shape (rows, columns) of one group's column matrix for an NXC src
    ``(N, spatial..., IC)``, as im2col unfolds it."""
    matrix = column_matrix(np.zeros(src_shape, np.float32), kernel_shape, groups=groups,
                           **attributes)
    expected = tuple(matrix.panel.shape)
    problem = matrix.problem
    got = whole_numbers(answer, 2)
    reason = (f"one row per output (N * prod(O) = {problem.batch} * "
              f"{math.prod(problem.output_shape)}, O = {tuple(problem.output_shape)}), one "
              f"column per tap and input channel of the group (prod(K) * IC/G = "
              f"{math.prod(problem.kernel_shape)} * {problem.in_channels_per_group})")
    if got == expected:
        return Verdict(True, f"{expected}: {reason}")
    return Verdict(False, f"{expected}, not {got}: {reason}")


@checker
def check_panel_bytes(answer, *, src_shape: tuple[int, ...], kernel_shape: tuple[int, ...],
                      out_channels: int, dtype=np.float32, **attributes) -> Verdict:
    """Exercise: the bytes of the whole (unchunked) column matrix of a layer, all groups,
    as :func:`convlab.viz.im2col.panel_cost` counts them."""
    in_channels = src_shape[-1]
    groups = attributes.get("groups", 1)
    problem = convlab.make_problem(src_shape, dtype, (*kernel_shape, in_channels // groups,
                                                      out_channels), dtype, **attributes)
    cost = panel_cost(problem, limit_bytes=2 ** 40)
    expected = cost.panel_bytes
    got = whole_number(answer)
    item = problem.dtype.itemsize
    elements = problem.batch * problem.output_size * problem.kernel_size * problem.in_channels
    reason = (f"N * prod(O) * prod(K) * IC = {problem.batch} * {problem.output_size} * "
              f"{problem.kernel_size} * {problem.in_channels} = {elements} elements of "
              f"{item} bytes = {expected / 2 ** 20:.2f} MiB, {cost.blow_up:.1f} times the "
              f"src")
    if expected == 0:
        reason = "this layer takes im2col's 1x1-direct path, which multiplies src as it lies"
    if got == expected:
        return Verdict(True, f"{expected} bytes: {reason}")
    hint = ""
    if got == elements:
        hint = f"; that is the element count: each element takes {item} bytes"
    return Verdict(False, f"{expected} bytes, not {got}: {reason}{hint}")


# --------------------------------------------------------------------------- Winograd

def _transform(m: int):
    if m not in winograd_transforms.TRANSFORMS:
        raise ValueError(f"m={m!r} has no Winograd transform; expected one of "
                         f"{sorted(winograd_transforms.TRANSFORMS)}")
    return winograd_transforms.TRANSFORMS[m]


@checker
def check_winograd_products(answer, *, m: int, rank: int = 2) -> Verdict:
    """Exercise: element-wise products per output tile and (input, output) channel pair of
    F(m^rank, 3^rank): the number of positions of the transformed tile."""
    transform = _transform(m)
    # the input transform Bt is alpha x alpha: it maps an alpha-wide tile to alpha positions
    alpha = transform.arrays(np.float64)[2].shape[0]
    expected = winograd.positions(m, rank)
    if expected != alpha ** rank:
        raise RuntimeError(f"winograd.positions({m}, {rank}) = {expected} disagrees with the "
                           f"transform's {alpha}^{rank}")
    direct = (m * winograd_transforms.KERNEL) ** rank
    got = whole_number(answer)
    reason = (f"the tile of m + r - 1 = {alpha} inputs per axis is transformed to {alpha}^"
              f"{rank} = {expected} positions, one product each, for {m ** rank} outputs "
              f"(the direct sum needs {direct}: {direct / expected:.2f}x more)")
    if got == expected:
        return Verdict(True, f"{expected} products: {reason}")
    hint = "; that is the direct sum's count" if got == direct else ""
    return Verdict(False, f"{expected} products, not {got}: {reason}{hint}")


@checker
def check_winograd_layer_products(answer, *, output_shape: tuple[int, ...], m: int,
                                  in_channels: int = 1, out_channels: int = 1,
                                  batch: int = 1) -> Verdict:
    """Exercise: element-wise products of a whole 3x3 layer (stride 1) run with F(m, 3):
    tiles (partial tiles at the edges count whole, as the strategy computes them) times
    positions per tile times channel pairs."""
    _transform(m)
    kernel = winograd_transforms.KERNEL
    rank = len(output_shape)
    problem = convlab.make_problem((batch, *(o + kernel - 1 for o in output_shape),
                                    in_channels), np.float32,
                                   (*(kernel,) * rank, in_channels, out_channels), np.float32)
    tiles = winograd.total_tiles(m, problem)
    positions = winograd.positions(m, rank)
    expected = tiles * positions * in_channels * out_channels
    got = whole_number(answer)
    per_axis = " * ".join(f"ceil({o}/{m})" for o in output_shape)
    reason = (f"N * {per_axis} = {tiles} tiles, {positions} products per tile and channel "
              f"pair, {in_channels * out_channels} channel pairs")
    if got == expected:
        return Verdict(True, f"{expected} products: {reason}")
    hint = ""
    exact_tiles = batch * math.prod(o / m for o in output_shape)
    if got == round(exact_tiles * positions * in_channels * out_channels):
        hint = "; the edge tiles are partial but are computed whole"
    return Verdict(False, f"{expected} products, not {got}: {reason}{hint}")


# --------------------------------------------------------------------------- selection

def _explanation(src_shape, weights_shape, precision: str, attributes: dict):
    float32 = np.dtype(np.float32)
    return convlab.explain(SimpleNamespace(shape=tuple(src_shape), dtype=float32),
                           SimpleNamespace(shape=tuple(weights_shape), dtype=float32),
                           precision=precision, **attributes)


def _why_not(candidate) -> str:
    if candidate.reason is not None:
        return f"{candidate.name} cannot run ({candidate.reason})"
    if not candidate.auto:
        if candidate.name == "fft":
            return (f"fft is not an auto contender here (auto weighs it from "
                    f"{fft.AUTO_MIN_KERNEL_TAPS} kernel taps on)")
        return f"{candidate.name} is not an auto contender here"
    return f"{candidate.name} is kept out by precision ({candidate.excluded})"


@checker
def check_contenders(answer, *, src_shape: tuple[int, ...], weights_shape: tuple[int, ...],
                     precision: str = "default", **attributes) -> Verdict:
    """Exercise: the algorithms ``algorithm="auto"`` chooses among for a float32 problem
    (those that can run it, take part in auto and meet ``precision``), from
    :func:`convlab.explain`."""
    explanation = _explanation(src_shape, weights_shape, precision, attributes)
    candidates = {c.name: c for c in explanation.candidates}
    expected = frozenset(name for name, c in candidates.items()
                         if c.reason is None and c.auto and c.excluded is None)
    got = name_set(answer)
    unknown = got - set(candidates)
    if unknown:
        return Verdict(False, f"{listed(unknown)} are not algorithms; convlab has "
                              f"{listed(candidates)}")
    pick = f"auto then takes the lowest estimate: {explanation.choice} on this machine"
    if got == expected:
        return Verdict(True, f"auto chooses among {listed(expected)}; {pick}")
    reasons = [_why_not(candidates[name]) for name in sorted(got - expected)]
    missing = expected - got
    if missing:
        reasons.append(f"{listed(missing)} can run it and take part")
    return Verdict(False, f"auto chooses among {listed(expected)}, not {listed(got)}: "
                          + "; ".join(reasons))


@checker
def check_precision_excluded(answer, *, src_shape: tuple[int, ...],
                             weights_shape: tuple[int, ...], precision: str = "highest",
                             **attributes) -> Verdict:
    """Exercise: the algorithms that could run a float32 problem in auto but that
    ``precision`` keeps out, from :func:`convlab.explain`."""
    explanation = _explanation(src_shape, weights_shape, precision, attributes)
    candidates = {c.name: c for c in explanation.candidates}
    expected = frozenset(name for name, c in candidates.items()
                         if c.reason is None and c.auto and c.excluded is not None)
    got = name_set(answer)
    details = "; ".join(f"{name}: {candidates[name].excluded}" for name in sorted(expected))
    if got == expected:
        return Verdict(True, f"precision={precision!r} keeps out {listed(expected)}"
                             + (f" ({details})" if details else ""))
    reasons = [_why_not(candidates[name]) if name in candidates else f"{name} is not an "
               f"algorithm" for name in sorted(got - expected)]
    for name in sorted(got - expected):
        if name in candidates and candidates[name].reason is None and candidates[name].auto:
            reasons.append(f"{name} meets precision={precision!r}")
    if expected - got:
        reasons.append(f"precision={precision!r} also keeps out {listed(expected - got)}")
    return Verdict(False, f"precision={precision!r} keeps out {listed(expected)}, not "
                          f"{listed(got)}: " + "; ".join(
                              r for r in reasons if "is kept out by precision" not in r))


__all__ = ["check_column_shape", "check_contenders", "check_panel_bytes",
           "check_precision_excluded", "check_winograd_layer_products",
           "check_winograd_products"]
