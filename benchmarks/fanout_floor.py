"""The floor of a prediction service, for ``benchmarks/load.py``: a bare gRPC fan-out with nothing else.

It answers ``Coordinator.Predict`` as ``ppsvm coordinator serve`` does on the wire (the same server, mutual TLS and
role check, the same coordinator session: its channels, its thread pool, the same entity processes), but for each
request it only asks every entity of each row block the ids fall in for its ``Metadata``, a fixed message of about
the size of a 1 x 3 kernel block that the entity neither computes nor logs, and replies a fixed decision per id.
No batching of concurrent requests, no kernel, no release log, no assembly, no model: whatever the service spends
beyond this floor is ppsvm's own.

    python -m benchmarks.fanout_floor --federation federation.live.toml --listen 127.0.0.1:0
"""

from __future__ import annotations

import argparse

import grpc

from ppsvm.config import load_federation
from ppsvm.coordinator.evaluate import record_row_blocks
from ppsvm.coordinator.federation import Session
from ppsvm.coordinator.serve import PREDICTION_ROLES
from ppsvm.wire.grpc_util import unary_handler
from ppsvm.wire.rpc import ppsvm_pb2 as pb
from ppsvm.wire.rpc import ppsvm_pb2_grpc as pb_grpc
from ppsvm.wire.server import create_server, serve_until, stop_on_signals


class FanOutFloor(pb_grpc.CoordinatorServicer):
    """Predict: one Metadata call to each entity of each row block the request's ids fall in, then a fixed reply."""

    def __init__(self, session: Session, row_block_of: dict[str, int]) -> None:
        self.session = session
        self.row_block_of = row_block_of

    @unary_handler
    def Predict(self, request: pb.PredictRequest, context: grpc.ServicerContext) -> pb.PredictReply:
        row_blocks = {self.row_block_of[record] for record in request.ids}
        members = [e for row_block in sorted(row_blocks) for e in self.session.row_block(row_block)]
        self.session.each(lambda client: client.metadata(), members)
        return pb.PredictReply(
            predictions=[pb.Prediction(id=record, decision=0.0, prediction=1.0) for record in request.ids]
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--federation", required=True, help="the federation file of the running entities")
    parser.add_argument("--listen", default="127.0.0.1:0", help="address to serve on (port 0: any free port)")
    args = parser.parse_args(argv)
    federation = load_federation(args.federation)
    stop = stop_on_signals()
    with Session(federation) as session:
        blocks, _ = session.survey()
        servicer = FanOutFloor(session, record_row_blocks(blocks))
        server, port = create_server(
            args.listen,
            lambda s: pb_grpc.add_CoordinatorServicer_to_server(servicer, s),
            tls=session.tls,
            roles=PREDICTION_ROLES,
        )
        serve_until(stop, server, args.listen, port, "fan-out floor")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
