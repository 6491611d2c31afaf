"""Turning raw benchmark files (UCI style) into a numeric, labelled dataset.

The files are read as published: no header unless told (a first line that looks
like one is named in the error), ``?``, ``NA``, ``NaN``, ``null`` or an empty cell
means missing (configurable), labels are arbitrary strings, whitespace around fields is ignored
and blank lines are skipped. Column references (label, dropped columns, id
column) are 0-based indices, negative ones counting from the end, or header
names; error messages use the same 0-based column indices and 1-based line
numbers. The file's lines become fields in :mod:`ppsvm.data.delimited`; this
module gives the fields their meaning: features, labels, ids, missing values.
"""

from __future__ import annotations

import codecs
import csv
import logging
import math
import re
from collections.abc import Callable, Container, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, NoReturn

import numpy as np

from ppsvm.constants import MAX_CSV_LINE_CHARS, TASKS
from ppsvm.data.cell import repeated_id
from ppsvm.data.delimited import Table, bounded_lines, check_header, open_text, read_table, stripped_records
from ppsvm.data.schema import MAX_CATEGORIES, Feature, category_order, has_numeric_token
from ppsvm.errors import ConfigError, DataError

__all__ = ["Dataset", "DatasetOptions", "load_dataset"]

logger = logging.getLogger(__name__)

# Missing-value spellings by default: UCI's "?", R's and pandas' NA / NaN / null, and an empty field.
DEFAULT_MISSING_VALUES: tuple[str, ...] = ("", "?", "NA", "N/A", "NaN", "nan", "null", "NULL", "None")
# Enough distinct values to recognise the label column in an error, not a dump of it.
_MAX_LISTED_VALUES = 8
# Classes a label column may hold: one model is fitted per class (one-vs-rest), and past this many a column is
# far likelier a real-valued target read as classes.
MAX_CLASSES = 100
# Problems of a file listed in one error, so a user fixes them in one go rather than one run each.
MAX_REPORTED_PROBLEMS = 20

ColumnRef = str | int


@dataclass(frozen=True)
class DatasetOptions:
    """How to turn a raw delimited file into a :class:`Dataset`.

    Parameters
    ----------
    label : str or int
        Label column: 0-based index (negative counts from the end) or header name.
    positive : str, optional
        Classification: this raw label value becomes +1, every other value -1.
    negative : str, optional
        Classification: this raw label value becomes -1, every other value +1
        (e.g. Cleveland's ``0``). Mutually exclusive with `positive`.
    task : {"classify", "regress"}
        Regression parses the labels as real numbers.
    drop : tuple of str or int
        Columns to leave out of the features (e.g. WDBC's id column 0).
    id_column : str or int, optional
        Column holding record ids; it is never a feature. Default: the 0-based
        number of the data row (blank lines and header not counted), as a string.
    missing : {"refuse", "drop", "impute"}
        Missing feature values: raise, drop the rows, or impute: ``ppsvm split``
        fills them with the mean of each entity's own training records (the
        loaded :class:`Dataset` keeps them as NaN).
    missing_values : tuple of str
        Field values that mean missing (after stripping whitespace).
    header : bool
        The first non-blank line holds column names.
    delimiter : str
        One-character field separator.
    categorical : tuple of str or int
        Feature columns whose values are categories, not numbers (see :class:`Dataset`).
    infer_categorical : bool
        Also treat as categorical every feature column whose non-missing values are not all numbers (logged,
        with the categories); otherwise such a column is an error.
    """

    label: ColumnRef = -1
    positive: str | None = None
    negative: str | None = None
    task: Literal["classify", "regress"] = "classify"
    drop: tuple[ColumnRef, ...] = ()
    id_column: ColumnRef | None = None
    missing: Literal["refuse", "drop", "impute"] = "refuse"
    missing_values: tuple[str, ...] = DEFAULT_MISSING_VALUES
    header: bool = False
    delimiter: str = ","
    categorical: tuple[ColumnRef, ...] = ()
    infer_categorical: bool = False

    def __post_init__(self) -> None:
        if self.positive is not None and self.negative is not None:
            raise ConfigError("give either a positive or a negative label value, not both")
        if self.task not in TASKS:
            raise ConfigError(f"task must be 'classify' or 'regress', not {self.task!r}")
        if self.task == "regress" and (self.positive is not None or self.negative is not None):
            raise ConfigError("positive/negative label values apply to classification only")
        if self.missing not in ("refuse", "drop", "impute"):
            raise ConfigError(f"missing must be 'refuse', 'drop' or 'impute', not {self.missing!r}")
        if len(self.delimiter) != 1 or self.delimiter in ('"', "\n", "\r"):
            raise ConfigError(f"delimiter must be one character other than a quote or newline, not {self.delimiter!r}")


