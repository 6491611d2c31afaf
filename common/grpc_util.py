"""gRPC plumbing shared by entities and the coordinator: servers, channels, status codes."""

from __future__ import annotations

import functools
import logging
import signal
import threading
from collections.abc import Callable, Collection, Iterator, Mapping
from concurrent import futures
from types import FrameType
from typing import Any, TypeVar

import grpc

from common.certs import COORDINATOR, Role
from common.errors import ConfigError, DataError, PpsvmError, PrivacyError, SolverError, WireError
from common.tls import Authorize, TlsFiles, channel_credentials, server_credentials

logger = logging.getLogger(__name__)

# Domain error -> status code: a refused request, a bad request, or a state that must change first.
_STATUS = (
    (PrivacyError, grpc.StatusCode.PERMISSION_DENIED),
    (DataError, grpc.StatusCode.INVALID_ARGUMENT),
    (WireError, grpc.StatusCode.INVALID_ARGUMENT),
    (ConfigError, grpc.StatusCode.FAILED_PRECONDITION),
    (SolverError, grpc.StatusCode.FAILED_PRECONDITION),
    (PpsvmError, grpc.StatusCode.FAILED_PRECONDITION),
)

F = TypeVar("F", bound=Callable[..., Any])


def status_for(error: Exception) -> grpc.StatusCode:
    """The status code a servicer answers with for a domain error."""
    for kind, code in _STATUS:
        if isinstance(error, kind):
            return code
    return grpc.StatusCode.INTERNAL


def _abort(context: grpc.ServicerContext, name: str, error: Exception) -> None:
    code = status_for(error)
    if code is grpc.StatusCode.INTERNAL:
        logger.exception("%s failed", name)
        context.abort(code, f"{name}: internal error ({type(error).__name__}); see the server log")
    logger.warning("%s refused: %s", name, error)
    context.abort(code, str(error))


def unary_handler(method: F) -> F:
    """Wrap a unary servicer method: domain errors become status codes with their message."""

    @functools.wraps(method)
    def wrapper(self: Any, request: Any, context: grpc.ServicerContext) -> Any:
        try:
            return method(self, request, context)
        except Exception as error:  # noqa: BLE001 - mapped to a status code, never swallowed
            _abort(context, method.__name__, error)

    return wrapper  # type: ignore[return-value]


def stream_handler(method: F) -> F:
    """Like :func:`unary_handler` for server-streaming methods (errors before or during the stream)."""

    @functools.wraps(method)
    def wrapper(self: Any, request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
        try:
            yield from method(self, request, context)
        except Exception as error:  # noqa: BLE001
            _abort(context, method.__name__, error)

    return wrapper  # type: ignore[return-value]


def create_server(
    address: str, register: Callable[[grpc.Server], None], *, tls: TlsFiles | None,
    allowed_peers: Collection[str] | None = None, roles: Collection[Role] | Mapping[str, Collection[Role]] = (COORDINATOR,),
    max_workers: int = 8,
) -> tuple[grpc.Server, int]:
    """Start a server on ``address`` (port 0 picks a free one); returns (server, bound port).

    Parameters
    ----------
    tls : TlsFiles or None
        Mutual TLS material; None serves plaintext (see :func:`common.tls.choose_tls`), where
        no identity or role can be checked.
    allowed_peers : collection of str, optional
        Certificate identities allowed to call; None accepts any name the CA certified.
    roles : collection of role, or mapping of str to collection of role
        The certificate roles that may call every method, or per full method name
        (:func:`common.tls.method_roles`; methods not named are refused). Default: the
        coordinator role for every method, which is what an entity serves.

    Raises
    ------
    ConfigError
        The address cannot be bound, or the TLS files cannot be read.
    """
    interceptors = [Authorize(roles, allowed_peers)] if tls is not None else []
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=max_workers), interceptors=interceptors)
    register(server)
    try:
        port = server.add_secure_port(address, server_credentials(tls)) if tls is not None else server.add_insecure_port(address)
    except RuntimeError as exc:
        raise ConfigError(f"cannot listen on {address}: {exc}") from exc
    if port == 0:
        raise ConfigError(f"cannot listen on {address} (in use or not a local address)")
    server.start()
    return server, port


def stop_on_signals() -> threading.Event:
    """An event that SIGINT or SIGTERM sets: servers run until it is set, then stop with a grace period."""
    stop = threading.Event()

    def request_stop(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)
    return stop


def open_channel(address: str, *, tls: TlsFiles | None, peer: str) -> grpc.Channel:
    """A channel to the party named ``peer`` at ``address``.

    With TLS the server must present a certificate from the federation CA for the
    name ``peer`` (not for the address): the federation file's id is the identity.
    """
    if tls is None:
        return grpc.insecure_channel(address)
    return grpc.secure_channel(address, channel_credentials(tls), options=[("grpc.ssl_target_name_override", peer)])


def host_of(address: str) -> str:
    """The host part of host:port (IPv6 in brackets kept as is)."""
    return address.rsplit(":", 1)[0]
