"""A primal-dual interior-point method built for the random-kernel LPs (issue 12).

Both LPs of :mod:`ppsvm.core.lp` are solved through their dual, a bounded LP in
m + mbar variables with only mbar + 1 equality rows:

    min  -c'a
    s.t.  K'(s * a) - r = 0,   s'a = 0,
          a_lo <= a <= a_hi,   -rho <= r <= rho

classify: c = 1, s = d (the labels), a in [0, nu], rho = 1;
regress:  c = y, s = 1,              a in [-1, 1], rho = nu.

The multipliers of the rows are (-u, gamma). Every variable is boxed, so the
method needs no free variables and the starting point is simply the middle of
the box. With Khat = [K, 1] and Theta the Newton scaling of the a's, the
normal-equations matrix of every iteration is

    Khat' Theta Khat + diag(theta_r, 0)          (mbar + 1) x (mbar + 1)

because s_i^2 = 1 for both tasks: one BLAS-3 product over K, O(m mbar^2) flops,
and a Cholesky factorisation of a small dense matrix. HiGHS, a general solver,
works on the m x (mbar + 1) constraint matrix instead.

The iteration is Mehrotra's predictor-corrector (Nocedal & Wright, Numerical
Optimization, 2nd ed., algorithm 14.3, with upper bounds as in Wright,
Primal-Dual Interior-Point Methods, chapter 11). It stops when the relative
primal and dual residuals and the relative duality gap are all below ``tol``.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import scipy.linalg
import scipy.linalg.blas
from threadpoolctl import ThreadpoolController

_STEP_TO_BOUNDARY = 0.995
# Give up (converged = False) when the worst of the three measures has not halved for this many iterations.
_STALL_ITERATIONS = 30
_PIVOT_FLOOR = 1e-15
_TINY = np.finfo(float).tiny
_HUGE = 1e128
# Switch to the accurate (QR) Newton solves when the worst measure has not halved for this many iterations,
# once it is below _ACCURATE_BELOW. Above it the method is still far from the optimum, where slow progress
# comes from a poorly centred start, not from the normal matrix's lost digits: a nearly constant Gaussian
# K (entries 0.63 to 0.98 at 160,000 x 19) spent 6 slow iterations there and then 23 in the 7x dearer form.
_SLOW_ITERATIONS = 6
_ACCURATE_BELOW = 1e-3
# Entries of K per weighted row block (1 MiB of float64): bounds the solver's temporaries and stays in cache.
_BLOCK_ELEMENTS = 1 << 17
# A Cholesky pivot of the scaled normal matrix below this (squared) sends the solve to the
# truncated eigen-decomposition: the factor would carry no accurate digit along that direction.
_CHOLESKY_FLOOR = 1e-12
DEFAULT_TOL = 1e-8
DEFAULT_MAX_ITERATIONS = 200


@dataclass(frozen=True)
class IpmResult:
    """The solution of the dual and the multipliers that give (u, gamma).

    Attributes
    ----------
    u : ndarray, shape (mbar,)
    gamma : float
    a : ndarray, shape (m,)
        The dual variables (nonzero on margin errors / residual rows).
    converged : bool
    iterations : int
    primal_residual, dual_residual, gap : float
        Relative residuals and relative duality gap at the last iterate.
    """

    u: np.ndarray
    gamma: float
    a: np.ndarray
    converged: bool
    iterations: int
    primal_residual: float
    dual_residual: float
    gap: float


def normal_matrix(K: np.ndarray, theta: np.ndarray, center: np.ndarray | None = None) -> np.ndarray:
    """Khat' diag(theta) Khat for Khat = [K - 1 center', 1], in row blocks (no copy of K).

    Parameters
    ----------
    K : ndarray, shape (m, mbar)
    theta : ndarray, shape (m,), >= 0
    center : ndarray, shape (mbar,), optional
        Subtracted from every row of K; zero by default.

    Returns
    -------
    ndarray, shape (mbar + 1, mbar + 1)
    """
    mbar = K.shape[1]
    M = np.zeros((mbar + 1, mbar + 1), order="F")
    fortran = _is_fortran(K)
    for block in _weighted_blocks(K, np.zeros(mbar) if center is None else center, np.sqrt(theta)):
        # W'W of the weighted block, upper triangle only: half the flops of a general product. BLAS is handed
        # whichever of W and W' is Fortran-ordered; the other would be copied by the wrapper.
        if fortran:
            M = scipy.linalg.blas.dsyrk(1.0, block, beta=1.0, c=M, trans=1, overwrite_c=True)
        else:
            M = scipy.linalg.blas.dsyrk(1.0, block.T, beta=1.0, c=M, trans=0, overwrite_c=True)
    return np.triu(M) + np.triu(M, 1).T


def _is_fortran(K: np.ndarray) -> bool:
    """Whether K's columns are contiguous (the layout :func:`ppsvm.core.kernels.assembly_start` gives)."""
    return bool(K.flags.f_contiguous and not K.flags.c_contiguous)


