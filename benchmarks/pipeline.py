"""Records to a model as a user runs it, by size: where the time goes from a data file to a first prediction.

For each size (--sizes, total records): a synthetic dataset (benchmarks._shared.synthetic, 20 features
rounded to 6 decimals, a label column; 5% held out) is written as one CSV with a header, as a user's export
would be (not timed), and then, each step a real ``ppsvm`` command or process:

- ``ppsvm split`` into 4 x 1 cells (four row blocks, one column block, so n_j = 20 > mbar = 19; each entity
  consents to releasing its block on its own, as in benchmarks/train_scaling.py: speed is measured, not privacy);
- the four entities started cold (each reads its cell) and then once more, warm (the cell cache, where the
  source did not change): the seconds until all four listen;
- ``ppsvm coordinator train`` with fixed nu and mu (no tuning): wall time, and from the model's own
  training figures the survey, the kernel fetch and the LP; its peak RSS (GNU time's maximum resident set)
  against the bound 2 x K + 200 MiB;
- ``ppsvm coordinator predict`` of one held-out record: the time to a first prediction.

"entity start + train" is the issue 28 target (10,000,000 records in under 60 s). With ``--engine dask``
the training streams K into a local Dask cluster of ``--workers`` processes (``coordinator train --engine dask``;
issue 31): the coordinator's own peak RSS and each worker's, from the model's training figures, against the
worker's share of K. Writes results/pipeline.json (a run of some sizes and an engine replaces those and keeps
the others, each with the machine and load it was measured at) and prints a table with the date and the load.

    python -m benchmarks.pipeline [--quick] [--sizes 1000000 2000000 5000000 10000000]
    python -m benchmarks.pipeline --sizes 1000000 --engine dask --workers 2
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._shared import (
    MBAR,
    N_FEATURES,
    load_average,
    machine_info,
    print_machine,
    synthetic,
    table,
    with_earlier_runs,
    write_json,
)
from ppsvm.api.inprocess import add_privacy_settings
from ppsvm.config import SINGLE_BLOCK_CONSENT_KEY, federation_at_addresses, load_federation
from ppsvm.processes import EntityProcesses

PPSVM = (sys.executable, "-m", "ppsvm")
TEST_FRACTION = 0.05
ROWS, COLS = 4, 1
GNU_TIME = Path("/usr/bin/time")
# Entities of 2,500,000 records each take over the default 80 s to listen on 2 busy cores.
START_TIMEOUT_S = 900.0


def write_dataset(m: int, seed: int, path: Path) -> None:
    """The user's export: m records, 20 features (6 decimals) and a +-1 label column, with a header."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    X, y = synthetic(m, seed, N_FEATURES)
    columns = {f"x{k}": np.round(X[:, k], 6) for k in range(N_FEATURES)}
    columns["label"] = y.astype(np.int8)
    pacsv.write_csv(pa.table(columns), path)


