"""The ``ppsvm`` command: every subcommand parses its arguments, builds a frozen options object, calls one function.

This module holds the top-level commands (split, certs, audit, health, reference, demo), assembles the parser
and maps errors to exit codes (:func:`main`). The command groups add their own parsers:
``coordinator`` (:mod:`ppsvm.cli_coordinator`), ``entity`` (:mod:`ppsvm.entity.cli`) and ``reproduce``
(:mod:`ppsvm.experiments.cli`); options several commands share are in :mod:`ppsvm.cli_arguments`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from ppsvm import __version__, cli_coordinator, cli_onboarding
from ppsvm.cli_arguments import (
    add_basis_argument,
    add_cols_argument,
    add_connection_arguments,
    add_dataset_arguments,
    add_task_arguments,
    auto_float,
    column_blocks_from_arg,
    dataset_options_from_args,
    federation_from_args,
    read_id_list,
    training_flags,
)
from ppsvm.config import load_federation, toml_string
from ppsvm.constants import HEALTH_DEADLINE_S, TASKS
from ppsvm.core.kernels import KERNELS
from ppsvm.data.dataset import load_dataset, shown_categories
from ppsvm.data.partition import SplitOptions, column_layout, split_dataset
from ppsvm.entity import cli as entity_cli
from ppsvm.errors import ConfigError, PpsvmError
from ppsvm.experiments import cli as reproduce_cli
from ppsvm.logs import LOG_FORMATS, configure_logging
from ppsvm.memory import limit_malloc_arenas
from ppsvm.wire.certs import CLIENT, DEFAULT_CLIENT_NAME, DEFAULT_COORDINATOR_NAME, DEFAULT_VALID_DAYS

# Exit statuses besides 0 (success) and argparse's 2 (a command line that does not parse): see main.
EXIT_ERROR = 1
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a job stopped by Ctrl-C
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: what `yes | head` reports for `yes`


def cmd_split(args: argparse.Namespace) -> int:
    """Cut a dataset into a checkerboard of entity cells with their configs, secrets and certificates."""
    dataset_options = dataset_options_from_args(args, args.task)
    blocks = column_blocks_from_arg(args.cols)  # a bad --cols fails before the dataset is read
    dataset = load_dataset(args.data, dataset_options)
    cols, column_blocks = column_layout(blocks, dataset.feature_names)
    result = split_dataset(
        dataset,
        SplitOptions(
            rows=args.rows,
            cols=cols,
            out_dir=Path(args.out),
            test_fraction=args.test_fraction,
            seed=args.seed,
            task=args.task,
            kernel=args.kernel,
            host=args.host,
            base_port=args.base_port,
            overwrite=args.overwrite,
        ),
        provenance=dataclasses.asdict(dataset_options),
        column_blocks=column_blocks,
    )
    print(
        f"wrote {len(result.entity_config_paths)} cells ({result.n_train} training, {result.n_test} held-out records) "
        f"and {result.federation_path}; prediction clients of `coordinator serve` use {DEFAULT_CLIENT_NAME}.pem and "
        f"{DEFAULT_CLIENT_NAME}.key"
    )
    if dataset.categories:
        names = dataset.feature_names
        listed = "; ".join(f"{names[k]}: {shown_categories(values)}" for k, values in dataset.categories.items())
        print(f"categorical features, declared with their categories in each cell's [schema]: {listed}")
    if args.bundles:
        from ppsvm.onboarding import bundle_split

        groups = bundle_split(
            Path(args.out),
            Path(args.bundles),
            coordinator=DEFAULT_COORDINATOR_NAME,
            client=DEFAULT_CLIENT_NAME,
            valid_days=DEFAULT_VALID_DAYS,
        )
        print(
            f"wrote one bundle per organisation to {args.bundles} "
            "(keys and secrets made afresh by the onboarding steps)"
        )
        for group, fingerprint in groups.items():
            print(f"  {group}: {fingerprint}")
    return 0


def cmd_schema_infer(args: argparse.Namespace) -> int:
    """Print (or write) the [data] and [schema] tables of an entity config for the user's own data file."""
    from ppsvm.data.inference import entity_tables
    from ppsvm.files import PRIVATE_MODE, write_atomic

    # A [data] source reads its columns by their header names.
    options = dataclasses.replace(dataset_options_from_args(args, args.task), header=True)
    dataset = load_dataset(args.data, options)
    if args.out is None:
        sys.stdout.write(entity_tables(str(Path(args.data).resolve()), dataset, options))
        return 0
    out = Path(args.out)
    if out.exists() and not args.overwrite:
        raise ConfigError(f"{out} exists; choose another file or pass --overwrite")
    # The config names its data relative to its own directory.
    data = os.path.relpath(Path(args.data).resolve(), out.resolve().parent)
    write_atomic(out, entity_tables(data, dataset, options), PRIVATE_MODE)
    print(f"wrote the [data] and [schema] tables for {args.data} to {out}")
    return 0


