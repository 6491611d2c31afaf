"""ppsvm.coordinator.logs_seen: the coordinator's memory of each entity's release log, and the rollbacks it refuses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ppsvm.coordinator.logs_seen import STATE_DIR_ENV, check_logs_seen, logs_seen_path
from ppsvm.errors import ConfigError, EntityError
from ppsvm.wire.rpc import ppsvm_pb2 as pb

ROOT = "0" * 64


def meta(releases: int, head: str, root: str = ROOT) -> pb.BlockMetadata:
    return pb.BlockMetadata(entity_id="e1", releases=releases, chain_head=head, chain_root=root)


class Chain:
    """An entity's digests by release number, answering LogDigest and counting the questions."""

    def __init__(self, digests: dict[int, str]) -> None:
        self.digests, self.asked = digests, []

    def __call__(self, entity_id: str, release: int) -> str:
        self.asked.append((entity_id, release))
        return self.digests[release]


def test_the_memory_lives_beside_the_federation_file_unless_a_state_directory_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(STATE_DIR_ENV, raising=False)
    assert logs_seen_path(tmp_path / "fed.toml") == tmp_path / "fed.logs-seen.json"
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path / "state"))
    assert logs_seen_path(tmp_path / "fed.toml") == tmp_path / "state" / "logs-seen.json"


def test_a_log_that_grows_along_its_chain_passes_and_is_remembered(tmp_path: Path) -> None:
    path, chain = tmp_path / "seen.json", Chain({3: "c3"})
    check_logs_seen(path, {"e1": meta(3, "c3")}, chain)
    check_logs_seen(path, {"e1": meta(3, "c3")}, chain)  # unchanged: nothing asked
    assert chain.asked == []
    check_logs_seen(path, {"e1": meta(7, "c7")}, chain)
    assert chain.asked == [("e1", 3)]
    assert json.loads(path.read_text())[f"e1 {ROOT}"]["releases"] == 7


@pytest.mark.parametrize(
    ("now", "digests", "words"),
    [
        (meta(2, "c2"), {}, "went back from 5 releases"),
        (meta(5, "other"), {}, "no longer passes through release 5"),
        (meta(9, "c9"), {5: "not-c5"}, "no longer passes through release 5"),
    ],
)
def test_a_log_rolled_back_is_refused_naming_the_entity_and_nothing_is_remembered(
    tmp_path: Path, now: pb.BlockMetadata, digests: dict[int, str], words: str
) -> None:
    path = tmp_path / "seen.json"
    check_logs_seen(path, {"e1": meta(5, "c5")}, Chain({}))
    before = path.read_text()
    with pytest.raises(EntityError, match=f"entity e1: its release log {words}") as error:
        check_logs_seen(path, {"e1": now}, Chain(digests))
    assert error.value.refused and "latest copy" in str(error.value)
    assert path.read_text() == before


def test_a_new_log_is_a_new_entry_and_an_entity_without_a_chain_is_not_checked(tmp_path: Path) -> None:
    path = tmp_path / "seen.json"
    check_logs_seen(path, {"e1": meta(5, "c5")}, Chain({}))
    check_logs_seen(path, {"e1": meta(0, "r2", root="1" * 64), "e2": meta(0, "", root="")}, Chain({}))
    assert sorted(json.loads(path.read_text())) == [f"e1 {ROOT}", f"e1 {'1' * 64}"]


def test_a_memory_that_is_not_what_it_wrote_is_refused_by_name(tmp_path: Path) -> None:
    path = tmp_path / "seen.json"
    path.write_text("[1, 2")
    with pytest.raises(ConfigError, match=f"{path} .*is not what it wrote"):
        check_logs_seen(path, {"e1": meta(1, "c1")}, Chain({}))


def test_a_memory_that_cannot_be_written_is_still_checked_and_says_once_that_it_remembers_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "read-only" / "seen.json"
    check_logs_seen(path, {"e1": meta(5, "c5")}, Chain({}))
    lock = path.with_name("seen.json.lock")
    lock.unlink()
    lock.mkdir()  # cannot be opened for writing, even by root: as on a read-only volume
    with pytest.raises(EntityError, match="went back from 5 releases"):
        check_logs_seen(path, {"e1": meta(2, "c2")}, Chain({}))
    check_logs_seen(path, {"e1": meta(6, "c6")}, Chain({5: "c5"}))
    check_logs_seen(path, {"e1": meta(7, "c7")}, Chain({5: "c5"}))
    assert caplog.text.count("are not remembered") == 1
    assert json.loads(path.read_text())[f"e1 {ROOT}"]["releases"] == 5
