"""Prediction load on ``ppsvm coordinator serve`` over 32 entity processes with 200,000-row kernel blocks.

The issue: "32 entity processes on loopback, kernel blocks of 200,000 rows streamed, and 8 concurrent
clients sending 1,000 prediction requests: throughput, p50/p99 latency, peak memory of coordinator and
entities, zero errors." Everything runs as it is deployed, over mutual TLS on 127.0.0.1:

1. data: a seeded synthetic classification set, features uniform on [0, 1], labels from a noisy
   nonlinear rule spread over every column block; 5% of the records held out (seeded mask);
2. split (``ppsvm.data.partition.split_dataset``, which also writes the TLS certificates) into
   2 row blocks x 16 column blocks = 32 cells of 4 features each; every row block has exactly
   200,000 training records, so every entity's training kernel block K(A_ij, B_j') is
   200,000 x mbar and reaches the coordinator as a gRPC server stream of ~1 MiB chunks.
   The column-block secrets are overwritten with reproducible values (benchmark only);
3. 32 ``ppsvm entity`` processes (``ppsvm.processes.EntityProcesses``), started 8 at a time
   (``--start-batch``; 0 starts all 32 in one EntityProcesses, whose wait grows with the number
   started): each imports ppsvm and parses a 210,000-row CSV, a few CPU seconds on 2 cores;
4. ``ppsvm coordinator train`` in a child process: gaussian kernel, mbar = n_j - 1 = 3 (privacy
   rule 3 holds), nu = 1, mu = 1/n fixed (no tuning), model distributed to the entities. Its
   kernel-fetch and LP seconds are read from its log, its peak RSS from ``os.wait4`` in a small shim
   process (a child forked straight from this process reports this one's RSS as its ru_maxrss);
5. ``ppsvm coordinator serve`` in a child process;
6. 8 client processes (not threads: no GIL shared between clients, and none with this process's
   pipe-draining threads; ``--clients-as threads`` runs them as threads here), each with its own
   mutually authenticated TLS channel (the coordinator's certificate, as
   tests/integration/conftest.py's ``coordinator_channel``), connected before a common start, send
   their share of 1,000 ``Predict`` requests back to back (request k goes to client k mod 8); each
   request names ``--batch`` record ids (default ``1 64``: a run of 1,000 requests of 1 id, then 1,000
   of 64 ids) drawn at random (seeded) from all records, training and held-out, of both
   row blocks. Every latency is recorded; every RpcError, and every
   reply whose ids differ from the request's, counts as an error;
7. every served decision is recomputed independently here: [0, 1] scaling from the bounds the split
   declares (each feature's range over all records, rounded outwards), B_j = derive_B(secret_j, mbar, n_j),
   K = prod_j exp(-mu ||x_j - B_j||^2), K u - gamma
   with the model's u and gamma; it must agree to 1e-9;
8. the floor (issue 14): the serve process stopped, ``benchmarks/fanout_floor.py`` answers the same
   requests from the same clients through the same entities with nothing but the fan-out (one unary
   Metadata call to each entity of the row blocks a request touches, no batching, a fixed reply). The
   target: serve's throughput at least half the floor's and its p50 latency at most twice, at each batch.

Peak RSS: VmHWM of the serve process and of every entity read from /proc just before they are
stopped; the train process's from os.wait4 (see 4). CPU seconds of the serve process and of the entities
during the load come from /proc/PID/stat (less sensitive to other jobs than wall-clock time).

Why 2 x 16: 32 entities with 200,000 training rows in each kernel block. 8 row blocks x 4 would
need 1.6 million rows (CSV cells of ~2.4 GB, a 1.6M-column LP) on a 2-core machine; 1 x 32 has no
row-block structure for the coordinator to route by. 2 x 16 keeps the checkerboard (kernel rows
multiplied across 16 column blocks, stacked across 2 row blocks, each prediction routed to its
row block's 16 entities) at 400,000 training rows, with n_j = 4 so that mbar = 3 < n_j.

    python benchmarks/load.py [--quick] [--clients 8] [--requests 1000] [--batch 1 64] [--start-batch 8]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._shared import (
    load_average,
    machine_info,
    package_versions,
    peak_rss_mib,
    print_machine,
    proc_status,
    pseudonyms_of,
    table,
    write_json,
)
from ppsvm.api.inprocess import fixed_secret
from ppsvm.processes import read_listening_address

ROOT = Path(__file__).resolve().parents[1]
NAME = "load"
TEST_FRACTION = 0.05
NU = 1.0
VERIFY_ATOL = 1e-9
REQUEST_TIMEOUT_S = 60.0
READY_TIMEOUT_S = 300.0
FULL = {"row_blocks": 2, "col_blocks": 16, "features_per_block": 4, "rows_per_block": 200_000, "requests": 1000}
QUICK = {"row_blocks": 2, "col_blocks": 4, "features_per_block": 4, "rows_per_block": 20_000, "requests": 200}
CLK_TCK = os.sysconf("SC_CLK_TCK")


# --- data ----------------------------------------------------------------------------------------


def synthetic(m: int, col_blocks: int, per_block: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Features uniform on [0, 1]^(col_blocks * per_block), +-1 labels from a noisy nonlinear rule.

    Per column block, a periodic term in its first feature and an interaction of its next two;
    Gaussian noise; thresholded at the median (balanced classes). Returns X (m, n), y (m,).
    """
    rng = np.random.default_rng(seed)
    n = col_blocks * per_block
    X = rng.random((m, n))
    score = rng.normal(0.0, 0.2 * np.sqrt(col_blocks), m)
    for j in range(col_blocks):
        first = j * per_block
        score += np.sin(2 * np.pi * X[:, first])
        if per_block >= 3:
            score += 4.0 * (X[:, first + 1] - 0.5) * (X[:, first + 2] - 0.5)
    return X, np.where(score > np.median(score), 1.0, -1.0)


