"""A federation that lives (issue 26), against real entity processes: grow, retrain, switch kernel, keep old models.

Declared bounds make retraining on grown data routine (no edit, no new secret, the deployed model still
evaluates); a new kernel takes one command per member (`ppsvm entity epoch --next`) and is refused beyond the
privacy limits; a coordinator cannot raise mbar past its epoch's pin; no extreme of the data leaves; a peer's
squashing range is refused.
"""

from __future__ import annotations

import csv
import hashlib
import hmac
import json

import numpy as np
import pytest

from ppsvm.config import load_entity_config, load_federation
from ppsvm.coordinator.client import EntityClient
from ppsvm.core.model import Model
from ppsvm.errors import EntityError
from ppsvm.wire.rpc import ppsvm_pb2 as pb

from .conftest import RunningFederation, ppsvm, pseudonyms, start_entity_process

pytestmark = pytest.mark.slow


def _grow(run: RunningFederation, row_block: int, count: int, scale_first: float) -> list[str]:
    """Append ``count`` new training records to every cell of ``row_block`` (copies of its first records under new
    ids, the first one's first feature times ``scale_first``); returns their ids."""
    federation = load_federation(run.split_dir / "federation.toml")
    ids = [f"grown-{k}" for k in range(count)]
    for entity in federation.entities:
        if entity.row_block != row_block:
            continue
        path = run.split_dir / f"{entity.id}.csv"
        rows = list(csv.reader(path.open()))
        header, body = rows[0], [r for r in rows[1:] if r]
        split = header.index("split")
        training = [r for r in body if r[split] == "train"][:count]
        grown = []
        for k, row in enumerate(training):
            row = [ids[k], *row[1:]]
            if k == 0:
                first = split + 1
                row[first] = repr(float(row[first]) * scale_first)
            grown.append(row)
        with path.open("a", newline="") as handle:
            csv.writer(handle).writerows(grown)
    return ids


def _restart(run: RunningFederation, entity_id: str) -> None:
    """Stop one entity and start it again on its address (it rereads its cell and its release log)."""
    index = [path.stem for path in run.processes.configs].index(entity_id)
    process = run.processes.processes[index]
    process.terminate()
    process.wait(timeout=20)
    log = (run.split_dir / f"{entity_id}.restart.log").open("a")
    run.processes.processes[index], _ = start_entity_process(
        run.processes.configs[index], run.processes.addresses[index], log, entity_id, 60.0
    )


def _epoch(run: RunningFederation, entity_id: str, *flags: str, check: bool = True) -> str:
    result = ppsvm("entity", "epoch", "--config", str(run.split_dir / f"{entity_id}.toml"), *flags, check=check)
    return result.stdout + result.stderr


