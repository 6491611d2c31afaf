"""The pieces every `ppsvm reproduce` target shares, and Table 1's pure helpers."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import numpy as np
import pytest

from ppsvm.data.dataset import Dataset
from ppsvm.data.partition import SplitOptions, split_dataset
from ppsvm.errors import ConfigError
from ppsvm.experiments.report import Progress, parse_list, software_versions, write_results
from ppsvm.experiments.table1.command import Table1Options, block_widths, skip_reason


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_in_a_log_is_one_line_per_step() -> None:
    stream = io.StringIO()
    progress = Progress(4, "table1", stream)
    for step in range(4):
        progress.advance(f"step {step}")
    lines = stream.getvalue().splitlines()
    assert len(lines) == 4
    assert lines[0].startswith("table1 [#######.....................] 1/4  25% ") and lines[0].endswith("step 0")
    assert lines[-1].startswith("table1 [############################] 4/4 100% ")


def test_progress_on_a_terminal_redraws_one_line_and_ends_it() -> None:
    stream = Terminal()
    progress = Progress(2, "sinc", stream)
    progress.advance()
    progress.advance()
    text = stream.getvalue()
    assert text.count("\r\033[K") == 2 and text.endswith("\n") and text.count("\n") == 1


def test_progress_can_be_silenced() -> None:
    stream = io.StringIO()
    Progress(3, "dp", stream, enabled=False).advance()
    assert stream.getvalue() == ""


def test_results_are_written_together_with_versions(tmp_path: Path) -> None:
    paths = write_results(
        tmp_path / "out", "x", "# table\n", {"settings": {"seed": 3}}, {"x-figure.png": b"\x89PNG..."}
    )
    assert [p.name for p in paths] == ["x.md", "x.json", "x-figure.png"]
    document = json.loads((tmp_path / "out" / "x.json").read_text())
    assert document["settings"] == {"seed": 3} and document["versions"] == software_versions()
    assert (tmp_path / "out" / "x-figure.png").read_bytes() == b"\x89PNG..."


def test_non_finite_figures_write_nothing(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "x.md").write_text("old\n")
    with pytest.raises(ValueError, match="not JSON compliant"):
        write_results(tmp_path / "out", "x", "# new\n", {"error": float("nan")}, {"x-figure.png": b"png"})
    assert sorted(os.listdir(tmp_path / "out")) == ["x.md"] and (tmp_path / "out" / "x.md").read_text() == "old\n"


@pytest.mark.parametrize("s", [1, 2, 3, 4, 8])
def test_block_widths_are_the_splits(tmp_path: Path, s: int) -> None:
    """Independent: the widths the split itself records for 13 features."""
    rng = np.random.default_rng(0)
    dataset = Dataset(
        X=rng.random((40, 13)),
        y=np.tile([1.0, -1.0], 20),
        ids=np.array([str(i) for i in range(40)]),
        feature_names=tuple(f"f{k}" for k in range(13)),
        source="synthetic",
    )
    split = split_dataset(dataset, SplitOptions(rows=1, cols=s, out_dir=tmp_path))
    manifest = json.loads((tmp_path / "split.json").read_text())
    assert block_widths(13, s) == [b["stop"] - b["start"] for b in manifest["column_blocks"]]
    assert split.n_train + split.n_test == 40


@pytest.mark.parametrize(
    ("n", "s", "reason"),
    [
        (6, 1, None),
        (6, 2, None),
        (6, 3, None),
        (6, 4, "a block of 1 feature leaves no mbar < n_j (s = 4, n = 6)"),
        (13, 8, "a block of 1 feature leaves no mbar < n_j (s = 8, n = 13)"),
        (34, 8, None),
        (8, 4, None),
        (3, 4, "4 partitions of 3 features"),
    ],
)
def test_skip_reason(n: int, s: int, reason: str | None) -> None:
    assert skip_reason(n, s) == reason


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"datasets": ("wdbc", "iris")}, "datasets must be among .*; got iris"),
        ({"partitions": (0,)}, "partitions must be whole numbers >= 1"),
        ({"kernels": ("poly",)}, "kernels must be among linear, gaussian"),
        ({"bases": ("product",)}, "bases must include 'paper'"),
        ({"folds": 1}, "folds must be >= 2"),
        ({"folds_run": 11}, "folds-run must be between 1 and folds = 10"),
        ({"records_per_entity": 2}, "records per entity must be >= 4"),
    ],
)
def test_table1_options_are_checked(changes: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Table1Options(**changes)


def test_parse_list_names_the_flag() -> None:
    assert parse_list(int, "1, 100,", "--mbar") == (1, 100)
    assert parse_list(float, "", "--extra-mu-times-n") == ()
    with pytest.raises(ConfigError, match="--mbar"):
        parse_list(int, "1,x", "--mbar")
