"""scikit-learn's own estimator checks on the three estimators, as users construct them.

The checks that cannot pass are expected failures with their reasons; the docs' "Python API" page
section lists the same ones (a test below keeps the two in step).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from sklearn.base import BaseEstimator
from sklearn.utils.estimator_checks import parametrize_with_checks

from ppsvm import DpHybridClassifier, RandomKernelClassifier, RandomKernelRegressor

PYTHON_API_PAGE = Path(__file__).resolve().parents[2] / "docs" / "how-to" / "python-api.md"

PRIVACY_FLOOR = (
    "the check's blobs have 2 features, so privacy rule 3 (mbar < n_j) allows one random point: the kernel "
    "cannot separate them (training accuracy about 0.5, the check asks 0.83)"
)
DP_NOISE = (
    "the released weights carry Laplace noise from the OS generator, which random_state does not seed "
    "(docs/design.md: no fixed seed in production paths), so two fits differ"
)
WEIGHTS_AGAINST_REPEATS = (
    "weights equal repeated records in the LP (tests/unit/test_class_weight.py, at fixed nu and mu), but the "
    "k-fold tuning and the calibration's folds deal records, not weight, so the repeated data gets other folds, "
    "another nu and mu and another sigmoid"
)
EXPECTED_FAILURES: dict[str, dict[str, str]] = {
    "RandomKernelClassifier": {
        "check_classifiers_train": PRIVACY_FLOOR,
        "check_sample_weight_equivalence_on_dense_data": WEIGHTS_AGAINST_REPEATS,
    },
    "RandomKernelRegressor": {
        "check_sample_weight_equivalence_on_dense_data": WEIGHTS_AGAINST_REPEATS,
        "check_estimators_nan_inf": (
            "tuning scores each fold by the relative error ||y - f|| / ||y||, infinite on a fold whose held-out "
            "targets are all 0 (the check's 10 targets are five 0s and five 1s), so no grid point is usable"
        ),
    },
    "DpHybridClassifier": {
        "check_fit_idempotent": DP_NOISE,
        "check_supervised_y_2d": DP_NOISE,
        "check_classifier_data_not_an_array": DP_NOISE,
        "check_classifiers_train": (
            "epsilon = 1 on about 180 private records: Laplace noise of scale 2^2.5 sqrt(D) / (n epsilon) per "
            "coordinate swamps the weights, and the accuracy asked (0.83) is reached on some draws only"
        ),
    },
}


def expected_failures(estimator: BaseEstimator) -> dict[str, str]:
    return EXPECTED_FAILURES[type(estimator).__name__]


@pytest.mark.slow
@parametrize_with_checks(
    [
        RandomKernelClassifier(random_state=0),
        RandomKernelRegressor(random_state=0),
        # 20 frequencies instead of 100: learning rho dominates the time of each of the checks' fits. The checks'
        # datasets are tiny, so the noise dominates every release: allowed, since they check conventions.
        DpHybridClassifier(n_frequencies=20, allow_noisy=True, random_state=0),
    ],
    expected_failed_checks=expected_failures,
)
def test_scikit_learn_estimator_checks(estimator: BaseEstimator, check: Callable[[BaseEstimator], None]) -> None:
    check(estimator)


def test_the_python_api_page_lists_every_expected_failure() -> None:
    section = PYTHON_API_PAGE.read_text(encoding="utf-8")
    for name, failures in EXPECTED_FAILURES.items():
        for check in failures:
            found = re.search(rf"{name}\b.*`{check}`|`{check}`.*{name}\b", section)
            assert found, f"docs/how-to/python-api.md lacks {name}: {check}"
