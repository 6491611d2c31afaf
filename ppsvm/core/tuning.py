"""k-fold cross-validation of nu (and mu for Gaussian kernels) on an assembled kernel.

For Gaussian kernels every width is derived from one kernel by the power
identity K(mu2) = K(mu1) ** (mu2 / mu1) (docs/design.md section 4), so tuning needs
no new blocks from the entities.

The grid costs (grid points x folds) solves: on 200,000 rows that was 230 s
where one fit takes 1 s (issue 17). So above :func:`tuning_row_limit` rows (8,000
for mbar = 19, fewer for wider bases) the search runs on a stratified random
subset, and from HALVING_FROM_ROWS on it halves: two hyperparameters are chosen
as well from a few thousand records. The final model is still fitted on every row.
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

# Rows the cross-validation may use: about TUNING_WORK / (mbar + 1)^2, within [MIN, MAX].
TUNING_MAX_ROWS = 8_000
TUNING_MIN_ROWS = 2_000
TUNING_WORK = TUNING_MAX_ROWS * 20**2
# Successive halving from this many tuning rows on: all grid points on one fold, the best quarter
# (at least HALVING_KEEP) on the rest.
HALVING_FROM_ROWS = TUNING_MIN_ROWS
HALVING_KEEP = 3


@dataclass(frozen=True)
class TuningResult:
    """The chosen nu and mu with their cross-validated score (error rate or relative error).

    ``scores`` holds (nu, mu, score) for every grid point, in grid order: the mean over the folds
    it was scored on (one only, for grid points successive halving did not promote). ``rows`` is
    how many records the cross-validation used (all, or a subset); ``promoted`` how many grid
    points were scored on every fold (all of them without halving).
    """

    nu: float
    mu: float
    score: float
    scores: tuple[tuple[float, float, float], ...]
    rows: int
    promoted: int


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

    Returns
    -------
    float
        inf where the LP could not be solved on some fold.
    """
    errors = [fold_error(task, K, target, nu, held, formulation) for held in folds]
    usable = [error for error in errors if error is not None]
    if not usable:
        raise ValueError("no cross-validation fold had both classes in its training part")
    return float(np.mean(usable))


def fold_error(
    task: Task, K: np.ndarray, target: np.ndarray, nu: float, held: np.ndarray, formulation: Formulation
) -> float | None:
    """Validation error on the ``held`` rows of a fit on the others; None if those cannot train a classifier.

    Returns inf where the LP could not be solved: a numerically hopeless grid point (e.g. a width that makes K
    nearly constant) must not end the search, it just cannot be chosen.
    """
    train = np.ones(len(target), dtype=bool)
    train[held] = False
    if task == "classify" and len(np.unique(target[train])) < 2:
        return None
    try:
        solution = solve_lp(task, _rows(K, train), target[train], nu, formulation)
    except SolverError as error:
        logger.warning("cross-validation at nu = %g: %s; scoring this grid point as unusable", nu, error)
        return float("inf")
    decision = K[held] @ solution.u - solution.gamma
    return error_rate(target[held], decision) if task == "classify" else relative_error(target[held], decision)


