"""The Python API: estimators against the coordinator's own path, labels, errors, parameters, the README example."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import GridSearchCV

from ppsvm import DpHybridClassifier, RandomKernelClassifier, RandomKernelRegressor, load_dataset
from ppsvm.api.inprocess import serve_split, set_secrets, simulation_secrets
from ppsvm.coordinator.dp_train import RHO_TOLERANCE
from ppsvm.coordinator.evaluate import assembled_decisions
from ppsvm.coordinator.train import TrainOptions, train
from ppsvm.core.fourier import apply_scaling, fourier_features, learn_frequencies, public_kernel_width, public_scaling
from ppsvm.core.linear_svm import train_linear_svm
from ppsvm.core.model import Model
from ppsvm.core.randomness import record_pseudonyms
from ppsvm.core.threshold import MIN_THRESHOLD_EDGES
from ppsvm.data.dataset import DatasetOptions
from ppsvm.data.dataset import load_dataset as read_dataset
from ppsvm.data.partition import ID_KEY_FILE, SplitOptions, split_dataset
from ppsvm.errors import ConfigError, DataError, PrivacyError

REPO = Path(__file__).resolve().parents[2]
SEED = 7


@pytest.fixture(scope="module")
def wdbc() -> tuple[np.ndarray, np.ndarray]:
    """240 WDBC records with the file's own labels, M (malignant) and B."""
    X, y = load_dataset("wdbc")
    return X[:240], np.where(y[:240] > 0, "M", "B")


def smooth_target(m: int = 200, n: int = 4) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    X = rng.uniform(-3, 3, (m, n))
    return X, np.sinc(X[:, 0] / 3) + 0.3 * X[:, 1]


def coordinator_path(
    tmp: Path, X: np.ndarray, y: np.ndarray, options: TrainOptions, column_blocks: list[list[int]] | None
) -> tuple[Model, np.ndarray]:
    """What `ppsvm split DATA --rows 2 --cols 2` and `coordinator train` give on X written to a file, with the
    secrets the estimator documents (simulation_secrets of its random_state): the model, and the decision value of
    each row of X from the entities' kernel blocks, shape (m,)."""
    data = tmp / "data.csv"
    label = str if options.task == "classify" else lambda v: repr(float(v))
    data.write_text("".join(f"rec{k},{label(y[k])},{','.join(map(repr, X[k].tolist()))}\n" for k in range(len(y))))
    positive = "M" if options.task == "classify" else None
    dataset = read_dataset(data, DatasetOptions(label=1, id_column=0, task=options.task, positive=positive))
    split_options = SplitOptions(
        rows=2, cols=2, out_dir=tmp / "split", test_fraction=0.0, seed=options.seed, task=options.task
    )
    split = split_dataset(dataset, split_options, column_blocks=column_blocks)
    set_secrets(split, simulation_secrets(options.seed, 2))
    with serve_split(split, tmp) as federation:
        model = train(federation, options)
        ids, _, decision = assembled_decisions(federation, model, ("train",))["train"]
    # The entities name records by keyed pseudonym: map them back to rows with the split's record-id key.
    key = bytes.fromhex((split_options.out_dir / ID_KEY_FILE).read_text().strip())
    row_of = {record: k for k, record in enumerate(record_pseudonyms(key, [f"rec{k}" for k in range(len(y))]))}
    by_row = np.empty(len(y))
    by_row[[row_of[record] for record in ids.tolist()]] = decision
    return model, by_row


