"""``ppsvm reproduce dp --quick`` as a user runs it, part by part: files, recorded settings, sane figures, and for
Figures 3-4 reruns that repeat everything the noise does not touch."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from .conftest import ppsvm, without_run_details

# The Figures 3-4 part takes minutes: CI runs it in its second step (pytest -m long). The Figures 5-9 part's quick
# run takes well under a minute and stays in the default run.
LONG = pytest.mark.long

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
FILES = {"dp.md", "dp.json", "dp-figure3.png", "dp-rho-time.png"}
CV_FILES = {"dp-figures5-9.md", "dp-figures5-9.json", "dp-figure5.png", "dp-figure7.png", "dp-figure9.png"}
# A quick run of Figures 3-4 takes about 2 minutes on 2 idle cores, of Figures 5-9 about 30 s; the margin is for a
# loaded machine.
TIMEOUT_S = 1200


def reproduce(out: Path, part: str = "3-4") -> subprocess.CompletedProcess[str]:
    return ppsvm("reproduce", "dp", "--quick", "--figures", part, "--out", str(out), "--no-progress", timeout=TIMEOUT_S)


@pytest.fixture(scope="module")
def quick(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = tmp_path_factory.mktemp("reproduce-dp") / "results"
    return reproduce(out), out


@LONG
def test_quick_run_writes_every_file(quick: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    result, out = quick
    assert {p.name for p in out.iterdir()} == FILES  # and no temporary files left behind
    for name in ("dp-figure3.png", "dp-rho-time.png"):
        assert (out / name).read_bytes().startswith(PNG_SIGNATURE)
    markdown = (out / "dp.md").read_text(encoding="utf-8")
    # The claims and the files on stdout, the report in the files.
    assert result.stdout.startswith("## The paper's claims") and result.stdout.count("\n") < 10
    assert "wrote: " in result.stdout and str(out / "dp.json") in result.stdout
    for phrase in (
        "Figures 3 (US) and 4 (Brazil)",
        "our addition",
        "| dp-hybrid, Laplace (20 public) |",
        "Software: python",
    ):
        assert phrase in markdown


@LONG
def test_json_records_settings_seeds_and_versions(quick: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    document = json.loads((quick[1] / "dp.json").read_text(encoding="utf-8"))
    settings = document["settings"]
    assert settings["quick"] is True
    assert settings["seeds"] == [0, 1] and len(document["repetitions"]) == 2
    assert settings["epsilons"] == [1.0, 4.0] and settings["C"] == 1.0 and settings["frequencies"] == 100
    assert settings["data"]["file"] == "adult.data"
    assert settings["data"]["sha256"] == "5b00264637dbfec36bdeaab5676b0b309ff9eb788d63554ca0a249491c86603d"
    assert settings["fitted_with"].startswith("ppsvm.DpHybridClassifier")
    assert {"python", "numpy", "scipy", "matplotlib"} <= set(document["versions"])
    assert document["machine"]["cpus"] >= 1
    assert document["rerun"] == "ppsvm reproduce dp --quick --figures 3-4"
    assert set(document["seconds"]) >= {"repetitions", "rho_timing", "total"}


@LONG
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
        laplace = rep["diagnostics"]["noise_to_signal"]["1"]["laplace"]
        # A quarter of the noise scale; measured ratios 0.18 and 0.05, so chance cannot reverse them.
        assert 0 < laplace["4"] < laplace["1"] < 1
        # Every fit of a repetition shares its rho: the released models' rho is the non-private one's.
        assert (
            rep["preprocessing"]["heldout_kernel_mse"]["dp-hybrid"]
            < rep["preprocessing"]["heldout_kernel_mse"]["private-svm"]
        )

    # The threshold the entities' noised score histograms choose makes the models classify: below the majority
    # class's error (0.246 in these test sets) and below the paper's cut at 0, which sits near it. The noise is
    # drawn from the OS, so every run differs: over four quick runs the cut at 0 gave 0.233-0.239 and the chosen
    # threshold 0.201-0.215, 0.024-0.037 below the cut. The margins leave room for the noise of two repetitions.
    majority = np.mean([min(r["test_positive_rate"], 1 - r["test_positive_rate"]) for r in document["repetitions"]])
    for method in ("dp-hybrid/laplace", "dp-hybrid/output-gamma", "dp-hybrid/objective"):
        for e in epsilons:
            figures = summary["epsilon"][method][e]
            at_zero = figures["error_rate_at_zero"]["mean"]
            assert figures["error_rate"]["mean"] < majority - 0.02, (method, e, figures)
            assert figures["error_rate"]["mean"] < at_zero - 0.012, (method, e, figures)
            assert at_zero > majority - 0.03, (method, e, figures)  # the paper's cut: near the majority class

    # The defaults (C by the noise rule, the width chosen on the public records) classify well below the majority
    # rate with every mechanism (issue 16: 0.03 below). Measured on this quick run: 0.055-0.074 below; the full run
    # (10 splits) 0.040-0.071 below at epsilon >= 1. 0.025 leaves about 3 standard errors of two repetitions.
    for mechanism in ("laplace", "output-gamma", "objective"):
        for e in epsilons:
            figures = summary["useful"][f"dp-hybrid/{mechanism}"][e]
            assert figures["error_rate"]["mean"] < majority - 0.025, (mechanism, e, figures)
            assert figures["auc"]["mean"] > 0.75, (mechanism, e, figures)

    timing = document["rho_timing"]
    assert [(t["n_public"], t["D"]) for t in timing] == [(20, 25), (20, 50), (50, 25), (50, 50)]
    assert [t["n_pairs"] for t in timing] == [190, 190, 1225, 1225]
    assert all(t["iterations"] >= 1 and t["seconds"]["median_wall"] > 0 for t in timing)


def unthresholded(figures: dict[str, Any]) -> dict[str, Any]:
    """A model's figures minus what its threshold moves: the threshold comes from noised histograms."""
    return {key: value for key, value in figures.items() if key not in ("error_rate", "threshold")}


