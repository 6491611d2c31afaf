"""Categorical columns from a CSV file: declared or inferred by the loader, written into each cell's [schema] by
``ppsvm split``, and proposed with the [data] table by ``ppsvm schema infer``."""

from __future__ import annotations

import logging
import tomllib
from pathlib import Path

import numpy as np
import pytest

from ppsvm.cli import main
from ppsvm.config import load_entity_config
from ppsvm.data.dataset import DatasetOptions, load_dataset
from ppsvm.data.inference import entity_tables, proposed_schema
from ppsvm.data.partition import SplitOptions, split_dataset
from ppsvm.data.schema import MAX_CATEGORIES, category_order, parse_schema
from ppsvm.data.sources import parse_data_table, read_source
from ppsvm.errors import ConfigError, DataError

CSV = """pid,age,sex,smoker,outcome
a,30,F,no,sick
b,40,M,yes,healthy
c,50,F,NA,sick
d,61.5,M,no,healthy
e,22,"X, Y",yes,sick
f,35,F,yes,healthy
"""
OPTIONS = DatasetOptions(label="outcome", positive="sick", id_column="pid", header=True, missing="impute")


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "patients.csv"
    path.write_text(CSV, encoding="utf-8")
    return path


def test_text_columns_are_inferred_with_sorted_categories(data: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="ppsvm.data.dataset"):
        dataset = load_dataset(data, DatasetOptions(**{**OPTIONS.__dict__, "infer_categorical": True}))
    assert dataset.feature_names == ("age", "sex", "smoker")
    assert dataset.categories == {1: ("F", "M", "X, Y"), 2: ("no", "yes")}
    np.testing.assert_array_equal(dataset.X[:, 1], [0, 1, 0, 1, 2, 0])
    np.testing.assert_array_equal(dataset.X[:, 2], [0, 1, np.nan, 0, 1, 1])  # NA is missing, to impute
    assert dataset.label_values == ("sick", "healthy")
    said = caplog.text
    assert "column 2 ('sex') holds text (line 2: 'F'): categorical, with 3 categories: 'F', 'M', 'X, Y'" in said
    assert "column 3 ('smoker')" in said


def test_declared_columns_read_column_by_column_give_the_same_dataset(data: Path) -> None:
    inferred = load_dataset(data, DatasetOptions(**{**OPTIONS.__dict__, "infer_categorical": True}))
    declared = load_dataset(data, DatasetOptions(**{**OPTIONS.__dict__, "categorical": ("sex", 3)}))
    np.testing.assert_array_equal(declared.X, inferred.X)
    assert declared.categories == inferred.categories
    np.testing.assert_array_equal(declared.ids, inferred.ids)


def test_without_inference_a_text_column_is_refused_with_the_ways_out(data: Path) -> None:
    with pytest.raises(DataError, match=r"non-numeric feature value 'F'[\s\S]*--drop 2,3"):
        load_dataset(data, OPTIONS)


def test_categorical_columns_must_be_features(data: Path) -> None:
    with pytest.raises(ConfigError, match="column 4 is declared categorical but is the label"):
        load_dataset(data, DatasetOptions(**{**OPTIONS.__dict__, "categorical": ("outcome",)}))
    with pytest.raises(ConfigError, match="no categorical column named 'gender'"):
        load_dataset(data, DatasetOptions(**{**OPTIONS.__dict__, "categorical": ("gender",)}))


def test_a_header_read_as_data_is_not_inferred_as_categories(tmp_path: Path) -> None:
    path = tmp_path / "header.csv"
    path.write_text("age,weight,label\n" + "".join(f"{20 + k},{60 + k},{k % 2}\n" for k in range(6)))
    with pytest.raises(DataError, match="line 1 looks like a header .*pass --header"):
        load_dataset(path, DatasetOptions(label=-1, infer_categorical=True))


def test_free_text_is_too_many_categories(tmp_path: Path) -> None:
    path = tmp_path / "notes.csv"
    rows = [f"{k},note {k},{k % 2}" for k in range(MAX_CATEGORIES + 1)]
    path.write_text("x,note,label\n" + "\n".join(rows) + "\n")
    with pytest.raises(DataError, match=r"column 1 \('note'\) \(first text: line 2: 'note 0'\): 1,001 distinct"):
        load_dataset(path, DatasetOptions(label="label", header=True, infer_categorical=True))


def test_categories_sort_numbers_by_value_then_text() -> None:
    assert sorted(["b", "10", "2", "a", "1.5"], key=category_order) == ["1.5", "2", "10", "a", "b"]


