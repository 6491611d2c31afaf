"""The Figures 5-9 part of ``ppsvm reproduce dp``: Li et al. (2014)'s repeated 10-fold cross-validation on UCI Adult.

What the paper does (section 5.1 and Table 1): 30,000 private records, 10-fold cross-validation (27,000 training
and 3,000 test records per fold) repeated 10 times, the public records drawn uniformly from a separate public pool
(20 for the hybrid model, 50 to 200 for the "Public-#" baselines), epsilon 1. Section 5.3 (Figures 5 and 6) varies
the dimensionality over nested attribute subsets of 5, 8, 11 and 14 dimensions; section 5.4 (Figures 7 and 8) the
sampling rate, the share of the training records kept, from 0.1 to 1; section 5.5 (Figure 9) the hybrid model's
time against both. Every model is fitted with ppsvm's public estimator :class:`ppsvm.DpHybridClassifier`.

Adult has 32,561 records: per repetition a seeded shuffle puts the first 30,000 into the folds and the remaining
2,561 into the public pool (the Figure 3 part's split of the same seed is this scheme's last fold).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ppsvm.api.dp_estimator import DpHybridClassifier
from ppsvm.core.dp import NON_PRIVATE as NO_NOISE
from ppsvm.core.metrics import evaluate
from ppsvm.errors import DataError
from ppsvm.experiments.adult import Adult
from ppsvm.experiments.dp.setting import (
    CV_HYBRID,
    CV_NON_PRIVATE,
    CV_PRIVATE,
    CV_RECORDS,
    FULL_RATE,
    N_FOLDS,
    TAG_PUBLIC_DRAW,
    TAG_SAMPLE,
    TAG_SPLIT,
    CvSettings,
    rng,
)


def fold_indices(m: int, seed: int, fold: int, folds: int = N_FOLDS) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Fold ``fold`` of repetition ``seed``'s cross-validation over ``m`` records.

    One seeded shuffle per repetition: its first ``CV_RECORDS`` records are cut into ``folds`` consecutive blocks
    of equal size; the rest is the public pool, shared by every fold of the repetition.

    Parameters
    ----------
    m : int
        Records, more than ``CV_RECORDS``.
    seed : int
        The repetition's seed.
    fold : int
        0 <= fold < folds.
    folds : int

    Returns
    -------
    train : ndarray, shape (CV_RECORDS - CV_RECORDS // folds,)
    test : ndarray, shape (CV_RECORDS // folds,)
        Block ``fold``.
    pool : ndarray, shape (m - CV_RECORDS,)

    Raises
    ------
    DataError
        ``m`` leaves no public pool, or ``CV_RECORDS`` does not split into ``folds`` equal blocks.
    ValueError
        ``fold`` outside [0, folds).
    """
    if m <= CV_RECORDS:
        raise DataError(f"{m:,} records leave no public pool beside the {CV_RECORDS:,} cross-validated ones")
    if CV_RECORDS % folds:
        raise DataError(f"{CV_RECORDS:,} records do not split into {folds} equal folds")
    if not 0 <= fold < folds:
        raise ValueError(f"fold {fold} is not in [0, {folds})")
    perm = rng(seed, TAG_SPLIT).permutation(m)
    records, pool = perm[:CV_RECORDS], perm[CV_RECORDS:]
    size = CV_RECORDS // folds
    test = records[fold * size : (fold + 1) * size]
    train = np.concatenate([records[: fold * size], records[(fold + 1) * size :]])
    return train, test, pool


def public_draw(pool: np.ndarray, seed: int, fold: int) -> np.ndarray:
    """The fold's public records in draw order: each public set of size k is the first k (uniform, nested).

    Parameters
    ----------
    pool : ndarray, shape (p,)
    seed, fold : int

    Returns
    -------
    ndarray, shape (p,)
        A seeded permutation of ``pool``.
    """
    return rng(seed, TAG_PUBLIC_DRAW, fold).permutation(pool)


