"""Entity and federation config files: valid files round-trip, every error names the file and the key or entity."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ppsvm.config import (
    FederationEntity,
    federation_toml,
    load_entity_config,
    load_federation,
    toml_document,
    toml_string,
)
from ppsvm.core.randomness import MIN_SECRET_BYTES
from ppsvm.errors import ConfigError

from .files import assert_load_fails, assert_names_file, write

SECRET_HEX = "00112233445566778899aabbccddeeff0123456789abcdef"


def entity_toml(**overrides: str | None) -> str:
    """An [entity] table; a value of None drops the key, a string is written verbatim (TOML source)."""
    keys: dict[str, str | None] = {
        "id": '"e00"',
        "listen": '"127.0.0.1:5000"',
        "data": '"cells/e00.csv"',
        "column_block": "1",
        "secret_file": '"secrets/col1.hex"',
    }
    keys.update(overrides)
    return "[entity]\n" + "".join(f"{k} = {v}\n" for k, v in keys.items() if v is not None)


# ---------------------------------------------------------------- entity config


def test_entity_config_round_trip_paths_relative_to_file(tmp_path: Path) -> None:
    path = write(tmp_path / "conf" / "e00.toml", entity_toml())
    config = load_entity_config(path)
    assert config.id == "e00"
    assert config.listen == "127.0.0.1:5000"
    assert config.column_block == 1
    assert config.data.path == tmp_path / "conf" / "cells" / "e00.csv"
    assert config.secret_file == tmp_path / "conf" / "secrets" / "col1.hex"
    assert config.secret_env is None
    assert config.non_private_override is False
    assert config.source == path


def test_label_names_name_a_cell_s_labels(tmp_path: Path) -> None:
    config = load_entity_config(write(tmp_path / "e.toml", entity_toml(label_names='["healthy", "sick"]')))
    assert config.label_names == ("healthy", "sick")
    assert load_entity_config(write(tmp_path / "f.toml", entity_toml())).label_names is None


def test_entity_config_defaults_and_override(tmp_path: Path) -> None:
    text = entity_toml(listen=None, secret_file=None, secret_env='"PPSVM_SECRET"')
    text += "\n[privacy]\nnon_private_allow_mbar_at_least_features = true\n"
    config = load_entity_config(write(tmp_path / "e.toml", text))
    assert config.listen == "127.0.0.1:0"
    assert config.secret_file is None
    assert config.secret_env == "PPSVM_SECRET"
    assert config.non_private_override is True


def test_entity_config_absolute_data_path_kept(tmp_path: Path) -> None:
    absolute = tmp_path / "elsewhere" / "cell.csv"
    config = load_entity_config(write(tmp_path / "c" / "e.toml", entity_toml(data=f'"{absolute.as_posix()}"')))
    assert config.data.path == absolute


@pytest.mark.parametrize(
    ("text", "fragments"),
    [
        ("[other]\nx = 1\n", ["missing [entity] table"]),
        ("entity = 3\n", ["missing [entity] table"]),
        (entity_toml(id=None), ["[entity]", "missing required key 'id'"]),
        (entity_toml(data=None), ["[entity]", "missing required key 'data'"]),
        (entity_toml(column_block=None), ["[entity]", "missing required key 'column_block'"]),
        (entity_toml(column_block='"1"'), ["'column_block' must be an integer, got '1'"]),
        (entity_toml(column_block="true"), ["'column_block' must be an integer, got True"]),
        (entity_toml(column_block="1.0"), ["'column_block' must be an integer, got 1.0"]),
        (entity_toml(id="5"), ["'id' must be a string, got 5"]),
        (entity_toml(listen="5000"), ["'listen' must be a string, got 5000"]),
        (entity_toml(column_block="-1"), ["'column_block' must be >= 0, got -1"]),
        (entity_toml(secret_file=None), ["exactly one of 'secret_file' or 'secret_env'"]),
        (entity_toml(secret_env='"X"'), ["exactly one of 'secret_file' or 'secret_env'"]),
        (entity_toml(secret_file="7"), ["'secret_file' must be a string, got 7"]),
        ("privacy = 1\n" + entity_toml(), ["[privacy] must be a table"]),
        (
            entity_toml() + "[privacy]\nnon_private_allow_mbar_at_least_features = 1\n",
            ["[privacy]", "'non_private_allow_mbar_at_least_features' must be true or false, got 1"],
        ),
        (
            entity_toml() + '[privacy]\nnon_private_allow_mbar_at_least_features = "yes"\n',
            ["'non_private_allow_mbar_at_least_features' must be true or false"],
        ),
        (entity_toml(label_names='["B"]'), ["label_names must be two different texts [negative, positive]"]),
        (entity_toml(label_names='["B", "B"]'), ["label_names must be two different texts"]),
        (entity_toml(label_names='["a", "b", "a"]'), ["or three or more (the names of class codes 0, 1, 2, ...)"]),
        (entity_toml(label_names='"B"'), ["'label_names' must be"]),
        ("[entity\nid = 'x'\n", ["is not valid TOML"]),
        ("[entity]\nid = \n", ["is not valid TOML"]),
    ],
)
def test_entity_config_errors_name_file_and_key(tmp_path: Path, text: str, fragments: list[str]) -> None:
    assert_load_fails(load_entity_config, ConfigError, write(tmp_path / "bad-entity.toml", text), fragments)


def test_entity_config_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nowhere" / "e.toml"
    with pytest.raises(ConfigError, match="does not exist") as caught:
        load_entity_config(path)
    assert str(path) in str(caught.value)


# ---------------------------------------------------------------- secrets


def test_read_secret_from_hex_file_with_whitespace(tmp_path: Path) -> None:
    write(tmp_path / "secrets" / "col1.hex", f"  {SECRET_HEX.upper()}\n")
    config = load_entity_config(write(tmp_path / "e.toml", entity_toml()))
    assert config.read_secret() == bytes(range(0, 0x100, 0x11)) + bytes.fromhex("0123456789abcdef")


def test_read_secret_from_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PPSVM_TEST_SECRET", SECRET_HEX)
    config = load_entity_config(
        write(tmp_path / "e.toml", entity_toml(secret_file=None, secret_env='"PPSVM_TEST_SECRET"'))
    )
    assert config.read_secret() == bytes.fromhex(SECRET_HEX)


@pytest.mark.parametrize(
    ("variable", "value", "fragment"),
    [
        pytest.param(
            "PPSVM_TEST_SECRET_UNSET", None, "PPSVM_TEST_SECRET_UNSET (secret_env) is not set", id="unset_env"
        ),
        pytest.param("PPSVM_TEST_SECRET", "zz" * 20, "the secret in $PPSVM_TEST_SECRET is not hex text", id="not_hex"),
    ],
)
def test_read_secret_bad_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, variable: str, value: str | None, fragment: str
) -> None:
    if value is None:
        monkeypatch.delenv(variable, raising=False)
    else:
        monkeypatch.setenv(variable, value)
    path = write(tmp_path / "e.toml", entity_toml(secret_file=None, secret_env=f'"{variable}"'))
    with pytest.raises(ConfigError) as caught:
        load_entity_config(path).read_secret()
    assert_names_file(caught.value, path, [fragment])


def test_read_secret_missing_file(tmp_path: Path) -> None:
    path = write(tmp_path / "e.toml", entity_toml())
    with pytest.raises(ConfigError, match="cannot read secret_file") as caught:
        load_entity_config(path).read_secret()
    assert str(tmp_path / "secrets" / "col1.hex") in str(caught.value)


def test_read_secret_too_short(tmp_path: Path) -> None:
    short = MIN_SECRET_BYTES - 1
    write(tmp_path / "secrets" / "col1.hex", "ab" * short)
    path = write(tmp_path / "e.toml", entity_toml())
    with pytest.raises(ConfigError) as caught:
        load_entity_config(path).read_secret()
    assert f"has {short} bytes; at least {MIN_SECRET_BYTES} are needed" in str(caught.value)
    assert str(tmp_path / "secrets" / "col1.hex") in str(caught.value)


def test_read_secret_exactly_minimum_length_accepted(tmp_path: Path) -> None:
    write(tmp_path / "secrets" / "col1.hex", "ab" * MIN_SECRET_BYTES)
    assert load_entity_config(write(tmp_path / "e.toml", entity_toml())).read_secret() == b"\xab" * MIN_SECRET_BYTES


# ---------------------------------------------------------------- federation


def fed_entity(ident: str, address: str, row: int, col: int, extra: str = "") -> str:
    return f'[[entity]]\nid = "{ident}"\naddress = "{address}"\nrow_block = {row}\ncolumn_block = {col}\n{extra}\n'


def grid(rows: int, cols: int) -> list[tuple[str, str, int, int]]:
    return [(f"e{i}{j}", f"h:{5000 + i * cols + j}", i, j) for i in range(rows) for j in range(cols)]


def fed_text(entries: list[tuple[str, str, int, int]], task: str = "", extra: dict[int, str] | None = None) -> str:
    extra = extra or {}
    return task + "".join(fed_entity(*e, extra=extra.get(k, "")) for k, e in enumerate(entries))


def test_federation_round_trip(tmp_path: Path) -> None:
    entries = grid(2, 3)
    text = fed_text(entries, task='[task]\ntask = "regress"\nkernel = "linear"\nmbar = 2\nnu = 0.5\n\n')
    federation = load_federation(write(tmp_path / "federation.toml", text))
    assert [(e.id, e.address, e.row_block, e.column_block) for e in federation.entities] == entries
    assert federation.task == {"task": "regress", "kernel": "linear", "mbar": 2, "nu": 0.5}
    assert federation.row_blocks == [0, 1]
    assert federation.column_blocks == [0, 1, 2]
    assert federation.cell(1, 2).id == "e12"
    with pytest.raises(ConfigError, match=r"no entity holds row block 2, column block 0"):
        federation.cell(2, 0)


def test_a_named_dask_cluster_s_certificates_are_found_beside_the_federation_file(tmp_path: Path) -> None:
    text = fed_text(grid(1, 1), task='[task]\nengine = "dask"\ndask_tls = "dask-tls"\n\n')
    (tmp_path / "sub").mkdir()
    assert load_federation(write(tmp_path / "sub" / "f.toml", text)).task["dask_tls"] == tmp_path / "sub" / "dask-tls"
    wrong = fed_text(grid(1, 1), task="[task]\ndask_tls = 3\n\n")
    _expect_federation_error(tmp_path, wrong, "[task]: 'dask_tls' must be a string, got 3")


def test_federation_without_task_table(tmp_path: Path) -> None:
    assert load_federation(write(tmp_path / "f.toml", fed_text(grid(1, 1)))).task == {}


def _expect_federation_error(tmp_path: Path, text: str, *fragments: str) -> None:
    assert_load_fails(load_federation, ConfigError, write(tmp_path / "bad-federation.toml", text), fragments)


def test_federation_duplicate_id(tmp_path: Path) -> None:
    entries = grid(1, 2)
    entries[1] = ("e00", entries[1][1], 0, 1)
    _expect_federation_error(tmp_path, fed_text(entries), "entity id 'e00' appears more than once")


def test_federation_duplicate_address(tmp_path: Path) -> None:
    entries = grid(2, 1)
    entries[1] = ("e10", "h:5000", 1, 0)
    _expect_federation_error(tmp_path, fed_text(entries), "address 'h:5000' appears more than once")


def test_federation_duplicate_grid_cell(tmp_path: Path) -> None:
    entries = grid(1, 2)
    entries[1] = ("e01", "h:5001", 0, 0)
    _expect_federation_error(
        tmp_path, fed_text(entries), "grid cell (row_block, column_block) (0, 0) appears more than once"
    )


def test_federation_incomplete_checkerboard_names_missing_cell(tmp_path: Path) -> None:
    entries = [e for e in grid(2, 2) if (e[2], e[3]) != (1, 1)]
    _expect_federation_error(tmp_path, fed_text(entries), "checkerboard is incomplete", "[(1, 1)]")


def test_federation_non_contiguous_blocks(tmp_path: Path) -> None:
    entries = [("a", "h:1", 0, 0), ("b", "h:2", 2, 0)]
    _expect_federation_error(tmp_path, fed_text(entries), "row blocks [0, 2]", "numbered 0, 1, 2")
    entries = [("a", "h:1", 0, 1)]
    _expect_federation_error(tmp_path, fed_text(entries), "column blocks [1]")


@pytest.mark.parametrize("key", ["secret", "data", "secret_file", "secret_env"])
def test_federation_refuses_private_keys(tmp_path: Path, key: str) -> None:
    text = fed_text(grid(1, 2), extra={1: f'{key} = "x"'})
    _expect_federation_error(tmp_path, text, "[[entity]] #2", f"{key!r} does not belong in the federation file")


@pytest.mark.parametrize("line", ['data = "all.csv"', 'secret_file = "s.secret"', "[secrets]\nr0c0 = 'x'"])
def test_federation_refuses_private_keys_at_top_level(tmp_path: Path, line: str) -> None:
    key = line.split()[0].strip("[]")
    _expect_federation_error(
        tmp_path, line + "\n" + fed_text(grid(1, 2)), f"{key!r} does not belong in the federation file"
    )


def test_federation_refuses_unknown_keys(tmp_path: Path) -> None:
    _expect_federation_error(
        tmp_path, "tsl = 1\n" + fed_text(grid(1, 2)), "unknown key(s) or table(s) tsl", "allowed: task, tls, entity"
    )
    text = fed_text(grid(1, 2), extra={0: "port = 5"})
    _expect_federation_error(tmp_path, text, "[[entity]] #1", "unknown key(s) port", "allowed: id, address")


@pytest.mark.parametrize(
    ("entry", "fragments"),
    [
        ('[[entity]]\naddress = "h:1"\nrow_block = 0\ncolumn_block = 0\n', ["#1", "missing required key 'id'"]),
        ('[[entity]]\nid = "a"\nrow_block = 0\ncolumn_block = 0\n', ["#1", "missing required key 'address'"]),
        (
            '[[entity]]\nid = "a"\naddress = "h:1"\nrow_block = "0"\ncolumn_block = 0\n',
            ["'row_block' must be an integer"],
        ),
        (
            '[[entity]]\nid = "a"\naddress = "h:1"\nrow_block = 0\ncolumn_block = true\n',
            ["'column_block' must be an integer, got True"],
        ),
        ('[[entity]]\nid = "a"\naddress = "h:1"\nrow_block = -1\ncolumn_block = 0\n', ["#1", "must be >= 0"]),
        ("[task]\nmbar = 3\n", ["no [[entity]] entries"]),
        ("entity = []\n", ["no [[entity]] entries"]),
        ("task = 3\n" + fed_entity("a", "h:1", 0, 0), ["[task] must be a table"]),
        ('[[entity]\nid = "a"\n', ["is not valid TOML"]),
    ],
)
def test_federation_entry_errors(tmp_path: Path, entry: str, fragments: list[str]) -> None:
    _expect_federation_error(tmp_path, entry, *fragments)


def test_federation_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "federation.toml"
    with pytest.raises(ConfigError, match="does not exist") as caught:
        load_federation(path)
    assert str(path) in str(caught.value)


# ---------------------------------------------------------------- writing TOML

NASTY = [
    "plain",
    'say "hi"',
    "back\\slash",
    'C:\\path\\"x"',
    "tab\there",
    "new\nline",
    "cr\rlf",
    "\x00nul",
    "\x1b[31mred",
    "del\x7f",
    "single ' quote",
    "\u00e9t\u00e9 \u4e2d \U0001f600",
    '"""',
    "\\u0041",
    "",
]