def secret_text(seed: int, j: int) -> str:
    return fixed_secret(NAME, seed, j)


# --- processes -----------------------------------------------------------------------------------


def ppsvm_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "ppsvm", *args]


def proc_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a live process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime (fields 14, 15 of stat)


# Runs a command as its child and writes the child's rusage: a process forked straight from this one
# reports this process's RSS at the fork as its own ru_maxrss (Linux keeps the old high-water mark
# across execve), whereas a child of this small shim starts from the shim's. SIGTERM is passed on.
RUSAGE_SHIM = """import json, os, signal, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[2], sys.argv[2:])
signal.signal(signal.SIGTERM, lambda signum, frame: os.kill(pid, signal.SIGTERM))
signal.signal(signal.SIGINT, lambda signum, frame: os.kill(pid, signal.SIGINT))
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as out:
    json.dump({"maxrss_kib": usage.ru_maxrss, "utime_s": usage.ru_utime, "stime_s": usage.ru_stime}, out)
sys.exit(os.waitstatus_to_exitcode(status))
"""


def stop_process(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


# --- clients -------------------------------------------------------------------------------------


def run_client(address: str, federation_path: str, plan: list[tuple[int, list[str]]], start: Any) -> dict[str, Any]:
    """Connect, wait for the common start, send every request of ``plan`` back to back."""
    import grpc

    from ppsvm.config import load_federation
    from ppsvm.wire.certs import DEFAULT_COORDINATOR_NAME
    from ppsvm.wire.grpc_util import open_channel
    from ppsvm.wire.rpc import ppsvm_pb2 as pb
    from ppsvm.wire.rpc import ppsvm_pb2_grpc as pb_grpc

    federation = load_federation(federation_path)
    result: dict[str, Any] = {"latency_s": [], "errors": [], "decisions": {}}
    with open_channel(address, tls=federation.tls, peer=DEFAULT_COORDINATOR_NAME) as channel:
        grpc.channel_ready_future(channel).result(timeout=60)  # the TLS handshake happens before the clock starts
        stub = pb_grpc.CoordinatorStub(channel)
        start.wait()
        result["start"] = time.monotonic()
        for index, ids in plan:
            began = time.perf_counter()
            try:
                reply = stub.Predict(pb.PredictRequest(ids=ids), timeout=REQUEST_TIMEOUT_S)
            except grpc.RpcError as error:
                result["latency_s"].append(time.perf_counter() - began)
                result["errors"].append({"request": index, "code": str(error.code()), "details": error.details()})
                continue
            result["latency_s"].append(time.perf_counter() - began)
            got = [p.id for p in reply.predictions]
            if got != ids:
                result["errors"].append(
                    {"request": index, "code": "WRONG_REPLY", "details": f"asked {ids[:3]}, got {got[:3]}"}
                )
                continue
            for p in reply.predictions:
                result["decisions"][p.id] = p.decision
        result["end"] = time.monotonic()
    result["peak_rss_mib"] = peak_rss_mib()
    return result


def _client_process(
    address: str, federation_path: str, plan: list[tuple[int, list[str]]], start: Any, out: Any
) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the driver stops us; Ctrl-C reaches it too
    try:
        out.put(run_client(address, federation_path, plan, start))
    except BaseException as error:  # noqa: BLE001 - reported to the driver, which fails the run
        out.put({"crash": f"{type(error).__name__}: {error}"})


def run_load(
    address: str, federation_path: Path, plans: list[list[tuple[int, list[str]]]], clients_as: str, children: list[Any]
) -> tuple[list[dict[str, Any]], float]:
    """Run one client per plan concurrently; returns their results and the common start time (monotonic)."""
    n = len(plans)
    if clients_as == "threads":
        start = threading.Barrier(n + 1)
        results: list[dict[str, Any]] = []
        lock = threading.Lock()

        def work(plan: list[tuple[int, list[str]]]) -> None:
            try:
                r = run_client(address, str(federation_path), plan, start)
            except BaseException as error:  # noqa: BLE001
                r = {"crash": f"{type(error).__name__}: {error}"}
                start.abort()
            with lock:
                results.append(r)

        threads = [threading.Thread(target=work, args=(plan,), daemon=True) for plan in plans]
        for t in threads:
            t.start()
        start.wait(timeout=120)
        began = time.monotonic()
        for t in threads:
            t.join()
        return results, began
    context = multiprocessing.get_context("spawn")  # never fork a process that holds gRPC threads
    start = context.Barrier(n + 1)
    out = context.Queue()
    processes = [
        context.Process(target=_client_process, args=(address, str(federation_path), plan, start, out), daemon=True)
        for plan in plans
    ]
    children.extend(processes)
    for p in processes:
        p.start()
    start.wait(timeout=120)
    began = time.monotonic()
    results = [out.get(timeout=REQUEST_TIMEOUT_S * (len(plans[0]) + 2)) for _ in processes]
    for p in processes:
        p.join(timeout=30)
    return results, began


def start_server(
    name: str, command: list[str], log_path: Path, children: list[Any]
) -> tuple[subprocess.Popen[str], str]:
    """Start a Predict server process (its stderr to ``log_path``); returns it and its listening address."""
    with log_path.open("w") as log:
        server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, text=True, cwd=ROOT)
    children.append(server)
    return server, read_listening_address(server, f"{name} (log {log_path})", READY_TIMEOUT_S)


