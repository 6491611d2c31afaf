"""Evaluation on the entities' held-out records, and the entity-alone comparison."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ppsvm.config import Federation
from ppsvm.constants import DEFAULT_DEADLINE_S
from ppsvm.coordinator.client import EntityClient
from ppsvm.coordinator.federation import RowBlockRecords, Session
from ppsvm.core.calibration import probability_figures
from ppsvm.core.dp_model import DpModel
from ppsvm.core.metrics import classification_report, trivial_baseline
from ppsvm.core.metrics import evaluate as figures_for
from ppsvm.core.multiclass import MulticlassModel, RandomKernelModel, multiclass_figures
from ppsvm.core.tuning import Search
from ppsvm.errors import ConfigError, DataError
from ppsvm.progress import EtaLog, WaitLog, clock
from ppsvm.wire.proto_names import KERNEL_KINDS
from ppsvm.wire.rpc import ppsvm_pb2 as pb

logger = logging.getLogger(__name__)


def check_model_matches(model: RandomKernelModel, federation: Federation) -> None:
    """The model was trained on this federation's grid (same entity ids in the same cells)."""
    trained = {(e.id, e.row_block, e.column_block) for e in model.entities}
    current = {(e.id, e.row_block, e.column_block) for e in federation.entities}
    if trained != current:
        differ = sorted(trained ^ current)[:4]
        raise ConfigError(f"the model was trained on a different federation than {federation.source}: {differ}")


def check_model_federation(model: RandomKernelModel, session: Session) -> None:
    """The entities are the ones the model was trained on: same secrets, schemas and record-id key.

    Call after :meth:`Session.survey` (or ``load_metadata``). A model file without a fingerprint
    (written before models carried one) is not checked.
    """
    if model.federation and model.federation != session.fingerprint():
        raise ConfigError(
            f"the model was trained on another federation than the entities of {session.federation.source} "
            f"(fingerprint {model.federation[:16]}... against {session.fingerprint()[:16]}...): an entity's "
            "column secret, feature schema or record-id key, or the grid, has changed since; train again"
        )


