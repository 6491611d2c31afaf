"""A real `ppsvm entity` whose release log fills its disk, or whose caller asks too fast (issue 27, part 2).

The release log sits on a 2 MiB tmpfs (mounted by the test, which needs root: skipped otherwise). Filled to the
last byte, the entity refuses releases with a fixed text and says NOT_SERVING; no release it answered is missing
from the log and no torn line is left; once space is freed it serves again without a restart; and a torn last line
left by a crash is cut at the next start with a warning. A caller over ``max_releases_per_minute`` hears
RESOURCE_EXHAUSTED with when to retry, and the log holds exactly the releases it was answered.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from ppsvm.config import load_federation
from ppsvm.wire.grpc_util import open_channel
from ppsvm.wire.health import check_health
from ppsvm.wire.rpc import ppsvm_pb2 as pb
from ppsvm.wire.rpc import ppsvm_pb2_grpc as pb_grpc

from .conftest import WDBC, WDBC_OPTIONS, split, start_entity_process

TIMEOUT_S = 20.0
DISK_TEXT = "entity r0c0 cannot record releases (its disk): it releases nothing until its operator frees space"


@contextlib.contextmanager
def small_disk(directory: Path, size: str = "2m") -> Iterator[Path]:
    """A tmpfs of ``size`` mounted at ``directory`` (skipped where mounting is not permitted), unmounted after."""
    directory.mkdir(parents=True)
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs for the release log needs root")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(directory)], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield directory
    finally:
        subprocess.run(["umount", "-l", str(directory)], capture_output=True, timeout=60)


class Entity:
    """One `ppsvm entity` process of a 1 x 1 WDBC split, called with the coordinator's certificate."""

    def __init__(self, split_dir: Path, log_file: Path, *flags: str) -> None:
        self.split_dir = split_dir
        self.tls = load_federation(split_dir / "federation.toml").tls
        self.stderr = log_file.open("w")
        self.process, self.address = start_entity_process(
            split_dir / "r0c0.toml", "127.0.0.1:0", self.stderr, "r0c0", 120, *flags
        )
        self.channel = open_channel(self.address, tls=self.tls, peer="r0c0")
        self.stub = pb_grpc.EntityStub(self.channel)

    def release(self) -> grpc.RpcError | None:
        """One cheap release (Records); the error it was refused with, or None."""
        try:
            list(self.stub.Records(pb.Empty(), timeout=TIMEOUT_S))
        except grpc.RpcError as error:
            return error
        return None

    def releases(self) -> int:
        return int(self.stub.Metadata(pb.Empty(), timeout=TIMEOUT_S).releases)

    def health(self) -> str:
        return check_health(self.address, tls=self.tls, peer="r0c0", deadline=TIMEOUT_S).status

    def stop(self) -> None:
        self.channel.close()
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=60)
        self.stderr.close()


def entity_split(tmp_path: Path, privacy: str) -> Path:
    split_dir = split(tmp_path / "split", WDBC, 1, 1, *WDBC_OPTIONS)
    config = split_dir / "r0c0.toml"
    config.write_text(config.read_text() + f"\n[privacy]\n{privacy}")
    return split_dir


def fill(directory: Path, leave: int = 0) -> Path:
    """A file taking the free space of ``directory``'s file system but ``leave`` bytes (0: to the last byte)."""
    filler = directory / "filler"
    descriptor = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for chunk in (65536, 4096, 512, 1):
            with contextlib.suppress(OSError):
                while os.statvfs(directory).f_bavail * os.statvfs(directory).f_frsize >= leave + chunk:
                    os.write(descriptor, b"\0" * chunk)
    finally:
        os.close(descriptor)
    return filler


def log_lines(path: Path) -> list[dict]:
    """The log's lines, each checked to be a whole JSON record (no torn line)."""
    data = path.read_bytes()
    assert data.endswith(b"\n")
    return [json.loads(line) for line in data.splitlines()]


def assert_refused_for_the_disk(error: grpc.RpcError | None) -> None:
    assert error is not None and error.code() is grpc.StatusCode.FAILED_PRECONDITION
    assert error.details() == DISK_TEXT  # no path, no exception


