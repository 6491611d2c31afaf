"""``ppsvm reproduce sinc --quick`` through the real CLI: files, settings, the paper's claim, reproducibility."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from .conftest import ppsvm, without_run_details

# Minutes of reproduction each: CI runs them in its second step (pytest -m long).
pytestmark = pytest.mark.long

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
FIGURES = [f"sinc-figure{number}.png" for number in (3, 4, 5, 6)]


def reproduce_quick(out: Path) -> subprocess.CompletedProcess[str]:
    return ppsvm("reproduce", "sinc", "--quick", "--out", str(out), "--no-progress", check=False, timeout=120)


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    out = tmp_path_factory.mktemp("sinc") / "results"
    return out, reproduce_quick(out)


def test_quick_run_writes_the_table_json_and_four_figures(
    quick_run: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    out, result = quick_run
    assert result.returncode == 0, result.stderr
    for name in FIGURES:
        assert (out / name).read_bytes().startswith(PNG_SIGNATURE), name
    assert "wrote: " in result.stdout and str(out / "sinc.json") in result.stdout
    document = json.loads((out / "sinc.json").read_text())
    settings = document["settings"]
    assert settings["quick"] is True
    assert settings["seeds"] == {"train_points": 0, "test_points": 1, "split": 0, "tuning": 0}
    assert settings["paper"] == {"joint": 0.01, "alone_inner": 5.01, "alone_outer": 1.05}
    assert settings["mbar"] and settings["points_per_entity"] > 0 and "sha256" in settings["secrets"]
    assert {"python", "numpy", "highspy", "grpcio", "matplotlib"} <= set(document["versions"])
    assert sorted(document["figures"]) == FIGURES


def test_joint_model_beats_each_entity_alone(quick_run: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    """The paper's qualitative claim, on fresh points of the whole square, for the model drawn in Figure 6."""
    out, result = quick_run
    assert result.returncode == 0, result.stderr
    document = json.loads((out / "sinc.json").read_text())
    joint = max(document["joint"], key=lambda run: run["mbar"])
    alone = [entry["relative_error"]["all_test_points"] for entry in document["alone"]]
    assert len(alone) == 2
    assert all(joint["joint_test_relative_error"] < error for error in alone), (joint, alone)
    assert (
        document["figures"]["sinc-figure6.png"]["relative_error_on_plot_grid"]
        == joint["joint_plot_grid_relative_error"]
    )


def test_markdown_names_the_figures_and_marks_runs_that_are_not_private(
    quick_run: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    out, result = quick_run
    assert result.returncode == 0, result.stderr
    text = (out / "sinc.md").read_text()
    assert result.stdout.startswith(text.splitlines()[0].lstrip("# ") + ": report in ") and text not in result.stdout
    assert "Our reading of the paper's Figures 3-6" in text
    for number, name in zip((3, 4, 5, 6), FIGURES, strict=True):
        assert f"Figure {number}" in text and name in text
    document = json.loads((out / "sinc.json").read_text())
    not_private = [run for run in document["joint"] if not run["private"]]
    assert all(run["mbar"] >= 2 for run in not_private)
    rows = [line for line in text.splitlines() if line.startswith("| joint random-kernel model")]
    assert len(rows) == len(document["joint"])
    assert sum("**NOT PRIVATE**" in row for row in rows) == len(not_private)
    if not_private:
        assert "NOT PRIVATE: mbar >= n_j" in text
    assert "Software: python" in text


def test_a_second_run_gives_the_same_results(
    quick_run: tuple[Path, subprocess.CompletedProcess[str]],
    tmp_path: Path,
) -> None:
    out, first = quick_run
    assert first.returncode == 0, first.stderr
    again = tmp_path / "again"
    second = reproduce_quick(again)
    assert second.returncode == 0, second.stderr
    before = without_run_details(json.loads((out / "sinc.json").read_text()))
    after = without_run_details(json.loads((again / "sinc.json").read_text()))
    assert before == after


def test_a_bad_mbar_is_a_config_error(tmp_path: Path) -> None:
    result = ppsvm("reproduce", "sinc", "--mbar", "1,x", "--out", str(tmp_path / "out"), check=False, timeout=60)
    assert result.returncode == 1
    assert "--mbar" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()
