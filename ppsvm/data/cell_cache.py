"""An entity's encoded cell kept beside its data file, so that a start does not parse what the last one parsed.

``r0c1.csv`` gets ``r0c1.csv.ppsvm-cache``: the cell's ids, labels and float64 matrices as the reader made
them, under a key of everything that decides them: a format version, the SHA-256 of the file's bytes, the
schema's fingerprint and the read options (columns, labels, delimiter, missing values, line limit). A start
hashes the file and compares; the cache is used only when every part is equal, so an edited file (even one
of the same size and modification time), another schema or other missing values mean a read of the source
as before and a new cache. SHA-256, not BLAKE2b: with the CPU's SHA extensions hashlib hashes 1.4 GB/s here
against BLAKE2b's 0.7 (0.14 s for the 200 MiB of a million 25-column records).

A cache that is absent, unreadable, of another key, cut short, failing its CRC-32, written by another
account or writable by others is a miss with a log line, never an error and never a cell: the CRC covers
every stored byte, which catches a torn or decayed file; a cache is trusted as far as the data file beside
it (whoever can write that directory can write the records too). It holds the records, so it is written as
the records are, mode 0600, and atomically (a temporary file renamed over it). SQL sources have none: a
database has no file to hash, and the rows it returns may change from one query to the next.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import re
import struct
import tempfile
import zlib
from collections.abc import Mapping
from io import BufferedReader
from pathlib import Path
from typing import Any

import numpy as np

from ppsvm.data.cell import Cell

logger = logging.getLogger(__name__)

# Bump when what a source reads to changes (an encoding, a check), so that no cache of the old rules is used.
CACHE_FORMAT = 1
SUFFIX = ".ppsvm-cache"
_MAGIC = b"ppsvm cell cache\n"
_MAX_HEADER_BYTES = 1 << 24  # the header lists feature names: far below this for any schema
_ARRAYS = ("train_ids", "X_train", "y_train", "test_ids", "X_test", "y_test")
_DTYPE = re.compile(r"<f8|<U[1-9][0-9]{0,5}")


class _Corrupt(Exception):
    """The cache file is not one this module wrote whole."""


class CellCache:
    """The cache beside one data file, for one set of read options.

    Parameters
    ----------
    source : Path
        The data file.
    options : mapping
        Everything besides the file's bytes that decides the cell read from it (JSON values).
    """

    def __init__(self, source: Path, options: Mapping[str, Any]) -> None:
        self.source = source
        self.path = source.with_name(source.name + SUFFIX)
        self._options = json.loads(json.dumps(options))  # as it reads back from the file: lists, not tuples

    def source_digest(self) -> str | None:
        """SHA-256 (hex) of the data file's bytes; None when it cannot be read (the reader then says why)."""
        try:
            with self.source.open("rb") as handle:
                return hashlib.file_digest(handle, "sha256").hexdigest()
        except OSError:
            return None

    def _key(self, digest: str) -> dict[str, Any]:
        return {"format": CACHE_FORMAT, "sha256": digest, "options": self._options}

    def load(self, digest: str, where: str) -> Cell | None:
        """The cached cell of the data file whose bytes hash to ``digest``; None on a miss (logged).

        Parameters
        ----------
        digest : str
            :meth:`source_digest` of the file as it is now.
        where : str
            The cell's ``source`` (the data file, as messages name it).
        """
        try:
            with self.path.open("rb") as handle:
                status = os.fstat(handle.fileno())
                if status.st_uid != os.geteuid() or status.st_mode & 0o022:
                    logger.warning("%s: not used: owned by another account or writable by others", self.path)
                    return None
                header = _header(handle)
                if header.get("key") != self._key(digest):
                    logger.info("%s: made from other bytes, schema or options: reading %s", self.path, where)
                    return None
                cell = _cell(handle, header, status.st_size - handle.tell(), where)
        except FileNotFoundError:
            return None
        except OSError as exc:
            logger.warning("%s: not readable (%s): reading %s", self.path, exc.strerror or exc, where)
            return None
        except _Corrupt as exc:
            logger.warning("%s: damaged (%s): reading %s", self.path, exc, where)
            return None
        logger.info("%s: read from its cache %s (the file is unchanged)", where, self.path.name)
        return cell

    def store(self, cell: Cell, digest: str) -> None:
        """Write ``cell`` as the cache of the file whose bytes hashed to ``digest`` before it was read.

        Nothing is written when the file's bytes changed meanwhile (the cell may hold either version); a
        cache that cannot be written is logged, and the next start reads the source again.
        """
        if self.source_digest() != digest:
            logger.info("%s changed while it was read: its cell is not cached", self.source)
            return
        arrays = {name: getattr(cell, name) for name in _ARRAYS if getattr(cell, name) is not None}
        arrays = {
            name: np.ascontiguousarray(value, dtype=value.dtype.newbyteorder("<")) for name, value in arrays.items()
        }
        checksum = 0
        for value in arrays.values():
            checksum = zlib.crc32(_raw(value), checksum)
        header = {
            "key": self._key(digest),
            "feature_names": list(cell.feature_names),
            "arrays": [
                {"name": name, "dtype": value.dtype.str, "shape": list(value.shape)} for name, value in arrays.items()
            ],
            "crc32": checksum,
        }
        text = json.dumps(header).encode("utf-8")
        try:
            # mkstemp creates the file 0600 whatever the umask: the cache holds the records.
            handle, temporary = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=self.path.parent)
            try:
                with os.fdopen(handle, "wb") as out:
                    out.write(_MAGIC + struct.pack("<Q", len(text)) + text)
                    for value in arrays.values():
                        out.write(_raw(value))
                # No fsync: a file torn by a crash fails its CRC and is a miss, like any damaged cache.
                os.replace(temporary, self.path)
            except BaseException:
                Path(temporary).unlink(missing_ok=True)
                raise
        except OSError as exc:
            logger.info(
                "%s: cannot write the cache (%s): the next start reads it again", self.source, exc.strerror or exc
            )


