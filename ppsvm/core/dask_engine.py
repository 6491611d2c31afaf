"""The interior-point method on a Dask cluster: K in row chunks on the workers, never gathered (issue 31).

:class:`DaskKernel` sends K's rows to the workers of a :class:`distributed.Client` in chunks, from an array or
straight from a stream of row blocks, and stands in for K in :func:`ppsvm.core.lp.solve_lp` (formulation
``ipm``) and :func:`ppsvm.core.ipm.solve_dual`. A solve runs the iteration of ppsvm.core.ipm through the back end
here (a :class:`~ppsvm.core.ipm.RowBackend`): each pass is one call per worker, which works its chunks block by
block as the local back end works K, keeps its rows of the variables and returns each chunk's partial sums. They
are reduced in this process in K's row order (the same for any number of workers), after the r's, which stay
here with the (mbar + 1)-sized Newton system. What ppsvm.core.lp needs after the solve comes back the same way:
K u (an m-vector: row-separable) and K'v or |K|'v (each chunk's share, summed here).

Each worker holds its chunks in a Dask actor (:class:`_WorkerRows`) rather than as task results, because the
variables beside the chunks change with every pass. Dask takes a task's result to be immutable: changed in
place, a chunk lost with its worker would be recomputed from its lineage at the starting point and the solve
would go on to a wrong answer; returned anew by every pass, the variables (12 floats a row) would be copied each
time. An actor's state is meant to change, its calls go from the client to its worker without a scheduler hop
(one round trip a pass), and the calls to a lost worker fail: the solve then stops with a
:class:`~ppsvm.errors.SolverError` naming the worker. It is not retried, since that worker's rows of K and of
the iterate are gone.

The workers hold kernel rows, as sensitive as what the coordinator holds: :func:`tls_security` makes the
cluster's mutual TLS from the federation's own CA, and :func:`local_cluster` starts a cluster on this machine.
Dask's default worker settings double the row work's CPU time: :data:`WORKER_CONFIG` says which to change (local
clusters get it; a DaskKernel warns of workers without it).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
import os
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

try:
    import dask
    from distributed import Client, Future, LocalCluster
    from distributed.actor import BaseActorFuture
    from distributed.security import Security
except ImportError as error:
    raise ImportError("ppsvm's Dask engine needs Dask: pip install 'ppsvm[dask]'") from error

from ppsvm.core.ipm import (
    _X,
    RowBackend,
    _ArrayRows,
    _kernels,
    _Partial,
    _RowChunk,
    _RowWork,
    _slack_pass,
    _slack_rows,
    _System,
    one_blas_thread,
    row_ranges,
)
from ppsvm.core.tuning import FoldFit, FoldRunner
from ppsvm.errors import ConfigError, SolverError
from ppsvm.memory import process_memory_mib

logger = logging.getLogger(__name__)

# Dask configuration for the workers that hold K (:func:`local_cluster` applies it; give it to other clusters'
# workers too). Dask starts workers with MALLOC_TRIM_THRESHOLD_=65536, which also fixes glibc's mmap threshold at
# 128 KiB: a row block's temporaries (the normal pass's k x (mbar + 1) weighted block) are then mapped afresh and
# unmapped on every pass, page faults and all: a 1,000,000 x 19 solve run on a worker took 7.4 s of CPU time with it
# and 3.5 s without, and 3.1 s without Dask's sampling profiler too (a walk over the threads' stacks every 10 ms).
_TRIM = "MALLOC_TRIM_THRESHOLD_"
WORKER_CONFIG: dict[str, Any] = {
    f"distributed.nanny.pre-spawn-environ.{_TRIM}": None,
    "distributed.worker.profile.enabled": False,
}
# The default chunk's size (see DaskKernel's chunk_rows): a worker copies each chunk it receives (see
# _WorkerRows.put), so it holds its share of K plus one chunk at most.
_CHUNK_BYTES = 1 << 26
# Every wait for a worker's answer is cut into waits this long, with a look at its actor's state in between:
# distributed can leave a call unanswered for good when it learns of the actor's loss only after the call failed
# to connect.
_POLL_SECONDS = 0.5


@dataclass(frozen=True)
class _Chunk:
    """Rows start:stop of K."""

    start: int
    stop: int


@dataclass
class _Worker:
    """A worker and the chunks of K its actor holds, in K's row order once all are sent."""

    address: str
    # Keeps the actor alive; its status turns from "finished" when the scheduler learns of the worker's loss.
    future: Future[Any]
    actor: Any  # a distributed.Actor proxy of _WorkerRows
    chunks: list[_Chunk] = field(default_factory=list)


