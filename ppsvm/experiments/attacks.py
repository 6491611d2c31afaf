"""What an adversary can recover from random-kernel blocks: demonstrations, not tools.

Two adversaries are modelled (DESIGN.md sections 1 and 2):

- **A column-block peer** knows B_j (it shares the secret) and sees kernel rows
  K(A_ij, B_j') of another entity's records. :func:`reconstruct_gaussian` and
  :func:`reconstruct_linear` try to recover each record from its kernel row.
  With mbar >= n_j + 1 (Gaussian) or mbar >= n_j (linear) a row pins its
  record down; with mbar < n_j (privacy rule 3) the exact solutions form a
  sphere (Gaussian) or an affine subspace (linear) of dimension n_j - mbar, and
  records far apart inside [0, 1]^n_j have identical kernel rows. Note what
  rule 3 does *not* hide: the component of the record along the affine hull of
  the mbar points (Gaussian) or along the row space of B_j (linear) is
  determined exactly; only the remaining n_j - mbar directions are free.
- **A coordinator** that knows neither A_ij nor B_j but chooses the per-feature
  ``Scaling`` (low, high) of a kernel request. :func:`reconstruct_by_rescaling`
  shows that changing the scaling of one feature at a time, with an otherwise
  honest request, any mbar, and bounds that still cover the honest ones,
  recovers every record of the cell and B_j exactly, for either kernel.

The attacks of issue 10 (a malicious coordinator, possibly helped by one column-block peer)
follow: :func:`reconstruct_by_peer_scalings` (forged scalings of one basis),
:func:`reconstruct_two_views` (a linear and a Gaussian view of one basis), :func:`bisect_change`
(an exact oracle read by bisection) and :func:`float_laplace_reachable` (floating-point Laplace
noise, Mironov 2012).

Every function is pure: arrays (or a query function) in, a :class:`Reconstruction` (or an array) out.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from itertools import combinations

import numpy as np
from scipy.optimize import least_squares, linprog

from ppsvm.core.dp_model import DpModel
from ppsvm.core.kernels import KernelName

# A start "fits equally well" when its largest residual (in squared-distance units for the
# Gaussian kernel, kernel units for the linear one) is below this.
FIT_TOLERANCE = 1e-10


@dataclass(frozen=True)
class Reconstruction:
    """The adversary's best guess for each record, and how far apart equally good guesses are.

    Attributes
    ----------
    X : ndarray, shape (m, n)
        Best solution per kernel row (smallest residual; the minimum-norm solution for the
        linear kernel).
    residual : ndarray, shape (m,)
        Largest absolute residual of ``X[k]``.
    pair : ndarray, shape (m, 2, n)
        Per row, the two solutions found that fit to ``FIT_TOLERANCE`` and lie farthest apart
        (both equal to ``X[k]`` when only one was found).
    spread : ndarray, shape (m,)
        ``||pair[k, 0] - pair[k, 1]||``: a lower bound on the diameter of the set of records in
        [0, 1]^n with this kernel row. Near 0 means the row pins the record down.
    solution_dim : int
        Dimension of the set of exact solutions in R^n for B in general position: linear
        n - rank(B); Gaussian max(n - mbar, 0), a sphere of that dimension (two points when
        mbar = n, one when mbar > n).
    """

    X: np.ndarray
    residual: np.ndarray
    pair: np.ndarray
    spread: np.ndarray
    solution_dim: int


def reconstruct_gaussian(
    K: np.ndarray,
    B: np.ndarray,
    mu: float,
    *,
    starts: int = 8,
    rng: np.random.Generator,
    tolerance: float = FIT_TOLERANCE,
) -> Reconstruction:
    """Recover records from Gaussian kernel rows against known points, by multi-start least squares.

    Row k gives the squared distances d_r^2 = -log(K[k, r]) / mu from the record a to each
    known point b_r; the residuals ||a - b_r||^2 - d_r^2 are minimised over a in [0, 1]^n
    (features are scaled to the unit box, which the adversary knows) from ``starts`` uniform
    random starting points.

    Parameters
    ----------
    K : ndarray, shape (m, mbar)
        Kernel rows exp(-mu ||a_k - b_r||^2), entries in (0, 1].
    B : ndarray, shape (mbar, n)
        The known points.
    mu : float
        The Gaussian width, > 0.
    starts : int
        Random starts per row.
    rng : numpy.random.Generator
        Draws the starting points.
    tolerance : float
        Largest residual (squared-distance units) of a start that counts as an exact fit.

    Returns
    -------
    Reconstruction
        ``spread`` is the largest distance between two exactly fitting starts.
    """
    K, B = _check(K, B)
    if not mu > 0:
        raise ValueError(f"Gaussian width mu must be > 0, got {mu}")
    if starts < 1:
        raise ValueError(f"starts must be >= 1, got {starts}")
    m, (mbar, n) = K.shape[0], B.shape
    squared = -np.log(np.clip(K, np.finfo(np.float64).tiny, None)) / mu
    X, residual, pair = np.empty((m, n)), np.empty(m), np.empty((m, 2, n))
    for k in range(m):

        def residuals(a: np.ndarray, d2: np.ndarray = squared[k]) -> np.ndarray:
            return ((a - B) ** 2).sum(axis=1) - d2

        def jacobian(a: np.ndarray) -> np.ndarray:
            return 2.0 * (a - B)

        solutions, errors = [], []
        for _ in range(starts):
            fit = least_squares(
                residuals,
                rng.random(n),
                jac=jacobian,
                bounds=(0.0, 1.0),
                method="dogbox",
                x_scale=1.0,
                xtol=1e-15,
                ftol=1e-15,
                gtol=1e-15,
                max_nfev=100,
            )
            solutions.append(fit.x)
            errors.append(np.abs(fit.fun).max())
        best = int(np.argmin(errors))
        X[k], residual[k] = solutions[best], errors[best]
        fitting = [s for s, e in zip(solutions, errors, strict=True) if e <= tolerance] or [solutions[best]]
        pair[k] = farthest_pair(np.asarray(fitting))
    return _result(X, residual, pair, max(n - mbar, 0))


def reconstruct_linear(K: np.ndarray, B: np.ndarray, *, rcond: float = 1e-10) -> Reconstruction:
    """Recover records from linear kernel rows k = B a against known B.

    The minimum-norm least-squares solution is the record when rank(B) = n (mbar >= n). Otherwise
    every a + z with B z = 0 has the same kernel row: for each row an exactly fitting point inside
    [0, 1]^n is found by a small LP (the one deepest inside the box), and the longest segment
    through it along a null-space basis direction that stays in the box gives two records with
    identical kernel rows.

    Parameters
    ----------
    K : ndarray, shape (m, mbar)
        Kernel rows B a_k.
    B : ndarray, shape (mbar, n)
    rcond : float
        Singular values below ``rcond`` times the largest count as zero.

    Returns
    -------
    Reconstruction
        ``X`` is the minimum-norm solution (it may leave the box); ``pair`` holds the segment's
        end points, both in [0, 1]^n to rounding (or ``X`` twice when rank(B) = n or the row fits
        no point of the box).
    """
    K, B = _check(K, B)
    _, singular, Vt = np.linalg.svd(B)
    rank = int((singular > rcond * singular[0]).sum())
    X = np.linalg.lstsq(B, K.T, rcond=rcond)[0].T
    residual = np.abs(X @ B.T - K).max(axis=1)
    null = Vt[rank:].T  # (n, n - rank), orthonormal columns with B @ null ~ 0
    pair = np.stack([X, X], axis=1)
    if null.shape[1]:
        for k in range(len(X)):
            inside = _deepest_in_box(X[k], null)
            if inside is not None:
                pair[k] = max((_chord(inside, z) for z in null.T), key=lambda p: np.linalg.norm(p[0] - p[1]))
    return _result(X, residual, pair, null.shape[1])


def reconstruct_by_rescaling(
    query: Callable[[np.ndarray, np.ndarray], np.ndarray],
    low: np.ndarray,
    high: np.ndarray,
    kernel: KernelName,
    mu: float = 1.0,
) -> tuple[np.ndarray, np.ndarray]:
    """A coordinator's attack through a kernel request's per-feature scaling, were the coordinator free to choose it.

    Such an entity would answer K((A - low) / (high - low), B') for whatever (low, high) it is
    sent; ppsvm entities take (low, high) only from tagged column-block ranges for this reason. The
    attack changes one feature f at a time to s + x_f / c (x_f its honestly scaled value) with
    (s, c) = (0, 2), (1/2, 2) and, Gaussian only, (0, 4), and subtracts the honest answer:

    - linear: the differences are (s + x_f (1/c - 1)) b_f', so the two queries give b_f and x_f;
    - Gaussian, on squared distances -log(K) / mu: (s + x_f / c - b_f)^2 - (x_f - b_f)^2 is a
      known combination of x_f^2, x_f, x_f b_f and b_f; three queries solve for x_f, then b_f.

    Every scaling sent contains the honest one (new low <= low, new high >= high), so the
    entity's own records still map into [0, 1] and an entity that checks that its range is
    covered would serve the requests too. 2 n + 1 queries (linear) or 3 n + 1 (Gaussian), any mbar.

    Parameters
    ----------
    query : callable (low, high) -> ndarray, shape (m, mbar)
        One kernel request with that scaling (all other request fields fixed).
    low, high : ndarray, shape (n,)
        The honest scaling (the column block's min and max, which the coordinator learns anyway).
    kernel : {"linear", "gaussian"}
    mu : float
        The Gaussian width used by ``query``.

    Returns
    -------
    A : ndarray, shape (m, n)
        The cell's records in their original units.
    B : ndarray, shape (mbar, n)
        The column block's secret random matrix.
    """
    low, high = np.asarray(low, dtype=np.float64), np.asarray(high, dtype=np.float64)
    width = np.where(high > low, high - low, 1.0)

    def ask(f: int, shift: float, stretch: float) -> np.ndarray:
        """The answer with feature f mapped to shift + x_f / stretch, as kernel or squared distances."""
        lo, hi = low.copy(), high.copy()
        lo[f] = low[f] - shift * stretch * width[f]
        hi[f] = lo[f] + stretch * width[f]
        answer = query(lo, hi)
        return answer if kernel == "linear" else -np.log(answer) / mu

    base = ask(0, 0.0, 1.0)
    m, n = base.shape[0], low.size
    X, B = np.empty((m, n)), np.empty((base.shape[1], n))
    for f in range(n):
        halved = ask(f, 0.0, 2.0) - base  # linear: -x b'/2;     Gaussian: -3x^2/4 + x b
        moved = ask(f, 0.5, 2.0) - base  # linear: (1 - x) b'/2; Gaussian: that + 1/4 + x/2 - b
        if kernel == "linear":
            B[:, f] = 2.0 * (moved - halved).mean(axis=0)
            X[:, f] = -2.0 * halved @ B[:, f] / (B[:, f] @ B[:, f])
        else:
            half_minus_b = moved - halved - 0.25  # x/2 - b
            quarter = ask(f, 0.0, 4.0) - base  # -15x^2/16 + 3x b/2
            square = (16.0 / 3.0) * (quarter - 1.5 * halved).mean(axis=1, keepdims=True)  # x^2
            # halved = -x^2/4 - x (x/2 - b): linear in x once x^2 is known; least squares over the points.
            X[:, f] = -((halved + square / 4.0) * half_minus_b).sum(axis=1) / (half_minus_b**2).sum(axis=1)
            B[:, f] = (X[:, [f]] / 2.0 - half_minus_b).mean(axis=0)
    return low + X * width, B


def farthest_pair(points: np.ndarray) -> np.ndarray:
    """The two rows of ``points`` (shape (p, n), p >= 1) farthest apart, shape (2, n)."""
    if len(points) == 1:
        return np.stack([points[0], points[0]])
    i, j = max(combinations(range(len(points)), 2), key=lambda ij: np.linalg.norm(points[ij[0]] - points[ij[1]]))
    return np.stack([points[i], points[j]])


def _deepest_in_box(particular: np.ndarray, null: np.ndarray) -> np.ndarray | None:
    """The point particular + null t in [0, 1]^n farthest from the box's faces (None if none fits)."""
    n, d = null.shape
    # Variables (t, s): maximise s subject to s <= particular + null t <= 1 - s.
    cost = np.zeros(d + 1)
    cost[-1] = -1.0
    ones = np.ones((n, 1))
    A_ub = np.vstack([np.hstack([-null, ones]), np.hstack([null, ones])])
    b_ub = np.concatenate([particular, 1.0 - particular])
    fit = linprog(cost, A_ub=A_ub, b_ub=b_ub, bounds=[(None, None)] * d + [(None, 0.5)], method="highs")
    if fit.status != 0 or fit.x[-1] < 0:
        return None
    return particular + null @ fit.x[:-1]


def _chord(point: np.ndarray, direction: np.ndarray) -> np.ndarray:
    """End points of the longest segment point + t direction inside [0, 1]^n, shape (2, n)."""
    moving = np.abs(direction) > 1e-12
    to_low, to_high = -point[moving] / direction[moving], (1.0 - point[moving]) / direction[moving]
    t_min, t_max = np.minimum(to_low, to_high).max(), np.maximum(to_low, to_high).min()
    return np.stack([point + t_min * direction, point + t_max * direction])


def _check(K: np.ndarray, B: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    K, B = np.asarray(K, dtype=np.float64), np.asarray(B, dtype=np.float64)
    if K.ndim != 2 or B.ndim != 2 or K.shape[1] != B.shape[0]:
        raise ValueError(f"K must be (m, mbar) and B (mbar, n); got shapes {K.shape} and {B.shape}")
    return K, B


def _result(X: np.ndarray, residual: np.ndarray, pair: np.ndarray, solution_dim: int) -> Reconstruction:
    spread = np.linalg.norm(pair[:, 0] - pair[:, 1], axis=1)
    return Reconstruction(X=X, residual=residual, pair=pair, spread=spread, solution_dim=solution_dim)


# --- attacks of issue 10 (a malicious coordinator, possibly helped by one column-block peer) ---------------------


def reconstruct_by_peer_scalings(
    query: Callable[[np.ndarray, np.ndarray], np.ndarray],
    low: np.ndarray,
    high: np.ndarray,
    B: np.ndarray,
    kernel: KernelName,
    mu: float = 1.0,
) -> np.ndarray:
    """A column-block peer's attack through forged (validly tagged) scalings of the same basis B_j.

    The peer holds the column-block secret, so it knows B_j and can tag a range of its choosing as
    its own; the column block's scaling is the min and max over its members' ranges, so a forged
    range that contains the honest block range *is* the scaling the target applies. Each new
    scaling of the same records adds mbar equations per record (DESIGN.md rule 5). With
    u = (x - low) / (high - low) the honestly scaled record and b_r the known points:

    - linear, n + 1 requests: widening feature f's high to low + 2 (high - low) maps u_f to u_f / 2,
      so the answer minus the honest one is -b_rf u_f / 2;
    - Gaussian, 2 n + 1 requests, on squared distances -log(K) / mu: u_f -> u_f / 2 changes them by
      (u_f/2 - b_rf)^2 - (u_f - b_rf)^2, and widening low to low - (high - low), u_f -> (u_f + 1) / 2,
      by ((u_f + 1)/2 - b_rf)^2 - (u_f - b_rf)^2; the second minus the first is (2 u_f + 1)/4 - b_rf.

    Every scaling sent contains the honest one, so the target's records still map into [0, 1].

    Parameters
    ----------
    query : callable (low, high) -> ndarray, shape (m, mbar)
        One kernel request of the target under that block scaling (mbar >= 1; 1 suffices).
    low, high : ndarray, shape (n,)
        The honest block scaling.
    B : ndarray, shape (mbar, n)
        The column block's random points, which the peer derives from the secret.
    kernel : {"linear", "gaussian"}
    mu : float
        The Gaussian width of ``query``.

    Returns
    -------
    ndarray, shape (m, n)
        The target's records in their original units.
    """
    low, high = np.asarray(low, dtype=np.float64), np.asarray(high, dtype=np.float64)
    B = np.asarray(B, dtype=np.float64)
    width = np.where(high > low, high - low, 1.0)

    def ask(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        answer = np.asarray(query(lo, hi), dtype=np.float64)
        return answer if kernel == "linear" else -np.log(answer) / mu

    base = ask(low, high)
    U = np.empty((base.shape[0], low.size))
    for f in range(low.size):
        hi = high.copy()
        hi[f] = low[f] + 2.0 * width[f]
        halved = ask(low, hi) - base
        if kernel == "linear":
            U[:, f] = -2.0 * halved @ B[:, f] / (B[:, f] @ B[:, f])
            continue
        lo = low.copy()
        lo[f] = low[f] - width[f]
        moved = ask(lo, high) - base
        U[:, f] = (2.0 * (moved - halved + B[:, f]) - 0.5).mean(axis=1)
    return low + U * width


def reconstruct_two_views(K_linear: np.ndarray, K_gaussian: np.ndarray, B: np.ndarray, mu: float) -> np.ndarray:
    """Records from a linear and a Gaussian view of the same basis B (DESIGN.md rule 5: one basis, one view).

    The linear rows give B a; the Gaussian rows give ||a - b_r||^2 = -log(K_r) / mu, hence
    ||a||^2 = ||a - b_r||^2 + 2 b_r'a - ||b_r||^2 (averaged over r). At mbar = n - 1 with B of full
    row rank, a = a0 + t z with a0 the minimum-norm solution of B a = k, z the unit null direction,
    and t = +-sqrt(||a||^2 - ||a0||^2): two candidates, one of them the record.

    Parameters
    ----------
    K_linear, K_gaussian : ndarray, shape (m, mbar)
    B : ndarray, shape (mbar, n), mbar = n - 1
    mu : float

    Returns
    -------
    ndarray, shape (m, 2, n)
        The two candidates per record (in the scaled units of the kernels).
    """
    K_linear, B = _check(K_linear, B)
    K_gaussian, _ = _check(K_gaussian, B)
    mbar, n = B.shape
    if mbar != n - 1:
        raise ValueError(f"two views pin a record at mbar = n - 1 = {n - 1}; got mbar = {mbar}")
    squared = -np.log(np.clip(K_gaussian, np.finfo(np.float64).tiny, None)) / mu
    norm2 = (squared + 2.0 * K_linear - (B**2).sum(axis=1)).mean(axis=1)
    a0 = np.linalg.lstsq(B, K_linear.T, rcond=None)[0].T
    z = np.linalg.svd(B)[2][-1]
    t = np.sqrt(np.clip(norm2 - (a0**2).sum(axis=1), 0.0, None))
    return np.stack([a0 + t[:, None] * z, a0 - t[:, None] * z], axis=1)


def bisect_change(oracle: Callable[[float], object], lo: float, hi: float, steps: int) -> float:
    """A point where ``oracle`` changes its answer, by bisection between two points whose answers differ.

    Keeps [a, b] with oracle(a) != oracle(b): the answer changes somewhere in between. Against an
    exact oracle that changes only at private values (an error count as a threshold crosses a
    record, a count of non-finite rows), the result converges to one of them.

    Returns
    -------
    float
        The midpoint of the final interval (``steps`` halvings after the two end queries).
    """
    a, b = float(lo), float(hi)
    at_a = oracle(a)
    if oracle(b) == at_a:
        raise ValueError("the oracle answers the same at both ends: nothing to bisect")
    for _ in range(steps):
        middle = 0.5 * (a + b)
        if oracle(middle) == at_a:
            a = middle
        else:
            b = middle
    return 0.5 * (a + b)


def threshold_model(feature: int, t: float, n: int, span: float = 1e3) -> bytes:
    """A DP model file whose decision is +1 exactly when x_feature >= t: sin((x_f - t) / span) with |.| < pi/2.

    The probe a malicious coordinator sends to DpEvaluate to learn whether records lie above ``t``.
    D = 1, rho = e_feature, weights (0, 1), scaling low_f = t, high_f = t + span (other features unused).

    Parameters
    ----------
    feature : int
        The feature the threshold applies to, in [0, n).
    t : float
    n : int
        Features of the cell the model is sent to.
    span : float
        Scaling width; large enough that (x_f - t) / span stays within (-pi/2, pi/2).

    Returns
    -------
    bytes
        The model file's UTF-8 JSON.
    """
    low, high, rho = np.zeros(n), np.ones(n), np.zeros((1, n))
    low[feature], high[feature], rho[0, feature] = t, t + span, 1.0
    model = DpModel(
        method="dp-hybrid",
        mechanism="laplace",
        epsilon=1.0,
        private=True,
        low=tuple(low.tolist()),
        high=tuple(high.tolist()),
        kernel_width=1.0,
        C=1.0,
        rho=tuple(map(tuple, rho.tolist())),
        weights=(0.0, 1.0),
    )
    return model.to_json().encode("utf-8")


_UNIT_STEPS = 2**53  # numpy's uniform doubles are k / 2^53


def _numpy_laplace_noise(k: int, scale: float) -> float:
    """The noise numpy's Generator.laplace(0.0, scale) returns for the uniform draw U = k / 2^53, operation by
    operation."""
    U = k / _UNIT_STEPS
    if U >= 0.5:
        return 0.0 - scale * math.log((2.0 - U) - U)
    return 0.0 + scale * math.log(U + U)


def float_laplace_reachable(output: float, loc: float, scale: float) -> bool:
    """Whether ``loc + numpy.random.Generator.laplace(0.0, scale)`` can equal ``output`` exactly (Mironov 2012).

    Laplace noise drawn in floating point takes one of 2^53 values, and loc + noise is rounded to a
    double: the doubles reachable from two neighbouring values of loc differ. An output that is not
    reachable from loc' rules loc' out with certainty, which no epsilon-DP mechanism allows. The
    noise is monotone in the draw k on each of numpy's two branches (U < 1/2 and U >= 1/2), so a
    binary search per branch finds whether some k gives ``output`` exactly.
    """

    def value(k: int) -> float:
        return loc + _numpy_laplace_noise(k, scale)

    for first, last in ((1, 2**52 - 1), (2**52, _UNIT_STEPS - 1)):
        if value(first) > output or value(last) < output:
            continue
        a, b = first, last
        while a < b:
            middle = (a + b) // 2
            if value(middle) < output:
                a = middle + 1
            else:
                b = middle
        if value(a) == output:
            return True
    return False
