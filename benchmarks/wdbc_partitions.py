"""Mangasarian & Wild, Table 1 setting on WDBC: PPSVM error versus the number of column blocks.

For s = 1, 2, 4, 8 contiguous column blocks and r = round(n_train / 25) row blocks
(about 25 training records per entity), 10-fold stratified cross-validation. Each
fold is split with ``split_dataset(held_out=fold)``; every cell is started as a real
gRPC entity server in this process (``entity.server.start_entity``, loopback, the
same servicer code as ``ppsvm entity``), the coordinator trains over gRPC with
mbar, nu and mu chosen automatically, evaluates on the held-out fold, asks every
entity for its entity-alone figure, and the pooled (non-private) reference is
trained on the split directory. All servers are stopped after each fold.

PPSVM's error depends on the random matrices B_j, which the entities derive from
their column-block secrets. The secrets are overwritten with reproducible values
derived from (s, fold, column block, secret seed), and for every (s, fold) the
training is repeated for ``--secret-seeds`` N seeds (N independent draws of B on the
same split). The entity-alone baseline and the pooled reference do not use B, so
they are computed once per (s, fold), with the first seed.

    PYTHONPATH=. .venv/bin/python benchmarks/wdbc_partitions.py [--quick] [--folds K] [--blocks 1,2,4,8] [--secret-seeds N]

Writes benchmarks/results/wdbc_partitions.{json,md}.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from benchmarks._shared import (  # noqa: E402
    fixed_secret, grid_edge, package_versions, serve_split, write_results,
)
from common.constants import DEFAULT_FOLDS, REFERENCE_ROW_FRACTION  # noqa: E402
from common.dataset import DatasetOptions, load_dataset  # noqa: E402
from common.partition import SplitOptions, split_dataset  # noqa: E402
from common.tuning import fold_indices, search_grid  # noqa: E402
from coordinator.evaluate import entity_alone, evaluate_model, mean_figures  # noqa: E402
from coordinator.reference import pooled_reference  # noqa: E402
from coordinator.train import TrainOptions, default_mbar, train  # noqa: E402

DATA = ROOT / "common" / "data" / "wdbc.data"
DATASET_OPTIONS = DatasetOptions(label=1, positive="M", drop=(0,), id_column=0)
NAME = "wdbc_partitions"

# Mangasarian & Wild, Table 1 (WDBC, Gaussian kernel): PPSVM test error by number of column blocks.
PAPER_PPSVM = {1: 0.03, 2: 0.04, 4: 0.06, 8: 0.11}
PAPER_TOLERANCE = 0.02
RECORDS_PER_ROW_BLOCK = 25
FOLD_SEED = 0       # stratified outer folds
SPLIT_SEED = 0      # shuffle that deals training records into row blocks (plus the fold index)
TRAIN_SEED = 0      # coordinator's inner CV folds, entity-alone and reference seeds
# Over this many seconds for the whole run, the brief asks for a reduced fold count.
BUDGET_S = 15 * 60


def classify_grid(n_features: int) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """The (nu, mu) grid the coordinator searches with nu = mu = None on n_features features."""
    return search_grid("classify", "gaussian", n_features, None, None)


def secret_text(s: int, fold: int, j: int, secret_seed: int) -> str:
    """Column block j's secret for (s, fold) and secret seed; seed 0 gives the secrets of earlier runs."""
    parts: tuple[object, ...] = (s, fold, j) if secret_seed == 0 else (s, fold, j, f"seed={secret_seed}")
    return fixed_secret(NAME, *parts)


def split_fold(dataset: Any, s: int, fold: int, held_out: np.ndarray, work: Path) -> tuple[Any, float]:
    """The (s, fold) split into r x s cells (the same for every secret seed) and the seconds it took."""
    n_train = int((~held_out).sum())
    started = time.perf_counter()
    split = split_dataset(
        dataset,
        SplitOptions(rows=round(n_train / RECORDS_PER_ROW_BLOCK), cols=s, out_dir=work, seed=SPLIT_SEED + fold,
                     task="classify", kernel="gaussian", overwrite=True),
        provenance=dataclasses.asdict(DATASET_OPTIONS),
        held_out=held_out,
    )
    return split, time.perf_counter() - started


