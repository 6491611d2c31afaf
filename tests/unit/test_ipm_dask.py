"""The interior-point method's Dask back end (issue 31) against the local one, on a 2-worker cluster over mutual TLS.

One LocalCluster of two worker processes serves the module; its certificates come from a CA of its own, as
``ppsvm coordinator dask-certs`` writes them. The same K is solved in this process and as a DaskKernel in
uneven chunks spread over both workers: the objective, u and gamma agree to 1e-9, and so does the certificate,
which the workers' products compute. The last test kills a worker process after the first pass of a solve.
"""

from __future__ import annotations

import os
import re
import signal
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from distributed import Client

from ppsvm.coordinator import train
from ppsvm.core import dask_engine, ipm, lp, tuning
from ppsvm.core.dask_engine import DaskKernel, local_cluster, tls_security
from ppsvm.errors import ConfigError, SolverError
from ppsvm.wire.certs import (
    CA_FILE,
    CLIENT,
    COORDINATOR,
    DASK_CLUSTER_NAME,
    certificate_file,
    dask_cluster_certificates,
    dask_cluster_files,
    key_file,
    make_certificates,
    write_certificates,
)
from ppsvm.wire.tls import TlsFiles

# Starting the TLS cluster (two worker processes) takes seconds; the solves, a second or two each.
pytestmark = pytest.mark.slow

ROWS = 3000
# Uneven chunks, several a worker and none aligned with the row blocks, so that every reduction is exercised.
CHUNK_ROWS = 700
RTOL = 1e-9


def write_pki(directory: Path) -> tuple[Path, Path, Path]:
    """A federation CA and the coordinator's certificate and key, as files: (CA, certificate, key)."""
    directory.mkdir()
    for name, pem in make_certificates({"coordinator": (COORDINATOR, CLIENT)}).items():
        (directory / name).write_bytes(pem.text)
    return directory / CA_FILE, directory / certificate_file("coordinator"), directory / key_file("coordinator")


