"""``ppsvm reproduce sinc --quick`` through the real CLI: files, figures, settings, the claim, reproducibility."""

from __future__ import annotations

import io
import json
import math
import subprocess
from pathlib import Path

import pytest

from .conftest import ppsvm, without_run_details

# Minutes of reproduction each: CI runs them in its second step (pytest -m long).
pytestmark = pytest.mark.long

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
FIGURES = [f"sinc-figure{number}.png" for number in range(1, 7)]
MODELS = ("entity1_alone", "entity2_alone", "revealed", "ppa", "ppa_private_mbar1")
READINGS = ("stated", "original-units")

Run = tuple[Path, subprocess.CompletedProcess[str]]


def reproduce_quick(out: Path) -> subprocess.CompletedProcess[str]:
    return ppsvm("reproduce", "sinc", "--quick", "--out", str(out), "--no-progress", check=False, timeout=180)


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    out = tmp_path_factory.mktemp("sinc") / "results"
    return out, reproduce_quick(out)


def document(run: Run) -> dict:
    out, result = run
    assert result.returncode == 0, result.stderr
    return json.loads((out / "sinc.json").read_text())


def test_quick_run_writes_the_report_json_and_figures_1_to_6(quick_run: Run) -> None:
    import matplotlib.image

    out, result = quick_run
    found = document(quick_run)
    assert "wrote: " in result.stdout and str(out / "sinc.json") in result.stdout
    assert sorted(found["figures"]) == FIGURES
    for name in FIGURES:
        content = (out / name).read_bytes()
        assert content.startswith(PNG_SIGNATURE), name
        pixels = matplotlib.image.imread(io.BytesIO(content), format="png")
        # A drawn figure, not an empty canvas: large enough and with more than one colour.
        assert pixels.shape[0] > 400 and pixels.shape[1] > 400, (name, pixels.shape)
        assert float(pixels[..., :3].std()) > 0.05, name
    assert found["figures"]["sinc-figure6.png"]["paper_figure"] == 6
    assert {"python", "numpy", "highspy", "grpcio", "matplotlib"} <= set(found["versions"])
    assert found["seconds"]["total"] > 0


def test_settings_are_the_quick_protocol_with_the_paper_numbers(quick_run: Run) -> None:
    settings = document(quick_run)["settings"]
    assert settings["quick"] is True
    assert settings["paper"] == {"entity1_alone": 5.01, "entity2_alone": 1.05, "revealed": 0.01, "ppa": 0.01}
    assert settings["grids"]["E1"]["points"] == 100 and settings["grids"]["E2"]["points"] == 108
    assert settings["grids"]["sinc_zeros_on_E1_E2"] == 0
    assert settings["mbar"] == 100 and settings["private_mbar"] == 1
    assert settings["folds"] == 3 and settings["seeds"] == {"folds": 0, "split": 0}
    assert "sha256" in settings["secrets"]


def test_every_model_has_both_error_measures_and_honest_privacy(quick_run: Run) -> None:
    found = document(quick_run)
    results = found["results"]
    assert sorted(results) == sorted(READINGS)
    for reading in READINGS:
        assert sorted(results[reading]) == sorted(MODELS)
        for name in MODELS:
            figures = results[reading][name]
            assert math.isfinite(figures["error_4_17"]) and math.isfinite(figures["norm_ratio"]), (reading, name)
            assert figures["mu"] in found["settings"]["mu_set"] and figures["nu"] in found["settings"]["nu_set"]
        assert results[reading]["ppa"]["private"] is False and results[reading]["ppa"]["mbar"] == 100
        assert results[reading]["ppa_private_mbar1"]["private"] is True
        # The same widths read two ways: in original units they are R^2 times wider on the scaled features.
        ppa = results[reading]["ppa"]
        expected = ppa["mu"] * (ppa["feature_range"] ** 2 if reading == "original-units" else 1.0)
        assert ppa["width_scaled"] == pytest.approx(expected, rel=1e-12)
    for name in ("revealed", "ppa"):
        drawn = found["figures"][f"sinc-figure{5 if name == 'revealed' else 6}.png"]["norm_ratio_plot_grid"]
        assert drawn == {reading: results[reading][name]["norm_ratio_plot_grid"] for reading in READINGS}


def test_algorithm_3_1_beats_each_entity_alone_where_the_widths_can_fit_sinc(quick_run: Run) -> None:
    """The paper's claim, under the original-units reading, by the norm ratio over E1 u E2."""
    models = document(quick_run)["results"]["original-units"]
    ppa = models["ppa"]["norm_ratio"]
    assert ppa < 0.2
    assert all(ppa < models[name]["norm_ratio"] for name in ("entity1_alone", "entity2_alone")), models
    # (4.17) sums squared pointwise relative errors: far above the norm ratio on these grids.
    assert models["ppa"]["error_4_17"] > 10 * ppa


def test_markdown_states_the_protocol_privacy_runtime_and_figures(quick_run: Run) -> None:
    out, result = quick_run
    text = (out / "sinc.md").read_text()
    found = document(quick_run)
    assert result.stdout.startswith(text.splitlines()[0].lstrip("# ") + ": report in ") and text not in result.stdout
    assert "NOT PRIVATE" in text and "mbar < n" in text and "non_private_allow_mbar_at_least_features" in text
    assert "Runtime " in text and "(4.16)" in text and "(4.17)" in text and "norm ratio" in text
    for number, name in enumerate(FIGURES, start=1):
        assert f"Figure {number}" in text and f"]({name})" in text
    # One results row per reading (the measures' table lists the model too, without a basis).
    rows = [line for line in text.splitlines() if line.startswith("| Algorithm 3.1 over gRPC") and "random B" in line]
    assert len(rows) == 2 and all("| **NOT PRIVATE** | random B, 100 x 2" in row for row in rows)
    private = [line for line in text.splitlines() if line.startswith("| ours: Algorithm 3.1 at mbar = 1 |")]
    assert len(private) == 2 and all(row.startswith("| ours: Algorithm 3.1 at mbar = 1 | yes |") for row in private)
    for reading in READINGS:
        closer = found["measure_agreement"]["readings"][reading]["closer"]
        assert closer in ("error_4_17", "norm_ratio")
    assert "Software: python" in text


def test_a_second_run_gives_the_same_results(quick_run: Run, tmp_path: Path) -> None:
    first = document(quick_run)
    again = tmp_path / "again"
    second = reproduce_quick(again)
    assert second.returncode == 0, second.stderr
    after = json.loads((again / "sinc.json").read_text())
    assert without_run_details(first) == without_run_details(after)


def test_bad_folds_are_a_config_error(tmp_path: Path) -> None:
    result = ppsvm("reproduce", "sinc", "--folds", "1", "--out", str(tmp_path / "out"), check=False, timeout=60)
    assert result.returncode == 1
    assert "folds" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()