def run_fold(split: Any, split_seconds: float, s: int, fold: int, secret_seed: int, held_out: np.ndarray,
             work: Path, baselines: bool) -> dict[str, Any]:
    """Serve, train and evaluate one (s, fold, secret seed); with ``baselines`` also entity-alone and reference."""
    n_train = int((~held_out).sum())
    r = round(n_train / RECORDS_PER_ROW_BLOCK)
    timings: dict[str, float] = {"split": split_seconds}
    started = time.perf_counter()
    # Entities read their secret when they start, so rewriting the files before serving gives a new B.
    for j in range(s):
        (work / f"column-block-{j}.secret").write_text(secret_text(s, fold, j, secret_seed), encoding="utf-8")
    timings["secrets"] = time.perf_counter() - started

    alone: list[Any] | None = None
    reference: dict[str, Any] | None = None
    with serve_split(split, work, timings) as federation:
        started = time.perf_counter()
        options = TrainOptions(task="classify", kernel="gaussian", mbar=None, nu=None, mu=None, seed=TRAIN_SEED,
                               distribute=False)
        model = train(federation, options)
        timings["train"] = time.perf_counter() - started
        timings["train_lp_tuning"] = model.training["seconds"]

        started = time.perf_counter()
        ppsvm = evaluate_model(federation, model)
        timings["evaluate"] = time.perf_counter() - started

        if baselines:
            started = time.perf_counter()
            alone = entity_alone(federation, "classify", "gaussian", nu=None, mu=None, seed=TRAIN_SEED)
            timings["entity_alone"] = time.perf_counter() - started

    if baselines:
        started = time.perf_counter()
        reference = pooled_reference(work, "classify", "gaussian", nu=None, mu=None, seed=TRAIN_SEED)
        timings["reference"] = time.perf_counter() - started

    widths = model.training["n_features"]
    nu_grid, mu_grid = classify_grid(sum(widths))
    return {
        "s": s, "fold": fold, "secret_seed": secret_seed, "r": r, "cells": r * s, "n_train": n_train, "n_test": ppsvm["n_test"],
        "widths": widths, "mbar": model.mbar, "mbar_rule": default_mbar(widths, n_train),
        "nu": model.nu, "mu": model.mu, "private": model.private,
        # Which edge (low / high) of the grid actually searched the tuned value sits on, if any.
        "nu_grid_edge": grid_edge(model.nu, nu_grid), "mu_grid_edge": grid_edge(model.mu, mu_grid),
        "grid_matches_coordinator": sorted((nu, mu) for nu, mu, _ in model.training["tuning"]["grid"])
        == sorted((nu, mu) for mu in mu_grid for nu in nu_grid),
        "ppsvm_error": ppsvm["error_rate"], "ppsvm_auc": ppsvm["auc"],
        "inner_cv_error": (model.training["tuning"] or {}).get("score"),
        # Entity alone and the pooled reference do not use B: computed for the first secret seed only (else None).
        "alone_error": mean_figures(alone)["error_rate"] if alone is not None else None,
        "alone_per_entity": [{"id": a.entity_id, "n_train": a.n_train, "n_test": a.n_test, **a.figures}
                             for a in alone] if alone is not None else None,
        "reference_error": reference["error_rate"] if reference else None,
        "reference_nu": reference["nu"] if reference else None,
        "reference_mu": reference["mu"] if reference else None,
        "reference_basis_rows": reference["basis_rows"] if reference else None,
        "seconds": timings,
    }


