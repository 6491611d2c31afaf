"""Serve a split's cells as gRPC entity servers inside this process, with reproducible secrets.

A Table 1 run has hundreds of cells per fold; one process each would spend most of
the run starting Python. These are the same servers ``ppsvm entity`` runs
(``ppsvm.entity.server.start_entity``, mutual TLS with the split's certificates, loopback,
port 0), so every kernel block still crosses a real gRPC channel.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
from collections.abc import Iterator
from pathlib import Path

from ppsvm.config import Federation, federation_at_addresses, load_entity_config, load_federation
from ppsvm.data.partition import SplitResult, secret_file_name
from ppsvm.entity.server import start_entity


def fixed_secret(name: str, *parts: object) -> str:
    """A reproducible column-block secret for run ``name`` and ``parts`` (production secrets are random).

    Reproductions need the same B_j on every rerun, so their secrets are the
    sha256 of a public string: fine for published data, never for real data.
    """
    return hashlib.sha256("/".join(map(str, ("ppsvm-benchmark", name, *parts))).encode()).hexdigest() + "\n"


def set_secrets(split: SplitResult, secrets: list[str]) -> None:
    """Overwrite column block j's secret file with ``secrets[j]`` (entities read it when they start)."""
    for j, secret in enumerate(secrets):
        (split.federation_path.parent / secret_file_name(j)).write_text(secret, encoding="utf-8")


@contextlib.contextmanager
def serve_split(split: SplitResult, work: Path) -> Iterator[Federation]:
    """Serve every cell of ``split`` on loopback; yield the federation pointing at them, stop all on exit.

    A copy of the federation file with the live addresses is written to
    ``work/federation.live.toml``.
    """
    planned = load_federation(split.federation_path)
    servers = []
    try:
        ports: dict[str, int] = {}
        for path in split.entity_config_paths:
            config = dataclasses.replace(load_entity_config(path), listen="127.0.0.1:0")
            server, port = start_entity(config)
            servers.append(server)
            ports[config.id] = port
        live_path = work / "federation.live.toml"
        live_path.write_text(federation_at_addresses(planned, [f"127.0.0.1:{ports[e.id]}" for e in planned.entities]),
                             encoding="utf-8")
        yield load_federation(live_path)
    finally:
        for server in servers:
            server.stop(0).wait()
