"""``ppsvm reproduce table1``: Mangasarian & Wild's Table 1 and their Figures 3 and 4, by their protocol.

For each dataset and each number s of vertical partitions (column blocks), ten-fold cross-validation:
every outer fold's training part is cut into a checkerboard of r x s cells of about 25 records each
(section 4: "each block had data for approximately 25 examples"), each cell is served as a real gRPC
entity (in this process, :mod:`ppsvm.api.inprocess`), and three classifiers are trained on the training
part and scored on the held-out fold:

- the "ideal" pooled reduced kernel K(A, Abar'), Abar a random 10% of the training rows, drawn afresh
  for every s and fold as in the paper (not private; :func:`ppsvm.coordinator.reference.pooled_reference`);
- PPSVM K(A, B') assembled from the entities' blocks, mbar = min(n_j - 1, 10% of the training rows)
  (:func:`ppsvm.coordinator.train.train`);
- each entity alone on its own cell, K(A_ij, A_ij'); only its error leaves it
  (:func:`ppsvm.coordinator.evaluate.entity_alone`).

Tuning, by default the paper's: the nested uniform design (2 x 30 points, log10 nu in [-7, 7];
:func:`ppsvm.core.tuning.tune_uniform_design`), scored by 5-fold cross-validation on the training part
when sharing and by leave-one-out inside each entity alone. ``tunings`` may add (or replace it by)
ppsvm's 7 x 8 grid with 5-fold cross-validation everywhere. Secrets, splits and folds are seeded, so a
rerun gives the same numbers. :mod:`ppsvm.experiments.table1.report` writes the table, with the paper's
figure and the difference beside each of ours, and the figures.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import math
import re
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np

from ppsvm.api.inprocess import (
    add_privacy_settings,
    fixed_secret,
    needs_single_block_consent,
    serve_split,
    set_secrets,
)
from ppsvm.cli_arguments import add_dataset_arguments, dataset_options_from_args
from ppsvm.config import SINGLE_BLOCK_CONSENT_KEY
from ppsvm.constants import DEFAULT_FOLDS
from ppsvm.coordinator.evaluate import entity_alone, evaluate_model, mean_figures
from ppsvm.coordinator.reference import pooled_reference
from ppsvm.coordinator.train import BASES, TrainOptions, train
from ppsvm.core.design import design_quality
from ppsvm.core.kernels import KERNELS, KernelName
from ppsvm.core.model import Model
from ppsvm.core.tuning import SEARCHES, Search, fold_indices
from ppsvm.data.dataset import Dataset, DatasetOptions, load_dataset
from ppsvm.data.partition import SplitOptions, split_dataset
from ppsvm.data.shipped import TABLE1_DATASETS
from ppsvm.entity.cell import LEAVE_ONE_OUT_MAX_ROWS
from ppsvm.errors import ConfigError
from ppsvm.experiments.report import (
    DEFAULT_OUT,
    Progress,
    add_common_arguments,
    parse_list,
    png,
    print_summary,
    quiet_logs,
    require_matplotlib,
    write_results,
)
from ppsvm.experiments.table1.report import NAME, figures, markdown, paper_table, summarise

PARTITIONS = (1, 2, 4, 8)
RECORDS_PER_ENTITY = 25
OUTER_FOLDS = 10
# Each entity alone is tuned by leave-one-out over 60 points: about 0.35 s per entity here (warm-started re-solves).
# The full table has about 800 entities per fold, so by default a seeded sample of this many per
# (dataset, s, fold) reports; their mean estimates the mean over all entities (--alone-entities all).
ALONE_ENTITIES = 10
# The quick run (part of the test suite): every dataset, the partitions of Figures 3 and 4, one outer fold.
QUICK_PARTITIONS = (2, 4)
QUICK_FOLDS_RUN = 1
QUICK_ALONE_ENTITIES = 2
# Every fold trains and tunes dozens of models: their INFO lines, and the warning that a Gaussian basis of a
# few random points is weak (Table 1's very setting), would bury the progress bar.
QUIET = {"ppsvm": logging.WARNING, "ppsvm.coordinator.train": logging.ERROR}


@dataclass(frozen=True)
class UserDataset:
    """A dataset the user brings: its file, how to read it, and the name the report gives it."""

    path: Path
    options: DatasetOptions
    name: str


@dataclass(frozen=True)
class Table1Options:
    """What to run; the defaults are the paper's setting.

    Attributes
    ----------
    datasets : tuple of str
        Keys of :data:`ppsvm.data.shipped.TABLE1_DATASETS`; ignored when ``data`` is given.
    data : UserDataset, optional
        Run the protocol on this dataset instead of the shipped ones.
    partitions : tuple of int
        Numbers of vertical partitions s; a value that leaves a block with one feature is skipped
        (mbar < n_j = 1 is impossible), and the output says so.
    kernels : tuple of str
        The paper's table is Gaussian; "linear" adds our linear-kernel variant.
    folds : int
        Outer cross-validation folds the data is cut into.
    folds_run : int or None
        Run only the first ``folds_run`` outer folds (None: all).
    bases : tuple of str
        "paper" (B = [B_1 ... B_s], mbar points) and optionally "product" (our addition).
    tunings : tuple of str
        "uniform-design" (the paper's protocol) and/or "grid" (ppsvm's grid, 5-fold everywhere).
    alone_entities : int or None
        Entities alone asked per (dataset, s, fold), a seeded sample; None: all of them.
    b_draws : int
        Independent draws of the random matrix B (new column-block secrets) for the PPSVM column;
        the report gives their mean and spread.
    """

    out: Path = DEFAULT_OUT
    datasets: tuple[str, ...] = tuple(TABLE1_DATASETS)
    data: UserDataset | None = None
    partitions: tuple[int, ...] = PARTITIONS
    kernels: tuple[KernelName, ...] = ("gaussian",)
    folds: int = OUTER_FOLDS
    folds_run: int | None = None
    records_per_entity: int = RECORDS_PER_ENTITY
    bases: tuple[str, ...] = ("paper",)
    tunings: tuple[Search, ...] = ("uniform-design",)
    alone_entities: int | None = ALONE_ENTITIES
    b_draws: int = 1
    seed: int = 0
    quick: bool = False
    progress: bool = True

    def __post_init__(self) -> None:
        unknown = [key for key in self.datasets if key not in TABLE1_DATASETS]
        if self.data is None and (unknown or not self.datasets):
            raise ConfigError(
                f"datasets must be among {', '.join(TABLE1_DATASETS)}; got {', '.join(unknown) or 'none'}"
            )
        if self.data is not None and not self.data.name.replace("-", "").replace("_", "").isalnum():
            raise ConfigError(f"--name must be letters, digits, '-' and '_', got {self.data.name!r}")
        if not self.partitions or any(s < 1 for s in self.partitions):
            raise ConfigError(f"partitions must be whole numbers >= 1, got {list(self.partitions)}")
        if not self.kernels or any(k not in KERNELS for k in self.kernels):
            raise ConfigError(f"kernels must be among {', '.join(KERNELS)}, got {list(self.kernels)}")
        if not self.bases or any(b not in BASES for b in self.bases) or "paper" not in self.bases:
            raise ConfigError(f"bases must include 'paper' and be among {', '.join(BASES)}, got {list(self.bases)}")
        if (
            not self.tunings
            or any(t not in SEARCHES for t in self.tunings)
            or len(set(self.tunings)) < len(self.tunings)
        ):
            raise ConfigError(f"tunings must be among {', '.join(SEARCHES)}, each once, got {list(self.tunings)}")
        if self.folds < 2:
            raise ConfigError(f"folds must be >= 2, got {self.folds}")
        if self.folds_run is not None and not 1 <= self.folds_run <= self.folds:
            raise ConfigError(f"folds-run must be between 1 and folds = {self.folds}, got {self.folds_run}")
        if not 4 <= self.records_per_entity <= LEAVE_ONE_OUT_MAX_ROWS:
            raise ConfigError(
                f"records per entity must be between 4 and {LEAVE_ONE_OUT_MAX_ROWS} (entities alone are tuned by "
                f"leave-one-out), got {self.records_per_entity}"
            )
        if self.alone_entities is not None and self.alone_entities < 0:
            raise ConfigError(f"alone-entities must be a whole number >= 0 or 'all', got {self.alone_entities}")
        if self.b_draws < 1:
            raise ConfigError(f"b-draws must be >= 1, got {self.b_draws}")


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


def alone_sample(entity_ids: list[str], count: int | None, seed: int, s: int, fold: int) -> list[str]:
    """The entities asked to work alone in one fold: all, or ``count`` of them drawn with a seeded generator."""
    if count is None or count >= len(entity_ids):
        return list(entity_ids)
    rng = np.random.default_rng([seed, s, fold])
    return [entity_ids[k] for k in np.sort(rng.choice(len(entity_ids), size=count, replace=False))]


def reference_seed(seed: int, s: int, fold: int) -> int:
    """The pooled reference's seed: its Abar (10% of the rows) is drawn afresh for each s and fold, as in the paper."""
    return seed + 1000 * s + fold