class DaskKernel:
    """K (m x mbar, float64) as row chunks held on Dask workers, never gathered in this process.

    Parameters
    ----------
    client : distributed.Client
        Its workers hold the chunks (one actor each); those that get no chunk are let go.
    rows : ndarray of shape (m, mbar), or iterable of (int, int, ndarray of shape (stop - start, mbar))
        K itself, sent in chunks of ``chunk_rows`` rows; or K's row chunks (start, stop, rows) in any order, each
        sent to the worker holding the fewest rows as it comes, so that a caller streaming K never holds it.
        The chunks must cover rows 0 to m once.
    chunk_rows : int, optional
        Rows per chunk when ``rows`` is an array. By default whole row blocks of K (:func:`ppsvm.core.ipm.row_ranges`:
        each read as the local back end reads it), as many chunks for every worker, each at most 64 MiB where the
        blocks allow. A worker briefly holds a chunk twice as it arrives, so streamed chunks should be as small.

    Attributes
    ----------
    client : distributed.Client
    shape : (int, int)
        (m, mbar).
    finite : bool
        Whether every entry is finite (each worker checks its chunks as they arrive).

    Raises
    ------
    ValueError
        The cluster has no workers, a chunk is not a non-empty (stop - start) x mbar array, or the chunks
        overlap or leave rows out.
    SolverError
        A worker was lost while the chunks were sent.
    """

    def __init__(
        self,
        client: Client,
        rows: np.ndarray | Iterable[tuple[int, int, np.ndarray]],
        *,
        chunk_rows: int | None = None,
    ) -> None:
        self.client = client
        addresses = sorted(client.scheduler_info()["workers"])
        if not addresses:
            raise ValueError("the Dask cluster has no workers to hold K")
        trimming = sorted(a for a, value in client.run(os.getenv, _TRIM, workers=addresses).items() if value)
        if trimming:
            logger.warning(
                "the Dask workers %s run with %s set (Dask's default), which about doubles the CPU time of a solve's "
                "row work on them: start their nannies with ppsvm.core.dask_engine.WORKER_CONFIG",
                ", ".join(trimming),
                _TRIM,
            )
        futures = [client.submit(_WorkerRows, workers=[address], actor=True, pure=False) for address in addresses]
        self._workers = [
            _Worker(address, future, future.result()) for address, future in zip(addresses, futures, strict=True)
        ]
        try:
            self.finite, mbar = self._send(_chunks_of(rows, chunk_rows, len(addresses)))
        except BaseException:
            self.close()
            raise
        # Workers without a chunk are let go: every call goes to the workers that hold rows.
        for worker in self._workers:
            worker.chunks.sort(key=lambda chunk: chunk.start)
            if not worker.chunks:
                worker.future.release()
        self._workers = [worker for worker in self._workers if worker.chunks]
        self._chunks = sorted((c for worker in self._workers for c in worker.chunks), key=lambda chunk: chunk.start)
        self.shape = (self._chunks[-1].stop, mbar)

    def _send(self, chunks: Iterable[tuple[int, int, np.ndarray]]) -> tuple[bool, int]:
        """Send each chunk to the worker holding the fewest rows, one in flight per worker; (finite, mbar)."""
        held = [0] * len(self._workers)
        in_flight: dict[int, BaseActorFuture[bool]] = {}
        finite, mbar = True, -1
        for start, stop, block in chunks:
            block = np.asarray(block)
            mbar = block.shape[1] if mbar < 0 and block.ndim == 2 else mbar
            if block.ndim != 2 or not 0 <= start < stop or block.shape != (stop - start, mbar) or mbar == 0:
                raise ValueError(
                    f"K's chunk of rows {start}:{stop} has shape {block.shape}; expected a non-empty "
                    f"({stop - start}, {mbar if mbar > 0 else 'mbar'}) array"
                )
            fewest = held.index(min(held))
            worker = self._workers[fewest]
            if fewest in in_flight:
                finite &= self._wait(worker, in_flight.pop(fewest))
            in_flight[fewest] = self._call(worker, "put", start, block)
            held[fewest] += stop - start
            worker.chunks.append(_Chunk(start, stop))
        for fewest, call in in_flight.items():
            finite &= self._wait(self._workers[fewest], call)
        ranges = sorted((chunk.start, chunk.stop) for worker in self._workers for chunk in worker.chunks)
        if not ranges:
            raise ValueError("K has no rows: no chunk was given")
        for (_, stop), (start, _) in zip(ranges, ranges[1:], strict=False):
            if start != stop:
                gap = f"rows {stop}:{start} are in no chunk" if start > stop else f"chunks overlap at row {start}"
                raise ValueError(f"K's chunks must cover its rows once: {gap}")
        if ranges[0][0] != 0:
            raise ValueError(f"K's chunks must cover its rows once: rows 0:{ranges[0][0]} are in no chunk")
        return finite, mbar

    @property
    def chunk_count(self) -> int:
        """How many chunks hold K's rows: each pass of a solve returns one partial per chunk to this process."""
        return len(self._chunks)

    @property
    def held_rows(self) -> dict[str, int]:
        """How many of K's rows each worker holds, by address."""
        return {worker.address: sum(chunk.stop - chunk.start for chunk in worker.chunks) for worker in self._workers}

    def worker_memory(self) -> list[dict[str, float]]:
        """Each worker holding rows: its rows of K and its peak resident memory (MiB, VmHWM) so far."""
        peaks = self.client.run(process_memory_mib, workers=[worker.address for worker in self._workers])
        return [
            {"rows": rows, "peak_rss_mib": peaks.get(address, {}).get("VmHWM", math.nan)}
            for address, rows in self.held_rows.items()
        ]

    def close(self) -> None:
        """Let the actors go, and with them K's rows on the workers."""
        for worker in self._workers:
            worker.future.release()
        self._workers = []

    def __enter__(self) -> DaskKernel:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __matmul__(self, u: np.ndarray) -> np.ndarray:
        """K u, shape (m,), for u of shape (mbar,): each chunk's rows computed on its worker."""
        u = np.asarray(u, dtype=np.float64)
        if u.shape != (self.shape[1],):
            raise ValueError(f"K has {self.shape[1]} columns but u has shape {u.shape}")
        return np.concatenate(self._by_chunk(self._each("products", lambda chunks: ([c.start for c in chunks], u))))

    def rmatvec(self, v: np.ndarray, *, absolute: bool = False) -> np.ndarray:
        """K'v, or |K|'v with ``absolute``, shape (mbar,), for v of shape (m,): the chunks' shares summed here."""
        v = np.asarray(v, dtype=np.float64)
        if v.shape != (self.shape[0],):
            raise ValueError(f"K has {self.shape[0]} rows but v has shape {v.shape}")
        shares = self._each("transposed", lambda chunks: ([(c.start, v[c.start : c.stop]) for c in chunks], absolute))
        return functools.reduce(np.add, self._by_chunk(shares))

    def power(self, exponent: float) -> None:
        """Raise every entry to ``exponent`` in place on the workers (a Gaussian kernel's change of width:
        K(mu2) = K(mu1) ** (mu2 / mu1))."""
        if not (math.isfinite(exponent) and exponent > 0):
            raise ValueError(f"the exponent must be a number > 0, got {exponent}")
        self.finite &= all(self._each("power", lambda chunks: ([c.start for c in chunks], exponent)))

    def take(self, rows: np.ndarray) -> np.ndarray:
        """K[rows] gathered here (a bounded sample: the cross-validation's), column-major.

        Parameters
        ----------
        rows : ndarray of int, shape (k,)
            Sorted row indices.

        Returns
        -------
        ndarray, shape (k, mbar)
        """
        rows = np.asarray(rows, dtype=np.int64)
        if len(rows) and (np.any(np.diff(rows) < 0) or rows[0] < 0 or rows[-1] >= self.shape[0]):
            raise ValueError(f"rows must be sorted indices of K's {self.shape[0]} rows")
        starts = [c.start for c in self._chunks]
        bounds = np.searchsorted(rows, [*starts, self.shape[0]])
        wanted = {c.start: rows[a:b] - c.start for c, a, b in zip(self._chunks, bounds, bounds[1:], strict=False)}
        pieces = self._by_chunk(self._each("take", lambda chunks: ([(c.start, wanted[c.start]) for c in chunks],)))
        return np.asfortranarray(np.concatenate(pieces)) if pieces else np.empty((0, self.shape[1]), order="F")

    @contextlib.contextmanager
    def backend(
        self, sign: np.ndarray, cost: np.ndarray, a_width: float | np.ndarray, r_width: float
    ) -> Iterator[RowBackend]:
        """The back end of one solve (:class:`~ppsvm.core.ipm.RowHolder`): each chunk's s, c and box widths
        (shape (m,), ``a_width`` also one for all) go to its worker, which drops its variables on exit."""
        solve = uuid.uuid4().hex
        self._each(
            "open",
            lambda chunks: (
                solve,
                [(c.start, sign[c.start : c.stop], cost[c.start : c.stop], _of(a_width, c)) for c in chunks],
            ),
        )
        try:
            yield _DaskRows(self, solve, r_width)
        finally:
            with contextlib.suppress(SolverError):  # a lost worker's variables are gone with it
                self._each("close", lambda chunks: (solve,))

    def _each(self, method: str, arguments: Callable[[list[_Chunk]], tuple[Any, ...]]) -> list[Any]:
        """Call ``method`` with ``arguments(its chunks)`` on every worker at once; their answers, in their order."""
        if not self._workers:
            raise ValueError("the DaskKernel is closed: its rows are gone from the workers")
        calls = [self._call(worker, method, *arguments(worker.chunks)) for worker in self._workers]
        return [self._wait(worker, call) for worker, call in zip(self._workers, calls, strict=True)]

    def _by_chunk(self, answers: list[list[Any]]) -> list[Any]:
        """The workers' answers, one per chunk each holds, in K's row order."""
        by_start = {
            chunk.start: answer
            for worker, mine in zip(self._workers, answers, strict=True)
            for chunk, answer in zip(worker.chunks, mine, strict=True)
        }
        return [by_start[chunk.start] for chunk in self._chunks]

    def _call(self, worker: _Worker, method: str, *arguments: Any) -> BaseActorFuture[Any]:
        try:
            call: BaseActorFuture[Any] = getattr(worker.actor, method)(*arguments)
        except RuntimeError as error:  # distributed's "Worker holding Actor was lost", once the scheduler knows
            raise self._lost(worker, str(error)) from error
        return call

    def _wait(self, worker: _Worker, call: BaseActorFuture[Any]) -> Any:
        while True:
            try:
                return call.result(timeout=_POLL_SECONDS)
            except TimeoutError:
                if worker.future.status != "finished":
                    raise self._lost(worker, f"its actor is {worker.future.status}") from None
            except OSError as error:  # distributed's "Unable to contact Actor's worker"
                raise self._lost(worker, str(error)) from error

    def _lost(self, worker: _Worker, reason: str) -> SolverError:
        rows = ", ".join(f"{chunk.start:,}:{chunk.stop:,}" for chunk in worker.chunks)
        return SolverError(
            f"the Dask worker {worker.address} holding rows {rows} of K was lost ({reason}): the fit was "
            "abandoned, since those rows of K and of the solve's iterate are gone; make the DaskKernel again"
        )


