"""The strategy registry: a dict of algorithms plus a decorator to add one.

An algorithm is a name and four callables:

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

An algorithm that rounds differently from a plain sum of products (Winograd's
transforms) declares its measured float32 relative error as ``relative_error``;
``precision="highest"`` then keeps it out of "auto" and "tune".

``auto`` is True (an "auto" and "tune" contender wherever it runs), False (never: the
reference), or a function of the problem saying where it is one (fft, on large kernels
only).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from convlab.problem import params
from convlab.problem.params import ConvProblem


@dataclass(frozen=True)
class Estimate:
    """Estimated seconds, and the figures that went into the estimate (for ``explain``)."""

    seconds: float
    inputs: dict[str, Any] = field(default_factory=dict)


def _keep_weights(problem: ConvProblem, weights):
    return weights


def _always(problem: ConvProblem) -> str | None:
    return None


def _unknown_cost(problem: ConvProblem, threads: int) -> Estimate:
    return Estimate(float("inf"), {"note": "no cost model"})


@dataclass(frozen=True)
class Algorithm:
    name: str
    run: Callable[..., None]
    supports: Callable[[ConvProblem], str | None] = _always
    cost: Callable[[ConvProblem, int], Estimate] = _unknown_cost
    prepare_weights: Callable[[ConvProblem, Any], Any] = _keep_weights
    # False keeps an algorithm out of "auto" (the float64 reference is an oracle, not a
    # contender); a function of the problem keeps it out where it returns False.
    auto: bool | Callable[[ConvProblem], bool] = True
    description: str = ""
    # Measured float32 ||y - ref|| / ||ref|| on N(0,1) data, for algorithms whose rounding
    # is not that of a plain sum of products; None for those that sum plainly. Either a
    # number, or a function of the problem when the error depends on it (Winograd's rank).
    relative_error: None | float | Callable[[ConvProblem], float] = None
    fuse_post_ops: Callable[[ConvProblem, bool], bool] | None = None
    weight_views: bool = False

    def prepare(self, problem: ConvProblem, weights) -> Any:
        """``prepare_weights`` on the caller's weights (validated, in their own layout),
        turned canonical as the hook's contract says: C-contiguous, or a view with
        ``weight_views``."""
        return self.prepare_weights(problem, params.canonical_weights(
            weights, problem, contiguous=not self.weight_views))

    def auto_for(self, problem: ConvProblem) -> bool:
        """Whether the algorithm is an "auto" and "tune" contender on ``problem``."""
        return bool(self.auto(problem)) if callable(self.auto) else bool(self.auto)

    def relative_error_for(self, problem: ConvProblem) -> float | None:
        error = self.relative_error
        return error(problem) if callable(error) else error


_REGISTRY: dict[str, Algorithm] = {}
# Bumped on every change, so caches of choices made against the registry know to refresh.
_generation = 0


def generation() -> int:
    """A number that changes whenever an algorithm is added, replaced or removed."""
    return _generation


def register_algorithm(name_or_algorithm, *, supports=None, cost=None, prepare_weights=None,
                       auto=True, description: str = "",
                       relative_error=None, fuse_post_ops=None, weight_views: bool = False,
                       replace: bool = False):
    """Add an algorithm to the registry.

    Use it as a decorator on the run function::

        @convlab.register_algorithm("mine", supports=lambda p: None)
        def run_mine(problem, src, weights, bias, dst, threads):
            ...

    or call it with a ready :class:`Algorithm`. A name already taken raises
    ``ValueError`` unless ``replace=True``.
    """
    if isinstance(name_or_algorithm, Algorithm):
        _add(name_or_algorithm, replace)
        return name_or_algorithm
    name = name_or_algorithm
    if not isinstance(name, str) or not name or name in ("auto", "tune"):
        raise ValueError(f"algorithm name {name!r} must be a non-empty string other than "
                         f"'auto' and 'tune'")

    def decorator(run):
        _add(Algorithm(name=name, run=run, supports=supports or _always,
                       cost=cost or _unknown_cost, prepare_weights=prepare_weights or _keep_weights,
                       auto=auto, description=description or (run.__doc__ or "").strip()
                       .split("\n")[0], relative_error=relative_error,
                       fuse_post_ops=fuse_post_ops, weight_views=weight_views), replace)
        return run

    return decorator


def _add(algorithm: Algorithm, replace: bool) -> None:
    if algorithm.name in _REGISTRY and not replace:
        raise ValueError(f"algorithm {algorithm.name!r} is already registered; pass "
                         f"replace=True to override it")
    global _generation
    _REGISTRY[algorithm.name] = algorithm
    _generation += 1


def unregister_algorithm(name: str) -> None:
    """Remove an algorithm (mainly for tests and experiments)."""
    global _generation
    _REGISTRY.pop(name, None)
    _generation += 1


def algorithms() -> list[str]:
    """Names of the registered algorithms, in registration order."""
    return list(_REGISTRY)


def registered() -> list[Algorithm]:
    return list(_REGISTRY.values())


def get_algorithm(name) -> Algorithm:
    """Look a name up; an unknown one raises ``ValueError`` listing the known names, and
    one that is not a string ``TypeError`` (as ``convolve`` does for ``algorithm=``)."""
    if not isinstance(name, str):
        raise TypeError(f"algorithm={name!r} must be a string: 'auto' or one of "
                        f"{algorithms()}")
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(f"algorithm={name!r} is not registered; expected 'auto' or one of "
                         f"{algorithms()}") from None
