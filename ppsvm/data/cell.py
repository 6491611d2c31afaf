"""A data owner's private cell A_ij in memory: its records' ids, encoded features and labels.

:mod:`ppsvm.data.sources` reads it from a CSV or Parquet file or a database, validated. Both the
entity (which serves it) and in-process tools (the pooled reference, the DP baselines) use it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ppsvm.errors import DataError


@dataclass(frozen=True)
class Cell:
    """The rows of one cell, split into training and held-out records.

    Attributes
    ----------
    train_ids, test_ids : ndarray of str, shapes (m_train,), (m_test,)
    X_train, X_test : ndarray, shapes (m_train, n_j), (m_test, n_j)
    y_train, y_test : ndarray or None
        Labels (+-1, or class codes 0 .. k-1) or targets, where the cell holds them.
    feature_names : tuple of str, length n_j
    source : str
        Where the records were read from (a file, or a table and database URL without password).
    """

    train_ids: np.ndarray
    X_train: np.ndarray
    y_train: np.ndarray | None
    test_ids: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray | None
    feature_names: tuple[str, ...]
    source: str

    @property
    def n_features(self) -> int:
        return self.X_train.shape[1]

    @cached_property
    def _all_rows(self) -> tuple[dict[str, int], np.ndarray]:
        """Row number of every record id, and training then held-out rows stacked (built once)."""
        ids = [*self.train_ids.tolist(), *self.test_ids.tolist()]
        return {record: k for k, record in enumerate(ids)}, np.vstack([self.X_train, self.X_test])

    def check_class_codes(self, names: Sequence[str]) -> None:
        """Refuse labels other than the class codes 0 .. k-1 that k >= 3 ``names`` (``label_names``) name.

        Raises
        ------
        DataError
            A label, training or held out, that is not one of the codes; the message names the record.
        """
        for ids, labels in ((self.train_ids, self.y_train), (self.test_ids, self.y_test)):
            if labels is None:
                continue
            bad = np.flatnonzero(~np.isin(labels, np.arange(len(names), dtype=np.float64)))
            if bad.size:
                raise DataError(
                    f"{self.source}: record {str(ids[bad[0]])!r} has label {labels[bad[0]]:g}, but label_names names "
                    f"{len(names)} classes, codes 0 .. {len(names) - 1} ({len(bad)} such records)"
                )

    def holds(self, ids: list[str]) -> list[bool]:
        """Whether the cell holds each of ``ids`` (training or held-out)."""
        index = self._all_rows[0]
        return [record in index for record in ids]

    def check_ids(self, ids: list[str], also_held: Callable[[list[str]], list[str]] | None = None) -> None:
        """Refuse an empty list, a repeated id or an id the cell does not hold (ids are published by Records).

        Parameters
        ----------
        also_held : callable, optional
            Given the ids the cell does not hold, those that no other store holds either (the entity's
            scoring source): only these are refused.

        Raises
        ------
        DataError
            Naming the ids at fault.
        """
        if not ids:
            raise DataError("ids: the list of record ids is empty")
        repeated = [record for record, count in Counter(ids).items() if count > 1]
        if repeated:
            raise DataError(f"ids: record id {repeated[0]!r} appears more than once")
        index = self._all_rows[0]
        unknown = [record for record in ids if record not in index]
        if unknown and also_held is not None:
            unknown = also_held(unknown)
        if unknown:
            shown = ", ".join(repr(r) for r in unknown[:5])
            raise DataError(
                f"unknown record id(s) {shown}{' ...' if len(unknown) > 5 else ''} ({len(unknown)} of {len(ids)})"
            )

    def rows_for_ids(self, ids: list[str]) -> np.ndarray:
        """Feature rows of record ids already passed by :meth:`check_ids`, shape (len(ids), n_j)."""
        index, rows_of_cell = self._all_rows
        return rows_of_cell[np.fromiter((index[record] for record in ids), dtype=np.int64, count=len(ids))]


def repeated_id(parts: Sequence[np.ndarray]) -> tuple[str, tuple[int, int], tuple[int, int]] | None:
    """An id listed twice across ``parts`` (arrays of str), with (part, index) of its first and second listing.

    Sorts a 64-bit fingerprint of each id instead of the ids: at 2 million 32-character pseudonyms a
    set of the ids took 4.5 s and 510 MiB, the fingerprints take a fraction of a second and 40 bytes per
    id. Equal fingerprints are only candidates; the ids themselves decide.

    Returns
    -------
    (id, (part, index), (part, index)), or None when every id is unique.
    """
    blocks = [(k, ids) for k, ids in enumerate(parts) if ids.size]
    if sum(ids.size for _, ids in blocks) < 2:
        return None
    prints = np.concatenate([_fingerprints(ids) for _, ids in blocks])
    ranked = np.sort(prints)  # 15 ms at a million, against 110 ms for the stable argsort that names a repeat
    if not np.any(ranked[1:] == ranked[:-1]):
        return None
    owner = np.repeat(np.arange(len(blocks)), [ids.size for _, ids in blocks])
    position = np.concatenate([np.arange(ids.size) for _, ids in blocks])
    order = np.argsort(prints, kind="stable")  # ranked above is prints[order]: equal values, the same sort
    for start in np.flatnonzero((ranked[1:] == ranked[:-1]) & np.r_[True, ranked[1:-1] != ranked[:-2]]):
        end = start + 1
        while end + 1 < len(ranked) and ranked[end + 1] == ranked[start]:
            end += 1
        first_seen: dict[str, tuple[int, int]] = {}
        for k in order[start : end + 1]:  # ids sharing a fingerprint, in the order listed
            part, index = blocks[owner[k]][0], int(position[k])
            record = str(parts[part][index])
            if record in first_seen:
                return record, first_seen[record], (part, index)
            first_seen[record] = (part, index)
    return None


def _fingerprints(ids: np.ndarray) -> np.ndarray:
    """A 64-bit mix of each id's characters, shape (k,): equal ids give equal values whatever the array's width.

    The zero words that pad shorter ids to the array's width are skipped, so the same id in a U7 and a
    U32 array mixes to the same value. Mixed FINGERPRINT_ROWS ids at a time, so that a chunk's words stay in
    cache across the passes over its columns: 0.16 s instead of 0.30 s for a million 32-character pseudonyms.
    """
    mixed = np.empty(len(ids), dtype=np.uint64)
    for start in range(0, len(ids), _FINGERPRINT_ROWS):
        mixed[start : start + _FINGERPRINT_ROWS] = _mix(ids[start : start + _FINGERPRINT_ROWS])
    return mixed


_FINGERPRINT_ROWS = 8192


def _mix(ids: np.ndarray) -> np.ndarray:
    """:func:`_fingerprints` of one chunk of ids."""
    raw = np.ascontiguousarray(ids).view(np.uint8).reshape(len(ids), -1)
    width = -(-raw.shape[1] // 8) * 8
    if width != raw.shape[1]:
        raw = np.pad(raw, ((0, 0), (0, width - raw.shape[1])))
    words = raw.view(np.uint64)
    mixed = np.full(len(ids), 0x9E3779B97F4A7C15, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for column in words.T:
            step = (mixed ^ column) * np.uint64(0xBF58476D1CE4E5B9)
            step ^= step >> np.uint64(31)
            mixed = np.where(column != 0, step, mixed)
    return mixed
