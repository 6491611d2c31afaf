"""Hybrid differentially private RBF SVM (Li, Xiong, Ohno-Machado, Jiang 2014).

Pipeline (DESIGN.md section 1, method 3):

1. From *public* records only: the feature scaling (:func:`public_scaling`), the
   kernel width (:func:`public_kernel_width`) and the frequencies rho of a
   random-Fourier-feature map, either learned (:func:`learn_frequencies`) or
   drawn from the kernel's Fourier transform (:func:`random_frequencies`, the
   "PrivateSVM" baseline of Rubinstein et al.).
2. Each private holder maps its rows with :func:`fourier_features`; every
   mapped row has norm exactly 1, which is what the sensitivity bounds need.
3. A linear SVM without intercept is trained to its exact minimiser
   (:func:`train_linear_svm`) and released through one of the mechanisms
   (:func:`private_weights`): the Laplace mechanism of the paper, or the
   output / objective perturbation of Chaudhuri, Monteleoni and Sarwate
   (JMLR 2011, "CMS" below), which add less noise for the same epsilon.

Conventions. The SVM objective is

    (1/2)||w||^2 + (C/n) * sum_i max(0, 1 - y_i w'z_i),      n = number of records,

i.e. scikit-learn's ``C_s = C/n``. Dividing by C gives CMS's form
``J(w) = (1/n) sum_i loss + (Lambda/2)||w||^2`` with ``Lambda = 1/C``.
Neighbouring datasets have the same n and differ in one record (replacement);
n is treated as public.

Noise must come from the OS CSPRNG in production code (:func:`secure_generator`, and
``secrets.SystemRandom`` for the Laplace mechanism's integer noise); the mechanisms take a
generator only so that tests can inject a seeded one. Only the Laplace mechanism is
floating-point safe (:mod:`ppsvm.core.noise`); the other two draw continuous noise in floating point.

The sensitivities hold for the weights :func:`train_linear_svm` computes, not only for the exact
minimiser: it certifies a duality gap <= GAP_BOUND, and the bounds add the resulting distance.
"""

from __future__ import annotations

import logging
import math
import secrets
import time
from dataclasses import dataclass, field
from numbers import Integral, Real
from typing import Literal, TypeGuard

import numpy as np
import scipy.linalg
from scipy.optimize import minimize
from scipy.spatial.distance import pdist

from ppsvm.core.noise import grid_laplace_parameters, grid_laplace_release, integer_source
from ppsvm.errors import DataError, PrivacyError, SolverError

logger = logging.getLogger(__name__)

# --- defaults -------------------------------------------------------------------------------------

# Number of frequencies D (2D features): enough for a good RBF approximation on tens of
# features while keeping the Laplace noise (which grows like sqrt(D) per coordinate) moderate.
DEFAULT_N_FREQUENCIES = 100
# SVM cost C in the (C/n) * sum hinge convention; C = 1 is CMS's Lambda = 1.
DEFAULT_C = 1.0
# Huber parameter h for objective perturbation: CMS use h = 0.5 in their experiments; c = 1/(2h) = 1.
DEFAULT_HUBER_H = 0.5
# Public pairs used to learn rho: 200 public records have 19,900 pairs; 2,000 keep one evaluation
# at D = 100 near 10 ms, and held-out error was within 15% of the fit on 4,000 pairs (measured).
MAX_FREQUENCY_PAIRS = 2_000
# L-BFGS iterations when learning rho: past ~300 the held-out error barely moved (measured), and
# rho is public, so stopping at the cap costs approximation accuracy, never privacy.
MAX_FREQUENCY_ITERATIONS = 500
# Tolerance on the learned-rho objective (relative decrease and projected gradient).
FREQUENCY_TOL = 1e-12
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
# Newton's method on the perturbed Huber objective stops at this max-abs gradient.
NEWTON_TOL = 1e-12
MAX_NEWTON_ITERATIONS = 200
# Rows of zhat have norm 1 up to rounding of cos^2 + sin^2; anything larger is not a zhat.
NORM_SLACK = 1e-9
# Random bits seeding the noise generator (the OS CSPRNG).
SEED_BITS = 256

# --- mechanisms -----------------------------------------------------------------------------------

Mechanism = Literal["laplace", "output-gamma", "objective", "none"]
MECHANISMS: tuple[str, ...] = ("laplace", "output-gamma", "objective")
NON_PRIVATE = "none"

