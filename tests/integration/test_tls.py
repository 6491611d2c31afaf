"""Mutual TLS between real processes: who may call whom, and what a misconfiguration says.

Every federation the fixtures start runs with the certificates `ppsvm split` made.
"""

from __future__ import annotations

import datetime
import stat
from pathlib import Path

import grpc
import pytest

from ppsvm.config import federation_at_addresses, load_entity_config, load_federation
from ppsvm.core.randomness import new_secret_hex
from ppsvm.errors import EntityError
from ppsvm.processes import EntityProcesses
from ppsvm.wire.certs import COORDINATOR, ENTITY, make_certificates
from ppsvm.wire.chunks import decode_arrays
from ppsvm.wire.grpc_util import open_channel
from ppsvm.wire.rpc import ppsvm_pb2 as pb
from ppsvm.wire.rpc import ppsvm_pb2_grpc as pb_grpc
from ppsvm.wire.tls import TlsFiles

from .conftest import WDBC, WDBC_OPTIONS, coordinator_channel, ppsvm, ppsvm_process, split

TRAIN = ("--mbar", "5", "--nu", "1", "--mu", "0.03")


def _as_party(split_dir: Path, name: str) -> TlsFiles:
    return TlsFiles(
        ca=split_dir / "ca.pem", cert=split_dir / f"{name}.pem", key=split_dir / f"{name}.key", source=split_dir
    )


def test_entity_accepts_only_its_coordinator(federation) -> None:
    run = federation(1, 2)
    target = load_federation(run.federation_path).cell(0, 0)
    with coordinator_channel(run.federation_path, target) as channel:
        assert pb_grpc.EntityStub(channel).Metadata(pb.Empty(), timeout=30).entity_id == "r0c0"
    # Another party of the same federation, with a valid certificate from the same CA, is refused.
    with open_channel(target.address, tls=_as_party(run.split_dir, "r0c1"), peer="r0c0") as channel:
        with pytest.raises(grpc.RpcError) as refused:
            list(
                pb_grpc.EntityStub(channel).KernelBlock(
                    pb.KernelRequest(kernel=pb.LINEAR, mbar=2, record_set=pb.TRAIN), timeout=30
                )
            )
    assert refused.value.code() is grpc.StatusCode.PERMISSION_DENIED
    assert "r0c1 may not call /ppsvm.v1.Entity/KernelBlock" in refused.value.details()
    assert "accepts only coordinator" in refused.value.details()
    # A plaintext caller does not get past the handshake.
    with grpc.insecure_channel(target.address) as channel:
        with pytest.raises(grpc.RpcError) as plaintext:
            pb_grpc.EntityStub(channel).Metadata(pb.Empty(), timeout=10)
    assert plaintext.value.code() is grpc.StatusCode.UNAVAILABLE
    run.train(*TRAIN)  # the entity kept serving


def test_prediction_service_answers_predict_only_to_client_certificates(federation) -> None:
    """`coordinator serve` with the certificates `ppsvm split` made: the client certificate (and the coordinator's,
    which holds the client role too) may ask for predictions; an entity's certificate, from the same CA, may not ask
    about any record; Status stays open to every party."""
    run = federation(1, 2)
    run.train(*TRAIN)
    with run.serve() as address:
        record = load_federation(run.federation_path).entities[0]
        with coordinator_channel(run.federation_path, record) as channel:
            ids = list(decode_arrays(pb_grpc.EntityStub(channel).Records(pb.Empty(), timeout=30))["test_ids"][:2])
        for name in ("client", "coordinator"):
            with open_channel(address, tls=_as_party(run.split_dir, name), peer="coordinator") as channel:
                reply = pb_grpc.CoordinatorStub(channel).Predict(pb.PredictRequest(ids=ids), timeout=30)
            assert [p.id for p in reply.predictions] == ids
        with open_channel(address, tls=_as_party(run.split_dir, "r0c1"), peer="coordinator") as channel:
            stub = pb_grpc.CoordinatorStub(channel)
            with pytest.raises(grpc.RpcError) as refused:
                stub.Predict(pb.PredictRequest(ids=ids), timeout=30)
            assert stub.Status(pb.Empty(), timeout=30).requests_served == 2 * len(ids)
        assert refused.value.code() is grpc.StatusCode.PERMISSION_DENIED
        assert (
            "r0c1 may not call /ppsvm.v1.Coordinator/Predict: that needs a certificate with the role client"
            in refused.value.details()
        )


def test_coordinator_checks_each_entity_identity(federation) -> None:
    run = federation(1, 2)
    planned = load_federation(run.split_dir / "federation.toml")
    swapped = run.split_dir / "swapped.toml"
    swapped.write_text(federation_at_addresses(planned, list(reversed(run.processes.addresses))))
    result = ppsvm(
        "coordinator",
        "train",
        "--federation",
        str(swapped),
        "--model-out",
        str(run.split_dir / "m.json"),
        *TRAIN,
        check=False,
    )
    assert result.returncode == 1
    assert "TLS handshake failed" in result.stderr and "certificate for 'r0c0'" in result.stderr
    assert not (run.split_dir / "m.json").exists()