@pytest.mark.parametrize(
    ("estimator", "task", "column_blocks"),
    [
        (RandomKernelClassifier(row_blocks=2, column_blocks=2, random_state=SEED), "classify", None),
        (
            RandomKernelRegressor(row_blocks=2, column_blocks=[[0, 2], [3, 1]], kernel="linear", random_state=SEED),
            "regress",
            [[0, 2], [3, 1]],
        ),
    ],
    ids=["classifier-gaussian-tuned", "regressor-linear-given-blocks"],
)
def test_estimator_equals_the_coordinator_path(estimator, task: str, column_blocks, wdbc, tmp_path: Path) -> None:
    """Same split, seed and secrets: the same model, and predict's local kernel rows (from the secrets) give the
    decision values the entities' kernel blocks give over gRPC, to 1e-9."""
    X, y = wdbc if task == "classify" else smooth_target()
    estimator.fit(X, y)
    options = TrainOptions(task=task, kernel=estimator.kernel, seed=SEED, distribute=False)
    model, by_entities = coordinator_path(tmp_path, X, y, options, column_blocks)
    np.testing.assert_allclose(estimator.model_.u, model.u, rtol=0, atol=1e-9)
    assert estimator.model_.gamma == pytest.approx(model.gamma, abs=1e-9)
    decision = estimator.decision_function(X) if task == "classify" else estimator.predict(X)
    np.testing.assert_allclose(decision, by_entities, rtol=0, atol=1e-9)


def test_the_uniform_design_search_reaches_the_coordinator(wdbc) -> None:
    X, y = wdbc
    model = RandomKernelClassifier(column_blocks=2, search="uniform-design", random_state=0).fit(X, y).model_
    assert model.training["tuning"]["search"] == "uniform-design" and len(model.training["tuning"]["grid"]) == 60
    assert 1e-7 <= model.nu <= 1e7


def test_any_two_labels_map_to_the_lp_signs(wdbc) -> None:
    X, y = wdbc
    for labels in (("B", "M"), (0, 1), (-1.0, 1.0), (3, 7)):
        mapped = np.where(y == "M", labels[1], labels[0])
        model = RandomKernelClassifier(column_blocks=2, nu=10.0, mu=0.05, random_state=1).fit(X, mapped)
        assert model.classes_.tolist() == list(labels)
        decision = model.decision_function(X)
        assert (model.predict(X) == np.where(decision >= 0, labels[1], labels[0])).all()
        assert (
            model.score(X, mapped) == pytest.approx(np.mean(model.predict(X) == mapped))
            and model.score(X, mapped) > 0.9
        )


def test_the_regressor_scores_r2() -> None:
    X, y = smooth_target(n=6)
    model = RandomKernelRegressor(random_state=0).fit(X, y)  # one block of 6 features: mbar = 5 random points
    residual = y - model.predict(X)
    assert model.score(X, y) == pytest.approx(1 - residual @ residual / np.sum((y - y.mean()) ** 2))
    assert model.score(X, y) > 0.6


@pytest.mark.parametrize(
    ("change", "error", "message"),
    [
        (lambda X, y: (np.where(np.arange(X.size).reshape(X.shape) == 7, np.nan, X), y), ValueError, "NaN"),
        (lambda X, y: (np.where(np.arange(X.size).reshape(X.shape) == 7, np.inf, X), y), ValueError, "infinity"),
        (lambda X, y: (X, np.full(len(y), "B")), DataError, r"needs two or more classes; y holds \['B'\] only"),
        (lambda X, y: (X, np.linspace(0.0, 1.0, len(y))), ValueError, "Unknown label type: continuous"),
        (lambda X, y: (X, y[:-1]), ValueError, "inconsistent numbers of samples"),
        (lambda X, y: (X[:1], y[:1]), ValueError, r"1 sample\(s\)"),
        (lambda X, y: (X[:, :3], y), ConfigError, r"column block 1 has 1 feature\(s\).*privacy rule 3"),
    ],
    ids=["nan", "inf", "one-class", "continuous", "shapes", "one-record", "narrow-block"],
)
def test_bad_training_input_is_refused_with_a_clear_message(wdbc, change, error, message: str) -> None:
    X, y = change(*wdbc)
    with pytest.raises(error, match=message):
        RandomKernelClassifier(column_blocks=2, random_state=0).fit(X, y)


