"""The hybrid DP SVM: feature map, frequency learning, exact SVM solvers, sensitivities, noise.

Every expected value is computed here independently (loops, closed forms, cvxpy/Clarabel,
scikit-learn, scipy.stats), never read back from ppsvm.core.dp.
"""

from __future__ import annotations

import math
import warnings
from fractions import Fraction

import cvxpy as cp
import numpy as np
import pytest
from scipy import stats
from scipy.optimize import minimize
from sklearn.exceptions import ConvergenceWarning
from sklearn.svm import LinearSVC

from ppsvm.core import dp, fourier, linear_svm
from ppsvm.errors import DataError, PrivacyError

# --- independent references ---------------------------------------------------------------------


def unit_rows(n: int, p: int, rng: np.random.Generator) -> np.ndarray:
    """Rows uniform on the unit sphere of R^p."""
    Z = rng.standard_normal((n, p))
    return Z / np.linalg.norm(Z, axis=1, keepdims=True)


def rff_problem(n: int, d: int, D: int, seed: int, *, noise: float = 0.3) -> tuple[np.ndarray, np.ndarray]:
    """zhat features of a noisy non-linear two-class problem, built without ppsvm.core.dp."""
    rng = np.random.default_rng(seed)
    X = rng.random((n, d))
    y = np.where(np.sin(3 * X[:, 0]) + X[:, 1:].sum(axis=1) / d + noise * rng.standard_normal(n) > 0.6, 1.0, -1.0)
    rho = rng.normal(0.0, math.sqrt(2.0 * 2.0), size=(D, d))
    P = X @ rho.T
    Z = np.empty((n, 2 * D))
    Z[:, 0::2], Z[:, 1::2] = np.cos(P), np.sin(P)
    return Z / math.sqrt(D), y


def cvxpy_hinge_svm(Z: np.ndarray, y: np.ndarray, C: float) -> tuple[np.ndarray, float]:
    """The primal (1/2)||w||^2 + (C/n) sum hinge, no intercept, by Clarabel at tight tolerances."""
    n, p = Z.shape
    w = cp.Variable(p)
    objective = 0.5 * cp.sum_squares(w) + C / n * cp.sum(cp.pos(1 - cp.multiply(y, Z @ w)))
    problem = cp.Problem(cp.Minimize(objective))
    problem.solve(solver=cp.CLARABEL, tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12, max_iter=500)
    assert problem.status == cp.OPTIMAL, problem.status
    return np.asarray(w.value), float(problem.value)


def hinge_objective(w: np.ndarray, Z: np.ndarray, y: np.ndarray, C: float) -> float:
    return 0.5 * float(w @ w) + C / len(y) * sum(
        max(0.0, 1.0 - yi * float(zi @ w)) for zi, yi in zip(Z, y, strict=True)
    )


def dual_objective(alpha: np.ndarray, Z: np.ndarray, y: np.ndarray) -> float:
    """sum_i a_i - (1/2)||sum_i a_i y_i z_i||^2: a lower bound on the primal for any 0 <= a <= C/n."""
    v = sum(a * yi * zi for a, zi, yi in zip(alpha, Z, y, strict=True))
    return float(alpha.sum()) - 0.5 * float(v @ v)


def certified_l1(C: float, D: int, n: int) -> float:
    """Li et al.'s Delta plus the solver term: each computed w is within sqrt(2 GAP_BOUND) of w* in L2."""
    return 2**2.5 * C * math.sqrt(D) / n + 2 * math.sqrt(2 * D) * math.sqrt(2 * linear_svm.GAP_BOUND)


def grid_of(delta: float, epsilon: float) -> float:
    """g = 2^(floor(log2(Delta/epsilon)) - 20)."""
    return 2.0 ** (math.floor(math.log2(delta / epsilon)) - 20)


def huber_reference(z: float, h: float) -> tuple[float, float]:
    """CMS's Huber loss and its derivative, case by case."""
    if z > 1 + h:
        return 0.0, 0.0
    if z < 1 - h:
        return 1.0 - z, -1.0
    return (1 + h - z) ** 2 / (4 * h), -(1 + h - z) / (2 * h)


def perturbed_gradient(w: np.ndarray, Z: np.ndarray, y: np.ndarray, C: float, b: np.ndarray, Delta: float, h: float):
    """Gradient of (1/n) sum huber(y_i w'z_i) + ((1/C + Delta)/2)||w||^2 + b'w/n, by a loop."""
    n = len(y)
    g = (1.0 / C + Delta) * w + b / n
    for zi, yi in zip(Z, y, strict=True):
        g = g + huber_reference(yi * float(zi @ w), h)[1] * yi * zi / n
    return g


# --- random Fourier features ----------------------------------------------------------------------


def test_fourier_features_have_unit_norm_and_interleave():
    rng = np.random.default_rng(1)
    X = rng.normal(0, 50, size=(40, 7))  # large projections: cos^2 + sin^2 must still be 1
    rho = rng.normal(0, 3, size=(25, 7))
    Z = fourier.fourier_features(X, rho)
    assert Z.shape == (40, 50)
    np.testing.assert_allclose(np.linalg.norm(Z, axis=1), 1.0, rtol=0, atol=1e-12)
    for i in (0, 17, 39):
        for k in (0, 11, 24):
            angle = sum(float(rho[k, f]) * float(X[i, f]) for f in range(7))
            assert Z[i, 2 * k] == pytest.approx(math.cos(angle) / 5.0, abs=1e-12)
            assert Z[i, 2 * k + 1] == pytest.approx(math.sin(angle) / 5.0, abs=1e-12)


