"""Certificates for mutual TLS: a small federation CA and one certificate per party.

Every party (the coordinator and each entity) gets a key and a certificate whose
common name and DNS subject-alternative name are its federation id. Peers check
identities by that name, not by network address: the coordinator dials an
entity and requires a certificate for the entity id the federation file names;
an entity accepts calls only from the coordinator identity its own config names.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Sequence
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from common.errors import ConfigError

DEFAULT_COORDINATOR_NAME = "coordinator"
DEFAULT_VALID_DAYS = 365
CA_FILE = "ca.pem"
CA_KEY_FILE = "ca.key"
# Names end up as DNS names in certificates and in gRPC's target-name check: keep them to DNS characters.
_NAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9.-]{0,62}[A-Za-z0-9])?")


def check_party_name(name: str) -> str:
    """``name`` if it can be a certificate identity (letters, digits, '.', '-'); ConfigError otherwise."""
    if not _NAME.fullmatch(name):
        raise ConfigError(
            f"party name {name!r} cannot be a certificate identity: use letters, digits, '.' and '-' "
            "(1 to 64 characters, starting and ending with a letter or digit)"
        )
    return name


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
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name),
                      x509.NameAttribute(NameOID.ORGANIZATION_NAME, "ppsvm federation")])


def make_certificates(
    names: Sequence[str], *, valid_days: int = DEFAULT_VALID_DAYS, now: datetime.datetime | None = None,
    ca_name: str = "ppsvm federation CA",
) -> dict[str, Pem]:
    """A fresh CA and a certificate and key for each party, as files by name.

    Parameters
    ----------
    names : sequence of str
        Party identities (entity ids and the coordinator name); unique, DNS characters.
    valid_days : int
        Validity of every certificate from ``now``; tests pass a past ``now`` for expired ones.
    now : datetime, optional
        Start of validity (UTC); default the current time.

    Returns
    -------
    dict
        ``ca.pem``, ``ca.key`` and ``NAME.pem`` / ``NAME.key`` for every name.
    """
    for name in names:
        check_party_name(name)
    if len(set(names)) != len(names):
        raise ConfigError(f"party names must be unique, got {list(names)}")
    if valid_days < 1:
        raise ConfigError(f"certificates must be valid for at least 1 day, got {valid_days}")
    start = (now or datetime.datetime.now(datetime.timezone.utc)) - datetime.timedelta(minutes=5)
    end = start + datetime.timedelta(days=valid_days)
    ca_key = _private_key()
    ca_subject = _name(ca_name)
    ca_cert = (
        x509.CertificateBuilder().subject_name(ca_subject).issuer_name(ca_subject).public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(start).not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False, key_encipherment=False,
                                     data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
                                     encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    files = {CA_FILE: Pem(ca_cert.public_bytes(serialization.Encoding.PEM), False), CA_KEY_FILE: Pem(_key_pem(ca_key), True)}
    for name in names:
        key = _private_key()
        cert = (
            x509.CertificateBuilder().subject_name(_name(name)).issuer_name(ca_subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(start).not_valid_after(end)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
            # Every party is a server to some and a client to others (the coordinator also serves predictions).
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
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
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
    except x509.ExtensionNotFound:
        names = []
    if not names:
        names = [str(a.value) for a in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
    return (names[0] if names else ""), cert.not_valid_after_utc
