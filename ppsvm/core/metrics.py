"""Evaluation figures: error rate and AUC, the confusion matrix and its rates, calibration by score decile (classify),
relative error and RMSE (regress), per-class score histograms."""

from __future__ import annotations

from typing import Any

import numpy as np


def error_rate(labels: np.ndarray, decision: np.ndarray, weights: np.ndarray | None = None) -> float:
    """Fraction of records with sign(decision) != label; a decision of 0 counts as +1.

    Parameters
    ----------
    labels : ndarray, shape (m,), values in {-1, +1}
    decision : ndarray, shape (m,)
    weights : ndarray, shape (m,), optional
        Records' weights (> 0): the misclassified records' share of the total weight.
    """
    predicted = np.where(decision >= 0, 1.0, -1.0)
    # np.average without weights is np.mean.
    return float(np.average(predicted != labels, weights=weights))


def auc(labels: np.ndarray, decision: np.ndarray) -> float:
    """Area under the ROC curve (Mann-Whitney statistic, ties counted half); NaN with one class or a NaN decision.

    Parameters
    ----------
    labels : ndarray, shape (m,), values in {-1, +1}
    decision : ndarray, shape (m,)
    """
    positive = labels > 0
    n_pos, n_neg = int(positive.sum()), int((~positive).sum())
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    if np.isnan(decision).any():
        return float("nan")
    # Average ranks by numpy, not scipy.stats.rankdata: importing scipy.stats took 0.5 to 2.2 s, the first
    # entity-alone baseline of every entity process paid it (issue 29).
    _, tie, counts = np.unique(decision, return_inverse=True, return_counts=True)
    ranks = (np.cumsum(counts) - (counts - 1) / 2)[tie]
    return float((ranks[positive].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def relative_error(targets: np.ndarray, predictions: np.ndarray, weights: np.ndarray | None = None) -> float:
    """The norm ratio ||predictions - targets||_2 / ||targets||_2 (the measure Fung & Mangasarian's printed errors fit,
    not their eq. (4.17), a sum of pointwise relative errors); shapes (m,).

    With ``weights`` w (shape (m,), > 0) both norms are weighted: sqrt(sum w (p - t)^2) / sqrt(sum w t^2).
    """
    # Multiplying by 1.0 changes no bit: the unweighted ratio as before weights existed.
    root = 1.0 if weights is None else np.sqrt(weights)
    norm = float(np.linalg.norm(root * targets))
    if norm == 0.0:
        return float("inf") if np.any(predictions != targets) else 0.0
    return float(np.linalg.norm(root * (predictions - targets)) / norm)


def rmse(targets: np.ndarray, predictions: np.ndarray) -> float:
    """Root mean squared error; shapes (m,)."""
    return float(np.sqrt(np.mean((predictions - targets) ** 2)))


def trivial_baseline(task: str, targets: np.ndarray) -> dict[str, float]:
    """The figures of a model that ignores the features, to print beside a real one's.

    classify: the majority class for everyone (its error is the minority share) and a constant score (AUC 0.5);
    regress: the mean target for everyone (relative error ||y - mean|| / ||y||, RMSE the standard deviation).
    A model near these does not predict, whatever else it reports.

    Parameters
    ----------
    task : {"classify", "regress"}
    targets : ndarray, shape (m,), m >= 1
        Labels in {-1, +1} or regression targets.
    """
    if task == "classify":
        positive = float(np.mean(targets > 0))
        return {"majority_error_rate": min(positive, 1.0 - positive), "constant_auc": 0.5}
    constant = np.full(len(targets), float(np.mean(targets)))
    return {"mean_relative_error": relative_error(targets, constant), "mean_rmse": rmse(targets, constant)}


# Score bins of the calibration summary: deciles of the decision values.
CALIBRATION_BINS = 10
# Thresholds of the ROC curve in a report: enough for a smooth plot, few enough for a JSON line.
ROC_POINTS = 101


def classification_report(labels: np.ndarray, decision: np.ndarray) -> dict[str, Any]:
    """What a clinician asks beyond error and AUC: the confusion matrix, sensitivity, specificity, balanced
    accuracy, and how the observed positive rate rises with the score (calibration of an uncalibrated score).

    Parameters
    ----------
    labels : ndarray, shape (m,), values in {-1, +1}
    decision : ndarray, shape (m,)
        Predict +1 where decision >= 0.

    Returns
    -------
    dict
        confusion_matrix {"true_positive", "false_positive", "true_negative", "false_negative"}; sensitivity
        (true positive rate; NaN without positives), specificity (true negative rate; NaN without negatives),
        balanced_accuracy (their mean); calibration: one entry per tenth of the records ranked by decision value
        (per record below 10 records; tied values may fall in neighbouring entries), each {"score_low",
        "score_high", "n", "positive_rate"}; roc: [false positive rate, true
        positive rate] pairs from (0, 0) to (1, 1) at up to :data:`ROC_POINTS` thresholds (quantiles of the
        decision values; empty with one class).
    """
    positive, predicted = labels > 0, decision >= 0
    tp, fp = int(np.sum(positive & predicted)), int(np.sum(~positive & predicted))
    tn, fn = int(np.sum(~positive & ~predicted)), int(np.sum(positive & ~predicted))
    sensitivity = tp / (tp + fn) if tp + fn else float("nan")
    specificity = tn / (tn + fp) if tn + fp else float("nan")
    calibration = [
        {
            "score_low": float(decision[chunk].min()),
            "score_high": float(decision[chunk].max()),
            "n": int(chunk.size),
            "positive_rate": float(np.mean(positive[chunk])),
        }
        for chunk in ranked_groups(decision, CALIBRATION_BINS)
    ]
    return {
        "confusion_matrix": {"true_positive": tp, "false_positive": fp, "true_negative": tn, "false_negative": fn},
        "sensitivity": sensitivity,
        "specificity": specificity,
        "balanced_accuracy": (sensitivity + specificity) / 2,
        "calibration": calibration,
        "roc": roc_points(labels, decision),
    }


def ranked_groups(scores: np.ndarray, bins: int) -> list[np.ndarray]:
    """The indices of ``scores`` (m,) ranked from lowest (stable on ties), cut into ``min(bins, m)`` nearly equal
    groups, none empty: the rows of a calibration or reliability table."""
    order = np.argsort(scores, kind="stable")
    return [group for group in np.array_split(order, min(bins, len(order))) if group.size] if len(order) else []


def roc_points(labels: np.ndarray, decision: np.ndarray, points: int = ROC_POINTS) -> list[list[float]]:
    """[false positive rate, true positive rate] of predicting +1 where decision >= t, for t from above the
    largest value down through quantiles of the values: a curve from (0, 0) to (1, 1); empty with one class."""
    positive = labels > 0
    n_pos, n_neg = int(positive.sum()), int((~positive).sum())
    if n_pos == 0 or n_neg == 0:
        return []
    thresholds = np.unique(np.quantile(decision, np.linspace(0.0, 1.0, points)))[::-1]
    curve = [[0.0, 0.0]]
    for t in thresholds:
        predicted = decision >= t
        curve.append([float(np.sum(predicted & ~positive) / n_neg), float(np.sum(predicted & positive) / n_pos)])
    return curve


def evaluate(task: str, targets: np.ndarray, decision: np.ndarray) -> dict[str, float]:
    """The figures reported for a task: error_rate and auc, or relative_error and rmse."""
    if task == "classify":
        return {"error_rate": error_rate(targets, decision), "auc": auc(targets, decision)}
    return {"relative_error": relative_error(targets, decision), "rmse": rmse(targets, decision)}


def class_histogram(labels: np.ndarray, decision: np.ndarray, edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Counts of the decision values of the records labelled -1 and of those labelled +1, bin by bin.

    Bin k holds the values d with edges[k-1] <= d < edges[k], where edges[-1] = -inf and edges[B] = +inf.
    Each record adds one to exactly one count of its class, whatever its value (NaN sorts after every
    number, so it lands in the last bin); records with another label add to none.

    Parameters
    ----------
    labels : ndarray, shape (m,)
    decision : ndarray, shape (m,)
    edges : ndarray, shape (B,)
        Strictly increasing.

    Returns
    -------
    negative, positive : ndarray of int64, shape (B + 1,)
    """
    bins = np.searchsorted(edges, decision, side="right")
    return (
        np.bincount(bins[labels == -1], minlength=edges.size + 1),
        np.bincount(bins[labels == 1], minlength=edges.size + 1),
    )
