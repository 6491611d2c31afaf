"""Certificates, TLS configuration and the client's retry rule (no network)."""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import numpy as np
import pytest
from cryptography import x509
from cryptography.exceptions import InvalidSignature

from ppsvm.config import FederationEntity
from ppsvm.coordinator import client as client_module
from ppsvm.coordinator.client import EntityClient
from ppsvm.errors import ConfigError, EntityError
from ppsvm.wire.certs import (
    CLIENT,
    COORDINATOR,
    ENTITY,
    certificate_identity,
    certificate_party,
    check_party_name,
    federation_parties,
    make_certificates,
)
from ppsvm.wire.chunks import encode_arrays
from ppsvm.wire.rpc import ppsvm_pb2 as pb
from ppsvm.wire.tls import TlsFiles, choose_tls


def write_party(directory: Path, name: str, **options: object) -> TlsFiles:
    files = make_certificates({name: (ENTITY,)}, **options)  # type: ignore[arg-type]
    for filename, pem in files.items():
        (directory / filename).write_bytes(pem.text)
    return TlsFiles(
        ca=directory / "ca.pem",
        cert=directory / f"{name}.pem",
        key=directory / f"{name}.key",
        source=directory / "x.toml",
    )


def test_every_certificate_is_signed_by_the_ca_and_names_its_party_and_roles() -> None:
    files = make_certificates(federation_parties("coordinator", ["r0c0", "hospital-a.example"]))
    ca = x509.load_pem_x509_certificate(files["ca.pem"].text)
    expected = {
        "coordinator": {COORDINATOR, CLIENT},
        "r0c0": {ENTITY},
        "hospital-a.example": {ENTITY},
        "client": {CLIENT},
    }
    for name, roles in expected.items():
        cert = x509.load_pem_x509_certificate(files[f"{name}.pem"].text)
        cert.verify_directly_issued_by(ca)
        assert certificate_identity(files[f"{name}.pem"].text)[0] == name
        assert certificate_party(files[f"{name}.pem"].text).name == name
        assert certificate_party(files[f"{name}.pem"].text).roles == roles
        uris = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
            x509.UniformResourceIdentifier
        )
        assert sorted(uris) == sorted(f"urn:ppsvm:role:{role}" for role in roles)
        assert files[f"{name}.key"].secret and not files[f"{name}.pem"].secret


def test_two_runs_make_unrelated_cas() -> None:
    first, second = make_certificates({"a": (ENTITY,)}), make_certificates({"a": (ENTITY,)})
    ca = x509.load_pem_x509_certificate(first["ca.pem"].text)
    with pytest.raises((InvalidSignature, ValueError)):  # another key; another issuer name
        x509.load_pem_x509_certificate(second["a.pem"].text).verify_directly_issued_by(ca)


@pytest.mark.parametrize("name", ["under_score", "space d", "", "R0C0", "Coordinator", "-r0c0", "*.example"])
def test_bad_party_names_are_refused(name: str) -> None:
    with pytest.raises(ConfigError, match="lowercase letters"):
        make_certificates({name: (ENTITY,)})


def test_a_name_in_capitals_is_refused_with_its_canonical_spelling() -> None:
    """gRPC's client-side name check ignores case (see test_peer_checks.py): names are lowercase, so that no two
    valid names differ only in case and the check is exact after all."""
    with pytest.raises(ConfigError, match=r"party name 'R0C0'.*write it 'r0c0'"):
        check_party_name("R0C0")
    assert check_party_name("r0c0") == "r0c0"


@pytest.mark.parametrize(
    ("entities", "client"), [(["r0c0", "client"], "client"), (["r0c0", "r0c0"], "client"), (["r0c0"], "coordinator")]
)
def test_one_name_cannot_be_two_parties(entities: list[str], client: str) -> None:
    with pytest.raises(ConfigError, match="party names must be unique"):
        federation_parties("coordinator", entities, client)


@pytest.mark.parametrize("roles", [(), ("admin",)])
def test_a_certificate_needs_known_roles(roles: tuple[str, ...]) -> None:
    with pytest.raises(ConfigError, match="roles must be one or more of coordinator, entity, client"):
        make_certificates({"r0c0": roles})  # type: ignore[dict-item]


def test_expired_certificate_is_named(tmp_path: Path) -> None:
    tls = write_party(tmp_path, "r0c0", valid_days=1, now=datetime.datetime(2020, 1, 1, tzinfo=datetime.UTC))
    with pytest.raises(ConfigError, match=r"expired on 2020-01-0.*ppsvm certs"):
        tls.read()


