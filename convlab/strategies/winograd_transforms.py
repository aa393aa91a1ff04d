"""Winograd (Cook–Toom) transform matrices, generated in exact rational arithmetic.

F(m, r) computes m outputs of a 1-D correlation with an r-tap filter from
``alpha = m + r - 1`` inputs with only alpha multiplications:

    y = A^T [ (G g) ⊙ (B^T d) ],    y_i = sum_k g_k d_{i+k}   (i < m, k < r)

The matrices come from polynomial evaluation and interpolation at alpha points:
``alpha - 1`` finite points p_j and the point at infinity (which stands for the
leading coefficient). With f_j = prod_{l != j} (p_j - p_l):

* ``A^T[i, j] = p_j ** i``;                the infinity column is e_{m-1};
* ``G[j, k]   = p_j ** k / f_j``;          the infinity row is e_{r-1};
* ``B^T[j, :]`` = the coefficients (lowest first) of prod_{l != j} (x - p_l);
  the infinity row holds those of prod_l (x - p_l).

Why these are right: the linear convolution s = g * h of lengths r and m is
``s = C [(E_g g) ⊙ (E_h h)]`` (evaluate both factors at the points, multiply,
interpolate with C); correlation is that map transposed with respect to h, which
gives A^T = E_h^T, G = E_g (with C's Lagrange denominators 1/f_j moved into it)
and B^T = C^T. The tests check the identity exactly in Fractions.

Everything is computed with :class:`fractions.Fraction` at import time; nothing is
typed in. B^T and A^T hold dyadic rationals for the point sets used here, so their
float32 copies are exact; the denominators f_j sit in G, which is applied once to
the weights, in float64.

2-D and 3-D transforms are the 1-D ones applied along each axis (nesting).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

KERNEL = 3  # r: the filter taps per axis that this module's tile sizes are built for

#: Finite interpolation points for F(m, 3), keyed by the output tile m. Measured in float32
#: on 2-D N(0, 1) data (``python bench/winograd_accuracy.py --points``; a search over 16
#: small dyadic and 3-adic candidates per extra point):
#: F(2): 0, ±1.
#: F(4): 0, ±1, 1/2, -2: 1.5x smaller error than the textbook 0, ±1, ±2 (1.1e-6 against
#:       1.7e-6 at IC 64); its mirror 0, ±1, -1/2, 2 is as good.
#: F(6): 0, ±1, ±2, ±1/2, the best of the search; the naive 0, ±1, ±2, ±3 makes the entries
#:       grow like 3**5 and is about 50x less accurate (1.5e-4 against 3.4e-6).
POINTS: dict[int, tuple[Fraction, ...]] = {
    2: tuple(map(Fraction, (0, 1, -1))),
    4: tuple(map(Fraction, (0, 1, -1))) + (Fraction(1, 2), Fraction(-2)),
    6: tuple(map(Fraction, (0, 1, -1, 2, -2))) + (Fraction(1, 2), Fraction(-1, 2)),
}

Matrix = tuple[tuple[Fraction, ...], ...]


@dataclass(frozen=True, eq=False)
class Transform:
    """The three matrices of F(m, r), exact. Rows and columns are tuples of Fractions.

    Compared and hashed by identity (``eq=False``): hashing the Fractions costs tens of
    microseconds, and callers key caches on the module's transforms."""

    m: int
    r: int
    points: tuple[Fraction, ...]
    AT: Matrix  # (m, alpha): output transform
    G: Matrix   # (alpha, r): weight transform
    BT: Matrix  # (alpha, alpha): input transform

    @property
    def alpha(self) -> int:
        return self.m + self.r - 1

    def arrays(self, dtype) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(A^T, G, B^T) as C-contiguous arrays of ``dtype`` (each entry rounded once)."""
        return tuple(np.array([[float(x) for x in row] for row in mat], dtype=dtype)
                     for mat in (self.AT, self.G, self.BT))


def poly_from_roots(roots: Sequence[Fraction]) -> tuple[Fraction, ...]:
    """Coefficients, lowest degree first, of prod (x - root)."""
    coeffs = [Fraction(1)]
    for root in roots:
        shifted = [Fraction(0)] + coeffs          # x * c(x)
        for t, c in enumerate(coeffs):            # - root * c(x)
            shifted[t] -= root * c
        coeffs = shifted
    return tuple(coeffs)


def cook_toom(m: int, r: int, points: Sequence) -> Transform:
    """F(m, r) from ``m + r - 2`` distinct finite points plus the point at infinity."""
    points = tuple(Fraction(p) for p in points)
    alpha = m + r - 1
    if m < 1 or r < 1:
        raise ValueError(f"F(m={m}, r={r}): expected m >= 1 and r >= 1")
    if len(points) != alpha - 1:
        raise ValueError(f"F({m}, {r}) needs {alpha - 1} finite points (alpha - 1), got "
                         f"{len(points)}: {points}")
    if len(set(points)) != len(points):
        raise ValueError(f"points={points} must be distinct")
    n = alpha - 1
    zero, one = Fraction(0), Fraction(1)
    f = []
    for j, pj in enumerate(points):
        product = one
        for other, po in enumerate(points):
            if other != j:
                product *= pj - po
        f.append(product)

    AT = tuple(tuple(points[j] ** i for j in range(n)) + (one if i == m - 1 else zero,)
               for i in range(m))
    G = tuple(tuple(points[j] ** k / f[j] for k in range(r)) for j in range(n)) \
        + (tuple(one if k == r - 1 else zero for k in range(r)),)
    rows = []
    for j in range(n):
        coeffs = poly_from_roots(points[:j] + points[j + 1:])
        rows.append(coeffs + (zero,) * (alpha - len(coeffs)))
    rows.append(poly_from_roots(points))
    BT = tuple(rows)
    return Transform(m=m, r=r, points=points, AT=AT, G=G, BT=BT)


def identity_transform() -> Transform:
    """F(1, 1): the 1x1 identity, used for spatial axes that a lower rank lifts away."""
    one = Fraction(1)
    return Transform(m=1, r=1, points=(), AT=((one,),), G=((one,),), BT=((one,),))


def correlate_exact(d: Sequence[Fraction], g: Sequence[Fraction]) -> tuple[Fraction, ...]:
    """The valid 1-D correlation y_i = sum_k g_k d_{i+k}, exact."""
    m = len(d) - len(g) + 1
    return tuple(sum((g[k] * d[i + k] for k in range(len(g))), Fraction(0)) for i in range(m))


def winograd_exact(t: Transform, d: Sequence[Fraction], g: Sequence[Fraction]):
    """A^T [(G g) ⊙ (B^T d)], exact: what F(m, r) computes for one tile."""
    Gg = [sum((row[k] * g[k] for k in range(t.r)), Fraction(0)) for row in t.G]
    BTd = [sum((row[k] * d[k] for k in range(t.alpha)), Fraction(0)) for row in t.BT]
    prod = [a * b for a, b in zip(Gg, BTd)]
    return tuple(sum((row[j] * prod[j] for j in range(t.alpha)), Fraction(0)) for row in t.AT)


TRANSFORMS: dict[int, Transform] = {m: cook_toom(m, KERNEL, POINTS[m]) for m in POINTS}