@pytest.mark.parametrize("text", NASTY)
def test_toml_string_round_trips(text: str) -> None:
    assert tomllib.loads(f"k = {toml_string(text)}\n") == {"k": text}


@settings(max_examples=100, deadline=None)
@given(st.text())
def test_toml_string_round_trips_any_text(text: str) -> None:
    assert tomllib.loads(f"k = {toml_string(text)}\n") == {"k": text}


def test_toml_document_round_trip() -> None:
    tables = [
        ("[task]", {"task": "classify", "mbar": 4, "note": 'q"\\\n'}),
        ("[[entity]]", {"id": "a\tb", "row_block": 0}),
        ("[[entity]]", {"id": "c\x01", "row_block": 1}),
    ]
    text = toml_document("a comment", tables)
    assert text.startswith("# a comment\n")
    assert tomllib.loads(text) == {"task": tables[0][1], "entity": [tables[1][1], tables[2][1]]}


def test_federation_toml_loads_back(tmp_path: Path) -> None:
    entities = [
        FederationEntity("hospital-a", 'host"one\\:5000', 0, 0),
        FederationEntity("bank.b", "[::1]:5001", 0, 1),
        FederationEntity("c", "h\x7f:5002", 1, 0),
        FederationEntity("d", "h\u00fc\n:5003", 1, 1),
    ]
    task = {"task": "classify", "kernel": "gaussian", "mbar": 3}
    tls = {"ca": "ca dir/ca.pem", "cert": 'c"oordinator.pem', "key": "coordinator.key"}
    path = write(tmp_path / "federation.toml", federation_toml(task, entities, tls))
    federation = load_federation(path)
    assert federation.entities == tuple(entities)
    assert federation.task == task
    assert federation.tls is not None
    assert (federation.tls.ca, federation.tls.cert) == (tmp_path / "ca dir/ca.pem", tmp_path / 'c"oordinator.pem')


