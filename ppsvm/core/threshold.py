"""The decision threshold of a DP model, chosen from the entities' differentially private score histograms.

A Fourier model f(x) = w' zhat(x) has no intercept, and with the paper's C = 1 it is the class-mean
difference: on imbalanced labels (UCI Adult: 24% positive) f is below 0 for almost everyone, so sign(f)
predicts the majority class although f ranks well. Neither the public records nor the weights say where
to cut: 20 public records hold about five positives (measured: a threshold fitted on them missed by up to
0.04 of error and ran the wrong way in one of four repetitions). So the coordinator asks each entity for a
histogram of f over its own training records per class, each count with discrete Laplace noise (the
entity's DpScoreHistogram: one record moves one unit between two cells, L1 sensitivity 2, whatever the
model and bins are), sums them, and takes the bin edge with the fewest training errors. The noise is small
beside thousands of records per bin range: at epsilon 0.1 each count is off by about 20.

The bin edges are chosen from public facts only: the released weights bound |f| <= ||w|| (||zhat|| = 1),
and the public records' scores show where f lies. Their number comes from public facts too (records per
entity and epsilon), so that each bin holds many times the noise; 0 is always an edge, and the cut moves
away from it only when the histograms show fewer errors by more than the noise of that difference
(:data:`ZERO_MARGIN_STDS`, four times that where the bins hold few records): the threshold does not make a model
worse than the paper's cut at 0 beyond what the noise allows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ppsvm.core.checks import as_vector
from ppsvm.errors import DataError

# At most this many edges (the histograms have one more bin each): enough that the best edge's error is
# within a fraction of a percent of the best threshold's on smooth score distributions.
MAX_THRESHOLD_EDGES = 64
# Fewer edges than this cannot place a cut between the public scores' quartiles.
MIN_THRESHOLD_EDGES = 3
# An entity's records per bin, on average, per unit of a count's noise standard deviation (2 sqrt(2)/epsilon).
RECORDS_PER_NOISE = 5.0
# Epsilon each entity spends on its histogram by default: a tenth of the paper's smallest weights epsilon.
DEFAULT_THRESHOLD_EPSILON = 0.1
# The cut leaves 0 when the noised errors there exceed the best edge's by more than this many noise standard
# deviations of the difference. Measured on Adult (simulated histograms, 6-10 splits, C 0.1 / 1 / 100): test
# error 0.2185 / 0.2155 / 0.1850 at 2 sigma, 0.2139 / - / 0.1839 at 1 sigma, 0.2128 / 0.2101 / 0.1834 at 0
# (the plain argmin). Where the entities cannot afford even MIN_THRESHOLD_EDGES bins of RECORDS_PER_NOISE noise
# each, the counts are mostly noise and SPARSE_ZERO_MARGIN_STDS applies: 76 WDBC records per entity moved the
# cut to a useless edge in 2 of 40 fits at 1 sigma and 1 of 40 at 2 sigma (accuracy 0.49-0.51, against 0.90 at
# 0); at 4 the discrete Laplace tails make that about one in a thousand.
ZERO_MARGIN_STDS = 1.0
SPARSE_ZERO_MARGIN_STDS = 4.0


def count_noise_std(epsilon: float) -> float:
    """Standard deviation of one count's noise (discrete Laplace, scale 2/epsilon): about 2 sqrt(2)/epsilon."""
    return 2.0 * math.sqrt(2.0) / epsilon


def _affordable_edges(records_per_entity: int, epsilon: float) -> int:
    return int(records_per_entity / (RECORDS_PER_NOISE * count_noise_std(epsilon))) - 1


def threshold_edge_count(records_per_entity: int, epsilon: float) -> int:
    """How many edges the smallest entity's histogram can afford: its records over the bins stay at least
    :data:`RECORDS_PER_NOISE` noise standard deviations per bin, within [MIN_THRESHOLD_EDGES, MAX_THRESHOLD_EDGES]."""
    return min(MAX_THRESHOLD_EDGES, max(MIN_THRESHOLD_EDGES, _affordable_edges(records_per_entity, epsilon)))


def zero_margin_stds(records_per_entity: int, epsilon: float) -> float:
    """How many noise standard deviations a cut away from 0 must win by: :data:`ZERO_MARGIN_STDS`, or
    :data:`SPARSE_ZERO_MARGIN_STDS` where the smallest entity cannot afford MIN_THRESHOLD_EDGES bins."""
    sparse = _affordable_edges(records_per_entity, epsilon) < MIN_THRESHOLD_EDGES
    return SPARSE_ZERO_MARGIN_STDS if sparse else ZERO_MARGIN_STDS


