"""What an entity remembers of the records it served by id: a keyed fingerprint of each one's values.

A record served twice under one view gives the same kernel row twice, and nothing more. A record whose values
changed in between (a scoring source edited in place: the same id, one value x 1.2) would give a second row, 2 x mbar
equations for one record, from which a coordinator helped by a column-block peer recovers the old value and the
change exactly (issue 26). So an entity refuses to serve a record by id whose values differ from those it served
before; the coordinator hears that a record changed, not which one or how. Fingerprints are HMAC-SHA256 of the id
and the encoded values under a key derived from the column-block secret, kept in ``<release log>.served`` beside the
release log (one JSON line per served id, appended and fsynced): nothing in them leaves the entity.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ppsvm.errors import ConfigError

_KEY_LABEL = b"ppsvm/v1/served-record-fingerprint"


def served_path(release_log: Path) -> Path:
    """Where an entity keeps the fingerprints of the records it served by id."""
    return release_log.with_name(release_log.name + ".served")


class ServedRecords:
    """Keyed fingerprints of the records an entity served by id, read from and appended to its file.

    Parameters
    ----------
    path : Path
        The file (:func:`served_path`); absent until the first record is served.
    secret : bytes
        The column-block secret: the fingerprints' key derives from it.
    """

    def __init__(self, path: Path, secret: bytes) -> None:
        self.path = path
        self._key = hmac.new(secret, _KEY_LABEL, hashlib.sha256).digest()
        self._lock = threading.Lock()
        self._known: dict[str, str] = {}
        if path.exists():
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                try:
                    if line.strip():
                        entry = json.loads(line)
                        self._known[str(entry["id"])] = str(entry["fingerprint"])
                except (ValueError, KeyError, TypeError) as error:
                    raise ConfigError(f"{path}: line {number} is not a served-record fingerprint ({error})") from None

    def fingerprint(self, record: str, values: np.ndarray) -> str:
        """HMAC-SHA256 (hex) of the id and its encoded values (float64 bytes)."""
        message = record.encode("utf-8") + b"\0" + np.ascontiguousarray(values, dtype="<f8").tobytes()
        return hmac.new(self._key, message, hashlib.sha256).hexdigest()

    def changed(self, ids: Sequence[str], rows: np.ndarray) -> bool:
        """Whether any of ``ids`` (rows ``rows``, shape (len(ids), n_j)) was served before with other values."""
        with self._lock:
            return any(
                self._known.get(record, fingerprint) != fingerprint
                for record, fingerprint in ((r, self.fingerprint(r, v)) for r, v in zip(ids, rows, strict=True))
            )

    def remember(self, ids: Sequence[str], rows: np.ndarray) -> None:
        """Record the fingerprints of ids served for the first time, durably before the rows leave."""
        with self._lock:
            new = {r: self.fingerprint(r, v) for r, v in zip(ids, rows, strict=True) if r not in self._known}
            if not new:
                return
            text = "".join(json.dumps({"id": r, "fingerprint": f}) + "\n" for r, f in new.items())
            with self.path.open("a", encoding="utf-8") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
            self._known.update(new)
