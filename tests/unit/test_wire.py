"""Arrays on the wire: exact round trips, every message under gRPC's 4 MB cap, malformed streams refused."""

from __future__ import annotations

import re
import tracemalloc
from collections.abc import Iterable

import numpy as np
import pytest
from google.protobuf.message import DecodeError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ppsvm.config import FederationEntity
from ppsvm.coordinator.client import EntityClient
from ppsvm.errors import EntityError, WireError
from ppsvm.wire.chunks import RowStream, decode_arrays, encode_arrays, encode_rows, expect_arrays, read_chunk
from ppsvm.wire.rpc import ppsvm_pb2 as pb

GRPC_DEFAULT_MAX = 4 * 1024 * 1024


def header(name: str, dtype: str, shape: list[int]) -> pb.ArrayChunk:
    return pb.ArrayChunk(header=pb.ArrayHeader(name=name, dtype=dtype, shape=shape))


def data(payload: bytes) -> pb.ArrayChunk:
    return pb.ArrayChunk(data=payload)


def column_major(name: str, shape: list[int], payload: bytes = b"") -> pb.ArrayChunk:
    return pb.ArrayChunk(header=pb.ArrayHeader(name=name, dtype="<f8", shape=shape, column_major=True), data=payload)


def roundtrip(arrays: dict[str, np.ndarray], **kwargs) -> tuple[dict[str, np.ndarray], list[pb.ArrayChunk]]:
    chunks = list(encode_arrays(arrays, **kwargs))
    # Through real serialization, as gRPC would send them.
    wire = [pb.ArrayChunk.FromString(chunk.SerializeToString()) for chunk in chunks]
    return decode_arrays(wire), chunks


def assert_same(decoded: np.ndarray, original: np.ndarray) -> None:
    assert decoded.shape == original.shape
    assert decoded.dtype == original.dtype.newbyteorder("<") or decoded.dtype == original.dtype
    assert decoded.tobytes() == np.ascontiguousarray(original).astype(decoded.dtype).tobytes()


# --- round trips ------------------------------------------------------------------------------------


def test_large_float_column_roundtrip_and_message_sizes() -> None:
    rng = np.random.default_rng(0)
    column = rng.standard_normal((700_000, 1))
    column[:4, 0] = [np.nan, np.inf, -0.0, 5e-324]  # bit patterns, not just values
    assert column.nbytes > GRPC_DEFAULT_MAX
    decoded, chunks = roundtrip({"kernel": column})
    assert_same(decoded["kernel"], column)
    assert len(chunks) >= 1 + 5  # header + data split into several messages
    assert max(chunk.ByteSize() for chunk in chunks) < GRPC_DEFAULT_MAX
    assert all(len(chunk.SerializeToString()) < GRPC_DEFAULT_MAX for chunk in chunks)


def test_large_3d_roundtrip() -> None:
    array = np.random.default_rng(1).random((60, 100, 90))
    assert array.nbytes > GRPC_DEFAULT_MAX
    decoded, chunks = roundtrip({"cube": array})
    assert np.array_equal(decoded["cube"], array)
    assert decoded["cube"].shape == (60, 100, 90)
    assert max(chunk.ByteSize() for chunk in chunks) < GRPC_DEFAULT_MAX


def test_int64_and_unicode_ids_roundtrip() -> None:
    counts = np.array([0, -1, 2**62, -(2**63), 2**63 - 1], dtype=np.int64)
    ids = np.array(["rec0", "ünïcødé-✓", "x" * 12, "", "日本語"], dtype="<U12")
    decoded, _ = roundtrip({"counts": counts, "ids": ids})
    assert decoded["counts"].dtype == np.int64
    assert decoded["counts"].tolist() == counts.tolist()
    assert decoded["ids"].dtype == np.dtype("<U12")
    assert decoded["ids"].tolist() == ["rec0", "ünïcødé-✓", "x" * 12, "", "日本語"]


@pytest.mark.parametrize(
    "array", [np.zeros((0,)), np.array([], dtype="<U12"), np.array([], dtype=np.int64)], ids=["f8", "U12", "i8"]
)
def test_zero_size_1d_roundtrip(array: np.ndarray) -> None:
    decoded, _ = roundtrip({"empty": array})
    assert decoded["empty"].shape == array.shape
    assert decoded["empty"].dtype == array.dtype


