"""An entity config's ``[schema]`` (and ``[data]``) proposed from a data file by the person who holds it.

``ppsvm split`` writes each cell's ``[schema]`` from the whole file before it is split, and ``ppsvm schema
infer`` prints both tables for a data owner's own file. Both take the :class:`~ppsvm.data.dataset.Dataset` that
:func:`~ppsvm.data.dataset.load_dataset` read (which finds the categorical columns, declared or inferred) to
:func:`proposed_schema`: number features with bounds rounded outwards, category features with the categories
found in the file, sorted. Every member of a column block must declare the same features, so what is proposed
here is for the owners to agree on (the features check compares the fingerprints).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ppsvm.config import toml_document
from ppsvm.constants import MAX_CSV_LINE_CHARS
from ppsvm.data.dataset import DEFAULT_MISSING_VALUES, ColumnRef, Dataset, DatasetOptions
from ppsvm.data.delimited import bounded_lines, open_text, stripped_records
from ppsvm.data.schema import Feature, Schema, outward_bounds
from ppsvm.data.sources import label_table
from ppsvm.errors import ConfigError, DataError

__all__ = ["entity_tables", "proposed_schema", "schema_tables"]


def proposed_schema(dataset: Dataset, *, impute: bool = False) -> Schema:
    """The schema of ``dataset``'s features, in order.

    Parameters
    ----------
    dataset : Dataset
        X (m, n), NaN where a value is missing; ``categories`` names its categorical features.
    impute : bool
        Declare what a missing value becomes: a number feature's mean, a category feature's most frequent
        category (the first in order on a tie). Otherwise the schema refuses missing values.

    Returns
    -------
    Schema
        A number feature per numeric column, with the bounds :func:`~ppsvm.data.schema.outward_bounds` of its
        values; a category feature per categorical column, with its categories.

    Raises
    ------
    DataError
        A feature without a single value.
    """
    features = []
    for k, name in enumerate(dataset.feature_names):
        column = dataset.X[:, k]
        observed = column[~np.isnan(column)]
        if not observed.size:
            raise DataError(f"{dataset.source}: feature {name!r} has no value to propose its schema from")
        if k in dataset.categories:
            categories = dataset.categories[k]
            counts = np.bincount(observed.astype(np.int64), minlength=len(categories))
            fill = categories[int(np.argmax(counts))] if impute else None
            features.append(Feature(name, "category", categories, fill))
        else:
            low, high = outward_bounds(float(observed.min()), float(observed.max()))
            mean = float(observed.mean()) if impute else None
            features.append(Feature(name, "number", impute=mean, low=low, high=high))
    return Schema(tuple(features))


def schema_tables(schema: Schema) -> list[tuple[str, dict[str, Any]]]:
    """``[[schema.features]]`` entries of an entity config, for :func:`ppsvm.config.toml_document`."""
    return [("[[schema.features]]", feature.as_dict()) for feature in schema.features]


def entity_tables(data: str, dataset: Dataset, options: DatasetOptions) -> str:
    """The ``[data]`` and ``[schema]`` tables an entity config needs to read ``dataset``'s file as its own source.

    Parameters
    ----------
    data : str
        The file's path as the config should name it (relative paths are relative to the config's directory).
    dataset : Dataset
        Read from that file with ``options`` (a header is needed: a ``[data]`` source reads columns by name).
    options : DatasetOptions
        How it was read: its label, id, delimiter and missing-value columns become the ``[data]`` keys, and
        ``missing="impute"`` declares each feature's imputed value.

    Returns
    -------
    str
        TOML text: ``[data]`` then one ``[[schema.features]]`` per feature.

    Raises
    ------
    ConfigError
        No header, no id column, or a classification with more than two label values.
    """
    if not options.header:
        raise ConfigError(f"{dataset.source}: a [data] source reads its columns by name: the file needs a header line")
    header = _header(Path(dataset.source), options)
    table: dict[str, Any] = {"source": "csv", "path": data}
    if options.id_column is None:
        raise ConfigError(
            f"{dataset.source}: name the record id column with --id-column: the entities of a row block match their "
            "records by it"
        )
    table["id"] = _name(header, options.id_column)
    table["label"] = _name(header, options.label)
    if options.task == "classify":
        labels = dataset.classes or dataset.label_values
        if labels is None:
            raise ConfigError(
                f"{dataset.source}: an entity's labels are one value per class; --positive or --negative maps "
                "several to one class, which a [data] source does not"
            )
        table["labels"] = label_table(labels)
    if options.delimiter != ",":
        table["delimiter"] = options.delimiter
    if set(options.missing_values) != set(DEFAULT_MISSING_VALUES):
        table["missing_values"] = list(options.missing_values)
    schema = proposed_schema(dataset, impute=options.missing == "impute")
    return toml_document(
        f"[data] and [schema] proposed by `ppsvm schema infer` from {Path(dataset.source).name}: the members of your "
        "column block must declare the same features, categories and bounds (agree them before training)",
        [("[data]", table), *schema_tables(schema)],
    )


def _header(path: Path, options: DatasetOptions) -> tuple[str, ...]:
    """The header line's column names, read as :func:`~ppsvm.data.dataset.load_dataset` read them."""
    with open_text(path) as handle:
        records = stripped_records(bounded_lines(handle, path, MAX_CSV_LINE_CHARS), path, options.delimiter)
        return tuple(next(records)[1])


def _name(header: tuple[str, ...], ref: ColumnRef) -> str:
    """A column reference (checked by the load) as its header name."""
    return header[ref % len(header)] if isinstance(ref, int) else ref
