"""The algorithm registries, one per operation, and a decorator to add to one.

Forward convolution (:data:`FORWARD`), transposed convolution (:data:`TRANSPOSED`) and
8-bit integer convolution (:data:`INT8`) each keep a :class:`Registry` of
:class:`Algorithm` objects under one contract, so that :mod:`convlab.dispatch.select`
chooses among them, and ``explain`` accounts for them, alike. An algorithm is a name and
four callables:

``run(problem, src, weights, bias, dst, threads)``
    Computes into ``dst``. Arrays are in the canonical layouts of
    :mod:`convlab.problem.params` (src NXC, dst NXC, weights as prepared) and in
    ``problem.dtype``. ``bias`` is ``None`` or shape (OC,). ``src`` must not be written.
``supports(problem)``
    ``None`` when the algorithm can run the problem, else the reason it cannot.
``cost(problem, threads)``
    An :class:`Estimate` of the run time, for the auto selector and ``explain``.
``prepare_weights(problem, weights)``
    Turns canonical weights (G, K..., IC/G, OC/G), C-contiguous, into whatever ``run``
    wants. With ``weight_views=True`` the hook receives them as a strided view of the
    caller's array instead (no copy made yet; it must not write them), and copies only
    what it needs.
    A plan calls it once per algorithm and dtype and reuses the result for every
    input shape, so it may depend on the weights and attributes, never on the src
    extents or the batch.

``fuse_post_ops(problem, seeds_sum)``, optional
    True when ``run`` takes an ``epilogue=`` keyword (a
    :class:`convlab.strategies.kernels._epilogue.Epilogue`) and applies that post-op chain itself,
    block by block as it writes dst; with ``seeds_sum``, when it can also start each
    block from a leading sum's scale * (prior dst) + bias. Without it, post-ops run in a
    separate output stage.

``bind(problem, threads)``, optional
    A function of ``(src, weights, bias, dst)`` that runs ``run`` on that problem and
    thread count, with whatever ``run`` derives from the two alone (a plan of blocks,
    buffer sizes) worked out once. Decided one-shot calls and plans, which call the same
    case again and again, keep one. Without it they call ``run``.

An algorithm that rounds differently from a plain sum of products (Winograd's
transforms) declares its measured float32 relative error as ``relative_error``;
``precision="highest"`` then keeps it out of "auto" and "tune".

``auto`` is True (an "auto" and "tune" contender wherever it runs), False (never: the
reference), or a function of the problem saying where it is one (fft, on large kernels
only; col2im, for transposed problems with a stride above 1).

The other operations' arrays: for :data:`INT8`, ``src`` and ``weights`` hold the int16
operands with their zero points subtracted (src materialised: data dilation and padding
mode applied), ``bias`` the int32 bias and ``dst`` the int32 accumulator (N, O..., OC);
for :data:`TRANSPOSED`, ``problem`` is a :class:`convlab.ops.transpose.TransposeProblem`,
``src`` is in the caller's layout, ``weights`` grouped (G, IC/G, K..., OC/G), ``dst`` in
the caller's layout, ``threads`` the caller's ``threads=`` (None: the default), and ``run``
takes the forward ``algorithm=`` and ``precision=`` as keywords.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from convlab.problem import params

# What an algorithm's hooks are asked about: a ConvProblem (forward and 8-bit registries) or
# a convlab.ops.transpose.TransposeProblem (transposed registry).
Problem = Any


@dataclass(frozen=True)
class Estimate:
    """Estimated seconds, and the figures that went into the estimate (for ``explain``)."""

    seconds: float
    inputs: dict[str, Any] = field(default_factory=dict)


def keep_weights(problem: Problem, weights):
    return weights


def always(problem: Problem) -> str | None:
    return None


def unknown_cost(problem: Problem, threads: int) -> Estimate:
    return Estimate(float("inf"), {"note": "no cost model"})


@dataclass(frozen=True)
class Algorithm:
    name: str
    run: Callable[..., None]
    supports: Callable[[Problem], str | None] = always
    cost: Callable[[Problem, int], Estimate] = unknown_cost
    prepare_weights: Callable[[Problem, Any], Any] = keep_weights
    # False keeps an algorithm out of "auto" (the float64 reference is an oracle, not a
    # contender); a function of the problem keeps it out where it returns False.
    auto: bool | Callable[[Problem], bool] = True
    description: str = ""
    # Measured float32 ||y - ref|| / ||ref|| on N(0,1) data, for algorithms whose rounding
    # is not that of a plain sum of products; None for those that sum plainly. Either a
    # number, or a function of the problem when the error depends on it (Winograd's rank).
    relative_error: None | float | Callable[[Problem], float] = None
    fuse_post_ops: Callable[[Problem, bool], bool] | None = None
    weight_views: bool = False
    # Weights for one call only (a one-shot ``convolve``), which may go on reading the
    # caller's array; None: ``prepare_weights``, whose result a plan keeps.
    prepare_once: Callable[[Problem, Any], Any] | None = None
    bind: Callable[[Problem, int], Callable[..., None]] | None = None

    def bound(self, problem: Problem, threads: int) -> Callable[..., None]:
        """``run`` for ``problem`` at ``threads``, as a function of (src, weights, bias,
        dst): the ``bind`` hook's, or a call of ``run``."""
        if self.bind is not None:
            return self.bind(problem, threads)
        run = self.run

        def bound_run(src, weights, bias, dst):
            run(problem, src, weights, bias, dst, threads)

        return bound_run

    def prepare(self, problem: Problem, weights, once: bool = False) -> Any:
        """``prepare_weights`` (``prepare_once`` where ``once`` and there is one) on the
        caller's weights (validated, in their own layout), turned canonical as the hook's
        contract says: C-contiguous, or a view with ``weight_views``."""
        hook = self.prepare_once if once and self.prepare_once is not None \
            else self.prepare_weights
        return hook(problem, params.canonical_weights(
            weights, problem, contiguous=not self.weight_views))

    def auto_for(self, problem: Problem) -> bool:
        """Whether the algorithm is an "auto" and "tune" contender on ``problem``."""
        return bool(self.auto(problem)) if callable(self.auto) else bool(self.auto)

    def relative_error_for(self, problem: Problem) -> float | None:
        error = self.relative_error
        return error(problem) if callable(error) else error


