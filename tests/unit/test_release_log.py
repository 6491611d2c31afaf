"""The release log on a bad day: torn lines, a full disk, a floor of free space, and memory that does not grow.

Issue 27 (part 2): a disk filled by cheap releases left a torn last line, failed every later release as INTERNAL
while the health check said SERVING, and after space was freed refused to start until the log was edited by hand.
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import sqlite3
import subprocess
import sys
import textwrap
import tracemalloc
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from ppsvm.core import release_log as release_log_module
from ppsvm.core.release_log import MIB, RESUME_FREE_BYTES, ReleaseLog, create_release_log
from ppsvm.entity.guard import ReleaseGuard, UsedNonces
from ppsvm.errors import ConfigError

DISK_TEXT = "entity r0c0 cannot record releases (its disk): it releases nothing until its operator frees space"


def new_log(tmp_path: Path, releases: int = 0, **options: Any) -> ReleaseLog:
    path = tmp_path / "r0c0.releases.jsonl"
    create_release_log(path, "r0c0")
    log = ReleaseLog(path, "r0c0", **options)
    for k in range(releases):
        log.append({"rpc": "KernelBlock", "peer": "c", "rows": k})
    return log


def line_digests(path: Path) -> list[str]:
    return [hashlib.sha256(line).hexdigest() for line in path.read_bytes().splitlines(keepends=True)]


def assert_remote_safe(text: str, tmp_path: Path) -> None:
    """What may reach a remote caller: no path of the entity's, no exception class."""
    assert str(tmp_path) not in text and "/" not in text, text
    assert "Error" not in text and "Errno" not in text, text


# ------------------------------------------------------------------ a torn last line at start


