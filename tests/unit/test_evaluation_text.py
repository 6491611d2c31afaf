"""`coordinator evaluate`'s text for people (issue 30 item 6): no dict reprs, no 16-digit floats."""

from __future__ import annotations

from ppsvm.cli_coordinator import evaluation_text


def test_random_kernel_figures_sit_beside_their_baselines() -> None:
    text = evaluation_text(
        {
            "error_rate": 0.07017543859649122,
            "auc": 0.9851239669421488,
            "n_test": 171,
            "private": True,
            "trivial_baseline": {"majority_error_rate": 0.3742690058479532, "constant_auc": 0.5},
            "confusion_matrix": {"true_positive": 59, "false_positive": 7, "true_negative": 100, "false_negative": 5},
            "sensitivity": 0.921875,
            "specificity": 0.9345794392523364,
            "balanced_accuracy": 0.9282272196261683,
            "calibration": [{"score_low": -1.0}],
            "roc": [[0.0, 0.0]],
            "brier": 0.05102,
            "brier_class_frequency": 0.23419,
            "reliability": [{"predicted": 0.0123, "observed": 0.0, "n": 17}],
        }
    )
    lines = text.splitlines()
    assert lines[0] == "held-out records: 171"
    assert "error rate: 0.07018   (majority class: 0.3743)" in text
    assert "Brier score: 0.05102   (class frequency: 0.2342)" in text
    assert "59 true positive, 7 false positive, 100 true negative, 5 false negative" in text
    assert lines[-1] == "   0.012 ->  0.000  (17 records)"
    assert "{" not in text and "0.0701754" not in text and "score_low" not in text


def test_dp_and_regression_figures() -> None:
    dp = evaluation_text(
        {"error_rate": 0.2, "error_noise": 3.5, "evaluation_epsilon": 0.5, "n_test": 100, "private": True,
         "method": "dp-hybrid", "epsilon": 1.0}
    )  # fmt: skip
    assert "error noise: 3.5" in dp and "method: dp-hybrid" in dp
    regress = evaluation_text(
        {"relative_error": 0.1234567, "rmse": 2.5, "n_test": 9, "private": False,
         "trivial_baseline": {"mean_relative_error": 0.5, "mean_rmse": 9.87654}}
    )  # fmt: skip
    assert "held-out records: 9 (NOT PRIVATE)" in regress and "RMSE: 2.5   (mean target: 9.877)" in regress
