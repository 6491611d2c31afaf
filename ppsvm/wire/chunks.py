"""Arrays on the wire: dtype + shape + raw bytes in ~1 MiB chunks, never pickle.

A stream is a sequence of :class:`ArrayChunk` messages; each array starts with a
header (name, dtype, shape) that carries its first bytes, and further messages
carry the rest. The receiver validates the dtype against an allow-list, refuses
absurd sizes before allocating, and checks that exactly ``prod(shape) * itemsize``
bytes arrived.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping

import numpy as np

from ppsvm.constants import CHUNK_BYTES, MAX_ARRAY_BYTES
from ppsvm.errors import WireError
from ppsvm.wire.rpc import ppsvm_pb2 as pb

# Fixed-width little-endian numbers and unicode strings only: no object arrays, no pickle,
# no platform-dependent long doubles. Checked as text before numpy parses the string.
_DTYPE_PATTERN = re.compile(r"[<|](f8|f4|i8|i4|i2|i1|u8|u4|u2|u1|b1|U[1-9][0-9]{0,5})")
_MAX_DIMENSIONS = 32
_MAX_UNICODE = 0x10FFFF


def encode_arrays(arrays: Mapping[str, np.ndarray], chunk_bytes: int = CHUNK_BYTES) -> Iterator[pb.ArrayChunk]:
    """Yield the stream messages that carry ``arrays``.

    Parameters
    ----------
    arrays : mapping of name to ndarray
        Each array is sent little-endian and C-contiguous, any shape.
    chunk_bytes : int
        Payload bytes per data message.
    """
    for name, array in arrays.items():
        array = np.asarray(array)
        dtype = array.dtype.newbyteorder("<") if array.dtype.byteorder == ">" else array.dtype
        if not _DTYPE_PATTERN.fullmatch(dtype.str):
            raise WireError(f"array {name!r}: dtype {dtype.str!r} is not allowed on the wire")
        data = np.asarray(array, dtype=dtype, order="C")  # keeps 0-d arrays 0-d
        raw = data.reshape(-1).view(np.uint8)
        # The header rides with the first bytes: every message of a stream costs the receiver
        # a fixed ~0.2 ms in gRPC's Python layer, so small arrays take one message, not two.
        header = pb.ArrayHeader(name=name, dtype=dtype.str, shape=list(data.shape))
        yield pb.ArrayChunk(header=header, data=raw[:chunk_bytes].tobytes())
        for start in range(chunk_bytes, raw.size, chunk_bytes):
            yield pb.ArrayChunk(data=raw[start : start + chunk_bytes].tobytes())


def decode_arrays(chunks: Iterable[pb.ArrayChunk], max_bytes: int = MAX_ARRAY_BYTES) -> dict[str, np.ndarray]:
    """Reassemble the arrays of a stream, validating every header and byte count.

    Raises
    ------
    WireError
        Data before a header, an unknown dtype, a size over ``max_bytes``, a
        duplicate name, or a byte count that does not match dtype and shape.
    """
    arrays: dict[str, np.ndarray] = {}
    current: _Receiving | None = None
    for chunk in chunks:
        has_header = chunk.HasField("header")
        if not has_header and not chunk.data:
            raise WireError("empty chunk: neither header nor data")
        if has_header:
            if current is not None:
                arrays[current.name] = current.finish()
            current = _Receiving(chunk.header, max_bytes)
            if current.name in arrays:
                raise WireError(f"array {current.name!r} sent twice in one stream")
        if chunk.data:
            if current is None:
                raise WireError("array data arrived before any header")
            current.add(chunk.data)
    if current is not None:
        arrays[current.name] = current.finish()
    return arrays


def expect_arrays(arrays: Mapping[str, np.ndarray], names: Iterable[str], source: str) -> None:
    """Raise WireError naming ``source`` unless every name in ``names`` is present."""
    missing = [name for name in names if name not in arrays]
    if missing:
        raise WireError(f"{source} did not send array(s) {', '.join(missing)}")


class _Header:
    """An array's header, checked before anything is allocated, and the byte count it promises."""

    def __init__(self, header: pb.ArrayHeader, max_bytes: int) -> None:
        name = self.name = header.name
        if not _DTYPE_PATTERN.fullmatch(header.dtype):
            raise WireError(f"array {name!r}: dtype {header.dtype[:40]!r} is not allowed on the wire")
        self.dtype = np.dtype(header.dtype)
        if len(header.shape) > _MAX_DIMENSIONS:
            raise WireError(f"array {name!r}: {len(header.shape)} dimensions, at most {_MAX_DIMENSIONS} allowed")
        self.shape = tuple(int(s) for s in header.shape)
        count = 1
        for extent in self.shape:
            count *= extent
        if any(extent > max_bytes for extent in self.shape):
            raise WireError(f"array {name!r}: shape {self.shape} has an extent over the limit of {max_bytes}")
        self.expected = count * self.dtype.itemsize
        if self.expected > max_bytes:
            raise WireError(
                f"array {name!r} of shape {self.shape} and dtype {self.dtype.str} needs {self.expected} bytes, "
                f"over the limit of {max_bytes}"
            )

    def _count(self, received: int) -> None:
        """Refuse ``received`` bytes so far when the shape and dtype allow fewer."""
        if received > self.expected:
            raise WireError(
                f"array {self.name!r}: more bytes than shape {self.shape} and dtype "
                f"{self.dtype.str} allow ({received} > {self.expected})"
            )

    def _complete(self, received: int) -> None:
        """Refuse a stream that ended after ``received`` bytes, short of the array."""
        if received != self.expected:
            raise WireError(
                f"array {self.name!r}: stream truncated, {received} of {self.expected} bytes "
                f"for shape {self.shape} and dtype {self.dtype.str}"
            )


