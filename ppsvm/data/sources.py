"""Where an entity's records come from: a CSV file, a Parquet file or a SQL table or query.

A source is read column by column first (:mod:`ppsvm.data.columnar`: pyarrow's CSV and Parquet readers,
PostgreSQL through ADBC, other databases through SQLAlchemy), every check made on whole columns. Where that
reader cannot vouch for a source (a value a check refuses, a line it would not read as the csv module does),
the source is read again the exact way below: in batches of rows (a CSV's lines, a Parquet file's record
batches, a database cursor's ``fetchmany``), each batch encoded at once by the entity's
:class:`~ppsvm.data.schema.Schema` into float64 rows, whose errors name the source and the line (CSV), row
(Parquet, SQL) and column at fault. Either way the cell is the same. A SQL URL's password never appears in
a message or a log line. A file source may keep its encoded cell beside it (:mod:`ppsvm.data.cell_cache`),
so that an entity's next start does not read it again unless the file, the schema or the options changed.

The plain cell CSV that ``ppsvm split`` writes (header ``id,[label],[split],features...``) is the
CSV source with those column names and every other column a number.
"""

from __future__ import annotations

import csv
import logging
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, TextIO

import numpy as np

from ppsvm.constants import MAX_CSV_LINE_CHARS
from ppsvm.data.cell import Cell, repeated_id
from ppsvm.data.cell_cache import CellCache
from ppsvm.data.dataset import DEFAULT_MISSING_VALUES
from ppsvm.data.delimited import bounded_lines, csv_records, not_utf8
from ppsvm.data.schema import Schema, numeric_schema
from ppsvm.errors import ConfigError, DataError
from ppsvm.progress import EtaLog

logger = logging.getLogger(__name__)

SourceKind = Literal["csv", "parquet", "sql"]
SOURCE_KINDS: tuple[SourceKind, ...] = ("csv", "parquet", "sql")
# Rows per batch: tens of MB of raw values (Python strings) at a few dozen columns, whatever the source's size.
BATCH_ROWS = 16_384


@dataclass(frozen=True)
class DataSource:
    """One source of records and how to read it (an entity config's ``[data]`` table).

    Attributes
    ----------
    kind : {"csv", "parquet", "sql"}
    path : Path or None
        The file (csv, parquet).
    url : str or None
        SQLAlchemy database URL (sql), e.g. ``postgresql+psycopg://user@host/db`` or ``sqlite:///x.db``.
    url_env : str or None
        The environment variable holding the URL instead (keeps a password out of the config).
    table, query : str or None
        Exactly one, for sql: a table name, or a SELECT whose columns are read by name.
    id_column : str
        The record id column.
    label_column : str or None
        Labels (+1/-1) or regression targets; None when the entity holds none.
    split_column : str or None
        "train" or "test" per record; None: every record is for training.
    labels : tuple of str or None
        Text labels: ``{ positive = ..., negative = ... }`` gives (positive, negative), mapped to +1 and -1; a list of
        three or more gives the classes, each mapped to its place in the list (0 .. k-1). Any other value is refused.
    delimiter : str
        CSV field separator.
    missing_values : frozenset of str
        Text that means a missing value (CSV; null is missing in every source).
    cell_format : bool
        The plain cell CSV of ``ppsvm split``: label and split are read where the header has them,
        and without a schema every other column is a number.
    cache : bool
        Keep the encoded cell beside a file source and read it from there while the file, the schema and
        these options are unchanged (:mod:`ppsvm.data.cell_cache`); never for a SQL source.
    """

    kind: SourceKind
    path: Path | None = None
    url: str | None = None
    url_env: str | None = None
    table: str | None = None
    query: str | None = None
    id_column: str = "id"
    label_column: str | None = None
    split_column: str | None = None
    labels: tuple[str, ...] | None = None
    delimiter: str = ","
    missing_values: frozenset[str] = field(default_factory=lambda: frozenset(DEFAULT_MISSING_VALUES))
    cell_format: bool = False
    cache: bool = False

    def describe(self) -> str:
        """The source for messages: the file, or the table/query and the URL without its password."""
        if self.kind != "sql":
            return str(self.path)
        what = f"table {self.table!r}" if self.table is not None else "query"
        return f"{what} at {_safe_url(self.database_url())}"

    def database_url(self) -> str:
        """The SQL URL, from the config or its environment variable."""
        if self.url is not None:
            return self.url
        assert self.url_env is not None
        value = os.environ.get(self.url_env, "")
        if not value:
            raise ConfigError(f"environment variable {self.url_env} (the [data] url_env) is not set")
        return value


