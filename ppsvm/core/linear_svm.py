"""Exact SVM solvers (dual coordinate descent) with a certified duality gap, as the DP sensitivity proofs need.

Step 3 of the hybrid DP pipeline (see :mod:`ppsvm.core.dp`): the linear SVM on Fourier features, and the
kernel SVM the baselines use.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import TypedDict

import numpy as np
import scipy.linalg

from ppsvm.core.checks import as_matrix, check_count, check_generator, check_labels, check_positive
from ppsvm.errors import DataError, SolverError

logger = logging.getLogger(__name__)

# SVM cost C in the (C/n) * sum hinge convention; C = 1 is CMS's Lambda = 1.
DEFAULT_C = 1.0
# First projected-gradient target of dual coordinate descent: a cheap per-sweep convergence test.
# What the privacy proofs use is the duality gap (GAP_BOUND); the target is tightened until it holds.
DUAL_CD_TOL = 1e-10
# Rounding level of the projected gradient y_i w'z_i - 1 relative to 1 + ||w|| (||z_i|| <= 1, doubles): a
# projected-gradient target below MIN_DUAL_CD_TOL * (1 + ||w||) is noise, so the solver gives up there.
MIN_DUAL_CD_TOL = 1e-14
# Certified duality gap of train_linear_svm, a fixed constant (never the achieved gap, which depends on the
# data). The objective is 1-strongly convex, so (1/2)||w - w*||^2 <= P(w) - P(w*) <= gap: the released w is
# within SOLVER_L2_ERROR of the exact minimiser w* the sensitivity proofs assume. 1e-12 is reached on
# WDBC- and Adult-size problems (569 and 9,000 records, D = 100, C = 1 to 1000) with 0-37% more sweeps than
# the old rule (projected gradient <= 1e-10 alone, which left gaps up to 6.6e-10), and lies above the rounding
# floor of the computed gap up to C ~ 1000 (at C = 3000 that floor passes it and training is refused).
# It adds 2 sqrt(2D) * 1.4e-6 to the L1 sensitivity: +0.6% for n = 9,000, D = 100, C = 1.
GAP_BOUND = 1e-12
SOLVER_L2_ERROR = math.sqrt(2.0 * GAP_BOUND)
# Safety cap on dual CD sweeps: the proofs need the exact minimiser, so hitting it is an error.
MAX_DUAL_CD_SWEEPS = 200_000


# --- exact SVM solvers ----------------------------------------------------------------------------


@dataclass(frozen=True)
class _DualSolution:
    alpha: np.ndarray
    w: np.ndarray
    sweeps: int
    pg_gap: float
    duality_gap: float


def _kkt(YZ: np.ndarray, alpha: np.ndarray, w: np.ndarray, upper: float) -> tuple[float, float]:
    """Projected-gradient gap and primal-dual gap of the hinge SVM dual at (alpha, w)."""
    G = YZ @ w - 1.0
    PG = np.where(alpha <= 0.0, np.minimum(G, 0.0), np.where(alpha >= upper, np.maximum(G, 0.0), G))
    # primal - dual = sum_i alpha_i G_i + U max(0, -G_i) when w = sum_i alpha_i y_i z_i
    duality_gap = float(alpha @ G + upper * np.maximum(-G, 0.0).sum())
    return float(PG.max() - PG.min()), max(duality_gap, 0.0)


def _dual_coordinate_descent(
    YZ: np.ndarray, upper: float, *, tol: float, gap_bound: float, rng: np.random.Generator, max_sweeps: int
) -> _DualSolution:
    """Dual CD with shrinking (Hsieh et al. 2008) for min (1/2)||sum a_i yz_i||^2 - sum a_i, 0 <= a_i <= upper.

    Shrinking drops coordinates stuck at a bound from the sweeps; convergence is declared only
    when, over *all* coordinates and from a fresh w = YZ' alpha (no drift from incremental
    updates), the projected gradient spans at most ``tol`` and the duality gap is at most
    ``gap_bound``. When the first holds but not the second, the projected-gradient target is
    divided by 10 and the sweeps go on; once it falls to rounding level (MIN_DUAL_CD_TOL times
    1 + ||w||) the gap cannot be certified and SolverError is raised.
    """
    n = YZ.shape[0]
    rows = list(YZ)  # row views: iterating a list is much cheaper than indexing YZ[i]
    diag = np.einsum("ij,ij->i", YZ, YZ)
    alpha = np.zeros(n)
    w = np.zeros(YZ.shape[1])
    active = np.arange(n)
    pg_max_old, pg_min_old = math.inf, -math.inf
    target = tol
    for sweep in range(1, max_sweeps + 1):
        rng.shuffle(active)
        keep = np.ones(active.size, dtype=bool)
        pg_max, pg_min = -math.inf, math.inf
        for pos, i in enumerate(active.tolist()):
            row = rows[i]
            a = alpha[i]
            g = float(row @ w) - 1.0
            if a == 0.0:
                if g > pg_max_old:  # strictly above every violation seen: will stay at 0
                    keep[pos] = False
                    continue
                pg = min(g, 0.0)
            elif a == upper:
                if g < pg_min_old:
                    keep[pos] = False
                    continue
                pg = max(g, 0.0)
            else:
                pg = g
            pg_max = max(pg_max, pg)
            pg_min = min(pg_min, pg)
            if pg != 0.0:
                q = diag[i]
                # A zero row has constant gradient -1: its optimum is the upper bound.
                new = upper if q <= 0.0 else min(max(a - g / q, 0.0), upper)
                if new != a:
                    w += (new - a) * row
                    alpha[i] = new
        active = active[keep]
        if pg_max - pg_min <= target or active.size == 0:
            w = YZ.T @ alpha
            pg_gap, duality_gap = _kkt(YZ, alpha, w, upper)
            if pg_gap <= target and duality_gap <= gap_bound:
                return _DualSolution(alpha, w, sweeps=sweep, pg_gap=pg_gap, duality_gap=duality_gap)
            if pg_gap <= target:
                target /= 10.0
                if target < MIN_DUAL_CD_TOL * (1.0 + math.sqrt(float(w @ w))):
                    # The gaps go to the local log only: an error message must not carry values derived from data.
                    logger.warning("dual CD stuck: projected-gradient gap %.3g, duality gap %.3g", pg_gap, duality_gap)
                    raise SolverError(
                        f"dual coordinate descent cannot certify a duality gap <= {gap_bound:g}: the projected "
                        "gradient is at rounding level; the DP sensitivity bound needs that certificate (lower C)"
                    )
            # Converged on the shrunken set only, or a tighter target: sweep all again, no shrinking thresholds.
            active = np.arange(n)
            pg_max_old, pg_min_old = math.inf, -math.inf
            continue
        pg_max_old = pg_max if pg_max > 0.0 else math.inf
        pg_min_old = pg_min if pg_min < 0.0 else -math.inf
    pg_gap, duality_gap = _kkt(YZ, alpha, YZ.T @ alpha, upper)
    logger.warning("dual CD out of sweeps: projected-gradient gap %.3g, duality gap %.3g", pg_gap, duality_gap)
    raise SolverError(
        f"dual coordinate descent did not reach projected-gradient gap {target:g} and duality gap {gap_bound:g} in "
        f"{max_sweeps} sweeps; the DP guarantees need the exact minimiser"
    )


@dataclass(frozen=True)
class LinearSVM:
    """The hinge-loss SVM without intercept, within a certified duality gap of its exact minimiser.

    Attributes
    ----------
    w : ndarray, shape (p,)
    alpha : ndarray, shape (n,)
        Dual variables, 0 <= alpha_i <= C/n, w = sum_i alpha_i y_i z_i.
    objective : float
        (1/2)||w||^2 + (C/n) sum_i hinge at w.
    duality_gap : float
        Certified: at most :data:`GAP_BOUND`, and ||w - w*|| <= sqrt(2 * duality_gap).
    sweeps : int
    """

    w: np.ndarray = field(repr=False)
    alpha: np.ndarray = field(repr=False)
    objective: float
    duality_gap: float
    sweeps: int


def hinge_objective(w: np.ndarray, Z: np.ndarray, y: np.ndarray, C: float) -> float:
    """(1/2)||w||^2 + (C/n) sum_i max(0, 1 - y_i w'z_i); w (p,), Z (n, p), y (n,)."""
    margins = y * (Z @ w)
    return float(0.5 * w @ w + C / y.size * np.maximum(0.0, 1.0 - margins).sum())


class _DescentSettings(TypedDict):
    """The keyword arguments of :func:`_dual_coordinate_descent` that come from the caller, checked."""

    tol: float
    rng: np.random.Generator
    max_sweeps: int


def _solver_settings(
    rows: np.ndarray,
    name: str,
    y: np.ndarray,
    C: float,
    tol: float,
    rng: np.random.Generator | None,
    max_sweeps: int,
) -> tuple[np.ndarray, float, _DescentSettings]:
    """The checked labels, C and coordinate-descent settings (tol, rng, max_sweeps) both solvers take.

    Checked in one place so the two solvers accept and refuse the same arguments with the same messages.
    """
    labels = check_labels(y, rows.shape[0], name)
    C = check_positive(C, "C")
    settings: _DescentSettings = {
        "tol": check_positive(tol, "tol"),
        # Sweep order only (the minimiser is unique): a fixed seed when omitted, so results repeat.
        "rng": np.random.default_rng(0) if rng is None else check_generator(rng),
        "max_sweeps": check_count(max_sweeps, "max_sweeps"),
    }
    return labels, C, settings


def train_linear_svm(
    Z: np.ndarray,
    y: np.ndarray,
    C: float = DEFAULT_C,
    *,
    tol: float = DUAL_CD_TOL,
    rng: np.random.Generator | None = None,
    max_sweeps: int = MAX_DUAL_CD_SWEEPS,
) -> LinearSVM:
    """Minimiser of (1/2)||w||^2 + (C/n) sum_i max(0, 1 - y_i w'z_i), no intercept, to a certified gap.

    No intercept because an un-noised intercept may not be released (docs/design.md). Solved by
    dual coordinate descent: max sum_i a_i - (1/2)||sum_i a_i y_i z_i||^2 over 0 <= a_i <= C/n,
    w = sum_i a_i y_i z_i, with shuffled sweeps until the projected gradient spans <= ``tol``
    *and* the duality gap P(w) - dual(a) is at most :data:`GAP_BOUND` (else SolverError).

    Why the gap. The sensitivity proofs hold for the exact minimiser w*. P is 1-strongly convex,
    so (1/2)||w - w*||^2 <= P(w) - P(w*) <= P(w) - dual(a) <= GAP_BOUND, i.e.
    ||w - w*|| <= :data:`SOLVER_L2_ERROR` = sqrt(2 GAP_BOUND). Neighbouring datasets then give
    computed weights within 2 SOLVER_L2_ERROR of the exact ones' distance, a term that
    :func:`l2_sensitivity` and :func:`laplace_sensitivity` add. The bound is a constant, not the
    gap achieved (that depends on the data, and so would the noise).

    Parameters
    ----------
    Z : ndarray, shape (n, p)
    y : ndarray, shape (n,)
        Labels in {-1, +1}.
    C : float
        Cost, > 0 (scikit-learn's C is C/n).
    tol : float, keyword-only
        First projected-gradient target; divided by 10 while the duality gap exceeds GAP_BOUND.
    rng : numpy.random.Generator, optional, keyword-only
        Sweep order only (the minimiser is unique); a fixed seed when omitted, so results repeat.
    max_sweeps : int, keyword-only

    Returns
    -------
    LinearSVM
        ``w`` has shape (p,), ``alpha`` shape (n,).
    """
    A = as_matrix(Z, "Z")
    labels, C, settings = _solver_settings(A, "Z", y, C, tol, rng, max_sweeps)
    solution = _dual_coordinate_descent(labels[:, None] * A, C / labels.size, gap_bound=GAP_BOUND, **settings)
    return LinearSVM(
        w=solution.w,
        alpha=solution.alpha,
        objective=hinge_objective(solution.w, A, labels, C),
        duality_gap=solution.duality_gap,
        sweeps=solution.sweeps,
    )


@dataclass(frozen=True)
class KernelSVM:
    """A kernel SVM with a regularised intercept, for the public-only baseline.

    Attributes
    ----------
    dual_coef : ndarray, shape (n,)
        alpha_i y_i; the decision at x is sum_i dual_coef_i (k(x_i, x) + 1).
    objective : float
        Dual objective value, (1/2) a'Qa - sum a (minimised).
    sweeps : int
    """

    dual_coef: np.ndarray = field(repr=False)
    objective: float
    sweeps: int


def train_kernel_svm(
    K: np.ndarray,
    y: np.ndarray,
    C: float = DEFAULT_C,
    *,
    tol: float = DUAL_CD_TOL,
    rng: np.random.Generator | None = None,
    max_sweeps: int = MAX_DUAL_CD_SWEEPS,
) -> KernelSVM:
    """Kernel SVM on a precomputed Gram matrix, for a few hundred public records.

    The intercept b is a constant feature of value 1, so the kernel becomes K + 1 and b is
    regularised with w (as in LIBLINEAR's bias): the dual keeps box constraints only and the
    same coordinate descent applies. Public data need no privacy, so nothing is noised here.
    The objective is (1/2)(||w||^2 + b^2) + (C/n) sum_i hinge(y_i (w'phi(x_i) + b)).

    The solver factors K + 1 = Phi Phi' (eigendecomposition, dropping eigenvalues below
    rounding level) and runs the linear dual CD on the rows of Phi: the duals are the same.

    Parameters
    ----------
    K : ndarray, shape (n, n)
        Symmetric positive semi-definite Gram matrix of the training records.
    y : ndarray, shape (n,)
        Labels in {-1, +1}.
    C : float
        Cost, > 0, in the (C/n) sum hinge convention.
    tol : float, keyword-only
        Projected-gradient gap at convergence (no duality-gap certificate: the data are public).
    rng, max_sweeps : keyword-only
        As in :func:`train_linear_svm`.

    Returns
    -------
    KernelSVM
    """
    G = as_matrix(K, "K")
    if G.shape[0] != G.shape[1]:
        raise DataError(f"K must be square (n x n Gram matrix), got shape {G.shape}")
    if not np.allclose(G, G.T, rtol=1e-10, atol=1e-12):
        raise DataError("K is not symmetric: pass the Gram matrix of the training records")
    labels, C, settings = _solver_settings(G, "K", y, C, tol, rng, max_sweeps)
    eigenvalues, vectors = scipy.linalg.eigh(G + 1.0)
    keep = eigenvalues > eigenvalues.max() * G.shape[0] * np.finfo(float).eps
    Phi = vectors[:, keep] * np.sqrt(eigenvalues[keep])
    # Public data: no privacy proof needs a certified gap.
    solution = _dual_coordinate_descent(labels[:, None] * Phi, C / labels.size, gap_bound=math.inf, **settings)
    objective = 0.5 * float(solution.w @ solution.w) - float(solution.alpha.sum())
    return KernelSVM(dual_coef=solution.alpha * labels, objective=objective, sweeps=solution.sweeps)


def decision(K_new: np.ndarray, model: KernelSVM) -> np.ndarray:
    """Decision values of a :class:`KernelSVM` (predict with their sign).

    Parameters
    ----------
    K_new : ndarray, shape (m, n)
        Kernel between the new points and the n training records.
    model : KernelSVM

    Returns
    -------
    ndarray, shape (m,)
    """
    A = as_matrix(K_new, "K_new")
    if A.shape[1] != model.dual_coef.size:
        raise DataError(f"K_new has shape {A.shape}; the model was trained on {model.dual_coef.size} records")
    return (A + 1.0) @ model.dual_coef
