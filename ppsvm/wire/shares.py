"""Group secrets agreed by their members, relayed by an operator who cannot read them.

A column block's secret (from which its entities derive B_j) and the record-id key (from which
every entity derives the pseudonyms of its records) must be known to their members and to nobody
else, the coordinator and the federation's operator included. Without a courier between the
organisations, the members agree on them like this:

1. each member makes an X25519 key pair and sends the public half to the operator with its
   certificate request; the operator publishes it with the federation;
2. each member draws a random share per group it belongs to and seals a copy of it to each other
   member (ephemeral X25519 key agreement, HKDF-SHA256, AES-256-GCM with the group, sender and
   recipient as associated data); the operator relays the sealed files;
3. each member opens the shares sealed to it and derives the group secret from every member's
   share (HKDF-SHA256 over the shares in member order).

The operator sees public keys and ciphertexts only. An operator that published keys of its own in
place of the members' could read what they seal (it issues the certificates too, so nothing inside
the federation can stop it): the members therefore compare :func:`group_fingerprint` out of band
(a telephone call between the two hospitals), which differs if any key was substituted. A member
that is sent a wrong or missing share ends with a different secret; the coordinator's survey then
refuses the federation (the entities' keyed check values differ), so nothing is trained on it.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from ppsvm.errors import ConfigError

SHARE_BYTES = 32
SECRET_BYTES = 32
_FORMAT = "ppsvm sealed share 1"
_SEAL_INFO = b"ppsvm: key for one sealed share"
_SECRET_SALT = b"ppsvm: group secret from its members' shares"


@dataclass(frozen=True)
class ShareKey:
    """A member's X25519 key pair for receiving shares: the private half stays with the member."""

    private: bytes
    public: bytes

    @staticmethod
    def new() -> ShareKey:
        key = X25519PrivateKey.generate()
        return ShareKey(_raw_private(key), key.public_key().public_bytes_raw())


def public_share_key(private: bytes) -> bytes:
    """The public half (32 raw bytes) of a raw X25519 private key."""
    return X25519PrivateKey.from_private_bytes(private).public_key().public_bytes_raw()


def new_share() -> bytes:
    """A member's random contribution to one group secret."""
    return os.urandom(SHARE_BYTES)


def seal(share: bytes, *, group: str, sender: str, recipient: str, recipient_key: bytes) -> str:
    """``share`` sealed to ``recipient_key`` (raw X25519 public key), as a JSON text file.

    Only the holder of the matching private key can open it; the header (group, sender, recipient)
    is authenticated, so a relay cannot pass a share sealed for one group or member off as another's.
    """
    ephemeral = X25519PrivateKey.generate()
    ephemeral_public = ephemeral.public_key().public_bytes_raw()
    header = {"format": _FORMAT, "group": group, "sender": sender, "recipient": recipient}
    key = _sealing_key(ephemeral.exchange(_public_key(recipient_key, recipient)), ephemeral_public, recipient_key)
    nonce = os.urandom(12)
    ciphertext = AESGCM(key).encrypt(nonce, share, _associated(header, ephemeral_public))
    return json.dumps(
        {**header, "ephemeral": ephemeral_public.hex(), "nonce": nonce.hex(), "ciphertext": ciphertext.hex()}
    )


@dataclass(frozen=True)
class SealedHeader:
    """Who sealed a share, for whom and for which group (read before opening, to sort the relay's files)."""

    group: str
    sender: str
    recipient: str


def sealed_header(text: str, origin: str) -> SealedHeader:
    """The header of a sealed share; ConfigError naming ``origin`` if it is not one."""
    document = _document(text, origin)
    return SealedHeader(document["group"], document["sender"], document["recipient"])


def open_sealed(text: str, private_key: bytes, *, origin: str) -> tuple[SealedHeader, bytes]:
    """The header and the share of a sealed file addressed to the holder of ``private_key``.

    Raises
    ------
    ConfigError
        Not a sealed share, or it does not open with this key (sealed to another key, or altered on the way).
    """
    document = _document(text, origin)
    header = {key: document[key] for key in ("format", "group", "sender", "recipient")}
    try:
        ephemeral_public = bytes.fromhex(document["ephemeral"])
        nonce, ciphertext = bytes.fromhex(document["nonce"]), bytes.fromhex(document["ciphertext"])
    except ValueError:
        raise ConfigError(f"{origin}: a sealed share's fields must be hex text") from None
    own = public_share_key(private_key)
    secret = X25519PrivateKey.from_private_bytes(private_key).exchange(_public_key(ephemeral_public, origin))
    try:
        share = AESGCM(_sealing_key(secret, ephemeral_public, own)).decrypt(
            nonce, ciphertext, _associated(header, ephemeral_public)
        )
    except InvalidTag:
        raise ConfigError(
            f"{origin}: the share does not open with this member's key: it was sealed to another key "
            "(a substituted public key?) or altered on the way"
        ) from None
    if len(share) != SHARE_BYTES:
        raise ConfigError(f"{origin}: a share has {SHARE_BYTES} bytes, this one {len(share)}")
    return SealedHeader(header["group"], header["sender"], header["recipient"]), share


def group_secret(group: str, shares: Mapping[str, bytes]) -> bytes:
    """The group's secret from every member's share (member id -> share); the same at every member."""
    material = b"".join(
        len(member).to_bytes(2, "big") + member.encode("utf-8") + shares[member] for member in sorted(shares)
    )
    return HKDF(hashes.SHA256(), SECRET_BYTES, _SECRET_SALT, group.encode("utf-8")).derive(material)


def group_fingerprint(group: str, public_keys: Mapping[str, bytes]) -> str:
    """A short text the members of ``group`` read to each other out of band: equal iff they hold the same keys."""
    digest = hashlib.sha256(
        json.dumps({"group": group, "keys": {m: k.hex() for m, k in sorted(public_keys.items())}}).encode("utf-8")
    ).hexdigest()
    return "-".join(digest[k : k + 4] for k in range(0, 24, 4))


def _raw_private(key: X25519PrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption())


def _public_key(raw: bytes, owner: str) -> X25519PublicKey:
    try:
        return X25519PublicKey.from_public_bytes(raw)
    except ValueError:
        raise ConfigError(f"{owner}: not an X25519 public key (32 bytes)") from None


def _sealing_key(exchanged: bytes, ephemeral_public: bytes, recipient_public: bytes) -> bytes:
    return HKDF(hashes.SHA256(), 32, None, _SEAL_INFO + ephemeral_public + recipient_public).derive(exchanged)


def _associated(header: Mapping[str, str], ephemeral_public: bytes) -> bytes:
    return json.dumps(dict(header), sort_keys=True).encode("utf-8") + ephemeral_public


def _document(text: str, origin: str) -> dict[str, str]:
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{origin}: not a sealed share (JSON): {exc}") from None
    fields = ("format", "group", "sender", "recipient", "ephemeral", "nonce", "ciphertext")
    if not isinstance(document, dict) or document.get("format") != _FORMAT:
        raise ConfigError(f"{origin}: not a sealed share (format {_FORMAT!r})")
    if not all(isinstance(document.get(field), str) for field in fields):
        raise ConfigError(f"{origin}: a sealed share needs the text fields {', '.join(fields)}")
    return {field: document[field] for field in fields}
