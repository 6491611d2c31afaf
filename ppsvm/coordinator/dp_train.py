"""``ppsvm coordinator train --method dp-hybrid | private-svm | public-only`` (Li et al. 2014).

The coordinator reads only the *public* records, through the entities' own declared schema (a public source file
that a data owner writes from its entity config and vouches for with the keyed check the entities publish:
:func:`write_public_source`, :func:`check_public_schema`): from them it takes the feature
scaling, the kernel width and rho (learned once for dp-hybrid, drawn at random for
private-svm). Before anything is spent it estimates, from the public records and public facts, what the release
will be worth beside public-only and the majority class, and refuses a release not expected to beat them
(:func:`plan_release`, :func:`check_worth`). Each entity (row blocks holding every feature and the label,
s = 1) maps its rows with zhat, trains the exact linear SVM and releases its
weights through a DP mechanism, charged to its own release log. The model's
weights are the n_i-weighted mean of the releases: each is epsilon-DP for its
entity's records, and averaging released values costs no further privacy.

Then the decision threshold (:mod:`ppsvm.core.threshold`): each entity releases a
histogram of the averaged model's scores on its training records per class, with
discrete Laplace noise, charged as a second release of ``threshold_epsilon``; the
coordinator cuts where the summed histograms show the fewest training errors.
"""

from __future__ import annotations

import csv
import dataclasses
import logging
import math
import os
import time
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ppsvm.config import Federation, load_entity_config, toml_document
from ppsvm.constants import DEFAULT_DEADLINE_S
from ppsvm.coordinator.federation import Session
from ppsvm.coordinator.train import declared_labels, distribute
from ppsvm.core.calibration import calibration_record, fit_platt
from ppsvm.core.dp import (
    DEFAULT_HUBER_H,
    DEFAULT_N_FREQUENCIES,
    MECHANISMS,
    NON_PRIVATE,
    expected_noise_norm,
    weight_bound,
)
from ppsvm.core.dp_model import METHODS, DpEntity, DpModel
from ppsvm.core.dp_selection import (
    C_GRID,
    DEFAULT_FACTOR,
    NOISE_TO_BOUND,
    PAPER_C,
    SELECTION_STREAM,
    WIDTH_FACTORS,
    WORTH_STREAM,
    WorthEstimate,
    default_C,
    estimate_worth,
    select_c_and_width,
    simulated_release,
)
from ppsvm.core.fourier import (
    PublicPreprocessing,
    learn_frequencies,
    public_preprocessing,
    random_frequencies,
)
from ppsvm.core.kernels import gaussian_kernel
from ppsvm.core.linear_svm import DEFAULT_C, train_kernel_svm
from ppsvm.core.randomness import features_check
from ppsvm.core.threshold import (
    DEFAULT_THRESHOLD_EPSILON,
    choose_threshold,
    count_noise_std,
    threshold_edge_count,
    threshold_edges,
    zero_margin_stds,
)
from ppsvm.data.cell import Cell
from ppsvm.data.schema import Schema, numeric_schema, parse_schema
from ppsvm.data.sources import DataSource, label_table, load_cell, parse_data_table, read_source
from ppsvm.errors import ConfigError, DataError, PrivacyError
from ppsvm.files import write_atomic
from ppsvm.wire.rpc import ppsvm_pb2 as pb

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class DpOptions:
    """Settings of one DP training run.

    Attributes
    ----------
    method : {"dp-hybrid", "private-svm", "public-only"}
    public : Path
        Public records, every row used: a public source file (TOML, :func:`load_public`), or for public-only a
        plain cell CSV (``id,label,features...``).
    mechanism : {"laplace", "output-gamma", "objective", "none"}
        "none" releases unnoised weights (NOT PRIVATE) and needs each entity's own consent.
    epsilon : float or None
        Per release; None only with mechanism "none" or method "public-only".
    C, width_factor : float or None
        The SVM cost and the multiple of the median heuristic's kernel width. None chooses them
        (:mod:`ppsvm.core.dp_selection`): C as the largest the expected noise allows, the width by
        cross-validation on the public records. public-only takes C = 1 for None.
    threshold_epsilon : float or None
        What each entity spends on its score histogram, from which the decision threshold is chosen;
        None keeps the threshold at 0 (the paper's models). Not used by public-only.
    seed : int
        Seed of rho's start (dp-hybrid) or draw (private-svm): rho is public, so a seed is fine.
    allow_noisy : bool
        Release even where the expected noise exceeds the bound on the weights (:func:`preflight`) or the release is
        not expected to beat public-only or the majority class (:func:`check_worth`; then not estimated).
    """

    method: str
    public: Path
    mechanism: str = "laplace"
    epsilon: float | None = None
    n_frequencies: int = DEFAULT_N_FREQUENCIES
    C: float | None = DEFAULT_C
    width_factor: float | None = 1.0
    huber_h: float = DEFAULT_HUBER_H
    threshold_epsilon: float | None = DEFAULT_THRESHOLD_EPSILON
    seed: int = 0
    deadline: float = DEFAULT_DEADLINE_S
    distribute: bool = True
    allow_noisy: bool = False

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ConfigError(f"method must be one of {', '.join(METHODS)}, got {self.method!r}")
        if self.mechanism not in (*MECHANISMS, NON_PRIVATE):
            raise ConfigError(
                f"mechanism must be one of {', '.join((*MECHANISMS, NON_PRIVATE))}, got {self.mechanism!r}"
            )
        needs_epsilon = self.method != "public-only" and self.mechanism != NON_PRIVATE
        if needs_epsilon and (self.epsilon is None or not (math.isfinite(self.epsilon) and self.epsilon > 0)):
            raise ConfigError(
                f"--epsilon must be a number > 0 for {self.method} with "
                f"the {self.mechanism} mechanism, got {self.epsilon}"
            )
        if not needs_epsilon and self.epsilon is not None:
            raise ConfigError(
                f"--epsilon does not apply to {self.method if self.method == 'public-only' else 'mechanism none'}"
            )
        if self.threshold_epsilon is not None and not (
            math.isfinite(self.threshold_epsilon) and self.threshold_epsilon > 0
        ):
            raise ConfigError(
                f"--threshold-epsilon must be a number > 0 (or 0 for no threshold), got {self.threshold_epsilon}"
            )
        if self.n_frequencies < 1:
            raise ConfigError(f"--frequencies must be >= 1, got {self.n_frequencies}")
        for flag, value in (("--C", self.C), ("--width-factor", self.width_factor)):
            if value is not None and not (math.isfinite(value) and value > 0):
                raise ConfigError(f"{flag} must be a number > 0 or auto, got {value}")