@pytest.mark.parametrize(
    "array",
    [np.zeros((0, 5)), np.zeros((3, 0)), np.zeros((0, 0, 2), dtype=np.int64), np.zeros((0, 4), dtype="<U12")],
    ids=["0x5", "3x0", "int-0x0x2", "U12-0x4"],
)
def test_zero_size_multidim_roundtrip(array: np.ndarray) -> None:
    decoded, _ = roundtrip({"empty": array})
    assert decoded["empty"].shape == array.shape
    assert decoded["empty"].dtype == array.dtype


def test_scalar_roundtrip() -> None:
    decoded, _ = roundtrip({"s": np.array(2.5)})
    assert decoded["s"].shape == () and decoded["s"].item() == 2.5


def test_zero_d_header_decodes_to_zero_d_array() -> None:
    decoded = decode_arrays([header("s", "<f8", []), data(np.float64(2.5).tobytes())])
    assert decoded["s"].shape == () and decoded["s"].item() == 2.5


def test_several_arrays_in_one_stream_keep_names_and_order() -> None:
    rng = np.random.default_rng(2)
    arrays = {
        "train_ids": np.array([f"r{i}" for i in range(1000)], dtype="<U12"),
        "train_labels": np.where(rng.random(1000) > 0.5, 1.0, -1.0),
        "big": rng.random((300, 1000)),  # 2.4 MB, several chunks
        "empty": np.zeros(0),
        "flags": rng.random(17) > 0.5,
    }
    decoded, chunks = roundtrip(arrays, chunk_bytes=1 << 18)
    assert list(decoded) == list(arrays)
    for name, original in arrays.items():
        assert_same(decoded[name], original)
    headers = [chunk.header.name for chunk in chunks if chunk.HasField("header")]
    assert headers == list(arrays)
    # Each array's header carries its first bytes: only "big" (2.4 MB in 256 KiB chunks) needs more messages.
    assert len(chunks) == len(arrays) + (arrays["big"].nbytes - 1) // (1 << 18)


def test_big_endian_and_non_contiguous_inputs_are_sent_little_endian() -> None:
    original = np.arange(12, dtype=np.float64).reshape(3, 4)
    big = original.astype(">f8")
    transposed = original.T  # not C-contiguous
    chunks = list(encode_arrays({"big": big, "t": transposed}))
    assert [c.header.dtype for c in chunks if c.HasField("header")] == ["<f8", "<f8"]
    decoded = decode_arrays(chunks)
    assert np.array_equal(decoded["big"], original)
    assert np.array_equal(decoded["t"], original.T)


def test_chunk_size_is_respected() -> None:
    array = np.arange(1000, dtype=np.int64)  # 8000 bytes
    chunks = list(encode_arrays({"a": array}, chunk_bytes=3000))
    assert [len(c.data) for c in chunks] == [3000, 3000, 2000]
    assert [c.HasField("header") for c in chunks] == [True, False, False]


def test_header_and_data_may_also_come_in_separate_messages() -> None:
    array = np.arange(10, dtype=np.float64)
    decoded = decode_arrays([header("a", "<f8", [10]), data(array.tobytes()[:32]), data(array.tobytes()[32:])])
    assert np.array_equal(decoded["a"], array)


# --- rejections -------------------------------------------------------------------------------------


def encoded(array: np.ndarray, name: str = "a", chunk_bytes: int = 64) -> list[pb.ArrayChunk]:
    return list(encode_arrays({name: array}, chunk_bytes=chunk_bytes))


def test_truncated_stream_refused() -> None:
    chunks = encoded(np.arange(40, dtype=np.float64))
    assert len(chunks) == 5  # the header with the first 64 bytes, then 4 x 64
    with pytest.raises(WireError, match=r"truncated, 256 of 320 bytes"):
        decode_arrays(chunks[:-1])


def test_truncated_first_array_refused_when_second_follows() -> None:
    first, second = encoded(np.arange(40.0), "first"), encoded(np.arange(3.0), "second")
    with pytest.raises(WireError, match="'first'.*truncated"):
        decode_arrays(first[:-1] + second)


def test_header_without_data_refused() -> None:
    with pytest.raises(WireError, match="truncated"):
        decode_arrays([header("a", "<f8", [2])])


