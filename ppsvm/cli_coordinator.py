"""``ppsvm coordinator train|evaluate|baselines|predict|serve|status``: the coordinator's commands.

Each goes through :class:`ppsvm.api.federation.Federation` (the DP training through
:func:`ppsvm.coordinator.dp_train.train_dp_and_save`), as a Python caller would.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ppsvm.cli_arguments import (
    AUTO,
    add_basis_argument,
    add_connection_arguments,
    add_dp_arguments,
    add_engine_arguments,
    add_records_argument,
    add_search_argument,
    add_task_arguments,
    auto_int,
    engine_flags,
    federation_from_args,
    read_id_list,
    training_flags,
)
from ppsvm.constants import HEALTH_DEADLINE_S
from ppsvm.coordinator.train import plan_text
from ppsvm.core.dp_model import DpModel, load_any_model
from ppsvm.core.kernels import KERNELS
from ppsvm.core.model import Model
from ppsvm.core.multiclass import MulticlassModel, RandomKernelModel, prediction_outputs
from ppsvm.errors import ConfigError
from ppsvm.wire.certs import DEFAULT_COORDINATOR_NAME, DEFAULT_VALID_DAYS
from ppsvm.wire.metrics import add_metrics_arguments, metrics_at


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``coordinator`` and its actions to the ``ppsvm`` command."""
    coordinator = subparsers.add_parser("coordinator", help="train, evaluate, score and serve models over a federation")
    actions = coordinator.add_subparsers(dest="action", required=True, metavar="ACTION")
    train = actions.add_parser(
        "train", help="assemble K(A, B') from the entities, solve the LP, write and distribute the model"
    )
    add_connection_arguments(train)
    train.add_argument("--model-out", required=True, help="where to write the model (JSON, written atomically)")
    train.add_argument("--no-distribute", action="store_true", help="do not send the model to the entities")
    train.add_argument("--json", action="store_true", help="print a JSON summary")
    train.add_argument(
        "--metrics-textfile",
        metavar="FILE",
        help="after a successful training, write its durations (total and LP), record count and finish time in "
        "Prometheus's text format to FILE (replaced atomically), for node_exporter's textfile collector: a "
        "training job is too short-lived to be scraped. FILE must end in .prom for the collector to read it",
    )
    add_task_arguments(train)
    add_dp_arguments(train)
    add_basis_argument(train)
    add_engine_arguments(train)
    train.set_defaults(run=cmd_train)

    public = actions.add_parser(
        "public-source",
        help="a data owner: write the public source file of the DP methods (train --public) from its entity config",
        description="Run by a data owner where its entity config and secret are (neither leaves): reads the public "
        "records through the entity's own [schema] and label settings, refusing a record that does not fit (naming "
        "the line and column), and writes a TOML file with [data], [schema] and [check], the keyed check of the "
        "schema that the entities publish, which `coordinator train` compares with every entity's before anything "
        "is requested or spent. Nothing in the file is private: give it to the coordinator with the records.",
    )
    public.add_argument("--entity-config", required=True, type=Path, help="the owner's entity config (TOML)")
    public.add_argument(
        "--data",
        required=True,
        type=Path,
        help="the public records: a CSV (or .parquet) with the entity's id and label columns and its feature "
        "columns, by name, in any order",
    )
    public.add_argument("--out", required=True, type=Path, help="the public source file to write (TOML)")
    public.set_defaults(run=cmd_public_source)

    view = actions.add_parser(
        "view",
        help="write what the coordinator receives for the training records (for audits and attack tests)",
        description="Asks the entities for the training records' kernel at the training view, as `train` does, "
        "and writes OUT/replies/<entity>-train.npy (every reply as received: uint64 masked shares where a row "
        "block's blocks are combined by secure aggregation), OUT/kernel-train.npy (the assembled kernel at the "
        "width the entities were asked for), OUT/ids-train.txt (the records of its rows) and OUT/view.json "
        "(kernel, mbar, mu, scaling). The fetch is a release: every entity records it.",
    )
    add_connection_arguments(view)
    view.add_argument("--out", required=True, type=Path, help="directory to write into")
    view.add_argument("--kernel", choices=KERNELS, help="default: the federation file's, else gaussian")
    view.add_argument("--mbar", type=auto_int, help="default: the federation file's, else as train's auto")
    view.set_defaults(run=cmd_view)

    evaluate = actions.add_parser("evaluate", help="evaluate a model on the entities' held-out records")
    add_connection_arguments(evaluate)
    evaluate.add_argument("--model", required=True)
    evaluate.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object: error_rate and auc (classify) or relative_error and rmse "
        "(regress), n_test, private, the trivial baseline; classifying, also the confusion matrix, sensitivity, "
        "specificity, balanced accuracy, calibration by score decile and ROC points",
    )
    evaluate.add_argument(
        "--plot",
        metavar="DIR",
        help="classifiers: write roc.png and calibration.png into DIR (needs matplotlib: pip install "
        "'ppsvm[reproduce]')",
    )
    evaluate.add_argument(
        "--epsilon",
        type=float,
        help="DP models only, required for them: the epsilon each entity spends on its noised error count",
    )
    evaluate.set_defaults(run=cmd_evaluate)

    baselines = actions.add_parser(
        "baselines", help="each entity trains on its own cell alone and reports only its held-out error"
    )
    add_connection_arguments(baselines)
    baselines.add_argument("--json", action="store_true")
    add_task_arguments(baselines, random_kernel=False)
    add_search_argument(baselines)
    baselines.add_argument(
        "--leave-one-out",
        action="store_true",
        help="tune by leave-one-out instead of 5-fold cross-validation, as the papers did for cells of about 25 "
        "records (entities refuse it above 200 training records)",
    )
    baselines.set_defaults(run=cmd_baselines)

    predict = actions.add_parser(
        "predict",
        help="score records by id (training, held-out or new ones; a DP model: from a file of their features) and "
        "write a CSV of the answers",
    )
    add_connection_arguments(predict, federation=False)
    predict.add_argument(
        "--federation", help="the federation file (random-kernel models: the entities that hold the records)"
    )
    predict.add_argument("--model", required=True, help="a random-kernel or a DP model file")
    records = predict.add_mutually_exclusive_group(required=True)
    records.add_argument(
        "--ids", metavar="FILE", help="random-kernel models: one record id per line (a first line 'id' is a header)"
    )
    add_records_argument(records)
    predict.add_argument(
        "--out",
        required=True,
        metavar="FILE",
        help="CSV: id, decision, prediction (the declared label), probability (calibrated P(positive)), status",
    )
    predict.add_argument(
        "--id-key",
        metavar="FILE",
        help="the federation's record-id key: --ids then holds real ids, not pseudonyms. Only where whoever runs "
        "this may hold the key (the coordinator must not: map ids at the entities with `ppsvm pseudonyms`)",
    )
    predict.add_argument("--batch", type=int, default=1000, help="records per round of kernel requests (%(default)s)")
    predict.set_defaults(run=cmd_predict)

    serve = actions.add_parser("serve", help="answer prediction requests by record id (gRPC Coordinator service)")
    add_connection_arguments(serve)
    serve.add_argument("--model", required=True, help="a random-kernel or a DP model file")
    add_records_argument(serve)
    serve.add_argument(
        "--listen",
        default="127.0.0.1:0",
        help="HOST:PORT (default %(default)s: a free port); with TLS, clients need a certificate "
        "from the federation CA",
    )
    add_metrics_arguments(serve)
    serve.set_defaults(run=cmd_serve)

    status = actions.add_parser(
        "status",
        help="ask every entity's health check (grpc.health.v1) at once; exit 0 only when all are SERVING",
        description="Asks each entity of the federation, and with --serve a prediction service, whether it is "
        "SERVING, over the coordinator's mutual TLS, all at once, without retries. Prints one line per server: "
        "id, address, SERVING / NOT_SERVING / unreachable / refused, milliseconds (fresh connection and TLS "
        "handshake included) and the reason when it is not serving. Exits 0 when every one is SERVING, 1 otherwise.",
    )
    status.add_argument(
        "--federation", required=True, help="the federation file (entity ids, addresses, the coordinator's [tls])"
    )
    status.add_argument(
        "--serve",
        metavar="HOST:PORT",
        help="also ask the `coordinator serve` there (it presents the coordinator's own certificate)",
    )
    status.add_argument(
        "--deadline",
        type=float,
        default=HEALTH_DEADLINE_S,
        help="seconds each check may take (default %(default)s)",
    )
    status.add_argument(
        "--insecure",
        action="store_true",
        help="plaintext instead of mutual TLS (servers started with --insecure; trusted networks only)",
    )
    status.add_argument(
        "--json",
        action="store_true",
        help='print one JSON object: ok, entities (name, address, status, reason, ms) and, with --serve, "serve"',
    )
    status.set_defaults(run=cmd_status)

    dask_certs = actions.add_parser(
        "dask-certs",
        help="make the certificates of a Dask cluster for `train --engine dask --dask-scheduler`",
        description="A CA of the cluster's own and the one certificate and key that its scheduler, its workers and "
        "`coordinator train --dask-tls DIR` all show. Dask admits any certificate its CA signed, whatever its name "
        "or role, and a Dask client can run code on the workers, which hold kernel rows: so the cluster must not "
        "trust the federation's CA (train refuses certificates from it). The CA's key is not kept, so nothing "
        "else can be signed by it; the key is written with mode 0600.",
    )
    dask_certs.add_argument("--out", required=True, type=Path, help="directory for the three files")
    dask_certs.add_argument(
        "--days", type=int, default=DEFAULT_VALID_DAYS, help="validity in days (default %(default)s)"
    )
    dask_certs.add_argument("--overwrite", action="store_true", help="replace existing files of the same names")
    dask_certs.set_defaults(run=cmd_dask_certs)


