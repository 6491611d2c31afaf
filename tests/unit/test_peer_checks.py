"""What a server checks about each caller, against in-process gRPC servers on loopback.

The threat model is a caller holding a certificate from the federation CA (the coordinator, an
entity, a prediction client) that sends the nastiest valid requests it can: a certificate whose
name differs only in case, a certificate with the wrong role, more concurrent calls than its
share, and server streams it never reads.
"""

from __future__ import annotations

import datetime
import threading
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest
from cryptography import x509

from ppsvm.config import load_federation
from ppsvm.coordinator.serve import PREDICTION_ROLES
from ppsvm.errors import ConfigError
from ppsvm.wire.certs import (
    CA_FILE,
    CA_KEY_FILE,
    CLIENT,
    COORDINATOR,
    ENTITY,
    Pem,
    federation_parties,
    make_certificates,
    role_uri,
)
from ppsvm.wire.rpc import ppsvm_pb2 as pb
from ppsvm.wire.rpc import ppsvm_pb2_grpc as pb_grpc
from ppsvm.wire.server import STREAM_WRITE_TIMEOUT_ENV, ServerLimits, create_server
from ppsvm.wire.tls import TlsFiles, peer_names

from ..certificates import sign_leaf

SERVICE = "ppsvm.test.Probe"
CHUNK = b"x" * (1 << 20)  # one message as big as the wire layer's chunks
CALL_TIMEOUT_S = 10.0