def test_random_frequencies_approximate_the_gaussian_kernel():
    rng = np.random.default_rng(2)
    d, D, gamma = 5, 5000, 0.7
    X = rng.random((12, d))
    diffs = X[:, None, :] - X[None, :, :]
    exact = np.exp(-gamma * (diffs**2).sum(axis=2))
    Z = fourier.fourier_features(X, fourier.random_frequencies(d, D, gamma, rng))
    # Each entry of Z Z' is a mean of D cosines in [-1, 1]; Hoeffding: P(|error| > t) <= 2 exp(-D t^2 / 2),
    # about 1e-5 for t = 0.07, so over 66 pairs a failure has probability below 1e-3.
    error = np.abs(Z @ Z.T - exact).max()
    assert error < 0.07, f"max kernel error {error:.3f} with D = {D}"
    # Power: frequencies of variance gamma (not 2 gamma) approximate a different kernel and miss.
    wrong = fourier.fourier_features(X, rng.normal(0, math.sqrt(gamma), size=(D, d)))
    assert np.abs(wrong @ wrong.T - exact).max() > 0.1


def test_random_frequencies_have_variance_two_gamma():
    rho = fourier.random_frequencies(4, 20_000, 0.3, np.random.default_rng(3))
    assert rho.shape == (20_000, 4)
    # Sample variance of 80,000 normals: relative standard error sqrt(2/80,000) = 0.5%.
    assert rho.var() == pytest.approx(0.6, rel=0.03)


def test_fourier_features_reject_mismatched_shapes():
    with pytest.raises(DataError, match=r"\(3, 4\).*\(5, 6\)"):
        fourier.fourier_features(np.zeros((3, 4)), np.zeros((5, 6)))
    with pytest.raises(DataError, match="non-finite"):
        fourier.fourier_features(np.array([[np.nan, 1.0]]), np.zeros((5, 2)))


# --- learning the frequencies ---------------------------------------------------------------------


def pair_error(X: np.ndarray, rho: np.ndarray, gamma: float) -> float:
    """Mean squared error of zhat(x)'zhat(x') against the kernel over all pairs of X, by broadcasting."""
    i, j = np.tril_indices(X.shape[0], k=-1)
    delta = X[i] - X[j]
    approx = np.cos(delta @ rho.T).mean(axis=1)
    return float(((approx - np.exp(-gamma * (delta**2).sum(axis=1))) ** 2).mean())


def test_frequency_objective_value_and_gradient():
    rng = np.random.default_rng(4)
    rho = rng.normal(size=(6, 3))
    delta = rng.normal(size=(15, 3))
    target = rng.random(15)
    value, grad = fourier.frequency_objective(rho, delta, target)
    by_loop = sum((sum(math.cos(float(rho[k] @ delta[p])) for k in range(6)) / 6 - target[p]) ** 2 for p in range(15))
    assert value == pytest.approx(by_loop / 15, rel=1e-12)
    step = 1e-6
    numeric = np.zeros_like(rho)
    for index in np.ndindex(rho.shape):
        up, down = rho.copy(), rho.copy()
        up[index] += step
        down[index] -= step
        rise = fourier.frequency_objective(up, delta, target)[0] - fourier.frequency_objective(down, delta, target)[0]
        numeric[index] = rise / (2 * step)
    np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-10)