def cmd_certs(args: argparse.Namespace) -> int:
    """Write a federation CA and a certificate and key per party, and say who gets which file."""
    from ppsvm.wire.certs import (
        CA_FILE,
        CA_KEY_FILE,
        certificate_file,
        federation_parties,
        key_file,
        make_certificates,
        write_certificates,
    )

    federation = load_federation(args.federation)
    parties = federation_parties(args.coordinator, [e.id for e in federation.entities], args.client)
    out = Path(args.out)
    write_certificates(out, make_certificates(parties, valid_days=args.days), overwrite=args.overwrite)
    print(f"wrote a CA and {len(parties)} certificates to {out}, valid for {args.days} days:")
    print(f"  {CA_FILE}: to every party;  {CA_KEY_FILE}: keep offline (it can mint identities this federation trusts)")
    for name, roles in parties.items():
        holder = "prediction clients" if roles == (CLIENT,) else f"{name} only"
        print(
            f"  {certificate_file(name)} and {key_file(name)}: to {holder} "
            f"(role{'s' if len(roles) > 1 else ''}: {', '.join(roles)})"
        )
    print(
        f"each entity's [tls] table names ca, cert, key and coordinator = {toml_string(args.coordinator)}; "
        "the federation file's names the coordinator's ca, cert and key"
    )
    return 0


def cmd_audit(args: argparse.Namespace) -> int:
    """Print which privacy conditions hold; exit status 1 when one fails."""
    from ppsvm.config import load_entity_config
    from ppsvm.coordinator.audit import format_report

    configs = [load_entity_config(path) for path in args.entity_config]
    report = federation_from_args(args).audit(configs)
    print(json.dumps(report) if args.json else format_report(report))
    return 0 if report["ok"] else EXIT_ERROR


def cmd_pseudonyms(args: argparse.Namespace) -> int:
    """Write each record id with the pseudonym the entities publish for it (run where the key is, never at the
    coordinator)."""
    from ppsvm.api.federation import read_id_key
    from ppsvm.core.randomness import record_pseudonyms
    from ppsvm.files import PRIVATE_MODE, write_atomic

    ids = read_id_list(args.ids)
    rows = zip(ids, record_pseudonyms(read_id_key(args.key), ids), strict=True)
    text = "id,pseudonym\n" + "".join(f"{record},{pseudonym}\n" for record, pseudonym in rows)
    if args.out:
        write_atomic(Path(args.out), text, PRIVATE_MODE)  # it links ids to pseudonyms: as private as the key
    else:
        sys.stdout.write(text)
    return 0


