"""Reading a source's records column by column: Arrow tables, every check made on whole columns.

pyarrow parses a CSV file (its C++ reader, multi-threaded where a core is idle) and a Parquet file, ADBC's
PostgreSQL driver fetches a query's result as Arrow, and other databases' rows (SQLAlchemy) become Arrow
arrays a partition at a time. :func:`encode` then checks and encodes the columns with numpy and
pyarrow.compute: numbers as float64 arrays, text (ids aside) through its distinct values, each judged once
by the exact reader's own per-value rules (:func:`ppsvm.data.schema.encode_feature`,
:func:`ppsvm.data.sources.label_values`, :func:`ppsvm.data.sources.split_roles`), so that a column of a
million rows and three categories costs three Python calls.

This reader says nothing about where a problem is. Whatever it cannot vouch for (a value a check refuses,
a type it does not convert exactly as the exact reader does, a CSV line the csv module might read
otherwise) raises :class:`NotColumnar`, and :func:`ppsvm.data.sources.read_source` reads the source again
the exact way, which names the line, row and column. A cell it does return is the one the exact reader
would have returned: the same ids, labels and float64 values, bit for bit.

Why pyarrow's CSV reader rather than pandas' C engine, measured on this 2-core machine at a million rows:
both round decimals exactly as Python's float() does (none of 200,000 hard decimal strings otherwise), and
neither is much faster. pandas parsed the benchmark's 25-column extract in 1.26 s of CPU against pyarrow's
1.7 s (one thread, the columns typed as below), but on an idle machine pyarrow's two threads finish first
(0.69 s against 0.74), and on a ``ppsvm split`` cell (23 columns of Python's repr of floats) pyarrow took
1.8 s against 2.5. What decides it: pyarrow types each column as told (float64 for numbers, dictionary-
encoded text for categories, text for ids) and converts only the columns named; it hands back the Arrow
columns that Parquet and ADBC give too, so one checker serves every source; it imports in 0.3 s against
pandas' 0.7 (at every entity start); and it was a dependency already, for Parquet, where pandas would be a
large new one.
"""

from __future__ import annotations

import codecs
import importlib
import itertools
import os
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from ppsvm.data.cell import Cell, repeated_id
from ppsvm.data.schema import Feature, Locate, Schema, encode_feature, has_numeric_token
from ppsvm.data.sources import (
    DataSource,
    csv_header,
    label_values,
    needed_columns,
    open_parquet,
    optional_module,
    split_roles,
    sql_batches,
    sql_select,
)
from ppsvm.errors import DataError

# What str.strip() removes in ASCII (space, \t\n\v\f\r and the separators \x1c..\x1f, which pyarrow's
# utf8_trim_whitespace keeps): ids are stripped as the exact reader strips them.
_ASCII_WHITESPACE = np.array([code for code in range(0x80) if chr(code).isspace()], dtype=np.uint8)


