"""The ``ppsvm`` command: every subcommand parses its arguments, builds a frozen options object, calls one function."""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ppsvm import __version__
from ppsvm.config import load_federation, toml_string
from ppsvm.constants import DEFAULT_DEADLINE_S, DEFAULT_FOLDS, TASKS
from ppsvm.core.kernels import KERNELS
from ppsvm.core.lp import FORMULATIONS
from ppsvm.data.dataset import add_dataset_arguments, dataset_options_from_args, load_dataset
from ppsvm.data.partition import SplitOptions, split_dataset
from ppsvm.entity import cli as entity_cli
from ppsvm.errors import ConfigError, PpsvmError
from ppsvm.experiments import cli as reproduce_cli
from ppsvm.wire.certs import CLIENT, DEFAULT_CLIENT_NAME, DEFAULT_COORDINATOR_NAME, DEFAULT_VALID_DAYS

logger = logging.getLogger("ppsvm")


# 'auto' on the command line is kept as the string, so it can override a number in the federation file.
AUTO = "auto"


def _auto_int(text: str) -> int | str:
    if text == AUTO:
        return AUTO
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number or 'auto', got {text!r}") from None


def _auto_float(text: str) -> float | str:
    if text == AUTO:
        return AUTO
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or 'auto', got {text!r}") from None


def _add_task_arguments(parser: argparse.ArgumentParser, random_kernel: bool = True) -> None:
    """Training settings; unset ones come from the federation file's [task] table, then defaults.

    ``random_kernel=False`` (entities alone) leaves out what only the coordinator's random-kernel
    training uses: mbar, the fold count and the LP formulation.
    """
    parser.add_argument(
        "--task", choices=TASKS, help="classify (Mangasarian & Wild) or regress (Fung & Mangasarian); default classify"
    )
    parser.add_argument(
        "--kernel",
        choices=KERNELS,
        help="linear (blocks summed) or gaussian (blocks multiplied elementwise); default gaussian",
    )
    if random_kernel:
        parser.add_argument(
            "--mbar",
            type=_auto_int,
            help="random points per column block, < n_j for every block; 'auto' (default): min(n_j) "
            "- 1, at most 10%% of the training rows",
        )
    parser.add_argument(
        "--nu", type=_auto_float, help="LP weight (a number, or 'auto' for k-fold cross-validation; default auto)"
    )
    tuned = (
        "on the assembled kernel by the power identity, no new entity requests"
        if random_kernel
        else "by each entity on its own cell"
    )
    parser.add_argument(
        "--mu", type=_auto_float, help=f"Gaussian width (a number, or 'auto': tuned {tuned}; default auto)"
    )
    if random_kernel:
        parser.add_argument(
            "--folds", type=int, default=DEFAULT_FOLDS, help="cross-validation folds for 'auto' (default %(default)s)"
        )
    parser.add_argument("--seed", type=int, default=0, help="seed of the cross-validation folds (default %(default)s)")
    if random_kernel:
        parser.add_argument(
            "--lp-formulation",
            choices=FORMULATIONS,
            default="highs-dual",
            help="how the LP is solved: highs-dual (default, fastest measured), cvxpy-dual, "
            "cvxpy-primal (as the papers write it)",
        )


def _add_dp_arguments(parser: argparse.ArgumentParser) -> None:
    """The differentially private hybrid RBF SVM (Li, Xiong, Ohno-Machado, Jiang 2014) and its baselines."""
    from ppsvm.core.dp import DEFAULT_N_FREQUENCIES, GUARANTEES, MECHANISMS, NON_PRIVATE
    from ppsvm.core.dp_model import METHODS
    from ppsvm.core.linear_svm import DEFAULT_C

    group = parser.add_argument_group(
        "differentially private RBF SVM (--method other than random-kernel; row blocks only, s = 1)",
        "dp-hybrid learns the Fourier frequencies rho from --public records; private-svm draws them at random "
        "(Rubinstein et al.); public-only trains an RBF SVM on the public records alone. Scaling, kernel width and rho "
        "come from the public records only; each entity releases its weights through --mechanism, charged to its own "
        "privacy budget ([privacy] epsilon_total); the model averages them weighted by record counts.",
    )
    group.add_argument(
        "--method",
        choices=("random-kernel", *METHODS),
        default="random-kernel",
        help="random-kernel (default): the papers' K(A, B') LP; or a DP method",
    )
    group.add_argument("--public", help="public records (CSV: id,label,features...), all used")
    group.add_argument("--epsilon", type=float, help="epsilon of each entity's release (its records' guarantee)")
    group.add_argument(
        "--mechanism",
        choices=(*MECHANISMS, NON_PRIVATE),
        default="laplace",
        help=" | ".join(f"{name}: {GUARANTEES[name].rstrip('.')}" for name in (*MECHANISMS, NON_PRIVATE)).replace(
            "%", "%%"
        ),
    )
    group.add_argument(
        "--frequencies", type=int, default=DEFAULT_N_FREQUENCIES, help="D, Fourier frequencies (default %(default)s)"
    )
    group.add_argument("--C", type=float, default=DEFAULT_C, help="SVM cost in (C/n) sum hinge (default %(default)s)")


