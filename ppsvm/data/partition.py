"""The checkerboard split behind ``ppsvm split``.

A dataset is cut into r row blocks and s column blocks; each cell goes to one
entity as a CSV file, with an entity config that is private to that entity, a
secret per column block (shared by that block's entities, from which they derive
B_j; docs/design.md section 2), a public federation file for the coordinator, TLS
certificates (each with its roles: the coordinator, every entity and one
prediction client, ``client``) from a one-off CA whose key is not kept, and a
manifest (``split.json``) recording how the split was made. All files are staged
under temporary names and renamed into place only once every one was written.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import io
import itertools
import json
import logging
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ppsvm.config import FederationEntity, federation_toml, release_log_name, toml_document
from ppsvm.constants import TASKS
from ppsvm.core.kernels import KERNELS
from ppsvm.core.randomness import new_secret_hex
from ppsvm.core.release_log import new_release_log_text
from ppsvm.data.dataset import Dataset
from ppsvm.data.inference import proposed_schema, schema_tables
from ppsvm.data.schema import Feature, Schema
from ppsvm.errors import ConfigError, DataError
from ppsvm.files import PRIVATE_MODE, PUBLIC_MODE, write_all
from ppsvm.wire.certs import (
    CA_FILE,
    CA_KEY_FILE,
    DEFAULT_COORDINATOR_NAME,
    certificate_file,
    federation_parties,
    key_file,
    make_certificates,
)

__all__ = [
    "SplitOptions",
    "SplitResult",
    "cell_csv",
    "column_layout",
    "feature_blocks",
    "named_feature_blocks",
    "split_dataset",
]

logger = logging.getLogger(__name__)

FEDERATION_FILE = "federation.toml"
MANIFEST_FILE = "split.json"
# Files a previous split may have left that this one does not rewrite.
_SPLIT_OUTPUT = re.compile(
    r"r\d+c\d+\.(csv|toml|pem|key|releases\.jsonl|releases\.jsonl\.head|releases\.jsonl\.served)"
    r"|column-block-\d+\.secret|record-ids\.key"
    r"|pair-r\d+c\d+-r\d+c\d+\.secret"
)
# The federation's record-id key: every entity holds it, the coordinator never does (ids leave as pseudonyms).
ID_KEY_FILE = "record-ids.key"


@dataclass(frozen=True)
class SplitOptions:
    """How to cut a dataset into a checkerboard of entity cells.

    Parameters
    ----------
    rows : int
        Number of row blocks r (>= 1).
    cols : int
        Number of column blocks s (1 <= s <= n features).
    out_dir : Path
        Directory for the files; refused if non-empty unless `overwrite`.
    test_fraction : float
        Fraction of records held out for testing, in [0, 1).
    seed : int
        Seed of the shuffle.
    task : str
        "classify" or "regress".
    kernel : str
        "linear" or "gaussian" (written to the federation file).
    host : str
        Host of every entity address.
    base_port : int
        Entity (i, j) listens on ``base_port + i * cols + j``.
    overwrite : bool
        Allow a non-empty `out_dir`: files of the same names are replaced and
        cell files of an earlier split that this one does not produce are removed.
    """

    rows: int
    cols: int
    out_dir: Path
    test_fraction: float = 0.3
    seed: int = 0
    task: str = "classify"
    kernel: str = "gaussian"
    host: str = "127.0.0.1"
    base_port: int = 50051
    overwrite: bool = False


@dataclass(frozen=True)
class SplitResult:
    """What :func:`split_dataset` wrote.

    Attributes
    ----------
    federation_path : Path
        The public federation file.
    entity_config_paths : tuple of Path, length rows * cols
        Entity configs in row-major order r0c0, r0c1, ...
    n_train, n_test : int
        Numbers of training and held-out records.
    """

    federation_path: Path
    entity_config_paths: tuple[Path, ...]
    n_train: int
    n_test: int


def split_dataset(
    dataset: Dataset,
    options: SplitOptions,
    provenance: Mapping[str, Any] | None = None,
    *,
    held_out: np.ndarray | None = None,
    row_blocks: np.ndarray | None = None,
    column_blocks: Sequence[Sequence[int] | np.ndarray] | None = None,
) -> SplitResult:
    """Split `dataset` into checkerboard cells and write the federation's files.

    Records are shuffled with ``numpy.random.default_rng(options.seed)``; the
    first ``round(test_fraction * m)`` of the shuffled order (per class, in
    proportion, for classification) are held out. Training and held-out records
    are each dealt into `rows` nearly equal row blocks in shuffled order, and
    the features into `cols` contiguous column blocks (or as `column_blocks` says).

    Parameters
    ----------
    dataset : Dataset
        ids (m,), X (m, n), y (m,).
    options : SplitOptions
        Block counts, output directory, shuffle seed, federation settings.
    provenance : mapping, optional
        JSON-serialisable description of how the dataset was read (e.g. its
        DatasetOptions as a dict); stored under "dataset" in ``split.json``.
    held_out : ndarray of bool, shape (m,), optional
        Which records to hold out, instead of a random `test_fraction` (e.g. a
        cross-validation fold).
    row_blocks : ndarray of int, shape (m,), optional
        The row block of each record, instead of dealing them out evenly (e.g.
        a partition by region, as in Fung & Mangasarian's sinc experiment).
    column_blocks : sequence of sequences of int, length `cols`, optional
        The feature indices of each column block, instead of contiguous ones (e.g. the
        features each hospital records); together they hold every feature once.

    Returns
    -------
    SplitResult
        Paths of the federation file and entity configs, train/test counts.

    Raises
    ------
    ConfigError
        Bad block counts, fraction, task, kernel, ports, or a non-empty `out_dir`.
    DataError
        Classification labels other than +1/-1, or a row block whose training
        records are all of one class.
    """
    m, n = dataset.X.shape
    _validate(dataset, options)

    rng = np.random.default_rng(options.seed)
    order = rng.permutation(m)
    if held_out is None:
        n_test = round(options.test_fraction * m)
        is_test = _held_out(dataset.y[order], n_test, stratify=options.task == "classify")
    else:
        is_test = _per_record(held_out, m, "held_out").astype(bool)[order]
    train, test = order[~is_test], order[is_test]
    if options.rows > len(train):
        raise ConfigError(f"{options.rows} row blocks but only {len(train)} training records; use fewer row blocks")
    if row_blocks is None:
        train_blocks = np.array_split(train, options.rows)
        test_blocks = np.array_split(test, options.rows)
    else:
        block_of = _per_record(row_blocks, m, "row_blocks").astype(np.int64)
        if block_of.min() < 0 or block_of.max() >= options.rows:
            raise ConfigError(f"row_blocks must lie in 0..{options.rows - 1}")
        train_blocks = [train[block_of[train] == i] for i in range(options.rows)]
        test_blocks = [test[block_of[test] == i] for i in range(options.rows)]
        empty = [i for i, block in enumerate(train_blocks) if len(block) == 0]
        if empty:
            raise ConfigError(f"row block(s) {empty} receive no training records")
    if options.task == "classify":
        _check_both_classes(dataset.y, train_blocks, dataset.classes)
    blocks = feature_blocks(n, options.cols, column_blocks)
    dataset, imputed = _impute_per_row_block(dataset, train_blocks, test_blocks)

    # Each feature's declared bounds or categories, proposed from all its records: a column block's members declare
    # the same (the features check compares them), and the scaling never depends on who holds what.
    schema = proposed_schema(dataset)
    files: dict[str, tuple[str | bytes, int]] = {}
    entity_names: list[str] = []
    cells: list[dict[str, Any]] = []
    for i in range(options.rows):
        for j, columns in enumerate(blocks):
            name = f"r{i}c{j}"
            entity_names.append(name)
            cell = cell_bytes(dataset, train_blocks[i], test_blocks[i], columns, options.task)
            files[f"{name}.csv"] = (cell, PRIVATE_MODE)
            members = [f"r{row}c{j}" for row in range(options.rows)]
            peers = [f"r{i}c{col}" for col in range(options.cols) if col != j]
            features = [schema.features[k] for k in columns]
            # The raw label values of -1 and +1 (e.g. B and M), or of each class code: the models then predict them.
            names = dataset.classes or (None if dataset.label_values is None else dataset.label_values[::-1])
            entity_toml = _entity_toml(name, _address(options, i, j), j, members, peers, features, names)
            files[f"{name}.toml"] = (entity_toml, PRIVATE_MODE)
            # A new cell has released nothing: its log starts here (an entity refuses to start without one).
            files[release_log_name(name)] = (new_release_log_text(name), PRIVATE_MODE)
            cells.append(
                {
                    "id": name,
                    "row_block": i,
                    "column_block": j,
                    "n_train": len(train_blocks[i]),
                    "n_test": len(test_blocks[i]),
                    "n_features": len(columns),
                }
            )
    for j in range(options.cols):
        files[secret_file_name(j)] = (new_secret_hex() + "\n", PRIVATE_MODE)
    for i in range(options.rows):
        for a, b in itertools.combinations(range(options.cols), 2):
            files[pair_secret_file_name(f"r{i}c{a}", f"r{i}c{b}")] = (new_secret_hex() + "\n", PRIVATE_MODE)
    files[ID_KEY_FILE] = (new_secret_hex() + "\n", PRIVATE_MODE)
    for filename, pem in make_certificates(federation_parties(DEFAULT_COORDINATOR_NAME, entity_names)).items():
        # Without the CA key nobody can mint another identity this federation would trust.
        if filename != CA_KEY_FILE:
            files[filename] = (pem.text.decode("ascii"), PRIVATE_MODE if pem.secret else PUBLIC_MODE)
    files[FEDERATION_FILE] = (_federation_toml(options), PUBLIC_MODE)
    manifest = {
        "source": dataset.source,
        "source_sha256": _sha256(dataset.source),
        "dataset": dict(provenance or {}),
        "options": {
            "rows": options.rows,
            "cols": options.cols,
            "test_fraction": options.test_fraction,
            "seed": options.seed,
            "held_out": "given" if held_out is not None else "random",
            "row_blocks": "given" if row_blocks is not None else "even",
            "column_blocks": "given" if column_blocks is not None else "contiguous",
            "task": options.task,
            "kernel": options.kernel,
        },
        "m": m,
        "n": n,
        "n_train": len(train),
        "n_test": len(test),
        "imputed": imputed,
        "column_blocks": [_manifest_block(j, columns, dataset.feature_names) for j, columns in enumerate(blocks)],
        "cells": cells,
    }
    files[MANIFEST_FILE] = (json.dumps(manifest, indent=2) + "\n", PUBLIC_MODE)

    _write_all(options.out_dir, files, options.overwrite)
    return SplitResult(
        federation_path=options.out_dir / FEDERATION_FILE,
        entity_config_paths=tuple(options.out_dir / f"{name}.toml" for name in entity_names),
        n_train=len(train),
        n_test=len(test),
    )


def _impute_per_row_block(
    dataset: Dataset, train_blocks: list[np.ndarray], test_blocks: list[np.ndarray]
) -> tuple[Dataset, dict[str, int]]:
    """Fill missing (NaN) values with the column means of each row block's training records (a categorical
    feature's most frequent category, the first in order on a tie).

    Entity (i, j) holds row block i's values of column block j's features, so these are values it could compute
    from its own training records alone: nothing from the test records or from another party enters.

    Returns
    -------
    dataset : Dataset
        With finite X.
    imputed : dict
        "row block i" -> number of values filled (empty when nothing was missing).
    """
    missing = np.isnan(dataset.X)
    if not missing.any():
        return dataset, {}
    X = dataset.X.copy()
    imputed: dict[str, int] = {}
    for i, (train, test) in enumerate(zip(train_blocks, test_blocks, strict=True)):
        rows = np.concatenate([train, test])
        observed = (~missing[train]).sum(axis=0)
        needed = missing[rows].any(axis=0)
        empty = np.flatnonzero(needed & (observed == 0))
        if empty.size:
            names = ", ".join(dataset.feature_names[k] for k in empty)
            raise DataError(
                f"{dataset.source}: row block {i} has no observed training value of feature(s) {names} to impute "
                "from; drop the column(s) or use --missing drop"
            )
        fills = np.nansum(X[train], axis=0) / np.maximum(observed, 1)
        for k, categories in dataset.categories.items():  # a category's index, not a mean of indices
            codes = X[train, k]
            fills[k] = np.argmax(np.bincount(codes[~np.isnan(codes)].astype(np.int64), minlength=len(categories)))
        block = X[rows]
        holes = np.isnan(block)
        block[holes] = np.broadcast_to(fills, block.shape)[holes]
        X[rows] = block
        imputed[f"row block {i}"] = int(holes.sum())
    logger.warning(
        "imputed %d missing values with each row block's training means (most frequent categories)",
        sum(imputed.values()),
    )
    return dataclasses.replace(dataset, X=X), imputed


def _validate(dataset: Dataset, options: SplitOptions) -> None:
    n = dataset.X.shape[1]
    if options.rows < 1:
        raise ConfigError(f"rows must be at least 1, not {options.rows}")
    if not 1 <= options.cols <= n:
        raise ConfigError(f"cols must be between 1 and the number of features ({n}), not {options.cols}")
    if not 0 <= options.test_fraction < 1:
        raise ConfigError(f"test fraction must be in [0, 1), not {options.test_fraction}")
    if options.task not in TASKS:
        raise ConfigError(f"task must be one of {', '.join(TASKS)}, not {options.task!r}")
    if options.kernel not in KERNELS:
        raise ConfigError(f"kernel must be one of {', '.join(KERNELS)}, not {options.kernel!r}")
    last_port = options.base_port + options.rows * options.cols - 1
    if options.base_port < 1 or last_port > 65535:
        raise ConfigError(
            f"ports {options.base_port}..{last_port} for {options.rows * options.cols} entities are not all in 1..65535"
        )
    labels = (-1.0, 1.0) if dataset.classes is None else np.arange(len(dataset.classes), dtype=np.float64)
    if options.task == "classify" and not np.isin(dataset.y, labels).all():
        raise DataError(
            f"{dataset.source}: classification labels must be +1 or -1"
            if dataset.classes is None
            else f"{dataset.source}: class codes must be 0 .. {len(dataset.classes) - 1}, one per class"
        )
    out_dir = options.out_dir
    if out_dir.exists() and not out_dir.is_dir():
        raise ConfigError(f"output directory {out_dir} exists and is not a directory")
    if out_dir.is_dir() and any(out_dir.iterdir()) and not options.overwrite:
        raise ConfigError(f"output directory {out_dir} is not empty; choose another or pass --overwrite")


def feature_blocks(n: int, cols: int, given: Sequence[Sequence[int] | np.ndarray] | None = None) -> list[np.ndarray]:
    """The feature indices of each of `cols` column blocks of `n` features: contiguous ones, or `given` checked.

    Raises
    ------
    ConfigError
        `given` is not `cols` non-empty blocks that together hold each feature exactly once.
    """
    if given is None:
        return np.array_split(np.arange(n), cols)
    blocks = [np.asarray(block, dtype=np.int64).reshape(-1) for block in given]
    if len(blocks) != cols:
        raise ConfigError(f"{len(blocks)} column blocks given for cols = {cols}")
    if any(len(block) == 0 for block in blocks):
        raise ConfigError("every column block needs at least one feature")
    counts = np.bincount(np.concatenate(blocks), minlength=n) if min(map(np.min, blocks)) >= 0 else None
    if counts is None or len(counts) != n or not (counts == 1).all():
        raise ConfigError(f"column blocks must hold each of the {n} features (0..{n - 1}) exactly once")
    return blocks


def named_feature_blocks(feature_names: Sequence[str], blocks: Sequence[Sequence[str]]) -> list[np.ndarray]:
    """Column blocks given by feature names, as the feature indices :func:`split_dataset` takes.

    Parameters
    ----------
    feature_names : sequence of str, length n
        The dataset's features (:attr:`Dataset.feature_names`: header names, else ``x<column index>``).
    blocks : sequence of sequences of str, length s
        Each column block's feature names, in the order its cells will hold them.

    Returns
    -------
    list of ndarray of int, length s
        Each block's feature indices, shape (n_j,).

    Raises
    ------
    ConfigError
        A block without a feature, or names that are unknown, named more than once, or features no block names:
        every problem at once, with the dataset's features listed.
    """
    if not blocks or any(len(block) == 0 for block in blocks):
        raise ConfigError("every column block needs at least one feature")
    index = {name: k for k, name in enumerate(feature_names)}
    given = Counter(name for block in blocks for name in block)  # in order of first mention
    problems = []
    unknown = [name for name in given if name not in index]
    if unknown:
        problems.append(f"unknown feature(s) {_names(unknown)}")
    repeated = [name for name, count in given.items() if count > 1]
    if repeated:
        problems.append(f"{_names(repeated)} named more than once")
    left_out = [name for name in feature_names if name not in given]
    if left_out:
        problems.append(f"{_names(left_out)} in no column block (each feature goes to exactly one)")
    if problems:
        raise ConfigError(
            f"column blocks by name: {'; '.join(problems)}; the dataset's features: {', '.join(feature_names)}"
        )
    return [np.array([index[name] for name in block], dtype=np.int64) for block in blocks]


def column_layout(
    cols: int | Sequence[Sequence[str]], feature_names: Sequence[str]
) -> tuple[int, list[np.ndarray] | None]:
    """:attr:`SplitOptions.cols` and :func:`split_dataset`'s ``column_blocks`` for a count of contiguous column
    blocks (``column_blocks`` None) or each block's feature names (:func:`named_feature_blocks`)."""
    if isinstance(cols, int):
        return cols, None
    blocks = named_feature_blocks(feature_names, cols)
    return len(blocks), blocks


def _names(names: Sequence[str]) -> str:
    return ", ".join(repr(name) for name in names)


def _manifest_block(j: int, columns: np.ndarray, feature_names: Sequence[str]) -> dict[str, Any]:
    """A column block in ``split.json``: its feature indices and names; start and stop when they are contiguous."""
    entry: dict[str, Any] = {"column_block": j}
    if np.array_equal(columns, np.arange(columns[0], columns[0] + len(columns))):
        entry.update(start=int(columns[0]), stop=int(columns[0]) + len(columns))
    entry.update(columns=columns.tolist(), features=[feature_names[c] for c in columns])
    return entry


def _per_record(values: np.ndarray, m: int, name: str) -> np.ndarray:
    values = np.asarray(values)
    if values.shape != (m,):
        raise ConfigError(f"{name} must have one entry per record ({m}), got shape {values.shape}")
    return values


def _held_out(labels: np.ndarray, n_test: int, stratify: bool) -> np.ndarray:
    """Mask (m,) over the shuffled order: True for the `n_test` held-out positions."""
    is_test = np.zeros(len(labels), dtype=bool)
    if not stratify:
        is_test[:n_test] = True
        return is_test
    classes, counts = np.unique(labels, return_counts=True)
    # Largest-remainder apportionment keeps the class ratio and the exact total.
    exact = n_test * counts / counts.sum()
    quota = np.floor(exact).astype(int)
    quota[np.argsort(quota - exact, kind="stable")[: n_test - quota.sum()]] += 1
    for k in range(len(classes)):
        donor = int(np.argmax(quota))
        if quota[k] == 0 and counts[k] >= 2 and quota[donor] >= 2:
            quota[k], quota[donor] = 1, quota[donor] - 1
    for label, q in zip(classes, quota, strict=True):
        is_test[np.flatnonzero(labels == label)[:q]] = True
    return is_test


def _check_both_classes(y: np.ndarray, train_blocks: list[np.ndarray], classes: tuple[str, ...] | None) -> None:
    """Every row block trains on two classes at least: its own model (the entity-alone baseline) needs them."""
    for i, block in enumerate(train_blocks):
        present = np.unique(y[block])
        if len(present) < 2:
            name = f"{present[0]:+g}" if classes is None else repr(classes[int(present[0])])
            raise DataError(
                f"row block {i} has {len(block)} training records, all of class {name}; every row block needs "
                "two classes at least: use fewer row blocks"
            )


def cell_csv(dataset: Dataset, train: np.ndarray, test: np.ndarray, columns: np.ndarray, task: str) -> str:
    """A cell file's text: header ``id,label,split,<features>``, the `train` then the `test` records (index arrays)
    with the features `columns` (see :func:`cell_bytes`)."""
    return cell_bytes(dataset, train, test, columns, task).decode("utf-8")


# Records formatted at a time: the text of a block stays small (a few MB) and within pyarrow's 2 GiB string arrays.
_CELL_BLOCK_ROWS = 1 << 16


def cell_bytes(dataset: Dataset, train: np.ndarray, test: np.ndarray, columns: np.ndarray, task: str) -> bytes:
    """A cell file's bytes (UTF-8): header ``id,label,split,<features>``, then a line per record of `train`, then of
    `test`, with the features `columns`.

    Every number is the shortest text that reads back as the same float64 (pyarrow's, as Python's repr but for
    its choice of notation: ``0`` for ``0.0``, ``1e-7`` for ``1e-07``, ``0.00001`` for ``1e-05``), made a
    column at a time in C++: Python's repr of each value took 1.2 s of CPU per million values here, pyarrow
    0.17 s. Ids are written as the csv module writes them (quoted where they hold a comma, a quote or a line end).
    Blocks of records are formatted on two threads where a core is idle (pyarrow's kernels release the GIL).

    Parameters
    ----------
    dataset : Dataset
        ids (m,), X (m, n), y (m,).
    train, test : ndarray of int, shapes (m_train,) and (m_test,)
        The records' rows in `dataset`.
    columns : ndarray of int, shape (n_j,)
        The features written, in order.
    task : str
        "classify": labels written as 1 and -1, or as class codes 0 .. k-1; else the real targets.

    Returns
    -------
    bytes
        The file's content.
    """
    from ppsvm.data.columnar import spare_core

    header = io.StringIO()
    names = ["id", "label", "split", *(dataset.feature_names[c] for c in columns)]
    csv.writer(header, lineterminator="\n").writerow(names)
    rows = np.concatenate([train, test])
    held_out = np.arange(len(rows)) >= len(train)
    starts = range(0, len(rows), _CELL_BLOCK_ROWS)

    def lines(start: int) -> memoryview:
        stop = start + _CELL_BLOCK_ROWS
        return _cell_lines(dataset, rows[start:stop], held_out[start:stop], columns, task)

    if spare_core() and len(starts) > 1:
        with ThreadPoolExecutor(max_workers=2) as pool:
            blocks = list(pool.map(lines, starts))
    else:
        blocks = [lines(start) for start in starts]
    return b"".join([header.getvalue().encode("utf-8"), *blocks])


def _cell_lines(dataset: Dataset, rows: np.ndarray, held_out: np.ndarray, columns: np.ndarray, task: str) -> memoryview:
    """The lines of records ``rows`` (k,) of a cell file, each with its line end; ``held_out`` (k,) marks "test"."""
    import pyarrow as pa
    import pyarrow.compute as pc

    ids = pa.array(dataset.ids[rows], pa.string())
    quoted = pc.match_substring_regex(ids, r'[,"\r\n]')
    if pc.any(quoted).as_py():  # the rare id the csv module quotes: written by it, as before
        fields = dataset.ids[rows].tolist()
        for k in pc.indices_nonzero(quoted).to_pylist():
            fields[k] = _csv_field(fields[k])
        ids = pa.array(fields, pa.string())
    labels = dataset.y[rows]
    if task != "classify":
        label_texts = _float_texts(labels)
    elif dataset.classes is None:
        label_texts = pc.if_else(pa.array(labels == 1), "1", "-1")
    else:
        label_texts = pa.array(labels.astype(np.int64)).cast(pa.string())
    split = pc.if_else(pa.array(held_out), "test", "train")
    # The rows gathered once (each a contiguous run of X), then read a column at a time; the line end joined to
    # the last column alone, not copied with the whole line.
    values = dataset.X[np.ix_(rows, columns)]
    # A categorical feature's text, as the csv module writes it: the entity reads it through its [schema].
    texts = [
        pc.take(pa.array([_csv_field(c) for c in dataset.categories[c]], pa.string()), values[:, k].astype(np.int64))
        if c in dataset.categories
        else _float_texts(values[:, k])
        for k, c in enumerate(columns.tolist())
    ]
    texts[-1] = pc.binary_join_element_wise(texts[-1], "", "\n")
    text = pc.binary_join_element_wise(ids, label_texts, split, *texts, ",")
    offsets = np.frombuffer(text.buffers()[1], dtype=np.int32)[text.offset : text.offset + len(text) + 1]
    return memoryview(text.buffers()[2])[offsets[0] : offsets[-1]]


def _float_texts(values: np.ndarray) -> Any:
    """float64 values (k,) as pyarrow strings (k,), each the shortest text that reads back as the same value."""
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.cast(pa.array(np.ascontiguousarray(values)), pa.string())


def _csv_field(value: str) -> str:
    """One field as the csv module's writer writes it in a row (quoted where it must be)."""
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerow([value, ""])
    return buffer.getvalue()[: -len(",\n")]


def _address(options: SplitOptions, i: int, j: int) -> str:
    port = options.base_port + i * options.cols + j
    host = options.host
    # An IPv6 literal needs brackets to keep its colons apart from the port.
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"{host}:{port}"


def secret_file_name(column_block: int) -> str:
    """The file, beside the federation file, that holds column block ``column_block``'s secret."""
    return f"column-block-{column_block}.secret"


def pair_name(first: str, second: str) -> str:
    """The name of two entities of one row block as a pair (their onboarding group), in either order."""
    low, high = sorted((first, second))
    return f"pair-{low}-{high}"


def pair_secret_file_name(first: str, second: str) -> str:
    """The file that holds the secret two entities of one row block share (secure aggregation's masks)."""
    return f"{pair_name(first, second)}.secret"


def _entity_toml(
    name: str,
    address: str,
    column_block: int,
    members: list[str],
    peers: list[str],
    features: list[Feature],
    label_names: tuple[str, ...] | None = None,
) -> str:
    # The schema the cell was written with (split imputed any gap before writing): numbers with their proposed
    # bounds, categories with the whole file's.
    schema = schema_tables(Schema(tuple(features)))
    return toml_document(
        f"ppsvm entity {name}: private to this data owner; never give this file to the coordinator.",
        [
            (
                "[entity]",
                {
                    "id": name,
                    "listen": address,
                    "data": f"{name}.csv",
                    "column_block": column_block,
                    "secret_file": secret_file_name(column_block),
                    "id_key_file": ID_KEY_FILE,
                    "column_block_members": members,
                    **({"pair_secrets": {peer: pair_secret_file_name(name, peer) for peer in peers}} if peers else {}),
                    **({"label_names": list(label_names)} if label_names else {}),
                },
            ),
            ("[tls]", {**_tls_files(name), "coordinator": DEFAULT_COORDINATOR_NAME}),
            *schema,
        ],
    )


def _tls_files(name: str) -> dict[str, str]:
    return {"ca": CA_FILE, "cert": certificate_file(name), "key": key_file(name)}


def _federation_toml(options: SplitOptions) -> str:
    entities = [
        FederationEntity(f"r{i}c{j}", _address(options, i, j), i, j)
        for i in range(options.rows)
        for j in range(options.cols)
    ]
    return federation_toml(
        {"task": options.task, "kernel": options.kernel}, entities, _tls_files(DEFAULT_COORDINATOR_NAME)
    )


def _sha256(source: str) -> str | None:
    """Digest of the source file, or None for a dataset not read from a file."""
    path = Path(source)
    if not path.is_file():
        return None
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _write_all(out_dir: Path, files: dict[str, tuple[str | bytes, int]], overwrite: bool) -> None:
    """Write every file or none (:func:`ppsvm.files.write_all`), then drop an earlier split's leftovers."""
    write_all(out_dir, files)
    if overwrite:
        for stale in out_dir.iterdir():
            if _SPLIT_OUTPUT.fullmatch(stale.name) and stale.name not in files:
                stale.unlink()
                logger.info("removed %s, left by an earlier split", stale)
