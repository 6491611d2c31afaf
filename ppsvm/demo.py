"""``ppsvm demo``: split a dataset, start the entities as processes, train, evaluate, compare."""

from __future__ import annotations

import dataclasses
import json
import logging
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ppsvm.api.inprocess import set_secrets, simulation_secrets
from ppsvm.config import federation_at_addresses, load_federation
from ppsvm.coordinator.evaluate import entity_alone, evaluate_model, mean_figures
from ppsvm.coordinator.reference import LABEL as REFERENCE_LABEL
from ppsvm.coordinator.reference import pooled_reference
from ppsvm.coordinator.train import TrainOptions, train_and_save
from ppsvm.data.dataset import DatasetOptions, load_dataset
from ppsvm.data.partition import SplitOptions, column_layout, split_dataset
from ppsvm.data.shipped import WDBC
from ppsvm.errors import EntityError
from ppsvm.processes import EntityProcesses

logger = logging.getLogger(__name__)

# The default dataset: Wisconsin Diagnostic Breast Cancer, id in column 0, label M/B in column 1.
DEFAULT_DATA = WDBC.path
DEFAULT_DATASET_OPTIONS = WDBC.options


@dataclass(frozen=True)
class DemoOptions:
    data: Path
    dataset: DatasetOptions
    rows: int
    cols: int | tuple[tuple[str, ...], ...]  # a count of contiguous column blocks, or each block's feature names
    test_fraction: float
    seed: int
    train: TrainOptions
    out: Path | None
    json: bool
    insecure: bool = False


def run_demo(options: DemoOptions) -> dict[str, Any]:
    """Run the whole pipeline on local processes; returns the PPSVM evaluation object.

    An entity-alone baseline that fails (its deadline passed, its entity refused or went away) does not fail
    the demo: the federated model's figures are printed with a line naming the failure and how to give the
    baselines more time. A failure of the federated training or evaluation does fail it.
    """
    work = options.out or Path(tempfile.mkdtemp(prefix="ppsvm-demo-"))
    try:
        return _run(options, work)
    finally:
        if options.out is None:
            shutil.rmtree(work, ignore_errors=True)


def _run(options: DemoOptions, work: Path) -> dict[str, Any]:
    dataset = load_dataset(options.data, options.dataset)
    cols, column_blocks = column_layout(options.cols, dataset.feature_names)
    options = dataclasses.replace(options, cols=cols)  # the count from here on: the blocks are in the split
    split = split_dataset(
        dataset,
        SplitOptions(
            rows=options.rows,
            cols=cols,
            out_dir=work,
            test_fraction=options.test_fraction,
            seed=options.seed,
            task=options.train.task,
            kernel=options.train.kernel,
            overwrite=True,
        ),
        provenance=dataclasses.asdict(options.dataset),
        column_blocks=column_blocks,
    )
    # Demo only: secrets derived from the seed make two runs alike; a real federation's are random.
    set_secrets(split, simulation_secrets(options.seed, cols))
    logger.info(
        "split %s (%d x %d) into a %d x %d checkerboard in %s",
        options.data.name,
        *dataset.X.shape,
        options.rows,
        cols,
        work,
    )
    planned = load_federation(split.federation_path)
    with EntityProcesses(list(split.entity_config_paths), insecure=options.insecure) as running:
        live_path = work / "federation.live.toml"
        live_path.write_text(federation_at_addresses(planned, running.addresses), encoding="utf-8")
        federation = dataclasses.replace(load_federation(live_path), insecure=options.insecure)
        logger.info("started %d entity processes", len(federation.entities))
        model = train_and_save(federation, options.train, work / "model.json")
        result = evaluate_model(federation, model, options.train.deadline)
        # The federated model is trained and evaluated by now: a failed baseline must not hide it.
        alone: dict[str, float] | EntityError
        try:
            alone = mean_figures(
                entity_alone(
                    federation,
                    model.task,
                    model.kernel,
                    nu=None,
                    mu=None,
                    seed=options.seed,
                    deadline=options.train.deadline,
                )
            )
        except EntityError as error:
            alone = error
    reference = pooled_reference(work, model.task, model.kernel, nu=None, mu=None, seed=options.seed)
    _print_table(
        options,
        model.training["n_train"],
        model.mbar,
        result,
        alone,
        reference,
        len(federation.entities),
        model.training.get("warnings", []),
    )
    return result


def _print_table(
    options: DemoOptions,
    n_train: int,
    mbar: int,
    ppsvm: dict[str, Any],
    alone: dict[str, float] | EntityError,
    reference: dict[str, Any],
    n_entities: int,
    warnings: list[str],
) -> None:
    keys = [k for k in ("error_rate", "auc", "relative_error", "rmse") if k in ppsvm]
    print(
        f"\n{options.data.name}: {options.rows} x {options.cols} checkerboard, {n_entities} entity processes, "
        f"{n_train} training and {ppsvm['n_test']} held-out records, {options.train.kernel} kernel, mbar = {mbar}"
    )
    print(f"{'model':<62}" + "".join(f"{k:>16}" for k in keys))
    rows = [
        ("PPSVM K(A, B') over gRPC" + ("" if ppsvm["private"] else "  [NOT PRIVATE]"), ppsvm),
        ("each entity alone (mean over entities)", alone),
        (REFERENCE_LABEL, reference),
    ]
    for name, figures in rows:
        if isinstance(figures, EntityError):
            print(f"{name:<62}{'failed: see below':>{16 * len(keys)}}")
            continue
        print(f"{name:<62}" + "".join(f"{figures[k]:>16.4f}" for k in keys))
    # The figures of a model that ignores the features, under the same column names.
    baseline = ppsvm["trivial_baseline"]
    trivial = {
        "error_rate": baseline.get("majority_error_rate"),
        "auc": baseline.get("constant_auc"),
        "relative_error": baseline.get("mean_relative_error"),
        "rmse": baseline.get("mean_rmse"),
    }
    name = "majority class, constant score" if "majority_error_rate" in baseline else "mean target for everyone"
    print(f"{'trivial baseline: ' + name:<62}" + "".join(f"{trivial[k]:>16.4f}" for k in keys))
    main = keys[0]  # error_rate or relative_error: lower is better
    if isinstance(alone, EntityError):
        print(f"\nEach entity alone: not computed. {alone}")
        # A refusal is the entity's answer; anything else (a missed deadline above all) may pass with more time.
        if not alone.refused:
            print(
                "If a baseline ran out of time, give each entity call more with --deadline SECONDS "
                f"(this run: {options.train.deadline:g} s)."
            )
    elif ppsvm[main] > alone[main]:
        other = "gaussian" if options.train.kernel == "linear" else "linear"
        why = " ".join(w[:1].upper() + w[1:] for w in warnings) or (
            f"mbar = {mbar} random points per column block may be too few for these data, or the tuning may have "
            f"missed: try --kernel {other}, or --nu and --mu by hand."
        )
        print(f"\nPPSVM's {main} is worse than each entity alone here. {why}")
    if options.json:
        print(json.dumps(ppsvm))  # the same object as `ppsvm coordinator evaluate --json`
