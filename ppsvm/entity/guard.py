"""The release guard: every answer an entity derives from its records is admitted, counted and charged here.

docs/design.md section 2 counts what an entity releases over its whole life, against a
coordinator that sends any request it likes (possibly helped by one other entity):

- **Modes** (rule 7). An entity serves the random-kernel protocol or the DP protocol for
  its records, not both, unless its own config says ``mode = "mixed"``: the labels,
  ranges and kernel blocks of the random-kernel protocol are not differentially private,
  so serving them voids any epsilon claimed for the same records.
- **One basis view** (rules 3 and 5). B_j is served under one kernel type, one Gaussian
  width and one scaling for the entity's whole life: the first kernel release pins them
  and any other is refused. A second view of the same B_j adds equations per record (the
  Gaussian view adds ||a||^2 to the linear one; a second scaling adds mbar). B_j at any mbar
  is a prefix of one fixed stream, so the pin also covers the largest mbar released: a larger
  one would add points (equations) for every record served before.
- **Basis epochs** (rule 5). A new view needs a new epoch: B_j derived from the secret and the epoch
  number, opened by every member's operator (``ppsvm entity epoch --next``, recorded in the log).
  Each epoch has its own pin; an older epoch keeps serving its pinned view (the deployed model's
  predictions), never a new one; and the points of all epochs count together per record against
  rule 3 (``max_points``), with one more when both kernels were served (the Gaussian view adds ||a||^2).
- **Masks used once** (rule 8). A masked share (secure aggregation) is bound to the
  coordinator's nonce; the entity answers each nonce once, so no mask covers two releases
  (:class:`UsedNonces`: on disk, not in memory).
- **Budgets**. DP releases spend integer micro-epsilons of ``epsilon_total``; the
  entity-alone figures are capped at ``max_baseline_releases``.
- **Charged before computed** (rule 6). A release is written to the append-only log
  before the records are touched; if the computation then fails, the caller gets a fixed
  message naming the RPC, never anything derived from the data, and the charge stays.
- **A rate per caller**. Each release costs a log line (216-276 bytes, an fsync): a caller gets
  ``[privacy] max_releases_per_minute`` of them, a token bucket that holds one minute's worth and
  refills at that rate (0: no limit). Beyond it the call is refused (RESOURCE_EXHAUSTED, with when to
  retry) before anything is written; a refused call costs nothing.

Memory does not grow with the releases: the log is streamed when replayed, the guard keeps sums,
counters and pins (bounded by the RPC names and the epochs), and the nonces in an on-disk table.

Requests are validated from the request alone by the caller (:mod:`ppsvm.entity.cell`) before
:meth:`ReleaseGuard.charge`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import os
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from fractions import Fraction
from typing import Any

from ppsvm.config import DEFAULT_MAX_RELEASES_PER_MINUTE, ENTITY_MODES
from ppsvm.core.release_log import MICRO_PER_EPSILON, ReleaseLog
from ppsvm.errors import CallCancelled, CallLimitError, PrivacyError, ReleaseFailed
from ppsvm.logs import current_call_ids

logger = logging.getLogger(__name__)

RANDOM_KERNEL, DP, MIXED = ENTITY_MODES
# The RPCs each mode answers. Metadata holds shapes and keyed checks only (n is public under the
# replace-one neighbouring relation of the DP guarantee); AcceptModel receives, it releases nothing;
# LogDigest answers the digest of a line of the release log (what was released, never a record).
_SERVES = {
    RANDOM_KERNEL: frozenset(
        {"Metadata", "LogDigest", "Records", "FeatureRange", "KernelBlock", "AcceptModel", "LocalBaseline"}
    ),
    DP: frozenset({"Metadata", "LogDigest", "AcceptModel", "DpWeights", "DpEvaluate", "DpScoreHistogram"}),
}
_SERVES[MIXED] = _SERVES[RANDOM_KERNEL] | _SERVES[DP]
# Every RPC an entity answers in some mode: the names a release may be recorded under.
ENTITY_RPCS = _SERVES[MIXED]
# The log record of an operator opening a new basis epoch (not an RPC: nothing leaves the entity).
EPOCH_EVENT = "Epoch"

# Below this a DP release is refused: each release costs a log line, and an epsilon that rounds
# to nothing would let a coordinator ask without end.
MIN_EPSILON = 1e-3


# Caller buckets kept beyond this many are dropped once full again (a full bucket is a new caller's): plaintext
# callers are told apart by address, so their number is not bounded by the certificates.
_BUCKETS_KEPT = 256


def epsilon_micro(epsilon: float) -> int:
    """The charge of a release in micro-epsilons: the decimal the requester wrote, rounded up.

    The decimal is the float's shortest repr, taken exactly (``Fraction``) instead of multiplied in floating
    point: 1.001 * 10^6 is 1000999.9999999999 in doubles, which rounded down as a budget and up as a charge
    refused a release of exactly the budget. The double the mechanism calibrates its noise with differs from
    that decimal by under 1e-16 relative, far below the micro-epsilon grain the log counts in.
    """
    return math.ceil(_decimal(epsilon) * MICRO_PER_EPSILON)


def budget_micro(epsilon_total: float) -> int:
    """An entity's budget in micro-epsilons: the decimal the operator wrote, rounded down (1.001 admits 1.001)."""
    return math.floor(_decimal(epsilon_total) * MICRO_PER_EPSILON)


