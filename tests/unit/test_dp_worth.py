"""Issue 29, items 5-7: a DP release worth its epsilon or refused before anything is spent; the public records read
through the entities' own schema and checked by its keyed fingerprint; DP models scoring records by their features.

The newcomer's case (three hospitals of 700 records, 18 features, 200 public records, epsilon 1) is real data here
(tests/newcomer.py); tests/integration/test_dp_worth.py checks the estimate against a real release.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ppsvm.cli_coordinator import _dry_run_text
from ppsvm.config import load_entity_config
from ppsvm.coordinator.dp_train import (
    RHO_TOLERANCE,
    DpOptions,
    PublicRecords,
    check_preflight,
    check_public_schema,
    check_worth,
    load_public,
    plan_release,
    preflight,
    records_to_score,
    train_dp,
    write_public_source,
)
from ppsvm.coordinator.serve import DpServicer
from ppsvm.core.dp_model import DpModel
from ppsvm.core.dp_selection import estimate_worth
from ppsvm.core.fourier import MAX_FREQUENCY_ITERATIONS, learn_frequencies, public_preprocessing
from ppsvm.entity.cell import EntityCore
from ppsvm.errors import ConfigError, DataError
from ppsvm.wire.rpc import ppsvm_pb2 as pb
from tests import newcomer

REPO = Path(__file__).resolve().parents[2]


@dataclasses.dataclass(frozen=True)
class Owner:
    """A data owner's directory: its entity config (secret, [data], [schema]) and the public source it wrote."""

    directory: Path
    config: Path
    records: Path
    source: Path
    rows: dict[str, list[list[str]]]


def entity_config(directory: Path, name: str, schema: str, rows: list[list[str]]) -> Path:
    newcomer.write_csv(directory / f"{name}.csv", rows)
    config = directory / f"{name}.toml"
    config.write_text(
        f'[entity]\nid = "{name}"\ncolumn_block = 0\nsecret_file = "block.secret"\n\n'
        + newcomer.data_toml(f"{name}.csv")
        + "\n"
        + schema,
        encoding="utf-8",
    )
    return config


@pytest.fixture(scope="module")
def owner(tmp_path_factory: pytest.TempPathFactory) -> Owner:
    directory = tmp_path_factory.mktemp("owner")
    (directory / "block.secret").write_text("ab" * 32 + "\n", encoding="utf-8")
    rows = newcomer.newcomer_rows()
    config = entity_config(directory, "h0", newcomer.schema_toml(), rows["private"][: newcomer.PER_ENTITY])
    records = newcomer.write_csv(directory / "public.csv", rows["public"])
    source = directory / "public.toml"
    write_public_source(config, records, source)
    return Owner(directory, config, records, source, rows)


def metadata(public: PublicRecords, per_entity: int = newcomer.PER_ENTITY) -> dict[str, pb.BlockMetadata]:
    """Three DP entities' published facts; their keyed check is the one the public source carries."""
    assert public.check is not None
    return {
        f"h{i}": pb.BlockMetadata(
            entity_id=f"h{i}",
            n_features=public.X.shape[1],
            n_train=per_entity,
            mode="dp",
            epsilon_total=5.0,
            features_check=public.check["features"],
        )
        for i in range(newcomer.ENTITIES)
    }


def options(source: Path, **changes: object) -> DpOptions:
    settings: dict[str, object] = {"method": "dp-hybrid", "public": source, "epsilon": newcomer.EPSILON, "C": None}
    return DpOptions(**{**settings, "width_factor": None, **changes})  # type: ignore[arg-type]


def test_the_newcomers_release_is_refused_with_the_figures(owner: Owner) -> None:
    """700 records per hospital at epsilon 1: the noise-to-bound preflight lets it through (as it did for the
    newcomer), the worth estimate does not: public-only is expected to do clearly better."""
    public = load_public(owner.source)
    assert public.X.shape == (newcomer.N_PUBLIC, 18) and (public.y > 0).sum() == newcomer.N_PUBLIC // 2
    facts, settings = metadata(public), options(owner.source)
    check_public_schema(public, facts)
    check_preflight(preflight(facts, settings), settings)
    plan = plan_release(settings, public.y, public_preprocessing(public.X), facts, estimate=True)
    # rho learned once, stopped by its tolerance well before the iteration cap.
    assert plan.frequencies["rho_iterations"] < MAX_FREQUENCY_ITERATIONS // 2
    assert plan.frequencies["rho_stop"].startswith("CONVERGENCE")
    worth = plan.worth
    assert worth is not None and not worth.worth and worth.rival[0] == "public-only"
    assert worth.public_only_accuracy > worth.dp_ceiling + 0.03 and worth.majority_accuracy == pytest.approx(0.5)
    with pytest.raises(ConfigError) as refused:
        check_worth(plan, settings, len(public.y))
    message = str(refused.value)
    assert message.startswith(
        f"the dp-hybrid model is not expected to beat public-only (accuracy {worth.rival[1]:.3f})"
    )
    for figure in (worth.dp_accuracy, worth.dp_spread, worth.dp_ceiling, worth.majority_accuracy):
        assert f"{figure:.3f}" in message
    assert "Nothing was requested or spent" in message and "--allow-noisy" in message
    check_worth(plan, dataclasses.replace(settings, allow_noisy=True), len(public.y))
    text = _dry_run_text({**preflight(facts, settings), "plan": plan.record(), "verdict": message})
    assert f"expected accuracy of the released model: {worth.dp_accuracy:.3f} (+-{worth.dp_spread:.3f}" in text
    assert f"against {worth.public_only_accuracy:.3f} for public-only and 0.500 for the majority class" in text