def _safe_url(url: str) -> str:
    sqlalchemy = optional_module("sqlalchemy", "sql")
    try:
        return sqlalchemy.engine.make_url(url).render_as_string(hide_password=True)
    except sqlalchemy.exc.ArgumentError:
        return "<an unparseable database URL>"


def optional_module(module: str, extra: str) -> Any:
    """An optional dependency, or a ConfigError saying which extra installs it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise ConfigError(f"a {extra} data source needs {module.split('.')[0]}: pip install 'ppsvm[{extra}]'") from None


def cell_file(path: Path) -> DataSource:
    """The plain cell CSV written by ``ppsvm split``: columns id, [label], [split], features."""
    # No text means missing in a cell: ppsvm split imputed before writing, so '' or 'nan' is an error.
    return DataSource(
        "csv",
        path=path,
        id_column="id",
        label_column="label",
        split_column="split",
        missing_values=frozenset(),
        cell_format=True,
    )


def load_cell(path: Path, *, max_line_chars: int = MAX_CSV_LINE_CHARS, cache: bool = False) -> Cell:
    """Read and validate a plain cell CSV: header ``id,[label],[split],features...``, every feature a number.

    Parameters
    ----------
    path : Path
    max_line_chars : int
        Longest line read (see :func:`ppsvm.data.delimited.bounded_lines`).
    cache : bool
        Keep the encoded cell beside the file, and read it from there while the file is unchanged.

    Raises
    ------
    DataError
        Naming the file, line and column at fault.
    """
    return read_source(replace(cell_file(path), cache=cache), max_line_chars=max_line_chars)


def parse_data_table(table: Mapping[str, Any], where: str, base: Path) -> DataSource:
    """An entity config's ``[data]`` table; relative paths are relative to ``base``.

    Raises
    ------
    ConfigError
        Naming the key at fault.
    """
    allowed = {"source", "path", "url", "url_env", "table", "query", "id", "label", "split", "labels"}
    allowed |= {"delimiter", "missing_values"}
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}")

    def text(key: str, default: str | None = None) -> str | None:
        value = table.get(key, default)
        if value is not None and (not isinstance(value, str) or not value):
            raise ConfigError(f"{where}: {key!r} must be a non-empty string, got {value!r}")
        return value

    kind = text("source")
    if kind not in SOURCE_KINDS:
        raise ConfigError(f"{where}: 'source' must be one of {', '.join(SOURCE_KINDS)}, got {kind!r}")
    given = {key for key in ("path", "url", "url_env", "table", "query") if key in table}
    needed = [{"path"}] if kind != "sql" else [{url, what} for url in ("url", "url_env") for what in ("table", "query")]
    if given not in needed:
        spelled = " or ".join(" + ".join(sorted(keys)) for keys in needed)
        raise ConfigError(f"{where}: a {kind} source takes {spelled}; got {', '.join(sorted(given)) or 'none'}")
    labels = table.get("labels")
    if labels is not None:
        two = isinstance(labels, dict) and set(labels) == {"positive", "negative"}
        named = (labels["positive"], labels["negative"]) if two else tuple(labels) if isinstance(labels, list) else ()
        if (
            not (two or len(named) >= 3)
            or not all(isinstance(v, str) and v for v in named)
            or len(set(named)) != len(named)
        ):
            raise ConfigError(
                f'{where}: \'labels\' must be {{ positive = "...", negative = "..." }} (two texts) or a list of three '
                "or more different texts, one per class"
            )
        labels = named
    delimiter = text("delimiter", ",")
    assert delimiter is not None
    if len(delimiter) != 1 or delimiter in ('"', "\n", "\r"):
        raise ConfigError(f"{where}: 'delimiter' must be one character other than a quote or newline")
    missing = table.get("missing_values", list(DEFAULT_MISSING_VALUES))
    if not isinstance(missing, list) or not all(isinstance(v, str) for v in missing):
        raise ConfigError(f"{where}: 'missing_values' must be a list of texts")
    path = text("path")
    return DataSource(
        kind=kind,
        path=None if path is None else base / path,
        url=text("url"),
        url_env=text("url_env"),
        table=text("table"),
        query=text("query"),
        id_column=text("id", "id") or "id",
        label_column=text("label"),
        split_column=text("split"),
        labels=labels,
        delimiter=delimiter,
        missing_values=frozenset(v.strip() for v in missing),
    )


# --- reading -------------------------------------------------------------------------------------


@dataclass
class RowBatch:
    """Raw columns of consecutive source rows and where each row sits (a CSV line or a 1-based row)."""

    columns: dict[str, Sequence[Any]]
    positions: np.ndarray


def read_source(
    source: DataSource,
    schema: Schema | None = None,
    *,
    max_line_chars: int = MAX_CSV_LINE_CHARS,
    allow_empty: bool = False,
) -> Cell:
    """Read, encode and validate every record of ``source``.

    Parameters
    ----------
    source : DataSource
    schema : Schema or None
        None: every column other than id, label and split is a number (the plain cell CSV).
    max_line_chars : int
        Longest CSV line read.
    allow_empty : bool
        A source without records gives an empty cell (a scoring source before its first record).

    Returns
    -------
    Cell
        Training and held-out records, features encoded by the schema.

    Raises
    ------
    DataError
        Naming the source, line or row, and column at fault.
    """
    where = source.describe()
    if schema is None and not source.cell_format:
        raise DataError(f"{where}: a {source.kind} source needs a declared schema ([schema] in the config)")
    cache = None
    if source.cache and source.kind != "sql":
        assert source.path is not None
        cache = CellCache(source.path, _read_options(source, schema, max_line_chars))
    digest = None if cache is None else cache.source_digest()
    if cache is not None and digest is not None:
        cached = cache.load(digest, where)
        if cached is not None:
            return cached
    # Imported here: pyarrow takes 0.3 s to import, which commands that read no source need not pay.
    from ppsvm.data import columnar

    try:
        cell = columnar.read_source(source, schema, max_line_chars)
    except columnar.NotColumnar as declined:
        if declined.reason:
            logger.info("%s: %s; reading it line by line, which names what is wrong", where, declined.reason)
        cell = _read_by_batches(source, schema, max_line_chars, allow_empty)
    if cache is not None and digest is not None:
        cache.store(cell, digest)
    return cell


def _read_options(source: DataSource, schema: Schema | None, max_line_chars: int) -> dict[str, Any]:
    """Everything besides a file's bytes that decides the cell read from it: the key of its cache."""
    return {
        "kind": source.kind,
        "columns": [source.id_column, source.label_column, source.split_column],
        "labels": source.labels,
        "delimiter": source.delimiter,
        "missing_values": sorted(source.missing_values),
        "cell_format": source.cell_format,
        "schema": None if schema is None else schema.fingerprint(),
        "max_line_chars": max_line_chars,
    }