def test_foreign_certificate_authority_is_refused(federation, tmp_path: Path) -> None:
    run = federation(1, 2)
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    for filename, pem in make_certificates({"coordinator": (COORDINATOR,)}).items():
        (foreign / filename).write_bytes(pem.text)
    live = load_federation(run.federation_path)
    text = federation_at_addresses(live, run.processes.addresses).replace(str(run.split_dir.resolve()), str(foreign))
    (tmp_path / "foreign.toml").write_text(text)
    result = ppsvm(
        "coordinator",
        "train",
        "--federation",
        str(tmp_path / "foreign.toml"),
        "--model-out",
        str(tmp_path / "m.json"),
        *TRAIN,
        check=False,
    )
    assert result.returncode == 1 and "TLS handshake failed" in result.stderr and "r0c0" in result.stderr
    run.train(*TRAIN)  # the entities kept serving the rightful coordinator


def test_expired_certificate_stops_the_entity_at_start(tmp_path: Path) -> None:
    split_dir = split(tmp_path / "split", WDBC, 1, 1, *WDBC_OPTIONS)
    old = make_certificates({"r0c0": (ENTITY,)}, valid_days=1, now=datetime.datetime(2021, 3, 1, tzinfo=datetime.UTC))
    (split_dir / "r0c0.pem").write_bytes(old["r0c0.pem"].text)
    (split_dir / "r0c0.key").write_bytes(old["r0c0.key"].text)
    with pytest.raises(
        EntityError,
        match=r"(?s)exited with code 1.*r0c0.toml \[tls\]: the certificate in cert file expired on 2021-03-0",
    ):
        EntityProcesses([split_dir / "r0c0.toml"]).__enter__()


@pytest.mark.long
def test_plaintext_only_when_asked_for_and_then_warned(tmp_path: Path) -> None:
    split_dir = split(tmp_path / "split", WDBC, 1, 2, *WDBC_OPTIONS)
    configs = [split_dir / "r0c0.toml", split_dir / "r0c1.toml"]
    for config in configs:
        config.write_text(config.read_text().split("[tls]")[0])
    with pytest.raises(EntityError, match=r"has no \[tls\] table.*--insecure"):
        EntityProcesses(configs[:1]).__enter__()
    with EntityProcesses(configs, insecure=True) as running:
        live = split_dir / "live.toml"
        live.write_text(federation_at_addresses(load_federation(split_dir / "federation.toml"), running.addresses))
        model = str(split_dir / "m.json")
        secure = ppsvm("coordinator", "train", "--federation", str(live), "--model-out", model, *TRAIN, check=False)
        assert secure.returncode == 1 and "TLS handshake failed" in secure.stderr  # TLS client, plaintext server
        insecure = ppsvm("coordinator", "train", "--federation", str(live), "--model-out", model, "--insecure", *TRAIN)
        assert "TLS is OFF" in insecure.stderr
    entity = ppsvm_process("entity", "--config", str(configs[0]), "--insecure", "--listen", "127.0.0.1:0")
    try:
        assert entity.stdout is not None and entity.stdout.readline().startswith("listening on ")
    finally:
        entity.terminate()
    _, stderr = entity.communicate(timeout=30)
    assert "TLS is OFF (--insecure)" in stderr


def test_mismatched_column_secret_is_caught_before_any_kernel(federation, tmp_path: Path) -> None:
    prepared = split(tmp_path / "prepared", WDBC, 2, 2, *WDBC_OPTIONS)
    (prepared / "other.secret").write_text(new_secret_hex() + "\n")
    config = prepared / "r1c1.toml"
    config.write_text(
        config.read_text().replace('secret_file = "column-block-1.secret"', 'secret_file = "other.secret"')
    )
    assert load_entity_config(config).secret_file == prepared / "other.secret"
    run = federation(2, 2, prepared=prepared)
    result = run.train(*TRAIN, check=False)
    assert result.returncode == 1
    assert "column block 1" in result.stderr and "different column-group secrets" in result.stderr
    assert "r0c1" in result.stderr and "r1c1" in result.stderr
    assert not (run.split_dir / "model.json").exists()


def test_certs_command_names_every_party(tmp_path: Path) -> None:
    split_dir = split(tmp_path / "split", WDBC, 2, 1, *WDBC_OPTIONS)
    out = tmp_path / "certs"
    result = ppsvm("certs", "--federation", str(split_dir / "federation.toml"), "--out", str(out), "--days", "30")
    assert "r0c0.pem and r0c0.key: to r0c0 only" in result.stdout and "ca.key: keep offline" in result.stdout
    for name in ("coordinator", "r0c0", "r1c0"):
        assert stat.S_IMODE((out / f"{name}.key").stat().st_mode) == 0o600
    assert stat.S_IMODE((out / "ca.key").stat().st_mode) == 0o600
    again = ppsvm("certs", "--federation", str(split_dir / "federation.toml"), "--out", str(out), check=False)
    assert again.returncode == 1 and "--overwrite" in again.stderr


def test_audit_reports_conditions_and_what_parties_learn(federation) -> None:
    run = federation(2, 2)
    configs = [
        arg
        for e in load_federation(run.federation_path).entities
        for arg in ("--entity-config", str(run.split_dir / f"{e.id}.toml"))
    ]
    report = ppsvm("audit", "--federation", str(run.federation_path), *configs)
    assert "[     ok] transport: mutual TLS; the coordinator is 'coordinator'" in report.stdout
    assert "column block 1: every entity refuses mbar >= n_j = 15" in report.stdout
    assert "[     ok] features: every column block's entities list the same feature columns" in report.stdout
    assert "- coordinator: record ids, labels" in report.stdout and "every checked condition holds" in report.stdout
    plaintext = ppsvm("audit", "--federation", str(run.federation_path), "--insecure", check=False)
    assert plaintext.returncode == 1 and "[   FAIL] transport: plaintext" in plaintext.stdout
