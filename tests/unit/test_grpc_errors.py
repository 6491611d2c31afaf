"""What a server tells a remote caller when a handler fails (issue 27): an error of ppsvm.errors with its own status
code and text; anything else INTERNAL with a fixed text that names neither the exception's class nor its message
(a path of the entity's host, a value of its data), which stay in the server's own log."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any, NoReturn

import grpc
import pytest

from ppsvm.errors import CallLimitError, ConfigError, DataError, PrivacyError
from ppsvm.wire.grpc_util import status_for, stream_handler, unary_handler


class Aborted(Exception):
    """What grpc's context.abort does: raise, after recording the status."""


class FakeContext:
    def __init__(self) -> None:
        self.code: grpc.StatusCode | None = None
        self.details = ""

    def abort(self, code: grpc.StatusCode, details: str) -> NoReturn:
        self.code, self.details = code, details
        raise Aborted


class Servicer:
    def __init__(self, error: Exception) -> None:
        self.error = error

    @unary_handler
    def Unary(self, request: Any, context: Any) -> Any:
        raise self.error

    @stream_handler
    def Stream(self, request: Any, context: Any) -> Iterator[Any]:
        yield 1
        raise self.error


SECRET = "/srv/hospital/private/r0c0.releases.jsonl"


@pytest.mark.parametrize("method", ["Unary", "Stream"])
@pytest.mark.parametrize(
    "error", [OSError(28, "No space left on device", SECRET), KeyError(SECRET), ValueError(f"HIV+ in {SECRET}")]
)
def test_an_unexpected_failure_tells_the_caller_nothing_of_it(
    method: str, error: Exception, caplog: pytest.LogCaptureFixture
) -> None:
    context = FakeContext()
    call = getattr(Servicer(error), method)
    with caplog.at_level(logging.ERROR), pytest.raises(Aborted):
        list(call(None, context)) if method == "Stream" else call(None, context)
    assert context.code is grpc.StatusCode.INTERNAL
    assert context.details == f"{method}: internal error; see the server log"
    assert type(error).__name__ not in context.details and SECRET not in context.details
    assert SECRET in caplog.text  # the server's own log keeps what happened


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (DataError("bad row"), grpc.StatusCode.INVALID_ARGUMENT),
        (ConfigError("bad setting"), grpc.StatusCode.FAILED_PRECONDITION),
        (PrivacyError("refused"), grpc.StatusCode.PERMISSION_DENIED),
        (CallLimitError("retry in 3 s"), grpc.StatusCode.RESOURCE_EXHAUSTED),
    ],
)
def test_a_ppsvm_error_keeps_its_code_and_text(error: Exception, code: grpc.StatusCode) -> None:
    context = FakeContext()
    assert status_for(error) is code
    with pytest.raises(Aborted):
        Servicer(error).Unary(None, context)
    assert context.code is code and str(error) in context.details