def assembled_decisions(
    federation: Federation,
    model: RandomKernelModel,
    parts: tuple[str, ...] = ("test",),
    deadline: float = DEFAULT_DEADLINE_S,
) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Decision values of the training and/or held-out records, from kernel rows the entities assemble.

    Returns
    -------
    dict
        Each of ``parts`` ("train", "test") to (ids (k,), targets (k,), decision values (k,), or (k, classes) for a
        multiclass model), in row-block order.
    """
    check_model_matches(model, federation)
    found: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    with Session(federation, deadline) as session:
        blocks, _ = session.survey()  # the signed ranges it fetches are checked against the model's scaling
        check_model_federation(model, session)
        for part in parts:
            if part == "test" and not any(len(b.test_ids) for b in blocks):
                raise DataError("the entities hold no held-out records to evaluate on (split with --test-fraction > 0)")
            K = session.kernel(model.kernel, model.mbar, model.mu, model.scaling, blocks, part, model.column_index)
            found[part] = (
                np.concatenate([getattr(b, f"{part}_ids") for b in blocks]),
                np.concatenate([getattr(b, f"{part}_labels") for b in blocks]),
                model.decision(K),
            )
    return found


def record_row_blocks(blocks: Sequence[RowBlockRecords]) -> dict[str, int]:
    """Which row block holds each record (training, held-out or to score), from the ids the entities publish.

    A record to score that two row blocks both list is left out: which entities' features it has is unknown.
    """
    where = {
        record: block.row_block for block in blocks for record in [*block.train_ids.tolist(), *block.test_ids.tolist()]
    }
    claimed: dict[str, int] = {}
    for block in blocks:
        for record in block.score_ids.tolist():
            claimed[record] = -1 if record in claimed else block.row_block
    for record, row_block in claimed.items():
        if row_block >= 0 and record not in where:
            where[record] = row_block
    return where


def score_records(
    federation: Federation,
    model: RandomKernelModel,
    ids: Sequence[str],
    *,
    batch: int = 1000,
    deadline: float = DEFAULT_DEADLINE_S,
) -> tuple[dict[str, float], list[str]]:
    """Decision values of records named by id (or pseudonym), in batches with progress; and the ids no row block
    holds (training, held-out or new records to score), which are listed rather than failing the rest.

    Returns
    -------
    decisions : dict
        Each held id to its decision value (a list of one per class for a multiclass model).
    not_found : list of str
        The others, in the order given.
    """
    check_model_matches(model, federation)
    with Session(federation, deadline) as session:
        blocks, _ = session.survey()
        check_model_federation(model, session)
        where = record_row_blocks(blocks)
        found = list(dict.fromkeys(record for record in ids if record in where))
        progress = EtaLog(logger, "scoring (records)")
        decisions: dict[str, Any] = {}
        for start in range(0, len(found), batch):
            decisions.update(decisions_for_ids(session, model, where, found[start : start + batch]))
            progress(min(start + batch, len(found)), len(found))
        missing = [record for record in ids if record not in where]
        if missing:
            # Asked again: the Records calls above re-read the scoring sources after the survey's Metadata.
            unreadable = [name for name, meta in session.load_metadata().items() if meta.scoring_source == "unreadable"]
            if unreadable:
                logger.warning(
                    "%d record(s) not found, and the scoring source of entity %s could not be read at its last "
                    "read (its log says why): new records there are not seen until it can be read again",
                    len(missing), ", ".join(sorted(unreadable)),
                )  # fmt: skip
    return decisions, missing


def decisions_for_ids(
    session: Session,
    model: RandomKernelModel,
    row_block_of: Mapping[str, int],
    ids: Sequence[str],
) -> dict[str, Any]:
    """Decision values of records named by id, from kernel rows their row block's entities compute.

    ``ids`` must all be keys of ``row_block_of``: the callers set aside those no row block holds.

    Returns
    -------
    dict
        Each of ``ids`` to its decision value (a list of one per class for a multiclass model).
    """
    by_block: dict[int, list[str]] = {}
    for record in ids:
        by_block.setdefault(row_block_of[record], []).append(record)
    rows = session.kernel_rows_for_ids(model.kernel, model.mbar, model.mu, model.scaling, by_block, model.column_index)
    decision: dict[str, Any] = {}
    for row_block, members in by_block.items():
        decision.update(zip(members, model.decision(rows[row_block]).tolist(), strict=True))
    return decision


def evaluate_model(
    federation: Federation,
    model: RandomKernelModel | DpModel,
    deadline: float = DEFAULT_DEADLINE_S,
    *,
    epsilon: float | None = None,
) -> dict[str, Any]:
    """Decision values of the held-out records, assembled from the entities, and their figures.

    A DP model is scored inside each entity from a noised error count that spends ``epsilon``
    of each entity's budget (see :func:`evaluate_dp_model`).

    Returns
    -------
    dict
        error_rate and auc (classify) or relative_error and rmse (regress), n_test, private, and (random-kernel
        models, whose held-out labels the coordinator holds) the trivial baseline's figures
        (:func:`ppsvm.core.metrics.trivial_baseline`) and, classifying, the confusion matrix, sensitivity,
        specificity, balanced accuracy and calibration by score decile
        (:func:`ppsvm.core.metrics.classification_report`); for calibrated models the held-out Brier score against
        the class-frequency baseline and the reliability table (:func:`ppsvm.core.calibration.probability_figures`).
    """
    if isinstance(model, DpModel):
        if epsilon is None:
            raise ConfigError(
                "evaluating a DP model spends privacy budget at every entity (a noised error count): pass --epsilon"
            )
        return evaluate_dp_model(federation, model, epsilon, deadline)
    if epsilon is not None:
        raise ConfigError("--epsilon applies to DP models only; random-kernel models are scored from kernel rows")
    ids, targets, decision = assembled_decisions(federation, model, ("test",), deadline)["test"]
    if isinstance(model, MulticlassModel):
        return {**multiclass_figures(model, targets, decision), "n_test": len(ids), "private": model.private}
    return {
        **figures_for(model.task, targets, decision),
        "n_test": len(ids),
        "private": model.private,
        "trivial_baseline": trivial_baseline(model.task, targets),
        **(classification_report(targets, decision) if model.task == "classify" else {}),
        **(
            probability_figures(targets, model.probability(decision), model.training["calibration"]["positive_share"])
            if model.task == "classify" and model.calibration
            else {}
        ),
    }


def evaluate_dp_model(
    federation: Federation, model: DpModel, epsilon: float, deadline: float = DEFAULT_DEADLINE_S
) -> dict[str, Any]:
    """Each entity releases its held-out error count with discrete Laplace noise, spending ``epsilon``.

    The error rate is the held-out-count-weighted mean of the noised rates. No AUC: ranking
    the held-out records would need every record's decision value, which is not DP.
    """
    text = model.to_json()
    with Session(federation, deadline) as session:
        replies = session.each(lambda c: c.dp_evaluate(text, epsilon))
    counts = np.array([replies[e.id].n_test for e in federation.entities], dtype=float)
    return {
        "error_rate": float(np.average([replies[e.id].error_rate for e in federation.entities], weights=counts)),
        "error_noise": replies[federation.entities[0].id].noise,
        "evaluation_epsilon": epsilon,
        "n_test": int(counts.sum()),
        "private": model.private,
        "method": model.method,
        "epsilon": model.epsilon,
    }


@dataclass(frozen=True)
class BaselineFigures:
    """One entity's entity-alone result (computed inside the entity)."""

    entity_id: str
    n_train: int
    n_test: int
    figures: dict[str, float]