def _rows(K: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """K[keep] in K's own layout: numpy's row selection is always row-major, and the solver is 2.3 times as
    fast on the column-major K the coordinator assembles (see :func:`ppsvm.core.kernels.assembly_start`)."""
    if not K.flags.f_contiguous:
        return K[keep]
    out = np.empty((int(np.count_nonzero(keep)), K.shape[1]), order="F")
    for j in range(K.shape[1]):
        out[:, j] = K[keep, j]
    return out


def tuning_row_limit(mbar: int) -> int:
    """How many rows the cross-validation may use for a basis of ``mbar`` points.

    A solve costs about rows x mbar^2, so wide bases (an entity-alone model's 300 points) get fewer rows,
    never fewer than TUNING_MIN_ROWS.
    """
    return int(np.clip(TUNING_WORK // (mbar + 1) ** 2, TUNING_MIN_ROWS, TUNING_MAX_ROWS))


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
    max_rows: int | None = None,
) -> TuningResult:
    """Grid search by k-fold cross-validation; ties go to the earlier grid point.

    From HALVING_FROM_ROWS rows on (after subsampling), every grid point is first scored on one fold
    and only the best quarter (at least HALVING_KEEP) on the others: 2.5 times fewer solves on the
    default grid. Smaller problems, such as the papers' tables, get the full grid on every fold.

    Parameters
    ----------
    K_ref : ndarray, shape (m, mbar)
        The assembled kernel (Gaussian: at width ``mu_ref``).
    target : ndarray, shape (m,)
    mu_values : sequence of float
        Gaussian widths to try; ignored (a single 0.0) for linear kernels.
    progress : callable(done, total), optional
        Called after each solve-bearing step, with the number of fold fits done and planned.
    max_rows : int, optional
        Cross-validate on a stratified random subset of this many rows when there are more;
        default :func:`tuning_row_limit` of the basis size.
    """
    mus = list(mu_values) if kernel == "gaussian" else [0.0]
    limit = tuning_row_limit(K_ref.shape[1]) if max_rows is None else max_rows
    if len(target) > limit:
        rows = tuning_rows(task, target, limit, seed)
        K_ref, target = K_ref[rows], target[rows]
    index = fold_indices(task, target, min(folds, len(target)), seed)
    grid = [(float(nu), float(mu)) for mu in mus for nu in nu_values]
    halving = len(target) >= HALVING_FROM_ROWS and len(grid) > HALVING_KEEP
    promoted = max(HALVING_KEEP, -(-len(grid) // 4)) if halving else len(grid)
    fold_errors: list[list[float]] = [[] for _ in grid]
    total = len(grid) + (len(index) - 1) * promoted if halving else len(grid) * len(index)
    done = 0

    def score(points: list[int], held_out: list[np.ndarray]) -> None:
        nonlocal done
        for mu in dict.fromkeys(grid[k][1] for k in points):
            K = rescale_gaussian(K_ref, mu_ref, mu) if kernel == "gaussian" else K_ref
            for k in (k for k in points if grid[k][1] == mu):
                for held in held_out:
                    error = fold_error(task, K, target, grid[k][0], held, formulation)
                    if error is not None:
                        fold_errors[k].append(error)
                    done += 1
                    if progress is not None:
                        progress(done, total)

    everything = list(range(len(grid)))
    if halving:
        score(everything, index[:1])
        ranked = sorted(everything, key=lambda k: (_mean(fold_errors[k]), k))
        score(sorted(ranked[:promoted]), index[1:])
    else:
        score(everything, index)
    if not any(fold_errors):
        raise ValueError("no cross-validation fold had both classes in its training part")
    # Only grid points scored on every fold can win; the others keep their first-fold score for the record.
    complete = max(len(errors) for errors in fold_errors)
    scores = tuple((nu, mu, _mean(errors)) for (nu, mu), errors in zip(grid, fold_errors, strict=True))
    best = min((k for k in everything if len(fold_errors[k]) == complete), key=lambda k: (scores[k][2], k))
    nu, mu, best_score = scores[best]
    if not np.isfinite(best_score):
        raise SolverError("the LP could not be solved at any grid point of the cross-validation")
    return TuningResult(nu, mu if kernel == "gaussian" else 0.0, best_score, scores, len(target), promoted)


def _mean(errors: list[float]) -> float:
    return float(np.mean(errors)) if errors else float("inf")


def tuning_rows(task: Task, target: np.ndarray, count: int, seed: int) -> np.ndarray:
    """``count`` row indices, sorted, drawn without replacement (per class for classify, in proportion).

    Parameters
    ----------
    target : ndarray, shape (m,)

    Returns
    -------
    ndarray, shape (count,)
    """
    rng = np.random.default_rng([seed, count])
    if task != "classify":
        return np.sort(rng.choice(len(target), size=count, replace=False))
    groups = [np.flatnonzero(target == value) for value in np.unique(target)]
    # Largest-remainder shares, at least one record per class so that every fold can train.
    exact = np.array([len(g) for g in groups]) * count / len(target)
    shares = np.maximum(np.floor(exact).astype(int), 1)
    for k in np.argsort(exact - np.floor(exact))[::-1][: count - shares.sum()]:
        shares[k] += 1
    return np.sort(np.concatenate([rng.choice(g, size=s, replace=False) for g, s in zip(groups, shares, strict=True)]))
