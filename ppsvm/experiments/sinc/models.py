"""The models of ``ppsvm reproduce sinc``: Algorithm 3.1 over gRPC entities, each entity alone, all data revealed.

Every model chooses mu and nu the same way, by k-fold cross-validation over the paper's sets
(Section 4), scoring the norm ratio ||app - y|| / ||y|| on the held-out fold:

- **Algorithm 3.1** (Figure 6): the random kernel K(A, B'), mbar = 1000, trained through the public
  :class:`ppsvm.api.federation.Federation` over real gRPC entity servers (``ppsvm.api.inprocess``).
  Its cross-validation runs over the network too: one split per fold, the fold's records held
  out at their entity, one ``Federation.train`` per grid point and ``Federation.evaluate`` on the fold.
- **Each entity alone** (Figures 3, 4) and **all data revealed** (Figure 5): the ordinary kernel
  K(A, A') on the points in one place (``ppsvm.core.local_svm.fit_local`` with every row as basis).
  Their cross-validation fits each fold with the fold's own rows as basis, K(A_train, A_train').
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ppsvm.api.federation import Federation
from ppsvm.api.inprocess import add_privacy_settings, fixed_secret, serve_split, set_secrets
from ppsvm.config import NON_PRIVATE_OVERRIDE_KEY, SINGLE_BLOCK_CONSENT_KEY
from ppsvm.core.kernels import gaussian_kernel, scale_to_unit
from ppsvm.core.local_svm import LocalModel, fit_local
from ppsvm.core.lp import solve_lp
from ppsvm.core.metrics import relative_error
from ppsvm.core.model import Model
from ppsvm.core.tuning import fold_indices
from ppsvm.data.dataset import Dataset
from ppsvm.data.partition import ID_KEY_FILE, SplitOptions, SplitResult, split_dataset
from ppsvm.errors import SolverError
from ppsvm.experiments.sinc.problem import FOLD_SEED, N_FEATURES, NAME, SPLIT_SEED, TRAIN, SincData

# Called with a note after each step of a long computation (the command's progress bar).
Advance = Callable[[str], None]


@dataclass(frozen=True)
class Candidates:
    """The widths one model tries: the paper's mu values under each reading, on the scaled features.

    Attributes
    ----------
    mus : tuple of float
        The paper's mu values, in order.
    scaled : dict
        Reading key to the widths on the [0, 1]-scaled features, one per mu (same order).
    """

    mus: tuple[float, ...]
    scaled: dict[str, tuple[float, ...]]

    def all_widths(self) -> list[float]:
        """Every reading's widths, reading after reading (the rows of a score table)."""
        return [width for widths in self.scaled.values() for width in widths]


def feature_range(X: np.ndarray) -> float:
    """The one range R = max - min the scaling divides every feature by; X (m, n).

    The original-units reading needs a single R, which the sinc grids (symmetric in x1 and x2) have.
    """
    ranges = X.max(axis=0) - X.min(axis=0)
    if not np.allclose(ranges, ranges[0], rtol=1e-12, atol=0.0):
        raise ValueError(f"features have different ranges {ranges.tolist()}: mu in original units is not one width")
    return float(ranges[0])


def best(scores: np.ndarray) -> tuple[int, int]:
    """(row, column) of the lowest score; the first in row-major order among equals, so reruns agree."""
    flat = int(np.argmin(np.where(np.isnan(scores), np.inf, scores)))
    row, column = divmod(flat, scores.shape[1])
    return row, column


def choose(scores: np.ndarray, mus: Sequence[float], nus: Sequence[float]) -> dict[str, Any]:
    """The chosen (mu, nu) of one reading's score table (len(mus), len(nus)), and the table itself (JSON-ready)."""
    row, column = best(scores)
    return {
        "mu": float(mus[row]),
        "nu": float(nus[column]),
        "cv_norm_ratio": float(scores[row, column]),
        "on_set_edge": {
            "mu": _edge(row, len(mus)),
            "nu": _edge(column, len(nus)),
        },
        "cv_scores": [[float(s) for s in line] for line in scores],
    }


