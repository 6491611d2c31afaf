"""The two linear programs of the papers, and three ways to solve them.

Classification (Mangasarian & Wild), labels d_i in {-1, +1}:

    min_{u, gamma}  nu * sum_i max(0, 1 - d_i (K_i u - gamma)) + ||u||_1

Regression (Fung & Mangasarian), real targets y_i:

    min_{u, gamma}  sum_i |K_i u - gamma - y_i| + nu * ||u||_1

Both are the LPs of the papers with the slack variables eliminated. Optional per-row weights
w_i > 0 (sample or class weights) multiply each row's error term: nu * sum_i w_i max(...) and
sum_i w_i |...|; in the dual they only change the box of a_i, to [0, nu w_i] and [-w_i, w_i].

Formulations (docs/design.md section 4 shows the formulation decides the speed by 5x to 30x):

- ``auto`` (default): ``ipm`` from IPM_FROM_ROWS rows on, ``highs-dual`` below.
- ``ipm``: the LP dual solved by ppsvm's own interior-point method
  (:mod:`ppsvm.core.ipm`), whose Newton system has only mbar + 1 unknowns. A
  solve that does not converge falls back to ``highs-dual`` with a warning.
  The only formulation for K held on Dask workers (:class:`ppsvm.core.dask_engine.DaskKernel`,
  which ``auto`` always solves with it), whose rows never come to this process: there the
  objective and the certificate are computed on the workers too, and a solve that does not
  converge is an error (HiGHS would need K here).
- ``highs-dual``: the same dual, mbar + 1 dense rows and m bounded
  columns, passed straight to HiGHS (dual simplex, interior point with
  crossover above 60k rows); u and gamma are the row multipliers. The
  cross-check of ``ipm`` in the tests.
- ``cvxpy-dual``: the same dual written in cvxpy, solved by HiGHS.
- ``cvxpy-primal``: the LP exactly as the papers write it (slack and
  absolute-value variables), in cvxpy, solved by HiGHS.

Every formulation is checked against the others and against scipy's linprog
in the unit tests; the objective is always recomputed from (u, gamma) on all
rows, so a wrong sign convention cannot pass silently. Where a formulation
yields the dual variables a, the solution carries a certificate recomputed
from (u, gamma, a) alone: the relative duality gap and the dual infeasibility.
"""

from __future__ import annotations

import logging
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeGuard, get_args

import numpy as np

from ppsvm.core import ipm
from ppsvm.errors import SolverError

if TYPE_CHECKING:
    # Imported where HiGHS solves: 19 MiB of RSS a coordinator that only runs ipm does not need.
    import highspy

    from ppsvm.core.dask_engine import DaskKernel

logger = logging.getLogger(__name__)

Formulation = Literal["auto", "ipm", "highs-dual", "cvxpy-dual", "cvxpy-primal"]
FORMULATIONS: tuple[Formulation, ...] = ("auto", "ipm", "highs-dual", "cvxpy-dual", "cvxpy-primal")
DEFAULT_FORMULATION: Formulation = "auto"
# "auto" solves with ipm from this many rows on and with highs-dual below. Measured: HiGHS's dual simplex is as
# fast at 2,000 rows and faster below (810 problems of 60-1,500 rows: 3.5 s against 6.3 s in all), where the
# papers' tables run thousands of tiny LPs; ipm is 2-20 times faster above (benchmarks/train_scaling.py).
IPM_FROM_ROWS = 2_000
Task = Literal["classify", "regress"]

# Measured on the dual (mbar = 19, 2 cores): dual simplex 1.3 s vs interior point 1.4 s at
# 40k rows, 20.3 s vs 8.1 s at 160k. The simplex's bound-flipping ratio test grows with the
# column count; interior-point iterations stay few. Both end at a vertex (IPM crosses over).
_IPM_ABOVE_ROWS = 60_000
# A dual variable this small (relative to its bound) counts as 0 for leave-one-out: its row is not a support vector.
_LOO_ZERO = 1e-9
_CERTIFICATE_CHUNK_ROWS = 65_536


def is_task(name: str) -> TypeGuard[Task]:
    """Whether ``name`` is a :data:`Task` (narrows a checked string for the type checker)."""
    return name in get_args(Task)


