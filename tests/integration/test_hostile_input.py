"""Hostile and malformed input against real `ppsvm entity` processes with mutual TLS.

Every case checks what applies of the issue's three properties:

- a clear error that names the file, line, column, entity or setting at fault (no traceback,
  and over gRPC a status code a caller can act on: INVALID_ARGUMENT, PERMISSION_DENIED,
  FAILED_PRECONDITION, or gRPC's own RESOURCE_EXHAUSTED for an over-size message; never
  INTERNAL or UNKNOWN);
- the entity keeps serving other calls afterwards;
- nothing is written half-way: no model file, no temporary file, no stored model.

One module-scoped 2 x 2 WDBC split and its hostile variants run as `ppsvm entity` processes for the
whole module: each variant is a copy of one of the split's entity configs (same id, certificate and
column-group secret) pointing at an edited cell, so a federation file can put it in place of the
honest entity, and `ppsvm coordinator train` runs as a process against them. Two groups run in this
process instead, to stay fast: the malformed cells go through the CLI entry point (`main`, the same
code as the console script; three of them also as real processes), and the lying entities of the
last section are in-process gRPC servers that the coordinator's own code calls.
"""

from __future__ import annotations

import csv
import dataclasses
import datetime
import io
import math
import re
import resource
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID
from threadpoolctl import threadpool_info

from ppsvm.cli import main as cli_main
from ppsvm.config import FederationEntity, federation_toml, load_entity_config, load_federation, toml_string
from ppsvm.coordinator.train import TrainOptions, train_and_save
from ppsvm.core.kernels import gaussian_fetch_width
from ppsvm.core.randomness import range_tag
from ppsvm.core.release_log import create_release_log
from ppsvm.entity.cell import EntityCore, SignedRange
from ppsvm.entity.servicer import EntityServicer
from ppsvm.errors import PpsvmError
from ppsvm.files import PRIVATE_MODE
from ppsvm.processes import EntityProcesses
from ppsvm.wire.certs import COORDINATOR, federation_parties, make_certificates
from ppsvm.wire.chunks import decode_arrays, encode_arrays
from ppsvm.wire.proto_names import KERNEL_NAMES, RECORD_SET_NAMES
from ppsvm.wire.rpc import ppsvm_pb2 as pb
from ppsvm.wire.rpc import ppsvm_pb2_grpc as pb_grpc
from ppsvm.wire.server import create_server

from ..certificates import sign_leaf
from .conftest import (
    WDBC,
    WDBC_OPTIONS,
    coordinator_channel,
    ppsvm,
    ppsvm_process,
    pseudonyms,
    split,
    with_privacy_settings,
)

TRAIN_FLAGS = ("--kernel", "gaussian", "--mbar", "5", "--nu", "1", "--mu", "0.03")
PARTIES = ("coordinator", "r0c0", "r0c1", "r1c0", "r1c1")
HEALTHY = (("r0c0", 0, 0), ("r0c1", 0, 1), ("r1c0", 1, 0), ("r1c1", 1, 1))
CALL_TIMEOUT_S = 30.0
# Status codes that tell a caller what to change; INTERNAL and UNKNOWN tell it nothing.
CLEAR_CODES = {grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.FAILED_PRECONDITION}
GRPC_MAX_MESSAGE = 4 * 1024 * 1024
OVERRIDE = "\n[privacy]\nnon_private_allow_mbar_at_least_features = true\n"

Rows = list[list[str]]


# --------------------------------------------------------------------------- cells and variants


def read_rows(path: Path) -> Rows:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.reader(handle))


def csv_text(rows: Rows) -> str:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(rows)
    return buffer.getvalue()


def set_column(rows: Rows, column: str, value: Callable[[int, str], str]) -> Rows:
    """A copy of ``rows`` with ``column`` of every record replaced by value(record index, old value)."""
    at = rows[0].index(column)
    out = [list(rows[0])]
    for k, row in enumerate(rows[1:]):
        row = list(row)
        row[at] = value(k, row[at])
        out.append(row)
    return out


def drop_column(rows: Rows, column: str) -> Rows:
    at = rows[0].index(column)
    return [row[:at] + row[at + 1 :] for row in rows]


def edit_field(rows: Rows, record: int, column: str, value: str) -> Rows:
    return set_column(rows, column, lambda k, old: value if k == record else old)


@dataclasses.dataclass(frozen=True)
class Variant:
    """An entity config copied from the split's ``base`` (same id, certificate, secret) with an edited cell.

    ``members`` replaces the config's column_block_members (needed when the variant serves in a smaller
    federation: a kernel request must relay the ranges of exactly those entities).
    """

    stem: str
    base: str
    edit: Callable[[Rows], Rows] = lambda rows: rows
    members: tuple[str, ...] | None = None
    secret_file: str | None = None
    extra: str = ""
    process: bool = True  # False: used only in-process by the hostile-entity tests


def write_variant(split_dir: Path, variant: Variant, rows: dict[str, Rows]) -> Path:
    edited = variant.edit(rows[variant.base])
    (split_dir / f"{variant.stem}.csv").write_text(csv_text(edited), encoding="utf-8")
    text = (split_dir / f"{variant.base}.toml").read_text(encoding="utf-8")
    if edited[0] != rows[variant.base][0]:
        # Without the split's schema (and its declared bounds): the edited cell's own header says which columns
        # are features.
        text = text.split("\n[[schema.features]]")[0]
    text = re.sub(r"(?m)^data = .*$", f"data = {toml_string(variant.stem + '.csv')}", text)
    if variant.members is not None:
        text = re.sub(
            r"(?m)^column_block_members = .*$",
            "column_block_members = [" + ", ".join(toml_string(m) for m in variant.members) + "]",
            text,
        )
    if variant.secret_file is not None:
        text = re.sub(r"(?m)^secret_file = .*$", f"secret_file = {toml_string(variant.secret_file)}", text)
    # Each variant is an entity of its own (its cell differs), so it keeps its own release log and basis pin.
    log = f"{variant.stem}.releases.jsonl"
    extra = variant.extra if "[privacy]" in variant.extra else variant.extra + "\n[privacy]\n"
    config = split_dir / f"{variant.stem}.toml"
    # These entities take malformed and hostile requests, not the collusion of tests/integration/test_collusion.py:
    # each consents to blocks on their own (privacy rule 8), so hand-made requests without a nonce are served.
    consent = "consent_single_block_release = true\n"
    config.write_text(text + extra + f"release_log = {toml_string(log)}\n{consent}", encoding="utf-8")
    create_release_log(split_dir / log, load_entity_config(config).id)
    return config


def first_id(rows: Rows) -> str:
    return rows[1][0]


def flip_first_label(rows: Rows) -> Rows:
    return edit_field(rows, 0, "label", "1" if rows[1][rows[0].index("label")].strip() in ("-1", "-1.0") else "-1")


# --------------------------------------------------------------------------- the running grid


