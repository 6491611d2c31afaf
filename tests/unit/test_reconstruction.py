"""Privacy rules 8 and 9 by measurement: what a colluding column-block peer recovers from a single kernel block.

Synthetic data only (no shipped dataset tunes the attack): integer codes 0..4 scaled to [0, 1] and correlated
through a latent factor, as integer-coded survey or credit features are, and uniform continuous records. Every
draw has a fixed seed; each threshold sits well away from the value measured at that seed (recovery 100%
against 90%, the combined block below the no-release guess against the guess + 0.05).
"""

from __future__ import annotations

import numpy as np
import pytest

from ppsvm.core.kernels import gaussian_kernel, linear_kernel
from ppsvm.core.reconstruction import Risk, measure_risk, no_release_guess, reconstruct, risk_of_posterior

TOLERANCE = 0.05
CODES = 5  # integer codes 0..4


def coded_records(m: int = 400, n: int = 12, seed: int = 0) -> np.ndarray:
    """Integer codes 0..4 scaled to [0, 1], correlated through one latent factor; shape (m, n)."""
    rng = np.random.default_rng(seed)
    latent = rng.standard_normal((m, 1))
    loadings = rng.uniform(0.5, 1.2, (1, n)) * rng.choice([-1.0, 1.0], (1, n))
    codes = np.clip(np.round(latent @ loadings + 0.7 * rng.standard_normal((m, n)) + (CODES - 1) / 2), 0, CODES - 1)
    return codes / (CODES - 1)


def block(kernel: str, A: np.ndarray, B: np.ndarray, mu: float) -> np.ndarray:
    return gaussian_kernel(A, B, mu) if kernel == "gaussian" else linear_kernel(A, B)


def share_within(guess: np.ndarray, truth: np.ndarray) -> float:
    return float((np.abs(guess - truth) <= TOLERANCE + 1e-9).mean())