def measure_load(
    args: argparse.Namespace,
    address: str,
    federation_path: Path,
    plans: list[list[tuple[int, list[str]]]],
    server_pid: int,
    entity_pids: list[int],
    children: list[Any],
) -> tuple[dict[str, Any], dict[str, float]]:
    """Run the clients' ``plans`` against the Predict server at ``address``; its figures and the decisions served."""

    def usage() -> dict[str, float]:
        return {
            "server_cpu_s": proc_cpu_s(server_pid),
            "entity_cpu_s": sum(proc_cpu_s(p) for p in entity_pids),
            "server_rss_mib": proc_status(server_pid)["VmRSS"],
            "entity_rss_mib": sum(proc_status(p)["VmRSS"] for p in entity_pids),
        }

    before = usage()
    started = time.perf_counter()
    results, _ = run_load(address, federation_path, plans, args.clients_as, children)
    wall = time.perf_counter() - started
    crashed = [res["crash"] for res in results if "crash" in res]
    if crashed:
        raise RuntimeError(f"client(s) crashed: {crashed}")
    after = usage()
    requests = sum(len(plan) for plan in plans)
    size = len(plans[0][0][1])
    window = max(res["end"] for res in results) - min(res["start"] for res in results)
    latencies = np.concatenate([np.asarray(res["latency_s"]) for res in results])
    errors = [e for res in results for e in res["errors"]]
    load = {
        "batch": size,
        "requests": requests,
        "clients": len(plans),
        "clients_as": args.clients_as,
        "predictions": requests * size,
        "window_s": window,
        "wall_with_client_start_s": wall,
        "requests_per_s": requests / window,
        "predictions_per_s": requests * size / window,
        "latency": latency_figures(latencies),
        # Each client's first request meets a cold server (feature ranges fetched once, each entity's id index
        # built on first use): reported apart as well as inside the figures above.
        "first_request_max_ms": 1000 * max(res["latency_s"][0] for res in results if res["latency_s"]),
        "latency_after_first": latency_figures(np.concatenate([np.asarray(res["latency_s"][1:]) for res in results])),
        "errors": len(errors),
        "error_samples": errors[:10],
        "error_codes": sorted({e["code"] for e in errors}),
        "serve_cpu_ms_per_request": 1000 * (after["server_cpu_s"] - before["server_cpu_s"]) / requests,
        "entity_cpu_ms_per_request": 1000 * (after["entity_cpu_s"] - before["entity_cpu_s"]) / requests,
        "serve_rss_before_mib": before["server_rss_mib"],
        "serve_rss_after_mib": after["server_rss_mib"],
        "entity_rss_sum_before_mib": before["entity_rss_mib"],
        "entity_rss_sum_after_mib": after["entity_rss_mib"],
        "client_peak_rss_mib": max(res["peak_rss_mib"] for res in results),
        "load_average_after": load_average(),
    }
    return load, {k: v for res in results for k, v in res["decisions"].items()}


# --- the benchmark -------------------------------------------------------------------------------


@dataclass
class Run:
    """Everything measured, as it is printed and written."""

    phases: dict[str, float] = field(default_factory=dict)
    load_average: dict[str, list[float]] = field(default_factory=dict)
    train: dict[str, Any] = field(default_factory=dict)
    serve: dict[str, Any] = field(default_factory=dict)
    entities: dict[str, Any] = field(default_factory=dict)
    loads: list[dict[str, Any]] = field(default_factory=list)
    verification: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def mark(run: Run, phase: str, seconds: float) -> None:
    run.phases[phase] = seconds
    run.load_average[phase] = load_average()


def parse_train_log(text: str) -> dict[str, float | None]:
    fetch = re.search(r"assembled train kernel \((\d+), (\d+)\) from (\d+) entities in ([0-9.]+) s", text)
    lp = re.search(r"LP solved: .* in ([0-9.]+) s", text)
    return {
        "kernel_fetch_s": float(fetch.group(4)) if fetch else None,
        "lp_log_s": float(lp.group(1)) if lp else None,
        "kernel_rows": int(fetch.group(1)) if fetch else None,
    }


def kernel_releases(split_dir: Path) -> int:
    """KernelBlock releases recorded so far in the release logs of a split's entities."""
    return sum(
        json.loads(line).get("rpc") == "KernelBlock"
        for log in split_dir.glob("r*c*.releases.jsonl")
        for line in log.read_text(encoding="utf-8").splitlines()
    )


def latency_figures(latencies: np.ndarray) -> dict[str, float]:
    ms = latencies * 1000.0
    return {
        "mean_ms": float(ms.mean()),
        "p50_ms": float(np.percentile(ms, 50)),
        "p90_ms": float(np.percentile(ms, 90)),
        "p99_ms": float(np.percentile(ms, 99)),
        "max_ms": float(ms.max()),
        "min_ms": float(ms.min()),
    }