def cmd_train(args: argparse.Namespace) -> int:
    """Train a model over the federation (random-kernel, or a DP method), write it, print a summary."""
    if args.method != "random-kernel":
        return _train_dp(args)
    if args.dry_run:
        report = federation_from_args(args).plan(**training_flags(args))
        print(json.dumps(report) if args.json else plan_text(report))
        return 1 if any(block["verdict"].startswith("refused") for block in report["column_blocks"]) else 0
    model = federation_from_args(args).train(
        args.model_out, distribute=not args.no_distribute, **training_flags(args), **engine_flags(args)
    )
    members = model.members if isinstance(model, MulticlassModel) else (model,)
    summary = {
        "model": str(args.model_out),
        "task": model.task,
        **({"classes": list(model.classes)} if isinstance(model, MulticlassModel) else {}),
        "kernel": model.kernel,
        "mbar": model.mbar,
        # One per class for a multiclass model (each class's LP is tuned on its own).
        "nu": [m.nu for m in members] if len(members) > 1 else model.nu,
        "mu": [m.mu for m in members] if len(members) > 1 else model.mu,
        "n_train": model.training["n_train"],
        "private": model.private,
        "seconds": round(model.training["seconds"], 3),
    }
    _write_training_metrics(args, "random-kernel", model.training)
    print(json.dumps(summary) if args.json else "trained: " + ", ".join(f"{k} = {v}" for k, v in summary.items()))
    return 0