def _read_by_batches(source: DataSource, schema: Schema | None, max_line_chars: int, allow_empty: bool) -> Cell:
    """:func:`read_source` batch by batch, each value checked where it stands: the first error names its place."""
    unit = "line" if source.kind == "csv" else "row"
    where = source.describe()
    if source.kind == "csv":
        batches, schema, source = _csv_batches(source, schema, max_line_chars)
    else:
        assert schema is not None
        batches = (_parquet_batches if source.kind == "parquet" else sql_batches)(source, schema)
    ids: list[np.ndarray] = []
    labels: list[np.ndarray] = []
    is_test: list[np.ndarray] = []
    # Each batch's encoded rows, already split into training and held-out: stacked at the end into
    # arrays allocated once, each part released as it is copied, so the peak is the matrix and a batch.
    parts: dict[bool, list[np.ndarray]] = {False: [], True: []}
    positions: list[np.ndarray] = []
    for batch in batches:

        def locate(row: int, column: str, batch: RowBatch = batch) -> str:
            return f"{where}, {unit} {batch.positions[row]}, column {column!r}"

        ids.append(_ids(batch.columns[source.id_column], source.id_column, locate))
        if source.label_column is not None:
            labels.append(label_values(batch.columns[source.label_column], source, locate))
        held_out = (
            split_roles(batch.columns[source.split_column], source.split_column, locate)
            if source.split_column is not None
            else np.zeros(len(batch.positions), dtype=bool)
        )
        is_test.append(held_out)
        encoded = schema.encode(batch.columns, source.missing_values, locate)
        parts[False].append(encoded[~held_out] if held_out.any() else encoded)
        parts[True].append(encoded[held_out])
        positions.append(batch.positions)
    if not sum(len(part) for part in ids):
        if not allow_empty:
            raise DataError(f"{where}: no records (the source is empty)")
        ids, is_test, positions, labels = [np.empty(0, dtype=str)], [np.empty(0, dtype=bool)], [np.empty(0)], []
    id_array = np.concatenate(ids)
    _refuse_repeated_ids(id_array, np.concatenate(positions), where, unit)
    test = np.concatenate(is_test)
    if test.size and test.all():
        raise DataError(f"{where}: every record is marked 'test'; there are no training records")
    y = None if source.label_column is None else np.concatenate([np.empty(0), *labels])
    width = len(schema.encoded_names)
    return Cell(
        train_ids=id_array[~test],
        X_train=_stacked(parts[False], width),
        y_train=None if y is None else y[~test],
        test_ids=id_array[test],
        X_test=_stacked(parts[True], width),
        y_test=None if y is None else y[test],
        feature_names=schema.encoded_names,
        source=where,
    )


