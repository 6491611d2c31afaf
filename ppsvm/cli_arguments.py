"""Command-line options that several ``ppsvm`` commands share, and how they become keyword arguments.

Training settings left unset fall back to the federation file's ``[task]`` table (in
:mod:`ppsvm.api.federation`), so a flag is kept as given: 'auto' stays the string 'auto'.
"""

from __future__ import annotations

import argparse
import csv
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from ppsvm.constants import DEFAULT_DASK_WORKERS, DEFAULT_DEADLINE_S, DEFAULT_FOLDS, ENGINES, TASKS
from ppsvm.core.kernels import KERNELS
from ppsvm.core.lp import DEFAULT_FORMULATION, FORMULATIONS
from ppsvm.core.tuning import SEARCHES
from ppsvm.data.dataset import DEFAULT_MISSING_VALUES, ColumnRef, DatasetOptions
from ppsvm.errors import ConfigError

T = TypeVar("T")
_INTEGER = re.compile(r"[+-]?\d+")
# 'auto' on the command line is kept as the string, so it can override a number in the federation file.
AUTO = "auto"


def _number_or_auto(convert: Callable[[str], T], expected: str) -> Callable[[str], T | str]:
    """An argparse ``type``: 'auto' as given, else ``convert(text)``; ``expected`` says what else is accepted."""

    def parse(text: str) -> T | str:
        if text == AUTO:
            return AUTO
        try:
            return convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {expected} or 'auto', got {text!r}") from None

    return parse


auto_int = _number_or_auto(int, "a whole number")
auto_float = _number_or_auto(float, "a number")


def add_task_arguments(
    parser: argparse.ArgumentParser,
    random_kernel: bool = True,
    seed_help: str = "seed of the cross-validation folds (default %(default)s)",
) -> None:
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
            type=auto_int,
            help="random points per column block, < n_j for every block; 'auto' (default): min(n_j) "
            "- 1, at most 10%% of the training rows",
        )
    parser.add_argument(
        "--nu", type=auto_float, help="LP weight (a number, or 'auto' for k-fold cross-validation; default auto)"
    )
    tuned = (
        "on the assembled kernel by the power identity, no new entity requests"
        if random_kernel
        else "by each entity on its own cell"
    )
    parser.add_argument(
        "--mu", type=auto_float, help=f"Gaussian width (a number, or 'auto': tuned {tuned}; default auto)"
    )
    if random_kernel:
        parser.add_argument(
            "--folds", type=int, default=DEFAULT_FOLDS, help="cross-validation folds for 'auto' (default %(default)s)"
        )
    parser.add_argument("--seed", type=int, default=0, help=seed_help)
    if random_kernel:
        parser.add_argument(
            "--solver",
            "--lp-formulation",
            dest="lp_formulation",
            choices=FORMULATIONS,
            default=DEFAULT_FORMULATION,
            help="how the LP is solved: auto (default: ipm from 2,000 rows on, highs-dual below, where it is "
            "faster), ipm (ppsvm's interior-point method for this LP; falls back to HiGHS with a warning if it does "
            "not converge), highs-dual (HiGHS on the same dual), cvxpy-dual, cvxpy-primal (as the papers write it)",
        )


