"""Signals that arrive while a child is being started are held, then delivered once it is recorded."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import pytest

from ppsvm.processes import _signals_held


@pytest.fixture(autouse=True)
def ctrl_c_raises() -> Iterator[None]:
    """Python's own SIGINT handler, whatever this process inherited (a background job ignores SIGINT)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_ctrl_c_inside_the_block_is_raised_after_it() -> None:
    reached_end_of_block = False
    with pytest.raises(KeyboardInterrupt):
        with _signals_held():
            os.kill(os.getpid(), signal.SIGINT)
            reached_end_of_block = True
    assert reached_end_of_block
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_sigterm_reaches_the_handler_in_place_before_the_block() -> None:
    seen: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: seen.append(signum))
    try:
        with _signals_held():
            os.kill(os.getpid(), signal.SIGTERM)
            assert seen == []
        assert seen == [signal.SIGTERM]
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_a_quiet_block_changes_nothing() -> None:
    with _signals_held():
        pass
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
