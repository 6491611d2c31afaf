"""`ppsvm reproduce table1` run for real: the CLI process, gRPC entities, the files it writes."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from ppsvm.api.inprocess import fixed_secret, set_secrets
from ppsvm.core.tuning import fold_indices
from ppsvm.data.dataset import load_dataset
from ppsvm.data.partition import SplitOptions, split_dataset
from ppsvm.data.shipped import TABLE1_DATASETS

from .conftest import ppsvm, without_run_details
from .test_training import central_model

# Minutes of reproduction each: CI runs them in its second step (pytest -m long).
pytestmark = pytest.mark.long

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def reproduce(out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return ppsvm("reproduce", "table1", "--out", str(out), *args, timeout=600)


def test_quick_run_writes_the_table_and_both_figures(tmp_path: Path) -> None:
    result = reproduce(tmp_path / "out", "--quick")
    out = tmp_path / "out"
    assert sorted(p.name for p in out.iterdir()) == [
        "table1-figure3.png",
        "table1-figure4.png",
        "table1.json",
        "table1.md",
    ]
    for figure in ("table1-figure3.png", "table1-figure4.png"):
        assert (out / figure).read_bytes().startswith(PNG_SIGNATURE)
    document = json.loads((out / "table1.json").read_text())
    assert document["versions"]["ppsvm"] and document["versions"]["numpy"] and document["machine"]["cpus"]
    assert document["settings"]["shapes"] == {
        "cleveland": [297, 13],
        "ionosphere": [351, 34],
        "wdbc": [569, 30],
        "pima": [768, 8],
        "bupa": [345, 6],
    }
    # Every (dataset, kernel, s) of the quick grid, each mean equal to its runs' mean.
    assert len(document["summary"]) == 5 * 2 * 2 and len(document["runs"]) == 20
    for row in document["summary"]:
        mine = [
            r
            for r in document["runs"]
            if (r["dataset"], r["kernel"], r["s"]) == (row["dataset"], row["kernel"], row["s"])
        ]
        assert row["ppsvm_paper"]["mean"] == pytest.approx(np.mean([r["ppsvm_paper"]["error_rate"] for r in mine]))
        assert row["alone"]["mean"] == pytest.approx(np.mean([r["alone"]["error_rate"] for r in mine]))
        for run in mine:
            assert run["ppsvm_paper"]["private"] is True
            widths = document["settings"]["widths"][run["dataset"]][str(run["s"])]
            assert run["ppsvm_paper"]["mbar"] == min(min(widths) - 1, int(np.ceil(0.1 * run["n_train"])))
    # Sharing beats working alone on average, the paper's headline (both kernels, 1 and 2 partitions).
    ppsvm = np.mean([row["ppsvm_paper"]["mean"] for row in document["summary"]])
    alone = np.mean([row["alone"]["mean"] for row in document["summary"]])
    assert ppsvm < alone
    text = (out / "table1.md").read_text()
    assert "Quick run" in text and "| WDBC (569 x 30) | 1 |" in text and "| 0.03 |" in text
    # The report stays in its file; stdout says where it is.
    assert result.stdout.startswith("Mangasarian & Wild, Table 1") and f"report in {out / 'table1.md'}" in result.stdout
    assert "wrote: " in result.stdout and "| WDBC" not in result.stdout


def test_a_rerun_gives_the_same_numbers_and_matches_a_central_computation(tmp_path: Path) -> None:
    args = (
        "--datasets",
        "bupa",
        "--partitions",
        "2",
        "--kernels",
        "linear",
        "--folds-run",
        "1",
        "--basis",
        "both",
        "--no-progress",
    )
    reproduce(tmp_path / "a", *args)
    reproduce(tmp_path / "b", *args)
    first = json.loads((tmp_path / "a" / "table1.json").read_text())
    second = json.loads((tmp_path / "b" / "table1.json").read_text())
    assert without_run_details(first) == without_run_details(second)

    # Independently: the same fold split again, B_j from the same fixed secrets, the LP on pooled rows.
    run = first["runs"][0]
    shipped = TABLE1_DATASETS["bupa"]
    dataset = load_dataset(shipped.path, shipped.options)
    held_out = np.zeros(len(dataset.y), dtype=bool)
    held_out[fold_indices("classify", dataset.y, 10, 0)[0]] = True
    split = split_dataset(
        dataset, SplitOptions(rows=run["rows"], cols=2, out_dir=tmp_path / "split", seed=0), held_out=held_out
    )
    set_secrets(split, [fixed_secret("table1", "bupa", 2, 0, j) for j in range(2)])
    paper = run["ppsvm_paper"]
    central = central_model(tmp_path / "split", "linear", paper["mbar"], paper["nu"], 0.0)
    assert paper["error_rate"] == pytest.approx(central.test_figures()["error_rate"], abs=1e-12)
    assert run["ppsvm_product"]["columns"] == 4  # all 2^2 points of two blocks with mbar = 2


def test_a_partition_that_leaves_one_feature_is_skipped_and_said(tmp_path: Path) -> None:
    result = reproduce(
        tmp_path / "out", "--datasets", "bupa", "--partitions", "4", "--kernels", "linear", "--no-progress"
    )
    document = json.loads((tmp_path / "out" / "table1.json").read_text())
    assert document["skipped"] == [
        {"dataset": "bupa", "s": 4, "reason": "a block of 1 feature leaves no mbar < n_j (s = 4, n = 6)"}
    ]
    assert "Not run: Bupa Liver s = 4" in (tmp_path / "out" / "table1.md").read_text() and result.returncode == 0


def test_unknown_dataset_is_refused_before_any_work(tmp_path: Path) -> None:
    result = ppsvm("reproduce", "table1", "--datasets", "iris", "--out", str(tmp_path / "o"), check=False, timeout=60)
    assert result.returncode == 1
    assert "datasets must be among cleveland, ionosphere, wdbc, pima, bupa; got iris" in result.stderr
    assert not (tmp_path / "o").exists()
