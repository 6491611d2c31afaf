"""Distributed training against the LP alone, ppsvm's LP solver against HiGHS, and the usual peers, by size.

For each mbar (--mbars, default 19 and 100) and each number of training rows m (--sizes): a
synthetic dataset with n = mbar + 1 features (the noisy nonlinear rule of benchmarks._shared.synthetic
over its first 8 features, 5% held out) is split 4 x 1 (four row blocks, one column block:
n_j = mbar + 1 > mbar, so privacy rule 3 holds), the four entities run as real processes over gRPC,
and a coordinator process times

- ``ppsvm.coordinator.train.train()`` end to end (metadata, records and ranges in one round, alignment,
  scaling, kernel, LP) with kernel="gaussian", basis="paper", nu=1, mu=1/n fixed (no tuning), the
  default LP formulation (ipm), distribute=False; then its own peak RSS (VmHWM, reset just before
  train(); the RSS the imports and channels left is a column of its own), against the bytes of K and
  the issue 12 bound 2 x K + 200 MiB,
- the metadata, alignment and scaling calls and the kernel fetch (Session.kernel) alone.

The coordinator runs in its own process so that its peak RSS is its own. Then, in this process, on
the same assembled K:

- ipm against highs-dual (HiGHS skipped above --highs-max rows): times, their ratio, the relative
  objective gap, ipm's iterations and its relative duality gap,
- the same training in one process from the pooled training rows (scale to [0, 1], K(A, B') with the
  entities' B, the LP), its K checked against the distributed one: the "in-process time" issue 12's
  1.2x target compares train() with,
- the trained model's error on the held-out rows,
- the peers a user would pick, on the pooled, [0, 1]-scaled training rows, each with fit time and
  test error: scikit-learn's SVC(kernel="rbf", gamma=mu) (skipped above --svc-max rows),
  Nystroem(gamma=mu, n_components=C) + LinearSVC for C = mbar and C = 100, and
  RBFSampler(gamma=mu, n_components=100) + LinearSVC, and PPSVM's own LP on mbar training rows as the basis
  (Nystroem's landmarks, which privacy rule 1 forbids as B: it separates the basis from the model),
- at the --tune-at sizes, ppsvm.core.tuning.tune() on the default grid (Gaussian, 5 folds),
  against one ipm fit.

With ``--engine dask`` the same K is also solved on a Dask cluster of ``--workers`` local worker processes
(ppsvm.core.dask_engine.local_cluster, one thread each, started once for the run): K sent to them as a
DaskKernel (the sending timed apart), then ``solve_lp`` on it (the same ipm, objective and certificate, K never
gathered here), its time against the numpy engine's on the same K, and each worker's peak RSS (VmHWM, read in
the worker through ``client.run``; reset before K is sent) against its RSS before and its share of K. The cluster
speaks mutual TLS from a CA made for the run, as ``coordinator train --engine dask``'s local cluster does from the
federation's (``--plain``: TCP).

``--lp-only`` measures the two engines alone, at sizes the whole benchmark would take hours over: K made in this
process (the same distribution: n = mbar + 1 synthetic features in [0, 1], a uniform random basis, width 1/n,
column-major), the numpy engine's ipm on it, then the Dask engine's on a new cluster for each of ``--workers N
[N ...]``. Beside each time: the load averages before and after, the CPU time every other process used meanwhile
(in cores: /proc/stat's busy time less this process's and the workers'), the CPU time a solve of this process and
of the workers, and the memory (this process's peak above its RSS with K, each worker's peak above its RSS before
K against its share of K). ``--chunk-mib`` sends K in chunks of that size (``coordinator train``'s are 8 MiB; by
default DaskKernel's, at most 64 MiB): every pass returns one partial a chunk, reduced in this process. Writes
results/train_scaling-dask.json, keeping the cases an earlier run measured that this one did not (one entry per
mbar, rows, --chunk-mib and engine).

Times are wall-clock medians of --repeats runs (one run when a run exceeds --single-above s;
tune() is always one run). Writes results/train_scaling.json and results/train_scaling.png (time
against rows, log-log). The cvxpy formulations are timed by benchmarks/lp_formulations.py, not here.

    python -m benchmarks.train_scaling [--quick] [--sizes 10000 40000 160000 640000] [--mbars 19 100]
    python -m benchmarks.train_scaling --sizes 2000000 --mbars 19    # HiGHS and SVC skipped there
    python -m benchmarks.train_scaling --sizes 1000000 --mbars 19 --engine dask --workers 2
    python -m benchmarks.train_scaling --lp-only --sizes 1000000 2000000 --mbars 19 --workers 1 2 4
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import itertools
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from benchmarks._shared import (
    AGREEMENT_RTOL,
    MBAR,
    NU,
    BasisLP,
    load_average,
    machine_info,
    median,
    peak_rss_mib,
    print_machine,
    proc_status,
    pseudonyms_of,
    relative_gap,
    reset_peak_rss,
    result_path,
    seconds_text,
    synthetic,
    table,
    time_solve,
    timed,
    write_json,
)
from ppsvm.api.inprocess import add_privacy_settings, fixed_secret
from ppsvm.config import SINGLE_BLOCK_CONSENT_KEY

if TYPE_CHECKING:
    from distributed import Client

    from ppsvm.core.lp import Formulation

ROOT = Path(__file__).resolve().parents[1]
NAME = "train_scaling"
ENTITY_ROWS, ENTITY_COLS = 4, 1
TEST_FRACTION = 0.05
# Issue 12's targets. Distributed train() end to end at most RATIO_TARGET x the same training in one process
# (scaling, K, LP), at LARGE_ROWS rows in at most LARGE_SECONDS.
RATIO_TARGET = 1.2
LARGE_ROWS, LARGE_SECONDS = 1_000_000, 15.0
# The LP at least SPEEDUP_TARGET x faster than HiGHS at these sizes, at the same objective.
SPEEDUP_TARGET, SPEEDUP_AT = 15.0, (40_000, 160_000)
# From this many rows on: faster than Nystroem + LinearSVC with mbar components, at equal or lower test error.
PEER_TARGET_FROM_ROWS = 40_000
# Distributed overheads are reported from this many rows on: below, fixed costs (TLS calls, process hops)
# dominate any ratio.
RATIO_TARGET_FROM_ROWS = 40_000
# docs/design.md section 4's setting (mbar = MBAR): 40,000 rows trained end to end in this time.
TARGET_ROWS, TARGET_SECONDS = 40_000, 3.0
# Tuning on the default grid may cost at most this many single ipm fits from TUNING_TARGET_FROM_ROWS on (issue 17:
# 200,000 rows); below, the tuning subset is most of the data and the ratio is the grid's size.
TUNING_RATIO_TARGET = 10.0
TUNING_TARGET_FROM_ROWS = 160_000
# Issue 12: the coordinator's peak RSS during train() at most twice the bytes of K plus this much.
MEMORY_BOUND_MIB = 200.0
# Issue 31: the Dask engine on this one machine at most this many times the numpy engine's LP time at LARGE_ROWS.
DASK_RATIO_TARGET = 1.5
# The peers' kernel approximations get this many components (and Nystroem also mbar).
PEER_COMPONENTS = 100
SOLVERS: tuple[Formulation, ...] = ("ipm", "highs-dual")
ENGINES = ("numpy", "dask")
QUICK_SIZES, DEFAULT_SIZES = [2_000, 10_000], [10_000, 40_000, 160_000]
QUICK_TUNE_AT, DEFAULT_TUNE_AT = [10_000], [40_000, 160_000]
MiB = 2**20


def n_features_for(mbar: int) -> int:
    """Features of the synthetic dataset for a basis of ``mbar`` points: the fewest with n_j > mbar (rule 3)."""
    return mbar + 1


def width_for(mbar: int, args: argparse.Namespace) -> float:
    """The Gaussian width: --mu, or 1/n (the width entities serve, so K needs no rescaling)."""
    return float(args.mu) if args.mu is not None else 1.0 / n_features_for(mbar)


# --- the coordinator process ---------------------------------------------------------------------


def run_coordinator(federation_path: Path, out: Path, mbar: int, mu: float, repeats: int, single_above: float) -> None:
    """Start the entities, time train() and the session calls, save K, the model and the timings to ``out``."""
    from ppsvm.config import federation_at_addresses, load_federation
    from ppsvm.coordinator.federation import Session
    from ppsvm.coordinator.train import TrainOptions, train
    from ppsvm.core.model import Model
    from ppsvm.core.multiclass import MulticlassModel
    from ppsvm.memory import limit_malloc_arenas
    from ppsvm.processes import EntityProcesses

    limit_malloc_arenas()  # as the ppsvm command does: this process stands for `ppsvm coordinator train`
    logging.basicConfig(level=logging.WARNING)
    planned = load_federation(federation_path)
    configs = [federation_path.parent / f"{e.id}.toml" for e in planned.entities]
    figures: dict[str, Any] = {}
    started = time.perf_counter()
    with EntityProcesses(configs) as running:
        figures["entity_start_s"] = time.perf_counter() - started
        live = federation_path.parent / "federation.live.toml"
        live.write_text(federation_at_addresses(planned, running.addresses), encoding="utf-8")
        federation = load_federation(live)

        options = TrainOptions(kernel="gaussian", basis="paper", mbar=mbar, nu=NU, mu=mu, distribute=False)
        models: list[Model | MulticlassModel] = []
        # The peak from here on is train()'s: what the imports and the entity start-up left is its own column.
        figures["coordinator_rss_before_train_mib"] = proc_status()["VmRSS"]
        reset_peak_rss()
        training = timed(lambda: models.append(train(federation, options)), repeats, single_above)
        # Before the session below, which holds more than one K at a time.
        figures["coordinator_peak_rss_mib"] = peak_rss_mib()

        with Session(federation) as session:
            # The first calls include channel set-up; the median of the repeats is the steady cost.
            setup: dict[str, list[float]] = {"metadata_s": [], "align_s": [], "scaling_s": [], "survey_s": []}
            for _ in range(repeats):
                t0 = time.perf_counter()
                session.load_metadata()
                t1 = time.perf_counter()
                blocks = session.align_records()
                t2 = time.perf_counter()
                scaling = session.column_scaling()
                t3 = time.perf_counter()
                blocks, scaling = session.survey()  # the three at once, as train() runs them
                t4 = time.perf_counter()
                for key, seconds in zip(setup, (t1 - t0, t2 - t1, t3 - t2, t4 - t3), strict=True):
                    setup[key].append(seconds)
            figures.update(setup)
            fetch = lambda: session.kernel("gaussian", mbar, mu, scaling, blocks, "train")  # noqa: E731
            fetching = timed(fetch, repeats, single_above)
            K = fetching.result
            K_test = session.kernel("gaussian", mbar, mu, scaling, blocks, "test")
        figures["kernel_fetch_s"] = fetching.wall
        figures["entity_peak_rss_mib"] = max(peak_rss_mib(process.pid) for process in running.processes)
    model = models[-1]
    assert isinstance(model, Model)  # the synthetic labels are +-1: a two-class model
    figures["train_s"] = training.wall
    figures["train_cpu_s"] = training.cpu
    figures["train_lp_s"] = [m.training["lp_seconds"] for m in models]
    figures["train_lp_solved_by"] = model.training["formulation"]
    figures["train_lp_iterations"] = model.training["lp_iterations"]
    figures["train_objective"] = model.training["objective"]
    figures["train_private"] = model.private
    np.savez(
        out.with_suffix(".npz"),
        K=K,
        y=np.concatenate([b.train_labels for b in blocks]),
        ids=np.concatenate([b.train_ids for b in blocks]),
        K_test=K_test,
        y_test=np.concatenate([b.test_labels for b in blocks]),
        ids_test=np.concatenate([b.test_ids for b in blocks]),
        u=np.asarray(model.u),
        gamma=model.gamma,
    )
    out.write_text(json.dumps(figures), encoding="utf-8")


# --- the benchmark driver ------------------------------------------------------------------------


def total_rows(m_train: int) -> int:
    """Rows to generate so that exactly ``m_train`` remain for training after the hold-out."""
    total = int(np.ceil(m_train / (1 - TEST_FRACTION)))
    while total - round(TEST_FRACTION * total) > m_train:
        total -= 1
    while total - round(TEST_FRACTION * total) < m_train:
        total += 1
    return total


def split(m_train: int, n_features: int, seed: int, out_dir: Path) -> tuple[Path, np.ndarray, np.ndarray]:
    """Write the 4 x 1 split of a synthetic dataset; the federation file and the whole dataset (X, y)."""
    from ppsvm.data.dataset import Dataset
    from ppsvm.data.partition import SplitOptions, split_dataset

    X, y = synthetic(total_rows(m_train), seed, n_features)
    dataset = Dataset(
        ids=np.array([str(k) for k in range(len(y))]),
        X=X,
        y=y,
        feature_names=tuple(f"x{k}" for k in range(n_features)),
        source=f"synthetic(seed={seed}, n_features={n_features})",
    )
    result = split_dataset(
        dataset,
        SplitOptions(
            rows=ENTITY_ROWS, cols=ENTITY_COLS, out_dir=out_dir, test_fraction=TEST_FRACTION, seed=seed, overwrite=True
        ),
    )
    assert result.n_train == m_train, (result.n_train, m_train)
    # A horizontal split: each entity releases its block on its own, which its operator must consent to (privacy
    # rule 8). The speed is measured here, not the privacy.
    add_privacy_settings(result.entity_config_paths, {SINGLE_BLOCK_CONSENT_KEY: True})
    # A fixed secret, so B and with it the test error are the same on every rerun (production secrets are random).
    (out_dir / "column-block-0.secret").write_text(fixed_secret("train_scaling", m_train, seed), encoding="utf-8")
    return result.federation_path, X, y


def solvers(K: np.ndarray, y: np.ndarray, m: int, args: argparse.Namespace) -> dict[str, Any]:
    """ipm and highs-dual on the same K (HiGHS not run above --highs-max rows)."""
    entries: dict[str, Any] = {}
    for formulation in SOLVERS:
        if formulation == "highs-dual" and m > args.highs_max:
            entries[formulation] = {"skipped": f"above --highs-max {args.highs_max} rows"}
            print(f"  in-process {formulation:<10} skipped (above --highs-max {args.highs_max} rows)", flush=True)
            continue
        entry, solution = time_solve(K, y, formulation, args.repeats, args.single_above)
        entries[formulation] = entry
        certificate = "" if solution.certificate is None else f", duality gap {solution.certificate.gap:.1e}"
        print(
            f"  in-process {formulation:<10} {seconds_text(entry['seconds']):>14}  objective {solution.objective:.10g}"
            f"  ({solution.formulation}, {solution.iterations} iterations{certificate})",
            flush=True,
        )
    return entries


def tuning(
    K: np.ndarray, y: np.ndarray, mbar: int, mu: float, ipm: dict[str, Any], args: argparse.Namespace
) -> dict[str, Any]:
    """Time ppsvm.core.tuning.tune() on K (at width mu) with the default Gaussian grid, as train() runs it,
    against one ipm fit (``ipm``: its in-process entry). One run: it is dozens of fits already."""
    from ppsvm.constants import DEFAULT_FOLDS
    from ppsvm.core.tuning import grid_points, search_grid, tune

    nu_values, mu_values = search_grid("classify", "gaussian", n_features_for(mbar), None, None)
    points = grid_points(nu_values, mu_values)
    grid = {"mu_ref": mu, "points": points, "folds": DEFAULT_FOLDS, "seed": args.seed}
    timing = timed(lambda: tune("classify", "gaussian", K, y, **grid), 1, float("inf"))
    result = timing.result
    entry = {
        "seconds": timing.wall,
        "median_s": timing.wall[0],
        "cpu_seconds": timing.cpu,
        "folds": DEFAULT_FOLDS,
        "grid_points": len(nu_values) * len(mu_values),
        "rows": result.rows,
        "promoted": result.promoted,
        "nu": result.nu,
        "mu": result.mu,
        "score": result.score,
        "ratio_to_ipm": timing.wall[0] / ipm["median_s"],
        "cpu_ratio_to_ipm": timing.cpu[0] / ipm["median_cpu_s"],
    }
    print(
        f"  tune() {seconds_text(timing.wall):>22}  {entry['grid_points']} grid points, {DEFAULT_FOLDS} folds on "
        f"{result.rows:,} rows ({result.promoted} on every fold): nu = {result.nu:g}, mu = {result.mu:g}, "
        f"cross-validated error {result.score:.4f}; {entry['ratio_to_ipm']:.1f}x one ipm fit "
        f"({entry['cpu_ratio_to_ipm']:.1f}x in CPU time)",
        flush=True,
    )
    return entry


def dask_engine(
    client: Client, K: np.ndarray, y: np.ndarray, ipm: dict[str, Any], workers: int, args: argparse.Namespace
) -> dict[str, Any]:
    """ipm on the same K as a DaskKernel on the cluster's workers, against the numpy engine's entry ``ipm``; each
    worker's peak RSS (VmHWM since the reset just before K is sent) against its RSS before and its share of K, this
    process's (the coordinator's) peak above its RSS before K is sent, the CPU time of this process and of the
    workers a solve, and the load while the solves ran."""
    from ppsvm.core.dask_engine import DaskKernel

    client.run(reset_peak_rss)
    before = client.run(proc_status)
    reset_peak_rss()
    driver_before = proc_status()["VmRSS"]
    chunk_rows = None if args.chunk_mib is None else max(1, int(args.chunk_mib * MiB) // (8 * K.shape[1]))
    sending = timed(lambda: DaskKernel(client, K, chunk_rows=chunk_rows), 1, float("inf"))
    held: DaskKernel = sending.result
    chunks = held.chunk_count  # each pass returns one partial a chunk, reduced here
    try:
        with watched(client) as load:
            solved, solution = time_solve(held, y, "ipm", args.repeats, args.single_above)
        peaks = client.run(peak_rss_mib)
        shares = {address: rows * K.shape[1] * 8 / MiB for address, rows in held.held_rows.items()}
        held_rows = held.held_rows
    finally:
        held.close()
    runs = len(solved["seconds"])
    entry = {
        "workers": workers,
        "tls": not args.plain,
        "send_s": sending.wall[0],
        "chunk_mib": args.chunk_mib,
        "chunks": chunks,
        **solved,
        "objective_gap_to_numpy": relative_gap(solution.objective, ipm["objective"]),
        "ratio_to_numpy": solved["median_s"] / ipm["median_s"],
        "numpy_median_s": ipm["median_s"],
        "ns_per_row_iteration": solved["median_s"] / (K.shape[0] * solved["iterations"]) * 1e9,
        "driver_cpu_s_per_solve": load["own_cpu_s"] / runs,
        "workers_cpu_s_per_solve": load["workers_cpu_s"] / runs,
        **{key: load[key] for key in ("load_before", "load_after", "other_cpu_cores")},
        "driver_rss_before_mib": driver_before,
        "driver_peak_rss_mib": peak_rss_mib(),
        "worker_rows": held_rows,
        "worker_rss_before_mib": {address: status["VmRSS"] for address, status in before.items()},
        "worker_peak_rss_mib": peaks,
        "worker_share_of_k_mib": shares,
    }
    memory = "; ".join(
        f"{address}: peak {peaks[address]:.0f} MiB, {entry['worker_rss_before_mib'][address]:.0f} before K, "
        f"share of K {share:.0f} MiB"
        for address, share in shares.items()
    )
    print(
        f"  dask engine, {workers} worker{'s' if workers > 1 else ''} {seconds_text(solved['seconds']):>10}  "
        f"objective {solution.objective:.10g} ({solution.iterations} iterations, relative gap to numpy "
        f"{entry['objective_gap_to_numpy']:.1e}); {entry['ratio_to_numpy']:.2f}x the numpy engine's ipm; K sent in "
        f"{sending.wall[0]:.2f} s as {chunks} chunks; CPU a solve: workers {entry['workers_cpu_s_per_solve']:.2f} s, "
        f"this process {entry['driver_cpu_s_per_solve']:.2f} s; load {load['load_before'][0]:.1f} -> "
        f"{load['load_after'][0]:.1f}, other processes {load['other_cpu_cores']:.2f} cores; this process's peak "
        f"{entry['driver_peak_rss_mib']:.0f} MiB ({driver_before:.0f} before K was sent); {memory}",
        flush=True,
    )
    return entry


def busy_cpu_seconds() -> float:
    """CPU seconds every process on the machine has used since boot (/proc/stat: all but idle and iowait)."""
    user, nice, system, _idle, _iowait, irq, softirq, steal = (
        int(value) for value in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]
    )
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def watched(client: Client | None = None) -> Iterator[dict[str, Any]]:
    """The load while the block runs: the load averages before and after it, the CPU seconds this process and the
    ``client``'s workers used, and what every other process used, in cores (the machine's busy time less ours)."""
    workers_cpu = lambda: sum(client.run(time.process_time).values()) if client is not None else 0.0  # noqa: E731
    figures: dict[str, Any] = {"load_before": load_average()}
    busy, workers, own, wall = busy_cpu_seconds(), workers_cpu(), time.process_time(), time.perf_counter()
    yield figures
    wall = time.perf_counter() - wall
    own = time.process_time() - own
    workers = workers_cpu() - workers
    figures.update(
        load_after=load_average(),
        own_cpu_s=own,
        workers_cpu_s=workers,
        other_cpu_cores=max(0.0, busy_cpu_seconds() - busy - own - workers) / wall,
    )


def warm_up(client: Client, seed: int) -> None:
    """One small solve on every worker first: what a worker's first solve loads (numba and its compiled row work)
    is then neither in the timings nor in the RSS before K."""
    from ppsvm.core.dask_engine import DaskKernel
    from ppsvm.core.kernels import gaussian_kernel
    from ppsvm.core.lp import IPM_FROM_ROWS, solve_lp

    X, y = synthetic(IPM_FROM_ROWS, seed)
    K = gaussian_kernel(X, np.random.default_rng(seed + 1).random((MBAR, X.shape[1])), 1.0 / X.shape[1])
    with DaskKernel(client, K, chunk_rows=IPM_FROM_ROWS // len(client.scheduler_info()["workers"]) + 1) as held:
        solve_lp("classify", held, y, NU)


def peer_estimators(mbar: int, mu: float, seed: int) -> dict[str, tuple[str, Any]]:
    """Each peer's key, its name in the tables and its unfitted scikit-learn estimator (refitted on every repeat)."""
    from sklearn.kernel_approximation import Nystroem, RBFSampler
    from sklearn.pipeline import make_pipeline
    from sklearn.svm import SVC, LinearSVC

    linear = lambda: LinearSVC(dual="auto", random_state=seed)  # noqa: E731 - default C
    estimators = {"svc": ("SVC(rbf, gamma=mu, C=1)", SVC(kernel="rbf", gamma=mu, C=1.0))}
    for c in sorted({mbar, PEER_COMPONENTS}):
        nystroem = Nystroem(gamma=mu, n_components=c, random_state=seed)
        estimators[f"nystroem-{c}"] = (f"Nystroem({c}) + LinearSVC", make_pipeline(nystroem, linear()))
    sampler = RBFSampler(gamma=mu, n_components=PEER_COMPONENTS, random_state=seed)
    estimators[f"rbf-sampler-{PEER_COMPONENTS}"] = (
        f"RBFSampler({PEER_COMPONENTS}) + LinearSVC",
        make_pipeline(sampler, linear()),
    )
    landmark = BasisLP(mu, mbar=mbar, seed=seed)
    estimators[f"landmark-lp-{mbar}"] = (f"PPSVM's LP on {mbar} training rows (not private)", landmark)
    return estimators