@pytest.mark.parametrize("extra", [b"\x00", b"\x00" * 8])
def test_extra_bytes_refused(extra: bytes) -> None:
    chunks = encoded(np.arange(5.0))
    with pytest.raises(WireError, match="more bytes than"):
        decode_arrays(chunks + [data(extra)])


def test_data_before_header_refused() -> None:
    with pytest.raises(WireError, match="before any header"):
        decode_arrays([data(b"\x00" * 8)] + encoded(np.arange(1.0)))


@pytest.mark.parametrize(
    "dtype",
    [
        "|O",
        np.dtype([("a", "<f8"), ("b", "<i4")]).str,  # structured: '|V12'
        "[('a', '<f8')]",
        "|V8",
        "<c16",
        "|S5",
        "<M8[s]",
        ">f8",
        ">i8",
        "f8",  # not canonical
        "float64",
        "",
        "garbage",
        "<f8\x00",
        "(2,)<f8",
    ],
)
def test_disallowed_dtype_header_refused(dtype: str) -> None:
    with pytest.raises(WireError, match="dtype"):
        decode_arrays([header("a", dtype, [1]), data(b"\x00" * 16)])


@pytest.mark.parametrize(
    "array", [np.array([object(), 1], dtype=object), np.zeros(2, dtype=[("a", "<f8")]), np.zeros(2, dtype=complex)]
)
def test_encoder_refuses_disallowed_dtypes(array: np.ndarray) -> None:
    with pytest.raises(WireError, match="not allowed"):
        list(encode_arrays({"a": array}))


def test_oversized_shape_refused_before_allocation() -> None:
    tracemalloc.start()
    try:
        with pytest.raises(WireError, match="over the limit of 1024"):
            decode_arrays([header("a", "<f8", [129, 1])], max_bytes=1024)
        with pytest.raises(WireError, match="over the limit"):
            decode_arrays([header("a", "<f8", [2**40, 2**20])], max_bytes=1024)
        with pytest.raises(WireError, match="over the limit"):
            decode_arrays([header("a", "<U12", [10**9])])  # default limit: 48 GB asked
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


def test_exactly_max_bytes_accepted() -> None:
    decoded = decode_arrays([header("a", "<f8", [128]), data(b"\x00" * 1024)], max_bytes=1024)
    assert decoded["a"].shape == (128,)


def test_duplicate_name_refused() -> None:
    with pytest.raises(WireError, match="'a' sent twice"):
        decode_arrays(encoded(np.arange(2.0)) + encoded(np.arange(3.0)))


def test_empty_chunk_refused() -> None:
    with pytest.raises(WireError, match="empty chunk"):
        decode_arrays(encoded(np.arange(2.0)) + [pb.ArrayChunk()])
    with pytest.raises(WireError, match="empty chunk"):
        decode_arrays([pb.ArrayChunk()])


def test_expect_arrays_names_missing_and_source() -> None:
    arrays = {"train_ids": np.zeros(1), "train_labels": np.zeros(1)}
    expect_arrays(arrays, ["train_ids", "train_labels"], "entity h1")
    with pytest.raises(WireError) as info:
        expect_arrays(arrays, ["train_ids", "kernel", "test_ids"], "entity hospital-2")
    message = str(info.value)
    assert "entity hospital-2" in message
    assert "kernel" in message and "test_ids" in message
    assert "train_ids" not in message


def test_zero_itemsize_dtype_refused_with_wire_error() -> None:
    with pytest.raises(WireError):
        decode_arrays([header("ids", "<U0", [3])])


def test_unrepresentable_zero_size_shape_refused_with_wire_error() -> None:
    with pytest.raises(WireError):
        decode_arrays([header("a", "<f8", [2**64 - 1, 0])])


def test_too_many_dimensions_refused_with_wire_error() -> None:
    with pytest.raises(WireError):
        decode_arrays([header("a", "<f8", [1] * 65), data(b"\x00" * 8)])


def test_invalid_unicode_code_points_refused() -> None:
    chunks = [header("ids", "<U1", [1]), data(b"\xff\xff\xff\xff")]
    try:
        decoded = decode_arrays(chunks)
    except WireError:
        return
    decoded["ids"].tolist()  # a receiver must be able to read what decode_arrays accepted


