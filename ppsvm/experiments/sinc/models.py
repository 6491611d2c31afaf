"""The three models of ``ppsvm reproduce sinc``: the joint one over gRPC, each entity alone, the pooled reference.

Each tries the same Gaussian widths (None: the trainer's own grid, plus any extra widths asked
for), keeps the one with the lowest cross-validated score on its own training data, and is
evaluated on points of the whole square, including the plotting grid of the figures.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ppsvm.api.inprocess import fixed_secret, serve_split, set_secrets
from ppsvm.config import NON_PRIVATE_OVERRIDE_KEY
from ppsvm.coordinator.evaluate import assembled_decisions
from ppsvm.coordinator.reference import pool_cells
from ppsvm.coordinator.train import TrainOptions, train
from ppsvm.core.local_svm import LocalModel, fit_local, reference_basis_fraction
from ppsvm.core.metrics import relative_error
from ppsvm.core.model import Model
from ppsvm.core.randomness import record_pseudonyms
from ppsvm.core.tuning import search_grid
from ppsvm.data.partition import ID_KEY_FILE, SplitOptions, split_dataset
from ppsvm.experiments.sinc.problem import (
    ENTITIES,
    GRID,
    N_FEATURES,
    NAME,
    REGIONS,
    SPLIT_SEED,
    TEST,
    TRAIN,
    TUNE_SEED,
    SincData,
)


def grid_edge(value: float, grid: Iterable[float]) -> str | None:
    """ "low" or "high" when ``value`` is (to rounding) the smallest or largest of ``grid``, else None.

    A tuned value on the edge of the grid searched suggests the grid should extend further that way;
    a single value was not searched, so it has no edge.
    """
    values = [float(v) for v in grid]
    if len(values) < 2:
        return None
    if np.isclose(value, min(values), rtol=1e-9, atol=0.0):
        return "low"
    if np.isclose(value, max(values), rtol=1e-9, atol=0.0):
        return "high"
    return None


def searched_grid(mus: Sequence[float | None]) -> tuple[list[float], list[float]]:
    """(nu values, mu values) searched over all width candidates (None: search_grid's own widths)."""
    nu_values: set[float] = set()
    mu_values: set[float] = set()
    for mu in mus:
        nus, widths = search_grid("regress", "gaussian", N_FEATURES, None, mu)
        nu_values.update(nus)
        mu_values.update(widths)
    return sorted(nu_values), sorted(mu_values)


def edges(nu: float, mu: float, mus: Sequence[float | None]) -> dict[str, str | None]:
    """Which edge (low / high) of the grid searched the tuned nu and mu sit on (None: inside)."""
    nu_values, mu_values = searched_grid(mus)
    return {"nu": grid_edge(nu, nu_values), "mu": grid_edge(mu, mu_values)}


def best(scores: Sequence[float]) -> int:
    """Index of the lowest score; the first of equal scores, so reruns pick the same candidate."""
    return min(range(len(scores)), key=lambda k: (scores[k], k))


def _write_override(split_configs: Sequence[Path]) -> None:
    """Let the entities accept mbar >= n_j: the explicit, loudly named setting privacy rule 3 requires."""
    for path in split_configs:
        with path.open("a", encoding="utf-8") as handle:
            handle.write(f"\n[privacy]\n{NON_PRIVATE_OVERRIDE_KEY} = true\n")


def _of_kind(ids: np.ndarray, kind: str) -> np.ndarray:
    """Mask (k,) of the ids "<kind>-<index>"."""
    return np.char.startswith(ids.astype(str), f"{kind}-")


def _indices(ids: np.ndarray) -> np.ndarray:
    """The <index> of ids "<kind>-<index>" (for grid points, the position on the plotting grid); shape (k,)."""
    return np.array([int(i.split("-", 1)[1]) for i in ids.tolist()], dtype=np.int64)


def joint_run(data: SincData, mbar: int, mus: Sequence[float | None], work: Path) -> tuple[dict[str, Any], np.ndarray]:
    """Split by region, serve both entities over gRPC, train the joint model, evaluate it.

    ``mus``: Gaussian widths to try (None: the coordinator's own grid); nu is always tuned by the
    coordinator, and the width with the lowest coordinator inner-CV score (training data only) is kept.

    Returns
    -------
    result : dict
        Settings, tuned values and relative errors of the run (JSON-ready).
    surface : ndarray, shape (steps * steps,)
        The same model's decision values on the plotting grid.
    """
    private = mbar < N_FEATURES
    held_out = data.kind != TRAIN
    split = split_dataset(
        data.dataset,
        SplitOptions(rows=2, cols=1, out_dir=work, seed=SPLIT_SEED, task="regress", kernel="gaussian", overwrite=True),
        provenance={"synthetic": "2-D sinc", "points_per_entity": int(data.mask(TRAIN).sum() // 2)},
        held_out=held_out,
        row_blocks=data.region,
    )
    set_secrets(split, [fixed_secret(NAME, 0)])
    if not private:
        _write_override(split.entity_config_paths)
    seconds: dict[str, float] = {}
    with serve_split(split, work) as federation:
        started = time.perf_counter()
        candidates: list[tuple[float, Model]] = []
        for mu in mus:
            candidate = train(
                federation,
                TrainOptions(
                    task="regress",
                    kernel="gaussian",
                    mbar=mbar,
                    nu=None,
                    mu=mu,
                    seed=TUNE_SEED,
                    distribute=False,
                    basis="paper",
                ),
            )
            candidates.append((candidate.training["tuning"]["score"], candidate))
        chosen = best([score for score, _ in candidates])
        model = candidates[chosen][1]
        seconds["train"] = time.perf_counter() - started
        started = time.perf_counter()
        decisions = assembled_decisions(federation, model, ("train", "test"))
        seconds["evaluate"] = time.perf_counter() - started
    # The entities name records by pseudonym; this run made the split and holds its record-id key.
    key = bytes.fromhex((work / ID_KEY_FILE).read_text(encoding="utf-8").strip())
    real = dict(zip(record_pseudonyms(key, data.dataset.ids.tolist()), data.dataset.ids.tolist(), strict=True))
    train_pseudonyms, train_targets, train_fitted = decisions["train"]
    held_pseudonyms, held_targets, held_fitted = decisions["test"]
    train_ids = np.array([real[record] for record in train_pseudonyms.tolist()])
    held_ids = np.array([real[record] for record in held_pseudonyms.tolist()])
    fresh, on_grid = _of_kind(held_ids, TEST), _of_kind(held_ids, GRID)
    surface = np.empty(int(on_grid.sum()))
    surface[_indices(held_ids[on_grid])] = held_fitted[on_grid]
    train_region = data.region[data.mask(TRAIN)][_indices(train_ids)]
    by_region = {
        REGIONS[k]: relative_error(train_targets[train_region == k], train_fitted[train_region == k]) for k in (0, 1)
    }
    tuning = model.training["tuning"]
    result = {
        "mbar": mbar,
        "private": model.private,
        "nu": model.nu,
        "mu": model.mu,
        "mu_candidates": ["coordinator grid" if m is None else m for m in mus],
        "candidate_scores": [{"mu": c.mu, "nu": c.nu, "inner_cv": score} for score, c in candidates],
        "mu_fixed": mus[chosen] is not None,
        "inner_cv_relative_error": tuning["score"],
        "grid_edge": edges(model.nu, model.mu, mus),
        "joint_train_relative_error": relative_error(train_targets, train_fitted),
        "joint_test_relative_error": relative_error(held_targets[fresh], held_fitted[fresh]),
        "n_test": int(fresh.sum()),
        "joint_plot_grid_relative_error": relative_error(data.dataset.y[data.mask(GRID)], surface),
        "joint_train_relative_error_by_region": by_region,
        "seconds": seconds,
    }
    return result, surface


def reference_run(data: SincData, split_dir: Path, mus: Sequence[float | None]) -> dict[str, Any]:
    """Pooled reduced-kernel reference (NOT PRIVATE: reads every cell), widths tried as for the joint model.

    Trained on the training rows of the split's cells (``ppsvm.coordinator.reference.pool_cells``),
    evaluated on the fresh points (the cells' held-out rows also hold the plotting grid).
    """
    started = time.perf_counter()
    X_train, y_train, _, _ = pool_cells(split_dir)
    candidates: list[tuple[float, LocalModel]] = []
    for mu in mus:
        candidate = fit_local(
            "regress",
            "gaussian",
            X_train,
            y_train,
            basis_fraction=reference_basis_fraction(len(y_train)),
            nu=None,
            mu=mu,
            seed=TUNE_SEED,
        )
        assert candidate.tuning is not None
        candidates.append((candidate.tuning.score, candidate))
    model = candidates[best([score for score, _ in candidates])][1]
    fresh = data.mask(TEST)
    X, y = data.dataset.X, data.dataset.y
    return {
        "relative_error_training": relative_error(y_train, model.decision(X_train)),
        "relative_error_test": relative_error(y[fresh], model.decision(X[fresh])),
        "basis_rows": len(model.basis),
        "nu": model.nu,
        "mu": model.mu,
        "grid_edge": edges(model.nu, model.mu, mus),
        "candidate_scores": [{"mu": c.mu, "nu": c.nu, "cv": score} for score, c in candidates],
        "seconds": time.perf_counter() - started,
    }


def alone_run(
    data: SincData, k: int, basis_fraction: float, mus: Sequence[float | None]
) -> tuple[dict[str, Any], np.ndarray]:
    """Entity ``k``'s model of its own training points, evaluated on all points (computed here, not by the entity).

    Widths are tried as for the joint model (None: fit_local's own grid), relative to 1/n in the
    entity's own [0, 1] scaling; the lowest cross-validated score on its own points wins.

    Returns
    -------
    result : dict
        Tuned values and relative errors (JSON-ready).
    surface : ndarray, shape (steps * steps,)
        The same model's decision values on the plotting grid.
    """
    started = time.perf_counter()
    X, y = data.dataset.X, data.dataset.y
    mine = data.mask(TRAIN, k)
    candidates: list[tuple[float, LocalModel]] = []
    for mu in mus:
        candidate = fit_local(
            "regress", "gaussian", X[mine], y[mine], basis_fraction=basis_fraction, nu=None, mu=mu, seed=TUNE_SEED
        )
        assert candidate.tuning is not None
        candidates.append((candidate.tuning.score, candidate))
    model = candidates[best([score for score, _ in candidates])][1]
    grid = data.mask(GRID)
    surface = model.decision(X[grid])

    def error(mask: np.ndarray) -> float:
        return relative_error(y[mask], model.decision(X[mask]))

    result = {
        "entity": ENTITIES[k],
        "region": REGIONS[k],
        "n_train": int(mine.sum()),
        "basis_rows": len(model.basis),
        "nu": model.nu,
        "mu": model.mu,
        "relative_error": {
            "all_training_points": error(data.mask(TRAIN)),
            "all_test_points": error(data.mask(TEST)),
            "own_test_points": error(data.mask(TEST, k)),
            "plot_grid": relative_error(y[grid], surface),
        },
        "grid_edge": edges(model.nu, model.mu, mus),
        "candidate_scores": [{"mu": c.mu, "nu": c.nu, "cv": score} for score, c in candidates],
        "seconds": time.perf_counter() - started,
    }
    return result, surface
