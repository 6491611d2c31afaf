"""What a colluding column-block peer recovers from one entity's kernel block, measured on the entity's own records.

Privacy rules 8 and 9 (docs/design.md section 2): a peer of column block j knows B_j, the box [0, 1]^n_j the
features are scaled to, the values of its own records of the same features and their correlations. A single
block K(A_ij, B_j') confines each record a to a small set:

- Gaussian, d_k = -log(K_k) / mu = ||a - b_k||^2: subtracting the first equation from the others gives
  2 (b_k - b_1) . a = d_1 - d_k + ||b_k||^2 - ||b_1||^2, an affine plane of dimension n - mbar + 1, and a lies
  on the sphere about the projection of b_1 onto that plane (a circle at mbar = n - 1);
- linear, B a = k: an affine plane of dimension n - mbar.

What picks the record inside that set is the peer's prior: the box, the values it has seen (integer codes and
categories sit exactly on a few values, often on the faces 0 and 1) and the correlations (a Gaussian fitted on
its rows). :func:`reconstruct` is the strongest attack we know along those lines, :func:`no_release_guess` the
best guess without any release, and :func:`measure_risk` the entity's self-test comparing the two on its own
records. Pure numpy and scipy, no I/O.

Measured (2 x 2 checkerboard, min/max scaling, the peer holding the other row block's records, mbar = n_j - 1):
WDBC's 15-feature blocks 99.6-100% of values within 0.05 and 98-99% of records whole (no-release guess 41%);
UCI adult (14 features, categories as integer codes, 7-feature blocks) 100% of values, 88-99% exactly (the
no-release guess 37% and 77%). A combined block read as a single one scores no better than the no-release guess.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ppsvm.core.kernels import gaussian_kernel, linear_kernel

# Values within this of each other count as equal when comparing a guess with the truth: the comparison is
# "within tolerance" and a guess exactly tolerance away must not fail on the last bit of rounding.
_COMPARE_SLACK = 1e-9
# Candidates refined per record, at most, and the work (refined candidates x q^3 for a q-dimensional solution
# set) that bounds them: all 8 up to q = 16, one from q = 32 (mbar = 1 at n = 30 and every wider block).
_REFINED_PER_RECORD = 8
_REFINE_WORK = 8 * 16**3
# Refinement rounds and the widths (scaled units) of the "sits on a seen value" component they anneal through:
# a wide start lets a candidate a few hundredths off a code be pulled onto it, the narrow end makes the final
# choice prefer candidates that sit on seen values to rounding.
_ATOM_WIDTHS = (0.06, 0.03, 0.015, 0.008, 0.004, 0.002, 0.001, 0.001)
# Width of the seen-value component in the final score, and the box penalty's width: the true record is inside
# the box, so a candidate 0.01 outside it loses 50 nats.
_FINAL_ATOM_WIDTH = 0.001
_BOX_WIDTH = 0.001
# A feature value counts as an atom (a value records share, such as an integer code) when at least this many
# of the peer's rows hold it exactly; the rest of the feature is modelled as spread evenly over [0, 1].
_ATOM_MIN_ROWS = 2
# Largest share of a feature's values the atom component may claim: keeps the off-atom density positive, so
# one unusual value does not make a candidate impossible.
_ATOM_SHARE_CAP = 0.99
# Covariance shrinkage towards its diagonal, as a share of n / (m_p + n), and a variance floor for features
# constant in the prior: a peer with about as many rows as features still gets an invertible, well-conditioned
# prior (the share matters little: recovery moved by under 0.5% of values from 0 to 1 in simulation).
_SHRINKAGE = 0.5
_VARIANCE_FLOOR = 1e-4
# Spreads (in prior standard deviations along the solution set) of the conditional Gaussian samples.
_SAMPLE_SPREADS = (1.0, 3.0)
# Combinations of seen values tried per record by the enumeration (each gives one point, two on a sphere), and
# the records enumerated at once (bounds the temporaries at a few tens of MB).
_ENUMERATION_BUDGET = 2048
_ENUMERATION_ROUNDS = 3
# A coordinate sits on a seen value when this close to it, and within this share of the typical gap between
# the feature's seen values (refinement leaves a guess about 1e-4 off the value it has been pulled onto).
_SETTLED_DISTANCE = 1e-3
_SETTLED_GAPS = 0.02
_ENUMERATION_CHUNK_VALUES = 4_000_000
# Features whose rows sit on shared values at least this often are enumerated over their seen values.
_DISCRETE_SHARE = 0.5
# A guess further than this outside the box (or a row no point produces by this much) means the solution set
# misses the box: the row is not a single block's, and the attack falls back to the no-release guess.
_UNUSABLE_OUTSIDE = 0.02
# Records attacked at once by reconstruct (its candidates take records x samples x n values).
_RECORDS_PER_CHUNK = 512
# Smallest record count for which the self-test can split records into a peer's and victims.
_MIN_RECORDS = 4


def no_release_guess(prior: np.ndarray, tolerance: float = 0.05) -> np.ndarray:
    """The best guess of a record that uses no release: per feature, the value most of the peer's rows are near.

    Parameters
    ----------
    prior : ndarray, shape (m_p, n)
        The peer's own records, scaled to [0, 1].
    tolerance : float
        A row counts for value v when |row - v| <= tolerance.

    Returns
    -------
    ndarray, shape (n,)
        Per feature, the value of ``prior`` with the most rows within ``tolerance``; ties go to the smaller.
        Choosing among the prior's own values (not column means) is the fair baseline: on discrete data it
        is the mode, which a mean misses.
    """
    prior = _as_matrix(prior, "prior")
    tolerance = _check_tolerance(tolerance)
    guess = np.empty(prior.shape[1])
    for feature, column in enumerate(prior.T):
        values = np.sort(column)
        candidates = np.unique(values)  # ascending, so argmax's first maximum is the smaller value on ties
        slack = tolerance + _COMPARE_SLACK
        near = np.searchsorted(values, candidates + slack, "right") - np.searchsorted(values, candidates - slack)
        guess[feature] = candidates[int(np.argmax(near))]
    return guess


def reconstruct(
    released: np.ndarray,
    B: np.ndarray,
    kernel: str,
    mu: float,
    prior: np.ndarray,
    *,
    samples: int = 256,
    seed: int = 0,
) -> np.ndarray:
    """A colluding column-block peer's best guess of each record behind a kernel block.

    Per record, every candidate is built on the set of points with the record's kernel row (the plane, and for
    the Gaussian kernel the sphere in it), so the kernel equations hold to rounding and need no score:

    1. candidates: the prior's most likely point of the set (a Gaussian fitted on ``prior``: its mode on the
       sphere is a trust-region subproblem, solved exactly), draws from the prior's conditional distribution on
       the plane (moved onto the sphere), and for the Gaussian kernel directions uniform on the sphere;
    2. score: Gaussian prior log-density + per feature "one of the values the peer has seen, else uniform on
       [0, 1]" + a steep penalty outside the box [0, 1]^n;
    3. refinement of the best few: an EM on "coordinate i is its nearest seen value", annealed from a wide to a
       narrow width, each step minimised exactly on the set;
    4. enumeration for discrete features: fixing as many coordinates as the set has dimensions to seen values
       leaves one point (two on a sphere); only the true combination puts the other coordinates on seen values
       too. All combinations when few, else those nearest the current guess, in up to three rounds;
    5. the best-scoring point, coordinates sitting on a seen value set to it exactly. A row that no point of the
       box produces (a combined block read as a single one) gets the no-release guess instead.

    Cost, measured on one core (BLAS limited to one thread): 500 records x 30 features at mbar = 29 take 0.5 s
    (Gaussian) and 0.3 s (linear). Lower mbar costs more: at mbar = 15, 2 s on continuous records and 7-9 s on
    integer-coded ones (the enumeration, bounded by _ENUMERATION_BUDGET x _ENUMERATION_ROUNDS per record).

    Parameters
    ----------
    released : ndarray, shape (m, mbar)
        The victim's kernel block: Gaussian exp(-mu ||a - b_k||^2) or linear a . b_k.
    B : ndarray, shape (mbar, n)
        The column block's random points, known to the peer.
    kernel : {"gaussian", "linear"}
    mu : float
        Gaussian width, > 0 (ignored for the linear kernel).
    prior : ndarray, shape (m_p, n)
        The peer's own records of the same features, scaled to [0, 1]; at least 2 rows.
    samples : int
        Candidates per record drawn before refinement (about; at least one per kind).
    seed : int
        Seed of the sampling: the result is deterministic for a given seed.

    Returns
    -------
    ndarray, shape (m, n)
        The guessed records, inside [0, 1]^n.
    """
    released, B = _as_matrix(released, "released"), _as_matrix(B, "B")
    prior = _as_matrix(prior, "prior")
    if released.shape[1] != B.shape[0] or prior.shape[1] != B.shape[1]:
        raise ValueError(
            f"released has shape {released.shape}, B {B.shape} and prior {prior.shape}: expected (m, mbar), "
            "(mbar, n) and (m_p, n)"
        )
    if kernel not in ("gaussian", "linear"):
        raise ValueError(f"unknown kernel {kernel!r}; expected 'gaussian' or 'linear'")
    if kernel == "gaussian" and not mu > 0:
        raise ValueError(f"Gaussian width mu must be > 0, got {mu}")
    if len(prior) < 2:
        raise ValueError(f"prior has {len(prior)} rows; at least 2 are needed to fit a prior")
    if samples < 1:
        raise ValueError(f"samples must be >= 1, got {samples}")
    rng = np.random.default_rng(seed)
    model = _Prior.fit(prior)
    fallback = no_release_guess(prior)
    guess = np.empty((len(released), B.shape[1]))
    # Records in chunks: the candidates of a chunk are (records x samples x n), tens of MB at this size.
    for start in range(0, len(released), _RECORDS_PER_CHUNK):
        rows = slice(start, start + _RECORDS_PER_CHUNK)
        guess[rows] = _reconstruct_chunk(_solution_set(released[rows], B, kernel, mu), model, samples, rng, fallback)
    return guess


def _reconstruct_chunk(
    solutions: _SolutionSet, model: _Prior, samples: int, rng: np.random.Generator, fallback: np.ndarray
) -> np.ndarray:
    """:func:`reconstruct` for the records of ``solutions``; shape (m, n)."""
    start = _starting_candidates(solutions, model, samples, rng)  # (m, c, q)
    # Each refined candidate costs a q x q eigendecomposition per step: fewer of them on wide solution sets.
    q = solutions.null.shape[1]
    keep = max(1, min(_REFINED_PER_RECORD, start.shape[1], _REFINE_WORK // max(q, 1) ** 3))
    score = _score(solutions.points(start), model, _ATOM_WIDTHS[0])
    best = np.argsort(-score, axis=1)[:, :keep]
    t = np.take_along_axis(start, best[:, :, None], axis=1)  # (m, keep, q)
    for width in _ATOM_WIDTHS:
        t = _refine(solutions, model, t, width)
    points = solutions.points(t)
    final = _score(points, model, _FINAL_ATOM_WIDTH)
    chosen = points[np.arange(len(points)), np.argmax(final, axis=1)]
    chosen = _best_enumerated(solutions, model, chosen, np.max(final, axis=1))
    guess = np.clip(model.snap_exact(chosen), 0.0, 1.0)
    # A row no point of the box produces (a combined block read as a single one) carries nothing the peer can
    # use: it falls back to the guess without a release rather than to a point the row does not describe.
    outside = np.maximum(np.maximum(-chosen, chosen - 1.0), 0.0).max(axis=1)
    unusable = (outside > _UNUSABLE_OUTSIDE) | (solutions.shortfall > _UNUSABLE_OUTSIDE)
    return np.where(unusable[:, None], fallback, guess)


@dataclass(frozen=True)
class Risk:
    """What a colluding column-block peer recovers of an entity's records, against the guess without a release.

    Attributes
    ----------
    recovered : float
        Share of the victims' values the attack gets within ``tolerance`` (scaled units).
    baseline : float
        The same share for :func:`no_release_guess`.
    gain : float
        ``recovered - baseline``: what the release adds. Near 0 (or below) is what privacy rule 9 asks for.
    records_whole : float
        Share of victims with every value within ``tolerance``.
    mbar : int
    kernel : str
    n_victims : int
        Records attacked (0 when there were too few records to test).
    tolerance : float
    """

    recovered: float
    baseline: float
    gain: float
    records_whole: float
    mbar: int
    kernel: str
    n_victims: int
    tolerance: float = 0.05

    def describe(self) -> str:
        """One line with the figures, for the entity's consent prompt and its log."""
        if self.n_victims == 0:
            return (
                f"too few records to measure the risk ({self.kernel} kernel, mbar = {self.mbar}): "
                "a single block cannot be shown safe"
            )
        plural = "" if self.n_victims == 1 else "s"
        return (
            f"a colluding column-block peer recovers {self.recovered:.0%} of values within {self.tolerance:g} "
            f"(no-release guess {self.baseline:.0%}): gain {self.gain:.2f}; {self.records_whole:.0%} of records "
            f"whole ({self.kernel} kernel, mbar = {self.mbar}, {self.n_victims} record{plural} tested)"
        )


