"""``ppsvm coordinator serve``: answer prediction requests by record id: for a random-kernel model, records the
entities hold; for a DP model, records in a file the service reads."""

from __future__ import annotations

import abc
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import grpc
import numpy as np
from prometheus_client import CollectorRegistry, Counter, Gauge

from ppsvm.config import Federation
from ppsvm.constants import DEFAULT_DEADLINE_S
from ppsvm.coordinator.dp_train import records_to_score
from ppsvm.coordinator.evaluate import (
    check_model_federation,
    check_model_matches,
    decisions_for_ids,
    record_row_blocks,
)
from ppsvm.coordinator.federation import RowBlockRecords, Session
from ppsvm.core.dp_model import DpModel
from ppsvm.core.multiclass import RandomKernelModel, prediction_outputs
from ppsvm.errors import ConfigError, EntityError
from ppsvm.wire.certs import CLIENT, ROLES
from ppsvm.wire.grpc_util import unary_handler
from ppsvm.wire.health import PREDICTION_SERVICE
from ppsvm.wire.metrics import RpcMetrics, serve_metrics
from ppsvm.wire.rpc import ppsvm_pb2 as pb
from ppsvm.wire.rpc import ppsvm_pb2_grpc as pb_grpc
from ppsvm.wire.server import create_server, method_roles, serve_until, stop_on_signals
from ppsvm.wire.tls import TlsFiles, choose_tls

logger = logging.getLogger(__name__)

# Predict answers about any record the entities hold, so only a prediction client's certificate
# may ask: an entity's may not, since a decision value is a function of other entities' private features.
# Status tells the model's public settings and a request count: any party of the federation.
PREDICTION_ROLES = method_roles(PREDICTION_SERVICE, {"Predict": (CLIENT,), "Status": ROLES})


# Unknown ids make the service list the entities' records again at most this often (new records to score).
RELIST_EVERY_S = 1.0
# The records one batch may join (a request larger than this goes alone).
MAX_BATCH_RECORDS = 4096


class Batches:
    """Joins the records of concurrent Predict requests into one kernel-row call per entity.

    One batch is on the wire at a time and the next leaves as soon as it is answered: a lone request waits for
    nothing, and the requests that arrive meanwhile share the next call. Each entity then answers, logs and fsyncs
    one release for many requests (issue 14: 16 entity calls per request made the service CPU-bound at 30
    requests/s). A batch an entity refuses is asked again request by request: an entity refuses a whole call
    for one record it no longer holds, and that must fail only the request that named it. Two batches in
    flight were measured slower at 32 entities on 2 cores (62 against 72 requests/s
    at batch 1, 40 against 58 at batch 64): smaller batches, more calls for the same answers.
    """

    def __init__(
        self, score: Callable[[dict[str, int]], dict[str, float]], max_records: int = MAX_BATCH_RECORDS
    ) -> None:
        self._score = score
        self._max_records = max_records
        self._pending: list[tuple[dict[str, int], Future[dict[str, float]]]] = []
        self._ready = threading.Condition()
        self._closed = False
        self._sender = threading.Thread(target=self._send, name="predict-batches", daemon=True)
        self._sender.start()

    def decisions(self, row_block_of: dict[str, int]) -> dict[str, float]:
        """The decision value of each record id, given with the row block that holds it, scored in the next batch."""
        future: Future[dict[str, float]] = Future()
        with self._ready:
            if self._closed:
                raise RuntimeError("the prediction service is stopping")
            self._pending.append((row_block_of, future))
            self._ready.notify()
        return future.result()

    def close(self) -> None:
        """Let the pending requests be answered, then stop the sender; later requests are refused."""
        with self._ready:
            self._closed = True
            self._ready.notify_all()
        self._sender.join()

    def _next(self) -> list[tuple[dict[str, int], Future[dict[str, float]]]] | None:
        with self._ready:
            while not self._pending and not self._closed:
                self._ready.wait()
            if not self._pending:
                return None
            taken, records = 1, len(self._pending[0][0])  # the first request goes whatever its size
            while taken < len(self._pending) and records + len(self._pending[taken][0]) <= self._max_records:
                records += len(self._pending[taken][0])
                taken += 1
            batch, self._pending = self._pending[:taken], self._pending[taken:]
            return batch

    def _send(self) -> None:
        while (batch := self._next()) is not None:
            # A record two requests name is asked for once: an entity refuses a repeated id.
            union = {record: row_block for where, _ in batch for record, row_block in where.items()}
            try:
                by_id = self._score(union)
            except BaseException as error:  # noqa: BLE001 - answered to the requests, never raised here
                if len(batch) == 1 or not (isinstance(error, EntityError) and error.refused):
                    for _, future in batch:  # an unreachable entity fails them all alike: no point asking again
                        future.set_exception(error)
                    continue
                # Each request alone: one whose record an entity no longer holds must not fail the others.
                for where, future in batch:
                    try:
                        future.set_result(self._score(where))
                    except BaseException as alone:  # noqa: BLE001 - this request's own failure
                        future.set_exception(alone)
            else:
                for _, future in batch:
                    future.set_result(by_id)


