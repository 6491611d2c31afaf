"""Tuning at scale: the stratified subset, successive halving, and the progress estimate."""

from __future__ import annotations

import logging

import numpy as np
import pytest

import ppsvm.core.tuning as tuning
from ppsvm.core.kernels import gaussian_kernel
from ppsvm.core.tuning import cross_validation_score, fold_indices, grid_points, tune, tuning_row_limit, tuning_rows
from ppsvm.progress import EtaLog, WaitLog, clock


def problem(m: int, seed: int = 0, positive_share: float = 0.3) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.random((m, 4))
    y = np.where(X[:, 0] + 0.2 * rng.standard_normal(m) > 1.0 - positive_share, 1.0, -1.0)
    return gaussian_kernel(X, rng.random((3, 4)), 0.5), y


def test_tuning_rows_are_a_stratified_sorted_subset() -> None:
    _, y = problem(5000)
    rows = tuning_rows("classify", y, 1000, seed=3)
    assert len(rows) == 1000 and len(np.unique(rows)) == 1000 and np.all(np.diff(rows) > 0)
    assert np.mean(y[rows] > 0) == pytest.approx(np.mean(y > 0), abs=1e-3)
    assert np.array_equal(rows, tuning_rows("classify", y, 1000, seed=3))
    assert not np.array_equal(rows, tuning_rows("classify", y, 1000, seed=4))


def test_tuning_rows_keep_a_rare_class() -> None:
    y = -np.ones(10_000)
    y[123] = 1.0
    rows = tuning_rows("classify", y, 50, seed=0)
    assert 123 in rows and len(rows) == 50


def test_row_limit_shrinks_with_the_basis() -> None:
    assert tuning_row_limit(19) == tuning.TUNING_MAX_ROWS
    assert tuning_row_limit(300) == tuning.TUNING_MIN_ROWS
    assert tuning.TUNING_MIN_ROWS < tuning_row_limit(30) < tuning.TUNING_MAX_ROWS


def test_tune_on_more_rows_than_the_limit_uses_the_subset(monkeypatch: pytest.MonkeyPatch) -> None:
    """The scores are those of plain cross-validation on the stratified subset, and it says how many rows."""
    monkeypatch.setattr(tuning, "HALVING_FROM_ROWS", 10**9)
    K, y = problem(900)
    nus = [0.1, 10.0]
    result = tune("classify", "linear", K, y, mu_ref=1.0, points=grid_points(nus, [0.0]), folds=3, seed=2, max_rows=300)
    rows = tuning_rows("classify", y, 300, seed=2)
    parts = fold_indices("classify", y[rows], 3, 2)
    expected = [cross_validation_score("classify", K[rows], y[rows], nu, parts) for nu in nus]
    assert result.rows == 300 and result.promoted == 2
    np.testing.assert_allclose([s[2] for s in result.scores], expected, atol=1e-12)


def test_successive_halving(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every grid point on the first fold; the best quarter (>= 3) on all folds with the full-CV score; the
    winner is the best of those."""
    monkeypatch.setattr(tuning, "HALVING_FROM_ROWS", 100)
    K, y = problem(400, seed=1)
    nus, mus = [1e-2, 1.0, 1e2, 1e4], [0.1, 0.5, 2.0]
    calls: list[tuple[int, int]] = []
    result = tune(
        "classify", "gaussian", K, y, mu_ref=0.5, points=grid_points(nus, mus), folds=4, seed=0,
        progress=lambda done, total: calls.append((done, total)),
    )  # fmt: skip
    grid = [(nu, mu) for mu in mus for nu in nus]
    assert result.promoted == 3
    assert calls == [(k, 12 + 3 * 3) for k in range(1, 22)]  # 12 first-fold fits, then 3 folds x 3 promoted
    parts = fold_indices("classify", y, 4, 0)
    first = [cross_validation_score("classify", K ** (mu / 0.5), y, nu, parts[:1]) for nu, mu in grid]
    promoted = sorted(sorted(range(12), key=lambda k: (first[k], k))[:3])
    full = {k: cross_validation_score("classify", K ** (grid[k][1] / 0.5), y, grid[k][0], parts) for k in promoted}
    for k, (_, _, score) in enumerate(result.scores):
        assert score == pytest.approx(full[k] if k in promoted else first[k], abs=1e-12)
    best = min(promoted, key=lambda k: (full[k], k))
    assert (result.nu, result.mu) == grid[best] and result.score == pytest.approx(full[best], abs=1e-12)


def test_eta_log(caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    now = [100.0]
    monkeypatch.setattr("ppsvm.progress.time.monotonic", lambda: now[0])
    progress = EtaLog(logging.getLogger("test.eta"), "tuning", every=10.0)
    with caplog.at_level(logging.INFO, logger="test.eta"):
        now[0] = 105.0
        progress(1, 4)  # 5 s after the start: too soon for a line
        now[0] = 120.0
        progress(2, 4)
        now[0] = 121.0
        progress(4, 4)  # the last step is always logged
    assert [r.getMessage() for r in caplog.records] == [
        "tuning: 2/4, 20s elapsed, about 20s left",
        "tuning: 4/4, 21s elapsed",
    ]
    assert clock(185.4) == "3m05s" and clock(42) == "42s"


def test_wait_log_reports_until_the_work_ends(caplog: pytest.LogCaptureFixture) -> None:
    import time

    with caplog.at_level(logging.INFO, logger="test.wait"):
        with WaitLog(logging.getLogger("test.wait"), lambda: "waiting for r0c1", every=0.05):
            time.sleep(0.3)
        count = len(caplog.records)
        time.sleep(0.15)
    assert count >= 2 and len(caplog.records) == count  # lines while waiting, none after
    assert all(r.getMessage().startswith("waiting for r0c1, ") for r in caplog.records)


@pytest.mark.parametrize("layout", ["C", "F"])
def test_fold_rows_keep_the_layout(layout: str) -> None:
    """A fold's rows of K equal K[keep] and keep K's layout (the solver is faster on column-major K)."""
    K = np.asarray(np.random.default_rng(3).random((50, 4)), order=layout)
    keep = np.arange(50) % 5 != 2
    rows = tuning._rows(K, keep)
    assert np.array_equal(rows, K[keep])
    assert rows.flags.f_contiguous == (layout == "F")
