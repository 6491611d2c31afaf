"""What this coordinator has seen of each entity's release log: a log rolled back is noticed (issue 27).

An entity's release log is its memory of what it released: the budget spent, the basis view pinned.
An older copy put back on its host (a restored backup, a log cut short with its head file deleted)
would serve that budget and pin again, and nothing inside the entity can tell. Every entity publishes
in Metadata how many releases its log holds and the SHA-256 of its last and first lines; the
coordinator remembers, per log (entity id and first line), the longest chain it has seen, and refuses
an entity whose count went down or whose chain no longer passes through the head it saw (asked with
LogDigest). An administrator who rewrites the log and every coordinator's memory is beyond this.

The memory is one JSON file: ``$PPSVM_STATE_DIR/logs-seen.json`` when that variable is set, else
``<federation file's stem>.logs-seen.json`` beside the federation file.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from ppsvm.errors import ConfigError, EntityError
from ppsvm.files import write_atomic
from ppsvm.wire.rpc import ppsvm_pb2 as pb

logger = logging.getLogger(__name__)

STATE_DIR_ENV = "PPSVM_STATE_DIR"
STATE_FILE = "logs-seen.json"


def logs_seen_path(federation_file: Path) -> Path:
    """Where the coordinator of ``federation_file`` keeps what it has seen of the entities' logs."""
    directory = os.environ.get(STATE_DIR_ENV)
    if directory:
        return Path(directory) / STATE_FILE
    return federation_file.with_name(f"{federation_file.stem}.logs-seen.json")


def check_logs_seen(path: Path, metadata: Mapping[str, pb.BlockMetadata], digest_at: Callable[[str, int], str]) -> None:
    """Refuse an entity whose release log went back behind what this coordinator saw; then remember today's heads.

    Parameters
    ----------
    path : Path
        The memory (:func:`logs_seen_path`); created when missing. Where it cannot be written (a read-only
        volume) the check runs against what it holds, and one warning says the heads seen now are not remembered.
    metadata : mapping of entity id to BlockMetadata
        Every entity's answer of this session.
    digest_at : callable (entity id, release number) -> hex digest
        The entity's LogDigest, asked only when its log grew since it was last seen.

    Raises
    ------
    EntityError
        Naming the entity, the counts and when the longer log was seen (refused: nothing was asked of it).
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        lock: TextIO | None = path.with_name(path.name + ".lock").open("a")
    except OSError as exc:
        lock = None  # a read-only place (a prediction service's mounted volume): check, do not remember
        _warn_once(path, f"cannot write beside {path} ({exc.strerror}): the release logs seen now are not remembered")
    with lock if lock is not None else contextlib.nullcontext():
        if lock is not None:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)  # two coordinators of one machine read and write in turn
        seen = _read(path)
        now = datetime.now(UTC).isoformat(timespec="seconds")
        updated = dict(seen)
        for entity_id, meta in metadata.items():
            if not meta.chain_root:  # an entity of an older version publishes no chain
                continue
            key = f"{entity_id} {meta.chain_root}"
            before = seen.get(key)
            if before is not None:
                _check_one(entity_id, meta, before, digest_at)
                if meta.releases == before["releases"]:
                    continue
            updated[key] = {"releases": meta.releases, "head": meta.chain_head, "seen": now}
        if lock is not None and updated != seen:
            try:
                write_atomic(path, json.dumps(updated, indent=1, sort_keys=True) + "\n")
            except OSError as exc:
                _warn_once(path, f"cannot write {path} ({exc.strerror}): the release logs seen now are not remembered")


_WARNED: set[Path] = set()


def _warn_once(path: Path, text: str) -> None:
    """A warning per memory file and process: a prediction service checks on every batch."""
    if path not in _WARNED:
        _WARNED.add(path)
        logger.warning("%s", text)


def _read(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ConfigError(f"cannot read {path}, the release logs this coordinator has seen: {exc.strerror}") from exc
    try:
        seen = json.loads(text)
    except ValueError:
        seen = None
    if not isinstance(seen, dict):
        raise ConfigError(
            f"{path} (the release logs this coordinator has seen) is not what it wrote: remove it to start "
            "remembering anew, knowing that a rollback before today then goes unnoticed"
        )
    return seen


def _check_one(
    entity_id: str, meta: pb.BlockMetadata, before: dict[str, Any], digest_at: Callable[[str, int], str]
) -> None:
    releases, head = int(before["releases"]), str(before["head"])
    if meta.releases > releases and digest_at(entity_id, releases) == head:
        return
    if meta.releases == releases and meta.chain_head == head:
        return
    what = (
        f"went back from {releases} releases (seen {before['seen']}) to {meta.releases}"
        if meta.releases < releases
        else f"no longer passes through release {releases} as this coordinator saw it on {before['seen']}"
    )
    raise EntityError(
        f"entity {entity_id}: its release log {what}: an older copy of the log was put back, which would serve "
        "budget and basis views it has already released. Refused. Its operator puts back the latest copy of the "
        "log and its head file, or starts a new entity (new release log, new secret, new records)",
        refused=True,
    )