@pytest.mark.parametrize("dtype", [",", "f8,,", "i4,(2", "0\x1b"])
def test_unparseable_dtype_string_refused_with_wire_error(dtype: str) -> None:
    with pytest.raises(WireError):
        decode_arrays([header("a", dtype, [1])])


# --- fuzz -------------------------------------------------------------------------------------------

FUZZ_MAX_BYTES = 256
DTYPES = ["<f8", "<i8", "<U12", "<U1", "|b1", "|u1", "<f4", "<i2", "|O", ">f8", "|V4", "<c8", "f8", "|S3", "<M8[D]"]


headers = st.builds(
    header,
    name=st.sampled_from(["a", "b", "c", ""]),
    dtype=st.one_of(st.sampled_from(DTYPES), st.text(max_size=8)),
    shape=st.lists(st.integers(0, 6), max_size=3) | st.lists(st.integers(0, 2**40), max_size=2),
)
datas = st.builds(data, st.binary(max_size=80))
# A header that carries its array's first bytes, as encode_arrays sends it.
headers_with_data = st.builds(
    lambda h, payload: pb.ArrayChunk(header=h.header, data=payload), headers, st.binary(max_size=80)
)
random_streams = st.lists(st.one_of(headers, headers_with_data, datas, datas, st.just(pb.ArrayChunk())), max_size=8)


@st.composite
def near_valid_streams(draw) -> list[pb.ArrayChunk]:
    """Well-formed streams of small arrays (random bytes, random chunking), then maybe one mutation."""
    chunks: list[pb.ArrayChunk] = []
    for name in draw(st.lists(st.sampled_from("abcd"), max_size=3)):
        dtype = draw(st.sampled_from(["<f8", "<i8", "<U3", "|b1", "|u1", "<f4"]))
        shape = draw(st.lists(st.integers(0, 4), max_size=3))
        payload = draw(
            st.binary(
                min_size=int(np.prod(shape)) * np.dtype(dtype).itemsize,
                max_size=int(np.prod(shape)) * np.dtype(dtype).itemsize,
            )
        )
        cuts = sorted(draw(st.lists(st.integers(0, len(payload)), max_size=3)))
        pieces = [payload[start:end] for start, end in zip([0, *cuts], [*cuts, len(payload)], strict=True)]
        if draw(st.booleans()):  # the header carries the first piece
            chunks.append(pb.ArrayChunk(header=header(name, dtype, shape).header, data=pieces.pop(0)))
        else:
            chunks.append(header(name, dtype, shape))
        chunks.extend(data(piece) for piece in pieces)
    mutation = draw(st.sampled_from(["none", "none", "drop", "insert", "replace"]))
    if mutation != "none" and chunks:
        index = draw(st.integers(0, len(chunks) - 1))
        if mutation == "drop":
            del chunks[index]
        else:
            extra = draw(st.one_of(headers, headers_with_data, datas, st.just(pb.ArrayChunk())))
            chunks[index : index + (mutation == "replace")] = [extra]
    return chunks


chunk_lists = st.one_of(random_streams, near_valid_streams())


def _payloads(chunks: list[pb.ArrayChunk]) -> dict[str, tuple[pb.ArrayHeader, bytes]]:
    """Each header's name -> (header, concatenated data that followed it), computed independently."""
    result: dict[str, tuple[pb.ArrayHeader, bytes]] = {}
    current: pb.ArrayHeader | None = None
    for chunk in chunks:
        if chunk.HasField("header"):
            current = chunk.header
            result[current.name] = (current, b"")
        if chunk.data and current is not None:
            head, payload = result[current.name]
            result[current.name] = (head, payload + chunk.data)
    return result


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chunk_lists)
def test_fuzz_decode_returns_consistent_arrays_or_wire_error(chunks: list[pb.ArrayChunk]) -> None:
    try:
        decoded = decode_arrays(chunks, max_bytes=FUZZ_MAX_BYTES)
    except WireError:
        return
    sent = _payloads(chunks)
    assert set(decoded) == set(sent)
    for name, array in decoded.items():
        head, payload = sent[name]
        dtype = np.dtype(head.dtype)
        assert dtype.kind in "fiubU" and dtype.byteorder != ">"
        assert array.dtype == dtype
        assert array.shape == tuple(head.shape)
        assert array.nbytes == int(np.prod(head.shape, dtype=object)) * dtype.itemsize <= FUZZ_MAX_BYTES
        assert array.tobytes() == payload