def _split(
    dataset: Dataset, key: str, s: int, seed: int, held_out: np.ndarray, work: Path, rows: int, secrets: list[str]
) -> Any:
    """The fold's checkerboard split (records shuffled by ``seed``) with the given column-block secrets."""
    split = split_dataset(
        dataset,
        SplitOptions(rows=rows, cols=s, out_dir=work, seed=seed, task="classify", overwrite=True),
        provenance={"dataset": key},
        held_out=held_out,
    )
    set_secrets(split, secrets)
    return split


def run_fold(
    dataset: Dataset,
    key: str,
    s: int,
    fold: int,
    held_out: np.ndarray,
    work: Path,
    options: Table1Options,
    progress: Progress,
) -> list[dict[str, Any]]:
    """Split one outer fold into cells, serve them, and score every column; one record per kernel."""
    n_train = int((~held_out).sum())
    rows = max(1, round(n_train / options.records_per_entity))
    records: list[dict[str, Any]] = []
    for kernel in options.kernels:
        record: dict[str, Any] = {
            "dataset": key,
            "s": s,
            "fold": fold,
            "kernel": kernel,
            "rows": rows,
            "cells": rows * s,
            "n_train": n_train,
            "n_test": int(held_out.sum()),
            "ppsvm": {t: {b: [] for b in options.bases} for t in options.tunings},
            "alone": {},
            "reference": {},
            # The paper's horizontal cells (s = 1), and the product basis, need every entity's block on its own,
            # which a column-block peer can invert: the entities consent (privacy rule 8); the report says so.
            "single_block_consent": any(needs_single_block_consent(rows, s, basis) for basis in options.bases),
        }
        seconds: dict[str, float] = {}
        for draw in range(options.b_draws):
            # An entity serves one view of its B_j for life (ppsvm.entity.guard), so each kernel and draw of B gets
            # its own cells, secrets and release logs: the same split, another basis.
            secrets = [fixed_secret(NAME, key, s, fold, j, kernel, draw) for j in range(s)]
            split = _split(dataset, key, s, options.seed + fold, held_out, work / f"{kernel}-{draw}", rows, secrets)
            if record["single_block_consent"]:
                add_privacy_settings(split.entity_config_paths, {SINGLE_BLOCK_CONSENT_KEY: True})
            with serve_split(split, work / f"{kernel}-{draw}") as federation:
                for tuning in options.tunings:
                    for basis in options.bases:
                        started = time.perf_counter()
                        model = train(
                            federation,
                            TrainOptions(
                                task="classify",
                                kernel=kernel,
                                seed=options.seed,
                                distribute=False,
                                basis=basis,
                                search=tuning,
                                folds=DEFAULT_FOLDS,
                            ),
                        )
                        assert isinstance(model, Model)  # the papers' data sets have two classes
                        figures = evaluate_model(federation, model)
                        label = f"ppsvm {basis} {tuning}"
                        seconds[label] = seconds.get(label, 0.0) + time.perf_counter() - started
                        record["ppsvm"][tuning][basis].append(
                            {
                                "error_rate": figures["error_rate"],
                                "mbar": model.mbar,
                                "columns": len(model.u),
                                "nu": model.nu,
                                "mu": model.mu,
                                "private": model.private,
                                "inner_cv_error": model.training["tuning"]["score"],
                            }
                        )
                if draw == 0:
                    # Neither depends on B: the entities' own kernels, and the pooled rows.
                    for tuning in options.tunings:
                        record["alone"][tuning] = _alone(federation, kernel, tuning, s, fold, options, seconds)
                        started = time.perf_counter()
                        reference = pooled_reference(
                            split.federation_path.parent,
                            "classify",
                            kernel,
                            nu=None,
                            mu=None,
                            seed=reference_seed(options.seed, s, fold),
                            search=tuning,
                        )
                        seconds[f"reference {tuning}"] = time.perf_counter() - started
                        record["reference"][tuning] = {
                            k: reference[k] for k in ("error_rate", "auc", "basis_rows", "nu", "mu")
                        }
            shutil.rmtree(work / f"{kernel}-{draw}", ignore_errors=True)
        record["seconds"] = seconds
        records.append(record)
        main = options.tunings[0]
        alone = record["alone"][main]["error_rate"]
        progress.advance(
            f"{key} s={s} fold {fold} {kernel}: PPSVM {record['ppsvm'][main]['paper'][0]['error_rate']:.3f}, "
            f"alone {'-' if alone is None else f'{alone:.3f}'}, ideal {record['reference'][main]['error_rate']:.3f}"
        )
    return records


