"""Entities reading SQL (SQLite, a real PostgreSQL server), Parquet and CSV sources serve the same federation.

Three row blocks of one column block hold hospital-like records: a text id, a text outcome, a
categorical column and a column with gaps, encoded by a declared schema (one-hot over declared
categories, a stated imputation). The same records are served once from three CSV files and once
with one entity on a database, one on Parquet and one on CSV; the assembled kernels agree to
1e-12 and `ppsvm coordinator train` writes the same model.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ppsvm.config import federation_at_addresses, load_federation
from ppsvm.coordinator.federation import Session
from ppsvm.data.partition import SplitOptions, split_dataset
from ppsvm.processes import EntityProcesses
from ppsvm.wire.rpc import ppsvm_pb2 as pb
from ppsvm.wire.rpc import ppsvm_pb2_grpc as pb_grpc

from .conftest import Postgres, coordinator_channel, ppsvm, ppsvm_process, pseudonyms, rule_dataset

COLUMNS = ("patient", "x0", "x1", "x2", "smoker", "bmi", "outcome", "part")
SMOKER = ("never", "former", "current")
SCHEMA_TOML = """
[[schema.features]]
name = "x0"
[[schema.features]]
name = "x1"
[[schema.features]]
name = "x2"
[[schema.features]]
name = "smoker"
type = "category"
categories = ["never", "former", "current"]
impute = "never"
[[schema.features]]
name = "bmi"
impute = 0.5
"""
ROWS_PER_ENTITY, MBAR, MU, NU = 80, 5, 0.2, 1.0


def records(seed: int) -> list[tuple[Any, ...]]:
    """Three entities' worth of rows: ids p0000..., a learnable rule, about 10% of bmi and 5% of smoker missing."""
    rng = np.random.default_rng(seed)
    rows = []
    for k in range(3 * ROWS_PER_ENTITY):
        x = rng.random(3)
        smoker = None if rng.random() < 0.05 else SMOKER[int(rng.integers(3))]
        bmi = None if rng.random() < 0.1 else round(float(rng.random()), 6)
        score = x[0] - x[1] + (0.4 if smoker == "current" else 0.0)
        part = "test" if k % 5 == 4 else "train"
        rows.append((f"p{k:04d}", *np.round(x, 6).tolist(), smoker, bmi, "yes" if score > 0 else "no", part))
    return rows


def data_table(source: str, where: str) -> str:
    """The [data] table of a source with the records' column names and text labels."""
    return (
        f'\n[data]\nsource = "{source}"\n{where}\nid = "patient"\nlabel = "outcome"\nsplit = "part"\n'
        'labels = { positive = "yes", negative = "no" }\n'
    )


