"""Privacy rule 3 by attack: a peer who knows B_j pins a record down from its kernel row iff mbar is large.

Records are uniform on [0, 1]^n_j (the scaled feature box); B_j comes from
derive_B as in the entities. Every random draw has a fixed seed, and each
threshold sits far from the value measured at that seed in both directions
(recovery to ~1e-15 against 1e-6; spreads of tenths against 0.05).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.linalg import null_space

from ppsvm.core.kernels import gaussian_kernel, kernel, linear_kernel, scale_to_unit
from ppsvm.core.randomness import derive_B
from ppsvm.experiments.coordinator_attacks import reconstruct_by_rescaling
from ppsvm.experiments.kernel_row_attacks import farthest_pair, reconstruct_gaussian, reconstruct_linear

SECRET = b"attack-demo-secret-0123456789abcdef"
ROWS = 20
SPREAD = 0.05  # "substantially different records", in [0, 1] feature units


def records(n: int, rows: int = ROWS, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).random((rows, n))


def gaussian_attack(n: int, mbar: int, rows: int = ROWS) -> tuple[np.ndarray, np.ndarray, object]:
    A, B, mu = records(n, rows), derive_B(SECRET, mbar, n), 1.0 / n
    return A, B, reconstruct_gaussian(gaussian_kernel(A, B, mu), B, mu, starts=8, rng=np.random.default_rng(1))


def max_error(X: np.ndarray, A: np.ndarray) -> np.ndarray:
    return np.abs(X - A).max(axis=1)


# --- Gaussian kernel ---------------------------------------------------------------------------


@pytest.mark.parametrize("n", [5, 8])
@pytest.mark.parametrize("extra", [1, 2])
def test_gaussian_rows_pinned_down_when_mbar_exceeds_n(n: int, extra: int) -> None:
    """mbar >= n_j + 1 known points: distances determine the record (rule 3 broken)."""
    A, _, result = gaussian_attack(n, n + extra)
    assert max_error(result.X, A).max() < 1e-6
    assert result.residual.max() < 1e-10
    assert result.spread.max() < 1e-6  # every exactly fitting start found the same record
    assert result.solution_dim == 0


@pytest.mark.parametrize("n, mbar", [(5, 4), (8, 7), (5, 2), (8, 2), (8, 1)])
def test_gaussian_rows_not_pinned_down_when_mbar_below_n(n: int, mbar: int) -> None:
    """mbar < n_j (rule 3 kept): far-apart records in the box fit the kernel row exactly."""
    A, B, result = gaussian_attack(n, mbar)
    mu = 1.0 / n
    # The equally good solutions really are exact: their kernel rows equal the published ones.
    for end in (0, 1):
        assert np.abs(gaussian_kernel(result.pair[:, end], B, mu) - gaussian_kernel(A, B, mu)).max() < 1e-9
        assert result.pair[:, end].min() >= 0.0 and result.pair[:, end].max() <= 1.0
    assert np.median(result.spread) > 4 * SPREAD
    assert np.mean(result.spread > SPREAD) >= 0.8
    # The attacker's best fit is some point of the solution set, almost never the record itself.
    assert np.mean(max_error(result.X, A) < 1e-6) <= 0.1
    assert result.solution_dim == n - mbar


def test_gaussian_mbar_equal_n_leaves_the_record_or_its_mirror_image() -> None:
    """mbar = n_j: two candidates, the record and its reflection in the hyperplane through the n points.

    The row is pinned down exactly when the reflection leaves [0, 1]^n_j; otherwise the peer
    is left with a coin toss between two known points.
    """
    n = 5
    A, B, result = gaussian_attack(n, n)
    normal = null_space(B[1:] - B[0])[:, 0]
    mirror = A - 2.0 * ((A - B[0]) @ normal)[:, None] * normal
    mirror_inside = (mirror >= 0).all(axis=1) & (mirror <= 1).all(axis=1)
    for end in (0, 1):
        closest = np.minimum(max_error(result.pair[:, end], A), max_error(result.pair[:, end], mirror))
        assert closest.max() < 1e-6
    assert (max_error(result.X[~mirror_inside], A[~mirror_inside]) < 1e-6).all()
    assert 0 < mirror_inside.sum() < ROWS  # both cases occur at this seed


# --- Linear kernel -----------------------------------------------------------------------------


@pytest.mark.parametrize("n", [5, 8])
@pytest.mark.parametrize("extra", [0, 2])
def test_linear_rows_pinned_down_when_mbar_at_least_n(n: int, extra: int) -> None:
    A, B = records(n), derive_B(SECRET, n + extra, n)
    result = reconstruct_linear(linear_kernel(A, B), B)
    assert max_error(result.X, A).max() < 1e-9
    assert result.solution_dim == 0
    assert result.spread.max() == 0.0


@pytest.mark.parametrize("n, mbar", [(5, 4), (8, 7), (5, 2), (8, 2), (8, 1)])
def test_linear_rows_not_pinned_down_when_mbar_below_n(n: int, mbar: int) -> None:
    """Two records inside the box, far apart, whose kernel rows agree to rounding."""
    A, B = records(n), derive_B(SECRET, mbar, n)
    K = linear_kernel(A, B)
    result = reconstruct_linear(K, B)
    first, second = result.pair[:, 0], result.pair[:, 1]
    assert np.abs(linear_kernel(first, B) - linear_kernel(second, B)).max() < 1e-12
    assert np.abs(linear_kernel(first, B) - K).max() < 1e-12
    for end in (first, second):
        assert end.min() >= -1e-12 and end.max() <= 1 + 1e-12
    assert (np.linalg.norm(first - second, axis=1) > SPREAD).all()
    assert result.solution_dim == n - mbar
    # The minimum-norm solution is the record's projection onto the row space of B, not the record.
    assert (max_error(result.X, A) > 1e-3).all()
    projection = A @ np.linalg.pinv(B) @ B
    assert np.abs(result.X - projection).max() < 1e-9


def test_farthest_pair() -> None:
    points = np.array([[0.0, 0.0], [0.1, 0.0], [1.0, 1.0], [0.5, 0.5]])
    assert np.array_equal(farthest_pair(points), points[[0, 2]])
    assert np.array_equal(farthest_pair(points[:1]), points[[0, 0]])


def test_shapes_checked() -> None:
    with pytest.raises(ValueError, match="K must be"):
        reconstruct_linear(np.ones((3, 4)), np.ones((5, 2)))
    with pytest.raises(ValueError, match="mu must be > 0"):
        reconstruct_gaussian(np.ones((3, 2)), np.ones((2, 4)), 0.0, rng=np.random.default_rng(0))


# --- A coordinator that chooses the scaling ----------------------------------------------------


@pytest.mark.parametrize("name", ["linear", "gaussian"])
@pytest.mark.parametrize("mbar", [1, 3])
def test_chosen_scaling_reveals_cell_and_B(name: str, mbar: int) -> None:
    """An entity that answered any (low, high) would give away A_ij and B_j: varying them per feature recovers both.

    Entities therefore accept only tagged ranges (EntityCore.block_scaling);
    tests/integration/test_coordinator_powers.py checks the real entity refuses this attack.

    The oracle is exactly what EntityCore.kernel_block computes: kernel(scale_to_unit(X, low, high), B, mu).
    mbar stays far below n_j = 6, so rule 3 does not help.
    """
    n = 6
    rng = np.random.default_rng(7)
    X = rng.normal(50.0, 20.0, size=(ROWS, n))  # raw units, not yet scaled
    B = derive_B(SECRET, mbar, n)
    mu = 1.0 / n
    low, high = X.min(axis=0), X.max(axis=0)
    queries = []

    def entity(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        queries.append((lo, hi))
        return kernel(name, scale_to_unit(X, lo, hi), B, mu)

    found_X, found_B = reconstruct_by_rescaling(entity, low, high, name, mu)
    assert np.abs(found_X - X).max() < 1e-8 * np.abs(X).max()
    assert np.abs(found_B - B).max() < 1e-8
    assert len(queries) == (2 if name == "linear" else 3) * n + 1
    # Every request passes the entity's checks, and would pass a check that the bounds cover its own range.
    assert all((lo <= low).all() and (hi >= high).all() for lo, hi in queries)