@settings(max_examples=50, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["<f8", "<i8", "<U5", "|b1", "<u2"]),
            st.lists(st.integers(0, 5), max_size=3),
            st.integers(0, 2**32 - 1),
        ),
        max_size=4,
    ),
    st.integers(1, 50),
)
def test_fuzz_roundtrip_any_chunk_size(specs, chunk_bytes: int) -> None:
    arrays = {}
    for index, (dtype, shape, seed) in enumerate(specs):
        raw = np.random.default_rng(seed).integers(
            0, 256, size=int(np.prod(shape)) * np.dtype(dtype).itemsize, dtype=np.uint8
        )
        if dtype.startswith("<U"):
            raw = raw.view("<u4") % 0xD800 if raw.size else raw.view("<u4")  # valid code points
            raw = raw.astype("<u4").view(np.uint8)
        if dtype == "|b1":
            raw = raw % 2
        arrays[f"x{index}"] = raw.view(dtype).reshape(shape)
    decoded = decode_arrays(encode_arrays(arrays, chunk_bytes=chunk_bytes), max_bytes=FUZZ_MAX_BYTES * 8)
    assert list(decoded) == list(arrays)
    for name, original in arrays.items():
        assert decoded[name].dtype == original.dtype
        assert decoded[name].shape == original.shape
        assert decoded[name].tobytes() == original.tobytes()


# --- RowStream: a matrix handed on in whole rows as it arrives -----------------------------------


def serialised(chunks: Iterable[pb.ArrayChunk]) -> list[bytes]:
    """The messages as gRPC hands them to a client that leaves them serialised (the coordinator's kernel calls)."""
    return [chunk.SerializeToString() for chunk in chunks]


def parsed(messages: Iterable[bytes]) -> list[pb.ArrayChunk]:
    """Serialised messages (as encode_rows writes them) parsed by protobuf: what every other reader sees."""
    return [pb.ArrayChunk.FromString(message) for message in messages]


def stream_rows(chunks: list[pb.ArrayChunk], name: str = "a") -> tuple[RowStream, list[np.ndarray]]:
    stream = RowStream(serialised(chunks), name)
    return stream, list(stream)


@pytest.mark.parametrize("chunk_bytes", [8, 24, 40, 100, 1 << 20])
def test_row_stream_rebuilds_the_matrix_from_whole_rows_whatever_the_chunk_size(chunk_bytes: int) -> None:
    matrix = np.random.default_rng(0).normal(size=(37, 3))  # 24-byte rows: chunks split rows anywhere
    stream, batches = stream_rows(encoded(matrix, chunk_bytes=chunk_bytes))
    assert stream.shape == (37, 3) and stream.dtype == np.float64
    assert all(batch.shape[1] == 3 and len(batch) >= 1 for batch in batches)
    assert np.array_equal(np.concatenate(batches), matrix)


def test_row_stream_holds_at_most_one_message_of_rows() -> None:
    matrix = np.random.default_rng(1).normal(size=(8192, 64))  # 4 MiB, in 64 KiB messages
    messages = serialised(encoded(matrix, chunk_bytes=1 << 16))
    tracemalloc.start()
    try:
        total = 0.0
        for batch in RowStream(iter(messages), "a"):
            total += float(batch.sum())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert total == pytest.approx(float(matrix.sum()))
    # A few messages' worth (the message's bytes, the pending rows, the batch), not the matrix.
    assert peak < 8 * (1 << 16) < matrix.nbytes / 4