def test_many_private_records_or_no_noise_are_worth_releasing(owner: Owner) -> None:
    """The ceiling is what a model fitted on many records could reach: 30,000 records per entity, or no noise, beat
    public-only although the public records alone cannot show the gain."""
    public = load_public(owner.source)
    prepared = public_preprocessing(public.X)
    rho = learn_frequencies(prepared.scaled, prepared.width, 100, np.random.default_rng(0), tol=RHO_TOLERANCE).rho
    for mechanism, epsilon, counts, C in (("laplace", 1.0, [30_000] * 3, 10.0), ("none", None, [700] * 3, 100.0)):
        worth = estimate_worth(
            prepared.scaled,
            public.y,
            rho,
            C=C,
            public_width=prepared.width,
            counts=counts,
            mechanism=mechanism,
            epsilon=epsilon,
            threshold_epsilon=0.1,
            rng=np.random.default_rng(1),
        )
        assert worth.worth and worth.dp_ceiling > worth.public_only_accuracy, (mechanism, worth)
        assert worth.dp_ceiling >= worth.dp_accuracy and worth.folds == 5 and worth.draws == 10


def test_the_public_records_are_read_by_name_through_the_entities_schema(owner: Owner) -> None:
    """Columns in another order read alike; a hand-encoded (one-hot) file, an undeclared category and a missing
    value are refused naming the column; the source file's [schema] must be the vouched one."""
    public = load_public(owner.source)
    reordered = newcomer.write_csv(
        owner.directory / "reversed.csv", [row[::-1] for row in owner.rows["public"]], newcomer.HEADER[::-1]
    )
    moved = owner.directory / "reversed.toml"
    write_public_source(owner.config, reordered, moved)
    np.testing.assert_array_equal(load_public(moved).X, public.X)
    assert load_public(moved).check == public.check

    one_hot = owner.directory / "one-hot.csv"
    one_hot.write_text(
        "id,income," + ",".join(f"x{k}" for k in range(18)) + "\n" + "a,>50K," + ",".join(["0"] * 18) + "\n",
        encoding="utf-8",
    )
    with pytest.raises(DataError, match=r"one-hot.csv: no column\(s\) 'age', .*'sex', 'race', 'relationship'"):
        write_public_source(owner.config, one_hot, owner.directory / "x.toml")
    wrong = [row.copy() for row in owner.rows["public"]]
    wrong[4][newcomer.HEADER.index("sex")] = "female"
    wrong[6][newcomer.HEADER.index("age")] = ""
    # The schema's order: age (line 8) is met before sex (line 6).
    for line, column, text in ((8, "age", "missing value and the schema imputes none"), (6, "sex", "'female' is not")):
        with pytest.raises(DataError, match=rf"wrong.csv, line {line}, column '{column}': {text}"):
            write_public_source(
                owner.config, newcomer.write_csv(owner.directory / "wrong.csv", wrong), owner.directory / "x.toml"
            )
        wrong[6][newcomer.HEADER.index("age")] = "39"

    edited = owner.directory / "edited.toml"
    edited.write_text(owner.source.read_text().replace('"Female", "Male"', '"Male", "Female"'), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"edited.toml: its \[schema\] is not the one entity h0 vouched for"):
        load_public(edited)


def test_the_check_is_the_one_the_entity_publishes(owner: Owner, tmp_path: Path) -> None:
    """The public source carries exactly the keyed check a running entity puts in its Metadata: for a declared
    schema with categories, and for a plain cell CSV, whose schema the entity takes from its header."""
    assert load_public(owner.source).check == {
        "entity": "h0",
        "schema": load_public(owner.source).schema.fingerprint(),
        "features": EntityCore(load_entity_config(owner.config), new_release_log=True).features_check,
    }
    (tmp_path / "block.secret").write_text("cd" * 32 + "\n", encoding="utf-8")
    (tmp_path / "cell.csv").write_text("id,label,split,a,b\nr1,1,train,0.5,2\nr2,-1,train,0.1,3\n", encoding="utf-8")
    config = tmp_path / "cell.toml"
    config.write_text(
        '[entity]\nid = "c0"\ncolumn_block = 0\nsecret_file = "block.secret"\ndata = "cell.csv"\n', encoding="utf-8"
    )
    records = tmp_path / "public.csv"
    records.write_text("id,b,label,a\np1,4,1,0.3\np2,1,-1,0.9\n", encoding="utf-8")
    public = write_public_source(config, records, tmp_path / "public.toml")
    assert public.check is not None and public.X.tolist() == [[0.3, 4.0], [0.9, 1.0]]
    assert public.check["features"] == EntityCore(load_entity_config(config), new_release_log=True).features_check