class NotColumnar(Exception):
    """This reader cannot vouch for the source; the exact reader reads it, naming what is wrong.

    Parameters
    ----------
    reason : str
        Why, for a log line ("" when there is nothing to say, e.g. an empty source).
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def read_source(source: DataSource, schema: Schema | None, max_line_chars: int) -> Cell:
    """The cell :func:`ppsvm.data.sources.read_source` would return, read column by column.

    Parameters
    ----------
    source : DataSource
    schema : Schema or None
        None for the plain cell CSV (every column but id, label and split a number).
    max_line_chars : int
        Longest CSV line the exact reader reads: a longer one (or one that may be) declines.

    Returns
    -------
    Cell
        Training and held-out records: X_train (m_train, n_j), X_test (m_test, n_j).

    Raises
    ------
    NotColumnar
        Anything the exact reader must look at (it then raises the error, or reads what this reader
        would not read exactly as it does).
    DataError
        What both readers refuse alike before a record is read (an unreadable file, a bad CSV header).
    """
    if source.kind == "csv":
        header, source, schema = csv_header(source, schema, max_line_chars)
        if any("\n" in name or "\r" in name for name in header):
            raise NotColumnar("a column name holds a line end")  # pyarrow would skip the header otherwise
        table = _csv_table(source, schema, header, max_line_chars)
    elif source.kind == "parquet":
        assert schema is not None
        table = _parquet_table(source, schema)
    else:
        assert schema is not None
        table = _postgresql_table(source, schema)
        table = _rows_table(source, schema) if table is None else table
    # pyarrow's allocator (mimalloc) keeps the memory it parsed and decompressed through for reuse; given back,
    # it makes room for the matrices (peak RSS of a million Parquet rows 557 MiB every time, 553 to 671 without).
    pa.default_memory_pool().release_unused()
    return encode(table, source, schema, text=source.kind == "csv")


# --- the check and the encoding ------------------------------------------------------------------------


def encode(table: pa.Table, source: DataSource, schema: Schema, *, text: bool) -> Cell:
    """Check and encode a source's columns into its cell.

    Parameters
    ----------
    table : pyarrow.Table, m rows
        The columns of :func:`ppsvm.data.sources.needed_columns`.
    source : DataSource
    schema : Schema
    text : bool
        The values were text (CSV): a NaN parsed from it is a value the exact reader refuses, not a missing
        one, and a carriage return in a text value may have been read otherwise by the csv module.

    Returns
    -------
    Cell
        X_train (m_train, n_j) and X_test (m_test, n_j), split by the split column.

    Raises
    ------
    NotColumnar
        A value the exact reader would refuse or might read otherwise.
    """
    rows = table.num_rows
    if not rows:
        raise NotColumnar("")  # the exact reader says "no records", or gives the empty cell asked for
    ids = record_ids(table.column(source.id_column), text)
    held_out = np.zeros(rows, dtype=bool)
    if source.split_column is not None:
        split, (values, codes) = source.split_column, distinct(table.column(source.split_column), text)
        held_out = _judged(split, lambda locate: split_roles(values, split, locate))[codes]
        if held_out.all():
            raise NotColumnar("every record is marked 'test'")
    labels = None if source.label_column is None else _labels(table.column(source.label_column), source, text)
    if repeated_id([ids]) is not None:
        raise NotColumnar("a record id is repeated")
    # The matrices are assembled a block of rows at a time from each feature's block, a clean number column
    # straight from Arrow's buffers.
    blocks: list[_Block] = []
    for feature in schema.features:
        column = table.column(feature.name)
        if feature.type == "number" and _is_postgresql_numeric(column.type):
            # NUMERIC's text parsed to the nearest float64, as float(Decimal) rounds it; its 'NaN' is a value the
            # exact reader refuses (psycopg's Decimal('NaN') is not a missing float), as a NaN parsed from text.
            blocks.append(numbers(feature, _parsed(column), text=True))
        elif feature.type == "number" and _is_numeric(column.type):
            blocks.append(numbers(feature, column, text))
        else:
            blocks.append(_encoded(feature, column, source.missing_values, text))
    X_train, X_test = assembled(blocks, held_out)
    train = ~held_out
    return Cell(
        train_ids=ids[train],
        X_train=X_train,
        y_train=None if labels is None else labels[train],
        test_ids=ids[held_out],
        X_test=X_test,
        y_test=None if labels is None else labels[held_out],
        feature_names=schema.encoded_names,
        source=source.describe(),
    )


class _Chunked:
    """A number column as its Arrow chunks' own float64 buffers, shape (m,) in all: no copy of a clean column.

    Parameters
    ----------
    chunks : list of ndarray
        Views of the chunks' values, in order.
    """

    def __init__(self, chunks: list[np.ndarray]) -> None:
        self._chunks = chunks
        self.ends = np.cumsum([len(chunk) for chunk in chunks]).tolist()
        self._at = 0  # the chunk the last rows asked for lay in: they are asked for in order

    def rows(self, start: int, stop: int) -> np.ndarray:
        """Values ``start:stop`` within one chunk, shape (stop - start,): a view."""
        if start < self.ends[self._at] - len(self._chunks[self._at]):
            self._at = 0
        while start >= self.ends[self._at]:
            self._at += 1
        begin = self.ends[self._at] - len(self._chunks[self._at])
        return self._chunks[self._at][start - begin : stop - begin]


# A feature's encoded values: an (m, k) array; a (d, k) table of its distinct values' encodings and each record's
# row in it, shape (m,) (a category's one-hot rows, never made m rows long); or a clean number column's chunks.
_Block = np.ndarray | tuple[np.ndarray, np.ndarray] | _Chunked
# Rows assembled at a time: a block of them (25 columns: 1.6 MB) stays in the CPU's cache between its writes.
_ASSEMBLY_ROWS = 8192


def assembled(blocks: list[_Block], held_out: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The training and held-out matrices, shapes (m_train, n_j) and (m_test, n_j), from the features' blocks.

    A block of rows at a time: each feature's columns written into a small row-major buffer (a clean number
    column straight from Arrow's buffers: no copy of it, no intermediate matrix), then its training and
    held-out rows copied into place. For a million rows of 25 columns this took 0.15 s of CPU here where
    writing each column into the row-major matrices took 0.35 to 0.44 s (a write per 200 bytes).

    Parameters
    ----------
    blocks : list of block
        Each feature's encoded values for m rows (:func:`numbers`, a text feature's distinct encodings).
    held_out : ndarray of bool, shape (m,)
        The rows that go to the held-out matrix.

    Returns
    -------
    X_train, X_test : ndarray of float64, shapes (m_train, n_j) and (m_test, n_j)
    """
    widths = [1 if isinstance(b, _Chunked) else b[0].shape[1] if isinstance(b, tuple) else b.shape[1] for b in blocks]
    n_test = int(held_out.sum())
    X_train, X_test = np.empty((len(held_out) - n_test, sum(widths))), np.empty((n_test, sum(widths)))
    buffer = np.empty((_ASSEMBLY_ROWS, sum(widths)))
    # Blocks of at most _ASSEMBLY_ROWS rows that never straddle an Arrow chunk (the columns of a table share theirs).
    cuts = [np.arange(0, len(held_out), _ASSEMBLY_ROWS), np.array([len(held_out)])]
    cuts += [np.array(block.ends) for block in blocks if isinstance(block, _Chunked)]
    bounds = np.unique(np.concatenate(cuts)).tolist()
    done_train = done_test = 0
    for start, stop in itertools.pairwise(bounds):
        rows = buffer[: stop - start]
        at = 0
        for block, width in zip(blocks, widths, strict=True):
            if isinstance(block, _Chunked):
                rows[:, at] = block.rows(start, stop)
            else:
                rows[:, at : at + width] = (
                    block[0][block[1][start:stop]] if isinstance(block, tuple) else block[start:stop]
                )
            at += width
        test = held_out[start:stop]
        n_block_test = int(test.sum())
        training = X_train[done_train : done_train + len(rows) - n_block_test]
        if n_block_test:  # straight into place, no temporary of the rows picked
            np.compress(~test, rows, axis=0, out=training)
            np.compress(test, rows, axis=0, out=X_test[done_test : done_test + n_block_test])
        else:
            training[:] = rows
        done_train += len(training)
        done_test += n_block_test
    return X_train, X_test