def cmd_health(args: argparse.Namespace) -> int:
    """Ask one server's health check; exit 0 only when it answers SERVING (for container and Kubernetes probes)."""
    from ppsvm.wire.health import check_health
    from ppsvm.wire.tls import PLAINTEXT_WARNING, TlsFiles

    if not args.timeout > 0:
        raise ConfigError(f"--timeout must be a positive number of seconds, got {args.timeout}")
    if args.insecure:
        logging.getLogger(__name__).warning(PLAINTEXT_WARNING)
        tls, peer = None, args.name or ""
    else:
        missing = [flag for flag in ("ca", "cert", "key") if getattr(args, flag) is None]
        if missing:
            raise ConfigError(
                f"health over mutual TLS needs {', '.join('--' + flag for flag in missing)} (the federation CA "
                "certificate and a certificate and key it issued), or --insecure for a plaintext server"
            )
        tls = TlsFiles(ca=Path(args.ca), cert=Path(args.cert), key=Path(args.key), source=Path("ppsvm health"))
        peer = args.name or tls.identity()  # default: a server checked with its own certificate
    answer = check_health(args.address, tls=tls, peer=peer, service=args.service, deadline=args.timeout)
    print(f"{args.address}: {answer.status} ({answer.ms:.1f} ms)" + (f": {answer.reason}" if answer.reason else ""))
    return 0 if answer.serving else EXIT_ERROR


def cmd_reference(args: argparse.Namespace) -> int:
    """NOT PRIVATE: the pooled reduced-kernel reference on every entity's records, read through their configs."""
    from ppsvm.api.federation import task_setting
    from ppsvm.coordinator.reference import LABEL, federation_file, pooled_reference

    federation = federation_file(Path(args.federation or args.split_dir))
    table = load_federation(federation).task
    result = pooled_reference(
        federation,
        task_setting(table, "task", args.task, "classify"),
        task_setting(table, "kernel", args.kernel, "gaussian"),
        config_paths=[Path(path) for path in args.entity_config],
        nu=task_setting(table, "nu", args.nu),
        mu=task_setting(table, "mu", args.mu),
        seed=args.seed,
    )
    print(json.dumps(result) if args.json else LABEL + "\n" + "\n".join(f"{k:>15}: {v}" for k, v in result.items()))
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """Split, start the entity processes, train, evaluate and compare; stop every process."""
    from ppsvm.api.federation import train_options
    from ppsvm.demo import DEFAULT_DATA, DEFAULT_DATASET_OPTIONS, DemoOptions, run_demo

    if args.data is None:
        data, dataset_options = DEFAULT_DATA, DEFAULT_DATASET_OPTIONS
        dataset_options = dataclasses.replace(dataset_options, task=args.task or "classify")
    else:
        data, dataset_options = Path(args.data), dataset_options_from_args(args, args.task or "classify")
    options = DemoOptions(
        data=data,
        dataset=dataset_options,
        rows=args.rows,
        cols=column_blocks_from_arg(args.cols),
        test_fraction=args.test_fraction,
        seed=args.seed,
        train=train_options({}, deadline=args.deadline, **training_flags(args)),
        out=Path(args.out) if args.out else None,
        json=args.json,
        insecure=args.insecure,
    )
    # Ctrl-C, `kill` and `docker stop` all unwind through the cleanup that stops the entities, even
    # where the demo was started with SIGINT ignored (as a shell does for background jobs).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    run_demo(options)
    return 0


