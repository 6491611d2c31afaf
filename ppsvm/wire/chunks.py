"""Arrays on the wire: dtype + shape + raw bytes in ~1 MiB chunks, never pickle.

A stream is a sequence of :class:`ArrayChunk` messages; each array starts with a
header (name, dtype, shape) that carries its first bytes, and further messages
carry the rest. The receiver validates the dtype against an allow-list, refuses
absurd sizes before allocating, and checks that exactly ``prod(shape) * itemsize``
bytes arrived.

A kernel block travels as a row stream (:func:`encode_rows`, :class:`RowStream`): whole
rows in every message, written as the entity computes them and read in place by the
coordinator, column by column when asked for (K is kept by columns), so that each row
is copied once on either side of the wire (issue 28).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Literal

import numpy as np
from google.protobuf.message import DecodeError

from ppsvm.constants import CHUNK_BYTES, MAX_ARRAY_BYTES
from ppsvm.errors import WireError
from ppsvm.wire.rpc import ppsvm_pb2 as pb

# Fixed-width little-endian numbers and unicode strings only: no object arrays, no pickle,
# no platform-dependent long doubles. Checked as text before numpy parses the string.
_DTYPE_PATTERN = re.compile(r"[<|](f8|f4|i8|i4|i2|i1|u8|u4|u2|u1|b1|U[1-9][0-9]{0,5})")
_MAX_DIMENSIONS = 32
# ArrayChunk's fields as protobuf tags them: field number << 3 | 2 (length-delimited).
_HEADER_TAG, _DATA_TAG = 1 << 3 | 2, 2 << 3 | 2
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
        data = np.asarray(array, dtype=_wire_dtype(name, array.dtype), order="C")  # keeps 0-d arrays 0-d
        raw = data.reshape(-1).view(np.uint8)
        # The header rides with the first bytes: every message of a stream costs the receiver
        # a fixed ~0.2 ms in gRPC's Python layer, so small arrays take one message, not two.
        header = pb.ArrayHeader(name=name, dtype=data.dtype.str, shape=list(data.shape))
        yield pb.ArrayChunk(header=header, data=raw[:chunk_bytes].tobytes())
        for start in range(chunk_bytes, raw.size, chunk_bytes):
            yield pb.ArrayChunk(data=raw[start : start + chunk_bytes].tobytes())


def rows_per_message(columns: int, itemsize: int, chunk_bytes: int = CHUNK_BYTES) -> int:
    """How many whole rows of ``columns`` items of ``itemsize`` bytes one message of :func:`encode_rows` carries."""
    return max(1, chunk_bytes // max(1, columns * itemsize))


def encode_rows(
    name: str,
    shape: tuple[int, int],
    dtype: np.dtype,
    batches: Iterable[np.ndarray],
    *,
    column_major: bool = False,
    chunk_bytes: int = CHUNK_BYTES,
) -> Iterator[bytes]:
    """Yield the stream of one 2-D array from its rows, batch by batch as they are made: whole rows per message.

    The array need never exist whole: each message holds rows of one batch (a batch of more than
    :func:`rows_per_message` rows is cut into several messages). The messages come serialised, each
    row copied once into them (protobuf would copy them three times: out of the array, into the message,
    out of it), and :class:`RowStream` hands every message's rows on without copying them; a server made
    by :func:`ppsvm.wire.server.create_server` sends such bytes as they are.

    Parameters
    ----------
    name : str
    shape : (int, int)
        The whole array's (rows, columns), sent in the header with the first rows.
    dtype : numpy dtype
        Of every row on the wire (little-endian).
    batches : iterable of ndarray, each shape (k, columns)
        Consecutive rows, ``shape[0]`` in all, in any memory layout.
    column_major : bool
        Write each message's rows column by column (the header says so), for a receiver that keeps its
        matrix by columns; else in C order.
    chunk_bytes : int
        Payload bytes per message at most (one row at least).

    Yields
    ------
    bytes
        Serialised :class:`ArrayChunk` messages.

    Raises
    ------
    WireError
        A dtype the wire does not allow, or a batch of another width.
    """
    wire = _wire_dtype(name, np.dtype(dtype))
    header = pb.ArrayHeader(name=name, dtype=wire.str, shape=list(shape), column_major=column_major)
    # Two serialised messages one after the other are their merge: the header's field, then the data's.
    opening = pb.ArrayChunk(header=header).SerializeToString()
    per_message = rows_per_message(shape[1], wire.itemsize, chunk_bytes)
    order: Literal["C", "F"] = "F" if column_major else "C"
    for batch in batches:
        if batch.ndim != 2 or batch.shape[1] != shape[1]:
            raise WireError(f"array {name!r}: a batch of shape {batch.shape} for an array of shape {shape}")
        rows = np.asarray(batch, dtype=wire)
        for start in range(0, len(rows), per_message):
            payload = np.ravel(rows[start : start + per_message], order)  # a view when already laid out so
            yield b"".join((opening, bytes([_DATA_TAG]), _varint_bytes(payload.nbytes), payload.data))
            opening = b""
    if opening:  # no rows at all
        yield opening


def _varint_bytes(value: int) -> bytes:
    """``value`` (>= 0) as protobuf's base-128 integer: seven bits a byte, least significant first."""
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


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


