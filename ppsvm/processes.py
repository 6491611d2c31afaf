"""Start entity processes through the CLI and stop every one of them, whatever happens."""

from __future__ import annotations

import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType, TracebackType

from ppsvm.errors import EntityError

READY_PREFIX = "listening on "
START_TIMEOUT_S = 60.0
# Entities started together share the CPU: each takes a few CPU seconds (imports, reading its
# cell), so the wait for a group grows with its size (32 at once needed over 60 s on 2 cores).
START_SECONDS_PER_PROCESS = 5.0


class EntityProcesses:
    """A context manager that runs ``ppsvm entity`` for each config and yields their addresses.

    ``start_timeout`` (seconds each entity may take to listen) defaults to :data:`START_TIMEOUT_S` plus
    :data:`START_SECONDS_PER_PROCESS` per entity; cells of millions of records need more.
    """

    def __init__(
        self,
        configs: list[Path],
        host: str = "127.0.0.1",
        *,
        insecure: bool = False,
        start_timeout: float | None = None,
    ) -> None:
        self.configs = configs
        self.host = host
        self.insecure = insecure
        self.start_timeout = start_timeout or START_TIMEOUT_S + START_SECONDS_PER_PROCESS * len(configs)
        self.processes: list[subprocess.Popen[str]] = []
        self.addresses: list[str] = []

    def __enter__(self) -> EntityProcesses:
        try:
            for config in self.configs:
                with _signals_held():
                    self.processes.append(
                        subprocess.Popen(
                            [
                                sys.executable,
                                "-m",
                                "ppsvm",
                                "entity",
                                "--config",
                                str(config),
                                "--listen",
                                f"{self.host}:0",
                                *(["--insecure"] if self.insecure else []),
                            ],
                            stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE,
                            text=True,
                        )
                    )
            self.addresses = [self._wait_ready(p, c) for p, c in zip(self.processes, self.configs, strict=True)]
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.stop()

    def _wait_ready(self, process: subprocess.Popen[str], config: Path) -> str:
        address = read_listening_address(process, f"entity {config.name}", self.start_timeout)
        # Drain stderr so a chatty entity never blocks on a full pipe.
        threading.Thread(target=_drain, args=(process,), daemon=True).start()
        return address

    def stop(self) -> None:
        """SIGTERM every process, then SIGKILL any still running after a grace period."""
        stop_processes(self.processes)


def stop_processes(processes: list[subprocess.Popen[str]], grace: float = 10.0) -> None:
    """SIGTERM every process, then SIGKILL any still running ``grace`` seconds later; all are reaped."""
    for process in processes:
        if process.poll() is None:
            process.terminate()
    for process in processes:
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextmanager
def _signals_held() -> Iterator[None]:
    """Hold SIGINT and SIGTERM until the block ends, then deliver them to the usual handlers.

    A Ctrl-C raised inside ``Popen`` (after the fork, while it waits for the exec) loses the
    child it has just started: no Popen object comes back, so nothing could ever stop it.
    """
    if threading.current_thread() is not threading.main_thread():
        yield  # Python runs signal handlers in the main thread only: nothing can interrupt this one.
        return
    received: list[int] = []

    def hold(signum: int, frame: FrameType | None) -> None:
        received.append(signum)

    previous = {signum: signal.signal(signum, hold) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for number in dict.fromkeys(received):
            signal.raise_signal(number)


def read_listening_address(process: subprocess.Popen[str], name: str, timeout: float = START_TIMEOUT_S) -> str:
    """Wait for the ``listening on HOST:PORT`` line a ppsvm server prints once it accepts calls; the address.

    Raises
    ------
    EntityError
        The process exited first (with its stderr when piped) or did not get ready within ``timeout``.
    """
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    deadline = time.monotonic() + timeout
    while True:
        try:
            line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise EntityError(f"{name} did not start within {timeout:g} s") from None
        if line is None:
            process.wait()
            stderr = process.stderr.read() if process.stderr else ""
            raise EntityError(f"{name} exited with code {process.returncode}:\n{stderr.strip()}")
        if line.startswith(READY_PREFIX):
            return line[len(READY_PREFIX) :].strip()


def _drain(process: subprocess.Popen[str]) -> None:
    if process.stderr is not None:
        for _ in process.stderr:
            pass
