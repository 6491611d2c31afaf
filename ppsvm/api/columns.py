"""The estimators' input: pandas columns of numbers and of categories, encoded as an entity's schema encodes them.

A pandas DataFrame's ``category``, object and string columns become one 0/1 column per category, the categories
being the values the fit data holds (sorted by :func:`ppsvm.data.schema.category_order`); its other columns are
numbers. Every value that cannot be encoded (text in a number column, a missing or infinite value, a category
not seen at fit) is an error naming its column, row and value. Anything other than a DataFrame goes through
scikit-learn's own checks, as before, unless the fit had categories (then its columns are read by position).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.utils.validation import check_array, check_X_y, validate_data

from ppsvm.data.schema import category_order
from ppsvm.errors import DataError

__all__ = ["ColumnEncoding", "encoded_blocks", "fit_input", "later_input"]

# Categories listed in an error.
_SHOWN = 8


@dataclass(frozen=True)
class ColumnEncoding:
    """How each column of the fit data is encoded.

    Attributes
    ----------
    names : tuple of str, length n
        The columns' names (their labels as text), for errors.
    categories : tuple of (tuple or None), length n
        A categorical column's categories, in encoding order; None for a number column.
    """

    names: tuple[str, ...]
    categories: tuple[tuple[Any, ...] | None, ...]

    @classmethod
    def fit(cls, frame: Any) -> ColumnEncoding:
        """The encoding of a DataFrame's columns (m, n): the categories of each categorical one, from its values (or a
        pandas category column's declared categories).

        Raises
        ------
        DataError
            A categorical column with a missing value or none at all.
        """
        names = tuple(str(name) for name in frame.columns)
        categories: list[tuple[Any, ...] | None] = []
        for k, name in enumerate(names):
            column = frame.iloc[:, k]
            if not _is_categorical(column):
                categories.append(None)
                continue
            _refuse_missing(column, name)
            # A pandas category column declares its categories, those its fit records lack too.
            values = column.cat.categories if str(column.dtype) == "category" else column.astype(object)
            categories.append(tuple(sorted(set(values.tolist()), key=category_order)))
        return cls(names, tuple(categories))

    def blocks(self) -> list[np.ndarray]:
        """Each column's indices among the encoded columns: shapes (1,) for a number, (categories,) for a category."""
        widths = [1 if categories is None else len(categories) for categories in self.categories]
        ends = np.cumsum(widths)
        return [np.arange(end - width, end) for end, width in zip(ends, widths, strict=True)]

    def encode(self, X: Any) -> np.ndarray:
        """X (m, n), a DataFrame or a 2-D array-like, as float64 (m, sum of widths): numbers as they are, each
        category as its 0/1 columns.

        Raises
        ------
        DataError
            Naming the column, row and value: text in a number column, a missing or infinite value, a category the
            fit data did not hold.
        """
        columns = _columns(X, len(self.names))
        parts = [
            _numbers(values, name) if categories is None else _one_hot(values, name, categories)
            for values, name, categories in zip(columns, self.names, self.categories, strict=True)
        ]
        return np.hstack(parts) if parts else np.empty((0, 0))

    @property
    def has_categories(self) -> bool:
        return any(categories is not None for categories in self.categories)


def fit_input(estimator: Any, X: Any, y: Any, **check: Any) -> tuple[np.ndarray, np.ndarray]:
    """``validate_data(estimator, X, y, dtype=float64, **check)`` for ``fit``, which also encodes a DataFrame.

    Sets ``estimator.columns_`` (a :class:`ColumnEncoding` for a DataFrame, else None); ``n_features_in_`` and
    ``feature_names_in_`` stay X's own columns.

    Returns
    -------
    X : ndarray of float64, shape (m, encoded width)
    y : ndarray, shape (m,)
    """
    if not _is_frame(X):
        estimator.columns_ = None
        X, y = validate_data(estimator, X, y, dtype=np.float64, **check)
        return X, y
    validate_data(estimator, X, skip_check_array=True)  # the original columns' count and names
    estimator.columns_ = ColumnEncoding.fit(X)
    X, y = check_X_y(estimator.columns_.encode(X), y, dtype=np.float64, **check)
    return X, y


def later_input(estimator: Any, X: Any) -> np.ndarray:
    """X (m, n_features_in_) after ``fit``, checked against the fit's columns and encoded as they were.

    Returns
    -------
    ndarray of float64, shape (m, encoded width)
    """
    encoding: ColumnEncoding | None = getattr(estimator, "columns_", None)
    if encoding is None or not (_is_frame(X) or encoding.has_categories):
        X = validate_data(estimator, X, reset=False, dtype=np.float64)
        return X
    validate_data(estimator, X, reset=False, skip_check_array=True)
    return check_array(encoding.encode(X), dtype=np.float64)


