"""A federation inside this process: a split's cells served as gRPC entity servers on loopback.

These are the same servers ``ppsvm entity`` runs (``ppsvm.entity.server.start_entity``: the
entity's release guard, mutual TLS with the split's certificates, port 0), so every kernel block
still crosses a real gRPC channel; only the process boundary is gone. The estimators fit this way
(:func:`simulate`), and the reproductions use it because a Table 1 run has hundreds of cells per
fold, and one process each would spend most of the run starting Python.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np

from ppsvm.config import Federation, federation_at_addresses, load_entity_config, load_federation
from ppsvm.core.kernels import assemble, gaussian_fetch_width, kernel, rescale_gaussian, scale_to_unit
from ppsvm.core.lp import Task
from ppsvm.core.multiclass import RandomKernelModel
from ppsvm.core.randomness import derive_B, new_secret_hex
from ppsvm.data.dataset import Dataset
from ppsvm.data.partition import SplitOptions, SplitResult, secret_file_name, split_dataset
from ppsvm.entity.server import start_entity


def fixed_secret(name: str, *parts: object) -> str:
    """A reproducible column-block secret for run ``name`` and ``parts`` (production secrets are random).

    Reproductions need the same B_j on every rerun, so their secrets are the
    sha256 of a public string: fine for published data, never for real data.
    """
    return hashlib.sha256("/".join(map(str, ("ppsvm-benchmark", name, *parts))).encode()).hexdigest() + "\n"


def simulation_secrets(seed: int | None, n_blocks: int) -> list[str]:
    """One secret per column block for a simulation: :func:`fixed_secret` of ``seed``, or fresh ones when None.

    Returns
    -------
    list of str, length n_blocks
        Hex text, as in a secret file.
    """
    if seed is None:
        return [new_secret_hex() + "\n" for _ in range(n_blocks)]
    return [fixed_secret("simulation", seed, j) for j in range(n_blocks)]


def set_secrets(split: SplitResult, secrets: Sequence[str]) -> None:
    """Overwrite column block j's secret file with ``secrets[j]`` (entities read it when they start)."""
    for j, secret in enumerate(secrets):
        (split.federation_path.parent / secret_file_name(j)).write_text(secret, encoding="utf-8")


def add_privacy_settings(config_paths: Iterable[Path], settings: Mapping[str, bool]) -> None:
    """Give every entity config of ``config_paths`` a ``[privacy]`` table with ``settings`` (its operator's choices).

    Reproductions use it for what the papers did and the entities must consent to: a horizontal split's
    blocks, or the product basis's, leave on their own (privacy rule 8); mbar >= n_j (rule 3).
    """
    if settings:
        table = "".join(f"{key} = {'true' if value else 'false'}\n" for key, value in settings.items())
        for path in config_paths:
            with path.open("a", encoding="utf-8") as handle:
                handle.write(f"\n[privacy]\n{table}")


def needs_single_block_consent(rows: int, cols: int, basis: str = "paper") -> bool:
    """Whether an entity of an r x s split releases its block on its own to a party a column-block peer can help:
    a horizontal split (every block alone in its row block) or the product basis, with more than one row block
    (otherwise no other entity knows its B_j)."""
    return rows > 1 and (cols == 1 or basis == "product")


@contextlib.contextmanager
def serve_split(split: SplitResult, work: Path) -> Iterator[Federation]:
    """Serve every cell of ``split`` on loopback; yield the federation pointing at them, stop all on exit.

    A copy of the federation file with the live addresses is written to
    ``work/federation.live.toml``.
    """
    planned = load_federation(split.federation_path)
    servers = []
    try:
        ports: dict[str, int] = {}
        for path in split.entity_config_paths:
            config = dataclasses.replace(load_entity_config(path), listen="127.0.0.1:0")
            server, port = start_entity(config)
            servers.append(server)
            ports[config.id] = port
        live_path = work / "federation.live.toml"
        live_path.write_text(
            federation_at_addresses(planned, [f"127.0.0.1:{ports[e.id]}" for e in planned.entities]), encoding="utf-8"
        )
        yield load_federation(live_path)
    finally:
        for server in servers:
            server.stop(0).wait()


@contextlib.contextmanager
def simulate(
    dataset: Dataset,
    work: Path,
    *,
    rows: int,
    column_blocks: Sequence[np.ndarray],
    task: Task,
    seed: int,
    secrets: Sequence[str] | None = None,
    entity_settings: str = "",
) -> Iterator[Federation]:
    """Split ``dataset`` as ``ppsvm split`` does (every record for training) and serve its cells in this process.

    Parameters
    ----------
    dataset : Dataset
        ids (m,), X (m, n), y (m,).
    work : Path
        An empty directory for the cells, configs, secrets, certificates and release logs.
    rows : int
        Row blocks r: the records are dealt into r nearly equal blocks in an order shuffled by ``seed``.
    column_blocks : sequence of ndarray of int
        The feature indices of each column block.
    task : {"classify", "regress"}
    seed : int
        Seed of the shuffle.
    secrets : sequence of str, optional
        Column block j's secret (hex text); default: the split's fresh random ones.
    entity_settings : str
        TOML appended to every entity config (e.g. a ``[privacy]`` table).

    Yields
    ------
    Federation
        The coordinator's view of the running entities; they stop when the block ends.
    """
    options = SplitOptions(
        rows=rows, cols=len(column_blocks), out_dir=work / "cells", test_fraction=0.0, seed=seed, task=task
    )
    split = split_dataset(dataset, options, column_blocks=column_blocks)
    if secrets is not None:
        set_secrets(split, secrets)
    for path in split.entity_config_paths:
        with path.open("a", encoding="utf-8") as handle:
            handle.write(entity_settings)
    with serve_split(split, work) as federation:
        yield federation


def new_record_kernel(
    model: RandomKernelModel, secrets: Sequence[str], column_blocks: Sequence[np.ndarray], X: np.ndarray
) -> np.ndarray:
    """K(x', B') for new records, assembled as docs/design.md section 1 classifies a new point.

    The owners of column block j compute K(x_j', B_j') from their secret under the model's
    view of B_j (kernel, the width entities are asked for, the training scaling), exactly as an
    entity computes a kernel block; the coordinator combines the blocks and takes the model's width.

    Parameters
    ----------
    model : Model or MulticlassModel
    secrets : sequence of str
        Column block j's secret (hex text).
    column_blocks : sequence of ndarray of int
        The feature indices of each column block, as the model was trained.
    X : ndarray, shape (m, n)
        Raw feature rows.

    Returns
    -------
    ndarray, shape (m, len(model.u))
    """
    name = model.kernel
    mu_fetch = gaussian_fetch_width(X.shape[1]) if name == "gaussian" else 0.0
    blocks = [
        kernel(
            name,
            scale_to_unit(X[:, columns], np.array(scaling.low), np.array(scaling.high)),
            derive_B(bytes.fromhex(secret.strip()), model.mbar, len(columns)),
            mu_fetch,
        )
        for columns, scaling, secret in zip(column_blocks, model.scaling, secrets, strict=True)
    ]
    K = assemble(name, blocks, model.column_index)
    return rescale_gaussian(K, mu_fetch, model.mu) if name == "gaussian" else K
