"""UCI Adult (Census Income) as ``ppsvm reproduce dp`` uses it, read from the shipped gzip.

Two feature sets: the 12 features of the Figure 3 part (:func:`load_adult`), and 13 one-column attributes in the
order of Li et al. (2014)'s nested attribute subsets (section 5.1), for the counterparts of their Figures 5-9
(:func:`load_adult_attributes`).
"""

from __future__ import annotations

import gzip
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ppsvm.errors import DataError

ADULT_FILE = Path(__file__).resolve().parent / "data" / "adult.data.gz"
# The UCI file's name: the JSON and the Markdown name the data by it.
DATA_FILE = "adult.data"

# adult.data columns (0-based) and the values used.
AGE, WORKCLASS, EDUCATION_NUM, MARITAL, OCCUPATION, RELATIONSHIP, RACE, SEX = 0, 1, 4, 5, 6, 7, 8, 9
GAIN, LOSS, HOURS, COUNTRY, LABEL = 10, 11, 12, 13, 14
N_COLUMNS = 15
POSITIVE = ">50K"
MARITAL_VALUES = (
    "Divorced",
    "Married-AF-spouse",
    "Married-civ-spouse",
    "Married-spouse-absent",
    "Never-married",
    "Separated",
    "Widowed",
)
MISSING = "?"


@dataclass(frozen=True)
class Attribute:
    """One column of :func:`load_adult_attributes`: which Adult column, how it is encoded, what it stands for.

    Attributes
    ----------
    name : str
        The feature's name in the reports.
    column : int
        Its adult.data column.
    values : tuple of str
        Empty: the column is numeric. Else the feature is 1 where the column holds one of these values and 0
        elsewhere, '?' included (as the paper's is-single and is-married bits).
    paper : str
        The attribute of Li et al.'s census extracts it takes the place of.
    substitute : bool
        Adult has no counterpart of ``paper``: this is the next unused Adult attribute in the file's column order.
    log : bool
        Apply log1p (capital amounts: a fixed transform, see :func:`load_adult`).
    """

    name: str
    column: int
    values: tuple[str, ...]
    paper: str
    substitute: bool = False
    log: bool = False


# Li et al., section 5.1: the attribute subsets grow in the order age, gender, education, family size (5 dimensions
# with the label), then nativity, owner of dwelling, number of automobiles (8), then is single, is married, number of
# children (11), then the rest: disability, working hours, years residing (14). Where Adult has the attribute it is
# used in the paper's place; each of the six Adult lacks is replaced by the next Adult attribute no other place uses,
# in adult.data's column order (workclass, occupation, relationship, race, capital-gain, capital-loss; fnlwgt is a
# sampling weight, not an attribute of the person). The choice looks at no data.
ATTRIBUTES = (
    Attribute("age", AGE, (), "age"),
    Attribute("sex=Male", SEX, ("Male",), "gender"),
    Attribute("education-num", EDUCATION_NUM, (), "education"),
    Attribute("workclass=Private", WORKCLASS, ("Private",), "family size", substitute=True),
    Attribute("native-country=United-States", COUNTRY, ("United-States",), "nativity"),
    Attribute(
        "occupation=managerial/professional",
        OCCUPATION,
        ("Exec-managerial", "Prof-specialty"),
        "owner of dwelling",
        substitute=True,
    ),
    Attribute("relationship=Not-in-family", RELATIONSHIP, ("Not-in-family",), "number of automobiles", True),
    Attribute("marital=Never-married", MARITAL, ("Never-married",), "is single"),
    Attribute(
        "marital=married",
        MARITAL,
        ("Married-civ-spouse", "Married-AF-spouse", "Married-spouse-absent"),
        "is married",
    ),
    Attribute("race=White", RACE, ("White",), "number of children", substitute=True),
    Attribute("log1p(capital-gain)", GAIN, (), "disability", substitute=True, log=True),
    Attribute("hours-per-week", HOURS, (), "working hours per week"),
    Attribute("log1p(capital-loss)", LOSS, (), "years residing in the current location", substitute=True, log=True),
)
# The paper's dimensionalities count the label (annual income) as a dimension: d - 1 features each.
PAPER_DIMENSIONS = (5, 8, 11, 14)


@dataclass(frozen=True)
class Adult:
    """The records as features and labels, with what was checked at load.

    Attributes
    ----------
    X : ndarray, shape (m, d)
        :func:`load_adult`: d = 12, age, education-num, capital-gain, capital-loss, hours-per-week,
        marital-status one-hot (7). :func:`load_adult_attributes`: d = 13, the columns of ``ATTRIBUTES``.
    y : ndarray, shape (m,)
        +1 for ``>50K``, else -1.
    names : list of str, length d
    checks : dict
        Record and class counts and where '?' occurs.
    sha256 : str
        Of the uncompressed text (the UCI file's bytes).
    """

    X: np.ndarray
    y: np.ndarray
    names: list[str]
    checks: dict[str, Any]
    sha256: str


