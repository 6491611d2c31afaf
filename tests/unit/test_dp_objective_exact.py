"""Objective perturbation never fails on data (issue 27, "The DpWeights solver cannot fail on data either").

Newton's method on the perturbed Huber objective stopped with SolverError when its max-abs gradient did not
reach 1e-12 in 200 iterations, with LinAlgError when its Hessian was not numerically positive definite,
and with SolverError when its line search overflowed. Measured at C = 1000: on a 25-record WDBC cell at
D = 200, CMS's h = 0.5 and epsilon = 1e-3 (the gradient's rounding level is above 1e-12 when ||b||/n is
large), the same noise failed on the cell and not on 19 of its 25 single-label flips; small h failed on most.

The minimiser is checked against Clarabel on a QP form of the Huber loss, l(u) = min t^2/(4h) + s over
t, s >= 0 with t + s >= u (u = 1 + h - margin), computed without ppsvm.core.dp.
"""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest

from ppsvm.core import dp
from ppsvm.entity.cell import MAX_DP_C
from ppsvm.errors import DataError

from .test_linear_svm_exact import flipped, shipped_cell

MIN_EPSILON = 1e-3  # ppsvm.entity.guard.MIN_EPSILON, the smallest epsilon an entity admits


def noise(Z: np.ndarray, n: int, epsilon: float, h: float, seed: int) -> tuple[np.ndarray, float]:
    """b and the extra ridge that objective_perturbation draws with default_rng(seed)."""
    params = dp.objective_perturbation_parameters(n=n, C=MAX_DP_C, epsilon=epsilon, huber_h=h)
    return dp.gamma_norm_noise(Z.shape[1], 2.0 / params.epsilon_prime, np.random.default_rng(seed)), params.extra_ridge


def clarabel_huber(Z: np.ndarray, y: np.ndarray, b: np.ndarray, extra: float, h: float) -> np.ndarray:
    """argmin (1/n) sum l(y_i w'z_i) + ((1/C + extra)/2)||w||^2 + b'w/n, the Huber loss as a QP."""
    n, p = Z.shape
    w, t, s = cp.Variable(p), cp.Variable(n), cp.Variable(n)
    ridge = 1.0 / MAX_DP_C + extra
    objective = (cp.sum_squares(t) / (4 * h) + cp.sum(s)) / n + ridge / 2 * cp.sum_squares(w) + b @ w / n
    constraints = [t >= 0, s >= 0, t + s >= 1 + h - cp.multiply(y, Z @ w)]
    problem = cp.Problem(cp.Minimize(objective), constraints)
    problem.solve(solver=cp.CLARABEL, tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12, max_iter=500)
    assert problem.status == cp.OPTIMAL, problem.status
    return np.asarray(w.value)


def stationarity(w: np.ndarray, Z: np.ndarray, y: np.ndarray, b: np.ndarray, extra: float, h: float) -> float:
    """The max-abs gradient at w over its rounding level (1 = rounding), computed from the loss's definition.

    The gradient (1/n) sum l'(m_i) y_i z_i + (1/C + extra) w + b/n sums terms of the sizes of b/n and of the
    ridge term, so float64 cannot bring it below about eps times those: 64 eps (1 + |b|/n + ridge |w|).
    """
    n = len(y)
    u = 1 + h - y * (Z @ w)
    slope = -np.clip(u / (2 * h), 0.0, 1.0)  # l'(m) of CMS's Huber loss, by cases
    ridge = 1.0 / MAX_DP_C + extra
    gradient = Z.T @ (slope * y) / n + ridge * w + b / n
    floor = 64 * np.finfo(float).eps * (1.0 + np.abs(b).max() / n + ridge * np.abs(w).max())
    return float(np.abs(gradient).max() / floor)


