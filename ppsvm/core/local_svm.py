"""A reduced-kernel 1-norm SVM on data held in one place.

Used for the papers' two comparisons, never for the private model:
- the **pooled reference** (non-private, benchmarks only): K(A, Abar') with
  Abar a random 10% of the pooled training rows (Mangasarian & Wild);
- **each entity alone**: an entity's model of its own cell, K(A_ij, Abar_ij') with
  as many of its own rows as basis as the federated model has points (the whole
  cell for the papers' leave-one-out), computed inside the entity; only its error
  leaves it.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ppsvm.constants import DEFAULT_FOLDS, MAX_BASIS_POINTS, REFERENCE_ROW_FRACTION
from ppsvm.core.kernels import KernelName, kernel, scale_to_unit
from ppsvm.core.lp import Task, solve_lp
from ppsvm.core.metrics import evaluate
from ppsvm.core.tuning import Search, TuningResult, tune_search


@dataclass(frozen=True)
class LocalModel:
    """f(x) = K(scale(x)', basis') u - gamma."""

    task: Task
    kernel: KernelName
    mu: float
    nu: float
    low: np.ndarray  # (n,)
    high: np.ndarray  # (n,)
    basis: np.ndarray  # (k, n), scaled training rows
    u: np.ndarray  # (k,)
    gamma: float
    tuning: TuningResult | None

    def decision(self, X: np.ndarray) -> np.ndarray:
        """Decision values for raw records X of shape (m, n); returns shape (m,)."""
        return kernel(self.kernel, scale_to_unit(X, self.low, self.high), self.basis, self.mu) @ self.u - self.gamma


@dataclass(frozen=True)
class LocalClasses:
    """One-vs-rest: a :class:`LocalModel` per class of ``values`` (k,), each of that class (+1) against the rest."""

    values: np.ndarray
    members: tuple[LocalModel, ...]

    def decision(self, X: np.ndarray) -> np.ndarray:
        """Each class's decision values for raw records X (m, n); returns shape (m, k)."""
        return np.column_stack([member.decision(X) for member in self.members])

    def predict(self, X: np.ndarray) -> np.ndarray:
        """The class of the largest decision value per record, shape (m,)."""
        return self.values[np.argmax(self.decision(X), axis=1)]


def local_figures(task: Task, model: LocalModel | LocalClasses, X: np.ndarray, target: np.ndarray) -> dict[str, float]:
    """Held-out figures of a local model on raw records X (m, n) with targets (m,): those of
    :func:`ppsvm.core.metrics.evaluate`, or a one-vs-rest model's error rate."""
    if isinstance(model, LocalClasses):
        return {"error_rate": float(np.mean(model.predict(X) != target))}
    return evaluate(task, target, model.decision(X))


def reference_basis_fraction(n_rows: int) -> float:
    """The pooled reference's share of rows as basis: REFERENCE_ROW_FRACTION, at most MAX_BASIS_POINTS points."""
    return min(REFERENCE_ROW_FRACTION, MAX_BASIS_POINTS / max(n_rows, 1))


def fit_local(
    task: Task,
    kernel_name: KernelName,
    X: np.ndarray,
    target: np.ndarray,
    *,
    basis_fraction: float,
    basis_rows: int | None = None,
    nu: float | None,
    mu: float | None,
    seed: int,
    folds: int = DEFAULT_FOLDS,
    search: Search = "grid",
    progress: Callable[[int, int], None] | None = None,
) -> LocalModel | LocalClasses:
    """Fit a reduced-kernel SVM; nu / mu of None are tuned by cross-validation. Classification labels other than
    -1/+1 (class codes) give one model per class, that class against the rest, on the same basis rows.

    Parameters
    ----------
    X : ndarray, shape (m, n)
        Raw training records; scaled to [0, 1] with their own min and max.
    target : ndarray, shape (m,)
    basis_fraction : float
        Fraction of rows (at least one) used as the kernel basis Abar; 1.0 for the full kernel.
    basis_rows : int, optional
        The basis's row count instead (capped at the rows there are): a fraction times the rows is not always
        that count in floating point.
    seed : int
        Chooses the basis rows and the folds.
    folds : int
        Cross-validation folds of the tuning; ``len(X)`` is leave-one-out.
    search : {"grid", "uniform-design"}
        How nu and mu are searched (:func:`ppsvm.core.tuning.tune_search`).
    progress : callable(done, total), optional
        Called after each grid point of the tuning; raising from it stops the fit (a cancelled call).
    """
    fit = functools.partial(
        _fit_one,
        task,
        kernel_name,
        X,
        basis_fraction=basis_fraction,
        basis_rows=basis_rows,
        nu=nu,
        mu=mu,
        seed=seed,
        folds=folds,
        search=search,
        progress=progress,
    )
    if task == "classify" and not np.isin(target, (-1.0, 1.0)).all():
        values = np.unique(target)
        return LocalClasses(values, tuple(fit(np.where(target == value, 1.0, -1.0)) for value in values))
    return fit(target)


def _fit_one(
    task: Task,
    kernel_name: KernelName,
    X: np.ndarray,
    target: np.ndarray,
    *,
    basis_fraction: float,
    basis_rows: int | None,
    nu: float | None,
    mu: float | None,
    seed: int,
    folds: int,
    search: Search,
    progress: Callable[[int, int], None] | None,
) -> LocalModel:
    """:func:`fit_local` of one model (labels -1/+1, or targets)."""
    rng = np.random.default_rng(seed)
    low, high = X.min(axis=0), X.max(axis=0)
    scaled = scale_to_unit(X, low, high)
    k = max(1, math.ceil(basis_fraction * len(X)) if basis_rows is None else basis_rows)
    basis = scaled[np.sort(rng.choice(len(X), size=min(k, len(X)), replace=False))]
    n = X.shape[1]
    mu_ref = mu if mu is not None else 1.0 / n
    K = kernel(kernel_name, scaled, basis, mu_ref)
    tuning = None
    if nu is None or (mu is None and kernel_name == "gaussian"):
        tuning = tune_search(
            task,
            kernel_name,
            K,
            target,
            search=search,
            n_features=n,
            nu=nu,
            mu=mu,
            mu_ref=mu_ref,
            folds=folds,
            seed=seed,
            progress=progress,
        )
        nu = tuning.nu
        if kernel_name == "gaussian":
            mu_ref = tuning.mu
            K = kernel(kernel_name, scaled, basis, mu_ref)
    assert nu is not None
    solution = solve_lp(task, K, target, nu)
    return LocalModel(task, kernel_name, mu_ref, nu, low, high, basis, solution.u, solution.gamma, tuning)