# L-BFGS stops learning rho where one more iteration lowers the mean squared kernel error over the public pairs by
# less than RHO_TOLERANCE (ftol; the objective is below 1, where scipy's relative test is absolute) or where the
# projected gradient is that small (gtol). Measured on 200 Adult records (18 features, D = 100, 2,000 pairs): the
# error on 3,000 pairs of 1,000 other records is 1.2e-4 to 2.3e-4 at this tolerance (61-70 iterations, 1.8-2.6 s)
# and 1.1e-4 to 2.4e-4 at the 500-iteration cap (7-10 s), against 3.1e-3 to 3.4e-3 for random frequencies: the
# cap's extra iterations fit the training pairs (1.4e-7 against 5e-6), not the kernel. rho is public: where
# L-BFGS stops costs approximation accuracy, never privacy.
RHO_TOLERANCE = 1e-7
# The keys of a public source file (see :func:`load_public`).
PUBLIC_SOURCE_TABLES = ("data", "schema", "check")
PUBLIC_SOURCE_LAYOUT = (
    "a public source file (TOML) holds [data] (where the public records are and their id and label columns, as "
    "in an entity config), [schema] (the entities' own, verbatim) and [check] (the entity that vouched for the "
    "schema, its fingerprint and its keyed check). A data owner writes it from its entity config: `ppsvm "
    "coordinator public-source --entity-config ENTITY.toml --data PUBLIC.csv --out public.toml`"
)


@dataclass(frozen=True)
class PublicRecords:
    """The public records, read and encoded through the entities' declared schema.

    Attributes
    ----------
    X : ndarray, shape (k, d)
        Every record (training and held-out alike), encoded by ``schema`` and clipped to its declared bounds, as
        the entities encode theirs.
    y : ndarray, shape (k,)
        Labels in {-1, +1}, both present.
    schema : Schema
    where : str
        The file, for messages.
    check : dict or None
        The vouching entity's ``[check]``: "entity", "schema" (the schema's fingerprint) and "features" (the keyed
        check the entities publish in their metadata). None for a plain cell CSV, which no entity vouched for.
    labels : (str, str) or None
        The (negative, positive) label values its [data] table declares; None for labels -1 and +1.
    """

    X: np.ndarray
    y: np.ndarray
    schema: Schema
    where: str
    check: dict[str, str] | None
    labels: tuple[str, str] | None = None


