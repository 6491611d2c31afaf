"""Every LP formulation reaches the optimum of the papers' primal LP, solved independently with linprog."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import linprog

from ppsvm.core import ipm
from ppsvm.core.lp import FORMULATIONS, IPM_FROM_ROWS, certificate, dual_data, solve_lp

REL_TOL = 1e-6


# --- independent references ---------------------------------------------------------------------


def linprog_primal(task: str, K: np.ndarray, target: np.ndarray, nu: float) -> float:
    """The LP exactly as written in the papers; variables x = [u+, u-, gamma, y (or s)].

    classify:  min nu e'y + e'(u+ + u-)   s.t.  D(K(u+ - u-) - e gamma) + y >= e,  y >= 0, u+- >= 0
    regress:   min e's + nu e'(u+ + u-)   s.t.  -s <= K(u+ - u-) - e gamma - y <= s,  u+- >= 0
    """
    m, mbar = K.shape
    e = np.ones((m, 1))
    eye = sp.identity(m, format="csr")
    if task == "classify":
        DK = K * target[:, None]
        # -(DK u+ - DK u- - d gamma + y) <= -e
        A_ub = -sp.hstack([sp.csr_matrix(DK), sp.csr_matrix(-DK), sp.csr_matrix(-target[:, None]), eye])
        b_ub = -np.ones(m)
        c = np.r_[np.ones(2 * mbar), 0.0, np.full(m, nu)]
    else:
        #  K u+ - K u- - e gamma - s <= y ;  -K u+ + K u- + e gamma - s <= -y
        upper = sp.hstack([sp.csr_matrix(K), sp.csr_matrix(-K), sp.csr_matrix(-e), -eye])
        lower = sp.hstack([sp.csr_matrix(-K), sp.csr_matrix(K), sp.csr_matrix(e), -eye])
        A_ub = sp.vstack([upper, lower]).tocsr()
        b_ub = np.r_[target, -target]
        c = np.r_[np.full(2 * mbar, nu), 0.0, np.ones(m)]
    bounds = [(0, None)] * (2 * mbar) + [(None, None)] + [(0, None)] * m
    result = linprog(
        c,
        A_ub=A_ub,
        b_ub=b_ub,
        bounds=bounds,
        method="highs",
        options={"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10},
    )
    assert result.status == 0, result.message
    return float(result.fun)


def objective(task: str, K: np.ndarray, target: np.ndarray, nu: float, u: np.ndarray, gamma: float) -> float:
    """The objective recomputed from (u, gamma) with the optimal slacks, written out here independently."""
    total = 0.0
    residual = K.dot(u) - gamma
    if task == "classify":
        y = np.clip(1.0 - target * residual, 0.0, None)
        return float(nu * y.sum() + np.abs(u).sum())
    s = np.abs(residual - target)
    total = s.sum() + nu * np.abs(u).sum()
    return float(total)


def assert_feasible(task: str, K: np.ndarray, target: np.ndarray, u: np.ndarray, gamma: float) -> None:
    """The paper's constraints hold for (u+, u-, gamma, slack) built from the returned (u, gamma)."""
    u_plus, u_minus = np.maximum(u, 0.0), np.maximum(-u, 0.0)
    assert (u_plus >= 0).all() and (u_minus >= 0).all()
    assert np.array_equal(u_plus - u_minus, u)
    Ku = K @ (u_plus - u_minus)
    if task == "classify":
        y = np.maximum(0.0, 1.0 - target * (Ku - gamma))
        assert (target * (Ku - gamma) + y >= 1.0 - 1e-9).all()
        assert (y >= 0).all()
    else:
        s = np.abs(Ku - gamma - target)
        assert (Ku - gamma - target <= s + 1e-12).all() and (-s <= Ku - gamma - target + 1e-12).all()


# --- data -------------------------------------------------------------------------------------------