# --------------------------------------------------------------------------- certificates


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One federation's certificates, plus ones the CA signed outside `ppsvm certs` (as a careless or stolen CA key
    would)."""
    directory = tmp_path_factory.mktemp("pki")
    files = make_certificates(federation_parties("coordinator", ["r0c0", "r0c1"]))
    files.update(_signed(files, "R0C0", (ENTITY,)))  # what the old name rule allowed
    files.update(_signed(files, "coordinator-without-role", ()))  # what `ppsvm certs` made before roles
    for filename, pem in files.items():
        (directory / filename).write_bytes(pem.text)
    return directory


def _signed(files: dict[str, Pem], name: str, roles: tuple[str, ...]) -> dict[str, Pem]:
    """A certificate for ``name`` with ``roles``, signed by the CA in ``files`` without `make_certificates`' name
    check."""
    dns = name.removesuffix("-without-role")
    cert_pem, key_pem = sign_leaf(
        files[CA_KEY_FILE].text,
        files[CA_FILE].text,
        dns,
        datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5),
        [x509.DNSName(dns), *(x509.UniformResourceIdentifier(role_uri(r)) for r in roles)],
    )
    return {f"{name}.pem": Pem(cert_pem, False), f"{name}.key": Pem(key_pem, True)}


def tls_of(pki: Path, name: str) -> TlsFiles:
    return TlsFiles(ca=pki / CA_FILE, cert=pki / f"{name}.pem", key=pki / f"{name}.key", source=pki / "test.toml")


def channel_as(pki: Path, name: str, address: str, pinned: str) -> grpc.Channel:
    """A mutual-TLS channel presenting ``name``'s certificate and requiring the server's to name ``pinned``."""
    ca, cert, key = tls_of(pki, name).read()
    credentials = grpc.ssl_channel_credentials(root_certificates=ca, private_key=key, certificate_chain=cert)
    return grpc.secure_channel(address, credentials, options=[("grpc.ssl_target_name_override", pinned)])


# --------------------------------------------------------------------------- a probe service


class Probe:
    """A unary method and two server-streaming ones: one that waits for ``release``, one that sends CHUNKs."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered = threading.Semaphore(0)
        self.stream_ended: list[float] = []  # seconds from a stream's start to its worker leaving it
        self.streams_completed = 0  # streams whose every message the transport took: their reader never stalled
        self.callers: list[set[str]] = []

    def unary(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        self.callers.append(peer_names(context))
        return b"ok"

    def held(self, request: bytes, context: grpc.ServicerContext) -> Iterator[bytes]:
        self.entered.release()
        self.release.wait(CALL_TIMEOUT_S)
        yield b"done"

    def chunks(self, request: bytes, context: grpc.ServicerContext) -> Iterator[bytes]:
        started = time.monotonic()
        self.entered.release()
        try:
            for _ in range(50):
                yield CHUNK
            self.streams_completed += 1
        finally:
            self.stream_ended.append(time.monotonic() - started)

    def register(self, server: grpc.Server) -> None:
        server.add_generic_rpc_handlers(
            [
                grpc.method_handlers_generic_handler(
                    SERVICE,
                    {
                        "Unary": grpc.unary_unary_rpc_method_handler(self.unary),
                        "Held": grpc.unary_stream_rpc_method_handler(self.held),
                        "Chunks": grpc.unary_stream_rpc_method_handler(self.chunks),
                    },
                )
            ]
        )


def call(channel: grpc.Channel, method: str) -> Callable[..., object]:
    if method == "Unary":
        return channel.unary_unary(f"/{SERVICE}/Unary")
    return channel.unary_stream(f"/{SERVICE}/{method}")


def start(probe: Probe, pki: Path | None, **options: object) -> tuple[grpc.Server, str]:
    server, port = create_server("127.0.0.1:0", probe.register, tls=tls_of(pki, "r0c0") if pki else None, **options)  # type: ignore[arg-type]
    return server, f"127.0.0.1:{port}"


# --------------------------------------------------------------------------- 1. exact names


def test_grpc_name_pinning_ignores_case_so_names_are_lowercase(pki: Path) -> None:
    """The hole: a coordinator pinning "r0c0" accepts a server certificate for "R0C0" (gRPC's target-name check is DNS
    hostname matching). It stays open in gRPC; it is closed because no ppsvm name may hold a capital (test_tls.py),
    so "R0C0" is not a name any federation file, entity config or `ppsvm certs` accepts."""
    probe = Probe()
    impostor = TlsFiles(ca=pki / CA_FILE, cert=pki / "R0C0.pem", key=pki / "R0C0.key", source=pki / "x.toml")
    server, port = create_server(
        "127.0.0.1:0", probe.register, tls=impostor, roles={f"/{SERVICE}/Unary": (COORDINATOR,)}
    )
    try:
        with channel_as(pki, "coordinator", f"127.0.0.1:{port}", pinned="r0c0") as channel:
            assert call(channel, "Unary")(b"", timeout=CALL_TIMEOUT_S) == b"ok"  # gRPC: R0C0 passes for r0c0
    finally:
        server.stop(0)
    with pytest.raises(ConfigError, match="write it 'r0c0'"):
        make_certificates({"R0C0": (ENTITY,)})


def test_federation_and_entity_files_refuse_a_name_in_capitals(tmp_path: Path) -> None:
    federation = tmp_path / "federation.toml"
    federation.write_text(
        '[task]\ntask = "classify"\n\n'
        '[[entity]]\nid = "R0C0"\naddress = "127.0.0.1:1"\nrow_block = 0\ncolumn_block = 0\n'
    )
    with pytest.raises(ConfigError, match=r"party name 'R0C0'.*write it 'r0c0'"):
        load_federation(federation)


def test_the_server_compares_the_callers_exact_name(pki: Path) -> None:
    """An entity accepts only the coordinator its config names, byte for byte, as the peer certificate states it."""
    probe = Probe()
    server, address = start(probe, pki, allowed_peers={"r0c0"}, roles=(ENTITY,))
    try:
        with channel_as(pki, "R0C0", address, pinned="r0c0") as channel:
            with pytest.raises(grpc.RpcError) as refused:
                call(channel, "Unary")(b"", timeout=CALL_TIMEOUT_S)
        assert refused.value.code() is grpc.StatusCode.PERMISSION_DENIED
        assert "R0C0 may not call" in refused.value.details() and "accepts only r0c0" in refused.value.details()
        with channel_as(pki, "r0c1", address, pinned="r0c0") as channel:
            with pytest.raises(grpc.RpcError):
                call(channel, "Unary")(b"", timeout=CALL_TIMEOUT_S)
        assert probe.callers == []
    finally:
        server.stop(0)


# --------------------------------------------------------------------------- 2. roles, per call


@pytest.mark.parametrize(
    ("caller", "allowed"),
    [("coordinator", True), ("client", False), ("r0c1", False), ("coordinator-without-role", False)],
)
def test_entity_methods_need_the_coordinator_role_and_name(pki: Path, caller: str, allowed: bool) -> None:
    """What `ppsvm entity` asks (create_server's defaults, the config's coordinator name): the client certificate and
    a role-less certificate named "coordinator" (made before roles, or by hand) are refused."""
    probe = Probe()
    server, address = start(probe, pki, allowed_peers={"coordinator"})
    try:
        with channel_as(pki, caller, address, pinned="r0c0") as channel:
            if allowed:
                assert call(channel, "Unary")(b"", timeout=CALL_TIMEOUT_S) == b"ok"
                assert probe.callers == [{"coordinator"}]
                return
            with pytest.raises(grpc.RpcError) as refused:
                call(channel, "Unary")(b"", timeout=CALL_TIMEOUT_S)
        assert refused.value.code() is grpc.StatusCode.PERMISSION_DENIED
        if caller == "coordinator-without-role":
            assert (
                "grants no ppsvm role (made before roles existed: make new ones with `ppsvm certs`)"
                in refused.value.details()
            )
        assert probe.callers == []
    finally:
        server.stop(0)


class PredictionProbe(pb_grpc.CoordinatorServicer):
    def Predict(self, request: pb.PredictRequest, context: grpc.ServicerContext) -> pb.PredictReply:
        return pb.PredictReply(predictions=[pb.Prediction(id=r) for r in request.ids])

    def Status(self, request: pb.Empty, context: grpc.ServicerContext) -> pb.StatusReply:
        return pb.StatusReply(task="classify")


@pytest.mark.parametrize(
    ("caller", "may_predict"), [("client", True), ("coordinator", True), ("r0c0", False), ("r0c1", False)]
)
def test_prediction_service_answers_predict_only_to_the_client_role(pki: Path, caller: str, may_predict: bool) -> None:
    """`coordinator serve`'s rule (PREDICTION_ROLES): an entity's certificate may no longer ask about any record;
    Status stays open to every party."""
    servicer = PredictionProbe()
    coordinator = TlsFiles(
        ca=pki / CA_FILE, cert=pki / "coordinator.pem", key=pki / "coordinator.key", source=pki / "x.toml"
    )
    server, port = create_server(
        "127.0.0.1:0",
        lambda s: pb_grpc.add_CoordinatorServicer_to_server(servicer, s),
        tls=coordinator,
        roles=PREDICTION_ROLES,
    )
    try:
        with channel_as(pki, caller, f"127.0.0.1:{port}", pinned="coordinator") as channel:
            stub = pb_grpc.CoordinatorStub(channel)
            assert stub.Status(pb.Empty(), timeout=CALL_TIMEOUT_S).task == "classify"
            if may_predict:
                assert [
                    p.id for p in stub.Predict(pb.PredictRequest(ids=["a"]), timeout=CALL_TIMEOUT_S).predictions
                ] == ["a"]
                return
            with pytest.raises(grpc.RpcError) as refused:
                stub.Predict(pb.PredictRequest(ids=["a"]), timeout=CALL_TIMEOUT_S)
        assert refused.value.code() is grpc.StatusCode.PERMISSION_DENIED
        assert (
            f"{caller} may not call /ppsvm.v1.Coordinator/Predict: that needs a certificate with the role client"
            in refused.value.details()
        )
    finally:
        server.stop(0)


def test_a_method_the_role_table_does_not_name_is_refused_to_everyone(pki: Path) -> None:
    probe = Probe()
    server, address = start(probe, pki, roles={f"/{SERVICE}/Held": (CLIENT,)})
    try:
        with channel_as(pki, "coordinator", address, pinned="r0c0") as channel:
            with pytest.raises(grpc.RpcError) as refused:
                call(channel, "Unary")(b"", timeout=CALL_TIMEOUT_S)
        assert (
            refused.value.code() is grpc.StatusCode.PERMISSION_DENIED
            and "not open to any caller" in refused.value.details()
        )
    finally:
        server.stop(0)


# --------------------------------------------------------------------------- 3. per-peer limit, stalled readers


def test_one_caller_gets_at_most_its_share_of_the_workers(pki: Path) -> None:
    """Three running calls of "coordinator" fill its share: a fourth is refused at once, naming the limit and how to
    raise it, while another caller is served; when the calls end, the share is free again."""
    probe = Probe()
    server, address = start(
        probe, pki, roles=(COORDINATOR, CLIENT), max_workers=4, limits=ServerLimits(max_calls_per_peer=3)
    )
    try:
        with (
            channel_as(pki, "coordinator", address, pinned="r0c0") as greedy,
            channel_as(pki, "client", address, pinned="r0c0") as other,
        ):
            held = [call(greedy, "Held")(b"", timeout=CALL_TIMEOUT_S) for _ in range(3)]
            for _ in held:
                assert probe.entered.acquire(timeout=CALL_TIMEOUT_S)
            with pytest.raises(grpc.RpcError) as refused:
                call(greedy, "Unary")(b"", timeout=CALL_TIMEOUT_S)
            assert refused.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "coordinator already has 3 calls running on this server" in refused.value.details()
            assert "PPSVM_MAX_CALLS_PER_PEER (below its 4 worker threads)" in refused.value.details()
            assert call(other, "Unary")(b"", timeout=CALL_TIMEOUT_S) == b"ok"
            probe.release.set()
            assert [list(stream) for stream in held] == [[b"done"]] * 3
            assert call(greedy, "Unary")(b"", timeout=CALL_TIMEOUT_S) == b"ok"
    finally:
        server.stop(0)


def _fresh_call_seconds(address: str, deadline: float) -> float | None:
    """Seconds a new connection's unary call took, or None if it was not answered within ``deadline``."""
    began = time.monotonic()
    with grpc.insecure_channel(address) as channel:
        try:
            call(channel, "Unary")(b"", timeout=deadline)
        except grpc.RpcError as error:
            assert error.code() is grpc.StatusCode.DEADLINE_EXCEEDED, error
            return None
    return time.monotonic() - began


def _stall(address: str, probe: Probe, streams: int) -> tuple[grpc.Channel, list[object]]:
    """``streams`` Chunks calls on one connection that never read a message, each already sending."""
    channel = grpc.insecure_channel(address)
    calls = [call(channel, "Chunks")(b"", timeout=120) for _ in range(streams)]
    for _ in calls:
        assert probe.entered.acquire(timeout=CALL_TIMEOUT_S)
    return channel, calls


def test_a_stalled_reader_is_cut_off_and_its_worker_freed() -> None:
    """Readers that never read fill their host's share (plaintext: the host is the peer); each stream is cancelled
    once a message has waited the write timeout, so its worker and its slot come back."""
    probe = Probe()
    timeout = 1.0
    server, address = start(
        probe, None, max_workers=4, limits=ServerLimits(max_calls_per_peer=3, stream_write_timeout_s=timeout)
    )
    channel, calls = _stall(address, probe, 3)
    try:
        with grpc.insecure_channel(address) as fresh:
            with pytest.raises(grpc.RpcError) as refused:
                call(fresh, "Unary")(b"", timeout=CALL_TIMEOUT_S)
        assert refused.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
        for _ in range(100):
            if len(probe.stream_ended) == 3:
                break
            time.sleep(0.05)
        if probe.streams_completed:
            # As in the control below (seen in a loaded default run): the loopback transport took a whole stream in
            # 0.25 s, so that reader never stalled and this run shows nothing either way.
            pytest.skip(f"a stalled reader's stream was absorbed by the transport ({probe.stream_ended} s)")
        assert len(probe.stream_ended) == 3 and timeout <= max(probe.stream_ended) < timeout + 2.0, probe.stream_ended
        served_after = _fresh_call_seconds(address, deadline=CALL_TIMEOUT_S)
        assert served_after is not None and served_after < 1.0
        for stalled in calls:
            with pytest.raises(grpc.RpcError) as cut:
                list(stalled)  # type: ignore[call-overload]
            assert cut.value.code() is grpc.StatusCode.CANCELLED
    finally:
        channel.close()
        server.stop(0)


def test_control_without_the_limits_stalled_readers_hold_every_worker() -> None:
    """The same stalled readers against a plain gRPC server (what create_server made before): every worker is held
    and a fresh caller is not answered, so the test above would catch the old behaviour."""
    probe = Probe()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    probe.register(server)
    address = f"127.0.0.1:{server.add_insecure_port('127.0.0.1:0')}"
    server.start()
    channel, calls = _stall(address, probe, 4)
    try:
        answered = _fresh_call_seconds(address, deadline=3.0)
        if answered is not None and probe.stream_ended:
            # Seen once under heavy load: the loopback transport took a whole 50 MiB stream, so that reader never
            # stalled and this run shows nothing either way.
            pytest.skip(f"a stalled reader's stream was absorbed by the transport ({probe.stream_ended} s)")
        assert answered is None, f"a fresh call was answered in {answered:.2f} s while every worker should be held"
        assert probe.stream_ended == []
    finally:
        for stalled in calls:
            stalled.cancel()  # type: ignore[attr-defined]
        channel.close()
        server.stop(0)


@pytest.mark.parametrize(
    ("variables", "fragment"),
    [
        ({"PPSVM_MAX_CALLS_PER_PEER": "many"}, "must be a whole number"),
        ({"PPSVM_MAX_CALLS_PER_PEER": "16"}, "below the server's 16 worker threads, got 16"),
        ({"PPSVM_MAX_CALLS_PER_PEER": "0"}, "at least 1"),
        ({STREAM_WRITE_TIMEOUT_ENV: "nan"}, "positive number of seconds"),
        ({STREAM_WRITE_TIMEOUT_ENV: "0"}, "positive number of seconds"),
    ],
)
def test_limits_from_the_environment_are_checked(variables: dict[str, str], fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment):
        ServerLimits.from_environment(variables).check(16)


def test_limits_from_the_environment() -> None:
    limits = ServerLimits.from_environment({"PPSVM_MAX_CALLS_PER_PEER": "3", STREAM_WRITE_TIMEOUT_ENV: "2.5"})
    assert limits == ServerLimits(max_calls_per_peer=3, stream_write_timeout_s=2.5)
    assert ServerLimits.from_environment({}) == ServerLimits()