def add_dp_arguments(parser: argparse.ArgumentParser) -> None:
    """The differentially private hybrid RBF SVM (Li, Xiong, Ohno-Machado, Jiang 2014) and its baselines."""
    from ppsvm.core.dp import DEFAULT_N_FREQUENCIES, GUARANTEES, MECHANISMS, NON_PRIVATE
    from ppsvm.core.dp_model import METHODS
    from ppsvm.core.linear_svm import DEFAULT_C
    from ppsvm.core.threshold import DEFAULT_THRESHOLD_EPSILON

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
    group.add_argument(
        "--public",
        help="the public records, all used: a public source file (TOML) that a data owner writes with `ppsvm "
        "coordinator public-source` from its entity config, which reads them through the entities' own schema and "
        "vouches for it with their keyed check; public-only also takes a plain CSV (id,label,features...)",
    )
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
    group.add_argument(
        "--C",
        type=auto_float,
        default=AUTO,
        help="SVM cost in (C/n) sum hinge; auto (default): the largest of 0.1, 1, 10, 100 whose expected noise norm "
        f"stays below half the bound sqrt(2C) on the weights, from public facts (the paper: {DEFAULT_C:g})",
    )
    group.add_argument(
        "--width-factor",
        type=auto_float,
        default=AUTO,
        help="the kernel width as a multiple of the public records' median heuristic; auto (default) chooses among "
        "0.25, 1 and 4 by cross-validation on the public records with the release's noise simulated (the paper: 1)",
    )
    group.add_argument(
        "--threshold-epsilon",
        type=float,
        default=DEFAULT_THRESHOLD_EPSILON,
        help="dp-hybrid and private-svm: epsilon each entity spends on a noised histogram of the model's scores on "
        "its training records, from which the decision threshold is chosen (default %(default)s, on top of "
        "--epsilon); 0 keeps the threshold at 0, as the paper does, which on imbalanced labels predicts the "
        "majority class for almost everyone",
    )
    group.add_argument(
        "--dry-run",
        action="store_true",
        help="print, from public facts only, what the training would ask and pin, and exit (1 if it would be "
        "refused); nothing is spent and no entity computes anything. Random kernel: per column block its basis "
        "epoch, the view the epoch pinned, whether this training pins, uses or is refused by it, and the points per "
        "record left for later epochs. DP methods: what each entity would be charged, its budget left and the "
        "expected noise against the bound on the weights, the public records' schema against the entities' keyed "
        "checks, and, from the public records with the release simulated (rho learned as training would), the "
        "released model's expected accuracy against public-only and the majority class",
    )
    group.add_argument(
        "--allow-noisy",
        action="store_true",
        help="DP methods: release even where the expected noise exceeds the bound on the weights, or where the "
        "released model is not expected to beat public-only or the majority class (refused otherwise)",
    )


def add_records_argument(parser: argparse.ArgumentParser | argparse._MutuallyExclusiveGroup) -> None:
    """``--records``: the records a DP model scores, from their features."""
    parser.add_argument(
        "--records",
        metavar="FILE",
        help="DP models: a CSV of the records to score, read through the schema the model was trained with: a header "
        "with column id and the feature columns by name (categories as text; other columns ignored). The entities of "
        "a DP federation release nothing about a single record, so whoever holds the records scores them",
    )


def add_connection_arguments(parser: argparse.ArgumentParser, federation: bool = True) -> None:
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


def training_flags(args: argparse.Namespace) -> dict[str, Any]:
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
        "search": args.search,
        "class_weight": args.class_weight,
    }


def add_basis_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--basis",
        choices=("auto", "paper", "product"),
        default="auto",
        help="paper: B = [B_1 ... B_s], mbar random points, as the papers, each row block's blocks combined by "
        "secure aggregation. product (our addition): also points pairing rows of different B_j's, up to 10%% of "
        "the training rows (at most 500); helps when many partitions leave a small mbar, but its columns need "
        "every entity's block on its own, which an entity with column-block peers releases only within its "
        "measured reconstruction risk or with its own consent. auto (default): paper; with one column block "
        "they are the same",
    )
    add_search_argument(parser)
    parser.add_argument(
        "--class-weight",
        choices=("balanced",),
        help="balanced: each class weighs the same in the LP whatever its count (each record's error weighted by "
        "records / (2 x its class's count)), which raises the rare class's recall; probabilities stay calibrated "
        "to the classes' real frequencies. Default: every record weighs 1 (or the federation file's [task] value)",
    )


def add_engine_arguments(parser: argparse.ArgumentParser) -> None:
    """Where the random-kernel training holds K and solves the LP: this process, or a Dask cluster."""
    group = parser.add_argument_group(
        "engine (random-kernel)",
        "numpy (default) holds K in this process. dask streams K's rows from the entities into chunks on Dask "
        "workers, never holding K here, and solves the LP there (the interior-point method); cross-validation and "
        "calibration run here on their sample of at most 8,000 rows. The workers hold kernel rows: they are part "
        "of the coordinator, and the cluster speaks mutual TLS from a CA of its own (never the federation's). "
        "Needs ppsvm[dask]",
    )
    group.add_argument(
        "--engine", choices=ENGINES, help="numpy (default, or the federation file's [task] value) or dask"
    )
    group.add_argument(
        "--dask-scheduler",
        metavar="ADDRESS",
        help="a running Dask scheduler (tls://host:port) whose scheduler and workers run with "
        "ppsvm.core.dask_engine.WORKER_CONFIG and the certificates in --dask-tls. Default: a cluster of "
        "--dask-workers processes on this machine, with a CA made for the training alone",
    )
    group.add_argument(
        "--dask-tls",
        metavar="DIR",
        type=Path,
        help="the named scheduler's cluster certificates, written by `ppsvm coordinator dask-certs` (a CA of the "
        "cluster's own: certificates from the federation's CA are refused, since Dask checks no name or role)",
    )
    group.add_argument(
        "--dask-workers",
        type=int,
        metavar="N",
        help=f"worker processes of the local cluster (default {DEFAULT_DASK_WORKERS})",
    )