def test_split_writes_the_categories_into_each_cells_schema_and_the_entity_encodes_them(
    data: Path, tmp_path: Path
) -> None:
    dataset = load_dataset(data, DatasetOptions(**{**OPTIONS.__dict__, "infer_categorical": True}))
    result = split_dataset(dataset, SplitOptions(rows=1, cols=2, out_dir=tmp_path / "split", test_fraction=0))
    first, second = (load_entity_config(path) for path in result.entity_config_paths)
    assert [f.as_dict() for f in first.schema.features] == [
        {"name": "age", "type": "number", "low": 22.0, "high": 62.0},
        {"name": "sex", "type": "category", "categories": ["F", "M", "X, Y"]},
    ]
    assert [f.as_dict() for f in second.schema.features] == [
        {"name": "smoker", "type": "category", "categories": ["no", "yes"]}
    ]
    assert '\ne,1,train,22,"X, Y"\n' in (tmp_path / "split" / "r0c0.csv").read_text()
    # c's missing smoker: the most frequent category of its row block's training records (yes: 3, no: 2).
    assert "\nc,1,train,yes\n" in (tmp_path / "split" / "r0c1.csv").read_text()
    cells = [read_source(config.data, config.schema) for config in (first, second)]
    assert cells[0].feature_names == ("age", "sex=F", "sex=M", "sex=X, Y")
    assert cells[1].feature_names == ("smoker=no", "smoker=yes")
    order = [dataset.ids.tolist().index(record) for record in cells[0].train_ids.tolist()]
    rows = np.arange(len(order))
    sex = np.zeros((6, 3))
    sex[rows, dataset.X[order, 1].astype(int)] = 1
    np.testing.assert_array_equal(cells[0].X_train, np.column_stack([dataset.X[order, 0], sex]))
    smoker = np.zeros((6, 2))
    smoker[rows, np.nan_to_num(dataset.X[order, 2], nan=1).astype(int)] = 1
    np.testing.assert_array_equal(cells[1].X_train, smoker)


def test_schema_infer_tables_read_the_file_as_an_entity_does(data: Path) -> None:
    options = DatasetOptions(**{**OPTIONS.__dict__, "infer_categorical": True})
    dataset = load_dataset(data, options)
    document = tomllib.loads(entity_tables(data.name, dataset, options))
    assert document["data"] == {
        "source": "csv",
        "path": data.name,
        "id": "pid",
        "label": "outcome",
        "labels": {"positive": "sick", "negative": "healthy"},
    }
    schema = parse_schema(document["schema"], "inferred")
    assert schema == proposed_schema(dataset, impute=True)
    assert [f.impute for f in schema.features] == [pytest.approx(39.75), "F", "yes"]
    cell = read_source(parse_data_table(document["data"], "inferred", data.parent), schema)
    assert cell.feature_names == ("age", "sex=F", "sex=M", "sex=X, Y", "smoker=no", "smoker=yes")
    np.testing.assert_array_equal(cell.y_train, [1, -1, 1, -1, 1, -1])
    np.testing.assert_array_equal(cell.X_train[2], [50, 1, 0, 0, 0, 1])  # NA imputed with the declared "yes"


def test_schema_infer_lists_three_or_more_classes(data: Path) -> None:
    options = DatasetOptions(**{**OPTIONS.__dict__, "label": "sex", "positive": None, "infer_categorical": True})
    dataset = load_dataset(data, options)
    assert dataset.classes is not None and len(dataset.classes) >= 3
    document = tomllib.loads(entity_tables(data.name, dataset, options))
    assert document["data"]["labels"] == list(dataset.classes)
    cell = read_source(
        parse_data_table(document["data"], "inferred", data.parent), parse_schema(document["schema"], "s")
    )
    np.testing.assert_array_equal(cell.y_train, dataset.y)


def test_schema_infer_needs_an_id_column_and_two_label_values(data: Path) -> None:
    options = DatasetOptions(**{**OPTIONS.__dict__, "id_column": None, "infer_categorical": True})
    with pytest.raises(ConfigError, match="--id-column"):
        entity_tables(data.name, load_dataset(data, options), options)


def test_schema_infer_command(data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    flags = ["--label", "outcome", "--positive", "sick", "--id", "pid", "--categorical", "smoker", "--missing", "drop"]
    assert main(["-q", "schema", "infer", str(data), *flags]) == 0
    printed = tomllib.loads(capsys.readouterr().out)
    assert printed["data"]["path"] == str(data.resolve())
    assert [f["name"] for f in printed["schema"]["features"]] == ["age", "sex", "smoker"]
    out = tmp_path / "configs" / "entity.toml"
    out.parent.mkdir()
    assert main(["-q", "schema", "infer", str(data), *flags, "--out", str(out)]) == 0
    assert tomllib.loads(out.read_text())["data"]["path"] == "../patients.csv"
    assert main(["-q", "schema", "infer", str(data), *flags, "--out", str(out)]) == 1  # exists: not overwritten


def test_split_command_says_which_features_are_categorical(
    data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    flags = ["--header", "--label", "outcome", "--positive", "sick", "--id-column", "pid", "--missing", "impute"]
    out = tmp_path / "split"
    assert main(["-q", "split", str(data), "--rows", "1", "--cols", "2", "--out", str(out), *flags]) == 0
    assert "categorical features, declared with their categories in each cell's [schema]: sex: 'F', 'M', 'X, Y'; " in (
        capsys.readouterr().out
    )