def _chunks_of(
    rows: np.ndarray | Iterable[tuple[int, int, np.ndarray]], chunk_rows: int | None, workers: int
) -> Iterable[tuple[int, int, np.ndarray]]:
    """(start, stop, rows) of K's chunks: those given, or an array's in chunks (see :class:`DaskKernel`)."""
    if not isinstance(rows, np.ndarray):
        if chunk_rows is not None:
            raise ValueError("chunk_rows applies to an array; chunks given as (start, stop, rows) keep their own")
        return rows
    if rows.ndim != 2 or 0 in rows.shape:
        raise ValueError(f"K must be a non-empty 2-D array, got shape {rows.shape}")
    if chunk_rows is None:
        # As many chunks for every worker, each of whole row blocks and at most _CHUNK_BYTES where blocks allow.
        blocks = row_ranges(*rows.shape)
        share = math.ceil(len(blocks) / workers)
        pieces = math.ceil(share * (blocks[0][1] - blocks[0][0]) * rows.shape[1] * 8 / _CHUNK_BYTES)
        per_chunk = math.ceil(len(blocks) / (workers * pieces))
        bounds = [blocks[i][0] for i in range(0, len(blocks), per_chunk)] + [rows.shape[0]]
    elif chunk_rows >= 1:
        bounds = [*range(0, rows.shape[0], chunk_rows), rows.shape[0]]
    else:
        raise ValueError(f"chunk_rows must be at least 1, got {chunk_rows}")
    return ((a, b, rows[a:b]) for a, b in zip(bounds, bounds[1:], strict=False))


