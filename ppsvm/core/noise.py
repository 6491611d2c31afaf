"""Exact discrete Laplace noise, and a floating-point-safe Laplace release of a real vector.

Why. Textbook Laplace noise drawn in floating point (``w + rng.laplace(...)``) is not
differentially private: the set of doubles a float sampler can output near ``w`` depends on
``w``'s low-order bits, so a single release can tell neighbouring datasets apart
(Mironov, "On significance of the least significant bits for differential privacy",
CCS 2012). The remedy used here releases on a power-of-two grid with exact integer noise:

1. round ``w / g`` to integers, g = 2^k (division by a power of two is exact in floating point);
2. add i.i.d. discrete Laplace noise drawn by integer arithmetic only
   (Canonne, Kamath, Steinke, "The Discrete Gaussian for Differential Privacy", NeurIPS 2020,
   Algorithms 1 and 2, written from the paper's description);
3. return ``g * integers`` as float64, exact because every integer is below 2^53.

Every step after the rounding is exact, so the output is a one-to-one image of the noisy
integers and carries no floating-point side information.

Randomness comes from an :class:`IntegerSource`: ``secrets.SystemRandom()`` in production, a
seeded ``random.Random`` in tests and reproducible runs (:func:`integer_source` picks one).
The sampler's running time depends on the noise drawn (never on the released vector); timing
side channels are outside this module's threat model.
"""

from __future__ import annotations

import math
import random
import secrets
from dataclasses import dataclass
from fractions import Fraction
from numbers import Real
from typing import Protocol

import numpy as np

# The grid is 2^GRID_BITS times finer than the noise scale Delta/epsilon: rounding to it costs
# about p * 2^-20 / epsilon of relative extra noise (0.02% for p = 200, epsilon = 1).
GRID_BITS = 20
# Integers of magnitude below 2^53 are exact doubles, so g * integer is computed exactly.
EXACT_INTEGER_LIMIT = 2**53
# The seed drawn from a numpy Generator for a reproducible random.Random (63 bits: numpy's int64 range).
SEED_LIMIT = 2**63


class IntegerSource(Protocol):
    """Uniform integers: ``randrange(stop)`` is uniform on {0, ..., stop - 1}.

    ``random.Random`` and ``secrets.SystemRandom`` both qualify (they draw exact uniform
    integers by rejection from random bits, for any size of ``stop``).
    """

    def randrange(self, start: int, /) -> int: ...


def integer_source(rng: np.random.Generator | None) -> IntegerSource:
    """The integer randomness for a release, from the ``rng`` argument the DP API takes.

    Parameters
    ----------
    rng : numpy.random.Generator or None
        None in production: the OS CSPRNG (``secrets.SystemRandom``), never a fixed seed.
        A Generator (tests, reproductions) seeds a ``random.Random`` with 63 bits drawn from it,
        so a seeded run repeats exactly.

    Returns
    -------
    IntegerSource
    """
    if rng is None:
        return secrets.SystemRandom()
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator or None, got {type(rng).__name__}")
    return random.Random(int(rng.integers(0, SEED_LIMIT)))


# --- exact samplers (Canonne, Kamath, Steinke 2020) --------------------------------------------------


def _bernoulli_exp_unit(numerator: int, denominator: int, source: IntegerSource) -> bool:
    """Bernoulli(exp(-gamma)) for gamma = numerator/denominator in [0, 1] (CKS Algorithm 1, first case).

    Draw A_k ~ Bernoulli(gamma/k) for k = 1, 2, ... until the first A_k = 0, at K = k. Then
    P[K > k] = gamma^k / k!, so P[K odd] = sum_k (-1)^k gamma^k / k! = exp(-gamma).
    Bernoulli(gamma/k) is one uniform integer below k * denominator compared with the numerator.
    """
    k = 1
    while source.randrange(k * denominator) < numerator:
        k += 1
    return k % 2 == 1