def peers(
    X: np.ndarray,
    y: np.ndarray,
    rows: np.ndarray,
    test_rows: np.ndarray,
    mbar: int,
    mu: float,
    args: argparse.Namespace,
) -> dict[str, Any]:
    """Fit time and test error of each peer on the pooled training rows, scaled to [0, 1] as the coordinator does."""
    from ppsvm.core.kernels import scale_to_unit

    low, high = X[rows].min(axis=0), X[rows].max(axis=0)
    A, A_test = scale_to_unit(X[rows], low, high), scale_to_unit(X[test_rows], low, high)
    results: dict[str, Any] = {}
    for key, (method, estimator) in peer_estimators(mbar, mu, args.seed).items():
        if key == "svc" and len(rows) > args.svc_max:
            results[key] = {"method": method, "skipped": f"above --svc-max {args.svc_max} rows"}
            print(f"  {method:<28} skipped (above --svc-max {args.svc_max} rows)", flush=True)
            continue
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            timing = timed(functools.partial(estimator.fit, A, y[rows]), args.repeats, args.single_above)
        error = float(np.mean(timing.result.predict(A_test) != y[test_rows]))
        results[key] = {
            "method": method,
            "seconds": timing.wall,
            "median_s": median(timing.wall),
            "cpu_seconds": timing.cpu,
            "test_error": error,
            # e.g. LinearSVC's ConvergenceWarning: recorded, not hidden.
            "warnings": sorted({f"{w.category.__name__}: {w.message}" for w in caught}),
        }
        print(
            f"  {method:<28} {seconds_text(timing.wall):>14}  test error {error:.4f}"
            + "".join(f"\n    warning: {text}" for text in results[key]["warnings"]),
            flush=True,
        )
    return results