@dataclass(frozen=True)
class Dataset:
    """A numeric dataset with labels and record ids.

    Attributes
    ----------
    ids : ndarray of str, shape (m,)
        Unique record ids (numpy unicode dtype).
    X : ndarray of float64, shape (m, n)
        Finite feature values; NaN only for missing values loaded with ``missing="impute"``, which
        :func:`ppsvm.data.partition.split_dataset` fills per entity. A categorical feature's value is the
        index of the record's category in ``categories``.
    y : ndarray of float64, shape (m,)
        +1/-1 for two classes, class codes 0 .. k-1 for k >= 3 (see ``classes``), real targets for regression.
    feature_names : tuple of str, length n
        Header names, else ``"x<original column index>"``.
    source : str
        Path the data was read from.
    categories : dict of int to tuple of str
        The categorical features, by index into ``feature_names``: their categories, the values found in the
        whole file sorted by :func:`ppsvm.data.schema.category_order`.
    label_values : tuple of (str, str) or None
        Classification: the label column's value that became +1 and the one that became -1, where each class
        is one value.
    classes : tuple of str or None
        Classification with three or more label values: each class's raw value, by its code in ``y`` (0 .. k-1,
        ordered by :func:`ppsvm.data.schema.category_order`); None for two classes (``y`` is then +1/-1).
    """

    ids: np.ndarray
    X: np.ndarray
    y: np.ndarray
    feature_names: tuple[str, ...]
    source: str
    categories: dict[int, tuple[str, ...]] = field(default_factory=dict)
    label_values: tuple[str, str] | None = None
    classes: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        # Catches hand-built (e.g. synthetic) datasets whose parts disagree.
        m = self.X.shape[0] if self.X.ndim == 2 else -1
        if m < 0 or self.y.shape != (m,) or self.ids.shape != (m,) or len(self.feature_names) != self.X.shape[1]:
            raise DataError(
                f"{self.source}: inconsistent dataset: ids {self.ids.shape}, X {self.X.shape}, "
                f"y {self.y.shape}, {len(self.feature_names)} feature names"
            )


def load_dataset(path: str | Path, options: DatasetOptions, *, max_line_chars: int = MAX_CSV_LINE_CHARS) -> Dataset:
    """Read a delimited text file into a :class:`Dataset`.

    Column by column through pyarrow where that reader can vouch for the file; otherwise (and so for every
    file with a problem) line by line, whose errors name the file, line and column. Either way the dataset is
    the same, bit for bit.

    Parameters
    ----------
    path : str or Path
        The data file.
    options : DatasetOptions
        Label column, label mapping, dropped columns, missing-value policy.
    max_line_chars : int
        Longest line read (see :func:`ppsvm.data.delimited.bounded_lines`).

    Returns
    -------
    Dataset
        ids (m,), X (m, n), y (m,); n is the number of columns minus the label,
        id and dropped columns.

    Raises
    ------
    DataError
        The file is empty, unreadable or malformed (a line over ``max_line_chars``,
        field counts, non-numeric or non-finite features, missing values under
        ``refuse``, bad labels, duplicate ids); the message names file, line and column.
    ConfigError
        A column reference does not exist or the columns overlap.
    """
    # Imported here: pyarrow takes 0.3 s to import, which commands that read no dataset need not pay.
    from ppsvm.data import columnar

    try:
        return _load_columns(Path(path), str(path), options, max_line_chars)
    except columnar.NotColumnar as declined:
        if declined.reason:
            logger.info("%s: %s; reading it line by line, which names what is wrong", path, declined.reason)
    return _load_lines(Path(path), str(path), options, max_line_chars)