@dataclass(frozen=True)
class LPSolution:
    """An optimal (u, gamma) with the objective value and how it was found.

    Attributes
    ----------
    u : ndarray, shape (mbar,)
    gamma : float
    objective : float
        The objective above evaluated at (u, gamma) on all rows.
    formulation : str
        The formulation that produced the solution (``highs-dual`` after an ``ipm`` fallback).
    iterations : int
        Interior-point or simplex iterations; 0 where cvxpy does not report them.
    seconds : float
        Wall-clock time of the solve.
    certificate : Certificate or None
        Optimality evidence recomputed from (u, gamma, a); None for ``cvxpy-primal``.
    """

    u: np.ndarray
    gamma: float
    objective: float
    formulation: str
    iterations: int
    seconds: float
    certificate: Certificate | None = None


@dataclass(frozen=True)
class Certificate:
    """How close (u, gamma) and the dual point a are to optimal, from the data alone.

    Attributes
    ----------
    dual_objective : float
        The dual objective at a (c'a: sum(a) for classify, y'a for regress), a lower bound
        on the LP optimum when a is feasible.
    gap : float
        (primal objective - dual objective) / (1 + |primal objective|).
    dual_infeasibility : float
        The largest violation of the dual constraints by a (|K'(s a)| <= rho, s'a = 0, the box),
        relative to the size of the terms summed.
    """

    dual_objective: float
    gap: float
    dual_infeasibility: float

    def as_dict(self) -> dict[str, float]:
        """The certificate as plain numbers, for the model file."""
        return {"dual_objective": self.dual_objective, "gap": self.gap, "dual_infeasibility": self.dual_infeasibility}


def certificate(
    task: Task,
    K: np.ndarray | DaskKernel,
    target: np.ndarray,
    nu: float,
    objective: float,
    a: np.ndarray,
    weights: np.ndarray | None = None,
) -> Certificate:
    """Recompute the duality gap and the dual infeasibility of a dual point a.

    Parameters
    ----------
    K : ndarray or DaskKernel, shape (m, mbar)
        A DaskKernel's products are computed on its workers.
    target : ndarray, shape (m,)
    objective : float
        The primal objective at the solution's (u, gamma).
    a : ndarray, shape (m,)
        The solver's dual variables.
    weights : ndarray, shape (m,), optional
        The rows' weights the LP was solved with (they set a's box).
    """
    sign, cost, (low, high), rho = dual_data(task, target, nu, weights)
    signed = sign * a
    if isinstance(K, np.ndarray):
        image = K.T @ signed
        terms = np.zeros(K.shape[1])
        for start in range(0, K.shape[0], _CERTIFICATE_CHUNK_ROWS):  # |K|'|a| without a copy of K
            rows = slice(start, start + _CERTIFICATE_CHUNK_ROWS)
            terms += np.abs(K[rows]).T @ np.abs(a[rows])
    else:
        image, terms = K.rmatvec(signed), K.rmatvec(np.abs(a), absolute=True)
    violation = max(
        float(np.max((np.abs(image) - rho) / (rho + terms), initial=0.0)),
        abs(float(signed.sum())) / (1.0 + float(np.abs(a).sum())),
        # Each row's violation relative to its own box (a positive divisor: the same as dividing the maximum).
        float(np.max(np.maximum(low - a, a - high) / (1.0 + high - low), initial=0.0)),
        0.0,
    )
    dual_objective = float(cost @ a)
    return Certificate(dual_objective, (objective - dual_objective) / (1.0 + abs(objective)), violation)


def dual_data(
    task: Task, target: np.ndarray, nu: float, weights: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, tuple[float | np.ndarray, float | np.ndarray], float]:
    """(s, c, box of a, rho) of the LP dual (see ppsvm.core.ipm) for a task.

    The box is a pair of floats, or with ``weights`` (shape (m,)) a pair of arrays of shape (m,):
    [0, nu w_i] (classify) or [-w_i, w_i] (regress).
    """
    ones = np.broadcast_to(1.0, len(target))  # read-only, and no memory: one vector of length m less in a solve
    if task == "classify":
        return target, ones, (0.0, nu if weights is None else nu * weights), 1.0
    return ones, target, (-1.0, 1.0) if weights is None else (-weights, weights), nu


def classification_objective(
    K: np.ndarray | DaskKernel, d: np.ndarray, nu: float, u: np.ndarray, gamma: float, weights: np.ndarray | None = None
) -> float:
    """nu * sum(w * hinge) + ||u||_1 for K (m, mbar), d (m,), u (mbar,), weights w (m,) (default all 1)."""
    return float(nu * _weighted_sum(np.maximum(0.0, 1.0 - d * (K @ u - gamma)), weights) + np.abs(u).sum())


