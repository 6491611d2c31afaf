"""Progress of long work for people watching it: durations as 3m05s, log lines with the time left."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from types import TracebackType

# A progress line at most this often (and always for the last step): enough to see work moving
# without flooding a log when a step takes milliseconds.
LOG_EVERY_S = 10.0


def clock(seconds: float) -> str:
    """``seconds`` as 42s or 3m05s."""
    minutes, seconds = divmod(int(round(seconds)), 60)
    return f"{minutes}m{seconds:02d}s" if minutes else f"{seconds}s"


class EtaLog:
    """A ``progress(done, total)`` callback that logs "what: done/total, elapsed, about N left".

    The estimate assumes the remaining steps cost what the finished ones did on average.

    Parameters
    ----------
    logger : logging.Logger
    what : str
        What is counted, e.g. "tuning (fold fits)".
    """

    def __init__(self, logger: logging.Logger, what: str, every: float = LOG_EVERY_S) -> None:
        self.logger, self.what, self.every = logger, what, every
        self.started = time.monotonic()
        self.logged = self.started

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if done < total and now - self.logged < self.every:
            return
        self.logged = now
        elapsed = now - self.started
        left = elapsed / max(done, 1) * (total - done)
        self.logger.info(
            "%s: %d/%d, %s elapsed%s",
            self.what,
            done,
            total,
            clock(elapsed),
            f", about {clock(left)} left" if done < total else "",
        )


class WaitLog:
    """Log a line every ``every`` seconds while waiting on work that cannot report its own progress.

    A context manager: one daemon thread calls ``describe()`` for the text (e.g. which entities
    are still computing) and logs it with the time waited, until the block ends.
    """

    def __init__(self, logger: logging.Logger, describe: Callable[[], str], every: float = 30.0) -> None:
        self.logger, self.describe, self.every = logger, describe, every
        self.started = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="wait-log", daemon=True)

    def __enter__(self) -> WaitLog:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.logger.info("%s, %s elapsed", self.describe(), clock(time.monotonic() - self.started))
