"""What a column-block peer recovers from another entity's kernel rows: demonstrations, not tools.

The peer knows B_j (it shares the secret) and sees kernel rows K(A_ij, B_j') of another
entity's records (docs/design.md sections 1 and 2). :func:`reconstruct_gaussian` and
:func:`reconstruct_linear` try to recover each record from its kernel row. With
mbar >= n_j + 1 (Gaussian) or mbar >= n_j (linear) a row pins its record down; with
mbar < n_j (privacy rule 3) the exact solutions form a sphere (Gaussian) or an affine
subspace (linear) of dimension n_j - mbar, and records far apart inside [0, 1]^n_j have
identical kernel rows. Note what rule 3 does *not* hide: the component of the record along
the affine hull of the mbar points (Gaussian) or along the row space of B_j (linear) is
determined exactly; only the remaining n_j - mbar directions are free.

What a coordinator recovers through the requests it chooses is in
:mod:`ppsvm.experiments.coordinator_attacks`. Every function is pure: arrays in, a
:class:`Reconstruction` out.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

import numpy as np
from scipy.optimize import least_squares, linprog

# A start "fits equally well" when its largest residual (in squared-distance units for the
# Gaussian kernel, kernel units for the linear one) is below this.
FIT_TOLERANCE = 1e-10


@dataclass(frozen=True)
class Reconstruction:
    """The adversary's best guess for each record, and how far apart equally good guesses are.

    Attributes
    ----------
    X : ndarray, shape (m, n)
        Best solution per kernel row (smallest residual; the minimum-norm solution for the
        linear kernel).
    residual : ndarray, shape (m,)
        Largest absolute residual of ``X[k]``.
    pair : ndarray, shape (m, 2, n)
        Per row, the two solutions found that fit to ``FIT_TOLERANCE`` and lie farthest apart
        (both equal to ``X[k]`` when only one was found).
    spread : ndarray, shape (m,)
        ``||pair[k, 0] - pair[k, 1]||``: a lower bound on the diameter of the set of records in
        [0, 1]^n with this kernel row. Near 0 means the row pins the record down.
    solution_dim : int
        Dimension of the set of exact solutions in R^n for B in general position: linear
        n - rank(B); Gaussian max(n - mbar, 0), a sphere of that dimension (two points when
        mbar = n, one when mbar > n).
    """

    X: np.ndarray
    residual: np.ndarray
    pair: np.ndarray
    spread: np.ndarray
    solution_dim: int


def reconstruct_gaussian(
    K: np.ndarray,
    B: np.ndarray,
    mu: float,
    *,
    starts: int = 8,
    rng: np.random.Generator,
    tolerance: float = FIT_TOLERANCE,
) -> Reconstruction:
    """Recover records from Gaussian kernel rows against known points, by multi-start least squares.

    Row k gives the squared distances d_r^2 = -log(K[k, r]) / mu from the record a to each
    known point b_r; the residuals ||a - b_r||^2 - d_r^2 are minimised over a in [0, 1]^n
    (features are scaled to the unit box, which the adversary knows) from ``starts`` uniform
    random starting points.

    Parameters
    ----------
    K : ndarray, shape (m, mbar)
        Kernel rows exp(-mu ||a_k - b_r||^2), entries in (0, 1].
    B : ndarray, shape (mbar, n)
        The known points.
    mu : float
        The Gaussian width, > 0.
    starts : int
        Random starts per row.
    rng : numpy.random.Generator
        Draws the starting points.
    tolerance : float
        Largest residual (squared-distance units) of a start that counts as an exact fit.

    Returns
    -------
    Reconstruction
        ``spread`` is the largest distance between two exactly fitting starts.
    """
    K, B = check_kernel_rows(K, B)
    if not mu > 0:
        raise ValueError(f"Gaussian width mu must be > 0, got {mu}")
    if starts < 1:
        raise ValueError(f"starts must be >= 1, got {starts}")
    m, (mbar, n) = K.shape[0], B.shape
    squared = -np.log(np.clip(K, np.finfo(np.float64).tiny, None)) / mu
    X, residual, pair = np.empty((m, n)), np.empty(m), np.empty((m, 2, n))
    for k in range(m):

        def residuals(a: np.ndarray, d2: np.ndarray = squared[k]) -> np.ndarray:
            return ((a - B) ** 2).sum(axis=1) - d2

        def jacobian(a: np.ndarray) -> np.ndarray:
            return 2.0 * (a - B)

        solutions, errors = [], []
        for _ in range(starts):
            fit = least_squares(
                residuals,
                rng.random(n),
                jac=jacobian,
                bounds=(0.0, 1.0),
                method="dogbox",
                x_scale=1.0,
                xtol=1e-15,
                ftol=1e-15,
                gtol=1e-15,
                max_nfev=100,
            )
            solutions.append(fit.x)
            errors.append(np.abs(fit.fun).max())
        best = int(np.argmin(errors))
        X[k], residual[k] = solutions[best], errors[best]
        fitting = [s for s, e in zip(solutions, errors, strict=True) if e <= tolerance] or [solutions[best]]
        pair[k] = farthest_pair(np.asarray(fitting))
    return _result(X, residual, pair, max(n - mbar, 0))


def reconstruct_linear(K: np.ndarray, B: np.ndarray, *, rcond: float = 1e-10) -> Reconstruction:
    """Recover records from linear kernel rows k = B a against known B.

    The minimum-norm least-squares solution is the record when rank(B) = n (mbar >= n). Otherwise
    every a + z with B z = 0 has the same kernel row: for each row an exactly fitting point inside
    [0, 1]^n is found by a small LP (the one deepest inside the box), and the longest segment
    through it along a null-space basis direction that stays in the box gives two records with
    identical kernel rows.

    Parameters
    ----------
    K : ndarray, shape (m, mbar)
        Kernel rows B a_k.
    B : ndarray, shape (mbar, n)
    rcond : float
        Singular values below ``rcond`` times the largest count as zero.

    Returns
    -------
    Reconstruction
        ``X`` is the minimum-norm solution (it may leave the box); ``pair`` holds the segment's
        end points, both in [0, 1]^n to rounding (or ``X`` twice when rank(B) = n or the row fits
        no point of the box).
    """
    K, B = check_kernel_rows(K, B)
    _, singular, Vt = np.linalg.svd(B)
    rank = int((singular > rcond * singular[0]).sum())
    X = np.linalg.lstsq(B, K.T, rcond=rcond)[0].T
    residual = np.abs(X @ B.T - K).max(axis=1)
    null = Vt[rank:].T  # (n, n - rank), orthonormal columns with B @ null ~ 0
    pair = np.stack([X, X], axis=1)
    if null.shape[1]:
        for k in range(len(X)):
            inside = _deepest_in_box(X[k], null)
            if inside is not None:
                pair[k] = max((_chord(inside, z) for z in null.T), key=lambda p: np.linalg.norm(p[0] - p[1]))
    return _result(X, residual, pair, null.shape[1])


def farthest_pair(points: np.ndarray) -> np.ndarray:
    """The two rows of ``points`` (shape (p, n), p >= 1) farthest apart, shape (2, n)."""
    if len(points) == 1:
        return np.stack([points[0], points[0]])
    i, j = max(combinations(range(len(points)), 2), key=lambda ij: np.linalg.norm(points[ij[0]] - points[ij[1]]))
    return np.stack([points[i], points[j]])


def _deepest_in_box(particular: np.ndarray, null: np.ndarray) -> np.ndarray | None:
    """The point particular + null t in [0, 1]^n farthest from the box's faces (None if none fits)."""
    n, d = null.shape
    # Variables (t, s): maximise s subject to s <= particular + null t <= 1 - s.
    cost = np.zeros(d + 1)
    cost[-1] = -1.0
    ones = np.ones((n, 1))
    A_ub = np.vstack([np.hstack([-null, ones]), np.hstack([null, ones])])
    b_ub = np.concatenate([particular, 1.0 - particular])
    fit = linprog(cost, A_ub=A_ub, b_ub=b_ub, bounds=[(None, None)] * d + [(None, 0.5)], method="highs")
    if fit.status != 0 or fit.x[-1] < 0:
        return None
    return particular + null @ fit.x[:-1]