def _wire_dtype(name: str, dtype: np.dtype) -> np.dtype:
    """``dtype`` little-endian, or WireError naming array ``name`` when the wire does not allow it."""
    wire = dtype.newbyteorder("<") if dtype.byteorder == ">" else dtype
    if not _DTYPE_PATTERN.fullmatch(wire.str):
        raise WireError(f"array {name!r}: dtype {wire.str!r} is not allowed on the wire")
    return wire


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
        self.column_major = header.column_major
        if self.column_major and len(self.shape) != 2:
            raise WireError(f"array {name!r} of shape {self.shape} sent column-major; only (rows, columns) can be")

    def _whole_rows(self, data: bytes | memoryview) -> np.ndarray:
        """A column-major message's rows, shape (k, columns): a view of ``data``, refused unless whole rows."""
        columns = self.shape[1]
        row_bytes = columns * self.dtype.itemsize
        if len(data) % row_bytes:
            raise WireError(
                f"array {self.name!r}: a message of {len(data)} bytes is not whole rows of {row_bytes} bytes, "
                "as each message of a column-major array must be"
            )
        return np.frombuffer(data, self.dtype).reshape(columns, -1).T

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
        self._count(end)  # before _whole_rows divides by the row's bytes: with no columns, no byte is allowed
        if self.column_major:
            rows = self._whole_rows(data)
            first = self.received // (self.shape[1] * self.dtype.itemsize)
            np.frombuffer(self.buffer, self.dtype).reshape(self.shape)[first : first + len(rows)] = rows
        else:
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


def read_chunk(message: bytes) -> tuple[pb.ArrayHeader | None, memoryview]:
    """One serialised :class:`ArrayChunk`'s header (None when it has none) and data, the data a view of ``message``.

    Parsing the message with protobuf would copy its data twice (into the message, then out of it), each
    copy into fresh memory: 0.15 s of CPU for a million-row kernel block's 145 MiB, about what receiving it
    costs. protobuf writes the header's field before the data's, each once; that layout is read here,
    and any other (fields repeated, out of order or unknown, which only a hand-made message has) is left to
    protobuf's own parser.

    Raises
    ------
    WireError
        ``message`` is not an ArrayChunk.
    """
    view = memoryview(message)
    fields: dict[int, memoryview] = {}
    position = 0
    for tag in (_HEADER_TAG, _DATA_TAG):
        if position < len(view) and view[position] == tag:
            size, start = _varint(view, position + 1)
            position = start + size
            fields[tag] = view[start:position]
    try:
        if position != len(view):
            chunk = pb.ArrayChunk.FromString(message)
            return (chunk.header if chunk.HasField("header") else None), memoryview(chunk.data)
        header = pb.ArrayHeader.FromString(bytes(fields[_HEADER_TAG])) if _HEADER_TAG in fields else None
    except DecodeError as error:
        raise WireError(f"a message that is not an array chunk: {error}") from None
    return header, fields.get(_DATA_TAG, view[:0])