def engine_flags(args: argparse.Namespace) -> dict[str, Any]:
    """The engine flags as keyword arguments of ppsvm.api.federation's train functions."""
    return {
        "engine": args.engine,
        "dask_scheduler": args.dask_scheduler,
        "dask_workers": args.dask_workers,
        "dask_tls": args.dask_tls,
    }


def add_search_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--search",
        choices=SEARCHES,
        default="grid",
        help="how auto nu and mu are tuned: grid (default), every point of the 7 x 8 grid; uniform-design, the "
        "papers' nested uniform design (2 x 30 points, log10 nu in [-7, 7], the grid's widths)",
    )


def federation_from_args(args: argparse.Namespace) -> Any:
    """The federation file as a :class:`ppsvm.api.federation.Federation`, with the connection flags."""
    from ppsvm.api.federation import Federation

    return Federation.from_toml(args.federation, insecure=args.insecure, deadline=args.deadline)


# ``--cols``: a count of contiguous column blocks, or each block's feature names.
ColumnBlocks = int | tuple[tuple[str, ...], ...]


def add_cols_argument(parser: argparse.ArgumentParser, default: str | None = None) -> None:
    """``--cols``, the column blocks of ``split`` and ``demo``: required where ``default`` is None.

    Read with :func:`column_blocks_from_arg`; names become indices once the dataset is loaded
    (:func:`ppsvm.data.partition.column_layout`).
    """
    parser.add_argument(
        "--cols",
        required=default is None,
        default=default,
        metavar="S|NAMES|@FILE",
        help="column blocks: a count s (contiguous blocks of the features in file order), or each block's "
        "features by name, blocks separated by ':' and names by ',' (--cols age,sex:bp,chol), or @FILE with one "
        "block per line (names by ',', quoted as in CSV where a name holds one; blank lines and lines starting "
        "with # skipped). Every feature goes to exactly one block; names are the header's, or x<column index> "
        "for a file without one" + ("" if default is None else " (default %(default)s)"),
    )


def column_blocks_from_arg(text: str) -> ColumnBlocks:
    """The ``--cols`` value: a whole number is the count of contiguous column blocks, anything else each block's
    feature names (``a,b:c,d``, or ``@FILE`` with a block per line).

    Returns
    -------
    int, or tuple of tuples of str
        The count, or the names of each block's features, in order.

    Raises
    ------
    ConfigError
        A file that cannot be read, or an empty block or name, naming where.
    """
    text = text.strip()
    if _INTEGER.fullmatch(text):
        return int(text)
    if text.startswith("@"):
        path = Path(text[1:])
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"--cols: cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from exc
        kept = [(k, line) for k, line in enumerate(lines, 1) if line.strip() and not line.lstrip().startswith("#")]
        # Each line read as a CSV row for the quoting: a name may hold a comma.
        blocks = [(f"{path} line {k}", next(csv.reader([line]))) for k, line in kept]
        syntax = f"{path}: one column block per line, names separated by ','"
        if not blocks:
            raise ConfigError(f"--cols: {path} names no column block ({syntax})")
    else:
        blocks = [(f"column block {j}", block.split(",")) for j, block in enumerate(text.split(":"))]
        syntax = "column blocks separated by ':', names by ',', e.g. --cols age,sex:bp,chol"
    names = tuple(tuple(name.strip() for name in block) for _, block in blocks)
    for (where, _), block in zip(blocks, names, strict=True):
        if "" in block:
            raise ConfigError(f"--cols: {where} has an empty feature name ({syntax})")
    return names


def _column_ref(text: str) -> ColumnRef:
    """A command-line column reference: integers are indices, anything else a header name."""
    return int(text) if _INTEGER.fullmatch(text) else text


