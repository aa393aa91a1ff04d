"""Post-ops (oneDNN's attribute model, docs/specification.md §4) and the output stage that
applies them.

``post_ops`` is a list; each entry is a name or a tuple ``(name, *parameters)``:

* eltwise: ``"relu"`` / ``("relu", negative_slope)``, ``"tanh"``, ``"sigmoid"``,
  ``("elu", alpha=1)``, ``"gelu_erf"``, ``"gelu_tanh"``, ``("swish", alpha=1)``
  (x * sigmoid(alpha * x)), ``("clip", low, high)``, ``("linear", alpha, beta=0)``
  (alpha * x + beta), ``"abs"``, ``"square"``, ``"exp"``, ``"log"``;
* sum: ``"sum"`` / ``("sum", scale)``: adds ``scale * dst_before``, the prior contents of
  ``out`` (so a sum needs ``out=``);
* binary: ``("add" | "mul" | "max" | "min", tensor)``, ``tensor`` broadcasting against dst
  in the caller's ``data_format``.

Float32 and float64 problems have their post-ops fused into the kernel when the chosen
algorithm can (:func:`epilogue`, ``fuse_post_ops`` in the registry): the kernel applies
them to each block of dst it finishes, while the block is in cache. Otherwise, and for
half and 8-bit problems, :func:`finish` applies them.

:func:`finish` is the output stage: it turns the algorithm's accumulator buffer into the
returned dst, one chunk of output rows at a time (about ``CHUNK_ELEMENTS`` elements, so
a chunk's temporaries stay in L2): for an 8-bit problem the src/weights zero points are
already in the accumulator, then output scale and floating bias, the post-ops in the given
order, dst zero point, rounding half to even and saturation; for float16/bfloat16 the
conversion from float32. It runs after the algorithm, not inside its kernel.
"""
from __future__ import annotations

import functools
import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from convlab.problem.params import ConvProblem, canonical_view, channels_last_axes

# name -> (parameter names, defaults for the trailing ones)
ELTWISE = {
    "relu": (("negative_slope",), (0.0,)),
    "tanh": ((), ()),
    "sigmoid": ((), ()),
    "elu": (("alpha",), (1.0,)),
    "gelu_erf": ((), ()),
    "gelu_tanh": ((), ()),
    "swish": (("alpha",), (1.0,)),
    "clip": (("low", "high"), ()),
    "linear": (("alpha", "beta"), (0.0,)),
    "abs": ((), ()),
    "square": ((), ()),
    "exp": ((), ()),
    "log": ((), ()),
}
BINARY = ("add", "mul", "max", "min")
KINDS = tuple(ELTWISE) + ("sum",) + BINARY

# Elements per chunk of the output stage: 64 Ki float32 = 256 KiB plus a temporary or two,
# within a 2 MiB L2.
CHUNK_ELEMENTS = 1 << 16


@dataclass(frozen=True)
class PostOp:
    name: str
    parameters: tuple[float, ...] = ()
    operand: np.ndarray | None = None  # binary: broadcast to dst, canonical layout view

    @property
    def kind(self) -> str:
        return "sum" if self.name == "sum" else "binary" if self.name in BINARY else "eltwise"


def _real(where: str, name: str, value) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{where}: {name}={value!r} must be a real number")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{where}: {name}={value!r} must be finite")
    return value


def check_syntax(post_ops) -> None:
    """Validate names and parameters (not binary shapes, nor sum's ``out``) up front."""
    _parse(post_ops, None, None)


def parse(post_ops, problem: ConvProblem, out=None) -> tuple[PostOp, ...]:
    """Validate ``post_ops`` against the problem; binary operands become canonical views."""
    return _parse(post_ops, problem, out)


def _parse(post_ops, problem: ConvProblem | None, out) -> tuple[PostOp, ...]:
    if post_ops is None:
        return ()
    if isinstance(post_ops, (str, bytes)) or not isinstance(post_ops, Sequence):
        raise TypeError(f"post_ops={post_ops!r} must be a list of post-ops, each a name or a "
                        f"tuple (name, *parameters)")
    parsed = []
    for index, entry in enumerate(post_ops):
        where = f"post_ops[{index}]"
        if isinstance(entry, str):
            name, args = entry, ()
        elif isinstance(entry, tuple) and entry and isinstance(entry[0], str):
            name, args = entry[0], entry[1:]
        else:
            raise TypeError(f"{where}={entry!r} must be a name or a tuple (name, "
                            f"*parameters); names: {list(KINDS)}")
        key = name.lower()
        if key not in KINDS:
            raise ValueError(f"{where}: {name!r} is not a known post-op; expected one of "
                             f"{list(KINDS)}")
        if key in BINARY:
            if len(args) != 1:
                raise ValueError(f"{where}: binary {key!r} takes one tensor, got "
                                 f"{len(args)} arguments")
            operand = np.asarray(args[0]) if problem is None else \
                _binary_operand(where, args[0], problem)
            parsed.append(PostOp(key, (), operand))
            continue
        if key == "sum":
            names, defaults = ("scale",), (1.0,)
        else:
            names, defaults = ELTWISE[key]
        required = len(names) - len(defaults)
        if not required <= len(args) <= len(names):
            raise ValueError(f"{where}: {key!r} takes parameters {list(names)} "
                             f"({required} required), got {len(args)}: {args!r}")
        values = tuple(_real(where, n, v) for n, v in zip(names, args))
        values += tuple(defaults[len(defaults) - (len(names) - len(values)):]) \
            if len(values) < len(names) else ()
        if key == "clip" and values[0] > values[1]:
            raise ValueError(f"{where}: clip low={values[0]} must be <= high={values[1]}")
        if key == "sum" and out is None and problem is not None:
            raise ValueError(f"{where}: 'sum' adds scale * the prior contents of out; pass "
                             f"out= (an array of the dst shape {problem.dst_shape})")
        parsed.append(PostOp(key, values))
    return tuple(parsed)


