"""Figures 3-4: the models of one repetition, each fitted with ppsvm's public estimator
:class:`ppsvm.DpHybridClassifier`, and the time to learn rho against public records and D (our addition) with the
function the coordinator calls."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ppsvm.api.dp_estimator import DpHybridClassifier
from ppsvm.core.dp import NON_PRIVATE as NO_NOISE
from ppsvm.core.dp_model import DpModel
from ppsvm.core.fourier import (
    apply_scaling,
    frequency_objective,
    learn_frequencies,
    public_preprocessing,
)
from ppsvm.core.metrics import error_rate, evaluate
from ppsvm.experiments.adult import Adult
from ppsvm.experiments.dp.setting import (
    DIAGNOSTIC_PAIRS,
    DIAGNOSTIC_POOL_ROWS,
    EXACT_RBF,
    HYBRID_PUBLIC,
    N_ENTITIES,
    NON_PRIVATE,
    POOLED,
    RANDOM_RHO,
    SINGLE_ABOVE_S,
    TAG_DIAG,
    TAG_EXACT,
    TAG_TIMING,
    USEFUL_MECHANISMS,
    Settings,
    key,
    rng,
    split_indices,
)


@dataclass(frozen=True)
class Fit:
    """One model of a repetition: where its test figures go and how the estimator is set up.

    Attributes
    ----------
    path : tuple of str
        Keys of the repetition's results, e.g. ("epsilon", "dp-hybrid/laplace", "1").
    method, mechanism : str
        DpHybridClassifier's parameters of the same names.
    C, width_factor : float or "auto"
        As DpHybridClassifier's; "auto" chooses on the public records.
    epsilon : float or None
        None where no noise is drawn (mechanism "none", public-only).
    public : int
        Public records: this prefix of the repetition's public pool.
    row_blocks : int
        Entities the private records are spread over.
    exact : bool
        Public-only on a random subsample of the private records: the exact RBF SVM they would allow.
    """

    path: tuple[str, ...]
    method: str
    mechanism: str
    C: float | str
    epsilon: float | None = None
    width_factor: float | str = 1.0
    public: int = HYBRID_PUBLIC
    row_blocks: int = N_ENTITIES
    exact: bool = False


def plan(settings: Settings) -> list[Fit]:
    """Every model one repetition fits, the headline C first, then each of the other C.

    At the headline C (the paper's, with its median-heuristic width): the non-private models (learned rho, random
    rho, and one entity holding all private records), dp-hybrid with each mechanism and private-svm with Laplace
    at every epsilon, the exact RBF SVM on a subsample, and public-only per public-set size. At another C the
    same minus the pooled and exact models and objective perturbation (it re-solves a perturbed problem per
    release), plus private-svm with output-gamma (the sensitivity table compares both mechanisms). Last, the
    useful configuration: dp-hybrid with C from the noise rule and the width chosen on the public records, per
    mechanism and epsilon, and without noise.
    """
    fits: list[Fit] = []
    for C in (settings.C, *settings.other_C):
        headline = C == settings.C
        plain = ("plain",) if headline else ("other_C", key(C))
        noised = ("epsilon",) if headline else ("other_C", key(C))
        fits.append(Fit((*plain, NON_PRIVATE), "dp-hybrid", NO_NOISE, C))
        fits.append(Fit((*plain, RANDOM_RHO), "private-svm", NO_NOISE, C))
        if headline:
            fits.append(Fit((*plain, POOLED), "dp-hybrid", NO_NOISE, C, row_blocks=1))
        mechanisms = {
            "dp-hybrid": ["laplace", "output-gamma", *(["objective"] if headline else [])],
            "private-svm": ["laplace", *([] if headline else ["output-gamma"])],
        }
        for method, names in mechanisms.items():
            for mechanism in names:
                for epsilon in settings.epsilons:
                    fits.append(Fit((*noised, f"{method}/{mechanism}", key(epsilon)), method, mechanism, C, epsilon))
        if headline and settings.exact_rows:
            fits.append(Fit((*plain, EXACT_RBF), "public-only", NO_NOISE, C, exact=True))
        for size in settings.public_sizes:
            path = ("public_only", str(size)) if headline else ("other_C", key(C), f"public-only/{size}")
            fits.append(Fit(path, "public-only", NO_NOISE, C, public=size))
    fits.append(Fit(("useful", NON_PRIVATE), "dp-hybrid", NO_NOISE, "auto", width_factor="auto"))
    for mechanism in USEFUL_MECHANISMS:
        for epsilon in settings.epsilons:
            path = ("useful", f"dp-hybrid/{mechanism}", key(epsilon))
            fits.append(Fit(path, "dp-hybrid", mechanism, "auto", epsilon, width_factor="auto"))
    return fits


def kernel_mse(rho: np.ndarray, P: np.ndarray, i: np.ndarray, j: np.ndarray, gamma: float) -> float:
    """Mean squared error of zhat(x_i)'zhat(x_j) against exp(-gamma ||x_i - x_j||^2) over pairs (i, j).

    Parameters
    ----------
    rho : ndarray, shape (D, d)
    P : ndarray, shape (m, d)
        Scaled public records.
    i, j : ndarray, shape (pairs,)
        Row indices into ``P``.
    gamma : float

    Returns
    -------
    float
    """
    differences = P[i] - P[j]
    # zhat(x_i)'zhat(x_j) = (1/D) sum_k cos(rho_k'(x_i - x_j)): the very error learn_frequencies minimises.
    return frequency_objective(rho, differences, np.exp(-gamma * (differences**2).sum(1)))[0]


def put(results: dict[str, Any], path: Sequence[str], value: Any) -> None:
    """Store ``value`` at ``path`` in nested dicts, creating the levels on the way."""
    node = results
    for name in path[:-1]:
        node = node.setdefault(name, {})
    node[path[-1]] = value


def run_repetition(
    adult: Adult, seed: int, settings: Settings, done: Callable[[Fit], None] = lambda fit: None
) -> dict[str, Any]:
    """One repetition: the split, then every model of :func:`plan` fitted and scored on the test records.

    Parameters
    ----------
    adult : Adult
    seed : int
        This repetition's seed: the split, the exact model's subsample and the estimators' ``random_state``
        (their public draw, row blocks and rho; the same in every fit, so paired comparisons share them).
        The noise is not seeded: it comes from the operating system's generator, as in production.
    settings : Settings
    done : callable
        Called after each fit (progress).

    Returns
    -------
    dict
        Test AUC, error rate and the error rate cut at 0 (as the paper's models are) per model under the keys
        of its :attr:`Fit.path`, with its threshold; the public preprocessing and the noise-to-signal
        diagnostics.
    """
    started = time.perf_counter()
    X, y = adult.X, adult.y
    private, test, pool = split_indices(len(y), seed)
    subsample = rng(seed, TAG_EXACT).choice(private, size=settings.exact_rows, replace=False)
    out: dict[str, Any] = {"seed": seed, "epsilon": {}, "plain": {}, "public_only": {}, "other_C": {}}
    models: dict[tuple[str, ...], DpModel] = {}
    for fit in plan(settings):
        public = subsample if fit.exact else pool[: fit.public]
        noise: dict[str, Any] = {} if fit.epsilon is None else {"epsilon": fit.epsilon}
        classifier = DpHybridClassifier(
            method=fit.method,
            mechanism=fit.mechanism,
            n_frequencies=settings.frequencies,
            C=fit.C,
            width_factor=fit.width_factor,
            row_blocks=fit.row_blocks,
            threshold_epsilon=settings.threshold_epsilon,
            # The study measures what the noise does, also where it dominates (C = 100 at epsilon 0.5).
            allow_noisy=True,
            random_state=seed,
            **noise,
        ).fit(X[private], y[private], X[public], y[public])
        decision = classifier.decision_function(X[test])
        figures = evaluate("classify", y[test], decision)
        at_zero = error_rate(y[test], decision + classifier.model_.threshold)
        model = classifier.model_
        chosen = {"threshold": model.threshold, "C": model.C, "kernel_width": model.kernel_width}
        put(out, fit.path, {**figures, "error_rate_at_zero": at_zero, **chosen})
        models[fit.path] = classifier.model_
        done(fit)
    out["preprocessing"] = preprocessing(models, X, y, test, pool, settings, seed)
    out["diagnostics"] = {"noise_to_signal": noise_to_signal(models, settings)}
    out["test_positive_rate"] = float(np.mean(y[test] > 0))
    out["seconds"] = time.perf_counter() - started
    return out


def preprocessing(
    models: dict[tuple[str, ...], DpModel],
    X: np.ndarray,
    y: np.ndarray,
    test: np.ndarray,
    pool: np.ndarray,
    settings: Settings,
    seed: int,
) -> dict[str, Any]:
    """What dp-hybrid and private-svm took from the public records, read from their model files.

    The kernel approximation of learned and random rho is checked on public pairs of pool records outside
    every public set (a held-out check that costs no privacy).
    """
    hybrid, randomised = models[("plain", NON_PRIVATE)], models[("plain", RANDOM_RHO)]
    low, high = np.array(hybrid.low), np.array(hybrid.high)
    test_scaled = apply_scaling(X[test], low, high)
    diagnostic = apply_scaling(X[pool[max(settings.public_sizes) :][:DIAGNOSTIC_POOL_ROWS]], low, high)
    n = len(diagnostic)
    pairs = rng(seed, TAG_DIAG).choice(n * (n - 1) // 2, size=DIAGNOSTIC_PAIRS, replace=False)
    iu, ju = np.triu_indices(n, k=1)
    i, j = iu[pairs], ju[pairs]
    training = hybrid.training
    return {
        "kernel_width": hybrid.kernel_width,
        "public_positives": int((y[pool[:HYBRID_PUBLIC]] > 0).sum()),
        "features_constant_on_public": [int(k) for k in np.flatnonzero(high <= low)],
        "test_rows_outside_unit_box": float(np.mean(((test_scaled < 0) | (test_scaled > 1)).any(axis=1))),
        "test_max_abs_scaled": float(np.abs(test_scaled).max()),
        "rho_fit": {
            "seconds": training["rho_seconds"],
            "iterations": training["rho_iterations"],
            "n_pairs": training["rho_pairs"],
            "objective_start": training["objective_start"],
            "objective_end": training["objective_end"],
        },
        "heldout_kernel_mse": {
            model.method: kernel_mse(np.array(model.rho), diagnostic, i, j, model.kernel_width)
            for model in (hybrid, randomised)
        },
    }


def noise_to_signal(models: dict[tuple[str, ...], DpModel], settings: Settings) -> dict[str, Any]:
    """||released model - exact model|| / ||exact model|| of dp-hybrid per C, output mechanism and epsilon.

    Both models come from the same public draw, row blocks and rho (one ``random_state``), so the difference
    is the mean of the entities' noise.
    """
    out: dict[str, Any] = {}
    for C in (settings.C, *settings.other_C):
        prefix = () if C == settings.C else ("other_C", key(C))
        exact = np.array(models[(*(prefix or ("plain",)), NON_PRIVATE)].weights)
        for mechanism in ("laplace", "output-gamma"):
            for epsilon in settings.epsilons:
                path = (*(prefix or ("epsilon",)), f"dp-hybrid/{mechanism}", key(epsilon))
                released = np.array(models[path].weights)
                ratio = float(np.linalg.norm(released - exact) / np.linalg.norm(exact))
                put(out, (key(C), mechanism, key(epsilon)), ratio)
    return out


def rho_timing(
    X: np.ndarray, settings: Settings, done: Callable[[dict[str, Any]], None] = lambda row: None
) -> list[dict[str, Any]]:
    """``learn_frequencies`` wall and CPU seconds on repetition 0's public records, per (n_public, D).

    Parameters
    ----------
    X : ndarray, shape (m, d)
    settings : Settings
        The grid (``timing_public`` x ``timing_frequencies``) and the repeats.
    done : callable
        Called with each point's row as soon as it is measured (progress).

    Returns
    -------
    list of dict
        One row per point; every timing is under its "seconds" key.
    """
    seed = settings.seeds[0]
    _, _, pool = split_indices(len(X), seed)
    rows = []
    for n_public in settings.timing_public:
        public = public_preprocessing(X[pool[:n_public]])
        for D in settings.timing_frequencies:
            wall: list[float] = []
            cpu: list[float] = []
            for _ in range(settings.timing_repeats):
                # CPU time too: other jobs may share the machine, and it is far less sensitive to them.
                wall_start, cpu_start = time.perf_counter(), time.process_time()
                fit = learn_frequencies(public.scaled, public.width, D, rng(seed, TAG_TIMING, n_public, D))
                cpu.append(time.process_time() - cpu_start)
                wall.append(time.perf_counter() - wall_start)
                if wall[-1] > SINGLE_ABOVE_S:
                    break
            row = {
                "n_public": n_public,
                "D": D,
                "iterations": fit.iterations,
                "n_pairs": fit.n_pairs,
                "objective_end": fit.objective_end,
                "message": fit.message,
                "seconds": {
                    "wall": wall,
                    "cpu": cpu,
                    "median_wall": statistics.median(wall),
                    "median_cpu": statistics.median(cpu),
                },
            }
            rows.append(row)
            done(row)
    return rows
