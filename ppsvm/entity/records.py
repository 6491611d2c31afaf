"""The records an entity serves: its cell under pseudonyms, and new records to score from a growing source.

A hospital gets new patients every day. An entity config may name a ``[scoring]`` source beside its
training source: a table or file that grows while the entity runs. Its records are never trained
on; the prediction service asks for their kernel rows by id, under the same pinned basis and the
same release rules as any kernel request by id. The source is read again when the coordinator asks
for the entity's records, and when a kernel request names an id not yet seen (at most once per
``SCORING_REFRESH_S``, so a stream of unknown ids cannot make the entity re-read its source
continuously).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable

import numpy as np

from ppsvm.core.randomness import record_pseudonyms
from ppsvm.data.cell import Cell
from ppsvm.data.schema import Schema
from ppsvm.data.sources import DataSource, read_source
from ppsvm.errors import ConfigError, DataError

logger = logging.getLogger(__name__)

# A kernel request naming unknown ids re-reads the scoring source at most this often.
SCORING_REFRESH_S = 1.0


def pseudonymous(cell: Cell, key: bytes) -> Cell:
    """``cell`` with every record id replaced by its keyed pseudonym (same rows, same order)."""
    train, test = record_pseudonyms(key, cell.train_ids.tolist()), record_pseudonyms(key, cell.test_ids.tolist())
    if len({*train, *test}) != len(train) + len(test):  # 128-bit HMACs: a collision means a broken key or code
        raise DataError(f"{cell.source}: two record ids share a pseudonym")
    return dataclasses.replace(cell, train_ids=np.asarray(train, dtype=str), test_ids=np.asarray(test, dtype=str))


class ScoringRecords:
    """The records of a ``[scoring]`` source, by id (or pseudonym), read again on demand.

    Parameters
    ----------
    source : DataSource
        Read with ``schema``; its id column names the records, it holds no labels.
    schema : Schema
        The entity's schema: new records are encoded exactly as its training records.
    id_key : bytes or None
        The record-id key: ids are kept as pseudonyms, as everywhere the entity publishes them.
    held : callable
        Whether the entity's cell holds each of a list of ids (``Cell.holds``): those records are its
        own training or held-out ones, served from the cell, not from here.
    """

    def __init__(
        self, source: DataSource, schema: Schema, id_key: bytes | None, held: Callable[[list[str]], list[bool]]
    ) -> None:
        self.source, self.schema, self.id_key, self.held = source, schema, id_key, held
        self._lock = threading.Lock()
        self._read_at = -float("inf")
        self._index: dict[str, int] = {}
        self._ids = np.empty(0, dtype=str)
        self._rows = np.empty((0, len(schema.encoded_names)))
        self.readable = True  # whether the last read succeeded (Metadata says so, without the reason)

    def refresh(self, *, force: bool = False, strict: bool = False) -> None:
        """Read the source again (unless it was read less than SCORING_REFRESH_S ago and not ``force``).

        A source that cannot be read or holds a bad row raises only when ``strict`` (at start). Otherwise,
        during a call, the error is logged here and the records read before stay served: its text names
        values of the records ("'HIV+' is not a number"), and a caller must not receive it.
        """
        with self._lock:
            if not force and time.monotonic() - self._read_at < SCORING_REFRESH_S:
                return
            self._read_at = time.monotonic()
            try:
                cell = read_source(self.source, self.schema, allow_empty=True)
            except (DataError, ConfigError) as error:
                if strict:
                    raise
                self.readable = False
                logger.error(
                    "scoring source %s not read again (%s); still serving the %d records read before",
                    self.source.describe(),
                    error,
                    len(self._ids),
                )
                return
            if self.id_key is not None:
                cell = pseudonymous(cell, self.id_key)
            keep = ~np.array(self.held(cell.train_ids.tolist()), dtype=bool)
            ids, rows = cell.train_ids[keep], cell.X_train[keep]
            self._ids, self._rows, self.readable = ids, rows, True
            self._index = {record: k for k, record in enumerate(ids.tolist())}
            logger.info("scoring source %s: %d records to score", self.source.describe(), len(ids))

    def ids(self) -> np.ndarray:
        """Ids of the records to score, shape (k,)."""
        with self._lock:
            return self._ids

    def unknown(self, ids: list[str]) -> list[str]:
        """Those of ``ids`` the source does not hold, after one re-read if any was missing."""
        missing = [record for record in ids if record not in self._index]
        if missing:
            self.refresh()
            missing = [record for record in missing if record not in self._index]
        return missing

    def rows(self, ids: list[str]) -> np.ndarray:
        """Encoded rows of ids the source holds, shape (len(ids), n_j)."""
        with self._lock:
            gone = [record for record in ids if record not in self._index]
            if gone:  # removed from the source between the check and now
                raise DataError(f"record id(s) {gone[:5]} are no longer in the scoring source")
            return self._rows[[self._index[record] for record in ids]]