def _raw(value: np.ndarray) -> memoryview:
    """A C-contiguous array's bytes as a flat view (``.data.cast`` refuses an array with no rows)."""
    return value.reshape(-1).view(np.uint8).data


def _header(handle: BufferedReader) -> dict[str, Any]:
    """The JSON header after the magic bytes and its 8-byte length."""
    start = handle.read(len(_MAGIC) + 8)
    if len(start) != len(_MAGIC) + 8 or not start.startswith(_MAGIC):
        raise _Corrupt("not a cell cache")
    (length,) = struct.unpack("<Q", start[len(_MAGIC) :])
    if length > _MAX_HEADER_BYTES:
        raise _Corrupt("header too long")
    try:
        header = json.loads(handle.read(length).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise _Corrupt("header unreadable") from None
    if not isinstance(header, dict):
        raise _Corrupt("header unreadable")
    return header


def _cell(handle: BufferedReader, header: dict[str, Any], remaining: int, where: str) -> Cell:
    """The cell whose arrays follow the header, checked against its shapes and CRC-32; the file's ``remaining``
    bytes must be exactly theirs (checked before anything is allocated)."""
    try:
        names = tuple(header["feature_names"])
        listed = {entry["name"]: (entry["dtype"], tuple(entry["shape"])) for entry in header["arrays"]}
        expected_crc = int(header["crc32"])
    except (KeyError, TypeError, ValueError):
        raise _Corrupt("header incomplete") from None
    if not all(isinstance(name, str) for name in names) or not set(listed) <= set(_ARRAYS):
        raise _Corrupt("header incomplete")
    declared = 0
    for name, (dtype, shape) in listed.items():
        if (
            not isinstance(dtype, str)
            or not _DTYPE.fullmatch(dtype)
            or not all(isinstance(size, int) and size >= 0 for size in shape)
        ):
            raise _Corrupt(f"{name}: bad dtype or shape")
        declared += math.prod(shape) * np.dtype(dtype).itemsize
    if declared != remaining:
        raise _Corrupt(f"{remaining} bytes of arrays, the header lists {declared}")
    arrays: dict[str, np.ndarray | None] = dict.fromkeys(_ARRAYS)
    checksum = 0
    for name, (dtype, shape) in listed.items():
        value = np.empty(shape, dtype=dtype)
        view = _raw(value)
        if handle.readinto(view) != value.nbytes:
            raise _Corrupt("cut short")
        checksum = zlib.crc32(view, checksum)
        arrays[name] = value
    if checksum != expected_crc:
        raise _Corrupt("CRC-32 mismatch")
    parts = [_part(arrays, part, len(names)) for part in ("train", "test")]
    if (parts[0][2] is None) != (parts[1][2] is None):
        raise _Corrupt("labels for one part only")
    (train_ids, X_train, y_train), (test_ids, X_test, y_test) = parts
    return Cell(train_ids, X_train, y_train, test_ids, X_test, y_test, feature_names=names, source=where)


def _part(
    arrays: dict[str, np.ndarray | None], part: str, width: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """One part's ids (k,), features (k, width) and labels (k,) or None, checked to fit together."""
    ids, X, y = arrays[f"{part}_ids"], arrays[f"X_{part}"], arrays[f"y_{part}"]
    if (
        ids is None
        or X is None
        or (ids.dtype.kind, X.dtype.kind) != ("U", "f")
        or ids.ndim != 1
        or X.shape != (len(ids), width)
        or (y is not None and (y.dtype.kind, y.shape) != ("f", ids.shape))
    ):
        raise _Corrupt(f"{part} arrays do not fit together")
    return ids, X, y