class Registry:
    """The algorithms of one operation, by name, in registration order.

    Forward convolution (:data:`FORWARD`, what :func:`register_algorithm` adds to),
    transposed convolution (:data:`TRANSPOSED`) and 8-bit integer convolution
    (:data:`INT8`) each have one; :mod:`convlab.dispatch.select` chooses among the
    algorithms of any of them by the same rules, and ``explain`` shows them alike.
    ``constants_prefix`` keys the algorithms' fitted constants and selection margins in
    the cost constants (``"int8_"``: ``int8_direct``, ...), since names repeat across
    operations.
    """

    def __init__(self, operation: str, constants_prefix: str = ""):
        self.operation = operation
        self.constants_prefix = constants_prefix
        self.by_name: dict[str, Algorithm] = {}
        # Bumped on every change, so caches of choices made against it know to refresh.
        self.changes = 0

    def __repr__(self) -> str:
        return f"Registry({self.operation!r}: {self.names()})"

    def constants_key(self, name: str) -> str:
        """The name of ``name``'s constants and margin in the cost constants."""
        return self.constants_prefix + name

    def add(self, algorithm: Algorithm, replace: bool = False) -> None:
        if algorithm.name in self.by_name and not replace:
            raise ValueError(f"algorithm {algorithm.name!r} is already registered; pass "
                             f"replace=True to override it")
        self.by_name[algorithm.name] = algorithm
        self.changes += 1

    def remove(self, name: str) -> None:
        self.by_name.pop(name, None)
        self.changes += 1

    def names(self) -> list[str]:
        return list(self.by_name)

    def algorithms(self) -> list[Algorithm]:
        return list(self.by_name.values())

    def get(self, name) -> Algorithm:
        """Look a name up; an unknown one raises ``ValueError`` listing the known names,
        and one that is not a string ``TypeError`` (as ``convolve`` does for
        ``algorithm=``)."""
        if not isinstance(name, str):
            raise TypeError(f"algorithm={name!r} must be a string: 'auto' or one of "
                            f"{self.names()}")
        try:
            return self.by_name[name]
        except KeyError:
            raise ValueError(self.unknown(name)) from None

    def unknown(self, name: str) -> str:
        if self is FORWARD:
            return (f"algorithm={name!r} is not registered; expected 'auto' or one of "
                    f"{self.names()}")
        return (f"algorithm={name!r} cannot run {self.operation} problems; expected 'auto' "
                f"or one of {self.names()}")


FORWARD = Registry("convolution")
TRANSPOSED = Registry("transposed convolution", "transposed_")
INT8 = Registry("8-bit integer", "int8_")


def generation() -> int:
    """A number that changes whenever a forward algorithm is added, replaced or removed."""
    return FORWARD.changes


def register_algorithm(name_or_algorithm, *, supports=None, cost=None, prepare_weights=None,
                       auto=True, description: str = "",
                       relative_error=None, fuse_post_ops=None, weight_views: bool = False,
                       prepare_once=None, bind=None, replace: bool = False,
                       registry: Registry | None = None):
    """Add an algorithm to the registry (of forward convolution, unless ``registry``
    names another: :data:`TRANSPOSED`, :data:`INT8`).

    Use it as a decorator on the run function::

        @convlab.register_algorithm("mine", supports=lambda p: None)
        def run_mine(problem, src, weights, bias, dst, threads):
            ...

    or call it with a ready :class:`Algorithm`. A name already taken raises
    ``ValueError`` unless ``replace=True``.
    """
    target = FORWARD if registry is None else registry
    if isinstance(name_or_algorithm, Algorithm):
        target.add(name_or_algorithm, replace)
        return name_or_algorithm
    name = name_or_algorithm
    if not isinstance(name, str) or not name or name in ("auto", "tune"):
        raise ValueError(f"algorithm name {name!r} must be a non-empty string other than "
                         f"'auto' and 'tune'")

    def decorator(run):
        target.add(Algorithm(name=name, run=run, supports=supports or always,
                             cost=cost or unknown_cost,
                             prepare_weights=prepare_weights or keep_weights, auto=auto,
                             description=description or (run.__doc__ or "").strip()
                             .split("\n")[0], relative_error=relative_error,
                             fuse_post_ops=fuse_post_ops, weight_views=weight_views,
                             prepare_once=prepare_once, bind=bind), replace)
        return run

    return decorator


def unregister_algorithm(name: str) -> None:
    """Remove a forward algorithm (mainly for tests and experiments)."""
    FORWARD.remove(name)


def algorithms() -> list[str]:
    """Names of the registered forward algorithms, in registration order."""
    return FORWARD.names()


def registered() -> list[Algorithm]:
    return FORWARD.algorithms()


def get_algorithm(name) -> Algorithm:
    """Look a forward algorithm up; an unknown name raises ``ValueError`` listing the known
    names, and one that is not a string ``TypeError`` (as ``convolve`` does for
    ``algorithm=``)."""
    return FORWARD.get(name)
