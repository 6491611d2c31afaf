"""The status codes of ppsvm's servers, from the one error taxonomy, and the channels its clients open.

Every status code a ppsvm server chooses comes from :func:`status_for`: servicer methods wrapped by
:func:`unary_handler` or :func:`stream_handler` raise an error of :mod:`ppsvm.errors`, and the
interceptors of :mod:`ppsvm.wire.server` refuse a call by :func:`abort` with one. The docs'
"Errors and exit status" lists the kinds, their codes and the command's exit codes.
"""

from __future__ import annotations

import collections
import functools
import logging
import time
from collections.abc import Callable, Iterator
from typing import Any, NoReturn, TypeVar, cast

import grpc

from ppsvm.constants import KEEPALIVE_TIME_S, KEEPALIVE_TIMEOUT_S
from ppsvm.errors import (
    CallCancelled,
    CallLimitError,
    ConfigError,
    DataError,
    EntityError,
    PpsvmError,
    PrivacyError,
    ReleaseFailed,
    SolverError,
    WireError,
)
from ppsvm.logs import ACCESS_LOGGER, REQUEST_ID_METADATA, RUN_ID_METADATA, new_request_id, valid_request_id
from ppsvm.wire.tls import TlsFiles, channel_credentials

logger = logging.getLogger(__name__)
access = logging.getLogger(ACCESS_LOGGER)

