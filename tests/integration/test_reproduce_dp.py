"""``ppsvm reproduce dp --quick`` as a user runs it: files, recorded settings, sane figures, identical reruns."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from .conftest import ppsvm, without_run_details

# Minutes of reproduction each: CI runs them in its second step (pytest -m long).
pytestmark = pytest.mark.long

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
FILES = {"dp.md", "dp.json", "dp-figure3.png", "dp-figure4.png"}
# A quick run takes well under a minute on 2 idle cores; the margin is for a loaded machine.
TIMEOUT_S = 600


def reproduce(out: Path) -> subprocess.CompletedProcess[str]:
    return ppsvm("reproduce", "dp", "--quick", "--out", str(out), "--no-progress", timeout=TIMEOUT_S)


@pytest.fixture(scope="module")
def quick(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = tmp_path_factory.mktemp("reproduce-dp") / "results"
    return reproduce(out), out


def test_quick_run_writes_every_file(quick: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    result, out = quick
    assert {p.name for p in out.iterdir()} == FILES  # and no temporary files left behind
    for name in ("dp-figure3.png", "dp-figure4.png"):
        assert (out / name).read_bytes().startswith(PNG_SIGNATURE)
    markdown = (out / "dp.md").read_text(encoding="utf-8")
    assert result.stdout.startswith(markdown)
    assert "wrote: " in result.stdout and str(out / "dp.json") in result.stdout
    for phrase in ("Figure 3", "Figure 4", "our reading", "| dp-hybrid, Laplace (20 public) |", "Software: python"):
        assert phrase in markdown


def test_json_records_settings_seeds_and_versions(quick: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    document = json.loads((quick[1] / "dp.json").read_text(encoding="utf-8"))
    settings = document["settings"]
    assert settings["quick"] is True
    assert settings["seeds"] == [0, 1] and len(document["repetitions"]) == 2
    assert settings["epsilons"] == [1.0, 4.0] and settings["C"] == 1.0 and settings["frequencies"] == 100
    assert settings["data"]["file"] == "adult.data" and len(settings["data"]["sha256"]) == 64
    assert {"python", "numpy", "scipy", "matplotlib"} <= set(document["versions"])
    assert document["machine"]["cpus"] >= 1
    assert document["rerun"] == "ppsvm reproduce dp --quick"
    assert set(document["seconds"]) >= {"repetitions", "rho_timing", "total"}


def test_figures_are_sane(quick: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    document = json.loads((quick[1] / "dp.json").read_text(encoding="utf-8"))
    summary, epsilons = document["summary"], ["1", "4"]
    aucs = [stats["auc"]["mean"] for per in summary["epsilon"].values() for stats in per.values()]
    aucs += [stats["auc"]["mean"] for block in ("plain", "public_only") for stats in summary[block].values()]
    assert all(0.5 < a <= 1.0 for a in aucs), aucs

    hybrid = summary["epsilon"]["dp-hybrid/laplace"]
    non_private = summary["plain"]["non-private/learned-rho"]["auc"]["mean"]
    # Noise can only cost accuracy on average; 0.02 is several times the measured noise at epsilon 1.
    assert non_private >= hybrid["1"]["auc"]["mean"] - 0.02
    # Twenty public records alone make a poor model (AUC near 0.56 measured, 0.80 for dp-hybrid).
    for e in epsilons:
        assert hybrid[e]["auc"]["mean"] > summary["public_only"]["20"]["auc"]["mean"] + 0.1

    for rep in document["repetitions"]:
        # With ||zhat|| = 1 and C = 1 every dual variable sits at its bound C/n: a theorem, not a measurement.
        assert rep["diagnostics"]["alpha_at_bound"]["1"] == 1.0
    first = document["repetitions"][0]
    assert first["decomposition_check"] == {"laplace": True, "output-gamma": True}
    laplace = first["diagnostics"]["noise_to_signal"]["1"]["laplace"]
    assert laplace["4"]["entity0"] < laplace["1"]["entity0"]  # a quarter of the noise scale

    timing = document["rho_timing"]
    assert [(t["n_public"], t["D"]) for t in timing] == [(20, 25), (20, 50), (50, 25), (50, 50)]
    assert [t["n_pairs"] for t in timing] == [190, 190, 1225, 1225]
    assert all(t["iterations"] >= 1 and t["seconds"]["median_wall"] > 0 for t in timing)


def test_rerun_gives_identical_json(quick: tuple[subprocess.CompletedProcess[str], Path], tmp_path: Path) -> None:
    reproduce(tmp_path / "again")
    first = json.loads((quick[1] / "dp.json").read_text(encoding="utf-8"))
    second = json.loads((tmp_path / "again" / "dp.json").read_text(encoding="utf-8"))
    assert without_run_details(first) == without_run_details(second)


def test_bad_option_is_a_clear_error(tmp_path: Path) -> None:
    result = ppsvm("reproduce", "dp", "--quick", "--repetitions", "0", "--out", str(tmp_path / "out"), check=False)
    assert result.returncode == 1
    assert "ppsvm: error:" in result.stderr and "--repetitions" in result.stderr
    assert not (tmp_path / "out").exists()