@dataclasses.dataclass
class Grid:
    split_dir: Path
    addresses: dict[str, str]  # config stem -> address of its running process
    entity_of: dict[str, str]  # config stem -> entity id
    task: dict[str, Any]

    def coordinator_tls(self) -> dict[str, str]:
        return {
            "ca": str(self.split_dir / "ca.pem"),
            "cert": str(self.split_dir / "coordinator.pem"),
            "key": str(self.split_dir / "coordinator.key"),
        }

    def federation(self, name: str, cells: tuple[tuple[str, int, int], ...], tls: dict[str, str] | None = None) -> Path:
        """A federation file of (config stem, row block, column block) cells; the coordinator's TLS unless ``tls``."""
        entities = [FederationEntity(self.entity_of[stem], self.addresses[stem], i, j) for stem, i, j in cells]
        path = self.split_dir / f"{name}.federation.toml"
        path.write_text(federation_toml(self.task, entities, tls or self.coordinator_tls()), encoding="utf-8")
        return path

    def channel(self, stem: str) -> grpc.Channel:
        """A channel to a running variant with the coordinator's TLS identity (conftest's coordinator_channel)."""
        path = self.split_dir / f"channel-{stem}.federation.toml"
        if not path.exists():
            self.federation(f"channel-{stem}", ((stem, 0, 0),))
        return coordinator_channel(path, load_federation(path).entities[0])

    def assert_serving(self, *stems: str) -> None:
        """Every named entity still answers a Metadata call (and a Records stream) from the coordinator."""
        for stem in stems:
            with self.channel(stem) as channel:
                stub = pb_grpc.EntityStub(channel)
                assert stub.Metadata(pb.Empty(), timeout=CALL_TIMEOUT_S).entity_id == self.entity_of[stem]
                assert "train_ids" in decode_arrays(stub.Records(pb.Empty(), timeout=CALL_TIMEOUT_S))

    def snapshot(self) -> dict[str, int]:
        """Every file of the split directory with its modification time (to prove nothing was written).

        Release logs and their head files are left out: the entities record what they released before the refusal
        (ids, ranges)."""
        return {
            path.name: path.stat().st_mtime_ns
            for path in self.split_dir.iterdir()
            if not path.name.endswith((".federation.toml", ".releases.jsonl", ".releases.jsonl.head"))
        }

    def train(self, federation: Path, *flags: str) -> tuple[subprocess.CompletedProcess[str], Path]:
        model = self.split_dir / f"{federation.name.split('.')[0]}.model.json"
        result = ppsvm(
            "coordinator", "train", "--federation", str(federation), "--model-out", str(model), *flags, check=False
        )
        return result, model


def reissue_certificates(split_dir: Path) -> None:
    """Replace the split's CA with one whose key the tests keep (as `ppsvm certs --overwrite` would)."""
    for filename, pem in make_certificates(federation_parties(PARTIES[0], PARTIES[1:])).items():
        path = split_dir / filename
        path.write_bytes(pem.text)
        if pem.secret:
            path.chmod(PRIVATE_MODE)


VARIANTS = (
    # labels that disagree: r1c1 flips the label of its first record
    Variant("r1c1-flipped", "r1c1", flip_first_label),
    # a column block whose entities hold different feature counts: r1c0 loses its last feature
    Variant("r1c0-narrow", "r1c0", lambda rows: [row[:-1] for row in rows]),
    # a column-group secret that is not the block's
    Variant("r1c1-foreign-secret", "r1c1", secret_file="foreign.secret"),
    # single-class labels: every label +1 (alone in a 1 x 1 federation)
    Variant("r0c0-positive", "r0c0", lambda rows: set_column(rows, "label", lambda k, old: "1"), members=("r0c0",)),
    # no label column anywhere in the row block (alone in a 1 x 1 federation)
    Variant("r0c0-unlabelled", "r0c0", lambda rows: drop_column(rows, "label"), members=("r0c0",)),
    # r1c0 names its first record with an id that r0c0 also holds (two row blocks, one column block)
    Variant("r1c0-dupe", "r1c0"),  # its edit is set in the fixture, once r0c0's ids are known
    # the non-private override: nothing but the request bounds mbar
    Variant("r0c0-override", "r0c0", members=("r0c0",), extra=OVERRIDE),
    # in-process only: the honest cell alone in its column block, and one with 0/1 labels
    Variant("r0c0-solo", "r0c0", members=("r0c0",), process=False),
    Variant(
        "r0c0-zero-one",
        "r0c0",
        lambda rows: set_column(rows, "label", lambda k, old: "0" if old.startswith("-") else "1"),
        members=("r0c0",),
        process=False,
    ),
)


def limit_address_space(pid: int, headroom: int = 2 << 30) -> None:
    """Cap a process's virtual memory a little above its current size, so an absurd allocation fails fast
    with MemoryError on any machine (whatever its overcommit policy) instead of swapping it to death."""
    status = Path(f"/proc/{pid}/status").read_text().splitlines()
    size_kib = next(int(line.split()[1]) for line in status if line.startswith("VmSize:"))
    limit = size_kib * 1024 + headroom
    resource.prlimit(pid, resource.RLIMIT_AS, (limit, limit))


@pytest.fixture(scope="module")
def grid(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Grid]:
    """The 2 x 2 WDBC split, re-certified with a CA key the tests hold, and every variant, all running."""
    split_dir = split(tmp_path_factory.mktemp("hostile") / "split", WDBC, 2, 2, *WDBC_OPTIONS)
    reissue_certificates(split_dir)
    (split_dir / "foreign.secret").write_text("ab" * 32 + "\n")
    rows = {entity_id: read_rows(split_dir / f"{entity_id}.csv") for entity_id in ("r0c0", "r0c1", "r1c0", "r1c1")}
    # The dupe variant takes r0c0's first record id.
    dupe = first_id(rows["r0c0"])
    variants = [
        dataclasses.replace(v, edit=lambda r, d=dupe: edit_field(r, 0, "id", d)) if v.stem == "r1c0-dupe" else v
        for v in VARIANTS
    ]
    configs = {entity_id: split_dir / f"{entity_id}.toml" for entity_id in rows}
    configs |= {v.stem: write_variant(split_dir, v, rows) for v in variants}
    for entity_id in rows:  # after the variants, which copy these configs and add a [privacy] table of their own
        configs[entity_id].write_text(with_privacy_settings(configs[entity_id].read_text(), consent=True))
    started = [stem for stem in configs if stem in rows or next(v for v in variants if v.stem == stem).process]
    entity_of = {stem: load_entity_config(configs[stem]).id for stem in configs}
    with EntityProcesses([configs[stem] for stem in started]) as running:
        override = running.processes[started.index("r0c0-override")]
        limit_address_space(override.pid)
        task = {"task": "classify", "kernel": "gaussian"}
        yield Grid(split_dir, dict(zip(started, running.addresses, strict=True)), entity_of, task)