def regression_objective(
    K: np.ndarray | DaskKernel, y: np.ndarray, nu: float, u: np.ndarray, gamma: float, weights: np.ndarray | None = None
) -> float:
    """sum w * |K u - gamma - y| + nu * ||u||_1 for K (m, mbar), y (m,), u (mbar,), weights w (m,) (default all 1)."""
    return float(_weighted_sum(np.abs(K @ u - gamma - y), weights) + nu * np.abs(u).sum())


def _weighted_sum(terms: np.ndarray, weights: np.ndarray | None) -> float:
    # A product and then the same sum as without weights (not a dot product): unit weights change no bit.
    return float(terms.sum() if weights is None else (weights * terms).sum())


def solve_lp(
    task: Task,
    K: np.ndarray | DaskKernel,
    target: np.ndarray,
    nu: float,
    formulation: Formulation = DEFAULT_FORMULATION,
    weights: np.ndarray | None = None,
) -> LPSolution:
    """Solve the classification or regression LP.

    Parameters
    ----------
    task : {"classify", "regress"}
    K : ndarray or DaskKernel, shape (m, mbar)
        The assembled kernel K(A, B'), in this process or in row chunks on Dask workers (solved there by ``ipm``).
    target : ndarray, shape (m,)
        Labels in {-1, +1} (classify) or real targets (regress).
    nu : float
        Weight of the error term (classify) or of ||u||_1 (regress), > 0.
    formulation : {"auto", "ipm", "highs-dual", "cvxpy-dual", "cvxpy-primal"}
        For a DaskKernel ``ipm`` or ``auto`` (which picks ``ipm``).
    weights : ndarray, shape (m,), optional
        Each row's weight on its error term, finite and > 0; None weighs every row 1 (the same computation as
        before weights existed, bit for bit).

    Returns
    -------
    LPSolution

    Raises
    ------
    ValueError
        Shapes, non-finite values, nu <= 0, labels that are not +-1 of both classes, weights that are not
        finite and > 0, or a formulation other than ``ipm`` for a DaskKernel.
    SolverError
        The solver did not report an optimum; for a DaskKernel also a Dask worker lost during the solve.
    """
    K, target, weights = _validate(task, K, target, nu, weights)
    with ipm.one_blas_thread():
        return _solve_lp(task, K, target, nu, formulation, weights)


def _solve_lp(
    task: Task,
    K: np.ndarray | DaskKernel,
    target: np.ndarray,
    nu: float,
    formulation: Formulation,
    weights: np.ndarray | None,
) -> LPSolution:
    start = time.perf_counter()
    a: np.ndarray | None = None
    if formulation not in FORMULATIONS:
        raise ValueError(f"unknown LP formulation {formulation!r}; expected one of {', '.join(FORMULATIONS)}")
    if formulation == "auto":
        formulation = "ipm" if not isinstance(K, np.ndarray) or K.shape[0] >= IPM_FROM_ROWS else "highs-dual"
    if formulation == "ipm":
        result = ipm.solve_dual(K, *dual_data(task, target, nu, weights))
        if result.converged:
            u, gamma, a, iterations = result.u, result.gamma, result.a, result.iterations
        else:
            stalled = (
                f"the interior-point method did not converge on the {K.shape[0]} x {K.shape[1]} LP (nu = {nu:g}) "
                f"after {result.iterations} iterations (relative primal residual {result.primal_residual:.1e}, "
                f"dual residual {result.dual_residual:.1e}, gap {result.gap:.1e})"
            )
            if not isinstance(K, np.ndarray):
                raise SolverError(f"{stalled}; HiGHS, the fallback, needs K in this process, not on Dask workers")
            logger.warning("%s; solving it with HiGHS instead", stalled)
            formulation = "highs-dual"
    if formulation != "ipm":
        if not isinstance(K, np.ndarray):
            raise ValueError(
                f"the LP formulation {formulation!r} needs K in this process: a DaskKernel's rows stay on its "
                "workers, where only 'ipm' (or 'auto', which picks it) solves the LP"
            )
        if formulation == "highs-dual":
            u, gamma, a, iterations = _highs_dual(task, K, target, nu, weights)
        elif formulation == "cvxpy-dual":
            u, gamma, a, iterations = _cvxpy_dual(task, K, target, nu, weights)
        else:
            u, gamma, iterations = _cvxpy_primal(task, K, target, nu, weights)
    objective = _objective(task, K, target, nu, u, gamma, weights)
    evidence = None if a is None else certificate(task, K, target, nu, objective, a, weights)
    return LPSolution(u, gamma, objective, formulation, iterations, time.perf_counter() - start, evidence)