GUARANTEES: dict[str, str] = {
    "laplace": (
        "epsilon-DP (one record replaced), floating-point safe: hinge-loss SVM weights (duality gap certified "
        f"<= {GAP_BOUND:g}) rounded to a power-of-two grid plus exact discrete Laplace noise of scale "
        "(Delta + 2D grid units) / epsilon per coordinate, Delta = 2^2.5 C sqrt(D) / n (Li et al. 2014) "
        f"+ 2 sqrt(2D) sqrt(2 * {GAP_BOUND:g}) for the solver."
    ),
    "output-gamma": (
        "epsilon-DP (one record replaced) in exact arithmetic: hinge-loss SVM weights (duality gap certified "
        f"<= {GAP_BOUND:g}) plus noise with density proportional to exp(-epsilon ||b|| / s), "
        f"s = 2C/n + 2 sqrt(2 * {GAP_BOUND:g}) "
        "the L2 sensitivity (Chaudhuri, Monteleoni, Sarwate 2011, Algorithm 1); continuous floating-point "
        "noise: not hardened against the floating-point attack (Mironov 2012)."
    ),
    "objective": (
        "epsilon-DP (one record replaced) in exact arithmetic: the minimiser of a randomly perturbed Huber-loss "
        "SVM objective (Chaudhuri, Monteleoni, Sarwate 2011, Algorithm 2); not the hinge-loss SVM; continuous "
        "floating-point noise: not hardened against the floating-point attack (Mironov 2012)."
    ),
    "none": "NOT PRIVATE: the exact hinge-loss SVM weights with no noise; they can reveal training records.",
}


def is_mechanism(name: str) -> TypeGuard[Mechanism]:
    """Whether ``name`` is a :data:`Mechanism`, private or ``"none"`` (narrows a checked string)."""
    return name == NON_PRIVATE or name in MECHANISMS


# --- validation helpers ---------------------------------------------------------------------------


def _check_real(value: object, name: str) -> float:
    """A real number (not bool), else TypeError."""
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    return float(value)


def _check_positive(value: object, name: str) -> float:
    """A finite real > 0: TypeError for a wrong type, ValueError for a wrong value."""
    x = _check_real(value, name)
    if not (math.isfinite(x) and x > 0):
        raise ValueError(f"{name} must be finite and > 0, got {x}")
    return x


def _check_count(value: object, name: str) -> int:
    """An integer >= 1."""
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}")
    if value < 1:
        raise ValueError(f"{name} must be >= 1, got {value}")
    return int(value)


def _check_epsilon(epsilon: object) -> float:
    """A privacy budget: finite and > 0, else PrivacyError (the setting is refused, not malformed)."""
    eps = _check_real(epsilon, "epsilon")
    if not (math.isfinite(eps) and eps > 0):
        raise PrivacyError(
            f"epsilon must be finite and > 0, got {eps}: epsilon <= 0 is not a privacy level, and an "
            f"infinite or NaN epsilon gives no guarantee (use mechanism {NON_PRIVATE!r} to say so explicitly)"
        )
    return eps


def _check_generator(rng: object) -> np.random.Generator:
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    return rng


def _as_matrix(X: object, name: str) -> np.ndarray:
    """A finite 2-D float array, else DataError naming the shape."""
    A = np.asarray(X, dtype=float)
    if A.ndim != 2:
        raise DataError(f"{name} must be 2-D (records x features), got shape {A.shape}")
    if A.shape[0] == 0 or A.shape[1] == 0:
        raise DataError(f"{name} is empty: shape {A.shape}")
    if not np.isfinite(A).all():
        rows = np.flatnonzero(~np.isfinite(A).all(axis=1))
        raise DataError(f"{name} has non-finite values in {rows.size} rows (first: row {rows[0]})")
    return A


def _as_vector(v: object, name: str, size: int | None = None) -> np.ndarray:
    a = np.asarray(v, dtype=float)
    if a.ndim != 1:
        raise DataError(f"{name} must be 1-D, got shape {a.shape}")
    if size is not None and a.size != size:
        raise DataError(f"{name} has shape {a.shape}, expected ({size},)")
    if not np.isfinite(a).all():
        raise DataError(f"{name} has non-finite entries")
    return a


def _check_labels(y: object, n_rows: int, matrix_name: str) -> np.ndarray:
    """Labels of shape (n_rows,) in {-1, +1}, as floats."""
    labels = np.asarray(y)
    if labels.ndim != 1 or labels.shape[0] != n_rows:
        raise DataError(f"y has shape {labels.shape} but {matrix_name} has {n_rows} rows: expected ({n_rows},)")
    try:
        labels = labels.astype(float)
    except (TypeError, ValueError) as exc:
        raise DataError(f"labels must be -1 or +1, got dtype {np.asarray(y).dtype}") from exc
    bad = np.flatnonzero((labels != 1.0) & (labels != -1.0))
    if bad.size:
        raise DataError(
            f"labels must be -1 or +1; {bad.size} are not (first: y[{bad[0]}] = {np.asarray(y)[bad[0]].tolist()!r})"
        )
    return labels