@pytest.mark.parametrize(
    "torn",
    [
        b'{"epsilon_micro":0,"event":"release","peer":"c","rpc":"Kerne',  # cut mid-line: no newline
        b'{"epsilon_micro":0,"event":"release","peer":"c"}',  # a whole record but for its newline
        b"\0" * 180,  # size extended, data never written (a crash on a file system without data ordering)
        b'{"epsilon_micro":0,"ev\0\0\0\0\n',  # a last line that is not JSON
    ],
    ids=["mid-line", "no-newline", "zeros", "not-json"],
)
def test_a_torn_last_line_is_cut_at_start_with_a_warning(
    tmp_path: Path, torn: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    log = new_log(tmp_path, 3)
    whole = log.path.read_bytes()
    with log.path.open("ab") as handle:
        handle.write(torn)
    with caplog.at_level(logging.WARNING, logger="ppsvm.core.release_log"):
        again = ReleaseLog(log.path, "r0c0")
    assert log.path.read_bytes() == whole
    assert again.head == log.head and again.count == 3
    assert any(
        f"{len(torn)} bytes after its last complete record were dropped" in r.getMessage() for r in caplog.records
    )
    again.append({"rpc": "Records", "peer": "c"})  # and the log goes on from its last complete record
    assert [r["seq"] for r in ReleaseLog(log.path, "r0c0").releases()] == [1, 2, 3, 4]


@pytest.mark.parametrize("damage", ["not-json", "edited", "reordered"])
def test_anything_else_that_does_not_verify_still_refuses_to_start(tmp_path: Path, damage: str) -> None:
    log = new_log(tmp_path, 3)
    lines = log.path.read_bytes().splitlines(keepends=True)
    if damage == "not-json":  # a broken middle line is not a torn tail
        lines[2] = b"{not json\n"
    elif damage == "edited":  # a last line that is JSON but does not chain is an edit, not a crash
        lines[3] = lines[3].replace(b'"rows":2', b'"rows":7')
    else:
        lines[2], lines[3] = lines[3], lines[2]
    log.path.write_bytes(b"".join(lines))
    # An edited last line has no line after it to break the chain: its head file records another digest.
    expected = {"not-json": "line 3 is not JSON", "edited": "does not end with the release its head file records"}
    with pytest.raises(ConfigError, match=expected.get(damage, "line 3 does not follow line 2")):
        ReleaseLog(log.path, "r0c0")
    assert log.path.read_bytes() == b"".join(lines)  # untouched


def test_a_torn_line_the_head_records_was_answered_and_refuses_to_start(tmp_path: Path) -> None:
    """The head is written after the line's fsync, so it can never record a line a crash tore; one that does was
    acknowledged and damaged afterwards: refused, and the file left as it is."""
    log = new_log(tmp_path, 3)
    lines = log.path.read_bytes().splitlines(keepends=True)
    log.path.write_bytes(b"".join(lines[:3]) + lines[3][:40])
    with pytest.raises(ConfigError, match="ends at release 2, but its head file records release 3"):
        ReleaseLog(log.path, "r0c0")
    assert log.path.read_bytes() == b"".join(lines[:3]) + lines[3][:40]


def test_a_torn_creation_line_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "r0c0.releases.jsonl"
    path.write_bytes(b'{"entity_id":"r0c0","ev')
    with pytest.raises(ConfigError, match="line 1 is cut"):
        ReleaseLog(path, "r0c0")


def test_refusals_no_longer_advise_a_backup_that_resets_the_budget(tmp_path: Path) -> None:
    log = new_log(tmp_path, 2)
    log.path.write_bytes(log.path.read_bytes().replace(b'"rows":0', b'"rows":5'))
    with pytest.raises(ConfigError) as broken:
        ReleaseLog(log.path, "r0c0")
    with pytest.raises(ConfigError) as missing:
        ReleaseLog(tmp_path / "gone.jsonl", "r0c0")
    for text in (str(broken.value), str(missing.value)):
        assert "from a backup" not in text
        assert "would give back budget the entity has spent" in text and "went backwards" in text
        assert "restore the latest copy, or start a new entity with a new release log and new records" in text


# ------------------------------------------------------------------ a failed append


def failing_write(monkeypatch: pytest.MonkeyPatch, code: int, part: int = 17) -> None:
    """os.write of the release log writes ``part`` bytes once, then fails with ``code`` (as a full disk does)."""
    real = os.write
    calls: list[int] = []

    def write(descriptor: int, data: Any) -> int:
        calls.append(len(data))
        if len(calls) == 1 and part:
            return real(descriptor, bytes(data[:part]))
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(release_log_module.os, "write", write)


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EFBIG, errno.EIO])
def test_a_failed_append_is_cut_back_and_refuses_until_the_file_is_writable_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, code: int
) -> None:
    log = new_log(tmp_path, 2)
    before, head = log.path.read_bytes(), log.head
    failing_write(monkeypatch, code)
    with caplog.at_level(logging.ERROR), pytest.raises(ConfigError) as failed:
        log.append({"rpc": "KernelBlock", "peer": "c"})
    assert str(failed.value) == DISK_TEXT
    assert_remote_safe(str(failed.value), tmp_path)
    assert log.path.read_bytes() == before and log.head == head  # cut back, nothing charged
    logged = " ".join(r.getMessage() for r in caplog.records)
    assert str(log.path) in logged and os.strerror(code) in logged  # the operator's log has the path and the error
    reason = log.unwritable()  # the probe's own write fails too: still NOT_SERVING
    assert reason is not None and str(log.path) in reason and os.strerror(code) in reason
    with pytest.raises(ConfigError) as refused:  # refused before anything is computed, nothing written
        log.append({"rpc": "KernelBlock", "peer": "c"})
    assert str(refused.value) == DISK_TEXT and log.path.read_bytes() == before
    monkeypatch.undo()
    assert log.unwritable() is None  # the probe finds it writable and as it was: serving again by itself
    assert log.path.read_bytes() == before  # the probe's write was cut off again
    log.append({"rpc": "KernelBlock", "peer": "c"})
    assert (log.write_failures, log.disk_refusals) == (1, 1)
    assert [r["seq"] for r in ReleaseLog(log.path, "r0c0").releases()] == [1, 2, 3]


def test_the_next_charge_serves_again_without_a_probe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = new_log(tmp_path, 1)
    failing_write(monkeypatch, errno.ENOSPC)
    with pytest.raises(ConfigError):
        log.append({"rpc": "KernelBlock", "peer": "c"})
    monkeypatch.undo()
    log.append({"rpc": "KernelBlock", "peer": "c"})
    assert log.count == 2 and log.unwritable() is None


def test_a_failed_fsync_is_cut_back_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = new_log(tmp_path, 1)
    before = log.path.read_bytes()

    def fsync(descriptor: int) -> None:
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(release_log_module.os, "fsync", fsync)
    with pytest.raises(ConfigError, match="cannot record releases"):
        log.append({"rpc": "KernelBlock", "peer": "c"})
    monkeypatch.undo()
    assert log.path.read_bytes() == before and log.count == 1


