"""Operations over real processes: a real Prometheus server scrapes an entity, and JSON logs of a training hold no data.

Both start `ppsvm entity` processes of a 1 x 2 split of WDBC over mutual TLS, as an organisation would run them.
"""

from __future__ import annotations

import csv
import json
import re
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from ppsvm.config import federation_at_addresses, load_federation
from ppsvm.core.randomness import record_pseudonyms
from ppsvm.data.partition import ID_KEY_FILE
from ppsvm.processes import read_listening_address

from .conftest import WDBC, WDBC_OPTIONS, free_port, ppsvm, ppsvm_process, split

PROMETHEUS = Path("/usr/bin/prometheus")
START_TIMEOUT_S = 60.0


def start_entities(split_dir: Path, logs: Path, *global_flags: str, metrics_port: int | None = None) -> list[Any]:
    """One `ppsvm [GLOBAL_FLAGS] entity` per cell, stderr to logs/<id>.log; the first with --metrics-port.

    Returns the processes; the live federation file is written to split_dir/federation.live.toml.
    """
    planned = load_federation(split_dir / "federation.toml")
    processes, addresses = [], []
    logs.mkdir(exist_ok=True)
    try:
        for k, entity in enumerate(planned.entities):
            flags = ["--metrics-port", str(metrics_port)] if metrics_port is not None and k == 0 else []
            stderr = (logs / f"{entity.id}.log").open("w")
            process = ppsvm_process(
                *global_flags,
                "entity",
                "--config",
                str(split_dir / f"{entity.id}.toml"),
                "--listen",
                "127.0.0.1:0",
                *flags,
                stderr=stderr,
            )
            processes.append(process)
            addresses.append(read_listening_address(process, f"entity {entity.id}", START_TIMEOUT_S))
    except BaseException:
        stop(processes)
        raise
    (split_dir / "federation.live.toml").write_text(federation_at_addresses(planned, addresses))
    return processes


def stop(processes: list[Any]) -> None:
    for process in processes:
        if process.poll() is None:
            process.terminate()
    for process in processes:
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as answer:
        return json.loads(answer.read().decode())


