"""The entity-alone and pooled fits of several classes: one model per class against the rest, on one basis."""

from __future__ import annotations

import numpy as np
import pytest

from ppsvm.core.local_svm import LocalClasses, LocalModel, fit_local, local_figures

sklearn_datasets = pytest.importorskip("sklearn.datasets")


def test_class_codes_give_one_model_per_class_each_the_binary_fit() -> None:
    X, y = sklearn_datasets.load_iris(return_X_y=True)
    rng = np.random.default_rng(0)
    order = rng.permutation(len(y))
    train, test = order[:100], order[100:]
    settings = dict(basis_fraction=0.3, nu=10.0, mu=1.0, seed=4)
    model = fit_local("classify", "gaussian", X[train], y[train].astype(float), **settings)
    assert isinstance(model, LocalClasses) and model.values.tolist() == [0.0, 1.0, 2.0]
    for value, member in zip(model.values, model.members, strict=True):
        alone = fit_local("classify", "gaussian", X[train], np.where(y[train] == value, 1.0, -1.0), **settings)
        assert isinstance(alone, LocalModel)
        np.testing.assert_array_equal(member.u, alone.u)
        np.testing.assert_array_equal(member.basis, alone.basis)
    figures = local_figures("classify", model, X[test], y[test].astype(float))
    # Counted independently: the class whose own model scores highest.
    scores = np.column_stack([m.decision(X[test]) for m in model.members])
    assert figures == {"error_rate": float(np.mean(np.argmax(scores, axis=1) != y[test]))}
    assert figures["error_rate"] < 0.1