@dataclass(frozen=True)
class Recovery:
    """Shares of a victim's values (and whole records) an attack's guess gets within a tolerance, beside the same
    shares for :func:`no_release_guess` from the attacker's prior."""

    recovered: float
    whole: float
    baseline: float
    baseline_whole: float

    @property
    def gain(self) -> float:
        return self.recovered - self.baseline


def score_recovery(guess: np.ndarray, truth: np.ndarray, prior: np.ndarray, tolerance: float = 0.05) -> Recovery:
    """How much of ``truth`` (m, n) ``guess`` (m, n) gets within ``tolerance``, and the no-release guess from
    ``prior`` (m_p, n): the comparison privacy rule 9 asks for, in scaled units."""
    hit = np.abs(guess - truth) <= tolerance + _COMPARE_SLACK
    base = np.abs(no_release_guess(prior, tolerance) - truth) <= tolerance + _COMPARE_SLACK
    return Recovery(
        float(hit.mean()), float(hit.all(axis=1).mean()), float(base.mean()), float(base.all(axis=1).mean())
    )


def measure_risk(
    X_scaled: np.ndarray,
    B: np.ndarray,
    kernel: str,
    mu: float,
    *,
    tolerance: float = 0.05,
    max_victims: int = 200,
    seed: int = 0,
) -> Risk:
    """An entity's self-test: how much of its records a colluding peer recovers from a single block.

    The records are split at random into halves: one plays the peer's own records (its prior), the other the
    victims (at most ``max_victims`` of them), whose block is computed against ``B`` exactly as the entity would
    release it and attacked with :func:`reconstruct`. Deterministic for a given ``seed``. Cost, measured on one
    core at 200 victims x 30 features: 0.2-0.5 s at mbar = 25 to 29; at mbar = 15, 1 s on continuous records and
    4-7 s on integer-coded ones (the Gaussian kernel is the slower, about twice the linear).

    Parameters
    ----------
    X_scaled : ndarray, shape (m, n)
        The entity's records, scaled with the view's scaling; clipped to [0, 1].
    B : ndarray, shape (mbar, n)
    kernel : {"gaussian", "linear"}
    mu : float
        Gaussian width (ignored for the linear kernel).
    tolerance : float
        A value counts as recovered when within this of the truth (scaled units).
    max_victims : int
        Most records attacked.
    seed : int

    Returns
    -------
    Risk
        With fewer than 4 records nothing can be shown safe: recovered = 1.0, n_victims = 0.
    """
    X = np.clip(_as_matrix(X_scaled, "X_scaled"), 0.0, 1.0)
    B = _as_matrix(B, "B")
    tolerance = _check_tolerance(tolerance)
    if X.shape[1] != B.shape[1]:
        raise ValueError(f"X_scaled has {X.shape[1]} features, B has {B.shape[1]}")
    if max_victims < 1:
        raise ValueError(f"max_victims must be >= 1, got {max_victims}")
    if kernel not in ("gaussian", "linear"):
        raise ValueError(f"unknown kernel {kernel!r}; expected 'gaussian' or 'linear'")
    mbar = B.shape[0]
    if len(X) < _MIN_RECORDS:
        return Risk(1.0, 0.0, 1.0, 1.0, mbar, kernel, 0, tolerance)
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(X))
    half = len(X) // 2
    prior, victims = X[order[:half]], X[order[half:]][:max_victims]
    block = gaussian_kernel(victims, B, mu) if kernel == "gaussian" else linear_kernel(victims, B)
    found = score_recovery(reconstruct(block, B, kernel, mu, prior, seed=seed), victims, prior, tolerance)
    return Risk(
        recovered=found.recovered,
        baseline=found.baseline,
        gain=found.gain,
        records_whole=found.whole,
        mbar=mbar,
        kernel=kernel,
        n_victims=len(victims),
        tolerance=tolerance,
    )