def test_real_prometheus_scrapes_an_entity(tmp_path: Path) -> None:
    """An entity with --metrics-port answers `coordinator status`; Prometheus (Debian's package, run as a plain
    process with a 1 s scrape interval) sees the target up and answers a query for the health checks it counted."""
    if not PROMETHEUS.exists():
        pytest.skip(
            f"{PROMETHEUS} is missing: the Prometheus server is needed (Debian: apt-get install prometheus; "
            ".ci/run does this)"
        )
    split_dir = split(tmp_path / "split", WDBC, 1, 2, *WDBC_OPTIONS)
    metrics_port = free_port()
    entities = start_entities(split_dir, tmp_path / "logs", metrics_port=metrics_port)
    prometheus = None
    try:
        status = ppsvm("coordinator", "status", "--federation", str(split_dir / "federation.live.toml"))
        assert "all 2 serving" in status.stdout
        config = tmp_path / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
            "scrape_configs:\n  - job_name: ppsvm-entity\n    static_configs:\n"
            f"      - targets: ['127.0.0.1:{metrics_port}']\n"
        )
        web = f"127.0.0.1:{free_port()}"
        prometheus = subprocess.Popen(
            [
                str(PROMETHEUS),
                f"--config.file={config}",
                f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                f"--web.listen-address={web}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=(tmp_path / "prometheus.log").open("w"),
        )
        query = 'ppsvm_rpc_handled_total{service="grpc.health.v1.Health",method="Check",code="OK",peer="coordinator"}'
        deadline = time.monotonic() + 60
        result: list[Any] = []
        while time.monotonic() < deadline:
            assert prometheus.poll() is None, (tmp_path / "prometheus.log").read_text()[-3000:]
            try:
                targets = get_json(f"http://{web}/api/v1/targets")["data"]["activeTargets"]
                if targets and targets[0]["health"] == "up":
                    answer = get_json(f"http://{web}/api/v1/query?query={urllib.parse.quote(query)}")
                    result = answer["data"]["result"]
                    if result:
                        break
            except OSError:
                pass  # not listening yet
            time.sleep(0.5)
        assert result, "Prometheus never answered the query: " + (tmp_path / "prometheus.log").read_text()[-3000:]
        assert result[0]["metric"]["job"] == "ppsvm-entity" and float(result[0]["value"][1]) >= 1
        info = get_json(f"http://{web}/api/v1/query?query=ppsvm_entity_info")["data"]["result"]
        assert info[0]["metric"]["entity"] == "r0c0" and info[0]["metric"]["mode"] == "random-kernel"
    finally:
        if prometheus is not None:
            prometheus.terminate()
            prometheus.wait(timeout=30)
        stop(entities)
        shutil.rmtree(tmp_path / "tsdb", ignore_errors=True)


# Substrings of a log line that the clock, the network, the test's own paths or the tuning's own results make, never
# the data: masked before the search, so that a duration of "13.4 ms" is not taken for a feature value 13.4, nor a
# cross-validated error rate of 9/398 = "0.0226" for a WDBC value that happens to print the same.
_MACHINE_MADE = re.compile(
    r"\d+(?:\.\d+)?e?[-+]?\d*\s?(?:ms|s)\b"  # durations: 13.4 ms, 0.01 s, 1s elapsed
    r"|\d+m\d+s"  # 3m05s
    r"|\d{1,3}(?:\.\d{1,3}){3}:\d+"  # addresses with ports
    r"|\bipv[46]:\S+"  # gRPC peer strings
    r"|\b(?:nu|mu) = [0-9.e+-]+"  # the grid point tuning chose
    r"|(?:error rate|relative error) [0-9.]+"  # and its cross-validated error
    r"|Brier score [0-9.]+ \([0-9.]+ for the class frequency\)"  # the calibration's out-of-fold figures
)


def cell_secrets(split_dir: Path) -> set[str]:
    """Every record id of the split's cells, its published pseudonym, and every feature value as the CSV writes it,
    at least 4 characters long."""
    key = bytes.fromhex((split_dir / ID_KEY_FILE).read_text().strip())
    secrets: set[str] = set()
    ids: list[str] = []
    for cell in sorted(split_dir.glob("r*c*.csv")):
        with cell.open(newline="") as handle:
            for row in csv.DictReader(handle):
                ids.append(row["id"])
                secrets.update(v for name, v in row.items() if name not in ("id", "label", "split") and len(v) >= 4)
    secrets.update(record for record in ids if len(record) >= 4)
    secrets.update(record_pseudonyms(key, ids))
    return secrets


def test_json_logs_of_a_training_hold_no_record_id_or_value(tmp_path: Path) -> None:
    """Entities and `coordinator train` run with `--log-format json -v`; every line each process writes to stderr is
    one JSON object, the entities' request ids join the coordinator's, and no line holds a record id, a pseudonym
    or a feature value of any cell.

    The rule for "holds": the cells' CSVs are read back and every record id, its pseudonym and every feature value
    *as the CSV writes it* (e.g. 0.1184, 1001.0, 842302) of at least 4 characters is searched for as a whole token
    (not inside a longer number or word) in every field of every line except time and request_id. Shorter values
    ("1", "0.0", "-1") would match any count or code and tell nothing; what the clock, the network and the test's
    temporary paths put in a line (durations, addresses, paths) is masked first, so that "in 13.4 ms" is not taken
    for a feature value 13.4.
    """
    split_dir = split(tmp_path / "split", WDBC, 1, 2, *WDBC_OPTIONS)
    logs = tmp_path / "logs"
    entities = start_entities(split_dir, logs, "--log-format", "json", "-v")
    try:
        train = ppsvm(
            "--log-format",
            "json",
            "-v",
            "coordinator",
            "train",
            "--federation",
            str(split_dir / "federation.live.toml"),
            "--model-out",
            str(split_dir / "model.json"),
            "--metrics-textfile",
            str(tmp_path / "ppsvm_training.prom"),
        )
    finally:
        stop(entities)
    assert "ppsvm_training_lp_seconds" in (tmp_path / "ppsvm_training.prom").read_text()
    streams = {"coordinator": train.stderr, **{path.stem: path.read_text() for path in logs.glob("*.log")}}
    documents: dict[str, list[dict[str, Any]]] = {}
    for name, text in streams.items():
        lines = text.splitlines()
        assert lines, f"{name} logged nothing"
        documents[name] = [json.loads(line) for line in lines]  # every line one JSON object
        for document in documents[name]:
            assert {"time", "level", "logger", "message"} <= document.keys(), document

    # Join: each request id the coordinator sent appears on the entity's line for the same call.
    sent = {d["request_id"]: d for d in documents["coordinator"] if d["logger"] == "ppsvm.access"}
    served = [d for name in ("r0c0", "r0c1") for d in documents[name] if d["logger"] == "ppsvm.access"]
    assert served and all(d["request_id"] in sent for d in served)
    assert all(d["entity"] in ("r0c0", "r0c1") and d["peer"] == "coordinator" for d in served)
    assert {d["method"].rsplit("/", 1)[1] for d in served} >= {"Metadata", "Records", "KernelBlock", "AcceptModel"}
    kernel = [d for name in ("r0c0", "r0c1") for d in documents[name] if "kernel block" in d["message"]]
    assert kernel and all(d["request_id"] in sent and d["method"].endswith("/KernelBlock") for d in kernel)

    secrets = cell_secrets(split_dir)
    assert len(secrets) > 1000
    pattern = re.compile(
        r"(?<![0-9A-Za-z.])(?:" + "|".join(map(re.escape, sorted(secrets, key=len, reverse=True))) + r")(?![0-9A-Za-z])"
    )
    for name, lines in documents.items():
        for document in lines:
            text = " ".join(str(v) for k, v in document.items() if k not in ("time", "request_id", "duration_ms"))
            text = _MACHINE_MADE.sub(" ", text.replace(str(tmp_path), "<tmp>"))
            found = pattern.search(text)
            assert found is None, f"{name} logged {found.group()!r}: {document}"
