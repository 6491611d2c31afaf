"""Record alignment across the column blocks of a row block (record_positions); ids listed twice
(duplicate_record_id)."""

from __future__ import annotations

import numpy as np
import pytest

from ppsvm.coordinator.federation import duplicate_record_id, record_positions

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
        np.array(["a7", "b2", "c9", "d1"]),  # one missing
        np.array(["a7", "b2", "c9", "d1", "e5", "f0"]),  # one extra
        np.array(["a7", "b2", "c9", "d1", "zz"]),  # one replaced
        np.array(["e5", "d1", "c9", "b2", "a0"]),  # shuffled and one replaced
        np.array(["zz", "yy"]),  # none shared
        np.array([], dtype=str),
    ],
)
def test_records_the_reference_lacks_are_marked(ids: np.ndarray) -> None:
    """Entities may hold different records: each of ``ids`` gets its place in the reference, or -1."""
    expected = [REFERENCE.tolist().index(r) if r in REFERENCE.tolist() else -1 for r in ids.tolist()]
    assert record_positions(REFERENCE, ids).tolist() == expected


def _ids(*blocks: list[str]) -> dict[int, np.ndarray]:
    return {i: np.array(block, dtype=str) for i, block in enumerate(blocks)}


def _duplicates_by_loop(ids_by_row_block: dict[int, np.ndarray]) -> set[tuple[str, int, int]]:
    """Independent: every (id, row block, row block) pair listing the same id, by nested loops."""
    listed = [(record, i) for i, ids in ids_by_row_block.items() for record in ids.tolist()]
    return {(a, i, j) for k, (a, i) in enumerate(listed) for (b, j) in listed[k + 1 :] if a == b}


def test_unique_ids_pass() -> None:
    assert duplicate_record_id(_ids(["a", "b", "c"], ["d", "e"], [], ["f", "g"])) is None
    assert duplicate_record_id({}) is None


@pytest.mark.parametrize(
    "ids_by_row_block",
    [
        _ids(["a", "b", "c"], ["d", "b"]),  # in two row blocks
        _ids(["a", "zz"], ["zz", "q"], ["r", "a"]),  # two ids, each in two row blocks
        _ids(["long-id-0001"], ["x", "long-id-0001"]),  # different string widths
        _ids(["a", "b", "a"], ["c"]),  # twice in one row block
    ],
)
def test_a_repeated_id_is_found(ids_by_row_block: dict[int, np.ndarray]) -> None:
    found = duplicate_record_id(ids_by_row_block)
    assert found is not None
    assert found in _duplicates_by_loop(ids_by_row_block)


def test_a_repeat_within_one_row_block_names_it_twice() -> None:
    assert duplicate_record_id(_ids(["x"], ["a", "b", "a"])) == ("a", 1, 1)


def test_training_and_held_out_ids_given_apart() -> None:
    """A row block's ids as (training, held-out) arrays, as the survey passes them: the same answers."""
    train, test = np.array(["a", "b"]), np.array(["c", "a"])
    assert duplicate_record_id({0: (train, test)}) == ("a", 0, 0)
    assert duplicate_record_id({3: (np.array(["x"]), np.array(["y"])), 5: (np.array(["z"]), np.array(["y"]))}) == (
        "y",
        3,
        5,
    )
    assert duplicate_record_id({0: (train, np.array(["c"])), 1: (np.array([], dtype=str), np.array(["d"]))}) is None


@pytest.mark.parametrize("seed", range(3))
def test_agrees_with_loops_on_random_federations(seed: int) -> None:
    rng = np.random.default_rng(seed)
    names = [f"id{k}" for k in range(400)]
    ids_by_row_block = {i: rng.choice(names, 30, replace=False) for i in range(4)}
    expected = _duplicates_by_loop(ids_by_row_block)
    found = duplicate_record_id(ids_by_row_block)
    assert (found is None) == (not expected)
    assert found is None or found in expected


def test_equal_fingerprints_are_only_candidates(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every id mixed to the same 64 bits: the ids themselves still decide, across a whole run of candidates."""
    from ppsvm.data import cell

    monkeypatch.setattr(cell, "_fingerprints", lambda ids: np.zeros(len(ids), dtype=np.uint64))
    assert duplicate_record_id(_ids(["a", "b"], ["c"], ["d"])) is None
    assert duplicate_record_id(_ids(["a", "b"], ["c", "a"])) == ("a", 0, 1)


def test_fingerprints_ignore_the_arrays_width() -> None:
    from ppsvm.data.cell import _fingerprints

    narrow, wide = np.array(["p01", "p0001"]), np.array(["p01", "p0001", "a-much-longer-record-id"])
    assert _fingerprints(narrow).tolist() == _fingerprints(wide)[:2].tolist()
    assert len(set(_fingerprints(wide).tolist())) == 3


def test_records_without_ids_keep_what_a_kernel_fetch_places_rows_by() -> None:
    """train() drops the ids before the kernel fetch: sizes, orders and labels stay, the id arrays go."""
    from ppsvm.coordinator.federation import RowBlockRecords

    train_ids, test_ids = np.array([f"r{i:031d}" for i in range(5)]), np.array(["t" * 32, "u" * 32])
    order = {"e1": np.arange(5), "e2": np.arange(5)}
    block = RowBlockRecords(0, train_ids, np.ones(5), test_ids, -np.ones(2), order, {"e1": np.arange(2)}, train_ids[:1])
    slim = block.without_ids()
    assert (slim.size("train"), slim.size("test")) == (5, 2) == (block.size("train"), block.size("test"))
    assert slim.train_order is block.train_order and slim.train_labels is block.train_labels
    for ids in (slim.train_ids, slim.test_ids, slim.score_ids):
        assert ids.size == 0 and ids.base is None  # not a view that would keep the full list alive
    assert block.train_ids is train_ids  # the original is untouched


def test_records_listed_in_different_orders_keep_their_ids_for_a_fetch_by_id() -> None:
    """Masks cancel only over one ordered list: entities that list a row block's records differently are asked
    for them by id, in the coordinator's order."""
    from ppsvm.coordinator.federation import RowBlockRecords

    train_ids, test_ids = np.array([f"r{i}" for i in range(5)]), np.array(["t", "u"])
    shuffled = {"e1": np.arange(5), "e2": np.array([4, 3, 2, 1, 0])}
    same = {"e1": np.arange(2), "e2": np.arange(2)}
    slim = RowBlockRecords(0, train_ids, np.ones(5), test_ids, -np.ones(2), shuffled, same).without_ids()
    assert slim.train_ids is train_ids and slim.test_ids.size == 0


def test_freed_memory_is_handed_back_to_the_system() -> None:
    """Freed pages between live allocations stay resident until malloc_trim hands them back (glibc only)."""
    import platform

    from ppsvm.memory import release_free_memory

    if platform.libc_ver()[0] != "glibc":
        pytest.skip("malloc_trim is glibc's")
    chunks = [bytearray(64 * 1024) for _ in range(1024)]  # below glibc's mmap threshold: on the heap
    kept = chunks[::2]  # every other one stays, so the freed ones are holes that free() cannot give back
    del chunks
    assert release_free_memory() is True
    assert len(kept) == 512
