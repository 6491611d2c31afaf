"""Collusion against secure aggregation (issue 25), attacked on real `ppsvm entity` processes.

The threat model (docs/threat-model.md, docs/design.md rules 5, 8 and 9): the coordinator, helped by one entity.
Every split here is made by `ppsvm split` at its defaults (Gaussian kernel; `ppsvm coordinator view` picks mbar as
`coordinator train` does, min n_j - 1) and the coordinator's holdings are what `ppsvm coordinator view` writes: every
reply as received, the assembled kernel, the record order and the view. The attacker gets those and what its
colluding entity holds (its config's secrets and its own records); the test alone reads the victims' cells, to
score the attack. The attack is :func:`ppsvm.core.reconstruction.reconstruct`; the yardstick is
:func:`ppsvm.core.reconstruction.no_release_guess` from the same prior: recovering no more of a victim's scaled values
within 0.05 than that guess (+ 0.05) is what privacy rule 9 asks.

Each protection has a control showing the attack works without it: the same victims' blocks on their own (computed
in this process from the cells and B_j, and served by a consenting horizontal split) are read back.

One stronger attack is known to get through (marked xfail, strict): the row blocks' combinations share the B_j's,
so a column-block peer learns the map from combined kernel rows to values on its own row block and applies it to
its peer's (benchmarks/collusion.py measures it on five data sets).

Data sets the attack was not tuned on: Cleveland (discrete features, '?' rows dropped), and WDBC in the slow tests.
"""

from __future__ import annotations

import json
import secrets
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import pytest

from ppsvm.config import federation_at_addresses, load_entity_config, load_federation
from ppsvm.coordinator.assembly import decode_combination
from ppsvm.coordinator.federation import Session, kernel_request
from ppsvm.core.aggregation import decode_sum, log_share, share_bound
from ppsvm.core.kernels import kernel, scale_to_unit
from ppsvm.core.randomness import derive_B
from ppsvm.core.reconstruction import Recovery, reconstruct, score_recovery
from ppsvm.data.cell import Cell
from ppsvm.data.sources import read_source
from ppsvm.entity.records import pseudonymous
from ppsvm.errors import EntityError
from ppsvm.processes import EntityProcesses, stop_processes
from ppsvm.wire.chunks import decode_arrays
from ppsvm.wire.rpc import ppsvm_pb2 as pb
from ppsvm.wire.rpc import ppsvm_pb2_grpc as pb_grpc

from .conftest import (
    REPO,
    WDBC,
    WDBC_OPTIONS,
    coordinator_channel,
    ppsvm,
    split,
    start_entity_process,
    with_privacy_settings,
)

CLEVELAND = REPO / "ppsvm" / "data" / "bundled" / "processed.cleveland.data"
CLEVELAND_OPTIONS = ["--label", "13", "--negative", "0", "--missing", "drop"]
TOLERANCE = 0.05  # a value is recovered when within this of the truth (scaled units)
MARGIN = 0.05  # issue 25: no more than the no-release guess + 0.05
# Controls: a single block must give far more than the guess. Measured (Cleveland, Gaussian): gains of 0.45-0.55
# on single blocks at mbar = n_j - 1, 0.4-0.5 at 2 x 3's mbar = 3; WDBC 2 x 2: about 0.6.
CONTROL_GAIN = 0.25
TIMEOUT = 60.0


# --- a federation started for the module -------------------------------------------------------------------------