def _stacked(parts: list[np.ndarray], width: int) -> np.ndarray:
    """``np.vstack(parts)`` into one array allocated once, emptying ``parts`` as it goes (each freed once copied)."""
    out = np.empty((sum(len(part) for part in parts), width))
    at = 0
    parts.reverse()
    while parts:
        part = parts.pop()
        out[at : at + len(part)] = part
        at += len(part)
    return out


def _ids(values: Sequence[Any], column: str, locate: Any) -> np.ndarray:
    out = []
    for row, value in enumerate(values):
        text = "" if value is None else (value.strip() if isinstance(value, str) else _id_text(value))
        if not text:
            raise DataError(f"{locate(row, column)}: empty record id")
        out.append(text)
    return np.asarray(out, dtype=str)


def _id_text(value: Any) -> str:
    """A numeric id as its digits (a database's integer key, or a float holding one)."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def label_table(labels: tuple[str, ...]) -> dict[str, str] | list[str]:
    """``[data] labels`` as a config writes it: ``{ positive, negative }`` for two classes, else the list."""
    return dict(zip(("positive", "negative"), labels, strict=True)) if len(labels) == 2 else list(labels)


def label_values(values: Sequence[Any], source: DataSource, locate: Any) -> np.ndarray:
    """Labels (``source.labels`` mapped to +1/-1, or to class codes) or real targets, shape (k,), of k raw values of
    the label column.

    Raises
    ------
    DataError
        A missing label, a text label outside ``source.labels``, a value that is not a finite number.
    """
    column = source.label_column
    assert column is not None
    out = np.empty(len(values))
    # Two classes: the first (positive) is +1; several: each its place in the list.
    labels = source.labels or ()
    target = (
        {labels[0]: 1.0, labels[1]: -1.0} if len(labels) == 2 else {name: float(k) for k, name in enumerate(labels)}
    )
    for row, value in enumerate(values):
        if value is None or (isinstance(value, str) and value.strip() in source.missing_values):
            raise DataError(f"{locate(row, column)}: missing label")
        if source.labels is not None:
            text = value.strip() if isinstance(value, str) else _id_text(value)
            if text not in target:
                raise DataError(
                    f"{locate(row, column)}: label {text[:40]!r} is neither "
                    f"{source.labels[0]!r} nor {source.labels[1]!r}"
                    if len(target) == 2
                    else f"{locate(row, column)}: label {text[:40]!r} is none of the classes "
                    f"{', '.join(map(repr, source.labels))}"
                )
            out[row] = target[text]
            continue
        try:
            out[row] = float(value.strip() if isinstance(value, str) else value)
        except (TypeError, ValueError):
            raise DataError(f"{locate(row, column)}: {str(value)[:40]!r} is not a number") from None
        if not np.isfinite(out[row]):
            raise DataError(f"{locate(row, column)}: {str(value)[:40]!r} is not a finite number")
    return out


def split_roles(values: Sequence[Any], column: str, locate: Any) -> np.ndarray:
    """Whether each of k raw values of the split column marks a held-out record ("test"), shape (k,).

    Raises
    ------
    DataError
        A value other than "train" or "test".
    """
    out = np.empty(len(values), dtype=bool)
    for row, value in enumerate(values):
        role = value.strip() if isinstance(value, str) else value
        if role not in ("train", "test"):
            raise DataError(f"{locate(row, column)}: expected 'train' or 'test', got {role!r}")
        out[row] = role == "test"
    return out


def _refuse_repeated_ids(ids: np.ndarray, positions: np.ndarray, where: str, unit: str) -> None:
    found = repeated_id([ids])
    if found is not None:
        record, (_, first), (_, again) = found
        raise DataError(
            f"{where}, {unit} {positions[again]}: duplicate record id {record!r} (first on {unit} {positions[first]})"
        )


def needed_columns(source: DataSource, schema: Schema) -> list[str]:
    """The columns read: id, label and split where the source has them, then the schema's features."""
    extra = [c for c in (source.label_column, source.split_column) if c is not None]
    return [source.id_column, *extra, *schema.source_columns]