def _add_connection_arguments(parser: argparse.ArgumentParser, federation: bool = True) -> None:
    """How the coordinator reaches the entities: the federation file, deadlines, TLS."""
    if federation:
        parser.add_argument(
            "--federation", required=True, help="the federation file (entity ids, addresses, grid positions, [tls])"
        )
    parser.add_argument(
        "--deadline",
        type=float,
        default=DEFAULT_DEADLINE_S,
        help="seconds allowed per entity call before it fails (default %(default)s); unreachable "
        "entities are retried a few times first",
    )
    parser.add_argument(
        "--insecure",
        action="store_true",
        help="plaintext instead of mutual TLS (trusted networks only; logged as a warning)",
    )


def _training_flags(args: argparse.Namespace) -> dict[str, Any]:
    """The random-kernel training flags as keyword arguments of ppsvm.api.federation's train functions."""
    return {
        "task": args.task,
        "kernel": args.kernel,
        "mbar": args.mbar,
        "nu": args.nu,
        "mu": args.mu,
        "folds": args.folds,
        "seed": args.seed,
        "formulation": args.lp_formulation,
        "basis": args.basis,
    }


def _add_basis_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--basis",
        choices=("paper", "product"),
        default="paper",
        help="paper (default): B = [B_1 ... B_s], mbar random points. product (our addition): also points "
        "pairing rows of different B_j's, formed by the coordinator from the same blocks (no new request, "
        "nothing more leaves an entity), up to 10%% of the training rows; helps when many partitions leave "
        "a small mbar",
    )


def _federation(args: argparse.Namespace) -> Any:
    """The federation file as a :class:`ppsvm.api.federation.Federation`, with the connection flags."""
    from ppsvm.api.federation import Federation

    return Federation.from_toml(args.federation, insecure=args.insecure, deadline=args.deadline)


def cmd_train(args: argparse.Namespace) -> int:
    if args.method != "random-kernel":
        return _train_dp(args)
    model = _federation(args).train(args.model_out, distribute=not args.no_distribute, **_training_flags(args))
    summary = {
        "model": str(args.model_out),
        "task": model.task,
        "kernel": model.kernel,
        "mbar": model.mbar,
        "nu": model.nu,
        "mu": model.mu,
        "n_train": model.training["n_train"],
        "private": model.private,
        "seconds": round(model.training["seconds"], 3),
    }
    print(json.dumps(summary) if args.json else "trained: " + ", ".join(f"{k} = {v}" for k, v in summary.items()))
    return 0


def _train_dp(args: argparse.Namespace) -> int:
    from ppsvm.coordinator.dp_train import DpOptions, train_dp_and_save

    if args.public is None:
        raise ConfigError(f"--method {args.method} needs --public PUBLIC.csv (public records: id,label,features...)")
    options = DpOptions(
        method=args.method,
        public=Path(args.public),
        mechanism=args.mechanism,
        epsilon=args.epsilon,
        n_frequencies=args.frequencies,
        C=args.C,
        seed=args.seed,
        deadline=args.deadline,
        distribute=not args.no_distribute,
    )
    # public-only asks no entity, so it does not read the federation file either.
    federation = _federation(args).config if args.method != "public-only" else None
    model = train_dp_and_save(federation, options, Path(args.model_out))
    summary = {
        "model": str(args.model_out),
        "method": model.method,
        "mechanism": model.mechanism,
        "epsilon": model.epsilon,
        "frequencies": len(model.rho),
        "n_public": model.training["n_public"],
        "n_train": model.training.get("n_train", 0),
        "private": model.private,
        "seconds": round(model.training["seconds"], 3),
    }
    print(json.dumps(summary) if args.json else "trained: " + ", ".join(f"{k} = {v}" for k, v in summary.items()))
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    result = _federation(args).evaluate(args.model, epsilon=args.epsilon)
    if args.json:
        print(json.dumps(result))
    else:
        print("\n".join(f"{key:>15}: {value}" for key, value in result.items()))
    return 0