def measure(m: int, mbar: int, args: argparse.Namespace, work: Path, client: Client | None) -> dict[str, Any]:
    """Every figure of one (mbar, m) case: the coordinator process's, then this process's on the same K (and the
    Dask cluster's, with a ``client``)."""
    mu = width_for(mbar, args)
    start = time.perf_counter()
    federation_path, X, y_all = split(m, n_features_for(mbar), args.seed, work / f"mbar{mbar}-m{m}")
    split_s = time.perf_counter() - start
    out = federation_path.parent / "coordinator.json"
    coordinator = ["--coordinator", str(federation_path), str(out), "--mbars", str(mbar), "--mu", repr(mu)]
    repeats = ["--repeats", str(args.repeats), "--single-above", repr(args.single_above)]
    subprocess.run([sys.executable, "-m", "benchmarks.train_scaling", *coordinator, *repeats], check=True, cwd=ROOT)
    figures = json.loads(out.read_text(encoding="utf-8"))
    figures["split_s"] = split_s
    with np.load(out.with_suffix(".npz")) as saved:
        K, y, ids, K_test, y_test, ids_test = (saved[k] for k in ("K", "y", "ids", "K_test", "y_test", "ids_test"))
        u, gamma = saved["u"], float(saved["gamma"])
    figures["ppsvm_test_error"] = float(np.mean(np.where(K_test @ u - gamma >= 0, 1.0, -1.0) != y_test))
    figures["k_bytes"] = K.nbytes
    figures["rss_to_k"] = figures["coordinator_peak_rss_mib"] * MiB / K.nbytes
    figures["memory_bound_mib"] = 2 * K.nbytes / MiB + MEMORY_BOUND_MIB
    print(
        f"mbar = {mbar}, m = {m:,}: split {split_s:.1f} s, entities started in {figures['entity_start_s']:.1f} s; "
        f"fetch {', '.join(f'{s:.2f}' for s in figures['kernel_fetch_s'])} s; "
        f"train() {', '.join(f'{s:.2f}' for s in figures['train_s'])} s "
        f"(LP inside {', '.join(f'{s:.2f}' for s in figures['train_lp_s'])} s, {figures['train_lp_solved_by']}); "
        f"PPSVM test error {figures['ppsvm_test_error']:.4f}",
        flush=True,
    )

    figures["in_process"] = lp = solvers(K, y, m, args)
    ipm, highs = lp["ipm"], lp["highs-dual"]
    ran = "skipped" not in highs
    figures["highs_to_ipm"] = highs["median_s"] / ipm["median_s"] if ran else None
    figures["ipm_gap_to_highs"] = relative_gap(ipm["objective"], highs["objective"]) if ran else None
    figures["train_gap_to_ipm"] = relative_gap(figures["train_objective"], ipm["objective"])
    figures["ratio_distributed_to_lp"] = median(figures["train_s"]) / ipm["median_s"]
    # Everything train() does besides its LP, run by run: insensitive to how long the LP took under load.
    figures["overhead_s"] = [t - lp_s for t, lp_s in zip(figures["train_s"], figures["train_lp_s"], strict=True)]
    figures["ratio_overhead_based"] = (ipm["median_s"] + median(figures["overhead_s"])) / ipm["median_s"]
    figures["ratio_cpu"] = median(figures["train_cpu_s"]) / ipm["median_cpu_s"]
    figures["dask"] = None if client is None else dask_engine(client, K, y, ipm, args.workers[0], args)

    # The entities published pseudonyms: back to rows of X with the split's record-id key.
    row_of = {
        record: k for k, record in enumerate(pseudonyms_of(federation_path.parent, list(map(str, range(len(X))))))
    }
    rows, test_rows = (np.array([row_of[record] for record in part]) for part in (ids, ids_test))
    figures["in_process_training"] = in_process_training(X[rows], y, K, federation_path.parent, mbar, mu, args)
    figures["ratio_distributed_to_in_process"] = median(figures["train_s"]) / figures["in_process_training"]["median_s"]
    figures["peers"] = peers(X, y_all, rows, test_rows, mbar, mu, args)
    figures["tuning"] = tuning(K, y, mbar, mu, ipm, args) if m in args.tune_at else None
    return figures