def threshold_edges(public_scores: np.ndarray, weight_norm: float, bins: int = MAX_THRESHOLD_EDGES) -> np.ndarray:
    """Evenly spaced edges over the public records' score range widened by its span, within [-||w||, ||w||],
    with 0 among them (moved onto the nearest edge).

    Parameters
    ----------
    public_scores : ndarray, shape (k,)
        f(x) = w' zhat(x) of the public records (no threshold), k >= 1.
    weight_norm : float
        ||w||, which bounds every |f(x)|.
    bins : int
        Number of edges.

    Returns
    -------
    ndarray, shape (bins,) or (bins + 1,)
        Strictly increasing, 0 included.
    """
    scores = as_vector(public_scores, "public_scores")
    if scores.size == 0 or not np.isfinite(scores).all():
        raise DataError("threshold_edges needs at least one finite public score")
    if not (np.isfinite(weight_norm) and weight_norm >= 0) or bins < 1:
        raise DataError(f"threshold_edges needs ||w|| >= 0 and bins >= 1, got {weight_norm} and {bins}")
    low, high = float(scores.min()), float(scores.max())
    span = max(high - low, 1e-3 * weight_norm, 1e-12)
    low, high = max(low - span, -weight_norm), min(high + span, weight_norm)
    if not high > low:  # a zero model: every score is 0
        low, high = -span, span
    edges = np.linspace(low, high, bins)
    if edges[0] < 0 < edges[-1]:
        edges[np.argmin(np.abs(edges))] = 0.0  # stays between its neighbours: they lie on either side of 0
    else:
        edges = np.sort(np.append(edges, 0.0))
    return edges


@dataclass(frozen=True)
class ThresholdChoice:
    """The threshold and what the noised histograms said of it.

    Attributes
    ----------
    threshold : float
        Predict +1 when f(x) >= threshold.
    errors : int
        Noised training errors at the threshold, summed over the entities.
    records : int
        Noised training records counted (the sum of every bin).
    """

    threshold: float
    errors: int
    records: int


def choose_threshold(
    edges: np.ndarray,
    negative_counts: np.ndarray,
    positive_counts: np.ndarray,
    noise_std: float = 0.0,
    margin_stds: float = ZERO_MARGIN_STDS,
) -> ThresholdChoice:
    """The edge with the fewest training errors by the (summed, noised) per-class histograms, if it beats 0 clearly.

    Bin k holds scores in [edges[k-1], edges[k]) (edges[-1] = -inf, edges[B] = +inf). Cutting at edges[k]
    predicts -1 for bins 0..k and +1 above, so its errors are the positives in bins 0..k plus the negatives
    in bins k+1..B. Ties go to the edge nearest 0. When 0 is an edge, the cut stays there unless the best
    edge's noised errors are lower by more than ``margin_stds`` noise standard deviations of the difference (it
    sums two counts per bin between the two edges).

    Parameters
    ----------
    edges : ndarray, shape (B,)
    negative_counts, positive_counts : ndarray, shape (B + 1,)
        Counts of records labelled -1 and +1 per bin (noised counts may be negative).
    noise_std : float
        Standard deviation of one summed count's noise (0: exact counts).
    margin_stds : float
        :func:`zero_margin_stds` of the entities' record counts and epsilon.

    Returns
    -------
    ThresholdChoice
    """
    edges = as_vector(edges, "edges")
    negative = np.asarray(negative_counts, dtype=np.int64)
    positive = np.asarray(positive_counts, dtype=np.int64)
    if negative.shape != (edges.size + 1,) or positive.shape != (edges.size + 1,):
        raise DataError(
            f"{edges.size} edges need {edges.size + 1} counts per class, got {negative.size} and {positive.size}"
        )
    errors = np.cumsum(positive)[:-1] + (negative.sum() - np.cumsum(negative)[:-1])
    best = np.flatnonzero(errors == errors.min())
    k = int(best[np.argmin(np.abs(edges[best]))])
    zero = np.flatnonzero(edges == 0.0)
    if zero.size:
        z = int(zero[0])
        if errors[z] - errors[k] <= margin_stds * noise_std * math.sqrt(2 * abs(k - z)):
            k = z
    return ThresholdChoice(float(edges[k]), int(errors[k]), int(negative.sum() + positive.sum()))
