"""``Convolution``: the plan object (oneDNN's primitive model: create once, execute many).

Validation of the weights and attributes happens once, at construction. Weights are
converted to the canonical layout once per dtype and prepared once per algorithm
(packed for ``direct``, transformed for Winograd, ...). The algorithm choice is made on
the first call for each (src shape, src dtype, thread count) and cached: by default the
plan times the contenders whose estimates are close (:mod:`convlab.dispatch.measure`). A plan may
be called from several Python threads at once: the caches are filled under a lock (a
first call that measures holds it, so concurrent first calls wait for its choice rather
than time alongside it) and the kernels release the GIL.
"""
from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from convlab.dispatch import measure, select
from convlab.dispatch.registry import INT8, Algorithm, get_algorithm
from convlab.ops import _quantized as quantized, postops
from convlab.ops._convolve import check_out, execute, execute_quantized, explain, resolve_for_call
from convlab.ops._decided import kernel_only, runner
from convlab.problem import params
from convlab.problem.params import ConvProblem, IntOrSeq
from convlab.runtime import _buffers as buffers
from convlab.runtime.threads import effective_threads


class Convolution:
    """A convolution with fixed weights, bias and attributes, applied to many inputs.

    Takes the same arguments as :func:`convlab.convolve` except ``src`` and ``out``, plus
    ``choose``. Call it as ``plan(src, out=None)``.

    choose : {"measure", "estimate"}
        How ``algorithm="auto"`` picks, once per src shape, dtype and thread count.
        "measure" (default): on the first call, the two contenders with the lowest
        prepared-weights estimates and those within a fitted margin of the lowest or at
        most ``measure.CHEAP_SECONDS`` (at most
        ``measure.MAX_CONTENDERS``, lowest first, none started after
        ``measure.TIME_LIMIT_SECONDS``) are each prepared and run once untimed, then
        timed in turns of back-to-back runs (``measure.RUNS_PER_TURN``, more while a
        contender warms up) for ``measure.TIMED_RUNS`` rounds (up to
        ``measure.MAX_TIMED_RUNS`` on a close call), and the fastest run
        wins; the call returns that contender's result. Where there is only one
        contender, nothing is timed. That first call costs the contenders' weight preparation
        plus ten runs of each or more (docs/selection.md, "Plans"), and memory for
        their prepared weights until the choice is made (the others' are then dropped).
        "estimate": the lowest estimate, as ``convolve`` picks but with the weights'
        preparation left out (it happens once); nothing is timed. A forced ``algorithm``
        name or "tune" ignores ``choose``.

    Examples
    --------
    >>> plan = convlab.Convolution(weights, bias, pads_begin=1, pads_end=1)
    >>> dst = plan(src)
    """

    def __init__(self, weights, bias=None, *, strides: IntOrSeq = None,
                 pads_begin: IntOrSeq = None, pads_end: IntOrSeq = None,
                 dilations: IntOrSeq = None, auto_pad: str = "none", groups: int = 1,
                 data_format: str = "NXC", weights_format: str = "XIO",
                 data_dilations: IntOrSeq = None, padding_mode: str = "zeros",
                 src_zero_point=None, weights_zero_point=None, output_scale=None,
                 dst_zero_point=None, dst_dtype=None, post_ops: Sequence | None = None,
                 algorithm: str = "auto", threads: int | None = None,
                 precision: str = "default", choose: str = "measure"):
        weights = params.as_array("weights", weights)
        bias = None if bias is None else params.as_array("bias", bias)
        self._attributes = dict(strides=strides, pads_begin=pads_begin, pads_end=pads_end,
                                dilations=dilations, auto_pad=auto_pad, groups=groups,
                                data_format=data_format, weights_format=weights_format,
                                data_dilations=data_dilations, padding_mode=padding_mode,
                                dst_dtype=dst_dtype)
        # Data, checked against each call's src (zero point ranges follow the src dtype,
        # binary post-op tensors broadcast against its dst); syntax is checked now.
        self._quantization = dict(src_zero_point=src_zero_point,
                                  weights_zero_point=weights_zero_point,
                                  output_scale=output_scale, dst_zero_point=dst_zero_point)
        self._post_ops = post_ops
        postops.check_syntax(post_ops)
        # Private copies: the caller may change their arrays after building the plan. The
        # weights start on a cache line, as do the prepared weights that are views of them.
        self._weights = buffers.aligned_copy(weights)
        self._bias = None if bias is None else np.array(bias, copy=True)
        self._weights.flags.writeable = False
        if self._bias is not None:
            self._bias.flags.writeable = False
        self._algorithm = algorithm
        self._threads = threads
        self._precision = select.parse_precision(precision)
        self._choose = measure.parse_choose(choose)
        effective_threads(threads)  # validates threads= now rather than at the first call
        if algorithm not in ("auto", "tune"):
            get_algorithm(algorithm)
        self._check_attributes()
        self._lock = threading.RLock()
        self._choices: dict[tuple[Any, ...], tuple[ConvProblem, Algorithm]] = {}
        # same key as _choices -> how "measure" chose (estimates, timings), for explain
        self._measurements: dict[tuple[Any, ...], measure.Measurement] = {}
        self._prepared: dict[tuple[str, str], Any] = {}
        self._parsed_ops: dict[tuple[ConvProblem, bool], tuple[postops.PostOp, ...]] = {}
        # (src shape, src dtype, threads) -> a call with everything above already decided
        self._runners: dict[tuple[Any, ...], Callable[[np.ndarray], np.ndarray]] = {}

    def _check_attributes(self) -> None:
        """Validate weights, bias and attributes against a src that any valid plan accepts.

        The probe src is the smallest these attributes accept (:meth:`_probe_extents`), in
        the weights' dtype, so only a genuinely wrong argument can fail here; its message
        names that argument.
        """
        weights_format = params.parse_weights_format(self._attributes["weights_format"])
        data_format = params.parse_data_format(self._attributes["data_format"])
        shape = self._weights.shape
        if len(shape) < 3:
            raise ValueError(f"weights has shape {shape} (rank {len(shape)}); expected rank >= 3")
        rank = len(shape) - 2
        kernel = shape[2:] if weights_format == "OIX" else shape[:-2]
        icg = shape[1] if weights_format == "OIX" else shape[-2]
        # the probe below is built from these, so an empty one must be named here
        for axis, extent in enumerate(kernel):
            if extent < 1:
                raise ValueError(f"weights kernel axis {axis} has extent {extent}; expected >= 1")
        if icg < 1:
            raise ValueError(f"weights has IC/G={icg} input channels per group; expected >= 1")
        groups = params.as_int("groups", self._attributes["groups"])
        # the probe's src takes the weights' dtype: one no array may have is the weights'
        params.compute_dtype(("weights", self._weights.dtype))
        extents = self._probe_extents(rank, kernel)
        channels = max(1, icg * max(groups, 1))
        src_shape = (1, channels, *extents) if data_format == "NCX" else (1, *extents, channels)
        probe = params.make_problem(src_shape, self._weights.dtype, shape, self._weights.dtype,
                                    None if self._bias is None else self._bias.shape,
                                    None if self._bias is None else self._bias.dtype,
                                    **self._attributes)
        if not probe.is_quantized:
            quantized.parse(probe, self._weights.dtype, self._weights.dtype, self._bias,
                            **self._quantization)
        self.rank = rank

    def _probe_extents(self, rank: int, kernel) -> list:
        """The smallest src extents the attributes accept: the stretched (data-dilated) and
        padded input covers the dilated kernel, and a padding mode's pads reach no further
        than that mode can. The attributes are parsed as make_problem parses them, so a
        wrong one is named; strides, which any extent suits, are left to make_problem."""
        a = self._attributes
        dilations = params.spatial_tuple("dilations", a["dilations"], rank, 1, 1)
        stretch = params.spatial_tuple("data_dilations", a["data_dilations"], rank, 1, 1)
        explicit = params.parse_auto_pad(a["auto_pad"]) == "none"
        begin = end = (0,) * rank
        if explicit:
            begin = params.spatial_tuple("pads_begin", a["pads_begin"], rank, 0, None)
            end = params.spatial_tuple("pads_end", a["pads_end"], rank, 0, None)
        reach = {"reflect": 1, "circular": 0}.get(params.parse_padding_mode(a["padding_mode"]))
        extents = []
        for k, d, step, pb, pe in zip(kernel, dilations, stretch, begin, end):
            need = (k - 1) * d + 1
            if explicit:
                need = max(1, need - pb - pe)
                if reach is not None:
                    need = max(need, pb + reach, pe + reach)
            # (auto_pad modes accept an input as wide as the dilated kernel: their pads
            # then stay below it, within any padding mode's reach)
            extents.append(-(-(need - 1) // step) + 1)  # L * (I - 1) + 1 >= need
        return extents

    def _choice(self, src, n_threads: int):
        key = (src.shape, src.dtype.str, n_threads)
        entry = self._choices.get(key)
        if entry is None:
            with self._lock:
                entry = self._choices.get(key)
                if entry is None:
                    bias = self._bias
                    problem = params.make_problem(
                        src.shape, src.dtype, self._weights.shape, self._weights.dtype,
                        None if bias is None else bias.shape,
                        None if bias is None else bias.dtype, **self._attributes)
                    if problem.is_quantized:
                        chosen = select.resolve(self._algorithm, problem, n_threads,
                                                self._precision, registry=INT8)
                    elif (self._algorithm == "auto" and self._choose == "measure"
                          and problem.batch > 0):
                        chosen = self._measured_choice(key, problem, src, n_threads)
                    else:
                        chosen = resolve_for_call(
                            self._algorithm, problem, n_threads, self._precision, src,
                            params.canonical_bias(bias, problem),
                            lambda algorithm: self._prepared_weights(problem, algorithm),
                            prepared=True)
                    entry = (problem, chosen)
                    self._choices[key] = entry
        return entry

    def _measured_choice(self, key, problem: ConvProblem, src, n_threads: int):
        """Time the close contenders on this call's src (called under the lock), keep the
        winner's prepared weights and drop the others' unless another choice runs them."""
        if not isinstance(src, np.ndarray):  # algorithm_for(shape and dtype): any data times alike
            src = np.zeros(src.shape, src.dtype)
        src_canonical = params.canonical_src(src, problem, n_threads)
        bias = params.canonical_bias(self._bias, problem)
        # allocated as the calls' dst is (a cache line start from 1 MiB, where the direct
        # kernel may stream its stores), or the timings would not describe the calls
        scratch = buffers.empty(problem.canonical_dst_shape, problem.dtype)
        prepared_before = set(self._prepared)

        def prepare(name):
            self._prepared_weights(problem, get_algorithm(name))

        # each contender runs as the plan's later calls will: its bound run
        bound_runs: dict[str, tuple[Callable, Any]] = {}

        def run(name):
            entry = bound_runs.get(name)
            if entry is None:
                algorithm = get_algorithm(name)
                entry = bound_runs[name] = (algorithm.bound(problem, n_threads),
                                            self._prepared_weights(problem, algorithm))
            entry[0](src_canonical, entry[1], bias, scratch)

        measurement = measure.measure(problem, n_threads, self._precision, prepare, run)
        in_use = {(chosen.name, p.dtype.str) for p, chosen in self._choices.values()}
        in_use.add((measurement.choice, problem.dtype.str))
        for prepared_key in set(self._prepared) - prepared_before - in_use:
            del self._prepared[prepared_key]
        self._measurements[key] = measurement
        return get_algorithm(measurement.choice)

    def _prepared_weights(self, problem: ConvProblem, chosen):
        key = (chosen.name, problem.dtype.str)
        prepared = self._prepared.get(key)
        if prepared is None:
            with self._lock:
                prepared = self._prepared.get(key)
                if prepared is None:
                    prepared = chosen.prepare(problem, self._weights)
                    self._prepared[key] = prepared
        return prepared

    def _parsed_post_ops(self, problem: ConvProblem, out):
        """The post-ops checked against the problem, once per problem (binary operands are
        views of the caller's arrays, so later changes to those still show)."""
        if self._post_ops is None:
            return ()
        key = (problem, out is None)
        ops = self._parsed_ops.get(key)
        if ops is None:
            ops = postops.parse(self._post_ops, problem, out)
            self._parsed_ops[key] = ops
        return ops

    def __call__(self, src, out: np.ndarray | None = None) -> np.ndarray:
        n_threads = effective_threads(self._threads)
        if out is None and type(src) is np.ndarray:
            runner = self._runners.get((src.shape, src.dtype, n_threads))
            if runner is not None:
                return runner(src)
        src = params.as_array("src", src)
        problem, chosen = self._choice(src, n_threads)
        ops = self._parsed_post_ops(problem, out)
        if out is not None:
            check_out(out, problem, (("src", src), ("weights", self._weights),
                                     ("bias", self._bias)))
        if problem.is_quantized:
            q = quantized.parse(problem, src.dtype, self._weights.dtype, self._bias,
                                **self._quantization)
            assert q is not None  # parse returns one for every 8-bit problem
            key = ("quantized", problem.groups)
            prepared = self._prepared.get(key)
            if prepared is None:
                with self._lock:
                    prepared = self._prepared.setdefault(
                        key, quantized.shifted_weights(self._weights, problem, q))
            return execute_quantized(problem, chosen, src, prepared, q, ops, out, n_threads)
        prepared = self._prepared_weights(problem, chosen) if problem.batch > 0 else None
        bias = params.canonical_bias(self._bias, problem)
        if kernel_only(problem, ops, out):
            self._runners[(src.shape, src.dtype, n_threads)] = _lean_runner(
                problem, chosen, prepared, bias, n_threads)
        return execute(problem, chosen, src, prepared, bias, out, n_threads, ops)

    def algorithm_for(self, src) -> str:
        """The algorithm this plan runs for inputs shaped like ``src`` (array or shape+dtype)."""
        src = src if hasattr(src, "shape") and hasattr(src, "dtype") else np.asarray(src)
        return self._choice(src, effective_threads(self._threads))[1].name

    def explain(self, src) -> PlanExplanation:
        """Why this plan runs what it runs for inputs shaped like ``src`` (an array, or
        anything with ``shape`` and ``dtype``): :func:`convlab.explain`'s account, then
        the plan's own choice, with the measured times when it measured. Makes the choice
        if no call has yet (with ``choose="measure"`` that times the contenders, on
        ``src``'s data or on zeros of its shape)."""
        src = src if hasattr(src, "shape") and hasattr(src, "dtype") else np.asarray(src)
        n_threads = effective_threads(self._threads)
        problem, chosen = self._choice(src, n_threads)
        measurement = self._measurements.get((src.shape, src.dtype.str, n_threads))
        account = explain(src, self._weights, self._bias, threads=n_threads,
                          precision=self._precision, **self._attributes)
        if self._algorithm not in ("auto", "tune"):
            how = f"forced by algorithm={self._algorithm!r}"
        elif problem.is_quantized:
            how = "8-bit problem: lowest estimate among the 8-bit algorithms"
        elif self._algorithm == "tune":
            how = "algorithm='tune': fastest when timed (see 'tuned choice' above)"
        elif measurement is not None:
            how = measurement.describe()
        else:
            how = ("choose='estimate': lowest estimate with the weights' preparation left "
                   "out (the plan prepares them once)")
        return PlanExplanation(account, chosen.name, how, measurement)

    def __repr__(self) -> str:
        return (f"Convolution(weights{tuple(self._weights.shape)}, bias="
                f"{'yes' if self._bias is not None else 'no'}, algorithm={self._algorithm!r}, "
                f"choose={self._choose!r}, "
                f"{', '.join(f'{k}={v!r}' for k, v in self._attributes.items() if v is not None)})")


@dataclass(frozen=True)
class PlanExplanation:
    """:meth:`Convolution.explain`: the one-shot account (``explanation``) and the plan's
    own choice. ``str()`` reads as text, ``to_dict()`` feeds notebooks."""

    explanation: select.Explanation
    choice: str
    how: str
    measurement: measure.Measurement | None = None

    def to_dict(self) -> dict[str, Any]:
        return {**self.explanation.to_dict(), "plan": {
            "choice": self.choice, "how": self.how,
            "measurement": None if self.measurement is None else self.measurement.to_dict()}}

    def __str__(self) -> str:
        return f"{self.explanation}\nplan choice: {self.how}"

    __repr__ = __str__


def _lean_runner(problem: ConvProblem, chosen, prepared, bias, n_threads: int):
    """``execute`` for one decided case (no out=, no post-ops or output stage, N > 0),
    without re-deciding any of it: on a small layer each skipped check is a few percent."""
    run = runner(problem, chosen, n_threads)

    def run_with_weights(src: np.ndarray) -> np.ndarray:
        return run(src, prepared, bias)

    return run_with_weights
