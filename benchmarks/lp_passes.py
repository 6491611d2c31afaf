"""The LP at millions of rows x mbar 19 before and after issue 28 (an iteration in three passes over K).

One Gaussian random kernel per size, column-major as the coordinator assembles it: A uniform on [0, 1]^20,
B uniform (mbar = 19), mu = 1/20, labels from the benchmarks' noisy nonlinear rule, nu = 1. ``solve_lp`` with
the ipm formulation is timed as a user meets it (the checks, the solve, the objective and the certificate):
wall-clock and CPU seconds of this process, iterations, seconds an iteration, the objective. Before them each
run solves a 2,000-row LP, the smallest that ipm solves by default, and records its seconds apart: a process's
first solve pays for what it loads (after issue 28, numba and its compiled row work).

Each run is added to results/lp_passes.json under a label, with the load average and the ppsvm it imported
(its path and the sha256 of its ipm.py). The summary compares the label ``after`` with ``before``: medians,
the ratio before / after of wall-clock and CPU seconds (also pair by pair, the runs of the two labels taken in
turn), and the objectives' relative difference. The runs before a change import the code of that commit from
an exported tree (``git archive <commit> | tar -x -C /tmp/before``) put first on Python's module search path
when this script runs with ``--label before``; the runs after import the working tree's:

    python -m benchmarks.lp_passes --label after

Both write the results file beside this script, whichever ppsvm they import.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._shared import MBAR, MU, N_FEATURES, NU, load_average, machine_info, peak_rss_mib, synthetic, table
from ppsvm.core.kernels import gaussian_kernel

RESULTS = Path(__file__).resolve().parent / "results" / "lp_passes.json"
LABELS = ("before", "after")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--label", choices=LABELS, required=True, help="which code this run measures")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 5_000_000], help="rows m")
    parser.add_argument("--repeats", type=int, default=1, help="solves per size in this run")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    import ppsvm
    from ppsvm.core import lp

    code = {"ppsvm": str(Path(ppsvm.__file__).parent), "ipm_sha256": _sha256(Path(lp.__file__).with_name("ipm.py"))}
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {"runs": []}
    X, y = synthetic(lp.IPM_FROM_ROWS, args.seed)
    K = gaussian_kernel(X, np.random.default_rng(args.seed + 1).random((MBAR, N_FEATURES)), MU)
    first = time.perf_counter()
    lp.solve_lp("classify", K, y, NU, "ipm")
    first_solve = round(time.perf_counter() - first, 3)
    for m in args.sizes:
        X, y = synthetic(m, args.seed)
        B = np.random.default_rng(args.seed + 1).random((MBAR, N_FEATURES))
        K = np.asfortranarray(gaussian_kernel(X, B, MU))
        del X
        for _ in range(args.repeats):
            load = load_average()
            wall, cpu = time.perf_counter(), time.process_time()
            solution = lp.solve_lp("classify", K, y, NU, "ipm")
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            run = {
                "label": args.label,
                "rows": m,
                "wall_s": round(wall, 3),
                "cpu_s": round(cpu, 3),
                "iterations": solution.iterations,
                "formulation": solution.formulation,
                "objective": solution.objective,
                "certificate_gap": None if solution.certificate is None else solution.certificate.gap,
                "load_average_before": load,
                "load_average_after": load_average(),
                "peak_rss_mib": round(peak_rss_mib()),
                "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "first_solve_in_process_s": first_solve,
                "code": code,
            }
            results["runs"].append(run)
            print(
                f"{args.label:<6} m = {m:>9,}: {wall:6.2f} s wall, {cpu:6.2f} s CPU, {solution.iterations} iterations, "
                f"objective {solution.objective!r}, load {run['load_average_before']} -> {run['load_average_after']}",
                flush=True,
            )
    results["machine"] = machine_info()
    results["setting"] = {"n_features": N_FEATURES, "mbar": MBAR, "mu": MU, "nu": NU, "task": "classify", "layout": "F"}
    results["summary"] = summary(results["runs"])
    temporary = RESULTS.with_suffix(".json.tmp")
    temporary.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    os.replace(temporary, RESULTS)
    print_summary(results["summary"])
    return 0


def summary(runs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per size: each label's medians, and after against before (medians and pair by pair, in run order)."""
    out: dict[str, dict[str, Any]] = {}
    for m in sorted({run["rows"] for run in runs}):
        by_label = {label: [run for run in runs if run["rows"] == m and run["label"] == label] for label in LABELS}
        entry: dict[str, Any] = {}
        for label, mine in by_label.items():
            if mine:
                iterations = statistics.median(run["iterations"] for run in mine)
                entry[label] = {
                    "runs": len(mine),
                    "median_wall_s": statistics.median(run["wall_s"] for run in mine),
                    "median_cpu_s": statistics.median(run["cpu_s"] for run in mine),
                    "iterations": iterations,
                    "wall_s_per_iteration": statistics.median(run["wall_s"] / run["iterations"] for run in mine),
                    "cpu_s_per_iteration": statistics.median(run["cpu_s"] / run["iterations"] for run in mine),
                    "objective": mine[-1]["objective"],
                    "first_solve_in_process_s": statistics.median(run["first_solve_in_process_s"] for run in mine),
                    "load_average_1min": [run["load_average_before"][0] for run in mine],
                }
        before, after = by_label["before"], by_label["after"]
        if before and after:
            pairs = list(zip(before, after, strict=False))
            entry["ratio_before_over_after"] = {
                "median_wall": entry["before"]["median_wall_s"] / entry["after"]["median_wall_s"],
                "median_cpu": entry["before"]["median_cpu_s"] / entry["after"]["median_cpu_s"],
                "paired_wall": [old["wall_s"] / new["wall_s"] for old, new in pairs],
                "paired_cpu": [old["cpu_s"] / new["cpu_s"] for old, new in pairs],
            }
            reference = entry["before"]["objective"]
            entry["objective_relative_difference"] = max(
                abs(run["objective"] - reference) / abs(reference) for run in before + after
            )
        out[str(m)] = entry
    return out


def print_summary(sizes: dict[str, dict[str, Any]]) -> None:
    rows = []
    for m, entry in sizes.items():
        for label in LABELS:
            if label in entry:
                e = entry[label]
                rows.append([
                    f"{int(m):,} {label}", str(e["runs"]), f"{e['median_wall_s']:.2f}", f"{e['median_cpu_s']:.2f}",
                    f"{e['iterations']:g}", f"{e['cpu_s_per_iteration'] * 1e3:.0f}",
                ])  # fmt: skip
        if "ratio_before_over_after" in entry:
            ratio = entry["ratio_before_over_after"]
            print(
                f"m = {int(m):,}: before / after {ratio['median_wall']:.2f}x wall, {ratio['median_cpu']:.2f}x CPU "
                f"(pairs: wall {', '.join(f'{r:.2f}' for r in ratio['paired_wall'])}; "
                f"CPU {', '.join(f'{r:.2f}' for r in ratio['paired_cpu'])}); "
                f"objectives differ by {entry['objective_relative_difference']:.1e} relative"
            )
    print(table(["rows, code", "runs", "wall s", "CPU s", "iterations", "CPU ms/iteration"], rows))


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


if __name__ == "__main__":
    raise SystemExit(main())