@pytest.mark.parametrize(
    ("chunks", "message"),
    [
        ([], "ended without array 'a'"),
        ([data(b"\x00" * 8)], "before any header"),
        ([header("b", "<f8", [1, 1]), data(b"\x00" * 8)], "'b' sent where 'a' was expected"),
        ([header("a", "<f8", [8])], "expected (rows, columns)"),
        ([header("a", "<f8", [2, 1]), data(b"\x00" * 8)], "stream truncated, 8 of 16 bytes"),
        ([header("a", "<f8", [1, 1]), data(b"\x00" * 16)], "more bytes than shape"),
        ([header("a", "<f8", [1, 1]), data(b"\x00" * 8), header("c", "<f8", [1])], "a second array 'c'"),
        ([header("a", "<f8", [1, 1]), pb.ArrayChunk()], "neither header nor data"),
        ([header("a", "|O", [1, 1])], "not allowed on the wire"),
        ([header("a", "<f8", [2**40, 5])], "over the limit"),
        ([column_major("a", [2, 2]), data(b"\x00" * 24)], "a message of 24 bytes is not whole rows of 16 bytes"),
        ([column_major("a", [2, 2], b"\x00" * 8)], "a message of 8 bytes is not whole rows of 16 bytes"),
        ([column_major("a", [2, 2]), data(b"\x00" * 48)], "more bytes than shape"),
        ([column_major("a", [3])], "sent column-major; only (rows, columns) can be"),
    ],
)
def test_row_stream_refuses_malformed_streams(chunks: list[pb.ArrayChunk], message: str) -> None:
    with pytest.raises(WireError, match=re.escape(message)):
        stream_rows(chunks)


def test_row_stream_of_no_rows_yields_nothing() -> None:
    stream, batches = stream_rows([header("a", "<f8", [0, 4])])
    assert stream.shape == (0, 4) and batches == []
    stream, batches = stream_rows(parsed(encode_rows("a", (0, 4), np.dtype(np.float64), [], column_major=True)))
    assert stream.shape == (0, 4) and batches == []


@pytest.mark.parametrize("column_major_rows", [False, True])
def test_encode_rows_sends_whole_rows_and_the_last_message_short(column_major_rows: bool) -> None:
    """Batches of any size become messages of whole rows (at most chunk_bytes); both decoders rebuild the matrix."""
    matrix = np.random.default_rng(2).normal(size=(1000, 19))
    batches = [matrix[:7], matrix[7:307], np.asfortranarray(matrix[307:])]  # 7, 300 and 693 rows, any layout
    chunks = parsed(
        encode_rows(
            "kernel", matrix.shape, matrix.dtype, batches, column_major=column_major_rows, chunk_bytes=50 * 19 * 8
        )
    )
    rows = [len(chunk.data) // (19 * 8) for chunk in chunks]
    assert rows == [7, *[50] * 6, *[50] * 13, 43]  # never more than 50, the last message of each batch short
    assert all(len(chunk.data) % (19 * 8) == 0 for chunk in chunks)
    assert [chunk.HasField("header") for chunk in chunks] == [True] + [False] * (len(chunks) - 1)
    assert chunks[0].header.column_major is column_major_rows
    stream, received = stream_rows(chunks, "kernel")
    assert np.array_equal(np.concatenate(received), matrix)
    assert np.array_equal(decode_arrays(chunks)["kernel"], matrix)
    if column_major_rows:
        # Each batch is the message's own bytes read column by column: Fortran-ordered, not a copy.
        assert all(batch.flags.f_contiguous and not batch.flags.owndata for batch in received)
        assert np.array_equal(np.frombuffer(chunks[1].data).reshape(19, 50), matrix[7:57].T)


def test_row_stream_hands_on_each_message_of_whole_rows_without_copying() -> None:
    matrix = np.arange(60.0).reshape(20, 3)
    messages = list(encode_rows("a", matrix.shape, matrix.dtype, [matrix], chunk_bytes=5 * 24))
    batches = list(RowStream(messages, "a"))
    assert [len(batch) for batch in batches] == [5, 5, 5, 5]
    assert all(not batch.flags.writeable and not batch.flags.owndata for batch in batches)
    assert np.array_equal(np.concatenate(batches), matrix)


def test_row_stream_puts_together_a_row_that_messages_cut() -> None:
    """A C-order stream may cut rows anywhere (an older entity's 1 MiB chunks): the cut rows come whole, in order."""
    matrix = np.arange(12.0).reshape(4, 3)
    raw = matrix.tobytes()
    pieces = [raw[:4], raw[4:30], raw[30:31], raw[31:90], raw[90:]]  # 24-byte rows: 0, 1 and 3 are cut
    chunks = [pb.ArrayChunk(header=header("a", "<f8", [4, 3]).header, data=pieces[0]), *map(data, pieces[1:])]
    stream, batches = stream_rows(chunks)
    assert np.array_equal(np.concatenate(batches), matrix)
    assert [len(batch) for batch in batches] == [1, 1, 1, 1]  # row 2 whole within a message, each cut row alone


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(st.binary(max_size=40), chunk_lists.map(lambda chunks: chunks[0].SerializeToString() if chunks else b""))
)
def test_read_chunk_agrees_with_protobuf(message: bytes) -> None:
    """The direct read of a serialised chunk gives what protobuf's parser gives, or refuses what it refuses."""
    try:
        expected = pb.ArrayChunk.FromString(message)
    except DecodeError:
        with pytest.raises(WireError, match="not an array chunk"):
            read_chunk(message)
        return
    try:
        header_read, payload = read_chunk(message)
    except WireError:
        # Only a header that protobuf reads lazily can be refused here and not there (an ill-formed sub-message).
        assert expected.HasField("header")
        return
    assert (header_read is None) == (not expected.HasField("header"))
    if header_read is not None:
        assert header_read == expected.header
    assert bytes(payload) == expected.data