def _of(values: float | np.ndarray, chunk: _Chunk) -> float | np.ndarray:
    """A chunk's rows of a per-row vector; one value for all as it is."""
    return values[chunk.start : chunk.stop] if isinstance(values, np.ndarray) else values


class _DaskRows:
    """The Dask back end of one solve: one call per worker a pass, the chunks' partials reduced here."""

    def __init__(self, kernel: DaskKernel, solve: str, r_width: float):
        self.kernel, self.solve = kernel, solve
        self.slack = _slack_rows(kernel.shape[1], r_width)

    @property
    def shape(self) -> tuple[int, int]:
        return self.kernel.shape

    def start(self, positive: float, negative: float, shift: float) -> None:
        self.kernel._each("start", lambda chunks: (self.solve, positive, negative, shift))

    def survey(self, a_lo: float | np.ndarray) -> _Partial:
        shares = self.kernel._each("survey", lambda chunks: (self.solve, [_of(a_lo, c) for c in chunks]))
        return functools.reduce(_Partial.combine, self.kernel._by_chunk(shares))

    def run(self, center: np.ndarray, direction: np.ndarray, work: _RowWork, system: _System | None = None) -> _Partial:
        shares = self.kernel._each("run", lambda chunks: (self.solve, center, direction, work, system))
        return functools.reduce(
            _Partial.combine, self.kernel._by_chunk(shares), _slack_pass(self.slack, direction, work)
        )

    def system(self, center: np.ndarray, accurate: bool, unit: bool = False) -> _Partial:
        shares = self.kernel._each("system", lambda chunks: (self.solve, center, accurate, unit))
        return functools.reduce(_Partial.combine, self.kernel._by_chunk(shares))

    def step(self, primal: float, dual: float) -> None:
        self.kernel._each("step", lambda chunks: (self.solve, primal, dual))
        _kernels().step(self.slack.variables, primal, dual)

    def shifted_a(self) -> np.ndarray:
        return np.concatenate(self.kernel._by_chunk(self.kernel._each("shifted_a", lambda chunks: (self.solve,))))


