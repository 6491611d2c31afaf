"""The interior-point method reads K three times an iteration (issue 28), counted on an instrumented K.

Every read of K goes through :class:`ppsvm.core.ipm.RowSource`. The counting source below is not an array, so
a read that went around it (``K.T @ v``, ``K.mean()``) would fail instead of going uncounted. A solve of N
iterations reads each row block

- twice to start: column sums, |K|'s largest entry and the start's products; the ridge estimate's normal matrix;
- three times an iteration: the normal pass (A'y, the residuals, A x and the normal matrix), the predictor
  pass and the corrector pass;
- once for the last iterate's normal pass, whose measures stop the loop;

3 N + 3 in all, and 3 N + 4 when the method turns to the accurate (QR) Newton solves, whose first factor takes a
pass of its own. Two passes an iteration, as issue 28 hoped, cannot be had without changing the iteration: each
pass ends in a reduction over all rows (the normal matrix, A Theta q, the step lengths) that the next one needs
(see ppsvm.core.ipm). The method before issue 28 read K 6 N + 10 times (six passes an iteration, eight to start).
``ppsvm.core.lp.solve_lp`` adds four passes outside the method: the finiteness check, the objective at
(u, gamma) and the certificate's two (|K|'|a| and K'(s a)).
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from ppsvm.core import ipm
from ppsvm.core.lp import classification_objective, dual_data

ROWS, MBAR = 3000, 7


class CountingRows:
    """K behind the solver's row-block interface, counting each block's reads."""

    def __init__(self, K: np.ndarray):
        self._K = K
        self.reads: Counter[tuple[int, int]] = Counter()

    @property
    def shape(self) -> tuple[int, int]:
        return self._K.shape[0], self._K.shape[1]

    def rows(self, start: int, stop: int) -> np.ndarray:
        self.reads[start, stop] += 1
        return self._K[start:stop]


def problem(task: str, layout: str) -> tuple[np.ndarray, np.ndarray]:
    """A Gaussian random kernel of random points, labels from a noisy rule (or noisy targets)."""
    rng = np.random.default_rng(3)
    X, B = rng.random((ROWS, 5)), rng.random((MBAR, 5))
    K = np.exp(-0.5 * ((X[:, None, :] - B[None, :, :]) ** 2).sum(axis=2))
    score = np.sin(6.0 * X[:, 0]) + X[:, 1] + 0.2 * rng.standard_normal(ROWS)
    target = np.where(score > np.median(score), 1.0, -1.0) if task == "classify" else score
    return np.asarray(K, order=layout), target


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks of 128 rows: 24 blocks (the last a partial one), so that a missed or repeated block shows."""
    monkeypatch.setattr(ipm, "_BLOCK_ELEMENTS", 128 * (MBAR + 1))


def counted_solve(task: str, layout: str) -> tuple[CountingRows, ipm.IpmResult]:
    K, target = problem(task, layout)
    source = CountingRows(K)
    return source, ipm.solve_dual(source, *dual_data(task, target, 1.0))


def assert_every_block_read(source: CountingRows, times: int) -> None:
    blocks = sorted(source.reads)
    assert len(blocks) == 24 and blocks[0][0] == 0 and blocks[-1][1] == ROWS
    assert all(stop == start for (_, stop), (start, _) in zip(blocks, blocks[1:], strict=False)), blocks
    assert set(source.reads.values()) == {times}, source.reads


@pytest.mark.parametrize("layout", ["C", "F"])
@pytest.mark.parametrize("task", ["classify", "regress"])
def test_an_iteration_reads_each_row_block_three_times(task: str, layout: str) -> None:
    """3 N + 3 reads of every block, and the same solve as on the array itself."""
    source, counted = counted_solve(task, layout)
    assert counted.converged and counted.iterations >= 5
    assert_every_block_read(source, 3 * counted.iterations + 3)
    K, target = problem(task, layout)
    plain = ipm.solve_dual(K, *dual_data(task, target, 1.0))
    assert plain.iterations == counted.iterations and plain.gamma == counted.gamma
    assert np.array_equal(plain.u, counted.u) and np.array_equal(plain.a, counted.a)


def test_turning_to_the_accurate_solves_costs_one_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    """The stall test that turns on the QR form, forced at the third iteration: one pass more in all (the form's
    first factor), since the normal passes after it form the QR factor instead of the matrix."""
    real = ipm._stalled_near_optimum
    monkeypatch.setattr(ipm, "_stalled_near_optimum", lambda iteration, *rest: iteration == 2 or real(iteration, *rest))
    source, accurate = counted_solve("classify", "F")
    assert accurate.converged
    assert_every_block_read(source, 3 * accurate.iterations + 4)
    monkeypatch.setattr(ipm, "_stalled_near_optimum", real)
    fast = counted_solve("classify", "F")[1]
    K, target = problem("classify", "F")
    objectives = [classification_objective(K, target, 1.0, result.u, result.gamma) for result in (accurate, fast)]
    assert objectives[0] == pytest.approx(objectives[1], rel=1e-7)


def test_the_partials_of_any_row_chunks_reduce_to_the_same_pass() -> None:
    """The row-block interface as a back end over workers would use it (issue 31): one pass's row-block
    function mapped over uneven row chunks and reduced as a tree gives the local back end's sums."""
    K, target = problem("classify", "F")
    sign, cost, (low, high), rho = dual_data("classify", target, 1.0)
    local = ipm._LocalRows(ipm._ArrayRows(K), sign, cost, high - low, 2.0 * rho)
    lp = ipm._start(local, sign, cost, low, rho, high - low, 2.0 * rho)
    y = np.random.default_rng(0).standard_normal(MBAR + 1)
    whole = local.run(lp.center, y, ipm._normal_work, "matrix")
    chunks = [(0, 1000), (1000, 1001), (1001, 2500), (2500, ROWS)]
    parts = [
        ipm._block_pass(
            K[a:b], local._rows(a, b, cost[a:b], sign[a:b], high - low), lp.center, y, ipm._normal_work, "matrix"
        )
        for a, b in chunks
    ]
    slack = ipm._slack_pass(local.slack, y, ipm._normal_work)
    tree = slack.combine(parts[0].combine(parts[1]).combine(parts[2].combine(parts[3])))
    for mine, theirs in ((tree.products, whole.products), (tree.matrix, whole.matrix)):
        assert mine is not None and theirs is not None
        assert np.allclose(mine, theirs, rtol=1e-12, atol=1e-12 * np.abs(theirs).max())
    assert tree.sums.keys() == whole.sums.keys()
    assert all(tree.sums[key] == pytest.approx(whole.sums[key], rel=1e-10, abs=1e-20) for key in whole.sums)