def _missing_columns(source: DataSource, schema: Schema, present: Sequence[str]) -> None:
    absent = [name for name in needed_columns(source, schema) if name not in present]
    if absent:
        raise DataError(
            f"{source.describe()}: no column(s) {', '.join(map(repr, absent))} "
            f"(it has {', '.join(map(repr, list(present)[:20]))}{' ...' if len(present) > 20 else ''})"
        )


# --- CSV ---------------------------------------------------------------------------------------


def csv_header(source: DataSource, schema: Schema | None, max_line_chars: int) -> tuple[list[str], DataSource, Schema]:
    """The header's column names, the source with the cell CSV's absent optional columns dropped, the schema.

    Raises
    ------
    DataError
        The file cannot be read, its header is not UTF-8, empty, names a column twice or lacks one needed.
    """
    handle, _, _, header, source, schema = _open_csv(source, schema, max_line_chars)
    handle.close()
    return header, source, schema


def _open_csv(
    source: DataSource, schema: Schema | None, max_line_chars: int
) -> tuple[TextIO, Any, Iterator[list[str]], list[str], DataSource, Schema]:
    """The open file, its csv reader and records past the header, and what :func:`csv_header` returns."""
    assert source.path is not None
    path = source.path
    try:
        handle = path.open(newline="", encoding="utf-8")
    except OSError as exc:
        raise DataError(f"cannot read data file {path}: {exc.strerror}") from exc
    reader = csv.reader(bounded_lines(handle, path, max_line_chars), delimiter=source.delimiter)
    records = csv_records(reader, path)
    try:
        header, source, schema = _csv_header(next(records, None), source, schema)
    except UnicodeDecodeError:
        handle.close()
        raise DataError(not_utf8(path)) from None
    except BaseException:
        handle.close()
        raise
    return handle, reader, records, header, source, schema


