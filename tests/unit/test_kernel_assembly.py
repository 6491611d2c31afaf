"""The two places a masked kernel fetch puts K's rows (ppsvm.coordinator.assembly), against the kernel computed
centrally: one array here (the numpy engine) and chunks handed on as they complete (the Dask engine), with the
entities' streams played by threads that deliver real masked shares in batches of random sizes and pace."""

from __future__ import annotations

import queue
import random
import threading
import time

import numpy as np
import pytest

from ppsvm.coordinator.assembly import OPEN_CHUNKS, Abandoned, Chunked, InMemory, RowBlockRows
from ppsvm.core.aggregation import log_share, masked_shares
from ppsvm.errors import EntityError

MBAR = 5
CHUNK_ROWS = 7
TOLERANCE = 1e-12  # the fixed point's 2^-42 units, a few of them summed


def _row_blocks(rng: np.random.Generator) -> tuple[dict[int, RowBlockRows], dict[int, list[np.ndarray]], np.ndarray]:
    """Row block 0: three entities' masked shares of a Gaussian log-kernel; row block 1: one entity's block alone.

    Returns the placement, each row block's streams (the batches each entity sends, one list per entity) and the
    expected K (exp of the summed log-shares; the lone block as it is)."""
    B = [rng.random((MBAR, 2)) for _ in range(3)]
    A = [rng.random((60, 2)) for _ in range(3)]
    shares = [log_share("gaussian", A[j], B[j], 0.7) for j in range(3)]
    ids = ["a", "b", "c"]
    secrets = {frozenset(pair): bytes([n]) * 32 for n, pair in enumerate([("a", "b"), ("a", "c"), ("b", "c")])}
    masked = []
    for j, own in enumerate(ids):
        peers = {peer: secrets[frozenset((own, peer))] for peer in ids if peer != own}
        masked.append(np.concatenate(list(masked_shares(shares[j], own, peers, b"context"))))
    alone = rng.random((23, MBAR))
    expected = np.vstack([np.exp(sum(shares)), alone])
    placement = {0: RowBlockRows(0, 60, 3), 1: RowBlockRows(60, 23, 1)}
    return placement, {0: masked, 1: [alone]}, expected


def _batches(rows: np.ndarray, rng: random.Random) -> list[tuple[int, np.ndarray]]:
    start, out = 0, []
    while start < len(rows):
        size = rng.randint(1, 11)
        out.append((start, rows[start : start + size]))
        start += size
    return out


def _stream(into: InMemory | Chunked, placement: dict[int, RowBlockRows], streams: dict, seed: int) -> None:
    """One thread per entity, each sending its rows in random batches with random pauses."""
    pace = random.Random(seed)

    def send(row_block: int, batches: list[tuple[int, np.ndarray]], pauses: list[float]) -> None:
        for (start, batch), pause in zip(batches, pauses, strict=True):
            time.sleep(pause)
            into.fold(row_block, placement[row_block].offset + start, batch)

    threads = []
    for row_block, entities in streams.items():
        for rows in entities:
            batches = _batches(rows, pace)
            pauses = [pace.random() * 0.002 for _ in batches]
            threads.append(threading.Thread(target=send, args=(row_block, batches, pauses)))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def test_in_memory_assembly_equals_the_central_kernel() -> None:
    placement, streams, expected = _row_blocks(np.random.default_rng(1))
    into = InMemory("gaussian", expected.shape, placement)
    _stream(into, placement, streams, seed=1)
    np.testing.assert_allclose(into.finish(), expected, rtol=TOLERANCE, atol=TOLERANCE)


@pytest.mark.parametrize("seed", range(4))
def test_chunks_handed_on_cover_the_central_kernel_once(seed: int) -> None:
    placement, streams, expected = _row_blocks(np.random.default_rng(seed))
    doubled: list[np.ndarray] = []
    into = Chunked("gaussian", MBAR, placement, transform=doubled.append, chunk_rows=CHUNK_ROWS)
    received: list[tuple[int, int, np.ndarray]] = []
    reader = threading.Thread(target=lambda: received.extend(into))
    reader.start()
    _stream(into, placement, streams, seed)
    into.close()
    reader.join(timeout=30)
    assert not reader.is_alive()
    K = np.full(expected.shape, np.nan)
    for start, stop, rows in sorted(received, key=lambda item: item[0]):
        assert stop - start == len(rows) <= CHUNK_ROWS and np.isnan(K[start:stop]).all()
        K[start:stop] = rows
    np.testing.assert_allclose(K, expected, rtol=TOLERANCE, atol=TOLERANCE)
    assert len(doubled) == len(received)  # the transform saw every chunk


