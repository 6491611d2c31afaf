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

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ppsvm.constants import DEFAULT_FOLDS, MAX_BASIS_POINTS, REFERENCE_ROW_FRACTION
from ppsvm.core.kernels import KernelName, kernel, scale_to_unit
from ppsvm.core.lp import Task, solve_lp
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
) -> LocalModel:
    """Fit a reduced-kernel SVM; nu / mu of None are tuned by cross-validation.

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