def _write_training_metrics(args: argparse.Namespace, method: str, training: dict[str, Any]) -> None:
    """``--metrics-textfile``: the durations of a training that succeeded."""
    if args.metrics_textfile is None:
        return
    from ppsvm.wire.metrics import write_training_metrics

    write_training_metrics(
        Path(args.metrics_textfile),
        method=method,
        seconds=float(training["seconds"]),
        lp_seconds=training.get("lp_seconds"),
        n_train=int(training.get("n_train", 0)),
    )


def _train_dp(args: argparse.Namespace) -> int:
    """``coordinator train --method dp-hybrid|private-svm|public-only``."""
    from ppsvm.coordinator.dp_train import DpOptions, dry_run, train_dp_and_save

    if args.class_weight is not None:
        raise ConfigError(
            f"--class-weight applies to random-kernel training, not --method {args.method}: balanced weights depend "
            "on the class counts, so a neighbouring data set changes every record's weight and the DP release's "
            "per-record sensitivity bound no longer holds"
        )
    if args.public is None:
        raise ConfigError(
            f"--method {args.method} needs --public: the public source file a data owner writes with "
            "`ppsvm coordinator public-source` (public-only also takes a CSV: id,label,features...)"
        )
    options = DpOptions(
        method=args.method,
        public=Path(args.public),
        mechanism=args.mechanism,
        epsilon=args.epsilon,
        n_frequencies=args.frequencies,
        C=None if args.C == AUTO else args.C,
        width_factor=None if args.width_factor == AUTO else args.width_factor,
        threshold_epsilon=args.threshold_epsilon or None,
        seed=args.seed,
        deadline=args.deadline,
        distribute=not args.no_distribute,
        allow_noisy=args.allow_noisy,
    )
    # public-only asks no entity, so it does not read the federation file either.
    federation = federation_from_args(args).config if args.method != "public-only" else None
    if args.dry_run:
        if federation is None:
            raise ConfigError("--dry-run applies to methods that ask the entities, not public-only")
        report = dry_run(federation, options)
        print(json.dumps(report) if args.json else _dry_run_text(report))
        return 0 if report["verdict"] == "would train" else 1
    model = train_dp_and_save(federation, options, Path(args.model_out))
    summary = {
        "model": str(args.model_out),
        "method": model.method,
        "mechanism": model.mechanism,
        "epsilon": model.epsilon,
        "threshold": model.threshold,
        "threshold_epsilon": model.training.get("threshold", {}).get("epsilon"),
        "frequencies": len(model.rho),
        "n_public": model.training["n_public"],
        "n_train": model.training.get("n_train", 0),
        "private": model.private,
        "seconds": round(model.training["seconds"], 3),
    }
    _write_training_metrics(args, model.method, model.training)
    print(json.dumps(summary) if args.json else "trained: " + ", ".join(f"{k} = {v}" for k, v in summary.items()))
    return 0


