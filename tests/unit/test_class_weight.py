"""Issue 29 item 4: class_weight="balanced" and sample_weight through the LP's per-row weights, in the estimators
(the solver's weights are checked against independent LPs in tests/unit/test_lp_weights.py)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import recall_score
from sklearn.model_selection import train_test_split

from ppsvm.api.datasets import load_dataset
from ppsvm.api.estimators import RandomKernelClassifier, RandomKernelRegressor
from ppsvm.coordinator.train import row_weights
from ppsvm.errors import ConfigError

FIXED = {"nu": 1.0, "mu": 0.5, "mbar": 5, "basis": "paper", "lp_formulation": "highs-dual"}


def test_balanced_weights_give_each_class_half_the_total() -> None:
    target = np.array([1.0, -1.0, -1.0, -1.0, -1.0, 1.0, -1.0, -1.0])
    weights = row_weights(target, "balanced", None)
    assert weights is not None
    assert weights[target > 0].sum() == pytest.approx(4.0) and weights[target < 0].sum() == pytest.approx(4.0)
    records = np.arange(1.0, 9.0)
    np.testing.assert_allclose(row_weights(target, "balanced", records), weights * records)
    assert row_weights(target, None, None) is None and row_weights(target, None, records) is records


def _imbalanced_pima(share: float = 0.15) -> tuple[np.ndarray, np.ndarray]:
    X, y = load_dataset("pima")
    X, y = np.asarray(X), np.asarray(y)
    rng = np.random.default_rng(1)
    positive, negative = np.flatnonzero(y == 1), np.flatnonzero(y != 1)
    keep = np.r_[rng.choice(positive, int(share * len(negative) / (1 - share)), replace=False), negative]
    return X[keep], y[keep]


def test_balanced_class_weight_raises_the_minority_recall() -> None:
    X, y = _imbalanced_pima()  # 15% positive: unweighted, the model predicts the majority for nearly everyone
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.4, random_state=0, stratify=y)
    plain = RandomKernelClassifier(column_blocks=2, random_state=0).fit(X_train, y_train)
    balanced = RandomKernelClassifier(column_blocks=2, class_weight="balanced", random_state=0).fit(X_train, y_train)
    before = recall_score(y_test, plain.predict(X_test), pos_label=1)
    after = recall_score(y_test, balanced.predict(X_test), pos_label=1)
    assert after > before + 0.3, (before, after)
    assert balanced.model_.training["class_weight"] == "balanced"
    # The probabilities still follow the real class frequency: their mean is near the positive share.
    assert abs(balanced.predict_proba(X_test)[:, 1].mean() - np.mean(y_test == 1)) < 0.1


def test_integer_sample_weights_equal_repeated_records() -> None:
    X, y = load_dataset("wdbc")
    X, y = np.asarray(X)[:120], np.asarray(y)[:120]
    counts = np.random.default_rng(3).integers(1, 4, size=len(y))
    weighted = RandomKernelClassifier(column_blocks=2, random_state=0, **FIXED).fit(X, y, sample_weight=counts)
    repeated = RandomKernelClassifier(column_blocks=2, random_state=0, **FIXED).fit(
        np.repeat(X, counts, axis=0), np.repeat(y, counts)
    )
    assert weighted.model_.training["objective"] == pytest.approx(repeated.model_.training["objective"], rel=1e-6)
    assert weighted.model_.training["sample_weight"] is True


def test_zero_weights_leave_records_out() -> None:
    X, y = load_dataset("wdbc")
    X, y = np.asarray(X)[:120], np.asarray(y)[:120]
    weights = np.where(np.arange(len(y)) % 4 == 0, 0.0, 1.0)
    weighted = RandomKernelClassifier(column_blocks=2, random_state=0, **FIXED).fit(X, y, sample_weight=weights)
    kept = RandomKernelClassifier(column_blocks=2, random_state=0, **FIXED).fit(X[weights > 0], y[weights > 0])
    assert weighted.model_.training["objective"] == pytest.approx(kept.model_.training["objective"], rel=1e-9)


def test_bad_weights_are_refused() -> None:
    X, y = load_dataset("wdbc")
    with pytest.raises(ValueError, match="Negative values in data passed to"):
        RandomKernelClassifier(column_blocks=2, **FIXED).fit(X, y, sample_weight=np.full(len(y), -1.0))
    with pytest.raises(ConfigError, match="class_weight must be 'balanced' or none, got 'rare'"):
        RandomKernelClassifier(column_blocks=2, class_weight="rare", **FIXED).fit(X, y)
    with pytest.raises(ConfigError, match="class_weight applies to classification"):
        RandomKernelRegressor(class_weight="balanced").fit(X, np.asarray(y, dtype=float))
