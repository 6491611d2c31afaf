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
import ipaddress
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from ppsvm.errors import ConfigError
from ppsvm.files import PRIVATE_MODE, PUBLIC_MODE, write_all

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
# The identity in the coordinator's Dask cluster certificate (dask_cluster_certificates): not a federation party.
DASK_CLUSTER_NAME = "dask-cluster"
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

    The one-directory path (``ppsvm certs``, ``ppsvm split``): the same three steps each organisation and
    the operator take apart (:func:`new_request` where the key is kept, :func:`new_ca` and
    :func:`sign_request` at the operator), run in one place.

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
        _check_roles(name, roles)
    ca = new_ca(valid_days=valid_days, now=now, ca_name=ca_name)
    files = {CA_FILE: ca.certificate, CA_KEY_FILE: ca.key}
    for name, roles in parties.items():
        request = new_request(name)
        files[certificate_file(name)] = sign_request(
            ca, request.certificate.text, roles, valid_days=valid_days, now=now
        )
        files[key_file(name)] = request.key
    return files


def write_certificates(out: Path, files: Mapping[str, Pem], *, overwrite: bool) -> None:
    """Write ``files`` into ``out`` all at once, keys with mode 0600.

    Raises
    ------
    ConfigError
        ``out`` holds a file of the same name and ``overwrite`` is false, naming them.
    """
    existing = sorted(name for name in files if (out / name).exists())
    if existing and not overwrite:
        raise ConfigError(f"{out} already holds {', '.join(existing)}; pass --overwrite to replace them")
    write_all(
        out,
        {name: (pem.text.decode("ascii"), PRIVATE_MODE if pem.secret else PUBLIC_MODE) for name, pem in files.items()},
    )


def dask_cluster_certificates(
    *, valid_days: int = DEFAULT_VALID_DAYS, now: datetime.datetime | None = None
) -> dict[str, Pem]:
    """A CA of its own for the coordinator's Dask cluster, and the one certificate all its processes show.

    Dask accepts any peer whose certificate the cluster's CA signed, whatever its name or role, and a Dask client
    can run code on the workers, which hold kernel rows: under the federation's CA an entity's or a prediction
    client's certificate would open them. The CA's key is not returned, so nothing else can ever be signed by it.

    Parameters
    ----------
    valid_days : int
        Validity of the CA and the certificate from ``now``.
    now : datetime, optional
        Start of validity (UTC); default the current time.

    Returns
    -------
    dict
        ``ca.pem``, and ``dask-cluster.pem`` / ``dask-cluster.key`` (see :data:`DASK_CLUSTER_NAME`).
    """
    files = make_certificates(
        {DASK_CLUSTER_NAME: (COORDINATOR,)}, valid_days=valid_days, now=now, ca_name="ppsvm Dask cluster CA"
    )
    del files[CA_KEY_FILE]
    return files


def dask_cluster_files(directory: Path) -> tuple[Path, Path, Path]:
    """The CA certificate, certificate and key :func:`dask_cluster_certificates` gives, as files in ``directory``."""
    return directory / CA_FILE, directory / certificate_file(DASK_CLUSTER_NAME), directory / key_file(DASK_CLUSTER_NAME)


def issued_by(certificate: bytes, ca: bytes) -> bool:
    """Whether the CA certificate ``ca`` signed ``certificate`` (both PEM), or ``certificate`` is that CA itself."""
    issuer = x509.load_pem_x509_certificate(ca)
    subject = x509.load_pem_x509_certificate(certificate)
    if subject.public_key() == issuer.public_key():
        return True
    try:
        subject.verify_directly_issued_by(issuer)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


@dataclass(frozen=True)
class KeyPair:
    """A private key (secret PEM) and what vouches for it: a CA's certificate, or a party's signing request."""

    key: Pem
    certificate: Pem


def new_ca(
    *, valid_days: int = DEFAULT_VALID_DAYS, now: datetime.datetime | None = None, ca_name: str = "ppsvm federation CA"
) -> KeyPair:
    """A federation CA: its key and self-signed certificate (``ca.key``, ``ca.pem``); the operator keeps the key."""
    start, end = _validity(valid_days, now)
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
    return KeyPair(Pem(_key_pem(ca_key), True), Pem(ca_cert.public_bytes(serialization.Encoding.PEM), False))


