"""The Python API against real `ppsvm entity` processes: Federation gives what the CLI gives, and an estimator
fitted in-process on the same records, seed and secrets gives the networked model and decision values."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ppsvm import Federation, RandomKernelClassifier, load_dataset
from ppsvm.api.inprocess import simulation_secrets
from ppsvm.coordinator.evaluate import assembled_decisions, mean_figures
from ppsvm.core.dp_model import DpModel
from ppsvm.core.model import Model
from ppsvm.data.partition import ID_KEY_FILE, secret_file_name
from ppsvm.errors import ConfigError, DataError

from .conftest import ppsvm, pseudonyms, split

SEED = 7


def test_estimator_fitted_in_process_equals_the_networked_run(federation, tmp_path: Path) -> None:
    X, y = load_dataset("wdbc")
    X, labels = X[:240], np.where(y[:240] > 0, "M", "B")
    data = tmp_path / "data.csv"
    data.write_text("".join(f"rec{k},{labels[k]},{','.join(map(repr, X[k].tolist()))}\n" for k in range(len(X))))
    split_dir = split(
        tmp_path / "split",
        data,
        2,
        2,
        "--label",
        "1",
        "--positive",
        "M",
        "--id-column",
        "0",
        "--test-fraction",
        "0",
        "--seed",
        str(SEED),
    )
    # The secrets RandomKernelClassifier(random_state=SEED) documents, so both runs draw the same B_j.
    for j, secret in enumerate(simulation_secrets(SEED, 2)):
        (split_dir / secret_file_name(j)).write_text(secret)
    run = federation(2, 2, prepared=split_dir)

    run.train("--seed", str(SEED), "--no-distribute")
    by_cli = Model.load(split_dir / "model.json")
    estimator = RandomKernelClassifier(row_blocks=2, column_blocks=2, random_state=SEED).fit(X, labels)
    client = Federation.from_toml(run.federation_path)
    by_client = client.train(seed=SEED, distribute=False)
    for model in (estimator.model_, by_client):
        np.testing.assert_allclose(model.u, by_cli.u, rtol=0, atol=1e-9)
        assert (model.gamma, model.nu, model.mu, model.mbar) == pytest.approx(
            (by_cli.gamma, by_cli.nu, by_cli.mu, by_cli.mbar), abs=1e-9
        )

    ids = [f"rec{k}" for k in range(0, 240, 7)]
    rows = [int(record[3:]) for record in ids]
    # A caller holding the record-id key names records by their real ids; without it, by the pseudonyms.
    key = split_dir / ID_KEY_FILE
    np.testing.assert_allclose(
        client.decision_function(by_cli, ids, id_key=key), estimator.decision_function(X[rows]), rtol=0, atol=1e-9
    )
    np.testing.assert_array_equal(
        client.decision_function(by_cli, pseudonyms(split_dir, ids)), client.decision_function(by_cli, ids, key)
    )
    # The split named the labels (B and M), so the networked model predicts the estimator's classes themselves.
    assert (client.predict(split_dir / "model.json", ids, id_key=key) == estimator.predict(X[rows])).all()
    with pytest.raises(DataError, match=r"no entity holds record id\(s\) \['rec0'\]"):
        client.predict(by_cli, ["rec0"])  # a real id, sent without the key: no entity publishes it
    with pytest.raises(DataError, match=r"no entity holds record id\(s\) \['nobody'\]"):
        client.predict(by_cli, ["nobody"])
    with pytest.raises(DataError, match="no held-out records"):
        client.evaluate(by_cli)

    audited = json.loads(ppsvm("audit", "--federation", str(run.federation_path), "--json").stdout)
    assert client.audit() == audited and audited["ok"]


def test_federation_evaluates_and_compares_as_the_cli_does(federation, tmp_path: Path) -> None:
    run = federation(2, 1)
    run.train("--nu", "10", "--mu", "0.03", "--no-distribute")
    client = Federation.from_toml(run.federation_path)
    model_file = run.split_dir / "model.json"

    assert client.evaluate(model_file) == run.evaluate()
    fixed = ["--nu", "10", "--mu", "0.03"]  # each entity tuning alone would take most of this test's time
    cli = json.loads(
        ppsvm("coordinator", "baselines", "--federation", str(run.federation_path), "--json", *fixed).stdout
    )
    alone = client.baselines(nu=10.0, mu=0.03)
    assert [{"entity": r.entity_id, "n_train": r.n_train, "n_test": r.n_test, **r.figures} for r in alone] == cli[
        "entities"
    ]
    assert mean_figures(alone) == cli["mean"]

    model = Model.load(model_file)
    ids, _, decision = assembled_decisions(client.config, model, ("test",))["test"]
    np.testing.assert_allclose(client.decision_function(model, ids.tolist()), decision, rtol=0, atol=1e-12)

    public = tmp_path / "public.csv"
    lines = (run.split_dir / "r0c0.csv").read_text().splitlines()[:41]
    public.write_text("\n".join(lines) + "\n")
    dp_model = client.train_dp(public, method="public-only", C=10.0)
    assert isinstance(dp_model, DpModel) and dp_model.training["n_public"] == 40
    with pytest.raises(ConfigError, match="is a DP model: Federation.predict answers random-kernel models only"):
        client.predict(dp_model, ids[:1].tolist())