def in_process_training(
    X: np.ndarray, y: np.ndarray, K: np.ndarray, split_dir: Path, mbar: int, mu: float, args: argparse.Namespace
) -> dict[str, Any]:
    """The same training in one process, as a user with all the data would run it: scale the pooled training
    rows ``X`` (in K's row order) to [0, 1], K(A, B') with the entities' B, the default LP. The kernel is checked
    against the distributed one: the same B and the same scaling give the same K (to 1e-12 relative to its
    entries before the width's power)."""
    from ppsvm.config import load_entity_config
    from ppsvm.core.kernels import gaussian_kernel, scale_to_unit
    from ppsvm.core.lp import solve_lp
    from ppsvm.core.randomness import derive_B

    B = derive_B(load_entity_config(split_dir / "r0c0.toml").read_secret(), mbar, X.shape[1])

    def run() -> tuple[float, np.ndarray]:
        scaled = scale_to_unit(X, X.min(axis=0), X.max(axis=0))
        built = np.asfortranarray(gaussian_kernel(scaled, B, mu))
        del scaled
        return solve_lp("classify", built, y, NU).objective, built

    timing = timed(run, args.repeats, args.single_above)
    objective, built = timing.result
    timing.result = None
    difference = float(np.max(np.abs(built - K)))  # after the clock: the check is not part of the training
    del built
    entry = {
        "seconds": timing.wall,
        "median_s": median(timing.wall),
        "cpu_seconds": timing.cpu,
        "objective": objective,
        "kernel_max_abs_difference": difference,
    }
    print(
        f"  in-process training (scale, K, LP) {seconds_text(timing.wall):>10}  objective {objective:.10g}, "
        f"K equals the distributed one to {difference:.1e}",
        flush=True,
    )
    return entry