class _WorkerRows:
    """One worker's chunks of K and, for each solve under way, their rows of the variables: a Dask actor.

    Its methods run one at a time on the worker's actor thread. Those of a solve take and return one item per
    chunk in the order :meth:`open` was given them; the others name their chunks by first row.
    """

    def __init__(self) -> None:
        self.chunks: dict[int, np.ndarray] = {}
        self.solves: dict[str, list[_RowChunk]] = {}

    def put(self, start: int, rows: np.ndarray) -> bool:
        """Keep K's rows from ``start`` on, column-major (the layout the row-block work reads fastest); whether
        every entry is finite (block by block: no temporary of the chunk's size)."""
        # A copy, always: numpy asks Linux for transparent huge pages for its large arrays, the buffer the rows
        # arrived in has none, and the row work over a 1,000,000 x 19 chunk left in it took 6.6 s of CPU time a
        # solve against 3.1 s (TLB misses on every pass).
        chunk = np.array(rows, dtype=np.float64, order="F", copy=True)
        self.chunks[start] = chunk
        return all(bool(np.isfinite(chunk[a:b]).all()) for a, b in row_ranges(*chunk.shape))

    def open(self, solve: str, parts: list[tuple[int, np.ndarray, np.ndarray, float | np.ndarray]]) -> None:
        """A solve's variables beside the chunks: each chunk's first row, s, c and box widths."""
        self.solves[solve] = [
            _RowChunk(_ArrayRows(self.chunks[start]), sign, cost, width) for start, sign, cost, width in parts
        ]

    def close(self, solve: str) -> None:
        self.solves.pop(solve, None)

    def start(self, solve: str, positive: float, negative: float, shift: float) -> None:
        for chunk in self.solves[solve]:
            chunk.start(positive, negative, shift)

    def survey(self, solve: str, lows: list[float | np.ndarray]) -> list[_Partial]:
        with one_blas_thread():
            return [chunk.survey(low) for chunk, low in zip(self.solves[solve], lows, strict=True)]

    def run(
        self, solve: str, center: np.ndarray, direction: np.ndarray, work: _RowWork, system: _System | None
    ) -> list[_Partial]:
        with one_blas_thread():
            return [chunk.run_blocks(center, direction, work, system, _Partial()) for chunk in self.solves[solve]]

    def system(self, solve: str, center: np.ndarray, accurate: bool, unit: bool) -> list[_Partial]:
        with one_blas_thread():
            return [chunk.system(center, accurate, unit) for chunk in self.solves[solve]]

    def step(self, solve: str, primal: float, dual: float) -> None:
        for chunk in self.solves[solve]:
            chunk.step(primal, dual)

    def shifted_a(self, solve: str) -> list[np.ndarray]:
        return [chunk.variables[_X] for chunk in self.solves[solve]]

    def power(self, starts: list[int], exponent: float) -> bool:
        """Each chunk raised to ``exponent`` in place, block by block; whether every entry is still finite."""
        finite = True
        for start in starts:
            chunk = self.chunks[start]
            for a, b in row_ranges(*chunk.shape):
                np.power(chunk[a:b], exponent, out=chunk[a:b])
                finite &= bool(np.isfinite(chunk[a:b]).all())
        return finite

    def take(self, pieces: list[tuple[int, np.ndarray]]) -> list[np.ndarray]:
        """Each chunk's rows at the given positions (within the chunk)."""
        return [self.chunks[start][rows] for start, rows in pieces]

    def products(self, starts: list[int], u: np.ndarray) -> list[np.ndarray]:
        with one_blas_thread():
            return [self.chunks[start] @ u for start in starts]

    def transposed(self, pieces: list[tuple[int, np.ndarray]], absolute: bool) -> list[np.ndarray]:
        """Each chunk's K_c'v_c, or |K_c|'v_c block by block (no copy of the chunk)."""
        with one_blas_thread():
            if not absolute:
                return [self.chunks[start].T @ v for start, v in pieces]
            shares = []
            for start, v in pieces:
                chunk = self.chunks[start]
                shares.append(sum(np.abs(chunk[a:b]).T @ v[a:b] for a, b in row_ranges(*chunk.shape)))
            return shares