def sampled_count(n: int, rate: float) -> int:
    """Training records kept at sampling rate ``rate`` of ``n``: the nearest whole number, at least 1."""
    if not 0 < rate <= 1:
        raise ValueError(f"a sampling rate is in (0, 1], got {rate}")
    return max(1, round(rate * n))


def sample_rows(train: np.ndarray, seed: int, fold: int, rate: float) -> np.ndarray:
    """The training records kept at ``rate``: a uniform draw without replacement, nested across rates.

    Parameters
    ----------
    train : ndarray, shape (n,)
    seed, fold : int
    rate : float
        In (0, 1]; 1 keeps every record (in the fold's order).

    Returns
    -------
    ndarray, shape (sampled_count(n, rate),)
        The first records of one seeded permutation per fold, so a lower rate keeps a subset of a higher one and
        the methods compared at a rate see the same records.
    """
    count = sampled_count(len(train), rate)
    if count == len(train):
        return train
    return train[rng(seed, TAG_SAMPLE, fold).permutation(len(train))[:count]]


def features(dimension: int) -> int:
    """Attributes in the paper's dimensionality ``dimension``: its count includes the label (annual income)."""
    return dimension - 1


@dataclass(frozen=True)
class CvFit:
    """One model of a fold.

    Attributes
    ----------
    name : str
        Its row in the tables: a ``CV_METHODS`` key or "public-only/<size>".
    method, mechanism : str
        DpHybridClassifier's parameters of the same names.
    dimension : int
        The paper's dimensionality (attributes + the label).
    rate : float
        Sampling rate of the training records.
    public : int
        Public records (a prefix of the fold's draw).
    """

    name: str
    method: str
    mechanism: str
    dimension: int
    rate: float
    public: int


def public_only_name(size: int) -> str:
    return f"public-only/{size}"


def plan_cv(settings: CvSettings) -> list[CvFit]:
    """Every model one fold fits, each (name, dimension, rate) once.

    Figures 5 and 6 (every rate 1): dp-hybrid, private-svm, the non-private reference and public-only per public
    size, at each dimensionality. Figures 7 and 8 (every attribute): dp-hybrid and private-svm at each sampling
    rate; rate 1 is the dimensionality study's fit. Public-only does not depend on the rate.
    """
    hybrid_public = settings.hybrid_public
    fits: list[CvFit] = []
    for dimension in settings.dimensions:
        fits.append(CvFit(CV_HYBRID, "dp-hybrid", "laplace", dimension, FULL_RATE, hybrid_public))
        fits.append(CvFit(CV_PRIVATE, "private-svm", "laplace", dimension, FULL_RATE, hybrid_public))
        fits.append(CvFit(CV_NON_PRIVATE, "dp-hybrid", NO_NOISE, dimension, FULL_RATE, hybrid_public))
        for size in settings.public_sizes:
            fits.append(CvFit(public_only_name(size), "public-only", NO_NOISE, dimension, FULL_RATE, size))
    for rate in settings.rates:
        for name, method in ((CV_HYBRID, "dp-hybrid"), (CV_PRIVATE, "private-svm")):
            fit = CvFit(name, method, "laplace", settings.sampling_dimension, rate, hybrid_public)
            if fit not in fits:
                fits.append(fit)
    return fits


def random_state(seed: int, fold: int, folds: int = N_FOLDS) -> int:
    """The estimators' ``random_state`` in fold ``fold`` of repetition ``seed``: one per fold, shared by its fits
    (same row blocks and rho, so paired comparisons differ only in what they compare)."""
    return folds * seed + fold


