"""Model file, metrics, cross-validation, the mbar rule, TrainOptions and CLI precedence, against "
"independent computations."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import roc_auc_score

from ppsvm.api.federation import train_options
from ppsvm.cli import build_parser
from ppsvm.cli_arguments import training_flags
from ppsvm.coordinator.train import TrainOptions, _basis_warnings, default_mbar
from ppsvm.core.kernels import gaussian_kernel, linear_kernel
from ppsvm.core.lp import solve_lp
from ppsvm.core.metrics import auc, classification_report, error_rate, evaluate, relative_error, rmse
from ppsvm.core.model import ColumnScaling, Model, ModelEntity
from ppsvm.core.privacy import check_mbar
from ppsvm.core.tuning import TuningResult, cross_validation_score, fold_indices, grid_points, tune
from ppsvm.errors import ConfigError, PrivacyError


def make_model(**changes: object) -> Model:
    fields: dict[str, object] = dict(
        task="classify",
        kernel="gaussian",
        mu=0.375,
        nu=12.5,
        mbar=3,
        u=(0.1, -2.0, 1e-300),
        gamma=-0.3,
        private=False,
        scaling=(ColumnScaling(0, (0.0, -1.5), (1.0, 2.5)), ColumnScaling(1, (3.0,), (4.0,))),
        entities=(ModelEntity('a "quoted"', 0, 0), ModelEntity("b", 0, 1)),
        training={"n_train": 10, "tuning": {"grid": [[1.0, 0.5, 0.25]]}},
    )
    fields.update(changes)
    return Model(**fields)  # type: ignore[arg-type]


# ---------------------------------------------------------------- Model


def test_model_json_round_trip() -> None:
    model = make_model()
    again = Model.from_json(model.to_json())
    assert again == model
    document = json.loads(model.to_json())
    assert document["format"] == "ppsvm-model" and document["version"] == 2
    assert document["u"] == [0.1, -2.0, 1e-300]


def test_model_with_product_columns_round_trips_and_predicts() -> None:
    columns = ((0, 0), (1, 2), (2, 1), (1, 1))
    model = make_model(u=(0.5, -1.0, 2.0, 0.25), columns=columns)
    again = Model.from_json(model.to_json())
    assert again == model and again.columns == columns
    assert again.column_index.shape == (4, 2)
    K = np.arange(8.0).reshape(2, 4)
    np.testing.assert_allclose(again.decision(K), K @ np.array([0.5, -1.0, 2.0, 0.25]) + 0.3)


@pytest.mark.parametrize(
    ("columns", "message"),
    [
        (((0, 0), (1, 1)), "u has 3 entries but there are 2 columns"),
        (((0, 0), (1, 1), (3, 0)), r"each in \[0, mbar = 3\)"),
        (((0,), (1,), (2,)), "must list 2 block rows"),
        (((0, 0), (1, 1), (2, True)), "whole numbers"),
    ],
)
def test_model_columns_are_validated(columns: tuple, message: str) -> None:
    document = json.loads(make_model().to_json())
    document["columns"] = [list(row) for row in columns]
    with pytest.raises(ConfigError, match=message):
        Model.from_json(json.dumps(document))


def test_model_save_and_load(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "model.json"
    make_model().save(path)
    assert Model.load(path) == make_model()
    assert [p.name for p in path.parent.iterdir()] == ["model.json"]


def test_model_save_is_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "model.json"
    make_model().save(path)
    before = path.read_bytes()

    def refuse(src: object, dst: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(ConfigError, match="No space left"):
        make_model(gamma=99.0).save(path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["model.json"]


def test_model_save_replaces_old_file(tmp_path: Path) -> None:
    path = tmp_path / "model.json"
    make_model().save(path)
    make_model(gamma=99.0).save(path)
    assert Model.load(path).gamma == 99.0


def _model_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "broken.model.json"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("mangle", "fragment"),
    [
        (lambda d: "{not json", "is not a ppsvm model file: not JSON"),
        (lambda d: json.dumps({**d, "format": "other-model"}), "is not a ppsvm model file"),
        (lambda d: json.dumps({k: v for k, v in d.items() if k != "format"}), "is not a ppsvm model file"),
        (lambda d: json.dumps({**d, "version": 3}), "unsupported ppsvm-model version 3 (written by a newer ppsvm"),
        (lambda d: json.dumps({**d, "u": [1.0, 2.0]}), "u has 2 entries but mbar is 3"),
        (lambda d: json.dumps({k: v for k, v in d.items() if k != "gamma"}), "'gamma' must be a number, got None"),
        (lambda d: json.dumps({**d, "extra": 1}), "is not a valid ppsvm model file"),
        (lambda d: json.dumps({**d, "u": ["x", 1, 2]}), "is not a valid ppsvm model file"),
        (lambda d: json.dumps([d]), "is not a ppsvm model file"),
    ],
)
def test_model_load_errors_name_file(tmp_path: Path, mangle, fragment: str) -> None:  # type: ignore[no-untyped-def]
    path = _model_file(tmp_path, mangle(json.loads(make_model().to_json())))
    with pytest.raises(ConfigError) as caught:
        Model.load(path)
    assert str(path) in str(caught.value)
    assert fragment in str(caught.value)


def test_model_load_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "none.json"
    with pytest.raises(ConfigError, match="cannot read model file") as caught:
        Model.load(path)
    assert str(path) in str(caught.value)


def test_model_load_refuses_nan_coefficients(tmp_path: Path) -> None:
    text = make_model().to_json().replace("-2.0", "NaN")
    with pytest.raises(ConfigError):
        Model.from_json(text, "nan-model")


def test_model_decision() -> None:
    model = make_model()
    K = np.array([[1.0, 2.0, 3.0], [0.0, 0.5, -1.0]])
    expected = [1.0 * 0.1 + 2.0 * -2.0 + 3.0 * 1e-300 + 0.3, 0.5 * -2.0 - 1e-300 + 0.3]
    np.testing.assert_allclose(model.decision(K), expected, rtol=1e-15)
    for bad in (np.ones((2, 2)), np.ones(3), np.ones((1, 2, 3))):
        with pytest.raises(ValueError, match=r"the model expects \(m, 3\)"):
            model.decision(bad)


# ---------------------------------------------------------------- metrics


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(2, 60))
def test_auc_matches_sklearn_with_ties(seed: int, m: int) -> None:
    rng = np.random.default_rng(seed)
    labels = np.where(rng.random(m) < 0.5, 1.0, -1.0)
    labels[0], labels[1] = 1.0, -1.0
    decision = rng.integers(-3, 4, size=m).astype(float)  # many ties
    assert auc(labels, decision) == pytest.approx(roc_auc_score(labels, decision), abs=1e-12)


def test_auc_known_values_and_one_class() -> None:
    assert auc(np.array([1.0, 1.0, -1.0, -1.0]), np.array([3.0, 2.0, 1.0, 0.0])) == 1.0
    assert auc(np.array([1.0, 1.0, -1.0, -1.0]), np.array([0.0, 1.0, 2.0, 3.0])) == 0.0
    assert auc(np.array([1.0, -1.0]), np.array([5.0, 5.0])) == 0.5
    assert math.isnan(auc(np.ones(4), np.arange(4.0)))
    assert math.isnan(auc(-np.ones(4), np.arange(4.0)))
    assert math.isnan(auc(np.array([1.0, -1.0, 1.0]), np.array([np.nan, 0.0, 1.0])))  # as scipy's ranks propagate it


def test_error_rate_hand_count() -> None:
    labels = np.array([1, 1, -1, -1, 1, -1, 1], dtype=float)
    decision = np.array([0.5, -0.1, -2.0, 0.0, 0.0, 3.0, 1e-9])
    # wrong: index 1 (neg for +1), 3 (0 -> +1 for -1), 5 (pos for -1) -> 3 of 7
    assert error_rate(labels, decision) == 3 / 7
    assert error_rate(labels, labels * 2) == 0.0
    assert error_rate(labels, -labels) == 1.0


def test_regression_metrics_against_numpy() -> None:
    rng = np.random.default_rng(3)
    targets, predictions = rng.standard_normal(50), rng.standard_normal(50)
    diff = predictions - targets
    assert relative_error(targets, predictions) == pytest.approx(
        math.sqrt((diff**2).sum()) / math.sqrt((targets**2).sum()), rel=1e-13
    )
    assert rmse(targets, predictions) == pytest.approx(math.sqrt((diff**2).sum() / 50), rel=1e-13)
    assert relative_error(targets, targets) == 0.0
    assert relative_error(np.zeros(3), np.zeros(3)) == 0.0
    assert relative_error(np.zeros(3), np.array([0.0, 1.0, 0.0])) == math.inf
    figures = evaluate("regress", targets, predictions)
    assert set(figures) == {"relative_error", "rmse"}
    assert evaluate("classify", np.array([1.0, -1.0]), np.array([1.0, 1.0])) == {"error_rate": 0.5, "auc": 0.5}


# ---------------------------------------------------------------- folds and tuning


@pytest.mark.parametrize(("m", "folds", "seed"), [(10, 2, 0), (23, 5, 1), (7, 7, 2), (100, 3, 3)])
def test_fold_indices_classify_partition_and_stratify(m: int, folds: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    labels = np.where(rng.random(m) < 0.3, 1.0, -1.0)
    parts = fold_indices("classify", labels, folds, seed)
    assert len(parts) == folds
    joined = np.concatenate(parts)
    assert sorted(joined.tolist()) == list(range(m))  # disjoint and covering
    for value in (-1.0, 1.0):
        counts = [int((labels[p] == value).sum()) for p in parts]
        assert max(counts) - min(counts) <= 1, counts
    sizes = [len(p) for p in parts]
    assert max(sizes) - min(sizes) <= 1
    assert all(np.array_equal(a, b) for a, b in zip(parts, fold_indices("classify", labels, folds, seed), strict=True))


def test_fold_indices_regress() -> None:
    target = np.linspace(0, 1, 11)
    parts = fold_indices("regress", target, 4, 0)
    assert sorted(np.concatenate(parts).tolist()) == list(range(11))
    assert sorted(len(p) for p in parts) == [2, 3, 3, 3]


@pytest.mark.parametrize("folds", [6, 1, 0])
def test_fold_indices_bad_count(folds: int) -> None:
    with pytest.raises(ValueError, match=f"cannot make {folds} folds from 5 records"):
        fold_indices("classify", np.array([1.0, -1, 1, -1, 1]), folds, 0)


def tiny_problem(m: int = 30, seed: int = 5) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.random((m, 3))
    y = np.where(np.sin(4 * X[:, 0]) + X[:, 1] - 0.9 + 0.3 * rng.standard_normal(m) > 0, 1.0, -1.0)
    B = rng.random((4, 3))
    return X, y, B


def test_cross_validation_score_by_hand() -> None:
    X, y, B = tiny_problem()
    K = linear_kernel(X, B)
    parts = fold_indices("classify", y, 3, 0)
    errors = []
    for held in parts:
        train = np.setdiff1d(np.arange(len(y)), held)
        solution = solve_lp("classify", K[train], y[train], 1.0)
        predicted = np.where(K[held] @ solution.u - solution.gamma >= 0, 1.0, -1.0)
        errors.append(np.count_nonzero(predicted != y[held]) / len(held))
    assert cross_validation_score("classify", K, y, 1.0, parts) == pytest.approx(sum(errors) / 3, abs=1e-12)


def test_tune_picks_lowest_cross_validated_error() -> None:
    X, y, B = tiny_problem()
    K = linear_kernel(X, B)
    nus = [1e-3, 0.1, 10.0, 1e3]
    result = tune("classify", "linear", K, y, mu_ref=1.0, points=grid_points(nus, [5.0]), folds=3, seed=4)
    parts = fold_indices("classify", y, 3, 4)
    scores = [cross_validation_score("classify", K, y, nu, parts) for nu in nus]
    best = int(np.argmin(scores))  # first minimum, as tune's ties go to the earlier point
    assert result.nu == nus[best]
    assert result.mu == 0.0
    assert result.score == pytest.approx(scores[best], abs=1e-12)
    assert [s[0] for s in result.scores] == nus
    np.testing.assert_allclose([s[2] for s in result.scores], scores, atol=1e-12)


def test_tune_gaussian_by_rescaling_equals_direct_kernels() -> None:
    X, y, B = tiny_problem(m=36, seed=11)
    nus, mus, mu_ref = [0.1, 10.0, 1e3], [0.25, 2.0, 8.0], 1.0
    calls: list[tuple[int, int]] = []

    def tune_from(mu_fetched: float, mu_values: list[float], **progress: Any) -> TuningResult:
        """Tuning from blocks fetched at ``mu_fetched``; the same folds and nu grid every time."""
        K = gaussian_kernel(X, B, mu_fetched)
        return tune(
            "classify",
            "gaussian",
            K,
            y,
            mu_ref=mu_fetched,
            points=grid_points(nus, mu_values),
            folds=3,
            seed=2,
            **progress,
        )

    rescaled = tune_from(mu_ref, mus, progress=lambda done, total: calls.append((done, total)))
    direct_scores = []
    for mu in mus:
        direct_scores += list(tune_from(mu, [mu]).scores)
    assert [(nu, mu) for nu, mu, _ in rescaled.scores] == [(nu, mu) for mu in mus for nu in nus]
    np.testing.assert_allclose([s[2] for s in rescaled.scores], [s[2] for s in direct_scores], atol=1e-9)
    best = min(range(len(direct_scores)), key=lambda k: direct_scores[k][2])
    assert (rescaled.nu, rescaled.mu) == direct_scores[best][:2]
    assert calls == [(k, 27) for k in range(1, 28)]  # one call per fold fit: 9 grid points x 3 folds


# ---------------------------------------------------------------- privacy rule 3 and mbar


def test_check_mbar() -> None:
    assert check_mbar(4, 5, False, "e") is True
    assert check_mbar(4, 5, True, "e") is True
    assert check_mbar(5, 5, True, "e") is False
    assert check_mbar(9, 5, True, "e") is False
    with pytest.raises(
        PrivacyError, match=r"entity e refuses mbar = 5: it holds only n_j = 5 features.*privacy rule 3 needs mbar <= 4"
    ):
        check_mbar(5, 5, False, "e")
    with pytest.raises(PrivacyError, match="mbar must be >= 1, got 0"):
        check_mbar(0, 5, True, "e")


@pytest.mark.parametrize(
    ("widths", "n_train", "expected"),
    [
        ([10, 20], 1000, 9),
        ([10, 20], 50, 5),
        ([10, 20], 51, 6),
        ([30], 5, 1),
        ([1, 5], 1000, 1),
        ([2], 1, 1),
        ([8, 3, 9], 400, 2),
    ],
)
def test_default_mbar_cases(widths: list[int], n_train: int, expected: int) -> None:
    assert default_mbar(widths, n_train) == expected


@given(st.lists(st.integers(1, 60), min_size=1, max_size=5), st.integers(1, 5000))
def test_default_mbar_rule(widths: list[int], n_train: int) -> None:
    value = default_mbar(widths, n_train)
    cap = -(-n_train // 10)  # ceil(n / 10) in integers
    assert value == max(1, min(min(widths) - 1, cap))
    assert value >= 1
    assert value < min(widths) or min(widths) == 1


# ---------------------------------------------------------------- TrainOptions


@pytest.mark.parametrize(
    ("changes", "fragment"),
    [
        ({"task": "cluster"}, "task must be 'classify' or 'regress', got 'cluster'"),
        ({"kernel": "poly"}, "kernel must be one of linear, gaussian, got 'poly'"),
        (
            {"formulation": "simplex"},
            "LP formulation must be one of auto, ipm, highs-dual, cvxpy-dual, cvxpy-primal, got 'simplex'",
        ),
        ({"mbar": 0}, "mbar must be a whole number >= 1 or 'auto', got 0"),
        ({"nu": 0.0}, "nu must be a number > 0 or 'auto', got 0.0"),
        ({"nu": -1.0}, "nu must be a number > 0 or 'auto', got -1.0"),
        ({"nu": math.nan}, "nu must be a number > 0 or 'auto', got nan"),
        ({"mu": math.inf}, "mu must be a number > 0 or 'auto', got inf"),
        ({"folds": 1}, "folds must be >= 2, got 1"),
        ({"search": "random"}, "search must be one of grid, uniform-design, got 'random'"),
    ],
)
def test_train_options_validation(changes: dict[str, object], fragment: str) -> None:
    with pytest.raises(ConfigError) as caught:
        TrainOptions(**changes)  # type: ignore[arg-type]
    assert fragment in str(caught.value)


def test_train_options_defaults_valid() -> None:
    options = TrainOptions()
    assert (options.task, options.kernel, options.mbar, options.nu, options.mu) == (
        "classify",
        "gaussian",
        None,
        None,
        None,
    )
    assert TrainOptions(task="regress", kernel="linear", mbar=1, nu=1e-9, mu=3.0).mbar == 1


def test_train_options_refuses_fractional_mbar() -> None:
    with pytest.raises(ConfigError, match="mbar"):
        TrainOptions(mbar=2.5)  # type: ignore[arg-type]


# ---------------------------------------------------------------- CLI precedence

BASE = ["coordinator", "train", "--federation", "fed.toml", "--model-out", "m.json"]


def options(flags: list[str], table: dict[str, object]) -> TrainOptions:
    """The flags, then the [task] table, then defaults: the rule ppsvm.api.federation applies for the CLI."""
    return train_options(table, **training_flags(build_parser().parse_args(BASE + flags)))


def test_cli_defaults_without_flags_or_table() -> None:
    got = options([], {})
    assert (got.task, got.kernel, got.mbar, got.nu, got.mu) == ("classify", "gaussian", None, None, None)
    assert got.distribute is True


def test_cli_table_used_when_no_flags() -> None:
    got = options([], {"task": "regress", "kernel": "linear", "mbar": 4, "nu": 2.5, "mu": 0.125})
    assert (got.task, got.kernel, got.mbar, got.nu, got.mu) == ("regress", "linear", 4, 2.5, 0.125)


def test_cli_flags_override_table() -> None:
    table = {"task": "regress", "kernel": "linear", "mbar": 4, "nu": 2.5, "mu": 0.125}
    got = options(
        [
            "--task",
            "classify",
            "--kernel",
            "gaussian",
            "--mbar",
            "7",
            "--nu",
            "30",
            "--mu",
            "0.5",
            "--folds",
            "4",
            "--seed",
            "9",
            "--lp-formulation",
            "cvxpy-dual",
        ],
        table,
    )
    assert (got.task, got.kernel, got.mbar, got.nu, got.mu) == ("classify", "gaussian", 7, 30.0, 0.5)
    assert (got.folds, got.seed, got.formulation) == (4, 9, "cvxpy-dual")


def test_cli_explicit_auto_overrides_table_number() -> None:
    got = options(["--nu", "auto", "--mbar", "auto", "--mu", "auto"], {"mbar": 4, "nu": 2.5, "mu": 0.125})
    assert (got.mbar, got.nu, got.mu) == (None, None, None)
    partial = options(["--nu", "auto"], {"mbar": 4, "nu": 2.5, "mu": 0.125})
    assert (partial.mbar, partial.nu, partial.mu) == (4, None, 0.125)


def test_cli_auto_in_table_means_tuned() -> None:
    got = options([], {"nu": "auto", "mu": "auto", "mbar": "auto"})
    assert (got.mbar, got.nu, got.mu) == (None, None, None)


def test_cli_invalid_values() -> None:
    with pytest.raises(ConfigError, match="nu must be a number > 0"):
        options(["--nu", "-1"], {})
    with pytest.raises(ConfigError, match="nu must be a number > 0"):
        options([], {"nu": 0})
    with pytest.raises(SystemExit):
        build_parser().parse_args(BASE + ["--mbar", "lots"])


@pytest.mark.parametrize("table", [{"mbar": "5"}, {"nu": "0.5"}])
def test_cli_string_number_in_table_is_config_error(table: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        options([], table)


# ---------------------------------------------------------------- grids and failed grid points


def test_search_grid_runs_opposite_ways_for_the_two_tasks() -> None:
    from ppsvm.core.tuning import search_grid

    classify_nu, classify_mu = search_grid("classify", "gaussian", 10, None, None)
    regress_nu, _ = search_grid("regress", "gaussian", 10, None, None)
    assert max(classify_nu) >= 1e3 and min(regress_nu) <= 1e-4  # strong error weight vs weak ||u||_1 weight
    assert classify_mu[0] * 10 == pytest.approx(1 / 64) and classify_mu[-1] * 10 == pytest.approx(256.0)
    assert search_grid("classify", "linear", 10, None, None)[1] == (0.0,)
    assert search_grid("regress", "gaussian", 10, 0.5, 0.25) == ((0.5,), (0.25,))


def test_a_grid_point_whose_lp_fails_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    import ppsvm.core.tuning as tuning
    from ppsvm.errors import SolverError

    rng = np.random.default_rng(0)
    K = rng.random((40, 3))
    y = np.where(K[:, 0] > 0.5, 1.0, -1.0)
    real = tuning.solve_lp

    def flaky(task, K, target, nu, formulation="ipm", weights=None):
        if nu == 1.0:
            raise SolverError("HiGHS stopped with status 'Unknown'")
        return real(task, K, target, nu, formulation, weights)

    monkeypatch.setattr(tuning, "solve_lp", flaky)
    result = tuning.tune(
        "classify", "linear", K, y, mu_ref=1.0, points=grid_points((0.1, 1.0, 10.0), (0.0,)), folds=4, seed=0
    )
    scores = {nu: score for nu, _, score in result.scores}
    assert scores[1.0] == float("inf") and result.nu != 1.0 and np.isfinite(result.score)

    monkeypatch.setattr(tuning, "solve_lp", lambda *a, **k: (_ for _ in ()).throw(SolverError("always")))
    with pytest.raises(SolverError, match="any grid point"):
        tuning.tune("classify", "linear", K, y, mu_ref=1.0, points=[(0.1, 0.0)], folds=4, seed=0)


def test_classification_report_matches_scikit_learn() -> None:
    from sklearn.metrics import balanced_accuracy_score, confusion_matrix, recall_score

    rng = np.random.default_rng(8)
    labels = np.where(rng.random(203) < 0.3, 1.0, -1.0)
    decision = labels * 0.5 + rng.normal(size=203)
    decision[:7] = 0.0  # a score of 0 predicts +1
    report = classification_report(labels, decision)
    predicted = np.where(decision >= 0, 1.0, -1.0)
    (tn, fp), (fn, tp) = confusion_matrix(labels, predicted, labels=[-1.0, 1.0])
    assert report["confusion_matrix"] == {
        "true_positive": tp,
        "false_positive": fp,
        "true_negative": tn,
        "false_negative": fn,
    }
    assert report["sensitivity"] == pytest.approx(recall_score(labels, predicted, pos_label=1.0))
    assert report["specificity"] == pytest.approx(recall_score(labels, predicted, pos_label=-1.0))
    assert report["balanced_accuracy"] == pytest.approx(balanced_accuracy_score(labels, predicted))
    deciles = report["calibration"]
    assert len(deciles) == 10 and sum(d["n"] for d in deciles) == 203
    assert all(a["score_high"] <= b["score_low"] for a, b in zip(deciles[:-1], deciles[1:], strict=True))
    # The score ranks: the top decile holds a larger share of positives than the bottom one.
    assert deciles[-1]["positive_rate"] > deciles[0]["positive_rate"]
    assert sum(d["positive_rate"] * d["n"] for d in deciles) == pytest.approx(np.sum(labels > 0))
    one_class = classification_report(np.ones(3), np.array([1.0, -1.0, 2.0]))
    assert np.isnan(one_class["specificity"]) and one_class["sensitivity"] == pytest.approx(2 / 3)


def test_a_small_gaussian_basis_is_warned_of_with_the_private_alternatives() -> None:
    # Three hospitals with 6 features each (horizontal): 5 points, and only the linear kernel helps.
    (warning,) = _basis_warnings("gaussian", "paper", 5, [6], 630, product_tried=False)
    assert "mbar = 5" in warning and "at most 5" in warning and "--kernel linear" in warning
    assert "--basis product" not in warning
    # A checkerboard of narrow blocks with --basis paper: the product basis is offered first, with its column count.
    (warning,) = _basis_warnings("gaussian", "paper", 2, [3, 3], 630, product_tried=False)
    assert warning.index("--basis product (up to 63 columns") < warning.index("--kernel linear")
    # --basis auto tried the product basis and the paper's won: only the linear kernel is left to suggest.
    (warning,) = _basis_warnings("gaussian", "paper", 2, [3, 3], 630, product_tried=True)
    assert "--basis product" not in warning and "--kernel linear" in warning
    assert _basis_warnings("gaussian", "paper", 12, [13, 17], 630, product_tried=False) == []
    assert _basis_warnings("linear", "paper", 2, [3, 3], 630, product_tried=False) == []
    assert _basis_warnings("gaussian", "product", 2, [3, 3], 630, product_tried=True) == []
