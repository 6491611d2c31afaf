"""Calibrated probabilities for the two-class models: Platt scaling of out-of-fold decision values.

A decision value K(x', B') u - gamma ranks records but is not a risk. Platt (1999) fits
P(+1 | f) = 1 / (1 + exp(A f + B)) to decision values of records the fit did not see; we use the
algorithm of Lin, Lin and Weng (2007, "A note on Platt's probabilistic outputs for support vector
machines", Machine Learning 68: Newton's method with backtracking on the smoothed targets
(N+ + 1) / (N+ + 2) and 1 / (N- + 2), computed without overflow).

Why Platt and not isotonic regression: two parameters estimate well from the few hundred records of a
hospital-sized federation, the map is smooth and monotone (a higher decision value never gets a lower risk),
and it cannot put probability 0 or 1 on a record; isotonic regression is a step function with as many
parameters as it has steps and needs thousands of records before it beats the sigmoid (Niculescu-Mizil and
Caruana 2005, "Predicting good probabilities with supervised learning"). The out-of-fold decision values come
from the same assembled kernel as the model, so calibration asks the entities for nothing more.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ppsvm.core.lp import Formulation, Task, solve_lp
from ppsvm.core.metrics import ranked_groups
from ppsvm.core.tuning import cross_validation_rows, fold_indices

# Lin, Lin and Weng's constants: iterations, the smallest backtracking step, the gradient tolerance and the
# ridge on the Hessian's diagonal that keeps it positive definite.
_MAX_ITERATIONS = 100
_MIN_STEP = 1e-10
_TOLERANCE = 1e-5
_RIDGE = 1e-12
# Reliability bins of the held-out records (tenths of them by predicted probability).
RELIABILITY_BINS = 10


@dataclass(frozen=True)
class Platt:
    """P(+1 | f) = 1 / (1 + exp(a f + b)) for a decision value f; a < 0 when higher values mean +1."""

    a: float
    b: float

    def probability(self, decision: np.ndarray) -> np.ndarray:
        """P(+1) of each decision value, shape as ``decision``; computed without overflow."""
        return _sides(self.a * np.asarray(decision, dtype=np.float64) + self.b)[0]


def fit_platt(decision: np.ndarray, labels: np.ndarray) -> Platt:
    """Platt's sigmoid fitted by Newton's method with backtracking (Lin, Lin and Weng 2007, algorithm 1).

    Parameters
    ----------
    decision : ndarray, shape (m,)
        Decision values of records the model that made them was not fitted on.
    labels : ndarray, shape (m,)
        +1 or -1.

    Returns
    -------
    Platt
        With a <= 0: decision values that rank the wrong way round give the constant map (a = 0).

    Raises
    ------
    ValueError
        Shapes differ, a value is not finite, or a label is not +-1.
    """
    f = np.asarray(decision, dtype=np.float64)
    y = np.asarray(labels, dtype=np.float64)
    if f.shape != y.shape or f.ndim != 1 or not len(f):
        raise ValueError(f"decision values {f.shape} and labels {y.shape} must be two vectors of one length")
    if not np.isfinite(f).all() or not np.isin(y, (-1.0, 1.0)).all():
        raise ValueError("Platt scaling needs finite decision values and labels of -1 or +1")
    positives = int(np.count_nonzero(y > 0))
    negatives = len(y) - positives
    # Smoothed targets: a maximum-likelihood fit to 0/1 targets overfits (and diverges on separable values).
    target = np.where(y > 0, (positives + 1.0) / (positives + 2.0), 1.0 / (negatives + 2.0))
    a, b = 0.0, math.log((negatives + 1.0) / (positives + 1.0))
    loss = _loss(f, target, a, b)
    for _ in range(_MAX_ITERATIONS):
        p, q = _sides(f * a + b)  # p = P(+1), q = 1 - p
        d2 = p * q
        d1 = target - p
        g1, g2 = float(f @ d1), float(d1.sum())
        if abs(g1) < _TOLERANCE and abs(g2) < _TOLERANCE:
            break
        h11, h22, h21 = float(f * f @ d2) + _RIDGE, float(d2.sum()) + _RIDGE, float(f @ d2)
        det = h11 * h22 - h21 * h21
        da, db = -(h22 * g1 - h21 * g2) / det, -(-h21 * g1 + h11 * g2) / det
        slope = g1 * da + g2 * db
        step = 1.0
        while step >= _MIN_STEP:
            candidate = _loss(f, target, a + step * da, b + step * db)
            if candidate < loss + 1e-4 * step * slope:
                a, b, loss = a + step * da, b + step * db, candidate
                break
            step /= 2.0
        else:
            break  # no descent along Newton's direction: as close as floating point gets
    if a > 0:
        # Values that rank records the wrong way round (a DP model's noise can do it): the best monotone map is the
        # constant, the smoothed targets' mean, so that a higher decision value never gets a lower probability.
        share = float(target.mean())
        return Platt(0.0, math.log((1.0 - share) / share))
    return Platt(a, b)


def _sides(z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(1 / (1 + e^z), e^z / (1 + e^z)) without overflow."""
    # 1 / (1 + e^z) = e^-z / (1 + e^-z): take the form whose exponent is <= 0.
    small = np.exp(-np.abs(z))
    p = np.where(z >= 0, small / (1.0 + small), 1.0 / (1.0 + small))
    return p, 1.0 - p


