"""Health checks against real `ppsvm entity` processes: `coordinator status`, `ppsvm health` as compose runs it.

One 1 x 2 split of WDBC serves the federation test; the compose test starts one entity from docker/demo/r0c0's own
files, so the healthcheck's command line and the demo's certificates are the ones docker-compose.yml uses.
"""

from __future__ import annotations

import datetime
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import grpc
import pytest
from cryptography import x509
from grpc_health.v1 import health_pb2

from ppsvm.config import load_federation
from ppsvm.wire.certs import CA_FILE, CA_KEY_FILE
from ppsvm.wire.grpc_util import open_channel
from ppsvm.wire.health import WATCH_METHOD, check_health
from ppsvm.wire.rpc import ppsvm_pb2 as pb
from ppsvm.wire.rpc import ppsvm_pb2_grpc as pb_grpc
from ppsvm.wire.tls import TlsFiles

from ..certificates import sign_leaf
from .conftest import REPO, WDBC, WDBC_OPTIONS, ppsvm, split, start_entity_process

TIMEOUT_S = 10.0


def status(federation_path: Path, *options: str) -> subprocess.CompletedProcess[str]:
    return ppsvm("coordinator", "status", "--federation", str(federation_path), *options, check=False)


def test_status_names_each_entity_and_the_one_that_is_gone(federation, tmp_path: Path) -> None:
    """All SERVING: exit 0, one line each. A certificate without any role may ask Check and nothing else, and Watch
    is refused. An entity killed: named unreachable with the reason, exit 1."""
    split_dir = split(tmp_path / "split", WDBC, 1, 2, *WDBC_OPTIONS)
    # `ppsvm certs` keeps the CA key (split does not), so that the test can sign a certificate with no role.
    ppsvm("certs", "--federation", str(split_dir / "federation.toml"), "--out", str(split_dir), "--overwrite")
    running = federation(1, 2, prepared=split_dir)
    entities = load_federation(running.federation_path).entities

    result = status(running.federation_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    for entity, line in zip(entities, lines[:-1], strict=True):
        assert line.split()[:3] == [entity.id, entity.address, "SERVING"] and line.endswith(" ms")
    assert lines[-1] == "all 2 serving"
    document = json.loads(status(running.federation_path, "--json").stdout)
    assert document["ok"] is True and [e["status"] for e in document["entities"]] == ["SERVING", "SERVING"]

    cert, key = sign_leaf(
        (split_dir / CA_KEY_FILE).read_bytes(),
        (split_dir / CA_FILE).read_bytes(),
        "nobody",
        datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5),
        [x509.DNSName("nobody")],
    )
    (tmp_path / "nobody.pem").write_bytes(cert)
    (tmp_path / "nobody.key").write_bytes(key)
    nobody = TlsFiles(split_dir / CA_FILE, tmp_path / "nobody.pem", tmp_path / "nobody.key", tmp_path / "x.toml")
    first = entities[0]
    assert check_health(first.address, tls=nobody, peer=first.id, deadline=TIMEOUT_S).status == "SERVING"
    with open_channel(first.address, tls=nobody, peer=first.id) as channel:
        with pytest.raises(grpc.RpcError) as refused:
            pb_grpc.EntityStub(channel).Metadata(pb.Empty(), timeout=TIMEOUT_S)
        assert refused.value.code() is grpc.StatusCode.PERMISSION_DENIED
    coordinator = load_federation(running.federation_path).tls
    with open_channel(first.address, tls=coordinator, peer=first.id) as channel:
        watch = channel.unary_stream(
            WATCH_METHOD,
            request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
            response_deserializer=health_pb2.HealthCheckResponse.FromString,
        )
        with pytest.raises(grpc.RpcError) as unserved:
            list(watch(health_pb2.HealthCheckRequest(), timeout=TIMEOUT_S))
        assert unserved.value.code() is grpc.StatusCode.UNIMPLEMENTED

    victim = running.processes.processes[1]
    victim.kill()
    victim.wait()
    result = status(running.federation_path)
    assert result.returncode == 1
    lines = result.stdout.strip().splitlines()
    assert lines[0].split()[2] == "SERVING"
    assert lines[1].split()[:3] == [entities[1].id, entities[1].address, "unreachable"]
    assert "Connection refused" in lines[1] or "failed to connect" in lines[1]
    assert lines[-1] == f"1 of 2 serving; not serving: {entities[1].id}"


def compose_healthcheck(service: str) -> list[str]:
    """The healthcheck command docker-compose.yml gives ``service`` (its flow list is JSON), without "CMD"."""
    text = (REPO / "docker-compose.yml").read_text()
    block = text[text.index(f"\n  {service}:\n") :]
    found = re.search(r"test: (\[.*?\])", block, re.DOTALL)
    assert found is not None, f"no healthcheck for {service}"
    command = json.loads(found.group(1))
    assert command[0] == "CMD"
    return command[1:]


def test_the_compose_healthcheck_passes_against_a_demo_entity_and_fails_without_its_release_log(
    tmp_path: Path,
) -> None:
    """docker-compose.yml's healthcheck for r0c0, run as written (paths under /ppsvm and port 50051 mapped to a copy
    of docker/demo/r0c0's files and the port this entity bound): SERVING, exit 0. With its release log removed the
    entity could record nothing: NOT_SERVING, exit 1."""
    demo = REPO / "docker" / "demo" / "r0c0"
    files = ("r0c0.toml", "r0c0.csv", "column-block-0.secret", "pair-r0c0-r0c1.secret", "record-ids.key", "ca.pem")
    for name in (*files, "r0c0.pem", "r0c0.key"):  # what docker-compose.yml mounts into r0c0's container
        shutil.copy(demo / name, tmp_path / name)
    with (tmp_path / "entity.log").open("w") as log:
        process, address = start_entity_process(
            tmp_path / "r0c0.toml", "127.0.0.1:0", log, "r0c0", 60, "--new-release-log"
        )
        try:
            command = [
                address if arg == "127.0.0.1:50051" else arg.replace("/ppsvm/", f"{tmp_path}/")
                for arg in compose_healthcheck("r0c0")
            ]
            assert command[0] == "ppsvm"
            probe = subprocess.run(
                [sys.executable, "-m", "ppsvm", *command[1:]], capture_output=True, text=True, timeout=60
            )
            assert probe.returncode == 0, probe.stdout + probe.stderr
            assert probe.stdout.startswith(f"{address}: SERVING (")
            (tmp_path / "r0c0.releases.jsonl").unlink()
            probe = subprocess.run(
                [sys.executable, "-m", "ppsvm", *command[1:]], capture_output=True, text=True, timeout=60
            )
            assert probe.returncode == 1 and f"{address}: NOT_SERVING" in probe.stdout
        finally:
            process.terminate()
            process.wait(timeout=30)
    assert "NOT_SERVING: release log" in (tmp_path / "entity.log").read_text()