def test_learned_frequencies_beat_random_ones_on_held_out_pairs():
    rng = np.random.default_rng(5)
    d, D = 4, 30
    X = rng.random((160, d))
    train, held_out = X[:80], X[80:]
    gamma = 1.5
    fit = fourier.learn_frequencies(train, gamma, D, np.random.default_rng(6), max_iterations=200)
    assert fit.rho.shape == (D, d)
    assert fit.n_pairs == min(80 * 79 // 2, fourier.MAX_FREQUENCY_PAIRS)
    assert fit.objective_end < 0.2 * fit.objective_start, fit
    # Held-out records never entered the fit; the baseline is the best of five N(0, 2 gamma I) draws.
    learned = pair_error(held_out, fit.rho, gamma)
    randoms = [pair_error(held_out, rng.normal(0, math.sqrt(2 * gamma), size=(D, d)), gamma) for _ in range(5)]
    assert learned < 0.5 * min(randoms), f"held-out error {learned:.3g} vs random {min(randoms):.3g}"


def test_pair_sampling_is_distinct_and_covers_the_triangle():
    m = 60
    total = m * (m - 1) // 2
    i, j = fourier._sample_pairs(m, total - 1, np.random.default_rng(7))  # forces the sampling path
    assert i.size == total - 1
    assert ((0 <= j) & (j < i) & (i < m)).all()
    pairs = set(zip(i.tolist(), j.tolist(), strict=True))
    assert len(pairs) == total - 1
    assert pairs <= set(zip(*(a.tolist() for a in np.tril_indices(m, k=-1)), strict=True))


def test_public_kernel_width_is_the_median_heuristic():
    rng = np.random.default_rng(8)
    X = rng.random((21, 3))
    squared = [float(((X[a] - X[b]) ** 2).sum()) for a in range(21) for b in range(a)]
    assert fourier.public_kernel_width(X) == pytest.approx(1.0 / float(np.median(squared)), rel=1e-12)
    with pytest.raises(DataError, match="median"):
        fourier.public_kernel_width(np.ones((5, 2)))


def test_public_scaling_maps_public_range_to_unit_interval():
    rng = np.random.default_rng(9)
    public = rng.normal(3, 2, size=(30, 4))
    public[:, 2] = 7.0  # constant on public data
    low, high = fourier.public_scaling(public)
    scaled = fourier.apply_scaling(public, low, high)
    np.testing.assert_allclose(scaled[:, [0, 1, 3]].min(axis=0), 0.0, atol=1e-15)
    np.testing.assert_allclose(scaled[:, [0, 1, 3]].max(axis=0), 1.0, atol=1e-15)
    np.testing.assert_array_equal(scaled[:, 2], 0.0)
    private = np.array([[public[:, 0].max() + 10, 0, 8.0, 0]])
    out = fourier.apply_scaling(private, low, high)
    assert out[0, 0] > 1.0 and out[0, 2] == 1.0  # outside the public range: kept, not clipped
    with pytest.raises(DataError, match=r"\(3,\)"):
        fourier.apply_scaling(public, low[:3], high)


# --- exact SVM solvers ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("case", "C"),
    [("separable", 1.0), ("separable", 1000.0), ("noisy", 0.5), ("noisy", 10.0), ("noisy", 300.0), ("rff", 50.0)],
)
def test_linear_svm_matches_clarabel_and_liblinear(case: str, C: float):
    rng = np.random.default_rng([len(case), int(C * 10)])
    if case == "rff":
        Z, y = rff_problem(150, 3, 10, seed=10)
    else:
        Z = unit_rows(120, 8, rng)
        margin = Z[:, 0] + (0.0 if case == "separable" else 0.4 * rng.standard_normal(120))
        keep = np.abs(margin) > 0.2 if case == "separable" else np.ones(120, dtype=bool)
        Z, y = Z[keep], np.where(margin[keep] > 0, 1.0, -1.0)
    model = linear_svm.train_linear_svm(Z, y, C)
    w_ref, value_ref = cvxpy_hinge_svm(Z, y, C)
    np.testing.assert_allclose(model.w, w_ref, atol=1e-6)
    assert model.objective == pytest.approx(value_ref, rel=1e-9, abs=1e-12)
    assert hinge_objective(model.w, Z, y, C) == pytest.approx(value_ref, rel=1e-9, abs=1e-12)
    # What the stopping rule certifies (the old rule, projected gradient <= 1e-10 alone, left 6.6e-10 at C = 1000).
    assert model.duality_gap <= linear_svm.GAP_BOUND
    assert hinge_objective(model.w, Z, y, C) - dual_objective(model.alpha, Z, y) <= linear_svm.GAP_BOUND + 1e-15
    np.testing.assert_allclose(model.alpha.clip(0, C / len(y)), model.alpha)
    np.testing.assert_allclose((model.alpha * y) @ Z, model.w, atol=1e-12)

    liblinear = LinearSVC(loss="hinge", fit_intercept=False, C=C / len(y), tol=1e-14, max_iter=10**6, dual=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # checked through n_iter_ below
        liblinear.fit(Z, y)
    if liblinear.n_iter_ < 10**6:  # converged
        np.testing.assert_allclose(model.w, liblinear.coef_.ravel(), atol=1e-6)


@pytest.mark.parametrize("C", [0.3, 1.0])
def test_unit_norm_features_and_c_at_most_one_put_every_dual_variable_at_its_bound(C: float) -> None:
    # Margins y w'z <= ||w|| <= C <= 1 for ||z|| = 1: every record violates the margin, so the SVM is exactly
    # w = (C/n) sum_i y_i z_i (why Li et al.'s C = 1 gives the class-mean difference; ppsvm reproduce dp relies on it).
    rng = np.random.default_rng(4)
    Z = fourier.fourier_features(rng.random((300, 5)), rng.normal(size=(40, 5)))
    y = np.where(rng.random(300) < 0.3, 1.0, -1.0)
    model = linear_svm.train_linear_svm(Z, y, C)
    np.testing.assert_allclose(model.alpha, C / len(y), rtol=1e-9)
    np.testing.assert_allclose(model.w, C / len(y) * (y @ Z), atol=1e-12)


def test_linear_svm_handles_zero_rows_and_single_records():
    # A zero row has gradient -1 forever: its dual variable sits at C/n.
    model = linear_svm.train_linear_svm(np.array([[0.0, 0.0], [1.0, 0.0]]), np.array([1.0, -1.0]), 1.0)
    assert model.alpha[0] == pytest.approx(0.5)
    # One record, C <= 1: w = C y z exactly (minimise t^2/2 + C max(0, 1 - t) along y z).
    z = np.array([0.6, 0.8])
    np.testing.assert_allclose(linear_svm.train_linear_svm(z[None], np.array([-1.0]), 0.7).w, -0.7 * z, atol=1e-12)


def test_linear_svm_certifies_what_coordinate_descent_leaves():
    # Where the old rule refused (C = 1e4: the float64 gap at rounding level above GAP_BOUND; 3 sweeps: out of
    # sweeps), the exact finish certifies: a failure would depend on the data (docs/design.md rule 6).
    # tests/unit/test_linear_svm_exact.py has the issue-27 cases, the scans and the controls.
    rng = np.random.default_rng(26)
    for _ in range(2):
        Z = unit_rows(30, 4, rng)
        y = np.where(Z[:, 0] + 0.4 * rng.standard_normal(30) > 0, 1.0, -1.0)
        assert linear_svm.train_linear_svm(Z, y, 1e4).duality_gap <= linear_svm.GAP_BOUND
        full, short = linear_svm.train_linear_svm(Z, y, 100.0), linear_svm.train_linear_svm(Z, y, 100.0, max_sweeps=3)
        assert short.sweeps <= 3 and short.duality_gap <= linear_svm.GAP_BOUND
        assert np.linalg.norm(full.w - short.w) <= 2 * linear_svm.SOLVER_L2_ERROR


def test_kernel_svm_matches_clarabel_with_folded_intercept():
    rng = np.random.default_rng(11)
    X = rng.random((80, 2))
    y = np.where(((X - 0.5) ** 2).sum(axis=1) + 0.02 * rng.standard_normal(80) < 0.1, 1.0, -1.0)
    gamma, C = 10.0, 200.0
    K = np.exp(-gamma * ((X[:, None] - X[None]) ** 2).sum(axis=2))
    model = linear_svm.train_kernel_svm(K, y, C)
    # Reference: the dual with the intercept as a constant feature, min (1/2) a'Qa - sum a over the box.
    L = np.linalg.cholesky(K + 1.0 + 1e-12 * np.eye(80))
    a = cp.Variable(80)
    dual = 0.5 * cp.sum_squares(L.T @ cp.multiply(y, a)) - cp.sum(a)
    problem = cp.Problem(cp.Minimize(dual), [a >= 0, a <= C / 80])
    problem.solve(solver=cp.CLARABEL, tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12)
    assert problem.status == cp.OPTIMAL
    assert model.objective == pytest.approx(problem.value, rel=1e-7)
    X_new = rng.random((30, 2))
    K_new = np.exp(-gamma * ((X_new[:, None] - X[None]) ** 2).sum(axis=2))
    reference = (K_new + 1.0) @ (np.asarray(a.value) * y)
    np.testing.assert_allclose(linear_svm.decision(K_new, model), reference, atol=1e-5)
    assert (np.sign(linear_svm.decision(K, model)) == y).mean() > 0.9
    with pytest.raises(DataError, match=r"\(30, 79\)"):
        linear_svm.decision(K_new[:, :79], model)


def test_linear_svm_at_full_size_is_exact():
    Z, y = rff_problem(9000, 10, 100, seed=12, noise=0.5)
    model = linear_svm.train_linear_svm(Z, y, 100.0)
    assert math.sqrt(2 * model.duality_gap) < 1e-5
    G = y * (Z @ model.w) - 1.0
    upper = 100.0 / 9000
    free = (model.alpha > 0) & (model.alpha < upper)
    assert np.abs(G[free]).max(initial=0.0) < 1e-9
    assert G[model.alpha == 0].min(initial=0.0) > -1e-9 and G[model.alpha == upper].max(initial=0.0) < 1e-9


# --- sensitivity ----------------------------------------------------------------------------------


def test_random_neighbours_stay_within_the_sensitivity_bounds():
    rng = np.random.default_rng(13)
    worst_l2, worst_l1_paper, worst_l1_tight = 0.0, 0.0, 0.0
    for trial in range(200):
        n, D = int(rng.integers(5, 40)), int(rng.integers(1, 8))
        C = float(rng.choice([0.1, 1.0, 5.0, 50.0]))
        if trial % 2:
            Z, y = rff_problem(n, 3, D, seed=trial)
        else:
            Z = unit_rows(n, 2 * D, rng)
            y = np.where(Z[:, 0] + 0.5 * rng.standard_normal(n) > 0, 1.0, -1.0)
        Z2, y2 = Z.copy(), y.copy()
        k = int(rng.integers(n))
        Z2[k], y2[k] = unit_rows(1, 2 * D, rng)[0], -y[k] if rng.random() < 0.5 else y[k]
        a, b = linear_svm.train_linear_svm(Z, y, C), linear_svm.train_linear_svm(Z2, y2, C)
        slack = math.sqrt(2 * a.duality_gap) + math.sqrt(2 * b.duality_gap) + 1e-12
        diff = a.w - b.w
        l2_bound = 2 * C / n
        paper = 2**2.5 * C * math.sqrt(D) / n
        assert np.linalg.norm(diff) <= l2_bound + slack
        # What the mechanisms use: the fixed certified terms, not the achieved gaps.
        assert np.linalg.norm(diff) <= l2_bound + 2 * math.sqrt(2 * linear_svm.GAP_BOUND)
        assert np.abs(diff).sum() <= certified_l1(C, D, n)
        assert np.abs(diff).sum() <= math.sqrt(2 * D) * (l2_bound + slack)  # Cauchy-Schwarz: 2^1.5 C sqrt(D)/n
        assert np.abs(diff).sum() <= paper
        worst_l2 = max(worst_l2, np.linalg.norm(diff) / l2_bound)
        worst_l1_paper = max(worst_l1_paper, np.abs(diff).sum() / paper)
        worst_l1_tight = max(worst_l1_tight, np.abs(diff).sum() / (math.sqrt(2 * D) * l2_bound))
    # Report, not a bound: random neighbours are far from the worst case.
    print(
        f"random neighbours: max L2/(2C/n) = {worst_l2:.3f}, L1/paper Delta = {worst_l1_paper:.3f}, "
        f"L1/(2^1.5 C sqrt(D)/n) = {worst_l1_tight:.3f}"
    )
    assert worst_l2 <= 1.0 + 1e-9


def test_adversarial_neighbours_come_close_to_the_l2_bound():
    """Flip the label of a bounded support vector (same as moving it to -z): the bound is nearly reached."""
    rng = np.random.default_rng(14)
    ratios, l1_paper = [], []
    for trial in range(6):
        n, D, C = 30, 5, float([0.5, 2.0, 10.0][trial % 3])
        Z = unit_rows(n, 2 * D, rng)
        y = np.where(Z[:, 0] + 0.8 * rng.standard_normal(n) > 0, 1.0, -1.0)
        base = linear_svm.train_linear_svm(Z, y, C)
        bounded = np.flatnonzero(base.alpha >= C / n * (1 - 1e-12))
        assert bounded.size, "no bounded support vector to attack"
        best = 0.0
        for k in bounded:
            y2 = y.copy()
            y2[k] = -y[k]
            diff = base.w - linear_svm.train_linear_svm(Z, y2, C).w
            if np.linalg.norm(diff) > best:
                best = float(np.linalg.norm(diff))
                best_l1 = float(np.abs(diff).sum())
        ratios.append(best / (2 * C / n))
        l1_paper.append(best_l1 / (2**2.5 * C * math.sqrt(D) / n))
    assert min(ratios) >= 0.1, f"observed L2 change / (2C/n) = {np.round(ratios, 3)}"
    assert max(ratios) <= 1.0 + 1e-9, f"observed L2 change / (2C/n) = {np.round(ratios, 3)}"
    print(f"adversarial: L2/(2C/n) = {np.round(ratios, 3)}, L1/paper Delta = {np.round(l1_paper, 3)}")
    # One record, C <= 1: flipping its label moves w from C z to -C z, exactly 2C/n.
    z = unit_rows(1, 4, rng)
    flip = (
        linear_svm.train_linear_svm(z, np.array([1.0]), 0.9).w - linear_svm.train_linear_svm(z, np.array([-1.0]), 0.9).w
    )
    assert np.linalg.norm(flip) == pytest.approx(2 * 0.9, rel=1e-9)


# --- noise ----------------------------------------------------------------------------------------


def test_sensitivities_add_the_certified_solver_error():
    assert linear_svm.SOLVER_L2_ERROR == math.sqrt(2 * linear_svm.GAP_BOUND) and linear_svm.GAP_BOUND <= 1e-10
    for C, D, n in [(1.0, 100, 9000), (2.0, 4000, 250), (100.0, 100, 569)]:
        assert dp.exact_l2_sensitivity(C, n) == pytest.approx(2 * C / n, rel=1e-15)
        assert dp.l2_sensitivity(C, n) == pytest.approx(2 * C / n + 2 * math.sqrt(2 * linear_svm.GAP_BOUND), rel=1e-15)
        assert dp.laplace_sensitivity(C, D, n) == pytest.approx(certified_l1(C, D, n), rel=1e-15)
    # The Adult reproduction's entity (n = 9,000, D = 100, C = 1): the solver term costs under 1% of the noise.
    extra_l1 = dp.laplace_sensitivity(1.0, 100, 9000) / (2**2.5 * math.sqrt(100) / 9000) - 1
    extra_l2 = dp.l2_sensitivity(1.0, 9000) / (2 / 9000) - 1
    assert 0 < extra_l1 < 0.01 and 0 < extra_l2 < 0.02, (extra_l1, extra_l2)
    print(f"solver term at n = 9000, D = 100, C = 1: L1 +{extra_l1:.2%}, L2 +{extra_l2:.2%}")


def test_laplace_noise_has_the_stated_scale():
    D, n, C, epsilon = 4000, 250, 2.0, 0.5
    delta = certified_l1(C, D, n)
    g = grid_of(delta, epsilon)
    scale = delta / epsilon + 2 * D * g / epsilon  # (Delta/g + 2D)/epsilon grid units, in weight units
    assert dp.laplace_scale(C, D, n, epsilon) == pytest.approx(scale, rel=1e-14)
    w = np.linspace(-1, 1, 2 * D)
    released = dp.laplace_output_perturbation(w, n=n, C=C, D=D, epsilon=epsilon, rng=np.random.default_rng(15))
    assert all((Fraction(x) / Fraction(g)).denominator == 1 for x in released.tolist())  # on the grid, exactly
    noise = released - w
    # The grid is 2^-20 of the scale: the released noise is Laplace(scale) up to that rounding.
    assert stats.kstest(noise, stats.laplace(scale=scale).cdf).pvalue > 0.01
    assert stats.kstest(noise, stats.laplace(scale=2 * scale).cdf).pvalue < 1e-6  # the test has power
    again = dp.laplace_output_perturbation(w, n=n, C=C, D=D, epsilon=epsilon, rng=np.random.default_rng(15))
    np.testing.assert_array_equal(released, again)  # a seeded generator repeats the release exactly
    with pytest.raises(DataError, match=r"\(7999,\).*\(8000,\)"):
        dp.laplace_output_perturbation(w[:-1], n=n, C=C, D=D, epsilon=epsilon, rng=np.random.default_rng(0))


def test_laplace_release_in_production_uses_the_os_csprng(data):
    Z, y = data
    exact = linear_svm.train_linear_svm(Z, y, 1.0).w
    first = dp.private_weights(Z, y, epsilon=1.0, mechanism="laplace", rng=None)
    second = dp.private_weights(Z, y, epsilon=1.0, mechanism="laplace", rng=None)
    assert first.mechanism == "laplace" and first.private and "discrete Laplace" in first.noise
    assert not np.array_equal(first.weights, second.weights)  # fresh noise, no fixed seed
    g = grid_of(certified_l1(1.0, 3, 20), 1.0)
    assert all((Fraction(x) / Fraction(g)).denominator == 1 for x in first.weights.tolist())
    assert np.abs(first.weights - exact).max() < 40 * dp.laplace_scale(1.0, 3, 20, 1.0)


def test_gamma_norm_noise_has_gamma_norms_and_uniform_directions():
    p, n, C, epsilon = 6, 40, 3.0, 0.8
    scale = (2 * C / n + 2 * math.sqrt(2 * linear_svm.GAP_BOUND)) / epsilon
    rng = np.random.default_rng(16)
    w = np.arange(p, dtype=float)
    noise = np.array([dp.output_perturbation(w, n=n, C=C, epsilon=epsilon, rng=rng) - w for _ in range(3000)])
    norms = np.linalg.norm(noise, axis=1)
    assert stats.kstest(norms, stats.gamma(a=p, scale=scale).cdf).pvalue > 0.01
    assert stats.kstest(norms, stats.gamma(a=p, scale=2 * scale).cdf).pvalue < 1e-6
    # The scale, to the last bit that matters: replay the draws (direction first, then the norm).
    replay = np.random.default_rng(27)
    direction = replay.standard_normal(p)
    expected = w + replay.gamma(shape=p, scale=scale) * direction / np.linalg.norm(direction)
    released = dp.output_perturbation(w, n=n, C=C, epsilon=epsilon, rng=np.random.default_rng(27))
    np.testing.assert_allclose(released - w, expected - w, rtol=1e-12)
    directions = noise / norms[:, None]
    # Uniform on the sphere: mean 0 (coordinate s.d. sqrt(1/(p 3000)) ~ 0.0075), second moment I/p.
    assert np.abs(directions.mean(axis=0)).max() < 0.04
    np.testing.assert_allclose(directions.T @ directions / 3000, np.eye(p) / p, atol=0.03)


def test_released_noise_matches_each_mechanism():
    Z, y = rff_problem(60, 3, 500, seed=17)
    exact = linear_svm.train_linear_svm(Z, y, 1.0).w
    release = dp.private_weights(Z, y, C=1.0, epsilon=2.0, mechanism="laplace", rng=np.random.default_rng(18))
    delta = certified_l1(1.0, 500, 60)
    g = grid_of(delta, 2.0)
    scale = delta / 2.0 + 1000 * g / 2.0
    assert stats.kstest(release.weights - exact, stats.laplace(scale=scale).cdf).pvalue > 0.01
    assert release.mechanism == "laplace" and release.epsilon == 2.0 and release.n == 60 and release.private
    assert f"{scale:.6g}" in release.noise and f"grid 2^{round(math.log2(g))}" in release.noise
    assert "floating-point safe" in release.guarantee

    Z, y = rff_problem(12, 2, 2, seed=19)
    exact = linear_svm.train_linear_svm(Z, y, 1.0).w
    rng = np.random.default_rng(20)
    releases = [dp.private_weights(Z, y, C=1.0, epsilon=1.0, mechanism="output-gamma", rng=rng) for _ in range(400)]
    norms = [np.linalg.norm(release.weights - exact) for release in releases]
    scale = 2 * 1.0 / 12 + 2 * math.sqrt(2 * linear_svm.GAP_BOUND)
    assert stats.kstest(norms, stats.gamma(a=4, scale=scale).cdf).pvalue > 0.01
    assert "not hardened" in releases[0].guarantee and "continuous" in releases[0].noise

    plain = dp.private_weights(Z, y, C=1.0, epsilon=None, mechanism="none")
    np.testing.assert_array_equal(plain.weights, exact)
    assert not plain.private and "NOT PRIVATE" in plain.guarantee and plain.epsilon is None


# --- objective perturbation -----------------------------------------------------------------------


def test_huber_loss_matches_its_definition():
    h = 0.3
    z = np.linspace(-1, 3, 401)
    loss, first, second = dp.huber_loss(z, h)
    for zi, li, fi in zip(z, loss, first, strict=True):
        ref_l, ref_f = huber_reference(float(zi), h)
        assert li == pytest.approx(ref_l, abs=1e-14) and fi == pytest.approx(ref_f, abs=1e-14)
    assert second.max() == pytest.approx(1 / (2 * h)) and second.min() == 0.0
    assert np.abs(first).max() <= 1.0  # 1-Lipschitz


@pytest.mark.parametrize(
    ("n", "C", "epsilon", "h"), [(1000, 1.0, 0.5, 0.5), (50, 10.0, 1.0, 0.5), (20, 1.0, 0.1, 0.25)]
)
def test_objective_perturbation_parameters_follow_cms_algorithm_2(n: int, C: float, epsilon: float, h: float):
    Lambda, c = 1 / C, 1 / (2 * h)
    eps_prime = epsilon - math.log(1 + 2 * c / (n * Lambda) + c**2 / (n**2 * Lambda**2))
    params = dp.objective_perturbation_parameters(n=n, C=C, epsilon=epsilon, huber_h=h)
    assert params.Lambda == pytest.approx(Lambda) and params.c == pytest.approx(c)
    if eps_prime > 0:
        assert params.extra_ridge == 0.0
        assert params.epsilon_prime == pytest.approx(eps_prime, rel=1e-12)
    else:
        Delta = c / (n * (math.exp(epsilon / 4) - 1)) - Lambda
        assert Delta >= 0
        assert params.extra_ridge == pytest.approx(Delta, rel=1e-12)
        assert params.epsilon_prime == pytest.approx(epsilon / 2, rel=1e-15)
        # What makes the branch private: the curvature term now costs exactly epsilon / 2.
        R = Lambda + Delta
        assert math.log(1 + 2 * c / (n * R) + c**2 / (n * R) ** 2) == pytest.approx(epsilon / 2, rel=1e-9)


def test_objective_perturbation_boundary_and_refusal():
    n, C, h = 40, 2.0, 0.5
    a = (1 / (2 * h)) / (n / C)  # c / (n Lambda)
    boundary = 2 * math.log1p(a)
    at = dp.objective_perturbation_parameters(n=n, C=C, epsilon=boundary, huber_h=h)
    assert at.epsilon_prime == pytest.approx(boundary / 2) and at.extra_ridge > 0  # epsilon' <= 0: Delta branch
    above = dp.objective_perturbation_parameters(n=n, C=C, epsilon=boundary * (1 + 1e-6), huber_h=h)
    assert above.extra_ridge == 0.0 and 0 < above.epsilon_prime < 1e-5
    with pytest.raises(PrivacyError, match="epsilon'"):
        dp.objective_perturbation_parameters(n=n, C=C, epsilon=boundary, huber_h=h, allow_extra_ridge=False)
    for bad in (0.0, -1.0, math.nan, math.inf):
        with pytest.raises(PrivacyError, match="epsilon"):
            dp.objective_perturbation_parameters(n=n, C=C, epsilon=bad)


def test_perturbed_huber_minimiser_is_exact():
    Z, y = rff_problem(80, 3, 6, seed=21)
    rng = np.random.default_rng(22)
    C, h, Delta = 5.0, 0.5, 0.03
    b = rng.normal(size=12) * 3
    w = dp.solve_perturbed_huber(Z, y, C=C, b=b, extra_ridge=Delta, huber_h=h)
    assert np.abs(perturbed_gradient(w, Z, y, C, b, Delta, h)).max() < 1e-10

    def value(v: np.ndarray) -> float:
        loss = sum(huber_reference(yi * float(zi @ v), h)[0] for zi, yi in zip(Z, y, strict=True)) / len(y)
        return loss + 0.5 * (1 / C + Delta) * float(v @ v) + float(b @ v) / len(y)

    def gradient(v: np.ndarray) -> np.ndarray:
        return perturbed_gradient(v, Z, y, C, b, Delta, h)

    reference = minimize(value, np.zeros(12), jac=gradient, method="BFGS", options={"gtol": 1e-10})
    np.testing.assert_allclose(w, reference.x, atol=1e-6)


def test_objective_perturbation_noise_recovered_from_stationarity():
    """b = -n (gradient of the unperturbed part) at the release; its norm must be Gamma(p, 2/epsilon')."""
    Z, y = rff_problem(40, 2, 2, seed=23)
    C, epsilon, h = 1.0, 1.0, 0.5
    params = dp.objective_perturbation_parameters(n=40, C=C, epsilon=epsilon, huber_h=h)
    rng = np.random.default_rng(24)
    norms = []
    for _ in range(300):
        w, used = dp.objective_perturbation(Z, y, C=C, epsilon=epsilon, rng=rng, huber_h=h)
        assert used == params
        b = -40 * perturbed_gradient(w, Z, y, C, np.zeros(4), params.extra_ridge, h)
        norms.append(np.linalg.norm(b))
    assert stats.kstest(norms, stats.gamma(a=4, scale=2 / params.epsilon_prime).cdf).pvalue > 0.01
    assert stats.kstest(norms, stats.gamma(a=4, scale=4 / params.epsilon_prime).cdf).pvalue < 1e-6
    release = dp.private_weights(Z, y, C=C, epsilon=epsilon, mechanism="objective", rng=rng)
    assert "epsilon'" in release.noise and release.mechanism == "objective"


# --- refusals -------------------------------------------------------------------------------------


@pytest.fixture
def data() -> tuple[np.ndarray, np.ndarray]:
    return rff_problem(20, 2, 3, seed=25)


@pytest.mark.parametrize("epsilon", [0.0, -0.5, math.nan, math.inf])
@pytest.mark.parametrize("mechanism", dp.MECHANISMS)
def test_refuses_bad_epsilon(data, epsilon: float, mechanism: str):
    with pytest.raises(PrivacyError, match="epsilon must be finite and > 0"):
        dp.private_weights(*data, epsilon=epsilon, mechanism=mechanism, rng=np.random.default_rng(0))


def test_refuses_bad_types_and_settings(data):
    Z, y = data
    rng = np.random.default_rng(0)
    with pytest.raises(TypeError, match="epsilon"):
        dp.private_weights(Z, y, epsilon="1", mechanism="laplace", rng=rng)
    with pytest.raises(TypeError, match="epsilon"):
        dp.private_weights(Z, y, epsilon=True, mechanism="laplace", rng=rng)
    with pytest.raises(TypeError, match="Generator"):
        dp.private_weights(Z, y, epsilon=1.0, mechanism="laplace", rng=np.random.RandomState(0))
    with pytest.raises(ValueError, match="C must be"):
        dp.private_weights(Z, y, C=0.0, epsilon=1.0, mechanism="laplace", rng=rng)
    with pytest.raises(ValueError, match="unknown mechanism"):
        dp.private_weights(Z, y, epsilon=1.0, mechanism="gaussian", rng=rng)
    with pytest.raises(ValueError, match="epsilon must be None"):
        dp.private_weights(Z, y, epsilon=1.0, mechanism="none")
    with pytest.raises(PrivacyError, match="needs an epsilon"):
        dp.private_weights(Z, y, epsilon=None, mechanism="output-gamma", rng=rng)
    with pytest.raises(DataError, match="even"):
        dp.private_weights(Z[:, :5], y, epsilon=1.0, mechanism="laplace", rng=rng)


def test_refuses_bad_data(data):
    Z, y = data
    rng = np.random.default_rng(0)
    bad = Z.copy()
    bad[3, 0] = np.nan
    with pytest.raises(DataError, match="non-finite.*row 3"):
        dp.private_weights(bad, y, epsilon=1.0, mechanism="laplace", rng=rng)
    long_row = Z.copy()
    long_row[4] *= 1.001
    with pytest.raises(DataError, match="norm > 1.*row 4"):
        dp.private_weights(long_row, y, epsilon=1.0, mechanism="objective", rng=rng)
    # Rounding-level excess is a zhat; anything beyond NORM_SLACK is not.
    dp.private_weights(Z * (1 + 1e-12), y, epsilon=1.0, mechanism="laplace", rng=rng)
    first_negative = int(np.flatnonzero(y < 0)[0])
    with pytest.raises(DataError, match=rf"-1 or \+1.*y\[{first_negative}\] = 0"):
        dp.private_weights(Z, np.where(y > 0, 1, 0), epsilon=1.0, mechanism="laplace", rng=rng)
    with pytest.raises(DataError, match=r"y has shape \(19,\).*20 rows"):
        dp.private_weights(Z, y[:19], epsilon=1.0, mechanism="laplace", rng=rng)
    with pytest.raises(DataError, match=r"2-D.*\(6,\)"):
        linear_svm.train_linear_svm(Z[0], y)
    with pytest.raises(DataError, match="square"):
        linear_svm.train_kernel_svm(np.ones((3, 4)), np.ones(3))


# --- generator ------------------------------------------------------------------------------------


def test_secure_generator_streams_differ():
    a, b = dp.secure_generator(), dp.secure_generator()
    assert isinstance(a, np.random.Generator)
    assert not np.array_equal(a.integers(0, 2**63, size=8), b.integers(0, 2**63, size=8))


def test_default_release_uses_fresh_noise(data):
    Z, y = data
    first = dp.private_weights(Z, y, epsilon=1.0, mechanism="output-gamma")
    second = dp.private_weights(Z, y, epsilon=1.0, mechanism="output-gamma")
    assert not np.array_equal(first.weights, second.weights)
    assert set(dp.GUARANTEES) == {*dp.MECHANISMS, dp.NON_PRIVATE}


def test_perturbed_huber_minimiser_at_large_C() -> None:
    """At C = 1000 a line search that also accepted steps on a smaller gradient cycled here (gradient 1e-3 after
    200 steps); the exact line search converges, to the minimiser a quasi-Newton method finds."""
    r = np.random.default_rng(157)
    n, d, D = int(r.integers(200, 1500)), int(r.integers(2, 8)), int(r.integers(5, 40))
    X = r.random((n, d))
    y = np.where(X[:, 0] + 0.3 * r.normal(size=n) > 0.5, 1.0, -1.0)
    Z = fourier.fourier_features(X, fourier.random_frequencies(d, D, float(r.choice([1.0, 10.0, 50.0])), r))
    C = float(r.choice([100.0, 1000.0]))
    b = r.normal(size=2 * D) * 5
    assert C == 1000.0
    w = dp.solve_perturbed_huber(Z, y, C=C, b=b, extra_ridge=0.0)
    assert np.abs(perturbed_gradient(w, Z, y, C, b, 0.0, 0.5)).max() <= dp.NEWTON_TOL

    def objective(v: np.ndarray) -> tuple[float, np.ndarray]:
        return dp.perturbed_huber_objective(v, Z, y, C=C, b=b, extra_ridge=0.0, huber_h=0.5)

    reference = minimize(objective, np.zeros(2 * D), jac=True, method="L-BFGS-B", options={"gtol": 1e-11, "ftol": 0})
    assert objective(w)[0] <= reference.fun + 1e-12
    np.testing.assert_allclose(w, reference.x, atol=1e-4 * np.linalg.norm(w))
