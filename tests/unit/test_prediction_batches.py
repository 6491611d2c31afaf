"""The prediction service's batching of concurrent requests (``ppsvm.coordinator.serve.Batches``), with a fake
scorer in place of the entities."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

import pytest

from ppsvm.coordinator.serve import Batches
from ppsvm.errors import EntityError

WAIT_S = 10.0


class GatedScorer:
    """Records every batch it is given; each call waits until the test opens the gate. A batch holding the
    record ``fail_on`` is refused, as an entity refuses a record it no longer holds."""

    def __init__(self, fail_on: str | None = None) -> None:
        self.batches: list[dict[str, int]] = []
        self.entered = threading.Semaphore(0)
        self.gate = threading.Event()
        self.fail_on = fail_on

    def __call__(self, where: dict[str, int]) -> dict[str, float]:
        self.batches.append(dict(where))
        self.entered.release()
        assert self.gate.wait(WAIT_S)
        if self.fail_on in where:
            raise EntityError("entity r0c1 at 127.0.0.1:1 refused KernelBlock: unknown record id(s)", refused=True)
        return {record: float(len(record)) + 10 * row_block for record, row_block in where.items()}


def queue(batches: Batches, pool: ThreadPoolExecutor, *requests: dict[str, int]) -> list[Future[dict[str, float]]]:
    """Send ``requests`` from pool threads while a batch is on the wire, each queued before the next is sent."""
    futures = []
    for queued, request in enumerate(requests, start=len(batches._pending) + 1):
        futures.append(pool.submit(batches.decisions, request))
        assert wait_until(lambda n=queued: len(batches._pending) == n)
    return futures


def send_first(batches: Batches, scorer: GatedScorer, pool: ThreadPoolExecutor, request: dict[str, int]) -> Future:
    """Send one request and wait until its batch is on the wire."""
    future = pool.submit(batches.decisions, request)
    assert scorer.entered.acquire(timeout=WAIT_S)
    return future


def wait_until(condition: Callable[[], bool]) -> bool:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.001)
    return True


def test_requests_arriving_while_a_batch_is_out_share_the_next() -> None:
    scorer = GatedScorer()
    batches = Batches(scorer)
    with ThreadPoolExecutor(4) as pool:
        first = send_first(batches, scorer, pool, {"a": 0})  # alone on the wire: a lone request waits for nothing
        later = queue(batches, pool, {"b": 0, "c": 1}, {"c": 1, "d": 1}, {"e": 0})
        scorer.gate.set()
        results = [f.result(WAIT_S) for f in [first, *later]]
    batches.close()
    # One batch for "a", then one for everything that queued: "c", named twice, is asked for once.
    assert scorer.batches == [{"a": 0}, {"b": 0, "c": 1, "d": 1, "e": 0}]
    assert results[0]["a"] == 1.0
    assert {results[1]["b"], results[1]["c"], results[2]["d"], results[3]["e"]} == {1.0, 11.0}


def test_a_batch_holds_at_most_max_records_but_a_larger_request_goes_alone() -> None:
    scorer = GatedScorer()
    batches = Batches(scorer, max_records=3)
    with ThreadPoolExecutor(4) as pool:
        first = send_first(batches, scorer, pool, {"x": 0})
        queued = queue(batches, pool, {"a": 0, "b": 0}, {"c": 0, "d": 0}, {"e": 0, "f": 0, "g": 0, "h": 0})
        scorer.gate.set()
        for future in [first, *queued]:
            future.result(WAIT_S)
    batches.close()
    assert [sorted(batch) for batch in scorer.batches] == [["x"], ["a", "b"], ["c", "d"], ["e", "f", "g", "h"]]


def test_a_failed_batch_is_asked_again_request_by_request_so_only_the_request_at_fault_fails() -> None:
    scorer = GatedScorer(fail_on="c")
    batches = Batches(scorer)
    with ThreadPoolExecutor(4) as pool:
        first = send_first(batches, scorer, pool, {"c": 1})
        later = queue(batches, pool, {"b": 0}, {"c": 1, "d": 1}, {"e": 0})
        scorer.gate.set()
        with pytest.raises(EntityError, match="r0c1"):  # alone in its batch: refused once, not asked again
            first.result(WAIT_S)
        assert later[0].result(WAIT_S) == {"b": 1.0}
        with pytest.raises(EntityError, match="r0c1.*unknown record"):
            later[1].result(WAIT_S)
        assert later[2].result(WAIT_S) == {"e": 1.0}
    batches.close()
    assert scorer.batches == [{"c": 1}, {"b": 0, "c": 1, "d": 1, "e": 0}, {"b": 0}, {"c": 1, "d": 1}, {"e": 0}]


def test_a_batch_failed_by_an_unreachable_entity_fails_every_request_without_asking_again() -> None:
    """Asking request by request would only repeat the client's retries (seconds each) for every request."""
    calls: list[dict[str, int]] = []
    gate = threading.Event()

    def unreachable(where: dict[str, int]) -> dict[str, float]:
        calls.append(dict(where))
        assert gate.wait(WAIT_S)
        raise EntityError("entity r0c1 at 127.0.0.1:1 is unreachable (KernelBlock; 4 attempts over 3.5 s)")

    batches = Batches(unreachable)
    with ThreadPoolExecutor(4) as pool:
        first = pool.submit(batches.decisions, {"a": 0})
        assert wait_until(lambda: len(calls) == 1)
        later = queue(batches, pool, {"b": 0}, {"c": 0})
        gate.set()
        for future in [first, *later]:
            with pytest.raises(EntityError, match="unreachable"):
                future.result(WAIT_S)
    batches.close()
    assert calls == [{"a": 0}, {"b": 0, "c": 0}]


def test_closing_lets_the_batch_on_the_wire_finish_then_refuses_new_requests() -> None:
    scorer = GatedScorer()
    batches = Batches(scorer)
    with ThreadPoolExecutor(2) as pool:
        out = send_first(batches, scorer, pool, {"a": 0})
        closing = threading.Thread(target=batches.close)
        closing.start()
        scorer.gate.set()
        assert out.result(WAIT_S) == {"a": 1.0}
        closing.join(WAIT_S)
        assert not closing.is_alive()
    with pytest.raises(RuntimeError, match="stopping"):
        batches.decisions({"b": 0})
