"""``ppsvm coordinator serve``: answer prediction requests for records the entities hold, by id."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import grpc
import numpy as np

from ppsvm.config import Federation
from ppsvm.constants import DEFAULT_DEADLINE_S
from ppsvm.coordinator.evaluate import (
    check_model_federation,
    check_model_matches,
    decisions_for_ids,
    record_row_blocks,
)
from ppsvm.coordinator.federation import RowBlockRecords, Session
from ppsvm.core.model import Model
from ppsvm.wire.certs import CLIENT, ROLES
from ppsvm.wire.grpc_util import unary_handler
from ppsvm.wire.rpc import ppsvm_pb2 as pb
from ppsvm.wire.rpc import ppsvm_pb2_grpc as pb_grpc
from ppsvm.wire.server import create_server, method_roles, serve_until, stop_on_signals

# Predict answers about any record the entities hold, so only a prediction client's certificate
# may ask: an entity's may not, since a decision value is a function of other entities' private features.
# Status tells the model's public settings and a request count: any party of the federation.
PREDICTION_ROLES = method_roles(
    pb.DESCRIPTOR.services_by_name["Coordinator"].full_name, {"Predict": (CLIENT,), "Status": ROLES}
)


# Unknown ids make the service list the entities' records again at most this often (new records to score).
RELIST_EVERY_S = 1.0


class CoordinatorServicer(pb_grpc.CoordinatorServicer):
    """Predicts by record id: asks the record's row block for K(x_j', B_j') and applies the model."""

    def __init__(self, session: Session, model: Model, blocks: Sequence[RowBlockRecords]) -> None:
        self.session = session
        self.model = model
        self.served = 0
        self._lock = threading.Lock()
        self.row_block_of = record_row_blocks(blocks)
        self._listed_at = -float("inf")  # the first unknown id is looked for at once

    def _relist(self) -> None:
        """Ask the entities for their records again (new records to score may have arrived), at most every
        RELIST_EVERY_S: a stream of unknown ids must not turn into a stream of Records calls."""
        with self._lock:
            if time.monotonic() - self._listed_at < RELIST_EVERY_S:
                return
            self._listed_at = time.monotonic()
        row_block_of = record_row_blocks(self.session.align_records())
        self.row_block_of = row_block_of  # one assignment: a concurrent request sees the old map or the new

    @unary_handler
    def Predict(self, request: pb.PredictRequest, context: grpc.ServicerContext) -> pb.PredictReply:
        ids = list(request.ids)
        if any(record not in self.row_block_of for record in ids):
            self._relist()
        row_block_of = self.row_block_of
        found = [record for record in ids if record in row_block_of]
        by_id = decisions_for_ids(self.session, self.model, row_block_of, found) if found else {}
        with self._lock:
            self.served += len(found)
        decision = np.array([by_id[record] for record in found])
        labels = self.model.prediction(decision).tolist()
        return pb.PredictReply(
            predictions=[
                pb.Prediction(id=record, decision=value, prediction=label)
                for record, value, label in zip(found, decision.tolist(), labels, strict=True)
            ],
            not_found=[record for record in ids if record not in row_block_of],
        )

    @unary_handler
    def Status(self, request: pb.Empty, context: grpc.ServicerContext) -> pb.StatusReply:
        return pb.StatusReply(
            task=self.model.task,
            kernel=self.model.kernel,
            mbar=self.model.mbar,
            n_entities=len(self.session.federation.entities),
            private=self.model.private,
            requests_served=self.served,
        )


def serve_coordinator(federation: Federation, model: Model, listen: str, deadline: float = DEFAULT_DEADLINE_S) -> int:
    """Serve predictions until SIGINT/SIGTERM; prints ``listening on HOST:PORT`` when ready."""
    check_model_matches(model, federation)
    stop = stop_on_signals()
    with Session(federation, deadline) as session:
        blocks, _ = session.survey()
        check_model_federation(model, session)
        # Refuse, before serving, a model whose scaling the fetched signed ranges contradict.
        session.ranges_for(model.scaling)
        servicer = CoordinatorServicer(session, model, blocks)
        server, port = create_server(
            listen,
            lambda s: pb_grpc.add_CoordinatorServicer_to_server(servicer, s),
            tls=session.tls,
            roles=PREDICTION_ROLES,
        )
        serve_until(stop, server, listen, port, "coordinator serve")
    return 0