@pytest.mark.parametrize("name", ['hospital "A"', "bank\nB", "d \u00fc", "-x", "a_b", ""])
def test_entity_ids_must_be_certificate_names(tmp_path: Path, name: str) -> None:
    text = federation_toml({}, [FederationEntity(name, "h:1", 0, 0)])
    with pytest.raises(ConfigError, match="cannot be a certificate identity"):
        load_federation(write(tmp_path / "federation.toml", text))


def test_federation_entity_entries_must_be_tables(tmp_path: Path) -> None:
    _expect_federation_error(tmp_path, "entity = [1]\n", "#1")


def test_config_path_is_directory(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        load_federation(tmp_path)


# ---------------------------------------------------------------- [data] and [schema]

SQL_DATA = '[data]\nsource = "sql"\nurl_env = "HOSPITAL_DB"\ntable = "patients"\nid = "patient"\nlabel = "outcome"\n'
SCHEMA_TOML = (
    '[[schema.features]]\nname = "age"\n'
    '[[schema.features]]\nname = "smoker"\ntype = "category"\ncategories = ["never", "current"]\nimpute = "never"\n'
)


def test_entity_config_reads_a_data_table_and_its_schema(tmp_path: Path) -> None:
    config = load_entity_config(write(tmp_path / "e.toml", entity_toml(data=None) + SQL_DATA + SCHEMA_TOML))
    assert config.data.kind == "sql" and config.data.table == "patients" and config.data.id_column == "patient"
    assert config.schema is not None
    assert config.schema.encoded_names == ("age", "smoker=never", "smoker=current")


def test_label_names_may_repeat_the_data_table_s_labels_but_not_contradict_them(tmp_path: Path) -> None:
    labels = SQL_DATA + 'labels = { positive = "sick", negative = "healthy" }\n'
    agree = entity_toml(data=None, label_names='["healthy", "sick"]') + labels + SCHEMA_TOML
    assert load_entity_config(write(tmp_path / "a.toml", agree)).label_names == ("healthy", "sick")
    assert load_entity_config(
        write(tmp_path / "b.toml", entity_toml(data=None) + labels + SCHEMA_TOML)
    ).label_names == (
        "healthy",
        "sick",
    )
    differ = entity_toml(data=None, label_names='["sick", "healthy"]') + labels + SCHEMA_TOML
    with pytest.raises(ConfigError, match="differ from the .data. table's labels"):
        load_entity_config(write(tmp_path / "c.toml", differ))


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        (entity_toml() + SQL_DATA + SCHEMA_TOML, "not both"),
        (entity_toml(data=None) + SQL_DATA, "a sql source needs a [schema]"),
        (entity_toml(data=None) + '[data]\nsource = "csv"\n', "a csv source takes path"),
        (entity_toml() + '[[schema.features]]\nname = "a"\ntype = "text"\n', "'type' must be one of number, category"),
    ],
)
def test_entity_config_data_and_schema_errors(tmp_path: Path, text: str, fragment: str) -> None:
    assert_load_fails(load_entity_config, ConfigError, write(tmp_path / "e.toml", text), [fragment])


