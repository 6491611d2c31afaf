"""End-to-end distributed training time versus the LP alone, by number of training rows.

For each size m: a synthetic 20-feature dataset (noisy nonlinear rule, 5% held out) is split
4 x 1 (four row blocks, one column block: n_j = 20 > mbar = 19, so privacy rule 3 holds),
the four entities run as real processes over gRPC, and a coordinator process times

- the kernel fetch alone (Session.kernel: four entities compute K(A_i1, B_1') concurrently,
  stream it back, the coordinator aligns and stacks it),
- ``ppsvm.coordinator.train.train()`` end to end (metadata, records and ranges in one round, alignment,
  scaling, kernel, LP) with
  kernel="gaussian", mbar=19, nu=1, mu=1/20 fixed (no tuning), distribute=False,

each repeated 3 times (median reported). The coordinator runs in its own process so its peak
RSS is its own. Then, in this process, on the same assembled K: every formulation of
ppsvm.core.lp (median of 3; cvxpy-primal skipped above 40,000 rows, cvxpy-dual above 160,000),
objectives checked against highs-dual, and scikit-learn's SVC(kernel="rbf", gamma=mu) on the
pooled, [0, 1]-scaled training rows (skipped above --svc-max rows).

    python benchmarks/train_scaling.py [--quick] [--sizes 10000 40000 160000] [--svc-max 40000]
"""

from __future__ import annotations

import argparse
import json
import logging
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._shared import (
    AGREEMENT_RTOL,
    MBAR,
    MU,
    N_FEATURES,
    NU,
    SKIP_ABOVE,
    formulations_in_order,
    load_average,
    machine_info,
    median,
    peak_rss_mib,
    print_machine,
    relative_gap,
    seconds_text,
    skipped,
    synthetic,
    table,
    time_formulation,
    timed,
    write_json,
)
from ppsvm.api.inprocess import fixed_secret

ROOT = Path(__file__).resolve().parents[1]
NAME = "train_scaling"
ENTITY_ROWS, ENTITY_COLS = 4, 1
TEST_FRACTION = 0.05
RATIO_TARGET = 1.3
TARGET_ROWS, TARGET_SECONDS = 40_000, 3.0


# --- the coordinator process ---------------------------------------------------------------------