def add_dataset_arguments(parser: argparse.ArgumentParser, categorical: bool = False) -> None:
    """Add the options of :class:`DatasetOptions` (except the task) to `parser`.

    ``categorical``: also ``--categorical``, and infer as categorical every column of text (commands that write an
    entity's [schema], which encodes categories; others read numbers only).
    """
    group = parser.add_argument_group("dataset")
    group.add_argument(
        "--label", default="-1", help="label column: 0-based index (negative from the end) or header name (default -1)"
    )
    classes = group.add_mutually_exclusive_group()
    classes.add_argument("--positive", help="label value that becomes +1 (all others -1)")
    classes.add_argument("--negative", help="label value that becomes -1 (all others +1)")
    group.add_argument(
        "--drop",
        action="append",
        default=[],
        metavar="COLUMNS",
        help="columns to drop: indices or header names, comma-separated or repeated",
    )
    group.add_argument("--id-column", "--id", help="column holding record ids (default: the data row number)")
    if categorical:
        group.add_argument(
            "--categorical",
            action="append",
            metavar="COLUMNS",
            help="columns whose values are categories (indices or header names, comma-separated or repeated); a "
            "column whose values are not all numbers is one anyway (said so, with its categories). The categories "
            "are every value the whole file holds, sorted: they become part of the [schema] every member of the "
            "column's block declares and agrees on, and each is one 0/1 column of the encoding",
        )
    group.add_argument(
        "--missing",
        choices=("refuse", "drop", "impute"),
        default="refuse",
        help="missing values: refuse (default), drop the rows, or impute each entity's training means per column",
    )
    group.add_argument(
        "--missing-values",
        metavar="TOKENS",
        help="comma-separated field values that mean missing, besides an empty field (default: "
        + ", ".join(v for v in DEFAULT_MISSING_VALUES if v)
        + ")",
    )
    group.add_argument("--header", action="store_true", help="the first line holds column names")
    group.add_argument("--delimiter", default=",", help="field separator (default ',')")


def dataset_options_from_args(args: argparse.Namespace, task: str) -> DatasetOptions:
    """Build :class:`DatasetOptions` from arguments added by :func:`add_dataset_arguments`.

    Parameters
    ----------
    args : argparse.Namespace
        Parsed arguments.
    task : str
        "classify" or "regress" (the caller owns the ``--task`` option).

    Returns
    -------
    DatasetOptions
        Integer-looking column references become indices, others header names.
    """
    drop = _column_refs(args.drop)
    # Only where add_dataset_arguments was asked for --categorical: text columns are then inferred as categorical.
    infer_categorical = hasattr(args, "categorical")
    return DatasetOptions(
        label=_column_ref(args.label),
        positive=args.positive,
        negative=args.negative,
        task=task,  # type: ignore[arg-type]  # validated in DatasetOptions.__post_init__
        drop=drop,
        id_column=None if args.id_column is None else _column_ref(args.id_column),
        missing=args.missing,
        missing_values=DEFAULT_MISSING_VALUES
        if args.missing_values is None
        else ("", *(token.strip() for token in args.missing_values.split(","))),
        header=args.header,
        delimiter=args.delimiter,
        categorical=_column_refs(getattr(args, "categorical", None) or []),
        infer_categorical=infer_categorical,
    )


def _column_refs(items: list[str]) -> tuple[ColumnRef, ...]:
    """Column references given comma-separated or repeated."""
    return tuple(_column_ref(part.strip()) for item in items for part in item.split(",") if part.strip())


def read_id_list(path: str) -> list[str]:
    """Record ids from a file, one per line (blank lines skipped, a first line 'id' taken as a header), each once.

    Raises
    ------
    ConfigError
        The file cannot be read, holds no id, or holds one twice.
    """
    try:
        lines = [line.strip() for line in Path(path).read_text(encoding="utf-8").splitlines()]
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the id list {path}: {getattr(exc, 'strerror', None) or exc}") from exc
    ids = [line for line in lines if line]
    if ids[:1] == ["id"]:
        ids = ids[1:]
    if not ids or len(set(ids)) != len(ids):
        raise ConfigError(f"{path}: list each record id once, one per line (got {len(ids)}, {len(set(ids))} distinct)")
    return ids
