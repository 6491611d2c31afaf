"""What a malicious coordinator recovers through the requests it chooses: demonstrations, not tools.

The coordinator knows neither A_ij nor B_j but sends any request it likes with a valid certificate,
possibly helped by one column-block peer, which holds the column-block secret (docs/design.md section 2,
rule 5; docs/threat-model.md). Each function below is an attack the entities now refuse; the tests
and ``benchmarks/attacks.py`` run them against the old behaviour and against real entities:

- :func:`reconstruct_by_rescaling`: were the coordinator free to choose the per-feature scaling
  (low, high) of a kernel request, changing one feature at a time recovers every record of the
  cell and B_j exactly, for either kernel and any mbar;
- :func:`reconstruct_by_peer_scalings`: forged (validly tagged) scalings of one basis, with a peer;
- :func:`reconstruct_two_views`: a linear and a Gaussian view of one basis;
- :func:`bisect_change` and :func:`threshold_model`: an exact oracle (an error text, a DpEvaluate
  count) read by bisection;
- :func:`float_laplace_reachable`: Laplace noise drawn in floating point (Mironov 2012);
- :func:`old_solver_certifies`: the DpWeights solver before issue 27, whose success or failure told one
  training label apart.

What a column-block peer recovers from kernel rows alone is in :mod:`ppsvm.experiments.kernel_row_attacks`.
Every function is pure: arrays (or a query function) in, an array out.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from ppsvm.core import linear_svm
from ppsvm.core.dp_model import DpModel
from ppsvm.core.kernels import KernelName
from ppsvm.experiments.kernel_row_attacks import check_kernel_rows


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
    scaling of the same records adds mbar equations per record (docs/design.md rule 5). With
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
    """Records from a linear and a Gaussian view of the same basis B (docs/design.md rule 5: one basis, one view).

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
    K_linear, B = check_kernel_rows(K_linear, B)
    K_gaussian, _ = check_kernel_rows(K_gaussian, B)
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
    return _one_feature_model(feature, n, t, t + span)


def overflow_model(feature: int, t: float, n: int) -> bytes:
    """A DP model file whose scaling of ``feature`` overflows exactly on records with x_feature > t (t > 0).

    low_f = 0 and high_f = t / DBL_MAX, so x / (high - low) exceeds DBL_MAX exactly when x > t. An entity that
    failed on a non-finite scaled value answered "failed" exactly when some record lay above t: bisection on t
    read the feature's maximum (issue 27). Everything else is :func:`threshold_model`'s.
    """
    return _one_feature_model(feature, n, 0.0, t / np.finfo(np.float64).max)


def _one_feature_model(feature: int, n: int, low_f: float, high_f: float) -> bytes:
    """A DP model file deciding by sin of ``feature`` scaled with (low_f, high_f): D = 1, rho = e_feature, weights
    (0, 1), every other feature scaled by (0, 1) and unused."""
    low, high, rho = np.zeros(n), np.ones(n), np.zeros((1, n))
    low[feature], high[feature], rho[0, feature] = low_f, high_f, 1.0
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


def overflowed(X: np.ndarray, model_json: bytes) -> bool:
    """The bit the old entities answered: whether scaling ``X`` (m, n) by the model overflowed on some record."""
    model = DpModel.from_json(model_json.decode("utf-8"))
    span = np.asarray(model.high) - np.asarray(model.low)
    with np.errstate(over="ignore"):
        scaled = (X - np.asarray(model.low)) / np.where(span > 0, span, 1.0)
    return not bool(np.isfinite(scaled).all())


def hostile_dp_models(n: int) -> list[DpModel]:
    """DP model files a hostile coordinator may send for cells of ``n`` features: every number as extreme as the
    entity's bounds allow (:mod:`ppsvm.core.dp_model`), in spans, frequencies, weights, widths and basis values.

    Spans: subnormal (x / span overflows for almost any x), the threshold probe's, one that overflows itself, none
    (divisor 1, shifted by 1e308). Each with the mildest model, with rho and weights at their limits, and (public-only)
    with the widest and narrowest kernel widths and a basis on the box's corners.
    """
    from ppsvm.core.dp_model import MAX_KERNEL_WIDTH, MAX_THRESHOLD, MAX_WEIGHTS_L1
    from ppsvm.core.fourier import MAX_RHO_ROW_L1, SCALED_BOX

    top, tiny = float(np.finfo(np.float64).max), 5e-324
    spans = [(0.0, tiny), (0.0, 1.0 / top), (-top, top), (1e308, 1e308)]
    mild = DpModel(
        method="dp-hybrid",
        mechanism="laplace",
        epsilon=1.0,
        private=True,
        low=(0.0,) * n,
        high=(1.0,) * n,
        kernel_width=1.0,
        C=1.0,
        rho=((1.0,) * n,),
        weights=(0.3, -0.7),
    )
    # At the limit (n equal parts whose float sum may round above it: a hair below each).
    rho_edge = ((MAX_RHO_ROW_L1 / n * (1 - 1e-12),) * n, (-MAX_RHO_ROW_L1,) + (0.0,) * (n - 1))
    corners = ((SCALED_BOX,) * n, (-SCALED_BOX,) * n)
    models = []
    for low, high in spans:
        box = replace(mild, low=(low,) * n, high=(high,) * n)
        models.append(box)
        models.append(replace(box, rho=rho_edge, weights=(MAX_WEIGHTS_L1 / 4,) * 4, threshold=MAX_THRESHOLD))
        public = replace(box, method="public-only", mechanism="public", epsilon=None, private=False, rho=(), weights=())
        dual = (MAX_WEIGHTS_L1 / 2, -MAX_WEIGHTS_L1 / 2)
        models += [
            replace(public, kernel_width=width, basis=corners, dual_coef=dual) for width in (MAX_KERNEL_WIDTH, tiny)
        ]
    return models


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


def old_solver_certifies(Z: np.ndarray, y: np.ndarray, C: float, max_sweeps: int = 20_000) -> bool:
    """Whether the DpWeights solver before issue 27 answered on these features and labels (else it failed).

    Its rule, on today's coordinate descent: tighten the projected-gradient target (from 1e-10, by 10) until
    the float64 duality gap is <= GAP_BOUND; give up at rounding level (1e-14 (1 + ||w||)) or when the sweeps
    run out. Each target restarts from 0 (the old code went on from where it was), so single cases may differ
    from the old code's; the rule and its failures are the same.

    Parameters
    ----------
    Z : ndarray, shape (n, p)
        Rows of norm <= 1 (zhat).
    y : ndarray, shape (n,)
        Labels in {-1, +1}.
    C : float
    max_sweeps : int

    Returns
    -------
    bool
    """
    YZ = y[:, None] * Z
    problem = linear_svm.BoxDual.hinge(YZ, C / len(y))
    target = 1e-10
    while True:
        found = linear_svm.dual_coordinate_descent(
            problem, tol=target, rng=np.random.default_rng(0), max_sweeps=max_sweeps
        )
        if not found.converged:
            return False
        G = YZ @ found.w - 1.0
        if float(found.alpha @ G + problem.upper * np.maximum(-G, 0.0).sum()) <= linear_svm.GAP_BOUND:
            return True
        target /= 10.0
        if target < 1e-14 * (1.0 + math.sqrt(float(found.w @ found.w))):
            return False