def _load_lines(path: Path, source: str, options: DatasetOptions, max_line_chars: int) -> Dataset:
    """:func:`load_dataset` a line and a value at a time: every problem found where it stands."""
    table = read_table(path, delimiter=options.delimiter, header=options.header, max_line_chars=max_line_chars)
    label_column, id_column, feature_columns = _resolve_columns(path, table.n_columns, table.header, options)
    tokens = frozenset(options.missing_values)

    categorical = _categorical_columns(table, feature_columns, options, tokens)
    X, missing, problems, unlisted = _parse_features(table, feature_columns, tokens, skip=categorical)
    categories: dict[int, tuple[str, ...]] = {}
    for k, c in enumerate(feature_columns):
        if c not in categorical:
            continue
        values, codes = np.unique(np.array([row[c] for row in table.rows], dtype=str), return_inverse=True)
        where = _column_where(path, table.header, c)
        first_text = categorical[c]
        X[:, k], categories[k] = _category_codes(
            where if first_text is None else f"{where} (first text: {first_text})", values.tolist(), codes, tokens
        )
        missing[:, k] = np.isnan(X[:, k])
        if first_text is not None:
            logger.info(
                "%s holds text (%s): categorical, with %d categories: %s",
                where,
                first_text,
                len(categories[k]),
                shown_categories(categories[k]),
            )
    label_missing = np.array([row[label_column] in tokens for row in table.rows])
    refused = (
        [_missing_summary(table, missing, feature_columns)] if options.missing == "refuse" and missing.any() else []
    )
    if problems or refused:
        numeric = [c for c in feature_columns if c not in categorical]
        raise DataError(_problem_report(table, problems, unlisted, refused, options.header, numeric, tokens))
    ids = _record_ids(table, id_column, tokens)

    def missing_label(r: int) -> NoReturn:
        raise DataError(
            f"{table.where(r, label_column)}: missing label {table.rows[r][label_column]!r}; "
            "fix the file or drop such rows with --missing drop"
        )

    keep = _apply_missing_policy(path, options, missing, label_missing, missing_label)
    kept_rows = np.flatnonzero(keep)
    label_values, classes = None, None
    if options.task == "classify":
        raw_labels = [row[label_column] for row, kept in zip(table.rows, keep, strict=True) if kept]
        y, label_values, classes = _classification_labels(path, label_column, raw_labels, options)
    else:
        y = _regression_targets(table, label_column, kept_rows)
    return Dataset(
        ids=ids[keep],
        X=X[keep],
        y=y,
        feature_names=_feature_names(table.header, feature_columns),
        source=source,
        categories=categories,
        label_values=label_values,
        classes=classes,
    )