def _csv_batches(
    source: DataSource, schema: Schema | None, max_line_chars: int
) -> tuple[Iterator[RowBatch], Schema, DataSource]:
    handle, reader, records, header, source, schema = _open_csv(source, schema, max_line_chars)
    path = source.path
    assert path is not None
    wanted = {name: header.index(name) for name in needed_columns(source, schema)}
    total = os.path.getsize(path)
    progress = EtaLog(logger, f"reading {path} (bytes)")

    def batches() -> Iterator[RowBatch]:
        with handle:
            try:
                while True:
                    chunk: list[list[str]] = []
                    numbers: list[int] = []
                    for row in records:
                        if not row or all(not value.strip() for value in row):
                            continue
                        if len(row) != len(header):
                            raise DataError(
                                f"{path}, line {reader.line_num}: {len(row)} fields, the header has {len(header)}"
                            )
                        chunk.append(row)
                        numbers.append(reader.line_num)
                        if len(chunk) == BATCH_ROWS:
                            break
                    if not chunk:
                        return
                    progress(min(handle.tell(), total), total)
                    yield RowBatch({name: [row[k] for row in chunk] for name, k in wanted.items()}, np.asarray(numbers))
            except UnicodeDecodeError:
                raise DataError(not_utf8(path)) from None

    return batches(), schema, source


def _csv_header(
    first: list[str] | None, source: DataSource, schema: Schema | None
) -> tuple[list[str], DataSource, Schema]:
    """The header's names, the source with the cell CSV's absent optional columns dropped, the schema."""
    path = source.path
    if not first:
        raise DataError(f"{path}: empty file (expected a header line naming the columns)")
    header = [name.strip() for name in first]
    repeated = sorted({name for name in header if header.count(name) > 1})
    if repeated:
        raise DataError(f"{path}, line 1: column(s) {', '.join(map(repr, repeated))} named twice")
    if source.cell_format:
        source = replace(
            source,
            label_column=source.label_column if source.label_column in header else None,
            split_column=source.split_column if source.split_column in header else None,
        )
    if schema is None:
        # The plain cell CSV without a schema: id first, every column but label and split a number.
        if header[0] != source.id_column:
            raise DataError(f"{path}, line 1: the first column must be {source.id_column!r}, got {header[0]!r}")
        features = [name for name in header if name not in needed_columns(source, Schema(()))]
        if not features:
            raise DataError(f"{path}, line 1: no feature columns (only {', '.join(header)})")
        schema = numeric_schema(features)
    _missing_columns(source, schema, header)
    return header, source, schema


# --- Parquet -------------------------------------------------------------------------------------


def open_parquet(source: DataSource, schema: Schema, **options: Any) -> Any:
    """The source's ``pyarrow.parquet.ParquetFile`` (``options`` passed on), holding every column needed.

    Raises
    ------
    DataError
        The file is absent, is not Parquet or lacks a column.
    """
    pq = optional_module("pyarrow.parquet", "parquet")
    assert source.path is not None
    try:
        parquet = pq.ParquetFile(source.path, **options)
    except FileNotFoundError:
        raise DataError(f"cannot read data file {source.path}: no such file") from None
    except Exception as exc:  # noqa: BLE001 - pyarrow raises its own kinds for a file that is not Parquet
        raise DataError(f"{source.path}: not a readable Parquet file ({exc})") from None
    _missing_columns(source, schema, parquet.schema_arrow.names)
    return parquet