def _chord(point: np.ndarray, direction: np.ndarray) -> np.ndarray:
    """End points of the longest segment point + t direction inside [0, 1]^n, shape (2, n)."""
    moving = np.abs(direction) > 1e-12
    to_low, to_high = -point[moving] / direction[moving], (1.0 - point[moving]) / direction[moving]
    t_min, t_max = np.minimum(to_low, to_high).max(), np.maximum(to_low, to_high).min()
    return np.stack([point + t_min * direction, point + t_max * direction])


def check_kernel_rows(K: np.ndarray, B: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """K (m, mbar) and B (mbar, n) as float64 arrays; ValueError naming both shapes when they do not fit."""
    K, B = np.asarray(K, dtype=np.float64), np.asarray(B, dtype=np.float64)
    if K.ndim != 2 or B.ndim != 2 or K.shape[1] != B.shape[0]:
        raise ValueError(f"K must be (m, mbar) and B (mbar, n); got shapes {K.shape} and {B.shape}")
    return K, B


def _result(X: np.ndarray, residual: np.ndarray, pair: np.ndarray, solution_dim: int) -> Reconstruction:
    spread = np.linalg.norm(pair[:, 0] - pair[:, 1], axis=1)
    return Reconstruction(X=X, residual=residual, pair=pair, spread=spread, solution_dim=solution_dim)