# (dataset, n, D, h, epsilon, flip, noise seed, what the old solver raised on it)
OLD_FAILURES = [
    ("wdbc", 25, 200, 0.5, MIN_EPSILON, -1, 0, "SolverError: gradient 1.8e-12 after 200 Newton iterations"),
    ("wdbc", 10, 1, 1e-6, 1e3, 2, 5, "SolverError: gradient above 1e-12 after 200 Newton iterations"),
    ("wdbc", 25, 10, 1e-6, 1e3, 0, 5, "SolverError: gradient above 1e-12 after 200 Newton iterations"),
    ("bupa", 25, 200, 1e-12, 1e3, -1, 5, "SolverError: gradient above 1e-12 after 200 Newton iterations"),
    ("bupa", 25, 200, 1e-100, 1e3, 0, 5, "LinAlgError: the Hessian is not numerically positive definite"),
    ("bupa", 25, 200, 1e-300, 1e3, 1, 5, "SolverError: the line search found no minimum"),
]


@pytest.mark.parametrize(("key", "n", "D", "h", "epsilon", "flip", "seed", "old"), OLD_FAILURES)
def test_the_releases_that_failed_now_answer(
    key: str, n: int, D: int, h: float, epsilon: float, flip: int, seed: int, old: str
) -> None:
    Z, y = shipped_cell(key, n, D, seed=0)
    labels = y if flip < 0 else flipped(y, flip)
    release = dp.private_weights(
        Z, labels, C=MAX_DP_C, epsilon=epsilon, mechanism="objective", huber_h=h, rng=np.random.default_rng(seed)
    )
    assert release.weights.shape == (2 * D,) and np.isfinite(release.weights).all()
    b, extra = noise(Z, n, epsilon, h, seed)
    if h >= 1e-3:
        assert stationarity(release.weights, Z, labels, b, extra, h) <= 1.0
    elif h >= 1e-6:  # below, Clarabel's own accuracy is the limit
        reference = clarabel_huber(Z, labels, b, extra, h)
        np.testing.assert_allclose(release.weights, reference, atol=1e-6 * (1.0 + np.linalg.norm(reference)))


def test_control_newton_alone_fails_on_the_cell_and_not_on_a_flip(monkeypatch) -> None:
    """The old solver (Newton to gradient 1e-12 in 200 iterations, else SolverError) with the same noise: the
    cell fails and its flip of record 0 does not, so the failure told that record's label."""
    monkeypatch.setattr(dp, "NEWTON_STALL_ITERATIONS", dp.MAX_NEWTON_ITERATIONS + 1)  # the old loop, no stall exit
    Z, y = shipped_cell("wdbc", 25, 200, seed=0)
    b, extra = noise(Z, 25, MIN_EPSILON, 0.5, 0)
    ridge = 1.0 / MAX_DP_C + extra
    reached = [
        dp._newton_huber(labels[:, None] * Z, b, ridge=ridge, h=0.5, tol=dp.NEWTON_TOL)[1]
        for labels in (y, flipped(y, 0))
    ]
    assert reached == [False, True]
    # Both answer now, each with its minimiser (to the gradient's rounding level).
    for labels in (y, flipped(y, 0)):
        w = dp.solve_perturbed_huber(Z, labels, C=MAX_DP_C, b=b, extra_ridge=extra, huber_h=0.5)
        assert stationarity(w, Z, labels, b, extra, 0.5) <= 1.0


def test_the_exact_finish_is_newtons_minimiser_where_newton_converges() -> None:
    """The dual route (from w = 0, no Newton) agrees with Newton's converged answer."""
    cases = [("pima", 200, 10, 0.5, 1.0), ("wdbc", 25, 10, 0.25, 10.0), ("bupa", 60, 50, 1.0, 0.1)]
    for key, n, D, h, epsilon in cases:
        Z, y = shipped_cell(key, n, D, seed=1)
        b, extra = noise(Z, n, epsilon, h, 3)
        ridge = 1.0 / MAX_DP_C + extra
        YZ = y[:, None] * Z
        newton, reached = dp._newton_huber(YZ, b, ridge=ridge, h=h, tol=dp.NEWTON_TOL)
        assert reached
        exact = dp._huber_dual_minimiser(YZ, b, ridge=ridge, h=h, start=np.zeros(Z.shape[1]))
        np.testing.assert_allclose(exact, newton, atol=1e-9 * (1.0 + np.linalg.norm(newton)))