def write_csv(path: Path, rows: list[tuple[Any, ...]]) -> None:
    lines = [",".join(COLUMNS), *(",".join("" if v is None else str(v) for v in row) for row in rows)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def write_parquet(path: Path, rows: list[tuple[Any, ...]]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({name: [row[k] for row in rows] for k, name in enumerate(COLUMNS)}), path)


def write_sql(url: str, rows: list[tuple[Any, ...]], name: str = "patients") -> None:
    import sqlalchemy

    engine = sqlalchemy.create_engine(url)
    numbers = {"x0", "x1", "x2", "bmi"}
    table = sqlalchemy.Table(
        name,
        sqlalchemy.MetaData(),
        *(sqlalchemy.Column(name, sqlalchemy.Float if name in numbers else sqlalchemy.Text) for name in COLUMNS),
    )
    with engine.begin() as connection:
        table.drop(connection, checkfirst=True)
        table.create(connection)
        if rows:
            connection.execute(table.insert(), [dict(zip(COLUMNS, row, strict=True)) for row in rows])
    engine.dispose()


def federation_dir(tmp: Path, name: str, sources: list[str], schema: str = SCHEMA_TOML) -> Path:
    """A 3 x 1 federation (certificates, secret, configs from `split_dataset`) whose entities read ``sources``.

    The same column-block secret in every directory (copied from one split), so B and the kernels agree.
    """
    skeleton = tmp / "skeleton"
    if not skeleton.exists():
        placeholder = rule_dataset(np.random.default_rng(0).random((30, 7)))
        split_dataset(placeholder, SplitOptions(rows=3, cols=1, out_dir=skeleton, test_fraction=0.2, seed=0))
    out = tmp / name
    shutil.copytree(skeleton, out)
    for k, source in enumerate(sources):
        config = out / f"r{k}c0.toml"
        (out / f"r{k}c0.csv").unlink()  # the placeholder's cell: these entities read their own source
        # The placeholder's cell and numeric schema give way to this entity's own source and schema.
        text = re.sub(r'(?m)^data = "r\dc0\.csv"\n', "", config.read_text().split("\n[[schema.features]]")[0])
        # Three hospitals of one column block (horizontal): each block leaves on its own, so each consents (rule 8);
        # these tests are about the sources (tests/integration/test_collusion.py checks the refusal without it).
        config.write_text(text + source + schema + "\n[privacy]\nconsent_single_block_release = true\n")
    return out


def serve_and_train(split_dir: Path) -> tuple[np.ndarray, dict[str, Any]]:
    """Start the entities, fetch the training kernel through Session, train through the CLI; K and the model."""
    planned = load_federation(split_dir / "federation.toml")
    with EntityProcesses([split_dir / f"{e.id}.toml" for e in planned.entities]) as running:
        live = split_dir / "federation.live.toml"
        live.write_text(federation_at_addresses(planned, running.addresses))
        with Session(load_federation(live)) as session:
            blocks, scaling = session.survey()
            K = session.kernel("gaussian", MBAR, MU, scaling, blocks, "train")
        model = split_dir / "model.json"
        options = ["--kernel", "gaussian", "--mbar", str(MBAR), "--mu", str(MU), "--nu", str(NU), "--basis", "paper"]
        ppsvm("coordinator", "train", "--federation", str(live), "--model-out", str(model), *options)
    return K, json.loads(model.read_text())


@pytest.fixture(scope="module")
def rows() -> list[tuple[Any, ...]]:
    return records(seed=11)


@pytest.fixture(scope="module")
def all_csv(tmp_path_factory: pytest.TempPathFactory, rows: list[tuple[Any, ...]]) -> Iterator[Any]:
    tmp = tmp_path_factory.mktemp("sources")
    sources = []
    for k in range(3):
        write_csv(tmp / f"entity{k}.csv", rows[k * ROWS_PER_ENTITY : (k + 1) * ROWS_PER_ENTITY])
        sources.append(data_table("csv", f'path = "../entity{k}.csv"'))
    yield tmp, serve_and_train(federation_dir(tmp, "all-csv", sources))


def mixed(tmp: Path, rows: list[tuple[Any, ...]], url: str, name: str) -> tuple[np.ndarray, dict[str, Any]]:
    """Entity 0 on the database at ``url``, entity 1 on Parquet, entity 2 on CSV."""
    write_sql(url, rows[:ROWS_PER_ENTITY])
    write_parquet(tmp / f"{name}-entity1.parquet", rows[ROWS_PER_ENTITY : 2 * ROWS_PER_ENTITY])
    sources = [
        data_table("sql", f'url = "{url}"\ntable = "patients"'),
        data_table("parquet", f'path = "../{name}-entity1.parquet"'),
        data_table("csv", 'path = "../entity2.csv"'),
    ]
    return serve_and_train(federation_dir(tmp, name, sources))


def assert_same_federation(got: tuple[np.ndarray, dict[str, Any]], want: tuple[np.ndarray, dict[str, Any]]) -> None:
    (K, model), (K_csv, model_csv) = got, want
    assert K.shape == K_csv.shape == (3 * ROWS_PER_ENTITY * 4 // 5, MBAR)
    np.testing.assert_allclose(K, K_csv, rtol=0, atol=1e-12)
    np.testing.assert_allclose(model["u"], model_csv["u"], rtol=0, atol=1e-9)
    assert model["gamma"] == pytest.approx(model_csv["gamma"], abs=1e-9)
    # The encoded width: 3 numbers, 3 one-hot columns, bmi.
    assert model["training"]["n_features"] == [7]


def test_sqlite_parquet_and_csv_entities_train_the_all_csv_model(all_csv: Any, rows: list[tuple[Any, ...]]) -> None:
    tmp, want = all_csv
    assert_same_federation(mixed(tmp, rows, f"sqlite:///{tmp / 'hospital.db'}", "sqlite"), want)


def test_postgresql_parquet_and_csv_entities_train_the_all_csv_model(
    all_csv: Any, rows: list[tuple[Any, ...]], postgres: Postgres
) -> None:
    tmp, want = all_csv
    assert_same_federation(mixed(tmp, rows, postgres.url, "postgresql"), want)


# --- new records: a scoring source that grows while the entities serve ------------------------------------


def insert(url: str, table: str, rows: list[tuple[Any, ...]]) -> None:
    import sqlalchemy

    engine = sqlalchemy.create_engine(url)
    with engine.begin() as connection:
        connection.execute(
            sqlalchemy.text(
                f"INSERT INTO {table} ({', '.join(COLUMNS)}) VALUES ({', '.join(':' + c for c in COLUMNS)})"
            ),
            [dict(zip(COLUMNS, row, strict=True)) for row in rows],
        )
    engine.dispose()


def drop_table(url: str, table: str) -> None:
    import sqlalchemy

    engine = sqlalchemy.create_engine(url)
    with engine.begin() as connection:
        connection.execute(sqlalchemy.text(f"DROP TABLE {table}"))
    engine.dispose()


def expected_decision(split_dir: Path, model: dict[str, Any], row: tuple[Any, ...]) -> float:
    """K(x', B') u - gamma for one raw record, computed here from the schema, the model's scaling and B."""
    from ppsvm.config import load_entity_config
    from ppsvm.core.randomness import derive_B

    x = [row[1], row[2], row[3], *(1.0 if (row[4] or "never") == s else 0.0 for s in SMOKER)]
    x.append(0.5 if row[5] is None else row[5])
    low, high = np.array(model["scaling"][0]["low"]), np.array(model["scaling"][0]["high"])
    scaled = (np.array(x, dtype=float) - low) / np.where(high > low, high - low, 1.0)
    B = derive_B(load_entity_config(split_dir / "r0c0.toml").read_secret(), MBAR, len(x))
    return float(
        np.exp(-model["mu"] * ((scaled[None, :] - B) ** 2).sum(axis=1)) @ np.array(model["u"]) - model["gamma"]
    )


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
def test_new_records_inserted_after_training_are_scored(
    database: str, rows: list[tuple[Any, ...]], tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Entity 0 reads its training records and a scoring table from a database; records inserted into the
    scoring table after training are scored by `coordinator serve` without retraining, and an id no entity
    holds comes back in not_found instead of failing the batch."""
    url = f"sqlite:///{tmp_path / 'clinic.db'}" if database == "sqlite" else request.getfixturevalue("postgres").url
    write_sql(url, rows[:ROWS_PER_ENTITY])
    write_sql(url, [], name="new_patients")
    for k in (1, 2):
        write_csv(tmp_path / f"entity{k}.csv", rows[k * ROWS_PER_ENTITY : (k + 1) * ROWS_PER_ENTITY])
    scoring = f'\n[scoring]\nsource = "sql"\nurl = "{url}"\ntable = "new_patients"\nid = "patient"\n'
    sources = [
        data_table("sql", f'url = "{url}"\ntable = "patients"') + scoring,
        data_table("csv", 'path = "../entity1.csv"'),
        data_table("csv", 'path = "../entity2.csv"'),
    ]
    split_dir = federation_dir(tmp_path, database, sources)
    planned = load_federation(split_dir / "federation.toml")
    with EntityProcesses([split_dir / f"{e.id}.toml" for e in planned.entities]) as running:
        live = split_dir / "federation.live.toml"
        live.write_text(federation_at_addresses(planned, running.addresses))
        model_path = split_dir / "model.json"
        options = ["--kernel", "gaussian", "--mbar", str(MBAR), "--mu", str(MU), "--nu", str(NU), "--basis", "paper"]
        ppsvm("coordinator", "train", "--federation", str(live), "--model-out", str(model_path), *options)
        model = json.loads(model_path.read_text())
        server = ppsvm_process(
            "coordinator", "serve", "--federation", str(live), "--model", str(model_path), "--listen", "127.0.0.1:0"
        )
        try:
            assert server.stdout is not None
            address = server.stdout.readline().split()[-1]
            new = [
                ("n0001", 0.9, 0.1, 0.3, "current", None, None, None),
                ("n0002", 0.2, 0.8, 0.5, None, 0.7, None, None),
            ]
            insert(url, "new_patients", new)
            asked = pseudonyms(split_dir, ["n0001", rows[0][0], "n9999", "n0002"])
            with coordinator_channel(live, address) as channel:
                reply = pb_grpc.CoordinatorStub(channel).Predict(pb.PredictRequest(ids=asked), timeout=30)
        finally:
            server.terminate()
            server.wait(timeout=30)
        # The same by batch: `coordinator predict`, asked by real id by a holder of the record-id key.
        (split_dir / "ids.txt").write_text("id\nn0001\nn9999\n" + rows[0][0] + "\n")
        out = split_dir / "predictions.csv"
        key = ["--id-key", str(split_dir / "record-ids.key")]
        model_args = ["--model", str(model_path), "--ids", str(split_dir / "ids.txt"), "--out", str(out)]
        ppsvm("coordinator", "predict", "--federation", str(live), *model_args, *key)
        lines = [line.split(",") for line in out.read_text().splitlines()]
        # The scoring table gone: the new records are not found, and the coordinator is told which entity cannot
        # read its scoring source (the reason stays in that entity's log).
        drop_table(url, "new_patients")
        gone = ppsvm("coordinator", "predict", "--federation", str(live), *model_args, *key)
        assert "scoring source of entity r0c0 could not be read" in gone.stderr, gone.stderr
    assert [p.id for p in reply.predictions] == [asked[0], asked[1], asked[3]]
    assert list(reply.not_found) == [asked[2]]
    want = [
        expected_decision(split_dir, model, new[0]),
        expected_decision(split_dir, model, rows[0]),
        expected_decision(split_dir, model, new[1]),
    ]
    np.testing.assert_allclose([p.decision for p in reply.predictions], want, rtol=0, atol=1e-10)
    assert lines[0] == ["id", "decision", "prediction", "probability", "status"]
    assert [(line[0], line[4]) for line in lines[1:]] == [("n0001", "ok"), ("n9999", "not found"), (rows[0][0], "ok")]
    np.testing.assert_allclose([float(lines[1][1]), float(lines[3][1])], [want[0], want[1]], rtol=0, atol=1e-10)


# --- a federation that lives: a hospital's records grow, it restarts, the coordinator retrains -------------------

# The same features with the bounds the hospitals agreed (issue 26): the numbers lie in [0, 1] by construction.
BOUNDED_SCHEMA_TOML = "".join(
    line + ("\nlow = 0.0\nhigh = 1.0" if line.startswith('name = "x') or line == 'name = "bmi"' else "") + "\n"
    for line in SCHEMA_TOML.strip().splitlines()
)


@pytest.mark.long
def test_a_hospital_grows_and_the_federation_retrains_without_an_edit(
    rows: list[tuple[Any, ...]], tmp_path: Path
) -> None:
    """Three hospitals on SQLite, Parquet and CSV with declared bounds; one adds 40 training records, one of them
    beyond the bounds (clipped), and restarts: the coordinator retrains with no edit and no new secret, and the
    deployed model evaluates as before."""
    url = f"sqlite:///{tmp_path / 'hospital.db'}"
    write_sql(url, rows[:ROWS_PER_ENTITY])
    write_parquet(tmp_path / "entity1.parquet", rows[ROWS_PER_ENTITY : 2 * ROWS_PER_ENTITY])
    write_csv(tmp_path / "entity2.csv", rows[2 * ROWS_PER_ENTITY :])
    sources = [
        data_table("sql", f'url = "{url}"\ntable = "patients"'),
        data_table("parquet", 'path = "../entity1.parquet"'),
        data_table("csv", 'path = "../entity2.csv"'),
    ]
    split_dir = federation_dir(tmp_path, "living", sources, BOUNDED_SCHEMA_TOML)
    planned = load_federation(split_dir / "federation.toml")
    configs = [split_dir / f"{e.id}.toml" for e in planned.entities]
    live = split_dir / "federation.live.toml"
    options = ["--kernel", "gaussian", "--mbar", str(MBAR), "--mu", str(MU), "--nu", str(NU)]
    with EntityProcesses(configs) as running:
        live.write_text(federation_at_addresses(planned, running.addresses))
        ppsvm("coordinator", "train", "--federation", str(live), "--model-out", str(split_dir / "m0.json"), *options)
        before = ppsvm("coordinator", "evaluate", "--federation", str(live), "--model", str(split_dir / "m0.json"),
                       "--json").stdout  # fmt: skip
    grown = [(f"g{k:04d}", *row[1:7], "train") for k, row in enumerate(records(seed=12)[:40])]
    grown[0] = (grown[0][0], 97.0, *grown[0][2:])  # x0 far beyond its bound: clipped at the entity, counted there
    insert(url, "patients", grown)
    with EntityProcesses(configs) as running:  # every hospital restarted, the grown one re-reads its table
        live.write_text(federation_at_addresses(planned, running.addresses))
        ppsvm("coordinator", "train", "--federation", str(live), "--model-out", str(split_dir / "m1.json"), *options)
        after = ppsvm("coordinator", "evaluate", "--federation", str(live), "--model", str(split_dir / "m0.json"),
                      "--json").stdout  # fmt: skip
    m0, m1 = (json.loads((split_dir / f"m{k}.json").read_text()) for k in (0, 1))
    assert m1["training"]["n_train"] == m0["training"]["n_train"] + 40
    assert m1["scaling"] == m0["scaling"]  # the declared bounds: new records never move the scaling
    assert json.loads(after.splitlines()[-1])["error_rate"] == json.loads(before.splitlines()[-1])["error_rate"]


# --- PostgreSQL through ADBC: the rows, the order and the errors of the SQLAlchemy reader ---------------------


def test_postgresql_is_read_through_adbc_exactly_as_the_sqlalchemy_reader_reads_it(
    rows: list[tuple[Any, ...]], postgres: Postgres, caplog: pytest.LogCaptureFixture
) -> None:
    """NUMERIC and integer columns, a table name that needs quoting, a query with a LIKE '%': ADBC's Arrow columns
    give the SQLAlchemy reader's cell bit for bit, and a refused connection never shows its password."""
    import logging
    import tomllib

    import sqlalchemy

    from ppsvm.data import columnar, sources
    from ppsvm.data.schema import parse_schema
    from ppsvm.errors import DataError

    pytest.importorskip("adbc_driver_postgresql")
    engine = sqlalchemy.create_engine(postgres.url)
    with engine.begin() as connection:
        connection.execute(sqlalchemy.text('DROP TABLE IF EXISTS "Patients 2"'))
        connection.execute(sqlalchemy.text(
            'CREATE TABLE "Patients 2" (patient text, x0 numeric, x1 double precision, x2 integer, smoker text, '
            "bmi numeric(12, 6), outcome text, part text)"
        ))  # fmt: skip
        for k, row in enumerate(rows[:60]):
            values = dict(zip(COLUMNS, row, strict=True)) | {"x2": k % 5}
            columns = ", ".join(COLUMNS)
            connection.execute(
                sqlalchemy.text(f'INSERT INTO "Patients 2" ({columns}) VALUES ({", ".join(":" + c for c in COLUMNS)})'),
                values,
            )
    engine.dispose()
    schema = parse_schema(tomllib.loads(SCHEMA_TOML)["schema"], "test")
    common = {"id_column": "patient", "label_column": "outcome", "split_column": "part", "labels": ("yes", "no")}
    for source in (
        sources.DataSource("sql", url=postgres.url, table="Patients 2", **common),
        sources.DataSource(
            "sql", url=postgres.url, query="SELECT * FROM \"Patients 2\" WHERE patient LIKE 'p%'", **common
        ),
    ):
        want = sources._read_by_batches(source, schema, 1 << 20, False)
        got = columnar.read_source(source, schema, 1 << 20)  # raises NotColumnar if ADBC could not read it
        for name in ("train_ids", "test_ids"):
            assert getattr(got, name).tolist() == getattr(want, name).tolist()
        for name in ("X_train", "X_test", "y_train", "y_test"):
            assert getattr(got, name).tobytes() == getattr(want, name).tobytes(), name
    refused = sources.DataSource("sql", url="postgresql+psycopg://alice:s3cret@127.0.0.1:9/h", table="t", **common)
    caplog.set_level(logging.INFO)
    with pytest.raises(DataError) as caught:
        sources.read_source(refused, schema)
    assert "127.0.0.1" in str(caught.value) and "s3cret" not in str(caught.value) + caplog.text
