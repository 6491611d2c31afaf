"""Argument checks shared by the DP pipeline's modules (fourier, linear_svm, dp): each names the argument."""

from __future__ import annotations

import math
from numbers import Integral, Real

import numpy as np

from ppsvm.errors import DataError

# Rows of zhat have norm 1 up to rounding of cos^2 + sin^2; anything larger is not a zhat.
NORM_SLACK = 1e-9


def check_real(value: object, name: str) -> float:
    """A real number (not bool), else TypeError."""
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    return float(value)


def check_positive(value: object, name: str) -> float:
    """A finite real > 0: TypeError for a wrong type, ValueError for a wrong value."""
    x = check_real(value, name)
    if not (math.isfinite(x) and x > 0):
        raise ValueError(f"{name} must be finite and > 0, got {x}")
    return x


def check_count(value: object, name: str) -> int:
    """An integer >= 1."""
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}")
    if value < 1:
        raise ValueError(f"{name} must be >= 1, got {value}")
    return int(value)


def check_generator(rng: object) -> np.random.Generator:
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    return rng


def as_matrix(X: object, name: str) -> np.ndarray:
    """A finite 2-D float array, else DataError naming the shape."""
    A = np.asarray(X, dtype=float)
    if A.ndim != 2:
        raise DataError(f"{name} must be 2-D (records x features), got shape {A.shape}")
    if A.shape[0] == 0 or A.shape[1] == 0:
        raise DataError(f"{name} is empty: shape {A.shape}")
    if not np.isfinite(A).all():
        rows = np.flatnonzero(~np.isfinite(A).all(axis=1))
        raise DataError(f"{name} has non-finite values in {rows.size} rows (first: row {rows[0]})")
    return A


def as_vector(v: object, name: str, size: int | None = None) -> np.ndarray:
    a = np.asarray(v, dtype=float)
    if a.ndim != 1:
        raise DataError(f"{name} must be 1-D, got shape {a.shape}")
    if size is not None and a.size != size:
        raise DataError(f"{name} has shape {a.shape}, expected ({size},)")
    if not np.isfinite(a).all():
        raise DataError(f"{name} has non-finite entries")
    return a


def check_labels(y: object, n_rows: int, matrix_name: str) -> np.ndarray:
    """Labels of shape (n_rows,) in {-1, +1}, as floats."""
    labels = np.asarray(y)
    if labels.ndim != 1 or labels.shape[0] != n_rows:
        raise DataError(f"y has shape {labels.shape} but {matrix_name} has {n_rows} rows: expected ({n_rows},)")
    try:
        labels = labels.astype(float)
    except (TypeError, ValueError) as exc:
        raise DataError(f"labels must be -1 or +1, got dtype {np.asarray(y).dtype}") from exc
    bad = np.flatnonzero((labels != 1.0) & (labels != -1.0))
    if bad.size:
        raise DataError(
            f"labels must be -1 or +1; {bad.size} are not (first: y[{bad[0]}] = {np.asarray(y)[bad[0]].tolist()!r})"
        )
    return labels


def check_unit_rows(Z: np.ndarray) -> None:
    """Every sensitivity bound here assumes ||z_i|| <= 1: refuse larger rows."""
    norms = np.linalg.norm(Z, axis=1)
    bad = np.flatnonzero(norms > 1.0 + NORM_SLACK)
    if bad.size:
        raise DataError(
            f"{bad.size} feature rows have norm > 1 (first: row {bad[0]}, norm {norms[bad[0]]:.12g}); "
            "the DP mechanisms need ||z|| <= 1, which fourier_features guarantees"
        )
