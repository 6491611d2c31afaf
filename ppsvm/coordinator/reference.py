"""``ppsvm reference``: the papers' non-private comparison on pooled data (benchmarks only).

It reads every entity's records through its config (``[data]`` and ``[schema]``: CSV, Parquet or SQL
sources, or a ``ppsvm split`` cell), pools them by record id, and trains the reduced kernel K(A, Abar')
with Abar a random 10% of the training rows. The configs are a split directory's ``<id>.toml`` beside its
federation file, or given one by one from wherever they are. This sees all the data: it exists to measure
what privacy costs.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ppsvm.config import EntityConfig, Federation, load_entity_config, load_federation
from ppsvm.coordinator.federation import record_positions
from ppsvm.core.kernels import KernelName
from ppsvm.core.local_svm import LocalClasses, LocalModel, fit_local, local_figures, reference_basis_fraction
from ppsvm.core.lp import Task
from ppsvm.core.tuning import Search
from ppsvm.data.cell import Cell
from ppsvm.data.partition import FEDERATION_FILE
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


def federation_file(path: Path) -> Path:
    """The federation file ``path`` names: itself, or a directory's ``federation.toml`` (a ``ppsvm split`` output)."""
    return path / FEDERATION_FILE if path.is_dir() else path


def entity_configs(federation: Federation, config_paths: Sequence[Path] = ()) -> dict[str, EntityConfig]:
    """Each entity's config, by entity id, checked against its place in the federation.

    Parameters
    ----------
    federation : Federation
        The federation file's entities.
    config_paths : sequence of Path
        The entity configs, in any order and from any directory, one per entity (matched by ``[entity] id``);
        empty: each entity's ``<id>.toml`` beside the federation file, as ``ppsvm split`` writes them.

    Returns
    -------
    dict of str to EntityConfig
        One per entity of the federation.

    Raises
    ------
    ConfigError
        Naming the entities without a config, a config of an entity the federation does not list, an entity
        configured twice, or a config whose column block is not the federation's.
    """
    where = federation.source
    if not config_paths:
        beside = {entity.id: where.parent / f"{entity.id}.toml" for entity in federation.entities}
        absent = [f"{name} ({path})" for name, path in beside.items() if not path.is_file()]
        if absent:
            raise ConfigError(
                f"no config beside {where} for entity {', '.join(absent)}: give each entity's config from where "
                "it is (ppsvm reference --federation F --entity-config E.toml ...)"
            )
        config_paths = list(beside.values())
    configs: dict[str, EntityConfig] = {}
    for path in config_paths:
        config = load_entity_config(path)
        if config.id in configs:
            raise ConfigError(f"{configs[config.id].source} and {path} both configure entity {config.id!r}")
        configs[config.id] = config
    listed = {entity.id: entity for entity in federation.entities}
    strangers = [f"{config.id!r} ({config.source})" for config in configs.values() if config.id not in listed]
    if strangers:
        raise ConfigError(f"{where} lists no entity {', '.join(strangers)}; its entities: {', '.join(listed)}")
    missing = [name for name in listed if name not in configs]
    if missing:
        raise ConfigError(
            f"no entity config given for {', '.join(missing)} (entities of {where}; add each with --entity-config)"
        )
    for name, config in configs.items():
        if config.column_block != listed[name].column_block:
            raise ConfigError(
                f"{config.source}: entity {name!r} holds column block {config.column_block}, but {where} places "
                f"it in column block {listed[name].column_block}"
            )
    return configs


def pool_cells(
    federation: Path, config_paths: Sequence[Path] = ()
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Reassemble the pooled training and held-out matrices from every entity's records.

    Parameters
    ----------
    federation : Path
        The federation file, or a ``ppsvm split`` output directory holding it.
    config_paths : sequence of Path
        The entity configs (see :func:`entity_configs`); empty: ``<id>.toml`` beside the federation file.
        Each entity's records are read through its config's source and schema (:func:`read_source`).

    Returns
    -------
    X_train (m, n), y_train (m,), X_test (t, n), y_test (t,)
        Rows grouped by row block, columns in column-block order.
    """
    plan = load_federation(federation_file(federation))
    configs = entity_configs(plan, config_paths)
    parts: dict[str, list[np.ndarray]] = {"X_train": [], "y_train": [], "X_test": [], "y_test": []}
    for i in plan.row_blocks:
        cells: list[Cell] = []
        for j in plan.column_blocks:
            config = configs[plan.cell(i, j).id]
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
    federation: Path,
    task: Task,
    kernel: KernelName,
    *,
    config_paths: Sequence[Path] = (),
    nu: float | None,
    mu: float | None,
    seed: int,
    search: Search = "grid",
) -> dict[str, Any]:
    """Train and evaluate the pooled reduced-kernel reference; returns its figures and settings.

    ``federation`` and ``config_paths`` say where the records are (:func:`pool_cells`); ``seed`` draws the basis
    rows Abar and the folds; ``search`` is how nu and mu of None are tuned.
    """
    X_train, y_train, X_test, y_test = pool_cells(federation, config_paths)
    if len(y_test) == 0:
        raise DataError(f"{federation}: no held-out records to evaluate the reference on")
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