def _check_unit_rows(Z: np.ndarray) -> None:
    """Every sensitivity bound here assumes ||z_i|| <= 1: refuse larger rows."""
    norms = np.linalg.norm(Z, axis=1)
    bad = np.flatnonzero(norms > 1.0 + NORM_SLACK)
    if bad.size:
        raise DataError(
            f"{bad.size} feature rows have norm > 1 (first: row {bad[0]}, norm {norms[bad[0]]:.12g}); "
            "the DP mechanisms need ||z|| <= 1, which fourier_features guarantees"
        )


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
    A = _as_matrix(X, "X")
    R = _as_matrix(rho, "rho")
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
    d = _check_count(d, "d")
    D = _check_count(D, "D")
    gamma = _check_positive(gamma, "gamma")
    rng = _check_generator(rng)
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
    X = _as_matrix(X_public, "X_public")
    if X.shape[0] < 2:
        raise DataError(f"X_public has shape {X.shape}: at least 2 public records are needed for pairs")
    gamma = _check_positive(gamma, "gamma")
    D = _check_count(D, "D")
    max_pairs = _check_count(max_pairs, "max_pairs")
    max_iterations = _check_count(max_iterations, "max_iterations")
    tol = _check_positive(tol, "tol")
    rng = _check_generator(rng)

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

    Then a typical pair has kernel value exp(-1). Public data only (DESIGN.md).

    Parameters
    ----------
    X_public : ndarray, shape (m, d), m >= 2

    Returns
    -------
    float
    """
    X = _as_matrix(X_public, "X_public")
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
    X = _as_matrix(X_public, "X_public")
    return X.min(axis=0), X.max(axis=0)


def apply_scaling(X: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """Map features to [0, 1] by the public range: (x - low) / (high - low).

    Private values outside the public range land outside [0, 1] and are kept, not clipped:
    zhat has norm 1 whatever its input, so the DP bounds hold. A feature constant on the
    public data is only shifted (divisor 1).

    Parameters
    ----------
    X : ndarray, shape (m, d)
    low, high : ndarray, shape (d,)

    Returns
    -------
    ndarray, shape (m, d)
    """
    A = _as_matrix(X, "X")
    lo = _as_vector(low, "low", A.shape[1])
    hi = _as_vector(high, "high", A.shape[1])
    if (hi < lo).any():
        raise DataError("high < low for some feature: pass public_scaling's (low, high) in that order")
    span = np.where(hi > lo, hi - lo, 1.0)
    return (A - lo) / span


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

    No intercept because an un-noised intercept may not be released (DESIGN.md). Solved by
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
    A = _as_matrix(Z, "Z")
    labels = _check_labels(y, A.shape[0], "Z")
    C = _check_positive(C, "C")
    tol = _check_positive(tol, "tol")
    order_rng = np.random.default_rng(0) if rng is None else _check_generator(rng)
    upper = C / labels.size
    solution = _dual_coordinate_descent(
        labels[:, None] * A,
        upper,
        tol=tol,
        gap_bound=GAP_BOUND,
        rng=order_rng,
        max_sweeps=_check_count(max_sweeps, "max_sweeps"),
    )
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
    G = _as_matrix(K, "K")
    if G.shape[0] != G.shape[1]:
        raise DataError(f"K must be square (n x n Gram matrix), got shape {G.shape}")
    if not np.allclose(G, G.T, rtol=1e-10, atol=1e-12):
        raise DataError("K is not symmetric: pass the Gram matrix of the training records")
    labels = _check_labels(y, G.shape[0], "K")
    C = _check_positive(C, "C")
    tol = _check_positive(tol, "tol")
    order_rng = np.random.default_rng(0) if rng is None else _check_generator(rng)
    eigenvalues, vectors = scipy.linalg.eigh(G + 1.0)
    keep = eigenvalues > eigenvalues.max() * G.shape[0] * np.finfo(float).eps
    Phi = vectors[:, keep] * np.sqrt(eigenvalues[keep])
    solution = _dual_coordinate_descent(
        labels[:, None] * Phi,
        C / labels.size,
        tol=tol,
        gap_bound=math.inf,  # public data: no privacy proof needs a certified gap
        rng=order_rng,
        max_sweeps=_check_count(max_sweeps, "max_sweeps"),
    )
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
    A = _as_matrix(K_new, "K_new")
    if A.shape[1] != model.dual_coef.size:
        raise DataError(f"K_new has shape {A.shape}; the model was trained on {model.dual_coef.size} records")
    return (A + 1.0) @ model.dual_coef


# --- sensitivities and mechanisms -----------------------------------------------------------------


def exact_l2_sensitivity(C: float, n: int) -> float:
    """2C/n: the L2 sensitivity of the *exact* hinge (or any 1-Lipschitz convex loss) SVM weights.

    Proof (CMS Corollary 8, with Lambda = 1/C; no differentiability needed). Let G be the
    objective's common part, 1-strongly convex, and a, b the two differing terms (C/n) loss(.),
    convex and (C/n)-Lipschitz in w because ||z|| <= 1. The minimisers w of G + a and w' of G + b
    satisfy (G+a)(w') >= (G+a)(w) + ||w - w'||^2/2 and (G+b)(w) >= (G+b)(w') + ||w - w'||^2/2;
    adding, ||w - w'||^2 <= a(w') - a(w) + b(w) - b(w') <= 2 (C/n) ||w - w'||.
    """
    return 2.0 * _check_positive(C, "C") / _check_count(n, "n")


def l2_sensitivity(C: float, n: int) -> float:
    """2C/n + 2 sqrt(2 GAP_BOUND): the L2 sensitivity of the weights :func:`train_linear_svm` computes.

    Those weights are within :data:`SOLVER_L2_ERROR` = sqrt(2 GAP_BOUND) of the exact minimiser
    (see :func:`train_linear_svm`), so for neighbouring datasets, by the triangle inequality,
    ||w - w'|| <= ||w* - w'*|| + 2 SOLVER_L2_ERROR <= :func:`exact_l2_sensitivity` + 2 SOLVER_L2_ERROR.
    This is what output perturbation uses.
    """
    return exact_l2_sensitivity(C, n) + 2.0 * SOLVER_L2_ERROR


def laplace_sensitivity(C: float, D: int, n: int) -> float:
    """Delta = 2^2.5 C sqrt(D) / n + 2 sqrt(2D) sqrt(2 GAP_BOUND): L1 sensitivity of the computed 2D weights.

    The first term is Li et al.'s bound for the exact minimiser. It is twice what is needed
    (||v||_1 <= sqrt(2D) ||v||_2 and :func:`exact_l2_sensitivity` give 2^1.5 C sqrt(D)/n) and is
    kept because it is the published bound. The second is the solver's error: each computed w is
    within SOLVER_L2_ERROR of w* in L2, so within sqrt(2D) SOLVER_L2_ERROR in L1, twice over
    for a pair of neighbours.
    """
    C = _check_positive(C, "C")
    D = _check_count(D, "D")
    n = _check_count(n, "n")
    return 2.0**2.5 * C * math.sqrt(D) / n + 2.0 * math.sqrt(2 * D) * SOLVER_L2_ERROR


def laplace_scale(C: float, D: int, n: int, epsilon: float) -> float:
    """Per-coordinate noise scale of :func:`laplace_output_perturbation`, in weight units.

    g t = Delta/epsilon + 2D g/epsilon with Delta = :func:`laplace_sensitivity` and the grid g = 2^k
    of :func:`ppsvm.core.noise.grid_laplace_parameters` (about 2^-20 Delta/epsilon): the paper's
    Delta/epsilon, plus the solver's term inside Delta, plus one grid unit per coordinate for the
    rounding to the grid.
    """
    epsilon = _check_epsilon(epsilon)
    return grid_laplace_parameters(laplace_sensitivity(C, D, n), epsilon, 2 * _check_count(D, "D")).weight_scale


def _laplace_release(
    w: np.ndarray, *, n: int, C: float, D: int, epsilon: float, rng: np.random.Generator | None
) -> tuple[np.ndarray, str]:
    """:func:`laplace_output_perturbation` with the noise description, for :func:`private_weights`."""
    epsilon = _check_epsilon(epsilon)
    sensitivity = laplace_sensitivity(C, D, n)
    weights = _as_vector(w, "w", 2 * D)
    return grid_laplace_release(weights, sensitivity=sensitivity, epsilon=epsilon, source=integer_source(rng))


def laplace_output_perturbation(
    w: np.ndarray, *, n: int, C: float, D: int, epsilon: float, rng: np.random.Generator | None = None
) -> np.ndarray:
    """The Laplace mechanism of Li et al., floating-point safe: w on a 2^k grid plus exact discrete Laplace noise.

    Textbook continuous Laplace noise drawn in floating point leaks the low-order bits of w
    (Mironov 2012). Instead (:func:`ppsvm.core.noise.grid_laplace_release`): round w to the grid
    g = 2^k, k = floor(log2(Delta/epsilon)) - 20, add i.i.d. discrete Laplace noise of scale
    t = (Delta/g + 2D)/epsilon grid units drawn by integer arithmetic, and return g * integers
    exactly. Delta = :func:`laplace_sensitivity` bounds the L1 distance of the weights
    :func:`train_linear_svm` computes on neighbouring datasets (its certified duality gap
    included); rounding adds at most one grid unit per coordinate, hence the "+ 2D". The result
    is epsilon-DP for the bits released; its per-coordinate scale is :func:`laplace_scale`.

    Parameters
    ----------
    w : ndarray, shape (2D,)
        The weights from :func:`train_linear_svm`.
    n, C, D, epsilon : keyword-only
        Records, cost, frequencies, privacy budget.
    rng : numpy.random.Generator or None, keyword-only
        None in production: the OS CSPRNG (``secrets.SystemRandom``). A Generator (tests,
        reproductions) seeds the integer source, so seeded runs repeat
        (:func:`ppsvm.core.noise.integer_source`).

    Returns
    -------
    ndarray, shape (2D,)
        Exact multiples of the grid g.
    """
    return _laplace_release(w, n=n, C=C, D=D, epsilon=epsilon, rng=rng)[0]


def gamma_norm_noise(dim: int, scale: float, rng: np.random.Generator) -> np.ndarray:
    """A draw b with density proportional to exp(-||b|| / scale) on R^dim.

    In polar coordinates the density of r = ||b|| is proportional to r^(dim-1) exp(-r/scale)
    (the sphere's surface grows like r^(dim-1)): r ~ Gamma(shape=dim, scale=scale), and by
    symmetry the direction is uniform on the sphere, independent of r.

    Returns
    -------
    ndarray, shape (dim,)
    """
    dim = _check_count(dim, "dim")
    scale = _check_positive(scale, "scale")
    rng = _check_generator(rng)
    direction = rng.standard_normal(dim)
    norm = np.linalg.norm(direction)
    while norm == 0.0:  # probability zero, but a division by zero must not be possible
        direction = rng.standard_normal(dim)
        norm = np.linalg.norm(direction)
    return rng.gamma(shape=dim, scale=scale) * direction / norm


def output_perturbation(w: np.ndarray, *, n: int, C: float, epsilon: float, rng: np.random.Generator) -> np.ndarray:
    """CMS Algorithm 1: w + b with density of b proportional to exp(-epsilon ||b|| / s), s = :func:`l2_sensitivity`.

    Derivation. CMS write J(w) = (1/n) sum loss + (Lambda/2)||w||^2 and add b with density
    proportional to exp(-beta ||b||), beta = n Lambda epsilon / 2. Our objective is C J with
    Lambda = 1/C (same minimiser), so beta = n epsilon / (2C) = epsilon / s with s = 2C/n the
    L2 sensitivity of the exact minimiser (:func:`exact_l2_sensitivity`). For neighbours, the
    densities of releasing v are in ratio exp(beta (||v - w'|| - ||v - w||)) <= exp(beta ||w - w'||)
    <= exp(epsilon). The weights actually computed are within sqrt(2 GAP_BOUND) of the exact ones,
    so s is :func:`l2_sensitivity` = 2C/n + 2 sqrt(2 GAP_BOUND): ||b|| ~ Gamma(shape=p,
    scale=s/epsilon), p = len(w), direction uniform. CMS state the theorem for differentiable
    losses; the sensitivity proof holds for the hinge. The noise is continuous and drawn in
    floating point: not hardened against the floating-point attack (Mironov 2012).

    Parameters
    ----------
    w : ndarray, shape (p,)
        The weights from :func:`train_linear_svm`.
    n, C, epsilon : keyword-only
    rng : numpy.random.Generator, keyword-only

    Returns
    -------
    ndarray, shape (p,)
    """
    epsilon = _check_epsilon(epsilon)
    weights = _as_vector(w, "w")
    return weights + gamma_norm_noise(weights.size, l2_sensitivity(C, n) / epsilon, rng)


# Objective perturbation (CMS Algorithm 2) with the Huber loss.


def huber_loss(margins: np.ndarray, h: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """CMS's Huber loss of the margins z = y w'x, with its first and second derivatives.

    l(z) = 0 for z > 1 + h;  (1 + h - z)^2 / (4h) for |1 - z| <= h;  1 - z for z < 1 - h.
    Convex, 1-Lipschitz, |l''| <= 1/(2h).

    Returns
    -------
    loss, first, second : ndarray, each the shape of ``margins``
    """
    gap = 1.0 + h - margins
    middle = (gap >= 0.0) & (gap <= 2.0 * h)
    low = gap > 2.0 * h
    loss = np.where(low, 1.0 - margins, np.where(middle, gap * gap / (4.0 * h), 0.0))
    first = np.where(low, -1.0, np.where(middle, -gap / (2.0 * h), 0.0))
    second = np.where(middle, 1.0 / (2.0 * h), 0.0)
    return loss, first, second


@dataclass(frozen=True)
class ObjectivePerturbationParameters:
    """CMS Algorithm 2 steps 1-2 in our units.

    Attributes
    ----------
    epsilon_prime : float
        Budget of the noise term: b has density proportional to exp(-epsilon_prime ||b|| / 2).
    extra_ridge : float
        CMS's Delta (>= 0), added to Lambda = 1/C when epsilon' would be <= 0.
    Lambda : float
        1/C.
    c : float
        Bound on the loss's second derivative, 1/(2h).
    """

    epsilon_prime: float
    extra_ridge: float
    Lambda: float
    c: float


def objective_perturbation_parameters(
    *, n: int, C: float, epsilon: float, huber_h: float = DEFAULT_HUBER_H, allow_extra_ridge: bool = True
) -> ObjectivePerturbationParameters:
    """Steps 1-2 of CMS Algorithm 2, with Lambda = 1/C and c = 1/(2h).

    epsilon' = epsilon - log(1 + 2c/(n Lambda) + c^2/(n Lambda)^2) = epsilon - 2 log(1 + c/(n Lambda)).
    If epsilon' > 0: Delta = 0. Otherwise Delta = c / (n (e^{epsilon/4} - 1)) - Lambda, which is
    >= 0 there, and epsilon' = epsilon / 2: the Jacobian term then uses exactly epsilon/2.

    Parameters
    ----------
    n, C, epsilon, huber_h : keyword-only
    allow_extra_ridge : bool, keyword-only
        False refuses the Delta branch (which changes the model's regularisation) with PrivacyError.

    Returns
    -------
    ObjectivePerturbationParameters
    """
    n = _check_count(n, "n")
    C = _check_positive(C, "C")
    epsilon = _check_epsilon(epsilon)
    h = _check_positive(huber_h, "huber_h")
    Lambda = 1.0 / C
    c = 1.0 / (2.0 * h)
    # (1 + a)^2 with a = c / (n Lambda); log1p keeps precision when a is tiny (large n).
    epsilon_prime = epsilon - 2.0 * math.log1p(c / (n * Lambda))
    if epsilon_prime > 0.0:
        return ObjectivePerturbationParameters(epsilon_prime, 0.0, Lambda, c)
    if not allow_extra_ridge:
        raise PrivacyError(
            f"objective perturbation with n = {n}, C = {C:g}, h = {h:g} and epsilon = {epsilon:g} leaves "
            f"epsilon' = {epsilon_prime:.4g} <= 0 for the noise: the loss curvature alone uses up the budget. "
            "Allow the extra regularisation Delta of CMS Algorithm 2, or raise n or epsilon, or lower C"
        )
    extra = c / (n * math.expm1(epsilon / 4.0)) - Lambda
    return ObjectivePerturbationParameters(epsilon / 2.0, max(extra, 0.0), Lambda, c)


def perturbed_huber_objective(
    w: np.ndarray, Z: np.ndarray, y: np.ndarray, *, C: float, b: np.ndarray, extra_ridge: float, huber_h: float
) -> tuple[float, np.ndarray]:
    """CMS's J_priv(w) = (1/n) sum huber(y_i w'z_i) + ((Lambda + Delta)/2)||w||^2 + (1/n) b'w.

    Parameters
    ----------
    w : ndarray, shape (p,)
    Z : ndarray, shape (n, p)
    y : ndarray, shape (n,)
    C, b, extra_ridge, huber_h : keyword-only
        Lambda = 1/C; b has shape (p,); extra_ridge is Delta.

    Returns
    -------
    value : float
    gradient : ndarray, shape (p,)
    """
    n = y.size
    ridge = 1.0 / C + extra_ridge
    loss, first, _ = huber_loss(y * (Z @ w), huber_h)
    value = float(loss.sum() / n + 0.5 * ridge * (w @ w) + (b @ w) / n)
    gradient = Z.T @ (first * y) / n + ridge * w + b / n
    return value, gradient


def solve_perturbed_huber(
    Z: np.ndarray,
    y: np.ndarray,
    *,
    C: float,
    b: np.ndarray,
    extra_ridge: float,
    huber_h: float = DEFAULT_HUBER_H,
    tol: float = NEWTON_TOL,
) -> np.ndarray:
    """Exact minimiser of :func:`perturbed_huber_objective` by Newton's method with backtracking.

    The objective is (Lambda + Delta)-strongly convex and piecewise quadratic, so Newton steps
    with an Armijo line search converge, and finitely once the pieces stop changing.

    Parameters
    ----------
    Z : ndarray, shape (n, p)
    y : ndarray, shape (n,)
    C, b, extra_ridge, huber_h : keyword-only
    tol : float, keyword-only
        Max-abs gradient at convergence.

    Returns
    -------
    ndarray, shape (p,)
    """
    A = _as_matrix(Z, "Z")
    labels = _check_labels(y, A.shape[0], "Z")
    noise = _as_vector(b, "b", A.shape[1])
    C = _check_positive(C, "C")
    h = _check_positive(huber_h, "huber_h")
    extra = _check_real(extra_ridge, "extra_ridge")
    if not (math.isfinite(extra) and extra >= 0.0):
        raise ValueError(f"extra_ridge must be finite and >= 0, got {extra}")
    n, p = A.shape
    ridge = 1.0 / C + extra
    YZ = labels[:, None] * A
    w = np.zeros(p)
    value, grad = perturbed_huber_objective(w, A, labels, C=C, b=noise, extra_ridge=extra, huber_h=h)
    for _ in range(MAX_NEWTON_ITERATIONS):
        if np.abs(grad).max() <= tol:
            return w
        _, _, second = huber_loss(YZ @ w, h)
        curved = second > 0.0
        hessian = (YZ[curved].T * second[curved]) @ YZ[curved] / n
        hessian[np.diag_indices(p)] += ridge
        step = -scipy.linalg.cho_solve(scipy.linalg.cho_factor(hessian), grad)
        slope = float(grad @ step)
        t = 1.0
        while True:
            trial = w + t * step
            trial_value, trial_grad = perturbed_huber_objective(
                trial, A, labels, C=C, b=noise, extra_ridge=extra, huber_h=h
            )
            # Armijo; near the optimum rounding can hide the decrease, so accept a smaller gradient too.
            if trial_value <= value + 1e-4 * t * slope or np.abs(trial_grad).max() < np.abs(grad).max():
                break
            t *= 0.5
            if t < 1e-20:
                raise SolverError("Newton line search failed on the perturbed Huber objective")
        w, value, grad = trial, trial_value, trial_grad
    if np.abs(grad).max() <= tol:
        return w
    raise SolverError(
        f"Newton's method did not reach gradient {tol:g} in {MAX_NEWTON_ITERATIONS} iterations "
        f"(max-abs gradient {np.abs(grad).max():.3g}); objective perturbation needs the exact minimiser"
    )


def objective_perturbation(
    Z: np.ndarray,
    y: np.ndarray,
    *,
    C: float,
    epsilon: float,
    rng: np.random.Generator,
    huber_h: float = DEFAULT_HUBER_H,
    allow_extra_ridge: bool = True,
) -> tuple[np.ndarray, ObjectivePerturbationParameters]:
    """CMS Algorithm 2 with the Huber loss: minimise a randomly perturbed objective exactly.

    In CMS's units (divide our objective by C): Lambda = 1/C, c = 1/(2h). Conditions, all
    checked or true by construction: ||z_i|| <= 1 (checked), the loss is convex, doubly
    differentiable with |l''| <= c and |l'| <= 1 (Huber), the regulariser (1/2)||w||^2 is
    1-strongly convex and doubly differentiable. b has density proportional to
    exp(-epsilon' ||b|| / 2), i.e. ||b|| ~ Gamma(p, 2/epsilon'), and the release is
    argmin (1/n) sum huber(y_i w'z_i) + (Lambda/2)||w||^2 + (1/n) b'w + (Delta/2)||w||^2.

    Parameters
    ----------
    Z : ndarray, shape (n, p)
        Rows of norm <= 1.
    y : ndarray, shape (n,)
        Labels in {-1, +1}.
    C, epsilon, rng, huber_h, allow_extra_ridge : keyword-only

    Returns
    -------
    weights : ndarray, shape (p,)
    parameters : ObjectivePerturbationParameters
    """
    A = _as_matrix(Z, "Z")
    labels = _check_labels(y, A.shape[0], "Z")
    _check_unit_rows(A)
    params = objective_perturbation_parameters(
        n=labels.size, C=C, epsilon=epsilon, huber_h=huber_h, allow_extra_ridge=allow_extra_ridge
    )
    b = gamma_norm_noise(A.shape[1], 2.0 / params.epsilon_prime, rng)
    weights = solve_perturbed_huber(A, labels, C=C, b=b, extra_ridge=params.extra_ridge, huber_h=huber_h)
    return weights, params


# --- one entry point ------------------------------------------------------------------------------


def secure_generator() -> np.random.Generator:
    """A generator seeded with 256 bits from the OS CSPRNG: the one production code uses for noise."""
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(secrets.randbits(SEED_BITS))))


@dataclass(frozen=True, eq=False)
class Release:
    """Weights ready to publish, with what protects them.

    Attributes
    ----------
    weights : ndarray, shape (2D,)
    mechanism : str
        One of :data:`MECHANISMS`, or ``"none"`` (not private).
    epsilon : float or None
        None exactly when not private.
    n : int
        Records trained on.
    noise : str
        The noise distribution and its scale.
    """

    weights: np.ndarray = field(repr=False)
    mechanism: str
    epsilon: float | None
    n: int
    noise: str

    @property
    def private(self) -> bool:
        return self.mechanism != NON_PRIVATE

    @property
    def guarantee(self) -> str:
        return GUARANTEES[self.mechanism]


def private_weights(
    Z: np.ndarray,
    y: np.ndarray,
    *,
    C: float = DEFAULT_C,
    epsilon: float | None,
    mechanism: Mechanism,
    rng: np.random.Generator | None = None,
    huber_h: float = DEFAULT_HUBER_H,
) -> Release:
    """Train on the private features and release the weights through ``mechanism``.

    Parameters
    ----------
    Z : ndarray, shape (n, 2D)
        :func:`fourier_features` of the private records (rows of norm <= 1).
    y : ndarray, shape (n,)
        Labels in {-1, +1}.
    C : float, keyword-only
    epsilon : float or None, keyword-only
        Privacy budget, > 0; must be None for ``mechanism="none"``.
    mechanism : {"laplace", "output-gamma", "objective", "none"}, keyword-only
        See :data:`GUARANTEES`; ``"none"`` releases the exact weights and is NOT private.
    rng : numpy.random.Generator, optional, keyword-only
        Tests only: production leaves it None, which uses the OS CSPRNG (``secrets.SystemRandom``
        for the Laplace mechanism's integer noise, :func:`secure_generator` for the others).
    huber_h : float, keyword-only
        Huber parameter for ``"objective"``.

    Returns
    -------
    Release
    """
    if mechanism != NON_PRIVATE and mechanism not in MECHANISMS:
        expected = ", ".join((*MECHANISMS, NON_PRIVATE))
        raise ValueError(f"unknown mechanism {mechanism!r}; expected one of {expected}")
    A = _as_matrix(Z, "Z")
    labels = _check_labels(y, A.shape[0], "Z")
    _check_unit_rows(A)
    C = _check_positive(C, "C")
    n, p = A.shape
    if mechanism == NON_PRIVATE:
        if epsilon is not None:
            raise ValueError(f"mechanism {NON_PRIVATE!r} adds no noise, so epsilon must be None, got {epsilon}")
        return Release(train_linear_svm(A, labels, C).w, NON_PRIVATE, None, n, "no noise (NOT PRIVATE)")
    if epsilon is None:
        raise PrivacyError(f"mechanism {mechanism!r} needs an epsilon; use {NON_PRIVATE!r} for a non-private release")
    eps = _check_epsilon(epsilon)
    if rng is not None:
        _check_generator(rng)  # a bad argument is refused before the data are touched
    if mechanism == "laplace":
        if p % 2:
            raise DataError(f"Z has shape {A.shape}: the Laplace bound is stated for 2D features (an even count)")
        # The integer noise source comes from rng itself (None: the OS CSPRNG), see laplace_output_perturbation.
        weights, noise = _laplace_release(train_linear_svm(A, labels, C).w, n=n, C=C, D=p // 2, epsilon=eps, rng=rng)
        return Release(weights, mechanism, eps, n, noise)
    generator = secure_generator() if rng is None else _check_generator(rng)
    if mechanism == "objective":
        weights, params = objective_perturbation(A, labels, C=C, epsilon=eps, rng=generator, huber_h=huber_h)
        noise = (
            f"objective term b'w/n, ||b|| ~ Gamma({p}, scale {2.0 / params.epsilon_prime:.6g}) "
            f"(epsilon' = {params.epsilon_prime:.6g}, extra ridge Delta = {params.extra_ridge:.6g}, "
            f"Huber h = {huber_h:g})"
        )
        return Release(weights, mechanism, eps, n, noise)
    scale = l2_sensitivity(C, n) / eps
    weights = output_perturbation(train_linear_svm(A, labels, C).w, n=n, C=C, epsilon=eps, rng=generator)
    noise = f"||b|| ~ Gamma({p}, scale {scale:.6g}), direction uniform (continuous floating-point noise)"
    return Release(weights, mechanism, eps, n, noise)
