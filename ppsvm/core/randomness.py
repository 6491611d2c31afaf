"""The secret random matrix B_j and the generators used for sampling.

B_j is derived inside the entities of column block j from the secret they share
(docs/design.md rule 2): the coordinator never chooses or sees it. Rows come from one
fixed stream per (secret, column width), so a request for mbar rows gets the
first mbar rows of the same matrix: repeated requests with different mbar never
reveal more than max(mbar) < n_j random points, and a restarted entity derives
the same B_j.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from collections.abc import Sequence

import numpy as np

_B_LABEL = b"ppsvm/v1/random-kernel-B"
_CHECK_LABEL = b"ppsvm/v1/key-check-value"
_RANGE_LABEL = b"ppsvm/v1/feature-range"
_FEATURES_LABEL = b"ppsvm/v1/feature-names"
_RECORD_ID_LABEL = b"ppsvm/v1/record-id/"
# Hex digits of a record pseudonym: 128 bits, so two of a federation's ids collide with probability ~m^2 / 2^129.
PSEUDONYM_HEX_DIGITS = 32
MIN_SECRET_BYTES = 16


def derive_B(secret: bytes, mbar: int, n_features: int, epoch: int = 0) -> np.ndarray:
    """The first ``mbar`` rows of column block j's random matrix in basis epoch ``epoch``.

    A new epoch (another kernel, other bounds, more points: ``ppsvm entity epoch --next``) is a new matrix from
    the same secret, so moving to it needs no new secret; epoch 0 is the matrix of every earlier version.

    Parameters
    ----------
    secret : bytes
        The column block's shared secret (at least 16 bytes).
    mbar : int
        Number of random points (rows), >= 1.
    n_features : int
        n_j, the column block's width.

    Returns
    -------
    ndarray, shape (mbar, n_features)
        Entries uniform on [0, 1], the range the features are scaled to.
    """
    if len(secret) < MIN_SECRET_BYTES:
        raise ValueError(f"column-block secret has {len(secret)} bytes; at least {MIN_SECRET_BYTES} are needed")
    if mbar < 1 or n_features < 1 or epoch < 0:
        raise ValueError(f"mbar and n_features must be >= 1 and epoch >= 0, got {mbar}, {n_features} and {epoch}")
    # HMAC-SHA256 as a key-derivation step: B depends on the secret, the width and the epoch only.
    label = _B_LABEL + b"/n=" + str(n_features).encode() + (b"/epoch=" + str(epoch).encode() if epoch else b"")
    seed = hmac.new(secret, label, hashlib.sha256).digest()
    rng = np.random.Generator(np.random.PCG64(int.from_bytes(seed, "little")))
    return rng.random((mbar, n_features))


def key_check_value(secret: bytes) -> str:
    """A public fingerprint of a column-block secret: 16 hex digits of HMAC-SHA256 of a fixed label.

    Entities holding the same secret publish the same value, so a mismatch shows
    before a silently wrong kernel is assembled. HMAC under a different label
    than B's derivation: the value says nothing about the secret or B.
    """
    return hmac.new(secret, _CHECK_LABEL, hashlib.sha256).hexdigest()[:16]


def record_pseudonyms(key: bytes, ids: Sequence[str]) -> list[str]:
    """The keyed pseudonyms of record ids: 32 hex digits of HMAC-SHA256 under the federation's record-id key.

    Entities send these instead of their ids, so the coordinator aligns and predicts records without
    seeing one real id, and cannot test a guessed id without the key (it is not a plain hash). The same
    key at every entity maps a record to the same pseudonym everywhere; a prediction client holding the
    key maps its ids to pseudonyms and the answers back.
    """
    return [
        hmac.new(key, _RECORD_ID_LABEL + record.encode("utf-8"), hashlib.sha256).hexdigest()[:PSEUDONYM_HEX_DIGITS]
        for record in ids
    ]


def features_check(secret: bytes, names: Sequence[str]) -> str:
    """A public fingerprint of a cell's feature columns (names, in order, and the schema's fingerprint): 16 hex
    digits of HMAC-SHA256.

    The entities of a column block must hold the same features in the same order, or the
    assembled kernel silently compares one hospital's weight with another's age. Keyed with
    the column-block secret, so the coordinator can compare fingerprints but cannot test
    guesses of the names.
    """
    message = _FEATURES_LABEL + b"/" + json.dumps(list(names)).encode("utf-8")
    return hmac.new(secret, message, hashlib.sha256).hexdigest()[:16]


def range_tag(secret: bytes, entity_id: str, low: np.ndarray, high: np.ndarray) -> str:
    """HMAC-SHA256 (hex) binding an entity's published per-feature min and max to its id.

    Only holders of the column-group secret can make or check it, so the
    coordinator can relay ranges between a column block's entities but not alter them.
    """
    message = b"".join(
        [
            _RANGE_LABEL,
            b"/",
            entity_id.encode("utf-8"),
            b"\0",
            np.asarray(low, dtype="<f8").tobytes(),
            np.asarray(high, dtype="<f8").tobytes(),
        ]
    )
    return hmac.new(secret, message, hashlib.sha256).hexdigest()


def new_secret_hex() -> str:
    """A fresh 256-bit column-block secret, hex encoded."""
    return secrets.token_hex(32)