def summarise(runs: list[dict[str, Any]], s: int) -> dict[str, Any]:
    mine = [run for run in runs if run["s"] == s]
    seeds = sorted({run["secret_seed"] for run in mine})

    def stat(key: str) -> tuple[float, float]:
        """Mean and standard deviation over the runs that have ``key`` (over folds for the baselines)."""
        values = np.array([run[key] for run in mine if run[key] is not None], dtype=float)
        return float(values.mean()), float(values.std(ddof=1)) if len(values) > 1 else 0.0

    ppsvm, alone, reference = stat("ppsvm_error"), stat("alone_error"), stat("reference_error")
    # One mean over the folds per secret seed (one draw of every B_j per fold); the standard
    # error of the overall mean is their standard deviation over sqrt(number of seeds).
    per_seed = [float(np.mean([run["ppsvm_error"] for run in mine if run["secret_seed"] == seed])) for seed in seeds]
    seed_se = float(np.std(per_seed, ddof=1) / np.sqrt(len(per_seed))) if len(per_seed) > 1 else None
    # Spread over folds of the seed-averaged error, for comparison with the baselines' fold spread.
    folds = sorted({run["fold"] for run in mine})
    fold_means = [float(np.mean([run["ppsvm_error"] for run in mine if run["fold"] == fold])) for fold in folds]
    paper = PAPER_PPSVM[s]
    within = ppsvm[0] <= paper + PAPER_TOLERANCE
    below_alone = ppsvm[0] < alone[0]
    seconds = sum(sum(v for k, v in run["seconds"].items() if k != "train_lp_tuning") for run in mine)
    stages = list(dict.fromkeys(k for run in mine for k in run["seconds"]))
    return {
        "s": s, "folds": len(folds), "secret_seeds": seeds, "runs": len(mine),
        "cells_per_fold": sorted({run["cells"] for run in mine}),
        "widths": mine[0]["widths"], "mbar": sorted({run["mbar"] for run in mine}),
        "ppsvm_error_mean": ppsvm[0], "ppsvm_error_std_runs": ppsvm[1],
        "ppsvm_error_se_seeds": seed_se, "ppsvm_error_per_seed": per_seed,
        "ppsvm_error_seed_range": [min(per_seed), max(per_seed)],
        "ppsvm_error_std_folds_seed_averaged": float(np.std(fold_means, ddof=1)) if len(fold_means) > 1 else 0.0,
        "alone_error_mean": alone[0], "alone_error_std": alone[1],
        "reference_error_mean": reference[0], "reference_error_std": reference[1],
        "paper_ppsvm": paper, "within_paper": within, "below_alone": below_alone,
        "pass": within and below_alone, "wall_seconds": seconds,
        "seconds_by_stage": {k: float(sum(run["seconds"].get(k, 0.0) for run in mine)) for k in stages},
        "tuned": [(run["nu"], run["mu"]) for run in mine],
        "inner_cv_error_mean": float(np.mean([run["inner_cv_error"] for run in mine])),
        # A tuned value on the edge of the grid searched suggests the grid should extend further that way.
        "mu_at_grid_edge": {edge: sum(run["mu_grid_edge"] == edge for run in mine) for edge in ("low", "high")},
        "nu_at_grid_edge": {edge: sum(run["nu_grid_edge"] == edge for run in mine) for edge in ("low", "high")},
    }


def edges(counts: dict[str, int]) -> str:
    """'3 (low 1, high 2)' from per-edge fold counts."""
    total = sum(counts.values())
    return f"{total} ({', '.join(f'{edge} {count}' for edge, count in counts.items())})" if total else "0"