def run_fold(
    data: Adult, seed: int, fold: int, settings: CvSettings, done: Callable[[CvFit], None] = lambda fit: None
) -> dict[str, Any]:
    """One fold: every model of :func:`plan_cv` fitted on the fold's training records and scored on its test fold.

    Parameters
    ----------
    data : Adult
        :func:`ppsvm.experiments.adult.load_adult_attributes`: dimensionality d uses its first d - 1 columns.
    seed : int
        The repetition's seed (split, public draw, subsample; the estimators' ``random_state`` with ``fold``).
        The noise is not seeded: it comes from the operating system's generator, as in production.
    fold : int
    settings : CvSettings
    done : callable
        Called after each fit (progress).

    Returns
    -------
    dict
        One entry per fit under "fits": name, dimension, rate, training records, test AUC and error cut at 0,
        seconds (fit wall-clock and CPU, rho wall-clock) and rho's L-BFGS iterations; under "noise_to_signal"
        ||dp-hybrid - non-private|| / ||non-private|| per dimensionality (same rho, so the difference is the
        entities' mean noise).
    """
    X, y = data.X, data.y
    train, test, pool = fold_indices(len(y), seed, fold, settings.folds)
    public = public_draw(pool, seed, fold)
    state = random_state(seed, fold, settings.folds)
    fits = []
    weights: dict[tuple[str, int, float], np.ndarray] = {}
    for fit in plan_cv(settings):
        columns = features(fit.dimension)
        rows = sample_rows(train, seed, fold, fit.rate)
        chosen = public[: fit.public]
        noise: dict[str, Any] = {} if fit.mechanism == NO_NOISE else {"epsilon": settings.epsilon}
        classifier = DpHybridClassifier(
            method=fit.method,
            mechanism=fit.mechanism,
            n_frequencies=settings.frequencies,
            C=settings.C,
            width_factor=1.0,
            # The paper's models cut at 0; AUC, its figure, does not depend on the cut.
            threshold_epsilon=None,
            row_blocks=settings.entities,
            # At rate 0.1 an entity holds 900 records: the study measures what the noise does there too.
            allow_noisy=True,
            random_state=state,
            **noise,
        )
        # CPU time too: other jobs may share the machine, and it is far less sensitive to them.
        wall_start, cpu_start = time.perf_counter(), time.process_time()
        classifier.fit(X[rows, :columns], y[rows], X[chosen, :columns], y[chosen])
        cpu, wall = time.process_time() - cpu_start, time.perf_counter() - wall_start
        figures = evaluate("classify", y[test], classifier.decision_function(X[test, :columns]))
        training = classifier.model_.training
        fits.append(
            {
                "name": fit.name,
                "dimension": fit.dimension,
                "rate": fit.rate,
                "n_train": len(rows),
                "auc": figures["auc"],
                "error_rate_at_zero": figures["error_rate"],
                "seconds": {"fit_wall": wall, "fit_cpu": cpu, "rho": training.get("rho_seconds")},
                "rho_iterations": training.get("rho_iterations"),
            }
        )
        weights[(fit.name, fit.dimension, fit.rate)] = np.array(classifier.model_.weights)
        done(fit)
    noise_to_signal = {}
    for dimension in settings.dimensions:
        exact = weights[(CV_NON_PRIVATE, dimension, FULL_RATE)]
        released = weights[(CV_HYBRID, dimension, FULL_RATE)]
        noise_to_signal[str(dimension)] = float(np.linalg.norm(released - exact) / np.linalg.norm(exact))
    return {
        "seed": seed,
        "fold": fold,
        "test_positive_rate": float(np.mean(y[test] > 0)),
        "fits": fits,
        "noise_to_signal": noise_to_signal,
    }


def select(splits: list[dict[str, Any]], name: str, dimension: int, rate: float) -> list[dict[str, Any]]:
    """The fit (name, dimension, rate) of every split, in the splits' order.

    Raises
    ------
    KeyError
        A split has no such fit.
    """
    out = []
    for split in splits:
        found = [f for f in split["fits"] if (f["name"], f["dimension"], f["rate"]) == (name, dimension, rate)]
        if len(found) != 1:
            raise KeyError(f"split (seed {split['seed']}, fold {split['fold']}) has no fit {name}, d={dimension}")
        out.append(found[0])
    return out