def without_noise(document: dict[str, Any]) -> dict[str, Any]:
    """A dp.json minus what the noise (drawn from the operating system, as in production) moves: every figure of a
    model with noised weights, the threshold and the error at it of every model (the threshold comes from noised
    histograms), the summaries and verdicts built on them, and the noise-to-signal diagnostics. What is left: the
    splits, the public preprocessing, and the AUC and the error cut at 0 of every model without noised weights."""
    kept = {key: value for key, value in document.items() if key not in ("summary", "verdicts")}
    repetitions = []
    for rep in document["repetitions"]:
        rep = {key: value for key, value in rep.items() if key not in ("epsilon", "diagnostics", "useful")}
        rep["plain"] = {name: unthresholded(figures) for name, figures in rep["plain"].items()}
        rep["public_only"] = {size: unthresholded(figures) for size, figures in rep["public_only"].items()}
        rep["other_C"] = {
            c: {
                name: unthresholded(figures)
                for name, figures in block.items()
                if "/" not in name or name.startswith(("non-", "public"))
            }
            for c, block in rep["other_C"].items()
        }
        repetitions.append(rep)
    return without_run_details({**kept, "repetitions": repetitions})


@LONG
def test_rerun_repeats_every_figure_without_noise(
    quick: tuple[subprocess.CompletedProcess[str], Path], tmp_path: Path
) -> None:
    reproduce(tmp_path / "again")
    first = json.loads((quick[1] / "dp.json").read_text(encoding="utf-8"))
    second = json.loads((tmp_path / "again" / "dp.json").read_text(encoding="utf-8"))
    assert without_noise(first) == without_noise(second)
    # What is left still holds the models without noise: the check is not empty.
    assert {"non-private/learned-rho", "exact-rbf/subsample"} <= set(without_noise(first)["repetitions"][0]["plain"])
    assert first["summary"]["epsilon"] != second["summary"]["epsilon"]  # fresh noise: no seed repeats it


@LONG
def test_bad_option_is_a_clear_error(tmp_path: Path) -> None:
    result = ppsvm("reproduce", "dp", "--quick", "--repetitions", "0", "--out", str(tmp_path / "out"), check=False)
    assert result.returncode == 1
    assert "ppsvm: error:" in result.stderr and "--repetitions" in result.stderr
    assert not (tmp_path / "out").exists()