def read_rows(path: Path, required: tuple[int, ...]) -> tuple[list[list[str]], str]:
    """adult.data's records as stripped fields, checked, with the sha256 of the text.

    Parameters
    ----------
    path : Path
        ``adult.data`` (15 comma-separated fields per record), plain or gzip (by its ``.gz`` suffix).
    required : tuple of int
        Columns where a '?' is an error (those read as numbers, marital-status, the label).

    Raises
    ------
    DataError
        A record without 15 fields, a '?' in a required column, or unknown marital-status values.
    """
    raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    lines = [line for line in raw.decode("utf-8").splitlines() if line.strip()]
    rows = [[field.strip() for field in line.split(",")] for line in lines]
    bad = [k for k, r in enumerate(rows) if len(r) != N_COLUMNS]
    if bad:
        raise DataError(f"{path}: {len(bad)} records without {N_COLUMNS} fields (first: record {bad[0] + 1})")
    missing_used = {c: sum(r[c] == MISSING for r in rows) for c in required}
    if any(missing_used.values()):
        raise DataError(f"{path}: '?' in the columns used (column: count): {missing_used}")
    marital = sorted({r[MARITAL] for r in rows})
    if not set(marital) <= set(MARITAL_VALUES):
        raise DataError(f"{path}: unexpected marital-status values {sorted(set(marital) - set(MARITAL_VALUES))}")
    return rows, hashlib.sha256(raw).hexdigest()


def checks_of(rows: list[list[str]], y: np.ndarray, used: tuple[int, ...]) -> dict[str, Any]:
    """Record and class counts, and where '?' occurs (in the columns used and in all)."""
    return {
        "records": len(rows),
        "positives": int((y > 0).sum()),
        "negatives": int((y < 0).sum()),
        "question_marks_in_used_columns": {str(c): sum(r[c] == MISSING for r in rows) for c in used},
        "question_marks_by_column_all": {
            str(c): sum(r[c] == MISSING for r in rows) for c in range(N_COLUMNS) if any(r[c] == MISSING for r in rows)
        },
        "rows_with_any_question_mark": sum(any(f == MISSING for f in r) for r in rows),
    }


def labels(rows: list[list[str]]) -> np.ndarray:
    """+1 for ``>50K``, else -1; shape (m,)."""
    return np.where(np.array([r[LABEL] for r in rows]) == POSITIVE, 1.0, -1.0)


def load_adult(path: Path = ADULT_FILE, log_capital: bool = True) -> Adult:
    """UCI Adult as the Figure 3 part's 12 features and +-1 labels.

    Parameters
    ----------
    path : Path
        ``adult.data`` (15 comma-separated fields per record), plain or gzip (by its ``.gz`` suffix).
    log_capital : bool
        Apply log1p to capital-gain and capital-loss.

    Returns
    -------
    Adult

    Raises
    ------
    DataError
        A record without 15 fields, a '?' in a column used, or unknown marital-status values.
    """
    columns = (AGE, EDUCATION_NUM, GAIN, LOSS, HOURS)
    used = (AGE, EDUCATION_NUM, MARITAL, GAIN, LOSS, HOURS, LABEL)
    rows, sha256 = read_rows(path, used)
    numeric = np.array([[float(r[c]) for c in columns] for r in rows])
    if log_capital:
        numeric[:, 2:4] = np.log1p(numeric[:, 2:4])
    one_hot = np.array([[r[MARITAL] == v for v in MARITAL_VALUES] for r in rows], dtype=float)
    y = labels(rows)
    capital = "log1p({})" if log_capital else "{}"
    names = [
        "age",
        "education-num",
        capital.format("capital-gain"),
        capital.format("capital-loss"),
        "hours-per-week",
        *(f"marital={v}" for v in MARITAL_VALUES),
    ]
    return Adult(np.hstack([numeric, one_hot]), y, names, checks_of(rows, y, used), sha256)


def load_adult_attributes(path: Path = ADULT_FILE) -> Adult:
    """UCI Adult as the 13 one-column attributes of ``ATTRIBUTES``, in the paper's subset order, and +-1 labels.

    The first d - 1 columns are the subset of the paper's dimensionality d (``PAPER_DIMENSIONS``). A '?' (only in
    workclass, occupation and native-country, which are encoded as bits) counts as not the value; the checks
    record how many there are.

    Parameters
    ----------
    path : Path
        ``adult.data``, plain or gzip.

    Returns
    -------
    Adult
        X of shape (m, 13).

    Raises
    ------
    DataError
        As :func:`load_adult`.
    """
    numeric = tuple(a.column for a in ATTRIBUTES if not a.values)
    rows, sha256 = read_rows(path, (*numeric, MARITAL, LABEL))
    columns = []
    for attribute in ATTRIBUTES:
        if attribute.values:
            column = np.array([r[attribute.column] in attribute.values for r in rows], dtype=float)
        else:
            column = np.array([float(r[attribute.column]) for r in rows])
            if attribute.log:
                column = np.log1p(column)
        columns.append(column)
    y = labels(rows)
    used = tuple(sorted({a.column for a in ATTRIBUTES} | {LABEL}))
    names = [a.name for a in ATTRIBUTES]
    return Adult(np.column_stack(columns), y, names, checks_of(rows, y, used), sha256)