def test_read_chunk_reads_the_data_in_place_and_hand_made_layouts_through_protobuf() -> None:
    chunk = pb.ArrayChunk(header=header("a", "<f8", [2, 1]).header, data=b"\x01" * 16)
    message = chunk.SerializeToString()
    parsed_header, payload = read_chunk(message)
    assert parsed_header == chunk.header and payload.obj is message and bytes(payload) == chunk.data
    # Data before header, and a repeated data field (protobuf keeps the last): not protobuf's own layout.
    swapped = data(b"\x02" * 8).SerializeToString() + header("a", "<f8", [1, 1]).SerializeToString()
    parsed_header, payload = read_chunk(swapped)
    assert parsed_header is not None and parsed_header.name == "a" and bytes(payload) == b"\x02" * 8
    _, payload = read_chunk(data(b"x").SerializeToString() + data(b"yz").SerializeToString())
    assert bytes(payload) == b"yz"
    with pytest.raises(WireError, match="not an array chunk"):
        read_chunk(b"\x12\x05abc")  # data shorter than its length says


# --- the coordinator's client: a kernel block of the wrong size names the entity ------------------------------


def kernel_client(messages: list[bytes]) -> EntityClient:
    client = EntityClient(FederationEntity("r0c1", "127.0.0.1:9", 0, 1), tls=None, attempts=1)
    client.kernel_messages = lambda request, timeout: iter(messages)  # type: ignore[assignment,method-assign]
    return client


@pytest.mark.parametrize(
    ("sent", "message"),
    [
        (np.zeros((5, 2)), "sent a 5 x 2 kernel block for 6 train records"),
        (np.zeros((6, 3)), "sent a kernel block of shape (6, 3) and dtype float64; expected (rows, 2) float64"),
    ],
)
def test_a_kernel_block_of_the_wrong_size_is_refused_naming_the_entity(sent: np.ndarray, message: str) -> None:
    client = kernel_client(list(encode_rows("kernel", sent.shape, sent.dtype, [sent], column_major=True)))
    try:
        with pytest.raises(EntityError, match=re.escape(f"entity r0c1 at 127.0.0.1:9 {message}")):
            client.kernel_block(pb.KernelRequest(mbar=2, column_major=True), 6, "train records")
    finally:
        client.close()


@pytest.mark.parametrize(
    ("last", "expected"),
    [(None, "stream truncated, 64 of 96 bytes"), (24, "a message of 24 bytes is not whole rows of 16 bytes")],
)
def test_a_kernel_stream_cut_short_or_with_a_cut_row_names_the_entity(last: int | None, expected: str) -> None:
    block = np.arange(12.0).reshape(6, 2)
    chunks = parsed(encode_rows("kernel", block.shape, block.dtype, [block], column_major=True, chunk_bytes=32))
    assert [len(chunk.data) for chunk in chunks] == [32, 32, 32]
    # The last message lost, or cut to a row and a half.
    chunks[-1:] = [] if last is None else [data(chunks[-1].data[:last])]
    client = kernel_client(serialised(chunks))
    try:
        with pytest.raises(EntityError, match=rf"entity r0c1 at 127\.0\.0\.1:9 sent a malformed array .*{expected}"):
            client.kernel_block(pb.KernelRequest(mbar=2, column_major=True), 6, "train records")
    finally:
        client.close()
