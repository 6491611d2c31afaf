"""Hostile bytes for the wire decoder: what tests/unit/test_wire.py's fuzzing does not reach.

test_wire.py fuzzes decode_arrays with ArrayChunk messages built in Python (random headers, random
chunk sequences, mutated valid streams). A peer controls the bytes, not the messages: here the
input starts as arbitrary or mutated bytes parsed by protobuf as gRPC would, dtype strings are
drawn around the allow-list, and text arrays carry arbitrary code points. The property is always
the same: decode_arrays returns arrays a receiver can use, or raises WireError, never anything else.
"""

from __future__ import annotations

import numpy as np
import pytest
from google.protobuf.message import DecodeError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ppsvm.errors import WireError
from ppsvm.wire.chunks import decode_arrays, encode_arrays
from ppsvm.wire.rpc import ppsvm_pb2 as pb

MAX_BYTES = 4096
ALLOWED_KINDS = set("fiubU")
SURROGATES = range(0xD800, 0xE000)


def header(name: str, dtype: str, shape: list[int]) -> pb.ArrayChunk:
    return pb.ArrayChunk(header=pb.ArrayHeader(name=name, dtype=dtype, shape=shape))


def assert_usable(arrays: dict[str, np.ndarray]) -> None:
    """What a receiver does with decoded arrays must work: allowed dtypes, within the limit, text that encodes."""
    for name, array in arrays.items():
        assert array.dtype.kind in ALLOWED_KINDS and array.dtype.byteorder != ">", (name, array.dtype)
        assert array.nbytes <= MAX_BYTES
        if array.dtype.kind == "U":
            for text in array.reshape(-1).tolist():
                text.encode("utf-8")  # a protobuf string field, a log line, a file: all need valid Unicode


def decode_or_refuse(chunks: list[pb.ArrayChunk]) -> None:
    try:
        arrays = decode_arrays(chunks, max_bytes=MAX_BYTES)
    except WireError:
        return
    assert_usable(arrays)


# --- bytes as gRPC delivers them ---------------------------------------------------------------------

VALID_STREAM = [
    chunk.SerializeToString()
    for chunk in encode_arrays(
        {
            "kernel": np.linspace(0.0, 1.0, 12).reshape(3, 4),
            "train_ids": np.array(["a1", "b22", "c333"]),
            "train_labels": np.array([1.0, -1.0, 1.0]),
            "flags": np.array([True, False]),
        },
        chunk_bytes=16,
    )
]


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    """A serialized chunk of a valid stream with a few bytes overwritten, inserted or cut off."""
    raw = bytearray(draw(st.sampled_from(VALID_STREAM)))
    for _ in range(draw(st.integers(1, 3))):
        action = draw(st.sampled_from(["overwrite", "insert", "truncate"]))
        at = draw(st.integers(0, len(raw)))
        if action == "overwrite" and at < len(raw):
            raw[at] = draw(st.integers(0, 255))
        elif action == "insert":
            raw[at:at] = draw(st.binary(min_size=1, max_size=4))
        else:
            del raw[at:]
    return bytes(raw)


@st.composite
def mutated_streams(draw: st.DrawFn) -> list[bytes]:
    """The valid stream's messages in order, with up to three of them mutated, dropped, duplicated or joined by
    noise."""
    messages = list(VALID_STREAM)
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.integers(0, len(messages) - 1)) if messages else 0
        action = draw(st.sampled_from(["mutate", "drop", "duplicate", "noise"]))
        if action == "mutate" and messages:
            messages[at] = draw(mutated())
        elif action == "drop" and messages:
            del messages[at]
        elif action == "duplicate" and messages:
            messages.insert(at, messages[at])
        else:
            messages.insert(at, draw(st.binary(max_size=40)))
    return messages


