"""Where a masked kernel fetch puts K's rows: one array in this process, or chunks handed on as they complete.

Every entity of a row block streams its share of the row block's rows; the shares are added mod 2^64 (a row block
alone sends its kernel rows as they are). :class:`InMemory` adds them into one preallocated K, the numpy engine's.
:class:`Chunked` adds them into a few chunk-sized buffers per row block and hands each chunk on (decoded) as soon
as every share of it has arrived, so that a caller sending chunks to Dask workers never holds K (issue 31).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from ppsvm.core.aggregation import decode_sum, share_bound
from ppsvm.core.kernels import KernelName
from ppsvm.errors import EntityError

# Chunks a row block may have open (partly received) at once in a Chunked assembly; a fold further ahead waits.
OPEN_CHUNKS = 3
# Bytes of one chunk of a Chunked assembly by default. This process holds at most OPEN_CHUNKS of them per row block,
# one per row block in the hand-over queue and one per worker in flight; a worker briefly holds a chunk twice.
CHUNK_BYTES = 1 << 23


def decode_combination(kernel: KernelName, total: np.ndarray, n_shares: int, where: str) -> np.ndarray:
    """The row block's kernel from the sum of its masked shares (uint64, added mod 2^64), in place.

    Returns
    -------
    ndarray of float64, the same memory as ``total``: the summed shares (linear) or their exp (Gaussian).

    Raises
    ------
    EntityError
        The sum lies beyond what cancelled masks can give: the entities masked different records or views.
    """
    values = decode_sum(total)
    bound = share_bound(n_shares)
    if values.size and (values.max() > bound or values.min() < -bound):
        raise EntityError(
            f"{where}: the entities' masked shares did not cancel (their sum is noise): they masked different "
            "records, views or nonces, or hold different pair secrets; check that every pair of the row block shares "
            "the same pair secret"
        )
    if kernel == "gaussian":
        np.exp(values, out=values)
    return values


@dataclass(frozen=True)
class RowBlockRows:
    """Where a row block's rows go: its first row in K, its row count, and how many entities send a share."""

    offset: int
    size: int
    shares: int


class InMemory:
    """K in one preallocated column-major array; each row block's shares folded into its rows as they arrive.

    Parameters
    ----------
    kernel : {"linear", "gaussian"}
    shape : (int, int)
        K's shape.
    row_blocks : dict
        Row block -> its :class:`RowBlockRows`.
    """

    def __init__(self, kernel: KernelName, shape: tuple[int, int], row_blocks: dict[int, RowBlockRows]) -> None:
        self.kernel, self.row_blocks = kernel, row_blocks
        self.K = np.zeros(shape, order="F")
        self._sums = self.K.view(np.uint64)
        self._locks = {row_block: threading.Lock() for row_block in row_blocks}

    def fold(self, row_block: int, row: int, batch: np.ndarray) -> None:
        """Fold ``batch`` (k, mbar) of one entity's share (uint64) or block alone (float64) into K from ``row``."""
        rows = slice(row, row + len(batch))
        with self._locks[row_block]:
            if batch.dtype == np.uint64:
                # Added mod 2^64: unsigned arithmetic wraps.
                np.add(self._sums[rows], batch, out=self._sums[rows])
            else:
                self.K[rows] = batch

    def finish(self) -> np.ndarray:
        """K, each combined row block decoded; shape (m, mbar)."""
        for row_block, where in self.row_blocks.items():
            if where.shares > 1:
                rows = slice(where.offset, where.offset + where.size)
                decode_combination(self.kernel, self._sums[rows], where.shares, f"row block {row_block}")
        return self.K


class Abandoned(Exception):
    """A fold gave up waiting: the fetch it belonged to failed elsewhere (that failure is the one to report)."""


class _Window:
    """One row block's open chunks: buffers of the shares received so far and how many rows each has."""

    def __init__(self, where: RowBlockRows, chunk_rows: int, width: int) -> None:
        self.where, self.chunk_rows, self.width = where, chunk_rows, width
        self.buffers: dict[int, np.ndarray] = {}
        self.received: dict[int, int] = {}
        self.complete: set[int] = set()  # complete chunks after first_open
        self.first_open = 0  # every chunk before it is complete

    def rows_of(self, chunk: int) -> int:
        return min(self.chunk_rows, self.where.size - chunk * self.chunk_rows)


