"""Helpers the unit tests of file readers share: write a file, check that an error names it."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

import pytest


def write(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` (creating its folder); returns ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def assert_names_file(error: BaseException, path: Path, fragments: Iterable[str]) -> None:
    """The error's message names ``path`` and holds every fragment; the whole message is shown when one is missing."""
    message = str(error)
    assert str(path) in message
    for fragment in fragments:
        assert fragment in message, message


def assert_load_fails(
    load: Callable[[Path], object], error: type[Exception], path: Path, fragments: Iterable[str]
) -> None:
    """``load(path)`` raises ``error`` whose message names ``path`` and holds every fragment."""
    with pytest.raises(error) as caught:
        load(path)
    assert_names_file(caught.value, path, fragments)
