"""A federation whose cells disagree fails with an error naming the entities and records, and writes nothing."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

from ppsvm.core.model import Model

from .conftest import WDBC, WDBC_OPTIONS, pseudonyms, split


def _edit_cell(path: Path, row: int, column: str, value: str) -> str:
    """Set one field of a cell CSV (row 0 = first record); returns the record's id."""
    with path.open(newline="") as handle:
        rows = list(csv.reader(handle))
    index = rows[0].index(column)
    record = rows[row + 1][0]
    rows[row + 1][index] = value
    with path.open("w", newline="") as handle:
        csv.writer(handle).writerows(rows)
    return record


@pytest.fixture
def vertical(federation, tmp_path: Path):
    """Start a 1 x 2 federation after applying ``edit`` to its split directory."""

    def start(edit):
        split_dir = split(tmp_path / "prepared", WDBC, 1, 2, *WDBC_OPTIONS)
        edit(split_dir)
        return federation(1, 2, prepared=split_dir)

    return start


def test_record_ids_that_differ_across_column_blocks_train_on_the_shared_ones(vertical) -> None:
    """r0c1 names one record differently: each entity holds one the other lacks. Training uses the records both
    hold and the log says how many each holds, never which (the ids, or their pseudonyms)."""
    changed = {}
    run = vertical(lambda d: changed.setdefault("id", _edit_cell(d / "r0c1.csv", 0, "id", "intruder")))
    result = run.train("--mbar", "5", "--nu", "1", "--mu", "0.03")
    n = int(re.search(r"r0c0 ([\d,]+), r0c1 \1 train records; the ([\d,]+) they all hold", result.stderr)[1])
    assert f"the {n - 1:,} they all hold are used" in result.stderr
    for record in ["intruder", changed["id"], *pseudonyms(run.split_dir, ["intruder", changed["id"]])]:
        assert record not in result.stderr
    assert Model.load(run.split_dir / "model.json").training["n_train"] == n - 1


def test_labels_that_disagree_within_a_row_block(vertical) -> None:
    changed = {}

    def flip(split_dir: Path) -> None:
        with (split_dir / "r0c1.csv").open(newline="") as handle:
            first = list(csv.reader(handle))[1]
        changed["id"] = _edit_cell(split_dir / "r0c1.csv", 0, "label", "-1" if first[1] == "1" else "1")

    run = vertical(flip)
    result = run.train("--mbar", "5", "--nu", "1", "--mu", "0.03", check=False)
    assert result.returncode == 1
    assert "disagree" in result.stderr and pseudonyms(run.split_dir, [changed["id"]])[0] in result.stderr
    assert not (run.split_dir / "model.json").exists()


def test_entity_with_malformed_cell_does_not_start(federation, tmp_path: Path) -> None:
    split_dir = split(tmp_path / "prepared", WDBC, 1, 2, *WDBC_OPTIONS)
    _edit_cell(split_dir / "r0c0.csv", 3, "x2", "abc")
    with pytest.raises(Exception) as failed:
        federation(1, 2, prepared=split_dir)
    message = str(failed.value)
    assert "r0c0.csv" in message and "line 5" in message and "'abc' is not a number" in message


def test_feature_columns_in_another_order_within_a_column_block(federation, tmp_path: Path) -> None:
    """Two row blocks of one column block, one cell's columns swapped (header, values and its declared schema):
    each cell is valid on its own, but the kernel would compare unlike features; training stops before any kernel.
    (Columns are read by the names the schema declares, so swapping the file's columns alone changes nothing.)"""
    split_dir = split(tmp_path / "prepared", WDBC, 2, 1, *WDBC_OPTIONS)
    with (split_dir / "r1c0.csv").open(newline="") as handle:
        rows = list(csv.reader(handle))
    first, second = rows[0].index("x2"), rows[0].index("x3")
    for row in rows:
        row[first], row[second] = row[second], row[first]
    with (split_dir / "r1c0.csv").open("w", newline="") as handle:
        csv.writer(handle).writerows(rows)
    config = split_dir / "r1c0.toml"
    swapped = config.read_text().replace('name = "x2"', "SWAP").replace('name = "x3"', 'name = "x2"')
    config.write_text(swapped.replace("SWAP", 'name = "x3"'))
    run = federation(2, 1, prepared=split_dir)
    result = run.train("--mbar", "5", "--nu", "1", "--mu", "0.03", check=False)
    assert result.returncode == 1
    assert "column block 0" in result.stderr and "different feature columns" in result.stderr
    assert "r0c0" in result.stderr and "r1c0" in result.stderr
    assert "assembled train kernel" not in result.stderr  # refused before any kernel block was fetched
    assert not (run.split_dir / "model.json").exists()