def load_public(path: Path) -> PublicRecords:
    """The public records: a public source file (TOML: see :data:`PUBLIC_SOURCE_LAYOUT`), or a plain cell CSV
    (``id,label,features...``, every feature a number), which only public-only takes.

    Raises
    ------
    ConfigError
        The source file is malformed, or its [schema] is not the one its [check] vouches for; naming the key.
    DataError
        A record does not fit the schema (naming the file, line and column), or a class is missing.
    """
    if path.suffix != ".toml":
        cell = load_cell(path)
        return _public_records(cell, numeric_schema(cell.feature_names), str(path), None)
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read the public source {path}: {exc.strerror}") from exc
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from exc
    unknown = sorted(set(document) - set(PUBLIC_SOURCE_TABLES))
    if unknown or not isinstance(document.get("data"), dict) or "schema" not in document:
        raise ConfigError(f"{path}: {PUBLIC_SOURCE_LAYOUT}" + (f"; unknown: {', '.join(unknown)}" if unknown else ""))
    source = parse_data_table(document["data"], f"{path} [data]", path.parent)
    if source.label_column is None:
        raise ConfigError(f"{path} [data]: the public records need a label column ('label')")
    schema = parse_schema(document["schema"], str(path))
    check = document.get("check")
    if check is not None:
        if not isinstance(check, dict) or sorted(check) != ["entity", "features", "schema"]:
            raise ConfigError(f"{path} [check]: must hold 'entity', 'schema' and 'features' as written")
        if check["schema"] != schema.fingerprint():
            raise ConfigError(
                f"{path}: its [schema] is not the one entity {check['entity']} vouched for (edited since: names, "
                "order, categories, imputations or bounds differ); write the file again from an entity config"
            )
    if source.labels is not None and len(source.labels) > 2:
        raise ConfigError(f"{path}: its labels name {len(source.labels)} classes; DP training fits two")
    labels = None if source.labels is None else (source.labels[1], source.labels[0])
    return dataclasses.replace(_public_records(read_source(source, schema), schema, str(path), check), labels=labels)


def _public_records(cell: Cell, schema: Schema, where: str, check: dict[str, str] | None) -> PublicRecords:
    """Every record of ``cell``, clipped to the schema's declared bounds as an entity clips its own."""
    if cell.y_train is None or cell.y_test is None:
        raise DataError(f"{where}: public records need a label column")
    X = _within_bounds(np.vstack([cell.X_train, cell.X_test]), schema)
    y = np.concatenate([cell.y_train, cell.y_test])
    if len(np.unique(y)) < 2:
        raise DataError(f"{where}: the public records hold one class only; both are needed")
    return PublicRecords(X, y, schema, where, check)


def write_public_source(entity_config: Path, data: Path, out: Path) -> PublicRecords:
    """Write the public source file for ``data`` from an entity's config: run by its data owner.

    The file holds the entity's own [schema] (for a cell CSV without one, every column a number, as the entity
    reads it), a [data] table for ``data`` with the entity's id and label columns and label values, and the keyed
    check the entity publishes in its metadata, computed here with its secret: the coordinator compares that with
    every entity's before anything is spent. ``data`` is read through the schema first, so a record that does not
    fit is refused here, naming the line and column.

    Parameters
    ----------
    entity_config : Path
        The owner's entity config (its secret is read, never written).
    data : Path
        The public records: a CSV (or Parquet, by its suffix) with the entity's id and label columns and the
        schema's feature columns, by name, in any order.
    out : Path
        The file to write (TOML).

    Returns
    -------
    PublicRecords
        The records as the coordinator will read them.
    """
    config = load_entity_config(entity_config)
    schema = config.schema or _cell_schema(config.data)
    if config.data.label_column is None:
        raise ConfigError(f"{entity_config}: the entity's data has no label column; public records need one")
    table: dict[str, Any] = {
        "source": "parquet" if data.suffix == ".parquet" else "csv",
        "path": os.path.relpath(data.resolve(), out.resolve().parent),
        "id": config.data.id_column,
        "label": config.data.label_column,
        **({"labels": label_table(config.data.labels)} if config.data.labels else {}),
        "delimiter": config.data.delimiter,
        "missing_values": sorted(config.data.missing_values),
    }
    check = {
        "entity": config.id,
        "schema": schema.fingerprint(),
        "features": features_check(config.read_secret(), (*schema.encoded_names, schema.fingerprint())),
    }
    text = toml_document(
        f"ppsvm public records for the DP methods, vouched for by entity {config.id}: give it to the coordinator "
        "with the records (nothing here is private).",
        [("[data]", table), ("[check]", check), *(("[[schema.features]]", f.as_dict()) for f in schema.features)],
    )
    public = _public_records(
        read_source(parse_data_table(table, f"{out} [data]", out.resolve().parent), schema), schema, str(data), check
    )
    write_atomic(out, text)
    return public


def _cell_schema(source: DataSource) -> Schema:
    """A cell CSV's schema as its entity reads it: every column but the id, label and split a number, in order."""
    assert source.path is not None
    try:
        with source.path.open(newline="", encoding="utf-8") as handle:
            header = [name.strip() for name in next(csv.reader(handle), [])]
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the header of {source.path}: {getattr(exc, 'strerror', None) or exc}") from exc
    roles = (source.id_column, source.label_column, source.split_column)
    return numeric_schema([name for name in header if name not in roles])


