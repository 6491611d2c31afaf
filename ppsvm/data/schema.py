"""An entity's declared feature schema: names, types, missing-value policy, categories.

A schema is written in the entity's config (``[[schema.features]]``) and agreed among the
members of a column block, so that every member encodes its rows into the same n_j columns
without looking at anyone's data:

- a ``number`` feature is one column; a missing value is refused (naming the file, row and
  column) unless the schema states a value to impute;
- a ``category`` feature becomes one 0/1 column per category **declared in the config**, in
  the declared order. An entity never learns them from its records: the encoded width would
  then publish which categories its records hold. ``ppsvm split`` and ``ppsvm schema infer``
  propose them (sorted by :func:`category_order`) from the whole file its owner holds, before
  any split, for the column block to agree on. A value outside the declared list is refused;
  a missing one is refused or imputed with a declared category.

- a ``number`` feature may declare its bounds ``low`` and ``high``, agreed by the column block (they are in
  the fingerprint): the [0, 1] scaling of the random kernel then comes from them, not from the records'
  minimum and maximum, so no extreme of the data leaves the entity, nobody can choose the scaling, and new
  records never change it (a value outside is clipped to the bounds). ``ppsvm split`` proposes them from
  the data, rounded outwards (:func:`outward_bounds`), for the owners to confirm.

``Schema.fingerprint()`` hashes the canonical form, so the column block's features check and a
model file can tell two schemas apart.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from ppsvm.errors import ConfigError, DataError

FeatureType = Literal["number", "category"]
FEATURE_TYPES: tuple[FeatureType, ...] = ("number", "category")
SCHEMA_VERSION = 1
# More one-hot columns than this from one feature is a free-text column declared as a category.
MAX_CATEGORIES = 1000


@dataclass(frozen=True)
class Feature:
    """One declared feature.

    Attributes
    ----------
    name : str
        The column's name in the entity's source.
    type : {"number", "category"}
    categories : tuple of str
        The declared categories, in encoding order (category features only).
    impute : float or str or None
        What a missing value becomes: a number (number features) or one of ``categories``;
        None refuses missing values.
    low, high : float or None
        The declared bounds of a number feature (both or neither), low < high.
    """

    name: str
    type: FeatureType
    categories: tuple[str, ...] = ()
    impute: float | str | None = None
    low: float | None = None
    high: float | None = None

    @property
    def encoded_names(self) -> tuple[str, ...]:
        """The names of the columns this feature becomes: itself, or ``name=category`` per category."""
        if self.type == "number":
            return (self.name,)
        return tuple(f"{self.name}={category}" for category in self.categories)

    def as_dict(self) -> dict[str, Any]:
        entry: dict[str, Any] = {"name": self.name, "type": self.type}
        if self.type == "category":
            entry["categories"] = list(self.categories)
        if self.impute is not None:
            entry["impute"] = self.impute
        if self.low is not None and self.high is not None:
            entry["low"], entry["high"] = self.low, self.high
        return entry


# Where a value sits, for error messages: (row index within the batch, column name) -> "file x, line 7".
Locate = Callable[[int, str], str]


@dataclass(frozen=True)
class Schema:
    """The ordered features an entity encodes; see the module docstring."""

    features: tuple[Feature, ...]

    @property
    def encoded_names(self) -> tuple[str, ...]:
        """Names of the encoded columns, in order; their count is n_j."""
        return tuple(name for feature in self.features for name in feature.encoded_names)

    @property
    def source_columns(self) -> tuple[str, ...]:
        return tuple(feature.name for feature in self.features)

    def declared_bounds(self) -> tuple[np.ndarray, np.ndarray] | None:
        """Per encoded column, (low, high): the declared bounds, [0, 1] for a category's 0/1 columns; shapes (n_j,).

        None unless every number feature declares its bounds (the scaling then falls back to the data's range).
        """
        if any(f.type == "number" and (f.low is None or f.high is None) for f in self.features):
            return None
        lows: list[float] = []
        highs: list[float] = []
        for feature in self.features:
            width = len(feature.encoded_names)
            lows += [0.0] * width if feature.low is None else [feature.low]
            highs += [1.0] * width if feature.high is None else [feature.high]
        return np.array(lows), np.array(highs)

    def as_dict(self) -> dict[str, Any]:
        """The canonical form: what ``ppsvm split`` writes and what the fingerprint hashes."""
        return {"version": SCHEMA_VERSION, "features": [feature.as_dict() for feature in self.features]}

    def fingerprint(self) -> str:
        """SHA-256 (hex) of the canonical JSON form: equal exactly when the schemas encode alike."""
        text = json.dumps(self.as_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def encode(self, columns: Mapping[str, Sequence[Any]], missing: frozenset[str], locate: Locate) -> np.ndarray:
        """Encode one batch of source rows.

        Parameters
        ----------
        columns : mapping of column name to sequence, each of length k
            The raw values: text (CSV), numbers, or None for a database's or Parquet's null.
        missing : frozenset of str
            Text that means a missing value (after stripping whitespace).
        locate : callable
            ``locate(row, column)`` names a value's place in the source for an error.

        Returns
        -------
        ndarray of float64, shape (k, n_j)

        Raises
        ------
        DataError
            A missing value with no imputation, text that is not a number, a category that
            was not declared; naming where.
        """
        rows = len(next(iter(columns.values()))) if columns else 0
        parts = [encode_feature(feature, columns[feature.name], rows, missing, locate) for feature in self.features]
        return np.hstack(parts) if parts else np.empty((rows, 0))


def _is_missing(value: Any, missing: frozenset[str]) -> bool:
    if value is None:
        return True
    if isinstance(value, str):
        return value.strip() in missing
    return isinstance(value, float | np.floating) and math.isnan(value)  # a null in a float column


def encode_feature(
    feature: Feature, values: Sequence[Any], rows: int, missing: frozenset[str], locate: Locate
) -> np.ndarray:
    """One feature's encoded columns for ``rows`` raw values, shape (rows, 1) or (rows, len(categories)).

    Raises
    ------
    DataError
        As :meth:`Schema.encode`.
    """
    if feature.type == "number":
        column = None
        # The common case, at numpy's speed: every value a number or numeric text. Not where a missing-value token
        # is itself a number ("-999"): numpy would read it as one, and it would be missing only in batches that
        # also hold a value numpy cannot read.
        if not has_numeric_token(missing):
            try:
                column = np.asarray(values, dtype=np.float64)
            except (TypeError, ValueError):
                pass
        if column is not None and column.shape == (rows,) and np.isfinite(column).all():
            return column.reshape(rows, 1)
        out = np.empty((rows, 1))
        for row, value in enumerate(values):
            if _is_missing(value, missing):
                if feature.impute is None:
                    raise DataError(f"{locate(row, feature.name)}: missing value and the schema imputes none")
                out[row, 0] = float(feature.impute)
                continue
            out[row, 0] = _number(value, feature.name, row, locate)
        return out
    position = {category: k for k, category in enumerate(feature.categories)}
    out = np.zeros((rows, len(feature.categories)))
    for row, value in enumerate(values):
        if _is_missing(value, missing):
            if feature.impute is None:
                raise DataError(f"{locate(row, feature.name)}: missing value and the schema imputes none")
            value = feature.impute
        text = value.strip() if isinstance(value, str) else _category_text(value)
        k = position.get(text)
        if k is None:
            shown = ", ".join(repr(c) for c in feature.categories[:8])
            raise DataError(
                f"{locate(row, feature.name)}: {text!r} is not a declared category ({shown}"
                f"{', ...' if len(feature.categories) > 8 else ''})"
            )
        out[row, k] = 1.0
    return out


@functools.cache
def has_numeric_token(missing: frozenset[str]) -> bool:
    """Whether a missing-value token reads as a finite number (float() of it), such as "-999"."""
    for token in missing:
        try:
            if math.isfinite(float(token)):
                return True
        except ValueError:
            continue
    return False


def _category_text(value: Any) -> str:
    """A database's or Parquet's non-text category (an integer code, a boolean) as the config writes it."""
    if isinstance(value, bool | np.bool_):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _number(value: Any, name: str, row: int, locate: Locate) -> float:
    try:
        number = float(value.strip() if isinstance(value, str) else value)
    except (TypeError, ValueError):
        raise DataError(f"{locate(row, name)}: {str(value)[:40]!r} is not a number") from None
    if not math.isfinite(number):
        raise DataError(f"{locate(row, name)}: {str(value)[:40]!r} is not a finite number")
    return number


def category_order(value: Any) -> tuple[int, float, str]:
    """Sort key of categories: numbers (or text that reads as one) by value first, then text as text.

    Every category list proposed from data (``ppsvm split``, ``ppsvm schema infer``, the estimators) is sorted by it,
    so that its order never depends on which value came first and 1, 2, 10 stay in that order.
    """
    if isinstance(value, bool | np.bool_):
        return 0, float(value), str(value)
    try:
        number = float(value)
    except (TypeError, ValueError):
        return 1, 0.0, str(value)
    return (0, number, str(value)) if math.isfinite(number) else (1, 0.0, str(value))


def parse_schema(table: Any, where: str) -> Schema:
    """The ``[schema]`` table of a config: ``features = [{name, type, categories?, impute?}, ...]``.

    Raises
    ------
    ConfigError
        Naming the feature and key at fault.
    """
    if not isinstance(table, dict) or set(table) - {"features"}:
        raise ConfigError(f"{where}: [schema] must hold only 'features', a list of feature tables")
    entries = table.get("features")
    if not isinstance(entries, list) or not entries:
        raise ConfigError(f"{where}: [schema] needs at least one [[schema.features]] entry")
    features = [_parse_feature(entry, f"{where} [[schema.features]] #{k + 1}") for k, entry in enumerate(entries)]
    names = [feature.name for feature in features]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ConfigError(f"{where}: feature(s) {', '.join(map(repr, repeated))} declared more than once")
    return Schema(tuple(features))


def _parse_feature(entry: Any, where: str) -> Feature:
    if not isinstance(entry, dict):
        raise ConfigError(f"{where}: must be a table with 'name' and 'type'")
    unknown = sorted(set(entry) - {"name", "type", "categories", "impute", "low", "high"})
    if unknown:
        raise ConfigError(
            f"{where}: unknown key(s) {', '.join(unknown)}; allowed: name, type, categories, impute, low, high"
        )
    name, kind = entry.get("name"), entry.get("type", "number")
    if not isinstance(name, str) or not name.strip() or name != name.strip():
        raise ConfigError(f"{where}: 'name' must be a non-empty column name without surrounding spaces")
    where = f"{where} ({name!r})"
    if kind not in FEATURE_TYPES:
        raise ConfigError(f"{where}: 'type' must be one of {', '.join(FEATURE_TYPES)}, got {kind!r}")
    impute = entry.get("impute")
    if kind == "number":
        if "categories" in entry:
            raise ConfigError(f"{where}: 'categories' applies to category features only")
        if impute is not None and (
            isinstance(impute, bool) or not isinstance(impute, int | float) or not math.isfinite(impute)
        ):
            raise ConfigError(f"{where}: 'impute' must be a finite number, got {impute!r}")
        low, high = _bounds(entry, where)
        return Feature(name, "number", impute=None if impute is None else float(impute), low=low, high=high)
    if "low" in entry or "high" in entry:
        raise ConfigError(f"{where}: 'low' and 'high' apply to number features only (a category's columns are 0/1)")
    categories = entry.get("categories")
    if (
        not isinstance(categories, list)
        or not categories
        or not all(isinstance(c, str) and c == c.strip() and c for c in categories)
    ):
        raise ConfigError(f"{where}: 'categories' must list the category values as non-empty strings")
    if len(set(categories)) != len(categories):
        raise ConfigError(f"{where}: a category is listed twice")
    if len(categories) > MAX_CATEGORIES:
        raise ConfigError(f"{where}: {len(categories)} categories, at most {MAX_CATEGORIES}")
    if impute is not None and impute not in categories:
        raise ConfigError(f"{where}: 'impute' must be one of the declared categories, got {impute!r}")
    return Feature(name, "category", tuple(categories), impute)


def numeric_schema(names: Sequence[str]) -> Schema:
    """Every column a number, missing values refused: the schema of a plain cell CSV."""
    return Schema(tuple(Feature(name, "number") for name in names))


def _bounds(entry: dict[str, Any], where: str) -> tuple[float | None, float | None]:
    if ("low" in entry) != ("high" in entry):
        raise ConfigError(f"{where}: declare both 'low' and 'high', or neither")
    if "low" not in entry:
        return None, None
    low, high = entry["low"], entry["high"]
    for key, value in (("low", low), ("high", high)):
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise ConfigError(f"{where}: {key!r} must be a finite number, got {value!r}")
    if not low < high:
        raise ConfigError(f"{where}: 'low' must be below 'high', got {low!r} and {high!r}")
    return float(low), float(high)


def outward_bounds(low: float, high: float) -> tuple[float, float]:
    """``[low, high]`` widened to two significant digits of its larger end (6.981..28.11 becomes 6..29).

    What ``ppsvm split`` proposes as a feature's declared bounds: round numbers an owner can read and confirm (or
    widen to the range the field allows), never narrower than the data. A constant feature gets one step of width.
    """
    if not (math.isfinite(low) and math.isfinite(high) and low <= high):
        raise ValueError(f"bounds must be finite with low <= high, got {low} and {high}")
    magnitude = max(abs(low), abs(high))
    step = 10.0 ** (math.floor(math.log10(magnitude)) - 1) if magnitude > 0 else 1.0
    # Printed as a person would have written them (the multiplication leaves 0.30000000000000004), then checked:
    # neither the rounding to a step nor the printing may cut into the data.
    lower = float(f"{math.floor(low / step) * step:.12g}")
    while lower > low:
        lower = float(f"{lower - step:.12g}")
    upper = float(f"{math.ceil(high / step) * step:.12g}")
    while upper < high or upper <= lower:
        upper = float(f"{upper + step:.12g}")
    return lower, upper