@pytest.mark.parametrize("D", [10, pytest.param(200, marks=pytest.mark.long)])
def test_objective_answers_every_single_label_flip(D: int) -> None:
    """Every flip of a 25-record cell, the same noise for all, at the extremes of h and epsilon."""
    Z, y = shipped_cell("wdbc", 25, D, seed=2)
    for h, epsilon in [(0.5, MIN_EPSILON), (0.5, 1e3), (1e-6, MIN_EPSILON), (1e-6, 1e3), (1e-12, 1.0)]:
        for i in range(-1, 25):
            labels = y if i < 0 else flipped(y, i)
            release = dp.private_weights(
                Z, labels, C=MAX_DP_C, epsilon=epsilon, mechanism="objective", huber_h=h, rng=np.random.default_rng(7)
            )
            assert np.isfinite(release.weights).all(), (h, epsilon, i)


def test_an_h_too_small_for_float64_is_refused_from_the_request_alone() -> None:
    """Below ~1e-280 the extra ridge n (Lambda + Delta) leaves float64's range: refused by the parameters, which
    depend on the request and n only; objective_perturbation asks for them before it looks at the rows (a row of
    norm 2 is not even noticed)."""
    with pytest.raises(DataError, match="raise huber_h"):
        dp.objective_perturbation_parameters(n=10, C=MAX_DP_C, epsilon=MIN_EPSILON, huber_h=1e-300)
    assert dp.objective_perturbation_parameters(n=10, C=MAX_DP_C, epsilon=MIN_EPSILON, huber_h=1e-250).extra_ridge > 0
    Z = np.full((10, 2), 2.0**-0.5)
    Z[0] *= 2.0
    y = np.where(np.arange(10) % 2, 1.0, -1.0)
    rng = np.random.default_rng(0)
    with pytest.raises(DataError, match="raise huber_h"):
        dp.objective_perturbation(Z, y, C=MAX_DP_C, epsilon=MIN_EPSILON, rng=rng, huber_h=1e-300)
    with pytest.raises(DataError, match="norm > 1"):
        dp.objective_perturbation(Z, y, C=MAX_DP_C, epsilon=MIN_EPSILON, rng=rng, huber_h=0.5)
    Z[0] /= 2.0
    with pytest.raises(DataError, match="raise huber_h"):
        dp.private_weights(Z, y, C=MAX_DP_C, epsilon=MIN_EPSILON, mechanism="objective", huber_h=1e-300)


def test_a_c_too_small_for_float64_is_refused_from_the_request_alone() -> None:
    """With epsilon' > 0 there is no extra ridge, but n / C itself can leave float64's range once the exact finish
    doubles it (NaN weights at C ~ 1.5e-298, n = 199): refused by the parameters; the smallest C allowed answers
    finite weights."""
    with pytest.raises(DataError, match="raise C"):
        dp.objective_perturbation_parameters(n=199, C=1e-290, epsilon=1.0)
    Z, y = shipped_cell("wdbc", 25, 10, seed=2)
    smallest = 25 / dp.MAX_OBJECTIVE_SCALE
    release = dp.private_weights(
        Z, y, C=smallest, epsilon=1.0, mechanism="objective", huber_h=0.5, rng=np.random.default_rng(7)
    )
    assert np.isfinite(release.weights).all()
    with pytest.raises(DataError, match="raise C"):
        dp.private_weights(Z, y, C=smallest / 2, epsilon=1.0, mechanism="objective", rng=np.random.default_rng(7))
