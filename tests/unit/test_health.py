"""The standard health check on ppsvm's servers: who may ask, what it answers, what it cannot be used for.

In-process servers made by the same ``create_server`` as ``ppsvm entity`` and ``coordinator serve``, on loopback.
"""

from __future__ import annotations

import datetime
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from cryptography import x509
from grpc_health.v1 import health_pb2

from ppsvm.constants import HEALTH_DEADLINE_S
from ppsvm.coordinator.status import PREDICTION, ServerStatus, status_json, status_report
from ppsvm.core.release_log import ReleaseLog, create_release_log, head_path
from ppsvm.wire.certs import CA_FILE, CA_KEY_FILE, Pem, federation_parties, make_certificates
from ppsvm.wire.grpc_util import open_channel
from ppsvm.wire.health import CHECK_METHOD, ENTITY_SERVICE, WATCH_METHOD, HealthAnswer, check_health
from ppsvm.wire.server import ServerLimits, create_server, stopping
from ppsvm.wire.tls import TlsFiles

from ..certificates import sign_leaf

SERVICE = "ppsvm.test.Held"
TIMEOUT_S = 10.0


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A federation's certificates plus one the CA signed with no role at all."""
    directory = tmp_path_factory.mktemp("pki")
    files = make_certificates(federation_parties("coordinator", ["r0c0", "r0c1"]))
    cert, key = sign_leaf(
        files[CA_KEY_FILE].text,
        files[CA_FILE].text,
        "nobody",
        datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5),
        [x509.DNSName("nobody")],
    )
    files["nobody.pem"], files["nobody.key"] = Pem(cert, False), Pem(key, True)
    for filename, pem in files.items():
        (directory / filename).write_bytes(pem.text)
    return directory


def tls_of(pki: Path, name: str) -> TlsFiles:
    return TlsFiles(ca=pki / CA_FILE, cert=pki / f"{name}.pem", key=pki / f"{name}.key", source=pki / "test.toml")


class Held:
    """A method that runs until released: a call that keeps its caller's slot."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered = threading.Semaphore(0)

    def held(self, request: bytes, context: grpc.ServicerContext) -> Iterator[bytes]:
        self.entered.release()
        self.release.wait(TIMEOUT_S)
        yield b"done"

    def register(self, server: grpc.Server) -> None:
        handlers = {"Held": grpc.unary_stream_rpc_method_handler(self.held)}
        server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(SERVICE, handlers)])


def entity_like(pki: Path, held: Held, **options: object) -> tuple[grpc.Server, str]:
    """A server with an entity's rules: only the name "coordinator" with the coordinator role may call its methods."""
    server, port = create_server(
        "127.0.0.1:0",
        held.register,
        tls=tls_of(pki, "r0c0"),
        allowed_peers={"coordinator"},
        services=(SERVICE,),
        **options,  # type: ignore[arg-type]
    )
    return server, f"127.0.0.1:{port}"


def ask(pki: Path, caller: str, address: str, service: str = "") -> HealthAnswer:
    return check_health(address, tls=tls_of(pki, caller), peer="r0c0", service=service, deadline=TIMEOUT_S)


@pytest.mark.parametrize("caller", ["coordinator", "r0c0", "r0c1", "client", "nobody"])
def test_any_certificate_the_ca_issued_may_check_but_no_other_method(pki: Path, caller: str) -> None:
    """Check tells SERVING or not and nothing else, so it needs no name or role: an entity's container probes itself
    with its own certificate. The server's own methods stay the coordinator's alone."""
    held = Held()
    server, address = entity_like(pki, held)
    try:
        assert ask(pki, caller, address).status == "SERVING"
        assert ask(pki, caller, address, SERVICE).status == "SERVING"
        unknown = ask(pki, caller, address, "ppsvm.v1.Nothing")
        assert (unknown.status, unknown.reason) == ("refused", "the server does not run the service 'ppsvm.v1.Nothing'")
        if caller != "coordinator":
            with open_channel(address, tls=tls_of(pki, caller), peer="r0c0") as c:
                with pytest.raises(grpc.RpcError) as refused:
                    list(c.unary_stream(f"/{SERVICE}/Held")(b"", timeout=TIMEOUT_S))
            assert refused.value.code() is grpc.StatusCode.PERMISSION_DENIED
    finally:
        server.stop(0)


def test_watch_is_not_served_so_no_caller_can_park_workers(pki: Path) -> None:
    """A Watch would hold a server thread while it stays open: refused to the coordinator (UNIMPLEMENTED) and, as any
    method but Check, to every other name (PERMISSION_DENIED)."""
    server, address = entity_like(pki, Held())
    try:
        for caller, code in (
            ("coordinator", grpc.StatusCode.UNIMPLEMENTED),
            ("r0c0", grpc.StatusCode.PERMISSION_DENIED),
        ):
            with open_channel(address, tls=tls_of(pki, caller), peer="r0c0") as c:
                watch = c.unary_stream(
                    WATCH_METHOD,
                    request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
                    response_deserializer=health_pb2.HealthCheckResponse.FromString,
                )
                with pytest.raises(grpc.RpcError) as refused:
                    list(watch(health_pb2.HealthCheckRequest(), timeout=TIMEOUT_S))
            assert refused.value.code() is code, caller
    finally:
        server.stop(0)