def _objective(
    task: Task,
    K: np.ndarray | DaskKernel,
    target: np.ndarray,
    nu: float,
    u: np.ndarray,
    gamma: float,
    weights: np.ndarray | None,
) -> float:
    if task == "classify":
        return classification_objective(K, target, nu, u, gamma, weights)
    return regression_objective(K, target, nu, u, gamma, weights)


def _validate(
    task: Task, K: np.ndarray | DaskKernel, target: np.ndarray, nu: float, weights: np.ndarray | None
) -> tuple[np.ndarray | DaskKernel, np.ndarray, np.ndarray | None]:
    """The arguments checked; K as a float64 array unless it is a DaskKernel (never gathered here)."""
    if not _on_workers(K):
        K = np.asarray(K, dtype=np.float64)
        if K.ndim != 2 or K.shape[0] == 0 or K.shape[1] == 0:
            raise ValueError(f"kernel must be a non-empty 2-D array, got shape {K.shape}")
    target = np.asarray(target, dtype=np.float64)
    if target.shape != (K.shape[0],):
        raise ValueError(f"kernel has {K.shape[0]} rows but there are {target.shape} targets")
    # Block by block: np.isfinite(K) whole would be a temporary of m x mbar bytes (95 MB at 5M x 19). A DaskKernel's
    # workers checked their chunks as they came.
    if isinstance(K, np.ndarray):
        finite = all(np.isfinite(K[start:stop]).all() for start, stop in ipm.row_ranges(*K.shape))
    else:
        finite = K.finite
    if not finite:
        raise ValueError("kernel has non-finite entries (NaN or inf)")
    if not np.isfinite(target).all():
        raise ValueError("targets have non-finite entries (NaN or inf)")
    if not (np.isfinite(nu) and nu > 0):
        raise ValueError(f"nu must be a finite number > 0, got {nu}")
    if task == "classify":
        odd = target[(target != 1.0) & (target != -1.0)]  # comparisons: np.unique would sort every label
        if odd.size:
            raise ValueError(f"classification labels must be -1 or +1, got {np.unique(odd).tolist()[:5]}")
        if not (target != target[0]).any():
            raise ValueError(f"all {K.shape[0]} training labels are {int(target[0]):+d}: need both classes")
    elif task != "regress":
        raise ValueError(f"unknown task {task!r}; expected 'classify' or 'regress'")
    if weights is None:
        return K, target, None
    weights = np.asarray(weights, dtype=np.float64)
    if weights.shape != (K.shape[0],):
        raise ValueError(f"kernel has {K.shape[0]} rows but weights have shape {weights.shape}")
    bad = np.flatnonzero(~(np.isfinite(weights) & (weights > 0)))
    if bad.size:
        raise ValueError(
            f"weights must be finite and > 0: row {bad[0]} has {weights[bad[0]]} ({bad.size} bad rows in all)"
        )
    return K, target, weights


def _on_workers(K: object) -> TypeGuard[DaskKernel]:
    """Whether K is a DaskKernel, without importing Dask where none was made (its module is loaded if one was)."""
    engine = sys.modules.get("ppsvm.core.dask_engine")
    return engine is not None and isinstance(K, engine.DaskKernel)


# --- HiGHS on the LP dual ------------------------------------------------------------------------


def _highs_dual(
    task: Task, K: np.ndarray, target: np.ndarray, nu: float, weights: np.ndarray | None
) -> tuple[np.ndarray, float, np.ndarray, int]:
    """The LP dual handed to HiGHS's dual simplex without a modelling layer.

    classify:  min -e'a  s.t. -1 <= K'D a <= 1,  d'a = 0,  0 <= a <= nu w
    regress:   min -y'a  s.t. -nu <= K'a <= nu,  e'a = 0, -w <= a <= w

    With row multipliers (p, q) the reduced cost of a_i is
    -1 - d_i (K_i p + q) (classify), so u = -p and gamma = q.
    """
    solver = _highs_dual_model(task, K, target, nu, weights)
    _run_highs(solver, K.shape[0])
    u, gamma = _highs_primal(solver, K.shape[1])
    info = solver.getInfo()
    a = np.asarray(solver.getSolution().col_value)
    return u, gamma, a, int(info.simplex_iteration_count + info.ipm_iteration_count)