def test_a_stream_far_ahead_waits_and_the_open_chunks_stay_bounded() -> None:
    placement = {0: RowBlockRows(0, 10 * CHUNK_ROWS, 2)}
    into = Chunked("linear", MBAR, placement, chunk_rows=CHUNK_ROWS)
    reader = threading.Thread(target=lambda: list(into))
    reader.start()
    fast_done = threading.Event()
    zeros = np.zeros((CHUNK_ROWS, MBAR), dtype=np.uint64)

    def fast() -> None:
        for chunk in range(10):
            into.fold(0, chunk * CHUNK_ROWS, zeros)
        fast_done.set()

    sender = threading.Thread(target=fast)
    sender.start()
    time.sleep(0.3)
    assert not fast_done.is_set()  # held back by the slow stream
    window = into._windows[0]
    assert len(window.buffers) == OPEN_CHUNKS
    for chunk in range(10):
        into.fold(0, chunk * CHUNK_ROWS, zeros)
        assert len(window.buffers) <= OPEN_CHUNKS
    sender.join(timeout=10)
    assert fast_done.is_set()
    into.close()
    reader.join(timeout=10)


@pytest.mark.parametrize("stream_first", [True, False], ids=["stream-abandons-then-fetch-ends", "fetch-ends-first"])
def test_abandoning_frees_every_waiting_stream_and_the_reader_gets_the_error(stream_first: bool) -> None:
    """As Session._fetch_masked runs it: a failing stream abandons the assembly (its row block's other streams would
    wait for its rows for good), then the fetch ends with that stream's error, which the reader raises."""
    placement = {0: RowBlockRows(0, 10 * CHUNK_ROWS, 2)}
    into = Chunked("linear", MBAR, placement, chunk_rows=CHUNK_ROWS)
    into.fold(0, 0, np.zeros((CHUNK_ROWS, MBAR), dtype=np.uint64))
    into.fold(0, 0, np.zeros((CHUNK_ROWS, MBAR), dtype=np.uint64))  # chunk 0 complete, queued
    outcome: list[BaseException] = []

    def ahead() -> None:
        try:
            into.fold(0, 6 * CHUNK_ROWS, np.zeros((1, MBAR), dtype=np.uint64))
        except Abandoned as error:
            outcome.append(error)

    waiting = threading.Thread(target=ahead)
    waiting.start()
    time.sleep(0.1)
    failure = EntityError("e2 dropped out")
    if stream_first:
        into.abandon()
        into.close(failure)
    else:
        into.close(failure)
        into.abandon()
    waiting.join(timeout=10)
    assert not waiting.is_alive() and isinstance(outcome[0], Abandoned)
    received: list[tuple[int, int, np.ndarray]] = []
    reader = threading.Thread(target=lambda: outcome.append(_read_all(into, received)))
    reader.start()
    reader.join(timeout=10)
    assert not reader.is_alive(), "the reader waits for good"
    assert [(start, stop) for start, stop, _ in received] == [(0, CHUNK_ROWS)]  # what was queued, then the error
    assert outcome[1] is failure


def test_a_chunk_queued_as_the_reader_times_out_is_still_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """The last chunk and close() land just after the reader's wait on an empty queue timed out: the reader must
    look again, not take the fetch as ended without that chunk."""
    placement = {0: RowBlockRows(0, CHUNK_ROWS, 1)}
    into = Chunked("linear", MBAR, placement, chunk_rows=CHUNK_ROWS)
    wait = into._ready.get
    timed_out = []

    def late(timeout: float) -> tuple[int, int, np.ndarray]:
        if not timed_out:  # the first wait times out; then the stream's last rows and the end arrive
            timed_out.append(True)
            into.fold(0, 0, np.zeros((CHUNK_ROWS, MBAR), dtype=np.uint64))
            into.close()
            raise queue.Empty
        return wait(timeout=timeout)

    monkeypatch.setattr(into._ready, "get", late)
    received: list[tuple[int, int, np.ndarray]] = []
    assert _read_all(into, received) is None
    assert [(start, stop) for start, stop, _ in received] == [(0, CHUNK_ROWS)]


def _read_all(into: Chunked, received: list[tuple[int, int, np.ndarray]]) -> BaseException | None:
    try:
        for chunk in into:
            received.append(chunk)
    except EntityError as error:
        return error
    return None


def test_shares_that_do_not_cancel_are_refused_with_the_row_block_and_rows() -> None:
    placement = {0: RowBlockRows(0, 3, 2)}
    into = Chunked("linear", MBAR, placement, chunk_rows=CHUNK_ROWS)
    noise = np.random.default_rng(0).integers(0, 2**63, size=(3, MBAR), dtype=np.uint64)
    into.fold(0, 0, noise)
    with pytest.raises(EntityError, match="row block 0, rows 0 on: the entities' masked shares did not cancel"):
        into.fold(0, 0, noise)
