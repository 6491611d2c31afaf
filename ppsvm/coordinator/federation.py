"""The coordinator's session with a federation: alignment, scaling, concurrent kernel assembly."""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import secrets
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from ppsvm.config import Federation, FederationEntity
from ppsvm.constants import DEFAULT_DEADLINE_S
from ppsvm.coordinator.assembly import Abandoned, Chunked, InMemory, RowBlockRows, decode_combination
from ppsvm.coordinator.client import EntityClient
from ppsvm.coordinator.logs_seen import check_logs_seen, logs_seen_path
from ppsvm.core.kernels import (
    KernelName,
    assemble,
    assembly_start,
    combine_into,
    gaussian_fetch_width,
    rescale_gaussian,
)
from ppsvm.core.model import ColumnScaling
from ppsvm.data.cell import repeated_id
from ppsvm.errors import ConfigError, DataError, EntityError, PpsvmError
from ppsvm.logs import new_request_id
from ppsvm.wire.proto_names import KERNEL_KINDS, RECORD_SETS
from ppsvm.wire.rpc import ppsvm_pb2 as pb
from ppsvm.wire.tls import choose_tls

if TYPE_CHECKING:
    from ppsvm.core.dask_engine import DaskKernel

logger = logging.getLogger(__name__)

T = TypeVar("T")
# Entities' record lists received at once: each may be tens of MiB (a 32-character pseudonym is 128 bytes).
RECORDS_IN_FLIGHT = 4
# Random bytes of a secure-aggregation nonce (ppsvm.core.aggregation.MIN_NONCE_BYTES at least).
NONCE_BYTES = 32
# Record ids one masked round asks for by id: about 1 MiB of request with 32-character pseudonyms,
# well below gRPC's default 4 MB cap on a message.
IDS_PER_ROUND = 20_000
# A masked kernel fetch that fails (an entity dropped out mid-stream) is asked again as a whole, this many times in all.
MASKED_ATTEMPTS = 2


@dataclass(frozen=True)
class RowBlockRecords:
    """The records of one row block, in the order of its first column block's entity.

    ``train_labels`` / ``test_labels`` come from the entities that hold labels
    (checked to agree). ``order[entity_id]`` maps that entity's rows to this order.
    ``score_ids``: new records to score (never trained on) that every entity of the row block holds.
    """

    row_block: int
    train_ids: np.ndarray
    train_labels: np.ndarray
    test_ids: np.ndarray
    test_labels: np.ndarray
    train_order: dict[str, np.ndarray]
    test_order: dict[str, np.ndarray]
    score_ids: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=str))

    def size(self, part: str) -> int:
        """How many training ("train") or held-out ("test") records the row block has."""
        return len(self.train_labels if part == "train" else self.test_labels)

    def without_ids(self) -> RowBlockRecords:
        """The same records without the id lists a kernel fetch does not need (122 MiB at a million pseudonyms).

        A record set every entity lists in the same order is fetched by its name; one they list differently is
        asked by id (the masks of secure aggregation cancel only over one ordered list), so its ids stay.
        """
        empty = np.empty(0, dtype=str)
        return replace(
            self,
            train_ids=empty if self.listed_alike("train") else self.train_ids,
            test_ids=empty if self.listed_alike("test") else self.test_ids,
            score_ids=empty,
        )

    def listed_alike(self, part: str) -> bool:
        """Whether every entity lists the training ("train") or held-out ("test") records in this very order."""
        size = self.size(part)
        return all(
            np.array_equal(rows, np.arange(size))
            for rows in (self.train_order if part == "train" else self.test_order).values()
        )


