"""Issue 31's done-when over real entity processes: `coordinator train --engine dask` trains the model the default
engine trains, on a local cluster of 2 worker processes over mutual TLS from the federation's CA.

The two runs fetch the same kernel (masked shares decode to the same fixed-point values whatever the nonces), draw
the same cross-validation sample (the Dask path gathers those rows from the workers) and solve by the same
interior-point method, once on K in this process and once with K's rows on the workers.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("distributed", reason="the Dask engine needs ppsvm[dask]")

from .conftest import WINE_OPTIONS, wine_csv

RTOL = 1e-9


def _fits(model_file: Path) -> list[dict]:
    document = json.loads(model_file.read_text())
    return document["members"] if "members" in document else [document]


@pytest.mark.parametrize(
    ("rows", "cols", "kernel", "data", "options"),
    [
        pytest.param(2, 2, "gaussian", None, [], id="2x2-gaussian-masked"),
        # Row blocks of one entity each: their blocks arrive alone (no nonce), unmasked.
        pytest.param(3, 1, "linear", None, ["--class-weight", "balanced"], id="3x1-linear-alone"),
        # Three classes on one K on the workers: each class rescales it from the width the last one left.
        pytest.param(2, 2, "gaussian", "wine", ["--task", "classify"], id="2x2-three-classes"),
    ],
)
def test_the_dask_engine_trains_the_default_engine_s_model(
    federation, tmp_path: Path, rows: int, cols: int, kernel: str, data: str | None, options: list[str]
) -> None:
    run = federation(rows, cols) if data is None else federation(rows, cols, wine_csv(tmp_path), WINE_OPTIONS)
    common = ["--kernel", kernel, "--solver", "ipm", "--no-distribute", *options]
    run.train(*common)
    (run.split_dir / "model.json").rename(tmp_path / "numpy.json")
    on_workers = run.train(*common, "--engine", "dask", "--dask-workers", "2")
    (run.split_dir / "model.json").rename(tmp_path / "dask.json")

    assert "starting a local Dask cluster of 2 worker processes" in on_workers.stderr
    assert "(no TLS)" not in on_workers.stderr
    assert re.search(r"gathering \d+ of K's \d+ rows from the Dask workers", on_workers.stderr), on_workers.stderr
    engines = [json.loads((tmp_path / f"{name}.json").read_text())["training"]["engine"] for name in ("numpy", "dask")]
    assert engines == ["numpy", "dask"]
    numpy_fits, dask_fits = _fits(tmp_path / "numpy.json"), _fits(tmp_path / "dask.json")
    assert len(numpy_fits) == len(dask_fits) == (3 if data else 1)
    for expected, got in zip(numpy_fits, dask_fits, strict=True):
        assert (got["nu"], got["mu"]) == (expected["nu"], expected["mu"])  # the same sample, the same choice
        np.testing.assert_allclose(got["u"], expected["u"], rtol=RTOL, atol=RTOL * np.abs(expected["u"]).max())
        np.testing.assert_allclose(got["gamma"], expected["gamma"], rtol=RTOL, atol=1e-12)
        assert got["calibration"] == pytest.approx(expected["calibration"], rel=1e-6)
