"""Test certificates that `ppsvm.wire.certs.make_certificates` refuses to make (expired, odd names or roles)."""

from __future__ import annotations

import datetime
from collections.abc import Sequence

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def sign_leaf(
    ca_key_pem: bytes,
    ca_pem: bytes,
    common_name: str,
    start: datetime.datetime,
    alt_names: Sequence[x509.GeneralName],
    extended_key_usage: Sequence[x509.ObjectIdentifier] = (),
) -> tuple[bytes, bytes]:
    """A leaf certificate valid for one day from ``start``, signed by the given CA; (certificate PEM, key PEM).

    Parameters
    ----------
    ca_key_pem, ca_pem : bytes
        The signing CA's private key and certificate.
    common_name : str
    start : datetime.datetime
        Not valid before; a date in the past makes an expired certificate.
    alt_names : sequence of x509.GeneralName
        The subject alternative names (DNS names, role URIs).
    extended_key_usage : sequence of x509.ObjectIdentifier, optional
        No extension when empty.
    """
    ca_key = serialization.load_pem_private_key(ca_key_pem, password=None)
    ca = x509.load_pem_x509_certificate(ca_pem)
    key = ec.generate_private_key(ec.SECP256R1())
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(start + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(list(alt_names)), critical=False)
    )
    if extended_key_usage:
        builder = builder.add_extension(x509.ExtendedKeyUsage(list(extended_key_usage)), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())  # type: ignore[arg-type]
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return cert.public_bytes(serialization.Encoding.PEM), key_pem