def records_to_score(model: DpModel, path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Records to score with a DP model, read through the model's schema as the entities read theirs.

    Parameters
    ----------
    model : DpModel
    path : Path
        A CSV with a header: column ``id`` and the schema's feature columns by name, in any order (others, a
        label say, are left alone). A model file without a schema (written before models carried one) takes the
        plain cell CSV, ``id`` then its features in the model's order.

    Returns
    -------
    ids : ndarray of str, shape (m,)
    X : ndarray, shape (m, d)
        Clipped to the schema's declared bounds.

    Raises
    ------
    DataError
        A record does not fit the schema, naming the file, line and column; or another feature count.
    """
    if model.schema:
        schema = parse_schema(model.schema, "the model's schema")
        cell = read_source(DataSource("csv", path=path, id_column="id"), schema)
    else:
        cell = load_cell(path)
        schema = numeric_schema(cell.feature_names)
    if cell.n_features != model.n_features:
        raise DataError(f"{path}: {cell.n_features} features; the model scores {model.n_features}")
    X = _within_bounds(np.vstack([cell.X_train, cell.X_test]), schema)
    return np.concatenate([cell.train_ids, cell.test_ids]), X


def _within_bounds(X: np.ndarray, schema: Schema) -> np.ndarray:
    """X (m, d) clipped to the schema's declared bounds, as an entity clips its records; unchanged without them."""
    bounds = schema.declared_bounds()
    return X if bounds is None else np.clip(X, *bounds)


def check_public_schema(public: PublicRecords, metadata: Mapping[str, pb.BlockMetadata]) -> None:
    """Refuse public records the entities would not read alike: another width, or another schema by the keyed
    check the entities publish (the random-kernel path compares the same checks between entities).

    Raises
    ------
    DataError
        Another feature count, or another keyed check, naming the entities.
    ConfigError
        No entity vouched for the records (a plain CSV).
    """
    width = public.X.shape[1]
    wrong = {e: m.n_features for e, m in metadata.items() if m.n_features != width}
    if wrong:
        raise DataError(f"{public.where}: the public records have {width} features; entities {wrong} hold other counts")
    if public.check is None:
        raise ConfigError(
            f"{public.where} is a CSV that no entity vouched for: the methods that ask the entities read the public "
            f"records through the entities' own schema, checked by its keyed fingerprint before anything is spent; "
            f"{PUBLIC_SOURCE_LAYOUT}"
        )
    differ = sorted(e for e, m in metadata.items() if m.features_check != public.check["features"])
    if differ:
        raise DataError(
            f"{public.where}: its [schema], vouched for by entity {public.check['entity']}, is not the schema of "
            f"entities {', '.join(differ)} (keyed checks differ): feature names, order, categories, imputations or "
            "bounds differ. Nothing was requested or spent; write the public source again from one of their configs"
        )


