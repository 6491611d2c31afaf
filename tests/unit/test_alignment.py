"""Record alignment across the column blocks of a row block (coordinator.federation.record_positions)."""

from __future__ import annotations

import numpy as np
import pytest

from coordinator.federation import record_positions

REFERENCE = np.array(["a7", "b2", "c9", "d1", "e5"])


def test_same_order_is_the_identity() -> None:
    assert record_positions(REFERENCE, REFERENCE.copy()).tolist() == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("seed", range(5))
def test_shuffled_ids_map_back_to_the_reference(seed: int) -> None:
    ids = np.random.default_rng(seed).permutation(REFERENCE)
    order = record_positions(REFERENCE, ids)
    expected = [REFERENCE.tolist().index(record) for record in ids.tolist()]  # independent: list lookups
    assert order.tolist() == expected
    assert (REFERENCE[order] == ids).all()


@pytest.mark.parametrize(
    "ids",
    [
        np.array(["a7", "b2", "c9", "d1"]),               # one missing
        np.array(["a7", "b2", "c9", "d1", "e5", "f0"]),   # one extra
        np.array(["a7", "b2", "c9", "d1", "zz"]),         # one replaced
        np.array(["a7", "a7", "c9", "d1", "e5"]),         # a duplicate hiding a missing one
        np.array(["e5", "d1", "c9", "b2", "a0"]),         # shuffled and one replaced
    ],
)
def test_different_record_sets_are_refused(ids: np.ndarray) -> None:
    assert record_positions(REFERENCE, ids) is None
