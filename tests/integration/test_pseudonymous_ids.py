"""Record ids never reach the coordinator: entities publish keyed pseudonyms only.

A 2 x 2 federation of records with distinctive ids (``patient-00017``) trains, evaluates, runs the
entity-alone baselines and serves predictions; then everything the coordinator received (the
Records arrays of every entity) and everything it logged or wrote (debug logs of each command,
the model file, the prediction service's answers) is searched for any real id. The ids it got
must be exactly the pseudonyms of the real ids under the split's record-id key, so the test fails
if the entities sent ids in clear or anything else.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ppsvm.config import federation_at_addresses, load_federation
from ppsvm.coordinator.federation import Session
from ppsvm.core.model import Model
from ppsvm.data.dataset import Dataset
from ppsvm.data.partition import ID_KEY_FILE, SplitOptions, split_dataset
from ppsvm.data.sources import load_cell
from ppsvm.errors import ConfigError
from ppsvm.processes import EntityProcesses
from ppsvm.wire.rpc import ppsvm_pb2 as pb
from ppsvm.wire.rpc import ppsvm_pb2_grpc as pb_grpc

from .conftest import coordinator_channel, ppsvm, ppsvm_process, pseudonyms

PATIENT = re.compile(r"patient-\d{5}")
FLAGS = ("--kernel", "gaussian", "--mbar", "4", "--nu", "1", "--mu", "0.2", "--basis", "paper")


@pytest.fixture(scope="module")
def split_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rng = np.random.default_rng(4)
    X = rng.random((160, 10))
    dataset = Dataset(
        ids=np.array([f"patient-{k:05d}" for k in range(160)]),
        X=X,
        y=np.where(X[:, 0] + X[:, 5] > 1.0, 1.0, -1.0),
        feature_names=tuple(f"x{k}" for k in range(10)),
        source="synthetic patients",
    )
    out = tmp_path_factory.mktemp("pseudonyms") / "split"
    split_dataset(dataset, SplitOptions(rows=2, cols=2, out_dir=out, test_fraction=0.25, seed=1))
    return out


def real_ids(split_dir: Path) -> list[str]:
    cells = [load_cell(path) for path in sorted(split_dir.glob("r*c*.csv"))]
    return sorted({record for cell in cells for record in [*cell.train_ids.tolist(), *cell.test_ids.tolist()]})


def live_federation(split_dir: Path, running: EntityProcesses, name: str = "federation.live.toml") -> Path:
    live = split_dir / name
    live.write_text(federation_at_addresses(load_federation(split_dir / "federation.toml"), running.addresses))
    return live


def test_the_coordinator_receives_logs_and_writes_no_real_id(split_dir: Path) -> None:
    planned = load_federation(split_dir / "federation.toml")
    with EntityProcesses([split_dir / f"{e.id}.toml" for e in planned.entities]) as running:
        live = live_federation(split_dir, running)
        with Session(load_federation(live)) as session:
            received: dict[str, Any] = session.each(lambda client: client.records())
        model = split_dir / "model.json"
        outputs = [
            ppsvm("-v", "coordinator", "train", "--federation", str(live), "--model-out", str(model), *FLAGS),
            ppsvm("-v", "coordinator", "evaluate", "--federation", str(live), "--model", str(model), "--json"),
            ppsvm("-v", "coordinator", "baselines", "--federation", str(live), "--json", "--nu", "1", "--mu", "0.2"),
        ]
        answers = predictions(split_dir, live, model)

    got = {str(record) for arrays in received.values() for part in ("train_ids", "test_ids") for record in arrays[part]}
    assert got == set(pseudonyms(split_dir, real_ids(split_dir)))  # every record, each by its pseudonym
    assert all(re.fullmatch(r"[0-9a-f]{32}", record) for record in got)
    logged = "".join(result.stdout + result.stderr for result in outputs)
    assert "LP solved" in logged and "assembled train kernel" in logged  # the logs were captured
    for text in (logged, model.read_text(), answers):
        assert not PATIENT.search(text), PATIENT.search(text)


def predictions(split_dir: Path, live: Path, model: Path) -> str:
    """`coordinator serve`'s answers for three records, asked by pseudonym as a key-holding client does."""

    server = ppsvm_process(
        "-v", "coordinator", "serve", "--federation", str(live), "--model", str(model), "--listen", "127.0.0.1:0"
    )
    try:
        assert server.stdout is not None
        address = server.stdout.readline().split()[-1]
        asked = pseudonyms(split_dir, ["patient-00003", "patient-00077", "patient-00150"])
        with coordinator_channel(live, address) as channel:
            reply = pb_grpc.CoordinatorStub(channel).Predict(pb.PredictRequest(ids=asked), timeout=30)
        assert [p.id for p in reply.predictions] == asked
        return str(reply)
    finally:
        server.terminate()
        _, stderr = server.communicate(timeout=30)
        assert not PATIENT.search(stderr or "")