@pytest.mark.parametrize(
    ("parameters", "error", "message"),
    [
        ({"kernel": "rbf"}, ConfigError, "kernel must be one of linear, gaussian, got 'rbf'"),
        ({"nu": -1.0}, ConfigError, "nu must be a number > 0 or 'auto', got -1.0"),
        ({"mbar": 2.5}, ConfigError, "mbar must be a whole number >= 1 or 'auto', got 2.5"),
        ({"row_blocks": 0}, ConfigError, "row_blocks must be a whole number >= 1, got 0"),
        ({"column_blocks": 40}, ConfigError, "column_blocks = 40 but X has 30 features"),
        ({"column_blocks": [[0, 1], [1, 2]]}, ConfigError, "exactly once"),
        ({"column_blocks": [["radius", "texture"]]}, ConfigError, r"names feature 'radius'.*no column names"),
        ({"column_blocks": "two"}, ConfigError, "a count or a list"),
        ({"search": "random"}, ConfigError, "search must be one of grid, uniform-design, got 'random'"),
        ({"random_state": -1}, ValueError, "Seed must be between 0 and 2"),
    ],
)
def test_bad_parameters_are_refused_in_fit_not_in_init(wdbc, parameters: dict, error, message: str) -> None:
    estimator = RandomKernelClassifier(**parameters)  # stored unchecked, as scikit-learn asks
    assert all(estimator.get_params()[key] is value for key, value in parameters.items())
    with pytest.raises(error, match=message):
        estimator.fit(*wdbc)


def test_mbar_at_or_above_a_block_width_meets_the_entities_refusal(wdbc) -> None:
    with pytest.raises(PrivacyError, match=r"mbar = 15 is not below the 15 features of column block 0"):
        RandomKernelClassifier(column_blocks=2, mbar=15, nu=1.0, mu=0.05, random_state=0).fit(*wdbc)


def test_prediction_input_is_checked(wdbc) -> None:
    X, y = wdbc
    with pytest.raises(NotFittedError):
        RandomKernelClassifier().predict(X)
    model = RandomKernelClassifier(column_blocks=2, nu=10.0, mu=0.05, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="X has 29 features, but RandomKernelClassifier is expecting 30"):
        model.predict(X[:, 1:])
    with pytest.raises(ValueError, match="NaN"):
        model.predict(np.full_like(X[:2], np.nan))


def test_parameters_follow_scikit_learn(wdbc) -> None:
    estimator = RandomKernelClassifier(row_blocks=2, column_blocks=[[0, 1], [2, 3]], nu=1.0)
    params = estimator.get_params()
    assert params["column_blocks"] == [[0, 1], [2, 3]] and params["mu"] == "auto" and params["random_state"] is None
    assert estimator.set_params(nu=2.0, kernel="linear") is estimator and estimator.nu == 2.0
    twin = clone(estimator)
    assert twin.get_params() == estimator.get_params() and twin is not estimator
    assert set(RandomKernelRegressor().get_params()) == set(params)
    assert set(DpHybridClassifier().get_params()) == {
        "method",
        "epsilon",
        "mechanism",
        "n_frequencies",
        "C",
        "width_factor",
        "threshold_epsilon",
        "row_blocks",
        "public_size",
        "allow_noisy",
        "random_state",
    }
    with pytest.raises(TypeError):
        RandomKernelClassifier(2, 2)  # type: ignore[misc]  # keyword-only, as docs/design.md asks


def test_a_grid_search_clones_and_refits_the_estimator(wdbc) -> None:
    X, y = wdbc
    search = GridSearchCV(RandomKernelClassifier(column_blocks=2, mu=0.05, random_state=0), {"nu": [1.0, 100.0]}, cv=2)
    search.fit(X, y)
    assert search.best_params_["nu"] in (1.0, 100.0) and search.best_estimator_.model_.nu == search.best_params_["nu"]


def test_a_fixed_random_state_repeats_the_fit_and_none_draws_new_secrets(wdbc) -> None:
    X, y = wdbc
    settings = {"column_blocks": 2, "nu": 10.0, "mu": 0.05}
    first = RandomKernelClassifier(random_state=3, **settings).fit(X, y)
    again = RandomKernelClassifier(random_state=3, **settings).fit(X, y)
    assert first.model_.u == again.model_.u
    fresh = [RandomKernelClassifier(**settings).fit(X, y) for _ in range(2)]
    assert fresh[0].model_.u != fresh[1].model_.u  # other secrets, other B_j