def bernoulli_exp(gamma: Fraction, source: IntegerSource) -> bool:
    """One exact draw of Bernoulli(exp(-gamma)) for a rational gamma >= 0 (CKS Algorithm 1).

    For gamma > 1, exp(-gamma) = exp(-1)^floor(gamma) * exp(-(gamma - floor(gamma))): the
    product of independent coins, each with a parameter in [0, 1]; stop at the first failure.

    Parameters
    ----------
    gamma : Fraction
        >= 0 (an int or a float converts exactly).
    source : IntegerSource

    Returns
    -------
    bool
    """
    g = Fraction(gamma)
    if g < 0:
        raise ValueError(f"gamma must be >= 0, got {g}")
    whole = math.floor(g)
    for _ in range(whole):
        if not _bernoulli_exp_unit(1, 1, source):
            return False
    rest = g - whole
    return _bernoulli_exp_unit(rest.numerator, rest.denominator, source)


def discrete_laplace(scale: Fraction, source: IntegerSource) -> int:
    """One exact draw Z with P[Z = z] proportional to exp(-|z| / scale), z integer (CKS Algorithm 2).

    With scale = t/s in lowest terms (t, s positive integers):

    - U uniform on {0, ..., t-1}, kept with probability exp(-U/t); V counts successes of
      Bernoulli(exp(-1)) before the first failure, so P[V = v] is proportional to exp(-v).
      Then X = U + t V has P[X = x] proportional to exp(-x/t) on x >= 0.
    - Y = floor(X / s): P[Y = y] is proportional to sum over the s values x = ys, ..., ys + s - 1
      of exp(-x/t), i.e. to exp(-y s/t) = exp(-y / scale).
    - A fair sign, rejecting "-0" so that 0 is not counted twice.

    Parameters
    ----------
    scale : Fraction
        > 0 (an int or a float converts exactly).
    source : IntegerSource

    Returns
    -------
    int
    """
    b = Fraction(scale)
    if b <= 0:
        raise ValueError(f"scale must be > 0, got {b}")
    t, s = b.numerator, b.denominator
    while True:
        u = source.randrange(t)
        if not _bernoulli_exp_unit(u, t, source):
            continue
        v = 0
        while _bernoulli_exp_unit(1, 1, source):
            v += 1
        y = (u + t * v) // s
        negative = source.randrange(2) == 1
        if negative and y == 0:
            continue
        return -y if negative else y


# --- release on a grid ---------------------------------------------------------------------------