def _judged(column: str, judge: Callable[[Locate], Any]) -> np.ndarray:
    """``judge(locate)``: an exact per-value rule applied to a column's distinct values; a refusal declines."""
    try:
        return np.asarray(judge(lambda row, name: "the columnar reader"))  # a place never shown
    except DataError as refused:
        raise NotColumnar(f"column {column!r} holds a value the checks refuse") from refused


def _is_numeric(kind: pa.DataType) -> bool:
    """Arrow types whose values become float64 exactly as the exact reader makes them (numpy's conversion)."""
    return bool(
        pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_boolean(kind) or pa.types.is_null(kind)
    )


def numbers(feature: Feature, column: pa.ChunkedArray, text: bool) -> _Block:
    """A number feature's values as a block of :func:`assembled`.

    Parameters
    ----------
    feature : Feature
        Its name (for the reason of a refusal) and the value a missing one becomes (``impute``).
    column : pyarrow.ChunkedArray, m values
        A numeric column.
    text : bool
        Parsed from text: a NaN is a value refused, not a missing one.

    Returns
    -------
    block
        The chunks' own buffers where none is missing, else one array (m, 1) with the missing ones (null; NaN
        too unless parsed from text) imputed.

    Raises
    ------
    NotColumnar
        A value that is not a finite number, or a missing one where ``feature.impute`` is None.
    """
    cast = None if pa.types.is_null(column.type) else pc.cast(column, pa.float64(), safe=False)
    if cast is not None and not column.null_count and pc.all(pc.is_finite(cast)).as_py():
        return _Chunked(_views(cast, np.float64))
    values, nulls = floats(column)
    missing = nulls if text else nulls | np.isnan(values)
    if (~np.isfinite(values) & ~missing).any():
        raise NotColumnar(f"column {feature.name!r} holds a value that is not a finite number")
    if feature.impute is None:
        raise NotColumnar(f"column {feature.name!r} has a missing value and the schema imputes none")
    return np.where(missing, float(feature.impute), values)[:, None]


