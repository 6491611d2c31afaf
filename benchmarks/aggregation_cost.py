"""What secure aggregation costs in ``train()``: the current tree against the commit before it, at 1,000,000 rows.

Issue 25 made each entity of a row block send its kernel share masked (fixed point in Z_2^64 plus pairwise PRG masks,
``ppsvm.core.aggregation``) and the coordinator add the shares mod 2^64 and decode them
(``Session._masked_kernel``); before it, each entity sent its Gaussian block as float64 and the coordinator multiplied
the blocks. Its done-when: "the aggregation costs at most 1.3x in ``train()`` at 1,000,000 rows".

One synthetic dataset (``benchmarks._shared.synthetic`` with n = 40 features, each min-max normalised to exactly
[0, 1], so the data's range and the bounds a newer ``ppsvm split`` declares, [0, 1], scale alike; no records held out)
is split 2 x 2 (two row blocks, two column blocks of n_j = 20 features: every row block combines two entities' blocks)
by each tree's own ``split_dataset`` with the same seed; then the same fixed column-block secrets, record-id key and
(current tree only) pair secrets are written into both, so both trees assemble the same kernel. Per run, a coordinator
process run in that tree's directory (it imports ``ppsvm`` from there first) starts the four entities as real
``python -m ppsvm entity`` processes of that tree on loopback (mutual TLS) and times ``train()`` once: Gaussian kernel,
basis "paper", mbar = 19, nu = 1, mu = 1/n (the width entities serve: no rescaling), no tuning, distribute=False.
Measured there:

- ``train()`` wall-clock and CPU time (the coordinator process, all threads),
- the kernel fetch inside it (``Session.kernel``, wrapped to time it in the same process: wall and CPU),
- the LP (the model's own ``lp_seconds``), the entities' CPU time during ``train()`` (utime + stime from /proc),
- the coordinator's peak RSS during ``train()`` (VmHWM, reset just before it) and each entity's peak RSS.

The baseline (``--baseline``, default ``0ab4af5``, the commit before aggregation) is checked out in a temporary
``git worktree``, removed afterwards. Runs alternate between the trees, each pair in the other order than the last
(baseline/current, current/baseline, ...), so a drift of the machine's load falls on both; the ratio current/baseline
is given per pair (min, median, max) and as the ratio of the medians. Both trees' models must agree (u, gamma to 1e-6
relative) and, from the first run of each, their kernels (to 1e-9, rows matched by pseudonym; the masked one decodes
with 2^-43 rounding per share). Then, in this process (current tree), the aggregation primitives at ``--rows`` x 19:
the Gaussian block as the baseline's entity computes it and the log-share the current one sends, ``masked_shares``
with no peer (encoding alone) and with one peer (encoding and one PRG stream), the record-list digest that binds the
masks, the coordinator's fold of one reply (float multiply against uint64 add), ``decode_sum`` and the ``exp`` that
moved from the entities to the coordinator.

The current tree is the working directory as it is (HEAD plus uncommitted work): its ``git status`` and a hash of its
diff are recorded at the start and the end, since other work may change it during a run.

    python -m benchmarks.aggregation_cost               # 1,000,000 rows, 3 pairs of runs
    python -m benchmarks.aggregation_cost --quick       # 100,000 rows, 1 pair (writes aggregation_cost-quick.json)
    python -m benchmarks.aggregation_cost --rows 400000 --repeats 5 --baseline 0ab4af5

Writes results/aggregation_cost.json. Entities get --start-timeout s (default 600) to start, --start-batch (default 4)
at a time: a 500,000-row cell missed EntityProcesses' own 70-80 s on this 2-core machine while other jobs kept its load
average at 5-15. The full run took 15 minutes here (870 s: the two splits 3.5 min, entity start-up 50-130 s per run,
train() 7-13 s per run, the primitives 1 min); ``--quick`` 70-90 s. Wall-clock times on a shared machine vary by
+-30% from run to run: the CPU time of train() over the coordinator and the entities is the steadier comparison.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._shared import (
    MBAR,
    NU,
    load_average,
    machine_info,
    median,
    peak_rss_mib,
    print_machine,
    proc_status,
    reset_peak_rss,
    synthetic,
    table,
    timed,
    write_json,
)

ROOT = Path(__file__).resolve().parents[1]
THIS_FILE = Path(__file__).resolve()
NAME = "aggregation_cost"
ENTITY_ROWS, ENTITY_COLS = 2, 2
# n_j = mbar + 1 features per column block (privacy rule 3: mbar < n_j), so n = 40 in all.
FEATURES_PER_BLOCK = MBAR + 1
N_FEATURES = ENTITY_COLS * FEATURES_PER_BLOCK
MU = 1.0 / N_FEATURES
DEFAULT_ROWS, QUICK_ROWS = 1_000_000, 100_000
DEFAULT_BASELINE = "0ab4af5"
# Issue 25's done-when: train() with aggregation at most this many times train() without, at 1,000,000 rows.
RATIO_TARGET = 1.3
# Models of the two trees must agree to this (relative); kernels to KERNEL_ATOL (absolute; entries in (0, 1]).
MODEL_RTOL = 1e-6
KERNEL_ATOL = 1e-9
TREES = ("baseline", "current")
# Entities started at once (--start-batch), the seconds EntityProcesses waits for a group (--start-timeout; its own
# 60 s plus 5 s per process was missed by 500,000-row cells at a load average of 13 on 2 cores) and tries per group.
# Starts are outside the timed train().
DEFAULT_START_BATCH = 4
DEFAULT_START_TIMEOUT_S = 600.0
START_ATTEMPTS = 2
MiB = 2**20
# Rows of a reply folded into K at a time in the primitives' timing (replies arrive as row batches of a few MiB).
_FOLD_ROWS = 8192


# --- workers: run in one tree's directory, so every ppsvm import comes from it ------------------------------------


def _check_tree(tree: Path) -> str:
    """Fail unless ``ppsvm`` is imported from ``tree``; the path it was imported from."""
    import ppsvm

    where = Path(ppsvm.__file__).resolve()
    if not where.is_relative_to(tree.resolve()):
        raise SystemExit(f"ppsvm imported from {where}, not from the tree {tree}: check the working directory")
    return str(where)


def split_worker(tree: Path, data: Path, out_dir: Path, seed: int) -> None:
    """Split the saved dataset 2 x 2 with this tree's ``split_dataset``; print the federation path and sizes."""
    _check_tree(tree)
    from ppsvm.data.dataset import Dataset
    from ppsvm.data.partition import SplitOptions, split_dataset

    arrays = np.load(data)
    X, y = arrays["X"], arrays["y"]
    dataset = Dataset(
        ids=np.array([str(k) for k in range(len(y))]),
        X=X,
        y=y,
        feature_names=tuple(f"x{k}" for k in range(X.shape[1])),
        source=f"{NAME} synthetic(seed={seed}, n_features={X.shape[1]}), min-max normalised",
    )
    options = SplitOptions(
        rows=ENTITY_ROWS, cols=ENTITY_COLS, out_dir=out_dir, test_fraction=0.0, seed=seed, overwrite=True
    )
    result = split_dataset(dataset, options)
    print(json.dumps({"federation": str(result.federation_path), "n_train": result.n_train, "n_test": result.n_test}))


