"""The entity's differential-privacy budget: a ledger on disk of every DP release.

Each data-owning entity has a total budget epsilon_total for its data. Every DP
release (noisy weights) spends part of it, and sequential composition adds the
epsilons up. The ledger records each release in a JSON file next to the entity's
data and refuses any request that would push the sum past the total.

Spending is two-phase, so that a failed training does not waste budget but a
crash never under-counts:

1. ``reserve`` counts the epsilon toward the budget and is on disk before it
   returns;
2. ``Reservation.commit`` marks it spent just before the release leaves the
   entity, or ``Reservation.cancel`` returns it while nothing has left.

A reservation still "reserved" after a crash stays counted: the process may have
sent the release before dying, and only an operator can know otherwise.

File format (``FORMAT``, version ``VERSION``)::

    {"format": "ppsvm-privacy-ledger", "version": 1, "entity_id": "h1", "total_epsilon": 2.0,
     "entries": [{"id": "<uuid4>", "epsilon": 0.5, "purpose": "...", "mechanism": "laplace",
                  "state": "reserved" | "spent", "time": "<ISO-8601 UTC, when reserved>",
                  "spent_time": "<ISO-8601 UTC>" | null}]}
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import logging
import math
import numbers
import os
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from types import TracebackType
from typing import Any

from common.errors import ConfigError, PrivacyError
from common.files import PRIVATE_MODE, write_atomic

logger = logging.getLogger(__name__)

FORMAT = "ppsvm-privacy-ledger"
VERSION = 1
RESERVED = "reserved"
SPENT = "spent"

# Absolute slack on the budget check, so that spending exactly the total in parts
# whose floating-point sum lands a few ulps above it (0.1 + 0.2 + 0.7) is allowed.
# Far below any epsilon a mechanism would use, so it never buys a real release.
BUDGET_TOLERANCE = 1e-12

_ENTRY_KEYS = frozenset({"id", "epsilon", "purpose", "mechanism", "state", "time", "spent_time"})
_DOCUMENT_KEYS = frozenset({"format", "version", "entity_id", "total_epsilon", "entries"})


@dataclass(frozen=True)
class LedgerEntry:
    """One DP release (or reservation for one) as recorded in the ledger file.

    Attributes
    ----------
    id : str
        A UUID4, unique within the ledger.
    epsilon : float
        The privacy cost, finite and > 0.
    purpose : str
        What the release is for (e.g. "hybrid RBF SVM weights, task t7").
    mechanism : str
        The DP mechanism (e.g. "laplace output perturbation").
    state : str
        ``"reserved"`` (counted, may still be cancelled) or ``"spent"``.
    time : str
        ISO-8601 UTC time of the reservation.
    spent_time : str or None
        ISO-8601 UTC time of the commit; None while reserved.
    """

    id: str
    epsilon: float
    purpose: str
    mechanism: str
    state: str
    time: str
    spent_time: str | None


@dataclass(frozen=True)
class _Snapshot:
    """The file as read: the total it records (None when there is no file yet) and its entries."""

    total_epsilon: float | None
    entries: tuple[LedgerEntry, ...]


class Reservation:
    """Budget held for one release; returned by `PrivacyLedger.reserve`, not built directly.

    Call `commit` just before the release leaves the entity, or `cancel` if it never
    will. As a context manager it cancels when the block raises before `commit` was
    called and commits when the block ends normally::

        with ledger.reserve(0.5, "weights for task t7", "laplace") as reservation:
            weights = train_and_add_noise(...)   # an exception here returns the budget
            reservation.commit()                 # from here on the budget stays spent
            send(weights)

    If the release can leave the entity inside the block, commit explicitly before
    sending it, as above: otherwise an exception raised after the send (a dropped
    connection, say) would cancel a reservation whose release is already out.

    Attributes
    ----------
    id : str
        The id of its `LedgerEntry`.
    epsilon : float
        The reserved privacy cost.
    purpose, mechanism : str
        As given to `PrivacyLedger.reserve`.
    """

    def __init__(self, ledger: PrivacyLedger, entry: LedgerEntry) -> None:
        self._ledger = ledger
        self.id = entry.id
        self.epsilon = entry.epsilon
        self.purpose = entry.purpose
        self.mechanism = entry.mechanism

    def commit(self) -> None:
        """Mark the reservation spent; call it just before the release leaves the entity.

        Raises
        ------
        PrivacyError
            The reservation is no longer in the ledger (cancelled, or the file was
            replaced) or is already spent: the release must then not be sent, since
            its budget is not (or no longer separately) accounted for.
        """
        self._ledger._settle(self.id, commit=True)

    def cancel(self) -> None:
        """Return the reserved budget. Cancelling twice is a no-op.

        Allowed only while nothing derived from the data under this reservation has
        left the entity: neither the release nor any intermediate result of it. Once
        anything has been sent, the epsilon is spent whether or not the rest
        succeeded, and the reservation must be committed instead.

        Raises
        ------
        PrivacyError
            The reservation is already spent; spent budget is never returned.
        """
        self._ledger._settle(self.id, commit=False)

    def __enter__(self) -> Reservation:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        # The caller may have committed or cancelled inside the block; only a
        # still-reserved entry is settled here, so no release is refunded.
        if self._ledger._state_of(self.id) != RESERVED:
            return
        if exc_type is None:
            self.commit()
        else:
            self.cancel()

    def __repr__(self) -> str:
        return f"Reservation(id={self.id!r}, epsilon={self.epsilon!r}, purpose={self.purpose!r})"


class PrivacyLedger:
    """An entity's privacy budget over a JSON ledger file, safe across threads and processes.

    Every change re-reads the file while holding a ``threading.Lock`` and an
    exclusive ``fcntl.flock`` on the sidecar ``<path>.lock`` (never deleted:
    removing a lock file lets two processes lock different inodes), so several
    processes serving the same entity share one budget. Changes are written
    atomically (temp file, fsync, ``os.replace``, fsync of the directory). Queries
    read the file without the lock: ``os.replace`` means they see a whole version.

    Parameters
    ----------
    path : Path
        The ledger file. A missing file means nothing spent; it is created on the
        first reservation. Its directory must exist.
    total_epsilon : float
        The entity's budget from its config, finite and >= 0. A total that differs
        from the one recorded in the file is honoured, but entries already recorded
        keep counting: a total lowered below them refuses every request.
    entity_id : str
        The entity's id from its config; must match the one recorded in the file.

    Raises
    ------
    ConfigError
        The file is unreadable, corrupt, of another format or version, or belongs
        to another entity; the directory is missing; or total_epsilon is not a
        finite number >= 0. A corrupt file is never reset, since that would reset
        the budget.
    """

    def __init__(self, path: Path, total_epsilon: float, *, entity_id: str) -> None:
        if not isinstance(entity_id, str) or not entity_id:
            raise ConfigError(f"privacy ledger {path}: entity_id must be a non-empty string, got {entity_id!r}")
        if (
            not isinstance(total_epsilon, numbers.Real)
            or isinstance(total_epsilon, bool)
            or not math.isfinite(total_epsilon)
            or total_epsilon < 0
        ):
            raise ConfigError(
                f"entity {entity_id}: total_epsilon must be a finite number >= 0, got {total_epsilon!r}"
            )
        self.path = Path(path)
        self.total_epsilon = float(total_epsilon)
        self.entity_id = entity_id
        self._lock_path = self.path.with_name(self.path.name + ".lock")
        self._thread_lock = threading.Lock()
        if not self.path.parent.is_dir():
            # Refuse rather than create it: a missing state directory (an unmounted
            # volume, a typo) would otherwise silently start the budget from zero.
            raise ConfigError(
                f"entity {entity_id}: the directory of privacy ledger {self.path} does not exist; "
                "create it, or check that the entity's state volume is mounted"
            )
        # Fail at startup, not at the first release, on a corrupt or foreign ledger.
        snapshot = self._read_snapshot()
        if snapshot.total_epsilon is not None and snapshot.total_epsilon != self.total_epsilon:
            logger.warning(
                "entity %s: total_epsilon changed from %s (ledger %s) to %s (config); "
                "the %s already recorded still counts",
                entity_id,
                _fmt(snapshot.total_epsilon),
                self.path,
                _fmt(self.total_epsilon),
                _fmt(_total(snapshot.entries, None)),
            )

    # -- queries --------------------------------------------------------------

    @property
    def entries(self) -> tuple[LedgerEntry, ...]:
        """All recorded entries, oldest first."""
        return self._read_entries()

    @property
    def spent(self) -> float:
        """Sum of the epsilons of committed releases."""
        return _total(self._read_entries(), SPENT)

    @property
    def reserved(self) -> float:
        """Sum of the epsilons reserved but not committed (including any left by a crash)."""
        return _total(self._read_entries(), RESERVED)

    @property
    def remaining(self) -> float:
        """The budget still available: total - spent - reserved, never below 0."""
        return max(0.0, self.total_epsilon - _total(self._read_entries(), None))

    def summary(self) -> dict[str, Any]:
        """The budget as a JSON-serialisable dict, for machine-readable ``--budget`` output.

        Returns
        -------
        dict
            ``entity_id``, ``ledger`` (the path), ``total_epsilon``, ``spent``,
            ``reserved``, ``remaining`` and ``entries`` (one dict per `LedgerEntry`).
        """
        entries = self._read_entries()
        used = _total(entries, None)
        return {
            "entity_id": self.entity_id,
            "ledger": str(self.path),
            "total_epsilon": self.total_epsilon,
            "spent": _total(entries, SPENT),
            "reserved": _total(entries, RESERVED),
            "remaining": max(0.0, self.total_epsilon - used),
            "entries": [dataclasses.asdict(entry) for entry in entries],
        }

    def report(self) -> str:
        """A human-readable table of the ledger, for ``ppsvm entity --budget``.

        Returns
        -------
        str
            A header, one row per entry (time, epsilon, state, mechanism, purpose)
            and the totals: spent, reserved and remaining of the total.
        """
        entries = self._read_entries()
        spent, reserved = _total(entries, SPENT), _total(entries, RESERVED)
        used = _total(entries, None)
        lines = [f"privacy ledger of entity {self.entity_id} ({self.path})"]
        if entries:
            header = ("time (UTC)", "epsilon", "state", "mechanism", "purpose")
            rows = [(e.time, _fmt(e.epsilon), e.state, e.mechanism, e.purpose) for e in entries]
            widths = [max(len(row[k]) for row in [header, *rows]) for k in range(4)]
            for time, epsilon, state, mechanism, purpose in [header, *rows]:
                cells = [time.ljust(widths[0]), epsilon.rjust(widths[1]), state.ljust(widths[2]), mechanism.ljust(widths[3])]
                lines.append("  ".join([*cells, purpose]))
        else:
            lines.append("no releases recorded")
        lines.append(
            f"spent {_fmt(spent)}, reserved {_fmt(reserved)}, remaining {_fmt(max(0.0, self.total_epsilon - used))} "
            f"of total {_fmt(self.total_epsilon)} ({_releases(len(entries))})"
        )
        if reserved > 0:
            lines.append(
                "reserved entries count toward the budget: a release in progress, or one whose process "
                "stopped before committing (it may have been sent, so it stays counted)"
            )
        if used > self.total_epsilon + BUDGET_TOLERANCE:
            lines.append(
                f"over budget by {_fmt(used - self.total_epsilon)}: the total was lowered below what is "
                "recorded; every request is refused"
            )
        return "\n".join(lines)

    # -- changes --------------------------------------------------------------

    def reserve(self, epsilon: float, purpose: str, mechanism: str) -> Reservation:
        """Reserve epsilon for one release; it counts toward the budget at once.

        The reservation is on disk before this returns, so a crash afterwards keeps
        it counted. Settle it with `Reservation.commit` or `Reservation.cancel`, or
        use it as a context manager (see `Reservation`).

        Parameters
        ----------
        epsilon : float
            The privacy cost of the release, finite and > 0.
        purpose : str
            What the release is for, shown by ``--budget``; non-empty.
        mechanism : str
            The DP mechanism, shown by ``--budget``; non-empty.

        Returns
        -------
        Reservation

        Raises
        ------
        PrivacyError
            spent + reserved + epsilon > total_epsilon + BUDGET_TOLERANCE.
        TypeError
            epsilon is not a real number (bools are refused too).
        ValueError
            epsilon is not finite or not > 0, or purpose or mechanism is empty.
        ConfigError
            The ledger file is corrupt or belongs to another entity.
        """
        if not isinstance(epsilon, numbers.Real) or isinstance(epsilon, bool):
            raise TypeError(f"epsilon must be a real number, got {type(epsilon).__name__}")
        if not math.isfinite(epsilon) or epsilon <= 0:
            raise ValueError(f"epsilon must be finite and > 0, got {epsilon!r}")
        for name, text in (("purpose", purpose), ("mechanism", mechanism)):
            if not isinstance(text, str) or not text.strip():
                raise ValueError(f"{name} must be a non-empty string, got {text!r}")
        epsilon = float(epsilon)
        with self._locked() as entries:
            used = _total(entries, None)
            if math.fsum([used, epsilon]) > self.total_epsilon + BUDGET_TOLERANCE:
                raise PrivacyError(
                    f"entity {self.entity_id}: privacy budget exhausted: requested epsilon {_fmt(epsilon)} "
                    f"but only {_fmt(max(0.0, self.total_epsilon - used))} of {_fmt(self.total_epsilon)} remains "
                    f"({_fmt(used)} spent or reserved in {_releases(len(entries))})"
                )
            entry = LedgerEntry(
                id=str(uuid.uuid4()),
                epsilon=epsilon,
                purpose=purpose,
                mechanism=mechanism,
                state=RESERVED,
                time=_now(),
                spent_time=None,
            )
            self._write(entries + (entry,))
        return Reservation(self, entry)

    def _settle(self, entry_id: str, *, commit: bool) -> None:
        """Commit (mark spent) or cancel (remove) one reserved entry under the lock."""
        with self._locked() as entries:
            found = [e for e in entries if e.id == entry_id]
            if commit:
                if not found:
                    raise PrivacyError(
                        f"entity {self.entity_id}: reservation {entry_id} is not in ledger {self.path} "
                        "(cancelled, or the ledger was replaced); the release must not be sent"
                    )
                if found[0].state == SPENT:
                    raise PrivacyError(
                        f"entity {self.entity_id}: reservation {entry_id} is already spent; "
                        "reserve again for another release"
                    )
                spent = dataclasses.replace(found[0], state=SPENT, spent_time=_now())
                self._write(tuple(spent if e.id == entry_id else e for e in entries))
                return
            if not found:
                return
            if found[0].state == SPENT:
                raise PrivacyError(
                    f"entity {self.entity_id}: reservation {entry_id} is already spent and cannot be "
                    "cancelled; spent privacy budget is never returned"
                )
            self._write(tuple(e for e in entries if e.id != entry_id))

    def _state_of(self, entry_id: str) -> str | None:
        """The recorded state of one entry, None when it is not in the ledger."""
        return next((e.state for e in self._read_entries() if e.id == entry_id), None)

    # -- file access ----------------------------------------------------------

    @contextmanager
    def _locked(self) -> Iterator[tuple[LedgerEntry, ...]]:
        """Hold both locks and yield the entries freshly read from disk."""
        # flock alone excludes other threads only while every operation opens its own
        # descriptor and flock is native; where it is emulated with fcntl record locks
        # (per process, e.g. on NFS) it would not, so threads also take a plain lock.
        with self._thread_lock:
            fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                # Always from disk: another process may have written since our last look.
                yield self._read_entries()
            finally:
                os.close(fd)  # closing releases the flock

    def _read_entries(self) -> tuple[LedgerEntry, ...]:
        return self._read_snapshot().entries

    def _read_snapshot(self) -> _Snapshot:
        """Read and validate the file; a missing file is an empty ledger."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return _Snapshot(total_epsilon=None, entries=())
        except (OSError, UnicodeDecodeError) as error:
            raise self._corrupt(f"cannot be read ({error})") from error
        try:
            document = json.loads(text)
        except json.JSONDecodeError as error:
            raise self._corrupt(f"is not valid JSON ({error})") from error
        if not isinstance(document, dict) or set(document) != _DOCUMENT_KEYS or document["format"] != FORMAT:
            raise self._corrupt(f"is not a {FORMAT} file (expected exactly the keys {sorted(_DOCUMENT_KEYS)})")
        if document["version"] != VERSION:
            raise self._corrupt(
                f"has version {document['version']!r}; this ppsvm reads version {VERSION} (a newer ppsvm wrote it?)"
            )
        if document["entity_id"] != self.entity_id:
            raise ConfigError(
                f"privacy ledger {self.path} belongs to entity {document['entity_id']!r}, but this entity is "
                f"{self.entity_id!r} (config); point ledger_path at this entity's own ledger"
            )
        if not _is_amount(document["total_epsilon"], allow_zero=True):
            raise self._corrupt(f"has an invalid total_epsilon {document['total_epsilon']!r}")
        if not isinstance(document["entries"], list):
            raise self._corrupt("has an 'entries' value that is not a list")
        entries = tuple(self._parse_entry(k, raw) for k, raw in enumerate(document["entries"]))
        if len({e.id for e in entries}) != len(entries):
            raise self._corrupt("has two entries with the same id")
        return _Snapshot(total_epsilon=float(document["total_epsilon"]), entries=entries)

    def _parse_entry(self, index: int, raw: Any) -> LedgerEntry:
        if not isinstance(raw, dict) or set(raw) != _ENTRY_KEYS:
            raise self._corrupt(f"entry {index} does not have exactly the keys {sorted(_ENTRY_KEYS)}")
        if not _is_amount(raw["epsilon"], allow_zero=False):
            raise self._corrupt(f"entry {index} has an invalid epsilon {raw['epsilon']!r}")
        if raw["state"] not in (RESERVED, SPENT):
            raise self._corrupt(f"entry {index} has an unknown state {raw['state']!r}")
        texts = [raw[k] for k in ("id", "purpose", "mechanism", "time")]
        if not all(isinstance(t, str) for t in texts):
            raise self._corrupt(f"entry {index} has a non-string id, purpose, mechanism or time")
        if not (isinstance(raw["spent_time"], str) if raw["state"] == SPENT else raw["spent_time"] is None):
            raise self._corrupt(f"entry {index} has a spent_time {raw['spent_time']!r} that contradicts its state")
        return LedgerEntry(**{**raw, "epsilon": float(raw["epsilon"])})

    def _corrupt(self, problem: str) -> ConfigError:
        return ConfigError(
            f"entity {self.entity_id}: privacy ledger {self.path} {problem}. It was left untouched: resetting "
            f"it would reset the privacy budget. Inspect it with 'python -m json.tool {self.path}' and repair "
            "it by hand or restore it from a backup"
        )

    def _write(self, entries: tuple[LedgerEntry, ...]) -> None:
        """Replace the file atomically; on any failure the old file stays and no temp file is left."""
        document = {
            "format": FORMAT,
            "version": VERSION,
            "entity_id": self.entity_id,
            "total_epsilon": self.total_epsilon,
            "entries": [dataclasses.asdict(entry) for entry in entries],
        }
        write_atomic(self.path, json.dumps(document, indent=2) + "\n", PRIVATE_MODE)


def _is_amount(value: Any, *, allow_zero: bool) -> bool:
    """A JSON number that is finite and > 0 (or >= 0)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return False
    return value >= 0 if allow_zero else value > 0


def _total(entries: tuple[LedgerEntry, ...], state: str | None) -> float:
    """Exactly rounded sum of the epsilons in one state (None: all states)."""
    return math.fsum(e.epsilon for e in entries if state is None or e.state == state)


def _releases(count: int) -> str:
    return f"{count} release" if count == 1 else f"{count} releases"


def _fmt(value: float) -> str:
    # 12 significant digits: hides float noise (0.30000000000000004) yet tells
    # apart any two epsilons a person would configure.
    return f"{value:.12g}"


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