def train_dp(federation: Federation | None, options: DpOptions) -> DpModel:
    """Train a DP (or public-only) RBF model; ``federation`` may be None for public-only.

    Before any entity is asked for weights: the public records' schema against the entities' keyed checks
    (:func:`check_public_schema`), the preflight (:func:`check_preflight`) and, unless ``options.allow_noisy``,
    whether the release is worth its epsilon (:func:`check_worth`).
    """
    started = time.perf_counter()
    public = load_public(options.public)
    prepared = public_preprocessing(public.X)
    low_public, high_public = tuple(prepared.low.tolist()), tuple(prepared.high.tolist())
    schema = {"features": public.schema.as_dict()["features"]}
    if options.method == "public-only":
        public_C = PAPER_C if options.C is None else options.C
        scaled, width = prepared.scaled, prepared.width
        svm = train_kernel_svm(gaussian_kernel(scaled, scaled, width), public.y, public_C)
        return DpModel(
            method="public-only",
            mechanism="public",
            epsilon=None,
            private=True,
            basis=tuple(map(tuple, scaled.tolist())),
            dual_coef=tuple(svm.dual_coef.tolist()),
            training={
                "n_public": len(public.y),
                "seconds": time.perf_counter() - started,
                "calibration": {
                    "method": "none",
                    "reason": "fitted on the public records: none left out to calibrate on",
                },
            },
            low=low_public,
            high=high_public,
            kernel_width=width,
            C=public_C,
            schema=schema,
            labels=public.labels,
        )
    if federation is None:
        raise ConfigError(f"{options.method} needs a federation of entities")
    if len(federation.column_blocks) != 1:
        raise ConfigError(
            f"{options.method} trains on row blocks that hold every feature (s = 1); "
            f"{federation.source} has {len(federation.column_blocks)} column blocks"
        )
    with Session(federation, options.deadline) as session:
        metadata = session.load_metadata()
        check_public_schema(public, metadata)
        # A public source of text labels must name them as the entities do; one of -1/+1 labels takes their names.
        declared = declared_labels(session)
        if declared is not None and len(declared) > 2:
            raise ConfigError(
                f"{options.method} fits two classes; the entities' label_names name {len(declared)}: train a "
                "random-kernel model (ppsvm coordinator train), which fits one per class, or split the data again "
                "with --positive CLASS for that class against the rest"
            )
        labels = None if declared is None else (declared[0], declared[1])
        if public.labels is not None and labels != public.labels:
            raise ConfigError(
                f"{public.where} declares labels {public.labels} (negative, positive), the entities "
                f"{labels or '-1/+1'}: write the public source again from an entity config"
            )
        check_preflight(preflight(metadata, options), options)
        private = options.mechanism != NON_PRIVATE
        plan = plan_release(options, public.y, prepared, metadata, estimate=private and not options.allow_noisy)
        check_worth(plan, options, len(public.y))
        request = pb.DpRequest(
            method=options.method,
            mechanism=options.mechanism,
            epsilon=options.epsilon or 0.0,
            c=plan.C,
            n_frequencies=options.n_frequencies,
            rho=plan.rho.ravel().tolist(),
            low=prepared.low.tolist(),
            high=prepared.high.tolist(),
            huber_h=options.huber_h,
        )
        replies = session.each(lambda c: c.dp_weights(request))
        releases = [replies[e.id] for e in federation.entities]
        counts = np.array([r.n_train for r in releases], dtype=float)
        weights = np.average(np.array([list(r.weights) for r in releases]), axis=0, weights=counts)
        model = DpModel(
            method=options.method,
            mechanism=options.mechanism,
            epsilon=options.epsilon if private else None,
            private=private,
            rho=tuple(map(tuple, plan.rho.tolist())),
            weights=tuple(weights.tolist()),
            entities=tuple(DpEntity(r.entity_id, int(r.n_train), r.noise) for r in releases),
            training={
                "n_public": len(public.y),
                "n_train": int(counts.sum()),
                **plan.record(),
                "budget_remaining": {r.entity_id: r.budget_remaining for r in releases} if private else {},
            },
            low=low_public,
            high=high_public,
            kernel_width=prepared.width * plan.width_factor,
            C=plan.C,
            schema=schema,
        )
        if options.threshold_epsilon is not None:
            model = with_threshold(session, model, public.X, options.threshold_epsilon)
        model = calibrated(dataclasses.replace(model, labels=labels), public.X, public.y)
    return dataclasses.replace(model, training={**model.training, "seconds": time.perf_counter() - started})


def calibrated(model: DpModel, X_public: np.ndarray, y_public: np.ndarray) -> DpModel:
    """The model with Platt scaling fitted on the public records' decision values (:mod:`ppsvm.core.calibration`).

    The weights come from the entities' records, so the public records are out of sample for them (the public
    records only chose rho and C); the noise the mechanism added shows in these values, so the probabilities
    carry it. Public records of one class give no calibration, said in ``training["calibration"]``.

    Parameters
    ----------
    X_public : ndarray, shape (k, d)
    y_public : ndarray, shape (k,), values in {-1, +1}
    """
    decisions = model.decision(X_public)
    try:
        platt = fit_platt(decisions, y_public)
    except ValueError as error:
        reason = {"method": "none", "reason": str(error)}
        return dataclasses.replace(model, training={**model.training, "calibration": reason})
    report = {
        **calibration_record(platt, decisions, y_public, float(np.mean(y_public > 0))),
        "source": "public records",
    }
    return dataclasses.replace(model, calibration=platt, training={**model.training, "calibration": report})


# Refused unless forced: a release whose expected noise norm exceeds the bound sqrt(2C) on the weights.
NOISE_DOMINATES = 1.0