class _Receiving(_Header):
    """One array being received: a preallocated buffer filled chunk by chunk."""

    def __init__(self, header: pb.ArrayHeader, max_bytes: int) -> None:
        super().__init__(header, max_bytes)
        self.buffer = bytearray(self.expected)
        self.received = 0

    def add(self, data: bytes) -> None:
        end = self.received + len(data)
        self._count(end)
        self.buffer[self.received : end] = data
        self.received = end

    def finish(self) -> np.ndarray:
        self._complete(self.received)
        if self.dtype.kind == "U" and self.expected:
            points = np.frombuffer(self.buffer, "<u4")
            # Beyond U+10FFFF or a lone surrogate: not text, and it could not be encoded again later.
            if points.max() > _MAX_UNICODE or ((points >= 0xD800) & (points <= 0xDFFF)).any():
                raise WireError(
                    f"array {self.name!r}: text holds code points that are "
                    "not Unicode characters (surrogates or beyond U+10FFFF)"
                )
        return np.frombuffer(self.buffer, dtype=self.dtype).reshape(self.shape)


class RowStream(_Header):
    """The one 2-D array of a stream, handed on in batches of whole rows as its messages arrive.

    For a matrix the receiver folds into another (the coordinator's K): only one message's
    rows are held at a time, never the whole array. The header is read and checked on
    construction, so ``shape`` and ``dtype`` are known before any row is.

    Raises
    ------
    WireError
        The stream ends before the header, the header is not ``name`` or not 2-D, a second
        array follows, or the byte count does not match dtype and shape.
    """

    def __init__(self, chunks: Iterable[pb.ArrayChunk], name: str, max_bytes: int = MAX_ARRAY_BYTES) -> None:
        self._chunks = iter(chunks)
        first = next(self._chunks, None)
        if first is None:
            raise WireError(f"the stream ended without array {name!r}")
        if not first.HasField("header"):
            raise WireError("array data arrived before any header")
        super().__init__(first.header, max_bytes)
        if self.name != name:
            raise WireError(f"array {self.name!r} sent where {name!r} was expected")
        if len(self.shape) != 2:
            raise WireError(f"array {name!r} has shape {self.shape}; expected (rows, columns)")
        self._first = first.data

    def __iter__(self) -> Iterator[np.ndarray]:
        """Arrays of shape (k, columns), k >= 1, in row order; the byte count is checked at the end."""
        row_bytes = self.shape[1] * self.dtype.itemsize
        pending = bytearray()
        received = 0
        for data in self._data():
            received += len(data)
            self._count(received)
            pending += data
            whole = len(pending) // row_bytes
            if whole:
                rows = np.frombuffer(pending, self.dtype, count=whole * self.shape[1]).reshape(whole, -1).copy()
                del pending[: whole * row_bytes]
                yield rows
        self._complete(received)

    def _data(self) -> Iterator[bytes]:
        if self._first:
            yield self._first
        for chunk in self._chunks:
            if chunk.HasField("header"):
                raise WireError(f"a second array {chunk.header.name[:40]!r} after {self.name!r}; expected one")
            if not chunk.data:
                raise WireError("empty chunk: neither header nor data")
            yield chunk.data
