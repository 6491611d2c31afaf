"""Exact discrete Laplace sampling and the grid release (ppsvm.core.noise).

Expected values are computed here from closed forms (the discrete Laplace pmf and cdf,
exp(-gamma)), never read back from ppsvm.core.noise; each distribution test is paired with the
same test against a wrong distribution, which must fail, so a broken sampler is caught.
"""

from __future__ import annotations

import math
import random
import secrets
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from ppsvm.core import noise

DRAWS = 20_000


class IntegersOnly:
    """A source that refuses anything but an int bound: the samplers must use integer arithmetic only."""

    def __init__(self, seed: int) -> None:
        self.inner = random.Random(seed)
        self.calls = 0

    def randrange(self, stop: int) -> int:
        assert type(stop) is int and stop >= 1, stop
        self.calls += 1
        return self.inner.randrange(stop)


def laplace_cdf(z: np.ndarray, scale: float) -> np.ndarray:
    """P[Z <= z] for P[Z = k] = (1 - q)/(1 + q) q^|k|, q = exp(-1/scale), z integer."""
    q = math.exp(-1.0 / scale)
    z = np.asarray(z, dtype=float)
    return np.where(z < 0, q ** (-z) / (1 + q), 1 - q ** (z + 1) / (1 + q))


def chi_square_pvalue(draws: list[int], scale: float, bins: int = 40) -> float:
    """Chi-square goodness of fit of integer draws to the discrete Laplace pmf of ``scale``.

    The bins are fixed before looking at the draws: integer edges near the j/bins quantiles of a
    continuous Laplace of the same scale (merged where they coincide); their probabilities come
    from the exact discrete cdf, so the bin choice only affects power, not validity.
    """
    edges = np.unique(np.round(stats.laplace(scale=scale).ppf(np.arange(1, bins) / bins)))
    probabilities = np.diff(np.concatenate([[0.0], laplace_cdf(edges, scale), [1.0]]))
    expected = probabilities * len(draws)
    assert edges.size >= 2 and expected.min() >= 5, f"bins too thin for a chi-square test at scale {scale}"
    # Bin i is (edges[i-1], edges[i]], with open ends.
    observed = np.bincount(np.searchsorted(edges, draws, side="left"), minlength=edges.size + 1)
    return float(stats.chisquare(observed, expected).pvalue)


# --- the samplers -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("scale", "wrong"),
    [
        (Fraction(7, 10), Fraction(8, 10)),
        (Fraction(3), Fraction(13, 4)),
        (Fraction(1234567, 3), Fraction(1234567, 3) * Fraction(11, 10)),
        (Fraction(2.3), Fraction(2.6)),  # a float's exact value: denominator 2^51
    ],
)
def test_discrete_laplace_matches_its_pmf(scale: Fraction, wrong: Fraction):
    source = IntegersOnly(seed=11)
    draws = [noise.discrete_laplace(scale, source) for _ in range(DRAWS)]
    assert all(type(z) is int for z in draws)
    assert chi_square_pvalue(draws, float(scale)) > 1e-3
    # Power: the same draws against a scale 5-25% off are rejected (a wrong-scale sampler would fail above).
    assert chi_square_pvalue(draws, float(wrong)) < 1e-6
    # Closed-form variance 2q/(1-q)^2, relative s.e. about 2-3% at 20,000 draws.
    q = math.exp(-1 / float(scale))
    assert np.var(draws) == pytest.approx(2 * q / (1 - q) ** 2, rel=0.1)


def test_discrete_laplace_zero_probability_is_exact():
    """P[Z = 0] = (1 - q)/(1 + q); a sampler that kept the negative zero would be caught here."""
    source = random.Random(12)
    draws = np.array([noise.discrete_laplace(Fraction(2), source) for _ in range(DRAWS)])
    q = math.exp(-0.5)
    p0 = (1 - q) / (1 + q)
    se = math.sqrt(p0 * (1 - p0) / DRAWS)
    assert abs((draws == 0).mean() - p0) < 4.5 * se
    # Keeping "-0" would count zero twice: P[Z = 0] = 2 p0 / (1 + p0), far outside that band.
    assert abs(2 * p0 / (1 + p0) - p0) > 10 * se