def benchmark(args: argparse.Namespace, work: Path, run: Run, children: list[Any]) -> None:
    from ppsvm.config import federation_at_addresses, load_federation
    from ppsvm.core.model import Model
    from ppsvm.core.randomness import derive_B
    from ppsvm.data.dataset import Dataset
    from ppsvm.data.partition import SplitOptions, split_dataset
    from ppsvm.data.schema import outward_bounds
    from ppsvm.processes import EntityProcesses

    r, s, nj = args.row_blocks, args.col_blocks, args.features_per_block
    n, m_train = s * nj, r * args.rows_per_block
    m = int(np.ceil(m_train / (1 - TEST_FRACTION)))
    mbar, mu = nj - 1, 1.0 / n

    # 1. data and 2. split ---------------------------------------------------------------------
    started = time.perf_counter()
    X, y = synthetic(m, s, nj, args.seed)
    held_out = np.zeros(m, dtype=bool)
    held_out[np.random.default_rng(args.seed + 1).choice(m, m - m_train, replace=False)] = True
    ids = np.array([str(k) for k in range(m)])
    dataset = Dataset(
        ids=ids, X=X, y=y, feature_names=tuple(f"x{k}" for k in range(n)), source=f"synthetic(seed={args.seed})"
    )
    mark(run, "generate data", time.perf_counter() - started)
    started = time.perf_counter()
    split_dir = work / "split"
    result = split_dataset(
        dataset, SplitOptions(rows=r, cols=s, out_dir=split_dir, seed=args.seed, overwrite=True), held_out=held_out
    )
    for j in range(s):
        (split_dir / f"column-block-{j}.secret").write_text(secret_text(args.seed, j), encoding="utf-8")
    assert result.n_train == m_train, (result.n_train, m_train)
    mark(run, "split (cells, configs, TLS certificates)", time.perf_counter() - started)
    cells_mib = sum(p.stat().st_size for p in split_dir.glob("r*c*.csv")) / 2**20
    print(
        f"split: {m:,} records ({m_train:,} training = {r} x {args.rows_per_block:,}, {m - m_train:,} held out), "
        f"{r} x {s} = {r * s} cells of {nj} features ({cells_mib:.0f} MiB of CSV) "
        f"in {run.phases['split (cells, configs, TLS certificates)']:.1f} s",
        flush=True,
    )

    # 3. entity processes -----------------------------------------------------------------------
    planned = load_federation(result.federation_path)
    configs = [split_dir / f"{e.id}.toml" for e in planned.entities]
    batch = args.start_batch or len(configs)
    with contextlib.ExitStack() as stack:
        started = time.perf_counter()
        groups = []
        for k in range(0, len(configs), batch):
            groups.append(stack.enter_context(EntityProcesses(configs[k : k + batch])))
            print(
                f"  entities {k + 1}-{min(k + batch, len(configs))} ready after {time.perf_counter() - started:.1f} s "
                f"(load average {load_average()})",
                flush=True,
            )
        mark(run, f"start {len(configs)} entity processes", time.perf_counter() - started)
        entity_pids = [p.pid for g in groups for p in g.processes]
        addresses = [a for g in groups for a in g.addresses]
        live = split_dir / "federation.live.toml"
        live.write_text(federation_at_addresses(planned, addresses), encoding="utf-8")
        print(
            f"started {len(configs)} entity processes in {run.phases[f'start {len(configs)} entity processes']:.1f} s "
            f"({len(groups)} batch{'es' if len(groups) > 1 else ''} of {batch}), mutual TLS",
            flush=True,
        )
        run.entities["rss_after_start_mib"] = [proc_status(pid)["VmRSS"] for pid in entity_pids]

        # 4. train --------------------------------------------------------------------------------
        model_path = work / "model.json"
        train_log = work / "train.log"
        command = ppsvm_command(
            "coordinator",
            "train",
            "--federation",
            str(live),
            "--model-out",
            str(model_path),
            "--kernel",
            "gaussian",
            "--mbar",
            str(mbar),
            "--nu",
            repr(NU),
            "--mu",
            repr(mu),
            # The paper's basis: the independent check of every served decision below computes K(x', B') u.
            "--basis",
            "paper",
        )
        usage_path = work / "train.rusage.json"
        started = time.perf_counter()
        with train_log.open("w") as log:
            trainer = subprocess.Popen(
                [sys.executable, "-c", RUSAGE_SHIM, str(usage_path), *command],
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=ROOT,
            )
            children.append(trainer)
            trainer.wait()
        mark(run, "train (ppsvm coordinator train, child process)", time.perf_counter() - started)
        if trainer.returncode != 0:
            raise RuntimeError(f"ppsvm coordinator train exited {trainer.returncode}:\n{train_log.read_text()[-3000:]}")
        model = Model.load(model_path)
        usage = json.loads(usage_path.read_text())
        run.train = {
            **parse_train_log(train_log.read_text()),
            "peak_rss_mib": usage["maxrss_kib"] / 1024.0,
            "cpu_s": usage["utime_s"] + usage["stime_s"],
            "train_seconds": model.training["seconds"],
            "lp_seconds": model.training["lp_seconds"],
            "lp_solved_by": model.training["formulation"],
            "objective": model.training["objective"],
            "n_train": model.training["n_train"],
            "private": model.private,
            "mbar": model.mbar,
            "mu": model.mu,
            "nu": model.nu,
            "block_bytes": args.rows_per_block * mbar * 8,
        }
        t = run.train
        print(
            f"trained in {run.phases['train (ppsvm coordinator train, child process)']:.1f} s wall "
            f"(train() {t['train_seconds']:.1f} s: kernel fetch {t['kernel_fetch_s']} s for {r * s} blocks of "
            f"{args.rows_per_block:,} x {mbar} = {t['block_bytes'] / 2**20:.1f} MiB each, LP {t['lp_seconds']:.1f} s); "
            f"private = {model.private}",
            flush=True,
        )
        run.entities["rss_after_train_mib"] = [proc_status(pid)["VmRSS"] for pid in entity_pids]

        # 5. serve --------------------------------------------------------------------------------
        serve_log = work / "serve.log"
        started = time.perf_counter()
        command = ppsvm_command(
            "coordinator", "serve", "--federation", str(live), "--model", str(model_path), "--listen", "127.0.0.1:0"
        )
        server, address = start_server("ppsvm coordinator serve", command, serve_log, children)
        mark(run, "start ppsvm coordinator serve", time.perf_counter() - started)
        run.serve["rss_at_ready_mib"] = proc_status(server.pid)["VmRSS"]
        print(
            f"serve listening on {address} after {run.phases['start ppsvm coordinator serve']:.1f} s "
            f"(RSS {run.serve['rss_at_ready_mib']:.0f} MiB)",
            flush=True,
        )

        # 6. load ---------------------------------------------------------------------------------
        # Which row block holds each record (first column of the column-block-0 cells): the serve process
        # asks the s entities of every row block a request touches, so this counts the entity calls.
        row_block_of: dict[str, int] = {}
        for i in range(r):
            with (split_dir / f"r{i}c0.csv").open(encoding="utf-8") as cell:
                next(cell)
                row_block_of.update((line.split(",", 1)[0], i) for line in cell)
        # Clients ask by pseudonym, as the entities publish records (they hold the record-id key).
        asked = np.array(pseudonyms_of(split_dir, ids.tolist()))
        row_of_pseudonym = {record: k for k, record in enumerate(asked.tolist())}
        row_block_of = dict(zip(pseudonyms_of(split_dir, list(row_block_of)), row_block_of.values(), strict=True))
        rng = np.random.default_rng(args.seed + 2)
        plans: dict[int, list[list[tuple[int, list[str]]]]] = {}
        for size in args.batch:
            requests = [(k, asked[rng.choice(m, size, replace=False)].tolist()) for k in range(args.requests)]
            plans[size] = [requests[c :: args.clients] for c in range(args.clients)]
            released = kernel_releases(split_dir)
            load, decisions = measure_load(args, address, live, plans[size], server.pid, entity_pids, children)
            # The calls the service made, from the entities' own release logs; unbatched it would be s per row block
            # a request touches (the floor's count).
            load["entity_calls"] = kernel_releases(split_dir) - released
            load["entity_calls_unbatched"] = s * sum(
                len({row_block_of[record] for record in chosen}) for _, chosen in requests
            )
            load["entity_cpu_ms_per_call"] = load["entity_cpu_ms_per_request"] * args.requests / load["entity_calls"]
            run.loads.append(load)
            lat = load["latency"]
            print(
                f"load, batch {size}: {args.requests} requests from {args.clients} client {args.clients_as} in "
                f"{load['window_s']:.2f} s: {load['requests_per_s']:.1f} requests/s, p50 {lat['p50_ms']:.1f} ms, "
                f"p99 {lat['p99_ms']:.1f} ms, {load['errors']} errors (load average {load['load_average_after']})",
                flush=True,
            )

            # 7. independent check of every served decision ---------------------------------------
            rows = np.array([row_of_pseudonym[record] for record in decisions], dtype=np.int64)
            served = np.array(list(decisions.values()))
            # The bounds `ppsvm split` declares: every record's range per feature, rounded outwards.
            bounds = np.array([outward_bounds(float(column.min()), float(column.max())) for column in X.T])
            low, high = bounds[:, 0], bounds[:, 1]
            span = high - low
            scaled = (X[rows] - low) / span
            distance = np.zeros((len(rows), mbar))
            for j in range(s):
                B = derive_B(bytes.fromhex(secret_text(args.seed, j).strip()), mbar, nj)
                block = scaled[:, j * nj : (j + 1) * nj]
                distance += ((block[:, None, :] - B[None, :, :]) ** 2).sum(axis=2)
            expected = np.exp(-mu * distance) @ np.asarray(model.u) - model.gamma
            scaling_ok = all(
                tuple(low[j * nj : (j + 1) * nj].tolist()) == sc.low
                and tuple(high[j * nj : (j + 1) * nj].tolist()) == sc.high
                for j, sc in enumerate(model.scaling)
            )
            worst = float(np.max(np.abs(served - expected))) if len(rows) else float("nan")
            run.verification[str(size)] = {
                "checked": int(len(rows)),
                "max_abs_difference": worst,
                "model_scaling_equals_declared_bounds": scaling_ok,
                "ok": bool(len(rows) > 0 and worst <= VERIFY_ATOL and scaling_ok),
            }
            print(
                f"  checked {len(rows)} served decisions against an independent computation: max |difference| "
                f"{worst:.1e} (tolerance {VERIFY_ATOL:g}); model scaling = the declared bounds: {scaling_ok}",
                flush=True,
            )

        # peak memory, read before anything is stopped -------------------------------------------
        run.serve.update(proc_status(server.pid))
        run.serve["cpu_s_total"] = proc_cpu_s(server.pid)
        statuses = [proc_status(pid) for pid in entity_pids]
        run.entities.update(
            {
                "peak_rss_mib": [st["VmHWM"] for st in statuses],
                "rss_at_end_mib": [st["VmRSS"] for st in statuses],
                "cpu_s_total": [proc_cpu_s(pid) for pid in entity_pids],
            }
        )
        stop_process(server)
        run.serve["exit_code"] = server.returncode

        # 8. the floor: the same requests through a bare fan-out to the same entities --------------
        floor_command = [sys.executable, "-m", "benchmarks.fanout_floor", "--federation", str(live)]
        floor, floor_address = start_server("benchmarks.fanout_floor", floor_command, work / "floor.log", children)
        for load in run.loads:
            size = load["batch"]
            load["floor"], _ = measure_load(args, floor_address, live, plans[size], floor.pid, entity_pids, children)
            lat = load["floor"]["latency"]
            print(
                f"floor, batch {size}: {load['floor']['requests_per_s']:.1f} requests/s, p50 {lat['p50_ms']:.1f} ms, "
                f"p99 {lat['p99_ms']:.1f} ms, {load['floor']['errors']} errors; serve reaches "
                f"{load['requests_per_s'] / load['floor']['requests_per_s']:.2f} of its throughput",
                flush=True,
            )
        started = time.perf_counter()
        stop_process(floor)
        stack.close()  # every entity: SIGTERM, then SIGKILL after 10 s
        mark(run, "stop floor and entities", time.perf_counter() - started)
    serve_lines = serve_log.read_text(errors="replace").splitlines()
    run.notes.append(
        f"serve log: {serve_log.stat().st_size} bytes, "
        f"{sum(1 for line in serve_lines if 'refused' in line or 'error' in line.lower())} "
        "lines mentioning refused/error"
    )