def _decimal(value: float) -> Fraction:
    return Fraction(repr(float(value)))


def epsilon_of(micro: int) -> float:
    return micro / MICRO_PER_EPSILON


@dataclass(frozen=True)
class Basis:
    """The view of B_j a kernel release gives: kernel type, Gaussian width (0 for linear) and scaling.

    Attributes
    ----------
    kernel : {"linear", "gaussian"}
    mu : float
    low, high : tuple of float, length n_j
        The column block's [0, 1] scaling, from its members' signed ranges.
    """

    kernel: str
    mu: float
    low: tuple[float, ...]
    high: tuple[float, ...]

    def fingerprint(self) -> str:
        """16 hex digits identifying the view (hash of its exact values): shown in logs, audits and errors."""
        text = json.dumps([self.kernel, self.mu.hex(), [v.hex() for v in self.low], [v.hex() for v in self.high]])
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def describe(self) -> str:
        width = f" mu = {self.mu:g}" if self.kernel == "gaussian" else ""
        return f"{self.kernel}{width}, scaling {self.fingerprint()}"

    def differences(self, other: Basis) -> list[str]:
        """The fields in which ``other`` differs from this view: of "kernel", "mu", "scaling"."""
        return [
            name
            for name, differs in (
                ("kernel", self.kernel != other.kernel),
                ("mu", self.mu != other.mu),
                ("scaling", (self.low, self.high) != (other.low, other.high)),
            )
            if differs
        ]


class UsedNonces:
    """The nonces an entity has answered, as keyed 64-bit fingerprints in a private on-disk SQLite table.

    SQLite keeps at most its page cache in memory (2 MiB by default); the table is a temporary database in
    SQLite's temporary directory (``SQLITE_TMPDIR``), deleted when the process ends and rebuilt from the
    release log at the next start. A sorted array in memory cost 8 bytes a nonce: at the default rate limit
    (6,000 releases a minute per caller) 69 MB a day per caller, for as long as the entity ran.

    A fingerprint can only make a fresh nonce look used, never a used one fresh: the cost of a collision is a
    refusal, asked again under another nonce, with probability n / 2^64 among n nonces. The key is drawn per
    process, so no coordinator can aim two nonces at one fingerprint.
    """

    def __init__(self) -> None:
        self._key = os.urandom(16)
        self._db = sqlite3.connect("", check_same_thread=False, isolation_level=None)
        # Rebuilt from the release log at every start: nothing here needs to survive a crash.
        self._db.execute("PRAGMA journal_mode = OFF")
        self._db.execute("PRAGMA synchronous = OFF")
        self._db.execute("CREATE TABLE used (fingerprint INTEGER PRIMARY KEY) WITHOUT ROWID")
        self._count = 0

    def _fingerprint(self, nonce: str) -> int:
        digest = hashlib.blake2b(nonce.encode("utf-8"), digest_size=8, key=self._key).digest()
        return int.from_bytes(digest, "little", signed=True)  # SQLite's integers are signed 64-bit

    def __contains__(self, nonce: object) -> bool:
        if not isinstance(nonce, str):
            return False
        found = self._db.execute("SELECT 1 FROM used WHERE fingerprint = ?", (self._fingerprint(nonce),))
        return found.fetchone() is not None

    def __len__(self) -> int:
        return self._count

    def add(self, nonce: str) -> None:
        """Record ``nonce`` (again: no change).

        Raises
        ------
        sqlite3.Error
            The table could not grow (its file system is full): the caller records no release.
        """
        self._count += self._db.execute("INSERT OR IGNORE INTO used VALUES (?)", (self._fingerprint(nonce),)).rowcount

    def discard(self, nonce: str) -> None:
        """Forget ``nonce`` (a release marked used and then not recorded). Where even that fails, the nonce only
        stays looking used: asked again under another."""
        with contextlib.suppress(sqlite3.Error):
            forgotten = self._db.execute("DELETE FROM used WHERE fingerprint = ?", (self._fingerprint(nonce),))
            self._count -= forgotten.rowcount

    @contextlib.contextmanager
    def loading(self) -> Iterator[None]:
        """Add many (a replay) in one transaction: about 9 s a million nonces, the page cache the only memory."""
        self._db.execute("BEGIN")
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")


