"""UCI Adult (Census Income) as Li et al. (2014) use it: 12 features and +-1 labels, read from the shipped gzip."""

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
AGE, EDUCATION_NUM, MARITAL, GAIN, LOSS, HOURS, LABEL = 0, 4, 5, 10, 11, 12, 14
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


@dataclass(frozen=True)
class Adult:
    """The records as features and labels, with what was checked at load.

    Attributes
    ----------
    X : ndarray, shape (m, 12)
        age, education-num, capital-gain, capital-loss, hours-per-week, marital-status one-hot (7).
    y : ndarray, shape (m,)
        +1 for ``>50K``, else -1.
    names : list of str, length 12
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


def load_adult(path: Path = ADULT_FILE, log_capital: bool = True) -> Adult:
    """UCI Adult as the paper's 12 features and +-1 labels.

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
    raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    lines = [line for line in raw.decode("utf-8").splitlines() if line.strip()]
    rows = [[field.strip() for field in line.split(",")] for line in lines]
    bad = [k for k, r in enumerate(rows) if len(r) != N_COLUMNS]
    if bad:
        raise DataError(f"{path}: {len(bad)} records without {N_COLUMNS} fields (first: record {bad[0] + 1})")
    used = (AGE, EDUCATION_NUM, MARITAL, GAIN, LOSS, HOURS, LABEL)
    missing_used = {c: sum(r[c] == "?" for r in rows) for c in used}
    if any(missing_used.values()):
        raise DataError(f"{path}: '?' in the columns used (column: count): {missing_used}")
    marital = sorted({r[MARITAL] for r in rows})
    if not set(marital) <= set(MARITAL_VALUES):
        raise DataError(f"{path}: unexpected marital-status values {sorted(set(marital) - set(MARITAL_VALUES))}")
    numeric = np.array([[float(r[c]) for c in (AGE, EDUCATION_NUM, GAIN, LOSS, HOURS)] for r in rows])
    if log_capital:
        numeric[:, 2:4] = np.log1p(numeric[:, 2:4])
    one_hot = np.array([[r[MARITAL] == v for v in MARITAL_VALUES] for r in rows], dtype=float)
    y = np.where(np.array([r[LABEL] for r in rows]) == POSITIVE, 1.0, -1.0)
    capital = "log1p({})" if log_capital else "{}"
    names = [
        "age",
        "education-num",
        capital.format("capital-gain"),
        capital.format("capital-loss"),
        "hours-per-week",
        *(f"marital={v}" for v in MARITAL_VALUES),
    ]
    checks = {
        "records": len(rows),
        "positives": int((y > 0).sum()),
        "negatives": int((y < 0).sum()),
        "question_marks_in_used_columns": {str(c): n for c, n in missing_used.items()},
        "question_marks_by_column_all": {
            str(c): sum(r[c] == "?" for r in rows) for c in range(N_COLUMNS) if any(r[c] == "?" for r in rows)
        },
        "rows_with_any_question_mark": sum(any(f == "?" for f in r) for r in rows),
    }
    return Adult(np.hstack([numeric, one_hot]), y, names, checks, hashlib.sha256(raw).hexdigest())