def test_the_keyed_check_refuses_another_schema_before_anything_is_spent(owner: Owner) -> None:
    """An entity whose schema orders the categories otherwise (same width) publishes another keyed check: named."""
    public = load_public(owner.source)
    facts = metadata(public)
    other = owner.directory / "other"
    other.mkdir(exist_ok=True)
    (other / "block.secret").write_text("ab" * 32 + "\n", encoding="utf-8")
    swapped = newcomer.schema_toml().replace('"Female", "Male"', '"Male", "Female"')
    source = other / "public.toml"
    write_public_source(entity_config(other, "h2", swapped, owner.rows["private"][:50]), owner.records, source)
    assert load_public(source).check != public.check
    facts["h2"].features_check = load_public(source).check["features"]  # type: ignore[index]
    with pytest.raises(DataError, match=r"vouched for by entity h0, is not the schema of entities h2 \(keyed checks"):
        check_public_schema(public, facts)
    facts["h1"].n_features = 17
    with pytest.raises(DataError, match=r"the public records have 18 features; entities \{'h1': 17\}"):
        check_public_schema(public, facts)


def test_a_plain_csv_is_for_public_only(owner: Owner, tmp_path: Path) -> None:
    """The cell CSV no entity vouched for: public-only (which asks no entity) takes it, the others refuse it."""
    cell = tmp_path / "public.csv"
    encoded = load_public(owner.source)
    lines = ["id,label," + ",".join(f"x{k}" for k in range(18))]
    lines += [
        f"p{k},{int(label)}," + ",".join(map(repr, row))
        for k, (row, label) in enumerate(zip(encoded.X.tolist(), encoded.y, strict=True))
    ]
    cell.write_text("\n".join(lines) + "\n", encoding="utf-8")
    plain = load_public(cell)
    assert plain.check is None and plain.X.shape == (200, 18)
    with pytest.raises(
        ConfigError,
        match=r"public.csv is a CSV that no entity vouched for: .* `ppsvm coordinator public-source --entity-config",
    ):
        check_public_schema(plain, metadata(encoded))
    model = train_dp(None, options(cell, method="public-only", epsilon=None))
    assert model.schema["features"][0] == {"name": "x0", "type": "number"}


def test_a_dp_model_scores_records_through_its_schema(owner: Owner, tmp_path: Path) -> None:
    """predict --records and serve's Predict read records by the schema the model keeps; no federation needed."""
    model = train_dp(None, options(owner.source, method="public-only", epsilon=None))
    assert model.schema == {"features": newcomer.schema_features()}
    model_file = tmp_path / "dp.json"
    model.save(model_file)
    assert DpModel.from_json(model_file.read_text()).schema == model.schema
    rows = owner.rows["test"][:50]
    records = newcomer.write_csv(tmp_path / "new.csv", [row[::-1] for row in rows], newcomer.HEADER[::-1])
    ids, X = records_to_score(model, records)
    public_records = newcomer.write_csv(tmp_path / "same.csv", rows)
    write_public_source(owner.config, public_records, tmp_path / "same.toml")
    np.testing.assert_array_equal(X, load_public(tmp_path / "same.toml").X)
    assert ids.tolist() == [row[0] for row in rows]

    out = tmp_path / "scores.csv"
    command = [sys.executable, "-m", "ppsvm", "coordinator", "predict", "--model", str(model_file)]
    done = subprocess.run(
        [*command, "--records", str(records), "--out", str(out)], capture_output=True, text=True, cwd=REPO
    )
    assert done.returncode == 0, done.stderr
    lines = out.read_text().splitlines()
    assert lines[0] == "id,decision,prediction,probability,status" and len(lines) == 51
    decision = model.decision(X)
    first = lines[1].split(",")
    assert first[0] == ids[0] and float(first[1]) == decision[0]
    assert first[2] == model.label_names(model.prediction(decision))[0]  # the label the public source declares
    by_id = subprocess.run(
        [*command, "--ids", str(records), "--out", str(out)], capture_output=True, text=True, cwd=REPO
    )
    assert by_id.returncode != 0 and "is a DP model: it scores records from their features" in by_id.stderr

    servicer = DpServicer(model, records)
    reply = servicer.Predict(pb.PredictRequest(ids=[ids[3], "nobody", ids[0]]), None)  # type: ignore[arg-type]
    assert [p.id for p in reply.predictions] == [ids[3], ids[0]] and list(reply.not_found) == ["nobody"]
    assert [p.decision for p in reply.predictions] == [decision[3], decision[0]]
    status = servicer.Status(pb.Empty(), None)  # type: ignore[arg-type]
    assert (status.kernel, status.requests_served, status.private) == ("public-only", 2, True)