def floats(column: pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """A numeric column as float64 (numpy's rounding of integers) and its nulls, shapes (m,) and (m,) bool.

    Read from Arrow's buffers: ``to_numpy`` would import pandas where it is installed (a second at a start).

    Parameters
    ----------
    column : pyarrow.ChunkedArray, m values

    Returns
    -------
    values : ndarray of float64, shape (m,)
        A null's value is undefined.
    nulls : ndarray of bool, shape (m,)
    """
    if pa.types.is_null(column.type):
        return np.zeros(len(column)), np.ones(len(column), dtype=bool)
    chunks = _views(pc.cast(column, pa.float64(), safe=False), np.float64)
    return (np.concatenate(chunks) if chunks else np.empty(0)), _nulls(column)


def _views(column: pa.ChunkedArray, dtype: Any) -> list[np.ndarray]:
    """Views of a fixed-width column's chunks' values, in order (a null's value is undefined); no copy."""
    return [
        np.frombuffer(chunk.buffers()[1], dtype=dtype)[chunk.offset : chunk.offset + len(chunk)]
        for chunk in column.chunks
    ]


def _nulls(column: pa.ChunkedArray) -> np.ndarray:
    """Whether each value is null, shape (m,) bool, from the chunks' validity bitmaps."""
    parts = []
    for chunk in column.chunks:
        validity = chunk.buffers()[0]
        if validity is None or not chunk.null_count:
            parts.append(np.zeros(len(chunk), dtype=bool))
        else:
            bits = np.unpackbits(np.frombuffer(validity, dtype=np.uint8), bitorder="little")
            parts.append(bits[chunk.offset : chunk.offset + len(chunk)] == 0)
    return np.concatenate(parts) if parts else np.zeros(0, dtype=bool)


def _encoded(
    feature: Feature, column: pa.ChunkedArray, missing: frozenset[str], text: bool
) -> tuple[np.ndarray, np.ndarray]:
    """A feature's encodings of its distinct values, shape (d, 1) or (d, categories), and each record's row (m,)."""
    values, codes = distinct(column, text)
    return _judged(feature.name, lambda locate: encode_feature(feature, values, len(values), missing, locate)), codes


def _labels(column: pa.ChunkedArray, source: DataSource, text: bool) -> np.ndarray:
    """Labels or targets, shape (m,): numeric columns at numpy's speed, text through its distinct values."""
    if source.labels is None and _is_numeric(column.type) and not pa.types.is_null(column.type):
        labels, nulls = floats(column)
        if nulls.any() or not np.isfinite(labels).all():
            raise NotColumnar(f"column {source.label_column!r} has a missing or non-finite label")
        return labels
    values, codes = distinct(column, text)
    return _judged(str(source.label_column), lambda locate: label_values(values, source, locate))[codes]


def distinct(column: pa.ChunkedArray, text: bool) -> tuple[list[Any], np.ndarray]:
    """A column's distinct values as the exact reader sees them, and each row's index among them, shape (m,).

    Nulls are None (listed once, last, if any). PostgreSQL's numeric arrives as its text: it becomes the
    Decimal that psycopg gives the exact reader.

    Parameters
    ----------
    column : pyarrow.ChunkedArray, m values
        Text (dictionary-encoded or not) or numbers.
    text : bool
        Parsed from CSV text: a value holding a carriage return declines.

    Returns
    -------
    values : list, length d
    codes : ndarray of int, shape (m,)

    Raises
    ------
    NotColumnar
        A type the exact reader reads otherwise, or a carriage return in CSV text.
    """
    numeric_text = _is_postgresql_numeric(column.type)
    if numeric_text:
        column = pa.chunked_array([chunk.storage for chunk in column.chunks], column.type.storage_type)
    kind = column.type.value_type if pa.types.is_dictionary(column.type) else column.type
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind) or _is_numeric(kind)):
        raise NotColumnar(f"a column of type {kind} is read by the exact reader")
    if pa.types.is_null(kind):
        return [None], np.zeros(len(column), dtype=np.intp)
    encoded = column.combine_chunks()
    if not pa.types.is_dictionary(encoded.type):
        encoded = encoded.dictionary_encode()
    values = encoded.dictionary.to_pylist()
    if text and any(isinstance(value, str) and "\r" in value for value in values):
        raise NotColumnar("a text value holds a carriage return, which the csv module may read otherwise")
    if numeric_text:
        values = [Decimal(value) for value in values]
    indices = pa.chunked_array([encoded.indices])
    codes = np.concatenate(_views(indices, np.dtype(f"int{encoded.indices.type.bit_width}")))
    if encoded.indices.null_count:
        codes = np.where(_nulls(indices), len(values), codes)
        values.append(None)
    return values, codes


