"""An entity's release log: one append-only, hash-chained JSON line per release, fsynced.

Every answer an entity derives from its records (kernel blocks, record ids and labels,
ranges, entity-alone figures, DP weights and DP error counts) is written here *before*
it is computed, so a failure or a crash never under-counts (docs/design.md rule 6: once data
is touched, the release is charged). The DP budget is part of this log: a DP release
carries its epsilon as an integer number of micro-epsilons, so the ledger sums exactly.

Format (``FORMAT``, ``VERSION``), one JSON object per line::

    {"seq": 0, "event": "created", "format": "ppsvm-release-log", "version": 1,
     "entity_id": "r0c0", "time": "...", "prev": ""}
    {"seq": 1, "event": "release", "rpc": "KernelBlock", "peer": "coordinator", "time": "...",
     "records": "train", "rows": 285, "mbar": 4, "basis": "<fingerprint>", "epsilon_micro": 0,
     "detail": {...}, "prev": "<sha256 of line 0>"}

``prev`` chains each line to the one before, so an edited, reordered or cut line is
found when the log is opened. The chain cannot tell a log cut back to an earlier line
(the last lines removed): a *head* file beside it (``<log>.head``) records the last sequence
number and digest, and a log shorter than its head is refused. The head has two fixed-width
slots, written alternately in place after each append: a write torn by a crash spoils one slot
and the other still holds the release before. Only the log line is fsynced on every append;
the head, written after it, can never be ahead of the durable log, and a head a crash left
behind only narrows what it detects. (An atomic rename cost two more fsyncs per release, about
a quarter of an entity's CPU per prediction call, issue 14.) A log that is missing altogether
cannot be told from a new entity: opening refuses unless the entity is started as new, so a
deleted log stops the entity instead of silently resetting what it has released. Removing or
rewriting both files is an operator's deliberate act that no file of the entity's own can prevent.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ppsvm.errors import ConfigError
from ppsvm.files import PRIVATE_MODE, sync_directory

FORMAT = "ppsvm-release-log"
VERSION = 1
CREATED = "created"
RELEASE = "release"
# Epsilons are counted in integer micro-epsilons: float sums absorb tiny releases (1 + 1e-300 == 1).
MICRO_PER_EPSILON = 1_000_000
# Bytes of one head slot: a JSON record padded with spaces and ended by a newline (sector-aligned, so a
# slot write is never split between sectors).
HEAD_SLOT = 128


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _digest(line: bytes) -> str:
    return hashlib.sha256(line).hexdigest()


def _encode(record: dict[str, Any]) -> bytes:
    return json.dumps(record, sort_keys=True, separators=(",", ":"), allow_nan=False).encode("utf-8") + b"\n"


def new_release_log_text(entity_id: str) -> str:
    """The contents of a new entity's release log: its creation line."""
    record = {
        "seq": 0,
        "event": CREATED,
        "format": FORMAT,
        "version": VERSION,
        "entity_id": entity_id,
        "time": _now(),
        "prev": "",
    }
    return _encode(record).decode("utf-8")


def head_path(path: Path) -> Path:
    """The head file of a release log: its last sequence number and digest."""
    return path.with_name(path.name + ".head")


def create_release_log(path: Path, entity_id: str) -> None:
    """Start an empty release log for a new entity; refuses to replace an existing one.

    Raises
    ------
    ConfigError
        ``path`` exists (its history would be lost) or cannot be written.
    """
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_MODE)
    except FileExistsError:
        raise ConfigError(
            f"release log {path} already exists; it holds the entity's release history and is never replaced"
        ) from None
    except OSError as exc:
        raise ConfigError(f"cannot create release log {path}: {exc.strerror}") from exc
    with open(descriptor, "wb") as handle:
        handle.write(new_release_log_text(entity_id).encode("utf-8"))
        handle.flush()
        os.fsync(handle.fileno())
    sync_directory(path.parent)


