"""Per-row weights on the LPs' error terms (issue 29 item 4), in every formulation and in the tuning.

The weighted LPs, min nu sum_i w_i max(0, 1 - d_i (K_i u - gamma)) + ||u||_1 and
min sum_i w_i |K_i u - gamma - y_i| + nu ||u||_1, are written out in cvxpy here, independently of
ppsvm.core.lp, as the reference.
"""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest

from ppsvm.core import ipm, tuning
from ppsvm.core.lp import FORMULATIONS, certificate, dual_data, leave_one_out_decisions, solve_lp
from ppsvm.core.metrics import error_rate, relative_error
from ppsvm.core.tuning import cross_validation_score, fold_error, fold_indices, tune, tune_search

TASKS = ("classify", "regress")
SOLVING = [f for f in FORMULATIONS if f != "auto"]


def problem(task: str, m: int, mbar: int = 6, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A Gaussian kernel of random points on a random basis; labels from a noisy rule, or noisy targets."""
    rng = np.random.default_rng(seed)
    X, B = rng.random((m, 4)), rng.random((mbar, 4))
    K = np.exp(-2.0 * ((X[:, None, :] - B[None, :, :]) ** 2).sum(axis=2))
    score = np.sin(5.0 * X[:, 0]) + X[:, 1] + 0.3 * rng.standard_normal(m)
    target = np.where(score > np.quantile(score, 0.35), 1.0, -1.0) if task == "classify" else score
    return np.asfortranarray(K), target


def random_weights(m: int, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).uniform(0.1, 4.0, m)


def reference(task: str, K: np.ndarray, target: np.ndarray, nu: float, weights: np.ndarray) -> tuple[float, np.ndarray]:
    """The weighted primal LP, slacks and |u| split, in cvxpy: its optimal value and decision values."""
    m, mbar = K.shape
    u, gamma, bound, slack = cp.Variable(mbar), cp.Variable(), cp.Variable(mbar), cp.Variable(m)
    residual = K @ u - gamma
    if task == "classify":
        constraints = [slack >= 1 - cp.multiply(target, residual), slack >= 0]
        cost = nu * (weights @ slack) + cp.sum(bound)
    else:
        constraints = [slack >= residual - target, slack >= target - residual]
        cost = weights @ slack + nu * cp.sum(bound)
    problem = cp.Problem(cp.Minimize(cost), [*constraints, u <= bound, -bound <= u])
    problem.solve(solver=cp.CLARABEL, tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    assert problem.status == cp.OPTIMAL and u.value is not None and gamma.value is not None
    return float(problem.value), K @ u.value - float(gamma.value)


def weighted_objective(
    task: str, K: np.ndarray, target: np.ndarray, nu: float, u: np.ndarray, gamma: float, w: np.ndarray
) -> float:
    residual = K @ u - gamma
    if task == "classify":
        return float(nu * np.sum(w * np.maximum(0.0, 1.0 - target * residual)) + np.abs(u).sum())
    return float(np.sum(w * np.abs(residual - target)) + nu * np.abs(u).sum())


@pytest.mark.parametrize("formulation", SOLVING)
@pytest.mark.parametrize("task", TASKS)
def test_every_formulation_solves_the_weighted_lp(task: str, formulation: str) -> None:
    """The objective of the reference to 1e-6 relative, recomputed here from (u, gamma); decisions alike."""
    K, target = problem(task, 120)
    weights = random_weights(120)
    nu = 2.0
    expected, expected_decisions = reference(task, K, target, nu, weights)
    solution = solve_lp(task, K, target, nu, formulation, weights)
    assert solution.formulation == formulation
    assert solution.objective == pytest.approx(expected, rel=1e-6)
    recomputed = weighted_objective(task, K, target, nu, solution.u, solution.gamma, weights)
    assert recomputed == pytest.approx(solution.objective, rel=1e-12)
    decisions = K @ solution.u - solution.gamma
    assert np.allclose(decisions, expected_decisions, atol=1e-5 * max(1.0, np.abs(expected_decisions).max()))


@pytest.mark.parametrize("formulation", SOLVING)
@pytest.mark.parametrize("task", TASKS)
def test_integer_weights_are_duplicated_rows(task: str, formulation: str) -> None:
    K, target = problem(task, 80, seed=2)
    weights = np.random.default_rng(3).integers(1, 4, 80).astype(float)
    repeats = weights.astype(int)
    weighted = solve_lp(task, K, target, 0.7, formulation, weights)
    duplicated = solve_lp(task, np.repeat(K, repeats, axis=0), np.repeat(target, repeats), 0.7, formulation)
    assert weighted.objective == pytest.approx(duplicated.objective, rel=1e-6)


@pytest.mark.parametrize("formulation", SOLVING)
@pytest.mark.parametrize("task", TASKS)
def test_unit_weights_are_no_weights(task: str, formulation: str) -> None:
    K, target = problem(task, 100, seed=4)
    for nu in (0.3, 1.0):
        plain = solve_lp(task, K, target, nu, formulation)
        ones = solve_lp(task, K, target, nu, formulation, np.ones(100))
        assert ones.objective == pytest.approx(plain.objective, rel=1e-9)
        assert np.allclose(K @ ones.u - ones.gamma, K @ plain.u - plain.gamma, rtol=1e-7, atol=1e-7)


@pytest.mark.parametrize("task", TASKS)
def test_unit_weights_leave_the_interior_point_method_bit_for_bit(task: str) -> None:
    """A box of ones per row runs the same arithmetic as the one shared box (nu an integer: the classes' total
    widths are then exact, as the counts are)."""
    K, target = problem(task, 2500, mbar=9, seed=5)
    for nu in (1.0, 8.0):
        plain = solve_lp(task, K, target, nu, "ipm")
        ones = solve_lp(task, K, target, nu, "ipm", np.ones(len(target)))
        assert ones.formulation == plain.formulation == "ipm"
        assert ones.iterations == plain.iterations and ones.gamma == plain.gamma and ones.objective == plain.objective
        assert np.array_equal(ones.u, plain.u)
        assert ones.certificate == plain.certificate


@pytest.mark.parametrize("formulation", ["ipm", "highs-dual", "cvxpy-dual"])
@pytest.mark.parametrize("task", TASKS)
def test_certificate_with_weights(task: str, formulation: str) -> None:
    """The gap closes and the dual point keeps to the weights' box."""
    K, target = problem(task, 300, seed=6)
    solution = solve_lp(task, K, target, 1.0, formulation, random_weights(300, seed=7))
    assert solution.certificate is not None
    assert abs(solution.certificate.gap) <= 1e-7 and solution.certificate.dual_infeasibility <= 1e-7


@pytest.mark.parametrize("task", TASKS)
def test_certificate_reads_the_weights(task: str) -> None:
    """The weighted optimum's dual point, with weights above 1, leaves the unit box: checked without the weights,
    the certificate reports it infeasible."""
    K, target = problem(task, 300, seed=8)
    weights = np.random.default_rng(9).uniform(1.5, 4.0, 300)
    a = ipm.solve_dual(K, *dual_data(task, target, 1.0, weights)).a
    assert certificate(task, K, target, 1.0, 0.0, a, weights).dual_infeasibility <= 1e-7
    assert certificate(task, K, target, 1.0, 0.0, a).dual_infeasibility > 0.1


@pytest.mark.parametrize(
    ("weights", "message"),
    [
        (np.r_[np.ones(3), -1.0, np.ones(36)], r"row 3 has -1\.0"),
        (np.r_[np.ones(5), 0.0, np.ones(34)], r"row 5 has 0\.0"),
        (np.r_[np.ones(7), np.nan, np.ones(32)], r"row 7 has nan"),
        (np.r_[np.inf, np.ones(39)], r"row 0 has inf"),
        (np.ones(39), r"40 rows but weights have shape \(39,\)"),
        (np.ones((40, 1)), r"40 rows but weights have shape \(40, 1\)"),
    ],
)
def test_bad_weights_are_refused(weights: np.ndarray, message: str) -> None:
    K, target = problem("classify", 40)
    with pytest.raises(ValueError, match=message):
        solve_lp("classify", K, target, 1.0, "ipm", weights)
    with pytest.raises(ValueError, match=message):
        leave_one_out_decisions("classify", K, target, 1.0, weights)


@pytest.mark.parametrize("task", TASKS)
def test_weighted_leave_one_out_is_refitting_without_the_row(task: str) -> None:
    K, target = problem(task, 30, mbar=5, seed=9)
    weights = random_weights(30, seed=10)
    nu = 3.0
    decisions = leave_one_out_decisions(task, K, target, nu, weights)
    for i in (0, 7, 13, 22, 29):
        keep = np.arange(30) != i
        refit = solve_lp(task, K[keep], target[keep], nu, "highs-dual", weights[keep])
        assert decisions[i] == pytest.approx(float(K[i] @ refit.u - refit.gamma), abs=1e-6)
    # The weights are not ignored: unit weights give other decisions.
    assert not np.allclose(decisions, leave_one_out_decisions(task, K, target, nu), atol=1e-3)


# --- the weighted tuning ---------------------------------------------------------------------------------------


def test_weighted_metrics_by_hand() -> None:
    labels = np.array([1.0, -1.0, 1.0, -1.0])
    decision = np.array([0.5, 0.2, -1.0, -3.0])  # rows 1 and 2 wrong
    weights = np.array([1.0, 2.0, 3.0, 4.0])
    assert error_rate(labels, decision, weights) == pytest.approx(5.0 / 10.0)
    assert error_rate(labels, decision, np.ones(4)) == error_rate(labels, decision) == 0.5
    targets, predictions = np.array([1.0, 2.0, -1.0]), np.array([1.5, 2.0, 0.0])
    expected = np.sqrt((1.0 * 0.25 + 3.0 * 1.0) / (1.0 * 1.0 + 2.0 * 4.0 + 3.0 * 1.0))
    assert relative_error(targets, predictions, np.array([1.0, 2.0, 3.0])) == pytest.approx(expected)
    assert relative_error(targets, predictions, np.ones(3)) == relative_error(targets, predictions)


@pytest.mark.parametrize("task", TASKS)
def test_fold_error_fits_and_scores_with_the_weights(task: str) -> None:
    K, target = problem(task, 90, seed=11)
    weights = random_weights(90, seed=12)
    held = fold_indices(task, target, 3, seed=0)[1]
    train = np.setdiff1d(np.arange(90), held)
    fit = solve_lp(task, K[train], target[train], 1.5, "highs-dual", weights[train])
    decision = K[held] @ fit.u - fit.gamma
    if task == "classify":
        wrong = np.where(decision >= 0, 1.0, -1.0) != target[held]
        expected = weights[held][wrong].sum() / weights[held].sum()
    else:
        expected = np.sqrt(
            np.sum(weights[held] * (decision - target[held]) ** 2) / np.sum(weights[held] * target[held] ** 2)
        )
    assert fold_error(task, K, target, 1.5, held, "highs-dual", weights) == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("task", TASKS)
def test_unit_weights_tune_as_no_weights(task: str) -> None:
    K, target = problem(task, 60, seed=13)
    folds = fold_indices(task, target, 4, seed=1)
    assert cross_validation_score(task, K, target, 0.5, folds, "highs-dual", np.ones(60)) == cross_validation_score(
        task, K, target, 0.5, folds, "highs-dual"
    )
    points = [(0.1, 0.0), (1.0, 0.0), (10.0, 0.0)]
    plain = tune(task, "linear", K, target, mu_ref=0.0, points=points, folds=4, seed=1, formulation="highs-dual")
    ones = tune(
        task, "linear", K, target, mu_ref=0.0, points=points, folds=4, seed=1, formulation="highs-dual",
        weights=np.ones(60),
    )  # fmt: skip
    assert ones == plain


def test_weights_change_the_tuning_score() -> None:
    """Heavy weights on the positive class: the score is the weighted error, not the plain one."""
    K, target = problem("classify", 60, seed=14)
    folds = fold_indices("classify", target, 3, seed=2)
    weights = np.where(target > 0, 10.0, 1.0)
    weighted = cross_validation_score("classify", K, target, 0.3, folds, "highs-dual", weights)
    by_hand = np.mean([fold_error("classify", K, target, 0.3, held, "highs-dual", weights) for held in folds])
    assert weighted == by_hand
    assert weighted != cross_validation_score("classify", K, target, 0.3, folds, "highs-dual")


def test_the_tuning_subset_keeps_its_rows_weights() -> None:
    """Above max_rows the search runs on tuning_rows, with those rows' weights."""
    K, target = problem("classify", 200, seed=15)
    weights = random_weights(200, seed=16)
    points = [(0.3, 0.0), (3.0, 0.0)]
    common = {"mu_ref": 0.0, "points": points, "folds": 3, "seed": 4, "formulation": "highs-dual"}
    subset = tune("classify", "linear", K, target, max_rows=80, weights=weights, **common)
    rows = tuning.tuning_rows("classify", target, 80, 4)
    direct = tune("classify", "linear", K[rows], target[rows], weights=weights[rows], **common)
    assert subset.rows == 80 and subset.scores == direct.scores


def test_weighted_leave_one_out_tuning_is_refitting() -> None:
    """Leave-one-out by warm-started re-solves (highs-dual) against one weighted fit per row (ipm)."""
    K, target = problem("classify", 24, mbar=5, seed=17)
    weights = random_weights(24, seed=18)
    points = [(0.5, 0.0), (5.0, 0.0)]
    common = {"mu_ref": 0.0, "points": points, "folds": 24, "seed": 0, "weights": weights}
    warm = tune("classify", "linear", K, target, formulation="highs-dual", **common)
    cold = tune("classify", "linear", K, target, formulation="ipm", **common)
    assert [score for *_, score in warm.scores] == pytest.approx([score for *_, score in cold.scores])


@pytest.mark.parametrize("search", tuning.SEARCHES)
def test_every_search_passes_the_weights_to_the_fold_fits(search: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The search's points are scored by a stand-in for fold_error that records the weights it receives."""
    seen: list[object] = []
    monkeypatch.setattr(tuning, "fold_error", lambda *args: seen.append(args[6]) or 0.5)
    K, target = problem("classify", 50, seed=19)
    weights = random_weights(50, seed=20)
    tune_search(
        "classify", "gaussian", K, target, search=search, n_features=4, nu=None, mu=None, mu_ref=0.5, folds=3, seed=0,
        weights=weights,
    )  # fmt: skip
    assert seen and all(w is weights for w in seen)
