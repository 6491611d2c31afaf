"""A data owner's private cell A_ij read from its CSV file, validated, in memory.

The cell file has the header ``id,[label],[split],features...``. Reading it names the file, line and
column of anything wrong. Both the entity (which serves it) and in-process tools (the pooled reference,
the DP baselines) read cells through here.
"""

from __future__ import annotations

import csv
import math
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from ppsvm.constants import MAX_CSV_LINE_CHARS
from ppsvm.data.delimited import bounded_lines
from ppsvm.errors import DataError

RESERVED_COLUMNS = ("id", "label", "split")


@dataclass(frozen=True)
class Cell:
    """The rows of one cell, split into training and held-out records.

    Attributes
    ----------
    train_ids, test_ids : ndarray of str, shapes (m_train,), (m_test,)
    X_train, X_test : ndarray, shapes (m_train, n_j), (m_test, n_j)
    y_train, y_test : ndarray or None
        Labels (+-1) or targets, where the cell holds them.
    feature_names : tuple of str, length n_j
    source : Path
    """

    train_ids: np.ndarray
    X_train: np.ndarray
    y_train: np.ndarray | None
    test_ids: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray | None
    feature_names: tuple[str, ...]
    source: Path

    @property
    def n_features(self) -> int:
        return self.X_train.shape[1]

    @cached_property
    def _all_rows(self) -> tuple[dict[str, int], np.ndarray]:
        """Row number of every record id, and training then held-out rows stacked (built once)."""
        ids = [*self.train_ids.tolist(), *self.test_ids.tolist()]
        return {record: k for k, record in enumerate(ids)}, np.vstack([self.X_train, self.X_test])

    def check_ids(self, ids: list[str]) -> None:
        """Refuse an empty list, a repeated id or an id the cell does not hold (ids are published by Records).

        Raises
        ------
        DataError
            Naming the ids at fault.
        """
        if not ids:
            raise DataError("ids: the list of record ids is empty")
        repeated = [record for record, count in Counter(ids).items() if count > 1]
        if repeated:
            raise DataError(f"ids: record id {repeated[0]!r} appears more than once")
        index = self._all_rows[0]
        unknown = [record for record in ids if record not in index]
        if unknown:
            shown = ", ".join(repr(r) for r in unknown[:5])
            raise DataError(
                f"unknown record id(s) {shown}{' ...' if len(unknown) > 5 else ''} ({len(unknown)} of {len(ids)})"
            )

    def rows_for_ids(self, ids: list[str]) -> np.ndarray:
        """Feature rows of record ids already passed by :meth:`check_ids`, shape (len(ids), n_j)."""
        index, rows_of_cell = self._all_rows
        return rows_of_cell[np.fromiter((index[record] for record in ids), dtype=np.int64, count=len(ids))]


def load_cell(path: Path, *, max_line_chars: int = MAX_CSV_LINE_CHARS) -> Cell:
    """Read and validate a cell CSV: header ``id,[label],[split],features...``.

    Parameters
    ----------
    path : Path
    max_line_chars : int
        Longest line read (see :func:`ppsvm.data.delimited.bounded_lines`).

    Raises
    ------
    DataError
        Naming the file, line and column at fault.
    """
    try:
        handle = path.open(newline="", encoding="utf-8")
    except OSError as exc:
        raise DataError(f"cannot read data file {path}: {exc.strerror}") from exc
    try:
        with handle:
            return _read_cell(path, handle, max_line_chars)
    except UnicodeDecodeError:
        raise DataError(_not_utf8(path)) from None


def _rows(reader: Any, path: Path) -> Iterator[list[str]]:
    """The CSV records, with the csv module's own errors (e.g. a field over its size limit) naming the line."""
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise DataError(f"{path}, line {reader.line_num}: not readable as CSV: {exc}") from None
        yield row


def _not_utf8(path: Path) -> str:
    """Where a file stops being UTF-8 (the decoder's own offset is within a buffer, not the file)."""
    raw = path.read_bytes()
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        return f"{path}, line {line}: not UTF-8 text (byte {raw[exc.start : exc.start + 1]!r})"
    return f"{path}: not UTF-8 text"


def _read_cell(path: Path, handle: TextIO, max_line_chars: int) -> Cell:
    """The cell in ``handle`` (already open); see :func:`load_cell`."""
    reader = _rows(csv.reader(bounded_lines(handle, path, max_line_chars)), path)
    header = next(reader, None)
    if not header:
        raise DataError(f"{path}: empty file (expected a header line starting with 'id')")
    header = [name.strip() for name in header]
    if header[0] != "id":
        raise DataError(f"{path}, line 1: the first column must be 'id', got {header[0]!r}")
    has_label = "label" in header
    has_split = "split" in header
    features = [k for k, name in enumerate(header) if name not in RESERVED_COLUMNS]
    if not features:
        raise DataError(f"{path}, line 1: no feature columns (only {', '.join(header)})")
    label_at = header.index("label") if has_label else -1
    split_at = header.index("split") if has_split else -1
    ids: list[str] = []
    labels: list[float] = []
    is_test: list[bool] = []
    values: list[list[float]] = []
    first_line: dict[str, int] = {}
    for line, row in enumerate(reader, start=2):  # lines as the csv module counts records
        if not row or all(not field.strip() for field in row):
            continue
        if len(row) != len(header):
            raise DataError(f"{path}, line {line}: {len(row)} fields, the header has {len(header)}")
        record = row[0].strip()
        if not record:
            raise DataError(f"{path}, line {line}, column 'id': empty record id")
        if record in first_line:
            raise DataError(f"{path}, line {line}: duplicate record id {record!r} (first on line {first_line[record]})")
        first_line[record] = line
        ids.append(record)
        if has_label:
            labels.append(_number(row[label_at], path, line, "label"))
        if has_split:
            role = row[split_at].strip()
            if role not in ("train", "test"):
                raise DataError(f"{path}, line {line}, column 'split': expected 'train' or 'test', got {role!r}")
            is_test.append(role == "test")
        else:
            is_test.append(False)
        values.append([_number(row[k], path, line, header[k]) for k in features])
    if not ids:
        raise DataError(f"{path}: no records (the cell is empty)")
    X = np.asarray(values, dtype=np.float64)
    test = np.asarray(is_test)
    if test.all():
        raise DataError(f"{path}: every record is marked 'test'; the cell has no training records")
    id_array = np.asarray(ids, dtype=str)
    y = np.asarray(labels, dtype=np.float64) if has_label else None
    return Cell(
        train_ids=id_array[~test],
        X_train=X[~test],
        y_train=None if y is None else y[~test],
        test_ids=id_array[test],
        X_test=X[test],
        y_test=None if y is None else y[test],
        feature_names=tuple(header[k] for k in features),
        source=path,
    )


def _number(text: str, path: Path, line: int, column: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise DataError(f"{path}, line {line}, column {column!r}: {text.strip()!r} is not a number") from None
    if not math.isfinite(value):
        raise DataError(f"{path}, line {line}, column {column!r}: {text.strip()!r} is not a finite number")
    return value
