"""The trained model file: JSON, written atomically, never holding B or data.

It records u, gamma, the kernel and its width, mbar, the partition (entity ids
and grid positions), the per-column-block feature scaling, whether the run was
private, and how it was trained.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ppsvm.core.calibration import Platt
from ppsvm.core.kernels import KERNELS, KernelName, is_kernel_name
from ppsvm.core.lp import Task, is_task
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
from ppsvm.errors import ConfigError

FORMAT = "ppsvm-model"
# Version 2 added the optional "labels" and "calibration"; version 1 files (without them) still load.
FORMAT_VERSION = 2
READABLE_VERSIONS = (1, 2)


@dataclass(frozen=True)
class ColumnScaling:
    """Per-feature [low, high] of one column block; features map to (x - low) / (high - low).

    ``epoch``: the basis epoch of the column block's B_j the model was trained in (its entities keep serving that
    epoch's pinned view for the model's predictions after a later epoch is opened).
    """

    column_block: int
    low: tuple[float, ...]
    high: tuple[float, ...]
    epoch: int = 0

    @property
    def n_features(self) -> int:
        return len(self.low)


def _column_row(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"columns must hold whole numbers, got {value!r}")
    return value


@dataclass(frozen=True)
class ModelEntity:
    id: str
    row_block: int
    column_block: int


@dataclass(frozen=True)
class Model(TwoClassOutputs):
    """A random-kernel classifier or regressor: f(x) = K(x', B') u - gamma.

    Attributes
    ----------
    u : tuple of float, one per kernel column (mbar, or len(columns))
    scaling : tuple of ColumnScaling, one per column block
    private : bool
        False when some entity's non-private override allowed mbar >= n_j.
    columns : tuple of tuple of int, optional
        The product basis (``coordinator train --basis product``): kernel column c combines
        column ``columns[c][j]`` of each block K(x_j', B_j'). None: the paper's basis, column k
        of every block.
    training : dict
        How it was trained (records, formulation, objective, seconds, tuning).
    federation : str
        The fingerprint of the federation it was trained on (:meth:`Session.fingerprint
        <ppsvm.coordinator.federation.Session.fingerprint>`): entity ids and cells, feature counts,
        the keyed checks of secrets, schemas and the record-id key. Serving or evaluating it against
        entities with another fingerprint is refused; "" (files from before it existed): not checked.
    labels : (str, str) or None
        Classification: the (negative, positive) label values the entities' configs declare (``[data] labels``)
        for -1 and +1; None when the labels were the numbers -1 and +1.
    calibration : Platt or None
        Classification: P(+1 | decision value), fitted on out-of-fold decision values of the training records
        (:mod:`ppsvm.core.calibration`); None in files from before version 2.
    """

    task: Task
    kernel: KernelName
    mu: float
    nu: float
    mbar: int
    u: tuple[float, ...]
    gamma: float
    private: bool
    scaling: tuple[ColumnScaling, ...]
    entities: tuple[ModelEntity, ...]
    columns: tuple[tuple[int, ...], ...] | None = None
    training: dict[str, Any] = field(default_factory=dict)
    federation: str = ""
    labels: tuple[str, str] | None = None
    calibration: Platt | None = None

    @property
    def column_index(self) -> np.ndarray | None:
        """``columns`` as the (p, s) array :func:`ppsvm.core.kernels.assemble` takes, or None."""
        return None if self.columns is None else np.array(self.columns, dtype=np.int64).reshape(len(self.columns), -1)

    def decision(self, K: np.ndarray) -> np.ndarray:
        """K u - gamma for assembled kernel rows K of shape (m, len(u)); returns shape (m,)."""
        if K.ndim != 2 or K.shape[1] != len(self.u):
            raise ValueError(f"kernel rows have shape {K.shape}; the model expects (m, {len(self.u)})")
        return K @ np.asarray(self.u) - self.gamma

    def prediction(self, decision: np.ndarray) -> np.ndarray:
        """The label (+1 or -1) for classification, the decision value itself for regression; same shape."""
        return np.where(decision >= 0, 1.0, -1.0) if self.task == "classify" else decision

    def to_json(self) -> str:
        return write_document(asdict(self), FORMAT, FORMAT_VERSION)

    @classmethod
    def from_json(cls, text: str, source: str = "model") -> Model:
        """Parse and validate a model file's text; ConfigError naming ``source`` when it is not one."""
        document = read_document(text, source, FORMAT, READABLE_VERSIONS)
        with invalid_file(source, "ppsvm model file"):
            if not is_task(document["task"]):
                raise ValueError(f"task must be 'classify' or 'regress', got {document['task']!r}")
            if not is_kernel_name(document["kernel"]):
                raise ValueError(f"kernel must be one of {', '.join(KERNELS)}, got {document['kernel']!r}")
            document["u"] = tuple(float(x) for x in document["u"])
            for key in ("gamma", "mu", "nu"):
                document[key] = number(document, key, source)
            if not isinstance(document["mbar"], int) or isinstance(document["mbar"], bool):
                raise ValueError(f"mbar must be a whole number, got {document['mbar']!r}")
            document["scaling"] = tuple(
                ColumnScaling(s["column_block"], tuple(s["low"]), tuple(s["high"]), _column_row(s.get("epoch", 0)))
                for s in document["scaling"]
            )
            document["entities"] = tuple(ModelEntity(**e) for e in document["entities"])
            read_outputs(document, source)
            if document.get("columns") is not None:
                document["columns"] = tuple(tuple(_column_row(k) for k in row) for row in document["columns"])
            model = cls(**document)
        if model.columns is None and len(model.u) != model.mbar:
            raise ConfigError(f"{source}: u has {len(model.u)} entries but mbar is {model.mbar}")
        if model.columns is not None:
            if len(model.u) != len(model.columns):
                raise ConfigError(f"{source}: u has {len(model.u)} entries but there are {len(model.columns)} columns")
            s = len(model.scaling)
            if any(len(row) != s or not all(0 <= k < model.mbar for k in row) for row in model.columns):
                raise ConfigError(
                    f"{source}: every entry of columns must list {s} block rows, each in [0, mbar = {model.mbar})"
                )
        if (model.labels is not None or model.calibration is not None) and model.task != "classify":
            raise ConfigError(f"{source}: labels and calibration belong to classification models")
        if not np.isfinite([*model.u, model.gamma, model.mu, model.nu]).all():
            raise ConfigError(f"{source}: u, gamma, mu and nu must be finite numbers")
        return model

    def save(self, path: str | Path) -> None:
        """Write atomically: a temporary file in the same directory, fsync, then rename."""
        write_model_file(path, self.to_json())

    @classmethod
    def load(cls, path: str | Path) -> Model:
        path = Path(path)
        return cls.from_json(read_model_text(path), str(path))
