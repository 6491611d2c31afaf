"""Certificates for mutual TLS: a small federation CA and one certificate per party.

Every party (the coordinator, each entity and the prediction clients) gets a key
and a certificate whose common name and DNS subject-alternative name are its
federation id, and whose URI subject-alternative names state its roles
(``urn:ppsvm:role:coordinator``, ``...:entity``, ``...:client``). Peers check
identities by that name, not by network address: the coordinator dials an
entity and requires a certificate for the entity id the federation file names;
servers check the caller's exact name and role on every call (ppsvm.wire.server).

Roles are URI SANs rather than a private X.509 extension: SANs are the standard
place for what a certificate vouches for (SPIFFE ids are URI SANs too), ``openssl
x509 -text`` shows them, gRPC hands them to the server as they are, and TLS stacks
that know nothing of ppsvm still accept the certificate.
"""

from __future__ import annotations

import datetime
import functools
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from ppsvm.errors import ConfigError

Role = Literal["coordinator", "entity", "client"]
COORDINATOR: Role = "coordinator"
ENTITY: Role = "entity"
CLIENT: Role = "client"
ROLES: tuple[Role, ...] = (COORDINATOR, ENTITY, CLIENT)
ROLE_URI_PREFIX = "urn:ppsvm:role:"

DEFAULT_COORDINATOR_NAME = "coordinator"
DEFAULT_CLIENT_NAME = "client"
DEFAULT_VALID_DAYS = 365
CA_FILE = "ca.pem"
CA_KEY_FILE = "ca.key"
# Names end up as DNS names in certificates and in gRPC's target-name check, which compares
# hostnames case-insensitively (a certificate for "R0C0" passes where "r0c0" is pinned) and
# cannot be replaced from Python. So names are canonical: lowercase only, so that no two valid
# names differ in case alone and the client's check is as exact as the server's (ppsvm.wire.tls).
_NAME = re.compile(r"[a-z0-9]([a-z0-9.-]{0,62}[a-z0-9])?")


def check_party_name(name: str) -> str:
    """``name`` if it can be a certificate identity (lowercase letters, digits, '.', '-'); ConfigError otherwise."""
    if not _NAME.fullmatch(name):
        hint = (
            f" (write it {name.lower()!r}: names are DNS names, which ignore case)"
            if _NAME.fullmatch(name.lower())
            else ""
        )
        raise ConfigError(
            f"party name {name!r} cannot be a certificate identity: use lowercase letters, digits, '.' and '-' "
            f"(1 to 64 characters, starting and ending with a letter or digit){hint}"
        )
    return name


def role_uri(role: Role) -> str:
    """The URI subject-alternative name that grants ``role``."""
    return ROLE_URI_PREFIX + role


def federation_parties(
    coordinator: str, entities: Sequence[str], client: str = DEFAULT_CLIENT_NAME
) -> dict[str, tuple[Role, ...]]:
    """The certificates a federation needs, name -> roles (what ``ppsvm certs`` and ``ppsvm split`` make).

    The coordinator's certificate also carries the client role: it may ask its own prediction
    service, which tells it nothing it cannot get from the entities directly, and so running a
    prediction client beside the coordinator needs no second key. Every other client uses
    ``client``'s certificate, which can ask for predictions and nothing else.

    Raises
    ------
    ConfigError
        A name is used twice (one name, one certificate, one set of roles).
    """
    names = [coordinator, *entities, client]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ConfigError(
            f"party names must be unique: {', '.join(map(repr, repeated))} named twice among the coordinator "
            f"{coordinator!r}, the entities and the prediction client {client!r}"
        )
    return {coordinator: (COORDINATOR, CLIENT), **{name: (ENTITY,) for name in entities}, client: (CLIENT,)}


def certificate_file(name: str) -> str:
    return f"{name}.pem"


def key_file(name: str) -> str:
    return f"{name}.key"


@dataclass(frozen=True)
class Pem:
    """One PEM file to write: its text and whether it is secret (private keys)."""

    text: bytes
    secret: bool


def _private_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "ppsvm federation"),
        ]
    )


