"""Uniform designs, the nested uniform-design search and leave-one-out by warm-started re-solves."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import qmc

from ppsvm.core.design import Box, centred_discrepancy, design_quality, uniform_design
from ppsvm.core.kernels import gaussian_kernel
from ppsvm.core.lp import leave_one_out_decisions, solve_lp
from ppsvm.core.metrics import error_rate
from ppsvm.core.tuning import (
    cross_validation_score,
    fold_indices,
    grid_points,
    search_space,
    tune,
    tune_search,
    tune_uniform_design,
)


def small_problem(m: int = 24, n: int = 4, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.random((m, n))
    y = np.where(X[:, 0] + 0.3 * rng.standard_normal(m) > 0.5, 1.0, -1.0)
    return X, y


def test_one_dimensional_design_is_the_centred_grid() -> None:
    np.testing.assert_allclose(uniform_design(4, 1)[:, 0], [0.125, 0.375, 0.625, 0.875])


def test_two_dimensional_design_is_a_latin_square_more_uniform_than_the_alternatives() -> None:
    design = uniform_design(30, 2)
    levels = np.sort(np.round(design * 30 + 0.5).astype(int), axis=0)
    # Each coordinate takes each of the 30 cell centres once: a Latin hypercube design.
    np.testing.assert_array_equal(levels, np.column_stack([np.arange(1, 31)] * 2))
    assert centred_discrepancy(design) == pytest.approx(float(qmc.discrepancy(design, method="CD")))
    quality = design_quality()
    assert quality["ours_glp"] < quality["scipy_lhs_random_cd"] < quality["uniform_random_mean"]
    assert quality["ours_glp"] == pytest.approx(0.000378, abs=1e-6)  # the figure the docs quote
    assert not design.flags.writeable  # cached: nobody may change the design in place


@pytest.mark.parametrize(("runs", "dims"), [(0, 2), (30, 3)])
def test_design_refuses_what_it_cannot_build(runs: int, dims: int) -> None:
    with pytest.raises(ValueError, match="uniform design"):
        uniform_design(runs, dims)


def test_second_box_is_half_the_first_and_moved_inside() -> None:
    first = Box((-7.0, -2.0), (7.0, 2.0))
    centred = first.around(np.array([0.0, 0.0]), first)
    assert centred == Box((-3.5, -1.0), (3.5, 1.0))
    at_edge = first.around(np.array([6.5, -2.0]), first)
    assert at_edge == Box((0.0, -2.0), (7.0, 0.0))  # same size, moved back inside rather than clipped
    points = at_edge.points(30)
    assert (points >= np.array(at_edge.low)).all() and (points <= np.array(at_edge.high)).all()


def test_search_space_follows_the_paper_and_fixes_what_is_given() -> None:
    box = search_space("classify", "gaussian", 10, None, None)
    assert box.low[0] == -7.0 and box.high[0] == 7.0
    assert box.low[1] == pytest.approx(math.log10(1 / 64 / 10)) and box.high[1] == pytest.approx(math.log10(25.6))
    assert search_space("classify", "linear", 10, None, None) == Box((-7.0,), (7.0,))
    fixed = search_space("classify", "gaussian", 10, 100.0, None)
    assert fixed.low[0] == fixed.high[0] == 2.0


def test_nested_uniform_design_scores_sixty_points_and_keeps_the_best() -> None:
    X, y = small_problem(m=60, seed=3)
    K = gaussian_kernel(X, X[:8], 1.0)
    box = search_space("classify", "gaussian", X.shape[1], None, None)
    result = tune_uniform_design("classify", "gaussian", K, y, mu_ref=1.0, box=box, folds=5, seed=0)
    assert len(result.scores) == 60 and result.promoted == 60
    first, second = result.scores[:30], result.scores[30:]
    logs = np.log10([(nu, mu) for nu, mu, _ in first])
    np.testing.assert_allclose(logs, box.points(30), atol=1e-12)
    # The second nesting lies in a box half the first's size around the first nesting's best point.
    best_first = min(range(30), key=lambda k: (first[k][2], k))
    inner = box.around(logs[best_first], box)
    second_logs = np.log10([(nu, mu) for nu, mu, _ in second])
    assert (second_logs >= np.array(inner.low) - 1e-12).all() and (second_logs <= np.array(inner.high) + 1e-12).all()
    # The winner is the lowest score of both nestings (ties: the earlier), and its score is plain 5-fold CV.
    best = min(range(60), key=lambda k: (result.scores[k][2], k))
    assert (result.nu, result.mu) == result.scores[best][:2]
    folds = fold_indices("classify", y, 5, 0)
    direct = cross_validation_score("classify", gaussian_kernel(X, X[:8], result.mu), y, result.nu, folds)
    assert result.score == pytest.approx(direct, abs=1e-12)


def test_tune_search_dispatches_and_refuses_unknown_searches() -> None:
    X, y = small_problem(m=40, seed=5)
    K = X @ X[:3].T
    grid = tune_search(
        "classify", "linear", K, y, search="grid", n_features=4, nu=None, mu=None, mu_ref=1.0, folds=4, seed=0
    )
    assert len(grid.scores) == 7 and grid.mu == 0.0
    design = tune_search(
        "classify", "linear", K, y, search="uniform-design", n_features=4, nu=None, mu=None, mu_ref=1.0, folds=4, seed=0
    )
    assert len(design.scores) == 60 and all(mu == 0.0 for _, mu, _ in design.scores)
    with pytest.raises(ValueError, match="search must be one of grid, uniform-design"):
        tune_search(
            "classify", "linear", K, y, search="random", n_features=4, nu=None, mu=None, mu_ref=1.0, folds=4, seed=0
        )  # type: ignore[arg-type]


@pytest.mark.parametrize("seed", range(6))
def test_leave_one_out_by_warm_starts_equals_one_fit_per_row(seed: int) -> None:
    """Same misclassified rows as m separate fits without each row (the ipm path, another solver)."""
    X, y = small_problem(seed=seed)
    K = gaussian_kernel(X, X, 0.5 + seed / 4)
    for nu in (1e-3, 0.3, 10.0, 1e4):
        decisions = leave_one_out_decisions("classify", K, y, nu)
        for i in range(len(y)):
            keep = np.arange(len(y)) != i
            fit = solve_lp("classify", K[keep], y[keep], nu, "ipm")
            assert error_rate(y[i : i + 1], decisions[i : i + 1]) == error_rate(
                y[i : i + 1], K[i : i + 1] @ fit.u - fit.gamma
            ), (seed, nu, i)


def test_leave_one_out_marks_a_row_whose_class_it_alone_holds() -> None:
    X, y = small_problem(m=10, seed=1)
    y[:] = -1.0
    y[4] = 1.0  # the only positive: without it, one class is left
    decisions = leave_one_out_decisions("classify", gaussian_kernel(X, X, 1.0), y, 1.0)
    assert np.isnan(decisions[4]) and np.isfinite(np.delete(decisions, 4)).all()


def test_tune_leave_one_out_scores_equal_the_fold_by_fold_path() -> None:
    X, y = small_problem(m=26, seed=7)
    K = gaussian_kernel(X, X, 1.0)
    points = grid_points((1e-2, 1.0, 1e2), (0.5, 2.0))
    fast = tune("classify", "gaussian", K, y, mu_ref=1.0, points=points, folds=len(y), seed=0)
    slow = tune("classify", "gaussian", K, y, mu_ref=1.0, points=points, folds=len(y), seed=0, formulation="ipm")
    np.testing.assert_allclose([s[2] for s in fast.scores], [s[2] for s in slow.scores], atol=1e-12)
    assert (fast.nu, fast.mu) == (slow.nu, slow.mu)
