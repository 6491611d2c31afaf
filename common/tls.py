"""Mutual TLS for every channel: credentials from PEM files and the peer-identity check.

Both sides present certificates signed by the federation CA (``ppsvm certs``).
A client pins the identity it expects (the entity id from the federation file)
through gRPC's target-name check, so a process at the right address with
another party's certificate is refused. A server may further restrict callers
to named identities: entities accept only the coordinator their config names.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from common.certs import certificate_identity
from common.errors import ConfigError

logger = logging.getLogger(__name__)

PLAINTEXT_WARNING = "TLS is OFF (--insecure): calls and kernel blocks travel in plaintext; use only on a trusted network"


@dataclass(frozen=True)
class TlsFiles:
    """One party's TLS material: the federation CA, its certificate and its private key (PEM files)."""

    ca: Path
    cert: Path
    key: Path
    source: Path

    def read(self) -> tuple[bytes, bytes, bytes]:
        """(ca, cert, key) bytes; ConfigError naming the file that is missing, unreadable or expired."""
        contents = []
        for label, path in (("ca", self.ca), ("cert", self.cert), ("key", self.key)):
            try:
                contents.append(path.read_bytes())
            except OSError as exc:
                raise ConfigError(f"{self.source} [tls]: cannot read {label} file {path}: {exc.strerror}") from exc
        for label, pem in (("ca", contents[0]), ("cert", contents[1])):
            try:
                _, expires = certificate_identity(pem)
            except ValueError as exc:
                raise ConfigError(f"{self.source} [tls]: {label} file is not a PEM certificate: {exc}") from exc
            if expires < datetime.datetime.now(datetime.timezone.utc):
                raise ConfigError(f"{self.source} [tls]: the certificate in {label} file expired on {expires:%Y-%m-%d %H:%M} UTC; "
                                  "make new ones with `ppsvm certs`")
        return contents[0], contents[1], contents[2]

    def identity(self) -> str:
        """The name this party's own certificate asserts."""
        return certificate_identity(self.read()[1])[0]


def server_credentials(tls: TlsFiles) -> grpc.ServerCredentials:
    """Server side of mutual TLS: clients must present a certificate from the federation CA."""
    ca, cert, key = tls.read()
    return grpc.ssl_server_credentials([(key, cert)], root_certificates=ca, require_client_auth=True)


def channel_credentials(tls: TlsFiles) -> grpc.ChannelCredentials:
    """Client side of mutual TLS: trust only the federation CA, present this party's certificate."""
    ca, cert, key = tls.read()
    return grpc.ssl_channel_credentials(root_certificates=ca, private_key=key, certificate_chain=cert)


def peer_names(context: grpc.ServicerContext) -> set[str]:
    """The identities (certificate DNS names) of the caller; empty for a plaintext call."""
    return {name.decode() for name in (context.peer_identities() or [])}


class RequirePeer(grpc.ServerInterceptor):
    """Refuse, with PERMISSION_DENIED, every call whose certificate names none of ``allowed``."""

    def __init__(self, allowed: Iterable[str]) -> None:
        self.allowed = frozenset(allowed)

    def _guard(self, behaviour: Callable[[Any, grpc.ServicerContext], Any], method: str) -> Callable[[Any, grpc.ServicerContext], Any]:
        def checked(request: Any, context: grpc.ServicerContext) -> Any:
            names = peer_names(context)
            if not names & self.allowed:
                caller = ", ".join(sorted(names)) or "a caller without a certificate identity"
                logger.warning("refused %s from %s (%s): allowed callers are %s", method, caller, context.peer(), sorted(self.allowed))
                context.abort(grpc.StatusCode.PERMISSION_DENIED,
                              f"{caller} may not call {method}; this server accepts only {', '.join(sorted(self.allowed))}")
            return behaviour(request, context)

        return checked

    def intercept_service(self, continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
                          handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        handler = continuation(handler_call_details)
        if handler is None:
            return None
        method = handler_call_details.method
        codec = {"request_deserializer": handler.request_deserializer, "response_serializer": handler.response_serializer}
        # Every RPC of ppsvm takes a single request message; client-streaming handlers do not exist.
        if handler.unary_unary is not None:
            return grpc.unary_unary_rpc_method_handler(self._guard(handler.unary_unary, method), **codec)
        if handler.unary_stream is not None:
            return grpc.unary_stream_rpc_method_handler(self._guard(handler.unary_stream, method), **codec)
        raise TypeError(f"{method}: RequirePeer guards unary-request methods only")


def choose_tls(tls: TlsFiles | None, *, insecure: bool, source: Path) -> TlsFiles | None:
    """The TLS material to use, or None for plaintext, which only an explicit ``insecure`` allows.

    Raises
    ------
    ConfigError
        ``source`` has no [tls] table and plaintext was not asked for.
    """
    if insecure:
        logger.warning(PLAINTEXT_WARNING)
        return None
    if tls is None:
        raise ConfigError(f"{source} has no [tls] table: make certificates with `ppsvm certs` (or `ppsvm split`, which "
                          "makes them) and name them there, or pass --insecure to run in plaintext on a trusted network")
    return tls