def test_checks_take_the_callers_slots_like_any_call(pki: Path) -> None:
    """PeerLimits counts Check: a caller whose share is taken is refused a check too, while another name is
    answered; a name can never use health checks to take more than its share."""
    held = Held()
    server, address = entity_like(pki, held, max_workers=4, limits=ServerLimits(max_calls_per_peer=1))
    try:
        with open_channel(address, tls=tls_of(pki, "coordinator"), peer="r0c0") as c:
            running = c.unary_stream(f"/{SERVICE}/Held")(b"", timeout=TIMEOUT_S)
            assert held.entered.acquire(timeout=TIMEOUT_S)
            busy = ask(pki, "coordinator", address)
            assert busy.status == "refused" and busy.reason.startswith("RESOURCE_EXHAUSTED: coordinator already has 1")
            assert ask(pki, "r0c0", address).status == "SERVING"
            held.release.set()
            assert list(running) == [b"done"]
        assert ask(pki, "coordinator", address).status == "SERVING"
    finally:
        held.release.set()
        server.stop(0)


def test_readiness_turns_every_service_not_serving_and_back(pki: Path) -> None:
    problem: list[str | None] = ["release log /x is missing or cannot be written"]
    server, address = entity_like(pki, Held(), readiness=lambda: problem[0])
    try:
        for service in ("", SERVICE):
            answer = ask(pki, "coordinator", address, service)
            assert answer.status == "NOT_SERVING" and "release log cannot be written" in answer.reason
        problem[0] = None
        assert ask(pki, "coordinator", address, SERVICE).status == "SERVING"
    finally:
        server.stop(0)


def test_a_stopping_server_is_not_serving_for_good(pki: Path) -> None:
    """serve_until calls stopping() before the grace period; a readiness that recovers cannot undo it."""
    server, address = entity_like(pki, Held(), readiness=lambda: None)
    try:
        assert ask(pki, "coordinator", address).status == "SERVING"
        stopping(server)
        assert [ask(pki, "coordinator", address, s).status for s in ("", SERVICE)] == ["NOT_SERVING"] * 2
    finally:
        server.stop(0)


def test_plaintext_servers_answer_too_and_unreachable_ones_are_named_so() -> None:
    server, port = create_server("127.0.0.1:0", lambda s: None, tls=None)
    try:
        answer = check_health(f"127.0.0.1:{port}", tls=None, peer="", deadline=TIMEOUT_S)
        assert answer.status == "SERVING" and answer.reason == "" and answer.ms >= 0
    finally:
        server.stop(0)
    # A port bound but not listening: nothing answers there, and no other test's server can take it meanwhile (the
    # stopped server's port could be, under a parallel run: its answer was then "refused").
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        gone = check_health(f"127.0.0.1:{held.getsockname()[1]}", tls=None, peer="", deadline=HEALTH_DEADLINE_S)
    assert gone.status == "unreachable" and gone.reason and not gone.serving


def test_the_release_log_is_unwritable_when_its_file_is_gone(tmp_path: Path) -> None:
    """The entity's readiness: cheap checks of what recording a release opens (root passes permission bits, so the
    test removes the file instead of making it read-only)."""
    path = tmp_path / "r0c0.releases.jsonl"
    create_release_log(path, "r0c0")
    log = ReleaseLog(path, "r0c0")
    assert log.unwritable() is None
    path.unlink()
    assert log.unwritable() == f"release log {path} is missing or cannot be written"
    assert not head_path(path).exists()


def test_status_report_names_every_server_and_the_ones_not_serving() -> None:
    statuses = [
        ServerStatus("r0c0", "10.0.0.1:50051", HealthAnswer("SERVING", "", 3.25)),
        ServerStatus("r0c1", "10.0.0.2:50051", HealthAnswer("unreachable", "Connection refused", 1.0)),
        ServerStatus(PREDICTION, "10.0.0.9:50060", HealthAnswer("SERVING", "", 4.0)),
    ]
    lines = status_report(statuses).splitlines()
    assert lines[0].split() == ["r0c0", "10.0.0.1:50051", "SERVING", "3.2", "ms"]
    assert lines[1].split()[:3] == ["r0c1", "10.0.0.2:50051", "unreachable"] and lines[1].endswith("Connection refused")
    assert lines[-1] == "2 of 3 serving; not serving: r0c1"
    document = status_json(statuses)
    assert document["ok"] is False and [e["name"] for e in document["entities"]] == ["r0c0", "r0c1"]
    assert document["serve"]["status"] == "SERVING"
    assert status_report(statuses[:1]).splitlines()[-1] == "all 1 serving"


def test_the_health_service_names_are_the_real_ones() -> None:
    """What probes and `coordinator status` name: the proto's full service name and the standard method."""
    assert ENTITY_SERVICE == "ppsvm.v1.Entity"
    assert CHECK_METHOD == "/grpc.health.v1.Health/Check"
