"""The secret random matrix B_j: deterministic per (secret, width), a fixed stream, uniform on [0, 1)."""

from __future__ import annotations

import numpy as np
import pytest

from ppsvm.core.randomness import derive_B, features_check, key_check_value, new_secret_hex

SECRET = b"column-block-secret-0123456789ab"
OTHER = b"column-block-secret-0123456789ac"  # differs in the last byte only


def test_same_secret_gives_same_B() -> None:
    first = derive_B(SECRET, 6, 9)
    second = derive_B(bytes(bytearray(SECRET)), 6, 9)  # an equal secret from another object
    assert first.shape == (6, 9)
    assert first.dtype == np.float64
    assert np.array_equal(first, second)


def test_different_secrets_give_different_B() -> None:
    a, b = derive_B(SECRET, 6, 9), derive_B(OTHER, 6, 9)
    # Not merely unequal: no entry in common (continuous uniforms).
    assert not np.isin(a, b).any()


@pytest.mark.parametrize("n", [1, 4, 20])
def test_prefix_property(n: int) -> None:
    five = derive_B(SECRET, 5, n)
    three = derive_B(SECRET, 3, n)
    one = derive_B(SECRET, 1, n)
    assert np.array_equal(five[:3], three)
    assert np.array_equal(five[:1], one)
    assert not np.array_equal(five[3:5], five[:2])


def test_depends_on_n_features() -> None:
    narrow, wide = derive_B(SECRET, 4, 5), derive_B(SECRET, 4, 6)
    # A different width is a different stream, not a reshaped or truncated copy of the same one.
    assert not np.isin(narrow, wide).any()


def test_entries_uniform_on_unit_interval() -> None:
    B = derive_B(SECRET, 200, 50)
    assert B.min() >= 0.0
    assert B.max() < 1.0
    # 10,000 uniforms: mean 0.5 +- 0.003 (sd), deciles about 1,000 each.
    assert abs(B.mean() - 0.5) < 0.02
    counts = np.histogram(B, bins=10, range=(0.0, 1.0))[0]
    assert counts.min() > 850 and counts.max() < 1150


@pytest.mark.parametrize("secret", [b"", b"x", b"0123456789abcde"])
def test_short_secret_refused(secret: bytes) -> None:
    with pytest.raises(ValueError, match=f"{len(secret)} bytes; at least 16"):
        derive_B(secret, 3, 4)


def test_sixteen_byte_secret_accepted() -> None:
    assert derive_B(b"0123456789abcdef", 2, 3).shape == (2, 3)


@pytest.mark.parametrize("mbar, n", [(0, 3), (3, 0), (-1, 3)])
def test_non_positive_sizes_refused(mbar: int, n: int) -> None:
    with pytest.raises(ValueError, match="must be >= 1"):
        derive_B(SECRET, mbar, n)


def test_new_secret_hex_is_fresh_and_long_enough() -> None:
    one, two = new_secret_hex(), new_secret_hex()
    assert one != two
    assert len(bytes.fromhex(one)) == 32
    derive_B(bytes.fromhex(one), 2, 2)  # usable as a secret


def test_features_check_tells_feature_lists_apart() -> None:
    secret = bytes(range(32))
    names = ["age", "weight", "blood pressure"]
    value = features_check(secret, names)
    assert len(value) == 16 and int(value, 16) >= 0
    assert features_check(secret, list(names)) == value
    others = [
        ["weight", "age", "blood pressure"],  # same features, other order
        ["age", "weight"],  # one fewer
        ["Age", "weight", "blood pressure"],  # other spelling
        ["age,weight", "blood pressure"],  # joined names are not the same list
    ]
    assert len({value, *(features_check(secret, other) for other in others)}) == 1 + len(others)


def test_features_check_is_keyed_by_the_secret() -> None:
    names = ["x0", "x1"]
    assert features_check(bytes(32), names) != features_check(bytes(range(32)), names)
    # Not the key-check value under another name: the two fingerprints use different labels.
    assert features_check(bytes(32), []) != key_check_value(bytes(32))
