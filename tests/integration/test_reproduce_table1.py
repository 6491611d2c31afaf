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
    # Every (dataset, s) of the quick grid but Bupa s = 4 (a block of 1 feature), the Gaussian kernel, one fold.
    assert len(document["summary"]) == 9 and len(document["runs"]) == 9
    assert document["skipped"] == [
        {"dataset": "bupa", "s": 4, "reason": "a block of 1 feature leaves no mbar < n_j (s = 4, n = 6)"}
    ]
    for row, run in zip(document["summary"], document["runs"], strict=True):
        assert (row["dataset"], row["s"]) == (run["dataset"], run["s"])
        ours = run["ppsvm"]["uniform-design"]["paper"][0]
        assert row["tunings"]["uniform-design"]["ppsvm"]["paper"]["mean"] == ours["error_rate"]
        assert ours["private"] is True
        widths = document["settings"]["widths"][run["dataset"]][str(run["s"])]
        assert ours["mbar"] == min(min(widths) - 1, int(np.ceil(0.1 * run["n_train"])))
        # The paper's row is beside ours, and the mbar rule gives the paper's mbar.
        assert row["paper"]["mbar"] == ours["mbar"]
        alone = run["alone"]["uniform-design"]
        assert len(alone["per_entity"]) == 2 and alone["of"] == run["cells"]
    # Sharing beats working alone on average, the paper's headline.
    shared = np.mean([row["tunings"]["uniform-design"]["ppsvm"]["paper"]["mean"] for row in document["summary"]])
    alone = np.mean([row["tunings"]["uniform-design"]["alone"]["mean"] for row in document["summary"]])
    assert shared < alone
    text = (out / "table1.md").read_text()
    assert "Quick run" in text and "| WDBC (569 x 30) | 4 | 6 (6) |" in text and "| 0.06 |" in text
    assert "Gaussian PPSVM cells within 0.02 of the paper or better:" in text
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
        "--tuning",
        "grid",
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
    set_secrets(split, [fixed_secret("table1", "bupa", 2, 0, j, "linear", 0) for j in range(2)])
    paper = run["ppsvm"]["grid"]["paper"][0]
    central = central_model(tmp_path / "split", "linear", paper["mbar"], paper["nu"], 0.0)
    assert paper["error_rate"] == pytest.approx(central.test_figures()["error_rate"], abs=1e-12)
    assert run["ppsvm"]["grid"]["product"][0]["columns"] == 4  # all 2^2 points of two blocks with mbar = 2


def test_a_dataset_the_project_has_never_seen(tmp_path: Path) -> None:
    """As a new user would: a CSV with a header, an id column and text labels, through the CLI."""
    rng = np.random.default_rng(5)
    X = rng.normal(size=(240, 8))
    outcome = np.where(X[:, 0] - X[:, 3] + 0.5 * X[:, 4] ** 2 + 0.3 * rng.normal(size=240) > 0.4, "sick", "well")
    lines = ["patient,age,bmi,pressure,glucose,marker,score,weight,height,outcome"]
    lines += [f"p{i:03d}," + ",".join(f"{v:.5f}" for v in X[i]) + f",{outcome[i]}" for i in range(240)]
    data = tmp_path / "clinic visits.csv"
    data.write_text("\n".join(lines) + "\n")
    common = ("--data", str(data), "--label", "outcome", "--id-column", "patient", "--partitions", "1,2,4")
    common += ("--folds", "4", "--folds-run", "1", "--no-progress")

    # Forgetting the header flag or the positive class gets a clear error and writes nothing.
    missing_header = ppsvm("reproduce", "table1", *common, "--out", str(tmp_path / "x"), check=False, timeout=120)
    assert missing_header.returncode == 1 and "label column 'outcome' is a name, but the file has no header" in (
        missing_header.stderr
    )
    text_labels = ppsvm(
        "reproduce", "table1", *common, "--header", "--out", str(tmp_path / "x"), check=False, timeout=120
    )
    assert text_labels.returncode == 1 and "pass --positive VALUE" in text_labels.stderr
    assert not (tmp_path / "x").exists()
    bad_name = ppsvm("reproduce", "table1", *common, "--header", "--name", "my clinic", check=False, timeout=120)
    assert (
        bad_name.returncode == 1 and "--name must be letters, digits, '-' and '_', got 'my clinic'" in bad_name.stderr
    )

    result = reproduce(tmp_path / "out", *common, "--header", "--positive", "sick", "--name", "clinic")
    out = tmp_path / "out"
    assert sorted(p.name for p in out.iterdir()) == [
        "table1-clinic-figure3.png",
        "table1-clinic-figure4.png",
        "table1-clinic.json",
        "table1-clinic.md",
    ]
    document = json.loads((out / "table1-clinic.json").read_text())
    assert document["settings"]["shapes"] == {"clinic": [240, 8]} and document["paper"] == []
    assert document["settings"]["data"]["name"] == "clinic" and document["settings"]["data"]["positive"] == "sick"
    assert [row["s"] for row in document["summary"]] == [1, 2, 4]
    for row in document["summary"]:
        column = row["tunings"]["uniform-design"]
        assert 0.0 <= column["ppsvm"]["paper"]["mean"] <= 0.5 and row["paper"] is None
    # The whole protocol ran: the ideal column and each entity alone too.
    assert all(run["reference"]["uniform-design"]["error_rate"] is not None for run in document["runs"])
    report = (out / "table1-clinic.md").read_text()
    assert "| clinic (240 x 8) | 2 |" in report and "n/a" in report
    assert "report in" in result.stdout


def test_a_run_with_nothing_to_run_says_why_and_writes_nothing(tmp_path: Path) -> None:
    result = ppsvm(
        "reproduce", "table1", "--datasets", "bupa", "--partitions", "4,8", "--out", str(tmp_path / "o"),
        check=False, timeout=60,
    )  # fmt: skip
    assert result.returncode == 1 and not (tmp_path / "o").exists()
    assert "nothing to run: bupa s = 4: a block of 1 feature leaves no mbar < n_j (s = 4, n = 6)" in result.stderr


def test_unknown_dataset_is_refused_before_any_work(tmp_path: Path) -> None:
    result = ppsvm("reproduce", "table1", "--datasets", "iris", "--out", str(tmp_path / "o"), check=False, timeout=60)
    assert result.returncode == 1
    assert "datasets must be among cleveland, ionosphere, wdbc, pima, bupa; got iris" in result.stderr
    assert not (tmp_path / "o").exists()
