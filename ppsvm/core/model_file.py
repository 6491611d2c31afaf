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

from ppsvm.errors import ConfigError
from ppsvm.files import write_atomic


def number(document: dict[str, Any], key: str, source: str) -> float:
    """``document[key]`` as a float; ConfigError naming the key when it is missing or not a number."""
    value = document.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{source}: {key!r} must be a number, got {value!r}")
    return float(value)


def read_document(text: str, source: str, expected_format: str, version: int) -> dict[str, Any]:
    """The JSON object of a ppsvm file of ``expected_format``, without its format and version keys.

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
    if document.pop("version", None) != version:
        raise ConfigError(f"{source}: unsupported {expected_format} version")
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