def test_a_dataframe_keeps_its_column_names_and_blocks_may_name_them() -> None:
    X, y = load_dataset("wdbc", as_frame=True)
    X, y = X.iloc[:200], y.iloc[:200]
    names = list(X.columns)
    model = RandomKernelClassifier(column_blocks=[names[::2], names[1::2]], nu=10.0, mu=0.05, random_state=0).fit(X, y)
    assert model.feature_names_in_.tolist() == names
    assert [b.tolist() for b in model.column_blocks_] == [list(range(0, 30, 2)), list(range(1, 30, 2))]
    with pytest.warns(UserWarning, match="does not have valid feature names"):
        np.testing.assert_array_equal(model.predict(X.to_numpy()), model.predict(X))
    with pytest.raises(ValueError, match="feature names"):
        model.predict(X[names[::-1]])


def test_dp_hybrid_without_noise_equals_the_papers_pipeline(wdbc) -> None:
    """mechanism "none" (NOT PRIVATE, the simulated entity consents): rho, scaling and width from the public
    records, and the weights of the exact SVM on zhat of the private ones, as ppsvm.core.dp computes them."""
    X, y = wdbc
    public = np.arange(12, 24)  # both classes; learning rho costs seconds per dozen public records
    private = np.setdiff1d(np.arange(len(y)), public)
    paper = {"C": 1.0, "width_factor": 1.0}
    model = DpHybridClassifier(mechanism="none", n_frequencies=30, threshold_epsilon=None, random_state=SEED, **paper)
    model.fit(X[private], y[private], X_public=X[public], y_public=y[public])
    signed = np.where(y == "M", 1.0, -1.0)
    low, high = public_scaling(X[public])
    width = public_kernel_width(apply_scaling(X[public], low, high))
    rho = learn_frequencies(
        apply_scaling(X[public], low, high), width, 30, np.random.default_rng(SEED), tol=RHO_TOLERANCE
    ).rho
    svm = train_linear_svm(fourier_features(apply_scaling(X[private], low, high), rho), signed[private], C=1.0)
    assert model.model_.kernel_width == width and model.model_.mechanism == "none" and not model.model_.private
    np.testing.assert_array_equal(np.array(model.model_.rho), rho)
    # The minimiser is unique; the solver certifies ||w - w*|| <= sqrt(2e-12) whatever the record order.
    np.testing.assert_allclose(model.model_.weights, svm.w, rtol=0, atol=3e-6)
    decision = fourier_features(apply_scaling(X, low, high), rho) @ np.array(model.model_.weights)
    np.testing.assert_allclose(model.decision_function(X), decision, rtol=0, atol=1e-12)
    assert (model.predict(X) == np.where(decision >= 0, "M", "B")).all()
    assert model.model_.threshold == 0.0 and "threshold" not in model.model_.training

    # The default adds the threshold the entities' noised score histograms choose: same weights, shifted cut.
    cut = DpHybridClassifier(mechanism="none", n_frequencies=30, random_state=SEED, **paper)
    cut.fit(X[private], y[private], X_public=X[public], y_public=y[public])
    np.testing.assert_array_equal(cut.model_.weights, model.model_.weights)
    np.testing.assert_allclose(cut.decision_function(X), decision - cut.model_.threshold, rtol=0, atol=1e-12)
    chosen = cut.model_.training["threshold"]
    assert chosen["epsilon"] == 0.1 and chosen["bins"] >= MIN_THRESHOLD_EDGES + 1
    # 545 records, noise of 28 per count at epsilon 0.1: few bins, and the cut leaves 0 only for a clear win,
    # so the training errors are not worse than at 0 beyond the noise of a few counts.
    exact = np.sum(np.where(cut.decision_function(X[private]) >= 0, "M", "B") != y[private])
    at_zero = np.sum(np.where(decision[private] >= 0, "M", "B") != y[private])
    assert exact <= at_zero + 60