def risk_of_posterior(X_scaled: np.ndarray, B: np.ndarray, *, kernel: str = "linear") -> float:
    """A closed-form first estimate: the share of the prior's spread that survives a single block.

    Linear-Gaussian view: with a Gaussian prior of covariance S and the block's linear equations C a = r
    (linear kernel C = B; Gaussian kernel the mbar - 1 differences 2 (b_k - b_1), the sphere left out), the
    posterior covariance is S - S C' (C S C')^-1 C S. The result is the mean over features of the posterior
    standard deviation divided by the prior's: 1 means the block tells nothing under this model, near 0 that it
    pins records down (measured on WDBC's two 15-feature blocks: 0.03-0.06 at mbar = 14, 0.10-0.12 at 12, 0.32-0.38
    at 7). It ignores the box, the seen values and the sphere, so it understates the risk (on integer-coded data
    the ratio is 0.25-0.5 at mbar = n_j - 1 where the attack recovers every value); :func:`measure_risk` is the
    figure to report.

    Parameters
    ----------
    X_scaled : ndarray, shape (m, n)
        The entity's records, scaled to [0, 1]; at least 2 rows.
    B : ndarray, shape (mbar, n)
    kernel : {"linear", "gaussian"}

    Returns
    -------
    float
        Mean posterior-to-prior standard deviation ratio, in [0, 1].
    """
    X, B = _as_matrix(X_scaled, "X_scaled"), _as_matrix(B, "B")
    if X.shape[1] != B.shape[1] or len(X) < 2:
        raise ValueError(f"X_scaled has shape {X.shape} and B {B.shape}: expected (m >= 2, n) and (mbar, n)")
    if kernel not in ("gaussian", "linear"):
        raise ValueError(f"unknown kernel {kernel!r}; expected 'gaussian' or 'linear'")
    # The sample covariance itself (the attack's prior is shrunk), as in the linear-Gaussian formula.
    S = np.atleast_2d(np.cov(X, rowvar=False))
    S[np.diag_indices_from(S)] = np.maximum(np.diag(S), _VARIANCE_FLOOR)
    C = B if kernel == "linear" else 2.0 * (B[1:] - B[0])
    if len(C) == 0:
        return 1.0
    SC = S @ C.T
    posterior = S - SC @ np.linalg.lstsq(C @ SC, SC.T, rcond=None)[0]
    ratio = np.sqrt(np.clip(np.diag(posterior), 0.0, None) / np.diag(S))
    return float(np.clip(ratio, 0.0, 1.0).mean())


