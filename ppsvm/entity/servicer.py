"""The entity's gRPC servicer: parse, delegate to EntityCore, map errors to status codes."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import grpc
import numpy as np

from ppsvm import __version__
from ppsvm.core.dp import DEFAULT_HUBER_H, NON_PRIVATE
from ppsvm.core.kernels import KernelName, is_kernel_name
from ppsvm.core.lp import is_task
from ppsvm.core.tuning import Search
from ppsvm.entity.cell import EntityCore, SignedRange
from ppsvm.errors import DataError
from ppsvm.wire.chunks import encode_arrays, encode_rows, rows_per_message
from ppsvm.wire.grpc_util import stream_handler, unary_handler
from ppsvm.wire.proto_names import KERNEL_NAMES, RECORD_SET_NAMES
from ppsvm.wire.rpc import ppsvm_pb2 as pb
from ppsvm.wire.rpc import ppsvm_pb2_grpc as pb_grpc
from ppsvm.wire.tls import peer_names

logger = logging.getLogger(__name__)

# How the coordinator made rho; recorded in the ledger entry (public-only needs no entity).
DP_RHO_METHODS = ("dp-hybrid", "private-svm")


def _kernel(kind: int) -> KernelName | None:
    """The kernel a request names, or None for a value the proto does not define."""
    name = KERNEL_NAMES.get(kind)
    return name if name is not None and is_kernel_name(name) else None


def _peer(context: grpc.ServicerContext) -> str:
    """Who asked, for the release log: the certificate identity, or the address of a plaintext caller."""
    return ",".join(sorted(peer_names(context))) or context.peer()


class EntityServicer(pb_grpc.EntityServicer):
    """Serves one cell. Every answer is computed by :class:`EntityCore`, which passes it through the release guard."""

    def __init__(self, core: EntityCore, model_dir: Path) -> None:
        self.core = core
        self.model_dir = model_dir

    @unary_handler
    def Metadata(self, request: pb.Empty, context: grpc.ServicerContext) -> pb.BlockMetadata:
        cell = self.core.cell
        guard = self.core.guard.state()
        return pb.BlockMetadata(
            entity_id=self.core.id,
            column_block=self.core.config.column_block,
            n_features=cell.n_features,
            n_train=len(cell.train_ids),
            n_test=len(cell.test_ids),
            has_labels=cell.y_train is not None,
            label_names=self.core.config.label_names or () if cell.y_train is not None else (),
            scoring_source="" if self.core.scoring is None else ("ok" if self.core.scoring.readable else "unreadable"),
            non_private_override=self.core.config.non_private_override,
            ppsvm_version=__version__,
            secret_check=self.core.secret_check,
            features_check=self.core.features_check,
            id_key_check=self.core.id_key_check,
            mode=guard["mode"],
            pinned_basis=guard["pinned_basis"] or "",
            epoch=guard["epoch"],
            pinned_mbar=guard["pinned_mbar"],
            points_used=guard["points_used"],
            releases=guard["releases"],
            chain_head=guard["chain_head"],
            chain_root=guard["chain_root"],
            epsilon_total=guard["epsilon_total"] or 0.0,
            epsilon_spent=guard["epsilon_spent"],
        )

    @unary_handler
    def LogDigest(self, request: pb.LogDigestRequest, context: grpc.ServicerContext) -> pb.LogDigestReply:
        return pb.LogDigestReply(release=request.release, digest=self.core.log_digest(request.release))

    @stream_handler
    def Records(self, request: pb.Empty, context: grpc.ServicerContext) -> Iterator[pb.ArrayChunk]:
        yield from encode_arrays(self.core.records(_peer(context)))

    @stream_handler
    def FeatureRange(self, request: pb.Empty, context: grpc.ServicerContext) -> Iterator[pb.ArrayChunk]:
        yield from encode_arrays(self.core.feature_range(_peer(context)))

    @stream_handler
    def KernelBlock(self, request: pb.KernelRequest, context: grpc.ServicerContext) -> Iterator[bytes]:
        kernel = _kernel(request.kernel)
        if kernel is None:
            raise DataError("kernel must be LINEAR or GAUSSIAN")
        which = request.WhichOneof("records")
        record_set = RECORD_SET_NAMES.get(request.record_set) if which == "record_set" else None
        if which == "record_set" and record_set is None:
            raise DataError("record_set must be TRAIN or TEST")
        ids = list(request.ids.ids) if which == "ids" else None
        if which is None:
            raise DataError("name a record set or record ids")
        ranges = [SignedRange(r.entity_id, r.low, r.high, r.tag) for r in request.scaling.ranges]
        stream = self.core.kernel_stream(
            kernel,
            request.mbar,
            request.mu,
            ranges,
            record_set=record_set,
            ids=ids,
            peer=_peer(context),
            nonce=request.nonce,
            epoch=request.epoch,
            # One message's rows at a time (uint64 shares and float64 values alike take 8 bytes).
            batch_rows=rows_per_message(request.mbar, 8),
        )
        logger.info(
            "entity %s: kernel block %s for %s%s",
            self.core.id,
            stream.shape,
            record_set or f"{len(ids or [])} ids",
            ", masked" if request.nonce else "",
        )
        # Serialised already: the server sends the messages as they are (ppsvm.wire.server).
        yield from encode_rows("kernel", stream.shape, stream.dtype, stream.batches, column_major=request.column_major)

    @unary_handler
    def AcceptModel(self, request: pb.ModelMessage, context: grpc.ServicerContext) -> pb.Ack:
        self.core.accept_model(request.model_json, self.model_dir)
        # The path stays local: the entity's file system layout is none of the coordinator's business.
        return pb.Ack(message=f"entity {self.core.id} stored the model")

    @unary_handler
    def LocalBaseline(self, request: pb.BaselineRequest, context: grpc.ServicerContext) -> pb.BaselineReply:
        task, kernel = request.task, _kernel(request.kernel)
        if kernel is None or not is_task(task):
            raise DataError("task must be classify or regress and kernel LINEAR or GAUSSIAN")
        figures = self.core.local_baseline(
            task,
            kernel,
            request.nu or None,
            request.mu or None,
            request.seed,
            _peer(context),
            context.is_active,
            search=cast(Search, request.search or "grid"),  # local_baseline refuses an unknown name
            leave_one_out=request.leave_one_out,
        )
        # Field by field: the classify figures or the regress ones are set, the others stay 0 (unset in proto3).
        return pb.BaselineReply(
            entity_id=self.core.id,
            n_train=int(figures["n_train"]),
            n_test=int(figures["n_test"]),
            error_rate=figures.get("error_rate", 0.0),
            auc=figures.get("auc", 0.0),
            relative_error=figures.get("relative_error", 0.0),
            rmse=figures.get("rmse", 0.0),
        )

    @unary_handler
    def DpWeights(self, request: pb.DpRequest, context: grpc.ServicerContext) -> pb.DpReply:
        if request.method not in DP_RHO_METHODS:
            raise DataError(f"method must be one of {', '.join(DP_RHO_METHODS)}, got {request.method!r}")
        d, D = len(request.low), request.n_frequencies
        if D < 1 or len(request.rho) != D * d:
            raise DataError(f"rho has {len(request.rho)} numbers; expected n_frequencies x features = {D} x {d}")
        mechanism = request.mechanism
        release, remaining = self.core.dp_weights(
            method=request.method,
            mechanism=mechanism,
            epsilon=request.epsilon if mechanism != NON_PRIVATE else None,
            C=request.c,
            rho=np.asarray(request.rho).reshape(D, d),
            low=np.asarray(request.low),
            high=np.asarray(request.high),
            huber_h=request.huber_h or DEFAULT_HUBER_H,
            peer=_peer(context),
        )
        return pb.DpReply(
            entity_id=self.core.id,
            n_train=release.n,
            weights=release.weights.tolist(),
            mechanism=release.mechanism,
            epsilon=release.epsilon or 0.0,
            noise=release.noise,
            budget_remaining=remaining if remaining is not None else 0.0,
        )

    @unary_handler
    def DpEvaluate(self, request: pb.DpEvaluateRequest, context: grpc.ServicerContext) -> pb.DpEvaluateReply:
        figures = self.core.dp_evaluate(request.model_json, request.epsilon, peer=_peer(context))
        return pb.DpEvaluateReply(
            entity_id=self.core.id, budget_remaining=self.core.remaining_budget() or 0.0, **figures
        )

    @unary_handler
    def DpScoreHistogram(self, request: pb.DpHistogramRequest, context: grpc.ServicerContext) -> pb.DpHistogramReply:
        histogram = self.core.dp_score_histogram(
            request.model_json, np.asarray(request.edges, dtype=np.float64), request.epsilon, peer=_peer(context)
        )
        return pb.DpHistogramReply(
            entity_id=self.core.id, budget_remaining=self.core.remaining_budget() or 0.0, **histogram
        )