def _load_columns(path: Path, source: str, options: DatasetOptions, max_line_chars: int) -> Dataset:
    """:func:`load_dataset` column by column (pyarrow's CSV reader, numpy): the line-by-line reader's dataset, or
    :class:`~ppsvm.data.columnar.NotColumnar` wherever this reader cannot vouch for the file or finds a problem
    whose message names a line (errors that name none, of the labels or the rows left, are raised as they are).

    Where pyarrow and the csv module might read a file otherwise, this declines: a field quoted after a space
    (skipped by the csv module, kept by pyarrow) or holding a line end leaves a quote or a line end in a text
    value, and a number that pyarrow does not parse as Python's float() does, or at all, fails its column.
    pyarrow strips only spaces and tabs around a number and parses what float() parses (tests/unit/
    test_dataset_columnar.py holds it to that), a missing-value token is compared unstripped (so one with
    whitespace around it, or a number, declines), and a field the csv module would refuse as over its size
    limit lies on a line the text scan flags.
    """
    from ppsvm.data import columnar

    tokens = frozenset(options.missing_values)
    delimiter = options.delimiter
    if delimiter == " " or not (delimiter == "\t" or (delimiter.isascii() and delimiter.isprintable())):
        raise columnar.NotColumnar("the delimiter is a space, a control character or beyond ASCII")
    if has_numeric_token(tokens) or any(token != token.strip() for token in tokens):
        raise columnar.NotColumnar("a missing-value token is a number or has whitespace around it")
    scan = columnar.scan_text(path, min(max_line_chars, csv.field_size_limit()))
    header, n_columns, offset = _first_records(path, options, max_line_chars)
    try:
        label_column, id_column, feature_columns = _resolve_columns(path, n_columns, header, options)
        categorical = _declared_categorical(path, n_columns, header, options, feature_columns)
    except ConfigError as refused:
        raise columnar.NotColumnar("") from refused  # the line-by-line reader says so, or what it finds first

    import pyarrow as pa
    import pyarrow.compute as pc

    words = pa.dictionary(pa.int32(), pa.string())
    types = {str(c): words if c in categorical else pa.float64() for c in feature_columns}
    types[str(label_column)] = words if options.task == "classify" else pa.float64()
    if id_column is not None:
        types[str(id_column)] = pa.string()
    if scan.quoted:  # the dropped columns too: a field quoted after a space may have split or joined fields there
        types |= {str(c): pa.string() for c in range(n_columns) if str(c) not in types}
    try:
        table = columnar.read_csv_columns(
            path,
            types,
            column_names=[str(c) for c in range(n_columns)],
            delimiter=delimiter,
            missing=sorted(tokens),
            quoted=scan.quoted,
            offset=offset,
        )
    except columnar.NotColumnar as declined:
        if options.infer_categorical:  # most likely a column of text: the line-by-line reader infers its categories
            reason = f"{declined.reason} (a text column's categories are inferred line by line)"
            raise columnar.NotColumnar(reason) from None
        raise
    m = table.num_rows
    if not m:
        raise columnar.NotColumnar("")  # the line-by-line reader says "no data rows"
    structural = r'["\r\n]'  # a quote or a line end left in a text value: see the docstring
    if scan.quoted and any(
        kind == pa.string() and pc.any(pc.match_substring_regex(table.column(name), structural)).as_py()
        for name, kind in types.items()
    ):
        raise columnar.NotColumnar("a text field holds a quote or a line end")

    blocks: list[Any] = []
    categories: dict[int, tuple[str, ...]] = {}
    for k, c in enumerate(feature_columns):
        if c not in categorical:
            blocks.append(
                columnar.numbers(Feature(f"column {c}", "number", impute=math.nan), table.column(str(c)), text=True)
            )
            continue
        raw_values, value_codes = columnar.distinct(table.column(str(c)), text=True)
        if scan.quoted and any(re.search(structural, str(value)) for value in raw_values):
            raise columnar.NotColumnar("a category holds a quote or a line end")
        codes_of, categories[k] = _category_codes(_column_where(path, header, c), raw_values, value_codes, tokens)
        blocks.append(codes_of[:, None])
    X = columnar.assembled(blocks, np.zeros(m, dtype=bool))[0]
    # Every value read is finite (numbers declines otherwise): NaN is exactly a missing one.
    missing = np.isnan(X) if any(isinstance(block, np.ndarray) for block in blocks) else np.zeros(X.shape, bool)
    if options.missing == "refuse" and missing.any():
        raise columnar.NotColumnar("")  # the line-by-line reader names the missing values
    if options.task == "classify":
        raw, codes = columnar.distinct(table.column(str(label_column)), text=True)
        if scan.quoted and any(re.search(structural, str(value)) for value in raw):
            raise columnar.NotColumnar("a label holds a quote or a line end")
        values, codes = _merged([str(value).strip() for value in raw], codes)
        label_missing = np.isin(np.asarray(values, dtype=str), sorted(tokens))[codes]
    else:
        targets, label_missing = columnar.floats(table.column(str(label_column)))
        if not np.isfinite(targets[~label_missing]).all():
            raise columnar.NotColumnar("")  # the line-by-line reader names the target
    if id_column is None:
        ids = _row_numbers(m)
    else:
        ids = columnar.record_ids(table.column(str(id_column)), text=True)
        if np.isin(ids, sorted(tokens)).any() or repeated_id([ids]) is not None:
            raise columnar.NotColumnar("")  # the line-by-line reader names the missing or repeated id
    del table, blocks
    pa.default_memory_pool().release_unused()  # what pyarrow parsed through, given back for the split's arrays

    def missing_label(r: int) -> NoReturn:
        raise columnar.NotColumnar("")  # the line-by-line reader names the missing label

    keep = _apply_missing_policy(path, options, missing, label_missing, missing_label)
    every = bool(keep.all())
    label_values, classes = None, None
    if options.task == "classify":
        kept_codes = codes if every else codes[keep]
        counts = np.bincount(kept_codes, minlength=len(values))
        present = np.flatnonzero(counts)
        targets = np.zeros(len(values))  # 0.0: values only on rows dropped
        try:
            targets[present], classes = _label_targets(path, label_column, _counted(values, counts, present), options)
        except DataError:
            # Raised again with the values listed as the line-by-line reader meets them (the same checks fail).
            present, first = np.unique(kept_codes, return_index=True)
            _label_targets(path, label_column, _counted(values, counts, present[np.argsort(first)]), options)
            raise
        if classes is None:
            label_values = _label_pair([values[k] for k in present.tolist()], targets[present].tolist())
        y = targets[kept_codes]
    else:
        y = targets if every else targets[keep]
    return Dataset(
        ids=ids if every else ids[keep],
        X=X if every else X[keep],
        y=y,
        feature_names=_feature_names(header, feature_columns),
        source=source,
        categories=categories,
        label_values=label_values,
        classes=classes,
    )