def _highs_dual_model(
    task: Task, K: np.ndarray, target: np.ndarray, nu: float, weights: np.ndarray | None
) -> highspy.Highs:
    """A HiGHS instance holding the LP dual of :func:`_highs_dual`, not yet solved."""
    import highspy

    m, mbar = K.shape
    _, cost, (lower, upper), reg = dual_data(task, target, nu, weights)
    if task == "classify":
        rows = np.vstack([(K * target[:, None]).T, target[None, :]])
    else:
        rows = np.vstack([K.T, np.ones((1, m))])
    lp = highspy.HighsLp()
    lp.num_col_ = m
    lp.num_row_ = mbar + 1
    lp.col_cost_ = -cost
    lp.col_lower_ = np.full(m, lower)
    lp.col_upper_ = np.full(m, upper)
    lp.row_lower_ = np.r_[np.full(mbar, -reg), 0.0]
    lp.row_upper_ = np.r_[np.full(mbar, reg), 0.0]
    # The constraint matrix is dense: pass it row-wise without building a sparse copy.
    lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
    lp.a_matrix_.start_ = np.arange(mbar + 2, dtype=np.int64) * m
    lp.a_matrix_.index_ = np.tile(np.arange(m, dtype=np.int32), mbar + 1)
    lp.a_matrix_.value_ = np.ascontiguousarray(rows).ravel()
    solver = highspy.Highs()
    solver.setOptionValue("output_flag", False)
    solver.setOptionValue("solver", "ipm" if m > _IPM_ABOVE_ROWS else "simplex")
    # Measured: presolve finds nothing to remove in a dense LP with mbar + 1 rows and costs ~15%.
    solver.setOptionValue("presolve", "off")
    solver.setOptionValue("random_seed", 0)
    solver.passModel(lp)
    return solver


def _run_highs(solver: highspy.Highs, m: int) -> None:
    """Solve (from the current basis, if any); raise SolverError unless optimal, after trying the other method."""
    import highspy

    solver.run()
    status = solver.getModelStatus()
    if status != highspy.HighsModelStatus.kOptimal:
        # Seen on nearly constant kernels (a tiny Gaussian width): one method gives up where
        # the other still finds the optimum.
        other = "simplex" if m > _IPM_ABOVE_ROWS else "ipm"
        logger.info("HiGHS stopped with status %r; retrying with %s", solver.modelStatusToString(status), other)
        solver.clearSolver()
        solver.setOptionValue("solver", other)
        solver.run()
        solver.setOptionValue("solver", "ipm" if m > _IPM_ABOVE_ROWS else "simplex")
        status = solver.getModelStatus()
    if status != highspy.HighsModelStatus.kOptimal:
        raise SolverError(f"HiGHS stopped with status {solver.modelStatusToString(status)!r} on the LP dual")


def _highs_primal(solver: highspy.Highs, mbar: int) -> tuple[np.ndarray, float]:
    """(u, gamma) from the row multipliers of the solved dual."""
    duals = np.asarray(solver.getSolution().row_dual)
    return -duals[:mbar], float(duals[mbar])


def leave_one_out_decisions(
    task: Task, K: np.ndarray, target: np.ndarray, nu: float, weights: np.ndarray | None = None
) -> np.ndarray:
    """Each row's decision value from the LP solved without that row: leave-one-out in m warm-started solves.

    Leaving row i out is fixing its dual variable a_i at 0. A row whose a_i is already 0 at the full
    optimum leaves that optimum unchanged, so it needs no solve; every other row is one re-solve of the
    dual simplex from the previous basis (a few pivots), not a fresh LP: about ten times faster than
    m separate fits on the papers' cells of about 25 records.

    Parameters
    ----------
    K : ndarray, shape (m, mbar)
    target : ndarray, shape (m,)
    weights : ndarray, shape (m,), optional
        The rows' weights, as in :func:`solve_lp`.

    Returns
    -------
    ndarray, shape (m,)
        K_i u_(-i) - gamma_(-i); NaN where leaving row i out leaves one class only (classify).

    Raises
    ------
    ValueError
        As :func:`solve_lp`.
    SolverError
        HiGHS found no optimum of the full problem or of some reduced one.
    """
    checked, target, weights = _validate(task, K, target, nu, weights)
    if not isinstance(checked, np.ndarray):
        raise TypeError("leave-one-out needs K in this process (HiGHS re-solves from its basis), not a DaskKernel")
    K = checked
    m, mbar = K.shape
    solver = _highs_dual_model(task, K, target, nu, weights)
    _run_highs(solver, m)
    u, gamma = _highs_primal(solver, mbar)
    full = K @ u - gamma
    a = np.asarray(solver.getSolution().col_value)
    _, _, box, _ = dual_data(task, target, nu, weights)
    low, high = (np.broadcast_to(bound, m) for bound in box)
    decisions = np.empty(m)
    for i in range(m):
        if task == "classify" and np.count_nonzero(target == target[i]) < 2:
            decisions[i] = np.nan
            continue
        if abs(a[i]) <= _LOO_ZERO * max(1.0, high[i]):
            decisions[i] = full[i]
            continue
        solver.changeColBounds(i, 0.0, 0.0)
        _run_highs(solver, m)
        u_i, gamma_i = _highs_primal(solver, mbar)
        decisions[i] = float(K[i] @ u_i - gamma_i)
        solver.changeColBounds(i, low[i], high[i])
    return decisions