def _varint(view: memoryview, position: int) -> tuple[int, int]:
    """The base-128 integer at ``position`` and the position after it; a size past the end gives ``len(view) + 1``
    (so the caller's layout check fails and protobuf's parser says what is wrong)."""
    value = shift = 0
    while position < len(view) and shift < 64:
        byte = view[position]
        value |= (byte & 0x7F) << shift
        position += 1
        if not byte & 0x80:
            return min(value, len(view) + 1), position
        shift += 7
    return len(view) + 1, position


class RowStream(_Header):
    """The one 2-D array of a stream, handed on in batches of whole rows as its messages arrive.

    For a matrix the receiver folds into another (the coordinator's K): only one message's
    rows are held at a time, never the whole array. The header is read and checked on
    construction, so ``shape`` and ``dtype`` are known before any row is.

    Parameters
    ----------
    messages : iterable of bytes
        The stream's :class:`ArrayChunk` messages as they came, serialised (:func:`read_chunk`).
    name : str
        The array's expected name.
    max_bytes : int
        The largest array accepted.

    Raises
    ------
    WireError
        The stream ends before the header, the header is not ``name`` or not 2-D, a second
        array follows, a message is not an array chunk, or the byte count does not match dtype and shape.
    """

    def __init__(self, messages: Iterable[bytes], name: str, max_bytes: int = MAX_ARRAY_BYTES) -> None:
        self._messages = iter(messages)
        first = next(self._messages, None)
        if first is None:
            raise WireError(f"the stream ended without array {name!r}")
        header, self._first = read_chunk(first)
        if header is None:
            raise WireError("array data arrived before any header")
        super().__init__(header, max_bytes)
        if self.name != name:
            raise WireError(f"array {self.name!r} sent where {name!r} was expected")
        if len(self.shape) != 2:
            raise WireError(f"array {name!r} has shape {self.shape}; expected (rows, columns)")

    def __iter__(self) -> Iterator[np.ndarray]:
        """Arrays of shape (k, columns), k >= 1, in row order; the byte count is checked at the end.

        Each is a read-only view of one message's bytes, not a copy: a message of whole rows (as
        :func:`encode_rows` sends) is handed on as it came, column-major (Fortran-ordered) if it was sent
        so. Only a row that a message boundary cuts (in C order) is put together from its pieces.
        """
        columns = self.shape[1]
        row_bytes = columns * self.dtype.itemsize
        cut = b""  # the start of a row the last message ended inside
        received = 0
        for data in self._data():
            received += len(data)
            self._count(received)  # before dividing by row_bytes: with no columns, no byte is allowed
            if self.column_major:
                yield self._whole_rows(data)
                continue
            if cut:
                needed = row_bytes - len(cut)
                cut, data = cut + data[:needed], data[needed:]
                if len(cut) < row_bytes:
                    continue
                yield np.frombuffer(cut, self.dtype).reshape(1, columns)
                cut = b""
            whole = len(data) // row_bytes * row_bytes
            if whole:
                yield np.frombuffer(data[:whole], self.dtype).reshape(-1, columns)
            cut = bytes(data[whole:])
        self._complete(received)

    def _data(self) -> Iterator[memoryview]:
        if self._first:
            yield self._first
        for message in self._messages:
            header, data = read_chunk(message)
            if header is not None:
                raise WireError(f"a second array {header.name[:40]!r} after {self.name!r}; expected one")
            if not data:
                raise WireError("empty chunk: neither header nor data")
            yield data