def test_discrete_laplace_is_symmetric():
    source = random.Random(13)
    draws = np.array([noise.discrete_laplace(Fraction(5, 2), source) for _ in range(DRAWS)])
    positive, negative = int((draws > 0).sum()), int((draws < 0).sum())
    assert stats.binomtest(positive, positive + negative).pvalue > 1e-3
    # Same law for |Z| on both sides: two-sample KS on the magnitudes.
    assert stats.ks_2samp(draws[draws > 0], -draws[draws < 0]).pvalue > 1e-3
    assert abs(draws.mean()) < 4.5 * draws.std() / math.sqrt(DRAWS)


def test_same_seed_same_draws():
    scale = Fraction(1234567, 3)
    a, b, c = random.Random(14), random.Random(14), random.Random(15)
    run_a = [noise.discrete_laplace(scale, a) for _ in range(200)]
    assert run_a == [noise.discrete_laplace(scale, b) for _ in range(200)]
    assert run_a != [noise.discrete_laplace(scale, c) for _ in range(200)]


@pytest.mark.parametrize("gamma", [Fraction(0), Fraction(3, 10), Fraction(1), Fraction(5, 2)])
def test_bernoulli_exp_has_mean_exp_minus_gamma(gamma: Fraction):
    source = IntegersOnly(seed=16)
    draws = np.array([noise.bernoulli_exp(gamma, source) for _ in range(DRAWS)])
    target = math.exp(-float(gamma))
    if gamma == 0:
        assert draws.all()
        return
    se = math.sqrt(target * (1 - target) / DRAWS)
    assert abs(draws.mean() - target) < 4.5 * se
    # Power: coins of parameter exp(-0.8 gamma) or exp(-1.2 gamma) lie at least 9 s.e. away, outside the band.
    assert min(abs(math.exp(-0.8 * float(gamma)) - target), abs(math.exp(-1.2 * float(gamma)) - target)) > 9 * se


def test_samplers_refuse_bad_parameters():
    source = random.Random(0)
    with pytest.raises(ValueError, match="gamma"):
        noise.bernoulli_exp(Fraction(-1, 3), source)
    for bad in (Fraction(0), Fraction(-2)):
        with pytest.raises(ValueError, match="scale"):
            noise.discrete_laplace(bad, source)


# --- the integer source ---------------------------------------------------------------------------


def test_integer_source_from_the_rng_argument():
    assert isinstance(noise.integer_source(None), secrets.SystemRandom)  # production: the OS CSPRNG
    a = noise.integer_source(np.random.default_rng(17))
    b = noise.integer_source(np.random.default_rng(17))
    c = noise.integer_source(np.random.default_rng(18))
    assert type(a) is random.Random
    draws = [a.randrange(10**30) for _ in range(5)]
    assert draws == [b.randrange(10**30) for _ in range(5)]
    assert draws != [c.randrange(10**30) for _ in range(5)]
    with pytest.raises(TypeError, match="Generator"):
        noise.integer_source(np.random.RandomState(0))
    with pytest.raises(TypeError, match="Generator"):
        noise.integer_source(random.Random(0))


# --- the grid release -----------------------------------------------------------------------------


@pytest.mark.parametrize(("delta", "epsilon", "p"), [(6.3e-3, 0.5, 200), (1.0, 1.0, 3), (3.7e-5, 4.0, 50)])
def test_grid_parameters_follow_the_definition(delta: float, epsilon: float, p: int):
    params = noise.grid_laplace_parameters(delta, epsilon, p)
    k = math.floor(math.log2(delta / epsilon)) - 20
    assert params.exponent == k and params.dim == p
    g = Fraction(2) ** k
    assert params.scale == (Fraction(delta) / g + p) / Fraction(epsilon)  # exact, no rounding
    assert params.grid == 2.0**k
    assert params.weight_scale == pytest.approx(delta / epsilon + p * 2.0**k / epsilon, rel=1e-15)
    # The grid is about a millionth of the scale Delta/epsilon.
    assert 2**-21 < params.grid / (delta / epsilon) <= 2**-20