def preflight(metadata: Mapping[str, pb.BlockMetadata], options: DpOptions) -> dict[str, Any]:
    """What a DP training run will meet, from public facts only, before anything is computed or spent.

    Per entity: its mode (an entity serving the random-kernel protocol refuses weights), its budget left against
    what the run charges (epsilon + threshold epsilon), and the expected norm of its release's noise against
    the bound sqrt(2C) on the SVM's weights (:func:`ppsvm.core.dp.expected_noise_norm`), at the given C, or for
    C chosen by the noise rule at the smallest of the grid, where the ratio is lowest (the rule takes it when no
    C keeps the noise below half the bound).

    Parameters
    ----------
    metadata : mapping
        Entity id -> its BlockMetadata (records, mode, budget).
    options : DpOptions

    Returns
    -------
    dict
        "charge" (epsilon per entity), "C", and "entities": id -> n_train, mode, epsilon_left, noise_norm,
        weight_bound, noise_to_bound.
    """
    private = options.mechanism != NON_PRIVATE and options.epsilon is not None
    charge = (options.epsilon or 0.0) + (options.threshold_epsilon or 0.0) if private else 0.0
    C = options.C if options.C is not None else min(C_GRID)
    entities = {}
    for entity_id, m in sorted(metadata.items()):
        noise = expected_noise_norm(
            options.mechanism, C=C, n=int(m.n_train), n_frequencies=options.n_frequencies, epsilon=options.epsilon
        )
        entities[entity_id] = {
            "n_train": int(m.n_train),
            "mode": m.mode,
            "epsilon_left": max(m.epsilon_total - m.epsilon_spent, 0.0),
            "noise_norm": noise,
            "weight_bound": weight_bound(C),
            "noise_to_bound": noise / weight_bound(C),
        }
    return {"charge": charge, "C": C, "entities": entities}


def check_preflight(report: dict[str, Any], options: DpOptions) -> None:
    """Refuse, naming the entities, a run that an entity would refuse or whose noise is expected to dominate.

    Raises
    ------
    ConfigError
        An entity serves the random-kernel protocol only.
    PrivacyError
        An entity's budget left is below the charge.
    ConfigError
        The expected noise exceeds the weight bound at an entity (unless ``options.allow_noisy``).
    """
    entities = report["entities"]
    kernel_only = [e for e, facts in entities.items() if facts["mode"] == "random-kernel"]
    if kernel_only:
        raise ConfigError(
            f"entities {', '.join(kernel_only)} serve the random-kernel protocol and refuse DP weights; their owners "
            'would have to set [privacy] mode = "dp" (or "mixed")'
        )
    # The entities count in micro-epsilons; a hair's difference is theirs to judge.
    short = {e: f["epsilon_left"] for e, f in entities.items() if f["epsilon_left"] < report["charge"] - 1e-6}
    if report["charge"] and short:
        listed = ", ".join(f"{e} ({left:g} left)" for e, left in short.items())
        raise PrivacyError(
            f"this run charges epsilon {report['charge']:g} per entity (--epsilon plus --threshold-epsilon) and "
            f"entities {listed} have less: nothing was requested"
        )
    noisy = {e: f for e, f in entities.items() if f["noise_to_bound"] > NOISE_DOMINATES}
    if noisy and not options.allow_noisy:
        listed = ", ".join(
            f"{e} ({f['n_train']} records: noise {f['noise_norm']:.3g} vs weights <= {f['weight_bound']:.3g})"
            for e, f in noisy.items()
        )
        raise ConfigError(
            f"the {options.mechanism} release at epsilon {options.epsilon:g} and C = {report['C']:g} would be "
            f"mostly noise at {listed}: the model would classify little better than chance. Nothing was requested "
            "or spent. Raise --epsilon, lower --frequencies, give the entities more records, try "
            "--mechanism output-gamma, or pass --allow-noisy to release anyway"
        )


def dry_run(federation: Federation, options: DpOptions) -> dict[str, Any]:
    """What a DP training run would meet, with its verdict; spends nothing and reads no entity's records.

    :func:`preflight`'s report for ``options`` on the federation, the public records' schema check and, when those
    pass, the release's plan and the worth estimate (:func:`plan_release`: rho, C and the width as training would
    choose them, from the public records). Only the public records and the entities' metadata are read.

    Returns
    -------
    dict
        The preflight report, "plan" (C, the width factor and the estimate; absent when refused before it), and
        "verdict": "would train" or the refusal's message.
    """
    public = load_public(options.public)
    with Session(federation, options.deadline) as session:
        metadata = session.load_metadata()
    report = preflight(metadata, options)
    try:
        check_public_schema(public, metadata)
        check_preflight(report, options)
        plan = plan_release(options, public.y, public_preprocessing(public.X), metadata, estimate=True)
        report["plan"] = plan.record()
        check_worth(plan, options, len(public.y))
    except (ConfigError, DataError, PrivacyError) as refusal:
        return {**report, "verdict": str(refusal)}
    return {**report, "verdict": "would train"}