def _parsed(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """PostgreSQL NUMERIC values (their text) as float64, nulls kept."""
    storage = pa.chunked_array([chunk.storage for chunk in column.chunks], column.type.storage_type)
    try:
        return pc.cast(storage, pa.float64())
    except pa.ArrowInvalid:
        raise NotColumnar("a NUMERIC value does not parse as a number") from None


def _is_postgresql_numeric(kind: pa.DataType) -> bool:
    """ADBC's PostgreSQL numeric: an opaque extension type holding the number's text."""
    return (
        isinstance(kind, pa.BaseExtensionType)
        and getattr(kind, "vendor_name", "") == "PostgreSQL"
        and (getattr(kind, "type_name", "") == "numeric")
    )


def record_ids(column: pa.ChunkedArray, text: bool) -> np.ndarray:
    """Record ids as the exact reader makes them (stripped text, an integer's digits), shape (m,), numpy str.

    Parameters
    ----------
    column : pyarrow.ChunkedArray, m values
        Text or integers.
    text : bool
        Parsed from CSV text: an id holding a carriage return declines.

    Raises
    ------
    NotColumnar
        A missing or empty id, a type the exact reader reads otherwise, or a carriage return in CSV text.
    """
    if column.null_count:
        raise NotColumnar("a record id is missing")
    if pa.types.is_integer(column.type):
        texts = pc.cast(column, pa.string()).combine_chunks()
    elif pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        texts = column.combine_chunks()
    else:
        raise NotColumnar(f"record ids of type {column.type} are read by the exact reader")
    lengths, chars = _text_buffers(texts)
    if chars.size and chars.max() >= 0x80:  # beyond ASCII: str.strip() itself, a Python call per id
        ids = np.asarray([value.strip() for value in texts.to_pylist()], dtype=str)
        lengths, chars = np.char.str_len(ids), np.frombuffer(ids.tobytes(), dtype=np.uint32)
    else:
        # Only ids that begin or end with whitespace are stripped (and then by pyarrow, in ASCII as str.strip()).
        starts = np.cumsum(lengths) - lengths
        filled = lengths > 0
        edges = np.concatenate([chars[starts[filled]], chars[starts[filled] + lengths[filled] - 1]])
        if np.isin(edges, _ASCII_WHITESPACE).any():
            lengths, chars = _text_buffers(pc.utf8_trim(texts, characters=_ASCII_WHITESPACE.tobytes().decode()))
        ids = None
    if not lengths.all():
        raise NotColumnar("a record id is empty")
    if text and (chars == 0x0D).any():
        raise NotColumnar("a record id holds a carriage return, which the csv module may read otherwise")
    return ids if ids is not None else _ascii_unicode(chars, lengths)


def _text_buffers(texts: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """A text array's lengths in bytes, shape (m,), and its bytes one after the other, from Arrow's buffers."""
    offsets_type = np.int64 if pa.types.is_large_string(texts.type) else np.int32
    offsets = np.frombuffer(texts.buffers()[1], dtype=offsets_type)[texts.offset : texts.offset + len(texts) + 1]
    data = texts.buffers()[2]
    chars = np.frombuffer(data, dtype=np.uint8) if data is not None else np.empty(0, dtype=np.uint8)
    return np.diff(offsets), chars[offsets[0] : offsets[-1]]


def _ascii_unicode(chars: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """ASCII texts as a numpy str array, shape (m,): each text's bytes widened into a fixed-width row of UCS-4 code
    points, padded with zeros as numpy pads its str arrays (no Python string is made)."""
    width = max(1, int(lengths.max()))
    if (lengths == width).all():
        padded = chars.reshape(len(lengths), width)
    else:  # in row-major order the mask's true cells are exactly the texts' bytes, one after the other
        padded = np.zeros((len(lengths), width), dtype=np.uint8)
        padded[np.arange(width) < lengths[:, None]] = chars
    return padded.astype(np.uint32).view(np.dtype(f"U{width}")).reshape(len(lengths))


# --- CSV -------------------------------------------------------------------------------------------------


def spare_core() -> bool:
    """Whether a core is idle (by the last minute's load average): only then do pyarrow's threads pay. On this
    2-core machine, busy with other work, one thread parsed the 25-column CSV in 1.6 s of CPU and 1.6 s of wall
    time, two in 2.4 s of each; idle, two took 0.69 s of wall time against 1.1 s for one."""
    return os.getloadavg()[0] + 1 <= (os.cpu_count() or 1)


def _csv_table(source: DataSource, schema: Schema, header: list[str], max_line_chars: int) -> pa.Table:
    """The needed columns of a CSV file: features and numeric labels as float64, the rest as text."""
    assert source.path is not None
    missing = sorted(source.missing_values)
    # The csv module's reader strips a missing-value token before comparing; pyarrow compares the raw field
    # but strips a number: " -999" would be the number -999 here and missing there.
    if has_numeric_token(source.missing_values):
        raise NotColumnar("a missing-value token is a number")
    words = pa.dictionary(pa.int32(), pa.string())
    types = {source.id_column: pa.string()}
    if source.label_column is not None:
        types[source.label_column] = words if source.labels is not None else pa.float64()
    if source.split_column is not None:
        types[source.split_column] = words
    types |= {f.name: pa.float64() if f.type == "number" else words for f in schema.features}
    scan = scan_text(source.path, max_line_chars)
    return read_csv_columns(
        source.path, types, column_names=header, delimiter=source.delimiter, missing=missing, quoted=scan.quoted, skip=1
    )


def scan_text(path: Path, max_chars: int) -> TextScan:
    """A file's bytes checked for what the line-by-line reader refuses as text (:class:`TextScan`), in a pass of
    their own before pyarrow reads them natively (through a Python file object it took a quarter more time here).

    Parameters
    ----------
    path : Path
    max_chars : int
        Longest line the line-by-line reader reads.

    Returns
    -------
    TextScan
        Its ``quoted``: whether the file holds a quote character.

    Raises
    ------
    NotColumnar
        The file is not UTF-8 text, may hold a line over ``max_chars``, or cannot be read.
    """
    scan = TextScan(max_chars)
    try:
        with path.open("rb", buffering=0) as handle:
            buffer = bytearray(_SCAN_BYTES)  # one buffer, filled again and again: no page faults for new ones
            while scan.problem is None:
                size = handle.readinto(buffer)
                if not scan.check(buffer if size == len(buffer) else buffer[:size]):
                    break
    except OSError as refused:
        raise NotColumnar(f"cannot read it: {refused.strerror or refused}") from None
    if scan.problem is not None:
        raise NotColumnar(scan.problem)
    return scan


def read_csv_columns(
    path: Path,
    types: dict[str, pa.DataType],
    *,
    column_names: list[str],
    delimiter: str,
    missing: list[str],
    quoted: bool,
    skip: int = 0,
    offset: int = 0,
) -> pa.Table:
    """Columns of a delimited file by pyarrow's CSV reader, each converted to its type (the others only counted).

    Parameters
    ----------
    path : Path
    types : dict of str to pyarrow.DataType
        The columns converted, by name, and their types.
    column_names : list of str
        Every column's name, in order: each row has exactly as many fields.
    delimiter : str
    missing : list of str
        Fields that are null, compared as they stand (quoted too), never stripped.
    quoted : bool
        The file holds a quote character (:func:`scan_text`).
    skip : int
        Rows skipped first (a header).
    offset : int
        Bytes skipped first (a header that the csv module read).

    Returns
    -------
    pyarrow.Table
        The columns of ``types``, m rows.

    Raises
    ------
    NotColumnar
        pyarrow's reader stopped: a row's field count, a value its type does not take, an unreadable file.
    """
    try:
        with pa.OSFile(str(path)) as native:  # not the path: pyarrow would decompress a file named .gz
            native.seek(offset)
            return pacsv.read_csv(
                native,
                read_options=pacsv.ReadOptions(column_names=column_names, skip_rows=skip, use_threads=spare_core()),
                # A quoted field may hold a line end, which pyarrow looks for only when told (20-40% slower here),
                # also where one straddles two of its blocks: so where the file holds a quote character.
                parse_options=pacsv.ParseOptions(delimiter=delimiter, newlines_in_values=quoted),
                convert_options=pacsv.ConvertOptions(
                    column_types=types,
                    include_columns=list(types),
                    null_values=missing,
                    strings_can_be_null=False,
                    quoted_strings_can_be_null=True,
                ),
            )
    except (pa.ArrowException, OSError) as refused:
        raise NotColumnar(f"pyarrow's CSV reader stopped: {str(refused).splitlines()[0]}") from None


_SCAN_BYTES = 1 << 24


class TextScan:
    """A file's bytes, block by block, checked for what the line-by-line reader refuses as text.

    UTF-8 throughout (pyarrow validates only the text columns it converts) and no line longer than
    ``max_chars`` (in bytes, which bound characters from above: a flagged line may be within the limit, and
    the exact reader then reads it). :attr:`problem` says what was found, :attr:`quoted` whether a quote
    character was seen.
    """

    def __init__(self, max_chars: int) -> None:
        self._limit = max_chars
        # A line of `limit` bytes or more holds a whole window of `limit // 2` aligned bytes without a line end.
        self._window = max(1, max_chars // 2)
        self._decoder = codecs.getincrementaldecoder("utf-8")()
        self._run = 0  # bytes since the last line end
        self.problem: str | None = None
        self.quoted = False

    def check(self, block: bytearray) -> bool:
        """Check the next block (empty at the end of the file); whether there was one."""
        if not block:
            try:
                self._decoder.decode(b"", final=True)
            except UnicodeDecodeError:
                self.problem = "not UTF-8 text"
            return False
        self.quoted = self.quoted or b'"' in block
        if not block.isascii() or self._decoder.getstate()[0]:
            try:
                self._decoder.decode(block)
            except UnicodeDecodeError:
                self.problem = "not UTF-8 text"
                return True
        first, last = block.find(b"\n"), block.rfind(b"\n")
        if first < 0:
            self._run += len(block)
        else:
            # The line that ends here began in earlier blocks; those wholly inside lie between first and last,
            # and a long one holds a window without a line end.
            windows = range(first, last - self._window + 1, self._window)
            if self._run + first >= self._limit or any(block.find(b"\n", at, at + self._window) < 0 for at in windows):
                self.problem = f"a line may be longer than {self._limit:,} characters"
            self._run = len(block) - 1 - last
        if self._run >= self._limit:
            self.problem = f"a line may be longer than {self._limit:,} characters"
        return True


# --- Parquet and databases -----------------------------------------------------------------------------


def _parquet_table(source: DataSource, schema: Schema) -> pa.Table:
    """The needed columns of a Parquet file, text columns dictionary-encoded as stored."""
    words = [source.split_column, *(f.name for f in schema.features if f.type == "category")]
    if source.labels is not None:
        words.append(source.label_column)
    # No pre-buffering (as the exact reader): reading whole row groups' column chunks ahead kept 180 MiB more at a
    # million rows (peak RSS 760 MiB against 580), and a local file needs no saved round trips.
    dictionary = [name for name in words if name is not None]
    parquet = open_parquet(source, schema, read_dictionary=dictionary, pre_buffer=False)
    try:
        table = parquet.read(columns=needed_columns(source, schema), use_threads=spare_core())
    except pa.ArrowException as refused:
        raise NotColumnar(f"pyarrow's Parquet reader stopped: {str(refused).splitlines()[0]}") from None
    return table


def _postgresql_table(source: DataSource, schema: Schema) -> pa.Table | None:
    """A PostgreSQL source's columns through ADBC's driver (Arrow over libpq's binary COPY); None: not one.

    The SELECT is SQLAlchemy's own for the SQLAlchemy reader, so both read the same rows in the same order.
    """
    sqlalchemy = optional_module("sqlalchemy", "sql")
    url = sqlalchemy.engine.make_url(source.database_url())
    if url.get_backend_name() != "postgresql":
        return None
    try:
        dbapi = importlib.import_module("adbc_driver_postgresql.dbapi")
    except ImportError:
        return None
    from sqlalchemy.dialects import postgresql

    # Named parameters: the statement goes to the server as written, a LIKE 'a%' without psycopg's doubling.
    statement = str(sql_select(source, schema).compile(dialect=postgresql.dialect(paramstyle="named")))
    uri = url.set(drivername="postgresql").render_as_string(hide_password=False)
    try:
        with dbapi.connect(uri) as connection, connection.cursor() as cursor:
            cursor.execute(statement)
            table: pa.Table = cursor.fetch_arrow_table()
    except dbapi.Error as refused:
        reason = str(refused).strip().splitlines()[0] if str(refused).strip() else type(refused).__name__
        if url.password:
            reason = reason.replace(str(url.password), "***")
        raise NotColumnar(f"the PostgreSQL driver stopped: {reason}") from None
    return table


def _rows_table(source: DataSource, schema: Schema) -> pa.Table:
    """A database's rows through SQLAlchemy, each partition's columns converted to Arrow at C speed."""
    batches = sql_batches(source, schema)
    try:
        tables = [pa.table({name: pa.array(values) for name, values in batch.columns.items()}) for batch in batches]
        if not tables:
            raise NotColumnar("")  # the exact reader says "no records", or gives the empty cell asked for
        return pa.concat_tables(tables, promote_options="permissive")
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as refused:
        # Mixed kinds in a column (numbers and text, say): the exact reader judges each value.
        raise NotColumnar(f"a column holds values of mixed kinds ({str(refused).splitlines()[0]})") from None