def _first_records(path: Path, options: DatasetOptions, max_line_chars: int) -> tuple[tuple[str, ...] | None, int, int]:
    """The header's names (None without one), the first record's field count and the byte offset of the data
    (past a byte-order mark and the header), read by the csv module exactly as :func:`read_table` reads them.

    Raises
    ------
    NotColumnar
        The file cannot be read so, or holds no data record, or its header names a column twice or none.
    """
    from ppsvm.data.columnar import NotColumnar

    read = 0

    def counted(lines: Iterator[str]) -> Iterator[str]:
        nonlocal read
        for line in lines:  # the csv module reads no further than the record it returns
            read += len(line.encode("utf-8"))
            yield line

    try:
        with open_text(path) as handle:
            records = stripped_records(counted(bounded_lines(handle, path, max_line_chars)), path, options.delimiter)
            header = tuple(next(records)[1]) if options.header else None
            offset = read
            fields = next(records)[1]
        if header is not None:
            check_header(path, header)
        with path.open("rb") as raw:
            offset += len(codecs.BOM_UTF8) if raw.read(len(codecs.BOM_UTF8)) == codecs.BOM_UTF8 else 0
    except (OSError, UnicodeDecodeError, DataError, StopIteration):
        raise NotColumnar("") from None  # the line-by-line reader says what is wrong
    if header is not None and len(header) != len(fields):
        raise NotColumnar("")
    return header, len(fields), offset


def _merged(values: list[str], codes: np.ndarray) -> tuple[list[str], np.ndarray]:
    """Distinct values (d,) of which some may now be equal (stripped), and each row's index (m,) among them: the
    values made distinct again, in order of first listing, and each row's index among those."""
    position: dict[str, int] = {}
    remap = np.array([position.setdefault(value, len(position)) for value in values], dtype=np.intp)
    return list(position), remap[codes] if len(position) < len(values) else codes


def _counted(values: list[str], counts: np.ndarray, order: np.ndarray) -> dict[str, int]:
    """Distinct values (d,) with their counts (d,), those of ``order`` in that order."""
    return {values[k]: int(counts[k]) for k in order.tolist()}


def _row_numbers(m: int) -> np.ndarray:
    """The default record ids, shape (m,): each data row's 0-based number as text (the dtype just as wide)."""
    return np.arange(m).astype(f"U{len(str(max(m - 1, 0)))}")


def _feature_names(header: tuple[str, ...] | None, feature_columns: list[int]) -> tuple[str, ...]:
    if header is not None:
        return tuple(header[c] for c in feature_columns)
    return tuple(f"x{c}" for c in feature_columns)


def _resolve_column(path: Path, n: int, header: tuple[str, ...] | None, ref: ColumnRef, role: str) -> int:
    if isinstance(ref, int):
        if not -n <= ref < n:
            raise ConfigError(
                f"{path}: {role} column {ref} is out of range: the file has {n} columns "
                f"(0..{n - 1}, or -1..-{n} from the end)"
            )
        return ref % n
    if header is None:
        raise ConfigError(
            f"{path}: {role} column {ref!r} is a name, but the file has no header; "
            "give a 0-based column index or read the header"
        )
    if ref not in header:
        raise ConfigError(f"{path}: no {role} column named {ref!r}; the columns are {', '.join(header)}")
    return header.index(ref)


def _resolve_columns(
    path: Path, n: int, header: tuple[str, ...] | None, options: DatasetOptions
) -> tuple[int, int | None, list[int]]:
    """Label column, id column and the feature columns of a file of ``n`` columns, all as 0-based indices."""
    label = _resolve_column(path, n, header, options.label, "label")
    dropped = {_resolve_column(path, n, header, ref, "dropped") for ref in options.drop}
    if label in dropped:
        raise ConfigError(f"{path}: column {label} is both the label and a dropped column")
    id_column = None
    if options.id_column is not None:
        id_column = _resolve_column(path, n, header, options.id_column, "id")
        if id_column == label:
            raise ConfigError(f"{path}: column {label} is both the label and the id column")
    features = [c for c in range(n) if c != label and c != id_column and c not in dropped]
    if not features:
        raise ConfigError(f"{path}: no feature columns left after the label, id and dropped columns")
    return label, id_column, features


