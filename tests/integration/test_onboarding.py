"""Onboarding as organisations do it apart, through the real CLI, then a federation of the bundles trains.

Each party runs `ppsvm org init` in its own directory, the operator `ppsvm operator ca` and `publish`, each entity
`ppsvm org seal`, every party `ppsvm org join`; then the entities start from nothing but their own bundles and the
coordinator from its own, and a model trains and evaluates over mutual TLS.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from ppsvm.config import federation_at_addresses, load_federation
from ppsvm.processes import EntityProcesses

from .conftest import WDBC, WDBC_OPTIONS, ppsvm, split


@pytest.mark.long
def test_bundles_made_apart_train_a_private_model(tmp_path: Path) -> None:
    cells = split(tmp_path / "split", WDBC, 2, 2, *WDBC_OPTIONS)
    plan = load_federation(cells / "federation.toml")
    org = tmp_path / "org"
    entities = [e.id for e in plan.entities]
    for name in entities:
        ppsvm("org", "init", "--name", name, "--role", "entity", "--out", str(org / name))
    ppsvm("org", "init", "--name", "coordinator", "--role", "coordinator", "--out", str(org / "coordinator"))
    ppsvm("operator", "ca", "--out", str(org / "operator"))
    requests = [str(org / name / f"{name}.request.json") for name in [*entities, "coordinator"]]
    published = str(org / "published")
    ppsvm("operator", "publish", "--ca-dir", str(org / "operator"), "--plan", str(cells / "federation.toml"),
          "--requests", *requests, "--out", published)  # fmt: skip
    for name in entities:
        ppsvm("org", "seal", "--bundle", str(org / name), "--published", published, "--out", str(org / "relay"))
    fingerprints: dict[str, set[str]] = {}
    for name in entities:
        shutil.copy(cells / f"{name}.csv", org / name / f"{name}.csv")
        out = ppsvm("org", "join", "--bundle", str(org / name), "--published", published,
                    "--shares", str(org / "relay"), "--data", f"{name}.csv").stdout  # fmt: skip
        for group, fingerprint in re.findall(r"^\s+(\S+): (\S+)\s", out, re.MULTILINE):
            fingerprints.setdefault(group, set()).add(fingerprint)
    ppsvm("org", "join", "--bundle", str(org / "coordinator"), "--published", published)
    # Each column block's secret, the record-id key, and a secret per pair of a row block (secure aggregation).
    assert set(fingerprints) == {"column-block-0", "column-block-1", "record-ids", "pair-r0c0-r0c1", "pair-r1c0-r1c1"}
    assert all(len(values) == 1 for values in fingerprints.values()), fingerprints

    coordinator = load_federation(org / "coordinator" / "federation.toml")
    with EntityProcesses([org / name / f"{name}.toml" for name in entities]) as processes:
        live = org / "coordinator" / "federation.live.toml"
        live.write_text(federation_at_addresses(coordinator, processes.addresses), encoding="utf-8")
        model = org / "coordinator" / "model.json"
        ppsvm("coordinator", "train", "--federation", str(live), "--model-out", str(model))
        out = ppsvm("coordinator", "evaluate", "--federation", str(live), "--model", str(model), "--json").stdout
    evaluation = json.loads(out.strip().splitlines()[-1])
    assert evaluation["private"] is True and evaluation["n_test"] == 171
    assert evaluation["error_rate"] < 0.1, evaluation