class ReleaseLog:
    """The open log of one entity: verified on opening, appended to under a lock.

    Parameters
    ----------
    path : Path
        The log file.
    entity_id : str
        Must match the id recorded in the log's first line.

    Raises
    ------
    ConfigError
        The log is missing (restore it; only a new entity starts one, see
        :func:`create_release_log`), unreadable, of another entity, or its chain is broken.
    """

    def __init__(self, path: Path, entity_id: str) -> None:
        self.path = Path(path)
        self.entity_id = entity_id
        self.head_path = head_path(self.path)
        self._lock = threading.Lock()
        self._records, self._last_digest = self._read()
        self._check_head()

    @property
    def records(self) -> tuple[dict[str, Any], ...]:
        """Every release recorded, oldest first (the creation line excluded)."""
        return tuple(self._records)

    @property
    def created(self) -> str:
        """When the log was started (the entity's first day of service)."""
        return self._created

    def refresh(self) -> bool:
        """Re-read the log if another process serving the same entity appended to it; True when it had."""
        with self._lock:
            try:
                size = self.path.stat().st_size
            except OSError:
                size = -1
            if size == self._size:
                return False
            self._records, self._last_digest = self._read()
            self._check_head()
            return True

    def append(self, record: dict[str, Any]) -> dict[str, Any]:
        """Write one release record (with seq, time and the chain filled in), durable before this returns."""
        with self._lock:
            full = {
                **record,
                "event": RELEASE,
                "seq": len(self._records) + 1,
                "time": _now(),
                "prev": self._last_digest,
            }
            line = _encode(full)
            with self._exclusive() as handle:
                handle.write(line)
                handle.flush()
                os.fsync(handle.fileno())
            self._records.append(full)
            self._last_digest = _digest(line)
            self._size += len(line)
            self._write_head(full["seq"], self._last_digest)
            return full

    def unwritable(self) -> str | None:
        """Why the next release could not be recorded, as far as cheap checks can tell, or None.

        Checks what :meth:`append` opens for writing: the log (gone, or on a read-only file or file
        system) and its head file, or the directory where it would be made. A full disk shows only
        when a write fails. For the entity's health check, asked on every probe.
        """
        if not os.access(self.path, os.W_OK):
            return f"release log {self.path} is missing or cannot be written"
        head = self.head_path if self.head_path.exists() else self.head_path.parent
        if not os.access(head, os.W_OK):
            return f"release log head {head} cannot be written"
        return None

    def _write_head(self, seq: int, digest: str) -> None:
        """Write slot ``seq % 2`` of the head in place; a head file this creates is made durable at once."""
        slot = json.dumps({"seq": seq, "digest": digest}).encode("ascii").ljust(HEAD_SLOT - 1) + b"\n"
        created = not self.head_path.exists()
        descriptor = os.open(self.head_path, os.O_WRONLY | os.O_CREAT, PRIVATE_MODE)
        try:
            os.pwrite(descriptor, slot, HEAD_SLOT * (seq % 2))
            if created:  # a missing head is refused once the log has releases: never lose the file itself
                os.fsync(descriptor)
        finally:
            os.close(descriptor)
        if created:
            sync_directory(self.head_path.parent)

    def _check_head(self) -> None:
        """Refuse a log cut back behind the last release its head file recorded."""
        try:
            data = self.head_path.read_bytes()
        except FileNotFoundError:
            if self._records:
                raise self._broken(
                    f"has {len(self._records)} releases but its head file {self.head_path} is missing"
                ) from None
            return
        except OSError:
            raise self._broken(f"has a head file {self.head_path} that cannot be read") from None
        heads = []
        for start in range(0, len(data), HEAD_SLOT):  # a torn or never-written slot is passed over
            try:
                head = json.loads(data[start : start + HEAD_SLOT].strip(b"\0 \n"))
                heads.append((int(head["seq"]), str(head["digest"])))
            except (ValueError, KeyError, TypeError):
                continue
        if not heads:
            raise self._broken(f"has a head file {self.head_path} that cannot be read")
        seq, digest = max(heads)
        if seq > len(self._records):
            raise self._broken(
                f"ends at release {len(self._records)}, but its head file records release {seq}: "
                "its last lines were cut"
            )
        if seq == len(self._records) and seq > 0 and digest != self._last_digest:
            raise self._broken("does not end with the release its head file records")

    @contextmanager
    def _exclusive(self) -> Iterator[Any]:
        # flock, and the size this process last saw: a second process serving the same entity (a
        # misconfiguration) would otherwise count its releases apart from ours.
        with self.path.open("ab") as handle:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            if os.fstat(handle.fileno()).st_size != self._size:
                raise ConfigError(
                    f"release log {self.path} changed while this release was being recorded (another "
                    "process serving the same entity); the release was not made, ask again"
                )
            yield handle

    def _read(self) -> tuple[list[dict[str, Any]], str]:
        try:
            lines = self.path.read_bytes().splitlines(keepends=True)
        except FileNotFoundError:
            raise ConfigError(
                f"release log {self.path} does not exist. It records everything this entity has released; starting "
                "without it would forget that history. Restore it from a backup, or, for an entity that has never "
                "served, start it once with --new-release-log (ppsvm split creates it for the cells it writes)"
            ) from None
        except OSError as exc:
            raise ConfigError(f"cannot read release log {self.path}: {exc.strerror}") from exc
        if not lines:
            raise self._broken("is empty (its creation line is missing)")
        self._size = sum(len(line) for line in lines)
        records: list[dict[str, Any]] = []
        previous = ""
        for number, line in enumerate(lines, start=1):
            try:
                record = json.loads(line)
            except (UnicodeDecodeError, json.JSONDecodeError):
                raise self._broken(f"line {number} is not JSON") from None
            if not isinstance(record, dict) or record.get("prev") != previous or record.get("seq") != number - 1:
                raise self._broken(f"line {number} does not follow line {number - 1} (edited, reordered or cut)")
            previous = _digest(line)
            records.append(record)
        head = records[0]
        if head.get("event") != CREATED or head.get("format") != FORMAT or head.get("version") != VERSION:
            raise self._broken(f"does not start with a {FORMAT} version {VERSION} creation line")
        if head.get("entity_id") != self.entity_id:
            raise ConfigError(
                f"release log {self.path} belongs to entity {head.get('entity_id')!r}, not {self.entity_id!r}; "
                "point [privacy] release_log at this entity's own log"
            )
        self._created = str(head.get("time"))
        return records[1:], previous

    def _broken(self, problem: str) -> ConfigError:
        return ConfigError(
            f"release log {self.path} {problem}. It was left untouched: the entity will not serve on a "
            "history it cannot trust. Restore it from a backup"
        )
