"""Metrics and log fields of ppsvm's servers: counted per call, in a registry per server, and no label carries data.

The entities here are the servers ``ppsvm entity`` runs (``start_entity``), in this process, over mutual TLS.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import numpy as np
import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from ppsvm.api.federation import Federation
from ppsvm.config import federation_at_addresses, load_entity_config, load_federation
from ppsvm.core.randomness import record_pseudonyms
from ppsvm.data.dataset import Dataset
from ppsvm.data.partition import ID_KEY_FILE, SplitOptions, split_dataset
from ppsvm.entity.server import start_entity
from ppsvm.errors import ConfigError
from ppsvm.logs import ACCESS_LOGGER, JsonFormatter, call_fields, valid_request_id
from ppsvm.wire.grpc_util import open_channel
from ppsvm.wire.health import ENTITY_SERVICE, HEALTH_SERVICE, check_health
from ppsvm.wire.metrics import RpcMetrics, serve_metrics, write_training_metrics
from ppsvm.wire.rpc import ppsvm_pb2 as pb
from ppsvm.wire.rpc import ppsvm_pb2_grpc as pb_grpc

ROWS, FEATURES = 120, 6


@dataclasses.dataclass
class Served:
    federation: Federation
    split_dir: Path
    dataset: Dataset
    registries: dict[str, CollectorRegistry]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    """A 2 x 2 checkerboard of records 'patient-00000', ... served in this process, each entity with its metrics."""
    rng = np.random.default_rng(3)
    X = np.round(rng.normal(size=(ROWS, FEATURES)) * 100, 4)
    dataset = Dataset(
        ids=np.array([f"patient-{k:05d}" for k in range(ROWS)]),
        X=X,
        y=np.where(X[:, 0] > X[:, 1], 1.0, -1.0),
        feature_names=tuple(f"x{k}" for k in range(FEATURES)),
        source="synthetic",
    )
    split = split_dataset(dataset, SplitOptions(rows=2, cols=2, out_dir=tmp_path / "cells", test_fraction=0.25, seed=1))
    servers, ports, registries = [], {}, {}
    try:
        for path in split.entity_config_paths:
            config = dataclasses.replace(load_entity_config(path), listen="127.0.0.1:0")
            metrics = RpcMetrics()
            server, port = start_entity(config, metrics=metrics)
            servers.append(server)
            ports[config.id], registries[config.id] = port, metrics.registry
        planned = load_federation(split.federation_path)
        live = tmp_path / "federation.live.toml"
        live.write_text(federation_at_addresses(planned, [f"127.0.0.1:{ports[e.id]}" for e in planned.entities]))
        yield Served(Federation.from_toml(live), split.federation_path.parent, dataset, registries)
    finally:
        for server in servers:
            server.stop(0).wait()


def samples(registry: CollectorRegistry) -> list[tuple[str, dict[str, str], float]]:
    return [(s.name, s.labels, s.value) for family in registry.collect() for s in family.samples]


def value(registry: CollectorRegistry, name: str, **labels: str) -> float:
    found = [v for n, found_labels, v in samples(registry) if n == name and labels.items() <= found_labels.items()]
    return sum(found)


def test_no_label_carries_a_record_id_or_a_value(served: Served) -> None:
    """After a training, a prediction by real record ids and a refused request naming real ids, every label value of
    every entity's registry is checked against every record id, every pseudonym the entities publish for them, and
    every feature value as the cells' CSVs write it: none equals or contains one. Label values also come from the
    fixed sets the module promises."""
    model_path = served.split_dir / "model.json"
    model = served.federation.train(model_path, nu=1.0, mu=0.1, mbar=2, basis="paper")
    key = (served.split_dir / ID_KEY_FILE).read_text().strip()
    ids = [str(record) for record in served.dataset.ids]
    decisions = served.federation.decision_function(model, ids[:10], id_key=bytes.fromhex(key))
    assert decisions.shape == (10,)
    entity = served.federation.config.entities[0]
    with open_channel(entity.address, tls=served.federation.config.tls, peer=entity.id) as channel:
        request = pb.KernelRequest(
            kernel=pb.GAUSSIAN, mbar=2, mu=0.1, ids=pb.RecordIds(ids=["patient-99999", *ids[:3]])
        )
        with pytest.raises(grpc.RpcError):  # a request naming ids the entity does not hold: refused
            list(pb_grpc.EntityStub(channel).KernelBlock(request, timeout=10))

    forbidden = set(ids) | set(record_pseudonyms(bytes.fromhex(key), ids)) | {"patient-99999"}
    for cell in served.split_dir.glob("r*c*.csv"):  # feature values as the CSVs write them (id, label, split first)
        for line in cell.read_text().splitlines()[1:]:
            forbidden.update(field for field in line.split(",")[3:] if len(field) >= 4)
    entities = set(served.registries)
    allowed = {
        "service": {ENTITY_SERVICE, HEALTH_SERVICE},
        "method": {"Metadata", "LogDigest", "Records", "FeatureRange", "KernelBlock", "AcceptModel", "Check"},
        "peer": {"coordinator"},
        "code": {code.name for code in grpc.StatusCode},
        "entity": entities,
        "mode": {"random-kernel"},
        "column_block": {"0", "1"},
        "rpc": {"Records", "FeatureRange", "KernelBlock"},
    }
    for entity, registry in served.registries.items():
        labelled = [(name, labels) for name, labels, _ in samples(registry) if labels]
        assert labelled
        for name, labels in labelled:
            for label, text in labels.items():
                if label == "le":  # histogram bucket bounds: fixed numbers
                    continue
                assert text in allowed[label], (entity, name, label, text)
                assert not any(secret == text or secret in text for secret in forbidden), (entity, name, label, text)

    first = served.registries["r0c0"]
    assert value(first, "ppsvm_rpc_handled_total", method="KernelBlock", code="OK") >= 2  # training and prediction
    refused = value(first, "ppsvm_rpc_handled_total", method="KernelBlock") - value(
        first, "ppsvm_rpc_handled_total", method="KernelBlock", code="OK"
    )
    assert refused == 1
    assert value(first, "ppsvm_rpc_sent_bytes_total", method="KernelBlock") > 0
    assert value(first, "ppsvm_rpc_duration_seconds_count", method="Records") == value(
        first, "ppsvm_rpc_requests_total", method="Records"
    )
    assert value(first, "ppsvm_entity_releases_total", rpc="KernelBlock") >= 2
    assert value(first, "ppsvm_rpc_in_progress") == 0


def test_a_registry_per_server(served: Served) -> None:
    """Four servers in one process, each counting only its own calls (the global registry would refuse the second)."""
    address = served.federation.config.entities[0].address
    tls = served.federation.config.tls
    assert check_health(address, tls=tls, peer="r0c0", deadline=10).serving
    checks = {entity: value(r, "ppsvm_rpc_handled_total", method="Check") for entity, r in served.registries.items()}
    assert checks == {"r0c0": 1, "r0c1": 0, "r1c0": 0, "r1c1": 0}


def test_request_id_from_the_caller_reaches_the_handlers_log_lines(
    served: Served, caplog: pytest.LogCaptureFixture
) -> None:
    """A safe x-request-id is taken and set on the handler's lines and the access line; an unsafe one is replaced."""
    entity = served.federation.config.entities[0]
    caplog.set_level(logging.DEBUG)
    # An earlier test in this worker may have run configure_logging, which quiets the access logger at text/INFO.
    caplog.set_level(logging.DEBUG, logger=ACCESS_LOGGER)
    with open_channel(entity.address, tls=served.federation.config.tls, peer=entity.id) as channel:
        stub = pb_grpc.EntityStub(channel)
        stub.Metadata(pb.Empty(), timeout=10, metadata=[("x-request-id", "join-me-42")])
        stub.Metadata(pb.Empty(), timeout=10, metadata=[("x-request-id", "bad id forged=1")])

    def served_ids() -> list[str]:
        served_lines = [r for r in caplog.records if r.name == "ppsvm.access" and getattr(r, "peer", None)]
        return [r.request_id for r in served_lines if r.method.endswith("/Metadata")]  # type: ignore[attr-defined]

    # The server writes its access line once the reply is sent, so it may come after the client has the reply.
    waited = time.monotonic() + 10
    while len(served_ids()) < 2 and time.monotonic() < waited:
        time.sleep(0.01)
    ids = served_ids()
    assert ids[0] == "join-me-42"
    assert ids[1] != "bad id forged=1" and valid_request_id(ids[1]) == ids[1]
    client_lines = [r for r in caplog.records if r.name == "ppsvm.access" and getattr(r, "entity", None) == entity.id]
    assert "join-me-42" in {r.request_id for r in client_lines}  # type: ignore[attr-defined]


