"""Mutual TLS for every channel: credentials from PEM files and the peer-identity check.

Both sides present certificates signed by the federation CA (``ppsvm certs``).
A client pins the identity it expects (the entity id from the federation file)
through gRPC's target-name check, so a process at the right address with
another party's certificate is refused. That check is DNS hostname matching and
ignores case; party names are lowercase only (ppsvm.wire.certs) so that it is exact
all the same. A server checks every call against the caller's certificate: the
exact name (entities accept only the coordinator their config names) and the
role the method needs (entity RPCs: coordinator; Predict: client); that check is
:class:`ppsvm.wire.server.Authorize`, which reads the caller with :func:`peer_party`.
"""

from __future__ import annotations

import datetime
import logging
from dataclasses import dataclass
from pathlib import Path

import grpc

from ppsvm.errors import ConfigError
from ppsvm.wire.certs import Party, certificate_identity, certificate_party

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