def report(args: argparse.Namespace, run: Run, total: float) -> tuple[str, dict[str, str]]:
    r, s = args.row_blocks, args.col_blocks
    phases = [[name, f"{seconds:.1f} s", str(run.load_average.get(name, ""))] for name, seconds in run.phases.items()]
    lines = ["", table(["phase", "wall-clock", "load average after"], phases), ""]
    t = run.train
    other = t["train_seconds"] - (t["kernel_fetch_s"] or 0.0) - t["lp_seconds"]
    lines.append(
        table(
            ["train (ppsvm coordinator train)", ""],
            [
                ["train() in the child (model's training.seconds)", f"{t['train_seconds']:.2f} s"],
                [
                    f"  kernel fetch: {r * s} streamed blocks, {args.rows_per_block:,} x {t['mbar']} each",
                    f"{t['kernel_fetch_s']} s",
                ],
                [f"  LP ({t['lp_solved_by']}, {t['n_train']:,} x {t['mbar']} kernel)", f"{t['lp_seconds']:.2f} s"],
                ["  metadata, record alignment, scaling", f"{other:.2f} s"],
                [
                    "child process wall-clock (imports, model delivery)",
                    f"{run.phases['train (ppsvm coordinator train, child process)']:.2f} s",
                ],
                ["child process CPU (user + system)", f"{t['cpu_s']:.1f} s"],
                ["private (mbar < n_j)", str(t["private"])],
            ],
        )
    )
    lines.append("")
    headers = ["load (Predict over mutual TLS)", *(f"batch {x['batch']}" for x in run.loads)]
    rows = [
        ["requests x ids per request", *(f"{x['requests']:,} x {x['batch']}" for x in run.loads)],
        ["clients", *(f"{x['clients']} {x['clients_as']}" for x in run.loads)],
        ["window (first start to last answer)", *(f"{x['window_s']:.2f} s" for x in run.loads)],
        ["throughput, requests/s", *(f"{x['requests_per_s']:.1f}" for x in run.loads)],
        ["throughput, predictions/s", *(f"{x['predictions_per_s']:.1f}" for x in run.loads)],
        *[
            [f"latency {key.removesuffix('_ms')}", *(f"{x['latency'][key]:.1f} ms" for x in run.loads)]
            for key in ("p50_ms", "p90_ms", "p99_ms", "max_ms", "mean_ms")
        ],
        ["each client's first request, slowest (cold)", *(f"{x['first_request_max_ms']:.1f} ms" for x in run.loads)],
        [
            "latency p99 / max without first requests",
            *(
                f"{x['latency_after_first']['p99_ms']:.1f} / {x['latency_after_first']['max_ms']:.1f} ms"
                for x in run.loads
            ),
        ],
        ["errors (RpcError or wrong reply)", *(str(x["errors"]) for x in run.loads)],
        ["floor: throughput, requests/s", *(f"{x['floor']['requests_per_s']:.1f}" for x in run.loads)],
        *[
            [f"floor: latency {key.removesuffix('_ms')}", *(f"{x['floor']['latency'][key]:.1f} ms" for x in run.loads)]
            for key in ("p50_ms", "p99_ms")
        ],
        ["floor: errors", *(str(x["floor"]["errors"]) for x in run.loads)],
        [
            "serve / floor: throughput, p50, p99",
            *(
                f"{x['requests_per_s'] / x['floor']['requests_per_s']:.2f}, "
                f"{x['latency']['p50_ms'] / x['floor']['latency']['p50_ms']:.2f}, "
                f"{x['latency']['p99_ms'] / x['floor']['latency']['p99_ms']:.2f}"
                for x in run.loads
            ),
        ],
        ["serve CPU per request", *(f"{x['serve_cpu_ms_per_request']:.1f} ms" for x in run.loads)],
        [f"entity CPU per request (all {r * s})", *(f"{x['entity_cpu_ms_per_request']:.1f} ms" for x in run.loads)],
        [
            "entity calls (KernelBlock by ids; unbatched)",
            *(f"{x['entity_calls']:,} ({x['entity_calls_unbatched']:,})" for x in run.loads),
        ],
        ["entity CPU per entity call", *(f"{x['entity_cpu_ms_per_call']:.2f} ms" for x in run.loads)],
        [
            "serve RSS before -> after",
            *(f"{x['serve_rss_before_mib']:.0f} -> {x['serve_rss_after_mib']:.0f} MiB" for x in run.loads),
        ],
        [
            "entities' RSS sum before -> after",
            *(f"{x['entity_rss_sum_before_mib']:.0f} -> {x['entity_rss_sum_after_mib']:.0f} MiB" for x in run.loads),
        ],
        ["load average after", *(str(x["load_average_after"]) for x in run.loads)],
        [
            "distinct ids checked independently / max diff",
            *("{checked} / {max_abs_difference:.1e}".format(**run.verification[str(x["batch"])]) for x in run.loads),
        ],
    ]
    lines.append(table(headers, rows))
    lines.append("")
    peaks = run.entities["peak_rss_mib"]
    lines.append(
        table(
            ["peak RSS (VmHWM / ru_maxrss)", ""],
            [
                ["coordinator, train process", f"{t['peak_rss_mib']:.0f} MiB"],
                [
                    "coordinator, serve process",
                    f"{run.serve['VmHWM']:.0f} MiB "
                    f"(RSS at ready {run.serve['rss_at_ready_mib']:.0f}, at end {run.serve['VmRSS']:.0f})",
                ],
                ["largest entity", f"{max(peaks):.0f} MiB (smallest {min(peaks):.0f})"],
                [
                    f"sum over {len(peaks)} entities",
                    f"{sum(peaks):.0f} MiB (RSS sum at end {sum(run.entities['rss_at_end_mib']):.0f})",
                ],
                [
                    "this driver process",
                    f"{peak_rss_mib():.0f} MiB (the data; split_dataset builds every cell's CSV text in memory)",
                ],
                ["largest client", f"{max(x['client_peak_rss_mib'] for x in run.loads):.0f} MiB"],
            ],
        )
    )
    errors = sum(x["errors"] for x in run.loads)
    verified = all(v["ok"] for v in run.verification.values())
    targets = {
        "zero errors under load": f"{'PASS' if errors == 0 else 'FAIL'} ({errors} errors in "
        f"{sum(x['requests'] for x in run.loads):,} requests"
        + (f"; codes {sorted({c for x in run.loads for c in x['error_codes']})}" if errors else "")
        + ")",
        f"served decisions = independent computation to {VERIFY_ATOL:g}": (
            f"{'PASS' if verified else 'FAIL'} ({sum(v['checked'] for v in run.verification.values())} decisions, "
            f"max |difference| {max(v['max_abs_difference'] for v in run.verification.values()):.1e})"
        ),
    }
    for x in run.loads:
        throughput = x["requests_per_s"] / x["floor"]["requests_per_s"]
        p50 = x["latency"]["p50_ms"] / x["floor"]["latency"]["p50_ms"]
        targets[f"batch {x['batch']}: within 2x of the bare fan-out floor (throughput, p50 latency)"] = (
            f"{'PASS' if throughput >= 0.5 and p50 <= 2.0 and x['floor']['errors'] == 0 else 'FAIL'} "
            f"({x['requests_per_s']:.1f} vs {x['floor']['requests_per_s']:.1f} requests/s = {throughput:.2f}; "
            f"p50 {x['latency']['p50_ms']:.1f} vs {x['floor']['latency']['p50_ms']:.1f} ms = {p50:.2f}x)"
        )
    lines.append("")
    lines.extend(f"target: {name}: {verdict}" for name, verdict in targets.items())
    lines.extend(f"note: {note}" for note in run.notes)
    return "\n".join(lines), targets


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"{QUICK['row_blocks']} x {QUICK['col_blocks']} entities, {QUICK['rows_per_block']:,} training rows "
        f"per row block, {QUICK['requests']} requests",
    )
    parser.add_argument("--row-blocks", type=int, help=f"default {FULL['row_blocks']}")
    parser.add_argument("--col-blocks", type=int, help=f"default {FULL['col_blocks']}")
    parser.add_argument(
        "--features-per-block", type=int, help=f"n_j (mbar = n_j - 1); default {FULL['features_per_block']}"
    )
    parser.add_argument(
        "--rows-per-block",
        type=int,
        help=f"training rows per row block (kernel block rows); default {FULL['rows_per_block']:,}",
    )
    parser.add_argument("--requests", type=int, help=f"Predict requests per batch size; default {FULL['requests']:,}")
    parser.add_argument("--clients", type=int, default=8, help="concurrent clients (default 8)")
    parser.add_argument(
        "--clients-as",
        choices=("processes", "threads"),
        default="processes",
        help="client processes (default) or threads of this process",
    )
    parser.add_argument(
        "--batch",
        type=int,
        nargs="+",
        default=[1, 64],
        help="record ids per request; the load runs once per value, --requests each (default 1 64)",
    )
    parser.add_argument(
        "--start-batch",
        type=int,
        default=8,
        help="start the entity processes this many at a time (0: all in one EntityProcesses; default 8)",
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="seed of data, held-out mask, secrets and request ids (default 0)"
    )
    parser.add_argument("--keep", type=Path, help="keep the split, logs and model in this directory")
    args = parser.parse_args(argv)
    preset = QUICK if args.quick else FULL
    for key, value in preset.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if args.features_per_block < 2:
        parser.error("--features-per-block must be >= 2 (mbar = n_j - 1 >= 1)")

    # SIGTERM unwinds like Ctrl-C, so every child process is stopped on the way out.
    signal.signal(signal.SIGTERM, _interrupt)
    info = machine_info()
    print_machine(info)
    n_entities = args.row_blocks * args.col_blocks
    print(
        f"{args.row_blocks} x {args.col_blocks} = {n_entities} entity processes on loopback, mutual TLS; "
        f"{args.rows_per_block:,} training rows per row block (each entity's kernel block), "
        f"n_j = {args.features_per_block}, "
        f"mbar = {args.features_per_block - 1}, nu = {NU:g}, mu = 1/{args.col_blocks * args.features_per_block}; "
        f"{args.clients} concurrent clients ({args.clients_as}), {args.requests:,} Predict requests of "
        f"{' / '.join(map(str, args.batch))} id(s); seed {args.seed}",
        flush=True,
    )
    print(
        f"layout: {args.row_blocks} row blocks so that every entity's kernel block has {args.rows_per_block:,} rows "
        f"at {args.row_blocks * args.rows_per_block:,} training rows in all "
        f"(8 x 4 would need {8 * args.rows_per_block:,}), and still a "
        f"checkerboard: predictions are routed by row block, kernels multiplied over {args.col_blocks} column blocks; "
        f"n_j = {args.features_per_block} keeps mbar = "
        f"{args.features_per_block - 1} < n_j (privacy rule 3). Entities start "
        f"{args.start_batch or 'all'} at a time\n",
        flush=True,
    )
    started = time.perf_counter()
    run = Run()
    children: list[Any] = []
    settings = {
        "quick": args.quick,
        "row_blocks": args.row_blocks,
        "col_blocks": args.col_blocks,
        "features_per_block": args.features_per_block,
        "rows_per_block": args.rows_per_block,
        "test_fraction": TEST_FRACTION,
        "kernel": "gaussian",
        "mbar": args.features_per_block - 1,
        "nu": NU,
        "mu": 1.0 / (args.col_blocks * args.features_per_block),
        "requests": args.requests,
        "clients": args.clients,
        "clients_as": args.clients_as,
        "batch": args.batch,
        "start_batch": args.start_batch,
        "seed": args.seed,
        "seeds": {
            "data": args.seed,
            "held_out": args.seed + 1,
            "split_shuffle": args.seed,
            "request_ids": args.seed + 2,
            "secrets": f"sha256('ppsvm-benchmark/{NAME}/{args.seed}/j') (benchmark only)",
        },
        "request_timeout_s": REQUEST_TIMEOUT_S,
        "tls": "mutual",
        "host": "127.0.0.1",
    }
    try:
        with tempfile.TemporaryDirectory(prefix="ppsvm-load-") as temporary:
            work = args.keep or Path(temporary)
            work.mkdir(parents=True, exist_ok=True)
            benchmark(args, work, run, children)
    finally:
        for child in children:  # normally all stopped already; after an error or Ctrl-C, not
            if isinstance(child, subprocess.Popen):
                stop_process(child)
            elif child.is_alive():
                child.terminate()
                child.join(timeout=10)
    total = time.perf_counter() - started
    text, targets = report(args, run, total)
    print(text)
    info["load_average_at_end"] = load_average()
    info["wall_clock_s"] = total
    print(f"\nload average at end {info['load_average_at_end']}; total {total:.0f} s")
    rerun = " ".join(
        [
            ".venv/bin/python -m benchmarks.load",
            *(["--quick"] if args.quick else []),
            *(f"--{k.replace('_', '-')} {getattr(args, k)}" for k in FULL if getattr(args, k) != preset[k]),
            *([f"--clients {args.clients}"] if args.clients != 8 else []),
            *(["--clients-as threads"] if args.clients_as == "threads" else []),
            *([f"--batch {' '.join(map(str, args.batch))}"] if args.batch != [1, 64] else []),
            *([f"--start-batch {args.start_batch}"] if args.start_batch != 8 else []),
            *([f"--seed {args.seed}"] if args.seed else []),
        ]
    )
    print(f"rerun: {rerun}")
    path = write_json(
        NAME,
        {
            "machine": info,
            "versions": package_versions(),
            "setting": settings,
            "phases_s": run.phases,
            "load_average_after_phase": run.load_average,
            "train": run.train,
            "serve": run.serve,
            "entities": run.entities,
            "loads": run.loads,
            "verification": run.verification,
            "targets": targets,
            "notes": run.notes,
            "rerun": rerun,
        },
        args.quick,
    )
    print(f"wrote {path.relative_to(ROOT)}")
    ok = all(v.startswith("PASS") for v in targets.values())
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