def _parse_features(
    table: Table, columns: list[int], tokens: frozenset[str], skip: Container[int] = ()
) -> tuple[np.ndarray, np.ndarray, list[str], int]:
    """Feature values (m, n) (NaN where missing), a mask (m, n) of missing cells, the first
    :data:`MAX_REPORTED_PROBLEMS` problems found in file order, and how many more there were. The columns in
    ``skip`` (categorical ones) are left 0 and not missing."""
    X = np.zeros((len(table.rows), len(columns)))
    missing = np.zeros(X.shape, dtype=bool)
    problems: list[str] = []
    unlisted = 0
    numeric = [(k, c) for k, c in enumerate(columns) if c not in skip]
    for r, fields in enumerate(table.rows):
        values = X[r]
        for k, c in numeric:
            text = fields[c]
            if text in tokens:
                missing[r, k] = True
                values[k] = math.nan
                continue
            try:
                value = float(text)
            except ValueError:
                problem = f"{table.where(r, c)}: non-numeric feature value {text!r}"
            else:
                if math.isfinite(value):
                    values[k] = value
                    continue
                problem = f"{table.where(r, c)}: non-finite feature value {text!r}"
            if len(problems) < MAX_REPORTED_PROBLEMS:
                problems.append(problem)
            else:
                unlisted += 1
    return X, missing, problems, unlisted


def _declared_categorical(
    path: Path, n: int, header: tuple[str, ...] | None, options: DatasetOptions, feature_columns: list[int]
) -> list[int]:
    """The columns ``options.categorical`` names, as 0-based indices, sorted.

    Raises
    ------
    ConfigError
        A column that does not exist, or is the label, the id or a dropped column.
    """
    declared = {_resolve_column(path, n, header, ref, "categorical") for ref in options.categorical}
    for c in sorted(declared - set(feature_columns)):
        raise ConfigError(f"{path}: column {c} is declared categorical but is the label, the id or a dropped column")
    return sorted(declared)


def _categorical_columns(
    table: Table, feature_columns: list[int], options: DatasetOptions, tokens: frozenset[str]
) -> dict[int, str | None]:
    """The categorical feature columns: each declared one (None), and with ``options.infer_categorical`` each whose
    non-missing values are not all numbers, with the place and value of its first text ("line 7: 'F'").

    Raises
    ------
    DataError
        Text columns are inferred from a file read without --header whose first line looks like a header.
    """
    declared = _declared_categorical(table.path, table.n_columns, table.header, options, feature_columns)
    found: dict[int, str | None] = dict.fromkeys(declared)
    if not options.infer_categorical:
        return found
    for c in feature_columns:
        if c in found:
            continue
        r = next((r for r, row in enumerate(table.rows) if not _number_or_missing(row[c], tokens)), None)
        if r is not None:
            found[c] = f"line {table.line_numbers[r]}: {table.rows[r][c]!r}"
    if len(found) > len(declared) and not options.header and _looks_like_header(table, feature_columns, tokens):
        names = ", ".join(repr(table.rows[0][c]) for c in feature_columns[:_MAX_LISTED_VALUES])
        raise DataError(
            f"{table.path}: line {table.line_numbers[0]} looks like a header ({names}, ...): pass --header, or its "
            "names would be read as categories"
        )
    return found


def _category_codes(
    where: str, values: list[str | None], codes: np.ndarray, tokens: frozenset[str]
) -> tuple[np.ndarray, tuple[str, ...]]:
    """A categorical column's values as indices into its categories (NaN where missing), shape (m,), and the
    categories: its distinct non-missing values, stripped and sorted by :func:`category_order`.

    Parameters
    ----------
    where : str
        The column, for an error.
    values : list of str or None, length d
        The column's distinct raw values (None: a null).
    codes : ndarray of int, shape (m,)
        Each record's index into ``values``.
    tokens : frozenset of str
        Text that means a missing value.

    Raises
    ------
    DataError
        More distinct values than :data:`~ppsvm.data.schema.MAX_CATEGORIES`.
    """
    texts = [None if value is None else value.strip() for value in values]
    categories = tuple(sorted({text for text in texts if text is not None and text not in tokens}, key=category_order))
    if len(categories) > MAX_CATEGORIES:
        raise DataError(
            f"{where}: {len(categories):,} distinct values, more than the {MAX_CATEGORIES} categories a feature may "
            "have (free text, an id or a number column with a typo?): drop the column with --drop or fix it"
        )
    position = {category: float(k) for k, category in enumerate(categories)}
    lookup = np.array([math.nan if text is None else position.get(text, math.nan) for text in texts])
    return lookup[codes], categories


def shown_categories(categories: Sequence[str]) -> str:
    """Categories for a message: the first few, quoted, and how many in all."""
    listed = ", ".join(repr(category) for category in categories[:_MAX_LISTED_VALUES])
    return listed + (f", ... ({len(categories)} in all)" if len(categories) > _MAX_LISTED_VALUES else "")