def _alone(
    federation: Any,
    kernel: KernelName,
    tuning: Search,
    s: int,
    fold: int,
    options: Table1Options,
    seconds: dict[str, float],
) -> dict[str, Any]:
    """Each entity alone (a seeded sample of them), tuned by leave-one-out under the paper's protocol."""
    chosen = alone_sample([e.id for e in federation.entities], options.alone_entities, options.seed, s, fold)
    if not chosen:
        return {"error_rate": None, "per_entity": [], "of": len(federation.entities)}
    started = time.perf_counter()
    alone = entity_alone(
        federation,
        "classify",
        kernel,
        nu=None,
        mu=None,
        seed=options.seed,
        search=tuning,
        leave_one_out=tuning == "uniform-design",
        entities=chosen,
    )
    seconds[f"alone {tuning}"] = time.perf_counter() - started
    # An entity's few held-out records are often of one class, where its AUC is undefined (NaN): null.
    return {
        "error_rate": mean_figures(alone)["error_rate"],
        "of": len(federation.entities),
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


def _datasets(options: Table1Options) -> dict[str, tuple[str, Dataset]]:
    """key -> (title, dataset), read before any work so that a bad file fails at once."""
    if options.data is not None:
        return {options.data.name: (options.data.name, load_dataset(options.data.path, options.data.options))}
    return {
        key: (TABLE1_DATASETS[key].title, load_dataset(TABLE1_DATASETS[key].path, TABLE1_DATASETS[key].options))
        for key in options.datasets
    }


def run(options: Table1Options) -> list[Path]:
    """Run the reproduction; write table1.md (table1-NAME.md for a user's dataset), its JSON and figures."""
    require_matplotlib()
    datasets = _datasets(options)
    for key, (_, dataset) in datasets.items():
        if set(np.unique(dataset.y)) != {-1.0, 1.0}:
            raise ConfigError(f"{key}: Table 1 is binary classification, and this dataset's labels are of one class")
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
    if not plan:
        raise ConfigError(
            "nothing to run: " + "; ".join(f"{s['dataset']} s = {s['s']}: {s['reason']}" for s in skipped)
        )
    name = NAME if options.data is None else f"{NAME}-{options.data.name}"
    progress = Progress(len(plan) * folds_run * len(options.kernels), name, enabled=options.progress)
    runs: list[dict[str, Any]] = []
    started = time.perf_counter()
    work_root = Path(tempfile.mkdtemp(prefix="ppsvm-table1-"))
    with quiet_logs(QUIET):
        try:
            for key, s in plan:
                _, dataset = datasets[key]
                folds = fold_indices("classify", dataset.y, options.folds, options.seed)
                for fold in range(folds_run):
                    held_out = np.zeros(len(dataset.y), dtype=bool)
                    held_out[folds[fold]] = True
                    work = work_root / f"{key}-s{s}-fold{fold}"
                    runs.extend(run_fold(dataset, key, s, fold, held_out, work, options, progress))
                    shutil.rmtree(work, ignore_errors=True)
        finally:
            shutil.rmtree(work_root, ignore_errors=True)
    seconds = time.perf_counter() - started
    titles = {key: title for key, (title, _) in datasets.items()}
    settings: dict[str, Any] = {
        "options": {**dataclasses.asdict(options), "out": None, "data": None},
        "data": None
        if options.data is None
        else {"file": str(options.data.path), "name": options.data.name, **dataclasses.asdict(options.data.options)},
        "folds_run": folds_run,
        "titles": titles,
        "shapes": {key: list(dataset.X.shape) for key, (_, dataset) in datasets.items()},
        "datasets": {
            key: {"file": TABLE1_DATASETS[key].file, **dataclasses.asdict(TABLE1_DATASETS[key].options)}
            for key in datasets
            if key in TABLE1_DATASETS
        },
        "widths": {
            key: {str(s): block_widths(dataset.X.shape[1], s) for s in options.partitions}
            for key, (_, dataset) in datasets.items()
        },
        "design_discrepancy": design_quality(),
        "mbar_rule": "min(min_j n_j - 1, ceil(0.1 * training rows))",
        "secrets": f"sha256('ppsvm-benchmark/{NAME}/<dataset>/<s>/<fold>/<j>/<kernel>/<draw>')",
        "transport": "ppsvm.entity.server.start_entity in this process, gRPC with mutual TLS over 127.0.0.1",
    }
    paper = paper_table() if options.data is None else {}
    summary = summarise(runs, options, paper)
    text = markdown(summary, skipped, settings, options, seconds)
    drawn = {file: png(figure) for file, figure in figures(summary, options, titles, name).items()}
    payload = {
        "settings": settings,
        "paper": [{"dataset": k, "s": s, **row} for (k, s), row in sorted(paper.items())],
        "summary": summary,
        "skipped": skipped,
        "runs": runs,
        "seconds": {"total": seconds},
    }
    return write_results(options.out, name, text, payload, drawn)


def add_parser(targets: argparse._SubParsersAction) -> None:
    """Add the ``table1`` target to ``ppsvm reproduce``."""
    parser = targets.add_parser(
        "table1",
        help="Mangasarian & Wild Table 1 and Figures 3-4: PPSVM vs the pooled ideal vs each entity alone",
        description=(
            "Mangasarian & Wild, Table 1, by the paper's protocol: on Cleveland Heart, Ionosphere, WDBC, Pima and "
            "Bupa (shipped with ppsvm) or on your own data (--data), 1, 2, 4 and 8 vertical partitions, about 25 "
            "training records per entity, ten-fold cross-validation; nu and mu by the nested uniform design, 5-fold "
            "cross-validation when sharing and leave-one-out for each entity alone. Columns: the ideal pooled "
            "reduced kernel K(A, Abar') (not private), PPSVM K(A, B'), each entity alone, each beside the paper's "
            "figure. Figures 3 and 4: PPSVM vs entity-alone error with 2 and 4 partitions. The full default run "
            "takes about 50 minutes on 2 cores."
        ),
    )
    add_common_arguments(
        parser,
        quick_help=(
            f"CI-sized run: s in {{{', '.join(map(str, QUICK_PARTITIONS))}}}, {QUICK_FOLDS_RUN} of the {OUTER_FOLDS} "
            f"folds, {QUICK_ALONE_ENTITIES} entities alone per fold (about two minutes on 2 cores)"
        ),
    )
    parser.add_argument(
        "--datasets",
        default=",".join(TABLE1_DATASETS),
        help=f"comma-separated, from {', '.join(TABLE1_DATASETS)} (default all)",
    )
    parser.add_argument(
        "--data",
        type=Path,
        help="run the protocol on this delimited file instead (with --label and, for text labels, --positive); "
        "the report is table1-NAME.md",
    )
    parser.add_argument("--name", help="the dataset's name in the report and file names (default: the file's stem)")
    parser.add_argument("--partitions", help="comma-separated numbers of vertical partitions (default 1,2,4,8)")
    parser.add_argument(
        "--kernels",
        default="gaussian",
        help="comma-separated: gaussian (the paper's), linear (ours) (default gaussian)",
    )
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
    parser.add_argument(
        "--tuning",
        choices=("uniform-design", "grid", "both"),
        default="uniform-design",
        help="uniform-design: the paper's nested uniform design, leave-one-out for each entity alone (default); "
        "grid: ppsvm's 7 x 8 grid with 5-fold cross-validation everywhere; both: each column both ways, and the "
        "report shows where they differ",
    )
    parser.add_argument(
        "--alone-entities",
        help=f"entities alone per (dataset, s, fold), a seeded sample, or 'all' (default {ALONE_ENTITIES}, "
        f"{QUICK_ALONE_ENTITIES} with --quick; leave-one-out tuning costs about 0.35 s per entity)",
    )
    parser.add_argument(
        "--b-draws",
        type=int,
        default=1,
        help="independent draws of the random matrix B for the PPSVM column; the report gives their mean and "
        "spread (default 1)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of folds, splits and tuning (default 0)")
    add_dataset_arguments(parser)
    parser.set_defaults(run=cmd)


def cmd(args: argparse.Namespace) -> int:
    """Build :class:`Table1Options` from the command line, run, print where the report and the files are."""
    quick = args.quick
    data = None
    if args.data is not None:
        # The file's stem, made fit for a file name ("clinic visits.csv" -> clinic-visits), unless --name says.
        name = args.name or re.sub(r"[^A-Za-z0-9_-]+", "-", args.data.stem).strip("-") or "data"
        data = UserDataset(args.data, dataset_options_from_args(args, "classify"), name)
    elif args.name is not None:
        raise ConfigError("--name names a dataset given with --data")
    alone = (
        str(QUICK_ALONE_ENTITIES if quick else ALONE_ENTITIES) if args.alone_entities is None else args.alone_entities
    )
    alone = alone.strip().lower()
    if alone != "all" and not alone.isdigit():
        raise ConfigError(f"--alone-entities must be a whole number or 'all', got {args.alone_entities!r}")
    options = Table1Options(
        out=args.out,
        datasets=parse_list(str, args.datasets, "--datasets"),
        data=data,
        partitions=parse_list(int, args.partitions, "--partitions")
        if args.partitions
        else (QUICK_PARTITIONS if quick else PARTITIONS),
        # Any string list: Table1Options.__post_init__ refuses a name that is not a KernelName.
        kernels=cast(tuple[KernelName, ...], parse_list(str, args.kernels, "--kernels")),
        folds=args.folds,
        folds_run=args.folds_run if args.folds_run is not None else (QUICK_FOLDS_RUN if quick else None),
        records_per_entity=args.records_per_entity,
        bases=("paper", "product") if args.basis == "both" else ("paper",),
        tunings=("uniform-design", "grid") if args.tuning == "both" else (cast(Search, args.tuning),),
        alone_entities=None if alone == "all" else int(alone),
        b_draws=args.b_draws,
        seed=args.seed,
        quick=quick,
        progress=not args.no_progress,
    )
    paths = run(options)
    print_summary(paths)
    return 0
