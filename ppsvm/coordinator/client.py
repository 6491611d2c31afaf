"""The coordinator's connection to one entity: typed calls, deadlines, errors that name the entity."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import grpc
import numpy as np

from ppsvm.config import FederationEntity
from ppsvm.constants import DEFAULT_DEADLINE_S, RETRY_ATTEMPTS, RETRY_BACKOFF_S
from ppsvm.errors import EntityError, WireError
from ppsvm.wire.chunks import RowStream, decode_arrays, expect_arrays
from ppsvm.wire.grpc_util import open_channel, tls_failure
from ppsvm.wire.rpc import ppsvm_pb2 as pb
from ppsvm.wire.rpc import ppsvm_pb2_grpc as pb_grpc
from ppsvm.wire.tls import TlsFiles

logger = logging.getLogger(__name__)
T = TypeVar("T")
KERNEL_BLOCK_METHOD = f"/{pb.DESCRIPTOR.services_by_name['Entity'].full_name}/KernelBlock"


class EntityClient:
    """Calls to one entity. Every failure becomes an EntityError naming the entity and its address."""

    def __init__(
        self,
        entity: FederationEntity,
        tls: TlsFiles | None,
        deadline: float = DEFAULT_DEADLINE_S,
        attempts: int = RETRY_ATTEMPTS,
        run: str | None = None,
    ) -> None:
        self.entity = entity
        self.deadline = deadline
        self.attempts = attempts
        self.channel = open_channel(entity.address, tls=tls, peer=entity.id, run=run)
        self.stub = pb_grpc.EntityStub(self.channel)
        # KernelBlock's replies left serialised: RowStream reads their rows in place instead of protobuf copying them.
        self.kernel_messages: grpc.UnaryStreamMultiCallable[pb.KernelRequest, bytes] = self.channel.unary_stream(
            KERNEL_BLOCK_METHOD, request_serializer=pb.KernelRequest.SerializeToString, response_deserializer=None
        )

    @property
    def name(self) -> str:
        return f"entity {self.entity.id} at {self.entity.address}"

    def close(self) -> None:
        self.channel.close()

    def _call(self, what: str, call: Callable[[], T], may_retry: Callable[[], bool] = lambda: True) -> T:
        """Run one call; UNAVAILABLE is retried with doubling pauses (every ppsvm call is idempotent).

        ``may_retry`` says whether a failed attempt left nothing behind: a stream whose rows were
        already handed on is not repeated, since the receiver would take them twice.
        """
        started = time.monotonic()
        for attempt in range(1, self.attempts + 1):
            try:
                return call()
            except grpc.RpcError as error:
                code = error.code() if hasattr(error, "code") else None
                # details() is None when the status carries no message: fall back to the error's text.
                raw = error.details() if hasattr(error, "details") else None
                details = raw if raw is not None else str(error)
                # A refused handshake will be refused again: only a missing peer is worth waiting for.
                retry = attempt < self.attempts and not tls_failure(details) and may_retry()
                if code is grpc.StatusCode.UNAVAILABLE and retry:
                    pause = RETRY_BACKOFF_S * 2 ** (attempt - 1)
                    logger.warning(
                        "%s is unavailable (%s, attempt %d of %d); retrying in %.1f s",
                        self.name,
                        what,
                        attempt,
                        self.attempts,
                        pause,
                    )
                    time.sleep(pause)
                    continue
                raise self._error(what, code, details, attempt, time.monotonic() - started) from None
            except WireError as error:
                raise EntityError(f"{self.name} sent a malformed array ({what}): {error}") from None
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _error(
        self, what: str, code: grpc.StatusCode | None, details: str, attempts: int, seconds: float
    ) -> EntityError:
        if code is grpc.StatusCode.UNAVAILABLE:
            hint = ""
            if tls_failure(details):
                hint = (
                    f"; the TLS handshake failed: the entity must present a valid certificate for {self.entity.id!r} "
                    "from the federation CA, and accept this coordinator's"
                )
            return EntityError(
                f"{self.name} is unreachable ({what}; {attempts} attempts over {seconds:.1f} s){hint}: {details}"
            )
        if code is grpc.StatusCode.DEADLINE_EXCEEDED:
            return EntityError(f"{self.name} did not answer {what} within {self.deadline:g} s")
        name = code.name if code is not None else "error"
        return EntityError(f"{self.name} refused {what} ({name}): {details}", refused=True)

    def _arrays(
        self, what: str, method: Callable[..., Any], request: Any, names: tuple[str, ...]
    ) -> dict[str, np.ndarray]:
        def run() -> dict[str, np.ndarray]:
            arrays = decode_arrays(method(request, timeout=self.deadline))
            expect_arrays(arrays, names, self.name)
            return arrays

        return self._call(what, run)

    def metadata(self) -> pb.BlockMetadata:
        return self._call("Metadata", lambda: self.stub.Metadata(pb.Empty(), timeout=self.deadline))

    def log_digest(self, release: int) -> str:
        """The SHA-256 (hex) of release number ``release``'s line in the entity's release log."""
        request = pb.LogDigestRequest(release=release)
        reply = self._call("LogDigest", lambda: self.stub.LogDigest(request, timeout=self.deadline))
        if reply.release != release:
            raise EntityError(f"{self.name} answered LogDigest for release {reply.release}, not {release}")
        return str(reply.digest)

    def records(self) -> dict[str, np.ndarray]:
        """train_ids, test_ids and, where held, train_labels and test_labels."""
        arrays = self._arrays("Records", self.stub.Records, pb.Empty(), ("train_ids", "test_ids"))
        for part in ("train", "test"):
            ids, labels = arrays[f"{part}_ids"], arrays.get(f"{part}_labels")
            if ids.ndim != 1 or ids.dtype.kind != "U":
                raise EntityError(f"{self.name} sent {part} ids of shape {ids.shape} and dtype {ids.dtype}")
            if labels is not None and (
                labels.shape != ids.shape or labels.dtype.kind != "f" or not np.isfinite(labels).all()
            ):
                raise EntityError(
                    f"{self.name} sent {part}_labels of shape {labels.shape} "
                    f"for {ids.size} ids, or labels that are not finite numbers"
                )
        scoring = arrays.get("score_ids")
        if scoring is not None and (scoring.ndim != 1 or (scoring.size and scoring.dtype.kind != "U")):
            raise EntityError(f"{self.name} sent score_ids of shape {scoring.shape} and dtype {scoring.dtype}")
        return arrays

    def feature_range(self) -> pb.SignedRange:
        """The entity's per-feature min and max with its tag, ready to relay to its column block."""
        arrays = self._arrays("FeatureRange", self.stub.FeatureRange, pb.Empty(), ("low", "high", "tag"))
        low, high, tag = arrays["low"], arrays["high"], arrays["tag"]
        if low.ndim != 1 or high.shape != low.shape or tag.shape != (1,) or tag.dtype.kind != "U":
            raise EntityError(
                f"{self.name} sent a feature range of shapes {low.shape}, {high.shape} and a tag of shape {tag.shape}"
            )
        if not (np.isfinite(low).all() and np.isfinite(high).all()) or (high < low).any():
            raise EntityError(f"{self.name} sent a feature range that is not finite numbers with min <= max")
        return pb.SignedRange(entity_id=self.entity.id, low=low.tolist(), high=high.tolist(), tag=str(tag[0]))

    def kernel_rows(
        self, request: pb.KernelRequest, rows: int, what: str, fold: Callable[[int, np.ndarray], None]
    ) -> None:
        """Stream K(A_ij, B_j') for ``rows`` requested records into ``fold(first_row, batch)`` as it arrives.

        Each batch has shape (k, mbar); the coordinator never holds the whole block (issue 12:
        memory near the size of K). The header is checked before any row is handed on.

        Parameters
        ----------
        rows : int
            The number of records asked for; a block of another height is refused.
        what : str
            Those records in words, for the error (e.g. "train records").
        """
        delivered = 0
        # A masked share (a request with a nonce) is fixed point in Z_2^64; a block on its own, kernel values.
        dtype = np.dtype(np.uint64) if request.nonce else np.dtype(np.float64)

        def run() -> None:
            nonlocal delivered
            stream = RowStream(self.kernel_messages(request, timeout=self.deadline), "kernel")
            if stream.dtype != dtype or stream.shape[1] != request.mbar:
                raise EntityError(
                    f"{self.name} sent a kernel block of shape {stream.shape} and "
                    f"dtype {stream.dtype}; expected (rows, {request.mbar}) {dtype}"
                )
            if stream.shape[0] != rows:
                raise EntityError(
                    f"{self.name} sent a {stream.shape[0]} x {stream.shape[1]} kernel block for {rows} {what} "
                    f"and mbar = {request.mbar}"
                )
            for batch in stream:
                if dtype == np.float64 and not np.isfinite(batch).all():
                    raise EntityError(f"{self.name} sent a kernel block with non-finite entries")
                fold(delivered, batch)
                delivered += len(batch)

        self._call("KernelBlock", run, may_retry=lambda: delivered == 0)

    def kernel_block(self, request: pb.KernelRequest, rows: int, what: str) -> np.ndarray:
        """K(A_ij, B_j') (or the masked share) for ``rows`` requested records, shape (rows, mbar), kept whole."""
        block = np.empty((rows, request.mbar), dtype=np.uint64 if request.nonce else np.float64)

        def fold(start: int, batch: np.ndarray) -> None:
            block[start : start + len(batch)] = batch

        self.kernel_rows(request, rows, what, fold)
        return block

    def accept_model(self, model_json: str) -> str:
        reply = self._call(
            "AcceptModel",
            lambda: self.stub.AcceptModel(pb.ModelMessage(model_json=model_json.encode()), timeout=self.deadline),
        )
        return reply.message

    def dp_weights(self, request: pb.DpRequest) -> pb.DpReply:
        reply = self._call("DpWeights", lambda: self.stub.DpWeights(request, timeout=self.deadline))
        if len(reply.weights) != 2 * request.n_frequencies or not np.isfinite(reply.weights).all():
            raise EntityError(
                f"{self.name} sent {len(reply.weights)} weights; expected {2 * request.n_frequencies} finite numbers"
            )
        return reply

    def dp_evaluate(self, model_json: str, epsilon: float) -> pb.DpEvaluateReply:
        request = pb.DpEvaluateRequest(model_json=model_json.encode(), epsilon=epsilon)
        reply = self._call("DpEvaluate", lambda: self.stub.DpEvaluate(request, timeout=self.deadline))
        if not 0.0 <= reply.error_rate <= 1.0:
            raise EntityError(f"{self.name} sent an error rate of {reply.error_rate}; expected a number in [0, 1]")
        return reply

    def dp_score_histogram(self, model_json: str, edges: Sequence[float], epsilon: float) -> pb.DpHistogramReply:
        """Per-class noised counts of the model's decision values on the entity's training records.

        Parameters
        ----------
        model_json : str
            A ppsvm-dp-model file.
        edges : sequence of float, length B
            Strictly increasing; bin k holds edges[k-1] <= d < edges[k].
        epsilon : float
            Spent at the entity on the whole histogram.

        Returns
        -------
        DpHistogramReply
            negative_counts and positive_counts of length B + 1 each.
        """
        request = pb.DpHistogramRequest(model_json=model_json.encode(), edges=list(edges), epsilon=epsilon)
        reply = self._call("DpScoreHistogram", lambda: self.stub.DpScoreHistogram(request, timeout=self.deadline))
        bins = len(request.edges) + 1
        if len(reply.negative_counts) != bins or len(reply.positive_counts) != bins:
            raise EntityError(
                f"{self.name} sent {len(reply.negative_counts)} negative and {len(reply.positive_counts)} positive "
                f"counts; expected {bins} of each"
            )
        return reply

    def local_baseline(self, request: pb.BaselineRequest) -> pb.BaselineReply:
        return self._call("LocalBaseline", lambda: self.stub.LocalBaseline(request, timeout=self.deadline))
