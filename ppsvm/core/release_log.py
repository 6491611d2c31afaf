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

**Memory.** The open log keeps no record: only the release count, the digests of its first and last
lines, the file's size, the creation time, and every ``CHECKPOINT_EVERY`` lines a note of where it
stands (40 bytes, for :meth:`ReleaseLog.digest_at`). Whoever needs the records (the guard's replay at
start, ``ppsvm entity releases``) streams them from the file with :meth:`ReleaseLog.releases`, each
verified against the chain as it is read.

**A full disk.** A crash mid-append leaves a *torn* last line (bytes after the last newline, or a
last line that is not JSON). That release was never answered, since an answer leaves only after the
line's fsync, and the head, written after the fsync, cannot record it: opening cuts it off with a
warning naming the bytes dropped. Anything else that does not verify still refuses to start. An append
that fails (no space, a file-size limit, an I/O error) cuts the file back to its last complete line
and changes nothing in memory (nothing was charged); the log is then *failed*: :meth:`unwritable`
says why (the health check answers NOT_SERVING) and every release is refused before anything is
computed, until a probe (a health check, or the next release) finds the file as this process left
it, taking a test write, and above the free-space floor (``min_free_disk_mb``), which it checks
before each append (``os.statvfs``: 5 microseconds against the half to 3 milliseconds of the fsync).
What a remote caller reads names no path and no exception; the entity's own log has both.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import threading
from array import array
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ppsvm.errors import ConfigError
from ppsvm.files import PRIVATE_MODE, sync_directory

logger = logging.getLogger(__name__)

FORMAT = "ppsvm-release-log"
VERSION = 1
CREATED = "created"
RELEASE = "release"
# Epsilons are counted in integer micro-epsilons: float sums absorb tiny releases (1 + 1e-300 == 1).
MICRO_PER_EPSILON = 1_000_000
# Bytes of one head slot: a JSON record padded with spaces and ended by a newline (sector-aligned, so a
# slot write is never split between sectors).
HEAD_SLOT = 128
MIB = 1024 * 1024
# After a failed append the log serves again only with at least this much free (and its floor): with no floor
# set, it would otherwise claim SERVING while the disk is still full, and fail the next release again.
RESUME_FREE_BYTES = 64 * 1024
# The write that shows a failed log takes lines again (more than any release line but a basis pin's).
PROBE_BYTES = 4096
# Every this many lines the open log notes where it stands (byte offset and digest: 40 bytes), so that
# digest_at reads at most this many lines: 40 kB of notes a million releases.
CHECKPOINT_EVERY = 1024
# No release record comes near this (the longest, a basis pin, holds 2 n_j numbers): a longer line is not one,
# and reading stops there instead of holding it in memory.
MAX_LINE_BYTES = 16 * MIB
# What restoring an old copy of a log would do, said wherever an operator is told the log cannot be used.
RESTORE_ADVICE = (
    "Restoring an older copy would give back budget the entity has spent, and the coordinators refuse a log whose "
    "release count went backwards: restore the latest copy, or start a new entity with a new release log and new "
    "records and secret"
)


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


@dataclass
class _Cursor:
    """How far a log is verified: the seq its next line must carry, the digest of the line before, and the bytes
    up to there; ``torn``, after reading to the end, the bytes left after it (a torn last line)."""

    seq: int
    digest: str
    offset: int
    torn: int = 0