def run_coordinator(federation_path: Path, out: Path, repeats: int, mu: float) -> None:
    """Start the entities, time the kernel fetch and train(), save K and the timings to ``out``."""
    import resource

    from ppsvm.config import federation_at_addresses, load_federation
    from ppsvm.coordinator.federation import Session
    from ppsvm.coordinator.train import TrainOptions, train
    from ppsvm.processes import EntityProcesses

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
            fetch = lambda: session.kernel("gaussian", MBAR, mu, scaling, blocks, "train")  # noqa: E731
            fetching = timed(fetch, repeats, single_above=float("inf"))
            K = fetching.result
            K_test = session.kernel("gaussian", MBAR, mu, scaling, blocks, "test")
        figures["kernel_fetch_s"] = fetching.wall

        options = TrainOptions(kernel="gaussian", mbar=MBAR, nu=NU, mu=mu, distribute=False)
        training = [timed(lambda: train(federation, options), 1, float("inf")) for _ in range(repeats)]
        models = [t.result for t in training]
    figures["train_s"] = [t.wall[0] for t in training]
    figures["train_cpu_s"] = [t.cpu[0] for t in training]
    figures["train_lp_s"] = [m.training["lp_seconds"] for m in models]
    figures["train_objective"] = models[-1].training["objective"]
    figures["train_private"] = models[-1].private
    u, gamma = np.asarray(models[-1].u), models[-1].gamma
    figures["coordinator_peak_rss_mib"] = peak_rss_mib()
    # Entities have exited and been waited for: RUSAGE_CHILDREN is the largest entity's peak.
    figures["entity_peak_rss_mib"] = peak_rss_mib(resource.RUSAGE_CHILDREN)
    y = np.concatenate([b.train_labels for b in blocks])
    y_test = np.concatenate([b.test_labels for b in blocks])
    np.savez(
        out.with_suffix(".npz"),
        K=K,
        y=y,
        ids=np.concatenate([b.train_ids for b in blocks]),
        K_test=K_test,
        y_test=y_test,
        ids_test=np.concatenate([b.test_ids for b in blocks]),
        u=u,
        gamma=gamma,
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


def split(m_train: int, seed: int, out_dir: Path) -> tuple[Path, np.ndarray, np.ndarray]:
    from ppsvm.data.dataset import Dataset
    from ppsvm.data.partition import SplitOptions, split_dataset

    X, y = synthetic(total_rows(m_train), seed)
    dataset = Dataset(
        ids=np.array([str(k) for k in range(len(y))]),
        X=X,
        y=y,
        feature_names=tuple(f"x{k}" for k in range(N_FEATURES)),
        source=f"synthetic(seed={seed})",
    )
    result = split_dataset(
        dataset,
        SplitOptions(
            rows=ENTITY_ROWS, cols=ENTITY_COLS, out_dir=out_dir, test_fraction=TEST_FRACTION, seed=seed, overwrite=True
        ),
    )
    assert result.n_train == m_train, (result.n_train, m_train)
    # A fixed secret, so B and with it the test error are the same on every rerun (production secrets are random).
    (out_dir / "column-block-0.secret").write_text(fixed_secret("train_scaling", m_train, seed), encoding="utf-8")
    return result.federation_path, X, y


def in_process(K: np.ndarray, y: np.ndarray, m: int, args: argparse.Namespace) -> dict[str, Any]:
    order = formulations_in_order()
    results: dict[str, Any] = {}
    reference = None
    for formulation in order:
        skip = skipped(formulation, m, args.no_skip)
        if skip is not None:
            results[formulation] = skip
            continue
        entry, solution = time_formulation(K, y, formulation, args.repeats, args.single_above, reference)
        reference = solution.objective if reference is None else reference
        seconds, gap = entry["seconds"], entry["relative_gap_to_highs_dual"]
        results[formulation] = entry
        print(
            f"  in-process {formulation:<13} {seconds_text(seconds):>14}  objective {solution.objective:.10g}  "
            f"gap {gap:.1e}",
            flush=True,
        )
    return results


def svc(
    X: np.ndarray, y: np.ndarray, train_ids: np.ndarray, test_ids: np.ndarray, mu: float, args: argparse.Namespace
) -> dict[str, Any]:
    from sklearn.svm import SVC

    rows, test_rows = train_ids.astype(np.int64), test_ids.astype(np.int64)
    low, high = X[rows].min(axis=0), X[rows].max(axis=0)
    scale = lambda Z: (Z - low) / np.where(high > low, high - low, 1.0)  # noqa: E731 - the coordinator's scaling
    A, A_test = scale(X[rows]), scale(X[test_rows])
    timing = timed(lambda: SVC(kernel="rbf", gamma=mu, C=1.0).fit(A, y[rows]), args.repeats, args.single_above)
    seconds, model = timing.wall, timing.result
    error = float(np.mean(model.predict(A_test) != y[test_rows]))
    print(
        f"  scikit-learn SVC(rbf, gamma={mu:g}, C=1) {seconds_text(seconds):>14}  "
        f"{model.support_.size} support vectors, test error {error:.4f}",
        flush=True,
    )
    return {
        "seconds": seconds,
        "median_s": median(seconds),
        "cpu_seconds": timing.cpu,
        "test_error": error,
        "support_vectors": int(model.support_.size),
    }


def measure(m: int, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    start = time.perf_counter()
    federation_path, X, y_all = split(m, args.seed, work / f"m{m}")
    split_s = time.perf_counter() - start
    out = work / f"m{m}" / "coordinator.json"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.train_scaling",
            "--coordinator",
            str(federation_path),
            str(out),
            "--repeats",
            str(args.repeats),
            "--mu",
            repr(args.mu),
        ],
        check=True,
        cwd=ROOT,
    )
    figures = json.loads(out.read_text(encoding="utf-8"))
    figures["split_s"] = split_s
    with np.load(out.with_suffix(".npz")) as saved:
        K, y, ids, K_test, y_test, ids_test = (saved[k] for k in ("K", "y", "ids", "K_test", "y_test", "ids_test"))
        u, gamma = saved["u"], float(saved["gamma"])
    figures["ppsvm_test_error"] = float(np.mean(np.where(K_test @ u - gamma >= 0, 1.0, -1.0) != y_test))
    print(
        f"m = {m:,}: split {split_s:.1f} s, entities started in {figures['entity_start_s']:.1f} s; "
        f"fetch {', '.join(f'{s:.2f}' for s in figures['kernel_fetch_s'])} s; "
        f"train() {', '.join(f'{s:.2f}' for s in figures['train_s'])} s "
        f"(LP inside {', '.join(f'{s:.2f}' for s in figures['train_lp_s'])} s); "
        f"PPSVM test error {figures['ppsvm_test_error']:.4f}",
        flush=True,
    )
    figures["in_process"] = in_process(K, y, m, args)
    figures["train_vs_in_process_gap"] = relative_gap(
        figures["train_objective"], figures["in_process"]["highs-dual"]["objective"]
    )
    if m <= args.svc_max:
        figures["svc"] = svc(X, y_all, ids, ids_test, args.mu, args)
    else:
        figures["svc"] = {"skipped": f"above --svc-max {args.svc_max} rows"}
        print(f"  scikit-learn SVC skipped (above --svc-max {args.svc_max} rows)", flush=True)
    lp = figures["in_process"]["highs-dual"]
    figures["ratio_distributed_to_lp"] = median(figures["train_s"]) / lp["median_s"]
    # Everything train() does besides its LP, run by run: insensitive to how long the LP took under load.
    figures["overhead_s"] = [t - lp_s for t, lp_s in zip(figures["train_s"], figures["train_lp_s"], strict=True)]
    figures["ratio_overhead_based"] = (lp["median_s"] + median(figures["overhead_s"])) / lp["median_s"]
    figures["ratio_cpu"] = median(figures["train_cpu_s"]) / lp["median_cpu_s"]
    return figures