def _dry_run_text(report: dict[str, Any]) -> str:
    lines = [f"charge per entity: epsilon {report['charge']:g}; C = {report['C']:g}"]
    for entity_id, facts in report["entities"].items():
        lines.append(
            f"  {entity_id}: {facts['n_train']} records, mode {facts['mode']}, epsilon left {facts['epsilon_left']:g}, "
            f"expected noise norm {facts['noise_norm']:.3g} vs weights <= {facts['weight_bound']:.3g} "
            f"({facts['noise_to_bound']:.2f})"
        )
    plan = report.get("plan")
    if plan is not None:
        lines.append(f"release: C = {plan['C']:g}, kernel width {plan['width_factor']:g} x the median heuristic")
        worth = plan["worth"]
        lines.append(
            f"expected accuracy of the released model: {worth['dp_accuracy']:.3f} (+-{worth['dp_spread']:.3f} from "
            f"one release to another, at most {worth['dp_ceiling']:.3f}) against {worth['public_only_accuracy']:.3f} "
            f"for public-only and {worth['majority_accuracy']:.3f} for the majority class ({worth['folds']}-fold on "
            f"the public records, {worth['draws']} noise draws per fold)"
        )
    lines.append(f"verdict: {report['verdict']}")
    return "\n".join(lines)


def cmd_public_source(args: argparse.Namespace) -> int:
    """Write the public source file from a data owner's entity config; print what it holds."""
    from ppsvm.coordinator.dp_train import write_public_source

    public = write_public_source(args.entity_config, args.data, args.out)
    print(
        f"wrote {args.out}: {len(public.y)} public records ({int((public.y > 0).sum())} positive), "
        f"{public.X.shape[1]} features as {args.entity_config} encodes them; give it and the records to the "
        "coordinator (train --public)"
    )
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    """Score a model on the entities' held-out records and print the figures."""
    result = federation_from_args(args).evaluate(args.model, epsilon=args.epsilon)
    if args.plot:
        if "roc" not in result:
            raise ConfigError("--plot draws a classifier's ROC curve and calibration from its decision values")
        from ppsvm.evaluation_plots import write_evaluation_plots

        paths = write_evaluation_plots(result, Path(args.plot), Path(args.model).name)
        print("wrote: " + ", ".join(map(str, paths)), file=sys.stderr)
    print(json.dumps(result) if args.json else evaluation_text(result))
    return 0