def record_positions(reference: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Where each of ``ids`` stands in ``reference`` (both unique), -1 for those it does not hold; shape (len(ids),).

    Entities of a row block usually list the same records in the same order: that case is one comparison.
    """
    if ids.shape == reference.shape and np.array_equal(ids, reference):
        return np.arange(len(ids))
    if not len(reference) or not len(ids):
        return np.full(len(ids), -1)
    sorter = np.argsort(reference)
    slots = np.minimum(np.searchsorted(reference, ids, sorter=sorter), len(reference) - 1)
    order = sorter[slots]
    return np.where(reference[order] == ids, order, -1)


def duplicate_record_id(
    ids_by_row_block: Mapping[int, np.ndarray | Sequence[np.ndarray]],
) -> tuple[str, int, int] | None:
    """A record id listed twice, with the two row blocks listing it (equal when one row block lists it twice).

    Parameters
    ----------
    ids_by_row_block : mapping of row block to ndarray of str, shape (k,), or a sequence of them
        Each row block's training and held-out ids (as separate arrays: no concatenated copy, which at
        1,000,000 pseudonyms is 128 MiB).

    Returns
    -------
    (id, row block, row block), or None when every id is unique across the federation.
    """
    parts: list[np.ndarray] = []
    owners: list[int] = []
    for row_block, ids in ids_by_row_block.items():
        for part in [ids] if isinstance(ids, np.ndarray) else ids:
            parts.append(part)
            owners.append(row_block)
    found = repeated_id(parts)
    if found is None:
        return None
    record, (first, _), (again, _) = found
    return record, owners[first], owners[again]


def kernel_request(
    kernel: KernelName,
    mbar: int,
    mu: float,
    ranges: Sequence[pb.SignedRange],
    *,
    record_set: pb.RecordSet | None = None,
    ids: pb.RecordIds | None = None,
    nonce: bytes = b"",
    epoch: int = 0,
) -> pb.KernelRequest:
    """A kernel request for one column block, relaying its members' signed ranges, for ``record_set`` or ``ids``.

    A ``nonce`` asks for the entity's masked share of its row block's kernel (secure aggregation); without one,
    for its block on its own. The rows are asked for column-major: K is kept by columns (the LP's products run
    along them), and so they are copied into it without transposing.
    """
    return pb.KernelRequest(
        kernel=KERNEL_KINDS[kernel],
        mbar=mbar,
        mu=mu,
        scaling=pb.Scaling(ranges=ranges),
        record_set=record_set,
        ids=ids,
        nonce=nonce,
        epoch=epoch,
        column_major=True,
    )


def new_nonce() -> bytes:
    """A fresh nonce for one round of secure aggregation (one row block, one record list)."""
    return secrets.token_bytes(NONCE_BYTES)


@dataclass(frozen=True)
class KernelFetch:
    """One assembly's requests: the view every entity is asked under, the record set, where each row block's rows go.

    Attributes
    ----------
    mu : float
        The width the entities are asked for (:meth:`Session.fetch_width`), 0 for linear.
    ranges : dict
        Column block -> its members' signed ranges, to relay.
    epochs : dict
        Column block -> the basis epoch to ask for.
    placement : dict
        Row block -> (its first row in K, its records).
    shape : (int, int)
        K's shape.
    """

    kernel: KernelName
    mbar: int
    mu: float
    ranges: dict[int, list[pb.SignedRange]]
    epochs: dict[int, int]
    placement: dict[int, tuple[int, RowBlockRecords]]
    part: str
    shape: tuple[int, int]

    def request(
        self, entity: FederationEntity, *, ids: pb.RecordIds | None = None, nonce: bytes = b""
    ) -> pb.KernelRequest:
        """The request to ``entity``: its column block's ranges and epoch, for the record set or for ``ids``."""
        return kernel_request(
            self.kernel,
            self.mbar,
            self.mu,
            self.ranges[entity.column_block],
            record_set=RECORD_SETS[self.part] if ids is None else None,
            ids=ids,
            nonce=nonce,
            epoch=self.epochs[entity.column_block],
        )