wire_messages = st.one_of(
    mutated_streams(),
    st.lists(st.one_of(st.sampled_from(VALID_STREAM), mutated(), st.binary(max_size=40)), max_size=12),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(wire_messages)
def test_fuzz_arbitrary_bytes_are_refused_by_protobuf_or_by_decode_arrays(messages: list[bytes]) -> None:
    """Bytes a peer sends become ArrayChunk messages only if protobuf parses them (else gRPC fails the call with
    its own error); whatever parses, decode_arrays turns into usable arrays or a WireError, nothing else."""
    chunks = []
    for raw in messages:
        try:
            chunks.append(pb.ArrayChunk.FromString(raw))
        except DecodeError:
            continue
    decode_or_refuse(chunks)


# --- dtype strings around the allow-list -------------------------------------------------------------

dtype_strings = st.builds(
    lambda prefix, code, suffix: prefix + code + suffix,
    st.sampled_from(["<", "|", ">", "=", "!", "", "<<"]),
    st.sampled_from(
        [
            "f8",
            "f4",
            "f2",
            "f16",
            "i8",
            "i1",
            "u8",
            "b1",
            "U",
            "U0",
            "U1",
            "U7",
            "U999999",
            "U1000000",
            "U01",
            "S4",
            "V8",
            "O",
            "c16",
            "M8[s]",
            "m8",
            "g",
            "e",
            "?",
            "(2,)f8",
        ]
    ),
    st.one_of(st.just(""), st.sampled_from([" ", "\x00", ",", "]", "x", "0", ",f8", "\n"]), st.text(max_size=3)),
)
shapes = st.one_of(
    st.lists(st.integers(0, 8), max_size=3), st.lists(st.sampled_from([0, 1, 2**31, 2**63, 2**64 - 1]), max_size=3)
)


@settings(max_examples=300, deadline=None)
@given(dtype_strings, shapes, st.data())
def test_fuzz_dtype_strings_near_the_allow_list(dtype: str, shape: list[int], data: st.DataObject) -> None:
    """Near-miss dtype strings (byte orders, widths, suffixes, structured and object forms) with shapes up to
    2**64 - 1 and payloads of the announced size or not: only allow-listed little-endian dtypes within the
    size limit come back, everything else is a WireError."""
    size = None
    try:
        size = int(np.prod(shape, dtype=object)) * np.dtype(dtype).itemsize
    except Exception:  # noqa: BLE001 - numpy cannot even parse it: any payload will do
        pass
    exact = size is not None and size <= 256 and data.draw(st.booleans())
    payload = data.draw(st.binary(min_size=size, max_size=size) if exact else st.binary(max_size=64))
    decode_or_refuse([header("a", dtype, shape), pb.ArrayChunk(data=payload)])


# --- text arrays -------------------------------------------------------------------------------------

code_points = st.one_of(
    st.integers(0, 0xD7FF),
    st.integers(0xE000, 0x10FFFF),  # Unicode scalar values
    st.integers(0x110000, 2**32 - 1),  # beyond Unicode
)


@settings(max_examples=200, deadline=None)
@given(st.lists(code_points, min_size=1, max_size=6), st.integers(1, 3))
def test_fuzz_text_arrays_hold_only_valid_unicode(points: list[int], width: int) -> None:
    """A '<U' array of arbitrary code points (surrogates aside: see below) is refused if any is beyond U+10FFFF,
    and otherwise comes back as text that encodes to UTF-8."""
    count = len(points) // width
    payload = np.array(points[: count * width], dtype="<u4").tobytes()
    chunks = [header("ids", f"<U{width}", [count]), pb.ArrayChunk(data=payload)]
    if any(point > 0x10FFFF for point in points[: count * width]):
        with pytest.raises(WireError):
            decode_arrays(chunks, max_bytes=MAX_BYTES)
    else:
        decode_or_refuse(chunks)


@pytest.mark.parametrize("point", [0xD800, 0xDBFF, 0xDC00, 0xDFFF])
def test_text_with_surrogate_code_points_is_refused(point: int) -> None:
    """A lone surrogate is not Unicode text: the decoder must refuse it as it refuses code points past U+10FFFF."""
    assert point in SURROGATES
    chunks = [header("tag", "<U2", [1]), pb.ArrayChunk(data=np.array([0x61, point], dtype="<u4").tobytes())]
    with pytest.raises(WireError):
        decode_arrays(chunks)