def markdown(summary: list[dict[str, Any]], settings: dict[str, Any]) -> str:
    lines = [
        f"WDBC, Gaussian kernel, {settings['folds']} of {settings['outer_folds']} stratified CV folds (seed {FOLD_SEED}), "
        f"about {RECORDS_PER_ROW_BLOCK} training records per row block, {len(settings['secret_seeds'])} secret "
        f"seed(s) {settings['secret_seeds']} (independent draws of every B_j) per fold; "
        "in-process gRPC entity servers over loopback.",
        "",
        "| s | n_j | cells/fold | mbar | PPSVM error (± s.e. over seeds) | per-seed means | paper PPSVM "
        "| each entity alone | pooled reference (not private) | result | wall s |",
        "|--:|:--|--:|--:|--:|:--|--:|--:|--:|:--|--:|",
    ]
    for row in summary:
        widths = sorted(set(row["widths"]))
        se = "n/a (1 seed)" if row["ppsvm_error_se_seeds"] is None else f"{row['ppsvm_error_se_seeds']:.3f}"
        low, high = row["ppsvm_error_seed_range"]
        lines.append(
            f"| {row['s']} | {'-'.join(map(str, widths))} | {'/'.join(map(str, row['cells_per_fold']))} "
            f"| {'/'.join(map(str, row['mbar']))} "
            f"| {row['ppsvm_error_mean']:.3f} ± {se} | {low:.3f} – {high:.3f} | {row['paper_ppsvm']:.2f} "
            f"| {row['alone_error_mean']:.3f} ± {row['alone_error_std']:.3f} "
            f"| {row['reference_error_mean']:.3f} ± {row['reference_error_std']:.3f} "
            f"| {'PASS' if row['pass'] else 'FAIL'}{'' if row['within_paper'] else ' (paper+0.02)'}"
            f"{'' if row['below_alone'] else ' (not below alone)'} | {row['wall_seconds']:.0f} |"
        )
    lines.append("")
    for row in summary:
        stages = ", ".join(f"{k} {v:.0f}" for k, v in row["seconds_by_stage"].items() if k != "train_lp_tuning")
        lines.append(
            f"- s = {row['s']}: PPSVM per-seed means {', '.join(f'{v:.3f}' for v in row['ppsvm_error_per_seed'])} "
            f"(seeds {row['secret_seeds']}); std over folds of the seed-averaged error "
            f"{row['ppsvm_error_std_folds_seed_averaged']:.3f}; coordinator inner-CV error "
            f"{row['inner_cv_error_mean']:.3f}; tuned mu on the edge of the grid searched in "
            f"{edges(row['mu_at_grid_edge'])} of {row['runs']} (seed, fold) runs, "
            f"nu in {edges(row['nu_at_grid_edge'])}; seconds by stage: {stages}"
        )
    lines += [
        "",
        f"PASS: PPSVM mean error (over all seed x fold runs) <= paper + {PAPER_TOLERANCE} and below the "
        "each-entity-alone mean. PPSVM ± is the standard error of that mean over secret seeds (standard deviation "
        "of the per-seed fold means / sqrt(seeds)); per-seed means: lowest – highest. Entity-alone and reference "
        "do not depend on B and were computed once per fold (first seed); their ± is the standard deviation over "
        "folds. Secrets: sha256 of 'ppsvm-benchmark/wdbc_partitions/s/fold/j' (seed 0) or "
        "'.../s/fold/j/seed=k' (seed k), so each (s, fold, seed) has its own reproducible B_j. mbar: the coordinator's rule min(n_j) - 1 capped at 10% of "
        "training rows (TrainOptions(mbar=None)); nu, mu: coordinator's "
        f"{DEFAULT_FOLDS}-fold CV on the training folds over the grid of common.tuning.search_grid: "
        f"nu in {{{', '.join(f'{v:g}' for v in settings['nu_grid'])}}} x mu in "
        f"{{{', '.join(f'{v:g}' for v in settings['mu_grid_times_n'])}}}/n (n = {settings['n']}, features scaled to [0, 1]). "
        "Entity alone: each entity's LocalBaseline (its own cell, tuned the same way), held-out-weighted mean. "
        f"Reference: pooled reduced kernel with {REFERENCE_ROW_FRACTION:.0%} of training rows as basis.",
    ]
    if settings["folds"] < settings["folds_requested_full"]:
        lines += ["", f"**Reduced run: {settings['folds']} of {settings['folds_requested_full']} folds** "
                      f"({settings['reason']})."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="s in {1, 2}, 3 folds")
    parser.add_argument("--folds", type=int, help="outer CV folds to run (default 10; 3 with --quick)")
    parser.add_argument("--blocks", help="comma-separated column-block counts (default 1,2,4,8)")
    parser.add_argument("--outer-folds", type=int, default=10, help="folds the data is cut into (default 10)")
    parser.add_argument("--secret-seeds", type=int,
                        help="secret seeds (independent draws of B) per fold: 0..N-1 (default 5; 1 with --quick)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")

    blocks = [int(b) for b in args.blocks.split(",")] if args.blocks else ([1, 2] if args.quick else [1, 2, 4, 8])
    outer = 3 if args.quick and args.folds is None else args.outer_folds
    run_folds = args.folds if args.folds is not None else outer
    n_seeds = args.secret_seeds if args.secret_seeds is not None else (1 if args.quick else 5)
    if n_seeds < 1:
        parser.error("--secret-seeds must be at least 1")
    secret_seeds = list(range(n_seeds))
    dataset = load_dataset(DATA, DATASET_OPTIONS)
    folds = fold_indices("classify", dataset.y, outer, FOLD_SEED)

    runs: list[dict[str, Any]] = []
    started = time.perf_counter()
    work_root = Path(tempfile.mkdtemp(prefix="ppsvm-wdbc-partitions-"))
    try:
        for s in blocks:
            for fold in range(min(run_folds, outer)):
                held_out = np.zeros(len(dataset.y), dtype=bool)
                held_out[folds[fold]] = True
                work = work_root / f"s{s}-fold{fold}"
                split, split_seconds = split_fold(dataset, s, fold, held_out, work)
                for index, secret_seed in enumerate(secret_seeds):
                    run = run_fold(split, split_seconds if index == 0 else 0.0, s, fold, secret_seed, held_out, work,
                                   baselines=index == 0)
                    runs.append(run)
                    stages = ", ".join(f"{k} {v:.1f}" for k, v in run["seconds"].items())
                    extra = (f", alone {run['alone_error']:.3f}, reference {run['reference_error']:.3f}"
                             if index == 0 else "")
                    print(f"s={s} fold {fold} seed {secret_seed}: {run['cells']} cells, mbar {run['mbar']}, "
                          f"PPSVM {run['ppsvm_error']:.3f}{extra} [{stages} s]", file=sys.stderr, flush=True)
                shutil.rmtree(work, ignore_errors=True)
    finally:
        shutil.rmtree(work_root, ignore_errors=True)
    total = time.perf_counter() - started

    done = min(run_folds, outer)
    n = int(dataset.X.shape[1])
    nu_grid, mu_grid = classify_grid(n)
    settings = {
        "data": str(DATA.relative_to(ROOT)), "dataset_options": dataclasses.asdict(DATASET_OPTIONS),
        "m": int(len(dataset.y)), "n": int(dataset.X.shape[1]), "kernel": "gaussian",
        "column_blocks": blocks, "records_per_row_block": RECORDS_PER_ROW_BLOCK,
        "outer_folds": outer, "folds": done, "folds_requested_full": 10 if not args.quick else 3,
        "reason": "--folds given on the command line" if args.folds is not None else "",
        "fold_seed": FOLD_SEED, "split_seed": f"{SPLIT_SEED} + fold", "train_seed": TRAIN_SEED,
        "train_options": "TrainOptions(task='classify', kernel='gaussian', mbar=None, nu=None, mu=None, "
                         f"folds={DEFAULT_FOLDS}, formulation='highs-dual', distribute=False)",
        "grid_source": "common.tuning.search_grid('classify', 'gaussian', n, None, None)",
        "nu_grid": list(nu_grid), "mu_grid": list(mu_grid), "mu_grid_times_n": [mu * n for mu in mu_grid],
        "grid_matches_coordinator_all_runs": all(run["grid_matches_coordinator"] for run in runs),
        "secret_seeds": secret_seeds,
        "secrets": "column-block secrets overwritten with sha256('ppsvm-benchmark/wdbc_partitions/s/fold/j') for "
                   "secret seed 0 and sha256('ppsvm-benchmark/wdbc_partitions/s/fold/j/seed=k') for seed k, so each "
                   "(s, fold, seed) has its own reproducible B_j (benchmark only); entity-alone and reference "
                   "computed with the first seed only (they do not use B)",
        "transport": "entity.server.start_entity in this process, gRPC over 127.0.0.1, port 0",
        "versions": package_versions(), "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "total_seconds": total, "quick": args.quick,
    }
    summary = [summarise(runs, s) for s in blocks]
    text = markdown(summary, settings)
    print(text)
    print(f"total wall time {total:.0f} s")
    write_results(NAME, text, {"settings": settings, "summary": summary, "runs": runs})
    return 0 if all(row["pass"] for row in summary) else 1


if __name__ == "__main__":
    sys.exit(main())