@dataclass(frozen=True)
class ReleasePlan:
    """What the coordinator sends and how it chose it, from the public records and public facts.

    Attributes
    ----------
    C, width_factor : float
        As :class:`ppsvm.core.dp_selection.Selection` has them.
    rho : ndarray, shape (D, d)
        Learned once (dp-hybrid) or drawn (private-svm) at the chosen width.
    selection : dict
        How C and the width were chosen; empty when both were given.
    frequencies : dict
        How learning rho went (dp-hybrid); empty for private-svm.
    worth : WorthEstimate or None
        The release's expected accuracy (:func:`ppsvm.core.dp_selection.estimate_worth`); None when not estimated.
    """

    C: float
    width_factor: float
    rho: np.ndarray = dataclasses.field(repr=False)
    selection: dict[str, Any]
    frequencies: dict[str, Any]
    worth: WorthEstimate | None

    def record(self) -> dict[str, Any]:
        """What the model's ``training`` and the dry run's report keep of the plan."""
        return {
            "C": self.C,
            "width_factor": self.width_factor,
            **self.frequencies,
            **({"selection": self.selection} if self.selection else {}),
            **({"worth": self.worth.as_dict()} if self.worth is not None else {}),
        }


def plan_release(
    options: DpOptions,
    y_public: np.ndarray,
    public: PublicPreprocessing,
    metadata: Mapping[str, pb.BlockMetadata],
    *,
    estimate: bool,
) -> ReleasePlan:
    """C, the width factor and rho, as given or chosen from public facts (:mod:`ppsvm.core.dp_selection`), and the
    worth estimate when ``estimate``.

    C is the largest the expected noise allows (:func:`default_C`); the width is cross-validated on the public
    records with the release's noise simulated at the smallest entity's record count, each candidate width scored
    with frequencies drawn at random (the width is the kernel's, whichever frequencies approximate it). rho is then
    learned once, at the chosen width (dp-hybrid), or is the chosen width's draw (private-svm).

    Parameters
    ----------
    options : DpOptions
    y_public : ndarray, shape (k,)
    public : PublicPreprocessing
        The public records' scaling, scaled records (k, d) and median-heuristic width.
    metadata : mapping
        Entity id -> its BlockMetadata (record counts).
    estimate : bool
        Estimate the release's worth (needs 2 public records of each class).

    Returns
    -------
    ReleasePlan
    """
    scaled, width = public.scaled, public.width
    counts = [int(m.n_train) for m in metadata.values()]
    smallest = min(counts)

    def drawn(factor: float) -> np.ndarray:
        """Frequencies drawn for the median heuristic's width times ``factor``, from a generator seeded afresh."""
        return random_frequencies(
            scaled.shape[1], options.n_frequencies, width * factor, np.random.default_rng(options.seed)
        )

    def noise_norm(C: float) -> float:
        return expected_noise_norm(
            options.mechanism, C=C, n=smallest, n_frequencies=options.n_frequencies, epsilon=options.epsilon
        )

    selection: dict[str, Any] = {}
    C, factor = options.C, options.width_factor
    if C is None or factor is None:
        # C from public facts (the largest the expected noise allows): cross-validating it on a few dozen public
        # records chose worse than this rule on Adult (dp_selection's notes); the width is cross-validated.
        chosen_C = default_C(C_GRID, noise_norm) if C is None else C
        choice = select_c_and_width(
            scaled,
            y_public,
            drawn,
            simulated_release(options.mechanism, smallest, options.n_frequencies, options.epsilon),
            np.random.default_rng([options.seed, SELECTION_STREAM]),
            C_grid=(chosen_C,),
            width_factors=WIDTH_FACTORS if factor is None else (factor,),
            default=(chosen_C, DEFAULT_FACTOR),
        )
        C, factor = choice.C, choice.width_factor
        logger.info("chose C = %g and %g x the median-heuristic width on the public records", C, factor)
        selection = {
            "C_rule": "given"
            if options.C is not None
            else f"largest expected noise norm <= {NOISE_TO_BOUND:g} sqrt(2C)",
            "mean_auc": choice.scores,
            "simulated_n": smallest,
        }
    frequencies: dict[str, Any] = {}
    if options.method == "dp-hybrid":
        fit = learn_frequencies(
            scaled, width * factor, options.n_frequencies, np.random.default_rng(options.seed), tol=RHO_TOLERANCE
        )
        rho = fit.rho
        frequencies = {
            "objective_start": fit.objective_start,
            "objective_end": fit.objective_end,
            "rho_iterations": fit.iterations,
            "rho_pairs": fit.n_pairs,
            "rho_seconds": fit.seconds,
            "rho_stop": fit.message,
        }
    else:
        rho = drawn(factor)
    worth = None
    if estimate:
        if min((y_public > 0).sum(), (y_public < 0).sum()) < 2:
            raise DataError(
                "estimating what the release is worth needs at least 2 public records of each class; add public "
                "records, or pass --allow-noisy to release without the estimate"
            )
        worth = estimate_worth(
            scaled,
            y_public,
            rho,
            C=C,
            public_width=width,
            counts=counts,
            mechanism=options.mechanism,
            epsilon=options.epsilon,
            threshold_epsilon=options.threshold_epsilon,
            rng=np.random.default_rng([options.seed, WORTH_STREAM]),
        )
    return ReleasePlan(C, factor, rho, selection, frequencies, worth)


