"""``ppsvm entity``: run one data owner's server, or read what it has released."""

from __future__ import annotations

import argparse
import json
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from ppsvm.config import EntityConfig, load_entity_config, toml_document
from ppsvm.core.release_log import ReleaseLog
from ppsvm.data.schema import numeric_schema, outward_bounds
from ppsvm.data.sources import read_source
from ppsvm.entity.cell import entity_guard
from ppsvm.entity.guard import ReleaseGuard, epsilon_of
from ppsvm.entity.server import serve_entity
from ppsvm.errors import ConfigError
from ppsvm.wire.metrics import add_metrics_arguments, metrics_at

ACTIONS = ("serve", "releases", "epoch", "bounds")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "entity",
        help="serve one data owner's private cell, or list what it has released",
        description=(
            "'ppsvm entity --config E.toml' serves one cell A_ij over gRPC. In the random-kernel mode it publishes "
            "only kernel blocks K(A_ij, B_j') under one pinned view of its secret random matrix B_j, record ids, "
            'labels, per-feature min/max and shapes; in the DP mode ([privacy] mode = "dp") only DP-noised weights '
            "and error counts, charged to its budget. It refuses mbar >= n_j unless its config sets "
            "[privacy] non_private_allow_mbar_at_least_features = true. Every release is recorded first in its "
            "append-only release log, which must exist: an entity that has never served starts it with "
            "--new-release-log ('ppsvm split' creates it). Mutual TLS is on by default: only the coordinator identity "
            "named in the config's [tls] table may call. Prints 'listening on HOST:PORT' once it accepts calls; stops "
            "cleanly on SIGINT/SIGTERM. 'ppsvm entity releases --config E.toml' prints the release log for a "
            "data-protection officer: time, peer, RPC, records, shapes, basis view and epsilon of every release. "
            "'ppsvm entity epoch --config E.toml' prints its basis epochs (each pins one view of B_j: kernel, width, "
            "bounds, largest mbar) and with --next opens the next one, which every member of its column block must "
            "do before a training with another view: refused while the epochs so far leave no point per record "
            "(privacy rule 3 over its whole life). It may run while the entity serves (the log is shared)."
        ),
    )
    parser.add_argument(
        "action",
        nargs="?",
        choices=ACTIONS,
        default="serve",
        help="serve (the default), releases (print the release log and the budget, then exit), epoch (print "
        "the basis epochs; --next opens the next) or bounds (print its schema with bounds proposed from its own "
        "records, rounded outwards, for the column block's members to compare and agree on; nothing leaves)",
    )
    parser.add_argument("--next", action="store_true", help="with epoch: open the next basis epoch")
    parser.add_argument("--config", required=True, help="the entity's TOML config (private to it)")
    parser.add_argument("--listen", help="HOST:PORT to serve on, overriding the config (port 0 picks a free port)")
    parser.add_argument(
        "--insecure",
        action="store_true",
        help="serve plaintext without TLS and accept any caller (trusted networks only; logged as a warning)",
    )
    parser.add_argument(
        "--new-release-log",
        action="store_true",
        help="if the release log is missing, start a new one: for an entity that has never served "
        "(an existing log is always kept)",
    )
    parser.add_argument(
        "--blas-threads",
        type=int,
        default=1,
        help="threads for the linear algebra of each request (default %(default)s: requests run concurrently, and "
        "several entities often share one machine's cores)",
    )
    parser.add_argument("--json", action="store_true", help="with releases: print the log and totals as JSON")
    add_metrics_arguments(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    config = load_entity_config(args.config)
    if args.action == "releases":
        summary = release_summary(config)
        print(json.dumps(summary) if args.json else release_report(summary))
        return 0
    if args.action == "epoch":
        return epoch_command(config, open_next=args.next, as_json=args.json)
    if args.action == "bounds":
        print(proposed_bounds(config), end="")
        return 0
    if args.next:
        raise ConfigError("--next goes with the epoch action: ppsvm entity epoch --config E.toml --next")
    if args.blas_threads < 1:
        raise ConfigError(f"--blas-threads must be at least 1, got {args.blas_threads}")
    # While serving (and restored after, for callers of ppsvm.cli.main in-process). Measured: four entities on two
    # cores, each with OpenBLAS's default threads, took more than 120 s for an entity-alone baseline that takes
    # 22 s with one thread each.
    with threadpool_limits(limits=args.blas_threads, user_api="blas"):
        return serve_entity(
            config,
            args.listen,
            insecure=args.insecure,
            new_release_log=args.new_release_log,
            metrics_at=metrics_at(args),
        )


def proposed_bounds(config: EntityConfig) -> str:
    """The entity's ``[[schema.features]]`` with each number feature's bounds proposed from its own records.

    Rounded outwards (:func:`ppsvm.data.schema.outward_bounds`). The members of a column block compare their
    proposals and all declare the same bounds, the widest of them or the range the field allows; the features
    check refuses a column block whose members declare different ones. Printed here only: nothing leaves.
    """
    cell = read_source(config.data, config.schema)
    schema = config.schema or numeric_schema(cell.feature_names)
    X = np.vstack([cell.X_train, cell.X_test])
    names = schema.encoded_names
    tables = []
    for feature in schema.features:
        entry = feature.as_dict()
        if feature.type == "number":
            column = X[:, names.index(feature.name)]
            entry["low"], entry["high"] = outward_bounds(float(column.min()), float(column.max()))
        tables.append(("[[schema.features]]", entry))
    return toml_document(
        f"bounds proposed by entity {config.id} from its {len(X)} records, rounded outwards: agree on them with the "
        "other members of its column block (the widest, or what the field allows), then declare them in [schema]",
        tables,
    )


def epoch_command(config: EntityConfig, *, open_next: bool, as_json: bool) -> int:
    """Print the entity's basis epochs and, with ``open_next``, open the next one (recorded in its release log)."""
    n_features = len(config.schema.encoded_names) if config.schema is not None else read_source(config.data).n_features
    guard = entity_guard(config, n_features)
    if open_next:
        epoch = guard.next_epoch(f"operator of {config.id}")
        print(
            f"entity {config.id}: opened basis epoch {epoch}; every member of column block {config.column_block} "
            "opens it too before the next training"
        )
    state = guard.state()
    if as_json:
        print(json.dumps({key: state[key] for key in ("epoch", "epochs", "points_used", "max_points")}))
        return 0
    print(
        f"entity {config.id}: basis epoch {state['epoch']}; functionals per record released over all epochs: "
        f"{state['points_used']} of {state['max_points'] if state['max_points'] is not None else 'any (override)'}"
    )
    for epoch, pin in state["epochs"].items():
        print(f"  epoch {epoch}: {pin['view']}, mbar <= {pin['mbar']}")
    if state["epoch"] not in state["epochs"]:
        print(f"  epoch {state['epoch']}: no kernel released yet (its first training pins its view)")
    return 0


def release_summary(config: EntityConfig) -> dict[str, Any]:
    """The release log with the guard's state: what the entity has released, to whom, and the DP budget left.

    Returns
    -------
    dict
        entity_id, release_log (path), the guard's state (mode, pinned_basis, epsilon_total, epsilon_spent, ...),
        epsilon_remaining (None without a budget) and releases (the log records, oldest first).
    """
    assert config.release_log is not None
    log = ReleaseLog(config.release_log, config.id)
    guard = ReleaseGuard(
        log,
        mode=config.mode,
        epsilon_total=config.epsilon_total,
        max_baseline_releases=config.max_baseline_releases,
        who=config.id,
    )
    remaining = guard.remaining_micro
    return {
        "entity_id": config.id,
        "release_log": str(config.release_log),
        **guard.state(),
        "epsilon_remaining": None if remaining is None else epsilon_of(remaining),
        "releases": list(log.releases()),
    }


def release_report(summary: dict[str, Any]) -> str:
    """A table of :func:`release_summary` for a person."""
    pinned = summary["pinned_basis"] or "none yet"
    lines = [
        f"release log of entity {summary['entity_id']} ({summary['release_log']}), started {summary['log_created']}; "
        f"mode {summary['mode']}; pinned basis view: {pinned}"
    ]
    header = ("time (UTC)", "peer", "run", "request", "rpc", "records", "rows", "basis", "mechanism", "epsilon")
    rows = [
        (
            r["time"],
            r.get("peer", ""),
            r.get("run_id", ""),
            r.get("request_id", ""),
            r["rpc"],
            str(r.get("records", "")),
            str(r.get("rows", "")),
            r.get("basis_fingerprint", ""),
            r.get("mechanism", ""),
            f"{epsilon_of(int(r['epsilon_micro'])):g}" if r.get("epsilon_micro") else "",
        )
        for r in summary["releases"]
    ]
    if rows:
        widths = [max(len(row[k]) for row in [header, *rows]) for k in range(len(header))]
        lines += [
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
            for row in [header, *rows]
        ]
    else:
        lines.append("no releases recorded")
    total = summary["epsilon_total"]
    budget = (
        "no DP budget (DP releases refused)"
        if total is None
        else (f"epsilon spent {summary['epsilon_spent']:g}, remaining {summary['epsilon_remaining']:g} of {total:g}")
    )
    lines.append(f"{len(rows)} release{'s' if len(rows) != 1 else ''}; {budget}")
    return "\n".join(lines)