def _edge(index: int, size: int) -> str | None:
    """'low' / 'high' when a choice is the first / last of a set searched (more than one value), else None."""
    if size < 2:
        return None
    return "low" if index == 0 else "high" if index == size - 1 else None


def training_dataset(data: SincData) -> tuple[Dataset, np.ndarray]:
    """E1 u E2 as a dataset of their own, with each record's region (entity); shapes (m,)."""
    train = data.mask(TRAIN)
    dataset = data.dataset
    subset = Dataset(
        ids=dataset.ids[train],
        X=dataset.X[train],
        y=dataset.y[train],
        feature_names=dataset.feature_names,
        source=dataset.source,
    )
    return subset, data.region[train]


def serve_regions(
    dataset: Dataset, region: np.ndarray, held_out: np.ndarray, work: Path, mbar: int
) -> tuple[SplitResult, Path]:
    """Split ``dataset`` by region into entities r0c0 (S1) and r1c0 (S2), ``held_out`` records held out.

    The column-block secret is fixed (the same B on every run); with mbar >= n_j the entities get the
    explicit, loudly named override privacy rule 3 requires, and their models say NOT PRIVATE.

    Returns
    -------
    split : SplitResult
    id_key : Path
        The split's record-id key, which the entities hold and the coordinator does not.
    """
    split = split_dataset(
        dataset,
        SplitOptions(rows=2, cols=1, out_dir=work, seed=SPLIT_SEED, task="regress", kernel="gaussian", overwrite=True),
        provenance={"synthetic": dataset.source},
        held_out=held_out,
        row_blocks=region,
    )
    set_secrets(split, [fixed_secret(NAME, 0)])
    # Two row blocks of one column block: each block leaves on its own, which the other entity (it knows B) could
    # invert; the paper's setting, so the entities consent (privacy rule 8), and the models say so.
    add_privacy_settings(
        split.entity_config_paths, {SINGLE_BLOCK_CONSENT_KEY: True, NON_PRIVATE_OVERRIDE_KEY: mbar >= N_FEATURES}
    )
    return split, work / ID_KEY_FILE


def _train(federation: Federation, mbar: int, mu: float, nu: float) -> Model:
    """One random-kernel regression at fixed (mu, nu), the paper's basis, not sent to the entities."""
    model = federation.train(
        task="regress", kernel="gaussian", mbar=mbar, nu=nu, mu=mu, basis="paper", distribute=False
    )
    assert isinstance(model, Model)  # regression has no classes
    return model