class ReleaseLog:
    """The open log of one entity: verified on opening, appended to under a lock, streamed when replayed.

    It holds the release count, the last line's digest, the file's size, the creation time, and a note of its
    offset and digest every ``CHECKPOINT_EVERY`` lines; never the records.

    Parameters
    ----------
    path : Path
        The log file.
    entity_id : str
        Must match the id recorded in the log's first line.
    min_free_disk_mb : int
        Releases are refused while the log's file system has less free space than this (0: no floor).

    Raises
    ------
    ConfigError
        The log is missing (restore it; only a new entity starts one, see
        :func:`create_release_log`), unreadable, of another entity, or its chain is broken.
    """

    def __init__(self, path: Path, entity_id: str, *, min_free_disk_mb: int = 0) -> None:
        self.path = Path(path)
        self.entity_id = entity_id
        self.head_path = head_path(self.path)
        self.min_free_disk_mb = min_free_disk_mb
        # Why appends are refused since one failed (for the operator: path and OS error), until a probe clears it.
        self._failure: str | None = None
        self._below_floor = False
        # For the metrics: appends the OS refused, and releases refused for the disk (a failure or the floor).
        self.write_failures = 0
        self.disk_refusals = 0
        self._lock = threading.Lock()
        self._mark_offsets = array("Q")  # note k - 1: the byte offset of line k * CHECKPOINT_EVERY
        self._mark_digests = bytearray()  # and the digest of the line before it, 32 bytes each
        self._open()

    @property
    def count(self) -> int:
        """Releases recorded (the creation line excluded)."""
        return self._count

    @property
    def head(self) -> tuple[int, str]:
        """(releases recorded, hex SHA-256 of the log's last line): what a coordinator compares to see that the log
        never went backwards."""
        with self._lock:
            return self._count, self._last_digest

    @property
    def root(self) -> str:
        """Hex SHA-256 of the log's creation line: which log this is."""
        return self._root

    @property
    def size(self) -> int:
        """Bytes of the log this process has verified or written."""
        return self._size

    @property
    def created(self) -> str:
        """When the log was started (the entity's first day of service)."""
        return self._created

    def releases(self) -> Iterator[dict[str, Any]]:
        """Every release recorded, oldest first (the creation line excluded), read from the file and verified line
        by line; nothing is held but the line being read.

        Raises
        ------
        ConfigError
            The file no longer holds, up to the releases this process knows of, the lines it verified.
        """
        with self._lock:
            end, count, digest = self._size, self._count, self._last_digest
        cursor = _Cursor(0, "", 0)
        lines = self._verified(cursor, end)
        next(lines, None)  # the creation line, checked when the log was opened
        yield from lines
        if (cursor.seq - 1, cursor.digest) != (count, digest):
            raise self._broken(f"changed while it was read: it no longer holds the {count} releases it held")

    def digest_at(self, release: int) -> str:
        """Hex SHA-256 of the line of release number ``release`` (0: the creation line), read from the nearest note.

        Raises
        ------
        ValueError
            ``release`` is not between 0 and :attr:`count`.
        ConfigError
            The file no longer holds the lines this process verified (the text names no path; the entity's log does).
        """
        with self._lock:
            if not 0 <= release <= self._count:
                raise ValueError(f"release {release} is not in the log's 0 to {self._count}")
            note = release // CHECKPOINT_EVERY
            if note == 0:
                cursor = _Cursor(0, "", 0)
            else:
                digest = self._mark_digests[32 * (note - 1) : 32 * note].hex()
                cursor = _Cursor(note * CHECKPOINT_EVERY, digest, self._mark_offsets[note - 1])
            end = self._size
        try:
            for _ in self._verified(cursor, end):
                if cursor.seq > release:
                    return cursor.digest
            raise self._broken(f"ends before release {release}")
        except (ConfigError, OSError) as exc:
            logger.error("entity %s: %s", self.entity_id, exc)
            raise self._unverified() from None

    def refresh(self) -> list[dict[str, Any]]:
        """The releases another process serving the same entity appended since this one looked, oldest first
        (usually none: one stat).

        Raises
        ------
        ConfigError
            The lines appended do not follow this log's chain (the text names no path; the entity's log does).
        """
        with self._lock:
            try:
                size = self.path.stat().st_size
            except OSError:
                size = -1
            if size in (self._size, -1):  # unchanged, or gone (which append and the health check report)
                return []
            try:
                with self._locked(os.O_RDONLY) as descriptor:
                    return self._catch_up(descriptor)
            except (ConfigError, OSError) as exc:
                self._failure = f"release log {self.path}: {exc}"
                logger.error("entity %s: %s", self.entity_id, self._failure)
                raise self._unverified() from None

    def append(self, record: dict[str, Any]) -> dict[str, Any]:
        """Write one release record (with seq, time and the chain filled in), durable before this returns.

        Raises
        ------
        ConfigError
            Nothing was recorded: the disk is below its free-space floor, an append failed before and the file
            is not writable again yet, this append failed (the file is cut back to its last complete line), or
            another process appended meanwhile. The text names no path; the entity's log does.
        """
        with self._lock:
            if self._refusal() is not None:
                self.disk_refusals += 1
                raise self.disk_error()
            full = {
                **record,
                "event": RELEASE,
                "seq": self._count + 1,
                "time": _now(),
                "prev": self._last_digest,
            }
            line = _encode(full)
            try:
                with self._locked(os.O_WRONLY | os.O_APPEND) as descriptor:
                    self._check_unchanged(descriptor)
                    try:
                        _write_all(descriptor, line)
                        os.fsync(descriptor)
                    except OSError as exc:
                        self._cut_back(descriptor, exc)
                        raise
            except OSError as exc:
                self.write_failures += 1
                self._failure = f"release log {self.path} could not be appended to: {exc}"
                logger.error(
                    "entity %s: %s. Nothing was recorded (the file was cut back to its last complete line, %d "
                    "bytes); it releases nothing until the file is writable and its file system has space again",
                    self.entity_id,
                    self._failure,
                    self._size,
                )
                raise self.disk_error() from None
            self._advance(_Cursor(self._count + 2, _digest(line), self._size + len(line)))
            try:
                self._write_head(full["seq"], self._last_digest)
            except OSError as exc:  # the release is durable and stays charged; a head left behind only narrows checks
                self.write_failures += 1
                self._failure = f"release log head {self.head_path} could not be written: {exc}"
                logger.error("entity %s: %s (release %d is recorded)", self.entity_id, self._failure, self._count)
            return full

    def unwritable(self) -> str | None:
        """Why the next release could not be recorded, as far as cheap checks can tell, or None.

        Checks what :meth:`append` opens for writing: the log (gone, or on a read-only file or file system)
        and its head file, or the directory where it would be made; the free space of its file system against
        the floor; and an earlier failed append, which a probe here clears once the file is as this process left
        it and writable again. For the entity's health check, asked on every probe: the reason is logged by the
        entity, never sent (it names the path).
        """
        if not os.access(self.path, os.W_OK):
            return f"release log {self.path} is missing or cannot be written"
        head = self.head_path if self.head_path.exists() else self.head_path.parent
        if not os.access(head, os.W_OK):
            return f"release log head {head} cannot be written"
        if not self._lock.acquire(timeout=1.0):  # an append is running (a slow fsync): its outcome will tell
            return self._failure
        try:
            return self._refusal()
        finally:
            self._lock.release()

    def _refusal(self) -> str | None:
        """Under the lock: why appends are refused now (for the operator), or None. Clears an earlier failure once
        the file is writable and as this process left it, with its floor and RESUME_FREE_BYTES free."""
        floor = self._below_floor_reason()
        if self._failure is not None and floor is None and self._free_bytes() >= RESUME_FREE_BYTES:
            self._failure = self._recovery_problem()
            if self._failure is None:
                logger.info("entity %s: release log %s is writable again; it serves again", self.entity_id, self.path)
        return self._failure if self._failure is not None else floor

    def _free_bytes(self) -> int:
        """Free space of the log's file system for an unprivileged writer (-1 when it cannot be read)."""
        try:
            stats = os.statvfs(self.path)
        except OSError:
            return -1
        return stats.f_bavail * stats.f_frsize

    def _below_floor_reason(self) -> str | None:
        if self.min_free_disk_mb <= 0:
            return None
        free = self._free_bytes()
        below = free < self.min_free_disk_mb * MIB
        if below != self._below_floor:
            self._below_floor = below
            if below:
                logger.warning(
                    "entity %s: the file system of release log %s has %.1f MiB free, below [privacy] "
                    "min_free_disk_mb = %d: it releases nothing until its operator frees space",
                    self.entity_id,
                    self.path,
                    max(free, 0) / MIB,
                    self.min_free_disk_mb,
                )
            else:
                logger.info(
                    "entity %s: release log %s: its file system is above its floor again", self.entity_id, self.path
                )
        if not below:
            return None
        if free < 0:
            return f"release log {self.path}: the free space of its file system cannot be read"
        return (
            f"release log {self.path}: its file system has {free / MIB:.1f} MiB free, below [privacy] "
            f"min_free_disk_mb = {self.min_free_disk_mb}"
        )

    def _recovery_problem(self) -> str | None:
        """After a failed append: what still stops appends, or None once the log ends where this process left it
        (a torn remnant cut off; lines another process appended are left to :meth:`refresh`) and takes a write.

        The proof is a write: PROBE_BYTES of zeros appended, fsynced and cut off again (a crash in between leaves a
        torn line, cut at the next start). Free space alone would not show a file-size limit or a failing device.
        """
        try:
            size = self.path.stat().st_size
            if size < self._size:
                return f"release log {self.path} has {size} bytes, fewer than the {self._size} it had recorded"
            with self._locked(os.O_WRONLY | os.O_APPEND) as descriptor:
                if size > self._size:
                    cursor, _ = self._beyond()
                    self._cut_torn(descriptor, cursor)
                end = os.fstat(descriptor).st_size
                try:
                    _write_all(descriptor, bytes(PROBE_BYTES))
                    os.fsync(descriptor)
                finally:
                    os.ftruncate(descriptor, end)
                    os.fsync(descriptor)
            if not os.access(self.head_path, os.W_OK):
                return f"release log head {self.head_path} cannot be written"
        except (ConfigError, OSError) as exc:
            return f"release log {self.path} cannot be written yet: {exc}"
        return None

    def disk_error(self) -> ConfigError:
        """The fixed refusal of a release that could not be recorded for want of disk (no path in its text)."""
        return ConfigError(
            f"entity {self.entity_id} cannot record releases (its disk): it releases nothing until its operator "
            "frees space"
        )

    def _unverified(self) -> ConfigError:
        return ConfigError(
            f"entity {self.entity_id}: its release log no longer holds what it verified (cut, replaced or written by "
            "another process); it releases nothing until its operator has looked at it"
        )

    def _check_unchanged(self, descriptor: int) -> None:
        """Under the file lock, before an append: the file ends where this process last saw it. A torn line a
        crashed writer left is cut off; lines another process serving the same entity (a misconfiguration) added
        refuse this release, which its next attempt counts with them; a file cut or rewritten fails the log."""
        if os.fstat(descriptor).st_size == self._size:
            return
        try:
            cursor, new = self._beyond()
        except ConfigError as exc:
            self._failure = str(exc)
            logger.error("entity %s: %s", self.entity_id, exc)
            raise self._unverified() from None
        if not new:
            with suppress(ConfigError):  # a writer came back meanwhile: its lines are counted next time
                self._cut_torn(descriptor, cursor)
                return
        raise ConfigError(
            f"entity {self.entity_id}: its release log changed while this release was being recorded (another "
            "process serving the same entity); the release was not made, ask again"
        )

    def _cut_back(self, descriptor: int, error: OSError) -> None:
        """After a failed write: the file back to its last complete line, made durable (if this fails too, the
        next probe tries again)."""
        try:
            os.ftruncate(descriptor, self._size)
            os.fsync(descriptor)
        except OSError as again:
            logger.error(
                "entity %s: release log %s: cutting back to %d bytes after %s failed too: %s",
                self.entity_id,
                self.path,
                self._size,
                error,
                again,
            )

    def _cut_torn(self, descriptor: int, cursor: _Cursor) -> None:
        """Under the file lock: cut the torn line after ``cursor`` (a writer that stopped mid-append), if any."""
        if not cursor.torn:
            return
        if os.fstat(descriptor).st_size != cursor.offset + cursor.torn:
            raise ConfigError(f"release log {self.path} changed while its last line was being checked")
        writable = descriptor
        if fcntl.fcntl(descriptor, fcntl.F_GETFL) & os.O_ACCMODE == os.O_RDONLY:
            writable = os.open(self.path, os.O_WRONLY)
        try:
            os.ftruncate(writable, cursor.offset)
            os.fsync(writable)
        finally:
            if writable != descriptor:
                os.close(writable)
        logger.warning(
            "entity %s: release log %s ended in a torn line: %d bytes after its last complete record were dropped "
            "(a release being recorded when its writer stopped, never answered)",
            self.entity_id,
            self.path,
            cursor.torn,
        )
        cursor.torn = 0

    def _beyond(self) -> tuple[_Cursor, list[dict[str, Any]]]:
        """The complete lines after what this process knows, verified (nothing taken in), and the cursor after
        them."""
        cursor = self._known()
        return cursor, list(self._verified(cursor))

    def _catch_up(self, descriptor: int) -> list[dict[str, Any]]:
        """Under the file lock: take in the complete lines after what this process knows, cut a torn line after
        them; returns their records."""
        cursor = self._known()
        new = []
        for record in self._verified(cursor):
            new.append(record)
            self._note(cursor)
        self._cut_torn(descriptor, cursor)
        self._advance(cursor)
        return new

    def _known(self) -> _Cursor:
        """Where this process's knowledge of the file ends; refuses a file now shorter than that (cut or replaced)."""
        size = self.path.stat().st_size
        if size < self._size:
            raise self._broken(f"has {size} bytes, fewer than the {self._size} this process verified: it was cut")
        return _Cursor(self._count + 1, self._last_digest, self._size)

    def _note(self, cursor: _Cursor) -> None:
        """Keep the cursor's place if it is the next note (every CHECKPOINT_EVERY lines)."""
        if cursor.seq == (len(self._mark_offsets) + 1) * CHECKPOINT_EVERY:
            self._mark_offsets.append(cursor.offset)
            self._mark_digests += bytes.fromhex(cursor.digest)

    def _advance(self, cursor: _Cursor) -> None:
        self._note(cursor)
        self._count, self._last_digest, self._size = cursor.seq - 1, cursor.digest, cursor.offset

    @contextmanager
    def _locked(self, flags: int) -> Iterator[int]:
        """The log opened with ``flags`` under an exclusive flock: a second process serving the same entity (a
        misconfiguration) appends between our appends, never during one."""
        descriptor = os.open(self.path, flags)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX)
            yield descriptor
        finally:
            os.close(descriptor)

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
            if self._count:
                raise self._broken(
                    f"has {self._count} releases but its head file {self.head_path} is missing"
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
        if seq > self._count:
            raise self._broken(
                f"ends at release {self._count}, but its head file records release {seq}: its last lines were cut"
            )
        if seq == self._count and seq > 0 and digest != self._last_digest:
            raise self._broken("does not end with the release its head file records")

    def _open(self) -> None:
        """Verify the whole file against its chain and head (streamed), then cut a torn last line."""
        cursor = _Cursor(0, "", 0)
        try:
            lines = self._verified(cursor)
            first = next(lines, None)
            self._root = cursor.digest
            for _ in lines:
                self._note(cursor)
        except FileNotFoundError:
            raise ConfigError(
                f"release log {self.path} does not exist. It records everything this entity has released; starting "
                f"without it would forget that history. {RESTORE_ADVICE}. For an entity that has never served, start "
                "it once with --new-release-log (ppsvm split creates it for the cells it writes)"
            ) from None
        except OSError as exc:
            raise ConfigError(f"cannot read release log {self.path}: {exc.strerror}") from exc
        if first is None:
            raise self._broken("is empty (its creation line is missing)" if not cursor.torn else "line 1 is cut")
        if first.get("event") != CREATED or first.get("format") != FORMAT or first.get("version") != VERSION:
            raise self._broken(f"does not start with a {FORMAT} version {VERSION} creation line")
        if first.get("entity_id") != self.entity_id:
            raise ConfigError(
                f"release log {self.path} belongs to entity {first.get('entity_id')!r}, not {self.entity_id!r}; "
                "point [privacy] release_log at this entity's own log"
            )
        self._created = str(first.get("time"))
        self._advance(cursor)
        self._check_head()  # before any cut: a head that records the torn line means it was answered, then damaged
        if cursor.torn:
            try:
                with self._locked(os.O_WRONLY | os.O_APPEND) as descriptor:
                    self._catch_up(descriptor)  # again under the lock: a live writer may have been mid-append
            except OSError as exc:
                raise ConfigError(
                    f"release log {self.path} ends in a torn line ({cursor.torn} bytes after its last complete "
                    f"record) that cannot be cut off: {exc.strerror}"
                ) from exc

    def _verified(self, cursor: _Cursor, end: int | None = None) -> Iterator[dict[str, Any]]:
        """Each line after ``cursor`` (up to byte ``end``, or the end of the file), checked against the chain and
        yielded as it is read, the cursor moved past it.

        Stops before a torn last line (bytes after the last newline, or a last line that is not JSON), which
        ``cursor.torn`` then counts. Raises :class:`ConfigError` for anything else that does not follow.
        """
        with self.path.open("rb") as handle:
            handle.seek(cursor.offset)
            while end is None or cursor.offset < end:
                line = handle.readline(MAX_LINE_BYTES)
                number = cursor.seq + 1
                if not line:
                    break
                if not line.endswith(b"\n"):
                    if len(line) == MAX_LINE_BYTES:
                        raise self._broken(f"line {number} is longer than {MAX_LINE_BYTES} bytes")
                    cursor.torn = len(line)
                    break
                try:
                    record = json.loads(line)
                except (UnicodeDecodeError, json.JSONDecodeError):
                    if handle.read(1):
                        raise self._broken(f"line {number} is not JSON") from None
                    cursor.torn = len(line)
                    break
                if (
                    not isinstance(record, dict)
                    or record.get("prev") != cursor.digest
                    or record.get("seq") != cursor.seq
                ):
                    raise self._broken(f"line {number} does not follow line {number - 1} (edited, reordered or cut)")
                cursor.seq += 1
                cursor.digest = _digest(line)
                cursor.offset += len(line)
                yield record
            if end is not None and cursor.offset != end:
                raise self._broken(f"changed while it was read: it no longer ends its line {cursor.seq} at byte {end}")

    def _broken(self, problem: str) -> ConfigError:
        return ConfigError(
            f"release log {self.path} {problem}. It was left untouched: the entity will not serve on a history it "
            f"cannot trust. {RESTORE_ADVICE}"
        )


def _write_all(descriptor: int, data: bytes) -> None:
    """Write all of ``data`` (a write may take only part of it, the last before the disk is full)."""
    view = memoryview(data)
    while view:
        written = os.write(descriptor, view)
        view = view[written:]