# --- output --------------------------------------------------------------------------------------


def timed_cell(entry: dict[str, Any] | None) -> str:
    """A timed entry's median, "skipped" when it was not run, "-" when there is none at this size."""
    if entry is None:
        return "-"
    return "skipped" if "skipped" in entry else seconds_text(entry["seconds"])


def ratio_cell(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}x"


def gap_cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.1e}"


def ipm_cell(entry: dict[str, Any]) -> str:
    """ipm's iterations, or that it fell back to HiGHS."""
    return str(entry["iterations"]) if entry["solved_by"] == "ipm" else f"fell back to {entry['solved_by']}"


def lp_cell(seconds: list[float], solved_by: str) -> str:
    """LP seconds, marked when ipm fell back to HiGHS."""
    return seconds_text(seconds) + ("" if solved_by == "ipm" else f", fell back to {solved_by}")


def peer_cell(entry: dict[str, Any]) -> str:
    if "skipped" in entry:
        return "skipped"
    return f"{entry['test_error']:.3f} in {seconds_text(entry['seconds'])}"


def case_table(mbar: int, sizes: list[int], by_size: dict[str, dict[str, Any]]) -> str:
    """The figures of one mbar, one column per size."""
    r = [by_size[str(m)] for m in sizes]
    ipm = [x["in_process"]["ipm"] for x in r]
    section = lambda title: [title, *("" for _ in r)]  # noqa: E731
    rows = [
        section("new solver vs HiGHS, in-process on the same K"),
        ["  ipm (default)", *(timed_cell(e) for e in ipm)],
        ["  highs-dual", *(timed_cell(x["in_process"]["highs-dual"]) for x in r)],
        ["  highs-dual / ipm (time)", *(ratio_cell(x["highs_to_ipm"], 1) for x in r)],
        ["  relative objective gap, ipm vs highs-dual", *(gap_cell(x["ipm_gap_to_highs"]) for x in r)],
        ["  ipm iterations", *(ipm_cell(e) for e in ipm)],
        ["  ipm relative duality gap (certificate)", *(gap_cell((e["certificate"] or {}).get("gap")) for e in ipm)],
        *(dask_rows(r) if r[0].get("dask") else []),
        section("distributed train() vs in-process"),
        ["  metadata (Session.load_metadata)", *(seconds_text(x["metadata_s"]) for x in r)],
        ["  record alignment (Session.align_records)", *(seconds_text(x["align_s"]) for x in r)],
        ["  scaling (Session.column_scaling)", *(seconds_text(x["scaling_s"]) for x in r)],
        ["  the three in one round (Session.survey, as train() does)", *(seconds_text(x["survey_s"]) for x in r)],
        ["  kernel fetch (Session.kernel)", *(seconds_text(x["kernel_fetch_s"]) for x in r)],
        ["  LP inside train()", *(lp_cell(x["train_lp_s"], x["train_lp_solved_by"]) for x in r)],
        ["  overhead: train() minus its own LP", *(seconds_text(x["overhead_s"]) for x in r)],
        ["  train() end to end, distributed", *(seconds_text(x["train_s"]) for x in r)],
        ["  the same training in one process (scale, K, LP)", *(timed_cell(x["in_process_training"]) for x in r)],
        ["  distributed / in-process training", *(ratio_cell(x["ratio_distributed_to_in_process"]) for x in r)],
        ["  distributed / in-process LP alone", *(ratio_cell(x["ratio_distributed_to_lp"]) for x in r)],
        ["  (in-process LP + overhead) / in-process LP", *(ratio_cell(x["ratio_overhead_based"]) for x in r)],
        ["  CPU: coordinator train() / in-process LP", *(ratio_cell(x["ratio_cpu"]) for x in r)],
        ["  kernel fetch share of train()", *(f"{median(x['kernel_fetch_s']) / median(x['train_s']):.0%}" for x in r)],
        section("memory"),
        ["  K = m x mbar x 8 bytes", *(f"{x['k_bytes'] / MiB:.1f} MiB" for x in r)],
        [
            "  coordinator RSS before train() (imports, channels)",
            *(rss_cell(x, "coordinator_rss_before_train_mib") for x in r),
        ],
        ["  coordinator peak RSS during train()", *(f"{x['coordinator_peak_rss_mib']:.0f} MiB" for x in r)],
        ["  bound: 2 x K + 200 MiB", *(f"{x['memory_bound_mib']:.0f} MiB" for x in r)],
        ["  coordinator peak RSS / bytes of K", *(f"{x['rss_to_k']:.1f}x" for x in r)],
        ["  largest entity peak RSS", *(f"{x['entity_peak_rss_mib']:.0f} MiB" for x in r)],
        section("test error on the held-out 5%, fit time (peers: pooled [0, 1]-scaled rows)"),
        ["  PPSVM, distributed train()", *(f"{x['ppsvm_test_error']:.3f} in {seconds_text(x['train_s'])}" for x in r)],
        *([f"  {entry['method']}", *(peer_cell(x["peers"][key]) for x in r)] for key, entry in r[0]["peers"].items()),
        section("tuning: tune(), default grid, 5 folds, in-process on K"),
        ["  tune()", *(timed_cell(x["tuning"]) for x in r)],
        ["  rows cross-validated", *("-" if x["tuning"] is None else f"{x['tuning']['rows']:,}" for x in r)],
        ["  tune() / one ipm fit", *(ratio_cell(x["tuning"] and x["tuning"]["ratio_to_ipm"], 1) for x in r)],
        ["  CPU: tune() / one ipm fit", *(ratio_cell(x["tuning"] and x["tuning"]["cpu_ratio_to_ipm"], 1) for x in r)],
    ]
    headers = [f"mbar = {mbar}, n = {n_features_for(mbar)} features", *(f"m = {m:,}" for m in sizes)]
    return table(headers, rows)


def dask_rows(r: list[dict[str, Any]]) -> list[list[str]]:
    """The table's rows for the Dask engine (each worker's memory figures in its address's order)."""
    per_worker = lambda x, key: ", ".join(f"{x['dask'][key][a]:.0f}" for a in sorted(x["dask"][key]))  # noqa: E731
    return [
        [f"ipm on {r[0]['dask']['workers']} Dask worker processes (dask engine), on the same K", *("" for _ in r)],
        ["  sending K to the workers (DaskKernel)", *(f"{x['dask']['send_s']:.2f} s" for x in r)],
        ["  ipm, dask engine", *(timed_cell(x["dask"]) for x in r)],
        ["  dask / numpy engine (ipm time)", *(ratio_cell(x["dask"]["ratio_to_numpy"]) for x in r)],
        ["  relative objective gap, dask vs numpy", *(gap_cell(x["dask"]["objective_gap_to_numpy"]) for x in r)],
        ["  each worker's share of K, MiB", *(per_worker(x, "worker_share_of_k_mib") for x in r)],
        ["  each worker's RSS before K, MiB", *(per_worker(x, "worker_rss_before_mib") for x in r)],
        ["  each worker's peak RSS, MiB", *(per_worker(x, "worker_peak_rss_mib") for x in r)],
    ]


def rss_cell(figures: dict[str, Any], key: str) -> str:
    """A figure in MiB, or "-" for results written before it was measured."""
    return f"{figures[key]:.0f} MiB" if key in figures else "-"