def run(*args: str, wrap: list[str] | None = None) -> tuple[subprocess.CompletedProcess[str], float]:
    """A ppsvm command (under ``wrap``, e.g. GNU time), checked; its result and wall seconds."""
    started = time.perf_counter()
    result = subprocess.run([*(wrap or []), *PPSVM, *args], capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if result.returncode != 0:
        raise RuntimeError(f"ppsvm {' '.join(args[:2])} exited {result.returncode}:\n{result.stderr[-3000:]}")
    return result, seconds


def start_entities(configs: list[Path]) -> float:
    """Seconds until every entity listens (then they are stopped)."""
    started = time.perf_counter()
    with EntityProcesses(configs, start_timeout=START_TIMEOUT_S):
        return time.perf_counter() - started


def measure(m: int, seed: int, work: Path, engine: str = "numpy", workers: int = 2) -> dict[str, Any]:
    data = work / "data.csv"
    write_dataset(m, seed, data)
    split_dir = work / "split"
    _, split_s = run(
        "split", str(data), "--header", "--rows", str(ROWS), "--cols", str(COLS), "--out", str(split_dir),
        "--test-fraction", str(TEST_FRACTION), "--seed", str(seed),
    )  # fmt: skip
    planned = load_federation(split_dir / "federation.toml")
    configs = [split_dir / f"{e.id}.toml" for e in planned.entities]
    # A horizontal split: each entity releases its block on its own, which its operator must consent to (privacy
    # rule 8). The speed is measured here, not the privacy.
    add_privacy_settings(configs, {SINGLE_BLOCK_CONSENT_KEY: True})
    figures: dict[str, Any] = {"records": m, "data_mib": data.stat().st_size / 2**20, "split_s": split_s}
    figures.update(engine=engine, workers=workers if engine == "dask" else None)
    on_workers = ["--engine", "dask", "--dask-workers", str(workers)] if engine == "dask" else []
    figures["entity_start_cold_s"] = start_entities(configs)
    started = time.perf_counter()
    with EntityProcesses(configs, start_timeout=START_TIMEOUT_S) as running:
        figures["entity_start_warm_s"] = time.perf_counter() - started
        live = split_dir / "federation.live.toml"
        live.write_text(federation_at_addresses(planned, running.addresses), encoding="utf-8")
        model = work / "model.json"
        timing = [str(GNU_TIME), "-f", "peak_rss_kib=%M"] if GNU_TIME.exists() else []
        trained, figures["train_s"] = run(
            "coordinator", "train", "--federation", str(live), "--model-out", str(model), "--no-distribute",
            "--kernel", "gaussian", "--mbar", str(MBAR), "--nu", "1", "--mu", str(1.0 / N_FEATURES),
            "--basis", "paper", "--solver", "ipm", *on_workers, wrap=timing,
        )  # fmt: skip
        peak = [line for line in trained.stderr.splitlines() if line.startswith("peak_rss_kib=")]
        training = json.loads(model.read_text())["training"]
        # The coordinator's own peak as it measured it (VmHWM); GNU time's maximum also counts the Dask workers,
        # which are its descendants.
        own = training.get("peak_rss_mib")
        figures["coordinator_peak_rss_mib"] = own if own else int(peak[-1].split("=")[1]) / 1024 if peak else None
        for worker in training.get("dask_workers", []):
            worker["share_mib"] = worker["rows"] * MBAR * 8 / 2**20
        figures["dask_workers"] = training.get("dask_workers")
        for key in ("survey_seconds", "fetch_seconds", "lp_seconds", "lp_iterations", "n_train", "objective"):
            figures[key] = training[key]
        k_mib = training["n_train"] * MBAR * 8 / 2**20
        figures["kernel_mib"] = k_mib
        figures["rss_bound_mib"] = 2 * k_mib + 200
        figures["fetch_gb_per_s"] = training["n_train"] * MBAR * 8 / 1e9 / training["fetch_seconds"]
        held_out = next(line.split(",")[0] for line in (split_dir / "r0c0.csv").open() if ",test," in line)
        ids = work / "ids.txt"
        ids.write_text(f"id\n{held_out}\n", encoding="utf-8")
        _, figures["first_prediction_s"] = run(
            "coordinator", "predict", "--federation", str(live), "--model", str(model), "--ids", str(ids),
            "--out", str(work / "predictions.csv"), "--id-key", str(split_dir / "record-ids.key"),
        )  # fmt: skip
    figures["start_plus_train_cold_s"] = figures["entity_start_cold_s"] + figures["train_s"]
    figures["start_plus_train_warm_s"] = figures["entity_start_warm_s"] + figures["train_s"]
    return figures


def _engine(r: dict[str, Any]) -> str:
    return "numpy" if r.get("engine", "numpy") == "numpy" else f"dask x {r['workers']}"


def _workers_memory(r: dict[str, Any]) -> str:
    if not r.get("dask_workers"):
        return ""
    return ", ".join(f"{w['peak_rss_mib']:.0f} / {w['share_mib']:.0f}" for w in r["dask_workers"])


def report(results: list[dict[str, Any]]) -> str:
    header = [
        "records", "engine", "split", "start cold", "start warm", "train", "survey", "fetch (GB/s)", "LP (its)",
        "first prediction", "start + train (cold / warm)", "coordinator peak RSS / 2K + 200 (MiB)",
        "workers' peak RSS / share of K (MiB)",
    ]  # fmt: skip
    rows = [
        [
            f"{r['records']:,}",
            _engine(r),
            f"{r['split_s']:.1f} s",
            f"{r['entity_start_cold_s']:.1f} s",
            f"{r['entity_start_warm_s']:.1f} s",
            f"{r['train_s']:.1f} s",
            f"{r['survey_seconds']:.1f} s",
            f"{r['fetch_seconds']:.1f} s ({r['fetch_gb_per_s']:.2f})",
            f"{r['lp_seconds']:.1f} s ({r['lp_iterations']})",
            f"{r['first_prediction_s']:.1f} s",
            f"{r['start_plus_train_cold_s']:.1f} / {r['start_plus_train_warm_s']:.1f} s",
            "n/a"
            if r["coordinator_peak_rss_mib"] is None
            else f"{r['coordinator_peak_rss_mib']:.0f} / {r['rss_bound_mib']:.0f}",
            _workers_memory(r),
        ]
        for r in results
    ]
    return table(header, rows)


def _run_key(entry: dict[str, Any]) -> tuple[int, str, int | None]:
    """A size measured with one engine (and worker count) replaces only its own earlier figures."""
    return entry["records"], entry.get("engine", "numpy"), entry.get("workers")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 2_000_000, 5_000_000, 10_000_000])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="one size of 100,000 records (a smoke run)")
    parser.add_argument("--work", type=Path, help="scratch directory (default: a temporary one, removed)")
    parser.add_argument("--engine", choices=("numpy", "dask"), default="numpy", help="coordinator train --engine")
    parser.add_argument("--workers", type=int, default=2, help="--dask-workers with --engine dask (default 2)")
    args = parser.parse_args(argv)
    sizes = [100_000] if args.quick else args.sizes
    machine = machine_info()
    print_machine(machine)
    results: list[dict[str, Any]] = []
    for m in sizes:
        work = Path(tempfile.mkdtemp(prefix=f"ppsvm-pipeline-{m}-", dir=args.work))
        try:
            print(f"{m:,} records (load average {load_average()})...", flush=True)
            figures = measure(m, args.seed, work, args.engine, args.workers)
            results.append({**figures, "load_average_after": load_average()})
        finally:
            shutil.rmtree(work, ignore_errors=True)
        print(report(results[-1:]), flush=True)
        # Written after every size: a larger one that fails (or is stopped) loses nothing measured before it.
        if not args.quick:
            results = with_earlier_runs("pipeline", "results", results, key=_run_key)
        write_json("pipeline", {"machine": machine, "results": results}, quick=args.quick)
    print(report(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