def make_certificates(
    parties: Mapping[str, Collection[Role]],
    *,
    valid_days: int = DEFAULT_VALID_DAYS,
    now: datetime.datetime | None = None,
    ca_name: str = "ppsvm federation CA",
) -> dict[str, Pem]:
    """A fresh CA and a certificate and key for each party, as files by name.

    Parameters
    ----------
    parties : mapping of str to collection of role
        Party identity (lowercase DNS characters) -> the roles its certificate grants
        (see :func:`federation_parties`); at least one role each.
    valid_days : int
        Validity of every certificate from ``now``; tests pass a past ``now`` for expired ones.
    now : datetime, optional
        Start of validity (UTC); default the current time.

    Returns
    -------
    dict
        ``ca.pem``, ``ca.key`` and ``NAME.pem`` / ``NAME.key`` for every name.
    """
    for name, roles in parties.items():
        check_party_name(name)
        unknown = sorted(set(roles) - set(ROLES))
        if not roles or unknown:
            raise ConfigError(f"party {name!r}: roles must be one or more of {', '.join(ROLES)}, got {sorted(roles)}")
    if valid_days < 1:
        raise ConfigError(f"certificates must be valid for at least 1 day, got {valid_days}")
    start = (now or datetime.datetime.now(datetime.UTC)) - datetime.timedelta(minutes=5)
    end = start + datetime.timedelta(days=valid_days)
    ca_key = _private_key()
    ca_subject = _name(ca_name)
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_subject)
        .issuer_name(ca_subject)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    files = {
        CA_FILE: Pem(ca_cert.public_bytes(serialization.Encoding.PEM), False),
        CA_KEY_FILE: Pem(_key_pem(ca_key), True),
    }
    for name, roles in parties.items():
        key = _private_key()
        alternative_names = [
            x509.DNSName(name),
            *(x509.UniformResourceIdentifier(role_uri(role)) for role in sorted(set(roles))),
        ]
        cert = (
            x509.CertificateBuilder()
            .subject_name(_name(name))
            .issuer_name(ca_subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(end)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.SubjectAlternativeName(alternative_names), critical=False)
            # Every party is a server to some and a client to others (the coordinator also serves predictions).
            .add_extension(
                x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                critical=False,
            )
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256())
        )
        files[certificate_file(name)] = Pem(cert.public_bytes(serialization.Encoding.PEM), False)
        files[key_file(name)] = Pem(_key_pem(key), True)
    return files


def certificate_identity(pem: bytes) -> tuple[str, datetime.datetime]:
    """The DNS name (or common name) a certificate asserts, and when it expires (UTC)."""
    cert = x509.load_pem_x509_certificate(pem)
    try:
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
            x509.DNSName
        )
    except x509.ExtensionNotFound:
        names = []
    if not names:
        names = [str(a.value) for a in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
    return (names[0] if names else ""), cert.not_valid_after_utc


@dataclass(frozen=True)
class Party:
    """Who a certificate says its holder is: one name and the roles it was granted."""

    name: str
    roles: frozenset[str]


@functools.lru_cache(maxsize=256)
def certificate_party(pem: bytes) -> Party:
    """The party a peer's certificate (PEM) names, read exactly: its one DNS name and its role URIs.

    Servers call this on every call with the peer's certificate; a peer presents the same bytes
    call after call, hence the cache.

    Raises
    ------
    ValueError
        Not a PEM certificate, or not exactly one DNS name (ppsvm never issues such a certificate).
    """
    cert = x509.load_pem_x509_certificate(pem)
    try:
        alternative = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        raise ValueError("the certificate has no subject-alternative names") from None
    names = alternative.get_values_for_type(x509.DNSName)
    if len(names) != 1:
        raise ValueError(f"the certificate names {len(names)} DNS identities; a ppsvm party has exactly one")
    roles = frozenset(
        uri.removeprefix(ROLE_URI_PREFIX)
        for uri in alternative.get_values_for_type(x509.UniformResourceIdentifier)
        if uri.startswith(ROLE_URI_PREFIX)
    )
    return Party(names[0], roles)
