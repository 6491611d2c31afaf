"""``ppsvm reference``: the papers' non-private comparison on pooled data (benchmarks only).

It reads every cell of a ``ppsvm split`` output directly, pools them by record
id, and trains the reduced kernel K(A, Abar') with Abar a random 10% of the
training rows. This sees all the data: it exists to measure what privacy costs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ppsvm.config import load_entity_config, load_federation
from ppsvm.coordinator.federation import record_positions
from ppsvm.core.kernels import KernelName
from ppsvm.core.local_svm import LocalClasses, LocalModel, fit_local, local_figures, reference_basis_fraction
from ppsvm.core.lp import Task
from ppsvm.core.tuning import Search
from ppsvm.data.cell import Cell
from ppsvm.data.sources import read_source
from ppsvm.errors import ConfigError, DataError

LABEL = "pooled reference (NOT PRIVATE: all cells read in one place)"


def _aligned(row_block: int, part: str, first: Cell, cell: Cell, values: np.ndarray) -> np.ndarray:
    """``values`` (one per ``part`` record of ``cell``) reordered to the record order of ``first``."""
    reference, ids = getattr(first, f"{part}_ids"), getattr(cell, f"{part}_ids")
    order = record_positions(reference, ids)
    if len(ids) != len(reference) or (order < 0).any():
        raise DataError(f"row block {row_block}: cells {first.source} and {cell.source} hold different {part} records")
    result = np.empty_like(values)
    result[order] = values
    return result


def pool_cells(split_dir: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Reassemble the pooled training and held-out matrices from a split directory.

    Returns
    -------
    X_train (m, n), y_train (m,), X_test (t, n), y_test (t,)
        Rows grouped by row block, columns in column-block order.
    """
    federation = load_federation(split_dir / "federation.toml")
    parts: dict[str, list[np.ndarray]] = {"X_train": [], "y_train": [], "X_test": [], "y_test": []}
    for i in federation.row_blocks:
        cells: list[Cell] = []
        for j in federation.column_blocks:
            config_path = split_dir / f"{federation.cell(i, j).id}.toml"
            if not config_path.exists():
                raise ConfigError(f"{config_path} not found: the reference needs the split directory's entity configs")
            config = load_entity_config(config_path)
            cells.append(read_source(config.data, config.schema))
        labelled = next((c for c in cells if c.y_train is not None), None)
        if labelled is None:
            raise DataError(f"row block {i}: no cell holds labels")
        for part in ("train", "test"):
            X_part = np.hstack([_aligned(i, part, cells[0], c, getattr(c, f"X_{part}")) for c in cells])
            parts[f"X_{part}"].append(X_part)
            parts[f"y_{part}"].append(_aligned(i, part, cells[0], labelled, getattr(labelled, f"y_{part}")))
    return (
        np.vstack(parts["X_train"]),
        np.concatenate(parts["y_train"]),
        np.vstack(parts["X_test"]),
        np.concatenate(parts["y_test"]),
    )


def pooled_reference(
    split_dir: Path,
    task: Task,
    kernel: KernelName,
    *,
    nu: float | None,
    mu: float | None,
    seed: int,
    search: Search = "grid",
) -> dict[str, Any]:
    """Train and evaluate the pooled reduced-kernel reference; returns its figures and settings.

    ``seed`` draws the basis rows Abar and the folds; ``search`` is how nu and mu of None are tuned.
    """
    X_train, y_train, X_test, y_test = pool_cells(split_dir)
    if len(y_test) == 0:
        raise DataError(f"{split_dir}: no held-out records to evaluate the reference on")
    model = fit_local(
        task,
        kernel,
        X_train,
        y_train,
        basis_fraction=reference_basis_fraction(len(y_train)),
        nu=nu,
        mu=mu,
        seed=seed,
        search=search,
    )
    # One model per class: each class's nu and mu.
    members = model.members if isinstance(model, LocalClasses) else (model,)
    return {
        **local_figures(task, model, X_test, y_test),
        "n_train": len(y_train),
        "n_test": len(y_test),
        "basis_rows": len(members[0].basis),
        "nu": model.nu if isinstance(model, LocalModel) else [member.nu for member in members],
        "mu": model.mu if isinstance(model, LocalModel) else [member.mu for member in members],
        "private": False,
    }