def test_grid_exponent_is_exact_at_powers_of_two():
    # Delta/epsilon = 2^-3 exactly and just below it: floor(log2) is -3 and -4.
    assert noise.grid_laplace_parameters(0.5, 4.0, 1).exponent == -23
    assert noise.grid_laplace_parameters(math.nextafter(0.5, 0.0), 4.0, 1).exponent == -24


def test_grid_release_is_on_the_grid_and_near_w():
    rng = np.random.default_rng(19)
    w = rng.normal(0, 0.3, size=2000)
    w[:3] = [0.0, 1e-300, -5e-324]  # zero, tiny and subnormal coordinates round to the grid too
    delta, epsilon = 6.3e-3, 0.5
    released, text = noise.grid_laplace_release(w, sensitivity=delta, epsilon=epsilon, source=random.Random(20))
    params = noise.grid_laplace_parameters(delta, epsilon, w.size)
    g = Fraction(params.grid)
    assert released.dtype == np.float64 and released.shape == w.shape
    assert all((Fraction(x) / g).denominator == 1 for x in released.tolist())  # exact multiples of g
    scale = params.weight_scale
    assert np.abs(released - w).max() < 25 * scale  # P(|Lap| > 25 scales) = e^-25 per coordinate
    # The noise has the stated scale: E|Z| is about t for a large t; s.e. ~ 2.2% at 2,000 coordinates.
    assert np.abs(released - w).mean() == pytest.approx(scale, rel=0.1)
    assert not np.abs(released - w).mean() == pytest.approx(2 * scale, rel=0.3)
    assert f"2^{params.exponent}" in text and f"{scale:.6g}" in text and "discrete Laplace" in text
    again, _ = noise.grid_laplace_release(w, sensitivity=delta, epsilon=epsilon, source=random.Random(20))
    np.testing.assert_array_equal(released, again)


def test_grid_rounding_sensitivity_argument():
    """||round(w/g) - round(w'/g)||_1 <= ||w - w'||_1 / g + p: the bound behind the "+ p" in the scale."""
    rng = np.random.default_rng(21)
    g = 2.0**-10
    worst = 0.0
    for _ in range(500):
        w = rng.normal(0, 0.01, size=8)
        w2 = w + rng.laplace(0, 2e-3, size=8)
        bound = np.abs(w - w2).sum() / g + w.size
        worst = max(worst, np.abs(np.rint(w / g) - np.rint(w2 / g)).sum() / bound)
    assert worst <= 1.0


def test_grid_release_refuses_what_it_cannot_release_exactly():
    source = random.Random(0)
    with pytest.raises(ValueError, match="53 bits"):  # w / g = 1e10 * 2^40: beyond exact doubles
        noise.grid_laplace_release(np.array([1e10, 0.0]), sensitivity=2**-20, epsilon=1.0, source=source)
    with pytest.raises(ValueError, match="non-finite"):
        noise.grid_laplace_release(np.array([np.nan]), sensitivity=1.0, epsilon=1.0, source=source)
    with pytest.raises(ValueError, match="1-D"):
        noise.grid_laplace_release(np.zeros((2, 2)), sensitivity=1.0, epsilon=1.0, source=source)
    with pytest.raises(ValueError, match="epsilon"):
        noise.grid_laplace_release(np.zeros(2), sensitivity=1.0, epsilon=0.0, source=source)
    with pytest.raises(ValueError, match="sensitivity"):
        noise.grid_laplace_release(np.zeros(2), sensitivity=math.inf, epsilon=1.0, source=source)
    with pytest.raises(ValueError, match="double range"):
        noise.grid_laplace_parameters(1e-300, 1e10, 2)