def report(sizes: list[int], results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    done = [m for m in sizes if str(m) in results]
    headers = ["(median of repeats)", *(f"m = {m:,}" for m in done)]
    r = [results[str(m)] for m in done]
    rows = [
        ["  metadata (Session.load_metadata)", *(seconds_text(x["metadata_s"]) for x in r)],
        ["  record alignment (Session.align_records)", *(seconds_text(x["align_s"]) for x in r)],
        ["  scaling (Session.column_scaling)", *(seconds_text(x["scaling_s"]) for x in r)],
        ["  the three in one round (Session.survey, as train() does)", *(seconds_text(x["survey_s"]) for x in r)],
        ["  kernel fetch (Session.kernel)", *(seconds_text(x["kernel_fetch_s"]) for x in r)],
        ["  LP inside train() (highs-dual)", *(seconds_text(x["train_lp_s"]) for x in r)],
        ["train() end to end, distributed", *(seconds_text(x["train_s"]) for x in r)],
    ]
    for formulation in r[0]["in_process"]:
        rows.append(
            [
                f"in-process LP, {formulation}",
                *(
                    "skipped"
                    if "skipped" in x["in_process"][formulation]
                    else seconds_text(x["in_process"][formulation]["seconds"])
                    for x in r
                ),
            ]
        )
    rows.append(
        [
            "scikit-learn SVC(rbf) on pooled rows",
            *("skipped" if "skipped" in x["svc"] else seconds_text(x["svc"]["seconds"]) for x in r),
        ]
    )
    rows.insert(7, ["  overhead: train() minus its own LP", *(seconds_text(x["overhead_s"]) for x in r)])
    rows.append(["distributed / in-process highs-dual", *(f"{x['ratio_distributed_to_lp']:.2f}x" for x in r)])
    rows.append(["  (in-process LP + overhead) / in-process LP", *(f"{x['ratio_overhead_based']:.2f}x" for x in r)])
    rows.append(["  CPU: coordinator train() / in-process LP", *(f"{x['ratio_cpu']:.2f}x" for x in r)])
    rows.append(
        ["kernel fetch share of train()", *(f"{median(x['kernel_fetch_s']) / median(x['train_s']):.0%}" for x in r)]
    )
    rows.append(
        [
            "SVC / distributed train()",
            *("-" if "skipped" in x["svc"] else f"{x['svc']['median_s'] / median(x['train_s']):.1f}x" for x in r),
        ]
    )
    rows.append(
        [
            "test error: PPSVM / SVC",
            *(
                f"{x['ppsvm_test_error']:.3f} / " + ("-" if "skipped" in x["svc"] else f"{x['svc']['test_error']:.3f}")
                for x in r
            ),
        ]
    )
    rows.append(
        [
            "objective gap to highs-dual (worst)",
            *(
                "{:.1e}".format(
                    max(
                        [v["relative_gap_to_highs_dual"] for v in x["in_process"].values() if "skipped" not in v]
                        + [x["train_vs_in_process_gap"]]
                    )
                )
                for x in r
            ),
        ]
    )
    rows.append(["coordinator peak RSS", *(f"{x['coordinator_peak_rss_mib']:.0f} MiB" for x in r)])
    rows.append(["largest entity peak RSS", *(f"{x['entity_peak_rss_mib']:.0f} MiB" for x in r)])
    print("\n" + table(headers, rows))
    print(
        "(wall-clock unless marked CPU; the overhead rows separate the distributed cost from LP times that vary\n"
        " with the load of other jobs on the machine)"
    )

    ratios_ok = all(x["ratio_distributed_to_lp"] <= RATIO_TARGET for x in r)
    ratio_text = ", ".join(f"{m:,}: {x['ratio_distributed_to_lp']:.2f}x" for m, x in zip(done, r, strict=True))
    agree = all(v.get("agrees", True) for x in r for v in x["in_process"].values()) and all(
        x["train_vs_in_process_gap"] <= AGREEMENT_RTOL for x in r
    )
    targets: dict[str, Any] = {
        f"distributed / in-process <= {RATIO_TARGET}x at every size": (
            f"{'PASS' if ratios_ok else 'FAIL'} ({ratio_text})"
        ),
        f"  same, load-insensitive: (in-process LP + overhead) / LP <= {RATIO_TARGET}x": "{} ({})".format(
            "PASS" if all(x["ratio_overhead_based"] <= RATIO_TARGET for x in r) else "FAIL",
            ", ".join(f"{m:,}: {x['ratio_overhead_based']:.2f}x" for m, x in zip(done, r, strict=True)),
        ),
        f"objectives agree with highs-dual to {AGREEMENT_RTOL:g}": "PASS" if agree else "FAIL",
    }
    if str(TARGET_ROWS) in results:
        t = median(results[str(TARGET_ROWS)]["train_s"])
        x = results[str(TARGET_ROWS)]
        targets[f"{TARGET_ROWS:,} rows trained in <= {TARGET_SECONDS:g} s"] = (
            f"{'PASS' if t <= TARGET_SECONDS else 'FAIL'} ({t:.2f} s wall-clock; coordinator CPU "
            f"{median(x['train_cpu_s']):.2f} s, "
            f"in-process LP CPU {x['in_process']['highs-dual']['median_cpu_s']:.2f} s)"
        )
    else:
        targets[f"{TARGET_ROWS:,} rows trained in <= {TARGET_SECONDS:g} s"] = (
            f"not measured ({TARGET_ROWS} not in --sizes)"
        )
    print()
    for name, verdict in targets.items():
        print(f"target: {name}: {verdict}")
    return targets


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="m = 2,000 and 10,000")
    parser.add_argument("--sizes", type=int, nargs="+", help="training rows (default 10000 40000 160000)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--single-above",
        type=float,
        default=60.0,
        help="in-process solves and SVC: do not repeat a run that took longer than this (s)",
    )
    parser.add_argument("--svc-max", type=int, default=40_000, help="skip scikit-learn's SVC above this many rows")
    parser.add_argument("--no-skip", action="store_true", help="run every LP formulation at every size")
    parser.add_argument("--mu", type=float, default=MU, help=f"Gaussian width (default 1/{N_FEATURES})")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", type=Path, help="keep the split files and saved kernels in this directory")
    parser.add_argument("--coordinator", nargs=2, type=Path, metavar=("FEDERATION", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.coordinator:
        run_coordinator(args.coordinator[0], args.coordinator[1], args.repeats, args.mu)
        return 0
    sizes = args.sizes or ([2_000, 10_000] if args.quick else [10_000, 40_000, 160_000])

    info = machine_info()
    print_machine(info)
    print(
        f"{ENTITY_ROWS} x {ENTITY_COLS} split of a synthetic {N_FEATURES}-feature dataset, {ENTITY_ROWS} entity "
        f"processes over gRPC on this machine; gaussian, mbar = {MBAR}, nu = {NU:g}, mu = {args.mu:g}; "
        f"{args.repeats} repeats, median\n",
        flush=True,
    )
    started = time.perf_counter()
    results: dict[str, dict[str, Any]] = {}
    setting = {
        "entities": f"{ENTITY_ROWS} x {ENTITY_COLS}",
        "n_features": N_FEATURES,
        "mbar": MBAR,
        "nu": NU,
        "mu": args.mu,
        "test_fraction": TEST_FRACTION,
        "repeats": args.repeats,
        "seed": args.seed,
        "single_above_s": args.single_above,
        "svc_max": args.svc_max,
        "svc_C": 1.0,
        "skip_above": {} if args.no_skip else SKIP_ABOVE,
        "sizes": sizes,
    }
    with tempfile.TemporaryDirectory(prefix="ppsvm-bench-") as temporary:
        work = args.keep or Path(temporary)
        for m in sizes:
            results[str(m)] = measure(m, args, work)
            # Written after every size so a run cut short still leaves its figures.
            write_json(NAME, {"machine": info, "setting": setting, "results": results, "complete": False}, args.quick)
    targets = report(sizes, results)
    info["load_average_at_end"] = load_average()
    info["wall_clock_s"] = time.perf_counter() - started
    print(f"\nload average at end {info['load_average_at_end']}; total {info['wall_clock_s']:.0f} s")
    path = write_json(
        NAME,
        {"machine": info, "setting": setting, "results": results, "targets": targets, "complete": True},
        args.quick,
    )
    print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
