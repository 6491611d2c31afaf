"""Mutual TLS for every channel: credentials from PEM files and the peer-identity check.

Both sides present certificates signed by the federation CA (``ppsvm certs``).
A client pins the identity it expects (the entity id from the federation file)
through gRPC's target-name check, so a process at the right address with
another party's certificate is refused. That check is DNS hostname matching and
ignores case; party names are lowercase only (ppsvm.wire.certs) so that it is exact
all the same. A server checks every call against the caller's certificate: the
exact name (entities accept only the coordinator their config names) and the
role the method needs (entity RPCs: coordinator; Predict: client).
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from ppsvm.errors import ConfigError
from ppsvm.wire.certs import Party, Role, certificate_identity, certificate_party

logger = logging.getLogger(__name__)

PLAINTEXT_WARNING = (
    "TLS is OFF (--insecure): calls and kernel blocks travel in plaintext; use only on a trusted network"
)


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
            if expires < datetime.datetime.now(datetime.UTC):
                raise ConfigError(
                    f"{self.source} [tls]: the certificate in {label} file expired on {expires:%Y-%m-%d %H:%M} UTC; "
                    "make new ones with `ppsvm certs`"
                )
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


def peer_party(context: grpc.ServicerContext) -> Party | None:
    """The caller as its certificate names it (exact name, roles); None for a plaintext call.

    Read from the certificate itself, not from gRPC's list of peer identities, which mixes DNS
    names with role URIs.

    Raises
    ------
    ValueError
        The certificate does not name exactly one party (:func:`ppsvm.wire.certs.certificate_party`).
    """
    certificates = context.auth_context().get("x509_pem_cert")
    return certificate_party(certificates[0]) if certificates else None


def peer_names(context: grpc.ServicerContext) -> set[str]:
    """The identity (certificate DNS name) of the caller; empty for a plaintext call."""
    party = peer_party(context)
    return {party.name} if party is not None else set()


def method_roles(service: str, roles: Mapping[str, Collection[Role]]) -> dict[str, frozenset[Role]]:
    """Full gRPC method names (``/package.Service/Method``) of ``service``'s methods -> the roles that may call them."""
    return {f"/{service}/{method}": frozenset(allowed) for method, allowed in roles.items()}


Behaviour = Callable[[Any, grpc.ServicerContext], Any]


class WrappingInterceptor(grpc.ServerInterceptor):
    """A server interceptor that wraps each method's behaviour; subclasses say how, for unary and streaming replies.

    Every RPC of ppsvm takes a single request message; client-streaming handlers do not exist.
    """

    def _wrap_unary(self, behaviour: Behaviour, method: str) -> Behaviour:
        raise NotImplementedError

    def _wrap_stream(self, behaviour: Behaviour, method: str) -> Behaviour:
        raise NotImplementedError

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = continuation(handler_call_details)
        if handler is None:
            return None
        method = handler_call_details.method
        codec = {
            "request_deserializer": handler.request_deserializer,
            "response_serializer": handler.response_serializer,
        }
        if handler.unary_unary is not None:
            return grpc.unary_unary_rpc_method_handler(self._wrap_unary(handler.unary_unary, method), **codec)
        if handler.unary_stream is not None:
            return grpc.unary_stream_rpc_method_handler(self._wrap_stream(handler.unary_stream, method), **codec)
        raise TypeError(f"{method}: only unary-request methods can be wrapped")


class Authorize(WrappingInterceptor):
    """Refuse, with PERMISSION_DENIED, every call whose certificate names another party or lacks a role the method
    allows.

    Checked per call from the peer's certificate: its one DNS name compared exactly (a name in
    another case is another name) and its role URIs.

    Parameters
    ----------
    roles : collection of role, or mapping of str to collection of role
        The roles that may call every method, or per full method name (:func:`method_roles`);
        a method the mapping does not name is refused to everyone.
    identities : collection of str, optional
        Names that may call at all (entities: the coordinator their config names); None: any name.
    """

    def __init__(
        self, roles: Collection[Role] | Mapping[str, Collection[Role]], identities: Collection[str] | None = None
    ) -> None:
        self.roles = roles
        self.identities = frozenset(identities) if identities is not None else None

    def _allowed_roles(self, method: str) -> frozenset[Role]:
        if isinstance(self.roles, Mapping):
            return frozenset(self.roles.get(method, ()))
        return frozenset(self.roles)

    def _refusal(self, context: grpc.ServicerContext, method: str) -> str | None:
        """Why the caller may not call ``method``, or None if it may."""
        try:
            party = peer_party(context)
        except ValueError as exc:
            return f"the caller's certificate is not a ppsvm party's ({exc}) and may not call {method}"
        if party is None:
            return f"a caller without a certificate may not call {method}"
        allowed = self._allowed_roles(method)
        if self.identities is not None and party.name not in self.identities:
            return f"{party.name} may not call {method}; this server accepts only {', '.join(sorted(self.identities))}"
        if not allowed:
            return f"{method} is not open to any caller on this server"
        if not party.roles & allowed:
            held = (
                f"grants {', '.join(sorted(party.roles))}"
                if party.roles
                else "grants no ppsvm role (made before roles existed: make new ones with `ppsvm certs`)"
            )
            return (
                f"{party.name} may not call {method}: that needs a certificate with the role "
                f"{' or '.join(sorted(allowed))}, and {party.name}'s certificate {held}"
            )
        return None

    def _guard(self, behaviour: Behaviour, method: str) -> Behaviour:
        def checked(request: Any, context: grpc.ServicerContext) -> Any:
            refusal = self._refusal(context, method)
            if refusal is not None:
                logger.warning("refused a call from %s: %s", context.peer(), refusal)
                context.abort(grpc.StatusCode.PERMISSION_DENIED, refusal)
            return behaviour(request, context)

        return checked

    _wrap_unary = _guard
    _wrap_stream = _guard


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
        raise ConfigError(
            f"{source} has no [tls] table: make certificates with `ppsvm certs` (or `ppsvm split`, which "
            "makes them) and name them there, or pass --insecure to run in plaintext on a trusted network"
        )
    return tls
