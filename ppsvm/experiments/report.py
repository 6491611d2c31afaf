"""What every ``ppsvm reproduce`` target shares: progress on stderr, versions, writing the results."""

from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib.util
import io
import json
import logging
import os
import platform
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import IO, Any, TypeVar

from ppsvm.errors import ConfigError
from ppsvm.files import PUBLIC_MODE, write_all
from ppsvm.progress import clock

PACKAGES = (
    "ppsvm",
    "numpy",
    "scipy",
    "highspy",
    "cvxpy",
    "clarabel",
    "grpcio",
    "protobuf",
    "cryptography",
    "matplotlib",
)
DEFAULT_OUT = Path("ppsvm-results")
T = TypeVar("T")
INSTALL_HINT = "pip install 'ppsvm[reproduce]' (or -e '.[reproduce]' in a clone)"


def add_common_arguments(parser: argparse.ArgumentParser, quick_help: str) -> None:
    """--quick, --out and --no-progress, the same for every target."""
    parser.add_argument("--quick", action="store_true", help=quick_help)
    parser.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        help=f"directory for the results (default ./{DEFAULT_OUT}; created if missing)",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")


def parse_list(kind: Callable[[str], T], text: str, flag: str) -> tuple[T, ...]:
    """A comma-separated command-line list; ConfigError naming ``flag`` when an item does not parse."""
    try:
        return tuple(kind(part.strip()) for part in text.split(",") if part.strip())
    except ValueError:
        raise ConfigError(f"{flag}: expected a comma-separated list, got {text!r}") from None


def require_matplotlib(who: str = "ppsvm reproduce") -> None:
    """Fail before any long work when the figures cannot be drawn."""
    if importlib.util.find_spec("matplotlib") is None:
        raise ConfigError(f"{who} draws its figures with matplotlib, which is not installed: {INSTALL_HINT}")


@contextlib.contextmanager
def quiet_logs(levels: Mapping[str, int]) -> Iterator[None]:
    """Raise these loggers' levels for the block (unless debugging): a reproduction runs hundreds of fits whose INFO
    lines and expected warnings would bury its progress bar; its report says what they would have."""
    saved = {name: logging.getLogger(name).level for name in levels}
    if logging.getLogger("ppsvm").getEffectiveLevel() > logging.DEBUG:
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)
    try:
        yield
    finally:
        for name, level in saved.items():
            logging.getLogger(name).setLevel(level)


def print_summary(paths: list[Path]) -> None:
    """What a finished target prints: the report's title, where to read it, and every file written (the report
    itself stays in its file, so a terminal or a pipe gets a few lines)."""
    title = paths[0].read_text(encoding="utf-8").splitlines()[0].lstrip("# ")
    print(f"{title}: report in {paths[0]}")
    print("wrote: " + ", ".join(str(path) for path in paths))


def software_versions() -> dict[str, str]:
    """Python and the installed versions of the packages the results depend on."""
    found = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = "not installed"
    return found


def cpu_model() -> str:
    """The processor's model name (Linux /proc/cpuinfo), else what the platform says."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine() -> dict[str, Any]:
    """Where the figures were measured (timings depend on it, errors do not)."""
    return {
        "cpu": cpu_model(),
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }


class Progress:
    """A progress bar on stderr: redrawn in place on a terminal, one line per step in a log.

    Parameters
    ----------
    total : int
        Steps the run will take.
    label : str
        What is being done, e.g. "table1".
    """

    WIDTH = 28

    def __init__(self, total: int, label: str, stream: IO[str] | None = None, *, enabled: bool = True) -> None:
        self.total = max(1, total)
        self.label = label
        self.done = 0
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.started = time.monotonic()
        self.interactive = bool(getattr(self.stream, "isatty", lambda: False)())

    def advance(self, note: str = "") -> None:
        """Count one finished step; ``note`` says which (and may carry its figure)."""
        self.done = min(self.total, self.done + 1)
        if not self.enabled:
            return
        elapsed = time.monotonic() - self.started
        left = elapsed / self.done * (self.total - self.done)
        filled = round(self.WIDTH * self.done / self.total)
        bar = "#" * filled + "." * (self.WIDTH - filled)
        line = (
            f"{self.label} [{bar}] {self.done}/{self.total} {100 * self.done / self.total:3.0f}% "
            f"{clock(elapsed)} elapsed, {clock(left)} left  {note}"
        )
        if self.interactive:
            end = "\n" if self.done == self.total else ""
            self.stream.write("\r\033[K" + line + end)
        else:
            self.stream.write(line + "\n")
        self.stream.flush()


def png(figure: Any) -> bytes:
    """A matplotlib figure as PNG bytes (closed afterwards so long runs do not pile figures up)."""
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=150, bbox_inches="tight")
    plt.close(figure)
    return buffer.getvalue()


def write_results(
    out_dir: Path, name: str, markdown: str, payload: dict[str, Any], figures: dict[str, bytes]
) -> list[Path]:
    """Write ``name``.md, ``name``.json and the PNG figures into ``out_dir``: all of them or none.

    The JSON gets the software versions and the machine added under "versions" and "machine".
    """
    document = {**payload, "versions": software_versions(), "machine": machine()}
    files: dict[str, tuple[str | bytes, int]] = {
        f"{name}.md": (markdown, PUBLIC_MODE),
        f"{name}.json": (json.dumps(document, indent=2, allow_nan=False) + "\n", PUBLIC_MODE),
        **{figure: (content, PUBLIC_MODE) for figure, content in figures.items()},
    }
    write_all(out_dir, files)
    return [out_dir / file for file in files]


def versions_markdown() -> str:
    """One line naming the software the figures came from."""
    return "Software: " + ", ".join(f"{name} {value}" for name, value in software_versions().items()) + "."
