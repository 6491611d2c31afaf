"""The deployment tutorial's walk-through (docs/tutorials/walkthrough.sh, shown in docs/tutorials/deployment.md),
run as it is: onboarding by `ppsvm org`/`operator`, entities started from their bundles, training, the prediction
service and the prediction client with the client bundle."""

from __future__ import annotations

import csv
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "docs" / "tutorials" / "walkthrough.sh"


def free_port_run(count: int) -> int:
    """The first of ``count`` consecutive ports that are free now."""
    for _ in range(50):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            first = probe.getsockname()[1]
        if first + count > 65535:
            continue
        try:
            held = []
            for port in range(first, first + count):
                sock = socket.socket()
                held.append(sock)
                sock.bind(("127.0.0.1", port))
        except OSError:
            continue
        finally:
            for sock in held:
                sock.close()
        return first
    raise RuntimeError("no run of free ports")


@pytest.mark.long
def test_the_walkthrough_runs_as_written(tmp_path: Path) -> None:
    environment = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "PORT": str(free_port_run(3)),
        "DATA": str(REPO / "ppsvm" / "data" / "bundled" / "wdbc.data"),
    }
    run = subprocess.run(
        ["bash", str(SCRIPT)], cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "error rate: 0.0" in run.stdout, run.stdout  # WDBC's held-out error, under 0.1
    with (tmp_path / "predictions.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    asked = (tmp_path / "ids.txt").read_text().split()
    # Scored by the hospital's own ids (the client mapped them to pseudonyms with its record-id key).
    assert [row["id"] for row in rows] == asked and len(asked) == 5
    assert all(row["status"] == "ok" and 0 < float(row["probability"]) < 1 for row in rows)
    # Nothing left running: the script's trap stopped the entities and the service.
    for command in ("--config north.toml", "--config south.toml", f"--listen 127.0.0.1:{int(environment['PORT']) + 2}"):
        assert subprocess.run(["pgrep", "-f", "--", command], capture_output=True).returncode == 1, command