class PredictionServicer(pb_grpc.CoordinatorServicer, abc.ABC):
    """Predict and Status for a model: the counters, the reply and a rate-limited re-read of the records known.

    Subclasses say which records they know (:meth:`known`), read them again (:meth:`refresh`) and score them
    (:meth:`decisions`).
    """

    def __init__(
        self,
        model: RandomKernelModel | DpModel,
        kernel: str,
        mbar: int,
        n_entities: int,
        registry: CollectorRegistry | None,
    ) -> None:
        self.model = model
        self.served = 0
        self.kernel, self.mbar, self.n_entities = kernel, mbar, n_entities
        # Counted per request, never per id: the label says only whether a record was scored.
        self.records = Counter(
            "ppsvm_prediction_records",
            "Records named in Predict requests: scored, or not held by any entity.",
            ["result"],
            registry=registry,
        )
        model_info = Gauge(
            "ppsvm_prediction_model_info", "The model served.", ["task", "kernel", "private"], registry=registry
        )
        model_info.labels(model.task, kernel, str(model.private).lower()).set(1)
        self._lock = threading.Lock()
        self._listed_at = -float("inf")  # the first unknown id is looked for at once

    @abc.abstractmethod
    def known(self) -> Mapping[str, Any]:
        """The records it can score, each to what :meth:`decisions` needs of it."""

    @abc.abstractmethod
    def refresh(self) -> None:
        """Read the records known again."""

    @abc.abstractmethod
    def decisions(self, where: Mapping[str, Any]) -> dict[str, float]:
        """The decision value of each record of ``where`` (records known, as :meth:`known` maps them)."""

    def _relist(self) -> None:
        """Read the records known again (new records to score may have arrived), at most every RELIST_EVERY_S: a
        stream of unknown ids must not turn into a stream of reads."""
        with self._lock:
            if time.monotonic() - self._listed_at < RELIST_EVERY_S:
                return
            self._listed_at = time.monotonic()
        self.refresh()

    @unary_handler
    def Predict(self, request: pb.PredictRequest, context: grpc.ServicerContext) -> pb.PredictReply:
        ids = list(request.ids)
        if any(record not in self.known() for record in ids):
            self._relist()
        known = self.known()
        found = [record for record in ids if record in known]
        by_id = self.decisions({record: known[record] for record in found}) if found else {}
        with self._lock:
            self.served += len(found)
        self.records.labels("scored").inc(len(found))
        self.records.labels("not_found").inc(len(ids) - len(found))
        decision, prediction, names, probability = prediction_outputs(
            self.model, np.array([by_id[record] for record in found])
        )
        if self.model.task != "classify":
            names = [""] * len(found)
        return pb.PredictReply(
            predictions=[
                pb.Prediction(
                    id=record,
                    decision=value,
                    prediction=label,
                    label=name,
                    # Unset (proto3 optional) for a model without a calibration.
                    probability=None if probability is None else float(probability[k]),
                )
                for k, (record, value, label, name) in enumerate(
                    zip(found, decision.tolist(), prediction.tolist(), names, strict=True)
                )
            ],
            not_found=[record for record in ids if record not in known],
        )

    @unary_handler
    def Status(self, request: pb.Empty, context: grpc.ServicerContext) -> pb.StatusReply:
        return pb.StatusReply(
            task=self.model.task,
            kernel=self.kernel,
            mbar=self.mbar,
            n_entities=self.n_entities,
            private=self.model.private,
            requests_served=self.served,
        )


class CoordinatorServicer(PredictionServicer):
    """Predicts by record id: asks the record's row block for K(x_j', B_j') and applies the model."""

    def __init__(
        self,
        session: Session,
        model: RandomKernelModel,
        blocks: Sequence[RowBlockRecords],
        registry: CollectorRegistry | None = None,
    ) -> None:
        super().__init__(model, model.kernel, model.mbar, len(session.federation.entities), registry)
        self.session = session
        self.row_block_of = record_row_blocks(blocks)
        self.batches = Batches(lambda where: decisions_for_ids(session, model, where, list(where)))

    def known(self) -> Mapping[str, Any]:
        return self.row_block_of

    def refresh(self) -> None:
        """Ask the entities for their records again."""
        row_block_of = record_row_blocks(self.session.align_records())
        self.row_block_of = row_block_of  # one assignment: a concurrent request sees the old map or the new

    def decisions(self, where: Mapping[str, Any]) -> dict[str, float]:
        return self.batches.decisions(dict(where))