def build_parser(reproduce_targets: bool = True) -> argparse.ArgumentParser:
    """The ``ppsvm`` parser; the ``reproduce`` targets only when asked (they import plotting and datasets)."""
    parser = argparse.ArgumentParser(
        prog="ppsvm",
        description="Privacy-preserving SVM classification and regression over checkerboard-partitioned data via "
        "random kernels (Mangasarian & Wild; Fung & Mangasarian): entities publish only K(A_ij, B_j'). "
        "Also a differentially private hybrid RBF SVM (Li et al. 2014; coordinator train --method dp-hybrid), "
        "where entities publish noised weights within their privacy budget. Every channel is mutual TLS.",
    )
    parser.add_argument("--version", action="version", version=f"ppsvm {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    parser.add_argument("-q", "--quiet", action="store_true", help="warnings and errors only")
    parser.add_argument(
        "--log-format",
        choices=LOG_FORMATS,
        default="text",
        help="text (default: 'ppsvm: message' lines) or json: one JSON object per line with time, level, logger, "
        "message and, where known, entity, peer, method, request_id, code and duration_ms, and a line per RPC "
        "served or made. No log line carries records or values",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    entity_cli.register(commands)

    cli_coordinator.register(commands)
    cli_coordinator.register_client(commands)

    cli_onboarding.register(commands)

    split = commands.add_parser(
        "split", help="partition a dataset into a checkerboard of entity cells, configs and secrets"
    )
    split.add_argument("data", help="dataset file (e.g. ppsvm/data/bundled/wdbc.data)")
    split.add_argument("--rows", type=int, required=True, help="row blocks r")
    add_cols_argument(split)
    split.add_argument("--out", required=True, help="output directory")
    split.add_argument("--test-fraction", type=float, default=0.3, help="held-out fraction (default %(default)s)")
    split.add_argument("--seed", type=int, default=0, help="shuffle seed (default %(default)s)")
    split.add_argument("--task", choices=TASKS, default="classify")
    split.add_argument("--kernel", choices=KERNELS, default="gaussian", help="written to the federation file")
    split.add_argument("--host", default="127.0.0.1", help="entity host in the federation file")
    split.add_argument("--base-port", type=int, default=50051, help="entity (i, j) listens on base + i * cols + j")
    split.add_argument("--overwrite", action="store_true", help="allow a non-empty output directory")
    split.add_argument(
        "--bundles",
        metavar="DIR",
        help="also make one bundle per organisation in DIR by the onboarding steps (`ppsvm org`, `ppsvm operator`), "
        "with fresh keys and secrets: each holds only its owner's",
    )
    add_dataset_arguments(split, categorical=True)
    split.set_defaults(run=cmd_split)

    schema = commands.add_parser(
        "schema", help="entity schemas: propose the [data] and [schema] tables of a config from a data file"
    )
    schema_commands = schema.add_subparsers(dest="schema_command", required=True, metavar="COMMAND")
    infer = schema_commands.add_parser(
        "infer",
        help="print the [data] and [schema] tables an entity config needs for your own CSV file",
        description="Reads DATA (a CSV file with a header line) as `ppsvm split` reads it and prints the [data] "
        "table (path, id, label, labels) and one [[schema.features]] per feature column: numbers with bounds "
        "rounded outwards from their values, categorical columns (given with --categorical, or any column whose "
        "values are not all numbers) with every category the file holds, sorted. The members of a column block "
        "must declare the same features, categories and bounds: agree them before training. With --missing impute "
        "each feature declares what a missing value becomes (its mean, its most frequent category).",
    )
    infer.add_argument("data", metavar="DATA", help="the data file (CSV with a header line)")
    infer.add_argument("--task", choices=TASKS, default="classify", help="classify (default) or regress")
    infer.add_argument(
        "--out", metavar="FILE", help="write the tables to FILE (mode 0600; DATA named relative to it) instead"
    )
    infer.add_argument("--overwrite", action="store_true", help="replace an existing --out file")
    add_dataset_arguments(infer, categorical=True)
    infer.set_defaults(run=cmd_schema_infer)

    certs = commands.add_parser(
        "certs",
        help="make a federation CA and a TLS certificate and key for the coordinator, every entity "
        "and prediction clients",
        description="Mutual TLS material for a federation: a CA, and for each party a certificate whose name is its id "
        "in the federation file and whose roles say what it may call (the coordinator checks entities by these "
        "names; entities accept only the coordinator name in their [tls] table, with the coordinator role; "
        "`coordinator serve` answers Predict only to the client role, which the coordinator's certificate and "
        "the client certificate hold). Names are lowercase. Keys are EC P-256, written with mode 0600.",
    )
    certs.add_argument("--federation", required=True, help="the federation file: one certificate per entity id")
    certs.add_argument("--out", required=True, help="directory for ca.pem, ca.key and NAME.pem / NAME.key")
    certs.add_argument(
        "--coordinator", default=DEFAULT_COORDINATOR_NAME, help="the coordinator's identity (default %(default)s)"
    )
    certs.add_argument(
        "--client",
        default=DEFAULT_CLIENT_NAME,
        help="the identity of the prediction clients' certificate, which may only ask for "
        "predictions (default %(default)s)",
    )
    certs.add_argument("--days", type=int, default=DEFAULT_VALID_DAYS, help="validity in days (default %(default)s)")
    certs.add_argument("--overwrite", action="store_true", help="replace existing files of the same names")
    certs.set_defaults(run=cmd_certs)

    audit = commands.add_parser(
        "audit",
        help="report which privacy conditions hold for a federation and what each party can learn",
        description="Asks the live entities for their metadata over the training channels (nothing else) and, with "
        "--entity-config, checks entity configs available here. Exits 1 when a condition fails.",
    )
    add_connection_arguments(audit)
    audit.add_argument(
        "--entity-config",
        action="append",
        default=[],
        metavar="TOML",
        help="an entity config to check as well (repeatable; a data owner audits its own)",
    )
    audit.add_argument("--json", action="store_true", help="print the report as one JSON object")
    audit.set_defaults(run=cmd_audit)

    health = commands.add_parser(
        "health",
        help="ask one server's standard health check (grpc.health.v1): exit 0 only when it is SERVING",
        description="For container healthchecks and Kubernetes exec probes of an entity or a `coordinator serve`: "
        "asks the server at ADDRESS, over mutual TLS, whether it is SERVING and prints one line. Any certificate "
        "the federation CA issued may ask (an entity's own, for its own container); the server must present a "
        "certificate for --name. Exit status 0 when SERVING; 1 when NOT_SERVING (stopping, or an entity whose "
        "release log cannot be written), unreachable or refused.",
    )
    health.add_argument("address", metavar="ADDRESS", help="HOST:PORT of the server")
    health.add_argument("--ca", metavar="PEM", help="the federation CA certificate")
    health.add_argument("--cert", metavar="PEM", help="a certificate the federation CA issued (e.g. the server's own)")
    health.add_argument("--key", metavar="PEM", help="its private key")
    health.add_argument(
        "--name",
        help="the identity the server's certificate must name (default: the name in --cert, for a server that "
        "checks itself with its own certificate)",
    )
    health.add_argument(
        "--service",
        default="",
        help="the service to ask about: '' (default, the whole server), ppsvm.v1.Entity or ppsvm.v1.Coordinator",
    )
    health.add_argument(
        "--timeout", type=float, default=HEALTH_DEADLINE_S, help="seconds to wait for the answer (default %(default)s)"
    )
    health.add_argument("--insecure", action="store_true", help="plaintext, for a server started with --insecure")
    health.set_defaults(run=cmd_health)

    pseudonyms = commands.add_parser(
        "pseudonyms",
        help="map record ids to the pseudonyms the entities publish (where the record-id key is, never at the "
        "coordinator)",
    )
    pseudonyms.add_argument("--key", required=True, metavar="FILE", help="the federation's record-id key (hex)")
    pseudonyms.add_argument("--ids", required=True, metavar="FILE", help="one record id per line")
    pseudonyms.add_argument("--out", metavar="FILE", help="CSV id,pseudonym (mode 0600); default: standard output")
    pseudonyms.set_defaults(run=cmd_pseudonyms)

    reference = commands.add_parser(
        "reference",
        help="NOT PRIVATE: the pooled reduced-kernel reference K(A, Abar') on every entity's records, read in one "
        "place (benchmarks only)",
        description="NOT PRIVATE, for benchmarks: reads every entity's records in one place through its config "
        "([data] and [schema]: CSV, Parquet and SQL sources alike, or a split's cell files; a SQL source's url_env "
        "variable must be set here too), pools them by record id and trains the papers' reduced-kernel reference "
        "K(A, Abar') with Abar a random 10% of the training rows; prints its held-out figures under a NOT PRIVATE "
        "label. Give a `ppsvm split` output directory, or --federation with each entity's config from wherever it "
        "is (--entity-config).",
    )
    where = reference.add_mutually_exclusive_group(required=True)
    where.add_argument(
        "split_dir",
        nargs="?",
        metavar="DIR",
        help="a directory holding federation.toml and each entity's <id>.toml (what 'ppsvm split' writes)",
    )
    where.add_argument("--federation", metavar="FILE", help="the federation file, wherever it is")
    reference.add_argument(
        "--entity-config",
        action="extend",
        nargs="+",
        default=[],
        metavar="TOML",
        help="the entity configs, one per entity of the federation, in any order and from any directory (matched "
        "by [entity] id; repeatable, and one flag takes several, so a glob works: --entity-config sites/*.toml); "
        "default: each entity's <id>.toml beside the federation file",
    )
    reference.add_argument("--task", choices=TASKS, help="default: the federation file's [task] value, else classify")
    reference.add_argument(
        "--kernel", choices=KERNELS, help="default: the federation file's [task] value, else gaussian"
    )
    reference.add_argument(
        "--nu", type=auto_float, help="number or auto (default: the federation file's [task] value, else auto)"
    )
    reference.add_argument(
        "--mu", type=auto_float, help="number or auto (default: the federation file's [task] value, else auto)"
    )
    reference.add_argument(
        "--seed", type=int, default=0, help="seed of the basis rows Abar and the folds (default %(default)s)"
    )
    reference.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    reference.set_defaults(run=cmd_reference)

    demo = commands.add_parser(
        "demo", help="split a dataset, run its entities as processes, train, evaluate and compare"
    )
    demo.add_argument("--data", help="dataset file (default: the shipped WDBC, label M/B)")
    demo.add_argument("--rows", type=int, default=2, help="row blocks (default %(default)s)")
    add_cols_argument(demo, default="2")
    demo.add_argument("--test-fraction", type=float, default=0.3, help="held-out fraction (default %(default)s)")
    demo.add_argument("--out", help="keep the split, model and configs in this directory (default: a temporary one)")
    demo.add_argument("--json", action="store_true", help="last line: the PPSVM evaluation as JSON")
    add_task_arguments(
        demo,
        seed_help="seed of the shuffle, the cross-validation folds and the demo-only column-block secrets, so two "
        "runs with the same seed give the same figures (default %(default)s)",
    )
    add_connection_arguments(demo, federation=False)
    add_dataset_arguments(demo, categorical=True)
    add_basis_argument(demo)
    demo.set_defaults(run=cmd_demo)

    reproduce_cli.register(commands, with_targets=reproduce_targets)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one ``ppsvm`` command; its exit status, chosen here for every command (docs/reference/errors.md).

    0 on success; 1 on any error of :mod:`ppsvm.errors`, printed as one line ``ppsvm: error: ...``
    without a traceback (and from ``audit`` when a condition fails); 2 when the command line does
    not parse (argparse prints the usage and exits); 130 on Ctrl-C; 141, silently, when the reader of
    stdout has gone (``ppsvm reference DIR | head``). Any other exception is a bug: Python prints its
    traceback and exits with 1.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    limit_malloc_arenas()
    try:
        args = build_parser(reproduce_targets="reproduce" in argv).parse_args(argv)
        level = logging.DEBUG if args.verbose else logging.WARNING if args.quiet else logging.INFO
        configure_logging(level, args.log_format)
        result: int = args.run(args)
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's exit
        return result
    except PpsvmError as error:
        print(f"ppsvm: error: {error}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("ppsvm: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # Nobody reads what is left: point stdout at /dev/null so that the exit's flush cannot fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE


if __name__ == "__main__":
    sys.exit(main())
