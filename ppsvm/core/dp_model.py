"""The differentially private RBF model file: JSON, written atomically.

One file format for the three methods of Li et al. (2014) and their reference:

- ``dp-hybrid`` and ``private-svm``: f(x) = w' zhat(scale(x)), with rho (D x d)
  learned from public records or drawn at random, and w the n_i-weighted mean of
  the entities' released (noised) weights;
- ``public-only``: an RBF SVM on the public records alone, f(x) = sum_i c_i
  (k(x_i, x) + 1); public records may be stored, private ones never are.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ppsvm.core.calibration import Platt
from ppsvm.core.model import Model
from ppsvm.core.model_file import (
    TwoClassOutputs,
    invalid_file,
    number,
    read_document,
    read_model_text,
    read_outputs,
    write_document,
    write_model_file,
)
from ppsvm.core.multiclass import FORMAT as MULTICLASS_FORMAT
from ppsvm.core.multiclass import MulticlassModel
from ppsvm.errors import ConfigError

# With these bounds (and rho's, ppsvm.core.fourier.MAX_RHO_ROW_L1) every decision value is a finite number
# for every record: |w' zhat(x)| <= ||w||_1, and the public-only sum is at most 2 ||c||_1. A model beyond them
# is refused when read, so an entity never evaluates one whose failure would depend on a record (issue 27).
MAX_WEIGHTS_L1 = 1e12
MAX_THRESHOLD = 1e12
MAX_KERNEL_WIDTH = 1e12

FORMAT = "ppsvm-dp-model"
# Version 2 added the optional "labels" and "calibration"; version 1 files (without them) still load.
FORMAT_VERSION = 2
READABLE_VERSIONS = (1, 2)
METHODS = ("dp-hybrid", "private-svm", "public-only")


@dataclass(frozen=True)
class DpEntity:
    """An entity that contributed weights, with its record count (the weight of its release)."""

    id: str
    n_train: int
    noise: str


@dataclass(frozen=True)
class DpModel(TwoClassOutputs):
    """A random-Fourier-feature (or public-only RBF) classifier.

    Attributes
    ----------
    method : str
        One of :data:`METHODS`.
    mechanism : str
        How the weights were protected ("laplace", "output-gamma", "objective",
        "none" for NOT PRIVATE, "public" for public-only).
    epsilon : float or None
        Each entity's release is epsilon-DP for its own records; None when not private.
    private : bool
    low, high : tuple of float, length d
        Per-feature scaling from the public records.
    kernel_width : float
        gamma of exp(-gamma ||x - y||^2), from the public records.
    C : float
    rho : tuple of tuple of float, shape (D, d); empty for public-only
    weights : tuple of float, length 2D; empty for public-only
    basis : tuple of tuple of float, shape (n_public, d); public-only: the scaled public records
    dual_coef : tuple of float, length n_public; public-only
    entities : tuple of DpEntity
    training : dict
    threshold : float
        Subtracted from w' zhat(x): the decision threshold the entities' DP score histograms chose
        (:mod:`ppsvm.core.threshold`), 0 when none was chosen. Public-only models keep 0.
    schema : dict
        The features as the entities declare them (an entity config's ``[schema]`` table: ``{"features": [...]}``),
        through which records to score are read; empty in files written before models carried it.
    labels : (str, str) or None
        The (negative, positive) label values the entities declare; None for the numbers -1 and +1.
    calibration : Platt or None
        P(+1 | decision value), fitted on the public records' decision values (DP methods; their weights come from
        the entities' records, so the public records are out of sample). None for public-only models, which were
        fitted on those records.
    """

    method: str
    mechanism: str
    epsilon: float | None
    private: bool
    low: tuple[float, ...]
    high: tuple[float, ...]
    kernel_width: float
    C: float
    rho: tuple[tuple[float, ...], ...] = ()
    weights: tuple[float, ...] = ()
    basis: tuple[tuple[float, ...], ...] = ()
    dual_coef: tuple[float, ...] = ()
    entities: tuple[DpEntity, ...] = ()
    training: dict[str, Any] = field(default_factory=dict)
    task: str = "classify"
    threshold: float = 0.0
    schema: dict[str, Any] = field(default_factory=dict)
    labels: tuple[str, str] | None = None
    calibration: Platt | None = None

    @property
    def n_features(self) -> int:
        return len(self.low)

    def prediction(self, decision: np.ndarray) -> np.ndarray:
        """The label, +1 where the decision value is >= 0 and -1 elsewhere; same shape."""
        return np.where(decision >= 0, 1.0, -1.0)

    def decision(self, X: np.ndarray) -> np.ndarray:
        """Decision values for raw feature rows X of shape (m, d); returns shape (m,)."""
        from ppsvm.core.fourier import apply_scaling, fourier_features
        from ppsvm.core.kernels import gaussian_kernel
        from ppsvm.core.linear_svm import decision

        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != self.n_features:
            raise ConfigError(f"X has shape {X.shape}; the model expects {self.n_features} features")
        scaled = apply_scaling(X, np.asarray(self.low), np.asarray(self.high))
        if self.method == "public-only":
            return decision(gaussian_kernel(scaled, np.asarray(self.basis), self.kernel_width), self._public_svm)
        return fourier_features(scaled, np.asarray(self.rho)) @ np.asarray(self.weights) - self.threshold

    @property
    def _public_svm(self) -> Any:
        """The public-only model's dual coefficients as ppsvm.core.linear_svm's KernelSVM, so one function predicts."""
        from ppsvm.core.linear_svm import KernelSVM

        return KernelSVM(dual_coef=np.asarray(self.dual_coef), objective=float("nan"), sweeps=0)

    def to_json(self) -> str:
        return write_document(asdict(self), FORMAT, FORMAT_VERSION)

    @classmethod
    def from_json(cls, text: str, source: str = "model") -> DpModel:
        document = read_document(text, source, FORMAT, READABLE_VERSIONS)
        with invalid_file(source, "ppsvm DP model file"):
            for key in ("kernel_width", "C"):
                document[key] = number(document, key, source)
            # Files written before thresholds existed have none: 0 is what they decided with.
            document["threshold"] = number({"threshold": 0.0, **document}, "threshold", source)
            for key in ("low", "high", "weights", "dual_coef"):
                document[key] = tuple(float(v) for v in document.get(key, ()))
            for key in ("rho", "basis"):
                document[key] = tuple(tuple(float(v) for v in row) for row in document.get(key, ()))
            document["entities"] = tuple(DpEntity(**e) for e in document.get("entities", ()))
            read_outputs(document, source)
            model = cls(**document)
        model.validate(source)
        return model

    def validate(self, source: str) -> None:
        """Shapes agree and every number is finite; ConfigError naming ``source`` otherwise."""
        if self.method not in METHODS:
            raise ConfigError(f"{source}: method must be one of {', '.join(METHODS)}, got {self.method!r}")
        d = self.n_features
        if len(self.high) != d or d == 0:
            raise ConfigError(f"{source}: low and high must have the same, non-zero length")
        if self.method == "public-only":
            if not self.basis or any(len(row) != d for row in self.basis) or len(self.dual_coef) != len(self.basis):
                raise ConfigError(
                    f"{source}: a public-only model needs basis rows of {d} features and one dual coefficient each"
                )
        elif not self.rho or any(len(row) != d for row in self.rho) or len(self.weights) != 2 * len(self.rho):
            raise ConfigError(f"{source}: rho must be D x {d} and weights of length 2D")
        if self.method == "public-only" and self.threshold != 0.0:
            raise ConfigError(f"{source}: a public-only model has no threshold")
        if not isinstance(self.schema, dict):
            raise ConfigError(f"{source}: schema must be a table of features")
        numbers = [*self.low, *self.high, self.kernel_width, self.C, self.threshold, *self.weights, *self.dual_coef]
        numbers += [v for row in (*self.rho, *self.basis) for v in row]
        if not np.isfinite(numbers).all():
            raise ConfigError(f"{source}: every number in the model must be finite")
        self._check_bounds(source)

    def _check_bounds(self, source: str) -> None:
        """Refuse a model whose decision could fail, or be infinite, on some record (see MAX_WEIGHTS_L1)."""
        from ppsvm.core.fourier import MAX_RHO_ROW_L1, SCALED_BOX

        limits = (
            ("high >= low for every feature", all(h >= lo for lo, h in zip(self.low, self.high, strict=True))),
            (
                f"rho rows of absolute sum <= {MAX_RHO_ROW_L1:g}",
                all(sum(map(abs, r)) <= MAX_RHO_ROW_L1 for r in self.rho),
            ),
            (f"weights of absolute sum <= {MAX_WEIGHTS_L1:g}", sum(map(abs, self.weights)) <= MAX_WEIGHTS_L1),
            (
                f"dual coefficients of absolute sum <= {MAX_WEIGHTS_L1:g}",
                sum(map(abs, self.dual_coef)) <= MAX_WEIGHTS_L1,
            ),
            (f"|threshold| <= {MAX_THRESHOLD:g}", abs(self.threshold) <= MAX_THRESHOLD),
            (f"kernel_width in (0, {MAX_KERNEL_WIDTH:g}]", 0 < self.kernel_width <= MAX_KERNEL_WIDTH),
            (f"basis values within +-{SCALED_BOX:g}", all(abs(v) <= SCALED_BOX for r in self.basis for v in r)),
        )
        broken = [rule for rule, kept in limits if not kept]
        if broken:
            raise ConfigError(f"{source}: the model must have {'; '.join(broken)}")

    def save(self, path: str | Path) -> None:
        """Write atomically: a temporary file in the same directory, fsync, then rename."""
        write_model_file(path, self.to_json())


def load_any_model(path: str | Path) -> Any:
    """A random-kernel :class:`ppsvm.core.model.Model`, a :class:`~ppsvm.core.multiclass.MulticlassModel` or a
    :class:`DpModel`, by the file's format."""
    path = Path(path)
    return parse_any_model(read_model_text(path), str(path))


def parse_any_model(text: str, source: str) -> Any:
    """:func:`load_any_model` for text already read (e.g. received over the wire)."""
    try:
        kind = json.loads(text).get("format")
    except (ValueError, AttributeError, RecursionError) as exc:
        raise ConfigError(f"{source} is not a ppsvm model file: {type(exc).__name__}") from None
    if kind == FORMAT:
        return DpModel.from_json(text, source)
    return MulticlassModel.from_json(text, source) if kind == MULTICLASS_FORMAT else Model.from_json(text, source)