def test_a_failed_append_leaves_the_guard_as_it_was(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = new_log(tmp_path)
    guard = ReleaseGuard(log, mode="mixed", epsilon_total=1.0, max_baseline_releases=8, who="r0c0")
    guard.charge("DpWeights", "c", epsilon=0.25)
    failing_write(monkeypatch, errno.ENOSPC)
    with pytest.raises(ConfigError) as failed:
        guard.charge("DpWeights", "c", epsilon=0.5, nonce="ab" * 16)
    assert_remote_safe(str(failed.value), tmp_path)
    monkeypatch.undo()
    assert (guard.spent_micro, guard.log.count, guard.releases_by_rpc["DpWeights"]) == (250_000, 1, 1)
    assert "ab" * 16 not in guard.nonces
    guard.charge("DpWeights", "c", epsilon=0.5, nonce="ab" * 16)  # the nonce was never answered
    assert guard.state()["releases"] == 2 and guard.remaining_micro == 250_000


def test_a_real_file_size_limit_leaves_a_log_that_reopens(tmp_path: Path) -> None:
    """RLIMIT_FSIZE, in a child process: the write stops part-way (EFBIG), the file is cut back, the entity says
    why; once the limit is lifted it appends again by itself, and the log verifies from disk."""
    log = new_log(tmp_path, 2)
    script = textwrap.dedent(
        f"""
        import json, resource
        from pathlib import Path
        from ppsvm.core.release_log import ReleaseLog
        from ppsvm.errors import ConfigError
        log = ReleaseLog(Path({str(log.path)!r}), "r0c0")
        hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]
        resource.setrlimit(resource.RLIMIT_FSIZE, (log.size + 450, hard))
        made, refused = 0, []
        for k in range(4):
            try:
                log.append({{"rpc": "KernelBlock", "peer": "c", "detail": "x" * 150}})
                made += 1
            except ConfigError as error:
                refused.append(str(error))
        data, known = log.path.read_bytes(), log.size
        reason = log.unwritable()
        resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))
        back = log.unwritable()
        log.append({{"rpc": "Records", "peer": "c"}})
        print(json.dumps({{"made": made, "refused": refused, "reason": reason, "back": back,
                          "ends_whole": data.endswith(b"\\n") and len(data) == known, "failures": log.write_failures,
                          "refusals": log.disk_refusals}}))
        """
    )
    child = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert child.returncode == 0, child.stderr
    outcome = json.loads(child.stdout)
    assert outcome["made"] == 1 and outcome["refused"] == [DISK_TEXT] * 3 and outcome["ends_whole"]
    assert (outcome["failures"], outcome["refusals"]) == (1, 2)  # later attempts refused without writing
    assert "File too large" in outcome["reason"] and outcome["back"] is None
    reopened = ReleaseLog(log.path, "r0c0")
    assert reopened.count == 4 and [r["rpc"] for r in reopened.releases()][-1] == "Records"


def test_a_line_another_writer_left_torn_is_cut_before_the_next_append(tmp_path: Path) -> None:
    """A second process serving the entity (a misconfiguration) that died mid-append: under the file lock nobody is
    writing, so the torn bytes are a dead writer's and are cut; a complete line of its refuses this release once."""
    log = new_log(tmp_path, 1)
    with log.path.open("ab") as handle:
        handle.write(b'{"seq":2,"ev')
    log.append({"rpc": "Records", "peer": "c"})
    other = ReleaseLog(log.path, "r0c0")
    other.append({"rpc": "FeatureRange", "peer": "c"})
    with pytest.raises(ConfigError, match="changed while this release was being recorded") as changed:
        log.append({"rpc": "Records", "peer": "c"})
    assert_remote_safe(str(changed.value), tmp_path)
    assert [r["rpc"] for r in log.refresh()] == ["FeatureRange"]
    log.append({"rpc": "Records", "peer": "c"})
    assert ReleaseLog(log.path, "r0c0").count == 4


def test_a_log_cut_under_a_running_entity_is_never_appended_to(tmp_path: Path) -> None:
    """Cut behind the running process (its head file untouched): appending would chain a line to one no longer
    there. Refused with a text naming no path, NOT_SERVING, and the file left as it was found."""
    log = new_log(tmp_path, 3)
    guard = ReleaseGuard(log, mode="random-kernel", epsilon_total=None, max_baseline_releases=8, who="r0c0")
    cut = b"".join(log.path.read_bytes().splitlines(keepends=True)[:3])
    log.path.write_bytes(cut)
    for _ in range(2):
        with pytest.raises(ConfigError, match="no longer holds what it verified") as refused:
            guard.charge("Records", "c")
        assert_remote_safe(str(refused.value), tmp_path)
    with pytest.raises(ConfigError, match="cannot record releases"):
        log.append({"rpc": "Records", "peer": "c"})  # past the guard's refresh: the append checks the file too
    reason = log.unwritable()
    assert reason is not None and "fewer than the" in reason
    assert log.path.read_bytes() == cut


# ------------------------------------------------------------------ the free-space floor


def fake_free(monkeypatch: pytest.MonkeyPatch, free_bytes: list[int]) -> list[int]:
    """os.statvfs of the release log reports ``free_bytes[0]`` free; returns the list of calls."""
    calls: list[int] = []

    def statvfs(path: Any) -> SimpleNamespace:
        calls.append(1)
        return SimpleNamespace(f_bavail=free_bytes[0] // 4096, f_frsize=4096)

    monkeypatch.setattr(release_log_module.os, "statvfs", statvfs)
    return calls


def test_below_the_floor_nothing_is_recorded_and_the_health_check_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = new_log(tmp_path, 1, min_free_disk_mb=64)
    free = [63 * MIB]
    calls = fake_free(monkeypatch, free)
    before = log.path.read_bytes()
    with pytest.raises(ConfigError) as refused:
        log.append({"rpc": "KernelBlock", "peer": "c"})
    assert str(refused.value) == DISK_TEXT
    assert log.path.read_bytes() == before and log.disk_refusals == 1
    reason = log.unwritable()
    assert reason is not None and "63.0 MiB free, below [privacy] min_free_disk_mb = 64" in reason
    free[0] = 65 * MIB
    assert log.unwritable() is None
    log.append({"rpc": "KernelBlock", "peer": "c"})
    assert log.count == 2 and len(calls) == 4  # one statvfs an append or probe: about 7 us against a 3 ms fsync
    log.min_free_disk_mb = 0
    free[0] = 0
    log.append({"rpc": "KernelBlock", "peer": "c"})  # no floor: not even asked
    assert len(calls) == 4


def test_after_a_failure_it_serves_again_only_with_space(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With no floor set, a failed log still waits for some free space before it says SERVING again."""
    log = new_log(tmp_path, 1)
    failing_write(monkeypatch, errno.ENOSPC)
    with pytest.raises(ConfigError):
        log.append({"rpc": "KernelBlock", "peer": "c"})
    monkeypatch.undo()
    free = [RESUME_FREE_BYTES - 4096]
    fake_free(monkeypatch, free)
    assert log.unwritable() is not None
    free[0] = RESUME_FREE_BYTES
    assert log.unwritable() is None


def test_a_log_shorter_than_it_was_left_stays_failed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = new_log(tmp_path, 2)
    failing_write(monkeypatch, errno.ENOSPC)
    with pytest.raises(ConfigError):
        log.append({"rpc": "KernelBlock", "peer": "c"})
    monkeypatch.undo()
    lines = log.path.read_bytes().splitlines(keepends=True)
    log.path.write_bytes(b"".join(lines[:2]))
    reason = log.unwritable()
    assert reason is not None and "fewer than the" in reason
    with pytest.raises(ConfigError, match="cannot record releases"):
        log.append({"rpc": "KernelBlock", "peer": "c"})


# ------------------------------------------------------------------ what a coordinator compares


def test_head_root_and_digests_are_the_lines_digests(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(release_log_module, "CHECKPOINT_EVERY", 4)
    log = new_log(tmp_path, 10)
    digests = line_digests(log.path)
    assert log.head == (10, digests[-1]) and log.root == digests[0]
    assert [log.digest_at(k) for k in range(11)] == digests
    reopened = ReleaseLog(log.path, "r0c0")  # notes taken while reading, not only while appending
    assert [reopened.digest_at(k) for k in (0, 3, 4, 5, 8, 10)] == [digests[k] for k in (0, 3, 4, 5, 8, 10)]
    assert len(reopened._mark_offsets) == len(log._mark_offsets) == 2
    with pytest.raises(ValueError, match="not in the log's 0 to 10"):
        log.digest_at(11)
    guard = ReleaseGuard(reopened, mode="random-kernel", epsilon_total=None, max_baseline_releases=8, who="r0c0")
    state = guard.state()
    assert (state["releases"], state["chain_head"], state["chain_root"]) == (10, digests[-1], digests[0])


def test_digest_at_names_no_path_when_the_file_changed(tmp_path: Path) -> None:
    log = new_log(tmp_path, 3)
    log.path.write_bytes(log.path.read_bytes().replace(b'"rows":1', b'"rows":9'))
    with pytest.raises(ConfigError) as changed:
        log.digest_at(3)
    assert_remote_safe(str(changed.value), tmp_path)


# ------------------------------------------------------------------ memory


def test_memory_does_not_grow_with_releases(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The log holds counts and digests, the guard sums and pins: 8,000 more releases add (almost) nothing in
    Python's heap, and a restart streams the log. Before, each release held about 900 bytes (records and nonce
    strings): 7 MB here. The nonces' table lives in SQLite's own memory and files, measured by
    test_used_nonces_stay_on_disk. (fsync skipped: this measures memory, not the disk.)"""
    monkeypatch.setattr(release_log_module.os, "fsync", lambda descriptor: None)
    log = new_log(tmp_path)
    guard = ReleaseGuard(log, mode="random-kernel", epsilon_total=None, max_baseline_releases=8, who="r0c0")
    guard.max_releases_per_minute = 0

    def charge(count: int, start: int) -> None:
        for k in range(start, start + count):
            guard.charge("KernelBlock", "c", records="ids", rows=1000, nonce=f"{k:032x}")

    charge(1000, 0)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        charge(8000, 1000)
        grown = tracemalloc.get_traced_memory()[0] - before
        reopened = ReleaseLog(log.path, "r0c0")
        replayed = ReleaseGuard(reopened, mode="random-kernel", epsilon_total=None, max_baseline_releases=8, who="r0c0")
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    assert grown < 100_000, grown
    assert replayed.log.count == 9000 and len(replayed.nonces) == 9000
    assert peak < 2 * MIB, peak  # the replay streamed the log (2.4 MB on disk) instead of holding it
    assert f"{5:032x}" in replayed.nonces and f"{9000:032x}" not in replayed.nonces


def test_used_nonces_forget_nothing() -> None:
    nonces = UsedNonces()
    added = [f"n{k}" for k in range(5000)]
    for nonce in added:
        assert nonce not in nonces
        nonces.add(nonce)
    nonces.add("n7")  # again: no change
    assert all(nonce in nonces for nonce in added) and len(nonces) == len(added)
    with nonces.loading():
        for k in range(1000):
            nonces.add(f"loaded{k}")
    assert "loaded999" in nonces and "n0" in nonces and "fresh" not in nonces and len(nonces) == 6000
    assert 7 not in nonces  # type: ignore[operator]


@pytest.mark.slow
def test_used_nonces_stay_on_disk() -> None:
    """Half a million nonces (4 MB as the 64-bit fingerprints the entity kept in memory before) grow a fresh
    process's resident memory by less than SQLite's 2 MiB page cache and its own overhead."""
    script = (
        "import resource\n"
        "from ppsvm.entity.guard import UsedNonces\n"
        "nonces = UsedNonces()\n"
        "nonces.add('warm')\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "with nonces.loading():\n"
        "    for k in range(500_000):\n"
        "        nonces.add(f'{k:032x}')\n"
        "assert len(nonces) == 500_001 and f'{7:032x}' in nonces\n"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)\n"
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=True)
    grown_kib = int(run.stdout)
    assert grown_kib < 3 * 1024, grown_kib


def test_a_nonce_table_that_cannot_grow_records_no_release(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its file system full: the release is refused with the disk's fixed text (no path), nothing is logged, and
    the nonce may be asked again once there is room."""
    log = new_log(tmp_path)
    guard = ReleaseGuard(log, mode="random-kernel", epsilon_total=None, max_baseline_releases=8, who="r0c0")
    count = log.count

    def full(nonce: str) -> None:
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(guard.nonces, "add", full)
    with pytest.raises(ConfigError, match="cannot record releases") as refused:
        guard.charge("KernelBlock", "c", records="ids", rows=1, nonce="ab" * 16)
    assert_remote_safe(str(refused.value), tmp_path)
    assert log.count == count
    monkeypatch.undo()
    guard.charge("KernelBlock", "c", records="ids", rows=1, nonce="ab" * 16)
    assert log.count == count + 1 and "ab" * 16 in guard.nonces