def encoded_blocks(encoding: ColumnEncoding | None, blocks: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Column blocks of the original columns as blocks of the encoded ones: a category's columns stay together."""
    if encoding is None:
        return list(blocks)
    where = encoding.blocks()
    return [np.concatenate([where[k] for k in block.tolist()]) for block in blocks]


def _is_frame(X: Any) -> bool:
    """A pandas DataFrame (recognised without importing pandas, which a user of numpy arrays need not have)."""
    return type(X).__name__ == "DataFrame" and hasattr(X, "iloc") and hasattr(X, "dtypes")


def _is_categorical(column: Any) -> bool:
    """A pandas column of categories, text or Python objects; bool and numeric columns are numbers."""
    import pandas as pd

    dtype = column.dtype
    return (
        isinstance(dtype, pd.CategoricalDtype)
        or pd.api.types.is_object_dtype(dtype)
        or (pd.api.types.is_string_dtype(dtype) and not pd.api.types.is_numeric_dtype(dtype))
    )


def _columns(X: Any, n: int) -> list[tuple[np.ndarray, Any]]:
    """X's n columns, each as (values as objects, shape (m,); row labels (m,) for errors)."""
    if _is_frame(X):
        rows = np.asarray(X.index, dtype=object)
        return [(X.iloc[:, k].astype(object).to_numpy(), rows) for k in range(n)]
    array = np.asarray(X, dtype=object)
    if array.ndim != 2 or array.shape[1] != n:
        raise DataError(f"X has shape {array.shape}; the fit's X had {n} columns")
    rows = np.arange(len(array), dtype=object)
    return [(array[:, k], rows) for k in range(n)]


def _numbers(column: tuple[np.ndarray, Any], name: str) -> np.ndarray:
    """A number column (m,) as float64 (m, 1)."""
    values, rows = column
    try:
        numbers = values.astype(np.float64)
    except (TypeError, ValueError):
        numbers = None
    if numbers is not None and np.isfinite(numbers).all():
        return numbers.reshape(-1, 1)
    # Value by value, to name the first one at fault.
    out = np.empty((len(values), 1))
    for i, (row, value) in enumerate(zip(rows.tolist(), values.tolist(), strict=True)):
        try:
            out[i, 0] = float(value)
        except (TypeError, ValueError):
            raise DataError(
                f"column {name!r}, row {row!r}: {str(value)[:40]!r} is not a number (the fit read this column as "
                "numbers; a column of categories should be a pandas category, object or string column)"
            ) from None
        if not math.isfinite(out[i, 0]):
            what = "a missing value (NaN)" if math.isnan(out[i, 0]) else f"{value!r} is not a finite number"
            raise DataError(f"column {name!r}, row {row!r}: {what}; fill or drop it before fit or predict")
    return out


def _one_hot(column: tuple[np.ndarray, Any], name: str, categories: tuple[Any, ...]) -> np.ndarray:
    """A categorical column (m,) as 0/1 columns (m, len(categories))."""
    values, rows = column
    position = {category: k for k, category in enumerate(categories)}
    out = np.zeros((len(values), len(categories)))
    for i, (row, value) in enumerate(zip(rows.tolist(), values.tolist(), strict=True)):
        k = position.get(value) if not _missing(value) else None
        if k is None:
            shown = ", ".join(repr(c) for c in categories[:_SHOWN]) + (", ..." if len(categories) > _SHOWN else "")
            what = (
                "a missing value"
                if _missing(value)
                else f"{value!r} is not a category of the fit data ({shown}); declare every category with a pandas "
                "category column (pandas.Categorical(values, categories=[...]))"
            )
            raise DataError(f"column {name!r}, row {row!r}: {what}")
        out[i, k] = 1.0
    return out


def _refuse_missing(column: Any, name: str) -> None:
    """A categorical column's missing values are an error: an entity's schema refuses them too, unless it imputes."""
    missing = column.isna().to_numpy()
    if missing.any():
        row = column.index[int(np.argmax(missing))]
        raise DataError(f"column {name!r}, row {row!r}: a missing value; fill or drop it before fit")
    if not len(column):
        raise DataError(f"column {name!r} holds no value to take its categories from")


def _missing(value: Any) -> bool:
    """None, NaN or pandas' NA (whose truth value is undefined)."""
    if value is None:
        return True
    try:
        return bool(value != value)
    except TypeError:  # pd.NA
        return True
