"""Writing files so that a crash leaves the old contents or the new, never a part."""

from __future__ import annotations

import os
import secrets
import tempfile
from collections.abc import Mapping
from pathlib import Path

from ppsvm.errors import ConfigError

PUBLIC_MODE = 0o666  # narrowed by the process umask, like any new file
PRIVATE_MODE = 0o600  # cell data, configs with secrets, private keys, ledgers


def _read_umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


# Read once, at import: reading it means setting it, and a gRPC thread creating a file in
# that instant would get no umask at all.
_UMASK = _read_umask()


def sync_directory(directory: Path) -> None:
    """Make a rename or a new file in ``directory`` durable (either lives in the directory entry)."""
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def write_atomic(path: Path, text: str, mode: int = PUBLIC_MODE) -> None:
    """Replace ``path`` with ``text`` so that readers see the old file or the new one, never a part.

    Raises
    ------
    OSError
        As the operating system reports it: an entity writes with this too, and an error it answers a
        peer with must not name its own paths, so each caller says what failed in its own terms.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(handle, mode & ~_UMASK)
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    sync_directory(path.parent)


def write_all(out_dir: Path, files: Mapping[str, tuple[str | bytes, int]]) -> None:
    """Write several files (name -> (text or bytes, mode)) into ``out_dir``: all of them, or none.

    Every file is staged under a temporary name first and renamed into place
    only once all were written. On failure, removes the temporary files, the
    files this call renamed into place that did not exist before, and
    ``out_dir`` if this call created it.

    Raises
    ------
    ConfigError
        A file or ``out_dir`` cannot be written (named, with the operating system's reason): every caller
        writes what a command was asked to write into a directory the user named.
    """
    try:
        _write_all(out_dir, files)
    except OSError as exc:
        raise ConfigError(f"cannot write {exc.filename or out_dir}: {exc.strerror or exc}") from exc


def _write_all(out_dir: Path, files: Mapping[str, tuple[str | bytes, int]]) -> None:
    created_dir = not out_dir.exists()
    out_dir.mkdir(parents=True, exist_ok=True)
    staged: dict[Path, Path] = {}
    placed: list[Path] = []
    try:
        for name, (content, mode) in files.items():
            temporary = out_dir / f".{name}.{secrets.token_hex(4)}.tmp"
            # O_EXCL: never write through a file or symlink someone else put there.
            descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
            staged[temporary] = out_dir / name
            data = content.encode("utf-8") if isinstance(content, str) else content
            with open(descriptor, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
        for temporary, final in staged.items():
            existed = final.exists()
            os.replace(temporary, final)
            if not existed:
                placed.append(final)
    except BaseException:
        for path in [*staged, *placed]:
            path.unlink(missing_ok=True)
        if created_dir and not any(out_dir.iterdir()):
            out_dir.rmdir()
        raise
    sync_directory(out_dir)