def _column_where(path: Path, header: tuple[str, ...] | None, column: int) -> str:
    """A column for messages: file, 0-based column index and header name."""
    return f"{path}, column {column}" + (f" ({header[column]!r})" if header is not None else "")


def _looks_like_header(table: Table, columns: list[int], tokens: frozenset[str]) -> bool:
    """The first row is text in most feature columns, and in at least one of them every other row is a number
    (or missing): names over numbers."""
    if len(table.rows) < 2:
        return False

    text = [c for c in columns if not _number_or_missing(table.rows[0][c], tokens)]
    return len(text) * 2 > len(columns) and any(
        all(_number_or_missing(row[c], tokens) for row in table.rows[1:]) for c in text
    )


def _number_or_missing(text: str, tokens: frozenset[str]) -> bool:
    return text in tokens or _as_numbers([text]) is not None


def _problem_report(
    table: Table,
    problems: list[str],
    unlisted: int,
    refused: list[str],
    header: bool,
    columns: list[int],
    tokens: frozenset[str],
) -> str:
    """One message for every problem of a file: the feature values' (``unlisted`` more only counted), the missing
    values ``refused``, then the fixes that apply."""
    hints = []
    rows = table.rows
    if not header and _looks_like_header(table, columns, tokens):
        names = ", ".join(repr(table.rows[0][c]) for c in columns[:_MAX_LISTED_VALUES])
        hints.append(f"line {table.line_numbers[0]} looks like a header ({names}, ...): pass --header")
        rows = rows[1:]
    text_columns = sorted({c for c in columns for row in rows if not _number_or_missing(row[c], tokens)})
    if text_columns:
        shown = ",".join(map(str, text_columns[:_MAX_LISTED_VALUES]))
        hints.append(
            f"drop the column with --drop {shown} or encode it as numbers (missing values are spelt "
            + ", ".join(repr(t) for t in DEFAULT_MISSING_VALUES)
            + " unless --missing-values says otherwise)"
        )
    listed = "\n  ".join([*problems, *([f"... and {unlisted} more"] if unlisted else []), *refused])
    count = len(problems) + len(refused)
    counted = f"more than {count}" if unlisted else str(count)
    return "\n".join([f"{table.path}: {counted} problem(s):\n  {listed}", *hints])


def _record_ids(table: Table, id_column: int | None, tokens: frozenset[str]) -> np.ndarray:
    if id_column is None:
        return _row_numbers(len(table.rows))
    first_line: dict[str, int] = {}
    for r, fields in enumerate(table.rows):
        record_id = fields[id_column]
        if record_id in tokens:
            raise DataError(f"{table.where(r, id_column)}: missing record id {record_id!r}")
        if record_id in first_line:
            raise DataError(
                f"{table.where(r, id_column)}: duplicate record id {record_id!r} (also on line {first_line[record_id]})"
            )
        first_line[record_id] = table.line_numbers[r]
    return np.array(list(first_line))


def _apply_missing_policy(
    path: Path,
    options: DatasetOptions,
    missing: np.ndarray,
    label_missing: np.ndarray,
    missing_label: Callable[[int], NoReturn],
) -> np.ndarray:
    """The mask (m,) of rows kept under the missing-value policy (imputation is left to the split), given the
    missing features (m, n) and labels (m,); ``missing_label(row)`` raises for a missing label that is kept."""
    rows_missing = missing.any(axis=1)
    if options.missing == "drop":
        keep = ~(rows_missing | label_missing)
        n_dropped = int((~keep).sum())
        if not keep.any():
            raise DataError(f"{path}: every row has a missing value; nothing is left after dropping them")
        if n_dropped:
            logger.warning("%s: dropped %d of %d rows with missing values", path, n_dropped, len(keep))
        return keep

    if label_missing.any():
        missing_label(int(np.flatnonzero(label_missing)[0]))
    if not missing.any():
        return np.ones(len(missing), dtype=bool)

    # "refuse" was reported with the other problems; "impute" leaves NaN for split_dataset to fill per entity.
    logger.info(
        "%s: %d missing values in %d columns, to impute from each entity's training records",
        path,
        int(missing.sum()),
        int(missing.any(axis=0).sum()),
    )
    return np.ones(len(missing), dtype=bool)


