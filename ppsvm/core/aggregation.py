"""Secure aggregation of a row block's kernel blocks: only their combination is readable.

Privacy rule 8 (docs/design.md): a single entity's kernel block is not private against a
column-block peer, who knows B_j. The coordinator needs only the row block's combination
(Mangasarian & Wild's sum (2.6) for the linear kernel; for the Gaussian, the Hadamard product,
i.e. the exponential of the sum of the blocks' log-kernels -mu ||a_j - b_j||^2). So each entity
sends its share masked with pairwise masks (Bonawitz et al., CCS 2017) that cancel in the sum:

- every pair (u, v) of a row block's entities holds a pair secret (agreed through onboarding, or
  written by ``ppsvm split``); for one release, its mask seed is HKDF-SHA256 of that secret with the
  release's context;
- entity u encodes its share in fixed point in Z_2^64 and adds the pseudorandom stream of every pair
  (u, v), with + when u < v and - otherwise; the coordinator adds all shares mod 2^64, the masks cancel
  and the fixed-point sum decodes exactly (rounding of each share only: 2^-43 in kernel units);
- the context binds what the entities of one round share: the coordinator's fresh nonce, the exact
  ordered list of records, and the view (kernel, width, mbar). Two entities asked for different
  record lists or views mask with unrelated streams, so their sum is noise: the coordinator cannot
  pair one entity's record with another's. An entity answers a nonce once, so no mask covers two
  releases.

A row block of two entities gives each the other's share (it subtracts its own): inherent to any
sum of two, and the other's block is then under a B_j it does not know (docs/threat-model.md).
Pure functions; the entity and the coordinator call them (:mod:`ppsvm.entity.cell`,
:mod:`ppsvm.coordinator.federation`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from scipy.spatial.distance import cdist

from ppsvm.core.kernels import KernelName

# Fixed point: a share x travels as round(x * 2^SCALE_BITS) mod 2^64.
SCALE_BITS = 42
_SCALE = float(2**SCALE_BITS)
# Every share entry is clipped to [-SHARE_LIMIT, SHARE_LIMIT] before encoding, so the sum of up to
# MAX_ROW_BLOCK_ENTITIES shares cannot wrap around 2^63 (2^14 * 2^42 * 2^7 = 2^63). In-box records
# stay far inside: a linear share is at most n_j, a log-kernel share at most mu n_j (1 at the fetch width).
SHARE_LIMIT = float(2**14)
MAX_ROW_BLOCK_ENTITIES = 127
# A nonce shorter than this could repeat by chance across a federation's life.
MIN_NONCE_BYTES = 16
# ... and a longer one has no use: it is only hashed into the context, so no request carries more than this.
MAX_NONCE_BYTES = 64
# Rows encoded and masked per step: bounds the temporaries whatever the block's size.
_CHUNK_ROWS = 8192
_SEED_LABEL = b"ppsvm: mask seed of one row-block pair for one release"


def log_share(kernel: KernelName, A: np.ndarray, B: np.ndarray, mu: float) -> np.ndarray:
    """An entity's additive share of its row block's kernel: A B' (linear) or -mu ||a - b||^2 (Gaussian).

    The Gaussian kernel of the row block is exp of the sum of these shares; computing the
    squared distances directly (no exp, then log) keeps each share exact to rounding.

    Parameters
    ----------
    A : ndarray, shape (m, n_j)
        The entity's scaled records.
    B : ndarray, shape (mbar, n_j)

    Returns
    -------
    ndarray, shape (m, mbar)
    """
    if kernel == "linear":
        return A @ B.T
    return -mu * cdist(A, B, "sqeuclidean")


def records_digest(ids: np.ndarray | list[str]) -> bytes:
    """SHA-256 of an ordered list of record ids (pseudonyms): equal lists, in equal order, give equal digests."""
    array = np.asarray(ids, dtype=str)
    width = int(np.char.str_len(array).max()) if array.size else 0
    fixed = np.ascontiguousarray(array.astype(f"<U{max(width, 1)}"))
    digest = hashlib.sha256(f"{array.size}|{width}|".encode())
    digest.update(fixed.tobytes())
    return digest.digest()


def mask_context(nonce: bytes, records: bytes, view: Mapping[str, Any]) -> bytes:
    """The context one release's masks are bound to: nonce, ordered record list (digest) and view.

    Parameters
    ----------
    nonce : bytes
        The coordinator's fresh nonce for this round (at least MIN_NONCE_BYTES).
    records : bytes
        :func:`records_digest` of the ordered records the block's rows belong to.
    view : mapping
        JSON-able description of what every entity of the round is asked under (kernel, width, mbar).
    """
    text = json.dumps({"view": view, "records": records.hex(), "nonce": nonce.hex()}, sort_keys=True)
    return hashlib.sha256(text.encode()).digest()


def pair_seed(pair_secret: bytes, context: bytes) -> bytes:
    """The mask seed of one pair for one release (HKDF-SHA256 of the pair secret, bound to the context)."""
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_SEED_LABEL + context).derive(pair_secret)


def _mask_streams(own: str, pair_secrets: Mapping[str, bytes], context: bytes) -> list[tuple[np.random.PCG64, bool]]:
    streams = []
    for peer in sorted(pair_secrets):
        if peer == own:
            raise ValueError(f"entity {own} holds a pair secret with itself")
        seed = int.from_bytes(pair_seed(pair_secrets[peer], context), "little")
        streams.append((np.random.PCG64(seed), own < peer))
    return streams


def masked_shares(
    share: np.ndarray, own: str, pair_secrets: Mapping[str, bytes], context: bytes
) -> Iterator[np.ndarray]:
    """The share encoded in fixed point and masked, in batches of whole rows (uint64, row order).

    Parameters
    ----------
    share : ndarray, shape (m, mbar)
        From :func:`log_share`; non-finite entries are clipped like large ones (never an error: rule 6).
    own : str
        This entity's id.
    pair_secrets : mapping of peer id to bytes
        One secret per other entity of the row block.
    context : bytes
        :func:`mask_context` of this release.

    Yields
    ------
    ndarray of uint64, shape (k, mbar)
        Consecutive row batches; the masks are one stream per pair over the rows in order.
    """
    if len(pair_secrets) + 1 > MAX_ROW_BLOCK_ENTITIES:
        raise ValueError(f"a row block of more than {MAX_ROW_BLOCK_ENTITIES} entities could wrap the masked sum")
    streams = _mask_streams(own, pair_secrets, context)
    for start in range(0, len(share), _CHUNK_ROWS):
        part = np.nan_to_num(share[start : start + _CHUNK_ROWS], nan=0.0, posinf=SHARE_LIMIT, neginf=-SHARE_LIMIT)
        encoded = np.rint(np.clip(part, -SHARE_LIMIT, SHARE_LIMIT) * _SCALE).astype(np.int64).view(np.uint64)
        for stream, add in streams:
            mask = stream.random_raw(encoded.size).reshape(encoded.shape)
            if add:
                encoded += mask
            else:
                encoded -= mask
        yield encoded


def decode_sum(total: np.ndarray) -> np.ndarray:
    """The summed shares, decoded in place: ``total`` (uint64, the masked shares added mod 2^64) becomes float64.

    Parameters
    ----------
    total : ndarray of uint64, shape (m, p)
        Any layout (a row slice of a Fortran-ordered K is not contiguous).

    Returns
    -------
    ndarray of float64, shape (m, p)
        A view of the same memory: no second array of K's size.
    """
    if total.dtype != np.uint64 or total.ndim != 2:
        raise ValueError(f"expected a 2-D uint64 array of summed shares, got {total.dtype} of shape {total.shape}")
    values, signed = total.view(np.float64), total.view(np.int64)
    for start in range(0, len(total), _CHUNK_ROWS):
        # The division makes a new array of one chunk: integers are read before doubles overwrite their bytes.
        values[start : start + _CHUNK_ROWS] = signed[start : start + _CHUNK_ROWS] / _SCALE
    return values


def share_bound(n_shares: int) -> float:
    """The largest absolute sum that shares which cancelled can give: beyond it, masks did not cancel."""
    return n_shares * SHARE_LIMIT