def _binary_operand(where, value, problem: ConvProblem) -> np.ndarray:
    array = np.asarray(value)
    if array.dtype.kind not in "fiub":
        raise TypeError(f"{where}: the binary tensor has dtype {array.dtype}; expected a real "
                        f"numeric dtype")
    try:
        full = np.broadcast_to(array, problem.dst_shape)
    except ValueError:
        raise ValueError(f"{where}: the binary tensor of shape {array.shape} does not "
                         f"broadcast against dst {problem.dst_shape} (data_format="
                         f"{problem.data_format!r})") from None
    if problem.data_format == "NCX":
        full = full.transpose(channels_last_axes(full.ndim))
    return full


# --------------------------------------------------------------------------- application

def _gelu_erf(x):
    from scipy.special import erf

    return 0.5 * x * (1.0 + erf(x * np.asarray(1 / math.sqrt(2), x.dtype)))


def apply(op: PostOp, y: np.ndarray, dst_before=None, operand=None) -> np.ndarray:
    """One post-op on a chunk ``y`` (float, modified in place where the formula allows)."""
    name, p = op.name, op.parameters
    t = y.dtype.type
    if name == "relu":
        return np.where(y >= 0, y, y * t(p[0])) if p[0] else np.maximum(y, 0, out=y)
    if name == "tanh":
        return np.tanh(y, out=y)
    if name == "sigmoid":
        return _sigmoid(y)
    if name == "elu":
        return np.where(y > 0, y, t(p[0]) * np.expm1(np.minimum(y, 0)))
    if name == "gelu_erf":
        return _gelu_erf(y)
    if name == "gelu_tanh":
        c = t(math.sqrt(2 / math.pi))
        return t(0.5) * y * (t(1) + np.tanh(c * (y + t(0.044715) * y * y * y)))
    if name == "swish":
        return y * _sigmoid(t(p[0]) * y)
    if name == "clip":
        return np.clip(y, t(p[0]), t(p[1]), out=y)
    if name == "linear":
        y *= t(p[0])
        y += t(p[1])
        return y
    if name == "abs":
        return np.abs(y, out=y)
    if name == "square":
        return np.multiply(y, y, out=y)
    if name == "exp":
        return np.exp(y, out=y)
    if name == "log":
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.log(y, out=y)
    if name == "sum":
        before = dst_before.astype(y.dtype, copy=False)
        y += before if p[0] == 1.0 else t(p[0]) * before
        return y
    operand = operand.astype(y.dtype, copy=False)
    if name == "add":
        return np.add(y, operand, out=y)
    if name == "mul":
        return np.multiply(y, operand, out=y)
    if name == "max":
        return np.maximum(y, operand, out=y)
    return np.minimum(y, operand, out=y)


def _sigmoid(y):
    # 1 / (1 + exp(-y)) overflows exp for very negative y; the tanh form does not
    half = y.dtype.type(0.5)
    return half * (np.tanh(half * y) + 1)


@dataclass(frozen=True)
class Requantization:
    """The float stage of an 8-bit problem (docs/specification.md §3.4, §4.1), per output
    channel or scalar."""

    output_scale: np.ndarray | None   # float32, () or (OC,)
    float_bias: np.ndarray | None     # float32, (OC,)
    dst_zero_point: np.ndarray | None  # float32, () or (OC,)

    @property
    def active(self) -> bool:
        return (self.output_scale is not None or self.float_bias is not None
                or self.dst_zero_point is not None)