@pytest.fixture(scope="module")
def cluster_tls(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The directory of the cluster's own CA and certificate, as `ppsvm coordinator dask-certs` writes it."""
    directory = tmp_path_factory.mktemp("dask") / "cluster"
    write_certificates(directory, dask_cluster_certificates(), overwrite=False)
    return directory


@pytest.fixture(scope="module")
def client(cluster_tls: Path) -> Iterator[Client]:
    running = local_cluster(2, tls_security(*dask_cluster_files(cluster_tls)))
    yield running
    running.shutdown()


def problem(task: str, kind: str, weighted: bool, rows: int = ROWS) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """K, targets and weights: a Gaussian K on 7 basis points of 5 features, or a linear one on 23 of 30."""
    rng = np.random.default_rng(7)
    n, mbar = (5, 7) if kind == "gaussian" else (30, 23)
    X, B = rng.random((rows, n)), rng.random((mbar, n))
    if kind == "gaussian":
        K = np.exp(-0.5 * ((X[:, None, :] - B[None, :, :]) ** 2).sum(axis=2))
    else:
        K = X @ B.T
    score = np.sin(6.0 * X[:, 0]) + X[:, 1] + 0.2 * rng.standard_normal(rows)
    target = np.where(score > np.quantile(score, 0.4), 1.0, -1.0) if task == "classify" else score
    return np.asfortranarray(K), target, rng.uniform(0.2, 3.0, rows) if weighted else None


def test_the_cluster_speaks_only_tls(client: Client) -> None:
    workers = client.scheduler_info()["workers"]
    assert len(workers) == 2 and all(address.startswith("tls://") for address in workers)
    assert client.scheduler is not None and client.scheduler.address.startswith("tls://")


def test_a_client_with_a_foreign_certificate_is_refused(client: Client, tmp_path: Path) -> None:
    foreign = tls_security(*write_pki(tmp_path / "foreign"))
    assert client.scheduler is not None
    with pytest.raises(OSError):
        Client(client.scheduler.address, security=foreign, timeout=2)


def test_the_training_s_local_cluster_refuses_every_federation_certificate(tmp_path: Path) -> None:
    """Dask checks only that a certificate's CA signed it: under the federation's CA an entity's certificate would
    open the workers that hold K's rows. The local cluster of `train --engine dask` has a CA of its own, so even
    the federation's coordinator certificate is refused (and with it every party's, signed by the same CA)."""
    pki = write_pki(tmp_path / "federation")
    federation = TlsFiles(*pki, source=tmp_path / "federation.toml")
    with train._workers(train.TrainOptions(engine="dask", dask_workers=1), federation) as running:
        assert running is not None and running.scheduler is not None
        assert running.scheduler.address.startswith("tls://127.0.0.1:")
        assert len(running.scheduler_info()["workers"]) == 1
        with pytest.raises(OSError):
            Client(running.scheduler.address, security=tls_security(*pki), timeout=2)


def test_a_named_scheduler_is_refused_without_tls() -> None:
    """Its workers would get kernel rows in plaintext: refused before any connection is tried."""
    with pytest.raises(ConfigError, match="would receive kernel rows in plaintext; give the cluster certificates"):
        with dask_engine.cluster("tls://127.0.0.1:9", 1, None):
            pass


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"engine": "dask", "dask_scheduler": "tls://127.0.0.1:9"}, "make them with `ppsvm coordinator dask-certs"),
        ({"engine": "dask", "dask_tls": Path("cluster")}, "but no --dask-scheduler was given"),
        ({"engine": "numpy", "dask_tls": Path("cluster")}, "but the engine is numpy: add --engine dask"),
    ],
    ids=["scheduler-without-certificates", "certificates-without-scheduler", "numpy-engine"],
)
def test_a_named_cluster_and_its_certificates_go_together(settings: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        train.TrainOptions(**settings)


def test_a_named_scheduler_is_reached_with_the_cluster_s_own_certificates(
    client: Client, cluster_tls: Path, tmp_path: Path
) -> None:
    """What `train --dask-scheduler ADDRESS --dask-tls DIR` connects with; the federation's coordinator certificate,
    which a cluster under the federation's CA would admit, is refused by it."""
    pki = write_pki(tmp_path / "federation")
    federation = TlsFiles(*pki, source=tmp_path / "federation.toml")
    assert client.scheduler is not None
    address = client.scheduler.address
    options = train.TrainOptions(engine="dask", dask_scheduler=address, dask_tls=cluster_tls)
    with train._workers(options, federation) as running:
        assert running is not None and sorted(running.scheduler_info()["workers"]) == sorted(
            client.scheduler_info()["workers"]
        )
    with pytest.raises(OSError):
        Client(address, security=tls_security(*pki), timeout=2)


@pytest.mark.parametrize("shared", ["ca", "certificate"])
def test_a_named_cluster_under_the_federation_s_ca_is_refused(tmp_path: Path, shared: str) -> None:
    """Before any connection: the directory's CA is the federation's, or its certificate was issued by it."""
    issued = make_certificates({"coordinator": (COORDINATOR,), DASK_CLUSTER_NAME: (COORDINATOR,)})
    for name in (CA_FILE, certificate_file("coordinator"), key_file("coordinator")):
        (tmp_path / name).write_bytes(issued[name].text)
    federation = TlsFiles(
        tmp_path / CA_FILE, tmp_path / "coordinator.pem", tmp_path / "coordinator.key", source=tmp_path / "f.toml"
    )
    directory = tmp_path / "cluster"
    directory.mkdir()
    ca, certificate, key = dask_cluster_files(directory)
    # Either the federation's CA on file, or a CA of its own on file but a certificate the federation's CA issued.
    ca.write_bytes((issued if shared == "ca" else dask_cluster_certificates())[CA_FILE].text)
    certificate.write_bytes(issued[certificate_file(DASK_CLUSTER_NAME)].text)
    key.write_bytes(issued[key_file(DASK_CLUSTER_NAME)].text)
    options = train.TrainOptions(engine="dask", dask_scheduler="tls://127.0.0.1:9", dask_tls=directory)
    with pytest.raises(ConfigError, match="come from the federation's CA"):
        with train._workers(options, federation):
            pass


@pytest.mark.parametrize("kind", ["gaussian", "linear"])
@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("task", ["classify", "regress"])
def test_the_dask_back_end_solves_as_the_local_one(client: Client, task: str, weighted: bool, kind: str) -> None:
    K, target, weights = problem(task, kind, weighted)
    local = lp.solve_lp(task, K, target, 1.0, "ipm", weights)
    with DaskKernel(client, K, chunk_rows=CHUNK_ROWS) as held:
        assert held.shape == K.shape and held.finite
        remote = lp.solve_lp(task, held, target, 1.0, "ipm", weights)
    assert remote.formulation == "ipm" and remote.iterations == local.iterations
    assert remote.objective == pytest.approx(local.objective, rel=RTOL)
    np.testing.assert_allclose(remote.u, local.u, rtol=RTOL, atol=RTOL * np.abs(local.u).max())
    assert remote.gamma == pytest.approx(local.gamma, rel=RTOL, abs=RTOL * np.abs(local.u).max())
    assert remote.certificate is not None and local.certificate is not None
    assert remote.certificate.dual_objective == pytest.approx(local.certificate.dual_objective, rel=RTOL)
    # Both near zero: what the solves leave over, recomputed on the workers and here.
    assert remote.certificate.gap == pytest.approx(local.certificate.gap, abs=1e-9)
    assert remote.certificate.dual_infeasibility == pytest.approx(local.certificate.dual_infeasibility, abs=1e-9)


def test_rows_streamed_in_any_order_make_the_same_kernel(client: Client) -> None:
    """Chunks of a stream, out of order and uneven, go straight to the workers; the products are K's."""
    K, target, _ = problem("classify", "linear", False)
    bounds = [0, 1, 500, 1700, 1710, ROWS]
    chunks = [(a, b, K[a:b]) for a, b in zip(bounds, bounds[1:], strict=False)][::-1]
    rng = np.random.default_rng(0)
    u, v = rng.standard_normal(K.shape[1]), rng.standard_normal(ROWS)
    with DaskKernel(client, iter(chunks)) as held:
        assert held.shape == K.shape and held.chunk_count == len(chunks)
        np.testing.assert_allclose(held @ u, K @ u, rtol=1e-12)
        np.testing.assert_allclose(held.rmatvec(v), K.T @ v, rtol=1e-12)
        np.testing.assert_allclose(held.rmatvec(v, absolute=True), np.abs(K).T @ v, rtol=1e-12)
        remote = lp.solve_lp("classify", held, target, 1.0)
    local = lp.solve_lp("classify", K, target, 1.0, "ipm")
    assert remote.objective == pytest.approx(local.objective, rel=RTOL)
    np.testing.assert_allclose(remote.u, local.u, rtol=RTOL, atol=RTOL * np.abs(local.u).max())


def test_a_sample_of_rows_and_a_change_of_width_on_the_workers(client: Client) -> None:
    """take gathers exactly K[rows] across chunk and worker boundaries; power rescales every chunk in place."""
    K, _, _ = problem("classify", "gaussian", False)
    rows = np.sort(np.random.default_rng(1).choice(ROWS, 400, replace=False))
    with DaskKernel(client, K, chunk_rows=CHUNK_ROWS) as held:
        np.testing.assert_array_equal(held.take(rows), K[rows])
        assert held.take(np.array([], dtype=int)).shape == (0, K.shape[1])
        assert held.take(np.array([ROWS - 1])).flags.f_contiguous
        with pytest.raises(ValueError, match="sorted indices"):
            held.take(rows[::-1])
        held.power(2.5)
        np.testing.assert_allclose(held.take(np.arange(ROWS)), K**2.5, rtol=1e-15)
        held.power(1 / 2.5)  # the power identity composes: back to the first width
        np.testing.assert_allclose(held.take(rows), K[rows], rtol=1e-14)
        assert held.finite
        with pytest.raises(ValueError, match="exponent must be a number > 0"):
            held.power(0.0)


def test_fold_fits_as_tasks_score_the_grid_as_fits_here(client: Client) -> None:
    """The cross-validation's fold fits run as tasks on the workers give the same scores and choice, in order."""
    K, target, weights = problem("classify", "gaussian", True, rows=600)
    grid = {"points": [(nu, mu) for mu in (0.5, 1.0) for nu in (0.1, 1.0, 10.0)], "folds": 3, "seed": 2}
    here = tuning.tune("classify", "gaussian", K, target, mu_ref=1.0, weights=weights, **grid)
    tasks = tuning.tune(
        "classify", "gaussian", K, target, mu_ref=1.0, weights=weights, runner=dask_engine.fits_on(client), **grid
    )
    assert tasks == here


@pytest.mark.parametrize(
    ("bounds", "message"),
    [
        ([(0, 100), (90, 200)], "chunks overlap at row 90"),
        ([(0, 100), (110, 200)], r"rows 100:110 are in no chunk"),
        ([(10, 100)], r"rows 0:10 are in no chunk"),
    ],
)
def test_chunks_must_cover_the_rows_once(client: Client, bounds: list[tuple[int, int]], message: str) -> None:
    K = np.ones((200, 3))
    with pytest.raises(ValueError, match=message):
        DaskKernel(client, ((a, b, K[a:b]) for a, b in bounds))


def test_a_chunk_of_the_wrong_shape_is_named(client: Client) -> None:
    with pytest.raises(ValueError, match=r"rows 100:200 has shape \(100, 4\); expected a non-empty \(100, 3\)"):
        DaskKernel(client, iter([(0, 100, np.ones((100, 3))), (100, 200, np.ones((100, 4)))]))


def test_a_kernel_on_workers_is_checked_as_one_in_memory(client: Client) -> None:
    K, target, _ = problem("classify", "gaussian", False, rows=600)
    K[321, 2] = np.nan
    with DaskKernel(client, K, chunk_rows=CHUNK_ROWS) as held:
        assert not held.finite
        with pytest.raises(ValueError, match="non-finite"):
            lp.solve_lp("classify", held, target, 1.0)


def test_auto_solves_a_dask_kernel_by_ipm_and_the_other_formulations_refuse_it(client: Client) -> None:
    """Below IPM_FROM_ROWS too: HiGHS, auto's choice there for an array, would need K in this process."""
    K, target, _ = problem("classify", "gaussian", False, rows=600)
    assert K.shape[0] < lp.IPM_FROM_ROWS
    with DaskKernel(client, K) as held:
        assert lp.solve_lp("classify", held, target, 1.0).formulation == "ipm"
        for formulation in ("highs-dual", "cvxpy-dual", "cvxpy-primal"):
            with pytest.raises(ValueError, match=f"formulation '{formulation}' needs K in this process"):
                lp.solve_lp("classify", held, target, 1.0, formulation)


def test_a_solve_on_workers_that_does_not_converge_is_an_error(client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    """Not a fall back to HiGHS, which would need K in this process."""
    K, target, _ = problem("regress", "gaussian", False, rows=600)
    real = ipm.solve_dual
    monkeypatch.setattr(ipm, "solve_dual", lambda *args, **kwargs: real(*args, **{**kwargs, "max_iterations": 2}))
    with DaskKernel(client, K) as held, pytest.raises(SolverError, match="did not converge .* needs K in this process"):
        lp.solve_lp("regress", held, target, 1.0)


def test_missing_tls_files_are_named(tmp_path: Path) -> None:
    ca, certificate, _ = write_pki(tmp_path / "pki")
    with pytest.raises(ConfigError, match=r"TLS key .*missing\.key is not a file"):
        tls_security(ca, certificate, tmp_path / "missing.key")


def test_a_worker_lost_mid_solve_abandons_the_fit(client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker process killed after the solve's first pass: the solve and any later one say so, naming it."""
    K, target, _ = problem("classify", "gaussian", False)
    pids = client.run(os.getpid)
    victim = sorted(pids)[0]
    real = dask_engine._DaskRows.run
    killed: list[int] = []

    def run_then_kill(*args: object, **kwargs: object) -> object:
        share = real(*args, **kwargs)  # type: ignore[arg-type]
        if not killed:
            os.kill(pids[victim], signal.SIGKILL)
            killed.append(pids[victim])
        return share

    held = DaskKernel(client, K, chunk_rows=CHUNK_ROWS)
    monkeypatch.setattr(dask_engine._DaskRows, "run", run_then_kill)
    lost = rf"the Dask worker {re.escape(victim)} holding rows .* of K was lost .*: the fit was abandoned"
    with pytest.raises(SolverError, match=lost):
        lp.solve_lp("classify", held, target, 1.0)
    monkeypatch.undo()
    with pytest.raises(SolverError, match=lost):
        lp.solve_lp("classify", held, target, 1.0)
    held.close()
    client.wait_for_workers(2, timeout=60)  # the nanny restarts the killed worker for whatever runs next