class ReleaseGuard:
    """Admission, the basis pin and the budgets of one entity, replayed from and recorded in its release log.

    Parameters
    ----------
    log : ReleaseLog
    mode : {"random-kernel", "dp", "mixed"}
    epsilon_total : float or None
        The DP budget; None refuses every DP release.
    max_baseline_releases : int
    who : str
        The entity id, for messages.
    max_points : int or None
        Functionals per record all epochs together may release (n_j - 1, rule 3); None: not counted.
    max_releases_per_minute : int
        Releases one caller may make a minute (a bucket of that many, refilled at that rate); 0: no limit.
    clock : callable
        Seconds, monotonic (tests pass their own).
    """

    def __init__(
        self,
        log: ReleaseLog,
        *,
        mode: str,
        epsilon_total: float | None,
        max_baseline_releases: int,
        who: str,
        max_points: int | None = None,
        max_releases_per_minute: int = DEFAULT_MAX_RELEASES_PER_MINUTE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if mode not in ENTITY_MODES:
            raise ValueError(f"mode must be one of {', '.join(ENTITY_MODES)}, got {mode!r}")
        if max_releases_per_minute < 0:
            raise ValueError(f"max_releases_per_minute must be >= 0, got {max_releases_per_minute}")
        self.log = log
        self.mode = mode
        self.who = who
        # Functionals per record all epochs together may release (n_j - 1, rule 3); None: not counted (override).
        self.max_points = max_points
        self.total_micro = None if epsilon_total is None else budget_micro(epsilon_total)
        self.max_baseline_releases = max_baseline_releases
        self.max_releases_per_minute = max_releases_per_minute
        self._clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}  # caller -> (tokens, when last counted)
        self.rate_refusals = 0  # for the metrics
        # Computations that failed after their release was charged: only faults that do not depend on the records
        # (memory, the disk) should be able to, since each such failure answers a bit about them (issue 27).
        self.failures_after_charge = 0
        self._lock = threading.Lock()
        self._recount()

    def _recount(self) -> None:
        self.epoch = 0  # the current basis epoch: the last one its operator opened
        self.pins: dict[int, Basis] = {}  # per epoch, the view its first kernel release pinned
        self.pin_mbars: dict[int, int] = {}  # per epoch, the largest mbar released: the pin covers it
        self.nonces = UsedNonces()
        self.spent_micro = 0
        self.baselines = 0
        self.releases_by_rpc: Counter[str] = Counter()  # for the metrics, without reading the log per scrape
        with self.nonces.loading():
            for record in self.log.releases():
                self._count(record)

    def _catch_up(self) -> None:
        """Count what another process serving this entity released since we looked (an operator's epoch)."""
        for record in self.log.refresh():
            self._count(record)

    def _count(self, record: dict[str, Any]) -> None:
        self.spent_micro += int(record.get("epsilon_micro", 0))
        self.releases_by_rpc[str(record.get("rpc", ""))] += 1
        if record.get("rpc") == "LocalBaseline":
            self.baselines += 1
        epoch = int(record.get("epoch", 0))
        if record.get("rpc") == EPOCH_EVENT:
            self.epoch = max(self.epoch, epoch)
        if record.get("rpc") == "KernelBlock" and "mbar" in record:
            self.pin_mbars[epoch] = max(self.pin_mbars.get(epoch, 0), int(record["mbar"]))
        if "nonce" in record:
            self.nonces.add(str(record["nonce"]))
        if "basis" in record and epoch not in self.pins:
            view = record["basis"]
            self.pins[epoch] = Basis(view["kernel"], float(view["mu"]), tuple(view["low"]), tuple(view["high"]))

    @property
    def pinned(self) -> Basis | None:
        """The current epoch's pinned view, None before its first kernel release."""
        return self.pins.get(self.epoch)

    @property
    def pinned_mbar(self) -> int:
        """The largest mbar released in the current epoch (0 before its first kernel release)."""
        return self.pin_mbars.get(self.epoch, 0)

    def points_used(self, extra: dict[int, tuple[str, int]] | None = None) -> int:
        """Functionals per record released over all epochs: their mbar, plus one if both kernels were served.

        ``extra``: epoch -> (kernel, mbar) of a release not yet recorded, counted as if it were.
        """
        views = {epoch: (self.pins[epoch].kernel, self.pin_mbars.get(epoch, 0)) for epoch in self.pins}
        views.update(extra or {})
        kernels = {kernel for kernel, _ in views.values()}
        return sum(mbar for _, mbar in views.values()) + (1 if len(kernels) > 1 else 0)

    @property
    def remaining_micro(self) -> int | None:
        return None if self.total_micro is None else max(0, self.total_micro - self.spent_micro)

    def admit(self, rpc: str) -> None:
        """Refuse an RPC this entity's mode does not serve, before anything else is looked at."""
        if rpc not in _SERVES[self.mode]:
            other = DP if rpc in _SERVES[DP] else RANDOM_KERNEL
            raise PrivacyError(
                f"entity {self.who} serves the {self.mode} protocol and refuses {rpc}, which belongs to the {other} "
                f"protocol: serving both for the same records voids the DP guarantee. Only the entity's own config can "
                f'allow it ([privacy] mode = "{MIXED}")'
            )

    def charge(
        self,
        rpc: str,
        peer: str,
        *,
        basis: Basis | None = None,
        mbar: int | None = None,
        epoch: int = 0,
        nonce: str | None = None,
        epsilon: float | None = None,
        **fields: Any,
    ) -> dict[str, Any]:
        """Check the pin, the nonce and the budgets, then record the release durably; returns the log record.

        Raises
        ------
        CallLimitError
            ``peer`` made its ``max_releases_per_minute`` releases of the last minute (the text says when to retry).
        PrivacyError
            Another basis view than the pinned one or an mbar above the pinned one, a nonce answered
            before, a DP budget that does not cover ``epsilon`` (or no budget), or no entity-alone
            releases left.
        ConfigError
            The release log cannot record it (its disk: below the floor, or an append failed).

        Nothing is recorded, and nothing counted against the rate, when any of these is raised.
        """
        with self._lock:
            self._catch_up()  # another process serving this entity released something: count it too
            bucket = self._rate(peer)
            # The call's request id and the coordinator's run id: an officer joins a release to a run by them.
            record: dict[str, Any] = {"rpc": rpc, "peer": peer, **current_call_ids(), **fields, "epsilon_micro": 0}
            if basis is not None:
                self._check_epoch(epoch, basis, mbar or 0)
                if epoch:
                    record["epoch"] = epoch
            if mbar is not None:
                self._check_mbar(mbar, epoch)
                record["mbar"] = mbar
            if nonce is not None:
                if nonce in self.nonces:
                    raise PrivacyError(
                        f"entity {self.who} answered nonce {nonce[:16]}... before: a mask is used once; ask again "
                        "with a fresh nonce"
                    )
                record["nonce"] = nonce
            if basis is not None:
                self._check_basis(basis, epoch)
                record["basis_fingerprint"] = basis.fingerprint()
                if epoch not in self.pins:
                    record["basis"] = asdict(basis)
            if epsilon is not None:
                record["epsilon_micro"] = self._check_budget(epsilon)
            if rpc == "LocalBaseline" and self.baselines >= self.max_baseline_releases:
                raise PrivacyError(
                    f"entity {self.who} has released its entity-alone figures {self.baselines} times, its limit "
                    "([privacy] max_baseline_releases): each answer is a function of its records the requester chose"
                )
            if nonce is not None:
                # Marked used before the release is written: a failure from here on can make a fresh nonce look
                # used (asked again under another), never a used one fresh.
                try:
                    self.nonces.add(nonce)
                except sqlite3.Error as exc:
                    logger.error("entity %s: its table of used nonces could not grow (%s)", self.who, exc)
                    raise self.log.disk_error() from None
            try:
                written = self.log.append(record)
            except BaseException:
                if nonce is not None:
                    self.nonces.discard(nonce)
                raise
            self._count(written)
            if bucket is not None:
                caller, tokens, now = bucket
                self._buckets[caller] = (tokens - 1, now)
            return written

    def _rate(self, peer: str) -> tuple[str, float, float] | None:
        """The caller's bucket as of now, refused when it holds less than one release; None without a limit.

        Raises
        ------
        CallLimitError
            The caller made its releases of the last minute; the text says when one more is allowed.
        """
        limit = self.max_releases_per_minute
        if not limit:
            return None
        now, caller, per_second = self._clock(), _caller(peer), limit / 60.0
        tokens, then = self._buckets.get(caller, (float(limit), now))
        tokens = min(float(limit), tokens + max(0.0, now - then) * per_second)
        if tokens < 1.0:
            self.rate_refusals += 1
            wait = math.ceil((1.0 - tokens) / per_second * 10) / 10
            raise CallLimitError(
                f"entity {self.who} records at most {limit} releases a minute from one caller ([privacy] "
                f"max_releases_per_minute) and this caller has made them: retry in {wait:.1f} s"
            )
        if len(self._buckets) > _BUCKETS_KEPT:
            self._buckets = {
                key: (held, when)
                for key, (held, when) in self._buckets.items()
                if held + max(0.0, now - when) * per_second < limit
            }
        return caller, tokens, now

    def _check_epoch(self, epoch: int, basis: Basis, mbar: int) -> None:
        if epoch > self.epoch:
            raise PrivacyError(
                f"entity {self.who} is at basis epoch {self.epoch}, and this request asks for epoch {epoch}, which its "
                "operator has not opened (every member of its column block runs `ppsvm entity epoch --next`)"
            )
        if epoch < self.epoch and epoch not in self.pins:
            raise PrivacyError(
                f"entity {self.who}: basis epoch {epoch} released no kernel block before epoch {self.epoch} was "
                "opened; an older epoch only serves the view it pinned (a deployed model's), never a new one"
            )
        if epoch not in self.pins and self.max_points is not None:
            used = self.points_used({epoch: (basis.kernel, mbar)})
            if used > self.max_points:
                raise PrivacyError(
                    f"entity {self.who}: pinning {basis.kernel} with mbar = {mbar} in basis epoch {epoch} would "
                    f"release {used} functionals per record over all its epochs, more than n_j - 1 = {self.max_points} "
                    "(privacy rule 3, counted over the entity's whole life). Ask for fewer points"
                )

    def _check_basis(self, basis: Basis, epoch: int) -> None:
        pinned = self.pins.get(epoch)
        if pinned is not None and basis != pinned:
            raise PrivacyError(
                f"entity {self.who} serves its random basis B_j under one view per basis epoch, pinned by the epoch's "
                f"first kernel release: epoch {epoch}, {pinned.describe()}; this request asks {basis.describe()} "
                f"(it differs in {', '.join(pinned.differences(basis))}). A second view adds equations per record; "
                "another view needs a new epoch "
                "(`ppsvm entity epoch --next` at every member of its column block, refused beyond the privacy limits)"
            )

    def _check_mbar(self, mbar: int, epoch: int) -> None:
        pinned = self.pin_mbars.get(epoch)
        if pinned is not None and epoch in self.pins and mbar > pinned:
            raise PrivacyError(
                f"entity {self.who} has released kernel blocks of at most mbar = {pinned} random points under the "
                f"view basis epoch {epoch} pinned, and this request asks for {mbar}: more points add equations for "
                "every record served before. Ask for at most that many, or open a new epoch"
            )

    def next_epoch(self, who: str) -> int:
        """Open the next basis epoch (its operator's decision, recorded in the log); returns its number.

        Raises
        ------
        PrivacyError
            The current epoch released no kernel block yet (nothing to move from: any view can still be pinned),
            or the epochs so far leave no point per record under rule 3.
        """
        with self._lock:
            self._catch_up()
            if self.epoch not in self.pins:
                raise PrivacyError(
                    f"entity {self.who}: basis epoch {self.epoch} has released no kernel block, so its view is not "
                    "pinned yet: the next training may use any kernel, bounds and mbar without a new epoch"
                )
            used = self.points_used()
            if self.max_points is not None and used >= self.max_points:
                raise PrivacyError(
                    f"entity {self.who}: its epochs so far released {used} functionals per record, n_j - 1 = "
                    f"{self.max_points} allowed (privacy rule 3 over its whole life): a new epoch could release none. "
                    "Train with fewer points from the start, or give the column block a new secret and new records"
                )
            self._count(self.log.append({"rpc": EPOCH_EVENT, "peer": who, "epoch": self.epoch + 1}))
            return self.epoch

    def _check_budget(self, epsilon: float) -> int:
        if self.total_micro is None:
            raise PrivacyError(
                f"entity {self.who} has no privacy budget: set [privacy] epsilon_total in its config "
                "to allow DP releases"
            )
        need = epsilon_micro(epsilon)
        remaining = self.total_micro - self.spent_micro
        if need > remaining:
            raise PrivacyError(
                f"entity {self.who}: privacy budget exhausted: requested epsilon {epsilon:g} but only "
                f"{epsilon_of(max(0, remaining)):g} of {epsilon_of(self.total_micro):g} remains"
            )
        return need

    @contextlib.contextmanager
    def touching(self, rpc: str) -> Iterator[None]:
        """Run a computation over the records after its release was charged.

        Any failure becomes :class:`ReleaseFailed` with a fixed text: which row overflowed, how many
        did, or that a solver stalled on these records would otherwise tell the requester about them.
        The operator's log keeps the real error.
        """
        try:
            yield
        except CallCancelled:
            logger.info("entity %s: %s stopped, its caller having gone (charged as a release)", self.who, rpc)
            raise
        except Exception:
            self.failures_after_charge += 1
            logger.exception("entity %s: %s failed after touching the records (charged as a release)", self.who, rpc)
            raise ReleaseFailed(
                f"entity {self.who}: {rpc} failed after reading its records; the attempt is charged as a release "
                "and its cause is in the entity's own log only"
            ) from None

    def state(self) -> dict[str, Any]:
        """The guard's state for audits (nothing in it depends on the records' values), the log re-read first.

        Another process may have written to the log: an operator opening an epoch while the entity serves.
        ``releases`` and ``chain_head`` (hex SHA-256 of the log's last line) are read together, and ``chain_root``
        names the log (its creation line's digest): a coordinator that saw a longer chain notices a log put back.
        """
        with self._lock:
            self._catch_up()
            releases, head = self.log.head
        return {
            "mode": self.mode,
            "releases": releases,
            "chain_head": head,
            "chain_root": self.log.root,
            "log_created": self.log.created,
            "epoch": self.epoch,
            "pinned_basis": None if self.pinned is None else self.pinned.describe(),
            "pinned_mbar": self.pinned_mbar,
            "epochs": {
                epoch: {"view": pin.describe(), "mbar": self.pin_mbars.get(epoch, 0)}
                for epoch, pin in self.pins.items()
            },
            "points_used": self.points_used() if self.pins else 0,
            "max_points": self.max_points,
            "epsilon_total": None if self.total_micro is None else epsilon_of(self.total_micro),
            "epsilon_spent": epsilon_of(self.spent_micro),
            "baseline_releases": self.baselines,
            "max_baseline_releases": self.max_baseline_releases,
        }


def _caller(peer: str) -> str:
    """Whom a rate is counted for: the certificate name, or for a plaintext call its address without the port (each
    new connection has another)."""
    if peer.startswith(("ipv4:", "ipv6:")):
        return peer.rsplit(":", 1)[0]
    return peer