# Error kind -> status code: a refused request, a bad request, a limit to wait for, or a state that must change
# first. The first kind an error is an instance of decides; anything else is INTERNAL, with a fixed text.
_STATUS = (
    (PrivacyError, grpc.StatusCode.PERMISSION_DENIED),
    (DataError, grpc.StatusCode.INVALID_ARGUMENT),
    (WireError, grpc.StatusCode.INVALID_ARGUMENT),
    (CallLimitError, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (CallCancelled, grpc.StatusCode.CANCELLED),
    (ConfigError, grpc.StatusCode.FAILED_PRECONDITION),
    (SolverError, grpc.StatusCode.FAILED_PRECONDITION),
    (ReleaseFailed, grpc.StatusCode.FAILED_PRECONDITION),
    (EntityError, grpc.StatusCode.FAILED_PRECONDITION),
    (PpsvmError, grpc.StatusCode.FAILED_PRECONDITION),
)

F = TypeVar("F", bound=Callable[..., Any])


def status_for(error: Exception) -> grpc.StatusCode:
    """The status code a server answers with for an error of :mod:`ppsvm.errors`; INTERNAL for any other."""
    for kind, code in _STATUS:
        if isinstance(error, kind):
            return code
    return grpc.StatusCode.INTERNAL


def abort(context: grpc.ServicerContext, error: PpsvmError) -> NoReturn:
    """End the call with ``error``'s status code and its message (which the caller reads)."""
    context.abort(status_for(error), str(error))


def _abort(context: grpc.ServicerContext, name: str, error: Exception) -> NoReturn:
    if not isinstance(error, PpsvmError):
        logger.exception("%s failed", name)
        # Nothing of the exception leaves: its class or text could say what the server's host or data hold.
        context.abort(grpc.StatusCode.INTERNAL, f"{name}: internal error; see the server log")
    logger.warning("%s refused: %s", name, error)
    abort(context, error)


def unary_handler(method: F) -> F:
    """Wrap a unary servicer method: domain errors become status codes with their message."""

    @functools.wraps(method)
    def wrapper(self: Any, request: Any, context: grpc.ServicerContext) -> Any:
        try:
            return method(self, request, context)
        except Exception as error:  # noqa: BLE001 - mapped to a status code, never swallowed
            _abort(context, method.__name__, error)

    return cast(F, wrapper)  # functools.wraps keeps the name; the signature is the method's


def stream_handler(method: F) -> F:
    """Like :func:`unary_handler` for server-streaming methods (errors before or during the stream)."""

    @functools.wraps(method)
    def wrapper(self: Any, request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
        try:
            yield from method(self, request, context)
        except Exception as error:  # noqa: BLE001
            _abort(context, method.__name__, error)

    return cast(F, wrapper)  # functools.wraps keeps the name; the signature is the method's


# Keepalive pings during calls only (never on an idle channel), as many as it takes: by default gRPC stops
# after two pings while the client sends no data, which is all of a long server stream.
KEEPALIVE_OPTIONS = [
    ("grpc.keepalive_time_ms", int(KEEPALIVE_TIME_S * 1000)),
    ("grpc.keepalive_timeout_ms", int(KEEPALIVE_TIMEOUT_S * 1000)),
    ("grpc.keepalive_permit_without_calls", 0),
    ("grpc.http2.max_pings_without_data", 0),
]
# What a server accepts of them: pings every few seconds while a call runs, without ever closing the
# connection for too many pings (gRPC's default answers a third ping within 5 minutes with GOAWAY).
SERVER_KEEPALIVE_OPTIONS = [
    ("grpc.http2.min_ping_interval_without_data_ms", int(KEEPALIVE_TIME_S * 1000) // 2),
    ("grpc.http2.max_ping_strikes", 0),
]


def open_channel(address: str, *, tls: TlsFiles | None, peer: str, run: str | None = None) -> grpc.Channel:
    """A channel to the party named ``peer`` at ``address``; every call on it sends a request id, and ``run`` (the
    coordinator's run id, which entities record with each release) when given.

    With TLS the server must present a certificate from the federation CA for the
    name ``peer`` (not for the address): the federation file's id is the identity.
    """
    if tls is None:
        channel = grpc.insecure_channel(address, options=KEEPALIVE_OPTIONS)
    else:
        channel = grpc.secure_channel(
            address,
            channel_credentials(tls),
            options=[("grpc.ssl_target_name_override", peer), *KEEPALIVE_OPTIONS],
        )
    return grpc.intercept_channel(channel, RequestIds(peer, run))


class _CallDetails(
    collections.namedtuple("_CallDetails", ("method", "timeout", "metadata", "credentials", "wait_for_ready")),
    grpc.ClientCallDetails,
):
    """A call's details with metadata added (gRPC's own class is abstract)."""


class RequestIds(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor):
    """Send a request id (``x-request-id``; a new one unless the caller set one) with every call and log its end.

    The server logs the same id on its lines about the call (:class:`ppsvm.wire.server.Observe`), so the
    coordinator's line and the entity's join. The line (the ``ppsvm.access`` logger) names the party
    called, the method, the status code and the milliseconds until the last reply message.
    """

    def __init__(self, peer: str, run: str | None = None) -> None:
        self.peer, self.run = peer, run

    def _send(self, continuation: Callable[[Any, Any], Any], details: grpc.ClientCallDetails, request: Any) -> Any:
        given = [value for key, value in details.metadata or () if key == REQUEST_ID_METADATA]
        # A caller's own id is sent as it is (the server replaces one that is not a safe token) and logged if safe.
        request_id = (valid_request_id(given[0]) or "unsafe") if given else new_request_id()
        metadata = [
            *(details.metadata or ()),
            *(() if given else [(REQUEST_ID_METADATA, request_id)]),
            *(() if self.run is None else [(RUN_ID_METADATA, self.run)]),
        ]
        started = time.perf_counter()
        call = continuation(
            _CallDetails(details.method, details.timeout, metadata, details.credentials, details.wait_for_ready),
            request,
        )

        def ended(done: Any) -> None:
            code = done.code()
            name = code.name if isinstance(code, grpc.StatusCode) else "UNKNOWN"
            ms = (time.perf_counter() - started) * 1000
            access.info(
                "called %s %s: %s in %.1f ms (request %s)",
                self.peer,
                details.method,
                name,
                ms,
                request_id,
                extra={
                    "entity": self.peer,
                    "method": details.method,
                    "request_id": request_id,
                    "code": name,
                    "duration_ms": round(ms, 3),
                },
            )

        call.add_done_callback(ended)
        return call

    def intercept_unary_unary(
        self, continuation: Callable[[Any, Any], Any], client_call_details: grpc.ClientCallDetails, request: Any
    ) -> Any:
        return self._send(continuation, client_call_details, request)

    def intercept_unary_stream(
        self, continuation: Callable[[Any, Any], Any], client_call_details: grpc.ClientCallDetails, request: Any
    ) -> Any:
        return self._send(continuation, client_call_details, request)


def host_of(address: str) -> str:
    """The host part of host:port (IPv6 in brackets kept as is)."""
    return address.rsplit(":", 1)[0]


def tls_failure(details: str) -> bool:
    """Whether gRPC's UNAVAILABLE details describe a refused certificate rather than an absent peer.

    Not the bare word "handshake": "Handshake read failed (... Connection reset by peer)" is
    what a restarting entity gives, and that is worth retrying.
    """
    text = details.lower()
    return any(word in text for word in ("ssl_error", "certificate", "verification", "unauthenticated", "alert"))