def targets(mbars: list[int], sizes: list[int], results: dict[str, dict[str, dict[str, Any]]]) -> dict[str, str]:
    """PASS/FAIL of each target over every case measured, with the figures behind it."""
    cases = [(mbar, m, results[str(mbar)][str(m)]) for mbar in mbars for m in sizes]
    large = [(b, m, x) for b, m, x in cases if m >= RATIO_TARGET_FROM_ROWS]
    listing = lambda value: ", ".join(f"mbar {b} m {m:,}: {value(x)}" for b, m, x in large)  # noqa: E731
    verdict = lambda ok: "PASS" if ok else "FAIL"  # noqa: E731
    compared = [x for _, _, x in cases if x["ipm_gap_to_highs"] is not None]
    sped = [(b, m, x) for b, m, x in cases if m in SPEEDUP_AT and x["highs_to_ipm"] is not None]
    at_large = [(b, m, x) for b, m, x in cases if m == LARGE_ROWS and b == MBAR]
    peered = [(b, m, x) for b, m, x in cases if m >= PEER_TARGET_FROM_ROWS and f"nystroem-{b}" in x["peers"]]
    verdicts = {
        f"the LP >= {SPEEDUP_TARGET:g}x faster than HiGHS at {' and '.join(f'{m:,}' for m in SPEEDUP_AT)} rows": (
            "{} ({})".format(
                verdict(all(x["highs_to_ipm"] >= SPEEDUP_TARGET for _, _, x in sped)),
                ", ".join(f"mbar {b} m {m:,}: {x['highs_to_ipm']:.1f}x" for b, m, x in sped),
            )
            if sped
            else "not measured"
        ),
        f"{LARGE_ROWS:,} rows, mbar {MBAR}: train() <= {LARGE_SECONDS:g} s and <= {RATIO_TARGET}x in-process": (
            "{} ({})".format(
                verdict(
                    all(
                        median(x["train_s"]) <= LARGE_SECONDS and x["ratio_distributed_to_in_process"] <= RATIO_TARGET
                        for _, _, x in at_large
                    )
                ),
                ", ".join(
                    f"{median(x['train_s']):.2f} s, {x['ratio_distributed_to_in_process']:.2f}x" for _, _, x in at_large
                ),
            )
            if at_large
            else f"not measured (needs {LARGE_ROWS} in --sizes and {MBAR} in --mbars)"
        ),
        f"  distributed / in-process training from {RATIO_TARGET_FROM_ROWS:,} rows (report)": (
            listing(lambda x: f"{x['ratio_distributed_to_in_process']:.2f}x") if large else "not measured"
        ),
        f"  distributed / in-process LP alone from {RATIO_TARGET_FROM_ROWS:,} rows (report)": (
            listing(lambda x: f"{x['ratio_distributed_to_lp']:.2f}x") if large else "not measured"
        ),
        # One B against one set of landmarks: the draws decide the errors (benchmarks/basis_draws.py averages them).
        f"faster than Nystroem(mbar) + LinearSVC at equal or lower test error from {PEER_TARGET_FROM_ROWS:,} rows "
        "(one draw of each basis)": (
            "{} ({})".format(
                verdict(all(_beats_nystroem(b, x) for b, _, x in peered)),
                ", ".join(
                    f"mbar {b} m {m:,}: {median(x['train_s']):.2f} s / error {x['ppsvm_test_error']:.3f} against "
                    f"{x['peers'][f'nystroem-{b}']['median_s']:.2f} s / {x['peers'][f'nystroem-{b}']['test_error']:.3f}"
                    for b, m, x in peered
                ),
            )
            if peered
            else "not measured"
        ),
        f"ipm objective agrees with highs-dual to {AGREEMENT_RTOL:g} (where HiGHS ran), train()'s with ipm's": (
            "{} (worst ipm vs HiGHS {}, worst train() vs ipm {:.1e})".format(
                verdict(
                    all(x["ipm_gap_to_highs"] <= AGREEMENT_RTOL for x in compared)
                    and all(x["train_gap_to_ipm"] <= AGREEMENT_RTOL for _, _, x in cases)
                ),
                gap_cell(max((x["ipm_gap_to_highs"] for x in compared), default=None)),
                max(x["train_gap_to_ipm"] for _, _, x in cases),
            )
        ),
    }
    on_dask = [(b, m, x) for b, m, x in cases if x.get("dask")]
    if on_dask:
        at_large = [(b, m, x) for b, m, x in on_dask if m == LARGE_ROWS]
        verdicts[f"dask engine <= {DASK_RATIO_TARGET:g}x the numpy engine's ipm at {LARGE_ROWS:,} rows (issue 31)"] = (
            "{} ({})".format(
                verdict(all(x["dask"]["ratio_to_numpy"] <= DASK_RATIO_TARGET for _, _, x in at_large)),
                ", ".join(f"mbar {b}: {x['dask']['ratio_to_numpy']:.2f}x" for b, _, x in at_large),
            )
            if at_large
            else f"not measured (needs {LARGE_ROWS} in --sizes)"
        )
        verdicts["dask engine: each worker's peak RSS above its RSS before K / its share of K (report)"] = ", ".join(
            f"mbar {b} m {m:,}: "
            + ", ".join(
                f"{(x['dask']['worker_peak_rss_mib'][a] - x['dask']['worker_rss_before_mib'][a]) / share:.2f}"
                for a, share in sorted(x["dask"]["worker_share_of_k_mib"].items())
            )
            for b, m, x in on_dask
        )
    key = f"{TARGET_ROWS:,} rows, mbar = {MBAR}, trained in <= {TARGET_SECONDS:g} s"
    x = results.get(str(MBAR), {}).get(str(TARGET_ROWS))
    if x is None:
        verdicts[key] = f"not measured (needs {TARGET_ROWS} in --sizes and {MBAR} in --mbars)"
    else:
        t = median(x["train_s"])
        verdicts[key] = (
            f"{verdict(t <= TARGET_SECONDS)} ({t:.2f} s wall-clock; coordinator CPU {median(x['train_cpu_s']):.2f} s, "
            f"in-process ipm CPU {x['in_process']['ipm']['median_cpu_s']:.2f} s)"
        )
    verdicts[f"coordinator peak RSS during train() <= 2 x K + {MEMORY_BOUND_MIB:g} MiB"] = "{} ({})".format(
        verdict(all(x["coordinator_peak_rss_mib"] <= x["memory_bound_mib"] for _, _, x in cases)),
        ", ".join(
            f"mbar {b} m {m:,}: {x['coordinator_peak_rss_mib']:.0f} of {x['memory_bound_mib']:.0f} MiB"
            for b, m, x in cases
        ),
    )
    tuned = [(b, m, x) for b, m, x in cases if x["tuning"] is not None]
    verdicts[f"tune() <= {TUNING_RATIO_TARGET:g} ipm fits from {TUNING_TARGET_FROM_ROWS:,} rows"] = (
        "{} ({})".format(
            verdict(
                all(
                    x["tuning"]["ratio_to_ipm"] <= TUNING_RATIO_TARGET
                    for _, m, x in tuned
                    if m >= TUNING_TARGET_FROM_ROWS
                )
            ),
            ", ".join(
                f"mbar {b} m {m:,}: {x['tuning']['ratio_to_ipm']:.1f}x, CPU {x['tuning']['cpu_ratio_to_ipm']:.1f}x"
                for b, m, x in tuned
            ),
        )
        if tuned
        else "not measured (no --tune-at size in --sizes)"
    )
    return verdicts


def _beats_nystroem(mbar: int, x: dict[str, Any]) -> bool:
    """Distributed PPSVM faster than Nystroem(mbar) + LinearSVC on the pooled data, at equal or lower test error."""
    peer = x["peers"][f"nystroem-{mbar}"]
    return bool(median(x["train_s"]) < peer["median_s"] and x["ppsvm_test_error"] <= peer["test_error"])


def timings(x: dict[str, Any]) -> dict[str, float | None]:
    """Median seconds of each timed method in one case, None where it was not run."""
    median_of = lambda entry: None if entry is None else entry.get("median_s")  # noqa: E731
    return {
        "ipm, in-process": x["in_process"]["ipm"]["median_s"],
        "ipm, dask engine": median_of(x.get("dask")),
        "highs-dual, in-process": median_of(x["in_process"]["highs-dual"]),
        "train(), distributed": median(x["train_s"]),
        "training in one process (scale, K, LP)": median_of(x.get("in_process_training")),
        "tune(), in-process": median_of(x["tuning"]),
        **{entry["method"]: median_of(entry) for entry in x["peers"].values()},
    }


