"""Several classes: one-vs-rest random-kernel models solved on one fetched kernel.

Member c of a :class:`MulticlassModel` is the binary model of class c (+1) against the others (-1), tuned,
solved and calibrated on the same assembled K(A, B') as the others: the entities compute and release their kernel
blocks once, whatever the number of classes. One-vs-rest rather than one-vs-one: k LPs on all m rows against
k (k - 1) / 2 on two classes' rows each; the basis (and so the kernel fetch) is shared either way, and one-vs-rest
gives each record k decision values to calibrate, where one-vs-one needs pairwise coupling for probabilities.

A file holds every member as a complete binary model (``ppsvm-model`` fields), so any tool that reads one reads
a member; the members share kernel, mbar, scaling, basis and federation, which loading checks.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from ppsvm.core.kernels import KernelName, rescale_gaussian
from ppsvm.core.lp import Task
from ppsvm.core.model import FORMAT as MODEL_FORMAT
from ppsvm.core.model import FORMAT_VERSION as MODEL_VERSION
from ppsvm.core.model import ColumnScaling, Model, ModelEntity
from ppsvm.core.model_file import invalid_file, read_document, read_model_text, write_document, write_model_file
from ppsvm.errors import ConfigError, DataError

FORMAT = "ppsvm-multiclass-model"
FORMAT_VERSION = 1
# What every member must share: they were solved on one kernel.
SHARED = ("task", "kernel", "mbar", "private", "scaling", "entities", "columns", "federation")


@dataclass(frozen=True)
class MulticlassModel:
    """One-vs-rest classifier over k >= 3 classes.

    Attributes
    ----------
    classes : tuple of str, length k
        The class names: the declared ones, or the label values as text.
    values : tuple of float, length k
        The label value the entities send for each class.
    members : tuple of Model, length k
        Member c: classes[c] (+1) against the rest (-1), with its own nu, width and calibration.
    training : dict
        What the run as a whole took (seconds, the fetch, records).
    """

    classes: tuple[str, ...]
    values: tuple[float, ...]
    members: tuple[Model, ...]
    training: dict[str, Any] = field(default_factory=dict)

    task: ClassVar[Task] = "classify"
    labels: ClassVar[None] = None  # the class names are ``classes``

    # The fields every member shares: a consumer fetches kernel rows for it as for one model.
    @property
    def kernel(self) -> KernelName:
        return self.members[0].kernel

    @property
    def mbar(self) -> int:
        return self.members[0].mbar

    @property
    def private(self) -> bool:
        return self.members[0].private

    @property
    def scaling(self) -> tuple[ColumnScaling, ...]:
        return self.members[0].scaling

    @property
    def entities(self) -> tuple[ModelEntity, ...]:
        return self.members[0].entities

    @property
    def federation(self) -> str:
        return self.members[0].federation

    @property
    def column_index(self) -> np.ndarray | None:
        return self.members[0].column_index

    @property
    def mu(self) -> float:
        """The width kernel rows are asked for: member 0's; the others' columns are powers of them."""
        return self.members[0].mu

    @property
    def calibration(self) -> bool:
        """Whether every member carries a probability calibration."""
        return all(member.calibration is not None for member in self.members)

    def decision(self, K: np.ndarray) -> np.ndarray:
        """Each member's decision value, shape (m, k), from kernel rows K (m, p) at width ``mu``."""
        columns = []
        for member in self.members:
            rows = rescale_gaussian(K, self.mu, member.mu) if self.kernel == "gaussian" else K
            columns.append(member.decision(rows))
        return np.column_stack(columns)

    def prediction(self, decision: np.ndarray) -> np.ndarray:
        """The class index of the largest decision value per row, as float, shape (m,)."""
        return np.argmax(decision, axis=1).astype(np.float64)

    def label_names(self, prediction: np.ndarray) -> list[str]:
        """The class name of each predicted class index; length m."""
        return [self.classes[int(k)] for k in np.asarray(prediction).tolist()]

    def probability(self, decision: np.ndarray) -> np.ndarray:
        """P(class c) per row, shape (m, k): each member's calibrated one-vs-rest probability, normalised to sum 1."""
        raw = np.column_stack([m.probability(decision[:, c]) for c, m in enumerate(self.members)])
        return raw / raw.sum(axis=1, keepdims=True)

    def summary(self, decision: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """Per row (m,): the winning class's decision value, its index and its probability (None: uncalibrated)."""
        prediction = self.prediction(decision)
        rows = np.arange(len(prediction))
        chosen = prediction.astype(np.int64)
        probability = self.probability(decision)[rows, chosen] if self.calibration else None
        return decision[rows, chosen], prediction, probability

    def to_json(self) -> str:
        members = [asdict(member) for member in self.members]
        fields = {"classes": list(self.classes), "values": list(self.values), "members": members}
        return write_document({**fields, "training": self.training}, FORMAT, FORMAT_VERSION)

    @classmethod
    def from_json(cls, text: str, source: str = "model") -> MulticlassModel:
        """Parse and validate; ConfigError naming ``source`` when it is not a multiclass model file."""
        document = read_document(text, source, FORMAT, FORMAT_VERSION)
        with invalid_file(source, "ppsvm multiclass model file"):
            classes = tuple(str(name) for name in document["classes"])
            values = tuple(float(value) for value in document["values"])
            members = tuple(
                # Each member through the binary model's own reader and checks.
                Model.from_json(write_document(member, MODEL_FORMAT, MODEL_VERSION), f"{source} member {k}")
                for k, member in enumerate(document["members"])
            )
            model = cls(classes, values, members, dict(document.get("training", {})))
        if len(classes) < 3 or len(set(classes)) != len(classes) or len(values) != len(classes):
            raise ConfigError(f"{source}: a multiclass model needs 3 or more distinct classes, each with its value")
        if len(members) != len(classes):
            raise ConfigError(f"{source}: {len(members)} members for {len(classes)} classes")
        for name in SHARED:
            if len({json.dumps(asdict(m)[name]) for m in members}) != 1:
                raise ConfigError(f"{source}: the members differ in {name!r}; they must come from one kernel")
        if members[0].task != "classify":
            raise ConfigError(f"{source}: multiclass members must be classification models")
        return model

    def save(self, path: str | Path) -> None:
        """Write atomically (a finished file or none)."""
        write_model_file(path, self.to_json())

    @classmethod
    def load(cls, path: str | Path) -> MulticlassModel:
        path = Path(path)
        return cls.from_json(read_model_text(path), str(path))


# A random-kernel model of either kind: what the coordinator fetches kernel rows for.
RandomKernelModel = Model | MulticlassModel


def multiclass_figures(model: MulticlassModel, targets: np.ndarray, decision: np.ndarray) -> dict[str, Any]:
    """Held-out figures of a multiclass model: error rate, each class's recall, and for calibrated models the
    multiclass Brier score against always predicting the training class shares.

    Parameters
    ----------
    targets : ndarray, shape (m,)
        The label values the entities hold (``model.values``).
    decision : ndarray, shape (m, k)

    Returns
    -------
    dict
        error_rate, trivial_baseline {majority_error_rate}, classes {name: {n, recall}}; brier and
        brier_class_frequency when every member is calibrated.
    """
    k = len(model.classes)
    index = {value: c for c, value in enumerate(model.values)}
    truth = np.array([index.get(float(t), -1) for t in targets.tolist()], dtype=np.int64)
    predicted = np.argmax(decision, axis=1)
    counts = np.bincount(truth[truth >= 0], minlength=k)
    figures: dict[str, Any] = {
        "error_rate": float(np.mean(predicted != truth)),
        "trivial_baseline": {"majority_error_rate": 1.0 - float(counts.max()) / len(truth)},
        "classes": {
            name: {
                "n": int(counts[c]),
                "recall": float(np.mean(predicted[truth == c] == c)) if counts[c] else float("nan"),
            }
            for c, name in enumerate(model.classes)
        },
    }
    if model.calibration:
        outcome = (truth[:, None] == np.arange(k)).astype(np.float64)
        shares = np.array([m.training["calibration"]["positive_share"] for m in model.members])
        figures["brier"] = float(np.mean(np.sum((model.probability(decision) - outcome) ** 2, axis=1)))
        figures["brier_class_frequency"] = float(np.mean(np.sum((shares / shares.sum() - outcome) ** 2, axis=1)))
    return figures


def class_probabilities(model: Any, decision: np.ndarray) -> np.ndarray:
    """The calibrated probability of each class per row, for a two-class model (DP or not) or a multiclass one.

    Parameters
    ----------
    model : Model, MulticlassModel or DpModel
    decision : ndarray, shape (m,), or (m, k) for a multiclass model

    Returns
    -------
    ndarray, shape (m, 2) (negative, positive label) or (m, k) (``model.classes``)

    Raises
    ------
    DataError
        The model has no calibration, with the reason its training recorded.
    """
    if not model.calibration:
        reason = model.training.get("calibration", {}).get("reason", "see each member's training record")
        raise DataError(
            f"this model has no probability calibration ({reason}); its predictions and decision values work"
        )
    probability = model.probability(decision)
    return probability if probability.ndim == 2 else np.column_stack([1.0 - probability, probability])


def prediction_outputs(model: Any, decision: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[str], np.ndarray | None]:
    """What a prediction answers per record, for any model kind (binary, multiclass, DP, regression).

    Parameters
    ----------
    model : Model, MulticlassModel or DpModel
    decision : ndarray, shape (m,), or (m, k) for a multiclass model

    Returns
    -------
    decision : ndarray, shape (m,)
        The decision value (a multiclass model's: the winning class's).
    prediction : ndarray, shape (m,)
        +-1, the class index, or the regression value.
    names : list of str, length m
        The predicted label's name (classification; "+1"/"-1" without declared labels), else the value as text.
    probability : ndarray, shape (m,), or None
        The calibrated P(positive label), or a multiclass model's P(predicted class); None without a calibration.
    """
    if isinstance(model, MulticlassModel):
        best, prediction, probability = model.summary(decision)
        return best, prediction, model.label_names(prediction), probability
    prediction = model.prediction(decision)
    if model.task != "classify":
        return decision, prediction, [repr(value) for value in prediction.tolist()], None
    probability = model.probability(decision) if model.calibration is not None else None
    return decision, prediction, model.label_names(prediction), probability