@dataclass
class Running:
    """`ppsvm split` output, its entities running, and what `ppsvm coordinator view` wrote."""

    split_dir: Path
    live: Path
    processes: EntityProcesses
    view_dir: Path | None = None
    restarted: list[subprocess.Popen[str]] = field(default_factory=list)

    @property
    def entity_ids(self) -> list[str]:
        return [e.id for e in load_federation(self.split_dir / "federation.toml").entities]

    def view(self) -> dict[str, Any]:
        assert self.view_dir is not None
        return json.loads((self.view_dir / "view.json").read_text())

    def restart(self, entity_id: str) -> None:
        """Stop one entity and start it again from its config (its release log kept); the live file follows."""
        index = self.entity_ids.index(entity_id)
        stop_processes([self.processes.processes[index]])
        log = self.split_dir / f"{entity_id}.restart-{len(self.restarted)}.stderr.log"
        with log.open("w") as stderr:
            process, address = start_entity_process(
                self.split_dir / f"{entity_id}.toml", "127.0.0.1:0", stderr, f"entity {entity_id}", TIMEOUT
            )
        self.restarted.append(process)
        self.processes.processes[index] = process
        self.processes.addresses[index] = address
        planned = load_federation(self.split_dir / "federation.toml")
        self.live.write_text(federation_at_addresses(planned, self.processes.addresses))


def start(directory: Path, data: Path, options: list[str], rows: int, cols: int, *, consent: bool) -> Running:
    """Split, give every entity the consent setting, start the entities; the caller stops them."""
    split_dir = split(directory, data, rows, cols, *options)
    planned = load_federation(split_dir / "federation.toml")
    configs = [split_dir / f"{e.id}.toml" for e in planned.entities]
    for config in configs:
        config.write_text(with_privacy_settings(config.read_text(), consent))
    processes = EntityProcesses(configs).__enter__()
    live = split_dir / "federation.live.toml"
    live.write_text(federation_at_addresses(planned, processes.addresses))
    return Running(split_dir, live, processes)


def with_view(running: Running) -> Running:
    """`ppsvm coordinator view` of the training records, at the defaults."""
    running.view_dir = running.split_dir / "view"
    ppsvm("coordinator", "view", "--federation", str(running.live), "--out", str(running.view_dir))
    return running


@contextmanager
def viewed(directory: Path, data: Path, options: list[str], rows: int, cols: int) -> Iterator[Running]:
    """A split of ``data`` at the defaults, without consent, its entities running and its view written."""
    running = start(directory, data, options, rows, cols, consent=False)
    try:
        yield with_view(running)
    finally:
        running.processes.stop()


