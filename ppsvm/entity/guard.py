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
  coordinator's nonce; the entity answers each nonce once, so no mask covers two releases.
- **Budgets**. DP releases spend integer micro-epsilons of ``epsilon_total``; the
  entity-alone figures are capped at ``max_baseline_releases``.
- **Charged before computed** (rule 6). A release is written to the append-only log
  before the records are touched; if the computation then fails, the caller gets a fixed
  message naming the RPC, never anything derived from the data, and the charge stays.

Requests are validated from the request alone by the caller (:mod:`ppsvm.entity.cell`) before
:meth:`ReleaseGuard.charge`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from fractions import Fraction
from typing import Any

from ppsvm.config import ENTITY_MODES
from ppsvm.core.release_log import MICRO_PER_EPSILON, ReleaseLog
from ppsvm.errors import CallCancelled, PrivacyError, ReleaseFailed

logger = logging.getLogger(__name__)

RANDOM_KERNEL, DP, MIXED = ENTITY_MODES
# The RPCs each mode answers. Metadata holds shapes and keyed checks only (n is public under the
# replace-one neighbouring relation of the DP guarantee); AcceptModel receives, it releases nothing.
_SERVES = {
    RANDOM_KERNEL: frozenset({"Metadata", "Records", "FeatureRange", "KernelBlock", "AcceptModel", "LocalBaseline"}),
    DP: frozenset({"Metadata", "AcceptModel", "DpWeights", "DpEvaluate", "DpScoreHistogram"}),
}
_SERVES[MIXED] = _SERVES[RANDOM_KERNEL] | _SERVES[DP]
# Every RPC an entity answers in some mode: the names a release may be recorded under.
ENTITY_RPCS = _SERVES[MIXED]
# The log record of an operator opening a new basis epoch (not an RPC: nothing leaves the entity).
EPOCH_EVENT = "Epoch"

# Below this a DP release is refused: each release costs a log line, and an epsilon that rounds
# to nothing would let a coordinator ask without end.
MIN_EPSILON = 1e-3


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
    ) -> None:
        if mode not in ENTITY_MODES:
            raise ValueError(f"mode must be one of {', '.join(ENTITY_MODES)}, got {mode!r}")
        self.log = log
        self.mode = mode
        self.who = who
        # Functionals per record all epochs together may release (n_j - 1, rule 3); None: not counted (override).
        self.max_points = max_points
        self.total_micro = None if epsilon_total is None else budget_micro(epsilon_total)
        self.max_baseline_releases = max_baseline_releases
        self._lock = threading.Lock()
        self._recount()

    def _recount(self) -> None:
        self.epoch = 0  # the current basis epoch: the last one its operator opened
        self.pins: dict[int, Basis] = {}  # per epoch, the view its first kernel release pinned
        self.pin_mbars: dict[int, int] = {}  # per epoch, the largest mbar released: the pin covers it
        self.nonces: set[str] = set()
        self.spent_micro = 0
        self.baselines = 0
        self.releases_by_rpc: Counter[str] = Counter()  # for the metrics, without reading the log per scrape
        for record in self.log.records:
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
        PrivacyError
            Another basis view than the pinned one or an mbar above the pinned one, a nonce answered
            before, a DP budget that does not cover ``epsilon`` (or no budget), or no entity-alone
            releases left. Nothing is recorded then.
        """
        with self._lock:
            if self.log.refresh():  # another process serving this entity released something: count it too
                self._recount()
            record: dict[str, Any] = {"rpc": rpc, "peer": peer, **fields, "epsilon_micro": 0}
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
            written = self.log.append(record)
            self._count(written)
            return written

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
                "(fields kernel, mu, scaling). A second view adds equations per record; another view needs a new epoch "
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
            if self.log.refresh():
                self._recount()
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

    @contextmanager
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
            logger.exception("entity %s: %s failed after touching the records (charged as a release)", self.who, rpc)
            raise ReleaseFailed(
                f"entity {self.who}: {rpc} failed after reading its records; the attempt is charged as a release "
                "and its cause is in the entity's own log only"
            ) from None

    def state(self) -> dict[str, Any]:
        """The guard's state for audits (nothing in it depends on the records' values), the log re-read first.

        Another process may have written to the log: an operator opening an epoch while the entity serves.
        """
        with self._lock:
            if self.log.refresh():
                self._recount()
        return {
            "mode": self.mode,
            "releases": len(self.log.records),
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