def test_a_full_disk_stops_releases_loses_none_and_the_entity_recovers_by_itself(tmp_path: Path) -> None:
    with small_disk(tmp_path / "disk") as disk:
        log = disk / "r0c0.releases.jsonl"
        split_dir = entity_split(tmp_path, f'release_log = "{log}"\nmin_free_disk_mb = 0\n')
        entity = Entity(split_dir, tmp_path / "entity.log", "--new-release-log")
        try:
            for _ in range(3):
                assert entity.release() is None
            assert entity.releases() == 3 and entity.health() == "SERVING"
            filler = fill(disk)
            answered, refused = 3, None
            for _ in range(200):  # the log's last page still takes a few lines, then one is cut mid-way
                refused = entity.release()
                if refused is not None:
                    break
                answered += 1
            assert_refused_for_the_disk(refused)
            assert entity.health() == "NOT_SERVING"
            lines = log_lines(log)
            assert entity.releases() == answered == len(lines) - 1  # every release answered is in the log, whole
            before = log.read_bytes()
            assert_refused_for_the_disk(entity.release())
            assert log.read_bytes() == before

            filler.unlink()
            assert entity.health() == "SERVING"  # without a restart
            assert entity.release() is None
            assert entity.releases() == answered + 1 == len(log_lines(log)) - 1
        finally:
            entity.stop()
        text = (tmp_path / "entity.log").read_text()
        assert "No space left on device" in text and str(log) in text  # the operator's log has the path and error

        with log.open("ab") as handle:  # a crash mid-append: half a line
            handle.write(b'{"epsilon_micro":0,"event":"release","peer":"coordinator","prev":"')
        again = Entity(split_dir, tmp_path / "restart.log")
        try:
            assert again.releases() == answered + 1 and again.health() == "SERVING"
        finally:
            again.stop()
        assert re.search(
            r"\d+ bytes after its last complete record were dropped", (tmp_path / "restart.log").read_text()
        )
        assert len(log_lines(log)) == answered + 2


def test_below_the_floor_the_entity_releases_nothing_until_space_is_freed(tmp_path: Path) -> None:
    with small_disk(tmp_path / "disk") as disk:
        log = disk / "r0c0.releases.jsonl"
        split_dir = entity_split(tmp_path, f'release_log = "{log}"\nmin_free_disk_mb = 1\n')
        entity = Entity(split_dir, tmp_path / "entity.log", "--new-release-log")
        try:
            assert entity.release() is None
            filler = fill(disk, leave=512 * 1024)
            before = log.read_bytes()
            assert_refused_for_the_disk(entity.release())
            assert log.read_bytes() == before and entity.releases() == 1
            assert entity.health() == "NOT_SERVING"
            filler.unlink()
            assert entity.health() == "SERVING"
            assert entity.release() is None and entity.releases() == 2
        finally:
            entity.stop()
        assert "below [privacy] min_free_disk_mb = 1" in (tmp_path / "entity.log").read_text()


def test_a_caller_over_its_rate_hears_when_to_retry_and_the_log_stops_growing(tmp_path: Path) -> None:
    split_dir = entity_split(tmp_path, "max_releases_per_minute = 20\n")
    entity = Entity(split_dir, tmp_path / "entity.log")
    try:
        answered, refused = 0, None
        for _ in range(60):
            refused = entity.release()
            if refused is not None:
                break
            answered += 1
        assert refused is not None and refused.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
        assert re.fullmatch(
            r"entity r0c0 records at most 20 releases a minute from one caller \(\[privacy\] "
            r"max_releases_per_minute\) and this caller has made them: retry in \d+\.\d s",
            refused.details(),
        ), refused.details()
        assert answered in (20, 21)  # a minute's worth at once (one more had the calls taken 3 s)
        assert entity.releases() == answered == len(log_lines(split_dir / "r0c0.releases.jsonl")) - 1
        assert entity.health() == "SERVING"  # a rate is the caller's business, not the entity's health
    finally:
        entity.stop()
