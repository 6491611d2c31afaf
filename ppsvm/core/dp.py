"""Hybrid differentially private RBF SVM (Li, Xiong, Ohno-Machado, Jiang 2014).

Pipeline (docs/design.md section 1, method 3):

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

Steps 1-2 live in :mod:`ppsvm.core.fourier` and the exact solvers of step 3 in :mod:`ppsvm.core.linear_svm`;
this module holds the sensitivities, the mechanisms and the one entry point :func:`private_weights`.
It stays one module (about 600 lines) on purpose: each mechanism's epsilon rests on the conventions and
sensitivities stated here, and whoever checks the guarantee should read them beside the one path by which
an entity releases weights.

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
minimiser: it certifies them within sqrt(2 GAP_BOUND) of it (a duality gap <= GAP_BOUND, their rounding
included), and the bounds add that distance. Neither that solver nor :func:`solve_perturbed_huber` fails
on data: whether a release fails must not depend on the records (docs/design.md rule 6, issue 27).
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, TypeGuard

import numpy as np
import scipy.linalg

from ppsvm.core.checks import (
    as_matrix,
    as_vector,
    check_count,
    check_generator,
    check_labels,
    check_positive,
    check_real,
    check_unit_rows,
)
from ppsvm.core.linear_svm import (
    DEFAULT_C,
    GAP_BOUND,
    LINEAR_CD_STALL,
    LINEAR_CD_SWEEPS,
    LINEAR_CD_TOL,
    SOLVER_L2_ERROR,
    BoxDual,
    dual_coordinate_descent,
    exact_dual_minimiser,
    train_linear_svm,
)
from ppsvm.core.noise import grid_laplace_parameters, grid_laplace_release, integer_source
from ppsvm.errors import DataError, PrivacyError, SolverError

# --- defaults -------------------------------------------------------------------------------------

# Number of frequencies D (2D features): enough for a good RBF approximation on tens of
# features while keeping the Laplace noise (which grows like sqrt(D) per coordinate) moderate.
DEFAULT_N_FREQUENCIES = 100
# Huber parameter h for objective perturbation: CMS use h = 0.5 in their experiments; c = 1/(2h) = 1.
DEFAULT_HUBER_H = 0.5
# Newton's method on the perturbed Huber objective stops at this max-abs gradient. Where it does not get there
# (the gradient's rounding level is above it when ||b||/n is large, its Hessian is ill-conditioned when h is
# small, C large), the exact finish on the dual takes over: no data decides whether a release fails.
NEWTON_TOL = 1e-12
MAX_NEWTON_ITERATIONS = 200
# Newton hands over when its max-abs gradient has not halved in this many iterations (a rounding floor).
NEWTON_STALL_ITERATIONS = 10
# n (Lambda + Delta) above this is refused (from the request and n): the dual that the exact finish solves has
# the box [0, 1 / (n (Lambda + Delta))], whose arithmetic would reach float64's underflow. Reached only for
# huber_h below about 2e-277 at epsilon = 1e-3 (the smallest an entity admits), lower at larger epsilon;
# CMS's own h is 0.5.
MAX_OBJECTIVE_SCALE = 1e280
# The line search stops where |phi'(t)| is this fraction of |phi'(0)| (or after this many evaluations).
LINE_SEARCH_TOL = 1e-12
MAX_LINE_SEARCH_ITERATIONS = 200
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


def check_epsilon(epsilon: object) -> float:
    """A privacy budget: finite and > 0, else PrivacyError (the setting is refused, not malformed)."""
    eps = check_real(epsilon, "epsilon")
    if not (math.isfinite(eps) and eps > 0):
        raise PrivacyError(
            f"epsilon must be finite and > 0, got {eps}: epsilon <= 0 is not a privacy level, and an "
            f"infinite or NaN epsilon gives no guarantee (use mechanism {NON_PRIVATE!r} to say so explicitly)"
        )
    return eps


# --- sensitivities and mechanisms -----------------------------------------------------------------


def exact_l2_sensitivity(C: float, n: int) -> float:
    """2C/n: the L2 sensitivity of the *exact* hinge (or any 1-Lipschitz convex loss) SVM weights.

    Proof (CMS Corollary 8, with Lambda = 1/C; no differentiability needed). Let G be the
    objective's common part, 1-strongly convex, and a, b the two differing terms (C/n) loss(.),
    convex and (C/n)-Lipschitz in w because ||z|| <= 1. The minimisers w of G + a and w' of G + b
    satisfy (G+a)(w') >= (G+a)(w) + ||w - w'||^2/2 and (G+b)(w) >= (G+b)(w') + ||w - w'||^2/2;
    adding, ||w - w'||^2 <= a(w') - a(w) + b(w) - b(w') <= 2 (C/n) ||w - w'||.
    """
    return 2.0 * check_positive(C, "C") / check_count(n, "n")


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
    C = check_positive(C, "C")
    D = check_count(D, "D")
    n = check_count(n, "n")
    return 2.0**2.5 * C * math.sqrt(D) / n + 2.0 * math.sqrt(2 * D) * SOLVER_L2_ERROR


def laplace_scale(C: float, D: int, n: int, epsilon: float) -> float:
    """Per-coordinate noise scale of :func:`laplace_output_perturbation`, in weight units.

    g t = Delta/epsilon + 2D g/epsilon with Delta = :func:`laplace_sensitivity` and the grid g = 2^k
    of :func:`ppsvm.core.noise.grid_laplace_parameters` (about 2^-20 Delta/epsilon): the paper's
    Delta/epsilon, plus the solver's term inside Delta, plus one grid unit per coordinate for the
    rounding to the grid.
    """
    epsilon = check_epsilon(epsilon)
    return grid_laplace_parameters(laplace_sensitivity(C, D, n), epsilon, 2 * check_count(D, "D")).weight_scale


def _laplace_release(
    w: np.ndarray, *, n: int, C: float, D: int, epsilon: float, rng: np.random.Generator | None
) -> tuple[np.ndarray, str]:
    """:func:`laplace_output_perturbation` with the noise description, for :func:`private_weights`."""
    epsilon = check_epsilon(epsilon)
    sensitivity = laplace_sensitivity(C, D, n)
    weights = as_vector(w, "w", 2 * D)
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
    dim = check_count(dim, "dim")
    scale = check_positive(scale, "scale")
    rng = check_generator(rng)
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
    epsilon = check_epsilon(epsilon)
    weights = as_vector(w, "w")
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
    n = check_count(n, "n")
    C = check_positive(C, "C")
    epsilon = check_epsilon(epsilon)
    h = check_positive(huber_h, "huber_h")
    Lambda = 1.0 / C
    c = 1.0 / (2.0 * h)
    # (1 + a)^2 with a = c / (n Lambda); log1p keeps precision when a is tiny (large n).
    epsilon_prime = epsilon - 2.0 * math.log1p(c / (n * Lambda))
    if epsilon_prime > 0.0:
        if not n * Lambda <= MAX_OBJECTIVE_SCALE:
            # A tiny C: n / C past float64's range once doubled by the exact finish (NaN weights, issue 27).
            raise DataError(
                f"objective perturbation with C = {C:g} and n = {n}: n / C must stay below {MAX_OBJECTIVE_SCALE:g} "
                "for float64 to hold the minimiser's dual: raise C"
            )
        return ObjectivePerturbationParameters(epsilon_prime, 0.0, Lambda, c)
    # e^(epsilon/4) overflows past epsilon ~ 2,839: Delta's limit there is -Lambda, i.e. no extra ridge.
    growth = math.expm1(epsilon / 4.0) if epsilon < 2_800.0 else math.inf
    extra = c / (n * growth) - Lambda
    if not (math.isfinite(extra) and n * (Lambda + max(extra, 0.0)) <= MAX_OBJECTIVE_SCALE):
        # From the request and n alone, before any record is used (docs/design.md rule 6).
        raise DataError(
            f"objective perturbation with huber_h = {h:g}, n = {n} and epsilon = {epsilon:g} needs the extra "
            f"regularisation c / (n (e^(epsilon/4) - 1)) with c = 1/(2h), and n times the total ridge must stay "
            f"below {MAX_OBJECTIVE_SCALE:g} for float64 to hold the minimiser's dual: raise huber_h"
        )
    if not allow_extra_ridge:
        raise PrivacyError(
            f"objective perturbation with n = {n}, C = {C:g}, h = {h:g} and epsilon = {epsilon:g} leaves "
            f"epsilon' = {epsilon_prime:.4g} <= 0 for the noise: the loss curvature alone uses up the budget. "
            "Allow the extra regularisation Delta of CMS Algorithm 2, or raise n or epsilon, or lower C"
        )
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


def _line_slope(
    margins: np.ndarray, along: np.ndarray, w: np.ndarray, step: np.ndarray, b: np.ndarray, ridge: float, h: float
) -> Callable[[float], float]:
    """t -> phi'(t), the derivative of :func:`perturbed_huber_objective` at w + t step along step."""
    n = margins.size
    w_step, step_step, noise_step = float(w @ step), float(step @ step), float(b @ step)

    def slope_at(t: float) -> float:
        first = huber_loss(margins + t * along, h)[1]
        return float(first @ along) / n + ridge * (w_step + t * step_step) + noise_step / n

    return slope_at


def _exact_step(
    slope_at: Callable[[float], float], slope: float, max_iterations: int = MAX_LINE_SEARCH_ITERATIONS
) -> float:
    """The minimiser t > 0 of phi(t) = J(w + t d) along a descent direction d, from phi'.

    phi' is increasing (J is strongly convex) and piecewise linear (J is piecewise quadratic), so its
    root is bracketed by doubling from the Newton step t = 1 and found by regula falsi with the
    Illinois modification: exact in one step between two kinks, so a Newton step whose pieces are
    already right is taken as t = 1. Only phi' is compared, never phi, whose changes vanish in
    rounding near the optimum (accepting a step on a smaller gradient instead cycled on Adult at C = 100).
    phi'' >= ridge ||d||^2 > 0, so the doubling ends; SolverError only if it overflows (handled by the caller).
    """
    low, low_slope = 0.0, slope
    high, high_slope = 1.0, slope_at(1.0)
    while high_slope < 0.0:
        low, low_slope = high, high_slope
        high *= 2.0
        if not math.isfinite(high):
            raise SolverError("Newton line search found no minimum along the step on the perturbed Huber objective")
        high_slope = slope_at(high)
    if high_slope == 0.0:
        return high
    side = 0
    for _ in range(max_iterations):
        t = (low * high_slope - high * low_slope) / (high_slope - low_slope)
        if not low < t < high:
            t = 0.5 * (low + high)
        value = slope_at(t)
        if abs(value) <= LINE_SEARCH_TOL * abs(slope) or high - low <= 1e-15 * high:
            return t
        if value < 0.0:
            low, low_slope = t, value
            if side == -1:
                high_slope *= 0.5
            side = -1
        else:
            high, high_slope = t, value
            if side == 1:
                low_slope *= 0.5
            side = 1
    return 0.5 * (low + high)


def _newton_huber(YZ: np.ndarray, b: np.ndarray, *, ridge: float, h: float, tol: float) -> tuple[np.ndarray, bool]:
    """Newton's method with an exact line search on the perturbed Huber objective: (w, reached ``tol``).

    Stops without raising where it cannot go on (a Hessian that is not numerically positive definite,
    a line search that overflows, a gradient that stopped falling, the iteration cap), returning the
    iterate with the smallest gradient so far: the caller finishes exactly from there.
    """
    n, p = YZ.shape
    w = np.zeros(p)
    margins = np.zeros(n)
    best, best_gradient, best_at = w, math.inf, 0
    with np.errstate(over="ignore", invalid="ignore"):
        for iteration in range(MAX_NEWTON_ITERATIONS + 1):
            first, second = huber_loss(margins, h)[1:]
            grad = YZ.T @ first / n + ridge * w + b / n
            size = float(np.abs(grad).max())
            if not math.isfinite(size):
                break
            if size <= tol:
                return w, True
            if size <= 0.5 * best_gradient:
                best_at = iteration
            if size < best_gradient:
                best, best_gradient = w, size
            if iteration == MAX_NEWTON_ITERATIONS or iteration - best_at >= NEWTON_STALL_ITERATIONS:
                break
            curved = second > 0.0
            try:
                step = -_newton_direction(YZ[curved], second[curved] / n, ridge, grad)
                t = _exact_step(_line_slope(margins, YZ @ step, w, step, b, ridge, h), float(grad @ step))
            except (np.linalg.LinAlgError, ValueError, SolverError):
                break
            w = w + t * step
            margins = YZ @ w
    return best, False


def _newton_direction(U: np.ndarray, weights: np.ndarray, ridge: float, grad: np.ndarray) -> np.ndarray:
    """(U' diag(weights) U + ridge I)^-1 grad, for U of shape (k, p), weights > 0 of shape (k,).

    With fewer curved rows than features (k < p: many frequencies, few records) through the k x k system of the
    Woodbury identity, (grad - U'(ridge diag(1/weights) + U U')^-1 U grad) / ridge: at D = 10,000 (p = 20,000)
    and 199 records the p x p Hessian needed 3.2 GB and its factorisation more than 20 minutes, a cost any
    coordinator could ask for at the smallest epsilon.
    """
    k, p = U.shape
    if k < p:
        system = U @ U.T
        system[np.diag_indices(k)] += ridge / weights
        return (grad - U.T @ scipy.linalg.cho_solve(scipy.linalg.cho_factor(system), U @ grad)) / ridge
    hessian = (U.T * weights) @ U
    hessian[np.diag_indices(p)] += ridge
    return scipy.linalg.cho_solve(scipy.linalg.cho_factor(hessian), grad)


def _huber_dual_minimiser(YZ: np.ndarray, b: np.ndarray, *, ridge: float, h: float, start: np.ndarray) -> np.ndarray:
    """The perturbed Huber objective's minimiser through its dual, exactly (active set, double-double refinement).

    With the Huber loss written as l(m) = max over beta in [0, 1] of beta (1 + h - m) - h beta^2, the
    minimum of (1/n) sum l(y_i w'z_i) + (r/2)||w||^2 + b'w/n is, for a_i = beta_i / (n r),

        min (1/2)||YZ'a - b/(n r)||^2 + h n r ||a||^2 - (1 + h) sum a   over 0 <= a_i <= 1/(n r),

    and w = YZ'a - b/(n r): a :class:`ppsvm.core.linear_svm.BoxDual`, solved by coordinate descent from
    the Newton iterate ``start`` and then exactly (finitely many active-set steps, whatever the data).
    """
    n = YZ.shape[0]
    scale = n * ridge
    upper = 1.0 / scale
    problem = BoxDual(YZ, upper, b / scale, ridge=2.0 * h * scale, linear=1.0 + h)
    with np.errstate(over="ignore", invalid="ignore"):
        beta = np.clip((1.0 + h - YZ @ start) / (2.0 * h), 0.0, 1.0)
    beta[~np.isfinite(beta)] = 1.0
    descent = dual_coordinate_descent(
        problem,
        tol=LINEAR_CD_TOL,
        rng=np.random.default_rng(0),
        max_sweeps=LINEAR_CD_SWEEPS,
        start=beta * upper,
        stall=LINEAR_CD_STALL,
    )
    solution = exact_dual_minimiser(problem, descent.alpha, tolerance=0.0)
    return solution.v_hi


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
    """Exact minimiser of :func:`perturbed_huber_objective`: Newton's method, then an exact finish if needed.

    The objective is (Lambda + Delta)-strongly convex and piecewise quadratic, so Newton directions
    with an exact line search decrease it at every step and converge, finitely once the pieces stop
    changing (the step is then t = 1); the result is returned when its max-abs gradient is <= ``tol``.
    That is not always reachable: the gradient's rounding level exceeds 1e-12 when ||b||/n is large
    (small epsilon), and with a small h at a large C the Hessian is too ill-conditioned for the
    Newton steps. Whether that happens depends on the records, so it must not fail the release
    (docs/design.md rule 6): the minimiser is then computed exactly through the dual
    (:func:`_huber_dual_minimiser`), to float64 rounding.

    Parameters
    ----------
    Z : ndarray, shape (n, p)
    y : ndarray, shape (n,)
    C, b, extra_ridge, huber_h : keyword-only
    tol : float, keyword-only
        Max-abs gradient at which Newton's iterate is returned as it is.

    Returns
    -------
    ndarray, shape (p,)
    """
    A = as_matrix(Z, "Z")
    labels = check_labels(y, A.shape[0], "Z")
    noise = as_vector(b, "b", A.shape[1])
    C = check_positive(C, "C")
    h = check_positive(huber_h, "huber_h")
    extra = check_real(extra_ridge, "extra_ridge")
    if not (math.isfinite(extra) and extra >= 0.0):
        raise ValueError(f"extra_ridge must be finite and >= 0, got {extra}")
    ridge = 1.0 / C + extra
    YZ = labels[:, None] * A
    w, reached = _newton_huber(YZ, noise, ridge=ridge, h=h, tol=tol)
    if reached:
        return w
    return _huber_dual_minimiser(YZ, noise, ridge=ridge, h=h, start=w)


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
    A = as_matrix(Z, "Z")
    labels = check_labels(y, A.shape[0], "Z")
    # The parameters depend on the request and n only: refused before the rows are looked at.
    params = objective_perturbation_parameters(
        n=labels.size, C=C, epsilon=epsilon, huber_h=huber_h, allow_extra_ridge=allow_extra_ridge
    )
    check_unit_rows(A)
    b = gamma_norm_noise(A.shape[1], 2.0 / params.epsilon_prime, rng)
    weights = solve_perturbed_huber(A, labels, C=C, b=b, extra_ridge=params.extra_ridge, huber_h=huber_h)
    return weights, params


# --- what a release will look like, from public facts ------------------------------------------


def weight_bound(C: float) -> float:
    """sqrt(2C): a bound on ||w*|| of the SVM (1/2)||w||^2 + (C/n) sum hinge, from its value at w = 0 (C)."""
    return math.sqrt(2.0 * check_positive(C, "C"))


def expected_noise_norm(mechanism: str, *, C: float, n: int, n_frequencies: int, epsilon: float | None) -> float:
    """The expected norm of the noise a release adds to the 2D weights, from public facts alone.

    laplace: each of the 2D coordinates has variance 2 b^2 (b = :func:`laplace_scale`), so sqrt(4D) b.
    output-gamma: ||b|| ~ Gamma(2D, :func:`l2_sensitivity` / epsilon), mean 2D s / epsilon. objective: b
    perturbs the objective, and moves the minimiser by about ||b|| / (n (Lambda + Delta)) with ||b|| ~
    Gamma(2D, 2 / epsilon'). none: 0.

    Parameters
    ----------
    mechanism : str
    C : float
    n : int
        Records of the releasing entity.
    n_frequencies : int
        D.
    epsilon : float or None
        None for "none".

    Returns
    -------
    float
    """
    p = 2 * check_count(n_frequencies, "n_frequencies")
    if mechanism == NON_PRIVATE or epsilon is None:
        return 0.0
    if mechanism == "laplace":
        return math.sqrt(2.0 * p) * laplace_scale(C, n_frequencies, n, epsilon)
    if mechanism == "output-gamma":
        return p * l2_sensitivity(C, n) / check_epsilon(epsilon)
    if mechanism == "objective":
        params = objective_perturbation_parameters(n=n, C=C, epsilon=epsilon)
        return p * (2.0 / params.epsilon_prime) / (check_count(n, "n") * (params.Lambda + params.extra_ridge))
    raise ValueError(f"unknown mechanism {mechanism!r}")


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
    A = as_matrix(Z, "Z")
    labels = check_labels(y, A.shape[0], "Z")
    check_unit_rows(A)
    C = check_positive(C, "C")
    n, p = A.shape
    if mechanism == NON_PRIVATE:
        if epsilon is not None:
            raise ValueError(f"mechanism {NON_PRIVATE!r} adds no noise, so epsilon must be None, got {epsilon}")
        return Release(train_linear_svm(A, labels, C).w, NON_PRIVATE, None, n, "no noise (NOT PRIVATE)")
    if epsilon is None:
        raise PrivacyError(f"mechanism {mechanism!r} needs an epsilon; use {NON_PRIVATE!r} for a non-private release")
    eps = check_epsilon(epsilon)
    if rng is not None:
        check_generator(rng)  # a bad argument is refused before the data are touched
    if mechanism == "laplace":
        if p % 2:
            raise DataError(f"Z has shape {A.shape}: the Laplace bound is stated for 2D features (an even count)")
        # The integer noise source comes from rng itself (None: the OS CSPRNG), see laplace_output_perturbation.
        weights, noise = _laplace_release(train_linear_svm(A, labels, C).w, n=n, C=C, D=p // 2, epsilon=eps, rng=rng)
        return Release(weights, mechanism, eps, n, noise)
    generator = secure_generator() if rng is None else check_generator(rng)
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
