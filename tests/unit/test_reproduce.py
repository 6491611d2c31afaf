"""The pieces every `ppsvm reproduce` target shares, and Table 1's pure helpers."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ppsvm.data.dataset import Dataset, DatasetOptions
from ppsvm.data.partition import SplitOptions, split_dataset
from ppsvm.errors import ConfigError
from ppsvm.experiments.report import Progress, parse_list, software_versions, write_results
from ppsvm.experiments.table1.command import (
    Table1Options,
    UserDataset,
    alone_sample,
    block_widths,
    reference_seed,
    skip_reason,
)
from ppsvm.experiments.table1.report import CLOSE, closeness, figures, markdown, paper_table, summarise


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
        ({"records_per_entity": 2}, "records per entity must be between 4 and 200"),
        ({"records_per_entity": 201}, "records per entity must be between 4 and 200"),
        ({"tunings": ("grid", "grid")}, "tunings must be among grid, uniform-design, each once"),
        ({"tunings": ("random",)}, "tunings must be among"),
        ({"alone_entities": -1}, "alone-entities must be a whole number >= 0"),
        ({"b_draws": 0}, "b-draws must be >= 1"),
        ({"data": UserDataset(Path("x.csv"), DatasetOptions(), "a b")}, "--name must be letters"),
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


def test_alone_sample_is_seeded_and_a_subset() -> None:
    ids = [f"r{i}c{j}" for i in range(11) for j in range(4)]
    first = alone_sample(ids, 10, seed=0, s=4, fold=3)
    assert first == alone_sample(ids, 10, seed=0, s=4, fold=3) and len(set(first)) == 10 and set(first) <= set(ids)
    assert first != alone_sample(ids, 10, seed=0, s=4, fold=4)
    assert alone_sample(ids, None, 0, 4, 3) == ids and alone_sample(ids, 99, 0, 4, 3) == ids
    assert alone_sample(ids, 0, 0, 4, 3) == []


def test_the_ideal_columns_basis_is_drawn_afresh_for_each_s_and_fold() -> None:
    seeds = {reference_seed(0, s, fold) for s in (1, 2, 4, 8) for fold in range(10)}
    assert len(seeds) == 40


def test_paper_table_holds_the_sixteen_cells_of_the_shipped_datasets() -> None:
    table = paper_table()
    assert sorted(table) == sorted(
        [("cleveland", s) for s in (1, 2, 4)]
        + [("ionosphere", s) for s in (1, 2, 4, 8)]
        + [("wdbc", s) for s in (1, 2, 4, 8)]
        + [("pima", s) for s in (1, 2, 4)]
        + [("bupa", s) for s in (1, 2)]
    )
    assert table[("cleveland", 4)] == {"mbar": 2, "ideal": 0.17, "ppsvm": 0.24, "alone": 0.30}
    assert table[("wdbc", 8)] == {"mbar": 2, "ideal": 0.03, "ppsvm": 0.11, "alone": 0.16}


def _run(key: str, s: int, fold: int, ppsvm: list[float], alone: float, ideal: float) -> dict:
    draws = [{"error_rate": e, "mbar": 2, "columns": 2, "nu": 1.0, "mu": 0.1, "private": True} for e in ppsvm]
    return {
        "dataset": key,
        "s": s,
        "fold": fold,
        "kernel": "gaussian",
        "cells": 8,
        "ppsvm": {"uniform-design": {"paper": draws}},
        "alone": {"uniform-design": {"error_rate": alone, "of": 8, "per_entity": [{}, {}]}},
        "reference": {"uniform-design": {"error_rate": ideal}},
    }


def test_summary_sets_the_paper_beside_ours_and_counts_the_close_cells() -> None:
    options = Table1Options(datasets=("cleveland", "wdbc"), partitions=(2, 4), b_draws=2)
    runs = [
        _run("cleveland", 4, 0, [0.30, 0.34], 0.40, 0.20),
        _run("cleveland", 4, 1, [0.28, 0.32], 0.30, 0.10),
        _run("wdbc", 2, 0, [0.05, 0.05], 0.10, 0.02),
    ]
    summary = summarise(runs, options, paper_table())
    cleveland = next(row for row in summary if row["dataset"] == "cleveland")
    column = cleveland["tunings"]["uniform-design"]
    # Per fold the mean over draws, per draw the mean over folds.
    assert column["ppsvm"]["paper"]["mean"] == pytest.approx(0.31)
    np.testing.assert_allclose(column["ppsvm"]["paper"]["draws"], [0.29, 0.33])
    assert column["alone"]["mean"] == pytest.approx(0.35) and column["alone"]["entities"] == 4
    assert column["alone"]["of"] == 16 and cleveland["paper"]["ppsvm"] == 0.24
    close, misses = closeness(summary, "uniform-design")
    assert [r["dataset"] for r in close] == ["wdbc"] and [r["dataset"] for r in misses] == ["cleveland"]
    settings = {
        "titles": {"cleveland": "Cleveland Heart", "wdbc": "WDBC"},
        "shapes": {"cleveland": [297, 13], "wdbc": [569, 30]},
        "folds_run": 2,
        "design_discrepancy": {"ours_glp": 0.0004, "scipy_lhs_random_cd": 0.0005, "uniform_random_mean": 0.01},
        "secrets": "sha256(...)",
    }
    text = markdown(summary, [], settings, options, 61.0)
    # Ours, the paper's and the difference, in each of the three columns.
    assert (
        "| Cleveland Heart (297 x 13) | 4 | 2 (2) | 0.150 | 0.17 | -0.020 | 0.310 | 0.24 | +0.070 | 0.350 | 0.30 |"
        in text
    )
    assert (
        f"within {CLOSE} of the paper or better: 1 of 2**" in text
        and "Cleveland Heart s = 4 (0.310 against 0.24)" in text
    )
    assert "| Cleveland Heart | gaussian | 4 | 2 | 0.310 | 0.028 | 0.290 | 0.330 | 0.24 | 0 of 2 |" in text
    assert "Runtime 1m01s" in text


def test_figures_three_and_four_are_two_and_four_partitions_of_the_gaussian_kernel() -> None:
    options = Table1Options(datasets=("cleveland", "wdbc"), partitions=(2, 4))
    runs = [_run("cleveland", 4, 0, [0.3], 0.4, 0.2), _run("wdbc", 2, 0, [0.05], 0.1, 0.02)]
    summary = summarise(runs, options, paper_table())
    drawn = figures(summary, options, {"cleveland": "Cleveland Heart", "wdbc": "WDBC"}, "table1")
    assert list(drawn) == ["table1-figure3.png", "table1-figure4.png"]
    titles = {name: figure.axes[0].get_title() for name, figure in drawn.items()}
    assert titles["table1-figure3.png"].startswith("Figure 3: Gaussian kernel, 2 vertical partitions")
    assert titles["table1-figure4.png"].startswith("Figure 4: Gaussian kernel, 4 vertical partitions")
    # Ours (filled) and the paper's (hollow) for the one dataset each figure has.
    figure4 = drawn["table1-figure4.png"].axes[0]
    offsets = [collection.get_offsets().tolist() for collection in figure4.collections]
    assert [[0.4, 0.3]] in offsets and [[0.30, 0.24]] in offsets


def test_no_figure_without_entities_alone() -> None:
    """--alone-entities 0 (a study of the draws of B only): PPSVM against nothing is not a figure."""
    options = Table1Options(datasets=("wdbc",), partitions=(2,), alone_entities=0)
    run = _run("wdbc", 2, 0, [0.05], 0.1, 0.02)
    run["alone"]["uniform-design"] = {"error_rate": None, "of": 40, "per_entity": []}
    summary = summarise([run], options, paper_table())
    assert summary[0]["tunings"]["uniform-design"]["alone"]["mean"] is None
    assert figures(summary, options, {"wdbc": "WDBC"}, "table1") == {}


def test_without_scikit_learn_reproduce_names_its_extra() -> None:
    """As after `pip install ppsvm` alone (tests/integration/test_extras.py installs it for real, in the long run)."""
    hide = (
        "import builtins, sys\n"
        "real = builtins.__import__\n"
        "def hidden(name, *args, **kwargs):\n"
        "    if name.split('.')[0] == 'sklearn':\n"
        "        raise ModuleNotFoundError(f'No module named {name!r}', name='sklearn')\n"
        "    return real(name, *args, **kwargs)\n"
        "builtins.__import__ = hidden\n"
        "from ppsvm.cli import main\n"
        "sys.exit(main(['reproduce', 'table1', '--help']))\n"
    )
    result = subprocess.run([sys.executable, "-c", hide], capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert "ppsvm reproduce needs sklearn: pip install 'ppsvm[reproduce]'" in result.stderr
