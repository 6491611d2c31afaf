"""Issue 29 item 9: advice reaches notebook users as PpsvmWarning, in the estimators' words, not through logging."""

from __future__ import annotations

import logging
import warnings

import numpy as np
import pytest

from ppsvm.api.datasets import load_dataset
from ppsvm.api.estimators import RandomKernelClassifier
from ppsvm.errors import PpsvmWarning


def _weak_basis_fit() -> RandomKernelClassifier:
    X, y = load_dataset("wdbc")
    # Two blocks of 3 features: privacy rule 3 allows mbar = 2, which the coordinator advises against.
    return RandomKernelClassifier(column_blocks=[[0, 1, 2], [3, 4, 5]], nu=1.0, mu=0.5, random_state=0).fit(
        np.asarray(X)[:, :6], y
    )


def test_advice_is_a_warning_in_api_words_at_the_users_line(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _weak_basis_fit()
    advice = [w for w in caught if issubclass(w.category, PpsvmWarning)]
    assert len(advice) == 1
    text = str(advice[0].message)
    assert "mbar = 2" in text and "kernel='linear'" in text and "basis='product'" in text
    assert "--" not in text and "ppsvm coordinator" not in text  # no command-line words
    assert advice[0].filename == __file__
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING and r.name.startswith("ppsvm")]


def test_a_filter_silences_it() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.filterwarnings("ignore", category=PpsvmWarning)
        _weak_basis_fit()
    assert not [w for w in caught if issubclass(w.category, PpsvmWarning)]


def test_logging_is_restored_after_fit() -> None:
    package = logging.getLogger("ppsvm")
    before = (package.propagate, list(package.handlers))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _weak_basis_fit()
    assert (package.propagate, list(package.handlers)) == before