def _loss(f: np.ndarray, target: np.ndarray, a: float, b: float) -> float:
    """The cross-entropy of the smoothed targets under P(+1) = 1 / (1 + exp(a f + b))."""
    z = f * a + b
    # t z + log(1 + e^-z) for z >= 0, (t - 1) z + log(1 + e^z) otherwise: the same value, never overflowing.
    return float(np.sum(np.where(z >= 0, target * z, (target - 1.0) * z) + np.log1p(np.exp(-np.abs(z)))))


def out_of_fold_decisions(
    task: Task,
    K: np.ndarray,
    target: np.ndarray,
    nu: float,
    *,
    folds: int,
    seed: int,
    formulation: Formulation,
    max_rows: int | None = None,
    weights: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Decision values of (a stratified sample of) the training rows, each from the LP fitted without its fold.

    The folds are fitted at the model's nu, as the tuning's are. Scaling nu by (model rows / fold rows), to keep
    the error term's weight per record, changed the test Brier score by less than 1e-4 at nu = 0.1, 1 and 10
    (40,000 synthetic rows, 8,000 sampled, mbar 19): not worth a second convention.

    Parameters
    ----------
    K : ndarray, shape (m, p)
        The kernel the model was solved on (at its chosen width).
    target : ndarray, shape (m,)
    nu : float
        The model's nu.
    max_rows : int, optional
        Rows to use at most (default :func:`ppsvm.core.tuning.tuning_row_limit` of p); a stratified sample above.
    weights : ndarray, shape (m,), optional
        The rows' weights the model was solved with; each fold's fit uses its rows'.

    Returns
    -------
    (rows, decisions) : ndarray of int, shape (k,), and ndarray, shape (k,)
        The rows used and their out-of-fold decision values.
    """
    rows = cross_validation_rows(task, target, K.shape[1], seed, max_rows)
    sample, labels = K[rows], target[rows]
    sample_weights = None if weights is None else weights[rows]
    decisions = np.empty(len(rows))
    for held in fold_indices(task, labels, min(folds, len(rows)), seed):
        keep = np.ones(len(rows), dtype=bool)
        keep[held] = False
        fold_weights = None if sample_weights is None else sample_weights[keep]
        fit = solve_lp(task, np.asfortranarray(sample[keep]), labels[keep], nu, formulation, fold_weights)
        decisions[held] = sample[held] @ fit.u - fit.gamma
    return rows, decisions


def calibration_record(
    platt: Platt, decisions: np.ndarray, labels: np.ndarray, positive_share: float
) -> dict[str, Any]:
    """What a model file records of its calibration: the method, a and b, and the Brier score on the decision values
    it was fitted on against always predicting ``positive_share`` (the training share of +1).

    Parameters
    ----------
    decisions, labels : ndarray, shape (k,)
    """
    return {
        "method": "platt",
        "positive_share": positive_share,
        "rows": len(labels),
        "a": platt.a,
        "b": platt.b,
        **probability_figures(labels, platt.probability(decisions), positive_share),
    }


def brier_score(labels: np.ndarray, probability: np.ndarray) -> float:
    """Mean squared difference between P(+1) and the outcome (1 for +1, 0 for -1); shapes (m,)."""
    return float(np.mean((np.asarray(probability) - (np.asarray(labels) > 0)) ** 2))


def reliability(labels: np.ndarray, probability: np.ndarray, bins: int = RELIABILITY_BINS) -> list[dict[str, float]]:
    """The records ranked by P(+1) in ``bins`` nearly equal groups: each group's mean predicted and observed rate.

    Parameters
    ----------
    labels : ndarray, shape (m,), values in {-1, +1}
    probability : ndarray, shape (m,)

    Returns
    -------
    list of dict
        {"predicted", "observed", "n"} per non-empty group, from the lowest probabilities up.
    """
    return [
        {
            "predicted": float(np.mean(probability[group])),
            "observed": float(np.mean(labels[group] > 0)),
            "n": int(group.size),
        }
        for group in ranked_groups(probability, bins)
    ]


def probability_figures(labels: np.ndarray, probability: np.ndarray, positive_share: float) -> dict[str, Any]:
    """How good held-out probabilities are: the Brier score, the score of always predicting the training share of
    +1 (the class-frequency baseline a calibrated model must beat), and the reliability table (:func:`reliability`).

    Parameters
    ----------
    labels : ndarray, shape (m,), values in {-1, +1}
    probability : ndarray, shape (m,)
        P(+1) of each record.
    """
    return {
        "brier": brier_score(labels, probability),
        "brier_class_frequency": brier_score(labels, np.full(len(labels), positive_share)),
        "reliability": reliability(labels, probability),
    }