def test_missing_tls_file_is_named(tmp_path: Path) -> None:
    tls = write_party(tmp_path, "r0c0")
    tls.key.unlink()
    with pytest.raises(ConfigError, match="cannot read key file .*r0c0.key"):
        tls.read()


def test_plaintext_needs_an_explicit_choice(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with pytest.raises(ConfigError, match="no \\[tls\\] table.*--insecure"):
        choose_tls(None, insecure=False, source=tmp_path / "federation.toml")
    tls = write_party(tmp_path, "coordinator")
    assert choose_tls(tls, insecure=False, source=tmp_path) is tls
    with caplog.at_level("WARNING"):
        assert choose_tls(tls, insecure=True, source=tmp_path) is None
    assert "TLS is OFF" in caplog.text


class FakeRpcError(grpc.RpcError):
    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        self._code, self._details = code, details

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details


def unavailable() -> FakeRpcError:
    return FakeRpcError(grpc.StatusCode.UNAVAILABLE, "connection refused")


def test_unavailable_is_retried_then_named(monkeypatch: pytest.MonkeyPatch) -> None:
    pauses: list[float] = []
    monkeypatch.setattr(client_module.time, "sleep", pauses.append)
    client = EntityClient(FederationEntity("r0c1", "127.0.0.1:9", 0, 1), tls=None, attempts=4)
    failures = iter([unavailable(), unavailable()])

    def flaky() -> str:
        error = next(failures, None)
        if error is not None:
            raise error
        return "answer"

    assert client._call("Metadata", flaky) == "answer"
    assert pauses == [0.5, 1.0]

    def dead() -> str:
        raise unavailable()

    pauses.clear()
    with pytest.raises(EntityError, match=r"entity r0c1 at 127.0.0.1:9 is unreachable \(Metadata; 4 attempts"):
        client._call("Metadata", dead)
    assert pauses == [0.5, 1.0, 2.0]
    client.close()


def test_an_entitys_refusal_is_marked_as_one_and_an_absent_entity_is_not(monkeypatch: pytest.MonkeyPatch) -> None:
    """The prediction service asks again request by request after a refusal only (ppsvm.coordinator.serve)."""
    monkeypatch.setattr(client_module.time, "sleep", lambda seconds: None)
    client = EntityClient(FederationEntity("r0c1", "127.0.0.1:9", 0, 1), tls=None, attempts=2)
    refusal = FakeRpcError(grpc.StatusCode.INVALID_ARGUMENT, "unknown record id(s) 'ab12' (1 of 3)")
    for error, refused in ((refusal, True), (unavailable(), False)):

        def fail(error: grpc.RpcError = error) -> str:
            raise error

        with pytest.raises(EntityError) as caught:
            client._call("KernelBlock", fail)
        assert caught.value.refused is refused, str(caught.value)
    client.close()


def test_a_kernel_stream_is_retried_only_while_no_row_was_folded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows already folded into K would be folded twice by a repeated stream: such a failure is final."""
    monkeypatch.setattr(client_module.time, "sleep", lambda seconds: None)
    client = EntityClient(FederationEntity("r0c1", "127.0.0.1:9", 0, 1), tls=None, attempts=4)
    block = np.arange(12.0).reshape(6, 2)
    request = pb.KernelRequest(mbar=2)
    calls: list[str] = []

    def stream(fail_after: int | None) -> Callable[..., Iterator[bytes]]:
        def call(request: pb.KernelRequest, timeout: float) -> Iterator[bytes]:
            calls.append("KernelBlock")
            for sent, chunk in enumerate(encode_arrays({"kernel": block}, chunk_bytes=32)):
                if sent == fail_after:
                    raise unavailable()
                yield chunk.SerializeToString()

        return call

    plans = iter([0, None])  # the first stream fails before any row, the second is whole
    monkeypatch.setattr(client, "kernel_messages", lambda *a, **k: stream(next(plans))(*a, **k))
    assert np.array_equal(client.kernel_block(request, 6, "train records"), block)
    assert calls == ["KernelBlock"] * 2

    calls.clear()
    folded: list[np.ndarray] = []
    monkeypatch.setattr(client, "kernel_messages", stream(2))  # after 2 messages, 4 rows
    with pytest.raises(EntityError, match=r"unreachable \(KernelBlock; 1 attempts"):
        client.kernel_rows(request, 6, "train records", lambda start, rows: folded.append(rows))
    assert calls == ["KernelBlock"] and np.array_equal(np.concatenate(folded), block[:4])
    client.close()