def new_request(name: str, addresses: Sequence[str] = ()) -> KeyPair:
    """A party's new private key and a certificate signing request for ``name`` (PEM), made where the key stays.

    Parameters
    ----------
    name : str
        The party's federation id: the one DNS name peers check (:func:`certificate_party`).
    addresses : sequence of str
        IP addresses the party serves on, added as IP subject-alternative names for tools that check a
        server by address. ppsvm itself checks the name, so a party that moves needs no new certificate.
    """
    check_party_name(name)
    key = _private_key()
    request = (
        x509.CertificateSigningRequestBuilder()
        .subject_name(_name(name))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name), *_ip_names(addresses)]), critical=False)
        .sign(key, hashes.SHA256())
    )
    return KeyPair(Pem(_key_pem(key), True), Pem(request.public_bytes(serialization.Encoding.PEM), False))


def sign_request(
    ca: KeyPair,
    request_pem: bytes,
    roles: Collection[Role],
    *,
    valid_days: int = DEFAULT_VALID_DAYS,
    now: datetime.datetime | None = None,
) -> Pem:
    """The CA's certificate for the party that made ``request_pem``, granting ``roles``.

    The roles are the operator's decision: whatever the request asks for, only its name and IP addresses
    are taken from it, after its signature is checked (so the requester holds the key).

    Raises
    ------
    ConfigError
        The request is not a PEM signing request, its signature fails, or its name cannot be a party's.
    """
    try:
        request = x509.load_pem_x509_csr(request_pem)
    except ValueError as exc:
        raise ConfigError(f"not a PEM certificate signing request: {exc}") from exc
    try:
        valid = request.is_signature_valid
    except ValueError:  # the public key itself does not parse
        valid = False
    if not valid:
        raise ConfigError("the certificate signing request's signature does not verify: it was altered")
    names = [str(a.value) for a in request.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
    if len(names) != 1:
        raise ConfigError(f"the certificate signing request names {len(names)} common names; a party has one")
    name = check_party_name(names[0])
    _check_roles(name, roles)
    try:
        asked = request.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        addresses = asked.get_values_for_type(x509.IPAddress)
    except x509.ExtensionNotFound:
        addresses = []
    ca_key = serialization.load_pem_private_key(ca.key.text, password=None)
    ca_cert = x509.load_pem_x509_certificate(ca.certificate.text)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise ConfigError("the CA key is not an EC key made by ppsvm")
    start, end = _validity(valid_days, now)
    alternative_names = [
        x509.DNSName(name),
        *(x509.IPAddress(address) for address in addresses),
        *(x509.UniformResourceIdentifier(role_uri(role)) for role in sorted(set(roles))),
    ]
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(name))
        .issuer_name(ca_cert.subject)
        .public_key(request.public_key())
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
    return Pem(cert.public_bytes(serialization.Encoding.PEM), False)


def request_name(request_pem: bytes) -> str:
    """The party name a certificate signing request asks for (its common name), unchecked."""
    try:
        request = x509.load_pem_x509_csr(request_pem)
    except ValueError as exc:
        raise ConfigError(f"not a PEM certificate signing request: {exc}") from exc
    names = [str(a.value) for a in request.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
    return names[0] if len(names) == 1 else ""


def _check_roles(name: str, roles: Collection[Role]) -> None:
    unknown = sorted(set(roles) - set(ROLES))
    if not roles or unknown:
        raise ConfigError(f"party {name!r}: roles must be one or more of {', '.join(ROLES)}, got {sorted(roles)}")


def _validity(valid_days: int, now: datetime.datetime | None) -> tuple[datetime.datetime, datetime.datetime]:
    if valid_days < 1:
        raise ConfigError(f"certificates must be valid for at least 1 day, got {valid_days}")
    start = (now or datetime.datetime.now(datetime.UTC)) - datetime.timedelta(minutes=5)
    return start, start + datetime.timedelta(days=valid_days)


def _ip_names(addresses: Sequence[str]) -> list[x509.IPAddress]:
    names = []
    for address in addresses:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(address)))
        except ValueError:
            raise ConfigError(f"{address!r} is not an IP address (a party's one DNS name is its id)") from None
    return names


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