def evaluation_text(result: dict[str, Any]) -> str:
    """`coordinator evaluate`'s figures for a person: four significant digits, each figure beside its baseline, the
    confusion matrix and the reliability table spelt out (``--json`` has every number in full)."""
    lines = [f"held-out records: {result['n_test']}" + ("" if result.get("private", True) else " (NOT PRIVATE)")]
    baseline = result.get("trivial_baseline", {})
    beside = {
        "error_rate": ("error rate", "majority_error_rate", "majority class"),
        "auc": ("AUC", "constant_auc", "constant score"),
        "relative_error": ("relative error", "mean_relative_error", "mean target"),
        "rmse": ("RMSE", "mean_rmse", "mean target"),
        "brier": ("Brier score", None, "class frequency"),
        "sensitivity": ("sensitivity", None, ""),
        "specificity": ("specificity", None, ""),
        "balanced_accuracy": ("balanced accuracy", None, ""),
    }
    for key, (name, reference, label) in beside.items():
        if key not in result:
            continue
        other = result.get("brier_class_frequency") if key == "brier" else baseline.get(reference or "")
        lines.append(f"{name:>18}: {result[key]:.4g}" + (f"   ({label}: {other:.4g})" if other is not None else ""))
    if "confusion_matrix" in result:
        m = result["confusion_matrix"]
        lines.append(
            f"{'confusion matrix':>18}: {m['true_positive']} true positive, {m['false_positive']} false positive, "
            f"{m['true_negative']} true negative, {m['false_negative']} false negative"
        )
    for name, figures in result.get("classes", {}).items():
        lines.append(f"{'class ' + name:>18}: {figures['n']} records, recall {figures['recall']:.4g}")
    shown = {*beside, "n_test", "private", "trivial_baseline", "brier_class_frequency", "confusion_matrix", "classes"}
    for key, value in result.items():
        if key not in shown and key not in ("roc", "calibration", "reliability"):
            shown_value = f"{value:.4g}" if isinstance(value, float) else str(value)
            lines.append(f"{key.replace('_', ' '):>18}: {shown_value}")
    if "reliability" in result:
        lines.append("reliability of the probabilities (tenths of the held-out records; predicted -> observed rate):")
        lines += [f"  {g['predicted']:6.3f} -> {g['observed']:6.3f}  ({g['n']} records)" for g in result["reliability"]]
    return "\n".join(lines)


def cmd_baselines(args: argparse.Namespace) -> int:
    """Print each entity's held-out figures from a model of its own cell alone, and their mean."""
    from ppsvm.coordinator.evaluate import mean_figures

    results = federation_from_args(args).baselines(
        task=args.task,
        kernel=args.kernel,
        nu=args.nu,
        mu=args.mu,
        seed=args.seed,
        search=args.search,
        leave_one_out=args.leave_one_out,
    )
    rows = [{"entity": r.entity_id, "n_train": r.n_train, "n_test": r.n_test, **r.figures} for r in results]
    if args.json:
        print(json.dumps({"entities": rows, "mean": mean_figures(results)}))
    else:
        for row in rows:
            print("  ".join(f"{k} = {v:.4f}" if isinstance(v, float) else f"{k} = {v}" for k, v in row.items()))
        print("mean: " + ", ".join(f"{k} = {v:.4f}" for k, v in mean_figures(results).items()))
    return 0