def tls_security(ca_file: str | Path, certificate_file: str | Path, key_file: str | Path) -> Security:
    """Mutual TLS for a Dask cluster from PEM files, encryption required on every connection.

    The client, the scheduler and the workers all show the one certificate: together they are the coordinator,
    and each accepts only peers whose certificate ``ca_file`` signed. That CA must be the cluster's own
    (:func:`ppsvm.wire.certs.dask_cluster_certificates`), never the federation's: Dask checks no name or role.

    Parameters
    ----------
    ca_file : str or Path
        The CA's certificate (PEM).
    certificate_file, key_file : str or Path
        The certificate the CA signed and its private key (PEM).

    Returns
    -------
    distributed.security.Security

    Raises
    ------
    ConfigError
        A file is missing.
    """
    paths = [Path(path) for path in (ca_file, certificate_file, key_file)]
    for kind, path in zip(("CA certificate", "certificate", "key"), paths, strict=True):
        if not path.is_file():
            raise ConfigError(f"the Dask cluster's TLS {kind} {path} is not a file")
    ca, certificate, key = (str(path) for path in paths)
    return Security(
        tls_ca_file=ca,
        tls_client_cert=certificate,
        tls_client_key=key,
        tls_scheduler_cert=certificate,
        tls_scheduler_key=key,
        tls_worker_cert=certificate,
        tls_worker_key=key,
        require_encryption=True,
    )


