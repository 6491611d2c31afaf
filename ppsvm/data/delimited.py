"""Reading a delimited text file into stripped fields, a line at a time and each line of bounded length.

What a raw file can get wrong as text (unreadable, not UTF-8, a line of gigabytes, ragged field
counts, a bad header) is refused here, naming the file and line; what the fields mean (numbers,
labels, ids, missing values) is :mod:`ppsvm.data.dataset`'s and :mod:`ppsvm.data.sources`' concern.
"""

from __future__ import annotations

import csv
import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from ppsvm.constants import MAX_CSV_LINE_CHARS
from ppsvm.errors import DataError


@dataclass(frozen=True)
class Table:
    """The raw fields of a file: stripped strings, one list per data line."""

    path: Path
    header: tuple[str, ...] | None
    line_numbers: list[int]
    rows: list[list[str]]

    @property
    def n_columns(self) -> int:
        return len(self.rows[0])

    def where(self, row: int, column: int) -> str:
        """Location of a cell for error messages: file, 1-based line, column."""
        name = f" ({self.header[column]!r})" if self.header is not None else ""
        return f"{self.path}, line {self.line_numbers[row]}, column {column}{name}"


def bounded_lines(handle: TextIO, path: Path, max_chars: int = MAX_CSV_LINE_CHARS) -> Iterator[str]:
    """The lines of a text file opened with ``newline=""``, for :func:`csv.reader`, each read with a bounded length.

    The csv module reads whole lines, so one line of gigabytes (a binary file, a file whose line
    ends were lost) would be read into memory whole and end in a MemoryError traceback.

    Raises
    ------
    DataError
        A line (with its line end) is longer than ``max_chars`` characters; names the file and line.
    """
    for number in itertools.count(1):
        line = handle.readline(max_chars + 1)
        if not line:
            return
        if len(line) > max_chars:
            raise DataError(
                f"{path}, line {number} is longer than {max_chars:,} characters, longer than any sane record: "
                "is it a text file with one record per line?"
            )
        yield line


def read_table(path: Path, *, delimiter: str, header: bool, max_line_chars: int = MAX_CSV_LINE_CHARS) -> Table:
    """The non-blank lines of a delimited text file as stripped fields, every line with the same count.

    Parameters
    ----------
    path : Path
    delimiter : str
        One-character field separator.
    header : bool
        The first non-blank line holds column names (none empty, none repeated).
    max_line_chars : int
        Longest line read (see :func:`bounded_lines`).

    Raises
    ------
    DataError
        The file is unreadable, not UTF-8, empty or holds only a header, a line is too long or has another
        field count than the first; the message names the file and line.
    """
    names: tuple[str, ...] | None = None
    header_line = 0
    line_numbers: list[int] = []
    rows: list[list[str]] = []
    try:
        with open_text(path) as handle:
            for line_number, fields in stripped_records(bounded_lines(handle, path, max_line_chars), path, delimiter):
                if header and names is None:
                    names = tuple(fields)
                    header_line = line_number
                    continue
                expected = len(names) if names is not None else len(rows[0]) if rows else len(fields)
                if len(fields) != expected:
                    first = f"the header on line {header_line}" if names is not None else f"line {line_numbers[0]}"
                    raise DataError(f"{path}, line {line_number}: {len(fields)} fields, but {first} has {expected}")
                line_numbers.append(line_number)
                rows.append(fields)
    except OSError as error:
        raise DataError(f"cannot read {path}: {error.strerror or error}") from error
    except UnicodeDecodeError as error:
        raise DataError(f"{path}: not UTF-8 text ({error.reason} at byte {error.start})") from error

    if not rows:
        raise DataError(f"{path}: no data rows (the file is empty or holds only a header)")
    if names is not None:
        check_header(path, names)
    return Table(path=path, header=names, line_numbers=line_numbers, rows=rows)


def open_text(path: Path) -> TextIO:
    """A delimited text file opened for :func:`bounded_lines` as :func:`read_table` reads it.

    utf-8-sig: spreadsheet exports often start with a byte-order mark, which is then no part of the first field.
    """
    return path.open(encoding="utf-8-sig", newline="")


def stripped_records(lines: Iterable[str], path: Path, delimiter: str) -> Iterator[tuple[int, list[str]]]:
    """The non-blank records of a file's lines, each with its (last) 1-based line number and its stripped fields.

    Parameters
    ----------
    lines : iterable of str
        The file's lines with their line ends (:func:`bounded_lines`); one record may span several.
    path : Path
        The file, for messages.
    delimiter : str
        One-character field separator; spaces after it are skipped and every field is stripped.

    Raises
    ------
    DataError
        The csv module refuses a record (e.g. a field over its size limit); names the file and line.
    """
    reader = csv.reader(lines, delimiter=delimiter, skipinitialspace=True)
    try:
        for raw in reader:
            fields = [field.strip() for field in raw]
            if fields and fields != [""]:
                yield reader.line_num, fields
    except csv.Error as error:
        raise DataError(f"{path}, line {reader.line_num}: {error}") from error


def check_header(path: Path, header: tuple[str, ...]) -> None:
    """Refuse a header with an empty or a repeated column name.

    Raises
    ------
    DataError
        Naming the file and the column(s).
    """
    seen: dict[str, int] = {}
    for index, name in enumerate(header):
        if not name:
            raise DataError(f"{path}, header line: column {index} has no name")
        if name in seen:
            raise DataError(f"{path}, header line: columns {seen[name]} and {index} are both named {name!r}")
        seen[name] = index


def csv_records(reader: Any, path: Path) -> Iterator[list[str]]:
    """The CSV records, with the csv module's own errors (e.g. a field over its size limit) naming the line."""
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise DataError(f"{path}, line {reader.line_num}: not readable as CSV: {exc}") from None
        yield row


def not_utf8(path: Path) -> str:
    """Where a file stops being UTF-8 (the decoder's own offset is within a buffer, not the file)."""
    raw = path.read_bytes()
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        return f"{path}, line {line}: not UTF-8 text (byte {raw[exc.start : exc.start + 1]!r})"
    return f"{path}: not UTF-8 text"
