"""Platt scaling, out-of-fold decision values and the model file's labels and calibration, against independent
computations (scikit-learn's sigmoid calibration, a direct refit per fold)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn.calibration import _sigmoid_calibration
from sklearn.metrics import brier_score_loss

from ppsvm.core.calibration import Platt, brier_score, fit_platt, out_of_fold_decisions, reliability
from ppsvm.core.kernels import gaussian_kernel
from ppsvm.core.lp import solve_lp
from ppsvm.core.model import Model
from ppsvm.core.tuning import fold_indices
from ppsvm.errors import ConfigError, DataError
from tests.unit.test_model_metrics import make_model


def _sigmoid_data(m: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    f = rng.normal(scale=1.5, size=m)
    y = np.where(rng.random(m) < 1.0 / (1.0 + np.exp(-1.7 * f + 0.4)), 1.0, -1.0)
    return f, y


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_platt_matches_scikit_learn(seed: int) -> None:
    f, y = _sigmoid_data(400, seed)
    ours = fit_platt(f, y)
    a, b = _sigmoid_calibration(f, (y > 0).astype(int))
    assert ours.a == pytest.approx(a, rel=1e-5) and ours.b == pytest.approx(b, rel=1e-5, abs=1e-6)


def test_platt_recovers_a_known_sigmoid() -> None:
    f, y = _sigmoid_data(20_000, 3)
    fitted = fit_platt(f, y)
    assert fitted.a == pytest.approx(-1.7, rel=0.05) and fitted.b == pytest.approx(0.4, abs=0.05)


def test_platt_on_separable_values_stays_finite_and_below_certainty() -> None:
    f = np.r_[np.linspace(-3, -1, 50), np.linspace(1, 3, 50)]
    y = np.r_[-np.ones(50), np.ones(50)]
    p = fit_platt(f, y).probability(f)
    assert np.isfinite(p).all() and 0.0 < p.min() and p.max() < 1.0
    # The smoothed targets (1 / 52 and 51 / 52) keep the fit from certainty: about 0.1 at the margin.
    assert p[:50].max() < 0.15 and p[50:].min() > 0.85


def test_values_ranking_the_wrong_way_get_the_constant_map() -> None:
    f, y = _sigmoid_data(300, 7)
    fitted = fit_platt(-f, y)  # decision values that say the opposite of the labels
    positives = np.count_nonzero(y > 0)
    share = (positives * (positives + 1) / (positives + 2) + (300 - positives) / (300 - positives + 2)) / 300
    assert fitted.a == 0.0
    np.testing.assert_allclose(fitted.probability(f), share)


def test_probability_does_not_overflow() -> None:
    p = Platt(-50.0, 1.0).probability(np.array([-1e300, -30.0, 0.0, 30.0, 1e300]))
    assert np.isfinite(p).all()
    assert p[0] == 0.0 and p[-1] == 1.0 and p[2] == pytest.approx(1.0 / (1.0 + np.e))


@pytest.mark.parametrize(
    ("f", "y"),
    [(np.array([0.0, np.nan]), np.array([1.0, -1.0])), (np.array([0.0, 1.0]), np.array([1.0, 0.0])), ([], [])],
)
def test_platt_refuses_bad_input(f: object, y: object) -> None:
    with pytest.raises(ValueError):
        fit_platt(np.asarray(f, dtype=float), np.asarray(y, dtype=float))


def test_brier_and_reliability() -> None:
    f, y = _sigmoid_data(1000, 4)
    p = fit_platt(f, y).probability(f)
    assert brier_score(y, p) == pytest.approx(brier_score_loss(y > 0, p))
    groups = reliability(y, p)
    assert len(groups) == 10 and sum(g["n"] for g in groups) == 1000
    predicted = [g["predicted"] for g in groups]
    assert predicted == sorted(predicted)
    assert max(abs(g["predicted"] - g["observed"]) for g in groups) < 0.1


def _kernel_problem(m: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(m, 4))
    y = np.where(A[:, 0] + 0.5 * A[:, 1] + rng.normal(scale=0.7, size=m) > 0, 1.0, -1.0)
    return np.asfortranarray(gaussian_kernel(A, A[:15], 0.2)), y


def test_out_of_fold_decisions_equal_refits_without_the_fold() -> None:
    K, y = _kernel_problem(120, 5)
    rows, decisions = out_of_fold_decisions("classify", K, y, 2.0, folds=4, seed=9, formulation="highs-dual")
    assert rows.tolist() == list(range(120))
    for held in fold_indices("classify", y, 4, 9):
        keep = np.setdiff1d(np.arange(120), held)
        fit = solve_lp("classify", K[keep], y[keep], 2.0, "cvxpy-primal")
        np.testing.assert_allclose(decisions[held], K[held] @ fit.u - fit.gamma, atol=1e-5)


def test_out_of_fold_decisions_sample_above_the_limit() -> None:
    K, y = _kernel_problem(300, 6)
    rows, decisions = out_of_fold_decisions(
        "classify", K, y, 1.0, folds=3, seed=1, formulation="highs-dual", max_rows=90
    )
    assert len(rows) == len(decisions) == 90 and len(set(rows.tolist())) == 90
    # Stratified: the sample keeps the classes' shares.
    assert abs(np.mean(y[rows] > 0) - np.mean(y > 0)) < 0.02


# ---------------------------------------------------------------- model file, format 2


def test_model_with_labels_and_calibration_round_trips() -> None:
    model = make_model(labels=("healthy", "sick"), calibration=Platt(-2.5, 0.25))
    again = Model.from_json(model.to_json())
    assert again == model
    assert again.label_names(np.array([1.0, -1.0])) == ["sick", "healthy"]
    assert again.probability(np.array([0.0]))[0] == pytest.approx(1.0 / (1.0 + np.exp(0.25)))


def test_version_1_model_file_still_loads() -> None:
    document = json.loads(make_model().to_json())
    document["version"] = 1
    del document["labels"], document["calibration"]
    model = Model.from_json(json.dumps(document))
    assert model.labels is None and model.calibration is None
    assert model.label_names(np.array([1.0, -1.0])) == ["+1", "-1"]
    with pytest.raises(ValueError, match="no probability calibration"):
        model.probability(np.array([0.0]))


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"labels": ["same", "same"]}, "labels must be two different texts"),
        ({"labels": ["a"]}, "is not a valid ppsvm model file"),
        ({"calibration": {"a": "x", "b": 0}}, "'a' must be a number"),
        ({"task": "regress", "calibration": {"a": -1.0, "b": 0.0}}, "belong to classification models"),
    ],
)
def test_bad_labels_or_calibration_are_refused(change: dict[str, object], fragment: str) -> None:
    document = {**json.loads(make_model().to_json()), **change}
    with pytest.raises(ConfigError, match=fragment):
        Model.from_json(json.dumps(document), "m.json")


# ---------------------------------------------------------------- estimators


@pytest.mark.parametrize("name", ["wdbc", "ionosphere"])
def test_random_kernel_classifier_probabilities_beat_the_class_frequency(name: str) -> None:
    from sklearn.model_selection import train_test_split

    from ppsvm.api.datasets import load_dataset
    from ppsvm.api.estimators import RandomKernelClassifier

    X, y = load_dataset(name)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)
    clf = RandomKernelClassifier(column_blocks=2, row_blocks=2, random_state=0).fit(X_train, y_train)
    p = clf.predict_proba(X_test)
    assert p.shape == (len(y_test), 2)
    np.testing.assert_allclose(p.sum(axis=1), 1.0)
    np.testing.assert_allclose(p[:, 1], clf.model_.probability(clf.decision_function(X_test)))
    positive = y_test == clf.classes_[1]
    share = np.mean(y_train == clf.classes_[1])
    assert brier_score_loss(positive, p[:, 1]) < 0.5 * brier_score_loss(positive, np.full(len(y_test), share))


def test_dp_classifier_probabilities_come_from_the_public_records() -> None:
    from ppsvm.api.datasets import load_dataset
    from ppsvm.api.dp_estimator import DpHybridClassifier

    X, y = load_dataset("wdbc")
    clf = DpHybridClassifier(epsilon=1.0, allow_noisy=True, random_state=0).fit(X, y)
    record = clf.model_.training["calibration"]
    assert record["method"] == "platt" and record["source"] == "public records"
    p = clf.predict_proba(X)
    assert p.shape == (len(y), 2) and np.all((p > 0) & (p < 1))
    public_only = DpHybridClassifier(method="public-only", random_state=0).fit(X, y)
    with pytest.raises(DataError, match="no probability calibration"):
        public_only.predict_proba(X)
