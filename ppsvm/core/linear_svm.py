"""Exact SVM solvers (dual coordinate descent) with a certified duality gap, as the DP sensitivity proofs need.

Step 3 of the hybrid DP pipeline (see :mod:`ppsvm.core.dp`): the linear SVM on Fourier features, and the
kernel SVM the baselines use.

The linear SVM must never fail on data (docs/design.md rule 6: an entity charges the release before it
reads its records, so a solver that gives up on some records and not on others tells the requester one bit
about them; issue 27: at C = 1000, D = 10, 33 of 199 single-label flips of one cell changed the outcome, and
20 of 200 of a WDBC cell here). So :func:`train_linear_svm` does not stop where coordinate descent stops.
Coordinate descent is fast, but its linear rate depends on the data (with 21 records near the margin in 20
dimensions it crept along a flat face of the dual for 200,000 sweeps), and at C = 1000 the float64 duality
gap has a rounding level of about GAP_BOUND itself. So descent only guesses which dual variables sit at 0,
at C/n or between; an active-set method on the dual QP settles that guess exactly (finitely many steps, each
a small linear solve), iterative refinement in double-double arithmetic puts the margin records on the
margin to about 1e-30, and the certificate is computed in that arithmetic too (:func:`_certificate`).
"""

from __future__ import annotations

import functools
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
# Projected-gradient target of dual coordinate descent: the kernel SVM's stopping rule (public data).
DUAL_CD_TOL = 1e-10
# Where the linear SVM's coordinate descent hands over to the exact finish. Speed only: from here the active
# set needed 2 to 14 steps (1,000 and 10,000 records, D = 100, C = 1000), and the sweeps from 1e-4 to 1e-10
# cost 2x to 7x the whole finish.
LINEAR_CD_TOL = 1e-4
# Certified bound of train_linear_svm, a fixed constant (never the achieved value, which depends on the data).
# The objective P is 1-strongly convex, so (1/2)||w - w*||^2 <= P(w) - P(w*) <= P(w) - dual(a): a duality gap
# g puts w within sqrt(2 g) of the exact minimiser w* the sensitivity proofs assume. train_linear_svm certifies
# ||w - w*|| <= SOLVER_L2_ERROR = sqrt(2 GAP_BOUND) (see _certificate for how). It adds 2 sqrt(2D) * 1.4e-6 to
# the L1 sensitivity: +0.6% for n = 9,000, D = 100, C = 1.
GAP_BOUND = 1e-12
SOLVER_L2_ERROR = math.sqrt(2.0 * GAP_BOUND)
# Cap on dual CD sweeps. The kernel SVM fails when it hits it; the linear SVM hands over to the exact finish.
MAX_DUAL_CD_SWEEPS = 200_000
# Sweeps of dual CD the linear SVM spends at most before the exact finish, and the sweeps without progress
# (the smallest projected-gradient span not halving) after which it stops sooner. Speed only: CD creeps on a
# degenerate face of the dual (issue 27: 200,000 sweeps, 54 s, without getting there) or, at C = 1000 on a few
# records, for thousands of sweeps that the finish replaces with a few steps of a millisecond.
LINEAR_CD_SWEEPS = 2_000
LINEAR_CD_STALL = 25
# Steps of the active-set finish allowed per record (plus a constant): each step moves one dual variable
# to or from a bound and, from a coordinate-descent start, a few dozen are usual. Not reached in any run
# (issue 27 scans); it only bounds a loop that, in exact arithmetic, ends by itself.
FINISH_STEPS_PER_RECORD = 4
FINISH_STEPS_EXTRA = 1_000
# Double-double refinement steps of the margin equations once the active set is settled: each multiplies the
# margin residuals by about cond * 1e-16, so two or three bring them to ~1e-30.
REFINEMENT_STEPS = 6
# Rounds of (accurate active set, refinement, certificate) before giving up: one is the rule; a second only
# when refinement pushed a free variable onto its bound.
FINISH_ROUNDS = 3

_EPS = float(np.finfo(float).eps)
# Dekker's splitting constant 2^27 + 1: a = hi + lo with both halves of 26 bits, so hi * hi' is exact.
_SPLITTER = 134_217_729.0
# Entries of a row block in the accurate sums (512 KiB of float64), bounding their temporaries.
_ACCURATE_BLOCK_ELEMENTS = 1 << 16