def plot(mbars: list[int], sizes: list[int], results: dict[str, dict[str, dict[str, Any]]], path: Path) -> None:
    """Time against training rows, log-log: one colour per method, one line style and marker per mbar."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(13, 6.5))
    colours: dict[str, Any] = {}
    palette = itertools.cycle(plt.get_cmap("tab10").colors)  # type: ignore[attr-defined]
    styles = itertools.cycle((("-", "o"), ("--", "s"), (":", "^"), ("-.", "D")))
    for mbar, (line, marker) in zip(mbars, styles, strict=False):
        series: dict[str, list[tuple[int, float]]] = {}
        for m in sizes:
            for method, seconds in timings(results[str(mbar)][str(m)]).items():
                if seconds is not None:
                    series.setdefault(method, []).append((m, seconds))
        for method, points in series.items():
            colour = colours.setdefault(method, next(palette))
            m_values, medians = zip(*points, strict=True)
            axes.plot(m_values, medians, line, marker=marker, color=colour, label=f"{method}, mbar = {mbar}")
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("training rows m")
    axes.set_ylabel("seconds (median; wall-clock)")
    axes.set_title(f"train_scaling: {ENTITY_ROWS} x {ENTITY_COLS} entities over gRPC, Gaussian kernel, n = mbar + 1")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


@contextlib.contextmanager
def dask_cluster(workers: int, args: argparse.Namespace, work: Path) -> Iterator[Client]:
    """A client of ``workers`` new local Dask worker processes, warmed up: over mutual TLS from a CA made for the
    run (as ``coordinator train --engine dask`` starts its local cluster from the federation's), or plain TCP with
    --plain."""
    from ppsvm.core.dask_engine import local_cluster, tls_security

    client = local_cluster(workers, None if args.plain else tls_security(*cluster_pki(work)))
    try:
        warm_up(client, args.seed)
        yield client
    finally:
        client.shutdown()


def cluster_pki(work: Path) -> tuple[Path, Path, Path]:
    """A CA and the coordinator's certificate and key under ``work``/pki (made once): (CA, certificate, key)."""
    from ppsvm.wire.certs import CA_FILE, CLIENT, COORDINATOR, certificate_file, key_file, make_certificates

    directory = work / "pki"
    if not directory.is_dir():
        directory.mkdir(parents=True)
        for name, pem in make_certificates({"coordinator": (COORDINATOR, CLIENT)}).items():
            (directory / name).write_bytes(pem.text)
    return directory / CA_FILE, directory / certificate_file("coordinator"), directory / key_file("coordinator")


# --- --lp-only: the LP alone on both engines -----------------------------------------------------


def lp_kernel(m: int, mbar: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """K (column-major, as the coordinator holds it) and labels of ``m`` synthetic rows of n = mbar + 1 features in
    [0, 1], against a basis of ``mbar`` uniform points, Gaussian at width 1/n: the distributed K's distribution,
    made here a million rows at a time."""
    from ppsvm.core.kernels import gaussian_kernel

    n = n_features_for(mbar)
    X, y = synthetic(m, seed, n)
    B = np.random.default_rng(seed + 1).random((mbar, n))
    K = np.empty((m, mbar), order="F")
    for start in range(0, m, 1_000_000):
        K[start : start + 1_000_000] = gaussian_kernel(X[start : start + 1_000_000], B, 1.0 / n)
    return K, y


def measure_engines(m: int, mbar: int, args: argparse.Namespace, work: Path) -> list[dict[str, Any]]:
    """The numpy engine's ipm on one K, then the Dask engine's on the same K with each --workers count (a new
    cluster each); one entry each, with the load and the memory beside the time."""
    started = time.perf_counter()
    K, y = lp_kernel(m, mbar, args.seed)
    case = {
        "mbar": mbar,
        "rows": m,
        "k_mib": K.nbytes / MiB,
        "system_bytes": (mbar + 1) ** 2 * 8,
        "chunk_mib": args.chunk_mib,
    }
    print(
        f"mbar = {mbar}, m = {m:,}: K ({case['k_mib']:.0f} MiB) made in {time.perf_counter() - started:.1f} s",
        flush=True,
    )
    reset_peak_rss()
    before = proc_status()["VmRSS"]
    with watched() as load:
        solved, solution = time_solve(K, y, "ipm", args.repeats, args.single_above)
    runs = len(solved["seconds"])
    numpy_entry = {
        **case,
        "engine": "numpy",
        "workers": None,
        **solved,
        "ns_per_row_iteration": solved["median_s"] / (m * solved["iterations"]) * 1e9,
        "driver_cpu_s_per_solve": load["own_cpu_s"] / runs,
        **{key: load[key] for key in ("load_before", "load_after", "other_cpu_cores")},
        "driver_rss_before_mib": before,
        "driver_peak_rss_mib": peak_rss_mib(),
    }
    print(
        f"  numpy engine {seconds_text(solved['seconds']):>22}  objective {solution.objective:.10g} "
        f"({solution.iterations} iterations), CPU a solve {numpy_entry['driver_cpu_s_per_solve']:.2f} s; load "
        f"{load['load_before'][0]:.1f} -> {load['load_after'][0]:.1f}, other processes {load['other_cpu_cores']:.2f} "
        f"cores; peak {numpy_entry['driver_peak_rss_mib']:.0f} MiB ({before:.0f} with K before the solve)",
        flush=True,
    )
    entries = [numpy_entry]
    for workers in args.workers:
        with dask_cluster(workers, args, work) as client:
            entries.append({**case, "engine": "dask", **dask_engine(client, K, y, solved, workers, args)})
    return entries


def entry_key(entry: dict[str, Any]) -> tuple[int, int, float, int]:
    """An --lp-only entry's place: mbar, rows, --chunk-mib (0: the default chunks), then the numpy engine (0) before
    the Dask engine by workers. A run with --chunk-mib keeps its numpy entry apart too: its ratios are to it."""
    return entry["mbar"], entry["rows"], entry.get("chunk_mib") or 0, entry["workers"] or 0


def engines_table(entries: list[dict[str, Any]]) -> str:
    """One line an entry: time, its ratio to the numpy engine, the load, and the memory against K."""
    rows = []
    for x in entries:
        dask = x["engine"] == "dask"
        shares = x.get("worker_share_of_k_mib", {})
        per_worker = [
            f"{x['worker_peak_rss_mib'][a] - x['worker_rss_before_mib'][a]:.0f}/{shares[a]:.0f}" for a in sorted(shares)
        ]
        rows.append(
            [
                f"{x['mbar']}",
                f"{x['rows']:,}",
                ("numpy" if not dask else f"dask x {x['workers']}")
                + ("" if x.get("chunk_mib") is None else f", {x['chunk_mib']:g} MiB chunks"),
                seconds_text(x["seconds"]),
                f"{x['ratio_to_numpy']:.2f}x" if dask else "",
                str(x["iterations"]),
                f"{x['ns_per_row_iteration']:.0f}",
                f"{x['load_after'][0]:.1f}",
                f"{x['other_cpu_cores']:.2f}",
                f"{x['driver_peak_rss_mib'] - x['driver_rss_before_mib']:.0f}",
                f"{x['k_mib']:.0f}",
                ", ".join(per_worker) if dask else "",
                f"{min(x['worker_rss_before_mib'].values()):.0f}" if dask else "",
            ]
        )
    headers = [
        "mbar",
        "rows",
        "engine",
        "ipm",
        "/ numpy",
        "iterations",
        "ns/row/it",
        "load (1 min, after)",
        "other cores",
        "coordinator peak - before (MiB)",
        "K (MiB)",
        "each worker: peak - before / share of K (MiB)",
        "worker before K (MiB)",
    ]
    return table(headers, rows)


def run_lp_only(args: argparse.Namespace, sizes: list[int], info: dict[str, Any]) -> int:
    """--lp-only: the engines on each (mbar, m), merged into results/train_scaling-dask.json (or --label's) by case,
    so that a table can be measured in parts."""
    output = f"{NAME}-{args.label or 'dask'}"
    earlier = result_path(output, ".json", args.quick)
    kept = json.loads(earlier.read_text(encoding="utf-8")).get("entries", []) if earlier.exists() else []
    setting = {
        "kernel": "gaussian, mu = 1/n, n = mbar + 1 features, a uniform random basis of mbar points",
        "nu": NU,
        "repeats": args.repeats,
        "single_above_s": args.single_above,
        "seed": args.seed,
        "tls": not args.plain,
    }
    # What this process's first solve loads (numba and its compiled row work) is then in no timing and no peak.
    from ppsvm.core.lp import IPM_FROM_ROWS, solve_lp

    solve_lp("classify", *lp_kernel(IPM_FROM_ROWS, MBAR, args.seed), NU, "ipm")
    fresh: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="ppsvm-bench-") as temporary:
        for mbar in args.mbars:
            for m in sizes:
                fresh.extend({**entry, "machine": info} for entry in measure_engines(m, mbar, args, Path(temporary)))
                measured = {entry_key(entry) for entry in fresh}
                entries = sorted([*(e for e in kept if entry_key(e) not in measured), *fresh], key=entry_key)
                write_json(output, {"setting": setting, "entries": entries}, args.quick)
    print("\n" + engines_table(entries))
    print(
        "(ipm: wall-clock median; ns/row/it: ipm's time / (rows x iterations); load: the 1-minute load average after\n"
        " the solves, ours included; other cores: the CPU every other process used meanwhile; memory: VmHWM above\n"
        " the RSS before K was sent (workers) or before the solve (this process, which holds K besides))"
    )
    print(f"wrote {result_path(output, '.json', args.quick).relative_to(ROOT)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="m = 2,000 and 10,000, tuning at 10,000")
    parser.add_argument(
        "--sizes",
        type=int,
        nargs="+",
        help="training rows (default 10000 40000 160000; larger ones: see benchmarks/README.md)",
    )
    parser.add_argument("--mbars", type=int, nargs="+", default=[MBAR, 100], help="basis sizes (default 19 100)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--single-above", type=float, default=60.0, help="do not repeat a run that took longer than this (s)"
    )
    parser.add_argument("--highs-max", type=int, default=640_000, help="skip highs-dual above this many rows")
    parser.add_argument("--svc-max", type=int, default=40_000, help="skip scikit-learn's SVC above this many rows")
    parser.add_argument(
        "--tune-at", type=int, nargs="+", help="time tune() at these sizes when measured (default 40000 160000)"
    )
    parser.add_argument("--mu", type=float, help="Gaussian width (default 1/n, n = mbar + 1 features)")
    parser.add_argument(
        "--engine", choices=ENGINES, default="numpy", help="also solve each K on a local Dask cluster (dask)"
    )
    parser.add_argument(
        "--workers",
        type=int,
        nargs="+",
        default=[2],
        help="Dask worker processes for --engine dask (default 2); with --lp-only, one cluster for each count given",
    )
    parser.add_argument(
        "--plain",
        action="store_true",
        help="the Dask cluster over plain TCP (default: mutual TLS from a CA of its own)",
    )
    parser.add_argument(
        "--chunk-mib",
        type=float,
        help="with --lp-only, send K to the workers in chunks of this many MiB (coordinator train's: 8); default: "
        "DaskKernel's, at most 64 MiB",
    )
    parser.add_argument(
        "--lp-only",
        action="store_true",
        help="only ipm on both engines on a K made in this process (no entities, train(), HiGHS, peers or tuning); "
        "writes results/train_scaling-dask.json (or --label's), merged with its earlier cases",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", type=Path, help="keep the split files and saved kernels in this directory")
    parser.add_argument(
        "--label", help="write results/train_scaling-LABEL.json and .png instead (e.g. a separate large-size run)"
    )
    parser.add_argument("--coordinator", nargs=2, type=Path, metavar=("FEDERATION", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.coordinator:  # the driver passes one --mbars value and --mu
        federation_path, out = args.coordinator
        run_coordinator(federation_path, out, args.mbars[0], args.mu, args.repeats, args.single_above)
        return 0
    sizes = args.sizes or (QUICK_SIZES if args.quick else DEFAULT_SIZES)
    output = NAME if args.label is None else f"{NAME}-{args.label}"
    args.tune_at = args.tune_at or (QUICK_TUNE_AT if args.quick else DEFAULT_TUNE_AT)
    if len(args.workers) > 1 and not args.lp_only:
        parser.error("several --workers counts need --lp-only")

    info = machine_info()
    print_machine(info)
    if args.lp_only:
        return run_lp_only(args, sizes, info)
    print(
        f"{ENTITY_ROWS} x {ENTITY_COLS} split of a synthetic dataset with n = mbar + 1 features, {ENTITY_ROWS} entity "
        f"processes over gRPC on this machine; gaussian, mbar = {', '.join(map(str, args.mbars))}, nu = {NU:g}, "
        f"mu = {'1/n' if args.mu is None else f'{args.mu:g}'}; {args.repeats} repeats, median\n",
        flush=True,
    )
    started = time.perf_counter()
    results: dict[str, dict[str, dict[str, Any]]] = {str(mbar): {} for mbar in args.mbars}
    setting = {
        "entities": f"{ENTITY_ROWS} x {ENTITY_COLS}",
        "mbars": {str(b): {"n_features": n_features_for(b), "mu": width_for(b, args)} for b in args.mbars},
        "nu": NU,
        "lp_formulation_in_train": "auto (the default: ipm at these sizes)",
        "test_fraction": TEST_FRACTION,
        "repeats": args.repeats,
        "seed": args.seed,
        "single_above_s": args.single_above,
        "highs_max": args.highs_max,
        "svc_max": args.svc_max,
        "svc_C": 1.0,
        "peer_components": PEER_COMPONENTS,
        "tune_at": args.tune_at,
        "sizes": sizes,
        "engine": args.engine,
        "dask_workers": args.workers[0] if args.engine == "dask" else None,
        "dask_tls": not args.plain if args.engine == "dask" else None,
    }
    with contextlib.ExitStack() as stack:
        work = args.keep or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="ppsvm-bench-")))
        client = stack.enter_context(dask_cluster(args.workers[0], args, work)) if args.engine == "dask" else None
        for m in sizes:
            for mbar in args.mbars:
                results[str(mbar)][str(m)] = measure(m, mbar, args, work, client)
                # Written after every case so a run cut short still leaves its figures.
                payload = {"machine": info, "setting": setting, "results": results, "complete": False}
                write_json(output, payload, args.quick)

    for mbar in args.mbars:
        print("\n" + case_table(mbar, sizes, results[str(mbar)]))
    print(
        "(wall-clock medians unless marked CPU; peers' cells are test error in fit time; the overhead rows separate\n"
        " the distributed cost from LP times that vary with the load of other jobs on the machine)\n"
    )
    verdicts = targets(args.mbars, sizes, results)
    for name, verdict in verdicts.items():
        print(f"target: {name}: {verdict}")
    info["load_average_at_end"] = load_average()
    info["wall_clock_s"] = time.perf_counter() - started
    print(f"\nload average at end {info['load_average_at_end']}; total {info['wall_clock_s']:.0f} s")
    payload = {"machine": info, "setting": setting, "results": results, "targets": verdicts, "complete": True}
    path = write_json(output, payload, args.quick)
    picture = result_path(output, ".png", args.quick)
    plot(args.mbars, sizes, results, picture)
    print(f"wrote {path.relative_to(ROOT)} and {picture.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