def _parquet_batches(source: DataSource, schema: Schema) -> Iterator[RowBatch]:
    # No pre-buffering: pyarrow would read ahead the column chunks of whole row groups (measured 37 MiB more
    # peak at 300,000 rows) to save round trips, which a local file does not need.
    parquet = open_parquet(source, schema, pre_buffer=False)
    total = parquet.metadata.num_rows
    progress = EtaLog(logger, f"reading {source.path} (rows)")

    def batches() -> Iterator[RowBatch]:
        done = 0
        for record_batch in parquet.iter_batches(batch_size=BATCH_ROWS, columns=needed_columns(source, schema)):
            # Numbers arrive as float64 arrays (null as NaN, which the schema reads as missing); text as objects.
            columns: dict[str, Sequence[Any]] = {
                name: record_batch.column(name).to_numpy(zero_copy_only=False) for name in record_batch.schema.names
            }
            yield RowBatch(columns, np.arange(done + 1, done + record_batch.num_rows + 1))
            done += record_batch.num_rows
            progress(done, total)

    return batches()


# --- SQL -----------------------------------------------------------------------------------------


def sql_select(source: DataSource, schema: Schema) -> Any:
    """The SQLAlchemy SELECT of the columns needed, from the source's table or its query as a subquery."""
    sqlalchemy = optional_module("sqlalchemy", "sql")
    needed = [sqlalchemy.column(name) for name in needed_columns(source, schema)]
    rows_from: Any = (
        sqlalchemy.table(source.table, *needed)
        if source.table is not None
        else sqlalchemy.text(source.query or "").columns(*needed).subquery("source")
    )
    return sqlalchemy.select(*(rows_from.c[column.name] for column in needed))


def sql_batches(source: DataSource, schema: Schema) -> Iterator[RowBatch]:
    """The source's rows through SQLAlchemy, a streamed cursor's partitions of BATCH_ROWS, as columns.

    Raises
    ------
    DataError
        The database cannot be opened or the query fails, with the database's own first line.
    """
    sqlalchemy = optional_module("sqlalchemy", "sql")
    try:
        engine = sqlalchemy.create_engine(source.database_url())
    except (sqlalchemy.exc.ArgumentError, ImportError) as exc:
        raise DataError(f"{source.describe()}: cannot open the database ({exc})") from None
    selectable = sql_select(source, schema)

    def batches() -> Iterator[RowBatch]:
        try:
            with engine.connect() as connection:
                total = connection.execute(
                    sqlalchemy.select(sqlalchemy.func.count()).select_from(selectable.subquery())
                ).scalar_one()
                progress = EtaLog(logger, f"reading {source.describe()} (rows)")
                result = connection.execution_options(stream_results=True, yield_per=BATCH_ROWS).execute(selectable)
                done = 0
                for rows in result.partitions():
                    # Rows to columns in C (zip), not a Python loop per value.
                    columns: dict[str, Sequence[Any]] = dict(
                        zip(map(str, result.keys()), zip(*rows, strict=True), strict=True)
                    )
                    yield RowBatch(columns, np.arange(done + 1, done + len(rows) + 1))
                    done += len(rows)
                    progress(done, total)
        except sqlalchemy.exc.SQLAlchemyError as exc:
            raise DataError(f"{source.describe()}: {_first_line(exc)}") from None
        finally:
            engine.dispose()

    return batches()


def _first_line(error: Exception) -> str:
    """A database error's own message, without SQLAlchemy's statement dump and help link."""
    original = getattr(error, "orig", None) or error
    return str(original).strip().splitlines()[0] if str(original).strip() else type(original).__name__