class Chunked:
    """K's rows in chunks of ``chunk_rows`` rows (of each row block), each handed on decoded once complete.

    Folds come from the entities' streams, one thread each; iterating the assembly (in another thread) yields
    ``(start, stop, rows)`` chunks of K (rows float64, shape (stop - start, mbar)) in the order they complete.
    A fold that would open a chunk :data:`OPEN_CHUNKS` or more past its row block's first incomplete one waits
    for it, and with it its entity's stream: gRPC's flow control then holds the entity back, so this process
    holds at most that many chunks per row block and a few in the hand-over queue, whatever K's size. A row
    block's slowest stream never waits (every chunk it reaches is already open), so the fetch always advances.

    Parameters
    ----------
    kernel : {"linear", "gaussian"}
    mbar : int
        K's columns.
    row_blocks : dict
        Row block -> its :class:`RowBlockRows`.
    transform : callable, optional
        Applied in place to each decoded chunk (float64) before it is handed on, e.g. a Gaussian rescaling.
    chunk_rows : int, optional
        Default: :data:`CHUNK_BYTES` of rows.
    """

    def __init__(
        self,
        kernel: KernelName,
        mbar: int,
        row_blocks: dict[int, RowBlockRows],
        transform: Callable[[np.ndarray], None] | None = None,
        chunk_rows: int | None = None,
    ) -> None:
        self.kernel, self.mbar, self.transform = kernel, mbar, transform
        chunk_rows = chunk_rows if chunk_rows is not None else max(1, CHUNK_BYTES // (8 * mbar))
        self._windows = {row_block: _Window(where, chunk_rows, OPEN_CHUNKS) for row_block, where in row_blocks.items()}
        self._changed = threading.Condition()
        self._abandoned = False
        self._ready: queue.Queue[tuple[int, int, np.ndarray]] = queue.Queue(maxsize=max(2, len(row_blocks)))
        # How the fetch ended, once it has: None, or the error to raise after the chunks queued before it.
        self._ended: tuple[BaseException | None] | None = None

    def fold(self, row_block: int, row: int, batch: np.ndarray) -> None:
        """Fold ``batch`` (k, mbar), K's rows from ``row`` on, of one entity's share (uint64) or block alone."""
        window = self._windows[row_block]
        start = row - window.where.offset
        while len(batch):
            chunk, within = divmod(start, window.chunk_rows)
            piece = batch[: window.rows_of(chunk) - within]
            complete = self._add(window, chunk, within, piece)
            if complete is not None:
                self._hand_on(row_block, chunk, complete)
            start, batch = start + len(piece), batch[len(piece) :]

    def _add(self, window: _Window, chunk: int, within: int, piece: np.ndarray) -> np.ndarray | None:
        """Add a piece to its chunk's buffer (waiting for the chunk to open); the buffer once it is complete."""
        with self._changed:
            while chunk >= window.first_open + window.width and not self._abandoned:
                self._changed.wait()
            if self._abandoned:
                raise Abandoned("the kernel fetch failed elsewhere")
            if chunk not in window.buffers:
                window.buffers[chunk] = np.zeros((window.rows_of(chunk), self.mbar), dtype=np.uint64)
                window.received[chunk] = 0
            target = window.buffers[chunk][within : within + len(piece)]
            if piece.dtype == np.uint64:
                np.add(target, piece, out=target)  # mod 2^64
            else:
                target.view(np.float64)[:] = piece
            window.received[chunk] += len(piece)
            if window.received[chunk] < window.rows_of(chunk) * window.where.shares:
                return None
            del window.received[chunk]
            window.complete.add(chunk)
            while window.first_open in window.complete:
                window.complete.discard(window.first_open)
                window.first_open += 1
            self._changed.notify_all()
            return window.buffers.pop(chunk)

    def _hand_on(self, row_block: int, chunk: int, buffer: np.ndarray) -> None:
        """Decode a complete chunk (a row block's summed shares, or its block alone) and queue it."""
        where = self._windows[row_block].where
        first = where.offset + chunk * self._windows[row_block].chunk_rows
        if where.shares > 1:
            rows = decode_combination(self.kernel, buffer, where.shares, f"row block {row_block}, rows {first:,} on")
        else:
            rows = buffer.view(np.float64)
        if self.transform is not None:
            self.transform(rows)
        self._put((first, first + len(rows), rows))

    def _put(self, item: tuple[int, int, np.ndarray]) -> None:
        while True:
            if self._abandoned:
                raise Abandoned("the kernel fetch failed elsewhere")
            try:
                self._ready.put(item, timeout=0.2)
                return
            except queue.Full:
                continue

    def close(self, error: BaseException | None = None) -> None:
        """The fetch ended, every fold returned: iteration stops after the chunks queued (or raises ``error``).

        Not a queue item: after :meth:`abandon` (an entity's stream failed) nothing more may be queued, and the
        reader must still learn why."""
        self._ended = (error,)

    def abandon(self) -> None:
        """Stop every fold waiting (they raise :class:`Abandoned`): the fetch failed or its consumer stopped."""
        with self._changed:
            self._abandoned = True
            self._changed.notify_all()

    def __iter__(self) -> Iterator[tuple[int, int, np.ndarray]]:
        while True:
            # Read before the queue: close() comes after every fold's put, so if the fetch had ended by then, an
            # empty queue afterwards holds nothing more. (Read after, a chunk queued between the timeout and
            # close() would be lost.)
            ended = self._ended
            try:
                item = self._ready.get(timeout=0.2)
            except queue.Empty:
                if ended is None:
                    continue
                if ended[0] is not None:
                    raise ended[0] from None
                return
            yield item