def _weighted_blocks(K: np.ndarray, center: np.ndarray, root: np.ndarray) -> Iterator[np.ndarray]:
    """Row blocks of diag(root) [K - 1 center', 1], each at most _BLOCK_ELEMENTS entries.

    Each block is written into the same buffer: a consumer must be done with one before asking for the next.
    The blocks have K's layout, so that every elementwise operation runs along K's contiguous axis (numpy
    loops over the short axis of a mismatched layout: 2.5 times as long at mbar = 19).
    """
    m, mbar = K.shape
    rows = max(4 * (mbar + 1), _BLOCK_ELEMENTS // (mbar + 1))
    order: Literal["C", "F"] = "F" if _is_fortran(K) else "C"
    buffer = np.empty((min(rows, m), mbar + 1), order=order)
    for start in range(0, m, rows):
        block = K[start : start + rows]
        weighted = buffer[: len(block)] if len(block) == len(buffer) else np.empty((len(block), mbar + 1), order=order)
        np.subtract(block, center, out=weighted[:, :mbar])
        weighted[:, mbar] = 1.0
        np.multiply(weighted, root[start : start + rows, None], out=weighted)
        yield weighted


class _Dual:
    """The dual LP's data and the two products with its constraint matrix A = [[Kc'S, -I], [s', 0]].

    Kc = K - 1 kbar' has centred columns. Because s'a = 0 is a constraint, Kc'(s a) = K'(s a)
    on the feasible set, so the LP is unchanged; but [Kc, 1] is far better conditioned than
    [K, 1] when K is nearly constant (a wide Gaussian width puts every entry near 1). In the
    primal this is the change of variable gamma' = gamma - kbar'u.
    """

    def __init__(self, K: np.ndarray, sign: np.ndarray, cost: np.ndarray, a_box: tuple[float, float], rho: float):
        self.K, self.sign = K, sign
        self.center = K.mean(axis=0)
        m, mbar = K.shape
        self.m, self.mbar = m, mbar
        self.k_max = max(float(K.max()), -float(K.min()))  # |K|.max() without a copy of K
        # Shift every variable to [0, upper]: a = a_lo + x_a, r = -rho + x_r.
        self.a_lo = a_box[0]
        self.upper = np.r_[np.full(m, a_box[1] - a_box[0]), np.full(mbar, 2.0 * rho)]
        self.f = np.r_[-cost, np.zeros(mbar)]
        # A (lower bounds) moved to the right-hand side: b = -A l.
        self.b = -self.times(np.r_[np.full(m, a_box[0]), np.full(mbar, -rho)])

    def times(self, x: np.ndarray) -> np.ndarray:
        """A x for x = (x_a, x_r): (Kc'(s x_a) - x_r, s'x_a)."""
        signed = self.sign * x[: self.m]
        total = signed.sum()
        out = np.empty(self.mbar + 1)
        np.matmul(self.K.T, signed, out=out[: self.mbar])
        out[: self.mbar] -= self.center * total + x[self.m :]
        out[self.mbar] = total
        return out

    def term_size(self, x: np.ndarray) -> float:
        """A bound on the norm of |A| |x|, the size of the terms that A x sums (no pass over K)."""
        a_sum = float(np.abs(x[: self.m]).sum())
        return np.sqrt(self.mbar) * self.k_max * a_sum + _norm(x[self.m :]) + a_sum

    def transpose_times(self, y: np.ndarray) -> np.ndarray:
        """A'y for y = (y_K, y_s): (s (Kc y_K + y_s), -y_K)."""
        y_K = y[: self.mbar]
        out = np.empty(self.m + self.mbar)
        head = out[: self.m]
        np.matmul(self.K, y_K, out=head)
        head += y[self.mbar] - self.center @ y_K
        head *= self.sign
        np.negative(y_K, out=out[self.m :])
        return out


def solve_dual(
    K: np.ndarray,
    sign: np.ndarray,
    cost: np.ndarray,
    a_box: tuple[float, float],
    rho: float,
    *,
    tol: float = DEFAULT_TOL,
    max_iterations: int = DEFAULT_MAX_ITERATIONS,
) -> IpmResult:
    """Solve the dual LP above by Mehrotra's predictor-corrector method.

    Parameters
    ----------
    K : ndarray, shape (m, mbar)
    sign : ndarray, shape (m,)
        s: the labels (classify) or ones (regress).
    cost : ndarray, shape (m,)
        c: ones (classify) or the targets (regress).
    a_box : (float, float)
        Bounds of every a_i.
    rho : float
        Bound of |K'(s a)| componentwise.
    tol : float
        Stop when relative primal residual, dual residual and duality gap are all below it.
    max_iterations : int

    Returns
    -------
    IpmResult
        ``converged`` False when ``max_iterations`` ran out or the Newton system broke down;
        the caller decides what to do (ppsvm.core.lp falls back to HiGHS).
    """
    # One BLAS thread: the products run on row blocks of a few MB, where threads gain nothing (measured on 2
    # cores, idle: 0.9 s against 2.1 s with two threads at 40,000 x 100, 4.9 s against 7.3 s at 160,000 x 100,
    # 1.6 s against 1.4 s at 200,000 x 19), and when other work shares the cores OpenBLAS's busy-waiting
    # threads made a 400-row fit 16 times slower (65 s against 4 s).
    with one_blas_thread():
        return _solve(K, sign, cost, a_box, rho, tol, max_iterations)


_limit_lock = threading.Lock()
_limit_users = 0
_limiter: Any = None


@contextlib.contextmanager
def one_blas_thread() -> Iterator[None]:
    """BLAS on one thread while any solve runs; the original count back when the last one ends.

    Matrix-vector products over K suffer most from a second thread when the other core is busy:
    K'a at 40,000 x 19 took 7.6 ms with two threads against 0.7 ms with one while another process ran.

    The thread count is process-wide: two solves in two threads that each set and then restored it would
    race (the second saving the first's 1 as "original" and leaving it behind, which changed other code's
    floating-point results). So the first solve in sets it and the last one out restores it.
    """
    global _limit_users, _limiter
    with _limit_lock:
        if _limit_users == 0:
            _limiter = _blas_controller().limit(limits=1, user_api="blas")
        _limit_users += 1
    try:
        yield
    finally:
        with _limit_lock:
            _limit_users -= 1
            if _limit_users == 0:
                _limiter.restore_original_limits()
                _limiter = None


@functools.cache
def _blas_controller() -> ThreadpoolController:
    return ThreadpoolController()


def _solve(
    K: np.ndarray,
    sign: np.ndarray,
    cost: np.ndarray,
    a_box: tuple[float, float],
    rho: float,
    tol: float,
    max_iterations: int,
) -> IpmResult:
    lp = _Dual(K, sign, cost, a_box, rho)
    U, f, b = lp.upper, lp.f, lp.b
    U_norm, f_norm = _norm(U), _norm(f)
    point = _start(lp)
    primal = dual = gap = np.inf
    best, best_at = np.inf, 0
    accurate = False
    first_rank: int | None = None
    # A'y is carried from iteration to iteration (A'(y + t dy) = A'y + t A'dy, with A'dy a by-product of the
    # step): one product over K less per iteration. It is computed afresh before convergence is declared.
    a_times_y, exact = lp.transpose_times(point.y), True
    for iteration in range(max_iterations + 1):
        x, w, y, z, v = point.x, point.w, point.y, point.z, point.v
        residuals = _Residuals(b - lp.times(x), U - x - w, f - a_times_y - z + v)
        primal_value = float(f @ x)
        dual_value = float(b @ y - U @ v)
        # Residuals relative to the size of the terms they cancel: with nu = 1000 the products
        # K'(s a) sum terms of 1e6 to values below 1, and 1e-16 of 1e6 is all float64 can offer.
        primal = max(_norm(residuals.b) / (1.0 + _norm(b) + lp.term_size(x)), _norm(residuals.u) / (1.0 + U_norm))
        dual = _norm(residuals.c) / (1.0 + f_norm + _norm(a_times_y))
        gap = abs(primal_value - dual_value) / (1.0 + abs(primal_value))
        if primal <= tol and dual <= tol and gap <= tol and not exact:
            a_times_y, exact = lp.transpose_times(y), True
            residuals = _Residuals(residuals.b, residuals.u, f - a_times_y - z + v)
            dual = _norm(residuals.c) / (1.0 + f_norm + _norm(a_times_y))
        if primal <= tol and dual <= tol and gap <= tol:
            return _result(lp, point, True, iteration, primal, dual, gap)
        worst = max(primal, dual, gap)
        if worst < 0.5 * best:
            best, best_at = worst, iteration
        if iteration == max_iterations or iteration - best_at > _STALL_ITERATIONS:
            break
        if not accurate and _stalled_near_optimum(iteration, best_at, best):
            accurate, best_at = True, iteration
        try:
            newton = _Newton(lp, point, residuals, accurate)
            first_rank = newton.system.rank if first_rank is None else first_rank
            if not accurate and newton.system.rank < first_rank:
                # Theta, not K, has made the fast form singular: its truncated directions would soon
                # undo the progress made (see _NormalEquations). This step and the rest use the accurate form.
                accurate = True
                newton = _Newton(lp, point, residuals, accurate)
        except np.linalg.LinAlgError:
            break
        point, step_d, dy_image = newton.step()
        # The step's point replaces the one it started from: let that go before the next residuals are formed
        # (seven vectors of length m: the old iterate, its residuals and Theta).
        del newton
        a_times_y += step_d * dy_image
        exact = False
    return _result(lp, point, False, iteration, primal, dual, gap)


def _stalled_near_optimum(iteration: int, best_at: int, best: float) -> bool:
    """Whether the fast form has stopped making progress where its lost digits matter (see _ACCURATE_BELOW)."""
    return iteration - best_at >= _SLOW_ITERATIONS and best < _ACCURATE_BELOW


@dataclass(frozen=True)
class _Point:
    """An iterate: x in (0, U) with w = U - x, multipliers y, and z, v > 0 for x >= 0 and x <= U."""

    x: np.ndarray
    w: np.ndarray
    y: np.ndarray
    z: np.ndarray
    v: np.ndarray


@dataclass(frozen=True)
class _Residuals:
    """b - A x, U - x - w and f - A'y - z + v."""

    b: np.ndarray
    u: np.ndarray
    c: np.ndarray


class _Newton:
    """One Mehrotra predictor-corrector step from ``point``: one factorisation, two solves."""

    def __init__(self, lp: _Dual, point: _Point, residuals: _Residuals, accurate: bool):
        self.lp, self.point, self.residuals = lp, point, residuals
        self.theta = 1.0 / (point.z / point.x + point.v / point.w)
        self.system = _NormalEquations(lp, self.theta, accurate)

    def direction(self, r_xz: np.ndarray, r_wv: np.ndarray) -> tuple[_Point, np.ndarray]:
        """The Newton direction for complementarity targets XZe + r_xz and WVe + r_wv, and A'dy.

        dz, dw and dv are eliminated (see the module docstring's references); dy solves the
        normal equations and dx follows from it. In place wherever a temporary can be reused:
        dz and dv are written over r_xz and r_wv, which the caller has no further use for.
        """
        p, r, lp, theta = self.point, self.residuals, self.lp, self.theta
        rhs_x = p.v * r.u
        np.subtract(r_wv, rhs_x, out=rhs_x)
        rhs_x /= p.w
        rhs_x += r.c
        rhs_x -= r_xz / p.x
        dy = self.system.solve(r.b + lp.times(theta * rhs_x))
        dy_image = lp.transpose_times(dy)
        dx = np.subtract(dy_image, rhs_x, out=rhs_x)
        dx *= theta
        dw = r.u - dx
        dz = r_xz
        dz -= p.z * dx
        dz /= p.x
        dv = r_wv
        dv -= p.v * dw
        dv /= p.w
        return _Point(dx, dw, dy, dz, dv), dy_image

    def step(self) -> tuple[_Point, float, np.ndarray]:
        """The next iterate, the dual step length and A'dy of the step's dy."""
        p = self.point
        n = len(p.x)
        xz, wv = p.x * p.z, p.w * p.v
        mu = float(xz.sum() + wv.sum()) / (2 * n)
        # Predictor: the affine-scaling direction (no centring).
        d = self.direction(-xz, -wv)[0]
        step_p, step_d = _step(p.x, d.x, p.w, d.w, 1.0), _step(p.z, d.z, p.v, d.v, 1.0)
        # (x + tp dx)'(z + td dz) + (w + tp dw)'(v + td dv), expanded into dot products (no temporaries).
        mu_affine = (
            xz.sum()
            + wv.sum()
            + step_d * (p.x @ d.z + p.w @ d.v)
            + step_p * (d.x @ p.z + d.w @ p.v)
            + step_p * step_d * (d.x @ d.z + d.w @ d.v)
        ) / (2 * n)
        target = (max(float(mu_affine), 0.0) / mu) ** 3 * mu
        # Corrector: centring (sigma mu) plus the second-order term of the predictor, in the predictor's arrays.
        r_xz = np.multiply(d.x, d.z, out=d.x)
        r_xz += xz
        np.subtract(target, r_xz, out=r_xz)
        r_wv = np.multiply(d.w, d.v, out=d.w)
        r_wv += wv
        np.subtract(target, r_wv, out=r_wv)
        # The predictor's dz and dv, and xz and wv, are not needed past here: four vectors of length m less at
        # the solver's peak (the corrector's direction), about 30 MiB at 1,000,000 rows.
        del d, xz, wv
        d, dy_image = self.direction(r_xz, r_wv)
        step_p = _step(p.x, d.x, p.w, d.w, _STEP_TO_BOUNDARY)
        step_d = _step(p.z, d.z, p.v, d.v, _STEP_TO_BOUNDARY)
        for value, change, length in ((p.x, d.x, step_p), (p.w, d.w, step_p), (p.z, d.z, step_d), (p.v, d.v, step_d)):
            change *= length
            change += value
        return _Point(d.x, d.w, p.y + step_d * d.y, d.z, d.v), step_d, dy_image


def _start(lp: _Dual) -> _Point:
    """An interior starting point that already meets s'a = 0 and is dual feasible with y = 0.

    The a's sit at a quarter of their box, split between s = +1 and s = -1 in inverse
    proportion to their counts (the middle of the box would miss s'a = 0 by m/2 times the box
    when one class is rare); r sits at K'(s a) pulled into the middle half of its box.
    """
    U, f = lp.upper, lp.f
    x = U / 2.0
    a_width = U[0]
    if lp.a_lo == 0.0:  # classify: a in [0, nu], s = labels
        positive = lp.sign > 0
        n_pos, n_neg = int(positive.sum()), int((~positive).sum())
        smaller = min(n_pos, n_neg)
        x[: lp.m] = np.where(positive, smaller / max(n_pos, 1), smaller / max(n_neg, 1)) * a_width / 4.0
    rho = U[lp.m :] / 2.0
    r = lp.times(np.r_[lp.a_lo + x[: lp.m], np.zeros(lp.mbar)])[: lp.mbar]
    x[lp.m :] = np.clip(r, -rho / 2.0, rho / 2.0) + rho
    w = U - x
    y = np.zeros(lp.mbar + 1)
    shift = 1.0 + 0.1 * float(np.abs(f).max())
    z = np.maximum(f, 0.0) + shift
    v = np.maximum(-f, 0.0) + shift
    # The multipliers of r's bounds end at |u|, often in the hundreds: started near 1, the first
    # steps toward u drive one of each pair to its bound and stall (5 steps of length 0.006-0.35 at
    # 40,000 x 19, nu = 1). Both start at the size of a ridge estimate of u instead: the least-squares
    # solution of A'y = f (u = -y_K), one normal matrix with Theta = I. Measured over 28 LPs
    # (classify and regress, mbar 19 and 100, three widths, nu 1e-3 to 1e4): 464 iterations against 497.
    size = _ridge_size(lp)
    z[lp.m :] += size
    v[lp.m :] += size
    return _Point(x, w, y, z, v)


def _ridge_size(lp: _Dual) -> float:
    """max |u| of the least-squares multipliers y = (A A')^-1 A f."""
    ridge = _NormalEquations(lp, np.ones(lp.m + lp.mbar), accurate=False).solve(lp.times(lp.f))
    return float(np.abs(ridge[: lp.mbar]).max())


class _NormalEquations:
    """Solves (A Theta A') dy = rhs, where A Theta A' = Khat' Theta_a Khat + diag(theta_r, 0).

    Fast form: the matrix itself, one BLAS-3 product over K, diagonally scaled and
    eigen-decomposed. Near the optimum of a degenerate LP (fewer support vectors than
    mbar + 1, common on separable data) it is singular to working precision, so directions
    along eigenvalues below _PIVOT_FLOOR times the largest are dropped (Wright, Primal-Dual
    Interior-Point Methods, chapter 11: tiny pivots treated as infinite).

    Accurate form: forming the matrix squares the condition number of Theta^(1/2) Khat, which
    stalls the method on wide bases of a smooth kernel (300 Gaussian columns over 6 features:
    the gap stuck at 1e-5). The accurate form takes R from a QR factorisation of
    Theta^(1/2) Khat itself, row block by row block (R of the stacked previous R and the next
    block), and solves R'R dy = rhs: 4-7 times the cost, so only used once the fast form
    stops making progress or loses rank to Theta (see the loop in :func:`_solve`).
    """

    def __init__(self, lp: _Dual, theta: np.ndarray, accurate: bool):
        self.accurate = accurate
        self.rank = lp.mbar + 1
        if accurate:
            self.R = _stacked_r(lp, theta)
            # Tiny pivots treated as infinite here too: the component they carry is dropped.
            diagonal = np.abs(np.diag(self.R))
            columns = np.linalg.norm(self.R, axis=0)
            tiny = diagonal <= _PIVOT_FLOOR * np.maximum(columns, np.finfo(float).tiny)
            self.R[tiny, tiny] = _HUGE
            return
        M = normal_matrix(lp.K, theta[: lp.m], lp.center)
        M[np.arange(lp.mbar), np.arange(lp.mbar)] += theta[lp.m :]
        if not np.isfinite(M).all():
            raise np.linalg.LinAlgError("the Newton system has non-finite entries")
        # Symmetric diagonal scaling first, so that the floors do not depend on the units of K's
        # columns (a narrow Gaussian width makes whole columns 1e-5 against a last row of order m).
        self.scale = 1.0 / np.sqrt(np.maximum(np.diag(M), np.finfo(float).tiny))
        scaled = M * self.scale[:, None] * self.scale[None, :]
        self.cholesky: tuple[np.ndarray, bool] | None = None
        try:
            factor = scipy.linalg.cho_factor(scaled, check_finite=False)
            if np.min(np.abs(np.diag(factor[0]))) ** 2 > _CHOLESKY_FLOOR:
                self.cholesky = factor
                return
        except np.linalg.LinAlgError:
            pass
        values, vectors = scipy.linalg.eigh(scaled)
        keep = values > _PIVOT_FLOOR * values[-1]
        self.vectors, self.values = vectors[:, keep], values[keep]
        self.rank = int(keep.sum())

    def solve(self, rhs: np.ndarray) -> np.ndarray:
        if self.accurate:
            return scipy.linalg.solve_triangular(self.R, scipy.linalg.solve_triangular(self.R, rhs, trans="T"))
        if self.cholesky is not None:
            return self.scale * scipy.linalg.cho_solve(self.cholesky, self.scale * rhs, check_finite=False)
        return self.scale * (self.vectors @ ((self.vectors.T @ (self.scale * rhs)) / self.values))


def _stacked_r(lp: _Dual, theta: np.ndarray) -> np.ndarray:
    """R (mbar + 1 square) of the QR factorisation of [Theta_a^(1/2) [Kc, 1]; diag(theta_r)^(1/2), 0]."""
    width = lp.mbar + 1
    root = np.sqrt(theta)
    R = np.zeros((0, width))
    for weighted in _weighted_blocks(lp.K, lp.center, root[: lp.m]):
        R = _r_factor(np.vstack([R, weighted]))
    bounds = np.zeros((lp.mbar, width))
    bounds[np.arange(lp.mbar), np.arange(lp.mbar)] = root[lp.m :]
    R = _r_factor(np.vstack([R, bounds]))
    if not np.isfinite(R).all():
        raise np.linalg.LinAlgError("the Newton system has non-finite entries")
    return R


def _r_factor(matrix: np.ndarray) -> np.ndarray:
    """R of a QR factorisation (min(rows, columns) x columns)."""
    return np.asarray(scipy.linalg.qr(matrix, mode="r", check_finite=False)[0])[: min(matrix.shape)]


def _norm(vector: np.ndarray) -> float:
    return float(np.linalg.norm(vector))


def _step(x: np.ndarray, dx: np.ndarray, w: np.ndarray, dw: np.ndarray, fraction: float) -> float:
    """The largest step in [0, 1] keeping x + t dx and w + t dw positive, times ``fraction``."""
    limit = 1.0 / fraction
    with np.errstate(over="ignore"):
        for value, change in ((x, dx), (w, dw)):
            # Branch-free: a rising entry divides by a tiny number and never binds. Masks (gathering the falling
            # entries, or a ufunc's where=) cost 10 to 40 times as much at m = 160,000: they mispredict branches.
            # value / min(change, -tiny) is minus the step to the boundary: its largest entry gives the limit.
            ratio = np.minimum(change, -_TINY)
            np.divide(value, ratio, out=ratio)
            limit = min(limit, -float(ratio.max()))
    return min(1.0, fraction * limit)


def _result(
    lp: _Dual, point: _Point, converged: bool, iterations: int, primal: float, dual: float, gap: float
) -> IpmResult:
    a = lp.a_lo + point.x[: lp.m]
    y = point.y
    u = -y[: lp.mbar]
    # Undo the centring's change of variable: gamma = gamma' + kbar'u.
    return IpmResult(u, float(y[lp.mbar] + lp.center @ u), a, converged, iterations, primal, dual, gap)