def cmd_predict(args: argparse.Namespace) -> int:
    """Score the records named in --ids (or, for a DP model, those in --records) and write id, decision,
    prediction, probability and status per line to --out."""
    from ppsvm.files import write_atomic

    model = _model_for(args)
    if isinstance(model, DpModel):
        from ppsvm.coordinator.dp_train import records_to_score

        if args.id_key is not None:
            raise ConfigError("--id-key maps --ids to pseudonyms; --records are scored under the ids they hold")
        found, X = records_to_score(model, Path(args.records))
        ids, decisions, missing = found.tolist(), model.decision(X), []
    else:
        if args.batch < 1:
            raise ConfigError(f"--batch must be at least 1, got {args.batch}")
        if args.federation is None:
            raise ConfigError("a random-kernel model scores records the entities hold: pass --federation")
        ids = read_id_list(args.ids)
        decisions, missing = federation_from_args(args).score(model, ids, args.id_key, args.batch)
    write_atomic(Path(args.out), prediction_table(model, ids, decisions))  # a finished file or none
    print(
        f"scored {len(ids) - len(missing)} of {len(ids)} records into {args.out}; {len(missing)} not found",
        file=sys.stderr,
    )
    return 0


def prediction_table(model: RandomKernelModel | DpModel, ids: list[str], decisions: np.ndarray) -> str:
    """The CSV text `coordinator predict` writes: id, decision, prediction, probability, status per record.

    The prediction is the declared label (+1/-1 without declared labels; the value for regression); the probability
    the calibrated P(positive label), or a multiclass model's P(predicted class), empty without a calibration;
    records without decision values (NaN) are "not found". ``decisions``: shape (m,), or (m, k) for multiclass.
    """
    found = ~np.isnan(decisions).reshape(len(ids), -1).any(axis=1)
    decision, _, names, probability = prediction_outputs(model, np.nan_to_num(decisions))
    return prediction_csv(
        [
            (record, float(decision[k]), names[k], None if probability is None else float(probability[k]))
            if found[k]
            else (record, None, "", None)
            for k, record in enumerate(ids)
        ]
    )


