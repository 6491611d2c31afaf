"""Several classes (issue 29 item 2): one-vs-rest on one fetched kernel, against scikit-learn's OneVsRestClassifier
around the two-class estimator (which fetches the kernel once per class), and the multiclass model file."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from sklearn.datasets import load_wine
from sklearn.model_selection import train_test_split
from sklearn.multiclass import OneVsRestClassifier

from ppsvm.api.estimators import RandomKernelClassifier
from ppsvm.coordinator.federation import Session
from ppsvm.core.calibration import Platt
from ppsvm.core.multiclass import MulticlassModel, multiclass_figures, prediction_outputs
from ppsvm.errors import ConfigError
from tests.unit.test_model_metrics import make_model


@pytest.fixture(scope="module")
def wine() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    X, y = load_wine(return_X_y=True)
    names = np.array(["barolo", "grignolino", "barbera"])[y]
    split = train_test_split(X, names, test_size=0.3, random_state=0, stratify=names)
    return split[0], split[1], split[2], split[3]


def test_one_fetch_gives_the_models_of_one_vs_rest(wine, monkeypatch: pytest.MonkeyPatch) -> None:
    X_train, X_test, y_train, y_test = wine
    fetches = []
    kernel = Session.kernel

    def counted(self: Session, *args: object, **kwargs: object) -> np.ndarray:
        fetches.append(args[0])
        return kernel(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Session, "kernel", counted)
    clf = RandomKernelClassifier(column_blocks=2, random_state=0).fit(X_train, y_train)
    assert len(fetches) == 1 and isinstance(clf.model_, MulticlassModel)
    wrapped = OneVsRestClassifier(RandomKernelClassifier(column_blocks=2, random_state=0)).fit(X_train, y_train)
    assert len(fetches) == 1 + 3  # the wrapper asks the entities once per class
    # The same LPs on the same kernel: equal decision values, predictions and classes.
    assert clf.classes_.tolist() == wrapped.classes_.tolist() == ["barbera", "barolo", "grignolino"]
    np.testing.assert_allclose(clf.decision_function(X_test), wrapped.decision_function(X_test), atol=1e-8)
    assert (clf.predict(X_test) == wrapped.predict(X_test)).all()
    assert np.mean(clf.predict(X_test) == y_test) > 0.75  # the majority class: 0.40


def test_probabilities_beat_the_class_frequency(wine) -> None:
    X_train, X_test, y_train, y_test = wine
    clf = RandomKernelClassifier(column_blocks=2, random_state=0).fit(X_train, y_train)
    p = clf.predict_proba(X_test)
    assert p.shape == (len(y_test), 3)
    np.testing.assert_allclose(p.sum(axis=1), 1.0)
    outcome = (y_test[:, None] == clf.classes_[None, :]).astype(float)
    shares = np.array([np.mean(y_train == c) for c in clf.classes_])
    brier = np.mean(np.sum((p - outcome) ** 2, axis=1))
    assert brier < 0.5 * np.mean(np.sum((shares - outcome) ** 2, axis=1))
    # The model file's own figures agree with the estimator's probabilities.
    model = clf.model_
    assert isinstance(model, MulticlassModel)
    index = {name: k for k, name in enumerate(clf.classes_)}
    targets = np.array([float(index[name]) for name in y_test])
    figures = multiclass_figures(model, targets, clf.decision_function(X_test))
    assert figures["brier"] == pytest.approx(brier)
    assert figures["error_rate"] == pytest.approx(np.mean(clf.predict(X_test) != y_test))
    assert sum(c["n"] for c in figures["classes"].values()) == len(y_test)


def _multiclass(k: int = 3) -> MulticlassModel:
    members = tuple(
        make_model(u=(0.5 * c, -1.0, 0.25), gamma=0.1 * c, labels=("rest", f"c{c}"), calibration=Platt(-2.0, 0.1 * c),
                   training={"calibration": {"positive_share": 1 / k}})
        for c in range(k)
    )  # fmt: skip
    return MulticlassModel(tuple(f"c{c}" for c in range(k)), tuple(float(c) for c in range(k)), members, {"seconds": 1})


def test_model_file_round_trips_and_decides_per_member() -> None:
    model = _multiclass()
    again = MulticlassModel.from_json(model.to_json())
    assert again == model
    K = np.random.default_rng(0).random((5, 3))
    decision = model.decision(K)
    # Member 0's width is the file's; the others (the same width here) see the same rows.
    np.testing.assert_allclose(decision[:, 2], K @ np.array(model.members[2].u) - model.members[2].gamma)
    best, prediction, names, probability = prediction_outputs(model, decision)
    assert names == [model.classes[int(k)] for k in prediction] and probability is not None
    np.testing.assert_allclose(best, decision.max(axis=1))
    np.testing.assert_allclose(model.probability(decision).sum(axis=1), 1.0)


def test_members_of_different_widths_see_the_power_of_the_rows() -> None:
    model = _multiclass()
    wider = dataclasses.replace(model.members[1], mu=2 * model.members[0].mu)
    mixed = dataclasses.replace(model, members=(model.members[0], wider, model.members[2]))
    K = np.random.default_rng(1).random((4, 3)) * 0.9 + 0.05
    np.testing.assert_allclose(mixed.decision(K)[:, 1], K**2 @ np.array(wider.u) - wider.gamma)


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        (lambda d: {**d, "classes": ["a", "b"], "values": [0, 1], "members": d["members"][:2]}, "3 or more distinct"),
        (lambda d: {**d, "members": [{**d["members"][0], "mbar": 2, "u": [1.0, 2.0]}, *d["members"][1:]]},
         "differ in 'mbar'"),
        (lambda d: {**d, "members": d["members"][:2] + [d["members"][0]] * 2}, "4 members for 3 classes"),
    ],
)  # fmt: skip
def test_bad_multiclass_files_are_refused(change, fragment: str) -> None:  # type: ignore[no-untyped-def]
    document = json.loads(_multiclass().to_json())
    with pytest.raises(ConfigError, match=fragment):
        MulticlassModel.from_json(json.dumps(change(document)), "m.json")


def test_labels_neither_signed_nor_classes_name_their_row_block() -> None:
    from types import SimpleNamespace

    from ppsvm.coordinator.train import _check_labels
    from ppsvm.errors import DataError

    holders = {f"r{i}c{j}": SimpleNamespace(has_labels=j == 0) for i in range(2) for j in range(2)}
    session = SimpleNamespace(metadata=holders, row_block=lambda i: [SimpleNamespace(id=f"r{i}c{j}") for j in range(2)])
    blocks = [
        SimpleNamespace(row_block=0, train_labels=np.array([1.0, -1.0, 1.0])),
        SimpleNamespace(row_block=1, train_labels=np.array([1.0, 0.5, 1.0])),  # 0.5: neither a sign nor a class
    ]
    with pytest.raises(DataError, match=r"row block 1 \(labels from entity r1c0\): .* got \[0.5\]"):
        _check_labels(session, blocks)  # type: ignore[arg-type]
    blocks[1].train_labels = np.array([2.0, 0.0, 1.0])  # with row block 0's -1: four whole-number classes
    assert _check_labels(session, blocks).tolist() == [-1.0, 0.0, 1.0, 2.0]  # type: ignore[arg-type, union-attr]
