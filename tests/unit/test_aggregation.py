"""Secure aggregation (ppsvm.core.aggregation): masks cancel exactly in the row block's sum and nowhere else."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from ppsvm.core.aggregation import (
    SHARE_LIMIT,
    decode_sum,
    log_share,
    mask_context,
    masked_shares,
    records_digest,
    share_bound,
)
from ppsvm.core.kernels import gaussian_kernel, linear_kernel

IDS = np.array([f"id{k:04d}" for k in range(300)])
VIEW = {"kernel": "gaussian", "mu": (1 / 20).hex(), "mbar": 7}


def pair_secrets(names: list[str]) -> dict[str, dict[str, bytes]]:
    """Every pair of ``names`` with its own secret, as each entity's config holds them."""
    rng = np.random.default_rng(5)
    secrets: dict[str, dict[str, bytes]] = {name: {} for name in names}
    for a in names:
        for b in names:
            if a < b:
                secret = rng.bytes(32)
                secrets[a][b] = secrets[b][a] = secret
    return secrets


def masked(share: np.ndarray, own: str, secrets: dict[str, bytes], context: bytes) -> np.ndarray:
    return np.vstack(list(masked_shares(share, own, secrets, context)))


def combine(shares: list[np.ndarray]) -> np.ndarray:
    return decode_sum(functools.reduce(np.add, shares))


@pytest.mark.parametrize("kernel", ["linear", "gaussian"])
def test_the_masked_shares_of_three_entities_sum_to_the_pooled_kernel(kernel: str) -> None:
    rng = np.random.default_rng(0)
    names = ["r0c0", "r0c1", "r0c2"]
    widths = [4, 9, 7]
    cells = [rng.random((len(IDS), n)) for n in widths]
    points = [rng.random((7, n)) for n in widths]
    mu = 1 / sum(widths)
    secrets = pair_secrets(names)
    context = mask_context(b"n" * 32, records_digest(IDS), VIEW)
    shares = [
        masked(log_share(kernel, A, B, mu), name, secrets[name], context)  # type: ignore[arg-type]
        for name, A, B in zip(names, cells, points, strict=True)
    ]
    combined = combine(shares)
    pooled_A, pooled_B = np.hstack(cells), np.hstack(points)
    if kernel == "gaussian":
        np.testing.assert_allclose(np.exp(combined), gaussian_kernel(pooled_A, pooled_B, mu), rtol=1e-12, atol=0)
    else:
        np.testing.assert_allclose(combined, linear_kernel(pooled_A, pooled_B), rtol=1e-12, atol=1e-12)


def test_one_masked_share_alone_tells_nothing_of_the_block() -> None:
    rng = np.random.default_rng(1)
    secrets = pair_secrets(["a", "b", "c"])
    share = -rng.random((500, 9))
    context = mask_context(b"x" * 32, records_digest(IDS[:500] if len(IDS) >= 500 else IDS), VIEW)
    sent = masked(share, "a", secrets["a"], context)
    # Uniform on 2^64: the decoded values are spread over the whole range, nothing like the share's [-1, 0].
    decoded = sent.view(np.int64) / 2.0**42
    assert np.abs(decoded).mean() > 1e5
    assert abs(np.corrcoef(decoded.ravel(), share.ravel())[0, 1]) < 0.05


@pytest.mark.parametrize(
    "change",
    ["nonce", "records", "order", "view"],
)
def test_shares_masked_for_different_rounds_do_not_cancel(change: str) -> None:
    """What the coordinator would need to pair one entity's record with another's, or reuse a mask: noise."""
    rng = np.random.default_rng(2)
    secrets = pair_secrets(["a", "b"])
    shares = [-rng.random((len(IDS), 5)), -rng.random((len(IDS), 5))]
    first = mask_context(b"n" * 32, records_digest(IDS), VIEW)
    second = {
        "nonce": mask_context(b"m" * 32, records_digest(IDS), VIEW),
        "records": mask_context(b"n" * 32, records_digest(IDS[:-1]), VIEW),
        "order": mask_context(b"n" * 32, records_digest(IDS[::-1]), VIEW),
        "view": mask_context(b"n" * 32, records_digest(IDS), {**VIEW, "mbar": 6}),
    }[change]
    assert second != first
    summed = combine([masked(shares[0], "a", secrets["a"], first), masked(shares[1], "b", secrets["b"], second)])
    # Uniform over +-2^21 after decoding: about 2 x 2^14 / 2^21 = 1.6% of entries land within the bound by chance.
    assert (np.abs(summed) > share_bound(2)).mean() > 0.95


def test_decoding_a_row_slice_of_a_fortran_ordered_kernel_writes_into_it() -> None:
    values = np.arange(24, dtype=np.float64).reshape(8, 3) / 7 - 1
    K = np.zeros((12, 3), order="F")
    sums = K.view(np.uint64)
    sums[2:10] = np.rint(values * 2.0**42).astype(np.int64).view(np.uint64)
    decode_sum(sums[2:10])
    np.testing.assert_allclose(K[2:10], values, rtol=0, atol=1e-12)
    assert (K[:2] == 0).all() and (K[10:] == 0).all()


def test_shares_beyond_the_limit_are_clipped_never_an_error() -> None:
    share = np.array([[np.inf, -np.inf, np.nan, 1e300, -3.0]])
    sent = masked(share, "a", {}, mask_context(b"n" * 16, records_digest(["r"]), VIEW))
    np.testing.assert_array_equal(decode_sum(sent), [[SHARE_LIMIT, -SHARE_LIMIT, 0.0, SHARE_LIMIT, -3.0]])


def test_the_records_digest_is_of_the_ordered_list() -> None:
    assert records_digest(["a", "bb"]) != records_digest(["bb", "a"])
    assert records_digest(["a", "bb"]) == records_digest(np.array(["a", "bb"], dtype="<U40"))
    assert records_digest(["ab", "c"]) != records_digest(["a", "bc"])
