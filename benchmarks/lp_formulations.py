"""docs/design.md section 4 regenerated: every LP formulation of ppsvm.core.lp on one Gaussian random kernel.

One kernel K(A, B') per size: A uniform on [0, 1]^20 (m rows), B uniform (mbar = 19 rows),
mu = 1/20, labels from a noisy nonlinear rule, nu = 1. Each formulation is timed (median of
3 runs; a single run when one run exceeds --single-above seconds) and its objective is
checked against highs-dual. Formulations measured too slow are skipped above a size
(cvxpy-primal above 40,000 rows, cvxpy-dual above 160,000) unless --no-skip.

    python benchmarks/lp_formulations.py [--quick] [--sizes 10000 40000 160000]
"""

from __future__ import annotations

import argparse
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
    REFERENCE_FORMULATION,
    SKIP_ABOVE,
    formulations_in_order,
    load_average,
    machine_info,
    peak_rss_mib,
    print_machine,
    seconds_text,
    skipped,
    synthetic,
    table,
    time_formulation,
    write_json,
)
from ppsvm.core.kernels import gaussian_kernel

NAME = "lp_formulations"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="m = 10,000 and 40,000 only")
    parser.add_argument("--sizes", type=int, nargs="+", help="rows m (default 10000 40000 160000)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--single-above",
        type=float,
        default=60.0,
        help="do not repeat a solve whose first run took longer than this (s)",
    )
    parser.add_argument("--no-skip", action="store_true", help="run every formulation at every size")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    sizes = args.sizes or ([10_000, 40_000] if args.quick else [10_000, 40_000, 160_000])

    info = machine_info()
    print_machine(info)
    print(f"one Gaussian random kernel per size: {N_FEATURES} features, mbar = {MBAR}, mu = {MU:g}, nu = {NU:g}\n")
    order = formulations_in_order()
    results: dict[str, dict[str, dict[str, Any]]] = {f: {} for f in order}
    for m in sizes:
        X, y = synthetic(m, args.seed)
        B = np.random.default_rng(args.seed + 1).random((MBAR, N_FEATURES))
        K = gaussian_kernel(X, B, MU)
        reference_objective = None
        for formulation in order:
            skip = skipped(formulation, m, args.no_skip)
            if skip is not None:
                results[formulation][str(m)] = skip
                print(f"m = {m:>7}  {formulation:<13} skipped (above {SKIP_ABOVE[formulation]} rows)", flush=True)
                continue
            entry, solution = time_formulation(K, y, formulation, args.repeats, args.single_above, reference_objective)
            if reference_objective is None:
                reference_objective = solution.objective
            seconds, gap = entry["seconds"], entry["relative_gap_to_highs_dual"]
            results[formulation][str(m)] = {**entry, "iterations": solution.iterations}
            print(
                f"m = {m:>7}  {formulation:<13} {seconds_text(seconds):>16}  objective {solution.objective:.10g}  "
                f"gap {gap:.1e}  runs {', '.join(f'{s:.2f}' for s in seconds)} s, "
                f"CPU {', '.join(f'{s:.2f}' for s in entry['cpu_seconds'])} s",
                flush=True,
            )

    headers = ["formulation", *(f"m = {m:,}" for m in sizes)]
    rows = []
    for formulation in order:
        row: list[str] = [formulation]
        for m in sizes:
            entry = results[formulation][str(m)]
            row.append("skipped" if "skipped" in entry else seconds_text(entry["seconds"]))
        rows.append(row)
    cpu_rows = []
    for formulation in order:
        row = [formulation]
        for m in sizes:
            entry = results[formulation][str(m)]
            row.append("skipped" if "skipped" in entry else f"{entry['median_cpu_s']:.2f} s")
        cpu_rows.append(row)
    ratio_rows = []
    for formulation in order[1:]:
        row = [f"{formulation} / {REFERENCE_FORMULATION}"]
        for m in sizes:
            entry, ref = results[formulation][str(m)], results[REFERENCE_FORMULATION][str(m)]
            row.append("-" if "skipped" in entry else f"{entry['median_s'] / ref['median_s']:.1f}x")
        ratio_rows.append(row)
    agreement_rows = []
    for formulation in order[1:]:
        row = [f"{formulation} vs {REFERENCE_FORMULATION}"]
        for m in sizes:
            entry = results[formulation][str(m)]
            row.append(
                "-"
                if "skipped" in entry
                else f"{entry['relative_gap_to_highs_dual']:.1e} {'ok' if entry['agrees'] else 'FAIL'}"
            )
        agreement_rows.append(row)
    print("\nLP solve time (median of runs; objective recomputed from (u, gamma) on all rows)")
    print(table(headers, rows))
    print("\nCPU seconds of this process (median; less sensitive than wall-clock to other jobs on the machine)")
    print(table(headers, cpu_rows))
    print("\nslowdown relative to highs-dual (wall-clock)")
    print(table(headers, ratio_rows))
    print(f"\nobjective agreement with highs-dual (relative, tolerance {AGREEMENT_RTOL:g})")
    print(table(headers, agreement_rows))
    all_agree = all(e.get("agrees", True) for r in results.values() for e in r.values())
    print(
        f"\nall objectives agree: {'PASS' if all_agree else 'FAIL'}; peak RSS {peak_rss_mib():.0f} MiB; "
        f"load average at end {load_average()}"
    )

    info["load_average_at_end"] = load_average()
    path = write_json(
        NAME,
        {
            "machine": info,
            "setting": {
                "n_features": N_FEATURES,
                "mbar": MBAR,
                "mu": MU,
                "nu": NU,
                "task": "classify",
                "repeats": args.repeats,
                "single_above_s": args.single_above,
                "seed": args.seed,
                "skip_above": {} if args.no_skip else SKIP_ABOVE,
                "sizes": sizes,
            },
            "results": results,
            "all_objectives_agree": all_agree,
            "peak_rss_mib": peak_rss_mib(),
            "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        },
        args.quick,
    )
    print(f"wrote {path.relative_to(Path(__file__).resolve().parents[1])}")
    return 0 if all_agree else 1


if __name__ == "__main__":
    raise SystemExit(main())