# --- accurate sums (error-free transformations) --------------------------------------------------


def _two_sum(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """s, e with s = fl(a + b) and s + e = a + b exactly (Knuth's TwoSum), elementwise."""
    s = a + b
    v = s - a
    return s, (a - (s - v)) + (b - v)


def _two_product(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """p, e with p = fl(a * b) and p + e = a * b exactly (Dekker's TwoProduct; |a|, |b| < 2^996), elementwise."""
    p = a * b
    c = _SPLITTER * a
    a_hi = c - (c - a)
    a_lo = a - a_hi
    c = _SPLITTER * b
    b_hi = c - (c - b)
    b_lo = b - b_hi
    return p, ((a_hi * b_hi - p) + a_hi * b_lo + a_lo * b_hi) + a_lo * b_lo


def _pairwise_sum(terms: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The sum of ``terms`` along its first axis as s + low: s from pairwise TwoSums, low their errors in float64.

    s + (the exact sum of the errors) is the exact sum, and the errors of a level are at most eps/2 times that
    level's partial sums, so low carries about log2(k) eps sum |terms| of error-free information.
    """
    low = np.zeros(terms.shape[1:])
    while terms.shape[0] > 1:
        half = terms.shape[0] // 2
        total, error = _two_sum(terms[:half], terms[half : 2 * half])
        low += error.sum(axis=0)
        terms = total if terms.shape[0] == 2 * half else np.concatenate([total, terms[2 * half :]])
    return terms[0], low


def _accurate_products(M: np.ndarray, x_hi: np.ndarray, x_lo: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """M @ (x_hi + x_lo) as hi + lo (|lo| <= ulp(hi) / 2), as if computed in twice the working precision.

    Every product and every pairwise partial sum is split exactly into its rounded value and error
    (TwoProduct, TwoSum); only the errors are added in float64. For k columns (k eps < 1/100) and
    |x_lo| <= eps |x_hi|, the error of each entry is at most 2 k eps^2 (log2 k + 2) sum_j |M_ij x_j|
    (the errors' sum has 3k terms of total size (log2 k + 2) eps/2 sum_j |M_ij x_j|; Ogita, Rump and
    Oishi 2005, Dot2, with a pairwise instead of a recursive sum).
    """
    m, k = M.shape
    hi, lo = np.zeros(m), np.zeros(m)
    rows = max(1, _ACCURATE_BLOCK_ELEMENTS // max(k, 1))
    for start in range(0, m, rows):
        block = M[start : start + rows]
        terms, errors = _two_product(block, x_hi)
        total, low = _pairwise_sum(terms.T)
        low += errors.sum(axis=1) + block @ x_lo
        hi[start : start + rows], lo[start : start + rows] = _two_sum(total, low)
    return hi, lo


def _accurate_transposed_products(M: np.ndarray, x_hi: np.ndarray, x_lo: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """M' @ (x_hi + x_lo) as hi + lo, as :func:`_accurate_products` (same bound, k = M's rows), reading M by rows."""
    m, k = M.shape
    rows = max(1, _ACCURATE_BLOCK_ELEMENTS // max(k, 1))
    totals, low = [], np.zeros(k)
    for start in range(0, m, rows):
        block = M[start : start + rows]
        terms, errors = _two_product(block, x_hi[start : start + rows, None])
        total, block_low = _pairwise_sum(terms)
        totals.append(total)
        low += block_low + errors.sum(axis=0) + x_lo[start : start + rows] @ block
    total, blocks_low = _pairwise_sum(np.array(totals))
    return _two_sum(total, low + blocks_low)


# --- the dual problems, and coordinate descent on them ----------------------------------------------


@dataclass(frozen=True)
class BoxDual:
    """min_a (1/2)||A'a - shift||^2 + (ridge/2)||a||^2 - linear * sum_i a_i over 0 <= a_i <= upper.

    The hinge SVM's dual is A = rows y_i z_i, shift 0, ridge 0, linear 1, upper C/n (w = A'a); the
    perturbed Huber SVM's is another instance (:func:`ppsvm.core.dp.solve_perturbed_huber`). The gradient
    is A v + ridge a - linear with v = A'a - shift, the primal weights.
    """

    A: np.ndarray
    upper: float
    shift: np.ndarray
    ridge: float = 0.0
    linear: float = 1.0

    @classmethod
    def hinge(cls, YZ: np.ndarray, upper: float) -> BoxDual:
        return cls(YZ, upper, np.zeros(YZ.shape[1]))

    @functools.cached_property
    def largest_row(self) -> float:
        """max_i ||a_i|| (1 for the rows of fourier_features)."""
        return float(np.sqrt(np.einsum("ij,ij->i", self.A, self.A).max()))

    @property
    def is_hinge(self) -> bool:
        return self.ridge == 0.0 and self.linear == 1.0 and not np.any(self.shift)

    def primal(self, alpha: np.ndarray) -> np.ndarray:
        """v = A'a - shift, in float64."""
        return self.A.T @ alpha - self.shift

    def gradient(self, alpha: np.ndarray, v: np.ndarray) -> np.ndarray:
        """A v + ridge a - linear, in float64 (v the primal of alpha)."""
        return self.A @ v + self.ridge * alpha - self.linear

    def accurate_primal(self, alpha: np.ndarray, alpha_lo: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """v = A'(alpha + alpha_lo) - shift as hi + lo, to about eps^2."""
        hi, lo = _accurate_transposed_products(self.A, alpha, alpha_lo)
        hi, error = _two_sum(hi, -self.shift)
        return _two_sum(hi, lo + error)

    def accurate_gradient(
        self, rows: np.ndarray, alpha: np.ndarray, alpha_lo: np.ndarray, v_hi: np.ndarray, v_lo: np.ndarray
    ) -> np.ndarray:
        """The gradient at the given rows (indices), from v = v_hi + v_lo, accurate to about eps^2 (rounded once)."""
        hi, lo = _accurate_products(self.A[rows], v_hi, v_lo)
        ridge, ridge_error = _two_product(np.full(rows.size, self.ridge), alpha[rows])
        total, error = _two_sum(hi, ridge)
        total, error2 = _two_sum(total, np.full(rows.size, -self.linear))
        return total + (error2 + error + lo + ridge_error + self.ridge * alpha_lo[rows])


@dataclass(frozen=True)
class _DualSolution:
    alpha: np.ndarray
    w: np.ndarray
    sweeps: int
    pg_gap: float
    converged: bool


def _kkt(problem: BoxDual, alpha: np.ndarray, v: np.ndarray) -> float:
    """Projected-gradient gap of the dual at (alpha, v)."""
    G = problem.gradient(alpha, v)
    upper = problem.upper
    PG = np.where(alpha <= 0.0, np.minimum(G, 0.0), np.where(alpha >= upper, np.maximum(G, 0.0), G))
    return float(PG.max() - PG.min())


def dual_coordinate_descent(
    problem: BoxDual,
    *,
    tol: float,
    rng: np.random.Generator,
    max_sweeps: int,
    start: np.ndarray | None = None,
    stall: int | None = None,
) -> _DualSolution:
    """Dual CD with shrinking (Hsieh et al. 2008) on a :class:`BoxDual`, from ``start`` (default 0).

    Shrinking drops coordinates stuck at a bound from the sweeps; convergence is declared only
    when, over *all* coordinates and from a fresh v = A'alpha - shift (no drift from incremental
    updates), the projected gradient spans at most ``tol``. Otherwise the last iterate comes
    back with ``converged`` False after ``max_sweeps`` sweeps, or after ``stall`` sweeps in which
    the smallest span seen did not halve: the caller decides.
    """
    YZ, upper, ridge, linear = problem.A, problem.upper, problem.ridge, problem.linear
    n = YZ.shape[0]
    rows = list(YZ)  # row views: iterating a list is much cheaper than indexing YZ[i]
    diag = np.einsum("ij,ij->i", YZ, YZ) + ridge
    alpha = np.zeros(n) if start is None else np.clip(start, 0.0, upper)
    w = problem.primal(alpha)
    active = np.arange(n)
    pg_max_old, pg_min_old = math.inf, -math.inf
    best_span, best_at = math.inf, 0
    for sweep in range(1, max_sweeps + 1):
        if stall is not None and sweep - best_at > stall:
            break
        rng.shuffle(active)
        keep = np.ones(active.size, dtype=bool)
        pg_max, pg_min = -math.inf, math.inf
        for pos, i in enumerate(active.tolist()):
            row = rows[i]
            a = alpha[i]
            g = float(row @ w) + ridge * a - linear
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
                # A zero row (and no ridge) has a constant gradient -linear < 0: its optimum is the upper bound.
                new = upper if q <= 0.0 else min(max(a - g / q, 0.0), upper)
                if new != a:
                    w += (new - a) * row
                    alpha[i] = new
        active = active[keep]
        if pg_max - pg_min <= 0.5 * best_span:
            best_at = sweep
        best_span = min(best_span, pg_max - pg_min)
        if pg_max - pg_min <= tol or active.size == 0:
            w = problem.primal(alpha)
            pg_gap = _kkt(problem, alpha, w)
            if pg_gap <= tol:
                return _DualSolution(alpha, w, sweeps=sweep, pg_gap=pg_gap, converged=True)
            # Converged on the shrunken set only: sweep all again, no shrinking thresholds.
            active = np.arange(n)
            pg_max_old, pg_min_old = math.inf, -math.inf
            continue
        pg_max_old = pg_max if pg_max > 0.0 else math.inf
        pg_min_old = pg_min if pg_min < 0.0 else -math.inf
    w = problem.primal(alpha)
    return _DualSolution(alpha, w, sweeps=sweep, pg_gap=_kkt(problem, alpha, w), converged=False)


# --- the exact finish: active set, double-double refinement ------------------------------------------


class _FreeSet:
    """The free dual variables (0 < a_i < upper) in the order they joined, with their Hessian A_F A_F' + ridge I."""

    def __init__(self, problem: BoxDual, indices: np.ndarray) -> None:
        self._A = problem.A
        self._ridge = problem.ridge
        self.index = [int(i) for i in indices]
        rows = self._A[self.index]
        self.gram = rows @ rows.T
        self.gram[np.diag_indices(len(self.index))] += self._ridge
        self._spectrum: tuple[np.ndarray, np.ndarray] | None = None

    def add(self, j: int) -> None:
        k = len(self.index)
        column = self._A[self.index] @ self._A[j]
        gram = np.empty((k + 1, k + 1))
        gram[:k, :k] = self.gram
        gram[:k, k] = gram[k, :k] = column
        gram[k, k] = float(self._A[j] @ self._A[j]) + self._ridge
        self.gram = gram
        self.index.append(j)
        self._spectrum = None

    def remove(self, positions: np.ndarray) -> None:
        keep = np.ones(len(self.index), dtype=bool)
        keep[positions] = False
        self.gram = self.gram[np.ix_(keep, keep)]
        self.index = [i for i, kept in zip(self.index, keep.tolist(), strict=True) if kept]
        self._spectrum = None

    def direction(self, gradient: np.ndarray, null_tolerance: float) -> tuple[np.ndarray, float, bool]:
        """A descent direction d of the dual restricted to the free variables, the step that minimises along it,
        and whether d is the Newton step (which solves the restricted problem).

        The restricted dual is q(t d) = t gradient'd + (t^2/2) d' H d, H = A_F A_F' + ridge I (singular
        when more records than dimensions are free and ridge is 0). When the gradient has a component
        along H's (numerical) null space beyond ``null_tolerance``, minus that component is a direction
        of (nearly) zero curvature along which q falls: its exact line minimum is returned (infinite for
        zero curvature), to be cut at the first bound. Otherwise the minimum-norm Newton step -H^+ gradient,
        with step length 1.
        """
        if self._spectrum is None:
            self._spectrum = scipy.linalg.eigh(self.gram)
        values, vectors = self._spectrum
        # Eigenvalues at rounding level of the largest are taken as zero.
        null = values <= max(float(values[-1]), 0.0) * 64.0 * values.size * _EPS
        coefficients = vectors.T @ gradient
        if null.any():
            along = vectors[:, null] @ coefficients[null]
            slope = float(along @ along)
            if math.sqrt(slope) > null_tolerance:
                curvature = float(along @ self.gram @ along)
                return -along, slope / curvature if curvature > 0.0 else math.inf, False
        kept = ~null
        return -(vectors[:, kept] @ (coefficients[kept] / values[kept])), 1.0, True


def _longest_step(alpha: np.ndarray, direction: np.ndarray, upper: float, limit: float) -> tuple[float, int]:
    """The largest t <= limit with 0 <= alpha + t direction <= upper, and the position that blocks it (or -1)."""
    reach = np.full(alpha.size, math.inf)
    down, up = direction < 0.0, direction > 0.0
    reach[down] = alpha[down] / -direction[down]
    reach[up] = (upper - alpha[up]) / direction[up]
    block = int(np.argmin(reach)) if reach.size else -1
    if block < 0 or reach[block] >= limit:
        return limit, -1
    return float(reach[block]), block


class _Gradients:
    """The dual gradient of a :class:`BoxDual` at alpha (low parts zero), in float64 or accurately."""

    def __init__(self, problem: BoxDual, alpha: np.ndarray, accurate: bool) -> None:
        self._problem, self._alpha, self._accurate = problem, alpha, accurate
        self._zeros = np.zeros(alpha.size)
        if accurate:
            self.v_hi, self.v_lo = problem.accurate_primal(alpha, self._zeros)
        else:
            self.v_hi, self.v_lo = problem.primal(alpha), np.zeros(problem.A.shape[1])

    def at(self, rows: np.ndarray) -> np.ndarray:
        problem, alpha = self._problem, self._alpha
        if self._accurate:
            return problem.accurate_gradient(rows, alpha, self._zeros, self.v_hi, self.v_lo)
        return problem.A[rows] @ self.v_hi + problem.ridge * alpha[rows] - problem.linear


def _active_set(
    problem: BoxDual, alpha: np.ndarray, free: _FreeSet, *, accurate: bool, tolerance: float, max_steps: int
) -> int:
    """Primal active-set method on the dual box QP from a feasible alpha (changed in place); returns its steps.

    Each step either minimises the dual over the free variables with the others held at their bounds
    (stopping at the first bound met, which then holds that variable) or, when the free ones are optimal,
    frees the bound variable whose gradient has the wrong sign by the most. In exact arithmetic the dual
    falls at every step that moves and no active set repeats, so the method ends at the exact minimiser
    (Nocedal & Wright, Numerical Optimization, section 16.5). Wrong signs below ``tolerance`` or the
    gradients' rounding level are left: about 64 eps (1 + ||v||) in float64, 4 p eps^2 (log2 p + 2) (1 + ||v||)
    (rows of norm <= 1) when ``accurate``.
    """
    upper = problem.upper
    p = problem.A.shape[1]
    rounding = 4.0 * p * _EPS**2 * (math.log2(p) + 2.0) if accurate else 64.0 * _EPS
    skip: set[int] = set()
    newest = -1
    everyone = np.arange(alpha.size)
    for step in range(1, max_steps + 1):
        gradients = _Gradients(problem, alpha, accurate)
        scale = 1.0 + problem.largest_row * float(np.linalg.norm(gradients.v_hi))
        limit = max(tolerance, rounding * scale)
        if free.index:
            F = np.array(free.index)
            direction, reach, newton = free.direction(gradients.at(F), limit * math.sqrt(F.size))
            t, block = _longest_step(alpha[F], direction, upper, reach)
            if not math.isfinite(t):  # no bound ahead: impossible for a non-zero direction in a box
                return step
            moved = np.clip(alpha[F] + t * direction, 0.0, upper)
            if block >= 0:
                moved[block] = 0.0 if direction[block] < 0.0 else upper
            alpha[F] = moved
            if t > 0.0:
                skip.clear()
            elif F[block] == newest:
                skip.add(newest)  # freed and at once held again: not chosen again until something moves
            left = np.flatnonzero((moved <= 0.0) | (moved >= upper))
            if left.size:
                free.remove(left)
            if block >= 0 or not newton:
                continue
            gradients = _Gradients(problem, alpha, accurate)
        G = gradients.at(everyone)
        wrong = np.where(alpha <= 0.0, -G, np.where(alpha >= upper, G, 0.0))
        wrong[free.index] = 0.0
        wrong[list(skip)] = 0.0
        j = int(np.argmax(wrong))
        if wrong[j] <= limit:
            return step
        free.add(j)
        newest = j
    return max_steps


def _refine(problem: BoxDual, alpha: np.ndarray, free: _FreeSet) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """Double-double iterative refinement of the free variables (alpha changed in place).

    Solves the free variables' stationarity equations (for the hinge SVM: the margin equations
    y_i w'z_i = 1) with residuals computed accurately, so that they fall to about 1e-30 instead of
    float64's ~1e-16. A free variable pushed onto its bound is held there. Returns the low parts of
    alpha and the primal v = A'(alpha + alpha_lo) - shift as hi + lo.
    """
    upper = problem.upper
    alpha_lo = np.zeros(alpha.size)
    for _ in range(REFINEMENT_STEPS):
        v = problem.accurate_primal(alpha, alpha_lo)
        if not free.index:
            return alpha_lo, v
        F = np.array(free.index)
        residual = problem.accurate_gradient(F, alpha, alpha_lo, *v)
        # Done at the accuracy of the sums themselves (about eps^2 ||v||, see _accurate_products).
        if float(np.abs(residual).max()) <= _EPS**2 * (1.0 + float(np.linalg.norm(v[0]))):
            return alpha_lo, v
        correction, _, _ = free.direction(residual, math.inf)
        hi, lo = _two_sum(alpha[F], alpha_lo[F] + correction)
        out = (hi <= 0.0) | (hi >= upper)
        hi[out] = np.where(hi[out] <= 0.0, 0.0, upper)
        lo[out] = 0.0
        alpha[F], alpha_lo[F] = hi, lo
        if out.any():
            free.remove(np.flatnonzero(out))
    return alpha_lo, problem.accurate_primal(alpha, alpha_lo)


@dataclass(frozen=True)
class DualMinimiser:
    """The minimiser alpha + alpha_lo of a :class:`BoxDual`, its primal v = v_hi + v_lo, the active-set steps."""

    alpha: np.ndarray
    alpha_lo: np.ndarray
    v_hi: np.ndarray
    v_lo: np.ndarray
    steps: int


def exact_dual_minimiser(problem: BoxDual, start: np.ndarray, *, tolerance: float) -> DualMinimiser:
    """The minimiser of a :class:`BoxDual` from ``start`` (clipped to the box).

    Active set on float64 gradients, then on accurate ones (wrong signs up to ``tolerance`` left), then
    double-double refinement of the free variables. Finite in exact arithmetic; no tolerance or sweep cap
    decides whether it returns.
    """
    alpha = np.clip(start, 0.0, problem.upper)
    free = _FreeSet(problem, np.flatnonzero((alpha > 0.0) & (alpha < problem.upper)))
    max_steps = FINISH_STEPS_PER_RECORD * alpha.size + FINISH_STEPS_EXTRA
    steps = _active_set(problem, alpha, free, accurate=False, tolerance=0.0, max_steps=max_steps)
    steps += _active_set(problem, alpha, free, accurate=True, tolerance=tolerance, max_steps=max_steps)
    alpha_lo, (v_hi, v_lo) = _refine(problem, alpha, free)
    return DualMinimiser(alpha, alpha_lo, v_hi, v_lo, steps)


@dataclass(frozen=True)
class _Certificate:
    w: np.ndarray
    distance: float  # a bound on ||w - w*||, w* the exact minimiser for cost C


def _certificate(problem: BoxDual, solution: DualMinimiser, C: float) -> _Certificate:
    """Released weights of the hinge SVM and a bound on their distance to the exact minimiser, in double-double.

    With a = alpha + alpha_lo in the box (exactly), v = YZ'a and G_i = y_i v'z_i - 1, the duality gap
    P(v) - dual(a) = sum_i [a_i G_i + upper max(0, -G_i)], a sum of non-negative terms (no cancellation), so
    ||v - w*|| <= sqrt(2 gap). v is computed as w_hi + w_lo to about eps^2 and w_hi is released: the bound is

        ||w_hi - w*|| <= ||w_lo|| + ||v - (w_hi + w_lo)|| + sqrt(2 gap) + C eps / 2,

    the last term for upper = fl(C/n): by the argument of dp.exact_l2_sensitivity, the minimisers for
    costs u and u' per record are within n |u - u'| <= C eps / 2. The accurate sums' own errors (Dot2 bounds,
    see _accurate_products) enter the gap through each term's Lipschitz constant (at most upper, n upper = C
    in all); all of them are below 1e-20 for every admitted request.
    """
    if not problem.is_hinge:
        raise ValueError("the certificate is the hinge SVM's")
    YZ, upper = problem.A, problem.upper
    n, p = YZ.shape
    alpha, alpha_lo, w_hi, w_lo = solution.alpha, solution.alpha_lo, solution.v_hi, solution.v_lo
    G = problem.accurate_gradient(np.arange(n), alpha, alpha_lo, w_hi, w_lo)
    # Each term is positively homogeneous in G_i, so the relative rounding of G_i and of the products stays
    # relative (the factor on the sum).
    terms = np.where(G >= 0.0, (alpha + alpha_lo) * G, ((upper - alpha) - alpha_lo) * -G)
    row_norms = np.sqrt(np.einsum("ij,ij->i", YZ, YZ))
    largest_row = float(row_norms.max()) * (1.0 + p * _EPS)
    weights_error = 2.0 * n * _EPS**2 * (math.log2(n) + 2.0) * float(row_norms @ (alpha + np.abs(alpha_lo))) * 1.01
    margin_error = 2.0 * p * _EPS**2 * (math.log2(p) + 2.0) * largest_row * float(np.linalg.norm(w_hi)) * 1.01
    gap = float(terms.sum()) * (1.0 + (n + 8) * _EPS) + 1.01 * C * (largest_row * weights_error + margin_error)
    distance = float(np.linalg.norm(w_lo)) * (1.0 + p * _EPS) + weights_error + math.sqrt(2.0 * gap) + C * _EPS
    return _Certificate(w=w_hi, distance=distance * (1.0 + 4.0 * _EPS))


@dataclass(frozen=True)
class _Finish:
    alpha: np.ndarray
    w: np.ndarray
    distance: float
    steps: int


def _exact_finish(YZ: np.ndarray, upper: float, alpha: np.ndarray, *, C: float) -> _Finish:
    """The hinge SVM's exact minimiser from a starting point (coordinate descent's), certified; else SolverError.

    The accurate active set leaves wrong signs up to GAP_BOUND / (64 C): at most GAP_BOUND / 64 in the gap
    (n terms, each Lipschitz with constant upper = C/n).
    """
    problem = BoxDual.hinge(YZ, upper)
    distance, steps = math.inf, 0
    for _ in range(FINISH_ROUNDS):
        solution = exact_dual_minimiser(problem, alpha, tolerance=GAP_BOUND / (64.0 * C))
        alpha, steps = solution.alpha, steps + solution.steps
        certificate = _certificate(problem, solution, C)
        distance = certificate.distance
        if distance <= SOLVER_L2_ERROR:
            return _Finish(alpha, certificate.w, distance, steps)
    # The bound goes to the local log only: an error message must not carry values derived from data.
    logger.warning("exact finish not certified: distance bound %.3g after %d steps", distance, steps)
    raise SolverError(
        f"the linear SVM could not be certified within {SOLVER_L2_ERROR:g} of its exact minimiser; "
        "the DP guarantees need that certificate"
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
        Certified: at most :data:`GAP_BOUND`, and ||w - w*|| <= sqrt(2 * duality_gap) (the gap of a point
        within rounding of w, plus that rounding; see :func:`train_linear_svm`).
    sweeps : int
        Of dual coordinate descent.
    finish_steps : int
        Of the active-set method that settles the exact minimiser after coordinate descent.
    """

    w: np.ndarray = field(repr=False)
    alpha: np.ndarray = field(repr=False)
    objective: float
    duality_gap: float
    sweeps: int
    finish_steps: int = 0


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
    tol: float = LINEAR_CD_TOL,
    rng: np.random.Generator | None = None,
    max_sweeps: int = MAX_DUAL_CD_SWEEPS,
) -> LinearSVM:
    """Minimiser of (1/2)||w||^2 + (C/n) sum_i max(0, 1 - y_i w'z_i), no intercept, to a certified distance.

    No intercept because an un-noised intercept may not be released (docs/design.md). The dual is
    min (1/2)||sum_i a_i y_i z_i||^2 - sum_i a_i over 0 <= a_i <= C/n, w = sum_i a_i y_i z_i. Dual
    coordinate descent (shuffled sweeps, shrinking) runs until the projected gradient spans <= ``tol``
    or for at most min(``max_sweeps``, :data:`LINEAR_CD_SWEEPS`) sweeps; an active-set method on the dual
    QP then finds the exact minimiser from there (finitely many steps, whatever the data), double-double
    refinement puts the margin records on the margin, and the result is certified in that arithmetic.

    Why a certificate. The sensitivity proofs hold for the exact minimiser w*. P is 1-strongly convex,
    so (1/2)||v - w*||^2 <= P(v) - P(w*) <= P(v) - dual(a) for any v = YZ'a, a in the box: a gap g
    puts v within sqrt(2 g) of w*. The released w is v rounded to float64, and the certificate adds that
    rounding (and the accurate sums' error bounds): ||w - w*|| <= :data:`SOLVER_L2_ERROR` = sqrt(2 GAP_BOUND),
    reported as ``duality_gap`` = (that distance bound)^2 / 2 <= GAP_BOUND. Neighbouring datasets then give
    computed weights within 2 SOLVER_L2_ERROR of the exact ones' distance, a term that
    :func:`l2_sensitivity` and :func:`laplace_sensitivity` add. The bound is a constant, not the distance
    achieved (that depends on the data, and so would the noise).

    Never fails on data: no sweep cap, tolerance or rounding floor decides the outcome (docs/design.md
    rule 6; issue 27). SolverError is raised only if the certificate cannot be met after the exact finish,
    which no run has shown (the finish leaves ~1e-26 against the bound's 1e-12).

    Parameters
    ----------
    Z : ndarray, shape (n, p)
    y : ndarray, shape (n,)
        Labels in {-1, +1}.
    C : float
        Cost, > 0 (scikit-learn's C is C/n).
    tol : float, keyword-only
        Projected-gradient target of coordinate descent before the exact finish (speed only).
    rng : numpy.random.Generator, optional, keyword-only
        Sweep order only (the minimiser is unique); a fixed seed when omitted, so results repeat.
    max_sweeps : int, keyword-only
        Cap on coordinate-descent sweeps before the exact finish (speed only).

    Returns
    -------
    LinearSVM
        ``w`` has shape (p,), ``alpha`` shape (n,).
    """
    A = as_matrix(Z, "Z")
    labels, C, settings = _solver_settings(A, "Z", y, C, tol, rng, max_sweeps)
    YZ = labels[:, None] * A
    upper = C / labels.size
    descent = dual_coordinate_descent(
        BoxDual.hinge(YZ, upper),
        tol=settings["tol"],
        rng=settings["rng"],
        max_sweeps=min(settings["max_sweeps"], LINEAR_CD_SWEEPS),
        stall=LINEAR_CD_STALL,
    )
    finish = _exact_finish(YZ, upper, descent.alpha, C=C)
    return LinearSVM(
        w=finish.w,
        alpha=finish.alpha,
        objective=hinge_objective(finish.w, A, labels, C),
        duality_gap=0.5 * finish.distance**2,
        sweeps=descent.sweeps,
        finish_steps=finish.steps,
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
    # Public data: no privacy proof needs a certified gap, and a failure tells nothing private.
    solution = dual_coordinate_descent(BoxDual.hinge(labels[:, None] * Phi, C / labels.size), **settings)
    if not solution.converged:
        raise SolverError(
            f"dual coordinate descent did not reach projected-gradient gap {settings['tol']:g} in "
            f"{settings['max_sweeps']} sweeps"
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
    A = as_matrix(K_new, "K_new")
    if A.shape[1] != model.dual_coef.size:
        raise DataError(f"K_new has shape {A.shape}; the model was trained on {model.dual_coef.size} records")
    return (A + 1.0) @ model.dual_coef