def test_entities_with_different_record_id_keys_are_refused(split_dir: Path, tmp_path: Path) -> None:
    """A record would carry a different pseudonym at each: refused before any kernel, naming the entities."""
    (split_dir / "other.key").write_text("cd" * 32 + "\n")
    r1c1 = split_dir / "r1c1.toml"
    original = r1c1.read_text()
    r1c1.write_text(original.replace(f'id_key_file = "{ID_KEY_FILE}"', 'id_key_file = "other.key"'))
    try:
        planned = load_federation(split_dir / "federation.toml")
        with EntityProcesses([split_dir / f"{e.id}.toml" for e in planned.entities]) as running:
            live = live_federation(split_dir, running, "federation.other-key.toml")
            with Session(load_federation(live)) as session, pytest.raises(ConfigError) as refused:
                session.survey()
    finally:
        r1c1.write_text(original)
    assert "do not share one record-id key" in str(refused.value) and "r1c1" in str(refused.value)


def test_a_model_is_refused_by_entities_whose_keys_changed_since(split_dir: Path) -> None:
    """Model files carry the federation's fingerprint: after the record-id key is rotated (consistently, at
    every entity) the old model names records the entities no longer publish, and evaluating it is refused."""
    planned = load_federation(split_dir / "federation.toml")
    configs = [split_dir / f"{e.id}.toml" for e in planned.entities]
    model = split_dir / "fingerprinted.json"
    with EntityProcesses(configs) as running:
        live = live_federation(split_dir, running, "federation.fingerprint.toml")
        ppsvm("coordinator", "train", "--federation", str(live), "--model-out", str(model), *FLAGS)
    assert len(Model.load(model).federation) == 64
    key_file = split_dir / ID_KEY_FILE
    original = key_file.read_text()
    key_file.write_text("ef" * 32 + "\n")
    try:
        with EntityProcesses(configs) as running:
            live = live_federation(split_dir, running, "federation.rotated.toml")
            refused = ppsvm("coordinator", "evaluate", "--federation", str(live), "--model", str(model), check=False)
    finally:
        key_file.write_text(original)
    assert refused.returncode == 1 and "trained on another federation" in refused.stderr, refused.stderr
    assert "record-id key" in refused.stderr and "Traceback" not in refused.stderr


def test_pseudonyms_command_maps_ids_where_the_key_is(split_dir: Path, tmp_path: Path) -> None:
    """`ppsvm pseudonyms` gives a key holder the pseudonyms the entities publish; its file is private."""
    (tmp_path / "ids.txt").write_text("id\npatient-00003\n\npatient-00150\n")
    out = tmp_path / "map.csv"
    ppsvm("pseudonyms", "--key", str(split_dir / ID_KEY_FILE), "--ids", str(tmp_path / "ids.txt"), "--out", str(out))
    rows = [line.split(",") for line in out.read_text().splitlines()]
    expected = pseudonyms(split_dir, ["patient-00003", "patient-00150"])
    assert rows == [["id", "pseudonym"], ["patient-00003", expected[0]], ["patient-00150", expected[1]]]
    assert out.stat().st_mode & 0o077 == 0
    refused = ppsvm(
        "pseudonyms", "--key", str(split_dir / ID_KEY_FILE), "--ids", str(out.parent / "none.txt"), check=False
    )
    assert refused.returncode == 1 and "cannot read the id list" in refused.stderr
