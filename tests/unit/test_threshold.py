"""The DP model's decision threshold: bin edges from public facts, the choice from per-class histograms, the model
file, and the trivial baselines reports print beside every model."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from ppsvm.core import threshold
from ppsvm.core.dp_model import DpModel
from ppsvm.core.metrics import error_rate, trivial_baseline
from ppsvm.core.threshold import (
    MAX_THRESHOLD_EDGES,
    MIN_THRESHOLD_EDGES,
    choose_threshold,
    count_noise_std,
    threshold_edge_count,
    threshold_edges,
)
from ppsvm.errors import ConfigError, DataError


def histograms(edges: np.ndarray, scores: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-class counts in the bins [edges[k-1], edges[k]), written out independently of the entity's code."""
    bins = np.array([sum(score >= edge for edge in edges) for score in scores])
    negative = np.bincount(bins[labels < 0], minlength=len(edges) + 1)
    positive = np.bincount(bins[labels > 0], minlength=len(edges) + 1)
    return negative, positive


def test_the_chosen_edge_has_the_fewest_training_errors_of_all_edges() -> None:
    rng = np.random.default_rng(0)
    for _ in range(50):
        labels = np.where(rng.random(300) < 0.25, 1.0, -1.0)
        scores = 0.3 * labels + rng.normal(size=300) - 0.4
        edges = np.sort(rng.uniform(-2, 2, size=int(rng.integers(1, 40))))
        edges = np.unique(edges)
        choice = choose_threshold(edges, *histograms(edges, scores, labels))
        by_brute_force = [error_rate(labels, scores - edge) * len(labels) for edge in edges]
        assert choice.errors == round(min(by_brute_force)) and choice.records == len(labels)
        assert choice.threshold in edges
        assert error_rate(labels, scores - choice.threshold) * len(labels) == pytest.approx(choice.errors)


def test_the_cut_leaves_zero_only_for_a_win_beyond_the_noise() -> None:
    edges = np.array([-1.0, 0.0, 1.0, 2.0])
    negative, positive = np.array([0, 0, 100, 0, 0]), np.array([0, 0, 40, 70, 0])
    # Cut at 0: 100 negatives above it; at 1: the 40 positives below, 0 negatives above.
    assert choose_threshold(edges, negative, positive).threshold == 1.0
    # A gain of 60 errors over one bin: clear at noise 30 per count (one std of the difference: 30 sqrt 2 = 42),
    # not at 50 (71).
    assert threshold.ZERO_MARGIN_STDS == 1.0
    assert choose_threshold(edges, negative, positive, noise_std=30.0).threshold == 1.0
    assert choose_threshold(edges, negative, positive, noise_std=50.0).threshold == 0.0


def test_edges_per_entity_size_and_epsilon() -> None:
    assert count_noise_std(0.1) == pytest.approx(28.28, abs=0.01)
    assert threshold_edge_count(9_000, 0.1) == 62  # Adult: 9000 / (5 x 28.3) = 63.6 bins, 62 whole edges
    assert threshold_edge_count(180, 0.1) == MIN_THRESHOLD_EDGES
    assert threshold_edge_count(10**6, 1.0) == MAX_THRESHOLD_EDGES


def test_ties_go_to_the_edge_nearest_zero() -> None:
    edges = np.array([-3.0, -0.5, 0.2, 4.0])
    # Every record far above all edges: any edge but the last errs on the negatives alone.
    negative, positive = np.zeros(5, dtype=int), np.zeros(5, dtype=int)
    positive[4] = 10
    assert choose_threshold(edges, negative, positive).threshold == 0.2


def test_noised_counts_may_be_negative_and_the_shapes_must_agree() -> None:
    edges = np.array([0.0, 1.0])
    choice = choose_threshold(edges, np.array([5, -2, 0]), np.array([-1, 0, 7]))
    # Cut at 0: positives below (-1) plus negatives above (-2 + 0); cut at 1: (-1 + 0) plus 0. Noise may go below 0.
    assert choice.threshold == 0.0 and choice.errors == -3 and choice.records == 9
    with pytest.raises(DataError, match="3 counts per class"):
        choose_threshold(edges, np.array([1, 2]), np.array([1, 2, 3]))


