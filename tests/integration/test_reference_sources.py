"""`ppsvm reference` (NOT PRIVATE) reads every entity's records through its config, wherever the configs are.

A 2 x 2 federation of hospital-like records (tests/integration/test_data_sources.py's: text ids and outcomes, a
category and a column with gaps, encoded by a declared schema) is written twice: once as a split directory whose
entities read CSV files, once with the federation file in one directory, the entity configs in another and the
records in SQLite and Parquet (one cell's rows in another order). The reference pools the same matrices and
prints the same figures from both. Everything runs in this process: the reference starts no entity.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ppsvm.cli import main
from ppsvm.config import FederationEntity, federation_toml, toml_document
from ppsvm.coordinator.reference import LABEL, pool_cells

from .test_data_sources import ROWS_PER_ENTITY, data_table, records, write_csv, write_parquet, write_sql

# Column block 0 holds the measurements, column block 1 the category and the column with gaps.
SCHEMAS = (
    '\n[[schema.features]]\nname = "x0"\n[[schema.features]]\nname = "x1"\n[[schema.features]]\nname = "x2"\n',
    '\n[[schema.features]]\nname = "smoker"\ntype = "category"\ncategories = ["never", "former", "current"]\n'
    'impute = "never"\n[[schema.features]]\nname = "bmi"\nimpute = 0.5\n',
)
ROW_BLOCK = 3 * ROWS_PER_ENTITY // 2
ENTITIES = [f"r{i}c{j}" for i in range(2) for j in range(2)]


def write_federation(path: Path) -> Path:
    entities = [
        FederationEntity(f"r{i}c{j}", f"127.0.0.1:{50061 + 2 * i + j}", i, j) for i in range(2) for j in range(2)
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(federation_toml({"task": "classify", "kernel": "gaussian"}, entities), encoding="utf-8")
    return path


def write_config(path: Path, entity: str, source: str) -> Path:
    """An entity config (the keys the reference reads, and the secret a config must name) with its source table."""
    j = int(entity[-1])
    members = list(dict.fromkeys([*(f"r{i}c{j}" for i in range(2)), entity]))
    head = toml_document(
        f"entity {entity}",
        [("[entity]", {"id": entity, "column_block": j, "secret_file": "s.secret", "column_block_members": members})],
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(head + source + SCHEMAS[j], encoding="utf-8")
    return path


def cell_rows(rows: list[tuple[Any, ...]], entity: str) -> list[tuple[Any, ...]]:
    i = int(entity[1])
    return rows[i * ROW_BLOCK : (i + 1) * ROW_BLOCK]


@pytest.fixture(scope="module")
def rows() -> list[tuple[Any, ...]]:
    return records(seed=5)


@pytest.fixture(scope="module")
def all_csv(tmp_path_factory: pytest.TempPathFactory, rows: list[tuple[Any, ...]]) -> Path:
    """A split directory: federation.toml and rIcJ.toml side by side, each entity reading its own CSV file."""
    split_dir = tmp_path_factory.mktemp("all-csv")
    write_federation(split_dir / "federation.toml")
    for entity in ENTITIES:
        write_csv(split_dir / f"{entity}.csv", cell_rows(rows, entity))
        write_config(split_dir / f"{entity}.toml", entity, data_table("csv", f'path = "{entity}.csv"'))
    return split_dir


@pytest.fixture(scope="module")
def elsewhere(tmp_path_factory: pytest.TempPathFactory, rows: list[tuple[Any, ...]]) -> tuple[Path, list[Path]]:
    """The same federation with its file, its configs and its records in three directories, on SQLite and Parquet.

    r0c0 and r1c1 read tables of one SQLite database, r0c1 and r1c0 Parquet files (r0c1's rows reversed: the
    reference aligns records by id).
    """
    tmp = tmp_path_factory.mktemp("elsewhere")
    url = f"sqlite:///{tmp / 'records' / 'hospital.db'}"
    (tmp / "records").mkdir()
    configs = []
    for entity in ENTITIES:
        held = cell_rows(rows, entity)
        if entity in ("r0c0", "r1c1"):
            write_sql(url, held, name=f"patients_{entity}")
            source = data_table("sql", f'url = "{url}"\ntable = "patients_{entity}"')
        else:
            write_parquet(tmp / "records" / f"{entity}.parquet", held[::-1] if entity == "r0c1" else held)
            source = data_table("parquet", f'path = "../records/{entity}.parquet"')
        configs.append(write_config(tmp / "sites" / f"{entity}-site.toml", entity, source))
    return write_federation(tmp / "coordinator" / "federation.toml"), configs[::-1]


def reference(*args: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """``ppsvm reference ARGS`` in this process: exit status, stdout, stderr."""
    status = main(["-q", "reference", *args])
    out, err = capsys.readouterr()
    return status, out, err


def test_sqlite_and_parquet_entities_give_the_all_csv_reference(
    all_csv: Path, elsewhere: tuple[Path, list[Path]], capsys: pytest.CaptureFixture[str]
) -> None:
    federation, configs = elsewhere
    pooled = pool_cells(all_csv)
    # 2 row blocks of 96 training records; 3 numbers, then smoker's 3 one-hot columns and bmi.
    assert pooled[0].shape == (2 * ROW_BLOCK * 4 // 5, 7)
    for got, want in zip(pool_cells(federation, configs), pooled, strict=True):
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)

    status, out, err = reference(str(all_csv), "--json", capsys=capsys)
    assert status == 0, err
    want = json.loads(out)
    status, out, err = reference(
        "--federation", str(federation), "--entity-config", *map(str, configs), "--json", capsys=capsys
    )
    assert status == 0, err
    got = json.loads(out)
    assert got["private"] is want["private"] is False
    assert set(got) == set(want)
    for key, value in want.items():
        assert got[key] == pytest.approx(value, rel=0, abs=1e-12), key
    assert got["n_test"] == 2 * ROW_BLOCK // 5 and got["error_rate"] < 0.3  # a learnable rule, learnt
    # The text output says what it is.
    status, out, err = reference(
        "--federation", str(federation), "--entity-config", *map(str, configs), "--nu", "1", "--mu", "1", capsys=capsys
    )
    assert status == 0, err
    assert out.startswith(LABEL) and "NOT PRIVATE" in out


def test_an_entity_without_a_config_is_named(
    all_csv: Path, elsewhere: tuple[Path, list[Path]], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    federation, configs = elsewhere
    given = [str(path) for path in configs if not path.name.startswith("r1c0")]
    status, _, err = reference("--federation", str(federation), "--entity-config", *given, capsys=capsys)
    assert status == 1
    assert "no entity config given for r1c0" in err and "--entity-config" in err, err

    # A split directory that lacks one: the entity and the file looked for.
    (tmp_path / "federation.toml").write_text((all_csv / "federation.toml").read_text(), encoding="utf-8")
    for entity in ("r0c0", "r1c0", "r1c1"):
        (tmp_path / f"{entity}.toml").write_text((all_csv / f"{entity}.toml").read_text(), encoding="utf-8")
    status, _, err = reference(str(tmp_path), capsys=capsys)
    assert status == 1
    assert f"r0c1 ({tmp_path / 'r0c1.toml'})" in err and "--entity-config" in err, err


def test_configs_that_do_not_fit_the_federation_are_refused(
    elsewhere: tuple[Path, list[Path]], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    federation, configs = elsewhere
    stranger = write_config(tmp_path / "stranger.toml", "r2c0", data_table("csv", 'path = "none.csv"'))
    status, _, err = reference(
        "--federation", str(federation), "--entity-config", *map(str, configs), str(stranger), capsys=capsys
    )
    assert status == 1 and "lists no entity 'r2c0'" in err and "its entities: r0c0, r0c1, r1c0, r1c1" in err, err

    twice = [*map(str, configs), str(configs[0])]
    status, _, err = reference("--federation", str(federation), "--entity-config", *twice, capsys=capsys)
    assert status == 1 and f"both configure entity {configs[0].name[:4]!r}" in err, err

    # r0c1's config moved to column block 0: the pooled columns would be misplaced.
    moved = tmp_path / "moved.toml"
    moved.write_text(configs[2].read_text().replace("column_block = 1", "column_block = 0"), encoding="utf-8")
    assert configs[2].name.startswith("r0c1")
    others = [str(path) for path in configs if path != configs[2]]
    status, _, err = reference("--federation", str(federation), "--entity-config", *others, str(moved), capsys=capsys)
    assert status == 1 and "holds column block 0" in err and "column block 1" in err, err