# --- Figures 5-9 ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def quick_cv(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = tmp_path_factory.mktemp("reproduce-dp-cv") / "results"
    return reproduce(out, "5-9"), out


@pytest.mark.slow
def test_quick_cv_run_writes_its_files_only(quick_cv: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    result, out = quick_cv
    assert {p.name for p in out.iterdir()} == CV_FILES  # the Figures 3-4 part did not run
    for name in ("dp-figure5.png", "dp-figure7.png", "dp-figure9.png"):
        assert (out / name).read_bytes().startswith(PNG_SIGNATURE)
    assert result.stdout.startswith("## The paper's claims, Figures 5-9") and result.stdout.count("\n") < 12
    assert str(out / "dp-figures5-9.json") in result.stdout
    markdown = (out / "dp-figures5-9.md").read_text(encoding="utf-8")
    for phrase in (
        "counterpart of Figures 5 and 6",
        "counterpart of Figures 7 and 8",
        "counterpart of Figure 9",
        "10-fold, repeated 10 times",
        "## Where Adult differs from the census extracts, and why",
        "Wall clock:",
        "Software: python",
    ):
        assert phrase in markdown, phrase


@pytest.mark.slow
def test_quick_cv_json_holds_settings_and_sane_figures(
    quick_cv: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    document = json.loads((quick_cv[1] / "dp-figures5-9.json").read_text(encoding="utf-8"))
    settings = document["settings"]
    assert (settings["repetitions"], settings["folds"], settings["folds_run"], settings["seeds"]) == (1, 10, 2, [0])
    assert settings["dimensions"] == [5, 14] and settings["rates"] == [0.1, 1.0] and settings["epsilon"] == 1.0
    assert settings["data"]["sha256"] == "5b00264637dbfec36bdeaab5676b0b309ff9eb788d63554ca0a249491c86603d"
    assert [a["from_dimensionality"] for a in settings["attributes"]] == [5] * 4 + [8] * 3 + [11] * 3 + [14] * 3
    assert document["rerun"] == "ppsvm reproduce dp --quick --figures 5-9" and document["seconds"]["cv"] > 0
    assert {"python", "numpy", "matplotlib"} <= set(document["versions"])

    splits = document["splits"]
    assert [(s["seed"], s["fold"]) for s in splits] == [(0, 0), (0, 1)]
    for split in splits:
        # d = 5 and 14: dp-hybrid, private-svm, non-private, Public-20 and -200; rate 0.1: dp-hybrid, private-svm.
        assert len(split["fits"]) == 2 * 5 + 2
        assert all(0.5 < f["auc"] <= 1.0 for f in split["fits"]), split["fits"]
        assert {f["n_train"] for f in split["fits"] if f["name"] == "dp-hybrid"} == {27_000, 2_700}
        assert all(0 < v < 1 for v in split["noise_to_signal"].values())
        hybrid = [f for f in split["fits"] if f["name"] == "dp-hybrid"]
        assert all(f["rho_iterations"] >= 1 and 0 < f["seconds"]["rho"] < f["seconds"]["fit_wall"] for f in hybrid)

    dims = document["summary"]["dimensions"]
    # Four attributes (age, sex, education, workclass) know far less about income than thirteen: measured 0.62
    # against 0.78 for the noiseless model, the same for the public-only models (0.63-0.66 against 0.77-0.79).
    for name in ("non-private", "public-only/200", "dp-hybrid"):
        assert dims[name]["14"]["mean"] > dims[name]["5"]["mean"] + 0.08, name
    assert dims["non-private"]["14"]["mean"] > 0.72
    time = document["summary"]["time"]["sampling"]["dp-hybrid"]
    assert time["1"]["fit_cpu"]["median"] > 0 and time["0.1"]["rho"]["median"] > 0
    verdicts = document["verdicts"]
    assert set(verdicts["sampling"]) == {"0.1", "1"} and set(verdicts["dimensions"]) == {"5", "14"}