def test_entity_config_reads_a_scoring_source(tmp_path: Path) -> None:
    scoring = '[scoring]\nsource = "sql"\nurl = "sqlite:///new.db"\ntable = "new_patients"\nid = "patient"\n'
    config = load_entity_config(write(tmp_path / "e.toml", entity_toml(data=None) + SQL_DATA + SCHEMA_TOML + scoring))
    assert config.scoring is not None and config.scoring.table == "new_patients"
    labelled = scoring + 'label = "outcome"\n'
    assert_load_fails(
        load_entity_config,
        ConfigError,
        write(tmp_path / "bad.toml", entity_toml(data=None) + SQL_DATA + SCHEMA_TOML + labelled),
        ["[scoring]", "no label, split or labels"],
    )


def test_three_or_more_label_names_name_class_codes(tmp_path: Path) -> None:
    config = load_entity_config(write(tmp_path / "e.toml", entity_toml(label_names='["low", "mid", "high"]')))
    assert config.label_names == ("low", "mid", "high")
    classes = SQL_DATA + 'labels = ["low", "mid", "high"]\n'
    assert load_entity_config(
        write(tmp_path / "d.toml", entity_toml(data=None) + classes + SCHEMA_TOML)
    ).label_names == ("low", "mid", "high")
    differ = entity_toml(data=None, label_names='["mid", "low", "high"]') + classes + SCHEMA_TOML
    with pytest.raises(ConfigError, match=r"differ from the .data. table's labels \(\['low', 'mid', 'high'\]\)"):
        load_entity_config(write(tmp_path / "c.toml", differ))