# The command's flags in DP refusals, as the API's keywords say them (Federation.train_dp, DpHybridClassifier).
_API_WORDS = (
    ("--allow-noisy", "allow_noisy=True"),
    ("--method public-only", "method='public-only'"),
    ("--mechanism output-gamma", "mechanism='output-gamma'"),
    ("--threshold-epsilon", "threshold_epsilon"),
    ("--width-factor", "width_factor"),
    ("--frequencies", "n_frequencies"),
    ("--epsilon", "epsilon"),
    ("--C", "C"),
)


def in_api_words(message: str) -> str:
    """A DP refusal's advice with the API's keyword arguments in place of the command's flags."""
    for flag, keyword in _API_WORDS:
        message = message.replace(flag, keyword)
    return message


def check_worth(plan: ReleasePlan, options: DpOptions, n_public: int) -> None:
    """Refuse a release not expected to beat public-only or the majority class, with the figures.

    Raises
    ------
    ConfigError
        Unless ``options.allow_noisy``: the estimate's ceiling falls short of the better of the two by more than the
        sampling error (:attr:`WorthEstimate.worth`).
    """
    worth = plan.worth
    if worth is None or worth.worth or options.allow_noisy:
        return
    rival, accuracy = worth.rival
    raise ConfigError(
        f"the {options.method} model is not expected to beat {rival} (accuracy {accuracy:.3f}): the "
        f"{options.mechanism} release at epsilon {options.epsilon:g} and C = {plan.C:g}, simulated on the {n_public} "
        f"public records, scores {worth.dp_accuracy:.3f} (+-{worth.dp_spread:.3f} from one release to another; "
        f"{worth.dp_ceiling:.3f} were the entities' model as good on new records as on its own) against "
        f"{worth.public_only_accuracy:.3f} for public-only and {worth.majority_accuracy:.3f} for the majority "
        f"class, each within about {worth.sampling_error:.3f}. Nothing was requested "
        "or spent. Train --method public-only, raise --epsilon, give the "
        "entities more records, try --mechanism output-gamma, or pass --allow-noisy to release anyway"
    )


def with_threshold(session: Session, model: DpModel, X_public: np.ndarray, epsilon: float) -> DpModel:
    """The model with the threshold the entities' noised score histograms choose (:mod:`ppsvm.core.threshold`).

    Parameters
    ----------
    session : Session
        Open on the entities that released the weights.
    model : DpModel
        Threshold 0.
    X_public : ndarray, shape (k, d)
        The public records, whose scores place the bin edges.
    epsilon : float
        Each entity's histogram release.

    Returns
    -------
    DpModel
        With ``threshold`` set and what chose it under ``training["threshold"]``.
    """
    smallest = min(e.n_train for e in model.entities)
    count = threshold_edge_count(smallest, epsilon)
    edges = threshold_edges(model.decision(X_public), float(np.linalg.norm(model.weights)), count)
    text, bounds = model.to_json(), edges.tolist()
    replies = session.each(lambda c: c.dp_score_histogram(text, bounds, epsilon))
    negative = np.sum([np.asarray(r.negative_counts, dtype=np.int64) for r in replies.values()], axis=0)
    positive = np.sum([np.asarray(r.positive_counts, dtype=np.int64) for r in replies.values()], axis=0)
    # Each summed count carries the noise of every entity's.
    noise = count_noise_std(epsilon) * math.sqrt(len(replies))
    choice = choose_threshold(edges, negative, positive, noise, zero_margin_stds(smallest, epsilon))
    logger.info(
        "threshold %.6g chosen from the entities' score histograms (epsilon %g each): %d of about %d noised "
        "training records misclassified",
        choice.threshold,
        epsilon,
        choice.errors,
        choice.records,
    )
    training = {
        **model.training,
        "threshold": {
            "rule": "fewest training errors by the entities' per-class score histograms (discrete Laplace)",
            "epsilon": epsilon,
            "bins": len(edges) + 1,
            "noised_training_errors": choice.errors,
            "noised_training_records": choice.records,
        },
        "budget_remaining": {r.entity_id: r.budget_remaining for r in replies.values()},
    }
    return dataclasses.replace(model, threshold=choice.threshold, training=training)


def train_dp_and_save(federation: Federation | None, options: DpOptions, model_out: Path) -> DpModel:
    """Train, write the model atomically, then send it to every entity."""
    model = train_dp(federation, options)
    model.save(model_out)
    logger.info("model written to %s", model_out)
    if options.distribute and federation is not None:
        distribute(federation, model.to_json(), model_out, options.deadline)
    return model