def entity_alone(
    federation: Federation,
    task: str,
    kernel: str,
    *,
    nu: float | None,
    mu: float | None,
    seed: int,
    deadline: float = DEFAULT_DEADLINE_S,
    search: Search = "grid",
    leave_one_out: bool = False,
    entities: Sequence[str] | None = None,
) -> list[BaselineFigures]:
    """Ask every entity (or those named in ``entities``) to train on its own cell and report its held-out error.

    Only figures leave an entity. nu and mu of None are tuned inside each entity by ``search``, with 5-fold
    cross-validation or ``leave_one_out`` (the papers' choice for cells of about 25 records). The entities
    compute concurrently and cannot report mid-call, so the log says which are done as they finish and,
    every 30 s, which are still computing.
    """
    request = pb.BaselineRequest(
        task=task,
        kernel=KERNEL_KINDS[kernel],
        nu=nu or 0.0,
        mu=mu or 0.0,
        seed=seed,
        search=search,
        leave_one_out=leave_one_out,
    )
    chosen = list(federation.entities)
    if entities is not None:
        unknown = sorted(set(entities) - {e.id for e in chosen})
        if unknown or not entities:
            raise ConfigError(f"no such entities in the federation: {', '.join(unknown) or 'none named'}")
        chosen = [e for e in chosen if e.id in set(entities)]
    pending = {e.id for e in chosen}
    lock = threading.Lock()
    started = time.monotonic()

    def baseline(client: EntityClient) -> pb.BaselineReply:
        reply = client.local_baseline(request)
        with lock:
            pending.discard(client.entity.id)
            done = len(chosen) - len(pending)
        logger.info(
            "baselines: entity %s done after %s (%d/%d)",
            client.entity.id, clock(time.monotonic() - started), done, len(chosen),
        )  # fmt: skip
        return reply

    def waiting() -> str:
        with lock:
            return f"baselines: waiting for {', '.join(sorted(pending))}"

    with Session(federation, deadline) as session, WaitLog(logger, waiting):
        replies = session.each(baseline, chosen)
    keys = ("error_rate", "auc") if task == "classify" else ("relative_error", "rmse")
    return [
        BaselineFigures(r.entity_id, r.n_train, r.n_test, {key: getattr(r, key) for key in keys})
        for r in (replies[e.id] for e in chosen)
    ]


def mean_figures(results: list[BaselineFigures]) -> dict[str, float]:
    """Held-out-count-weighted mean of the entities' figures."""
    weights = np.array([r.n_test for r in results], dtype=float)
    keys = results[0].figures.keys()
    return {key: float(np.average([r.figures[key] for r in results], weights=weights)) for key in keys}
