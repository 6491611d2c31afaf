"""Issue 31's done-when over real entity processes: `coordinator train --engine dask` trains the model the default
engine trains, on a local cluster of 2 worker processes over mutual TLS from a CA made for the training, and on a
cluster started as docs/scaling.md says (`dask scheduler` and `dask worker` processes, `coordinator dask-certs`).

The two runs fetch the same kernel (masked shares decode to the same fixed-point values whatever the nonces), draw
the same cross-validation sample (the Dask path gathers those rows from the workers) and solve by the same
interior-point method, once on K in this process and once with K's rows on the workers.
"""

from __future__ import annotations

import json
import re
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("distributed", reason="the Dask engine needs ppsvm[dask]")

from distributed import Client

from ppsvm.core.dask_engine import tls_security
from ppsvm.wire.certs import dask_cluster_files
from ppsvm.wire.rpc import ppsvm_pb2 as pb

from .conftest import WINE_OPTIONS, ppsvm, wine_csv

RTOL = 1e-9
Fold = Callable[[int, np.ndarray], None]


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


def test_a_named_cluster_started_as_the_docs_say_trains_the_same_model(federation, tmp_path: Path) -> None:
    """`coordinator dask-certs`, then a scheduler and two workers as separate `dask` processes with its files, then
    `train --dask-scheduler ADDRESS --dask-tls DIR`: the default engine's model."""
    certs = tmp_path / "dask-tls"
    made = ppsvm("coordinator", "dask-certs", "--out", str(certs), "--days", "2").stdout
    assert "no CA key is kept" in made and not (certs / "ca.key").exists()
    assert stat.S_IMODE((certs / "dask-cluster.key").stat().st_mode) == 0o600
    tls = ["--tls-ca-file", str(certs / "ca.pem"), "--tls-cert", str(certs / "dask-cluster.pem"),
           "--tls-key", str(certs / "dask-cluster.key")]  # fmt: skip
    address_file = tmp_path / "scheduler.json"
    dask = [sys.executable, "-m", "dask"]
    started = [
        subprocess.Popen(
            [
                *dask,
                "scheduler",
                "--protocol",
                "tls",
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--no-dashboard",
                "--scheduler-file",
                str(address_file),
                *tls,
            ],  # fmt: skip
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    ]
    try:
        started.append(
            subprocess.Popen(
                [
                    *dask,
                    "worker",
                    "--scheduler-file",
                    str(address_file),
                    "--nworkers",
                    "2",
                    "--nthreads",
                    "1",
                    "--memory-limit",
                    "0",
                    "--no-dashboard",
                    *tls,
                ],  # fmt: skip
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
        deadline = time.monotonic() + 60
        while not address_file.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        address = json.loads(address_file.read_text())["address"]
        assert address.startswith("tls://127.0.0.1:")

        run = federation(2, 2)
        common = ["--kernel", "gaussian", "--solver", "ipm", "--no-distribute"]
        run.train(*common)
        (run.split_dir / "model.json").rename(tmp_path / "numpy.json")
        named = ["--engine", "dask", "--dask-scheduler", address]
        refused = run.train(*common, *named, check=False)
        assert refused.returncode == 1 and "ppsvm coordinator dask-certs --out DIR" in refused.stderr
        with Client(address, security=tls_security(*dask_cluster_files(certs)), timeout="30s") as probe:
            probe.wait_for_workers(2, timeout=60)  # train takes the workers it finds
        on_workers = run.train(*common, *named, "--dask-tls", str(certs))
        assert f"Dask scheduler {address}: 2 workers" in on_workers.stderr
        expected, got = _fits(tmp_path / "numpy.json")[0], _fits(run.split_dir / "model.json")[0]
        np.testing.assert_allclose(got["u"], expected["u"], rtol=RTOL, atol=RTOL * np.abs(expected["u"]).max())
        np.testing.assert_allclose(got["gamma"], expected["gamma"], rtol=RTOL, atol=1e-12)
    finally:
        for process in reversed(started):
            process.terminate()
        for process in reversed(started):
            process.wait(timeout=30)


@pytest.mark.parametrize("refused", [False, True], ids=["dropped-out", "refused"])
def test_an_entity_failing_mid_stream_fails_the_fetch_on_workers_with_its_error(
    federation, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, refused: bool
) -> None:
    """One entity of a masked row block sends half its rows and fails: its row block's other stream, held back by
    the chunk window, is let go, and the fetch ends with that entity's error (asked again once unless refused),
    never a hang or a kernel from half the shares."""
    from ppsvm.config import load_federation
    from ppsvm.coordinator.federation import Session
    from ppsvm.core.dask_engine import local_cluster
    from ppsvm.errors import EntityError

    run = federation(1, 2)
    config = load_federation(run.federation_path)
    failing = config.entities[1].id
    calls = []
    with Session(config) as session:
        blocks, scaling = session.survey()
        client = session.clients[failing]
        real = client.kernel_rows

        def half_then_fail(request: pb.KernelRequest, rows: int, what: str, fold: Fold) -> None:
            calls.append(rows)

            def first_half(start: int, batch: np.ndarray) -> None:
                fold(start, batch[: max(0, rows // 2 - start)])
                if start + len(batch) > rows // 2:
                    raise EntityError(f"{failing} dropped out", refused=refused)

            real(request, rows, what, first_half)

        monkeypatch.setattr(client, "kernel_rows", half_then_fail)
        monkeypatch.setattr("ppsvm.coordinator.assembly.CHUNK_BYTES", 8 * 5 * 14)  # chunks of 5 rows at mbar 14
        workers = local_cluster(2)
        try:
            with pytest.raises(EntityError, match=f"{failing} dropped out"):
                session.kernel_on_workers(workers, "gaussian", 14, 0.1, scaling, blocks, "train")
        finally:
            workers.shutdown()
    assert len(calls) == (1 if refused else 2)  # a failed masked fetch is asked again as a whole, once
