"""The checked-in gRPC stubs match proto/, and no RPC accepts a matrix (docs/design.md rule 2)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from ppsvm.wire.rpc import generate as gen
from ppsvm.wire.rpc import ppsvm_pb2 as pb

CHECKED_IN = Path(gen.__file__).resolve().parent


@pytest.mark.skipif(
    importlib.util.find_spec("grpc_tools") is None,
    reason="grpc_tools (grpcio-tools, the pinned stub generator) is not installed; cannot regenerate stubs",
)
def test_regenerated_stubs_are_byte_identical(tmp_path: Path) -> None:
    gen.generate(tmp_path)
    assert gen.GENERATED, "nothing listed as generated"
    for name in gen.GENERATED:
        fresh = tmp_path / "ppsvm" / "wire" / "rpc" / name
        assert fresh.is_file(), f"protoc did not produce {name}"
        checked_in = CHECKED_IN / name
        assert checked_in.is_file(), f"{name} is not checked in under ppsvm/wire/rpc/"
        assert fresh.read_bytes() == checked_in.read_bytes(), (
            f"ppsvm/wire/rpc/{name} differs from what proto/ppsvm.proto generates: "
            "run `python -m ppsvm.wire.rpc.generate`"
        )


# --- rule 2: no request message can carry a matrix ---------------------------------------------------

ARRAY_MESSAGES = {"ppsvm.v1.ArrayChunk", "ppsvm.v1.ArrayHeader"}
# The only bytes field any request may hold: the coordinator's model file sent to entities (to keep,
# or for a DP model to be scored on held-out records, of which only the error figures return, or on
# training records, of which only noised per-class counts of its decision values return).
ALLOWED_BYTES = {
    ("AcceptModel", "ppsvm.v1.ModelMessage.model_json"),
    ("DpEvaluate", "ppsvm.v1.DpEvaluateRequest.model_json"),
    ("DpScoreHistogram", "ppsvm.v1.DpHistogramRequest.model_json"),
    # A secure-aggregation nonce: at most MAX_NONCE_BYTES (64), only ever hashed into the masks' context.
    ("KernelBlock", "ppsvm.v1.KernelRequest.nonce"),
}
# Repeated floating-point fields could carry a flattened matrix too; only the column block's
# per-feature ranges may, and the entity accepts them only with valid tags under its secret
# (tests/unit/test_cell.py), so their numbers are the entities' own, never the requester's.
# DpRequest's rho and public scaling are the coordinator's, on purpose: the entity maps its rows
# with zhat, whose norm is 1 whatever they are, and releases only noised weights charged to its
# ledger, so the guarantee holds for any rho (tests/unit/test_dp.py bounds the sensitivity).
# DpHistogramRequest's edges only bin the model's decision values: at most 1024 numbers, compared
# with scalars, never multiplied with a row; the noised counts have sensitivity 2 whatever they are
# (tests/unit/test_score_histogram.py).
ALLOWED_REPEATED_FLOATS = {
    "ppsvm.v1.SignedRange.low",
    "ppsvm.v1.SignedRange.high",
    "ppsvm.v1.DpRequest.rho",
    "ppsvm.v1.DpRequest.low",
    "ppsvm.v1.DpRequest.high",
    "ppsvm.v1.DpHistogramRequest.edges",
}


def matrix_carriers(method: str, message: Descriptor, seen: frozenset[str] = frozenset()) -> list[str]:
    """Fields of ``message`` (recursively) that could carry a matrix, as full names."""
    if message.full_name in seen:
        return []
    seen = seen | {message.full_name}
    found = []
    if message.full_name in ARRAY_MESSAGES:
        found.append(message.full_name)
    for field in message.fields:
        if field.type == FieldDescriptor.TYPE_BYTES and (method, field.full_name) not in ALLOWED_BYTES:
            found.append(field.full_name)
        repeated = getattr(field, "is_repeated", None)
        repeated = repeated if repeated is not None else field.label == FieldDescriptor.LABEL_REPEATED
        if (
            repeated
            and field.type in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT)
            and field.full_name not in ALLOWED_REPEATED_FLOATS
        ):
            found.append(field.full_name)
        if field.message_type is not None:
            found.extend(matrix_carriers(method, field.message_type, seen))
    return found


def all_methods():
    services = pb.DESCRIPTOR.services_by_name
    assert set(services) == {"Entity", "Coordinator"}
    for service in services.values():
        for method in service.methods:
            yield service.name, method


def test_no_request_message_can_carry_a_matrix() -> None:
    violations = {
        f"{service}.{method.name}": carriers
        for service, method in all_methods()
        if (carriers := matrix_carriers(method.name, method.input_type))
    }
    assert violations == {}


def test_no_rpc_streams_from_the_client() -> None:
    streaming = [f"{s}.{m.name}" for s, m in all_methods() if getattr(m, "client_streaming", False)]
    assert streaming == []


def test_checker_would_catch_a_matrix() -> None:
    """The walker is not vacuous: it flags the kernel stream and the model bytes outside AcceptModel."""
    methods = {m.name: m for _, m in all_methods()}
    assert "ppsvm.v1.ArrayChunk" in matrix_carriers("KernelBlock", methods["KernelBlock"].output_type)
    assert "ppsvm.v1.ArrayChunk.data" in matrix_carriers("KernelBlock", methods["KernelBlock"].output_type)
    assert "ppsvm.v1.ArrayHeader" in matrix_carriers("x", pb.ArrayChunk.DESCRIPTOR)
    assert matrix_carriers("Predict", pb.ModelMessage.DESCRIPTOR) == ["ppsvm.v1.ModelMessage.model_json"]
    assert matrix_carriers("AcceptModel", pb.ModelMessage.DESCRIPTOR) == []
    # Recursion through message-typed fields reaches Scaling inside KernelRequest.
    assert matrix_carriers("KernelBlock", pb.KernelRequest.DESCRIPTOR) == []
    assert pb.KernelRequest.DESCRIPTOR.fields_by_name["scaling"].message_type.full_name == "ppsvm.v1.Scaling"