# --- the set of records with a given kernel row -----------------------------------------------------------------


@dataclass(frozen=True)
class _SolutionSet:
    """Per record, the points a = base + t N' with the record's kernel row (and ||t - centre|| = radius).

    base : (m, n), the plane's point nearest the origin; null : (n, q), orthonormal directions along the plane;
    centre : (m, q) and radius : (m,), the sphere in plane coordinates (None for the linear kernel); shortfall :
    (m,), how far (in feature units) the row is from one any point of R^n produces (0 for a consistent row).
    """

    base: np.ndarray
    null: np.ndarray
    centre: np.ndarray | None
    radius: np.ndarray | None
    shortfall: np.ndarray

    def points(self, t: np.ndarray) -> np.ndarray:
        """Plane coordinates (m, c, q) to points (m, c, n)."""
        return self.base[:, None, :] + t @ self.null.T

    def subset(self, rows: np.ndarray) -> _SolutionSet:
        """The solution sets of the records ``rows`` only."""
        return _SolutionSet(
            self.base[rows],
            self.null,
            None if self.centre is None else self.centre[rows],
            None if self.radius is None else self.radius[rows],
            self.shortfall[rows],
        )

    def onto(self, t: np.ndarray) -> np.ndarray:
        """Plane coordinates (m, c, q) moved radially onto each record's sphere (unchanged for a plane)."""
        if self.centre is None or self.radius is None:
            return t
        offset = t - self.centre[:, None, :]
        length = np.linalg.norm(offset, axis=2, keepdims=True)
        # A candidate at the centre has no direction: any point of the sphere is as good as another.
        offset = np.where(length > 0, offset, 1.0)
        length = np.where(length > 0, length, math.sqrt(offset.shape[2]))
        return self.centre[:, None, :] + offset * (self.radius[:, None, None] / length)