def joint_cross_validation(
    data: SincData,
    mbar: int,
    candidates: Candidates,
    nus: Sequence[float],
    folds: int,
    work: Path,
    advance: Advance,
) -> dict[str, np.ndarray]:
    """Cross-validate Algorithm 3.1 over gRPC entities: mean held-out norm ratio per (width, nu).

    Returns
    -------
    dict
        Reading key to its score table, shape (len(candidates.mus), len(nus)).
    """
    dataset, region = training_dataset(data)
    widths = candidates.all_widths()
    scores = np.zeros((len(widths), len(nus)))
    for k, held in enumerate(fold_indices("regress", dataset.y, folds, FOLD_SEED)):
        mask = np.zeros(len(dataset.y), dtype=bool)
        mask[held] = True
        split, _ = serve_regions(dataset, region, mask, work / f"fold{k}", mbar)
        with serve_split(split, work / f"fold{k}") as config:
            federation = Federation(config)
            for i, width in enumerate(widths):
                for j, nu in enumerate(nus):
                    model = _train(federation, mbar, width, nu)
                    scores[i, j] += federation.evaluate(model)["relative_error"] / folds
                if (i + 1) % len(candidates.mus) == 0:
                    reading = list(candidates.scaled)[i // len(candidates.mus)]
                    advance(f"Algorithm 3.1 cross-validation, fold {k + 1}/{folds}, {reading}")
    per_reading = len(candidates.mus)
    return {key: scores[r * per_reading : (r + 1) * per_reading] for r, key in enumerate(candidates.scaled)}


def joint_fits(
    data: SincData, settings: dict[str, tuple[float, float]], mbars: Sequence[int], work: Path
) -> dict[tuple[str, int], tuple[Model, np.ndarray, float]]:
    """Algorithm 3.1 on all of E1 u E2 over gRPC, at each reading's chosen (width, nu) and each mbar.

    The plotting grid's points are held out at the entity owning their region, so the surfaces of the
    figures come from kernel rows the entities compute, like any record's.

    Parameters
    ----------
    settings : dict
        Reading key to (width on the scaled features, nu).
    mbars : sequence of int
        The paper's mbar, and the private mbar = 1 beside it.

    Returns
    -------
    dict
        (reading key, mbar) to (model, decision values of every record of ``data`` in its order (m,), seconds).
    """
    held_out = ~data.mask(TRAIN)
    split, id_key = serve_regions(data.dataset, data.region, held_out, work, max(mbars))
    fitted: dict[tuple[str, int], tuple[Model, np.ndarray, float]] = {}
    with serve_split(split, work) as config:
        federation = Federation(config)
        for key, (width, nu) in settings.items():
            for mbar in mbars:
                started = time.perf_counter()
                model = _train(federation, mbar, width, nu)
                decisions = federation.decision_function(model, data.dataset.ids.tolist(), id_key)
                fitted[key, mbar] = (model, decisions, time.perf_counter() - started)
    return fitted


def scaled_own(X: np.ndarray) -> np.ndarray:
    """X (m, n) scaled to [0, 1] by its own minimum and maximum, as fit_local scales."""
    return scale_to_unit(X, X.min(axis=0), X.max(axis=0))


def local_cross_validation(
    X: np.ndarray, y: np.ndarray, widths: Sequence[float], nus: Sequence[float], folds: int
) -> np.ndarray:
    """Cross-validate the ordinary kernel K(A, A') on points held in one place.

    Each fold is fitted on the other rows with those rows as basis, K(A_train, A_train'), and scored
    on its own rows by the norm ratio; the table holds the mean over the folds.

    Parameters
    ----------
    X : ndarray, shape (m, 2)
        Raw points, scaled here by their own minimum and maximum.
    y : ndarray, shape (m,)

    Returns
    -------
    ndarray, shape (len(widths), len(nus))
        inf where some fold's LP could not be solved.
    """
    scaled = scaled_own(X)
    index = fold_indices("regress", y, folds, FOLD_SEED)
    scores = np.zeros((len(widths), len(nus)))
    for i, width in enumerate(widths):
        K = gaussian_kernel(scaled, scaled, width)
        for held in index:
            train = np.ones(len(y), dtype=bool)
            train[held] = False
            K_train = np.asfortranarray(K[np.ix_(train, train)])
            K_held = K[np.ix_(held, np.flatnonzero(train))]
            for j, nu in enumerate(nus):
                try:
                    solution = solve_lp("regress", K_train, y[train], nu)
                except SolverError:
                    scores[i, j] = np.inf
                    continue
                scores[i, j] += relative_error(y[held], K_held @ solution.u - solution.gamma) / folds
    return scores


def local_fit(X: np.ndarray, y: np.ndarray, width: float, nu: float) -> LocalModel:
    """The ordinary kernel K(A, A') on all of ``X`` (m, 2), ``y`` (m,), at a fixed width and nu."""
    model = fit_local("regress", "gaussian", X, y, basis_fraction=1.0, nu=nu, mu=width, seed=FOLD_SEED)
    assert isinstance(model, LocalModel)  # a regression is one model
    return model