def split(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The peer's own records (its prior) and the victim's, half each."""
    half = len(X) // 2
    return X[:half], X[half:]


# --- the attack on a single block ------------------------------------------------------------------------------


@pytest.mark.parametrize("kernel", ["gaussian", "linear"])
def test_single_block_at_mbar_n_minus_1_gives_coded_records_away(kernel: str) -> None:
    """Rule 8: with B_j, the box and its own records a peer recovers a single block's records."""
    X = coded_records()
    n = X.shape[1]
    prior, victims = split(X)
    B = np.random.default_rng(1).random((n - 1, n))
    mu = 1.0 / n
    guess = reconstruct(block(kernel, victims, B, mu), B, kernel, mu, prior)
    assert guess.shape == victims.shape
    assert guess.min() >= 0.0 and guess.max() <= 1.0
    recovered = share_within(guess, victims)
    baseline = share_within(np.broadcast_to(no_release_guess(prior, TOLERANCE), victims.shape), victims)
    assert recovered >= 0.9
    assert recovered - baseline > 0.3


@pytest.mark.parametrize("kernel", ["gaussian", "linear"])
def test_combined_block_hides_the_victims_block(kernel: str) -> None:
    """The control: the row block's combination (sum of linear blocks, product of Gaussian ones) read as if it
    were the victim's block recovers no more than the guess without a release."""
    X = coded_records(seed=2)
    n = X.shape[1]
    prior, victims = split(X)
    other = coded_records(m=len(victims), seed=3)  # another entity's cell of the same records, its own B_2
    rng = np.random.default_rng(4)
    B, B_other = rng.random((n - 1, n)), rng.random((n - 1, n))
    mu = 1.0 / n
    own, second = block(kernel, victims, B, mu), block(kernel, other, B_other, mu)
    combined = own * second if kernel == "gaussian" else own + second
    guess = reconstruct(combined, B, kernel, mu, prior)
    baseline = share_within(np.broadcast_to(no_release_guess(prior, TOLERANCE), victims.shape), victims)
    assert share_within(guess, victims) <= baseline + 0.05
    # The same peer on the single block, as a check that the attack was not weak to begin with.
    assert share_within(reconstruct(own, B, kernel, mu, prior), victims) >= 0.9


def test_reconstruct_is_deterministic_per_seed_and_checks_shapes() -> None:
    X = coded_records(m=60, n=6)
    prior, victims = split(X)
    B = np.random.default_rng(5).random((5, 6))
    K = gaussian_kernel(victims, B, 0.5)
    first = reconstruct(K, B, "gaussian", 0.5, prior, samples=32, seed=7)
    np.testing.assert_array_equal(first, reconstruct(K, B, "gaussian", 0.5, prior, samples=32, seed=7))
    with pytest.raises(ValueError, match="shape"):
        reconstruct(K[:, :3], B, "gaussian", 0.5, prior)
    with pytest.raises(ValueError, match="kernel"):
        reconstruct(K, B, "polynomial", 0.5, prior)
    with pytest.raises(ValueError, match="mu"):
        reconstruct(K, B, "gaussian", 0.0, prior)


# --- the baseline ------------------------------------------------------------------------------------------------


def test_no_release_guess_picks_the_value_most_rows_are_near() -> None:
    prior = np.array(
        [
            [0.0, 0.10, 0.2],
            [0.5, 0.14, 0.2],
            [0.5, 0.50, 0.8],
            [0.5, 0.90, 0.8],
            [1.0, 0.18, 0.5],
        ]
    )
    guess = no_release_guess(prior, tolerance=0.05)
    assert guess[0] == 0.5  # the mode
    assert guess[1] == 0.14  # 0.10, 0.14 and 0.18 are all within 0.05 of 0.14 only
    assert guess[2] == 0.2  # 0.2 and 0.8 tie: the smaller
    assert no_release_guess(prior, tolerance=0.0)[1] == 0.10  # every value alone: ties go to the smallest


# --- the entity's self-test -----------------------------------------------------------------------------------------


def test_measure_risk_reports_the_single_block_risk_and_is_deterministic() -> None:
    X = coded_records(m=200, n=8, seed=6)
    B = np.random.default_rng(7).random((7, 8))
    risk = measure_risk(X, B, "gaussian", 1.0 / 8, max_victims=60, seed=3)
    assert risk == measure_risk(X, B, "gaussian", 1.0 / 8, max_victims=60, seed=3)
    assert isinstance(risk, Risk)
    assert (risk.mbar, risk.kernel, risk.n_victims) == (7, "gaussian", 60)
    assert risk.recovered >= 0.9 and risk.gain > 0.3
    assert risk.gain == pytest.approx(risk.recovered - risk.baseline)
    assert 0.0 <= risk.records_whole <= risk.recovered
    line = risk.describe()
    assert f"{risk.recovered:.0%}" in line and f"{risk.baseline:.0%}" in line and "\n" not in line


def test_measure_risk_cannot_show_a_tiny_cell_safe() -> None:
    X = coded_records(m=3, n=4)
    risk = measure_risk(X, np.random.default_rng(8).random((3, 4)), "linear", 1.0)
    assert risk.recovered == 1.0 and risk.n_victims == 0
    assert "too few records" in risk.describe()


@pytest.mark.parametrize("kernel", ["gaussian", "linear"])
def test_one_point_tells_little_about_continuous_records(kernel: str) -> None:
    """mbar = 1 on uniform continuous records: one equation in 12 unknowns, next to no gain."""
    X = np.random.default_rng(9).random((300, 12))
    B = np.random.default_rng(10).random((1, 12))
    assert measure_risk(X, B, kernel, 1.0 / 12, max_victims=100).gain < 0.1


def test_posterior_spread_shrinks_with_mbar() -> None:
    X = coded_records(m=300, n=10, seed=11)
    B = np.random.default_rng(12).random((9, 10))
    ratios = [risk_of_posterior(X, B[:mbar]) for mbar in (2, 5, 9)]
    assert ratios[0] > ratios[1] > ratios[2]
    assert 0.0 <= ratios[2] < 0.5 and ratios[0] <= 1.0
    assert risk_of_posterior(X, B[:1], kernel="gaussian") == 1.0  # no linear equation at all