def case_ids(cases: list[Any]) -> list[str]:
    """Each case's first value (its name) as its test id, whether a plain tuple or a pytest.param."""
    return [str((case.values if hasattr(case, "values") else case)[0]) for case in cases]


def assert_clear_cli_failure(result: subprocess.CompletedProcess[str], *fragments: str) -> None:
    """Exit status 1, one `ppsvm: error:` line holding every fragment, no traceback."""
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    assert "ppsvm: error:" in result.stderr, result.stderr
    for fragment in fragments:
        assert fragment in result.stderr, (fragment, result.stderr)


# --------------------------------------------------------------------------- malformed cells: the entity does not start


def _cell_case(edit: Callable[[Rows], Rows] | None = None, raw: bytes | None = None) -> Callable[[Rows], bytes]:
    """How a broken cell is made: r0c0's rows edited, or fixed bytes."""

    def make(rows: Rows) -> bytes:
        if raw is not None:
            return raw
        assert edit is not None
        return csv_text(edit(rows)).encode("utf-8")

    return make


def _ragged(rows: Rows, record: int, extra: bool) -> Rows:
    out = [list(row) for row in rows]
    out[record + 1] = out[record + 1] + ["7"] if extra else out[record + 1][:-1]
    return out


# (case, how the cell is made from r0c0's rows, fragments the error must hold besides the cell's path)
BROKEN_CELLS: list[Any] = [
    (
        "nan-feature",
        _cell_case(lambda r: edit_field(r, 3, "x5", "nan")),
        ["line 5", "column 'x5'", "'nan' is not a finite number"],
    ),
    (
        "inf-feature",
        _cell_case(lambda r: edit_field(r, 0, "x9", "inf")),
        ["line 2", "column 'x9'", "'inf' is not a finite number"],
    ),
    (
        "overflowing-feature",
        _cell_case(lambda r: edit_field(r, 1, "x2", "1e309")),
        ["line 3", "column 'x2'", "not a finite number"],
    ),
    (
        "non-numeric-feature",
        _cell_case(lambda r: edit_field(r, 2, "x2", "abc")),
        ["line 4", "column 'x2'", "'abc' is not a number"],
    ),
    (
        "empty-feature",
        _cell_case(lambda r: edit_field(r, 2, "x3", "")),
        ["line 4", "column 'x3'", "'' is not a number"],
    ),
    (
        "nan-label",
        _cell_case(lambda r: edit_field(r, 4, "label", "NaN")),
        ["line 6", "column 'label'", "not a finite number"],
    ),
    (
        "non-numeric-label",
        _cell_case(lambda r: edit_field(r, 4, "label", "M")),
        ["line 6", "column 'label'", "'M' is not a number"],
    ),
    (
        "missing-id-column",
        _cell_case(lambda r: drop_column(r, "id")),
        ["line 1", "the first column must be 'id', got 'label'"],
    ),
    ("empty-id", _cell_case(lambda r: edit_field(r, 5, "id", " ")), ["line 7", "column 'id'", "empty record id"]),
    (
        "duplicate-id",
        _cell_case(lambda r: edit_field(r, 9, "id", first_id(r))),
        ["line 11", "duplicate record id", "first on line 2"],
    ),
    ("short-row", _cell_case(lambda r: _ragged(r, 6, extra=False)), ["line 8", "17 fields, the header has 18"]),
    ("long-row", _cell_case(lambda r: _ragged(r, 6, extra=True)), ["line 8", "19 fields, the header has 18"]),
    (
        "bad-split-value",
        _cell_case(lambda r: edit_field(r, 0, "split", "validate")),
        ["line 2", "column 'split'", "'validate'"],
    ),
    ("empty-file", _cell_case(raw=b""), ["empty file"]),
    ("header-only", _cell_case(lambda r: r[:1]), ["no records (the source is empty)"]),
    ("blank-lines-only", _cell_case(raw=b"id,label,split,x1\n\n\n  \n"), ["no records (the source is empty)"]),
    (
        "only-held-out-records",
        _cell_case(lambda r: set_column(r, "split", lambda k, old: "test")),
        ["every record is marked 'test'"],
    ),
    pytest.param(
        "not-utf8",
        _cell_case(raw=b"id,label,split,x1\nJos\xe9,1,train,2.0\n"),
        ["line 2", "UTF-8"],
    ),
    pytest.param(
        "oversized-field",
        _cell_case(raw=b"id,label,split,x1\na,1,train," + b"1" * 200_000 + b"\n"),
        ["line 2", "not readable as CSV"],
    ),
    # a line of millions of short fields, which the csv module read whole (a 2 GB one: MemoryError)
    pytest.param(
        "line-over-1-mib",
        _cell_case(raw=b"id,label,split,x1\na,1,train,1\nb,1,train," + b"1," * 600_000 + b"1\n"),
        ["line 3 is longer than 1,048,576 characters"],
    ),
]