class Session:
    """Open channels to every entity of a federation; use as a context manager."""

    def __init__(self, federation: Federation, deadline: float = DEFAULT_DEADLINE_S) -> None:
        self.federation = federation
        # The coordinator's TLS material, or None when plaintext was asked for: also what serve listens with.
        self.tls = choose_tls(federation.tls, insecure=federation.insecure, source=federation.source)
        # Sent with every call of this session: each entity's release log records which run a release served.
        self.run_id = new_request_id()
        self.clients = {e.id: EntityClient(e, self.tls, deadline, run=self.run_id) for e in federation.entities}
        # Up to three calls per entity in flight at once (see survey).
        self._pool = ThreadPoolExecutor(max_workers=min(32, 3 * len(self.clients)), thread_name_prefix="entity-call")
        self.metadata: dict[str, pb.BlockMetadata] = {}
        # Per column block, its members' signed feature ranges (see column_scaling).
        self.signed_ranges: dict[int, list[pb.SignedRange]] = {}

    def __enter__(self) -> Session:
        return self

    def __exit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        if kind is None and self.metadata:
            self._remember_logs()
        self._pool.shutdown(wait=False, cancel_futures=True)
        for client in self.clients.values():
            client.close()

    def each(
        self, call: Callable[[EntityClient], T], entities: Sequence[FederationEntity] | None = None
    ) -> dict[str, T]:
        """Run ``call`` on every (or the given) entity concurrently; results by entity id.

        The first failure (in federation order) is raised after all calls finish.
        """
        chosen = entities if entities is not None else self.federation.entities
        results = self._gather({(e.id, ""): self._pool.submit(call, self.clients[e.id]) for e in chosen})
        return {entity_id: result for (entity_id, _), result in results.items()}

    def _gather(self, futures: dict[tuple[str, str], Future[Any]]) -> dict[tuple[str, str], Any]:
        """Results of calls keyed (entity id, call); after all finish, the first failure of each entity is raised."""
        results: dict[tuple[str, str], Any] = {}
        errors: dict[str, Exception] = {}
        for key, future in futures.items():
            try:
                results[key] = future.result()
            except Exception as error:  # noqa: BLE001 - collected and re-raised with every entity named
                errors.setdefault(key[0], error)
        if len(errors) == 1:
            raise next(iter(errors.values()))
        if errors:
            raise EntityError(
                f"{len(errors)} entities failed:\n  " + "\n  ".join(str(e) for e in errors.values()),
                refused=all(isinstance(e, EntityError) and e.refused for e in errors.values()),
            )
        return results

    def survey(self) -> tuple[list[RowBlockRecords], tuple[ColumnScaling, ...]]:
        """:meth:`load_metadata`, :meth:`align_records` and :meth:`column_scaling` in one round of calls.

        No answer of the three depends on another and none computes a kernel, so every
        entity's Metadata, Records and FeatureRange calls are in flight at once; the checks
        then run in the same order as the separate methods, so a wrong identity or secret
        is still the error reported. Measured with 4 entities on 2 cores, the calls alone: 22 ms in
        one round, 31 ms one kind after another.
        """
        calls: dict[str, Callable[[EntityClient], Any]] = {
            "metadata": EntityClient.metadata,
            "records": self._records_reader(),
            "ranges": EntityClient.feature_range,
        }
        answers = self._gather(
            {
                (e.id, name): self._pool.submit(call, self.clients[e.id])
                for name, call in calls.items()
                for e in self.federation.entities
            }
        )
        by_call = {name: {e.id: answers[(e.id, name)] for e in self.federation.entities} for name in calls}
        self._check_metadata(by_call["metadata"])
        return self._align(by_call["records"]), self._scaling(by_call["ranges"])

    def load_metadata(self) -> dict[str, pb.BlockMetadata]:
        """Block metadata of every entity; checks ids and column-block widths agree with the federation."""
        self._check_metadata(self.each(lambda c: c.metadata()))
        return self.metadata

    def _check_metadata(self, metadata: dict[str, pb.BlockMetadata]) -> None:
        self.metadata = metadata
        for entity in self.federation.entities:
            meta = self.metadata[entity.id]
            if meta.entity_id != entity.id:
                raise EntityError(
                    f"the entity at {entity.address} says it is {meta.entity_id!r}, "
                    f"the federation file says {entity.id!r}"
                )
            if meta.column_block != entity.column_block:
                raise EntityError(
                    f"entity {entity.id} says it holds column block {meta.column_block}, "
                    f"the federation file says {entity.column_block}"
                )
        id_key_groups = self._groups(self.federation.entities, "id_key_check")
        if id_key_groups:
            raise ConfigError(
                f"the entities do not share one record-id key (or some send ids in clear): {id_key_groups}; "
                "a record would have different pseudonyms at different entities. Give every entity the same "
                "id_key_file, or none"
            )
        for j in self.federation.column_blocks:
            members = self.column_block(j)
            widths = {e.id: self.metadata[e.id].n_features for e in members}
            if len(set(widths.values())) != 1:
                raise DataError(f"column block {j}: entities hold different feature counts {widths}")
            epoch_groups = self._groups(members, "epoch")
            if epoch_groups:
                raise ConfigError(
                    f"column block {j}: its entities are at different basis epochs ({epoch_groups}), so their B_j "
                    "differ: every member opens the same epochs (`ppsvm entity epoch --config E.toml --next`)"
                )
            secret_groups = self._groups(members, "secret_check")
            if secret_groups:
                raise ConfigError(
                    f"column block {j}: its entities hold different column-group secrets (key-check values differ: "
                    f"{secret_groups}), so their B_j differ and the assembled kernel would be wrong; give every entity "
                    "of the block the same secret file"
                )
            feature_groups = self._groups(members, "features_check")
            if feature_groups:
                raise DataError(
                    f"column block {j}: its entities hold different feature columns (names or order differ: "
                    f"{feature_groups}), so the assembled kernel would compare unlike features; every entity of a "
                    "column block must list the same feature columns, with the same names, in the same order"
                )
        self._check_logs(metadata)

    def _check_logs(self, metadata: Mapping[str, pb.BlockMetadata]) -> None:
        """:func:`check_logs_seen`: refuse an entity whose release log went back behind what this coordinator saw."""
        check_logs_seen(
            logs_seen_path(self.federation.source), metadata, lambda entity_id, n: self.clients[entity_id].log_digest(n)
        )

    def _remember_logs(self) -> None:
        """At the end of a session that went well, remember the logs with this session's own releases in them: a
        backup restored from before them is then seen too. A failure here is logged, not raised (the work is done)."""
        try:
            self._check_logs(self.each(lambda c: c.metadata()))
        except PpsvmError as error:
            logger.warning("the entities' release logs at the end of this session were not remembered: %s", error)

    def fingerprint(self) -> str:
        """SHA-256 (hex) of what a model trained here depends on, from the entities' Metadata.

        Entity ids and grid cells, feature counts, and the keyed checks of each entity's column
        secret (hence B_j), feature schema and record-id key (hence the pseudonyms). Record counts
        are left out: new records may arrive and still be scored by the same model.
        """
        entries = [
            [e.id, e.row_block, e.column_block, m.n_features, m.secret_check, m.features_check, m.id_key_check]
            for e in sorted(self.federation.entities, key=lambda e: e.id)
            for m in (self.metadata[e.id],)
        ]
        return hashlib.sha256(json.dumps(entries).encode("utf-8")).hexdigest()

    def _groups(self, members: Sequence[FederationEntity], field: str) -> str:
        """Members grouped by a metadata fingerprint, described ("a, b; c"), or "" when all agree."""
        groups: dict[str, list[str]] = {}
        for entity in members:
            groups.setdefault(getattr(self.metadata[entity.id], field), []).append(entity.id)
        return "; ".join(", ".join(ids) for ids in groups.values()) if len(groups) > 1 else ""

    def row_block(self, i: int) -> list[FederationEntity]:
        return sorted((e for e in self.federation.entities if e.row_block == i), key=lambda e: e.column_block)

    def column_block(self, j: int) -> list[FederationEntity]:
        return sorted((e for e in self.federation.entities if e.column_block == j), key=lambda e: e.row_block)

    def n_features(self, j: int) -> int:
        return self.metadata[self.column_block(j)[0].id].n_features

    def align_records(self) -> list[RowBlockRecords]:
        """Match records by id across the column blocks of each row block; check labels agree."""
        return self._align(self.each(self._records_reader()))

    @staticmethod
    def _records_reader() -> Callable[[EntityClient], dict[str, np.ndarray]]:
        """A Records call for every entity of one survey that keeps one copy of the ids a row block shares.

        At most RECORDS_IN_FLIGHT lists are received at once, and the entities of a row block usually list
        the same ids: each list that equals the first its row block sent is replaced by that one as it
        arrives, so the copy is freed at once. (32 entities' lists of the same 420,000 pseudonyms, 54 MiB
        each as numpy text, all received at once took the prediction service to 1.5 GiB.)
        """
        first: dict[int, dict[str, np.ndarray]] = {}
        lock = threading.Lock()
        receiving = threading.Semaphore(RECORDS_IN_FLIGHT)

        def read(client: EntityClient) -> dict[str, np.ndarray]:
            with receiving:
                arrays = client.records()
            with lock:
                shared = first.setdefault(client.entity.row_block, arrays)
            for name in ("train_ids", "test_ids", "score_ids"):
                if name in arrays and name in shared and np.array_equal(arrays[name], shared[name]):
                    arrays[name] = shared[name]
            return arrays

        return read

    def _align(self, records: dict[str, dict[str, np.ndarray]]) -> list[RowBlockRecords]:
        # Each row block's first entity lists its records (the others are matched against it).
        listed = {i: records[self.row_block(i)[0].id] for i in self.federation.row_blocks}
        duplicate = duplicate_record_id({i: (r["train_ids"], r["test_ids"]) for i, r in listed.items()})
        if duplicate is not None:
            record, first, second = duplicate
            if first == second:
                raise DataError(
                    f"entity {self.row_block(first)[0].id} sent record id {record!r} twice; ids must be unique"
                )
            raise DataError(
                f"record id {record!r} is held by row blocks {first} and {second} "
                f"(entities {self.row_block(first)[0].id} and {self.row_block(second)[0].id}); "
                "ids must be unique across the federation"
            )
        return [self._align_row_block(i, records) for i in self.federation.row_blocks]

    def _align_row_block(self, i: int, records: dict[str, dict[str, np.ndarray]]) -> RowBlockRecords:
        """The records every entity of row block ``i`` holds, in its first entity's order, with their labels.

        Entities that hold different records (a hospital's patients, a laboratory's subset of them) are
        aligned on the records they share, computed on what they publish (pseudonyms, with a record-id
        key); the log gives the counts, never the ids. No shared training record is an error.
        """
        members = self.row_block(i)
        first = members[0]
        result: dict[str, tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]] = {}
        for part in ("train", "test"):
            listed = {e.id: records[e.id][f"{part}_ids"] for e in members}
            for entity_id, ids in listed.items():  # the first entity's were checked with every row block's
                if entity_id == first.id or np.array_equal(ids, listed[first.id]):
                    continue
                if duplicate_record_id({i: ids}) is not None:
                    raise DataError(f"entity {entity_id} sent a {part} record id twice; ids must be unique")
            shared = np.ones(len(listed[first.id]), dtype=bool)
            for entity_id, ids in listed.items():
                if entity_id != first.id:
                    shared &= record_positions(ids, listed[first.id]) >= 0
            reference = listed[first.id] if shared.all() else listed[first.id][shared]  # no copy when all agree
            counts = {entity_id: len(ids) for entity_id, ids in listed.items()}
            if part == "train" and not len(reference):
                raise DataError(
                    f"row block {i}: entities {' and '.join(counts)} share no {part} records "
                    f"(they hold {', '.join(f'{n:,}' for n in counts.values())}): are they the same records' rows?"
                )
            if any(n != len(reference) for n in counts.values()):
                logger.warning(
                    "row block %d: the entities hold %s %s records; the %s they all hold are used",
                    i,
                    ", ".join(f"{entity_id} {n:,}" for entity_id, n in counts.items()),
                    part,
                    f"{len(reference):,}",
                )
            orders: dict[str, np.ndarray] = {}
            labels: np.ndarray | None = None
            labelled_by = ""
            for entity in members:
                order = record_positions(reference, listed[entity.id])
                orders[entity.id] = order
                held = records[entity.id].get(f"{part}_labels")
                if held is None:
                    continue
                kept = order >= 0
                aligned = np.empty(len(reference))
                aligned[order[kept]] = held[kept]
                if labels is None:
                    labels, labelled_by = aligned, entity.id
                elif not np.array_equal(labels, aligned):
                    bad = reference[np.flatnonzero(labels != aligned)[:5]].tolist()
                    raise DataError(
                        f"row block {i}: entities {labelled_by} and {entity.id} "
                        f"disagree on the labels of {part} records {bad}"
                    )
            if labels is None:
                raise DataError(f"row block {i}: no entity holds labels for its records")
            result[part] = (reference, labels, orders)
        # A record can be scored once every entity of its row block holds it (each has its own columns).
        scoring = [records[e.id].get("score_ids", np.empty(0, dtype=str)) for e in members]
        score_ids = functools.reduce(np.intersect1d, scoring)
        return RowBlockRecords(
            i,
            result["train"][0],
            result["train"][1],
            result["test"][0],
            result["test"][1],
            result["train"][2],
            result["test"][2],
            score_ids,
        )

    def column_scaling(self) -> tuple[ColumnScaling, ...]:
        """Per column block, the per-feature min and max over all its entities' training records.

        The entities compute the same from the signed ranges relayed with each kernel request.
        """
        return self._scaling(self.each(lambda c: c.feature_range()))

    def _scaling(self, ranges: dict[str, pb.SignedRange]) -> tuple[ColumnScaling, ...]:
        signed = {j: [ranges[e.id] for e in self.column_block(j)] for j in self.federation.column_blocks}
        # One assignment, so a concurrent reader (the prediction service) sees every block or none.
        self.signed_ranges = signed
        scaling = []
        for j, members in signed.items():
            lows = np.vstack([r.low for r in members])
            highs = np.vstack([r.high for r in members])
            epoch = self.metadata[members[0].entity_id].epoch if self.metadata else 0
            scaling.append(ColumnScaling(j, tuple(lows.min(axis=0).tolist()), tuple(highs.max(axis=0).tolist()), epoch))
        return tuple(scaling)

    def ranges_for(self, scaling: Sequence[ColumnScaling]) -> dict[int, list[pb.SignedRange]]:
        """The signed ranges to relay, checked to give ``scaling`` (e.g. a model's) in every column block."""
        if not self.signed_ranges:
            self.column_scaling()
        signed = self.signed_ranges
        for expected in scaling:
            ranges = signed[expected.column_block]
            low = np.min([r.low for r in ranges], axis=0).tolist()
            high = np.max([r.high for r in ranges], axis=0).tolist()
            if (tuple(low), tuple(high)) != (expected.low, expected.high):
                raise DataError(
                    f"column block {expected.column_block}: the entities' feature ranges differ from the model's "
                    "scaling: their training data changed since the model was trained; train again"
                )
        return signed

    def kernel(
        self,
        kernel: KernelName,
        mbar: int,
        mu: float,
        scaling: Sequence[ColumnScaling],
        blocks: Sequence[RowBlockRecords],
        part: str,
        columns: np.ndarray | None = None,
        replies: dict[str, np.ndarray] | None = None,
    ) -> np.ndarray:
        """Assemble K(A, B') for the training or held-out records of all row blocks, stacked in row-block order.

        ``columns`` (shape (p, s)) selects the product basis, see :func:`ppsvm.core.kernels.assemble`.
        ``replies``, when given, receives every entity's reply as it arrived (masked shares, uint64, in K's
        row order; or its block on its own), for audits (``ppsvm coordinator view``).

        Returns
        -------
        ndarray, shape (sum of row-block sizes, mbar or p)
        """
        start = time.perf_counter()
        fetch = self._fetch(kernel, mbar, scaling, blocks, part, columns)
        if columns is None:
            # One preallocated K; each entity's share is folded into its row block's rows message by message as it
            # arrives (sums commute), so the coordinator holds K and a few MiB of rows per entity.
            row_blocks = self._row_block_rows(fetch)
            K = self._with_retries(lambda: self._in_memory(fetch, row_blocks, replies))
        else:
            K = self._single_block_kernel(fetch, columns)
        if kernel == "gaussian":
            rescale_gaussian(K, fetch.mu, mu, in_place=True)
        self._log_assembly(part, K.shape, start)
        return K

    def kernel_on_workers(
        self,
        client: Any,
        kernel: KernelName,
        mbar: int,
        mu: float,
        scaling: Sequence[ColumnScaling],
        blocks: Sequence[RowBlockRecords],
        part: str,
    ) -> DaskKernel:
        """K(A, B') as :meth:`kernel` assembles it (the paper's basis), its rows streamed into Dask workers.

        Each row block's masked shares are added into a few chunk-sized buffers (:class:`~.assembly.Chunked`)
        and each chunk goes to a worker as soon as every share of it has arrived: this process never holds K.

        Parameters
        ----------
        client : distributed.Client
            Its workers receive the chunks.

        Returns
        -------
        ppsvm.core.dask_engine.DaskKernel, shape (sum of row-block sizes, mbar)
        """
        from ppsvm.core.dask_engine import DaskKernel

        start = time.perf_counter()
        fetch = self._fetch(kernel, mbar, scaling, blocks, part, None)
        row_blocks = self._row_block_rows(fetch)

        def to_width(rows: np.ndarray) -> None:
            rescale_gaussian(rows, fetch.mu, mu, in_place=True)

        def attempt() -> DaskKernel:
            chunks = Chunked(kernel, mbar, row_blocks, to_width if kernel == "gaussian" else None)

            def run() -> None:
                try:
                    self._fetch_masked(fetch, chunks)
                except BaseException as error:  # noqa: BLE001 - handed to the reader, which raises it
                    chunks.close(error)
                else:
                    chunks.close()

            fetching = threading.Thread(target=run, name="kernel-fetch", daemon=True)
            fetching.start()
            try:
                return DaskKernel(client, chunks)
            finally:
                chunks.abandon()  # a worker lost mid-stream: the entities' streams stop waiting
                fetching.join()

        K = self._with_retries(attempt)
        self._log_assembly(part, K.shape, start)
        return K

    def _in_memory(
        self, fetch: KernelFetch, row_blocks: dict[int, RowBlockRows], replies: dict[str, np.ndarray] | None
    ) -> np.ndarray:
        assembly = InMemory(fetch.kernel, fetch.shape, row_blocks)
        self._fetch_masked(fetch, assembly, replies)
        return assembly.finish()

    def _fetch(
        self,
        kernel: KernelName,
        mbar: int,
        scaling: Sequence[ColumnScaling],
        blocks: Sequence[RowBlockRecords],
        part: str,
        columns: np.ndarray | None,
    ) -> KernelFetch:
        """What every kernel request of one fetch shares, and where each row block's rows go in K."""
        placement: dict[int, tuple[int, RowBlockRecords]] = {}
        total = 0
        for block in blocks:
            placement[block.row_block] = (total, block)
            total += block.size(part)
        shape = (total, mbar if columns is None else len(columns))
        epochs = {s.column_block: s.epoch for s in scaling}
        ranges = self.ranges_for(scaling)
        return KernelFetch(kernel, mbar, self.fetch_width(kernel), ranges, epochs, placement, part, shape)

    def _row_block_rows(self, fetch: KernelFetch) -> dict[int, RowBlockRows]:
        return {
            row_block: RowBlockRows(offset, block.size(fetch.part), len(self.row_block(row_block)))
            for row_block, (offset, block) in fetch.placement.items()
        }

    def _log_assembly(self, part: str, shape: tuple[int, int], start: float) -> None:
        logger.info(
            "assembled %s kernel %s from %d entities in %.2f s",
            part,
            shape,
            len(self.federation.entities),
            time.perf_counter() - start,
        )

    def _with_retries(self, fetch: Callable[[], T]) -> T:
        """A masked fetch that fails is asked again as a whole under new nonces (an entity answers a nonce once):
        a share that arrived half, or not at all, cannot be unmasked alone (nor should it be). A refusal stays one."""
        for attempt in range(1, MASKED_ATTEMPTS + 1):
            try:
                return fetch()
            except EntityError as error:
                if error.refused or attempt == MASKED_ATTEMPTS:
                    raise
                logger.warning("the masked kernel fetch failed (%s); asking again under new nonces", error)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _fetch_masked(
        self, fetch: KernelFetch, into: InMemory | Chunked, replies: dict[str, np.ndarray] | None = None
    ) -> None:
        """Fetch K by secure aggregation, each entity's rows folded ``into`` the assembly as they arrive.

        A row block whose entities list the same records in the same order is one round for its record set;
        otherwise its shared records are asked by id, in the coordinator's order, a round per batch (every
        entity of a round masks the same ordered list, so the masks cancel and the rows match). An entity alone in
        its row block has nothing to combine with: it is asked for its block as it is (no nonce), which it releases
        within its measured risk or with its consent.
        """
        part, placement = fetch.part, fetch.placement

        def plan() -> list[tuple[FederationEntity, pb.KernelRequest, int, int]]:
            """Every entity's request, each round under a fresh nonce: (entity, request, first row of K, rows)."""
            rounds = []
            for row_block, (offset, block) in placement.items():
                size = block.size(part)
                members = self.row_block(row_block)
                if block.listed_alike(part):
                    nonce = new_nonce() if len(members) > 1 else b""
                    rounds += [(entity, fetch.request(entity, nonce=nonce), offset, size) for entity in members]
                    continue
                ids = block.train_ids if part == "train" else block.test_ids
                if len(ids) != size:
                    raise AssertionError(f"row block {row_block}: its {part} ids were dropped before a fetch by id")
                # In row order: the pool starts rounds in the order given, so a Chunked assembly's earliest open
                # chunk always has its rounds running.
                for first in range(0, size, IDS_PER_ROUND):
                    batch = pb.RecordIds(ids=ids[first : first + IDS_PER_ROUND].tolist())
                    nonce = new_nonce() if len(members) > 1 else b""
                    rounds += [
                        (entity, fetch.request(entity, ids=batch, nonce=nonce), offset + first, len(batch.ids))
                        for entity in members
                    ]
            return rounds

        if replies is not None:
            for row_block, (_, block) in placement.items():
                for entity in self.row_block(row_block):
                    dtype = np.uint64 if len(self.row_block(row_block)) > 1 else np.float64
                    replies[entity.id] = np.zeros((block.size(part), fetch.shape[1]), dtype=dtype)

        def receive(entity: FederationEntity, request: pb.KernelRequest, offset: int, rows: int) -> None:
            first_row = offset - placement[entity.row_block][0]

            def fold(start: int, batch: np.ndarray) -> None:
                if replies is not None:
                    replies[entity.id][first_row + start : first_row + start + len(batch)] = batch
                into.fold(entity.row_block, offset + start, batch)

            try:
                self.clients[entity.id].kernel_rows(request, rows, f"{part} records", fold)
            except Abandoned:
                pass  # another entity's failure ended the fetch: that one is reported
            except BaseException:
                if isinstance(into, Chunked):
                    into.abandon()  # its row block's other streams would wait for these rows for good
                raise

        self._gather(
            {
                (e.id, str(n)): self._pool.submit(receive, e, request, offset, rows)
                for n, (e, request, offset, rows) in enumerate(plan())
            }
        )

    def _single_block_kernel(self, fetch: KernelFetch, columns: np.ndarray) -> np.ndarray:
        """K of the product basis, from each entity's block on its own (each entity's consent decides).

        Its columns pair different rows of the B_j's, so they cannot be formed from masked shares; and they
        reveal the per-block terms up to a constant, so a single-block release is what they are.
        """
        kernel, part, placement = fetch.kernel, fetch.part, fetch.placement
        K = assembly_start(kernel, fetch.shape)
        locks = {row_block: threading.Lock() for row_block in placement}

        def receive(client: EntityClient) -> None:
            entity = client.entity
            offset, block = placement[entity.row_block]
            order = block.train_order if part == "train" else block.test_order
            size = block.size(part)
            rows = order[entity.id]  # each of the entity's records' row of K; -1 for those not every entity holds
            target = K[offset : offset + size]
            picks = columns[:, self.federation.column_blocks.index(entity.column_block)]
            in_order = np.array_equal(rows, np.arange(size))

            def fold(start: int, batch: np.ndarray) -> None:
                with locks[entity.row_block]:
                    if in_order:
                        combine_into(kernel, target[start : start + len(batch)], batch, picks)
                    else:
                        where = rows[start : start + len(batch)]
                        kept = where >= 0
                        combine_into(kernel, target, batch[kept], picks, where[kept])

            client.kernel_rows(fetch.request(entity), len(rows), f"{part} records", fold)

        self.each(receive)
        return K

    def fetch_width(self, kernel: KernelName) -> float:
        """The Gaussian width entities are asked for (0 for linear): always the same, since each pins one."""
        if kernel != "gaussian":
            return 0.0
        return gaussian_fetch_width(sum(self.n_features(j) for j in self.federation.column_blocks))

    @staticmethod
    def _at_width(kernel: KernelName, K: np.ndarray, fetch_mu: float, mu: float) -> np.ndarray:
        return rescale_gaussian(K, fetch_mu, mu) if kernel == "gaussian" else K

    def kernel_rows_for_ids(
        self,
        kernel: KernelName,
        mbar: int,
        mu: float,
        scaling: Sequence[ColumnScaling],
        ids_by_row_block: Mapping[int, list[str]],
        columns: np.ndarray | None = None,
    ) -> dict[int, np.ndarray]:
        """Assembled kernel rows of records named by id, the ids of each row block asked of its entities.

        Every entity of every named row block is asked at once: a batch spanning row blocks costs one round trip.

        Returns
        -------
        dict
            Each row block of ``ids_by_row_block`` to its rows, shape (len(ids), mbar or p), in the order given.
        """
        ranges = self.ranges_for(scaling)
        fetch_mu = self.fetch_width(kernel)
        epochs = {s.column_block: s.epoch for s in scaling}
        members = [e for row_block in ids_by_row_block for e in self.row_block(row_block)]
        # One round per row block: every entity of it masks the same ordered ids under the same nonce (none for the
        # product basis, or for an entity alone in its row block: nothing to combine with).
        nonces = {
            row_block: new_nonce() if columns is None and len(self.row_block(row_block)) > 1 else b""
            for row_block in ids_by_row_block
        }

        def fetch(client: EntityClient) -> np.ndarray:
            row_block = client.entity.row_block
            ids = ids_by_row_block[row_block]
            block_ranges = ranges[client.entity.column_block]
            request = kernel_request(
                kernel,
                mbar,
                fetch_mu,
                block_ranges,
                ids=pb.RecordIds(ids=ids),
                nonce=nonces[row_block],
                epoch=epochs[client.entity.column_block],
            )
            return client.kernel_block(request, len(ids), "records named by id")

        fetched = self.each(fetch, members)
        result = {}
        for row_block in ids_by_row_block:
            shares = [fetched[e.id] for e in self.row_block(row_block)]
            if nonces[row_block]:
                summed = functools.reduce(np.add, shares)  # uint64: mod 2^64
                combined = decode_combination(kernel, summed, len(shares), f"row block {row_block}")
            else:
                combined = assemble(kernel, shares, columns)
            result[row_block] = self._at_width(kernel, combined, fetch_mu, mu)
        return result