@pytest.mark.long
def test_grow_retrain_and_switch_kernel_without_a_hand_edit(federation) -> None:
    run = federation(2, 2, consent=False)
    planned = run.train("--kernel", "gaussian", "--mbar", "5", "--dry-run")  # choose before you spend
    assert "pins gaussian with mbar <= 5 for basis epoch 0" in planned.stdout and "used 5 of the 14" in planned.stdout
    run.train("--kernel", "gaussian", "--mbar", "5")
    replan = run.train("--kernel", "linear", "--mbar", "5", "--dry-run", check=False)
    assert replan.returncode == 1 and "refused" in replan.stdout and "ppsvm entity epoch --next" in replan.stdout
    deployed = run.split_dir / "deployed.json"
    (run.split_dir / "model.json").rename(deployed)
    before = run.evaluate("--model", str(deployed))

    # A hospital's monthly growth: new records, one beyond the declared bounds; its entities restart.
    grown = _grow(run, row_block=0, count=5, scale_first=50.0)
    for entity_id in ("r0c0", "r0c1"):
        _restart(run, entity_id)
    retrained = run.train("--kernel", "gaussian", "--mbar", "5")
    assert retrained.returncode == 0
    assert Model.load(run.split_dir / "model.json").training["n_train"] > Model.load(deployed).training["n_train"]
    assert "clipped" in (run.split_dir / "r0c0.restart.log").read_text()
    assert (
        run.evaluate("--model", str(deployed))["error_rate"] == before["error_rate"]
    )  # the deployed model still works
    # ... and scores records by id, the grown ones too (their pseudonyms, as the coordinator holds them).
    (run.split_dir / "ids.txt").write_text("\n".join(pseudonyms(run.split_dir, grown)) + "\n")
    out = run.split_dir / "predictions.csv"
    ppsvm("coordinator", "predict", "--federation", str(run.federation_path), "--model", str(deployed),
          "--ids", str(run.split_dir / "ids.txt"), "--out", str(out))  # fmt: skip
    answers = list(csv.DictReader(out.open()))
    assert len(answers) == len(grown) and all(row["status"] == "ok" for row in answers), answers

    # More points than the epoch pinned: refused, whoever asks.
    raised = run.train("--kernel", "gaussian", "--mbar", "9", check=False)
    assert raised.returncode != 0 and "at most mbar = 5" in raised.stderr

    # Another kernel: refused in the pinned epoch, served after every member opens the next one.
    linear = run.train("--kernel", "linear", "--mbar", "5", check=False)
    assert linear.returncode != 0 and "ppsvm entity epoch --next" in linear.stderr
    assert "opened basis epoch 1" in _epoch(run, "r0c0", "--next")
    half = run.train("--kernel", "linear", "--mbar", "5", check=False)
    assert half.returncode != 0 and "different basis epochs" in half.stderr  # refused before any kernel is computed
    for entity_id in ("r1c0", "r0c1", "r1c1"):
        _epoch(run, entity_id, "--next")
    assert run.train("--kernel", "linear", "--mbar", "5").returncode == 0
    assert Model.load(run.split_dir / "model.json").scaling[0].epoch == 1
    assert run.evaluate("--model", str(deployed))["error_rate"] == before["error_rate"]  # epoch 0 still serves it

    # The points of every epoch count together per record: 5 + 5 + 1 (both kernels) of n_j - 1 = 14 are spent.
    for entity_id in ("r0c0", "r1c0", "r0c1", "r1c1"):
        _epoch(run, entity_id, "--next")
    too_many = run.train("--kernel", "linear", "--mbar", "4", check=False)
    assert too_many.returncode != 0 and "more than n_j - 1 = 14" in too_many.stderr
    state = json.loads(_epoch(run, "r0c0", "--json"))
    assert state["points_used"] == 11 and state["max_points"] == 14


def test_no_extreme_of_the_data_leaves_and_a_squashing_range_is_refused(federation) -> None:
    """FeatureRange publishes the declared bounds; a validly tagged range with one feature widened 10^6-fold (a
    colluding column-block peer's) is refused before any kernel is computed."""
    run = federation(2, 1)
    config = load_entity_config(run.split_dir / "r0c0.toml")
    assert config.schema is not None
    bounds = config.schema.declared_bounds()
    assert bounds is not None
    live = load_federation(run.federation_path)
    clients = {e.id: EntityClient(e, live.tls) for e in live.entities}
    try:
        published = clients["r0c0"].feature_range()
        np.testing.assert_array_equal(published.low, bounds[0])
        np.testing.assert_array_equal(published.high, bounds[1])
        cell = np.genfromtxt(run.split_dir / "r0c0.csv", delimiter=",", skip_header=1)[:, 3:]
        assert not np.isin(cell.min(axis=0), published.low).all()  # the data's own extremes are not what left

        secret = config.read_secret()
        wide_high = bounds[1] * np.where(np.arange(len(bounds[1])) == 0, 1e6, 1.0)
        message = (
            b"ppsvm/v1/feature-range/r1c0\0" + bounds[0].astype("<f8").tobytes() + wide_high.astype("<f8").tobytes()
        )
        squashing = pb.SignedRange(
            entity_id="r1c0",
            low=bounds[0].tolist(),
            high=wide_high.tolist(),
            tag=hmac.new(secret, message, hashlib.sha256).hexdigest(),
        )
        n = len(bounds[0])
        request = pb.KernelRequest(
            kernel=pb.GAUSSIAN,
            mbar=n - 1,
            mu=1.0 / n,
            scaling=pb.Scaling(ranges=[published, squashing]),
            record_set=pb.TRAIN,
        )
        with pytest.raises(EntityError, match="differs from the bounds its schema declares"):
            clients["r0c0"].kernel_block(request, len(cell), "train records")
    finally:
        for client in clients.values():
            client.close()