@pytest.mark.parametrize("epsilon", [1.001, 100.0])
def test_dp_hybrid_releases_through_the_entities_budget(wdbc, epsilon: float) -> None:
    """Laplace noise on each of three entities' weights, within a budget of one release. 1.001 * 1e6 is
    1000999.99... in floating point: a budget of exactly 1.001 rounds down below the charge, which rounds up."""
    X, y = wdbc
    # The paper's C and width: 12 public records say little, and this test is about the budget (at epsilon 1,
    # 190 records per entity, the noise dominates: allowed here).
    model = DpHybridClassifier(
        epsilon=epsilon,
        row_blocks=3,
        n_frequencies=30,
        public_size=12,
        C=1.0,
        width_factor=1.0,
        allow_noisy=True,
        random_state=0,
    )
    model.fit(X, y)
    assert model.model_.private and model.model_.mechanism == "laplace" and model.model_.epsilon == epsilon
    assert len(model.model_.entities) == 3 and sum(e.n_train for e in model.model_.entities) == len(y) - 12
    assert model.model_.training["n_public"] == 12
    # The budget held exactly the weights' and the threshold's releases.
    assert model.model_.training["threshold"]["epsilon"] == 0.1
    assert all(remaining == 0.0 for remaining in model.model_.training["budget_remaining"].values())
    if epsilon == 100.0:  # noise of scale 2^2.5 sqrt(30) / (76 * 100) per coordinate: the SVM shows through
        assert model.score(X, y) > 0.85


def test_a_release_that_would_be_mostly_noise_is_refused_before_anything_is_spent(wdbc) -> None:
    X, y = wdbc
    with pytest.raises(ConfigError, match=r"(?s)would be mostly noise at r0c0 \(\d+ records: noise ") as refused:
        DpHybridClassifier(epsilon=1.0, row_blocks=3, n_frequencies=30, public_size=12, C=1.0, random_state=0).fit(X, y)
    # The advice in the estimator's words, not the command's flags.
    message = str(refused.value)
    assert "Raise epsilon, lower n_frequencies" in message and "pass allow_noisy=True" in message
    assert "--" not in message


def test_dp_public_only_and_public_records_checked(wdbc) -> None:
    X, y = wdbc
    model = DpHybridClassifier(method="public-only", public_size=60, random_state=0).fit(X, y)
    assert model.model_.method == "public-only" and not model.model_.entities and model.score(X, y) > 0.85
    with pytest.raises(DataError, match=r"y_public holds labels \['X'\] that y does not"):
        DpHybridClassifier(mechanism="none").fit(X, y, X_public=X[:20], y_public=np.full(20, "X"))
    with pytest.raises(ValueError, match="X has 3 features, but DpHybridClassifier is expecting 30"):
        DpHybridClassifier(mechanism="none").fit(X, y, X_public=X[:20, :3], y_public=y[:20])
    with pytest.raises(ConfigError, match="epsilon must be a finite number > 0, got 0"):
        DpHybridClassifier(epsilon=0).fit(X, y)


def test_dp_refuses_several_classes_and_names_the_alternatives(wdbc) -> None:
    X, y = wdbc
    with pytest.raises(DataError, match=r"split each entity's epsilon.*RandomKernelClassifier.*epsilon / k"):
        DpHybridClassifier().fit(X, np.arange(len(y)) % 3)


@pytest.mark.parametrize("name", ["RandomKernelClassifier", "DpHybridClassifier"])
def test_without_scikit_learn_the_error_names_the_extra(name: str) -> None:
    blocked = "import sys\nsys.modules['sklearn'] = None  # as if not installed\nimport ppsvm\n"
    probe = blocked + f"try:\n    ppsvm.{name}\nexcept ImportError as e:\n    print(e)"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "ppsvm's estimators need scikit-learn: pip install 'ppsvm[api]'"


def test_readme_example_runs_and_reports_its_time() -> None:
    """The README's Python example, run as a user would in a fresh interpreter (imports included)."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    (code,) = re.findall(r"```python\n(.*?)```", readme, flags=re.S)
    assert len(code.strip().splitlines()) <= 5, "the README promises a five-line example"
    started = time.perf_counter()
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=REPO)
    seconds = time.perf_counter() - started
    assert result.returncode == 0, result.stderr
    accuracy = float(result.stdout.split()[-1])
    assert accuracy > 0.9, result.stdout
    print(f"README example: {seconds:.2f} s wall, accuracy {accuracy:.4f}")