def _solution_set(released: np.ndarray, B: np.ndarray, kernel: str, mu: float) -> _SolutionSet:
    """The plane (and sphere) each kernel row confines its record to."""
    n = B.shape[1]
    if kernel == "linear":
        C, r = B, released
    else:
        squared = -np.log(np.clip(released, np.finfo(np.float64).tiny, 1.0)) / mu  # (m, mbar) = ||a - b_k||^2
        C = 2.0 * (B[1:] - B[0])
        norms = (B**2).sum(axis=1)
        r = squared[:, :1] - squared[:, 1:] + (norms[1:] - norms[0])
    if len(C):
        U, singular, Vt = np.linalg.svd(C, full_matrices=True)
        rank = int((singular > singular[0] * 1e-10).sum())
    else:
        U, singular, Vt, rank = np.zeros((0, 0)), np.zeros(0), np.eye(n), 0
    row_space, null = Vt[:rank].T, Vt[rank:].T  # (n, rank), (n, q)
    # Least squares in the row space: exact for a consistent row, the nearest plane point otherwise.
    y = (r @ U[:, :rank]) / singular[:rank] if rank else np.zeros((len(released), 0))
    base = y @ row_space.T
    if kernel == "linear":
        misfit = np.linalg.norm(base @ B.T - released, axis=1) / max(float(np.linalg.norm(B, 2)), 1e-300)
        return _SolutionSet(base, null, None, None, misfit)
    # Every b_k projects onto the plane at the same point (the differences b_k - b_1 span the normal space), so
    # the centre in plane coordinates is N' b_1, and each equation gives the radius; their mean averages rounding.
    centre = np.broadcast_to(B[0] @ null, (len(released), null.shape[1])).copy()
    offsets = ((y[:, None, :] - (B @ row_space)[None, :, :]) ** 2).sum(axis=2)  # (m, mbar)
    radius_squared = (squared - offsets).mean(axis=1)
    # A negative squared radius: the sphere does not meet the plane, so no point has this row.
    shortfall = np.sqrt(np.clip(-radius_squared, 0.0, None))
    return _SolutionSet(base, null, centre, np.sqrt(np.clip(radius_squared, 0.0, None)), shortfall)


# --- the peer's prior --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Prior:
    """A Gaussian fitted on the peer's rows, and per feature the values its rows share (atoms).

    atoms[i] : sorted atom values of feature i; atom_weight[i] : their shares of the rows; atom_share[i] : the
    share of rows on any atom (capped).
    """

    mean: np.ndarray
    covariance: np.ndarray
    precision: np.ndarray
    atoms: tuple[np.ndarray, ...]
    atom_weight: tuple[np.ndarray, ...]
    atom_share: np.ndarray

    @classmethod
    def fit(cls, prior: np.ndarray) -> _Prior:
        m_p, n = prior.shape
        mean = prior.mean(axis=0)
        covariance = np.atleast_2d(np.cov(prior, rowvar=False))
        variance = np.maximum(np.diag(covariance), _VARIANCE_FLOOR)
        # Shrink towards the diagonal, more so with few rows per feature, so the precision stays well conditioned.
        shrink = _SHRINKAGE * n / (m_p + n)
        covariance = (1.0 - shrink) * covariance + shrink * np.diag(np.diag(covariance))
        covariance[np.diag_indices(n)] = variance
        precision = np.linalg.inv(covariance)
        atoms, weights, shares = [], [], np.zeros(n)
        for feature, column in enumerate(prior.T):
            values, counts = np.unique(column, return_counts=True)
            shared = counts >= _ATOM_MIN_ROWS
            atoms.append(values[shared])
            weights.append(counts[shared] / max(int(counts[shared].sum()), 1))
            shares[feature] = min(counts[shared].sum() / m_p, _ATOM_SHARE_CAP)
        return cls(mean, covariance, precision, tuple(atoms), tuple(weights), shares)

    def nearest_atoms(self, points: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For points (..., n): the nearest atom per coordinate, its distance and its weight (the coordinate
        itself, distance inf and weight 0 where a feature has no atoms)."""
        target = np.array(points, copy=True)
        distance = np.full(points.shape, np.inf)
        weight = np.zeros(points.shape)
        for feature in range(points.shape[-1]):
            if len(self.atoms[feature]):
                pick = self._nearest(feature, points[..., feature])
                target[..., feature] = self.atoms[feature][pick]
                distance[..., feature] = np.abs(target[..., feature] - points[..., feature])
                weight[..., feature] = self.atom_weight[feature][pick]
        return target, distance, weight

    def _nearest(self, feature: int, x: np.ndarray) -> np.ndarray:
        """Index of the atom of ``feature`` nearest each entry of x: one search among the midpoints."""
        values = self.atoms[feature]
        return np.searchsorted(0.5 * (values[:-1] + values[1:]), x)

    def atom_responsibility(self, distance: np.ndarray, weight: np.ndarray, width: float) -> np.ndarray:
        """Posterior probability that each coordinate is its nearest atom (versus spread over [0, 1])."""
        on_atom = self.atom_share * weight * np.exp(-0.5 * (distance / width) ** 2) / (width * math.sqrt(2 * math.pi))
        return on_atom / (on_atom + (1.0 - self.atom_share))

    def log_atoms(self, points: np.ndarray, width: float) -> np.ndarray:
        """Sum over features of the log-density of the per-feature model "one of the atoms (a normal of
        ``width`` about it), else uniform on [0, 1]", for points (..., n); shape (...)."""
        total = np.zeros(points.shape[:-1])
        # Feature by feature on contiguous columns: the enumeration scores millions of candidates.
        columns = np.ascontiguousarray(np.moveaxis(points, -1, 0))
        peak = 1.0 / (width * math.sqrt(2 * math.pi))
        for feature, x in enumerate(columns):
            share = self.atom_share[feature]
            if len(self.atoms[feature]) == 0 or share <= 0:
                continue
            pick = self._nearest(feature, x)
            gap = (self.atoms[feature][pick] - x) / width
            on_atom = (share * peak) * self.atom_weight[feature][pick] * np.exp(-0.5 * gap * gap)
            total += np.log(on_atom + (1.0 - share))
        return total

    def snap_exact(self, points: np.ndarray) -> np.ndarray:
        """Coordinates that already sit on an atom (within the final width) set to it exactly."""
        target, distance, weight = self.nearest_atoms(points)
        close = self.atom_responsibility(distance, weight, _FINAL_ATOM_WIDTH) > 0.5
        return np.where(close, target, points)


