"""The prediction client's errors, without a server: files named, an unreachable service named (issue 30)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from ppsvm.api.client import Client
from ppsvm.errors import ConfigError, EntityError
from ppsvm.wire.certs import CLIENT, make_certificates


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_missing_certificate_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"cannot read ca file .*ca\.pem: No such file"):
        Client.from_bundle("127.0.0.1:1", tmp_path)


def test_an_unreachable_service_is_named(tmp_path: Path) -> None:
    for name, pem in make_certificates({"client": [CLIENT]}).items():
        (tmp_path / name).write_bytes(pem.text)
    address = f"127.0.0.1:{_free_port()}"
    with Client.from_bundle(address, tmp_path, timeout=2) as client:
        with pytest.raises(EntityError, match=rf"the prediction service at {address} answered UNAVAILABLE"):
            client.predict(["someone"])
