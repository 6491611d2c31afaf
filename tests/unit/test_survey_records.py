"""The coordinator's Records calls in a survey: a bounded number received at once, one copy of a row block's ids."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from ppsvm.coordinator.federation import RECORDS_IN_FLIGHT, Session


@dataclass
class FakeEntity:
    id: str
    row_block: int


class FakeClient:
    """Answers Records with fresh arrays (as decoding a stream would), counting the calls running at once."""

    running = 0
    most = 0
    lock = threading.Lock()

    def __init__(self, entity_id: str, row_block: int, ids: list[str]) -> None:
        self.entity = FakeEntity(entity_id, row_block)
        self.ids = ids

    def records(self) -> dict[str, np.ndarray]:
        with FakeClient.lock:
            FakeClient.running += 1
            FakeClient.most = max(FakeClient.most, FakeClient.running)
        time.sleep(0.02)
        with FakeClient.lock:
            FakeClient.running -= 1
        return {"train_ids": np.array(self.ids), "test_ids": np.array(["t-" + self.ids[0]])}


def test_a_row_blocks_equal_id_lists_are_kept_once_and_at_most_four_are_received_at_once() -> None:
    clients = [FakeClient(f"r0c{j}", 0, ["a", "b", "c"]) for j in range(6)]
    clients += [FakeClient("r1c0", 1, ["d", "e"]), FakeClient("r1c1", 1, ["e", "d"])]  # same ids, other order
    read = Session._records_reader()
    with ThreadPoolExecutor(len(clients)) as pool:
        answers: list[dict[str, Any]] = list(pool.map(read, clients))
    assert FakeClient.most == RECORDS_IN_FLIGHT == 4
    row_block_0 = answers[:6]
    assert all(a["train_ids"] is row_block_0[0]["train_ids"] for a in row_block_0)
    assert all(a["test_ids"] is row_block_0[0]["test_ids"] for a in row_block_0)
    # A list that differs (here only in order) stays the entity's own: alignment must see it.
    assert answers[7]["train_ids"] is not answers[6]["train_ids"]
    assert answers[7]["train_ids"].tolist() == ["e", "d"]
    assert answers[6]["train_ids"] is not row_block_0[0]["train_ids"]
