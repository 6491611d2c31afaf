"""Fixtures that run the real CLI: `ppsvm split`, `ppsvm entity` processes, `ppsvm coordinator ...`."""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import functools
import json
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import grpc
import numpy as np
import pytest

from ppsvm.config import FederationEntity, federation_at_addresses, load_federation
from ppsvm.coordinator.logs_seen import STATE_DIR_ENV
from ppsvm.core.randomness import record_pseudonyms
from ppsvm.data.dataset import Dataset
from ppsvm.data.partition import ID_KEY_FILE
from ppsvm.processes import EntityProcesses, read_listening_address
from ppsvm.wire.certs import DEFAULT_COORDINATOR_NAME
from ppsvm.wire.grpc_util import open_channel

REPO = Path(__file__).resolve().parents[2]
WDBC = REPO / "ppsvm" / "data" / "bundled" / "wdbc.data"
WDBC_OPTIONS = ["--label", "1", "--positive", "M", "--drop", "0", "--id-column", "0"]


@pytest.fixture(autouse=True)
def coordinator_state(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test's coordinators (in process and the CLI processes it starts) remember the release logs they saw in
    a directory of the test's own, not beside the federation file in the split directory the test inspects."""
    state = tmp_path_factory.mktemp("coordinator-state")
    monkeypatch.setenv(STATE_DIR_ENV, str(state))
    return state


def ppsvm(*args: str, check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run the ppsvm CLI in a child process, as a user would."""
    result = subprocess.run(
        [sys.executable, "-m", "ppsvm", *args], capture_output=True, text=True, timeout=timeout, cwd=REPO
    )
    if check and result.returncode != 0:
        raise AssertionError(f"ppsvm {' '.join(args)} exited {result.returncode}:\n{result.stderr}")
    return result


def rule_dataset(X: np.ndarray) -> Dataset:
    """Records r0, r1, ... with features ``X`` (m, n) and the label +1 exactly where x_0 > x_1: data of any size."""
    m, n = X.shape
    return Dataset(
        ids=np.array([f"r{k}" for k in range(m)]),
        X=X,
        y=np.where(X[:, 0] > X[:, 1], 1.0, -1.0),
        feature_names=tuple(f"x{k}" for k in range(n)),
        source="synthetic",
    )


def pseudonyms(split_dir: Path, ids: list[str]) -> list[str]:
    """What the entities of a split publish for ``ids``: their keyed pseudonyms under the split's record-id key."""
    key = bytes.fromhex((split_dir / ID_KEY_FILE).read_text().strip())
    return record_pseudonyms(key, ids)


def ppsvm_process(*args: str, stderr: int | IO[str] | None = subprocess.PIPE) -> subprocess.Popen[str]:
    """Start the ppsvm CLI as a child process, its stdout piped so a server's 'listening on' line can be read."""
    return subprocess.Popen(
        [sys.executable, "-m", "ppsvm", *args], stdout=subprocess.PIPE, stderr=stderr, text=True, cwd=REPO
    )


def start_entity_process(
    config: Path, listen: str, stderr: IO[str], name: str, timeout: float, *flags: str
) -> tuple[subprocess.Popen[str], str]:
    """``ppsvm entity --config CONFIG --listen LISTEN``, waited for until it accepts calls; the process and its address.

    Whatever stops it from starting (an exit, the timeout, an interrupt), the child is killed and reaped first.
    """
    process = ppsvm_process("entity", "--config", str(config), "--listen", listen, *flags, stderr=stderr)
    try:
        return process, read_listening_address(process, name, timeout)
    except BaseException:
        if process.poll() is None:
            process.kill()
        process.wait()
        raise


@dataclasses.dataclass
class RunningFederation:
    split_dir: Path
    federation_path: Path
    processes: EntityProcesses

    def train(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return ppsvm(
            "coordinator",
            "train",
            "--federation",
            str(self.federation_path),
            "--model-out",
            str(self.split_dir / "model.json"),
            *args,
            check=check,
        )

    def evaluate(self, *options: str) -> dict:
        out = ppsvm(
            "coordinator",
            "evaluate",
            "--federation",
            str(self.federation_path),
            "--model",
            str(self.split_dir / "model.json"),
            "--json",
            *options,
        )
        return json.loads(out.stdout.strip().splitlines()[-1])

    @contextlib.contextmanager
    def serve(self) -> Iterator[str]:
        """`coordinator serve` of the trained model on a free port; yields its address and stops it afterwards."""
        server = ppsvm_process(
            "coordinator",
            "serve",
            "--federation",
            str(self.federation_path),
            "--model",
            str(self.split_dir / "model.json"),
            "--listen",
            "127.0.0.1:0",
            stderr=subprocess.DEVNULL,
        )
        try:
            assert server.stdout is not None
            line = server.stdout.readline()
            assert line.startswith("listening on "), line
            yield line.split()[-1]
        finally:
            server.terminate()
            server.wait(timeout=30)


def coordinator_channel(federation_path: Path, entity: FederationEntity | str) -> grpc.Channel:
    """A channel to an entity (or, by name, the coordinator's prediction service) with the coordinator's TLS
    identity."""
    federation = load_federation(federation_path)
    if isinstance(entity, str):
        return open_channel(entity, tls=federation.tls, peer=DEFAULT_COORDINATOR_NAME)
    return open_channel(entity.address, tls=federation.tls, peer=entity.id)


DP_SPLIT_OPTIONS = ["--label", "1", "--positive", "M", "--id-column", "0"]


def public_and_private(tmp: Path, n_public: int) -> tuple[Path, Path]:
    """WDBC cut in two: ``n_public`` records as a public file (cell format) and the rest as a raw file to split."""
    import numpy as np

    from ppsvm.data.dataset import DatasetOptions, load_dataset

    data = load_dataset(WDBC, DatasetOptions(label=1, positive="M", drop=(0,), id_column=0))
    order = np.random.default_rng(5).permutation(len(data.y))
    public, private = order[:n_public], order[n_public:]
    public_csv = tmp / "public.csv"
    rows = [",".join(["id", "label", *data.feature_names])]
    rows += [",".join([data.ids[k], "1" if data.y[k] > 0 else "-1", *map(repr, data.X[k].tolist())]) for k in public]
    public_csv.write_text("\n".join(rows) + "\n")
    private_csv = tmp / "private.csv"  # raw, like the UCI file: id, M/B label, features (split with DP_SPLIT_OPTIONS)
    private_csv.write_text(
        "\n".join(
            ",".join([data.ids[k], "M" if data.y[k] > 0 else "B", *map(repr, data.X[k].tolist())]) for k in private
        )
        + "\n"
    )
    return public_csv, private_csv


def wine_csv(directory: Path) -> Path:
    """UCI wine (scikit-learn's copy: 178 records, 13 features, classes 0, 1, 2) as a CSV with an id column."""
    from sklearn.datasets import load_wine

    X, y = load_wine(return_X_y=True)
    path = directory / "wine.csv"
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(["id", "class", *(f"f{k}" for k in range(X.shape[1]))])
        writer.writerows([f"w{i}", int(y[i]), *map(repr, X[i].tolist())] for i in range(len(y)))
    return path


# The class numbers are the labels as they are (a regression's values to split); training classifies them.
WINE_OPTIONS = ["--header", "--id-column", "id", "--label", "class", "--task", "regress", "--test-fraction", "0.3"]


def split(tmp: Path, data: Path, rows: int, cols: int, *options: str) -> Path:
    ppsvm("split", str(data), "--rows", str(rows), "--cols", str(cols), "--out", str(tmp), *options)
    return tmp


@pytest.fixture
def federation(tmp_path: Path) -> Iterator[callable]:
    """Factory: split a dataset, start one `ppsvm entity` process per cell, yield a RunningFederation."""
    started: list[EntityProcesses] = []

    def start(
        rows: int,
        cols: int,
        data: Path = WDBC,
        options: list[str] = WDBC_OPTIONS,
        extra_config: str = "",
        prepared: Path | None = None,
        consent: bool = True,
    ) -> RunningFederation:
        """``prepared``: an existing split directory (e.g. with a deliberately broken cell) instead of a new split.

        ``consent``: every entity consents to release its kernel block on its own (privacy rule 8), as its
        operator may; these tests are about what happens with the blocks (a horizontal split's, the product
        basis's), and tests/integration/test_collusion.py checks the refusal without it. A checkerboard's
        entities combine their blocks by secure aggregation whatever this says.
        """
        split_dir = prepared or split(tmp_path / f"split-{rows}x{cols}", data, rows, cols, *options)
        planned = load_federation(split_dir / "federation.toml")
        configs = [split_dir / f"{e.id}.toml" for e in planned.entities]
        for config in configs:
            config.write_text(with_privacy_settings(config.read_text() + extra_config, consent))
        processes = EntityProcesses(configs).__enter__()
        started.append(processes)
        live = split_dir / "federation.live.toml"
        live.write_text(federation_at_addresses(planned, processes.addresses))
        return RunningFederation(split_dir, live, processes)

    yield start
    for processes in started:
        processes.stop()


def with_privacy_settings(text: str, consent: bool) -> str:
    """An entity config's text with ``consent_single_block_release`` set in its [privacy] table (made if absent)."""
    if not consent:
        return text
    line = "consent_single_block_release = true\n"
    if "\n[privacy]\n" in text:
        return text.replace("\n[privacy]\n", "\n[privacy]\n" + line, 1)
    return text + "\n[privacy]\n" + line


def without_run_details(value: Any) -> Any:
    """A reproduce JSON document minus what two identical runs may differ in: timings (every
    "seconds" key) and the software and machine it ran on."""
    if isinstance(value, dict):
        return {
            key: without_run_details(item)
            for key, item in value.items()
            if key not in ("seconds", "versions", "machine")
        }
    if isinstance(value, list):
        return [without_run_details(item) for item in value]
    return value


@dataclasses.dataclass(frozen=True)
class Postgres:
    """A throwaway PostgreSQL server: its SQLAlchemy URL (trust authentication on loopback)."""

    url: str


def _postgres_binaries() -> Path | None:
    """The directory holding initdb and pg_ctl: on PATH, or Debian's /usr/lib/postgresql/<version>/bin."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(found).parent
    candidates = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), reverse=True)
    return candidates[0].parent if candidates else None


@pytest.fixture(scope="module")
def postgres() -> Iterator[Postgres]:
    """Start PostgreSQL in a temporary directory (initdb + pg_ctl) on a free loopback port; stop and remove it after.

    Skipped, with the reason, where PostgreSQL is not installed (`.ci/run` installs Debian's `postgresql`) or
    where it cannot run (initdb refuses root: as root the server runs as the `postgres` user).
    """
    binaries = _postgres_binaries()
    if binaries is None:
        pytest.skip("PostgreSQL is not installed (Debian: apt-get install postgresql; .ci/run does this)")
    as_user: list[str] = []
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("running as root and there is no 'postgres' user for initdb to run as")
        as_user = ["runuser", "-u", "postgres", "--"]
    root = Path(tempfile.mkdtemp(prefix="ppsvm-postgres-"))
    if as_user:
        shutil.chown(root, "postgres")
    data, port = root / "data", free_port()
    log = root / "server.log"
    run = functools.partial(subprocess.run, check=True, capture_output=True, text=True, timeout=120)
    try:
        run([*as_user, str(binaries / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8"])
        options = f"-c listen_addresses=127.0.0.1 -c port={port} -c unix_socket_directories={root} -c fsync=off"
        run([*as_user, str(binaries / "pg_ctl"), "-D", str(data), "-l", str(log), "-o", options, "-w", "start"])
    except subprocess.CalledProcessError as error:
        shutil.rmtree(root, ignore_errors=True)
        pytest.fail(f"PostgreSQL did not start: {error.stderr or error.stdout}")
    try:
        yield Postgres(f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres")
    finally:
        subprocess.run([*as_user, str(binaries / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"], timeout=60)
        shutil.rmtree(root, ignore_errors=True)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
