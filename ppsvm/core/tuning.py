"""k-fold cross-validation of nu (and mu for Gaussian kernels) on an assembled kernel.

For Gaussian kernels every width is derived from one kernel by the power
identity K(mu2) = K(mu1) ** (mu2 / mu1) (docs/design.md section 4), so tuning needs
no new blocks from the entities.

The grid costs (grid points x folds) solves: on 200,000 rows that was 230 s
where one fit takes 1 s (issue 17). So above :func:`tuning_row_limit` rows (8,000
for mbar = 19, fewer for wider bases) the search runs on a stratified random
subset, and from HALVING_FROM_ROWS on it halves: two hyperparameters are chosen
as well from a few thousand records. The final model is still fitted on every row.

Optional per-row weights (shape (m,), > 0; see :func:`ppsvm.core.lp.solve_lp`) go to every fold fit with
the fit's rows, and each fold's validation error is weighted by its held-out rows' weights. The score is
the plain mean over the folds as without weights, so with leave-one-out (one row a fold) the weights act
through the fits only.

Two searches (:data:`SEARCHES`): the full grid of :func:`search_grid` (the default), and the
nested uniform design the papers tuned with (:func:`tune_uniform_design`, designs from
:mod:`ppsvm.core.design`): 2 x 30 points over log10 nu in [-7, 7] and the grid's widths.
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

import numpy as np

from ppsvm.constants import (
    MU_GRID_TIMES_N,
    NU_GRID_CLASSIFY,
    NU_GRID_REGRESS,
    UD_LOG10_NU_CLASSIFY,
    UD_LOG10_NU_REGRESS,
)
from ppsvm.core.design import UD_NESTINGS, UD_RUNS, Box
from ppsvm.core.kernels import KernelName, rescale_gaussian
from ppsvm.core.lp import DEFAULT_FORMULATION, Formulation, Task, leave_one_out_decisions, solve_lp
from ppsvm.core.metrics import error_rate, relative_error
from ppsvm.errors import SolverError

logger = logging.getLogger(__name__)

# Runs independent fold fits: given a fit (K, nu, held rows) -> validation error or None, the K the folds index
# and each fit's (nu, held rows), yields the errors in the order given. The default, :func:`fits_here`, runs them
# one after the other in this process; the Dask engine runs them as tasks (ppsvm.core.dask_engine.fits_on).
FoldFit = Callable[[np.ndarray, float, np.ndarray], float | None]
FoldRunner = Callable[[FoldFit, np.ndarray, list[tuple[float, np.ndarray]]], Iterator[float | None]]


def fits_here(fit: FoldFit, K: np.ndarray, jobs: list[tuple[float, np.ndarray]]) -> Iterator[float | None]:
    """Each fold fit in turn, in this process (the default :data:`FoldRunner`)."""
    for nu, held in jobs:
        yield fit(K, nu, held)


# How nu and mu are searched: the full grid (ppsvm's default) or the papers' nested uniform design.
Search = Literal["grid", "uniform-design"]
SEARCHES: tuple[str, ...] = get_args(Search)

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
    weights: np.ndarray | None = None,
) -> float:
    """Mean validation error over the folds: error rate (classify) or relative error (regress).

    Parameters
    ----------
    K : ndarray, shape (m, mbar)
    target : ndarray, shape (m,)
    folds : list of index arrays from :func:`fold_indices`
    weights : ndarray, shape (m,), optional
        Rows' weights for the fits and the folds' errors (:func:`fold_error`).

    Returns
    -------
    float
        inf where the LP could not be solved on some fold.
    """
    errors = [fold_error(task, K, target, nu, held, formulation, weights) for held in folds]
    usable = [error for error in errors if error is not None]
    if not usable:
        raise ValueError("no cross-validation fold had both classes in its training part")
    return float(np.mean(usable))


def fold_error(
    task: Task,
    K: np.ndarray,
    target: np.ndarray,
    nu: float,
    held: np.ndarray,
    formulation: Formulation,
    weights: np.ndarray | None = None,
) -> float | None:
    """Validation error on the ``held`` rows of a fit on the others; None if those cannot train a classifier.

    Returns inf where the LP could not be solved: a numerically hopeless grid point (e.g. a width that makes K
    nearly constant) must not end the search, it just cannot be chosen.

    Parameters
    ----------
    K : ndarray, shape (m, mbar)
    target : ndarray, shape (m,)
    held : ndarray of int
        The validation rows.
    weights : ndarray, shape (m,), optional
        Rows' weights: the fit's rows' go to the LP, the held rows' weigh the error (weighted error rate, or
        weighted relative error: :mod:`ppsvm.core.metrics`).
    """
    train = np.ones(len(target), dtype=bool)
    train[held] = False
    if task == "classify" and len(np.unique(target[train])) < 2:
        return None
    fit_weights, held_weights = (None, None) if weights is None else (weights[train], weights[held])
    try:
        solution = solve_lp(task, _rows(K, train), target[train], nu, formulation, fit_weights)
    except SolverError as error:
        logger.warning("cross-validation at nu = %g: %s; scoring this grid point as unusable", nu, error)
        return float("inf")
    decision = K[held] @ solution.u - solution.gamma
    measure = error_rate if task == "classify" else relative_error
    return measure(target[held], decision, held_weights)


def _fold_fit(
    task: Task,
    target: np.ndarray,
    formulation: Formulation,
    weights: np.ndarray | None,
    K: np.ndarray,
    nu: float,
    held: np.ndarray,
) -> float | None:
    """:func:`fold_error` with the run's fixed arguments first (a :data:`FoldFit` once they are bound)."""
    return fold_error(task, K, target, nu, held, formulation, weights)


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

    A solve costs about rows x mbar^2, so wide bases (the pooled reference's up to 500 points) get fewer rows,
    never fewer than TUNING_MIN_ROWS.
    """
    return int(np.clip(TUNING_WORK // (mbar + 1) ** 2, TUNING_MIN_ROWS, TUNING_MAX_ROWS))


def grid_points(nu_values: Sequence[float], mu_values: Sequence[float]) -> list[tuple[float, float]]:
    """Every (nu, mu) of the grid, mu-major (one rescaled kernel serves a run of points)."""
    return [(float(nu), float(mu)) for mu in mu_values for nu in nu_values]


def tune(
    task: Task,
    kernel: KernelName,
    K_ref: np.ndarray,
    target: np.ndarray,
    *,
    mu_ref: float,
    points: Sequence[tuple[float, float]],
    folds: int,
    seed: int,
    formulation: Formulation = DEFAULT_FORMULATION,
    progress: Callable[[int, int], None] | None = None,
    max_rows: int | None = None,
    weights: np.ndarray | None = None,
    runner: FoldRunner = fits_here,
) -> TuningResult:
    """Score (nu, mu) points by k-fold cross-validation and keep the best; ties go to the earlier point.

    From HALVING_FROM_ROWS rows on (after subsampling), every point is first scored on one fold
    and only the best quarter (at least HALVING_KEEP) on the others: 2.5 times fewer solves on the
    default grid. Smaller problems, such as the papers' tables, get every point on every fold.

    Parameters
    ----------
    K_ref : ndarray, shape (m, mbar)
        The assembled kernel (Gaussian: at width ``mu_ref``).
    target : ndarray, shape (m,)
    points : sequence of (nu, mu)
        mu is ignored (0.0) for linear kernels.
    folds : int
        Cross-validation folds; ``len(target)`` or more is leave-one-out.
    progress : callable(done, total), optional
        Called after each solve-bearing step, with the number of fold fits done and planned.
    max_rows : int, optional
        Cross-validate on a stratified random subset of this many rows when there are more;
        default :func:`tuning_row_limit` of the basis size.
    weights : ndarray, shape (m,), optional
        Rows' weights for the fold fits and the folds' errors (:func:`fold_error`); the subset keeps its rows'.
    runner : FoldRunner
        Runs each width's fold fits (:data:`FoldRunner`); the scores do not depend on it.
    """
    rows = cross_validation_rows(task, target, K_ref.shape[1], seed, max_rows)
    if len(rows) < len(target):
        K_ref, target = K_ref[rows], target[rows]
        weights = None if weights is None else weights[rows]
    index = fold_indices(task, target, min(folds, len(target)), seed)
    grid = [(float(nu), float(mu) if kernel == "gaussian" else 0.0) for nu, mu in points]
    halving = len(target) >= HALVING_FROM_ROWS and len(grid) > HALVING_KEEP
    promoted = max(HALVING_KEEP, -(-len(grid) // 4)) if halving else len(grid)
    fold_errors: list[list[float]] = [[] for _ in grid]
    total = len(grid) + (len(index) - 1) * promoted if halving else len(grid) * len(index)
    done = 0

    # Leave-one-out of the classification LP by warm-started re-solves (lp.leave_one_out_decisions): the same
    # errors as one fit per fold, about ten times faster.
    warm_loo = len(index) == len(target) and task == "classify" and formulation in ("auto", "highs-dual")

    fit = functools.partial(_fold_fit, task, target, formulation, weights)

    def score(chosen: list[int], held_out: list[np.ndarray]) -> None:
        nonlocal done
        for mu in dict.fromkeys(grid[k][1] for k in chosen):
            K = rescale_gaussian(K_ref, mu_ref, mu) if kernel == "gaussian" else K_ref
            at_width = [k for k in chosen if grid[k][1] == mu]
            if warm_loo:
                for k in at_width:
                    fold_errors[k] = _leave_one_out_errors(K, target, grid[k][0], weights)
                    done += len(held_out)
                    if progress is not None:
                        progress(done, total)
                continue
            jobs = [(k, held) for k in at_width for held in held_out]
            errors = runner(fit, K, [(grid[k][0], held) for k, held in jobs])
            for (k, _), error in zip(jobs, errors, strict=True):
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
    # Only points scored on every fold can win; the others keep their first-fold score for the record.
    complete = max(len(errors) for errors in fold_errors)
    scores = tuple((nu, mu, _mean(errors)) for (nu, mu), errors in zip(grid, fold_errors, strict=True))
    best = min((k for k in everything if len(fold_errors[k]) == complete), key=lambda k: (scores[k][2], k))
    nu, mu, best_score = scores[best]
    if not np.isfinite(best_score):
        raise SolverError("the LP could not be solved at any grid point of the cross-validation")
    return TuningResult(nu, mu, best_score, scores, len(target), promoted)


def search_space(task: Task, kernel: KernelName, n_features: int, nu: float | None, mu: float | None) -> Box:
    """The nested uniform design's first box over (log10 nu[, log10 mu]); a setting given is not searched.

    log10 nu spans Mangasarian & Wild's [-7, 7] for classification (UD_LOG10_NU_REGRESS for regression,
    where nu weighs ||u||_1); log10 mu spans the grid's widths MU_GRID_TIMES_N / n. A fixed setting is
    a zero-width side.
    """
    nu_low, nu_high = UD_LOG10_NU_CLASSIFY if task == "classify" else UD_LOG10_NU_REGRESS
    if nu is not None:
        nu_low = nu_high = math.log10(nu)
    if kernel != "gaussian":
        return Box((nu_low,), (nu_high,))
    if mu is not None:
        mu_low = mu_high = math.log10(mu)
    else:
        mu_low, mu_high = (math.log10(t / n_features) for t in (MU_GRID_TIMES_N[0], MU_GRID_TIMES_N[-1]))
    return Box((nu_low, mu_low), (nu_high, mu_high))


def tune_uniform_design(
    task: Task,
    kernel: KernelName,
    K_ref: np.ndarray,
    target: np.ndarray,
    *,
    mu_ref: float,
    box: Box,
    folds: int,
    seed: int,
    runs: int = UD_RUNS,
    nestings: int = UD_NESTINGS,
    formulation: Formulation = DEFAULT_FORMULATION,
    progress: Callable[[int, int], None] | None = None,
    max_rows: int | None = None,
    weights: np.ndarray | None = None,
    runner: FoldRunner = fits_here,
) -> TuningResult:
    """Nested uniform design (Mangasarian & Wild section 4, after Huang et al.): ``runs`` points over ``box``,
    then ``runs`` over a box of half its size around the best so far, ``nestings`` times; the best point wins.

    The folds and any row subset are the same in every nesting (same ``seed``), so scores compare. Returns
    the points of every nesting in order in ``scores``; ties go to the earlier point. ``weights`` (shape (m,))
    and ``runner`` as in :func:`tune`.
    """
    current, combined, promoted = box, None, 0
    searched: list[tuple[float, float, float]] = []
    for nesting in range(nestings):
        logs = current.points(runs)
        points = [(10 ** row[0], 10 ** row[1] if len(row) > 1 else 0.0) for row in logs]

        def report(done: int, total: int, offset: int = nesting) -> None:
            if progress is not None:
                progress(offset * total + done, nestings * total)

        result = tune(
            task,
            kernel,
            K_ref,
            target,
            mu_ref=mu_ref,
            points=points,
            folds=folds,
            seed=seed,
            formulation=formulation,
            progress=report,
            max_rows=max_rows,
            weights=weights,
            runner=runner,
        )
        searched.extend(result.scores)
        promoted += result.promoted
        if combined is None or result.score < combined.score:
            combined = result
        best = [math.log10(combined.nu)] + ([math.log10(combined.mu)] if len(box.low) > 1 else [])
        current = current.around(np.array(best), box)
    assert combined is not None
    return TuningResult(combined.nu, combined.mu, combined.score, tuple(searched), combined.rows, promoted)


def tune_search(
    task: Task,
    kernel: KernelName,
    K_ref: np.ndarray,
    target: np.ndarray,
    *,
    search: Search,
    n_features: int,
    nu: float | None,
    mu: float | None,
    mu_ref: float,
    folds: int,
    seed: int,
    formulation: Formulation = DEFAULT_FORMULATION,
    progress: Callable[[int, int], None] | None = None,
    max_rows: int | None = None,
    weights: np.ndarray | None = None,
    runner: FoldRunner = fits_here,
) -> TuningResult:
    """Tune what is None of nu and mu by ``search``: "grid" (:func:`search_grid`) or "uniform-design".

    Parameters
    ----------
    K_ref : ndarray, shape (m, mbar)
        The assembled kernel (Gaussian: at width ``mu_ref``).
    target : ndarray, shape (m,)
    n_features : int
        n, which sets the Gaussian widths' range (features scaled to [0, 1]).
    folds : int
        Cross-validation folds; ``len(target)`` is leave-one-out.
    weights : ndarray, shape (m,), optional
        Rows' weights, as in :func:`tune`.
    runner : FoldRunner
        Runs the fold fits, as in :func:`tune`.
    """
    common: dict[str, Any] = {
        "mu_ref": mu_ref,
        "folds": folds,
        "seed": seed,
        "formulation": formulation,
        "progress": progress,
        "max_rows": max_rows,
        "weights": weights,
        "runner": runner,
    }
    if search == "grid":
        points = grid_points(*search_grid(task, kernel, n_features, nu, mu))
        return tune(task, kernel, K_ref, target, points=points, **common)
    if search == "uniform-design":
        box = search_space(task, kernel, n_features, nu, mu)
        return tune_uniform_design(task, kernel, K_ref, target, box=box, **common)
    raise ValueError(f"search must be one of {', '.join(SEARCHES)}, got {search!r}")


def _leave_one_out_errors(K: np.ndarray, target: np.ndarray, nu: float, weights: np.ndarray | None) -> list[float]:
    """Per row, 1.0 if the fit without it misclassifies it, else 0.0 (rows whose class it alone holds skipped);
    inf for every row where the LP could not be solved, as :func:`fold_error` scores a hopeless point. A row's
    weight cancels from its own one-row error: ``weights`` only weigh the fits."""
    try:
        decisions = leave_one_out_decisions("classify", K, target, nu, weights)
    except SolverError as error:
        logger.warning("leave-one-out at nu = %g: %s; scoring this point as unusable", nu, error)
        return [float("inf")] * len(target)
    return [
        error_rate(target[i : i + 1], decisions[i : i + 1]) for i in range(len(target)) if np.isfinite(decisions[i])
    ]


def _mean(errors: list[float]) -> float:
    return float(np.mean(errors)) if errors else float("inf")


def cross_validation_rows(
    task: Task, target: np.ndarray, columns: int, seed: int, max_rows: int | None = None
) -> np.ndarray:
    """The rows the cross-validation (and the calibration's folds) read: every row, or above ``max_rows`` (default
    :func:`tuning_row_limit` of the kernel's ``columns``) a stratified sample of that many (:func:`tuning_rows`).

    Returns
    -------
    ndarray of int, sorted
    """
    limit = tuning_row_limit(columns) if max_rows is None else max_rows
    return tuning_rows(task, target, limit, seed) if len(target) > limit else np.arange(len(target))


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
