"""Random Fourier features and their frequencies, and the preprocessing that uses public records only.

Steps 1 and 2 of the hybrid DP pipeline (Li, Xiong, Ohno-Machado, Jiang 2014; see :mod:`ppsvm.core.dp`).
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import minimize
from scipy.spatial.distance import pdist

from ppsvm.core.checks import as_matrix, as_vector, check_count, check_generator, check_positive
from ppsvm.errors import DataError

logger = logging.getLogger(__name__)

# Public pairs used to learn rho: 200 public records have 19,900 pairs; 2,000 keep one evaluation
# at D = 100 near 10 ms, and held-out error was within 15% of the fit on 4,000 pairs (measured).
MAX_FREQUENCY_PAIRS = 2_000
# L-BFGS iterations when learning rho: past ~300 the held-out error barely moved (measured), and
# rho is public, so stopping at the cap costs approximation accuracy, never privacy.
MAX_FREQUENCY_ITERATIONS = 500
# Tolerance on the learned-rho objective (relative decrease and projected gradient).
FREQUENCY_TOL = 1e-12
# Bounds that keep rho'x finite for every record, whatever a model or request says: scaled values are
# clipped to [-SCALED_BOX, SCALED_BOX] (:func:`apply_scaling`) and rho's rows have absolute sum at most
# MAX_RHO_ROW_L1, so |rho'x| <= 1e12. Checked from the request alone, before any record is read.
SCALED_BOX = 1e6
MAX_RHO_ROW_L1 = 1e6
# The least a DP request's frequencies must turn (radians) across the box of records (:func:`phase_range`).
# Below it every record has nearly the same features and the certified solve degenerates: at D = 4,000 and
# 199 records, frequencies scaled by 1e-8 (phase range 3.5e-7) took 107 s and rho = 0 at D = 10,000 320 s,
# against 0.4 s at 1e-6 (3.5e-5); a kernel that changes by less than 1e-6 across the box learns nothing.
MIN_PHASE_RANGE = 1e-3


# --- random Fourier features ----------------------------------------------------------------------


def fourier_features(X: np.ndarray, rho: np.ndarray) -> np.ndarray:
    """The map zhat of Li et al.: interleaved cosines and sines of the projections.

    zhat(x) = (1/sqrt(D)) [cos(rho_1'x), sin(rho_1'x), ..., cos(rho_D'x), sin(rho_D'x)],
    so ||zhat(x)|| = 1 exactly and zhat(x)'zhat(x') = (1/D) sum_k cos(rho_k'(x - x')).

    Parameters
    ----------
    X : ndarray, shape (m, d)
    rho : ndarray, shape (D, d)

    Returns
    -------
    ndarray, shape (m, 2D)
    """
    A = as_matrix(X, "X")
    R = as_matrix(rho, "rho")
    if A.shape[1] != R.shape[1]:
        raise DataError(f"X has shape {A.shape} and rho has shape {R.shape}: both need the same number of features")
    n_freq = R.shape[0]
    P = A @ R.T
    Z = np.empty((A.shape[0], 2 * n_freq))
    scale = 1.0 / math.sqrt(n_freq)
    Z[:, 0::2] = np.cos(P) * scale
    Z[:, 1::2] = np.sin(P) * scale
    return Z


def random_frequencies(d: int, D: int, gamma: float, rng: np.random.Generator) -> np.ndarray:
    """Frequencies drawn from the Fourier transform of exp(-gamma ||x - y||^2) ("PrivateSVM").

    E[cos(rho'delta)] = exp(-sigma^2 ||delta||^2 / 2) for rho ~ N(0, sigma^2 I), so sigma^2 = 2 gamma.

    Parameters
    ----------
    d : int
        Number of input features.
    D : int
        Number of frequencies.
    gamma : float
        Kernel width, > 0.
    rng : numpy.random.Generator

    Returns
    -------
    ndarray, shape (D, d)
    """
    d = check_count(d, "d")
    D = check_count(D, "D")
    gamma = check_positive(gamma, "gamma")
    rng = check_generator(rng)
    return rng.normal(0.0, math.sqrt(2.0 * gamma), size=(D, d))


def frequency_objective(rho: np.ndarray, differences: np.ndarray, targets: np.ndarray) -> tuple[float, np.ndarray]:
    """Mean squared kernel-approximation error over pairs, and its gradient in rho.

    f(rho) = (1/P) sum_p ((1/D) sum_k cos(rho_k'delta_p) - t_p)^2. The mean (rather than the
    design's sum over pairs) has the same minimiser and makes tolerances independent of P.

    Parameters
    ----------
    rho : ndarray, shape (D, d)
    differences : ndarray, shape (P, d)
        delta_p = x_i - x_j for the pairs used.
    targets : ndarray, shape (P,)
        t_p = k(x_i, x_j).

    Returns
    -------
    value : float
    gradient : ndarray, shape (D, d)
    """
    n_freq = rho.shape[0]
    n_pairs = differences.shape[0]
    # einsum, not BLAS: these thin products (inner size d) took 2-20x longer through threaded
    # OpenBLAS on a busy 2-core machine, while einsum's single-threaded loops stay steady.
    projections = np.einsum("kd,pd->kp", rho, differences)
    residual = np.cos(projections).mean(axis=0) - targets
    value = float(residual @ residual) / n_pairs
    # d/d rho_k of cos(rho_k'delta) is -sin(rho_k'delta) delta.
    weighted = np.sin(projections) * residual
    gradient = (-2.0 / (n_freq * n_pairs)) * np.einsum("kp,pd->kd", weighted, differences)
    return value, gradient


def _sample_pairs(m: int, max_pairs: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """All pairs i > j when there are at most max_pairs, else max_pairs distinct ones at random."""
    total = m * (m - 1) // 2
    if total <= max_pairs:
        i, j = np.tril_indices(m, k=-1)
        return i, j
    k = rng.choice(total, size=max_pairs, replace=False)
    # Pair number k in the strict lower triangle, row-major: k = i(i-1)/2 + j with 0 <= j < i.
    i = ((1 + np.sqrt(1 + 8 * k.astype(float))) // 2).astype(np.int64)
    i -= (i * (i - 1) // 2 > k).astype(np.int64)  # undo a sqrt rounded up
    i += ((i + 1) * i // 2 <= k).astype(np.int64)  # or rounded down
    j = k - i * (i - 1) // 2
    return i, j


@dataclass(frozen=True)
class FrequencyFit:
    """Frequencies learned from public data, with how the fit went.

    Attributes
    ----------
    rho : ndarray, shape (D, d)
    gamma : float
        Kernel width that was approximated.
    objective_start, objective_end : float
        Mean squared error over the training pairs at the N(0, 2 gamma I) start and at the end.
    n_pairs : int
        Public pairs the objective used (after the cap).
    iterations : int
    seconds : float
    message : str
        The optimiser's stop reason.
    """

    rho: np.ndarray = field(repr=False)
    gamma: float
    objective_start: float
    objective_end: float
    n_pairs: int
    iterations: int
    seconds: float
    message: str


def learn_frequencies(
    X_public: np.ndarray,
    gamma: float,
    D: int,
    rng: np.random.Generator,
    *,
    max_pairs: int = MAX_FREQUENCY_PAIRS,
    tol: float = FREQUENCY_TOL,
    max_iterations: int = MAX_FREQUENCY_ITERATIONS,
) -> FrequencyFit:
    """Learn rho on public pairs so that zhat(x)'zhat(x') fits exp(-gamma ||x - x'||^2).

    Minimises :func:`frequency_objective` with L-BFGS-B and its analytic gradient, starting
    from rho ~ N(0, 2 gamma I) (the random map). The problem is non-convex: the result is a
    local minimiser near the random start. Since rho depends on public data only, how exactly
    it is minimised does not affect privacy.

    Parameters
    ----------
    X_public : ndarray, shape (m, d)
        Public records, scaled like the private ones.
    gamma : float
        Kernel width, > 0.
    D : int
        Number of frequencies.
    rng : numpy.random.Generator
        Draws the start and, above ``max_pairs``, the pair subsample.
    max_pairs : int, keyword-only
        Cap on the public pairs in the objective; above it a uniform sample without replacement.
    tol : float, keyword-only
        L-BFGS-B's ``ftol`` and ``gtol``.
    max_iterations : int, keyword-only

    Returns
    -------
    FrequencyFit
        ``rho`` has shape (D, d).
    """
    X = as_matrix(X_public, "X_public")
    if X.shape[0] < 2:
        raise DataError(f"X_public has shape {X.shape}: at least 2 public records are needed for pairs")
    gamma = check_positive(gamma, "gamma")
    D = check_count(D, "D")
    max_pairs = check_count(max_pairs, "max_pairs")
    max_iterations = check_count(max_iterations, "max_iterations")
    tol = check_positive(tol, "tol")
    rng = check_generator(rng)

    started = time.perf_counter()
    i, j = _sample_pairs(X.shape[0], max_pairs, rng)
    differences = X[i] - X[j]
    targets = np.exp(-gamma * np.einsum("pd,pd->p", differences, differences))
    rho0 = random_frequencies(X.shape[1], D, gamma, rng)
    shape = rho0.shape

    def fun(flat: np.ndarray) -> tuple[float, np.ndarray]:
        value, grad = frequency_objective(flat.reshape(shape), differences, targets)
        return value, grad.ravel()

    start_value = fun(rho0.ravel())[0]
    result = minimize(
        fun,
        rho0.ravel(),
        jac=True,
        method="L-BFGS-B",
        options={"maxiter": max_iterations, "ftol": tol, "gtol": tol, "maxcor": 20},
    )
    fit = FrequencyFit(
        rho=result.x.reshape(shape),
        gamma=gamma,
        objective_start=start_value,
        objective_end=float(result.fun),
        n_pairs=int(i.size),
        iterations=int(result.nit),
        seconds=time.perf_counter() - started,
        message=str(result.message),
    )
    logger.info(
        "learned %d frequencies on %d public pairs: mean squared error %.3g -> %.3g in %d iterations (%.1f s): %s",
        D,
        fit.n_pairs,
        fit.objective_start,
        fit.objective_end,
        fit.iterations,
        fit.seconds,
        fit.message,
    )
    return fit


# --- public-only preprocessing --------------------------------------------------------------------


def public_kernel_width(X_public: np.ndarray) -> float:
    """Median heuristic: gamma = 1 / median of the squared distances between public records.

    Then a typical pair has kernel value exp(-1). Public data only (docs/design.md).

    Parameters
    ----------
    X_public : ndarray, shape (m, d), m >= 2

    Returns
    -------
    float
    """
    X = as_matrix(X_public, "X_public")
    if X.shape[0] < 2:
        raise DataError(f"X_public has shape {X.shape}: at least 2 public records are needed")
    median = float(np.median(pdist(X, "sqeuclidean")))
    if not median > 0:
        raise DataError("more than half of the public pairs are identical records: the median distance is 0")
    return 1.0 / median


def public_scaling(X_public: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-feature minimum and maximum of the public records, for :func:`apply_scaling`.

    Parameters
    ----------
    X_public : ndarray, shape (m, d)

    Returns
    -------
    low, high : ndarray, shape (d,)
    """
    X = as_matrix(X_public, "X_public")
    return X.min(axis=0), X.max(axis=0)


def phase_range(rho: np.ndarray, low: np.ndarray, high: np.ndarray, box: tuple[np.ndarray, np.ndarray] | None) -> float:
    """How far the phase rho_k'x of the most turning frequency moves across a box of records (radians).

    max_k sum_j |rho_kj| w_j, where w_j is the box's width in feature j once scaled as :func:`apply_scaling`
    scales (the scaling's own [0, 1], and 0 for a feature it declares constant, when no box is declared).
    From a request and public bounds alone: it decides a refusal before any record is read.

    Parameters
    ----------
    rho : ndarray, shape (D, d)
    low, high : ndarray, shape (d,)
        The scaling, high >= low.
    box : (ndarray, ndarray) of shape (d,) each, or None
        The declared bounds of the records.
    """
    span = np.where(high > low, high - low, 1.0)
    if box is None:
        widths = (high > low).astype(float)
    else:
        with np.errstate(over="ignore"):
            widths = np.minimum((box[1] - box[0]) / span, 2.0 * SCALED_BOX)
    return float((np.abs(rho) @ widths).max())


def apply_scaling(X: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """Map features to [0, 1] by the public range: (x - low) / (high - low), clipped to the box +-SCALED_BOX.

    Private values outside the public range land outside [0, 1] and are kept up to the box: zhat has
    norm 1 whatever its input, so the DP bounds hold. A feature constant on the public data is only
    shifted (divisor 1). The result is finite for every record and every finite scaling, so nothing
    computed from it can fail on what a record holds: a subnormal span that would overflow lands on the
    box (an inf / inf that would be NaN lands on 0), since whether it overflowed is a fact about the
    record (issue 27: bisecting such a span read a feature's maximum exactly from a failure).

    Parameters
    ----------
    X : ndarray, shape (m, d)
    low, high : ndarray, shape (d,)

    Returns
    -------
    ndarray, shape (m, d)
        Entries in [-SCALED_BOX, SCALED_BOX].
    """
    A = as_matrix(X, "X")
    lo = as_vector(low, "low", A.shape[1])
    hi = as_vector(high, "high", A.shape[1])
    if (hi < lo).any():
        raise DataError("high < low for some feature: pass public_scaling's (low, high) in that order")
    with np.errstate(over="ignore", invalid="ignore"):
        span = np.where(hi > lo, hi - lo, 1.0)
        scaled = (A - lo) / span
    return np.clip(np.nan_to_num(scaled, nan=0.0, posinf=SCALED_BOX, neginf=-SCALED_BOX), -SCALED_BOX, SCALED_BOX)


@dataclass(frozen=True)
class PublicPreprocessing:
    """What the DP methods take from the public records alone: the scaling, the scaled records and the width.

    Attributes
    ----------
    low, high : ndarray, shape (d,)
        :func:`public_scaling`.
    scaled : ndarray, shape (m, d)
        The public records mapped by :func:`apply_scaling`.
    width : float
        :func:`public_kernel_width` of ``scaled``.
    """

    low: np.ndarray
    high: np.ndarray
    scaled: np.ndarray = field(repr=False)
    width: float


def public_preprocessing(X_public: np.ndarray) -> PublicPreprocessing:
    """Scaling and kernel width from the public records (no privacy cost), as every DP method uses them.

    Parameters
    ----------
    X_public : ndarray, shape (m, d)

    Returns
    -------
    PublicPreprocessing
    """
    low, high = public_scaling(X_public)
    scaled = apply_scaling(X_public, low, high)
    return PublicPreprocessing(low, high, scaled, public_kernel_width(scaled))