def test_valid_request_id() -> None:
    assert valid_request_id("0123abcdEF-_.") == "0123abcdEF-_."
    for bad in (None, "", "x" * 65, "a b", "a\nb", '{"x"}', b"bytes"):
        assert valid_request_id(bad) is None


def test_json_lines_carry_the_fields_set_for_the_call() -> None:
    record = logging.LogRecord("ppsvm.test", logging.WARNING, __file__, 1, "refused %s", ("Metadata",), None)
    with call_fields(peer="coordinator", method="/ppsvm.v1.Entity/Metadata", request_id="abc"):
        from ppsvm.logs import _AddFields

        _AddFields().filter(record)
    document = json.loads(JsonFormatter().format(record))
    assert document["level"] == "warning" and document["logger"] == "ppsvm.test"
    assert document["message"] == "refused Metadata" and document["time"].endswith("Z")
    assert {document[k] for k in ("peer", "method", "request_id")} == {
        "coordinator",
        "/ppsvm.v1.Entity/Metadata",
        "abc",
    }


def test_a_taken_metrics_port_is_a_clear_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ConfigError, match=f"cannot serve metrics on 127.0.0.1:{port}: the port is in use"):
            serve_metrics(CollectorRegistry(), "127.0.0.1", port)


def test_metrics_endpoint_serves_the_registry() -> None:
    import urllib.request

    metrics = RpcMetrics()
    metrics.requests.labels("ppsvm.v1.Entity", "Metadata", "coordinator").inc()
    endpoint = serve_metrics(metrics.registry, "127.0.0.1", 0)
    try:
        assert endpoint.url.startswith("http://127.0.0.1:")
        text = urllib.request.urlopen(endpoint.url, timeout=10).read().decode()
    finally:
        endpoint.close()
    families = {family.name: family for family in text_string_to_metric_families(text)}
    assert families["ppsvm_rpc_requests"].samples[0].value == 1


def test_training_textfile(tmp_path: Path) -> None:
    path = tmp_path / "ppsvm_training.prom"
    write_training_metrics(path, method="random-kernel", seconds=12.5, lp_seconds=0.25, n_train=398)
    families = {family.name: family for family in text_string_to_metric_families(path.read_text())}
    assert families["ppsvm_training_seconds"].samples[0].value == 12.5
    assert families["ppsvm_training_lp_seconds"].samples[0].labels == {"method": "random-kernel"}
    assert families["ppsvm_training_records"].samples[0].value == 398
    assert "ppsvm_training_last_success_timestamp_seconds" in families
