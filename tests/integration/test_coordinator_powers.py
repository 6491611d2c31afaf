"""What a coordinator can make an entity do, tried over the wire against real `ppsvm entity` processes.

Privacy rule 2 (docs/design.md section 2): the coordinator cannot choose or learn B_j, and an
entity never computes a kernel against a matrix supplied by someone else (or a coordinator
that sends chosen B's reconstructs A). These tests try: methods that do not exist, a
matrix smuggled into a real request as an unknown protobuf field, and a scan of every
request message for fields that could carry one.

The last test runs the scaling attack (ppsvm.experiments.coordinator_attacks.reconstruct_by_rescaling): an
entity that applied whatever per-feature (low, high) a request named would reveal its
whole cell and B_j to a coordinator moving one feature's bounds at a time. Entities now
take the scaling only from their column block's ranges, tagged under the column-group
secret, so the first altered request is refused.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import numpy as np
import pytest
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from ppsvm.config import load_federation
from ppsvm.experiments.coordinator_attacks import reconstruct_by_rescaling
from ppsvm.wire.chunks import decode_arrays
from ppsvm.wire.rpc import ppsvm_pb2 as pb

from .conftest import coordinator_channel

SERVICE = "/ppsvm.v1.Entity/"
MBAR = 1  # the smallest (most private) number of random points: the attack below needs no more

# Request fields that can hold bulk numbers or bytes, each with why it cannot be used to make
# the entity compute a kernel against a matrix the coordinator chose. Any new such field fails
# test_no_request_field_can_carry_a_matrix until it is reviewed and listed here.
REVIEWED_FIELDS = {
    # The trained model, verbatim. EntityCore.accept_model (ppsvm/entity/cell.py) decodes it as UTF-8,
    # validates it with Model.from_json and writes it to <id>.model.json; nothing in entity/
    # reads it back, and EntityCore.kernel_block builds its kernel only from the entity's own
    # cell, derive_B(own secret, mbar, n_j) and the request's kernel, mbar, mu and scaling.
    # So it is an output of training that the entity keeps, never an input to a kernel.
    "ppsvm.v1.ModelMessage.model_json",
    # A DP model to score (EntityCore.dp_evaluate): it is parsed as a DP model file and only a
    # discrete-Laplace-noised error count, charged to the entity's budget, leaves.
    "ppsvm.v1.DpEvaluateRequest.model_json",
    # A DP model and bin edges (EntityCore.dp_score_histogram): the model is parsed as a DP model file,
    # the edges (at most 1024 finite increasing numbers) are only compared with its decision values, and
    # only per-class counts with discrete Laplace noise, charged to the entity's budget, leave.
    "ppsvm.v1.DpHistogramRequest.model_json",
    "ppsvm.v1.DpHistogramRequest.edges",
    # A secure-aggregation nonce of 16 to 64 bytes (longer is refused before anything is read): only hashed into
    # the masks' context (ppsvm.core.aggregation.mask_context), never multiplied with a row.
    "ppsvm.v1.KernelRequest.nonce",
    # Record ids are only dictionary keys into the entity's own rows (Cell.rows_for_ids);
    # an unknown id is refused with INVALID_ARGUMENT.
    "ppsvm.v1.RecordIds.ids",
    # Column-block members' per-feature ranges, checked to have exactly n_j entries each and
    # accepted only with a valid tag under the column-group secret (EntityCore.block_scaling):
    # the numbers are the entities' own, relayed, never the coordinator's choice.
    "ppsvm.v1.SignedRange.low",
    "ppsvm.v1.SignedRange.high",
    # The DP mode's rho and public scaling: they never reach a kernel against the entity's B_j;
    # whatever they are, zhat has norm 1 and only noised weights charged to the entity's
    # release log leave (EntityCore.dp_weights).
    "ppsvm.v1.DpRequest.rho",
    "ppsvm.v1.DpRequest.low",
    "ppsvm.v1.DpRequest.high",
}
NUMBERS = {
    FieldDescriptor.TYPE_DOUBLE,
    FieldDescriptor.TYPE_FLOAT,
    FieldDescriptor.TYPE_INT32,
    FieldDescriptor.TYPE_INT64,
    FieldDescriptor.TYPE_UINT32,
    FieldDescriptor.TYPE_UINT64,
    FieldDescriptor.TYPE_SINT32,
    FieldDescriptor.TYPE_SINT64,
    FieldDescriptor.TYPE_FIXED32,
    FieldDescriptor.TYPE_FIXED64,
    FieldDescriptor.TYPE_SFIXED32,
    FieldDescriptor.TYPE_SFIXED64,
}


@pytest.fixture
def entity(federation) -> Iterator[tuple[grpc.Channel, str, Path]]:
    """A channel to entity r0c0 of a 1 x 2 WDBC split (15 features), its id, and its cell file."""
    run = federation(1, 2)
    target = load_federation(run.federation_path).entities[0]
    channel = coordinator_channel(run.federation_path, target)
    yield channel, target.id, run.split_dir / f"{target.id}.csv"
    channel.close()


def kernel_block(channel: grpc.Channel, request: bytes) -> np.ndarray:
    """Call KernelBlock with an already serialized request; the "kernel" array of the reply."""
    call = channel.unary_stream(
        SERVICE + "KernelBlock", request_serializer=None, response_deserializer=pb.ArrayChunk.FromString
    )
    return decode_arrays(call(request, timeout=30))["kernel"]


def honest_request(channel: grpc.Channel, entity_id: str, kernel: int = pb.GAUSSIAN) -> pb.KernelRequest:
    """A request like the coordinator's: the entity's own signed range (it is alone in its column block),
    mbar = MBAR < n_j."""
    call = channel.unary_stream(
        SERVICE + "FeatureRange",
        request_serializer=pb.Empty.SerializeToString,
        response_deserializer=pb.ArrayChunk.FromString,
    )
    bounds = decode_arrays(call(pb.Empty(), timeout=30))
    signed = pb.SignedRange(entity_id=entity_id, low=bounds["low"], high=bounds["high"], tag=str(bounds["tag"][0]))
    return pb.KernelRequest(
        kernel=kernel, mbar=MBAR, mu=1.0 / bounds["low"].size, record_set=pb.TRAIN, scaling=pb.Scaling(ranges=[signed])
    )


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        out.append(low | (0x80 if value else 0))
        if not value:
            return bytes(out)


def unknown_field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field (wire type 2) that no message of ppsvm.proto declares."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def test_no_rpc_to_set_B_or_to_kernel_a_supplied_matrix(entity) -> None:
    """(1) No method to set B_j or to ask for the kernel of a matrix; (2) a matrix smuggled into a
    real KernelBlock request as unknown protobuf fields changes nothing. One entity start-up for both."""
    channel, entity_id, _ = entity
    service = pb.DESCRIPTOR.services_by_name["Entity"]
    assert {m.name for m in service.methods} == {
        "Metadata",
        "LogDigest",  # the SHA-256 of a release log line: no record value, no matrix
        "Records",
        "FeatureRange",
        "KernelBlock",
        "AcceptModel",
        "LocalBaseline",
        "DpWeights",
        "DpEvaluate",
        "DpScoreHistogram",
    }, "the Entity service changed: review what each new method lets a coordinator do"
    rng = np.random.default_rng(0)
    matrix = rng.random((5, 15)).tobytes()
    for method in ("SetRandomMatrix", "SetSecret", "KernelOf", "KernelAgainst"):
        for streaming in (False, True):
            kind = channel.unary_stream if streaming else channel.unary_unary
            call = kind(SERVICE + method, request_serializer=None, response_deserializer=None)
            with pytest.raises(grpc.RpcError) as refused:
                reply = call(matrix, timeout=10)
                if streaming:
                    list(reply)
            assert refused.value.code() is grpc.StatusCode.UNIMPLEMENTED, (method, refused.value)

    request = honest_request(channel, entity_id)
    plain = request.SerializeToString()
    chosen_B = rng.random((MBAR, 15))
    # Field 99 is far outside the message; field 9 is KernelRequest's next free number.
    smuggled = plain + unknown_field(99, chosen_B.tobytes()) + unknown_field(9, (1.0 - chosen_B).tobytes())
    # The extra bytes really are on the wire and parse as unknown fields of a valid request.
    assert len(smuggled) > len(plain) + chosen_B.nbytes
    parsed = pb.KernelRequest.FromString(smuggled)
    assert parsed.mbar == MBAR and parsed.scaling == request.scaling
    honest = kernel_block(channel, plain)
    assert honest.shape[1] == MBAR
    assert np.array_equal(kernel_block(channel, smuggled), honest)


def _bulk_fields(message: Descriptor, seen: set[str]) -> set[str]:
    """Full names of bytes, string-list and number-list fields of ``message`` and its sub-messages."""
    if message.full_name in seen:
        return set()
    seen.add(message.full_name)
    found = set()
    for field in message.fields:
        repeated = field.is_repeated
        if field.type == FieldDescriptor.TYPE_MESSAGE:
            found |= _bulk_fields(field.message_type, seen)
        elif field.type == FieldDescriptor.TYPE_BYTES or (
            repeated and (field.type in NUMBERS or field.type == FieldDescriptor.TYPE_STRING)
        ):
            found.add(field.full_name)
    return found


def test_no_request_field_can_carry_a_matrix() -> None:
    """Every Entity request message, recursively: bytes and lists are only the reviewed ones."""
    seen: set[str] = set()
    found = set()
    for method in pb.DESCRIPTOR.services_by_name["Entity"].methods:
        found |= _bulk_fields(method.input_type, seen)
    assert "ppsvm.v1.KernelRequest" in seen and "ppsvm.v1.Scaling" in seen  # the walk reached nested messages
    assert found == REVIEWED_FIELDS


@pytest.mark.parametrize(("name", "kind"), [("linear", pb.LINEAR), ("gaussian", pb.GAUSSIAN)])
def test_chosen_scaling_is_refused(entity, name: str, kind: int) -> None:
    """The rescaling attack against a real entity: the honest request is served, the first altered one refused."""
    channel, entity_id, _ = entity
    # One kernel view per entity (its basis pin), so each kind runs against a fresh entity.
    request = honest_request(channel, entity_id, kind)
    honest = request.scaling.ranges[0]
    served = []

    def ask(low: np.ndarray, high: np.ndarray, request: pb.KernelRequest = request) -> np.ndarray:
        chosen = pb.KernelRequest()
        chosen.CopyFrom(request)
        del chosen.scaling.ranges[0].low[:], chosen.scaling.ranges[0].high[:]
        chosen.scaling.ranges[0].low.extend(low.tolist())
        chosen.scaling.ranges[0].high.extend(high.tolist())
        answer = kernel_block(channel, chosen.SerializeToString())
        served.append(answer)
        return answer

    with pytest.raises(grpc.RpcError) as refused:
        reconstruct_by_rescaling(ask, np.array(honest.low), np.array(honest.high), name, request.mu)
    assert refused.value.code() is grpc.StatusCode.PERMISSION_DENIED
    assert f"the range relayed for {entity_id} does not carry a valid tag" in refused.value.details()
    assert len(served) == 1, "only the honest scaling may be served"
