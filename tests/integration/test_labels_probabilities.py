"""Issue 29 item 1 over real entity processes: declared labels and calibrated probabilities, from training through
`coordinator evaluate`, `coordinator predict`, the Predict RPC of `coordinator serve` and its prediction client
(`ppsvm predict --server`, ppsvm.Client; issue 30).

WDBC split 2 x 2; every cell then holds its labels as "M"/"B" and its config declares them ([data] labels), as a
hospital's own file would.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np

from ppsvm.api.client import Client
from ppsvm.core.model import Model
from ppsvm.wire.rpc import ppsvm_pb2 as pb
from ppsvm.wire.rpc import ppsvm_pb2_grpc as pb_grpc

from .conftest import WDBC, WDBC_OPTIONS, coordinator_channel, ppsvm, pseudonyms, split


def _declare_text_labels(split_dir: Path) -> None:
    """Each cell's labels as M/B, read through a [data] table that declares them."""
    for config in sorted(split_dir.glob("r*c*.toml")):
        cell = split_dir / f"{config.stem}.csv"
        with cell.open(newline="") as handle:
            rows = list(csv.reader(handle))
        for row in rows[1:]:
            row[1] = {"1": "M", "-1": "B"}[row[1]]
        with cell.open("w", newline="") as handle:
            csv.writer(handle, lineterminator="\n").writerows(rows)
        # split named the cell's -1/+1 labels (label_names); a [data] table that maps text labels names them itself.
        text = config.read_text().replace(f'data = "{config.stem}.csv"\n', "").replace('label_names = ["B", "M"]\n', "")
        table = (
            f'[data]\nsource = "csv"\npath = "{config.stem}.csv"\nid = "id"\nlabel = "label"\nsplit = "split"\n'
            'labels = { positive = "M", negative = "B" }\n\n'
        )
        config.write_text(text.replace("[[schema.features]]", table + "[[schema.features]]", 1))


def test_models_predict_declared_labels_with_calibrated_probabilities(federation, tmp_path: Path) -> None:
    split_dir = split(tmp_path / "labelled", WDBC, 2, 2, *WDBC_OPTIONS)
    _declare_text_labels(split_dir)
    run = federation(2, 2, prepared=split_dir)
    run.train("--kernel", "gaussian", "--mbar", "5", "--basis", "paper")
    model = Model.load(split_dir / "model.json")
    assert model.labels == ("B", "M") and model.calibration is not None
    calibration = model.training["calibration"]
    assert calibration["method"] == "platt" and calibration["brier"] < calibration["brier_class_frequency"]
    # Each release names the training run that asked for it and its request (issue 30 item 6).
    log = json.loads(ppsvm("entity", "releases", "--config", str(split_dir / "r0c0.toml"), "--json").stdout)
    kernels = [r for r in log["releases"] if r["rpc"] == "KernelBlock"]
    assert kernels and all(r["run_id"] == model.training["run_id"] and r["request_id"] for r in kernels)
    table = ppsvm("entity", "releases", "--config", str(split_dir / "r0c0.toml")).stdout
    assert "run" in table.splitlines()[1] and model.training["run_id"] in table

    figures = run.evaluate()
    assert figures["brier"] < figures["brier_class_frequency"], figures
    assert sum(group["n"] for group in figures["reliability"]) == figures["n_test"]
    human = ppsvm("coordinator", "evaluate", "--federation", str(run.federation_path), "--model",
                  str(split_dir / "model.json"))  # fmt: skip
    assert "reliability of the probabilities" in human.stdout and "Brier score" in human.stdout

    with (split_dir / "r0c0.csv").open(newline="") as handle:
        records = [row for row in csv.DictReader(handle) if row["split"] == "test"][:20]
    asked = pseudonyms(split_dir, [row["id"] for row in records])
    (split_dir / "ids.txt").write_text("\n".join(asked) + "\n")
    out = split_dir / "predictions.csv"
    ppsvm("coordinator", "predict", "--federation", str(run.federation_path), "--model", str(split_dir / "model.json"),
          "--ids", str(split_dir / "ids.txt"), "--out", str(out))  # fmt: skip
    scored = list(csv.DictReader(out.open()))
    assert list(scored[0]) == ["id", "decision", "prediction", "probability", "status"]
    decisions = np.array([float(row["decision"]) for row in scored])
    probability = np.array([float(row["probability"]) for row in scored])
    assert [row["prediction"] for row in scored] == ["M" if d >= 0 else "B" for d in decisions]
    np.testing.assert_allclose(probability, 1 / (1 + np.exp(model.calibration.a * decisions + model.calibration.b)))
    assert np.all(np.diff(probability[np.argsort(decisions)]) >= 0)  # a higher decision never lowers the risk
    # Labels right on most of them: the records' own labels agree with the predicted label names.
    assert np.mean([row["prediction"] == record["label"] for row, record in zip(scored, records, strict=True)]) >= 0.8

    with run.serve() as address:
        with coordinator_channel(run.federation_path, address) as channel:
            reply = pb_grpc.CoordinatorStub(channel).Predict(pb.PredictRequest(ids=asked), timeout=30)
        # The prediction client: the same file as `coordinator predict`, by pseudonym, and by real id with the key.
        asked_file, real_file = split_dir / "ids.txt", split_dir / "real-ids.txt"
        real_file.write_text("\n".join(row["id"] for row in records) + "\n")
        client_out, by_real = split_dir / "client.csv", split_dir / "client-real.csv"
        ppsvm("predict", "--server", address, "--ids", str(asked_file), "--out", str(client_out),
              "--bundle", str(split_dir))  # fmt: skip
        ppsvm("predict", "--server", address, "--ids", str(real_file), "--out", str(by_real), "--bundle",
              str(split_dir), "--id-key", str(split_dir / "record-ids.key"))  # fmt: skip
        with Client.from_bundle(address, split_dir) as client:
            found, missing = client.predict([asked[0], "nobody"])
            assert client.status().n_entities == 4
    assert client_out.read_text() == out.read_text()
    assert [row["prediction"] for row in csv.DictReader(by_real.open())] == [row["prediction"] for row in scored]
    assert [p.id for p in found] == [asked[0]] and missing == ["nobody"] and found[0].label in ("M", "B")
    assert [p.label for p in reply.predictions] == [row["prediction"] for row in scored]
    assert all(p.HasField("probability") for p in reply.predictions)
    np.testing.assert_allclose([p.probability for p in reply.predictions], probability, rtol=1e-12)