def _score(points: np.ndarray, model: _Prior, width: float) -> np.ndarray:
    """Log-score of candidate records (m, c, n): Gaussian prior + seen values (at ``width``) + box; shape (m, c)."""
    centred = (points - model.mean).reshape(-1, points.shape[-1])  # 2-D, so the product is one BLAS call
    log_prior = -0.5 * ((centred @ model.precision) * centred).sum(axis=-1).reshape(points.shape[:-1])
    outside = np.maximum(-points, points - 1.0)
    box = ((np.maximum(outside, 0.0) / _BOX_WIDTH) ** 2).sum(axis=-1)
    return log_prior + model.log_atoms(points, width) - 0.5 * box


# --- candidates and refinement -----------------------------------------------------------------------------------


def _starting_candidates(solutions: _SolutionSet, model: _Prior, samples: int, rng: np.random.Generator) -> np.ndarray:
    """Plane coordinates (m, samples, q) of candidates on each record's solution set.

    The first is the prior's most likely point of the set; then conditional Gaussian samples at the spreads of
    _SAMPLE_SPREADS (the prior restricted to the plane; moved onto the sphere for the Gaussian kernel), and, for
    the Gaussian kernel, directions uniform on the sphere, which find records the Gaussian prior finds unlikely.
    """
    m, q = solutions.base.shape[0], solutions.null.shape[1]
    if q == 0:
        return np.zeros((m, 1, 0))
    N = solutions.null
    H = N.T @ model.precision @ N  # (q, q), the prior's precision along the plane
    g = (solutions.base - model.mean) @ model.precision @ N  # (m, q)
    mode = _minimise_on_set(np.broadcast_to(H, (m, 1, q, q)), g[:, None, :], solutions)  # (m, 1, q)
    conditional_mean = -np.linalg.solve(H, g.T).T  # (m, q), the mode on the plane
    factor = np.linalg.cholesky(np.linalg.inv(H))  # (q, q)
    groups = len(_SAMPLE_SPREADS) + (solutions.centre is not None)
    per_group = max((samples - 1) // groups, 1)
    parts = [mode]
    for spread in _SAMPLE_SPREADS:
        draw = rng.standard_normal((m, per_group, q)) @ factor.T * spread
        parts.append(solutions.onto(conditional_mean[:, None, :] + draw))
    if solutions.centre is not None:
        remaining = max(samples - 1 - per_group * len(_SAMPLE_SPREADS), 1)
        parts.append(solutions.onto(solutions.centre[:, None, :] + rng.standard_normal((m, remaining, q))))
    return np.concatenate(parts, axis=1)


def _refine(solutions: _SolutionSet, model: _Prior, t: np.ndarray, width: float) -> np.ndarray:
    """One EM step per candidate: pull coordinates towards their nearest seen value (by responsibility at
    ``width``) and back inside the box, the prior keeping the rest; solved exactly on the solution set."""
    if t.shape[2] == 0:
        return t
    N = solutions.null
    points = solutions.points(t)
    target, distance, weight = model.nearest_atoms(points)
    pull = model.atom_responsibility(distance, weight, width) / width**2  # (m, c, n)
    outside = (points < 0.0) | (points > 1.0)
    box = np.where(outside, 1.0 / _BOX_WIDTH**2, 0.0)
    stiffness = pull + box
    goal = np.where(outside, np.clip(points, 0.0, 1.0), target)
    # Quadratic in t: 0.5 t' H t + g' t with H = N'(P + D)N and g = N'P(base - mean) + N'D(base - goal).
    H = (N.T @ model.precision @ N)[None, None] + np.einsum("ni,mcn,nj->mcij", N, stiffness, N)
    g = ((solutions.base - model.mean) @ model.precision @ N)[:, None, :] + np.einsum(
        "mcn,ni->mci", stiffness * (solutions.base[:, None, :] - goal), N
    )
    return _minimise_on_set(H, g, solutions)


def _minimise_on_set(H: np.ndarray, g: np.ndarray, solutions: _SolutionSet) -> np.ndarray:
    """argmin of 0.5 t' H t + g' t over each record's solution set (the plane, or the sphere in it).

    H : (m, c, q, q) symmetric positive definite, g : (m, c, q); returns t (m, c, q). On the sphere
    ||t - centre|| = radius this is a trust-region subproblem on the boundary: t - centre = -(H + lambda I)^-1 g'
    with lambda >= -smallest eigenvalue chosen so the length is the radius, found by bisection on every
    candidate at once.
    """
    if solutions.centre is None or solutions.radius is None:
        return -np.linalg.solve(H, g[..., None])[..., 0]
    centre, radius = solutions.centre[:, None, :], solutions.radius[:, None]
    g_centre = g + (H @ centre[..., None])[..., 0]  # the linear term for u = t - centre
    eigenvalues, vectors = np.linalg.eigh(H)
    rotated = (vectors.swapaxes(-1, -2) @ g_centre[..., None])[..., 0]  # (m, c, q)
    shift = eigenvalues - eigenvalues[..., :1]  # >= 0; lambda = delta - smallest eigenvalue, delta > 0
    scale = np.maximum(np.abs(eigenvalues).max(axis=-1), 1e-12)  # (m, c)
    gradient = np.linalg.norm(rotated, axis=-1)
    safe_radius = np.maximum(radius, 1e-300)
    low = np.full(radius.shape, 1e-14) * scale
    high = np.maximum(gradient / safe_radius, low * 2)
    # ||u(delta)|| falls as delta grows, from above the radius near 0 to at most the radius at ``high``.
    for _ in range(100):
        middle = np.sqrt(low) * np.sqrt(high)  # geometric: delta spans many orders of magnitude
        length = np.linalg.norm(rotated / (shift + middle[..., None]), axis=-1)
        too_long = length > radius
        low, high = np.where(too_long, middle, low), np.where(too_long, high, middle)
    u = -rotated / (shift + high[..., None])
    # The hard case (g' orthogonal to the smallest eigenvector): make up the length along that eigenvector.
    missing = np.sqrt(np.clip(radius**2 - (u**2).sum(axis=-1), 0.0, None))
    u[..., 0] = np.where(u[..., 0] >= 0, u[..., 0] + missing, u[..., 0] - missing) if u.shape[-1] else u[..., 0]
    return centre + (vectors @ u[..., None])[..., 0]


def _best_enumerated(solutions: _SolutionSet, model: _Prior, chosen: np.ndarray, score: np.ndarray) -> np.ndarray:
    """Replace each record's guess by a better-scoring point built from seen values, where one exists.

    Fixing f coordinates of the solution set (f = its dimension: the plane's for the linear kernel, one less on
    the sphere) to seen values leaves one point (two on a sphere); the other coordinates follow from the
    equations, and for discrete features only the true record's combination puts all of them on seen values
    too. All combinations when there are few (_ENUMERATION_BUDGET), else per fixed feature the values nearest
    the current guess, more of them where the prior is less sure of the coordinate. The fixed features are the
    ones the prior is surest of (fewest values to try); later rounds fix others, around the improved guess.

    chosen : (m, n), score : (m,) its final score; returns (m, n).
    """
    q = solutions.null.shape[1]
    on_sphere = solutions.centre is not None
    free = q - 1 if on_sphere else q
    discrete = [i for i in range(len(model.atoms)) if model.atom_share[i] >= _DISCRETE_SHARE]
    if free < 1 or len(discrete) < free:
        return chosen
    # How many seen values wide the prior's spread along the solution set is, per feature.
    N = solutions.null
    spread = np.sqrt(np.clip(np.einsum("iq,qr,ir->i", N, np.linalg.inv(N.T @ model.precision @ N), N), 0.0, None))
    gaps = np.array([np.median(np.diff(a)) if len(a) > 1 else np.inf for a in model.atoms])
    uncertainty = spread / gaps
    preference = sorted(discrete, key=lambda i: float(uncertainty[i]))
    result = chosen.copy()
    used: list[int] = []
    for _ in range(_ENUMERATION_ROUNDS):
        # A guess whose discrete coordinates all sit on seen values is the record (no other point of the set
        # does, for B in general position): only the others are searched, which keeps mbar = n - 1 cheap.
        near = model.nearest_atoms(result)[1][:, discrete] <= np.minimum(
            _SETTLED_DISTANCE, _SETTLED_GAPS * gaps[discrete]
        )
        settled = near.all(axis=1)
        rows = np.flatnonzero(~settled)
        order = [i for i in preference if i not in used] + [i for i in preference if i in used]
        fixed = _well_posed_features(N, order, free)
        if fixed is None or len(rows) == 0:
            break
        result[rows], score[rows] = _enumerate_round(
            solutions.subset(rows), model, result[rows], score[rows], fixed, uncertainty[fixed]
        )
        used += [i for i in fixed if i not in used]
        if len(used) == len(discrete):
            used = []  # every discrete feature has been fixed once: start over around the improved guesses
    return result


def _enumerate_round(
    solutions: _SolutionSet,
    model: _Prior,
    chosen: np.ndarray,
    score: np.ndarray,
    fixed: list[int],
    uncertainty: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """One round of :func:`_best_enumerated` with the features ``fixed``; returns the new guesses and scores."""
    m, free = len(chosen), len(fixed)
    on_sphere = solutions.centre is not None and solutions.radius is not None
    sizes = [len(model.atoms[i]) for i in fixed]
    tried = _values_per_feature(sizes, uncertainty, _ENUMERATION_BUDGET)
    grid = np.stack(np.meshgrid(*[np.arange(k) for k in tried], indexing="ij"), axis=-1).reshape(-1, free)  # (E, f)
    N_fixed = solutions.null[fixed]  # (f, q)
    inverse = np.linalg.pinv(N_fixed)  # (q, f)
    along = np.linalg.svd(N_fixed)[2][-1]  # (q,), the direction N_fixed leaves free (on a sphere)
    result, result_score = chosen.copy(), score.copy()
    chunk = max(1, _ENUMERATION_CHUNK_VALUES // (len(grid) * chosen.shape[1] * (2 if on_sphere else 1)))
    for start in range(0, m, chunk):
        rows = slice(start, min(start + chunk, m))
        r = rows.stop - rows.start
        # Per record and fixed feature, the seen values tried, nearest the current guess first.
        options = [_nearest_values(model.atoms[i], chosen[rows, i], k) for i, k in zip(fixed, tried, strict=True)]
        values = np.stack([options[j][:, grid[:, j]] for j in range(free)], axis=-1)  # (r, E, f)
        t = ((values - solutions.base[rows][:, None, fixed]).reshape(-1, free) @ inverse.T).reshape(r, -1, len(along))
        if on_sphere and solutions.centre is not None and solutions.radius is not None:
            # t + s along meets the sphere where s^2 + 2 s along.(t - c) + ||t - c||^2 - R^2 = 0.
            offset = t - solutions.centre[rows][:, None, :]
            half = offset @ along
            discriminant = half**2 - (offset**2).sum(axis=-1) + solutions.radius[rows][:, None] ** 2
            root = np.sqrt(np.where(discriminant >= 0, discriminant, np.nan))  # no meeting point: not a solution
            t = np.concatenate([t + (-half + root)[..., None] * along, t + (-half - root)[..., None] * along], axis=1)
        points = solutions.base[rows][:, None, :] + (t.reshape(-1, t.shape[-1]) @ solutions.null.T).reshape(
            r, -1, chosen.shape[1]
        )
        scores = np.nan_to_num(_score(points, model, _FINAL_ATOM_WIDTH), nan=-np.inf)
        best = np.argmax(scores, axis=1)
        top = scores[np.arange(r), best]
        better = top > score[rows]
        result[rows] = np.where(better[:, None], points[np.arange(r), best], chosen[rows])
        result_score[rows] = np.where(better, top, score[rows])
    return result, result_score


def _well_posed_features(null: np.ndarray, candidates: list[int], count: int) -> list[int] | None:
    """``count`` features from ``candidates`` (in order of preference) whose rows of ``null`` are independent
    enough to solve for the plane coordinates; None when there are not enough."""
    chosen: list[int] = []
    for feature in candidates:
        trial = null[[*chosen, feature]]
        if np.linalg.svd(trial, compute_uv=False)[-1] > 1e-3:
            chosen.append(feature)
            if len(chosen) == count:
                return chosen
    return None


def _values_per_feature(sizes: list[int], uncertainty: np.ndarray, budget: int) -> list[int]:
    """How many seen values to try per feature so their product stays within ``budget``: all when they fit,
    else one more at a time for the feature whose spread (in seen values) per value tried is largest."""
    tried = [1] * len(sizes)
    while True:
        open_ = [j for j in range(len(sizes)) if tried[j] < sizes[j]]
        if not open_:
            return tried
        j = max(open_, key=lambda k: (float(uncertainty[k]) + 1e-3) / tried[k])
        if math.prod(tried) // tried[j] * (tried[j] + 1) > budget:
            return tried
        tried[j] += 1


def _nearest_values(atoms: np.ndarray, x: np.ndarray, count: int) -> np.ndarray:
    """Per entry of x (r,), the ``count`` atoms nearest to it, nearest first; shape (r, count)."""
    order = np.argsort(np.abs(atoms[None, :] - x[:, None]), axis=1, kind="stable")[:, :count]
    return atoms[order]


# --- checks ------------------------------------------------------------------------------------------------------


def _as_matrix(values: np.ndarray, name: str) -> np.ndarray:
    matrix = np.asarray(values, dtype=np.float64)
    if matrix.ndim != 2 or matrix.shape[0] == 0 or matrix.shape[1] == 0:
        raise ValueError(f"{name} must be a non-empty 2-D array, got shape {matrix.shape}")
    if not np.isfinite(matrix).all():
        raise ValueError(f"{name} has non-finite values")
    return matrix


def _check_tolerance(tolerance: float) -> float:
    if not (math.isfinite(tolerance) and tolerance >= 0):
        raise ValueError(f"tolerance must be finite and >= 0, got {tolerance}")
    return float(tolerance)
