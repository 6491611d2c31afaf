"""The envelope both model files share: JSON with a format and version, strict numbers, errors naming the file.

:mod:`ppsvm.core.model` (random kernel) and :mod:`ppsvm.core.dp_model` (differentially private) read
and write their fields through these functions and save with :func:`ppsvm.files.write_atomic`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from ppsvm.core.calibration import Platt
from ppsvm.errors import ConfigError
from ppsvm.files import write_atomic


def number(document: dict[str, Any], key: str, source: str) -> float:
    """``document[key]`` as a float; ConfigError naming the key when it is missing or not a number."""
    value = document.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{source}: {key!r} must be a number, got {value!r}")
    return float(value)


def read_document(text: str, source: str, expected_format: str, version: int | tuple[int, ...]) -> dict[str, Any]:
    """The JSON object of a ppsvm file of ``expected_format``, without its format and version keys.

    ``version``: the version this reader takes, or every version it takes.

    Raises
    ------
    ConfigError
        Not JSON (or nested too deeply to parse), not an object, another format or version.
    """
    try:
        document = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ConfigError(f"{source} is not a ppsvm model file: not JSON ({type(exc).__name__})") from None
    if not isinstance(document, dict) or document.pop("format", None) != expected_format:
        raise ConfigError(f"{source} is not a ppsvm model file of format {expected_format!r}")
    found, readable = document.pop("version", None), version if isinstance(version, tuple) else (version,)
    if found not in readable:
        newer = isinstance(found, int) and not isinstance(found, bool) and found > max(readable)
        raise ConfigError(
            f"{source}: unsupported {expected_format} version {found!r}"
            + (" (written by a newer ppsvm: upgrade to read it)" if newer else "")
        )
    return document


def write_document(fields: dict[str, Any], expected_format: str, version: int) -> str:
    """The JSON text of a ppsvm file: ``fields`` after its format and version keys; NaN and inf refused."""
    document = {"format": expected_format, "version": version, **fields}
    return json.dumps(document, indent=2, allow_nan=False) + "\n"


@contextmanager
def invalid_file(source: str, kind: str) -> Iterator[None]:
    """Turn the KeyError, TypeError or ValueError of parsing a document into a ConfigError naming ``source``.

    A ConfigError raised inside (already naming the file) passes through unchanged.
    """
    try:
        yield
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, ConfigError):
            raise
        raise ConfigError(f"{source} is not a valid {kind}: {exc}") from exc


def read_model_text(path: Path) -> str:
    """The text of a model file; ConfigError naming ``path`` when it cannot be read."""
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read model file {path}: {exc.strerror}") from exc


def write_model_file(path: str | Path, text: str) -> None:
    """Write a model file atomically (:func:`ppsvm.files.write_atomic`); ConfigError naming ``path`` if it fails."""
    try:
        write_atomic(Path(path), text)
    except OSError as exc:
        raise ConfigError(f"cannot write model file {path}: {exc.strerror or exc}") from exc


class TwoClassOutputs:
    """What both model kinds tell a user besides the decision value: the declared label and the calibrated P(+1).

    The dataclasses that mix this in declare the fields ``labels`` ((negative, positive) label values, or None for
    the numbers -1 and +1), ``calibration`` (:class:`~ppsvm.core.calibration.Platt` or None) and ``training``
    (how the model was trained).
    """

    labels: tuple[str, str] | None
    calibration: Platt | None
    training: dict[str, Any]

    def probability(self, decision: np.ndarray) -> np.ndarray:
        """P(+1) of each decision value, shape as ``decision``; ValueError for a model without a calibration."""
        if self.calibration is None:
            raise ValueError(
                "this model has no probability calibration (a regression or public-only model, or a file written "
                "before ppsvm calibrated models): train it again"
            )
        return self.calibration.probability(decision)

    def label_names(self, prediction: np.ndarray) -> list[str]:
        """The declared label of each +-1 prediction ("+1"/"-1" without declared labels); length m."""
        negative, positive = self.labels or ("-1", "+1")
        return [positive if p > 0 else negative for p in np.asarray(prediction).tolist()]


def read_outputs(document: dict[str, Any], source: str) -> None:
    """Parse a model document's optional "labels" and "calibration" in place (inside :func:`invalid_file`)."""
    if document.get("labels") is not None:
        negative, positive = document["labels"]
        if not (isinstance(negative, str) and isinstance(positive, str) and negative != positive):
            raise ValueError(f"labels must be two different texts, got {document['labels']!r}")
        document["labels"] = (negative, positive)
    if document.get("calibration") is not None:
        table = document["calibration"]
        document["calibration"] = Platt(number(table, "a", source), number(table, "b", source))