class DpServicer(PredictionServicer):
    """Predicts by record id with a DP model, from the records' features in a file read here.

    An entity serving the DP protocol releases nothing about a single record, so the records to score come from
    whoever runs the service (a data owner scoring its own records, say): the file is read through the model's
    schema, again when an id it does not hold is asked for, and the model, public since its release, scores them.
    """

    def __init__(self, model: DpModel, records: Path, registry: CollectorRegistry | None = None) -> None:
        super().__init__(model, model.method, 0, len(model.entities), registry)
        self.dp_model = model
        self.path = records
        self.by_id = self._read()

    def _read(self) -> dict[str, float]:
        ids, X = records_to_score(self.dp_model, self.path)
        return dict(zip(ids.tolist(), self.dp_model.decision(X).tolist(), strict=True))

    def known(self) -> Mapping[str, Any]:
        return self.by_id

    def refresh(self) -> None:
        """Read the records file again."""
        self.by_id = self._read()

    def decisions(self, where: Mapping[str, Any]) -> dict[str, float]:
        return dict(where)  # known() maps each record to its decision value already


def serve_coordinator(
    federation: Federation,
    model: RandomKernelModel,
    listen: str,
    deadline: float = DEFAULT_DEADLINE_S,
    metrics_at: tuple[str, int] | None = None,
) -> int:
    """Serve predictions until SIGINT/SIGTERM; prints ``listening on HOST:PORT`` when ready.

    ``metrics_at``: (host, port) of a Prometheus endpoint to serve as well (:mod:`ppsvm.wire.metrics`): the
    calls, and the records scored or not found (``ppsvm_prediction_records_total{result}``).
    """
    check_model_matches(model, federation)
    stop = stop_on_signals()
    with _metrics(metrics_at) as metrics, Session(federation, deadline) as session:
        blocks, _ = session.survey()
        check_model_federation(model, session)
        # Refuse, before serving, a model whose scaling the fetched signed ranges contradict.
        session.ranges_for(model.scaling)
        # Without metrics the counters are registered nowhere (registry None), and nobody reads them.
        servicer = CoordinatorServicer(session, model, blocks, metrics.registry if metrics is not None else None)
        try:
            _serve(stop, servicer, listen, session.tls, metrics)
        finally:
            servicer.batches.close()
    return 0


def serve_dp_model(
    federation: Federation,
    model: DpModel,
    records: Path,
    listen: str,
    metrics_at: tuple[str, int] | None = None,
) -> int:
    """Serve a DP model's predictions for the records in ``records`` (:class:`DpServicer`) until SIGINT/SIGTERM,
    with the federation's TLS identity and roles; prints ``listening on HOST:PORT`` when ready. No entity is asked.

    ``metrics_at``: as for :func:`serve_coordinator`.
    """
    trained = {e.id for e in model.entities}
    current = {e.id for e in federation.entities}
    if trained and trained != current:
        raise ConfigError(
            f"the DP model was released by entities {sorted(trained)}, not by those of {federation.source} "
            f"({sorted(current)}): serve it with the federation it was trained on"
        )
    stop = stop_on_signals()
    tls = choose_tls(federation.tls, insecure=federation.insecure, source=federation.source)
    with _metrics(metrics_at) as metrics:
        servicer = DpServicer(model, records, metrics.registry if metrics is not None else None)
        _serve(stop, servicer, listen, tls, metrics)
    return 0


@contextlib.contextmanager
def _metrics(metrics_at: tuple[str, int] | None) -> Iterator[RpcMetrics | None]:
    """The RPC metrics and their Prometheus endpoint at ``metrics_at`` while the block runs; None without one."""
    if metrics_at is None:
        yield None
        return
    metrics = RpcMetrics()
    endpoint = serve_metrics(metrics.registry, *metrics_at)
    logger.info("coordinator serve: metrics on %s", endpoint.url)
    try:
        yield metrics
    finally:
        endpoint.close()


def _serve(
    stop: threading.Event, servicer: PredictionServicer, listen: str, tls: TlsFiles | None, metrics: RpcMetrics | None
) -> None:
    server, port = create_server(
        listen,
        lambda s: pb_grpc.add_CoordinatorServicer_to_server(servicer, s),
        tls=tls,
        roles=PREDICTION_ROLES,
        services=(PREDICTION_SERVICE,),
        metrics=metrics,
    )
    serve_until(stop, server, listen, port, "coordinator serve")