def cmd_baselines(args: argparse.Namespace) -> int:
    from ppsvm.coordinator.evaluate import mean_figures

    results = _federation(args).baselines(task=args.task, kernel=args.kernel, nu=args.nu, mu=args.mu, seed=args.seed)
    rows = [{"entity": r.entity_id, "n_train": r.n_train, "n_test": r.n_test, **r.figures} for r in results]
    if args.json:
        print(json.dumps({"entities": rows, "mean": mean_figures(results)}))
    else:
        for row in rows:
            print("  ".join(f"{k} = {v:.4f}" if isinstance(v, float) else f"{k} = {v}" for k, v in row.items()))
        print("mean: " + ", ".join(f"{k} = {v:.4f}" for k, v in mean_figures(results).items()))
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    return _federation(args).serve(args.model, args.listen)


def cmd_split(args: argparse.Namespace) -> int:
    dataset_options = dataset_options_from_args(args, args.task)
    dataset = load_dataset(args.data, dataset_options)
    result = split_dataset(
        dataset,
        SplitOptions(
            rows=args.rows,
            cols=args.cols,
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
    )
    print(
        f"wrote {len(result.entity_config_paths)} cells ({result.n_train} training, {result.n_test} held-out records) "
        f"and {result.federation_path}; prediction clients of `coordinator serve` use {DEFAULT_CLIENT_NAME}.pem and "
        f"{DEFAULT_CLIENT_NAME}.key"
    )
    return 0


def cmd_certs(args: argparse.Namespace) -> int:
    from ppsvm.files import PRIVATE_MODE, PUBLIC_MODE, write_all
    from ppsvm.wire.certs import CA_FILE, CA_KEY_FILE, certificate_file, federation_parties, key_file, make_certificates

    federation = load_federation(args.federation)
    parties = federation_parties(args.coordinator, [e.id for e in federation.entities], args.client)
    files = make_certificates(parties, valid_days=args.days)
    out = Path(args.out)
    existing = sorted(name for name in files if (out / name).exists())
    if existing and not args.overwrite:
        raise ConfigError(f"{out} already holds {', '.join(existing)}; pass --overwrite to replace them")
    write_all(
        out,
        {name: (pem.text.decode("ascii"), PRIVATE_MODE if pem.secret else PUBLIC_MODE) for name, pem in files.items()},
    )
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
    from ppsvm.config import load_entity_config
    from ppsvm.coordinator.audit import format_report

    configs = [load_entity_config(path) for path in args.entity_config]
    report = _federation(args).audit(configs)
    print(json.dumps(report) if args.json else format_report(report))
    return 0 if report["ok"] else 1


def cmd_reference(args: argparse.Namespace) -> int:
    from ppsvm.api.federation import task_setting
    from ppsvm.coordinator.reference import LABEL, pooled_reference

    table = load_federation(Path(args.split_dir) / "federation.toml").task
    result = pooled_reference(
        Path(args.split_dir),
        task_setting(table, "task", args.task, "classify"),
        task_setting(table, "kernel", args.kernel, "gaussian"),
        nu=task_setting(table, "nu", args.nu),
        mu=task_setting(table, "mu", args.mu),
        seed=args.seed,
    )
    print(json.dumps(result) if args.json else LABEL + "\n" + "\n".join(f"{k:>15}: {v}" for k, v in result.items()))
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
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
        cols=args.cols,
        test_fraction=args.test_fraction,
        seed=args.seed,
        train=train_options({}, deadline=args.deadline, **_training_flags(args)),
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
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    entity_cli.register(commands)

    coordinator = commands.add_parser("coordinator", help="train, evaluate and serve models over a federation")
    actions = coordinator.add_subparsers(dest="action", required=True, metavar="ACTION")
    train = actions.add_parser(
        "train", help="assemble K(A, B') from the entities, solve the LP, write and distribute the model"
    )
    _add_connection_arguments(train)
    train.add_argument("--model-out", required=True, help="where to write the model (JSON, written atomically)")
    train.add_argument("--no-distribute", action="store_true", help="do not send the model to the entities")
    train.add_argument("--json", action="store_true", help="print a JSON summary")
    _add_task_arguments(train)
    _add_dp_arguments(train)
    _add_basis_argument(train)
    train.set_defaults(run=cmd_train)

    evaluate = actions.add_parser("evaluate", help="evaluate a model on the entities' held-out records")
    _add_connection_arguments(evaluate)
    evaluate.add_argument("--model", required=True)
    evaluate.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object: error_rate and auc (classify) or relative_error and rmse "
        "(regress), n_test, private",
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
    _add_connection_arguments(baselines)
    baselines.add_argument("--json", action="store_true")
    _add_task_arguments(baselines, random_kernel=False)
    baselines.set_defaults(run=cmd_baselines)

    serve = actions.add_parser("serve", help="answer prediction requests by record id (gRPC Coordinator service)")
    _add_connection_arguments(serve)
    serve.add_argument("--model", required=True)
    serve.add_argument(
        "--listen",
        default="127.0.0.1:0",
        help="HOST:PORT (default %(default)s: a free port); with TLS, clients need a certificate "
        "from the federation CA",
    )
    serve.set_defaults(run=cmd_serve)

    split = commands.add_parser(
        "split", help="partition a dataset into a checkerboard of entity cells, configs and secrets"
    )
    split.add_argument("data", help="dataset file (e.g. ../shared/datasets/wdbc.data)")
    split.add_argument("--rows", type=int, required=True, help="row blocks r")
    split.add_argument("--cols", type=int, required=True, help="column blocks s")
    split.add_argument("--out", required=True, help="output directory")
    split.add_argument("--test-fraction", type=float, default=0.3, help="held-out fraction (default %(default)s)")
    split.add_argument("--seed", type=int, default=0, help="shuffle seed (default %(default)s)")
    split.add_argument("--task", choices=TASKS, default="classify")
    split.add_argument("--kernel", choices=KERNELS, default="gaussian", help="written to the federation file")
    split.add_argument("--host", default="127.0.0.1", help="entity host in the federation file")
    split.add_argument("--base-port", type=int, default=50051, help="entity (i, j) listens on base + i * cols + j")
    split.add_argument("--overwrite", action="store_true", help="allow a non-empty output directory")
    add_dataset_arguments(split)
    split.set_defaults(run=cmd_split)

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
    _add_connection_arguments(audit)
    audit.add_argument(
        "--entity-config",
        action="append",
        default=[],
        metavar="TOML",
        help="an entity config to check as well (repeatable; a data owner audits its own)",
    )
    audit.add_argument("--json", action="store_true", help="print the report as one JSON object")
    audit.set_defaults(run=cmd_audit)

    reference = commands.add_parser(
        "reference",
        help="NOT PRIVATE: the pooled reduced-kernel reference K(A, Abar') on a split directory (benchmarks only)",
    )
    reference.add_argument("split_dir", help="output directory of 'ppsvm split'")
    reference.add_argument("--task", choices=TASKS)
    reference.add_argument("--kernel", choices=KERNELS)
    reference.add_argument(
        "--nu", type=_auto_float, help="number or auto (default: the split's [task] value, else auto)"
    )
    reference.add_argument(
        "--mu", type=_auto_float, help="number or auto (default: the split's [task] value, else auto)"
    )
    reference.add_argument("--seed", type=int, default=0)
    reference.add_argument("--json", action="store_true")
    reference.set_defaults(run=cmd_reference)

    demo = commands.add_parser(
        "demo", help="split a dataset, run its entities as processes, train, evaluate and compare"
    )
    demo.add_argument("--data", help="dataset file (default: the shipped WDBC, label M/B)")
    demo.add_argument("--rows", type=int, default=2, help="row blocks (default %(default)s)")
    demo.add_argument("--cols", type=int, default=2, help="column blocks (default %(default)s)")
    demo.add_argument("--test-fraction", type=float, default=0.3, help="held-out fraction (default %(default)s)")
    demo.add_argument("--out", help="keep the split, model and configs in this directory (default: a temporary one)")
    demo.add_argument("--json", action="store_true", help="last line: the PPSVM evaluation as JSON")
    _add_task_arguments(demo)
    _add_connection_arguments(demo, federation=False)
    add_dataset_arguments(demo)
    _add_basis_argument(demo)
    demo.set_defaults(run=cmd_demo)

    reproduce_cli.register(commands, with_targets=reproduce_targets)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser(reproduce_targets="reproduce" in argv).parse_args(argv)
    level = logging.DEBUG if args.verbose else logging.WARNING if args.quiet else logging.INFO
    logging.basicConfig(level=level, format="ppsvm: %(message)s", stream=sys.stderr)
    try:
        return args.run(args)
    except PpsvmError as error:
        print(f"ppsvm: error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("ppsvm: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