def _chunks(shape):
    """Index tuples covering (N, O_1..O_r, OC) in blocks of about CHUNK_ELEMENTS."""
    n = shape[0]
    if len(shape) <= 2:
        yield from ((slice(i, i + 1),) for i in range(n))
        return
    per_row = math.prod(shape[2:])
    rows = max(1, CHUNK_ELEMENTS // max(1, per_row))
    for i in range(n):
        for start in range(0, shape[1], rows):
            yield (slice(i, i + 1), slice(start, min(shape[1], start + rows)))


def needs_stage(problem: ConvProblem, ops, requant: Requantization | None) -> bool:
    return bool(ops) or problem.result_dtype is not None or \
        (requant is not None and requant.active)


def finish(problem: ConvProblem, acc: np.ndarray, result: np.ndarray, ops,
           requant: Requantization | None = None, dst_before=None) -> None:
    """Write the output stage of canonical ``acc`` into canonical ``result`` chunk by chunk.

    ``acc`` is scratch: the stage may overwrite it.
    ``dst_before`` is the canonical view of ``out`` for a sum post-op; each chunk reads it
    before the chunk is written, so ``result`` may be that very view.
    """
    stage = np.float32 if problem.dtype != np.float64 else np.float64
    out_dtype = result.dtype
    integer_out = out_dtype.kind in "iu"
    if integer_out:
        info = np.iinfo(out_dtype)
    for index in _chunks(acc.shape):
        # acc is the caller's scratch buffer: post-ops may work in it in place
        y = acc[index] if acc.dtype == stage else acc[index].astype(stage)
        if requant is not None:
            if requant.output_scale is not None:
                y *= requant.output_scale
            if requant.float_bias is not None:
                y += requant.float_bias
        for op in ops:
            y = apply(op, y, None if dst_before is None else dst_before[index],
                      None if op.operand is None else op.operand[index])
        if requant is not None and requant.dst_zero_point is not None:
            y += requant.dst_zero_point
        if integer_out:
            # round half to even, then saturate; in float64 so that int32's limits are exact
            y = np.clip(np.rint(y.astype(np.float64)), info.min, info.max)
        result[index] = y


def fusion_blocker(problem: ConvProblem, ops) -> str | None:
    """Why this chain cannot run in a kernel epilogue whatever the algorithm, or None."""
    if problem.result_dtype is not None or problem.dtype not in (np.float32, np.float64):
        return f"{problem.output_dtype} results are converted in the output stage"
    return None


def _seeds_sum(problem: ConvProblem, ops, algorithm) -> bool:
    """Whether the chain starts with a sum that ``algorithm`` folds into its accumulation
    (it starts each block from scale * prior dst + bias, reading the prior in cache)."""
    return ops[0].name == "sum" and algorithm.fuse_post_ops(problem, True)


def epilogue(problem: ConvProblem, ops, algorithm, out=None):
    """``ops`` as a kernel epilogue for ``algorithm``, or None when they are not fused (no
    post-ops, :func:`fusion_blocker`, or an algorithm without ``fuse_post_ops``).

    A sum the kernel cannot seed (one after another post-op, or an algorithm that cannot
    start from dst) reads a snapshot of the prior dst taken before the kernel runs: one
    copy of dst, still cheaper than a separate output stage."""
    if not ops or algorithm.fuse_post_ops is None or fusion_blocker(problem, ops):
        return None
    if problem.batch == 0:
        return None  # no kernel runs on an empty batch: nothing to fuse into
    if not algorithm.fuse_post_ops(problem, False):
        return None
    seeded = _seeds_sum(problem, ops, algorithm)
    if all(op.operand is None for op in ops) and \
            all(op.name != "sum" for op in ops[1 if seeded else 0:]):
        # nothing in it refers to the caller's data: build it once (a plan's small layers
        # would spend a tenth of their time here)
        return _epilogue_of_parameters(problem, ops, seeded)
    return _build_epilogue(problem, ops, seeded, out)


@functools.lru_cache(maxsize=64)
def _epilogue_of_parameters(problem: ConvProblem, ops, seeded: bool):
    return _build_epilogue(problem, ops, seeded, None)


def _build_epilogue(problem: ConvProblem, ops, seeded: bool, out):
    from convlab.strategies.kernels._epilogue import Epilogue

    shape = (problem.batch, problem.output_size, problem.out_channels)
    snapshot = None
    chain = []
    for op in ops[1 if seeded else 0:]:
        if op.name == "sum":
            if snapshot is None:
                snapshot = np.array(canonical_view(out, problem), dtype=problem.dtype,
                                    order="C").reshape(shape)
            chain.append(("scaled_add", op.parameters, snapshot))
        else:
            chain.append((op.name, op.parameters, None if op.operand is None
                          else _kernel_operand(op.operand, problem, out)))
    return Epilogue(chain, ops[0].parameters[0] if seeded else None, shape, problem.dtype)


def _kernel_operand(view: np.ndarray, problem: ConvProblem, out) -> np.ndarray:
    """A binary operand's canonical broadcast view as (N or 1, pixels or 1, OC or 1) in the
    problem's dtype, the layout the epilogue indexes."""
    n, channels = view.shape[0], view.shape[-1]
    if not any(view.strides[1:-1]):
        # the same values at every pixel (per channel or scalar): keep one pixel
        operand = view[(slice(None),) + (0,) * problem.rank + (slice(None),)][:, None, :]
    else:
        operand = np.ascontiguousarray(view).reshape(n, -1, channels)
    operand = operand.astype(problem.dtype, copy=False)
    if out is not None and np.may_share_memory(operand, out):
        # the kernel writes out block by block while it reads the operand
        operand = operand.copy()
    return operand


def describe(ops) -> Any:
    return [(op.name, *op.parameters) if op.operand is None else (op.name, op.operand.shape)
            for op in ops]