def _positive_float(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    x = float(value)
    if not (math.isfinite(x) and x > 0):
        raise ValueError(f"{name} must be finite and > 0, got {x}")
    return x


def _floor_log2(q: Fraction) -> int:
    """floor(log2(q)) for a rational q > 0, exactly."""
    e = q.numerator.bit_length() - q.denominator.bit_length()
    # Now 2^(e-1) < q < 2^(e+1); step down if q < 2^e.
    if (q.numerator << max(-e, 0)) < (q.denominator << max(e, 0)):
        e -= 1
    return e


@dataclass(frozen=True)
class GridLaplace:
    """The grid and the discrete Laplace scale of one release.

    Attributes
    ----------
    exponent : int
        k: the grid is g = 2^k.
    scale : Fraction
        t, in grid units: P[noise = z] is proportional to exp(-|z| / t).
    dim : int
        p, the number of coordinates released.
    """

    exponent: int
    scale: Fraction
    dim: int

    @property
    def grid(self) -> float:
        """g = 2^k as a float (exact)."""
        return math.ldexp(1.0, self.exponent)

    @property
    def weight_scale(self) -> float:
        """g * t: the noise scale in the units of the released vector (rounded to a float)."""
        return float(self.scale * Fraction(self.grid))

    def describe(self) -> str:
        """What the noise is, for release records and reports."""
        return (
            f"discrete Laplace on grid 2^{self.exponent}, scale {float(self.scale):.9g} grid units (exact rational), "
            f"i.e. ~{self.weight_scale:.6g} in weight units, on each of {self.dim} coordinates"
        )


def grid_laplace_parameters(sensitivity: float, epsilon: float, dim: int) -> GridLaplace:
    """The grid g = 2^k and the scale t (grid units) for an L1 ``sensitivity`` and ``epsilon``.

    k = floor(log2(sensitivity / epsilon)) - GRID_BITS and t = (sensitivity / g + dim) / epsilon,
    both computed exactly from the floats (a float is an exact rational); see
    :func:`grid_laplace_release` for why the ``+ dim``.

    Parameters
    ----------
    sensitivity : float
        Delta > 0, the L1 sensitivity of the vector.
    epsilon : float
        > 0.
    dim : int
        p >= 1, the vector's length.

    Returns
    -------
    GridLaplace
    """
    delta = Fraction(_positive_float(sensitivity, "sensitivity"))
    eps = Fraction(_positive_float(epsilon, "epsilon"))
    if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
        raise ValueError(f"dim must be an integer >= 1, got {dim!r}")
    k = _floor_log2(delta / eps) - GRID_BITS
    # g must be a normal double for w / g and g * integer to be exact.
    if not -1022 <= k <= 1023:
        raise ValueError(f"the noise scale sensitivity/epsilon needs a grid 2^{k}, outside the double range")
    g = Fraction(2) ** k
    return GridLaplace(exponent=k, scale=(delta / g + dim) / eps, dim=dim)


def grid_laplace_release(
    w: np.ndarray, *, sensitivity: float, epsilon: float, source: IntegerSource
) -> tuple[np.ndarray, str]:
    """epsilon-DP release of w on a power-of-two grid with exact discrete Laplace noise.

    Steps (parameters from :func:`grid_laplace_parameters`): r = round(w / g) coordinatewise
    (w / g is exact for g = 2^k; ties to even), Z_i i.i.d. with P[Z_i = z] proportional to
    exp(-|z| / t), output g * (r + Z) as float64.

    Privacy. Let w, w' come from neighbouring datasets with ||w - w'||_1 <= Delta. Rounding
    moves each coordinate by at most 1/2 grid unit, so in grid units
    ||r - r'||_1 <= sum_i (|w_i - w'_i| / g + 1/2 + 1/2) <= Delta/g + p. For any integer
    vector v the probabilities of releasing v satisfy
    P[r + Z = v] / P[r' + Z = v] = exp((||v - r'||_1 - ||v - r||_1) / t) <= exp(||r - r'||_1 / t)
    <= exp(epsilon) with t = (Delta/g + p) / epsilon. The noise is sampled exactly (integer
    arithmetic), and v -> g * v is exact and one-to-one while |v_i| < 2^53, so the float
    output is post-processing of v: epsilon-DP holds for the bits actually released.

    Parameters
    ----------
    w : ndarray, shape (p,)
        Finite floats; Delta must bound the L1 distance between the vectors that neighbouring
        datasets produce (the caller's proof, including any solver error).
    sensitivity : float, keyword-only
        Delta > 0.
    epsilon : float, keyword-only
        > 0.
    source : IntegerSource, keyword-only
        ``secrets.SystemRandom()`` in production (see :func:`integer_source`).

    Returns
    -------
    weights : ndarray, shape (p,)
        Exact multiples of g, float64.
    noise : str
        The noise distribution, grid and scale (:meth:`GridLaplace.describe`).

    Raises
    ------
    ValueError
        If w is not a finite 1-D vector, or ``w / g`` or a noisy integer reaches 2^53 (the grid
        is then too fine for these magnitudes; no value is named).
    """
    vector = np.asarray(w, dtype=np.float64)
    if vector.ndim != 1 or vector.size == 0:
        raise ValueError(f"w must be a non-empty 1-D vector, got shape {vector.shape}")
    if not np.isfinite(vector).all():
        raise ValueError("w has non-finite entries")
    params = grid_laplace_parameters(sensitivity, epsilon, vector.size)
    g = params.grid
    rounded = np.rint(vector / g)
    if not (np.abs(rounded) < EXACT_INTEGER_LIMIT).all():
        raise ValueError(f"w / 2^{params.exponent} does not fit in 53 bits: the grid is too fine for these weights")
    noisy = [int(r) + discrete_laplace(params.scale, source) for r in rounded.tolist()]
    if any(abs(v) >= EXACT_INTEGER_LIMIT for v in noisy):
        raise ValueError(f"a noisy coordinate in units of 2^{params.exponent} does not fit in 53 bits")
    released = np.array(noisy, dtype=np.float64) * g
    if not np.isfinite(released).all():
        raise ValueError(f"a noisy coordinate times 2^{params.exponent} overflows float64")
    return released, params.describe()