def cpu_seconds_of(pid: int) -> float:
    """User plus system CPU seconds a live process has used (all its threads), from /proc/<pid>/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_entities(
    stack: contextlib.ExitStack, configs: list[Path], batch: int, timeout: float
) -> tuple[list[Any], list[str], int]:
    """Start ``ppsvm entity`` for each config, ``batch`` at a time, each group within ``timeout`` s (tried again once
    if it does not start in time).

    Returns
    -------
    processes : list of subprocess.Popen
        The running entities, in config order (stopped when ``stack`` closes).
    addresses : list of str
        Where each listens, in config order.
    attempts : int
        Start attempts made, over all groups.
    """
    import ppsvm.processes
    from ppsvm.errors import EntityError
    from ppsvm.processes import EntityProcesses

    # Both trees' EntityProcesses read this module constant when they wait (plus 5 s per process).
    ppsvm.processes.START_TIMEOUT_S = timeout

    processes: list[Any] = []
    addresses: list[str] = []
    attempts = 0
    for first in range(0, len(configs), batch):
        for attempt in range(1, START_ATTEMPTS + 1):
            attempts += 1
            try:
                group = stack.enter_context(EntityProcesses(configs[first : first + batch]))
                break
            except EntityError as error:  # EntityProcesses has stopped the group's processes
                if attempt == START_ATTEMPTS:
                    raise
                print(f"entities did not start ({error}); starting them again", file=sys.stderr, flush=True)
        processes += group.processes
        addresses += group.addresses
    return processes, addresses, attempts


def coordinator_worker(
    tree: Path, federation_path: Path, out: Path, save_kernel: Path | None, start_batch: int, start_timeout: float
) -> None:
    """Start this tree's entities, time one ``train()`` and the kernel fetch inside it; write the figures to ``out``.

    With ``save_kernel``, fetch the training kernel once more after the timed run and save it with its row ids.
    """
    imported_from = _check_tree(tree)
    from ppsvm.config import federation_at_addresses, load_federation
    from ppsvm.coordinator.federation import Session
    from ppsvm.coordinator.train import TrainOptions, train
    from ppsvm.core.model import Model
    from ppsvm.memory import limit_malloc_arenas

    limit_malloc_arenas()  # as the ppsvm command does: this process stands for `ppsvm coordinator train`
    logging.basicConfig(level=logging.WARNING)
    fetches: list[dict[str, Any]] = []
    kernel = Session.kernel

    @functools.wraps(kernel)
    def timed_kernel(self: Session, *args: Any, **kwargs: Any) -> np.ndarray:
        wall, cpu = time.perf_counter(), time.process_time()
        K = kernel(self, *args, **kwargs)
        fetches.append({"wall_s": time.perf_counter() - wall, "cpu_s": time.process_time() - cpu, "shape": K.shape})
        return K

    Session.kernel = timed_kernel  # type: ignore[method-assign]  # both trees' train() call it once for "train"
    planned = load_federation(federation_path)
    configs = [federation_path.parent / f"{e.id}.toml" for e in planned.entities]
    figures: dict[str, Any] = {"ppsvm": imported_from}
    started = time.perf_counter()
    with contextlib.ExitStack() as stack:
        processes, addresses, figures["entity_start_attempts"] = start_entities(
            stack, configs, start_batch, start_timeout
        )
        figures["entity_start_s"] = time.perf_counter() - started
        live = federation_path.parent / "federation.live.toml"
        live.write_text(federation_at_addresses(planned, addresses), encoding="utf-8")
        federation = load_federation(live)
        options = TrainOptions(kernel="gaussian", basis="paper", mbar=MBAR, nu=NU, mu=MU, distribute=False)
        pids = [process.pid for process in processes]
        entity_cpu = [cpu_seconds_of(pid) for pid in pids]
        figures["coordinator_rss_before_train_mib"] = proc_status()["VmRSS"]
        reset_peak_rss()
        wall, cpu = time.perf_counter(), time.process_time()
        model = train(federation, options)
        figures["train_s"] = time.perf_counter() - wall
        figures["train_cpu_s"] = time.process_time() - cpu
        figures["coordinator_peak_rss_mib"] = peak_rss_mib()
        figures["entity_cpu_s"] = [cpu_seconds_of(pid) - before for pid, before in zip(pids, entity_cpu, strict=True)]
        figures["entity_peak_rss_mib"] = [peak_rss_mib(pid) for pid in pids]
        # The CPU train() cost on every process: far less sensitive than wall-clock time to other jobs' load.
        figures["total_cpu_s"] = figures["train_cpu_s"] + sum(figures["entity_cpu_s"])
        if len(fetches) != 1:
            raise SystemExit(f"train() fetched {len(fetches)} kernels, expected one")
        figures["kernel_fetch_s"] = fetches[0]["wall_s"]
        figures["kernel_fetch_cpu_s"] = fetches[0]["cpu_s"]
        figures["kernel_shape"] = list(fetches[0]["shape"])
        if save_kernel is not None:
            with Session(federation) as session:
                blocks, scaling = session.survey()
                K = session.kernel("gaussian", MBAR, MU, scaling, blocks, "train")
                np.savez(save_kernel, K=K, ids=np.concatenate([b.train_ids for b in blocks]))
    assert isinstance(model, Model)  # the synthetic labels are +-1: a two-class model
    figures.update(
        lp_s=model.training["lp_seconds"],
        lp_formulation=model.training["formulation"],
        lp_iterations=model.training["lp_iterations"],
        objective=model.training["objective"],
        n_train=model.training["n_train"],
        private=model.private,
        u=list(model.u),
        gamma=model.gamma,
    )
    out.write_text(json.dumps(figures), encoding="utf-8")


# --- the driver ----------------------------------------------------------------------------------------------------


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], check=True, capture_output=True, text=True).stdout.strip()


def tree_state() -> dict[str, Any]:
    """HEAD, the files ``git status`` lists and a hash of ``git diff HEAD``: what "the current tree" was."""
    return {
        "head": git("rev-parse", "HEAD"),
        "status": git("status", "--porcelain").splitlines(),
        "diff_sha256": hashlib.sha256(git("diff", "HEAD").encode()).hexdigest(),
    }


@contextmanager
def worktree(ref: str, parent: Path) -> Iterator[Path]:
    """``ref`` checked out (detached) in a temporary git worktree under ``parent``; removed on exit."""
    path = parent / "baseline-tree"
    git("worktree", "add", "--detach", str(path), ref)
    try:
        yield path
    finally:
        git("worktree", "remove", "--force", str(path))


def run_in(tree: Path, *args: str) -> str:
    """Run this file with ``args`` in a fresh process whose ``ppsvm`` (and ``benchmarks``) come from ``tree``.

    ``python -c`` and ``python -m`` (the entities) look in their working directory first, before the installed
    (editable) ppsvm: with the tree as the working directory, every import comes from it (checked by _check_tree).
    """
    argv = [str(THIS_FILE), *args]
    launcher = f"import runpy, sys; sys.argv = {argv!r}; runpy.run_path({str(THIS_FILE)!r}, run_name='__main__')"
    command = [sys.executable, "-c", launcher]
    return subprocess.run(command, cwd=tree, stdout=subprocess.PIPE, text=True, check=True).stdout


def make_data(rows: int, seed: int, path: Path) -> None:
    """``synthetic(rows)`` with every feature min-max normalised to exactly [0, 1], saved to ``path`` (npz).

    Exactly 0 and 1 in every column: the baseline scales by the training records' range, the current tree by the
    bounds its split declares (the range rounded outwards), and both are then [0, 1]: the same kernel.
    """
    X, y = synthetic(rows, seed, N_FEATURES)
    low, high = X.min(axis=0), X.max(axis=0)
    X = (X - low) / (high - low)
    assert (X.min(axis=0) == 0).all() and (X.max(axis=0) == 1).all()
    np.savez(path, X=X, y=y)


def prepare_split(name: str, tree: Path, data: Path, work: Path, seed: int) -> dict[str, Any]:
    """This tree's 2 x 2 split of the data, with the same fixed secrets and record-id key as the other tree's."""
    from ppsvm.api.inprocess import fixed_secret
    from ppsvm.data.partition import ID_KEY_FILE

    out_dir = work / f"split-{name}"
    started = time.perf_counter()
    result = json.loads(run_in(tree, "--split-worker", str(tree), str(data), str(out_dir), str(seed)))
    result["seconds"] = time.perf_counter() - started
    # The same B_j and pseudonyms in both trees; the pair secrets (current tree) only mask, fixed for reruns.
    written = [*sorted(out_dir.glob("column-block-*.secret")), out_dir / ID_KEY_FILE, *sorted(out_dir.glob("pair-*"))]
    for path in written:
        path.write_text(fixed_secret(NAME, path.name, seed), encoding="utf-8")
    result["secrets_written"] = [path.name for path in written]
    return result


def coordinator_run(
    name: str, tree: Path, federation: Path, out: Path, save_kernel: Path | None, args: argparse.Namespace
) -> dict[str, Any]:
    """One timed ``train()`` in a coordinator process of ``tree``; its figures."""
    extra = ["--start-batch", str(args.start_batch), "--start-timeout", str(args.start_timeout)]
    if save_kernel is not None:
        extra += ["--save-kernel", str(save_kernel)]
    run_in(tree, "--coordinator-worker", str(tree), str(federation), str(out), *extra)
    figures = json.loads(out.read_text(encoding="utf-8"))
    figures["tree"] = name
    return figures


def consume(batches: Iterator[np.ndarray], out: np.ndarray) -> None:
    """Write the masked batches into ``out`` as the entity does (row by row over its share's memory)."""
    start = 0
    for batch in batches:
        out[start : start + len(batch)] = batch
        start += len(batch)


def primitives(rows: int, seed: int, repeats: int) -> dict[str, Any]:
    """Time the aggregation primitives at ``rows`` x mbar in this process (the current tree); median seconds."""
    from ppsvm.core.aggregation import SCALE_BITS, decode_sum, log_share, masked_shares, records_digest
    from ppsvm.core.kernels import combine_into, gaussian_kernel
    from ppsvm.core.randomness import record_pseudonyms

    rng = np.random.default_rng(seed)
    A, B = rng.random((rows, FEATURES_PER_BLOCK)), rng.random((MBAR, FEATURES_PER_BLOCK))
    secret, context = rng.bytes(32), rng.bytes(32)
    block = gaussian_kernel(A, B, MU)
    share = log_share("gaussian", A, B, MU)
    other = log_share("gaussian", rng.random((rows, FEATURES_PER_BLOCK)), B, MU)
    out = np.empty(share.shape, dtype=np.uint64)
    # The coordinator's K is Fortran-ordered; replies arrive as C-ordered row batches folded into it.
    K = np.ones(share.shape, order="F")
    sums = np.zeros(share.shape, order="F").view(np.uint64)
    scratch = np.empty_like(share)

    def masked(own: str, peers: dict[str, bytes], values: np.ndarray) -> Callable[[], np.ndarray]:
        def run() -> np.ndarray:
            consume(masked_shares(values, own, peers, context), out)
            return out

        return run

    def fold_add() -> None:
        for start in range(0, rows, _FOLD_ROWS):
            part = sums[start : start + _FOLD_ROWS]
            np.add(part, out[start : start + _FOLD_ROWS], out=part)

    fold = functools.partial(combine_into, "gaussian")
    # decode_sum works in place: after the first call it decodes float bits as integers, at the same cost.
    undecoded = out.copy()
    ids = record_pseudonyms(rng.bytes(32), [str(k) for k in range(rows)])
    calls: dict[str, tuple[str, Callable[[], Any]]] = {
        "gaussian_block": ("entity, baseline: K(A, B') = exp(-mu ||a - b||^2)", lambda: gaussian_kernel(A, B, MU)),
        "log_share": ("entity, current: log-share -mu ||a - b||^2", lambda: log_share("gaussian", A, B, MU)),
        "encode_only": ("entity, current: masked_shares, no peer (encoding)", masked("r0c0", {}, share)),
        "masked_shares_1_peer": ("entity, current: masked_shares, 1 peer", masked("r0c0", {"r0c1": secret}, share)),
        "records_digest": ("entity, current: records_digest of as many ids", lambda: records_digest(ids)),
        "fold_multiply": ("coordinator, baseline: fold one block (multiply)", functools.partial(fold, K, block)),
        "fold_add": ("coordinator, current: fold one share (uint64 add)", fold_add),
        "decode_sum": ("coordinator, current: decode_sum", lambda: decode_sum(undecoded)),
        "exp": ("coordinator, current: exp of the decoded sum", lambda: np.exp(share, out=scratch)),
    }
    entries: dict[str, Any] = {}
    for key, (label, call) in calls.items():
        timing = timed(call, repeats, float("inf"))
        entries[key] = {"what": label, "seconds": timing.wall, "median_s": median(timing.wall)}
    entries["prg_1_peer_s"] = entries["masked_shares_1_peer"]["median_s"] - entries["encode_only"]["median_s"]
    # Correctness at this size: two entities' masked shares add to their exact sum within the rounding.
    first = masked("r0c0", {"r0c1": secret}, share)().copy()
    second = masked("r0c1", {"r0c0": secret}, other)().copy()
    decoded = decode_sum(first + second)
    entries["decode_max_abs_error"] = float(np.abs(decoded - (share + other)).max())
    # Each share is rounded to within half a unit of 2^-SCALE_BITS.
    entries["scale_bits"] = SCALE_BITS
    entries["rounding_bound"] = 2 * 2.0 ** -(SCALE_BITS + 1)
    entries["shape"] = [rows, MBAR]
    return entries


def kernel_releases(split_dir: Path) -> dict[str, int]:
    """The KernelBlock releases the entities of a split logged, and how many of them were masked shares."""
    events = [
        json.loads(line)
        for path in sorted(split_dir.glob("*.releases.jsonl"))
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    blocks = [event for event in events if event.get("rpc") == "KernelBlock"]
    return {"kernel_blocks": len(blocks), "masked": sum(bool(event.get("masked")) for event in blocks)}


def relative(a: np.ndarray | float, b: np.ndarray | float) -> float:
    """max |a - b| / max |b|."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return float(np.abs(a - b).max() / max(float(np.abs(b).max()), 1e-300))


def compare_kernels(baseline: Path, current: Path) -> dict[str, Any]:
    """The two trees' training kernels, rows matched by pseudonym: max absolute difference."""
    old, new = np.load(baseline), np.load(current)
    if sorted(old["ids"].tolist()) != sorted(new["ids"].tolist()):
        return {"same_records": False}
    order_old, order_new = np.argsort(old["ids"]), np.argsort(new["ids"])
    difference = float(np.abs(old["K"][order_old] - new["K"][order_new]).max())
    return {
        "same_records": True,
        "same_row_order": bool(np.array_equal(old["ids"], new["ids"])),
        "shape": list(old["K"].shape),
        "max_abs_difference": difference,
        "agrees": difference <= KERNEL_ATOL,
    }


def agreement(runs: list[dict[str, Any]], kernels: dict[str, Any] | None) -> dict[str, Any]:
    """Every current run's model against every baseline run's: largest relative differences of u and gamma."""
    old = [r for r in runs if r["tree"] == "baseline"]
    new = [r for r in runs if r["tree"] == "current"]
    u = max(relative(n["u"], o["u"]) for n in new for o in old)
    gamma = max(relative(n["gamma"], o["gamma"]) for n in new for o in old)
    objective = max(relative(n["objective"], o["objective"]) for n in new for o in old)
    return {
        "u_max_rel_difference": u,
        "gamma_rel_difference": gamma,
        "objective_rel_difference": objective,
        "models_agree": u <= MODEL_RTOL and gamma <= MODEL_RTOL,
        "kernels": kernels,
    }


def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per tree, the median of each figure over its runs."""
    keys = (
        "train_s",
        "train_cpu_s",
        "kernel_fetch_s",
        "kernel_fetch_cpu_s",
        "total_cpu_s",
        "lp_s",
        "coordinator_peak_rss_mib",
        "coordinator_rss_before_train_mib",
        "entity_start_s",
    )
    result: dict[str, Any] = {}
    for name in TREES:
        mine = [r for r in runs if r["tree"] == name]
        entry = {key: median([r[key] for r in mine]) for key in keys}
        entry["train_without_fetch_s"] = median([r["train_s"] - r["kernel_fetch_s"] for r in mine])
        entry["entity_cpu_s"] = median([sum(r["entity_cpu_s"]) for r in mine])
        entry["entity_peak_rss_mib"] = median([max(r["entity_peak_rss_mib"]) for r in mine])
        entry["runs"] = len(mine)
        result[name] = entry
    return result


def pair_ratios(runs: list[dict[str, Any]], key: str) -> list[float]:
    """current / baseline of ``key`` in each pair of runs (runs are stored pair by pair)."""
    ratios = []
    for first, second in zip(runs[0::2], runs[1::2], strict=True):
        by_tree = {first["tree"]: first, second["tree"]: second}
        ratios.append(by_tree["current"][key] / by_tree["baseline"][key])
    return ratios


def spread(values: list[float]) -> str:
    return f"{min(values):.2f} / {median(values):.2f} / {max(values):.2f}"


def results_table(summaries: dict[str, Any], runs: list[dict[str, Any]], rows: int) -> str:
    old, new = summaries["baseline"], summaries["current"]

    def line(label: str, key: str, unit: str = "s", digits: int = 2) -> list[str]:
        cells = [f"{old[key]:.{digits}f} {unit}", f"{new[key]:.{digits}f} {unit}"]
        return [label, *cells, f"{new[key] / old[key]:.2f}x" if old[key] else "-"]

    reply = rows // ENTITY_ROWS * MBAR * 8 / MiB
    body = [
        line("train(), wall (median)", "train_s"),
        ["  per run", *(", ".join(f"{r['train_s']:.2f}" for r in runs if r["tree"] == t) for t in TREES), ""],
        line("  kernel fetch (Session.kernel), wall", "kernel_fetch_s"),
        line("  train() without the kernel fetch", "train_without_fetch_s"),
        line("  LP alone (the model's lp_seconds)", "lp_s"),
        line("train(), coordinator CPU (all threads)", "train_cpu_s"),
        line("  kernel fetch, coordinator CPU", "kernel_fetch_cpu_s"),
        line("entities' CPU during train(), 4 summed", "entity_cpu_s"),
        line("CPU of train(), coordinator + entities", "total_cpu_s"),
        line("coordinator peak RSS during train()", "coordinator_peak_rss_mib", "MiB", 0),
        line("coordinator RSS before train()", "coordinator_rss_before_train_mib", "MiB", 0),
        line("largest entity peak RSS", "entity_peak_rss_mib", "MiB", 0),
        line("entity start-up (4 processes)", "entity_start_s"),
        ["reply per entity (rows/2 x mbar x 8 B)", f"{reply:.1f} MiB", f"{reply:.1f} MiB", "1.00x"],
    ]
    return table([f"m = {rows:,}, 2 x 2, mbar = {MBAR}", "baseline", "current", "current/baseline"], body)


def primitives_table(entries: dict[str, Any]) -> str:
    keys = [k for k, v in entries.items() if isinstance(v, dict) and "what" in v]
    body = []
    for key in keys:
        entry = entries[key]
        body.append([entry["what"], f"{entry['median_s'] * 1000:.0f} ms"])
    body.append(["PRG of one peer (1 peer - no peer)", f"{entries['prg_1_peer_s'] * 1000:.0f} ms"])
    rows, mbar = entries["shape"]
    return table([f"primitive, {rows:,} x {mbar} in-process (median)", "time"], body)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, help=f"training rows (default {DEFAULT_ROWS:,}; --quick {QUICK_ROWS:,})")
    parser.add_argument("--repeats", type=int, help="pairs of runs, baseline and current (default 3; --quick 1)")
    parser.add_argument("--baseline", default=DEFAULT_BASELINE, help=f"git ref before aggregation ({DEFAULT_BASELINE})")
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_ROWS:,} rows, 1 pair of runs")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--start-batch",
        type=int,
        default=DEFAULT_START_BATCH,
        help=f"start the entity processes this many at a time (default {DEFAULT_START_BATCH})",
    )
    parser.add_argument(
        "--start-timeout",
        type=float,
        default=DEFAULT_START_TIMEOUT_S,
        help=f"seconds to wait for a group of entities to start (default {DEFAULT_START_TIMEOUT_S:g})",
    )
    parser.add_argument("--keep", type=Path, help="keep the data, splits and kernels in this directory")
    parser.add_argument("--split-worker", nargs=4, help=argparse.SUPPRESS)
    parser.add_argument("--coordinator-worker", nargs=3, type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--save-kernel", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.split_worker:
        tree, data, out_dir, seed = args.split_worker
        split_worker(Path(tree), Path(data), Path(out_dir), int(seed))
        return 0
    if args.coordinator_worker:
        tree, federation, out = args.coordinator_worker
        coordinator_worker(tree, federation, out, args.save_kernel, args.start_batch, args.start_timeout)
        return 0
    rows = args.rows or (QUICK_ROWS if args.quick else DEFAULT_ROWS)
    repeats = args.repeats or (1 if args.quick else 3)

    info = machine_info()
    print_machine(info)
    baseline_commit = git("rev-parse", f"{args.baseline}^{{commit}}")
    state = tree_state()
    print(
        f"{ENTITY_ROWS} x {ENTITY_COLS} split, {rows:,} training rows, n = {N_FEATURES} (n_j = {FEATURES_PER_BLOCK}), "
        f"gaussian, basis paper, mbar = {MBAR}, nu = {NU:g}, mu = 1/{N_FEATURES}, distribute=False; {repeats} pair(s) "
        f"of runs\nbaseline {args.baseline} = {baseline_commit[:10]}; current = HEAD {state['head'][:10]} plus "
        f"{len(state['status'])} changed or new file(s)\n",
        flush=True,
    )
    started = time.perf_counter()
    setting = {
        "rows": rows,
        "entities": f"{ENTITY_ROWS} x {ENTITY_COLS}",
        "n_features": N_FEATURES,
        "n_j": FEATURES_PER_BLOCK,
        "mbar": MBAR,
        "nu": NU,
        "mu": MU,
        "kernel": "gaussian",
        "basis": "paper",
        "distribute": False,
        "test_fraction": 0.0,
        "repeats": repeats,
        "start_batch": args.start_batch,
        "start_timeout_s": args.start_timeout,
        "seed": args.seed,
        "baseline": {"ref": args.baseline, "commit": baseline_commit},
        "current": {"path": str(ROOT), "at_start": state},
    }
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="ppsvm-aggregation-") as temporary:
        work = args.keep or Path(temporary)
        work.mkdir(parents=True, exist_ok=True)
        with worktree(baseline_commit, Path(temporary)) as baseline_tree:
            trees = {"baseline": baseline_tree, "current": ROOT}
            data = work / "data.npz"
            make_data(rows, args.seed, data)
            splits = {}
            for name in TREES:
                splits[name] = prepare_split(name, trees[name], data, work, args.seed)
                print(f"split with the {name} tree in {splits[name]['seconds']:.0f} s", flush=True)
            saved = {name: work / f"kernel-{name}.npz" for name in TREES}
            for pair in range(repeats):
                for name in TREES if pair % 2 == 0 else TREES[::-1]:
                    first = not any(r["tree"] == name for r in runs)
                    out = work / f"run-{pair}-{name}.json"
                    run = coordinator_run(
                        name,
                        trees[name],
                        Path(splits[name]["federation"]),
                        out,
                        saved[name] if first else None,
                        args,
                    )
                    run["pair"] = pair
                    runs.append(run)
                    print(
                        f"pair {pair} {name:<8}  train() {run['train_s']:6.2f} s  kernel fetch "
                        f"{run['kernel_fetch_s']:5.2f} s  LP {run['lp_s']:5.2f} s  coordinator peak RSS "
                        f"{run['coordinator_peak_rss_mib']:4.0f} MiB  entities' CPU {sum(run['entity_cpu_s']):5.1f} s"
                        f"  (load {load_average()})",
                        flush=True,
                    )
            kernels = compare_kernels(saved["baseline"], saved["current"])
            releases = {name: kernel_releases(Path(splits[name]["federation"]).parent) for name in TREES}
    print("\ntiming the aggregation primitives in-process ...", flush=True)
    parts = primitives(rows, args.seed, max(repeats, 3))
    state_at_end = tree_state()
    setting["current"]["at_end"] = state_at_end
    setting["current"]["changed_during_run"] = state_at_end != state

    summaries = summary(runs)
    train_ratios = pair_ratios(runs, "train_s")
    fetch_ratios = pair_ratios(runs, "kernel_fetch_s")
    cpu_ratios = pair_ratios(runs, "total_cpu_s")
    agreed = agreement(runs, kernels)
    ratio = summaries["current"]["train_s"] / summaries["baseline"]["train_s"]
    verdict = "PASS" if median(train_ratios) <= RATIO_TARGET else "FAIL"
    print("\n" + results_table(summaries, runs, rows))
    print(
        f"\ntrain() current/baseline per pair (min / median / max): {spread(train_ratios)}; ratio of the medians "
        f"{ratio:.2f}x\nkernel fetch current/baseline per pair (min / median / max): {spread(fetch_ratios)}\n"
        f"CPU of train(), coordinator + entities, current/baseline per pair (min / median / max): {spread(cpu_ratios)}"
    )
    print("\n" + primitives_table(parts))
    print(
        f"masked sum of two entities' shares decoded to within {parts['decode_max_abs_error']:.3e} of the exact sum "
        f"(rounding bound 2^-{parts['scale_bits']} = {parts['rounding_bound']:.3e})"
    )
    logged = (f"{name} {releases[name]['masked']} of {releases[name]['kernel_blocks']} masked" for name in TREES)
    print(f"kernel releases in the entities' logs: {'; '.join(logged)}")
    kernel_text = (
        "not compared (different records)"
        if not kernels.get("same_records")
        else f"max |difference| {kernels['max_abs_difference']:.1e} ({'agree' if kernels['agrees'] else 'DIFFER'})"
    )
    print(
        f"\nmodels: u differs by at most {agreed['u_max_rel_difference']:.1e} relative, gamma by "
        f"{agreed['gamma_rel_difference']:.1e}, objective by {agreed['objective_rel_difference']:.1e} "
        f"({'agree' if agreed['models_agree'] else 'DIFFER'} to {MODEL_RTOL:g}); kernels: {kernel_text}"
    )
    target = (
        f"train() with aggregation <= {RATIO_TARGET}x without at {rows:,} rows (median of the pairs): {verdict} "
        f"({median(train_ratios):.2f}x; pairs {spread(train_ratios)})"
    )
    if rows != DEFAULT_ROWS:
        target += f" [the target is stated at {DEFAULT_ROWS:,} rows]"
    print(f"target: {target}")
    if setting["current"]["changed_during_run"]:
        print("warning: the current tree changed during the run (git status or diff differ from the start)")
    info["load_average_at_end"] = load_average()
    info["wall_clock_s"] = time.perf_counter() - started
    print(f"\nload average at end {info['load_average_at_end']}; total {info['wall_clock_s']:.0f} s")
    payload = {
        "machine": info,
        "setting": setting,
        "splits": splits,
        "runs": runs,
        "summary": summaries,
        "ratios": {
            "train_per_pair": train_ratios,
            "train_ratio_of_medians": ratio,
            "kernel_fetch_per_pair": fetch_ratios,
            "total_cpu_per_pair": cpu_ratios,
        },
        "agreement": agreed,
        "kernel_releases": releases,
        "primitives": parts,
        "target": target,
        "complete": True,
    }
    path = write_json(NAME, payload, args.quick)
    print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