@pytest.fixture(scope="module")
def broken_cells(grid: Grid, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding, for every case of BROKEN_CELLS, its cell and an entity config (r0c0's) that reads it."""
    rows = read_rows(grid.split_dir / "r0c0.csv")
    directory = tmp_path_factory.mktemp("broken-cells")
    (directory / "column-block-0.secret").write_text((grid.split_dir / "column-block-0.secret").read_text())
    # Without the split's schema: these cells test the cell CSV reader, line by line.
    base = (grid.split_dir / "r0c0.toml").read_text(encoding="utf-8").split("\n[[schema.features]]")[0]
    base = re.sub(
        r'(?m)^(ca|cert|key) = "(.*)"$', lambda m: f"{m[1]} = {toml_string(str(grid.split_dir / m[2]))}", base
    )
    for case in BROKEN_CELLS:
        name, make, _ = case.values if hasattr(case, "values") else case
        (directory / f"{name}.csv").write_bytes(make(rows))
        (directory / f"{name}.toml").write_text(
            re.sub(r"(?m)^data = .*$", f'data = "{name}.csv"', base), encoding="utf-8"
        )
    return directory


@pytest.mark.parametrize(("case", "make", "fragments"), BROKEN_CELLS, ids=case_ids(BROKEN_CELLS))
def test_malformed_cell_stops_the_entity_naming_file_line_and_column(
    broken_cells: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    case: str,
    make: Callable[[Rows], bytes],
    fragments: list[str],
) -> None:
    """`ppsvm entity` (its CLI entry point, in this process: the same code as the console script) over a malformed
    cell returns 1 before listening, with one error line naming the cell file and the line/column at fault, and
    writes nothing next to the cell."""
    before = sorted(broken_cells.iterdir())
    served = threading.Event()
    served.set()  # an entity that did start would stop at once (and fail below) rather than serve forever
    monkeypatch.setattr("ppsvm.entity.server.stop_on_signals", lambda: served)
    blas_before = [pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"]
    status = cli_main(["entity", "--config", str(broken_cells / f"{case}.toml"), "--listen", "127.0.0.1:0"])
    out, err = capsys.readouterr()
    assert status == 1 and "listening on" not in out
    # --blas-threads applies while serving only: a caller's own linear algebra keeps its threads.
    assert [pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"] == blas_before
    assert f"ppsvm: error: {broken_cells / case}.csv" in err, err
    for fragment in fragments:
        assert fragment in err, (fragment, err)
    assert sorted(broken_cells.iterdir()) == before


def test_malformed_cell_entity_process_exits_1_without_listening(broken_cells: Path) -> None:
    """The same as real `ppsvm entity` processes, for four kinds of fault (a value, an id, an empty file, a line too
    long to read): exit status 1, the error line, no traceback, never `listening on`."""
    cases = {
        "nan-feature": "'nan' is not a finite number",
        "duplicate-id": "duplicate record id",
        "empty-file": "empty file",
        "line-over-1-mib": "line 3 is longer than 1,048,576 characters",
    }
    processes = {
        case: ppsvm_process("entity", "--config", str(broken_cells / f"{case}.toml"), "--listen", "127.0.0.1:0")
        for case in cases
    }
    try:
        for case, process in processes.items():
            out, err = process.communicate(timeout=120)
            assert process.returncode == 1 and "listening on" not in out, (case, err)
            assert (
                "Traceback" not in err and f"ppsvm: error: {broken_cells / case}.csv" in err and cases[case] in err
            ), err
    finally:
        for process in processes.values():
            if process.poll() is None:
                process.kill()
                process.wait()


# --------------------------------------------------------------------------- federations the coordinator must refuse


def _swapped_row_blocks() -> tuple[tuple[str, int, int], ...]:
    return (("r0c0", 0, 0), ("r1c1", 0, 1), ("r1c0", 1, 0), ("r0c1", 1, 1))


@dataclasses.dataclass(frozen=True)
class FirstIdOf:
    """An expected message fragment known only once the split exists: the pseudonym of the first record id of an
    entity's cell (the coordinator never sees the id itself)."""

    entity_id: str

    def resolve(self, grid: Grid) -> str:
        return pseudonyms(grid.split_dir, [first_id(read_rows(grid.split_dir / f"{self.entity_id}.csv"))])[0]


REFUSED_FEDERATIONS: list[Any] = [
    # ids that differ across the column blocks of a row block: r0c1 and r1c1 swap row blocks
    ("ids-differ", _swapped_row_blocks(), ["row block 0: entities r0c0 and r1c1 share no train records"]),
    (
        "labels-disagree",
        (("r0c0", 0, 0), ("r0c1", 0, 1), ("r1c0", 1, 0), ("r1c1-flipped", 1, 1)),
        ["row block 1: entities r1c0 and r1c1 disagree on the labels of", FirstIdOf("r1c1")],
    ),
    (
        "widths-differ",
        (("r0c0", 0, 0), ("r0c1", 0, 1), ("r1c0-narrow", 1, 0), ("r1c1", 1, 1)),
        ["column block 0: entities hold different feature counts {'r0c0': 15, 'r1c0': 14}"],
    ),
    (
        "foreign-secret",
        (("r0c0", 0, 0), ("r0c1", 0, 1), ("r1c0", 1, 0), ("r1c1-foreign-secret", 1, 1)),
        ["column block 1", "different column-group secrets", "r0c1", "r1c1"],
    ),
    ("no-labels", (("r0c0-unlabelled", 0, 0),), ["row block 0: no entity holds labels for its records"]),
    pytest.param(
        "single-class",
        (("r0c0-positive", 0, 0),),
        ["needs both classes"],
    ),
    pytest.param(
        "id-in-two-row-blocks",
        (("r0c0", 0, 0), ("r1c0-dupe", 1, 0)),
        [FirstIdOf("r0c0"), "r0c0", "r1c0"],
    ),
]


@pytest.mark.parametrize(("name", "cells", "fragments"), REFUSED_FEDERATIONS, ids=case_ids(REFUSED_FEDERATIONS))
def test_inconsistent_federation_is_refused_and_entities_keep_serving(
    grid: Grid,
    name: str,
    cells: tuple[tuple[str, int, int], ...],
    fragments: list[str | FirstIdOf],
) -> None:
    """`ppsvm coordinator train` over entities whose cells disagree exits 1 naming the entities (and the records)
    at fault, writes no model and no file at all, and every entity involved still answers afterwards."""
    federation = grid.federation(name, cells)
    before = grid.snapshot()
    result, model = grid.train(federation, *TRAIN_FLAGS)
    expected = [f.resolve(grid) if isinstance(f, FirstIdOf) else f for f in fragments]
    assert_clear_cli_failure(result, *expected)
    assert not model.exists()
    assert grid.snapshot() == before
    grid.assert_serving(*(stem for stem, _, _ in cells))


# --------------------------------------------------------------------------- absurd requests over TLS


def signed_range(grid: Grid, stem: str) -> pb.SignedRange:
    with grid.channel(stem) as channel:
        bounds = decode_arrays(pb_grpc.EntityStub(channel).FeatureRange(pb.Empty(), timeout=CALL_TIMEOUT_S))
    return pb.SignedRange(
        entity_id=grid.entity_of[stem], low=bounds["low"], high=bounds["high"], tag=str(bounds["tag"][0])
    )


def r0c0_train_ids(grid: Grid) -> list[str]:
    rows = read_rows(grid.split_dir / "r0c0.csv")
    return [row[0] for row in rows[1:] if row[rows[0].index("split")] == "train"]


def honest_request(grid: Grid) -> pb.KernelRequest:
    """What the coordinator would ask r0c0 (15 of 30 features): Gaussian at the one width a coordinator fetches (the
    entity pins its first view, and the healthy training at the end asks the same), mbar 5 (the pin covers the
    largest mbar, and that training asks for 5), its column block's signed ranges."""
    ranges = [signed_range(grid, "r0c0"), signed_range(grid, "r1c0")]
    return pb.KernelRequest(
        kernel=pb.GAUSSIAN, mbar=5, mu=gaussian_fetch_width(30), scaling=pb.Scaling(ranges=ranges), record_set=pb.TRAIN
    )


def _with(**changes: Any) -> Callable[[pb.KernelRequest], pb.KernelRequest]:
    def change(request: pb.KernelRequest) -> pb.KernelRequest:
        changed = pb.KernelRequest()
        changed.CopyFrom(request)
        for field, value in changes.items():
            if field == "ids":
                changed.ids.CopyFrom(pb.RecordIds(ids=value))
            elif field == "ranges":
                del changed.scaling.ranges[:]
                changed.scaling.ranges.extend(value(request.scaling.ranges))
            else:
                setattr(changed, field, value)
        return changed

    return change


def _narrowed(ranges: Any) -> list[pb.SignedRange]:
    first = pb.SignedRange()
    first.CopyFrom(ranges[0])
    del first.low[-1], first.high[-1]
    return [first, *ranges[1:]]


def _nan_range(ranges: Any) -> list[pb.SignedRange]:
    first = pb.SignedRange()
    first.CopyFrom(ranges[0])
    first.low[0] = math.nan
    return [first, *ranges[1:]]


ABSURD_KERNEL_REQUESTS: list[Any] = [
    ("mbar-2**31", _with(mbar=2**31), grpc.StatusCode.PERMISSION_DENIED, "refuses mbar = 2147483648"),
    ("mbar-uint32-max", _with(mbar=2**32 - 1), grpc.StatusCode.PERMISSION_DENIED, "privacy rule 3 needs mbar <= 14"),
    ("mbar-zero", _with(mbar=0), grpc.StatusCode.PERMISSION_DENIED, "mbar must be >= 1, got 0"),
    pytest.param("mu-nan", _with(mu=math.nan), grpc.StatusCode.INVALID_ARGUMENT, "mu"),
    pytest.param("mu-negative", _with(mu=-1.0), grpc.StatusCode.INVALID_ARGUMENT, "mu"),
    pytest.param("mu-zero", _with(mu=0.0), grpc.StatusCode.INVALID_ARGUMENT, "mu"),
    pytest.param("mu-inf", _with(mu=math.inf), grpc.StatusCode.INVALID_ARGUMENT, "mu"),
    ("kernel-enum-7", _with(kernel=7), grpc.StatusCode.INVALID_ARGUMENT, "kernel must be LINEAR or GAUSSIAN"),
    (
        "kernel-unspecified",
        _with(kernel=pb.KERNEL_UNSPECIFIED),
        grpc.StatusCode.INVALID_ARGUMENT,
        "kernel must be LINEAR or GAUSSIAN",
    ),
    ("record-set-enum-9", _with(record_set=9), grpc.StatusCode.INVALID_ARGUMENT, "record_set must be TRAIN or TEST"),
    (
        "record-set-unspecified",
        _with(record_set=pb.RECORD_SET_UNSPECIFIED),
        grpc.StatusCode.INVALID_ARGUMENT,
        "record_set must be TRAIN or TEST",
    ),
    (
        "no-records",
        lambda r: pb.KernelRequest(kernel=r.kernel, mbar=r.mbar, mu=r.mu, scaling=r.scaling),
        grpc.StatusCode.INVALID_ARGUMENT,
        "name a record set or record ids",
    ),
    (
        "5000-unknown-ids",
        _with(ids=[f"nobody-{k}" for k in range(5000)]),
        grpc.StatusCode.INVALID_ARGUMENT,
        "unknown record id(s) 'nobody-0', 'nobody-1', 'nobody-2', 'nobody-3', 'nobody-4' ... (5000 of 5000)",
    ),
    ("empty-id", _with(ids=[""]), grpc.StatusCode.INVALID_ARGUMENT, "unknown record id(s) '' (1 of 1)"),
    ("ids-over-4-MB", _with(ids=["x" * 1000] * 5000), grpc.StatusCode.RESOURCE_EXHAUSTED, "larger than max"),
    (
        "no-scaling",
        _with(ranges=lambda ranges: []),
        grpc.StatusCode.PERMISSION_DENIED,
        "exactly the column block's entities",
    ),
    (
        "range-of-14-features",
        _with(ranges=_narrowed),
        grpc.StatusCode.INVALID_ARGUMENT,
        "holds 15 features; the range of r0c0 has 14",
    ),
    ("nan-in-relayed-range", _with(ranges=_nan_range), grpc.StatusCode.PERMISSION_DENIED, "does not carry a valid tag"),
]


@pytest.mark.parametrize(
    ("case", "change", "code", "fragment"), ABSURD_KERNEL_REQUESTS, ids=case_ids(ABSURD_KERNEL_REQUESTS)
)
def test_absurd_kernel_request_gets_a_clear_status_and_the_entity_keeps_serving(
    grid: Grid,
    case: str,
    change: Callable[[pb.KernelRequest], pb.KernelRequest],
    code: grpc.StatusCode,
    fragment: str,
) -> None:
    """A KernelBlock request with an absurd value, sent over the coordinator's TLS channel, is refused with a
    status a caller can act on and a message naming the value; the entity then answers the honest request."""
    honest = honest_request(grid)
    with grid.channel("r0c0") as channel:
        stub = pb_grpc.EntityStub(channel)
        with pytest.raises(grpc.RpcError) as refused:
            list(stub.KernelBlock(change(honest), timeout=CALL_TIMEOUT_S))
        assert refused.value.code() is code, (refused.value.code(), refused.value.details())
        assert fragment in refused.value.details(), refused.value.details()
        assert len(refused.value.details()) < 1000  # a bounded message, whatever the request's size
        assert decode_arrays(stub.KernelBlock(honest, timeout=CALL_TIMEOUT_S))["kernel"].shape == (
            len(r0c0_train_ids(grid)),
            honest.mbar,
        )
    grid.assert_serving("r0c0")


def test_absurd_mbar_on_an_entity_with_the_override(grid: Grid) -> None:
    """With the rule-3 override nothing but the request bounds mbar: 2**31 random points must be refused by size
    (the process runs under an address-space cap, so the attempt fails fast), and the entity keeps serving."""
    own = signed_range(grid, "r0c0-override")
    request = pb.KernelRequest(
        kernel=pb.GAUSSIAN,
        mbar=2**31,
        mu=gaussian_fetch_width(15),
        scaling=pb.Scaling(ranges=[own]),
        record_set=pb.TRAIN,
    )
    try:
        with grid.channel("r0c0-override") as channel:
            with pytest.raises(grpc.RpcError) as refused:
                list(pb_grpc.EntityStub(channel).KernelBlock(request, timeout=CALL_TIMEOUT_S))
        assert refused.value.code() in CLEAR_CODES | {grpc.StatusCode.RESOURCE_EXHAUSTED}, refused.value.details()
        assert "mbar" in refused.value.details()
    finally:
        grid.assert_serving("r0c0-override")


def test_stream_cancelled_by_the_caller_leaves_the_entity_serving(grid: Grid) -> None:
    """A KernelBlock stream the caller abandons after its first chunk (a truncated stream, seen from the entity)
    does not wedge the entity: the same request is then answered in full."""
    # ~5.2 MB: five ~1 MiB messages, so most of the stream is still unsent (HTTP/2 flow control) when the caller
    # cancels after the first. Repeated ids are refused, so the size comes from mbar, which only the entity with
    # the rule-3 override serves beyond n_j.
    rows = len(r0c0_train_ids(grid))
    mbar = -(-5_200_000 // (8 * rows))
    request = pb.KernelRequest(
        kernel=pb.GAUSSIAN,
        mbar=mbar,
        mu=gaussian_fetch_width(15),
        record_set=pb.TRAIN,
        scaling=pb.Scaling(ranges=[signed_range(grid, "r0c0-override")]),
    )
    with grid.channel("r0c0-override") as channel:
        stub = pb_grpc.EntityStub(channel)
        call = stub.KernelBlock(request, timeout=CALL_TIMEOUT_S)
        next(call)
        call.cancel()
        with pytest.raises(grpc.RpcError) as cancelled:
            list(call)
        assert cancelled.value.code() is grpc.StatusCode.CANCELLED
        assert decode_arrays(stub.KernelBlock(request, timeout=CALL_TIMEOUT_S))["kernel"].shape == (rows, mbar)
    grid.assert_serving("r0c0-override")


ABSURD_BASELINES: list[Any] = [
    ("task-bogus", dict(task="cluster", kernel=pb.LINEAR, nu=1.0), "task must be classify or regress"),
    ("kernel-enum-9", dict(task="classify", kernel=9, nu=1.0), "kernel LINEAR or GAUSSIAN"),
    pytest.param("nu-nan", dict(task="classify", kernel=pb.GAUSSIAN, nu=math.nan, mu=0.1), "nu"),
    pytest.param("nu-negative", dict(task="classify", kernel=pb.GAUSSIAN, nu=-1.0, mu=0.1), "nu"),
    pytest.param("nu-inf", dict(task="classify", kernel=pb.GAUSSIAN, nu=math.inf, mu=0.1), "nu"),
    pytest.param("mu-negative", dict(task="classify", kernel=pb.GAUSSIAN, nu=1.0, mu=-1.0), "mu"),
    pytest.param("mu-inf", dict(task="classify", kernel=pb.GAUSSIAN, nu=1.0, mu=math.inf), "mu"),
]


@pytest.mark.parametrize(("case", "fields", "fragment"), ABSURD_BASELINES, ids=case_ids(ABSURD_BASELINES))
def test_absurd_baseline_request_gets_a_clear_status(
    grid: Grid, case: str, fields: dict[str, Any], fragment: str
) -> None:
    """LocalBaseline with a setting that cannot be trained with is refused as INVALID_ARGUMENT naming the setting."""
    with grid.channel("r0c0") as channel:
        with pytest.raises(grpc.RpcError) as refused:
            pb_grpc.EntityStub(channel).LocalBaseline(pb.BaselineRequest(seed=0, **fields), timeout=CALL_TIMEOUT_S)
    assert refused.value.code() is grpc.StatusCode.INVALID_ARGUMENT, (refused.value.code(), refused.value.details())
    assert fragment in refused.value.details()
    grid.assert_serving("r0c0")


def test_baseline_on_a_single_class_cell(grid: Grid) -> None:
    """An entity whose labels are all +1 cannot train alone: FAILED_PRECONDITION or INVALID_ARGUMENT naming it."""
    with grid.channel("r0c0-positive") as channel:
        with pytest.raises(grpc.RpcError) as refused:
            request = pb.BaselineRequest(task="classify", kernel=pb.LINEAR, nu=1.0)
            pb_grpc.EntityStub(channel).LocalBaseline(request, timeout=CALL_TIMEOUT_S)
    grid.assert_serving("r0c0-positive")
    assert refused.value.code() in CLEAR_CODES, (refused.value.code(), refused.value.details())
    assert "r0c0" in refused.value.details()


def _model_json(**replace: str) -> bytes:
    text = (
        '{"format": "ppsvm-model", "version": 1, "task": "classify", "kernel": "gaussian", '
        '"mu": 0.5, "nu": 2.0, "mbar": 2, '
        '"u": [0.25, -1.5], "gamma": 0.125, "private": true, '
        '"scaling": [{"column_block": 0, "low": [0.0], "high": [1.0]}], '
        '"entities": [{"id": "r0c0", "row_block": 0, "column_block": 0}], "training": {}}'
    )
    for old, new in replace.items():
        text = text.replace(f'"{old}": 0.125', f'"{old}": {new}')
    return text.encode()


HOSTILE_MODELS: list[Any] = [
    ("not-utf8", lambda: b"\xff\xfe{}", grpc.StatusCode.FAILED_PRECONDITION, "not UTF-8"),
    ("not-json", lambda: b"model, please", grpc.StatusCode.FAILED_PRECONDITION, "is not a ppsvm model file"),
    ("other-format", lambda: b'{"format": "onnx"}', grpc.StatusCode.FAILED_PRECONDITION, "not a ppsvm model file"),
    ("over-4-MB", lambda: b" " * (GRPC_MAX_MESSAGE + 1), grpc.StatusCode.RESOURCE_EXHAUSTED, "larger than max"),
    pytest.param(
        "nested-100000-deep", lambda: b"[" * 100_000 + b"]" * 100_000, grpc.StatusCode.FAILED_PRECONDITION, "model"
    ),
    pytest.param("gamma-a-string", lambda: _model_json(gamma='"x"'), grpc.StatusCode.FAILED_PRECONDITION, "gamma"),
    pytest.param("gamma-null", lambda: _model_json(gamma="null"), grpc.StatusCode.FAILED_PRECONDITION, "gamma"),
]


@pytest.mark.parametrize(("case", "payload", "code", "fragment"), HOSTILE_MODELS, ids=case_ids(HOSTILE_MODELS))
def test_hostile_model_is_refused_and_nothing_is_stored(
    grid: Grid,
    case: str,
    payload: Callable[[], bytes],
    code: grpc.StatusCode,
    fragment: str,
) -> None:
    """AcceptModel with bytes that are not a valid model is refused with a clear status, the entity stores
    nothing (its directory is unchanged) and keeps serving."""
    before = grid.snapshot()
    with grid.channel("r0c0") as channel:
        with pytest.raises(grpc.RpcError) as refused:
            pb_grpc.EntityStub(channel).AcceptModel(pb.ModelMessage(model_json=payload()), timeout=CALL_TIMEOUT_S)
    assert grid.snapshot() == before
    grid.assert_serving("r0c0")
    assert refused.value.code() is code, (refused.value.code(), refused.value.details())
    assert fragment in refused.value.details()


# --------------------------------------------------------------------------- certificates


def bad_certificate(split_dir: Path, name: str, kind: str) -> tuple[bytes, bytes, bytes]:
    """(CA, certificate, key) for ``name``: signed by the federation CA but expired, or all from a foreign CA."""
    if kind == "foreign":
        foreign = make_certificates({name: (COORDINATOR,)})
        return foreign["ca.pem"].text, foreign[f"{name}.pem"].text, foreign[f"{name}.key"].text
    ca_pem = (split_dir / "ca.pem").read_bytes()
    cert_pem, key_pem = sign_leaf(
        (split_dir / "ca.key").read_bytes(),
        ca_pem,
        name,
        datetime.datetime(2021, 3, 1, tzinfo=datetime.UTC),
        [x509.DNSName(name)],
        [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH],
    )
    return ca_pem, cert_pem, key_pem


@pytest.mark.parametrize(
    ("kind", "fragments"),
    [
        ("expired", ["[tls]: the certificate in cert file expired on 2021-03-02"]),
        ("foreign", ["TLS handshake failed", "entity r0c0", "entity r1c1"]),
    ],
    ids=["expired", "foreign"],
)
def test_expired_or_foreign_coordinator_certificate(
    grid: Grid, tmp_path: Path, kind: str, fragments: list[str]
) -> None:
    """A coordinator certificate named 'coordinator' that expired (signed by the federation CA) or comes from a
    foreign CA: the CLI refuses with a message naming the problem (and the entities) and writes no model; an
    entity offered the certificate directly, past the coordinator's own checks, refuses the handshake; it keeps
    serving the rightful coordinator."""
    ca, cert, key = bad_certificate(grid.split_dir, "coordinator", kind)
    tls = {"ca": tmp_path / "ca.pem", "cert": tmp_path / "coordinator.pem", "key": tmp_path / "coordinator.key"}
    for name, pem in zip(tls, (ca, cert, key), strict=True):
        tls[name].write_bytes(pem)
    federation = grid.federation(f"cert-{kind}", HEALTHY, tls={name: str(path) for name, path in tls.items()})
    before = grid.snapshot()
    result, model = grid.train(federation, *TRAIN_FLAGS, "--deadline", "20")
    assert_clear_cli_failure(result, *fragments)
    assert not model.exists() and grid.snapshot() == before
    # The entity's own check: the federation CA as the trust root, the bad certificate as the client's.
    credentials = grpc.ssl_channel_credentials(
        root_certificates=(grid.split_dir / "ca.pem").read_bytes(), private_key=key, certificate_chain=cert
    )
    with grpc.secure_channel(
        grid.addresses["r0c0"], credentials, options=[("grpc.ssl_target_name_override", "r0c0")]
    ) as channel:
        with pytest.raises(grpc.RpcError) as refused:
            pb_grpc.EntityStub(channel).Metadata(pb.Empty(), timeout=CALL_TIMEOUT_S)
    assert refused.value.code() is grpc.StatusCode.UNAVAILABLE, refused.value.details()
    grid.assert_serving(*(stem for stem, _, _ in HEALTHY))


# ---------------------------------------------------------------------- a lying or broken entity (coordinator side)


Reply = Callable[[EntityCore, Any], Iterator[pb.ArrayChunk]]


class HostileEntity(EntityServicer):
    """A real servicer over a real cell, except for the methods in ``replies``, which answer with crafted chunks."""

    def __init__(self, core: EntityCore, model_dir: Path, replies: dict[str, Reply]) -> None:
        super().__init__(core, model_dir)
        self.replies = replies

    def _answer(self, method: str, request: Any, context: grpc.ServicerContext) -> Iterator[pb.ArrayChunk]:
        if method in self.replies:
            yield from self.replies[method](self.core, request)
        else:
            yield from getattr(super(), method)(request, context)

    def Records(self, request: pb.Empty, context: grpc.ServicerContext) -> Iterator[pb.ArrayChunk]:
        yield from self._answer("Records", request, context)

    def FeatureRange(self, request: pb.Empty, context: grpc.ServicerContext) -> Iterator[pb.ArrayChunk]:
        yield from self._answer("FeatureRange", request, context)

    def KernelBlock(self, request: pb.KernelRequest, context: grpc.ServicerContext) -> Iterator[pb.ArrayChunk]:
        yield from self._answer("KernelBlock", request, context)


def handlers(servicer: EntityServicer, garbage: bool) -> dict[str, grpc.RpcMethodHandler]:
    """The Entity service's handlers; with ``garbage``, KernelBlock answers bytes that do not parse as ArrayChunk."""
    chunks = pb.ArrayChunk.SerializeToString
    table = {
        "Metadata": grpc.unary_unary_rpc_method_handler(
            servicer.Metadata, pb.Empty.FromString, pb.BlockMetadata.SerializeToString
        ),
        "Records": grpc.unary_stream_rpc_method_handler(servicer.Records, pb.Empty.FromString, chunks),
        "FeatureRange": grpc.unary_stream_rpc_method_handler(servicer.FeatureRange, pb.Empty.FromString, chunks),
        "KernelBlock": grpc.unary_stream_rpc_method_handler(servicer.KernelBlock, pb.KernelRequest.FromString, chunks),
    }
    if garbage:
        # A header whose dtype string is not valid UTF-8: protobuf refuses to parse it.
        table["KernelBlock"] = grpc.unary_stream_rpc_method_handler(
            lambda request, context: iter([b"\x0a\x05\x12\x03\xff\xfe\xfd"])
        )
    return table


def honest_kernel(core: EntityCore, request: pb.KernelRequest) -> np.ndarray:
    ranges = [SignedRange(r.entity_id, r.low, r.high, r.tag) for r in request.scaling.ranges]
    return core.kernel_block(
        KERNEL_NAMES[request.kernel],
        request.mbar,
        request.mu,
        ranges,
        record_set=RECORD_SET_NAMES[request.record_set],
        nonce=request.nonce,
        epoch=request.epoch,
    )


def own_ranges_kernel(core: EntityCore, request: pb.KernelRequest) -> Iterator[pb.ArrayChunk]:
    """The honest block computed with the entity's true range, whatever was relayed."""
    published = core.feature_range()
    own = SignedRange(core.id, published["low"].tolist(), published["high"].tolist(), str(published["tag"][0]))
    block = core.kernel_block(KERNEL_NAMES[request.kernel], request.mbar, request.mu, [own], record_set="train")
    yield from encode_arrays({"kernel": block})


def records_with(**changes: Callable[[np.ndarray], np.ndarray]) -> Reply:
    def reply(core: EntityCore, request: Any) -> Iterator[pb.ArrayChunk]:
        arrays = core.records()
        yield from encode_arrays({name: changes.get(name, lambda a: a)(array) for name, array in arrays.items()})

    return reply


def kernel_with(change: Callable[[np.ndarray], np.ndarray]) -> Reply:
    def reply(core: EntityCore, request: Any) -> Iterator[pb.ArrayChunk]:
        yield from encode_arrays({"kernel": change(honest_kernel(core, request))})

    return reply


def kernel_chunks(chunks: Callable[[np.ndarray], list[pb.ArrayChunk]]) -> Reply:
    def reply(core: EntityCore, request: Any) -> Iterator[pb.ArrayChunk]:
        yield from chunks(honest_kernel(core, request))

    return reply


def header(name: str, dtype: str, shape: list[int]) -> pb.ArrayChunk:
    return pb.ArrayChunk(header=pb.ArrayHeader(name=name, dtype=dtype, shape=shape))


def aborted(core: EntityCore, request: Any) -> Iterator[pb.ArrayChunk]:
    block = honest_kernel(core, request)
    yield header("kernel", "<f8", list(block.shape))
    yield pb.ArrayChunk(data=block.tobytes()[:64])
    raise RuntimeError("the entity crashed mid-stream")


def range_with(change: Callable[[np.ndarray], np.ndarray] | None = None, tag: str | None = None) -> Reply:
    """A FeatureRange whose low is changed and re-tagged under the entity's own secret (a hostile entity can)."""

    def reply(core: EntityCore, request: Any) -> Iterator[pb.ArrayChunk]:
        published = core.feature_range()
        low, high = published["low"], published["high"]
        if change is not None:
            low = change(low.copy())
        signature = tag if tag is not None else range_tag(core.config.read_secret(), core.id, low, high)
        yield from encode_arrays({"low": low, "high": high, "tag": np.array([signature])})

    return reply


def records_id_twice(core: EntityCore, request: Any) -> Iterator[pb.ArrayChunk]:
    """Records whose first held-out id is also the first training id."""
    arrays = dict(core.records())
    arrays["test_ids"] = np.concatenate([arrays["train_ids"][:1], arrays["test_ids"][1:]])
    yield from encode_arrays(arrays)


def _nan_first(array: np.ndarray) -> np.ndarray:
    array = np.array(array, dtype=np.float64)
    array[0] = math.nan
    return array


HOSTILE_REPLIES: list[Any] = [
    (
        "records-stream-truncated",
        "r0c0-solo",
        {"Records": lambda core, request: iter([header("train_ids", "<U8", [10]), pb.ArrayChunk(data=b"\x00" * 17)])},
        "stream truncated",
    ),
    ("kernel-wrong-row-count", "r0c0-solo", {"KernelBlock": kernel_with(lambda block: block[:-1])}, "kernel block for"),
    (
        "kernel-float32",
        "r0c0-solo",
        {"KernelBlock": kernel_with(lambda block: block.astype(np.float32))},
        "dtype float32",
    ),
    (
        "kernel-header-2**40-rows",
        "r0c0-solo",
        {"KernelBlock": kernel_chunks(lambda block: [header("kernel", "<f8", [2**40, 5])])},
        "over the limit",
    ),
    (
        "kernel-object-dtype",
        "r0c0-solo",
        {"KernelBlock": kernel_chunks(lambda block: [header("kernel", "|O", [1, 5])])},
        "not allowed on the wire",
    ),
    (
        "kernel-bytes-past-the-shape",
        "r0c0-solo",
        {
            "KernelBlock": kernel_chunks(
                lambda block: [*encode_arrays({"kernel": block}), pb.ArrayChunk(data=b"\x00" * 8)]
            )
        },
        "more bytes than shape",
    ),
    ("kernel-aborted-mid-stream", "r0c0-solo", {"KernelBlock": aborted}, "refused KernelBlock"),
    ("kernel-missing", "r0c0-solo", {"KernelBlock": lambda core, request: iter(())}, "ended without array 'kernel'"),
    ("not-array-chunks", "r0c0-solo", {"garbage": lambda core, request: iter(())}, "KernelBlock"),
    pytest.param(
        "records-labels-one-short",
        "r0c0-solo",
        {"Records": records_with(train_labels=lambda a: a[:-1])},
        "train_labels",
    ),
    pytest.param("records-labels-nan", "r0c0-solo", {"Records": records_with(train_labels=_nan_first)}, "label"),
    pytest.param("records-id-twice", "r0c0-solo", {"Records": records_id_twice}, "sent record id"),
    pytest.param("cell-labels-zero-one", "r0c0-zero-one", {}, "label"),
    pytest.param(
        "kernel-nan-entries",
        "r0c0-solo",
        {"KernelBlock": kernel_with(lambda block: np.where(block > 0.5, math.nan, block))},
        "non-finite",
    ),
    pytest.param("range-tag-lone-surrogate", "r0c0-solo", {"FeatureRange": range_with(tag="\ud800")}, "tag"),
    pytest.param(
        "range-nan-low",
        "r0c0-solo",
        {"FeatureRange": range_with(_nan_first), "KernelBlock": own_ranges_kernel},
        "range",
    ),
]


@pytest.mark.parametrize(("case", "stem", "replies", "fragment"), HOSTILE_REPLIES, ids=case_ids(HOSTILE_REPLIES))
def test_malformed_entity_reply_is_named_by_the_coordinator(
    grid: Grid,
    tmp_path: Path,
    case: str,
    stem: str,
    replies: dict[str, Any],
    fragment: str,
) -> None:
    """An entity (in-process, plaintext) whose reply is truncated, over-size, of the wrong dtype or shape, or not
    what it claims: training fails with a PpsvmError that names the entity, and no model is written."""
    # A fake entity of its own: its release log is not the running r0c0's, whose basis view other tests pin.
    config = dataclasses.replace(
        load_entity_config(grid.split_dir / f"{stem}.toml"),
        release_log=grid.split_dir / f"hostile-{case}.releases.jsonl",
    )
    core = EntityCore(config, new_release_log=True)
    servicer = HostileEntity(core, tmp_path, {k: v for k, v in replies.items() if k != "garbage"})

    def register(server: grpc.Server) -> None:
        service = grpc.method_handlers_generic_handler("ppsvm.v1.Entity", handlers(servicer, "garbage" in replies))
        server.add_generic_rpc_handlers((service,))

    server, port = create_server("127.0.0.1:0", register, tls=None)
    try:
        path = tmp_path / "federation.toml"
        path.write_text(federation_toml(grid.task, [FederationEntity("r0c0", f"127.0.0.1:{port}", 0, 0)]))
        federation = dataclasses.replace(load_federation(path), insecure=True)
        model = tmp_path / "model.json"
        options = TrainOptions(kernel="gaussian", mbar=5, nu=1.0, mu=0.03, deadline=20.0, distribute=False)
        with pytest.raises(PpsvmError) as caught:
            train_and_save(federation, options, model)
        assert "entity r0c0" in str(caught.value) and fragment in str(caught.value), str(caught.value)
        assert not model.exists() and list(tmp_path.iterdir()) == [path]
    finally:
        server.stop(0)


# --------------------------------------------------------------------------- after all of it


def test_healthy_federation_trains_after_hostile_requests(grid: Grid) -> None:
    """After absurd requests of every kind (and whatever ran before in this module), the four honest entities
    still train a model end to end and accept it."""
    with grid.channel("r0c0") as channel:
        stub = pb_grpc.EntityStub(channel)
        for request in (_with(mu=math.nan)(honest_request(grid)), _with(ids=["?"] * 1000)(honest_request(grid))):
            with pytest.raises(grpc.RpcError):
                list(stub.KernelBlock(request, timeout=CALL_TIMEOUT_S))
        with pytest.raises(grpc.RpcError):
            stub.AcceptModel(pb.ModelMessage(model_json=b"[" * 100_000), timeout=CALL_TIMEOUT_S)
    result, model = grid.train(grid.federation("healthy", HEALTHY), *TRAIN_FLAGS)
    assert result.returncode == 0, result.stderr
    assert model.exists() and "model delivered to 4 entities" in result.stderr
