"""Issue 29's newcomer DP case over real entity processes: the dry run's estimate against real releases.

Three hospitals of 700 balanced Adult records each (tests/newcomer.py), their entity configs reading raw CSVs with
three category columns through a declared schema, 200 public records vouched for by one of them, epsilon 1. The
dry run refuses with the figures and spends nothing; released anyway (--allow-noisy), the model is scored on 2,000
held-out records with `coordinator predict` and `coordinator serve`, as a DP model is used.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from ppsvm.config import load_federation
from ppsvm.core.dp_model import DpModel
from ppsvm.core.fourier import MAX_FREQUENCY_ITERATIONS
from ppsvm.wire.rpc import ppsvm_pb2 as pb
from ppsvm.wire.rpc import ppsvm_pb2_grpc as pb_grpc
from tests import newcomer

from .conftest import coordinator_channel, ppsvm, ppsvm_process

RELEASES = 3
BUDGET = RELEASES * 1.1


def hospitals(directory: Path, rows: dict[str, list[list[str]]]) -> Path:
    """A split of the private records into three row blocks (certificates, secrets, release logs, federation file),
    each entity's config then reading its raw records through the newcomer schema, categories as text."""
    numeric = newcomer.write_csv(
        directory / "ids.csv", [[row[0], row[-1], "0"] for row in rows["private"]], ["id", "income", "f"]
    )
    split_dir = directory / "split"
    ppsvm(
        "split", str(numeric), "--rows", str(newcomer.ENTITIES), "--cols", "1", "--out", str(split_dir), "--header",
        "--id-column", "id", "--label", "income", "--positive", ">50K", "--test-fraction", "0",
    )  # fmt: skip
    by_id = {row[0]: row for row in rows["private"]}
    for config in sorted(split_dir.glob("r*c0.toml")):
        with (split_dir / f"{config.stem}.csv").open(newline="") as handle:
            ids = [record["id"] for record in csv.DictReader(handle)]
        newcomer.write_csv(split_dir / f"{config.stem}.raw.csv", [by_id[record] for record in ids])
        text = config.read_text().split("[[schema.features]]", 1)[0]
        text = "\n".join(line for line in text.splitlines() if not line.startswith("data = "))
        privacy = f"[privacy]\nepsilon_total = {BUDGET!r}\n"
        config.write_text(
            f"{text}\n{newcomer.data_toml(f'{config.stem}.raw.csv')}\n{privacy}\n{newcomer.schema_toml()}"
        )
    return split_dir


def accuracy(out: Path, labels: dict[str, str]) -> float:
    with out.open(newline="") as handle:
        scored = list(csv.DictReader(handle))
    assert len(scored) == len(labels) and all(row["status"] == "ok" for row in scored)
    # The models predict the label values the entities and the public source declare, with probabilities.
    if out.stem == "public-only":  # fitted on the public records: nothing left out of sample to calibrate on
        assert all(row["probability"] == "" for row in scored)
    else:
        assert all(0.0 < float(row["probability"]) < 1.0 for row in scored)
    return float(np.mean([row["prediction"] == labels[row["id"]] for row in scored]))


@pytest.mark.long
def test_the_newcomers_dry_run_refuses_and_the_releases_bear_it_out(federation, tmp_path: Path) -> None:
    rows = newcomer.newcomer_rows()
    run = federation(newcomer.ENTITIES, 1, prepared=hospitals(tmp_path, rows))
    public_csv = newcomer.write_csv(tmp_path / "public.csv", rows["public"])
    public = tmp_path / "public.toml"
    owner = ppsvm(
        "coordinator", "public-source", "--entity-config", str(run.split_dir / "r0c0.toml"), "--data", str(public_csv),
        "--out", str(public),
    )  # fmt: skip
    assert "200 public records (100 positive), 18 features" in owner.stdout

    def train(model: Path, *options: str, check: bool = True):  # type: ignore[no-untyped-def]
        return ppsvm(
            "coordinator", "train", "--federation", str(run.federation_path), "--model-out", str(model),
            "--public", str(public), "--json", *options, check=check,
        )  # fmt: skip

    dp_model = run.split_dir / "dp.json"
    dry = train(dp_model, "--method", "dp-hybrid", "--epsilon", "1", "--dry-run", check=False)
    assert dry.returncode == 1, dry.stderr
    report = json.loads(dry.stdout)
    worth = report["plan"]["worth"]
    assert report["verdict"].startswith("the dp-hybrid model is not expected to beat public-only")
    assert not worth["worth"] and worth["dp_ceiling"] < worth["public_only_accuracy"]
    assert all(facts["noise_to_bound"] < 1 for facts in report["entities"].values())  # the old preflight passed it
    refused = train(dp_model, "--method", "dp-hybrid", "--epsilon", "1", check=False)
    assert refused.returncode == 1 and "Nothing was requested or spent" in refused.stderr
    spent = json.loads(ppsvm("entity", "releases", "--config", str(run.split_dir / "r1c0.toml"), "--json").stdout)
    assert spent["epsilon_spent"] == 0.0 and not spent["releases"]

    test = newcomer.write_csv(tmp_path / "test.csv", rows["test"])
    labels = {row[0]: row[-1] for row in rows["test"]}

    def scored(model: Path) -> float:
        out = tmp_path / f"{model.stem}.csv"
        ppsvm("coordinator", "predict", "--model", str(model), "--records", str(test), "--out", str(out))
        return accuracy(out, labels)

    released = []
    for _ in range(RELEASES):
        summary = json.loads(train(dp_model, "--method", "dp-hybrid", "--epsilon", "1", "--allow-noisy").stdout)
        assert summary["seconds"] < 60  # 54 s before rho was learned once, to a tolerance
        training = DpModel.from_json(dp_model.read_text()).training
        assert training["rho_iterations"] < MAX_FREQUENCY_ITERATIONS and "worth" not in training
        released.append(scored(dp_model))
    public_only = run.split_dir / "public-only.json"
    train(public_only, "--method", "public-only")
    # The estimate against the real outcome: the releases do not beat public-only, and land where it said.
    assert np.mean(released) < scored(public_only)
    assert abs(np.mean(released) - worth["dp_accuracy"]) < 2 * worth["dp_spread"], (released, worth)
    assert abs(scored(public_only) - worth["public_only_accuracy"]) < 0.08

    server = ppsvm_process(
        "coordinator", "serve", "--federation", str(run.federation_path), "--model", str(dp_model), "--records",
        str(test), "--listen", "127.0.0.1:0",
    )  # fmt: skip
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        assert line.startswith("listening on "), line
        asked = [rows["test"][0][0], "nobody", rows["test"][1][0]]
        with coordinator_channel(run.federation_path, line.split()[-1]) as channel:
            stub = pb_grpc.CoordinatorStub(channel)
            reply = stub.Predict(pb.PredictRequest(ids=asked), timeout=30)
            status = stub.Status(pb.Empty(), timeout=30)
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert [p.id for p in reply.predictions] == [asked[0], asked[2]] and list(reply.not_found) == ["nobody"]
    assert status.kernel == "dp-hybrid" and status.n_entities == len(load_federation(run.federation_path).entities)
    with (tmp_path / "dp.csv").open(newline="") as handle:
        predicted = {row["id"]: float(row["decision"]) for row in csv.DictReader(handle)}
    assert [p.decision for p in reply.predictions] == [predicted[asked[0]], predicted[asked[2]]]
