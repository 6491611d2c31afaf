"""Issue 27: a release log rolled back on the entity's host is refused by the coordinator and by `ppsvm audit`.

An entity cannot tell its log from an older copy of it: a log cut to its creation line with its head file deleted
starts as a log that has released nothing, and a restored backup starts as that backup. What the coordinator
remembers (ppsvm.coordinator.logs_seen, `<federation>.logs-seen.json`) can: the count went down, or the chain no
longer passes through the release it saw (LogDigest). Real entity processes, `ppsvm coordinator train` and `ppsvm
audit` as a user runs them.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from ppsvm.config import federation_at_addresses, load_entity_config, load_federation
from ppsvm.coordinator.logs_seen import logs_seen_path
from ppsvm.core.release_log import head_path
from ppsvm.wire.rpc import ppsvm_pb2 as pb

from .conftest import WDBC, WDBC_OPTIONS, ppsvm, split, with_privacy_settings
from .test_malicious_coordinator import TIMEOUT, Entity, start_entity


class Site:
    """A 2 x 1 WDBC split whose entities run, with a live federation file the CLI uses."""

    def __init__(self, directory: Path) -> None:
        self.directory = split(directory, WDBC, 2, 1, *WDBC_OPTIONS)
        for entity_id in ("r0c0", "r1c0"):
            config = self.config(entity_id)
            config.write_text(with_privacy_settings(config.read_text(), consent=True))
        self.entities = {entity_id: start_entity(self.config(entity_id)) for entity_id in ("r0c0", "r1c0")}
        self.live = self.directory / "federation.live.toml"
        self.write_live()

    def config(self, entity_id: str) -> Path:
        return self.directory / f"{entity_id}.toml"

    def log(self, entity_id: str) -> Path:
        path = load_entity_config(self.config(entity_id)).release_log
        assert path is not None
        return path

    def write_live(self) -> None:
        planned = load_federation(self.directory / "federation.toml")
        self.live.write_text(federation_at_addresses(planned, [self.entities[e.id].address for e in planned.entities]))

    def restart(self, entity_id: str) -> Entity:
        self.entities[entity_id].stop()
        self.entities[entity_id] = start_entity(self.config(entity_id))
        self.write_live()
        return self.entities[entity_id]

    def train(self) -> tuple[int, str]:
        result = ppsvm(
            "coordinator", "train", "--federation", str(self.live), "--model-out", str(self.directory / "m.json"),
            check=False,
        )  # fmt: skip
        return result.returncode, result.stdout + result.stderr

    def audit(self) -> tuple[int, str]:
        result = ppsvm("audit", "--federation", str(self.live), check=False)
        return result.returncode, result.stdout + result.stderr

    def stop(self) -> None:
        for entity in self.entities.values():
            entity.stop()


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Site]:
    started = Site(tmp_path / "split")
    try:
        yield started
    finally:
        started.stop()


def backup(site: Site, entity_id: str, where: Path) -> None:
    where.mkdir()
    for path in (site.log(entity_id), head_path(site.log(entity_id))):
        if path.exists():
            shutil.copy2(path, where / path.name)


def restore(site: Site, entity_id: str, where: Path) -> None:
    head_path(site.log(entity_id)).unlink(missing_ok=True)
    for path in where.iterdir():
        shutil.copy2(path, site.log(entity_id).parent / path.name)


def test_a_log_cut_to_its_first_line_without_its_head_is_refused_by_training_and_audit(site: Site) -> None:
    code, output = site.train()
    assert code == 0, output  # control: an untouched federation trains, and is remembered with its releases
    seen = json.loads(logs_seen_path(site.live).read_text())
    releases = site.entities["r0c0"].metadata().releases
    assert releases > 0 and any(key.startswith("r0c0 ") and v["releases"] == releases for key, v in seen.items())
    assert site.audit()[0] == 0  # control: the same logs again pass

    site.entities["r0c0"].stop()
    log = site.log("r0c0")
    log.write_bytes(log.read_bytes().splitlines(keepends=True)[0])  # the creation line: nothing released
    head_path(log).unlink()
    entity = site.restart("r0c0")
    assert entity.metadata().releases == 0  # the entity itself cannot tell

    for code, output in (site.audit(), site.train()):
        assert code != 0, output
        assert f"entity r0c0: its release log went back from {releases} releases" in output, output
        assert "r1c0: its release log" not in output
    # Refused before any kernel block or DP release: the survey's Records and FeatureRange (no budget, no pin) are
    # asked in the same round as Metadata, so they may have been answered.
    asked = {json.loads(line)["rpc"] for line in log.read_text().splitlines()[1:]}
    assert asked <= {"Records", "FeatureRange"}, asked


def test_a_restored_backup_that_grew_past_what_was_seen_is_refused_by_its_chain(site: Site, tmp_path: Path) -> None:
    backup(site, "r0c0", tmp_path / "backup")
    code, output = site.train()
    assert code == 0, output
    seen = site.entities["r0c0"].metadata().releases

    site.entities["r0c0"].stop()
    restore(site, "r0c0", tmp_path / "backup")
    entity = site.restart("r0c0")
    # Releases to another caller meanwhile (here the same certificate, asking directly): the count passes the seen one.
    while entity.metadata().releases <= seen:
        list(entity.stub.Records(pb.Empty(), timeout=TIMEOUT))

    code, output = site.audit()
    assert code != 0 and f"entity r0c0: its release log no longer passes through release {seen}" in output, output


def test_a_log_that_only_grew_passes(site: Site) -> None:
    """Control for the chain check: releases after the coordinator's last look extend the chain it saw."""
    code, output = site.train()
    assert code == 0, output
    entity = site.entities["r0c0"]
    list(entity.stub.Records(pb.Empty(), timeout=TIMEOUT))
    entity = site.restart("r0c0")
    code, output = site.audit()
    assert code == 0, output
