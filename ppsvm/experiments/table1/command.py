"""``ppsvm reproduce table1``: Mangasarian & Wild's Table 1 and the scatter plots of their Figures 3 and 4.

For each dataset and each number s of vertical partitions (column blocks), ten-fold
cross-validation: every outer fold is split into a checkerboard of r x s cells with
about 25 training records per entity, each cell is served as a real gRPC entity
(in this process, ``ppsvm.api.inprocess``), and three classifiers are
trained on the training folds and scored on the held-out fold:

- pooled reduced kernel K(A, Abar'), Abar a random 10% of the training rows (not private);
- PPSVM K(A, B') assembled from the entities' blocks, mbar by the papers' rule
  min(n_j - 1, 10% of the training rows);
- each entity alone, on its own cell (the entities report only their error).

nu and mu are tuned on the training folds only (the coordinator's and the entities'
k-fold cross-validation over a full grid; see :data:`~ppsvm.experiments.table1.report.TUNING`). Secrets, splits and
tuning folds are seeded, so a rerun gives the same numbers. The table, its settings and the
figures are written by :mod:`ppsvm.experiments.table1.report`.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np

from ppsvm.api.inprocess import fixed_secret, serve_split, set_secrets
from ppsvm.constants import MU_GRID_TIMES_N, NU_GRID_CLASSIFY
from ppsvm.coordinator.evaluate import entity_alone, evaluate_model, mean_figures
from ppsvm.coordinator.reference import pooled_reference
from ppsvm.coordinator.train import BASES, TrainOptions, train
from ppsvm.core.kernels import KERNELS, KernelName
from ppsvm.core.tuning import fold_indices
from ppsvm.data.dataset import Dataset, load_dataset
from ppsvm.data.partition import SplitOptions, split_dataset
from ppsvm.data.shipped import TABLE1_DATASETS, ShippedDataset
from ppsvm.errors import ConfigError
from ppsvm.experiments.report import (
    DEFAULT_OUT,
    Progress,
    add_common_arguments,
    parse_list,
    png,
    print_summary,
    require_matplotlib,
    write_results,
)
from ppsvm.experiments.table1.report import (
    NAME,
    PAPER_PPSVM_GAUSSIAN,
    TUNING,
    figure_name,
    markdown,
    scatter,
    summarise,
)

PARTITIONS = (1, 2, 4, 8)
RECORDS_PER_ENTITY = 25
OUTER_FOLDS = 10
# The quick run (part of the test suite): every dataset, 1 and 2 partitions, one outer fold.
QUICK_PARTITIONS = (1, 2)
QUICK_FOLDS_RUN = 1


@dataclass(frozen=True)
class Table1Options:
    """What to run; the defaults are the paper's setting.

    Attributes
    ----------
    datasets : tuple of str
        Keys of :data:`ppsvm.data.shipped.TABLE1_DATASETS`.
    partitions : tuple of int
        Numbers of vertical partitions s; a value that leaves a block with one feature is skipped
        (mbar < n_j = 1 is impossible), and the output says so.
    kernels : tuple of str
    folds : int
        Outer cross-validation folds the data is cut into.
    folds_run : int or None
        Run only the first ``folds_run`` outer folds (None: all).
    bases : tuple of str
        "paper" (B = [B_1 ... B_s], mbar points) and optionally "product" (our addition).
    """

    out: Path = DEFAULT_OUT
    datasets: tuple[str, ...] = tuple(TABLE1_DATASETS)
    partitions: tuple[int, ...] = PARTITIONS
    kernels: tuple[KernelName, ...] = ("linear", "gaussian")
    folds: int = OUTER_FOLDS
    folds_run: int | None = None
    records_per_entity: int = RECORDS_PER_ENTITY
    bases: tuple[str, ...] = ("paper",)
    seed: int = 0
    quick: bool = False
    progress: bool = True

    def __post_init__(self) -> None:
        unknown = [key for key in self.datasets if key not in TABLE1_DATASETS]
        if unknown or not self.datasets:
            raise ConfigError(
                f"datasets must be among {', '.join(TABLE1_DATASETS)}; got {', '.join(unknown) or 'none'}"
            )
        if not self.partitions or any(s < 1 for s in self.partitions):
            raise ConfigError(f"partitions must be whole numbers >= 1, got {list(self.partitions)}")
        if not self.kernels or any(k not in KERNELS for k in self.kernels):
            raise ConfigError(f"kernels must be among {', '.join(KERNELS)}, got {list(self.kernels)}")
        if not self.bases or any(b not in BASES for b in self.bases) or "paper" not in self.bases:
            raise ConfigError(f"bases must include 'paper' and be among {', '.join(BASES)}, got {list(self.bases)}")
        if self.folds < 2:
            raise ConfigError(f"folds must be >= 2, got {self.folds}")
        if self.folds_run is not None and not 1 <= self.folds_run <= self.folds:
            raise ConfigError(f"folds-run must be between 1 and folds = {self.folds}, got {self.folds_run}")
        if self.records_per_entity < 4:
            raise ConfigError(f"records per entity must be >= 4, got {self.records_per_entity}")


def block_widths(n_features: int, s: int) -> list[int]:
    """Widths of s contiguous column blocks as the split makes them (sizes differ by at most one)."""
    return [len(block) for block in np.array_split(np.arange(n_features), s)]


def skip_reason(n_features: int, s: int) -> str | None:
    """Why s partitions cannot run privately on n_features features, or None."""
    if s > n_features:
        return f"{s} partitions of {n_features} features"
    if min(block_widths(n_features, s)) < 2:
        return f"a block of 1 feature leaves no mbar < n_j (s = {s}, n = {n_features})"
    return None


def run_fold(
    dataset: Dataset,
    shipped: ShippedDataset,
    s: int,
    fold: int,
    held_out: np.ndarray,
    work: Path,
    options: Table1Options,
    progress: Progress,
) -> list[dict[str, Any]]:
    """Split one outer fold into cells, serve them, and score every kernel and basis; one record per kernel."""
    n_train = int((~held_out).sum())
    rows = max(1, round(n_train / options.records_per_entity))
    records: list[dict[str, Any]] = []
    for kernel in options.kernels:
        # An entity serves one view of its B_j for life (ppsvm.entity.guard), so each kernel gets its own
        # cells, secrets and release logs: the same split, another basis.
        kernel_work = work / kernel
        split = split_dataset(
            dataset,
            SplitOptions(
                rows=rows, cols=s, out_dir=kernel_work, seed=options.seed + fold, task="classify", overwrite=True
            ),
            provenance={"dataset": shipped.key, **dataclasses.asdict(shipped.options)},
            held_out=held_out,
        )
        set_secrets(split, [fixed_secret(NAME, shipped.key, s, fold, j, kernel) for j in range(s)])
        with serve_split(split, kernel_work) as federation:
            seconds: dict[str, float] = {}
            record: dict[str, Any] = {
                "dataset": shipped.key,
                "s": s,
                "fold": fold,
                "kernel": kernel,
                "rows": rows,
                "cells": rows * s,
                "n_train": n_train,
                "n_test": int(held_out.sum()),
            }
            for basis in options.bases:
                started = time.perf_counter()
                model = train(
                    federation,
                    TrainOptions(task="classify", kernel=kernel, seed=options.seed, distribute=False, basis=basis),
                )
                figures = evaluate_model(federation, model)
                seconds[f"ppsvm_{basis}"] = time.perf_counter() - started
                record[f"ppsvm_{basis}"] = {
                    "error_rate": figures["error_rate"],
                    "auc": figures["auc"],
                    "mbar": model.mbar,
                    "columns": len(model.u),
                    "nu": model.nu,
                    "mu": model.mu,
                    "private": model.private,
                    "inner_cv_error": model.training["tuning"]["score"],
                }
            started = time.perf_counter()
            alone = entity_alone(federation, "classify", kernel, nu=None, mu=None, seed=options.seed)
            seconds["entity_alone"] = time.perf_counter() - started
            # An entity's few held-out records are often of one class, where its AUC is undefined (NaN): null.
            record["alone"] = {
                "error_rate": mean_figures(alone)["error_rate"],
                "per_entity": [
                    {
                        "id": a.entity_id,
                        "n_train": a.n_train,
                        "n_test": a.n_test,
                        **{k: v if math.isfinite(v) else None for k, v in a.figures.items()},
                    }
                    for a in alone
                ],
            }
            started = time.perf_counter()
            reference = pooled_reference(
                split.federation_path.parent, "classify", kernel, nu=None, mu=None, seed=options.seed
            )
            seconds["reference"] = time.perf_counter() - started
            record["reference"] = {key: reference[key] for key in ("error_rate", "auc", "basis_rows", "nu", "mu")}
            record["seconds"] = seconds
            records.append(record)
            progress.advance(
                f"{shipped.key} s={s} fold {fold} {kernel}: PPSVM {record['ppsvm_paper']['error_rate']:.3f}, "
                f"alone {record['alone']['error_rate']:.3f}, pooled {record['reference']['error_rate']:.3f}"
            )
    return records


def run(options: Table1Options) -> list[Path]:
    """Run the reproduction; write table1.md, table1.json and the figures into ``options.out``."""
    require_matplotlib()
    datasets = {
        key: (TABLE1_DATASETS[key], load_dataset(TABLE1_DATASETS[key].path, TABLE1_DATASETS[key].options))
        for key in options.datasets
    }
    folds_run = options.folds_run if options.folds_run is not None else options.folds
    plan: list[tuple[str, int]] = []
    skipped: list[dict[str, Any]] = []
    for key, (_, dataset) in datasets.items():
        for s in options.partitions:
            reason = skip_reason(dataset.X.shape[1], s)
            if reason is None:
                plan.append((key, s))
            else:
                skipped.append({"dataset": key, "s": s, "reason": reason})
    progress = Progress(len(plan) * folds_run * len(options.kernels), NAME, enabled=options.progress)
    runs: list[dict[str, Any]] = []
    started = time.perf_counter()
    work_root = Path(tempfile.mkdtemp(prefix="ppsvm-table1-"))
    try:
        for key, s in plan:
            shipped, dataset = datasets[key]
            folds = fold_indices("classify", dataset.y, options.folds, options.seed)
            for fold in range(folds_run):
                held_out = np.zeros(len(dataset.y), dtype=bool)
                held_out[folds[fold]] = True
                work = work_root / f"{key}-s{s}-fold{fold}"
                runs.extend(run_fold(dataset, shipped, s, fold, held_out, work, options, progress))
                shutil.rmtree(work, ignore_errors=True)
    finally:
        shutil.rmtree(work_root, ignore_errors=True)
    settings = {
        "options": {**dataclasses.asdict(options), "out": None},
        "folds_run": folds_run,
        "shapes": {key: list(dataset.X.shape) for key, (_, dataset) in datasets.items()},
        "datasets": {
            key: {"file": shipped.file, **dataclasses.asdict(shipped.options)} for key, (shipped, _) in datasets.items()
        },
        "widths": {
            key: {str(s): block_widths(dataset.X.shape[1], s) for s in options.partitions}
            for key, (_, dataset) in datasets.items()
        },
        "tuning": TUNING,
        "nu_grid": list(NU_GRID_CLASSIFY),
        "mu_grid_times_n": list(MU_GRID_TIMES_N),
        "mbar_rule": "min(min_j n_j - 1, ceil(0.1 * training rows))",
        "secrets": f"sha256('ppsvm-benchmark/{NAME}/<dataset>/<s>/<fold>/<j>')",
        "transport": "ppsvm.entity.server.start_entity in this process, gRPC with mutual TLS over 127.0.0.1",
        "paper_ppsvm_gaussian": PAPER_PPSVM_GAUSSIAN,
    }
    summary = summarise(runs, options)
    text = markdown(summary, skipped, settings, options)
    figures = {figure_name(kernel): png(scatter(summary, kernel)) for kernel in options.kernels}
    payload = {
        "settings": settings,
        "summary": summary,
        "skipped": skipped,
        "runs": runs,
        "seconds": {"total": time.perf_counter() - started},
    }
    return write_results(options.out, NAME, text, payload, figures)


def add_parser(targets: argparse._SubParsersAction) -> None:
    """Add the ``table1`` target to ``ppsvm reproduce``."""
    parser = targets.add_parser(
        "table1",
        help="Mangasarian & Wild Table 1 and Figures 3-4: PPSVM vs pooled vs each entity alone",
        description=(
            "Mangasarian & Wild, Table 1: on Cleveland Heart, Ionosphere, WDBC, Pima and Bupa (shipped with ppsvm), "
            "1, 2, 4 and 8 vertical partitions, about 25 training records per entity, ten-fold cross-validation with "
            "nu and mu tuned on the training folds only. Columns: pooled reduced kernel K(A, Abar') (not private), "
            "PPSVM K(A, B'), each entity alone, the paper's figures beside ours. Figures 3 and 4: PPSVM vs "
            "entity-alone error. The full run takes about an hour on 2 cores."
        ),
    )
    add_common_arguments(
        parser,
        quick_help=(
            f"CI-sized run: every dataset, s in {{{', '.join(map(str, QUICK_PARTITIONS))}}}, "
            f"{QUICK_FOLDS_RUN} of the {OUTER_FOLDS} folds (one to two minutes on 2 cores)"
        ),
    )
    parser.add_argument(
        "--datasets",
        default=",".join(TABLE1_DATASETS),
        help=f"comma-separated, from {', '.join(TABLE1_DATASETS)} (default all)",
    )
    parser.add_argument("--partitions", help="comma-separated numbers of vertical partitions (default 1,2,4,8)")
    parser.add_argument("--kernels", default="linear,gaussian", help="comma-separated (default linear,gaussian)")
    parser.add_argument("--folds", type=int, default=OUTER_FOLDS, help="cross-validation folds (default 10)")
    parser.add_argument("--folds-run", type=int, help="run only the first N folds (default all)")
    parser.add_argument(
        "--records-per-entity",
        type=int,
        default=RECORDS_PER_ENTITY,
        help="training records per entity, which sets the row blocks (default 25)",
    )
    parser.add_argument(
        "--basis",
        choices=("paper", "both"),
        default="paper",
        help="paper: B = [B_1 ... B_s], the paper's mbar random points (default); both: also our "
        "product basis, points from the Cartesian product of the B_j's rows, side by side",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of folds, splits and tuning (default 0)")
    parser.set_defaults(run=cmd)


def cmd(args: argparse.Namespace) -> int:
    """Build :class:`Table1Options` from the command line, run, print where the report and the files are."""
    quick = args.quick
    options = Table1Options(
        out=args.out,
        datasets=parse_list(str, args.datasets, "--datasets"),
        partitions=parse_list(int, args.partitions, "--partitions")
        if args.partitions
        else (QUICK_PARTITIONS if quick else PARTITIONS),
        # Any string list: Table1Options.__post_init__ refuses a name that is not a KernelName.
        kernels=cast(tuple[KernelName, ...], parse_list(str, args.kernels, "--kernels")),
        folds=args.folds,
        folds_run=args.folds_run if args.folds_run is not None else (QUICK_FOLDS_RUN if quick else None),
        records_per_entity=args.records_per_entity,
        bases=("paper", "product") if args.basis == "both" else ("paper",),
        seed=args.seed,
        quick=quick,
        progress=not args.no_progress,
    )
    paths = run(options)
    print_summary(paths)
    return 0
