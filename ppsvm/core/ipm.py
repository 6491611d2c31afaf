"""A primal-dual interior-point method built for the random-kernel LPs (issue 12).

Both LPs of :mod:`ppsvm.core.lp` are solved through their dual, a bounded LP in
m + mbar variables with only mbar + 1 equality rows:

    min  -c'a
    s.t.  K'(s * a) - r = 0,   s'a = 0,
          a_lo <= a <= a_hi,   -rho <= r <= rho

classify: c = 1, s = d (the labels), a in [0, nu], rho = 1;
regress:  c = y, s = 1,              a in [-1, 1], rho = nu.

Per-row weights w_i on the primal's error terms only change each a_i's box, to [0, nu w_i] and
[-w_i, w_i]: the bounds a_lo and a_hi may be one per row.

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

Passes over K (issue 28)
------------------------
K is the only operand of size m x mbar. The method reads it in row blocks, and each pass reads a
block once and does all its work on the block while the block is in cache (:func:`_block_pass`):
the block's rows of A'd (a product K d), the row-by-row work on those rows of the variables, the
block's share of the products A c (K'(.)) and of the normal matrix. Three passes per iteration:

1. normal: A'y, the residuals, Theta and the predictor's right-hand side rhs row by row; the
   shares of A x, A Theta rhs, A Theta sigma (sigma = 1/w - 1/x) and of the normal matrix.
2. predictor: A'dy and the predictor's direction row by row; the share of A Theta q, where
   q = dx dz / x - dw dv / w. The corrector's right-hand side is then
   r_b + A Theta rhs + target A Theta sigma + A Theta q, the centring target a scalar.
3. corrector: A'dy and the corrector's direction row by row, and each block's step-length bounds.

Three is the fewest for this iteration: the predictor's dy needs the whole normal matrix, the
corrector's right-hand side needs every row of the predictor's direction (through q), and the next
normal matrix needs the corrector's step lengths, a minimum over all rows; each of these three
reductions is followed by work on every row of K. Starting reads K twice (column sums, |K|'s
largest entry and the start's products; the ridge estimate's normal matrix), and turning to the
accurate Newton solves once more: a solve of N iterations reads K 3 N + 3 times, or 3 N + 4.

The row work is compiled by numba (:func:`_kernels`): as numpy expressions it was a pass over
memory per operation, and cost more than the passes over K. The products stay with BLAS.

Back ends (issue 31)
--------------------
The row-block functions take a block of K and the block's rows of the variables and return the
block's partial sums (:class:`_Partial`). The iteration reaches the m rows only through a
:class:`RowBackend`: a pass, a step, the start, and at the end the a's. Two back ends map the
row-block functions over their rows and reduce the partials: :class:`_LocalRows`, K in this process
(the default), and ppsvm.core.dask_engine's, K in row chunks on Dask workers, each worker's rows of
the variables beside its chunks. The r's, mbar of them, stay in this process with either.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple, Protocol, runtime_checkable

import numpy as np
import scipy.linalg
from threadpoolctl import ThreadpoolController

_STEP_TO_BOUNDARY = 0.995
# Give up (converged = False) when the worst of the three measures has not halved for this many iterations.
_STALL_ITERATIONS = 30
_PIVOT_FLOOR = 1e-15
_HUGE = 1e128
# Switch to the accurate (QR) Newton solves when the worst measure has not halved for this many iterations,
# once it is below _ACCURATE_BELOW. Above it the method is still far from the optimum, where slow progress
# comes from a poorly centred start, not from the normal matrix's lost digits: a nearly constant Gaussian
# K (entries 0.63 to 0.98 at 160,000 x 19) spent 6 slow iterations there and then 23 in the 7x dearer form.
_SLOW_ITERATIONS = 6
_ACCURATE_BELOW = 1e-3
# Entries of K per row block (2 MiB of float64), read once per pass and kept in cache for the block's work.
# Measured at 2,000,000 x 19 (CPU time per iteration): 289 ms, against 313 ms with 1 MiB and 301 ms with 4 MiB;
# smaller blocks pay more per-block overhead (487 ms with 256 KiB).
_BLOCK_ELEMENTS = 1 << 18
# A Cholesky pivot of the scaled normal matrix below this (squared) sends the solve to the
# truncated eigen-decomposition: the factor would carry no accurate digit along that direction.
_CHOLESKY_FLOOR = 1e-12
DEFAULT_TOL = 1e-8
DEFAULT_MAX_ITERATIONS = 200

_System = Literal["matrix", "qr"]


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


class RowSource(Protocol):
    """K read by row blocks rather than handed over as one array.

    The solver reads K only through :meth:`rows`, each row block whole, once per pass.
    """

    @property
    def shape(self) -> tuple[int, int]:
        """(m, mbar)."""
        ...

    def rows(self, start: int, stop: int) -> np.ndarray:
        """K[start:stop], float64, shape (stop - start, mbar)."""
        ...


@dataclass(frozen=True)
class _ArrayRows:
    """An array in memory as a :class:`RowSource`: its row blocks are views, not copies."""

    K: np.ndarray

    @property
    def shape(self) -> tuple[int, int]:
        return self.K.shape[0], self.K.shape[1]

    def rows(self, start: int, stop: int) -> np.ndarray:
        return self.K[start:stop]


def _as_source(K: np.ndarray | RowSource) -> RowSource:
    return _ArrayRows(K) if isinstance(K, np.ndarray) else K


def row_ranges(m: int, mbar: int) -> list[tuple[int, int]]:
    """(start, stop) of K's row blocks, each at most _BLOCK_ELEMENTS entries (but at least 4 (mbar + 1) rows)."""
    rows = max(4 * (mbar + 1), _BLOCK_ELEMENTS // (mbar + 1))
    return [(start, min(start + rows, m)) for start in range(0, m, rows)]


def normal_matrix(K: np.ndarray | RowSource, theta: np.ndarray, center: np.ndarray | None = None) -> np.ndarray:
    """Khat' diag(theta) Khat for Khat = [K - 1 center', 1], in row blocks (no copy of K).

    Parameters
    ----------
    K : ndarray or RowSource, shape (m, mbar)
    theta : ndarray, shape (m,), >= 0
    center : ndarray, shape (mbar,), optional
        Subtracted from every row of K; zero by default.

    Returns
    -------
    ndarray, shape (mbar + 1, mbar + 1)
    """
    source = _as_source(K)
    mbar = source.shape[1]
    root = np.sqrt(theta)
    share = _system_share(source, np.zeros(mbar) if center is None else center, False, lambda a, b: root[a:b])
    return _symmetric(share.matrix)


def solve_dual(
    K: np.ndarray | RowSource | RowHolder,
    sign: np.ndarray,
    cost: np.ndarray,
    a_box: tuple[float | np.ndarray, float | np.ndarray],
    rho: float,
    *,
    tol: float = DEFAULT_TOL,
    max_iterations: int = DEFAULT_MAX_ITERATIONS,
) -> IpmResult:
    """Solve the dual LP above by Mehrotra's predictor-corrector method.

    Parameters
    ----------
    K : ndarray, RowSource or RowHolder, shape (m, mbar)
        In this process (solved by the local back end), or held elsewhere and solved by its holder's back end
        (:class:`ppsvm.core.dask_engine.DaskKernel`: on the Dask workers that hold its rows).
    sign : ndarray, shape (m,)
        s: the labels (classify) or ones (regress).
    cost : ndarray, shape (m,)
        c: ones (classify) or the targets (regress).
    a_box : (float or ndarray of shape (m,), float or ndarray of shape (m,))
        Bounds of the a_i: one pair for all, or per row (weighted rows).
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
    a_width, r_width = a_box[1] - a_box[0], 2.0 * rho
    with one_blas_thread(), _backend(K, sign, cost, a_width, r_width) as rows:
        return _solve(rows, sign, cost, a_box[0], rho, a_width, r_width, tol, max_iterations)


def _backend(
    K: np.ndarray | RowSource | RowHolder,
    sign: np.ndarray,
    cost: np.ndarray,
    a_width: float | np.ndarray,
    r_width: float,
) -> contextlib.AbstractContextManager[RowBackend]:
    """The back end of one solve: K's holder's where K is held elsewhere, the local one otherwise."""
    if isinstance(K, RowHolder):
        return K.backend(sign, cost, a_width, r_width)
    return contextlib.nullcontext(_LocalRows(_as_source(K), sign, cost, a_width, r_width))


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


# --- the row-block interface: one block of K and its rows of the variables in, partial sums out -------------


# The rows of the variables' arrays (_RowChunk.variables, _Rows.variables): x in (0, U) with w = U - x (the a's
# and r's shifted to [0, U]) and z, v > 0 (the multipliers of x >= 0 and x <= U) are the iterate; Theta and the
# predictor's right-hand side are written by the normal pass, the predictor's dx dz and dw dv by the predictor
# pass, the corrector's direction by the corrector pass.
_X, _W, _Z, _V, _THETA, _RHS, _AFFINE_X, _AFFINE_W, _DX, _DW, _DZ, _DV = range(12)


@dataclass(frozen=True)
class _Rows:
    """Some of the variables (a row block's a's, or the r's) and their data, as views.

    Attributes
    ----------
    variables : ndarray, shape (12, k)
        Rows _X to _DV above.
    cost : ndarray, shape (k,)
        c, the objective being -c'x; zero for the r's.
    sign : ndarray, shape (k,)
        s of the a's; one for the r's.
    upper : ndarray, shape (k,)
        U of these variables (a stride-0 view where they share one: no memory read per row).
    """

    variables: np.ndarray
    cost: np.ndarray
    sign: np.ndarray
    upper: np.ndarray


class _Work(NamedTuple):
    """What a pass's row work returns: s c for the columns c whose images under A the pass needs (shape (k, j)),
    their sums, and the pass's sums and maxima."""

    columns: np.ndarray
    column_sums: np.ndarray
    sums: dict[str, float]
    peaks: dict[str, float]


# (rows, raw, offset) -> _Work, where A'd on these rows is s (raw + offset).
_RowWork = Callable[[_Rows, np.ndarray, float], _Work]


@dataclass(frozen=True)
class _Partial:
    """The share of some rows in a pass; :meth:`combine` reduces the shares of disjoint rows.

    Attributes
    ----------
    products : ndarray, shape (mbar + 1, j), or None
        [K_b'(s c); s'c] of the pass's j columns c on a row block, [-c; 0] on the r's: summed.
    sums : dict of str to float
        Summed.
    peaks : dict of str to float
        Maxima.
    matrix : ndarray, shape (mbar + 1, mbar + 1), or None
        The block's Khat_b' Theta_b Khat_b (centred): summed.
    r : ndarray, shape (at most mbar + 1, mbar + 1), or None
        R of a QR factorisation of the block's Theta_b^(1/2) Khat_b: stacked and factorised again.
    """

    products: np.ndarray | None = None
    sums: dict[str, float] = field(default_factory=dict)
    peaks: dict[str, float] = field(default_factory=dict)
    matrix: np.ndarray | None = None
    r: np.ndarray | None = None

    def combine(self, other: _Partial) -> _Partial:
        """The share of both sets of rows."""
        return _Partial(
            _sum(self.products, other.products),
            {key: self.sums.get(key, 0.0) + other.sums.get(key, 0.0) for key in self.sums | other.sums},
            {key: max(self.peaks.get(key, -np.inf), other.peaks.get(key, -np.inf)) for key in self.peaks | other.peaks},
            _sum(self.matrix, other.matrix),
            other.r if self.r is None else self.r if other.r is None else _r_factor(np.vstack([self.r, other.r])),
        )


def _sum(first: np.ndarray | None, second: np.ndarray | None) -> np.ndarray | None:
    return second if first is None else first if second is None else first + second


def _block_pass(
    K_b: np.ndarray, rows: _Rows, center: np.ndarray, direction: np.ndarray, work: _RowWork, system: _System | None
) -> _Partial:
    """One row block's share of a pass, reading the block once.

    The block's rows of A'd, the pass's row work on them, K_b'(s c) of the columns c the work returns, and with
    ``system`` the block's share of the Newton system at the Theta the work has written.

    Parameters
    ----------
    K_b : ndarray, shape (k, mbar)
    rows : _Rows
        The block's rows of the variables (length k).
    center : ndarray, shape (mbar,)
    direction : ndarray, shape (mbar + 1,)
        d, whose image A'd = s (Kc d_K + d_s) the work receives.
    work : callable
        The pass's row work.
    system : {"matrix", "qr"} or None

    Returns
    -------
    _Partial
    """
    done = work(rows, K_b @ direction[:-1], float(direction[-1] - center @ direction[:-1]))
    share = _Partial(_gather(K_b, done.columns, done.column_sums), done.sums, done.peaks)
    if system is None:
        return share
    return share.combine(_system_part(K_b, np.sqrt(rows.variables[_THETA]), center, system == "qr"))


def _slack_pass(rows: _Rows, direction: np.ndarray, work: _RowWork) -> _Partial:
    """The r's share of a pass: A'd is -d_K there, and a column c adds -c to A c's first mbar entries."""
    done = work(rows, -direction[:-1], 0.0)
    products = np.vstack([-done.columns, np.zeros((1, done.columns.shape[1]))])
    return _Partial(products, done.sums, done.peaks)


def _gather(K_b: np.ndarray, columns: np.ndarray, column_sums: np.ndarray) -> np.ndarray:
    """[K_b' columns; column sums], shape (mbar + 1, j), for columns of shape (k, j).

    One matrix-vector product per column: OpenBLAS's matrix product with 3 columns took 1.5 to 1.7 times as
    long (233 against 134 microseconds on a 13,107 x 19 block of a column-major K, 302 against 206 row-major).
    """
    mbar = K_b.shape[1]
    out = np.empty((mbar + 1, columns.shape[1]), order="F")
    for j in range(columns.shape[1]):
        np.matmul(K_b.T, columns[:, j], out=out[:mbar, j])
    out[mbar] = column_sums
    return out


def _start_rows(rows: _Rows, positive: float, negative: float, shift: float) -> None:
    """The start's a's on some rows (no pass over K): x at the fraction ``positive`` of the box's width where s > 0
    and ``negative`` where s < 0, and z, v at least ``shift`` (see :func:`_start`)."""
    x = rows.variables[_X]
    np.multiply(np.where(rows.sign > 0, positive, negative), rows.upper, out=x)
    np.subtract(rows.upper, x, out=rows.variables[_W])
    np.add(np.maximum(-rows.cost, 0.0), shift, out=rows.variables[_Z])
    np.add(np.maximum(rows.cost, 0.0), shift, out=rows.variables[_V])


def _slack_rows(mbar: int, r_width: float) -> _Rows:
    """The r's, in the calling process whatever the back end: no cost, s = 1, one width."""
    return _Rows(np.empty((12, mbar)), np.zeros(mbar), np.ones(mbar), np.broadcast_to(r_width, (mbar,)))


def _survey_block(K_b: np.ndarray, rows: _Rows, a_lo: np.ndarray) -> _Partial:
    """The start's pass over a block: K_b'(1, s a_lo, s (a_lo + x), s c) and their sums, and |K_b|'s largest entry.

    They give K's column means (the centre), A's image of the lower bounds, of the start's a's and of c;
    ``a_lo`` is the block's rows of the a's lower bounds, shape (k,).
    """
    columns = np.empty((len(rows.sign), 4), order="F")
    columns[:, 0] = 1.0
    np.multiply(rows.sign, a_lo, out=columns[:, 1])
    np.multiply(rows.sign, a_lo + rows.variables[_X], out=columns[:, 2])
    np.multiply(rows.sign, rows.cost, out=columns[:, 3])
    products = _gather(K_b, columns, columns.sum(axis=0))
    return _Partial(products, peaks={"k_max": max(float(K_b.max()), -float(K_b.min()))})


def _system_part(K_b: np.ndarray, root: np.ndarray | None, center: np.ndarray, accurate: bool) -> _Partial:
    """The block's share of the Newton system: W'W or R of W, W = diag(root) [K_b - 1 center', 1].

    W has K_b's layout, so that every elementwise operation runs along the contiguous axis (numpy loops over the
    short axis of a mismatched layout: 2.5 times as long at mbar = 19). ``root`` None: unit weights.
    """
    k, mbar = K_b.shape
    weighted = np.empty((k, mbar + 1), order="F" if K_b.strides[0] < K_b.strides[1] else "C")
    np.subtract(K_b, center, out=weighted[:, :mbar])
    weighted[:, mbar] = 1.0
    if root is not None:
        weighted *= root[:, None]
    if accurate:
        return _Partial(r=_r_factor(weighted))
    # A general product, though W'W is symmetric: OpenBLAS's symmetric rank-k update, half the flops, took
    # longer at these shapes (388 against 323 microseconds on a 13,107 x 20 block).
    return _Partial(matrix=weighted.T @ weighted)


def _system_share(
    source: RowSource, center: np.ndarray, accurate: bool, root: Callable[[int, int], np.ndarray | None]
) -> _Partial:
    """The Newton system's :func:`_system_part` over all of K, ``root(start, stop)`` weighting each block."""
    m, mbar = source.shape
    parts = (_system_part(source.rows(a, b), root(a, b), center, accurate) for a, b in row_ranges(m, mbar))
    return functools.reduce(_Partial.combine, parts)


def _normal_work(rows: _Rows, raw: np.ndarray, offset: float) -> _Work:
    """At the iterate, given A'y: Theta and the predictor's right-hand side (written to ``rows``), the columns
    x, Theta rhs and Theta sigma (sigma = 1/w - 1/x), and the sums the measures and the step need."""
    columns = np.empty((rows.variables.shape[1], 3), order="F")
    done = _kernels().normal(rows.variables, rows.cost, rows.sign, rows.upper, raw, offset, columns)
    names = ("residual_c", "residual_u", "image", "cost_x", "upper_v", "xz", "wv", "x")
    return _Work(columns, np.array(done[8:]), dict(zip(names, done[:8], strict=True)), {})


def _normal_rows(
    variables: np.ndarray,
    cost: np.ndarray,
    sign: np.ndarray,
    upper: np.ndarray,
    raw: np.ndarray,
    offset: float,
    columns: np.ndarray,
) -> tuple[float, ...]:
    """The normal pass's row work, compiled (:func:`_kernels`); see :func:`_normal_work`.

    U'v is summed as U_0 sum(v) + sum((U_i - U_0) v_i): with one U for all rows that is exactly U sum(v), the
    unweighted solve's figure bit for bit.
    """
    x, w, z, v = variables[_X], variables[_W], variables[_Z], variables[_V]
    theta, rhs = variables[_THETA], variables[_RHS]
    residual_c = residual_u = image_2 = cost_x = v_sum = v_spread = xz = wv = x_sum = 0.0
    sum_x = sum_rhs = sum_sigma = 0.0
    upper_0 = upper[0] if x.shape[0] else 0.0  # numba checks no bounds: no rows, no read
    for i in range(x.shape[0]):
        image = sign[i] * (raw[i] + offset)
        # Each reciprocal once: divisions are the dearest operation of these loops.
        reciprocal_x = 1.0 / x[i]
        reciprocal_w = 1.0 / w[i]
        ratio_w = v[i] * reciprocal_w
        scaling = 1.0 / (z[i] * reciprocal_x + ratio_w)
        gap_u = upper[i] - x[i] - w[i]
        # c + A'y = A'y - f. The predictor's right-hand side r_c - r_xz/x + (r_wv - v r_u)/w with r_xz = -xz,
        # r_wv = -wv is r_c + z - v - (v/w) r_u = f - A'y - (v/w) r_u: the z - v of r_c = f - A'y - z + v cancels.
        base = cost[i] + image
        predictor = -(base + ratio_w * gap_u)
        gap_c = v[i] - z[i] - base
        theta[i] = scaling
        rhs[i] = predictor
        column_x = sign[i] * x[i]
        column_rhs = sign[i] * (scaling * predictor)
        column_sigma = sign[i] * (scaling * (reciprocal_w - reciprocal_x))
        columns[i, 0] = column_x
        columns[i, 1] = column_rhs
        columns[i, 2] = column_sigma
        sum_x += column_x
        sum_rhs += column_rhs
        sum_sigma += column_sigma
        residual_c += gap_c * gap_c
        residual_u += gap_u * gap_u
        image_2 += image * image
        cost_x += cost[i] * x[i]
        v_sum += v[i]
        v_spread += (upper[i] - upper_0) * v[i]
        xz += x[i] * z[i]
        wv += w[i] * v[i]
        x_sum += x[i]
    upper_v = upper_0 * v_sum + v_spread
    return residual_c, residual_u, image_2, cost_x, upper_v, xz, wv, x_sum, sum_x, sum_rhs, sum_sigma


def _predictor_work(rows: _Rows, raw: np.ndarray, offset: float) -> _Work:
    """Given A'dy of the predictor: its direction's dx dz and dw dv (written to ``rows``), the column Theta q
    (q = dx dz / x - dw dv / w), the dot products of mu after the step, and the step lengths' bounds."""
    column = np.empty((rows.variables.shape[1], 1), order="F")
    done = _kernels().predictor(rows.variables, rows.sign, rows.upper, raw, offset, column)
    sums = dict(zip(("x_dz", "dx_z", "dx_dz"), done[:3], strict=True))
    return _Work(column, np.array(done[3:4]), sums, {"primal": done[4], "dual": done[5]})


def _predictor_rows(
    variables: np.ndarray, sign: np.ndarray, upper: np.ndarray, raw: np.ndarray, offset: float, column: np.ndarray
) -> tuple[float, ...]:
    """The predictor pass's row work, compiled (:func:`_kernels`); see :func:`_predictor_work`."""
    x, w, z, v = variables[_X], variables[_W], variables[_Z], variables[_V]
    theta, rhs, affine_x, affine_w = variables[_THETA], variables[_RHS], variables[_AFFINE_X], variables[_AFFINE_W]
    x_dz = dx_z = dx_dz = column_sum = 0.0
    primal = dual = -np.inf
    for i in range(x.shape[0]):
        reciprocal_x = 1.0 / x[i]
        reciprocal_w = 1.0 / w[i]
        dx = theta[i] * (sign[i] * (raw[i] + offset) - rhs[i])
        dw = upper[i] - x[i] - w[i] - dx
        # dz = (r_xz - z dx)/x with r_xz = -xz, so -dz/z = (x + dx)/x; dv likewise.
        fall_z = (x[i] + dx) * reciprocal_x
        fall_v = (w[i] + dw) * reciprocal_w
        dz = -z[i] * fall_z
        dv = -v[i] * fall_v
        product_x = dx * dz
        product_w = dw * dv
        affine_x[i] = product_x
        affine_w[i] = product_w
        entry = sign[i] * (theta[i] * (product_x * reciprocal_x - product_w * reciprocal_w))
        column[i, 0] = entry
        column_sum += entry
        x_dz += x[i] * dz + w[i] * dv
        dx_z += dx * z[i] + dw * v[i]
        dx_dz += product_x + product_w
        primal = max(primal, max(-dx * reciprocal_x, -dw * reciprocal_w))
        dual = max(dual, max(fall_z, fall_v))
    return x_dz, dx_z, dx_dz, column_sum, primal, dual


def _corrector_work(rows: _Rows, raw: np.ndarray, offset: float, target: float) -> _Work:
    """Given A'dy of the corrector: its direction (written to ``rows``) and the step lengths' bounds."""
    primal, dual = _kernels().corrector(rows.variables, rows.sign, rows.upper, raw, offset, target)
    return _Work(np.empty((rows.variables.shape[1], 0)), np.empty(0), {}, {"primal": primal, "dual": dual})


def _corrector_rows(
    variables: np.ndarray, sign: np.ndarray, upper: np.ndarray, raw: np.ndarray, offset: float, target: float
) -> tuple[float, float]:
    """The corrector pass's row work, compiled (:func:`_kernels`); see :func:`_corrector_work`.

    With r_xz = target - xz - dx dz and r_wv = target - wv - dw dv (the predictor's), the right-hand side is the
    predictor's plus (target - dw dv)/w - (target - dx dz)/x, and dz = (target - dx dz)/x - z (x + dx)/x.
    """
    x, w, z, v = variables[_X], variables[_W], variables[_Z], variables[_V]
    theta, rhs, affine_x, affine_w = variables[_THETA], variables[_RHS], variables[_AFFINE_X], variables[_AFFINE_W]
    primal = dual = -np.inf
    for i in range(x.shape[0]):
        reciprocal_x = 1.0 / x[i]
        reciprocal_w = 1.0 / w[i]
        centring_x = (target - affine_x[i]) * reciprocal_x
        centring_w = (target - affine_w[i]) * reciprocal_w
        dx = theta[i] * (sign[i] * (raw[i] + offset) - rhs[i] - centring_w + centring_x)
        dw = upper[i] - x[i] - w[i] - dx
        dz = centring_x - z[i] * (x[i] + dx) * reciprocal_x
        dv = centring_w - v[i] * (w[i] + dw) * reciprocal_w
        variables[_DX, i] = dx
        variables[_DW, i] = dw
        variables[_DZ, i] = dz
        variables[_DV, i] = dv
        primal = max(primal, max(-dx * reciprocal_x, -dw * reciprocal_w))
        dual = max(dual, max(-dz / z[i], -dv / v[i]))
    return primal, dual


def _step_rows(variables: np.ndarray, primal: float, dual: float) -> None:
    """x, w += primal (dx, dw) and z, v += dual (dz, dv), compiled (:func:`_kernels`)."""
    for i in range(variables.shape[1]):
        variables[_X, i] += primal * variables[_DX, i]
        variables[_W, i] += primal * variables[_DW, i]
        variables[_Z, i] += dual * variables[_DZ, i]
        variables[_V, i] += dual * variables[_DV, i]


class _Kernels(NamedTuple):
    """The compiled row work (numba dispatchers)."""

    normal: Callable[..., tuple[float, ...]]
    predictor: Callable[..., tuple[float, ...]]
    corrector: Callable[..., tuple[float, float]]
    step: Callable[..., None]


@functools.cache
def _kernels() -> _Kernels:
    """The row work of the three passes and the step, compiled by numba on first use.

    As numpy expressions each operation is a pass over the rows' vectors: the normal and predictor passes' row
    work took 66 and 61 ns a row at 2,000,000 rows against 33 and 21 compiled, and the whole solve at
    5,000,000 x 19 1,027 ms of CPU time an iteration against 794. Compiled on a machine's first solve and kept
    (cache=True: a few seconds once); numba is imported only when a process solves its first LP, which then
    takes about 1 s and 100 MiB of RSS more. error_model "numpy": a division by 0 gives inf as in numpy, with no
    check in the loop. nogil: solves in several threads run their row work in parallel.
    """
    import numba

    compiled = numba.njit(cache=True, nogil=True, error_model="numpy")
    return _Kernels(compiled(_normal_rows), compiled(_predictor_rows), compiled(_corrector_rows), compiled(_step_rows))


def _step_length(peak: float, fraction: float) -> float:
    """The largest step in [0, 1] keeping x + t dx > 0 where peak = max(-dx / x), times ``fraction``."""
    return 1.0 if peak <= fraction else fraction / peak


# --- the back ends ---------------------------------------------------------------------------------------------


class RowBackend(Protocol):
    """Where the row work of one solve runs: K's rows, the a's rows of the variables beside them, and the r's.

    The iteration (:func:`_solve`, :func:`_start`, :func:`_result`) reaches the m rows only through these methods
    and reads back only partial sums, and the a's at the end. The r's are mbar variables that K does not touch:
    every back end keeps them in this process as :attr:`slack`, which :func:`_start` writes and the iteration reads
    (x_r and theta_r).
    """

    slack: _Rows

    @property
    def shape(self) -> tuple[int, int]:
        """(m, mbar) of K."""
        ...

    def start(self, positive: float, negative: float, shift: float) -> None:
        """Write the starting a's on every row (:func:`_start_rows`)."""
        ...

    def survey(self, a_lo: float | np.ndarray) -> _Partial:
        """The start's pass (:func:`_survey_block`) at the a's :meth:`start` wrote; ``a_lo`` one or per row."""
        ...

    def run(self, center: np.ndarray, direction: np.ndarray, work: _RowWork, system: _System | None = None) -> _Partial:
        """One pass of an iteration: :func:`_block_pass` on every block of K and :func:`_slack_pass` on the r's."""
        ...

    def system(self, center: np.ndarray, accurate: bool, unit: bool = False) -> _Partial:
        """The Newton system's share of K at the Theta the last normal pass wrote (``unit``: Theta = I)."""
        ...

    def step(self, primal: float, dual: float) -> None:
        """Move the a's and the r's along the corrector's direction (no pass over K)."""
        ...

    def shifted_a(self) -> np.ndarray:
        """The a's at the iterate less their lower bounds (x of the a's), shape (m,), in K's row order."""
        ...


@runtime_checkable
class RowHolder(Protocol):
    """K held outside this process, which makes the back end of each solve over it
    (:class:`ppsvm.core.dask_engine.DaskKernel`)."""

    @property
    def shape(self) -> tuple[int, int]:
        """(m, mbar)."""
        ...

    def backend(
        self, sign: np.ndarray, cost: np.ndarray, a_width: float | np.ndarray, r_width: float
    ) -> contextlib.AbstractContextManager[RowBackend]:
        """A back end for one solve (the rows' s, c and box widths, shape (m,) or one width), released on exit."""
        ...


class _RowChunk:
    """Rows of K and their a's rows of the variables, worked block by block in one process.

    All of K in the local back end (:class:`_LocalRows`); one chunk of a worker's share in the Dask back end
    (ppsvm.core.dask_engine), whose workers run these methods on their chunks. ``sign`` and ``cost`` are the
    rows', shape (k,); ``a_width`` their boxes' widths, shape (k,) or one for all.
    """

    def __init__(self, source: RowSource, sign: np.ndarray, cost: np.ndarray, a_width: float | np.ndarray):
        k, mbar = source.shape
        self.source = source
        # Rows _X to _DV over the k a's.
        self.variables = np.empty((12, k))
        self.ranges = row_ranges(k, mbar)
        widths = np.broadcast_to(a_width, (k,))
        self.blocks = [self._rows(a, b, cost[a:b], sign[a:b], widths[a:b]) for a, b in self.ranges]

    def _rows(self, start: int, stop: int, cost: np.ndarray, sign: np.ndarray, upper: float | np.ndarray) -> _Rows:
        return _Rows(self.variables[:, start:stop], cost, sign, np.broadcast_to(upper, (stop - start,)))

    def start(self, positive: float, negative: float, shift: float) -> None:
        """:func:`_start_rows` on every block."""
        for rows in self.blocks:
            _start_rows(rows, positive, negative, shift)

    def survey(self, a_lo: float | np.ndarray) -> _Partial:
        """:func:`_survey_block` on every block; ``a_lo`` one for all or these rows', shape (k,)."""
        lows = np.broadcast_to(a_lo, (self.source.shape[0],))
        parts = (
            _survey_block(self.source.rows(a, b), rows, lows[a:b])
            for (a, b), rows in zip(self.ranges, self.blocks, strict=True)
        )
        return functools.reduce(_Partial.combine, parts)

    def run_blocks(
        self, center: np.ndarray, direction: np.ndarray, work: _RowWork, system: _System | None, share: _Partial
    ) -> _Partial:
        """:func:`_block_pass` on every block, added to ``share`` one block after the other."""
        for (a, b), rows in zip(self.ranges, self.blocks, strict=True):
            share = share.combine(_block_pass(self.source.rows(a, b), rows, center, direction, work, system))
        return share

    def system(self, center: np.ndarray, accurate: bool, unit: bool = False) -> _Partial:
        """The Newton system's share of these rows at the Theta the last normal pass wrote (``unit``: Theta = I)."""
        theta = self.variables[_THETA]
        return _system_share(self.source, center, accurate, lambda a, b: None if unit else np.sqrt(theta[a:b]))

    def step(self, primal: float, dual: float) -> None:
        """Move these rows along the corrector's direction (no pass over K)."""
        for rows in self.blocks:
            _kernels().step(rows.variables, primal, dual)


class _LocalRows(_RowChunk):
    """The local back end: K's row blocks read one after another in this process, the variables in memory.

    Each pass maps a row-block function over the blocks and reduces the partials; the r's are one more part,
    the first.
    """

    def __init__(
        self, source: RowSource, sign: np.ndarray, cost: np.ndarray, a_width: float | np.ndarray, r_width: float
    ):
        super().__init__(source, sign, cost, a_width)
        self.slack = _slack_rows(source.shape[1], r_width)

    @property
    def shape(self) -> tuple[int, int]:
        return self.source.shape

    def run(self, center: np.ndarray, direction: np.ndarray, work: _RowWork, system: _System | None = None) -> _Partial:
        """One pass of an iteration (:func:`_slack_pass` on the r's, then :func:`_block_pass` on every block)."""
        return self.run_blocks(center, direction, work, system, _slack_pass(self.slack, direction, work))

    def step(self, primal: float, dual: float) -> None:
        super().step(primal, dual)
        _kernels().step(self.slack.variables, primal, dual)

    def shifted_a(self) -> np.ndarray:
        return self.variables[_X]


# --- the iteration ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Dual:
    """The dual LP's constants.

    Kc = K - 1 center' has centred columns. Because s'a = 0 is a constraint, Kc'(s a) = K'(s a)
    on the feasible set, so the LP is unchanged; but [Kc, 1] is far better conditioned than
    [K, 1] when K is nearly constant (a wide Gaussian width puts every entry near 1). In the
    primal this is the change of variable gamma' = gamma - center'u.
    """

    m: int
    mbar: int
    a_lo: float | np.ndarray
    center: np.ndarray
    k_max: float
    b: np.ndarray
    upper_norm: float
    cost_norm: float

    def images(self, products: np.ndarray) -> np.ndarray:
        """A c = (Kc'(s c_a) - c_r, s'c_a) from the summed [K'(s c_a) - c_r; s'c_a] of a pass's columns."""
        images = products.copy()
        images[: self.mbar] -= np.outer(self.center, products[self.mbar])
        return images


def _solve(
    rows: RowBackend,
    sign: np.ndarray,
    cost: np.ndarray,
    a_lo: float | np.ndarray,
    rho: float,
    a_width: float | np.ndarray,
    r_width: float,
    tol: float,
    max_iterations: int,
) -> IpmResult:
    m, mbar = rows.shape
    n = m + mbar
    lp = _start(rows, sign, cost, a_lo, rho, a_width, r_width)
    x_r, theta_r = rows.slack.variables[_X], rows.slack.variables[_THETA]
    b_norm = _norm(lp.b)
    y = np.zeros(mbar + 1)
    primal = dual = gap = np.inf
    best, best_at = np.inf, 0
    accurate = False
    first_rank: int | None = None
    for iteration in range(max_iterations + 1):
        # A'y comes afresh from every normal pass: its product runs on blocks the pass reads anyway.
        normal = rows.run(lp.center, y, _normal_work, "qr" if accurate else "matrix")
        sums = normal.sums
        images = lp.images(_given(normal.products))  # A x, A Theta rhs, A Theta sigma
        residual_b = lp.b - images[:, 0]
        # Residuals relative to the size of the terms they cancel: with nu = 1000 the products
        # K'(s a) sum terms of 1e6 to values below 1, and 1e-16 of 1e6 is all float64 can offer.
        # term_size bounds the norm of |A| |x| (x >= 0): the terms that A x sums.
        a_sum = sums["x"] - float(x_r.sum())
        term_size = np.sqrt(mbar) * lp.k_max * a_sum + _norm(x_r) + a_sum
        primal = max(
            _norm(residual_b) / (1.0 + b_norm + term_size), np.sqrt(sums["residual_u"]) / (1.0 + lp.upper_norm)
        )
        dual = np.sqrt(sums["residual_c"]) / (1.0 + lp.cost_norm + np.sqrt(sums["image"]))
        primal_value = -sums["cost_x"]
        dual_value = float(lp.b @ y) - sums["upper_v"]
        gap = abs(primal_value - dual_value) / (1.0 + abs(primal_value))
        if primal <= tol and dual <= tol and gap <= tol:
            return _result(lp, rows, y, True, iteration, primal, dual, gap)
        worst = max(primal, dual, gap)
        if worst < 0.5 * best:
            best, best_at = worst, iteration
        if iteration == max_iterations or iteration - best_at > _STALL_ITERATIONS:
            break
        if not accurate and _stalled_near_optimum(iteration, best_at, best):
            accurate, best_at = True, iteration
        try:
            # Turned accurate just now: the pass formed the fast form's matrix, the QR takes one more pass.
            system = rows.system(lp.center, True) if accurate and normal.r is None else normal
            equations = _NormalEquations(system, theta_r)
            first_rank = equations.rank if first_rank is None else first_rank
            if not accurate and equations.rank < first_rank:
                # Theta, not K, has made the fast form singular: its truncated directions would soon
                # undo the progress made (see _NormalEquations). This step and the rest use the accurate form.
                accurate = True
                equations = _NormalEquations(rows.system(lp.center, True), theta_r)
        except np.linalg.LinAlgError:
            break
        predictor_rhs = residual_b + images[:, 1]
        predictor = rows.run(lp.center, equations.solve(predictor_rhs), _predictor_work)
        step_p = _step_length(predictor.peaks["primal"], 1.0)
        step_d = _step_length(predictor.peaks["dual"], 1.0)
        complementarity = sums["xz"] + sums["wv"]
        mu = complementarity / (2 * n)
        # (x + tp dx)'(z + td dz) + (w + tp dw)'(v + td dv), expanded into the passes' dot products.
        mu_affine = (
            complementarity
            + step_d * predictor.sums["x_dz"]
            + step_p * predictor.sums["dx_z"]
            + step_p * step_d * predictor.sums["dx_dz"]
        ) / (2 * n)
        target = (max(mu_affine, 0.0) / mu) ** 3 * mu
        # Corrector: centring (target) plus the second-order term of the predictor.
        corrector_rhs = predictor_rhs + target * images[:, 2] + lp.images(_given(predictor.products))[:, 0]
        dy = equations.solve(corrector_rhs)
        corrector = rows.run(lp.center, dy, functools.partial(_corrector_work, target=target))
        step_p = _step_length(corrector.peaks["primal"], _STEP_TO_BOUNDARY)
        step_d = _step_length(corrector.peaks["dual"], _STEP_TO_BOUNDARY)
        rows.step(step_p, step_d)
        y = y + step_d * dy
    return _result(lp, rows, y, False, iteration, primal, dual, gap)


def _given(array: np.ndarray | None) -> np.ndarray:
    """A partial's field that the pass in question always fills."""
    if array is None:
        raise ValueError("a pass returned no share where one was expected")
    return array


def _stalled_near_optimum(iteration: int, best_at: int, best: float) -> bool:
    """Whether the fast form has stopped making progress where its lost digits matter (see _ACCURATE_BELOW)."""
    return iteration - best_at >= _SLOW_ITERATIONS and best < _ACCURATE_BELOW


def _start(
    rows: RowBackend,
    sign: np.ndarray,
    cost: np.ndarray,
    a_lo: float | np.ndarray,
    rho: float,
    a_width: float | np.ndarray,
    r_width: float,
) -> _Dual:
    """Write an interior starting point that already meets s'a = 0 and is dual feasible with y = 0; the constants.

    The a's sit at a quarter of their box, split between s = +1 and s = -1 in inverse
    proportion to their classes' total width (their counts when all boxes are alike; the middle of the
    box would miss s'a = 0 by m/2 times the box when one class is rare); r sits at K'(s a) pulled into
    the middle half of its box. ``a_lo`` and ``a_width`` are scalars or per row, shape (m,).
    """
    m, mbar = rows.shape
    shift = 1.0 + 0.1 * float(np.abs(cost).max())
    if not np.any(a_lo):  # classify: a in [0, nu w], s = labels
        positive = sign > 0
        # The classes' total widths; with one width for all, their counts as floats: the same quotients as the
        # integers' (both correctly rounded).
        size = a_width if isinstance(a_width, np.ndarray) else np.ones(m)
        total_pos, total_neg = float(size[positive].sum()), float(size[~positive].sum())
        smaller = min(total_pos, total_neg)
        # A quarter of the fraction is exact (a power of two): the same a's as a quarter of the product.
        rows.start(smaller / (total_pos or 1.0) / 4.0, smaller / (total_neg or 1.0) / 4.0, shift)
    else:
        rows.start(0.5, 0.5, shift)
    survey = rows.survey(a_lo)
    products = _given(survey.products)
    center = products[:mbar, 0] / m
    # K's columns centred: Kc'(s a_lo), Kc'(s (a_lo + x_a)), Kc'(s c).
    centred = products[:mbar, 1:] - np.outer(center, products[mbar, 1:])
    # A's image of the lower bounds (a_lo, -rho), moved to the right-hand side: b = -A l.
    b = -np.r_[centred[:, 0] + rho, products[mbar, 1]]
    x_r, w_r, z_r, v_r = (rows.slack.variables[row] for row in (_X, _W, _Z, _V))
    x_r[:] = np.clip(centred[:, 1], -rho / 2.0, rho / 2.0) + rho
    w_r[:] = r_width - x_r
    # The multipliers of r's bounds end at |u|, often in the hundreds: started near 1, the first
    # steps toward u drive one of each pair to its bound and stall (5 steps of length 0.006-0.35 at
    # 40,000 x 19, nu = 1). Both start at the size of a ridge estimate of u instead: the least-squares
    # solution of A'y = f (u = -y_K), one normal matrix with Theta = I. Measured over 28 LPs
    # (classify and regress, mbar 19 and 100, three widths, nu 1e-3 to 1e4): 464 iterations against 497.
    ridge_rhs = -np.r_[centred[:, 2], products[mbar, 3]]  # A f, f = (-c, 0)
    ridge = _NormalEquations(rows.system(center, False, unit=True), np.ones(mbar)).solve(ridge_rhs)
    z_r[:] = v_r[:] = shift + float(np.abs(ridge[:mbar]).max())
    # m U^2 with one width for all: the figure of the unweighted solve bit for bit.
    a_squares = float(a_width @ a_width) if isinstance(a_width, np.ndarray) else m * a_width**2
    upper_norm = float(np.sqrt(a_squares + mbar * r_width**2))
    k_max = survey.peaks["k_max"]
    return _Dual(m, mbar, a_lo, center, k_max, b, upper_norm, _norm(np.asarray(cost)))


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
    Theta^(1/2) Khat itself, row block by row block (R of the stacked R's of the blocks),
    and solves R'R dy = rhs: 4-7 times the cost, so only used once the fast form
    stops making progress or loses rank to Theta (see the loop in :func:`_solve`).

    ``system`` is K's share from the passes (:class:`_Partial`'s ``matrix`` or ``r``); theta_r the r's scaling.
    """

    def __init__(self, system: _Partial, theta_r: np.ndarray):
        mbar = len(theta_r)
        self.rank = mbar + 1
        self.accurate = system.r is not None
        if system.r is not None:
            bounds = np.zeros((mbar, mbar + 1))
            bounds[np.arange(mbar), np.arange(mbar)] = np.sqrt(theta_r)
            self.R = _r_factor(np.vstack([system.r, bounds]))
            if not np.isfinite(self.R).all():
                raise np.linalg.LinAlgError("the Newton system has non-finite entries")
            # Tiny pivots treated as infinite here too: the component they carry is dropped.
            diagonal = np.abs(np.diag(self.R))
            columns = np.linalg.norm(self.R, axis=0)
            tiny = diagonal <= _PIVOT_FLOOR * np.maximum(columns, np.finfo(float).tiny)
            self.R[tiny, tiny] = _HUGE
            return
        M = _symmetric(system.matrix)
        M[np.arange(mbar), np.arange(mbar)] += theta_r
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


def _symmetric(matrix: np.ndarray | None) -> np.ndarray:
    """The summed W'W made exactly symmetric (its upper triangle mirrored: the product's two may differ in the
    last bit)."""
    upper = _given(matrix)
    return np.triu(upper) + np.triu(upper, 1).T


def _r_factor(matrix: np.ndarray) -> np.ndarray:
    """R of a QR factorisation (min(rows, columns) x columns)."""
    return np.asarray(scipy.linalg.qr(matrix, mode="r", check_finite=False)[0])[: min(matrix.shape)]


def _norm(vector: np.ndarray) -> float:
    return float(np.linalg.norm(vector))


def _result(
    lp: _Dual, rows: RowBackend, y: np.ndarray, converged: bool, iterations: int, primal: float, dual: float, gap: float
) -> IpmResult:
    a = lp.a_lo + rows.shifted_a()
    u = -y[: lp.mbar]
    # Undo the centring's change of variable: gamma = gamma' + center'u.
    return IpmResult(u, float(y[lp.mbar] + lp.center @ u), a, converged, iterations, primal, dual, gap)