@functools.cache
def problem(task: str, m: int, mbar: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A Gaussian random kernel of random points; labels from a noisy linear rule (or noisy targets)."""
    rng = np.random.default_rng(seed)
    n = mbar + 5  # mbar < n, as the papers require
    X = rng.random((m, n))
    B = rng.random((mbar, n))
    mu = 1.0 / n
    sq = ((X[:, None, :] - B[None, :, :]) ** 2).sum(axis=2)
    K = np.exp(-mu * sq)
    w = rng.standard_normal(n)
    score = (X - 0.5) @ w + 0.3 * rng.standard_normal(m)
    if task == "classify":
        target = np.where(score >= 0, 1.0, -1.0)
        target[:2] = [1.0, -1.0]  # both classes, whatever the draw
    else:
        target = score
    K.setflags(write=False)
    target.setflags(write=False)
    return K, target


@functools.cache
def reference(task: str, m: int, mbar: int, seed: int, nu: float) -> float:
    K, target = problem(task, m, mbar, seed)
    return linprog_primal(task, K, target, nu)


CASES = [
    # (m, mbar, nu, seed)
    (30, 3, 0.1, 0),
    (30, 5, 100.0, 1),
    (200, 7, 1.0, 2),
    (200, 19, 100.0, 3),
    (200, 11, 0.1, 4),
    (1500, 19, 1.0, 5),
    (1500, 13, 100.0, 6),
    (1500, 3, 0.1, 7),
]


@pytest.mark.parametrize("formulation", FORMULATIONS)
@pytest.mark.parametrize("task", ["classify", "regress"])
@pytest.mark.parametrize("m, mbar, nu, seed", CASES)
def test_optimum_matches_independent_primal(
    task: str, formulation: str, m: int, mbar: int, nu: float, seed: int
) -> None:
    K, target = problem(task, m, mbar, seed)
    expected = reference(task, m, mbar, seed, nu)
    solution = solve_lp(task, K, target, nu, formulation)

    assert solution.u.shape == (mbar,)
    assert np.isfinite(solution.u).all() and np.isfinite(solution.gamma)
    # "auto" names the formulation it chose: ipm from IPM_FROM_ROWS rows on, HiGHS below.
    chosen = ("ipm" if m >= IPM_FROM_ROWS else "highs-dual") if formulation == "auto" else formulation
    assert solution.formulation == chosen
    recomputed = objective(task, K, target, nu, solution.u, solution.gamma)
    assert recomputed == pytest.approx(expected, rel=REL_TOL)
    assert solution.objective == pytest.approx(expected, rel=REL_TOL)
    assert_feasible(task, K, target, solution.u, solution.gamma)


def test_formulations_are_not_trivial() -> None:
    """The reference optimum is well below the trivial point u = 0 (the test would catch u = 0 returns)."""
    K, target = problem("classify", 200, 7, 2)
    best_trivial = min(objective("classify", K, target, 1.0, np.zeros(7), g) for g in np.linspace(-2, 2, 401))
    assert reference("classify", 200, 7, 2, 1.0) < 0.9 * best_trivial
    K, y = problem("regress", 200, 7, 2)
    trivial = objective("regress", K, y, 1.0, np.zeros(7), float(np.median(y)))
    assert reference("regress", 200, 7, 2, 1.0) < 0.9 * trivial


# --- degenerate inputs that still have an optimum ----------------------------------------------------


@pytest.mark.parametrize("formulation", FORMULATIONS)
@pytest.mark.parametrize("task", ["classify", "regress"])
def test_zero_kernel(task: str, formulation: str) -> None:
    _, target = problem(task, 40, 4, 11)
    K = np.zeros((40, 4))
    expected = linprog_primal(task, K, target, 1.0)
    solution = solve_lp(task, K, target, 1.0, formulation)
    assert objective(task, K, target, 1.0, solution.u, solution.gamma) == pytest.approx(expected, rel=REL_TOL)
    if task == "regress":
        # With K = 0 the optimum is sum |y - median|.
        assert expected == pytest.approx(np.abs(target - np.median(target)).sum(), rel=1e-9)


@pytest.mark.parametrize("formulation", FORMULATIONS)
@pytest.mark.parametrize("task", ["classify", "regress"])
def test_duplicated_rows(task: str, formulation: str) -> None:
    K0, t0 = problem(task, 30, 5, 12)
    K, target = np.vstack([K0, K0]), np.r_[t0, t0]
    expected = linprog_primal(task, K, target, 1.0)
    solution = solve_lp(task, K, target, 1.0, formulation)
    assert objective(task, K, target, 1.0, solution.u, solution.gamma) == pytest.approx(expected, rel=REL_TOL)


@pytest.mark.parametrize("formulation", FORMULATIONS)
def test_duplicated_columns(formulation: str) -> None:
    """Two identical random points: u is not unique, the optimum is."""
    K0, target = problem("classify", 60, 4, 13)
    K = np.hstack([K0, K0[:, :1]])
    expected = linprog_primal("classify", K, target, 1.0)
    solution = solve_lp("classify", K, target, 1.0, formulation)
    assert objective("classify", K, target, 1.0, solution.u, solution.gamma) == pytest.approx(expected, rel=REL_TOL)


# --- errors -----------------------------------------------------------------------------------------


def _K(m: int = 6, mbar: int = 3) -> np.ndarray:
    return np.random.default_rng(0).random((m, mbar))


LABELS = np.array([1.0, -1.0, 1.0, -1.0, 1.0, 1.0])


@pytest.mark.parametrize("label", [1.0, -1.0])
def test_single_class_refused(label: float) -> None:
    with pytest.raises(ValueError, match="need both classes"):
        solve_lp("classify", _K(), np.full(6, label), 1.0)


@pytest.mark.parametrize("labels", [[0, 1, 0, 1, 1, 0], [1, -1, 2, -1, 1, 1], [1, -1, 0.5, -1, 1, 1]])
def test_labels_not_plus_minus_one_refused(labels) -> None:
    with pytest.raises(ValueError, match=r"labels must be -1 or \+1"):
        solve_lp("classify", _K(), np.array(labels, dtype=float), 1.0)


@pytest.mark.parametrize("task", ["classify", "regress"])
@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_kernel_refused(task: str, bad: float) -> None:
    K = _K()
    K[2, 1] = bad
    with pytest.raises(ValueError, match="non-finite"):
        solve_lp(task, K, LABELS, 1.0)


def test_non_finite_targets_refused() -> None:
    with pytest.raises(ValueError, match="targets have non-finite"):
        solve_lp("regress", _K(), np.array([1.0, 2.0, np.nan, 0.0, 1.0, 1.0]), 1.0)


@pytest.mark.parametrize("task", ["classify", "regress"])
@pytest.mark.parametrize("nu", [0.0, -1.0, np.nan, np.inf])
def test_bad_nu_refused(task: str, nu: float) -> None:
    with pytest.raises(ValueError, match="nu must be"):
        solve_lp(task, _K(), LABELS, nu)


@pytest.mark.parametrize("task", ["classify", "regress"])
@pytest.mark.parametrize("target", [LABELS[:5], np.r_[LABELS, 1.0], LABELS[:, None]])
def test_shape_mismatch_refused(task: str, target: np.ndarray) -> None:
    with pytest.raises(ValueError, match="kernel has 6 rows"):
        solve_lp(task, _K(), target, 1.0)


@pytest.mark.parametrize("K", [np.zeros((0, 3)), np.zeros((6, 0)), np.zeros(6), np.zeros((6, 3, 1))])
def test_empty_or_not_2d_kernel_refused(K: np.ndarray) -> None:
    with pytest.raises(ValueError, match="non-empty 2-D"):
        solve_lp("regress", K, np.zeros(K.shape[0] if K.ndim else 0), 1.0)


def test_unknown_formulation_refused() -> None:
    with pytest.raises(ValueError, match="unknown LP formulation 'simplex'"):
        solve_lp("classify", _K(), LABELS, 1.0, "simplex")  # type: ignore[arg-type]


def test_unknown_task_refused() -> None:
    with pytest.raises(ValueError, match="unknown task 'cluster'"):
        solve_lp("cluster", _K(), LABELS, 1.0)  # type: ignore[arg-type]


@pytest.mark.parametrize("task", ["classify", "regress"])
def test_interior_point_path_for_large_problems(task: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """highs-dual switches to interior point above a row count; force it on a small problem."""
    import ppsvm.core.lp as lp

    K, target = problem(task, 1500, 7, 4)
    monkeypatch.setattr(lp, "_IPM_ABOVE_ROWS", 0)
    solution = solve_lp(task, K, target, 1.0, "highs-dual")
    expected = reference(task, 1500, 7, 4, 1.0)
    assert abs(solution.objective - expected) <= 1e-6 * abs(expected)
    assert abs(objective(task, K, target, 1.0, solution.u, solution.gamma) - expected) <= 1e-6 * abs(expected)


# --- the structured interior-point method against HiGHS on hard problems ---------------------------


def hard_problems() -> dict[str, tuple[str, np.ndarray, np.ndarray]]:
    """Problems that trouble interior-point methods: degenerate, separable, nearly one class, ties."""
    rng = np.random.default_rng(11)
    K, target = problem("classify", 400, 9, 8)
    separable = np.where(K[:, 0] > np.median(K[:, 0]), 1.0, -1.0)
    one_but_one = np.ones(400)
    one_but_one[17] = -1.0
    duplicated = np.repeat(K[:50], 8, axis=0)
    constant = np.full((300, 4), 0.7)
    linear = rng.standard_normal((500, 6)) * 40.0  # a linear kernel of unscaled features: entries far from [0, 1]
    regress_K, regress_y = problem("regress", 400, 9, 9)
    return {
        "random": ("classify", K, target),
        "separable": ("classify", K, separable),
        "all one class but one": ("classify", K, one_but_one),
        "every row eight times": ("classify", duplicated, np.repeat(target[:50], 8)),
        "constant kernel": ("classify", constant, np.where(np.arange(300) % 3 == 0, 1.0, -1.0)),
        "large linear kernel": ("classify", linear, np.where(linear[:, 0] + linear[:, 1] > 0, 1.0, -1.0)),
        "regression": ("regress", regress_K, regress_y),
        "regression, constant target": ("regress", regress_K, np.full(400, 3.0)),
    }


@pytest.mark.parametrize("layout", ["C", "F"])
@pytest.mark.parametrize("nu", [1e-7, 1e-3, 1.0, 1e3, 1e7])
@pytest.mark.parametrize("name", list(hard_problems()))
def test_interior_point_matches_highs(name: str, nu: float, layout: str, caplog: pytest.LogCaptureFixture) -> None:
    """Objectives equal to 1e-6 relative at extreme nu, and the IPM itself converged (no fallback).

    In both layouts of K: the coordinator assembles it column-major, the API's in-process paths row-major,
    and the solver's blocks and BLAS calls differ between the two.
    """
    task, K, target = hard_problems()[name]
    K = np.asarray(K, order=layout)
    highs = solve_lp(task, K, target, nu, "highs-dual")
    mine = solve_lp(task, K, target, nu, "ipm")
    assert mine.formulation == "ipm", caplog.text
    assert abs(mine.objective - highs.objective) <= 1e-6 * max(1.0, abs(highs.objective))
    assert mine.certificate is not None
    assert mine.certificate.gap <= 1e-6 and mine.certificate.dual_infeasibility <= 1e-6


@pytest.mark.parametrize("task", ["classify", "regress"])
def test_certificate_is_recomputed_from_the_solution(task: str) -> None:
    """The certificate's dual objective is a lower bound (weak duality): a worse (u, gamma) shows a larger gap,
    and a point that breaks the dual constraints is reported as infeasible."""
    K, target = problem(task, 200, 7, 2)
    nu = 1.0
    solution = solve_lp(task, K, target, nu, "ipm")
    assert solution.certificate is not None
    assert abs(solution.certificate.gap) <= 1e-7 and solution.certificate.dual_infeasibility <= 1e-7
    assert solution.certificate.dual_objective <= reference(task, 200, 7, 2, nu) + 1e-7
    a = ipm.solve_dual(K, *dual_data(task, target, nu)).a
    worse = objective(task, K, target, nu, solution.u * 1.1, solution.gamma)
    assert certificate(task, K, target, nu, worse, a).gap > 1e-3
    _, _, (low, high), _ = dual_data(task, target, nu)
    random_a = np.random.default_rng(0).uniform(low, high, len(target))
    assert certificate(task, K, target, nu, solution.objective, random_a).dual_infeasibility > 1e-3


def test_interior_point_falls_back_to_highs_with_a_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A solve that does not converge is never returned: HiGHS takes over and the log says so."""
    K, target = problem("classify", 200, 7, 2)
    real = ipm.solve_dual
    monkeypatch.setattr(ipm, "solve_dual", lambda *args, **kwargs: real(*args, **{**kwargs, "max_iterations": 2}))
    solution = solve_lp("classify", K, target, 1.0, "ipm")
    assert solution.formulation == "highs-dual"
    assert "did not converge" in caplog.text and "HiGHS" in caplog.text
    assert abs(solution.objective - reference("classify", 200, 7, 2, 1.0)) <= 1e-6 * solution.objective


def test_concurrent_solves_leave_the_blas_thread_count_as_it_was() -> None:
    """Each solve runs on one BLAS thread; solves in parallel threads must not leave that limit behind."""
    import threading

    from threadpoolctl import threadpool_info

    def blas_threads() -> list[int]:
        return [pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"]

    before = blas_threads()
    K, target = problem("classify", 200, 7, 2)
    workers = [
        threading.Thread(target=lambda: [solve_lp("classify", K, target, 1.0, "ipm") for _ in range(15)])
        for _ in range(4)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert blas_threads() == before


@pytest.mark.parametrize("formulation", ["ipm", "highs-dual"])
def test_the_objective_and_certificate_run_on_one_blas_thread_too(
    formulation: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Their products over K suffered most from a second BLAS thread beside a busy core (10 times slower)."""
    from threadpoolctl import threadpool_info

    import ppsvm.core.lp as lp_module

    seen: list[list[int]] = []
    real = lp_module.certificate

    def spying(*args: object, **kwargs: object) -> object:
        seen.append([pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"])
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(lp_module, "certificate", spying)
    K, target = problem("classify", 300, 7, 2)
    solve_lp("classify", K, target, 1.0, formulation)  # type: ignore[arg-type]
    assert seen and all(count == 1 for count in seen[0])


@pytest.mark.parametrize("layout", ["C", "F"])
@pytest.mark.parametrize("m, mbar", [(1, 3), (50, 1), (1000, 7), (70_000, 2)])
def test_normal_matrix_equals_the_direct_product(m: int, mbar: int, layout: str) -> None:
    """Khat' diag(theta) Khat from the row blocks equals the product of the whole matrices, in both layouts
    and for m within one block and across two (70,000 x 2: a full block of 43,690 rows and part of another)."""
    rng = np.random.default_rng(m + mbar)
    K = np.asarray(rng.random((m, mbar)), order=layout)
    theta, center = rng.random(m) * 10.0, rng.random(mbar)
    khat = np.c_[K - center, np.ones(m)]
    expected = khat.T @ (theta[:, None] * khat)
    assert np.allclose(ipm.normal_matrix(K, theta, center), expected, rtol=1e-12, atol=1e-12 * np.abs(expected).max())


def test_the_accurate_form_is_kept_for_stalls_near_the_optimum() -> None:
    """Slow progress far from the optimum (a poorly centred start) keeps the fast normal equations; a stall
    once every measure is small, where the fast form's lost digits matter, switches to the QR form."""
    slow = ipm._SLOW_ITERATIONS
    assert not ipm._stalled_near_optimum(10, 10 - slow, 0.5)
    assert ipm._stalled_near_optimum(10, 10 - slow, 1e-5)
    assert not ipm._stalled_near_optimum(10, 10 - slow + 1, 1e-5)