# --- cvxpy formulations --------------------------------------------------------------------------


def _cvxpy_solve(problem: Any, name: str) -> None:
    import cvxpy as cp

    try:
        problem.solve(solver=cp.HIGHS)
    except cp.error.SolverError as exc:
        raise SolverError(f"HiGHS failed on the {name} LP: {exc}") from exc
    if problem.status != cp.OPTIMAL:
        raise SolverError(f"HiGHS returned status {problem.status!r} on the {name} LP")


def _cvxpy_dual(
    task: Task, K: np.ndarray, target: np.ndarray, nu: float, weights: np.ndarray | None
) -> tuple[np.ndarray, float, np.ndarray, int]:
    """max e'a s.t. |K'Da| <= 1, d'a = 0, 0 <= a <= nu w   (classify)
    max y'a s.t. |K'a| <= nu,  e'a = 0, -w <= a <= w   (regress)
    The multipliers of |.| <= . give u, that of the equality gives -gamma."""
    import cvxpy as cp

    m = K.shape[0]
    a = cp.Variable(m)
    _, _, (lo, hi), _ = dual_data(task, target, nu, weights)
    if task == "classify":
        M, reg, gain, balance = (K * target[:, None]).T, 1.0, np.ones(m), target
    else:
        M, reg, gain, balance = K.T, nu, target, np.ones(m)
    upper, lower, equal = M @ a <= reg, M @ a >= -reg, balance @ a == 0
    problem = cp.Problem(cp.Maximize(gain @ a), [upper, lower, equal, a >= lo, a <= hi])
    _cvxpy_solve(problem, "dual")
    u = np.asarray(upper.dual_value) - np.asarray(lower.dual_value)
    gamma = float(equal.dual_value)
    # cvxpy's sign convention for equality multipliers: pick the sign whose primal value meets the dual.
    candidates = [(abs(_objective(task, K, target, nu, u, g, weights) - problem.value), g) for g in (gamma, -gamma)]
    return u, min(candidates)[1], _solved(a), 0


def _cvxpy_primal(
    task: Task, K: np.ndarray, target: np.ndarray, nu: float, weights: np.ndarray | None
) -> tuple[np.ndarray, float, int]:
    """The LPs exactly as written in the papers, with slack and absolute-value variables (slacks weighted)."""
    import cvxpy as cp

    m, mbar = K.shape
    u, gamma, s = cp.Variable(mbar), cp.Variable(), cp.Variable(mbar)
    slack = cp.Variable(m)
    errors = cp.sum(slack) if weights is None else weights @ slack
    if task == "classify":
        constraints = [cp.multiply(target, K @ u - gamma) + slack >= 1, slack >= 0]
        objective = nu * errors + cp.sum(s)
    else:
        residual = K @ u - gamma - target
        constraints = [residual <= slack, -slack <= residual]
        objective = errors + nu * cp.sum(s)
    constraints += [u <= s, -s <= u]
    problem = cp.Problem(cp.Minimize(objective), constraints)
    _cvxpy_solve(problem, "primal")
    return _solved(u), float(_solved(gamma)), 0


def _solved(variable: Any) -> np.ndarray:
    """A cvxpy variable's value after an optimal solve (cvxpy types it as possibly None)."""
    if variable.value is None:
        raise SolverError("HiGHS reported an optimal LP but left a variable without a value")
    return np.asarray(variable.value)