def local_cluster(workers: int, security: Security | None = None) -> Client:
    """A client of a new cluster of worker processes on this machine, one thread each, set up by WORKER_CONFIG.

    Parameters
    ----------
    workers : int
        Worker processes, at least 1.
    security : distributed.security.Security, optional
        See :func:`tls_security`: every connection is then TLS (tls://); without it, plain TCP on the loopback.

    Returns
    -------
    distributed.Client
        ``client.shutdown()`` stops the cluster; ``client.close()`` alone leaves it running until this process
        ends.
    """
    if workers < 1:
        raise ValueError(f"a cluster needs at least 1 worker, got {workers}")
    # The nannies read these when they are made and apply them to every worker they start or restart.
    with dask.config.set(WORKER_CONFIG):
        cluster = LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            protocol=None if security is None else "tls://",
            security=security,
            dashboard_address=None,
            # K's chunks live in actors, outside Dask's managed memory: spilling cannot move them, and the memory
            # monitor would restart a worker whose share of K came near its limit, losing the fit.
            memory_limit=0,
        )
    return Client(cluster, security=security)


def fits_on(client: Client) -> FoldRunner:
    """A :data:`~ppsvm.core.tuning.FoldRunner` that runs the fold fits as tasks on ``client``'s workers.

    The K the folds index (the cross-validation's bounded sample) goes to every worker once; each fit is a pure
    task, so one lost with its worker is run again on another: the scores are those of fits in this process.
    """

    def run(fit: FoldFit, K: np.ndarray, jobs: list[tuple[float, np.ndarray]]) -> Iterator[float | None]:
        [shared] = client.scatter([K], broadcast=True, hash=False)
        futures = [client.submit(fit, shared, nu, held, pure=False) for nu, held in jobs]
        try:
            for future in futures:
                yield future.result()
        finally:
            client.cancel(futures)
            shared.release()

    return run


@contextlib.contextmanager
def cluster(scheduler: str | None, workers: int, security: Security | None) -> Iterator[Client]:
    """A client of the cluster at ``scheduler``, or of a new :func:`local_cluster` (stopped on exit).

    Parameters
    ----------
    scheduler : str or None
        A running scheduler's address (tls://host:port); its workers should run with :data:`WORKER_CONFIG`.
    workers : int
        The local cluster's worker processes, when no scheduler is named.
    security : distributed.security.Security or None
        See :func:`tls_security`. A named scheduler needs it: the workers hold kernel rows.

    Raises
    ------
    ConfigError
        A named scheduler without TLS, or one that cannot be reached.
    """
    if scheduler is None:
        logger.info("starting a local Dask cluster of %d worker processes%s", workers, "" if security else " (no TLS)")
        client = local_cluster(workers, security)
        try:
            yield client
        finally:
            client.shutdown()
        return
    if security is None:
        raise ConfigError(
            f"the Dask scheduler {scheduler}: its workers would receive kernel rows in plaintext; give the "
            "cluster certificates of its own (`ppsvm coordinator dask-certs`, then tls_security)"
        )
    try:
        remote = Client(scheduler, security=security, timeout="30s")
    except (OSError, TimeoutError, ValueError) as error:
        raise ConfigError(f"cannot use the Dask scheduler {scheduler}: {error}") from None
    logger.info("Dask scheduler %s: %d workers", scheduler, len(remote.scheduler_info()["workers"]))
    try:
        yield remote
    finally:
        remote.close()
