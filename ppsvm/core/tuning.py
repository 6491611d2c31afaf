"""k-fold cross-validation of nu (and mu for Gaussian kernels) on an assembled kernel.

For Gaussian kernels every width is derived from one kernel by the power
identity K(mu2) = K(mu1) ** (mu2 / mu1) (docs/design.md section 4), so tuning needs
no new blocks from the entities.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ppsvm.constants import MU_GRID_TIMES_N, NU_GRID_CLASSIFY, NU_GRID_REGRESS
from ppsvm.core.kernels import KernelName, rescale_gaussian
from ppsvm.core.lp import DEFAULT_FORMULATION, Formulation, Task, solve_lp
from ppsvm.core.metrics import error_rate, relative_error
from ppsvm.errors import SolverError

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TuningResult:
    """The chosen nu and mu with their cross-validated score (error rate or relative error).

    ``scores`` holds (nu, mu, score) for every grid point, in grid order.
    """

    nu: float
    mu: float
    score: float
    scores: tuple[tuple[float, float, float], ...]


def search_grid(
    task: Task,
    kernel: KernelName,
    n_features: int,
    nu: float | None,
    mu: float | None,
) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """The (nu values, mu values) to search: the default grid for each setting left as None.

    Gaussian widths are relative to 1/n for features scaled to [0, 1]; linear kernels get mu = 0.
    """
    nu_values = (NU_GRID_CLASSIFY if task == "classify" else NU_GRID_REGRESS) if nu is None else (nu,)
    if kernel != "gaussian":
        return nu_values, (0.0,)
    return nu_values, tuple(t / n_features for t in MU_GRID_TIMES_N) if mu is None else (mu,)


def fold_indices(task: Task, target: np.ndarray, folds: int, seed: int) -> list[np.ndarray]:
    """Split row indices into ``folds`` validation folds (stratified by class for classify).

    Parameters
    ----------
    target : ndarray, shape (m,)

    Returns
    -------
    list of ndarray
        ``folds`` disjoint index arrays covering range(m).
    """
    m = len(target)
    if folds < 2 or folds > m:
        raise ValueError(f"cannot make {folds} folds from {m} records (need 2 <= folds <= records)")
    rng = np.random.default_rng(seed)
    assignment = np.empty(m, dtype=np.int64)
    groups = [np.flatnonzero(target == value) for value in np.unique(target)] if task == "classify" else [np.arange(m)]
    offset = 0
    for group in groups:
        # Dealing each class round-robin keeps class proportions equal across folds.
        assignment[rng.permutation(group)] = (offset + np.arange(len(group))) % folds
        offset += len(group)
    return [np.flatnonzero(assignment == k) for k in range(folds)]


def cross_validation_score(
    task: Task,
    K: np.ndarray,
    target: np.ndarray,
    nu: float,
    folds: list[np.ndarray],
    formulation: Formulation = DEFAULT_FORMULATION,
) -> float:
    """Mean validation error over the folds: error rate (classify) or relative error (regress).

    Parameters
    ----------
    K : ndarray, shape (m, mbar)
    target : ndarray, shape (m,)
    folds : list of index arrays from :func:`fold_indices`
    """
    errors = []
    for held in folds:
        train = np.ones(len(target), dtype=bool)
        train[held] = False
        if task == "classify" and len(np.unique(target[train])) < 2:
            continue  # a fold whose complement has one class cannot train a classifier
        try:
            solution = solve_lp(task, K[train], target[train], nu, formulation)
        except SolverError as error:
            # A numerically hopeless grid point (e.g. a width that makes K nearly constant)
            # must not end the search: it just cannot be chosen.
            logger.warning("cross-validation at nu = %g: %s; scoring this grid point as unusable", nu, error)
            return float("inf")
        decision = K[held] @ solution.u - solution.gamma
        score = error_rate(target[held], decision) if task == "classify" else relative_error(target[held], decision)
        errors.append(score)
    if not errors:
        raise ValueError("no cross-validation fold had both classes in its training part")
    return float(np.mean(errors))


def tune(
    task: Task,
    kernel: KernelName,
    K_ref: np.ndarray,
    target: np.ndarray,
    *,
    mu_ref: float,
    nu_values: Sequence[float],
    mu_values: Sequence[float],
    folds: int,
    seed: int,
    formulation: Formulation = DEFAULT_FORMULATION,
    progress: Callable[[int, int], None] | None = None,
) -> TuningResult:
    """Grid search by k-fold cross-validation; ties go to the earlier grid point.

    Parameters
    ----------
    K_ref : ndarray, shape (m, mbar)
        The assembled kernel (Gaussian: at width ``mu_ref``).
    target : ndarray, shape (m,)
    mu_values : sequence of float
        Gaussian widths to try; ignored (a single 0.0) for linear kernels.
    progress : callable(done, total), optional
        Called after each grid point.
    """
    mus = list(mu_values) if kernel == "gaussian" else [0.0]
    index = fold_indices(task, target, min(folds, len(target)), seed)
    scores = []
    total, done = len(mus) * len(nu_values), 0
    for mu in mus:
        K = rescale_gaussian(K_ref, mu_ref, mu) if kernel == "gaussian" else K_ref
        for nu in nu_values:
            scores.append((float(nu), float(mu), cross_validation_score(task, K, target, nu, index, formulation)))
            done += 1
            if progress is not None:
                progress(done, total)
    best = min(range(len(scores)), key=lambda k: scores[k][2])
    nu, mu, score = scores[best]
    if not np.isfinite(score):
        raise SolverError("the LP could not be solved at any grid point of the cross-validation")
    return TuningResult(nu, mu if kernel == "gaussian" else 0.0, score, tuple(scores))