def prediction_csv(rows: Sequence[tuple[str, float | None, str, float | None]]) -> str:
    """The prediction file's text (``coordinator predict``, ``ppsvm predict``): per (id, decision or None for a
    record not found, prediction, probability or None) a line id, decision, prediction, probability, status."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["id", "decision", "prediction", "probability", "status"])
    for record, decision, label, probability in rows:
        if decision is None:
            writer.writerow([record, "", "", "", "not found"])
        else:
            writer.writerow([record, repr(decision), label, "" if probability is None else repr(probability), "ok"])
    return out.getvalue()


def register_client(subparsers: argparse._SubParsersAction) -> None:
    """``ppsvm predict``: the prediction client of ``coordinator serve``."""
    predict = subparsers.add_parser(
        "predict",
        help="ask a running `coordinator serve` for predictions by record id (mutual TLS, a client certificate)",
        description="Ask a running `ppsvm coordinator serve` for the predictions of records named by id, with a "
        "client certificate from the federation's CA (a client bundle, or a split directory's client.pem and "
        "client.key), and write id,decision,prediction,probability,status per record. Ids are the pseudonyms the "
        "entities publish; with --id-key, real ids, mapped to pseudonyms here. Python: ppsvm.Client.",
    )
    predict.add_argument("--server", required=True, metavar="HOST:PORT", help="the prediction service's address")
    predict.add_argument("--ids", required=True, metavar="FILE", help="record ids, one per line")
    predict.add_argument("--out", required=True, metavar="FILE", help="the CSV to write (atomically)")
    predict.add_argument(
        "--bundle", default=".", metavar="DIR", help="where ca.pem, NAME.pem and NAME.key are (default: here)"
    )
    predict.add_argument("--name", default="client", help="the client's name in its certificate (default client)")
    predict.add_argument(
        "--server-name",
        default=DEFAULT_COORDINATOR_NAME,
        help="the name in the service's certificate (default coordinator)",
    )
    predict.add_argument("--id-key", metavar="FILE", help="the record-id key (hex): --ids holds real ids")
    predict.add_argument("--timeout", type=float, default=60.0, help="seconds per request (default 60)")
    predict.set_defaults(run=cmd_ask)


def cmd_ask(args: argparse.Namespace) -> int:
    """``ppsvm predict``: ask the service, write the file, say how many were found."""
    from ppsvm.api.client import Client
    from ppsvm.api.federation import read_id_key
    from ppsvm.files import write_atomic

    ids = read_id_list(args.ids)
    key = None if args.id_key is None else read_id_key(args.id_key)
    with Client.from_bundle(
        args.server, args.bundle, args.name, server_name=args.server_name, timeout=args.timeout
    ) as client:
        found, missing = client.predict(ids, key)
    by_id = {p.id: p for p in found}
    # A regression's answer has no label: its prediction is the value.
    rows = [
        (record, p.decision, p.label or repr(p.prediction), p.probability)
        if (p := by_id.get(record))
        else (record, None, "", None)
        for record in ids
    ]
    write_atomic(Path(args.out), prediction_csv(rows))
    print(f"scored {len(found)} of {len(ids)} records into {args.out}; {len(missing)} not found", file=sys.stderr)
    return 0


def cmd_view(args: argparse.Namespace) -> int:
    """Write what the coordinator receives for the training records; print where and what."""
    view = federation_from_args(args).view(args.out, kernel=args.kernel, mbar=args.mbar)
    print(
        f"wrote {args.out}: {len(view['masked'])} masked replies, kernel {view['kernel']}, mbar {view['mbar']}, "
        f"{sum(block['rows'] for block in view['row_blocks'])} records"
    )
    return 0


def cmd_dask_certs(args: argparse.Namespace) -> int:
    """Write a Dask cluster's own CA and the certificate its processes share, and say how to start the cluster."""
    from ppsvm.wire.certs import dask_cluster_certificates, dask_cluster_files, write_certificates

    write_certificates(args.out, dask_cluster_certificates(valid_days=args.days), overwrite=args.overwrite)
    ca, certificate, key = dask_cluster_files(args.out)
    tls = f"--tls-ca-file {ca} --tls-cert {certificate} --tls-key {key}"
    print(f"wrote a Dask cluster CA and its certificate to {args.out}, valid for {args.days} days (no CA key is kept):")
    machines = "the coordinator's, the scheduler's and the workers' machines only"
    print(f"  {ca.name}, {certificate.name} and {key.name}: to {machines}")
    print('start the cluster on the coordinator\'s machines (docs/scaling.md, "The Dask engine"):')
    print(f"  dask scheduler --protocol tls --port 8786 {tls}")
    print(f"  dask worker tls://SCHEDULER:8786 --nthreads 1 --memory-limit 0 {tls}")
    print(f"and train with --engine dask --dask-scheduler tls://SCHEDULER:8786 --dask-tls {args.out}")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    """Print the health of every entity (and of a prediction service); 0 only when all are SERVING."""
    from ppsvm.coordinator.status import status_json, status_report

    if not args.deadline > 0:
        raise ConfigError(f"--deadline must be a positive number of seconds, got {args.deadline}")
    statuses = federation_from_args(args).status(serve=args.serve, deadline=args.deadline)
    print(json.dumps(status_json(statuses)) if args.json else status_report(statuses))
    return 0 if all(s.answer.serving for s in statuses) else 1


def cmd_serve(args: argparse.Namespace) -> int:
    """Serve predictions by record id until interrupted."""
    model = _model_for(args)
    federation = federation_from_args(args)
    if isinstance(model, DpModel):
        from ppsvm.coordinator.serve import serve_dp_model

        return serve_dp_model(federation.config, model, Path(args.records), args.listen, metrics_at(args))
    return federation.serve(model, args.listen, metrics_at=metrics_at(args))


def _model_for(args: argparse.Namespace) -> Model | DpModel:
    """--model, with --records given exactly for a DP model: a DP model scores records from their features, since an
    entity serving the DP protocol releases nothing about a single record; a random-kernel model scores records the
    entities hold, by id."""
    model = load_any_model(args.model)
    if isinstance(model, DpModel) and args.records is None:
        raise ConfigError(
            f"{args.model} is a DP model: it scores records from their features, which the entities of a DP "
            "federation never release one by one; pass --records FILE (a CSV: column id and the model's feature "
            "columns, read through its schema), run where the records are"
        )
    if isinstance(model, Model) and args.records is not None:
        raise ConfigError(
            f"{args.model} is a random-kernel model: it scores records the entities hold, by id "
            "(predict --ids, serve's Predict requests); --records applies to DP models"
        )
    return model