def test_edges_cover_the_public_scores_within_the_weight_bound() -> None:
    scores = np.array([-0.1, 0.05, 0.2])
    edges = threshold_edges(scores, weight_norm=1.0)
    assert edges.shape == (MAX_THRESHOLD_EDGES,) and np.all(np.diff(edges) > 0) and 0.0 in edges
    assert edges[0] == pytest.approx(-0.1 - 0.3) and edges[-1] == pytest.approx(0.2 + 0.3)
    above = threshold_edges(np.array([0.5, 0.6]), weight_norm=1.0, bins=5)  # 0 outside the range: one more edge
    assert above.shape == (6,) and above[0] == 0.0 and np.all(np.diff(above) > 0)
    tight = threshold_edges(scores, weight_norm=0.25)  # |f| <= ||w||: no edge beyond it
    assert tight[0] == pytest.approx(-0.25) and tight[-1] == pytest.approx(0.25)
    zero = threshold_edges(np.zeros(4), weight_norm=0.0, bins=5)  # a zero model still gets increasing edges
    assert np.all(np.diff(zero) > 0)
    with pytest.raises(DataError):
        threshold_edges(np.array([np.nan]), 1.0)


def fourier_model(threshold: float = 0.0) -> DpModel:
    return DpModel(
        method="dp-hybrid",
        mechanism="laplace",
        epsilon=1.0,
        private=True,
        low=(0.0, 0.0),
        high=(1.0, 1.0),
        kernel_width=1.0,
        C=1.0,
        rho=((1.0, 0.5), (-0.3, 2.0)),
        weights=(0.2, -0.1, 0.4, 0.05),
        threshold=threshold,
    )


def test_the_threshold_shifts_the_decision_and_survives_the_file() -> None:
    X = np.random.default_rng(1).random((6, 2))
    plain, cut = fourier_model(), fourier_model(0.125)
    np.testing.assert_allclose(cut.decision(X), plain.decision(X) - 0.125, rtol=0, atol=1e-15)
    assert DpModel.from_json(cut.to_json()).threshold == 0.125


def test_a_file_from_before_thresholds_decides_at_zero() -> None:
    document = json.loads(fourier_model().to_json())
    del document["threshold"]
    assert DpModel.from_json(json.dumps(document)).threshold == 0.0


def test_a_public_only_model_with_a_threshold_is_refused() -> None:
    public = dataclasses.replace(
        fourier_model(0.5), method="public-only", rho=(), weights=(), basis=((0.1, 0.2),), dual_coef=(1.0,)
    )
    with pytest.raises(ConfigError, match="no threshold"):
        DpModel.from_json(public.to_json())


def test_trivial_baselines() -> None:
    labels = np.array([1.0, -1.0, -1.0, -1.0])
    assert trivial_baseline("classify", labels) == {"majority_error_rate": 0.25, "constant_auc": 0.5}
    targets = np.array([1.0, 3.0])
    baseline = trivial_baseline("regress", targets)
    assert baseline["mean_rmse"] == pytest.approx(1.0)
    assert baseline["mean_relative_error"] == pytest.approx(np.sqrt(2) / np.sqrt(10))


def test_sparse_histograms_need_a_larger_win_to_leave_zero() -> None:
    # Adult's 9,000 records per entity afford 62 edges at epsilon 0.1; WDBC's 76 not even the minimum 3.
    assert threshold.zero_margin_stds(9_000, 0.1) == threshold.ZERO_MARGIN_STDS == 1.0
    assert threshold.zero_margin_stds(76, 0.1) == threshold.SPARSE_ZERO_MARGIN_STDS == 4.0
    assert threshold.zero_margin_stds(76, 10.0) == 1.0  # a larger epsilon makes the same records informative
    edges = np.array([-1.0, 0.0, 1.0])
    negative, positive = np.array([0, 0, 100, 0]), np.array([0, 0, 0, 100])
    # A gain of 100 over one bin at noise 30 per count (42 for the difference): 2.4 std, enough at 1, not at 4.
    assert choose_threshold(edges, negative, positive, 30.0, margin_stds=1.0).threshold == 1.0
    assert choose_threshold(edges, negative, positive, 30.0, margin_stds=4.0).threshold == 0.0