def _missing_summary(table: Table, missing: np.ndarray, feature_columns: list[int]) -> str:
    """The first missing value, with how many rows and which columns have any (for ``missing="refuse"``)."""
    r, k = (int(i) for i in np.argwhere(missing)[0])
    columns = ", ".join(str(feature_columns[k]) for k in np.flatnonzero(missing.any(axis=0)))
    return (
        f"{table.where(r, feature_columns[k])}: missing value {table.rows[r][feature_columns[k]]!r} "
        f"({int(missing.any(axis=1).sum())} rows have missing values, in columns {columns}); "
        "pass --missing drop to drop those rows or --missing impute to fill them with each entity's training means"
    )


def _listing(counts: dict[str, int]) -> str:
    shown = ", ".join(f"{value!r} ({count})" for value, count in list(counts.items())[:_MAX_LISTED_VALUES])
    return shown + (", ..." if len(counts) > _MAX_LISTED_VALUES else "")


def _classification_labels(
    path: Path, label_column: int, raw: list[str], options: DatasetOptions
) -> tuple[np.ndarray, tuple[str, str] | None, tuple[str, ...] | None]:
    """Raw label strings (m,) as +1/-1 or class codes; the two values (:func:`_label_pair`) or the classes."""
    counts: dict[str, int] = {}
    for value in raw:
        counts[value] = counts.get(value, 0) + 1
    targets, classes = _label_targets(path, label_column, counts, options)
    target_of = dict(zip(counts, targets.tolist(), strict=True))
    y = np.array([target_of[value] for value in raw])
    return y, None if classes else _label_pair(list(target_of), list(target_of.values())), classes


def _label_pair(values: Sequence[str], signs: Sequence[float]) -> tuple[str, str] | None:
    """The raw label values (d,) of +1 and of -1 given each one's sign (d,), or None where a class has several."""
    positive = [value for value, sign in zip(values, signs, strict=True) if sign > 0]
    negative = [value for value, sign in zip(values, signs, strict=True) if sign < 0]
    return (positive[0], negative[0]) if len(positive) == len(negative) == 1 else None


def _label_targets(
    path: Path, label_column: int, counts: dict[str, int], options: DatasetOptions
) -> tuple[np.ndarray, tuple[str, ...] | None]:
    """Each distinct raw label's target, shape (d,), given each one's count in order of appearance: its sign, +1 or
    -1, for two classes; for three or more (with neither --positive nor --negative), its class code, with the
    classes in code order.

    Raises
    ------
    DataError
        The labels are not two classes that the options (or their values, -1/1 or 0/1) tell apart, nor 3 to
        :data:`MAX_CLASSES` classes.
    """
    where = f"{path}: label column {label_column}"
    chosen = options.positive if options.positive is not None else options.negative
    if chosen is not None:
        sign, flag = (1.0, "positive") if options.positive is not None else (-1.0, "negative")
        if chosen not in counts:
            raise DataError(f"{where} has no value {chosen!r} (the {flag} class); values found: {_listing(counts)}")
        if len(counts) == 1:
            raise DataError(f"{where}: every record has label {chosen!r}; a classifier needs two classes")
        return np.array([sign if value == chosen else -sign for value in counts]), None

    numeric = _as_numbers(list(counts))
    if numeric is not None and len(numeric) == 2 and set(numeric) in ({-1.0, 1.0}, {0.0, 1.0}):
        return np.where(np.array(numeric) == 1.0, 1.0, -1.0), None
    if 3 <= len(counts) <= MAX_CLASSES:
        classes = tuple(sorted(counts, key=category_order))
        code = {value: float(k) for k, value in enumerate(classes)}
        return np.array([code[value] for value in counts]), classes
    several = (
        f"{len(counts)} classes are more than one model per class should fit (at most {MAX_CLASSES}): "
        "for a real-valued target pass --task regress; "
        if len(counts) > MAX_CLASSES
        else ""
    )
    raise DataError(
        f"{where} has {len(counts)} distinct values ({_listing(counts)}), not two of -1/1 or 0/1; {several}"
        "pass --positive VALUE (that value -> +1, all others -> -1) or --negative VALUE"
    )


def _as_numbers(values: list[str]) -> list[float] | None:
    try:
        return [float(v) for v in values]
    except ValueError:
        return None


def _regression_targets(table: Table, label_column: int, rows: np.ndarray) -> np.ndarray:
    y = np.empty(len(rows))
    for i, r in enumerate(rows):
        text = table.rows[r][label_column]
        try:
            y[i] = float(text)
        except ValueError:
            raise DataError(f"{table.where(r, label_column)}: regression target {text!r} is not a number") from None
        if not math.isfinite(y[i]):
            raise DataError(f"{table.where(r, label_column)}: non-finite regression target {text!r}")
    return y
