"""Record alignment across the column blocks of a row block (record_positions) and across row blocks (shared_record_id)."""

from __future__ import annotations

import numpy as np
import pytest

from coordinator.federation import RowBlockRecords, record_positions, shared_record_id

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


def _block(row_block: int, train: list[str], test: list[str]) -> RowBlockRecords:
    empty = np.zeros(0, dtype=np.int64)
    return RowBlockRecords(row_block, np.array(train), np.ones(len(train)), np.array(test), np.ones(len(test)),
                           {"e": empty}, {"e": empty})


def _shared_by_loop(blocks: list[RowBlockRecords]) -> set[tuple[str, int, int]]:
    """Independent: every (id, row block, row block) pair by nested loops."""
    found = set()
    for a in blocks:
        for b in blocks:
            if a.row_block < b.row_block:
                held = set(a.train_ids.tolist()) | set(a.test_ids.tolist())
                found |= {(r, a.row_block, b.row_block) for r in (*b.train_ids.tolist(), *b.test_ids.tolist()) if r in held}
    return found


def test_ids_unique_across_row_blocks_pass() -> None:
    blocks = [_block(0, ["a", "b"], ["c"]), _block(1, ["d", "e"], []), _block(2, [], ["f", "g"])]
    assert shared_record_id(blocks) is None
    assert shared_record_id([]) is None
    # Within one row block an id is the entities' business (the cells refuse duplicates).
    assert shared_record_id([_block(0, ["a"], ["a"]), _block(1, ["b"], [])]) is None


@pytest.mark.parametrize(
    "blocks",
    [
        [_block(0, ["a", "b"], ["c"]), _block(1, ["d", "b"], [])],              # train in both
        [_block(0, ["a", "b"], ["c"]), _block(1, ["d"], ["c"])],                # test in both
        [_block(0, ["a"], ["zz"]), _block(1, ["zz", "q"], []), _block(2, ["r"], ["a"])],
        [_block(0, ["long-id-0001"], []), _block(1, ["x"], ["long-id-0001"])],  # different string widths
    ],
)
def test_an_id_in_two_row_blocks_is_found(blocks: list[RowBlockRecords]) -> None:
    shared = shared_record_id(blocks)
    assert shared is not None
    assert shared in _shared_by_loop(blocks)


@pytest.mark.parametrize("seed", range(3))
def test_shared_id_agrees_with_loops_on_random_federations(seed: int) -> None:
    rng = np.random.default_rng(seed)
    names = [f"id{k}" for k in range(200)]
    blocks = [_block(i, rng.choice(names, 30, replace=False).tolist(), []) for i in range(4)]
    expected = _shared_by_loop(blocks)
    shared = shared_record_id(blocks)
    assert (shared is None) == (not expected)
    assert shared is None or shared in expected