@pytest.fixture(scope="module")
def cleveland_2x2(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    with viewed(tmp_path_factory.mktemp("c22") / "split", CLEVELAND, CLEVELAND_OPTIONS, 2, 2) as running:
        yield running


@pytest.fixture(scope="module")
def cleveland_2x3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    with viewed(tmp_path_factory.mktemp("c23") / "split", CLEVELAND, CLEVELAND_OPTIONS, 2, 3) as running:
        yield running


@pytest.fixture(scope="module")
def wdbc_2x2(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    with viewed(tmp_path_factory.mktemp("w22") / "split", WDBC, WDBC_OPTIONS, 2, 2) as running:
        yield running


@pytest.fixture
def checkerboard(request: pytest.FixtureRequest) -> Running:
    """The federation a parametrised test names (fixtures are started once per module, on first use)."""
    return request.getfixturevalue(request.param)


CHECKERBOARDS = [
    pytest.param("cleveland_2x2", id="cleveland-2x2"),
    pytest.param("cleveland_2x3", id="cleveland-2x3"),
    pytest.param("wdbc_2x2", id="wdbc-2x2", marks=pytest.mark.slow),
]


# --- what each party holds ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Holdings:
    """What the coordinator received (`coordinator view`), read back, with each row block's rows of K."""

    kernel: str
    mbar: int
    mu: float
    K: np.ndarray
    ids: np.ndarray
    scaling: dict[int, tuple[np.ndarray, np.ndarray]]
    row_blocks: dict[int, slice]
    replies: dict[str, np.ndarray]

    @classmethod
    def read(cls, running: Running) -> Holdings:
        assert running.view_dir is not None
        view = running.view()
        rows, offset = {}, 0
        for block in view["row_blocks"]:
            rows[block["row_block"]] = slice(offset, offset + block["rows"])
            offset += block["rows"]
        return cls(
            kernel=view["kernel"],
            mbar=view["mbar"],
            mu=view["mu"],
            K=np.load(running.view_dir / "kernel-train.npy"),
            ids=np.array((running.view_dir / "ids-train.txt").read_text().split()),
            scaling={s["column_block"]: (np.array(s["low"]), np.array(s["high"])) for s in view["scaling"]},
            row_blocks=rows,
            replies={
                path.name.removesuffix("-train.npy"): np.load(path)
                for path in (running.view_dir / "replies").glob("*-train.npy")
            },
        )

    def share_of_row_block(self, i: int) -> np.ndarray:
        """Row block i's summed shares as the coordinator reads them: log K (Gaussian) or K (linear)."""
        rows = self.K[self.row_blocks[i]]
        return np.log(rows) if self.kernel == "gaussian" else rows

    def released(self, share: np.ndarray) -> np.ndarray:
        return np.exp(share) if self.kernel == "gaussian" else share


@dataclass(frozen=True)
class Entity:
    """One entity's config, secrets and training records (scaled with the view's scaling), in K's row order."""

    entity_id: str
    row_block: int
    column_block: int
    secret: bytes
    X: np.ndarray

    @classmethod
    def read(cls, running: Running, entity_id: str, holdings: Holdings) -> Entity:
        config = load_entity_config(running.split_dir / f"{entity_id}.toml")
        key = config.read_id_key()
        cell: Cell = read_source(config.data, config.schema)
        if key is not None:
            cell = pseudonymous(cell, key)
        entity = next(e for e in load_federation(running.split_dir / "federation.toml").entities if e.id == entity_id)
        ids = holdings.ids[holdings.row_blocks[entity.row_block]].tolist()
        low, high = holdings.scaling[entity.column_block]
        X = scale_to_unit(cell.rows_for_ids(ids), low, high)
        return cls(entity_id, entity.row_block, entity.column_block, config.read_secret(), X)

    def B(self, mbar: int) -> np.ndarray:
        return derive_B(self.secret, mbar, self.X.shape[1])


def entities(running: Running, holdings: Holdings) -> dict[str, Entity]:
    return {entity_id: Entity.read(running, entity_id, holdings) for entity_id in running.entity_ids}


def outcome(guess: np.ndarray, truth: np.ndarray, prior: np.ndarray) -> Recovery:
    return score_recovery(guess, truth, prior, TOLERANCE)


def describe(found: Recovery) -> str:
    return f"recovered {found.recovered:.3f} (whole records {found.whole:.3f}), no-release guess {found.baseline:.3f}"


def attack(released: np.ndarray, B: np.ndarray, holdings: Holdings, prior: np.ndarray, truth: np.ndarray) -> Recovery:
    guess = reconstruct(released, B, holdings.kernel, holdings.mu, np.clip(prior, 0.0, 1.0))
    return outcome(guess, truth, np.clip(prior, 0.0, 1.0))


def reply_read_as_a_block(reply: np.ndarray, kernel_name: str) -> np.ndarray:
    """A masked reply decoded as if it were the entity's share alone: the attacker's best reading of it."""
    share = decode_sum(reply.copy())
    return np.exp(np.minimum(share, 0.0)) if kernel_name == "gaussian" else share


# --- 1. the aggregate, attacked by the coordinator and each colluding entity ------------------------------------


@pytest.mark.parametrize("checkerboard", CHECKERBOARDS, indirect=True)
def test_a_column_block_peer_recovers_no_more_than_the_no_release_guess(checkerboard: Running) -> None:
    """Colluder (i', j) knows B_j and its own records; the victim (i, j) is its column-block peer in another row block.

    The coordinator holds the victim's row block combined (K's rows) and the victim's masked reply: attacked both
    ways, the better counts. Control: the same victim's block on its own, computed from its cell, is read back.
    """
    holdings = Holdings.read(checkerboard)
    assert holdings.kernel == "gaussian" and set(holdings.replies) == set(checkerboard.entity_ids)
    assert all(reply.dtype == np.uint64 for reply in holdings.replies.values()), "a checkerboard's replies are masked"
    parties = entities(checkerboard, holdings)
    findings = []
    for colluder in parties.values():
        B = colluder.B(holdings.mbar)
        for victim in parties.values():
            if victim.column_block != colluder.column_block or victim.row_block == colluder.row_block:
                continue
            combined = holdings.released(holdings.share_of_row_block(victim.row_block))
            masked = reply_read_as_a_block(holdings.replies[victim.entity_id], holdings.kernel)
            on_aggregate = max(
                (attack(view, B, holdings, colluder.X, victim.X) for view in (combined, masked)),
                key=lambda o: o.recovered,
            )
            alone = kernel(holdings.kernel, victim.X, B, holdings.mu)  # the control: what it sent before issue 25
            on_single = attack(alone, B, holdings, colluder.X, victim.X)
            findings.append((colluder.entity_id, victim.entity_id, on_aggregate, on_single))
    assert len(findings) == len(parties)
    report = "\n".join(f"{c} -> {v}: aggregate {describe(a)}; single block {describe(s)}" for c, v, a, s in findings)
    print(report)  # the figures, for -rP
    for colluder_id, victim_id, on_aggregate, on_single in findings:
        assert on_aggregate.recovered <= on_aggregate.baseline + MARGIN, f"{colluder_id} -> {victim_id}\n{report}"
        assert on_single.gain > CONTROL_GAIN, f"control {colluder_id} -> {victim_id}: the attack is broken\n{report}"


@pytest.mark.parametrize("checkerboard", CHECKERBOARDS, indirect=True)
def test_a_row_block_peer_recovers_no_more_than_the_no_release_guess(checkerboard: Running) -> None:
    """Colluder (i, j') subtracts its own share from its row block's combination: with two column blocks the victim's
    block is left exactly (checked), under a B_j it does not know. It gets the best it has: a stand-in B, and as
    prior the victim's column block in the other row block (similar records it would not really hold)."""
    holdings = Holdings.read(checkerboard)
    parties = entities(checkerboard, holdings)
    cols = len(holdings.scaling)
    stand_in_secret = secrets.token_bytes(32)
    findings = []
    for colluder in parties.values():
        own = log_share(holdings.kernel, colluder.X, colluder.B(holdings.mbar), holdings.mu)
        remaining = holdings.share_of_row_block(colluder.row_block) - own
        for victim in parties.values():
            if victim.row_block != colluder.row_block or victim is colluder:
                continue
            if cols == 2:  # what is left is the victim's block: the row-block peer sees it exactly
                exact = log_share(holdings.kernel, victim.X, victim.B(holdings.mbar), holdings.mu)
                np.testing.assert_allclose(remaining, exact, rtol=0, atol=1e-9)
            similar = next(e.X for e in parties.values() if e.column_block == victim.column_block and e is not victim)
            stand_in = derive_B(stand_in_secret, holdings.mbar, victim.X.shape[1])
            findings.append(
                (
                    colluder.entity_id,
                    victim.entity_id,
                    attack(holdings.released(remaining), stand_in, holdings, similar, victim.X),
                )
            )
    report = "\n".join(f"{c} -> {v}: {describe(o)}" for c, v, o in findings)
    print(report)  # the figures, for -rP
    assert len(findings) == len(parties) * (cols - 1)
    for colluder_id, victim_id, found in findings:
        assert found.recovered <= found.baseline + MARGIN, f"{colluder_id} -> {victim_id}\n{report}"


def ridge_inverse(train_rows: np.ndarray, train_values: np.ndarray, rows: np.ndarray, seen: np.ndarray) -> np.ndarray:
    """A regression from kernel rows (summed shares) to values, fitted on known pairs and applied to ``rows``; discrete
    features (most of ``seen``'s rows on values two or more share) snapped to the nearest value seen."""
    centre, spread = train_rows.mean(axis=0), train_rows.std(axis=0)
    spread = np.where(spread > 0, spread, 1.0)
    Z = np.hstack([np.ones((len(train_rows), 1)), (train_rows - centre) / spread])
    W = np.linalg.solve(Z.T @ Z + 1e-6 * len(Z) * np.eye(Z.shape[1]), Z.T @ train_values)
    guess = np.clip(np.hstack([np.ones((len(rows), 1)), (rows - centre) / spread]) @ W, 0.0, 1.0)
    for feature, column in enumerate(seen.T):
        values, counts = np.unique(column, return_counts=True)
        if counts[counts >= 2].sum() >= 0.5 * len(column):
            shared = values[counts >= 2]
            guess[:, feature] = shared[np.abs(guess[:, feature, None] - shared[None, :]).argmin(axis=1)]
    return guess


@pytest.mark.xfail(
    strict=True,
    reason="issue 25 not met: the two row blocks' combinations use the same B_j's, so a column-block peer fits the "
    "map from combined kernel rows to values on its own row block (whose rows the coordinator holds) and applies it "
    "to its peer's row block (benchmarks/collusion.py, 'col learned')",
)
@pytest.mark.parametrize(
    "checkerboard",
    [
        pytest.param("cleveland_2x2", id="cleveland-2x2"),
        pytest.param("wdbc_2x2", id="wdbc-2x2", marks=pytest.mark.slow),
    ],
    indirect=True,
)
def test_a_column_block_peer_learning_from_its_own_rows_recovers_no_more_than_the_guess(checkerboard: Running) -> None:
    """Colluder (i', j) fits a regression from its own row block's combined kernel rows to its own values, and applies
    it to its column-block peer's row block: no B_j, no reconstruction, only the pairs the coalition holds."""
    holdings = Holdings.read(checkerboard)
    parties = entities(checkerboard, holdings)
    findings = []
    for colluder in parties.values():
        for victim in parties.values():
            if victim.column_block != colluder.column_block or victim.row_block == colluder.row_block:
                continue
            guess = ridge_inverse(
                holdings.share_of_row_block(colluder.row_block),
                colluder.X,
                holdings.share_of_row_block(victim.row_block),
                colluder.X,
            )
            findings.append((colluder.entity_id, victim.entity_id, outcome(guess, victim.X, colluder.X)))
    report = "\n".join(f"{c} -> {v}: {describe(o)}" for c, v, o in findings)
    print(report)  # the figures, for -rP
    for colluder_id, victim_id, found in findings:
        assert found.recovered <= found.baseline + MARGIN, f"{colluder_id} -> {victim_id}\n{report}"


# --- 2. and 3. a horizontal split: single blocks, with and without consent --------------------------------------


@pytest.fixture(scope="module")
def cleveland_2x1_consenting(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    running = start(tmp_path_factory.mktemp("c21") / "split", CLEVELAND, CLEVELAND_OPTIONS, 2, 1, consent=True)
    try:
        yield with_view(running)
    finally:
        running.processes.stop()


def test_control_a_consented_single_block_is_read_back_by_a_column_block_peer(
    cleveland_2x1_consenting: Running,
) -> None:
    """The protection off: a horizontal split whose entities consent sends each block on its own (mbar = n_j - 1);
    the other entity of the column block attacks it with the same attack as above."""
    holdings = Holdings.read(cleveland_2x1_consenting)
    n_features = len(holdings.scaling[0][0])
    assert holdings.mbar == n_features - 1
    parties = entities(cleveland_2x1_consenting, holdings)
    findings = []
    for colluder in parties.values():
        for victim in parties.values():
            if victim is colluder:
                continue
            # Alone in its row block, the entity has nothing to combine with: its reply is its block as it is.
            block = holdings.replies[victim.entity_id]
            assert block.dtype == np.float64
            np.testing.assert_allclose(
                block, holdings.released(holdings.share_of_row_block(victim.row_block)), rtol=1e-12
            )
            found = attack(block, colluder.B(holdings.mbar), holdings, colluder.X, victim.X)
            findings.append((colluder.entity_id, victim.entity_id, found))
    report = "\n".join(f"{c} -> {v}: {describe(o)}" for c, v, o in findings)
    print(report)  # the figures, for -rP
    for colluder_id, victim_id, found in findings:
        assert found.gain > CONTROL_GAIN and found.whole > 0.5, f"{colluder_id} -> {victim_id}\n{report}"


def test_a_horizontal_split_refuses_by_default_and_says_why(federation) -> None:
    """Without consent, each entity has measured what a peer would recover of its block and refuses the training,
    naming its limit and the way out (the figures stay in its own log)."""
    running = federation(2, 1, data=CLEVELAND, options=CLEVELAND_OPTIONS, consent=False)
    result = running.train(check=False)
    assert result.returncode != 0
    message = " ".join(result.stderr.split())
    print(message)  # the figures, for -rP
    for words in ("reconstruction", "single_block_max_gain", "consent_single_block_release"):
        assert words in message, result.stderr
    assert not (running.split_dir / "model.json").exists()


# --- 4. and 5. the masks' bindings: the record list and the nonce -----------------------------------------------


def signed_ranges(running: Running) -> dict[int, list[pb.SignedRange]]:
    """Every column block's signed ranges, as an honest coordinator relays them."""
    with Session(load_federation(running.live), TIMEOUT) as session:
        session.column_scaling()
        return session.signed_ranges


def kernel_call(running: Running, entity_id: str, request: pb.KernelRequest) -> np.ndarray:
    """One KernelBlock call straight to an entity, with the coordinator's TLS identity; its reply."""
    entity = next(e for e in load_federation(running.live).entities if e.id == entity_id)
    channel = coordinator_channel(running.live, entity)
    try:
        return decode_arrays(pb_grpc.EntityStub(channel).KernelBlock(request, timeout=TIMEOUT))["kernel"]
    finally:
        channel.close()


def request_for(
    holdings: Holdings, ranges: dict[int, list[pb.SignedRange]], entity: Entity, nonce: bytes, ids: list[str]
) -> pb.KernelRequest:
    return kernel_request(
        holdings.kernel,
        holdings.mbar,
        holdings.mu,
        ranges[entity.column_block],
        ids=pb.RecordIds(ids=ids),
        nonce=nonce,
    )


def test_mismatched_record_lists_under_one_nonce_decode_to_noise(cleveland_2x2: Running) -> None:
    """With one nonce, entity A is asked for [r1, r2] and entity B of its row block for [r2, r1]: had the masks
    cancelled, the sums would pair A's record with B's other record, and many such sums solve for each share. They do
    not: the sum lies beyond what cancelled masks give. Control: the same records in one order decode to the kernel
    computed from the cells (B_j from the secret files, the view's scaling)."""
    holdings = Holdings.read(cleveland_2x2)
    parties = entities(cleveland_2x2, holdings)
    ranges = signed_ranges(cleveland_2x2)
    first, second = [p for p in parties.values() if p.row_block == 0]
    r1, r2 = holdings.ids[holdings.row_blocks[0]][:2].tolist()

    nonce = secrets.token_bytes(32)
    mismatched = kernel_call(cleveland_2x2, first.entity_id, request_for(holdings, ranges, first, nonce, [r1, r2]))
    mismatched += kernel_call(cleveland_2x2, second.entity_id, request_for(holdings, ranges, second, nonce, [r2, r1]))
    assert mismatched.dtype == np.uint64
    decoded = decode_sum(mismatched.copy())
    # Had the masks cancelled: A's share of r1 plus B's of r2, and A's of r2 plus B's of r1.
    paired = sum(
        log_share(holdings.kernel, p.X[rows], p.B(holdings.mbar), holdings.mu)
        for p, rows in ((first, [0, 1]), (second, [1, 0]))
    )
    assert (np.abs(decoded - paired) > 1.0).all(), "the masks of mismatched lists cancelled"
    # Noise over the whole of Z_2^64 decodes to +-2^21: an entry falls within the bound (2^15) with probability 1/64.
    assert (np.abs(decoded) > share_bound(2)).mean() >= 0.5
    with pytest.raises(EntityError, match="did not cancel"):
        decode_combination(holdings.kernel, mismatched, 2, "row block 0")

    nonce = secrets.token_bytes(32)
    matched = kernel_call(cleveland_2x2, first.entity_id, request_for(holdings, ranges, first, nonce, [r1, r2]))
    matched += kernel_call(cleveland_2x2, second.entity_id, request_for(holdings, ranges, second, nonce, [r1, r2]))
    K = decode_combination(holdings.kernel, matched, 2, "row block 0")
    central = holdings.released(
        sum(log_share(holdings.kernel, p.X[:2], p.B(holdings.mbar), holdings.mu) for p in (first, second))
    )
    np.testing.assert_allclose(K, central, rtol=1e-10, atol=1e-10)


def test_a_nonce_is_answered_once_also_after_a_restart(cleveland_2x2: Running) -> None:
    """A second KernelBlock under an answered nonce would reuse a mask (two releases' difference in the clear): refused,
    and still refused by the restarted entity, whose release log holds the nonce."""
    holdings = Holdings.read(cleveland_2x2)
    parties = entities(cleveland_2x2, holdings)
    ranges = signed_ranges(cleveland_2x2)
    target = next(p for p in parties.values() if p.row_block == 0 and p.column_block == 1)
    ids = holdings.ids[holdings.row_blocks[0]][:3].tolist()
    nonce = secrets.token_bytes(32)
    request = request_for(holdings, ranges, target, nonce, ids)
    assert kernel_call(cleveland_2x2, target.entity_id, request).shape == (3, holdings.mbar)

    def refused() -> grpc.RpcError:
        with pytest.raises(grpc.RpcError) as error:
            kernel_call(cleveland_2x2, target.entity_id, request)
        return error.value

    error = refused()
    assert error.code() == grpc.StatusCode.PERMISSION_DENIED and "answered nonce" in error.details()
    cleveland_2x2.restart(target.entity_id)
    error = refused()
    assert error.code() == grpc.StatusCode.PERMISSION_DENIED and "answered nonce" in error.details()
    # The restarted entity serves: only the nonce is refused.
    fresh = request_for(holdings, ranges, target, secrets.token_bytes(32), ids)
    assert kernel_call(cleveland_2x2, target.entity_id, fresh).shape == (3, holdings.mbar)


# --- 6. the masked kernel is the kernel ---------------------------------------------------------------------------


def test_the_masked_kernel_equals_the_kernel_computed_centrally(cleveland_2x3: Running) -> None:
    """2 x 3: what the coordinator assembled from masked shares equals K computed in one place from the cells, B_j from
    the secret files and the view's scaling (relative 1e-12); each reply alone is not its entity's share."""
    holdings = Holdings.read(cleveland_2x3)
    parties = entities(cleveland_2x3, holdings)
    central = np.empty_like(holdings.K)
    for i, rows in holdings.row_blocks.items():
        shares = {
            p.entity_id: log_share(holdings.kernel, p.X, p.B(holdings.mbar), holdings.mu)
            for p in parties.values()
            if p.row_block == i
        }
        central[rows] = holdings.released(sum(shares.values()))
        summed = sum(holdings.replies[entity_id] for entity_id in shares)
        np.testing.assert_allclose(decode_sum(summed), holdings.share_of_row_block(i), rtol=0, atol=1e-12)
        for entity_id, share in shares.items():
            alone = decode_sum(holdings.replies[entity_id].copy())
            assert (np.abs(alone - share) > 1.0).mean() > 0.99, f"{entity_id}'s reply is its share unmasked"
    np.testing.assert_allclose(holdings.K, central, rtol=1e-12, atol=0)
