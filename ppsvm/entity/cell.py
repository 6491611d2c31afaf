"""An entity's private cell A_ij and everything it may compute from it.

This module is the only place that touches the private rows. What it returns
to the servicer is limited to what docs/design.md rule 1 allows to leave: kernel
blocks against the entity's own B_j, record ids, labels, per-feature min/max,
shapes and the entity-alone error; in DP mode, noised weights, error counts and
score histograms.

It stays one module (about 520 lines) on purpose: every release the entity can
make is here, each admitted, validated and charged through the guard in the same
order, so that a privacy reviewer reads them side by side in one file.
"""

from __future__ import annotations

import hmac
import logging
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from pathlib import Path
from typing import Any, ParamSpec, TypedDict

import numpy as np

from ppsvm.config import (
    CONTINUOUS_NOISE_KEY,
    NON_PRIVATE_WEIGHTS_KEY,
    SINGLE_BLOCK_CONSENT_KEY,
    SINGLE_BLOCK_GAIN_KEY,
    EntityConfig,
)
from ppsvm.constants import DEFAULT_FOLDS, MAX_ARRAY_BYTES, MAX_HISTOGRAM_EDGES
from ppsvm.core.aggregation import (
    MAX_NONCE_BYTES,
    MIN_NONCE_BYTES,
    log_share,
    mask_context,
    masked_shares,
    records_digest,
)
from ppsvm.core.dp import (
    MECHANISMS,
    NON_PRIVATE,
    Release,
    is_mechanism,
    objective_perturbation_parameters,
    private_weights,
)
from ppsvm.core.dp_model import DpModel, parse_any_model
from ppsvm.core.fourier import MAX_RHO_ROW_L1, MIN_PHASE_RANGE, apply_scaling, fourier_features, phase_range
from ppsvm.core.kernels import KernelName, kernel, scale_to_unit
from ppsvm.core.local_svm import fit_local, local_figures
from ppsvm.core.lp import Task
from ppsvm.core.metrics import class_histogram
from ppsvm.core.noise import IntegerSource, discrete_laplace, integer_source
from ppsvm.core.privacy import (
    MIXED_MODE_WARNING,
    NOT_PRIVATE_BANNER,
    check_mbar,
    default_mbar,
    single_block_exposure,
)
from ppsvm.core.randomness import derive_B, features_check, key_check_value, range_tag
from ppsvm.core.reconstruction import Risk
from ppsvm.core.release_log import ReleaseLog, create_release_log
from ppsvm.core.tuning import SEARCHES, Search
from ppsvm.data.cell import Cell
from ppsvm.data.schema import numeric_schema
from ppsvm.data.sources import read_source
from ppsvm.entity.guard import MIN_EPSILON, MIXED, Basis, ReleaseGuard, epsilon_of
from ppsvm.entity.records import ScoringRecords, pseudonymous
from ppsvm.entity.served import ServedRecords, served_path
from ppsvm.errors import CallCancelled, ConfigError, DataError, PrivacyError
from ppsvm.files import write_atomic

logger = logging.getLogger(__name__)
P = ParamSpec("P")

# Leave-one-out costs one fit per record and point searched: fine for the papers' cells of about 25 records.
LEAVE_ONE_OUT_MAX_ROWS = 200
# A fixed nu or mu of LocalBaseline must lie in these ranges (a decade or more beyond the tuning grids): HiGHS
# stopped as "unbounded" on some cells and not others at nu >= 1e8 with mu = 1e-9, a failure that would tell the
# requester about the records (issue 27). Within them, hostile-request scans found no failure.
BASELINE_NU_RANGE = (1e-9, 1e5)
BASELINE_MU_RANGE = (1e-8, 1e4)
# Digits of the entity-alone figures: decimals of the rates (an error rate of 0.123), significant ones of the
# RMSE, which has the labels' units (4.56).
BASELINE_DIGITS = 3
# Bounds a DpWeights request must keep, checked before any record is read (with rho's, MAX_RHO_ROW_L1 of
# ppsvm.core.fourier, which keeps rho'x finite for every record: no failure can depend on what they hold).
# The solver certifies its weights whatever the records (ppsvm.core.linear_svm: an exact finish after coordinate
# descent; 0 failures in 11,676 single-label flips at C = 1000 with D up to 10,000, and certified at C = 1e4 in
# tests/unit/test_linear_svm_exact.py). The cap keeps C where those scans were measured.
MAX_DP_C = 1e3
MAX_DP_FREQUENCIES = 10_000
# Mechanisms whose noise is drawn in floating point (Laplace is drawn exactly on a grid).
CONTINUOUS_NOISE_MECHANISMS = ("output-gamma", "objective")


@dataclass(frozen=True)
class SignedRange:
    """A column-block member's published per-feature min and max with its tag (see FeatureRange)."""

    entity_id: str
    low: Sequence[float]
    high: Sequence[float]
    tag: str


# Rows of a kernel block computed per step when it is asked for whole (the servicer asks for one message's rows).
KERNEL_BATCH_ROWS = 8192


@dataclass(frozen=True)
class BlockStream:
    """A kernel block, or a masked share, that leaves batch by batch once its release was charged.

    Attributes
    ----------
    shape : (int, int)
        (rows, mbar), known before any row is computed.
    dtype : numpy dtype
        uint64 for a masked share, float64 for kernel values.
    batches : iterator of ndarray, each shape (k, mbar)
        Consecutive rows, each batch computed when it is asked for.
    """

    shape: tuple[int, int]
    dtype: np.dtype
    batches: Iterator[np.ndarray]

    def whole(self) -> np.ndarray:
        """Every batch put together: the block, shape (rows, mbar)."""
        block = np.empty(self.shape, self.dtype)
        start = 0
        for batch in self.batches:
            block[start : start + len(batch)] = batch
            start += len(batch)
        return block


def _whole(stream: Callable[P, BlockStream]) -> Callable[P, np.ndarray]:
    """``stream``, answering with its block whole (:meth:`BlockStream.whole`)."""

    def whole(*args: P.args, **kwargs: P.kwargs) -> np.ndarray:
        return stream(*args, **kwargs).whole()

    whole.__doc__ = f":meth:`{stream.__name__}`'s block whole: shape (rows, mbar), uint64 with a nonce, else float64."
    return whole


class DpEvaluation(TypedDict):
    """What DpEvaluate releases: the fields of its reply, besides the entity's id and remaining budget."""

    n_test: int
    error_rate: float
    epsilon: float
    noise: str


class DpHistogram(TypedDict):
    """What DpScoreHistogram releases: the fields of its reply, besides the entity's id and remaining budget."""

    n_train: int
    negative_counts: list[int]
    positive_counts: list[int]
    epsilon: float
    noise: str


def _received_model(model_json: bytes) -> Any:
    try:
        text = model_json.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError("the model is not UTF-8 text") from exc
    return parse_any_model(text, "received model")


def _float_bytes(values: Sequence[float]) -> bytes:
    return np.asarray(values, dtype=np.float64).tobytes()


def entity_guard(config: EntityConfig, n_features: int) -> ReleaseGuard:
    """The release guard of an entity of ``n_features`` features, replayed from its release log."""
    assert config.release_log is not None
    return ReleaseGuard(
        ReleaseLog(config.release_log, config.id, min_free_disk_mb=config.min_free_disk_mb),
        mode=config.mode,
        epsilon_total=config.epsilon_total,
        max_baseline_releases=config.max_baseline_releases,
        max_releases_per_minute=config.max_releases_per_minute,
        who=config.id,
        max_points=None if config.non_private_override else n_features - 1,
    )


class EntityCore:
    """An entity's answers to the coordinator. Each public method is one RPC and follows one order.

    1. :meth:`ReleaseGuard.admit`: the entity's mode serves this RPC;
    2. the request is checked from the request alone (and public facts: shapes, ids, its own published range);
    3. :meth:`ReleaseGuard.charge` checks the basis pin and the budgets and records the release durably;
    4. only then are the records touched, inside :meth:`ReleaseGuard.touching`.

    Parameters
    ----------
    config : EntityConfig
    new_release_log : bool
        Start the release log (the entity has never served); otherwise a missing log is refused.
    """

    def __init__(self, config: EntityConfig, *, new_release_log: bool = False) -> None:
        self.config = config
        self.cell = read_source(config.data, config.schema)
        if config.label_names is not None and len(config.label_names) > 2:
            self.cell.check_class_codes(config.label_names)
        self._secret = config.read_secret()
        # One secret per other entity of its row block: its kernel blocks leave only masked (privacy rule 8).
        self._pair_secrets = config.read_pair_secrets()
        self._set_digests: dict[str, bytes] = {}
        self.secret_check = key_check_value(self._secret)
        id_key = config.read_id_key()
        # From here on the entity knows its records only by pseudonym: every id it publishes or is asked about.
        self.id_key_check = "" if id_key is None else key_check_value(id_key)
        if id_key is not None:
            self.cell = pseudonymous(self.cell, id_key)
        # The column block's members must encode alike: same columns, types, categories, imputations and bounds.
        schema = config.schema or numeric_schema(self.cell.feature_names)
        self.features_check = features_check(self._secret, (*schema.encoded_names, schema.fingerprint()))
        # Declared bounds: the scaling, agreed in the schema; no extreme of the records leaves, new ones change nothing.
        self.bounds = schema.declared_bounds()
        if self.bounds is not None:
            self.cell = self._within_bounds(self.cell, schema.encoded_names)
        self.scoring: ScoringRecords | None = None
        if config.scoring is not None:
            self.scoring = ScoringRecords(config.scoring, schema, id_key, self.cell.holds)
            self.scoring.refresh(force=True, strict=True)  # a source that cannot be read stops the entity at start
        if config.non_private_override:
            logger.warning("entity %s: %s", config.id, NOT_PRIVATE_BANNER)
        if config.mode == MIXED:
            logger.warning("entity %s: %s", config.id, MIXED_MODE_WARNING)
        # The last scaling verified and the B_j last derived: a prediction service asks with the same ranges and
        # mbar on every call, and re-checking unchanged state cost a tenth of an entity's CPU per call (issue 14).
        self._verified_scaling: tuple[tuple[Any, ...], tuple[np.ndarray, np.ndarray]] | None = None
        self._points: tuple[tuple[int, int], np.ndarray] | None = None
        assert config.release_log is not None
        if new_release_log and not config.release_log.exists():
            create_release_log(config.release_log, config.id)
        self.guard = entity_guard(config, self.cell.n_features)
        self.served = ServedRecords(served_path(config.release_log), self._secret)

    @property
    def id(self) -> str:
        return self.config.id

    def records(self, peer: str = "") -> dict[str, np.ndarray]:
        """Record ids and, where held, labels of the training and held-out records; ids of records to score."""
        self.guard.admit("Records")
        arrays = {"train_ids": self.cell.train_ids, "test_ids": self.cell.test_ids}
        if self.cell.y_train is not None and self.cell.y_test is not None:
            arrays["train_labels"] = self.cell.y_train
            arrays["test_labels"] = self.cell.y_test
        if self.scoring is not None:
            self.scoring.refresh(force=True)  # the coordinator asks again when it meets an id it does not know
            arrays["score_ids"] = self.scoring.ids()
        self.guard.charge(
            "Records",
            peer,
            rows=len(self.cell.train_ids) + len(self.cell.test_ids) + len(arrays.get("score_ids", ())),
            labels=self.cell.y_train is not None,
        )
        return arrays

    def _within_bounds(self, cell: Cell, names: Sequence[str]) -> Cell:
        """The cell with every value clipped to the declared bounds; how many were is logged here, never sent."""
        assert self.bounds is not None
        low, high = self.bounds
        clipped = []
        for X in (cell.X_train, cell.X_test):
            outside = (X < low) | (X > high)
            clipped.append(outside.sum(axis=0))
            np.clip(X, low, high, out=X)
        count = clipped[0] + clipped[1]
        if count.any():
            logger.warning(
                "entity %s: %d value(s) outside the declared bounds were clipped to them (%s); widen "
                "[[schema.features]] low/high, agreed by the column block, if the field allows such values",
                self.id,
                int(count.sum()),
                ", ".join(f"{names[k]}: {int(count[k])}" for k in np.flatnonzero(count)[:8]),
            )
        return cell

    @cached_property
    def own_range(self) -> tuple[np.ndarray, np.ndarray]:
        """The declared bounds, or else the per-feature min and max of the training rows; computed once."""
        if self.bounds is not None:
            return self.bounds
        return self.cell.X_train.min(axis=0), self.cell.X_train.max(axis=0)

    def feature_range(self, peer: str = "") -> dict[str, np.ndarray]:
        """The declared bounds (or, without them, the training records' per-feature min and max), tagged."""
        self.guard.admit("FeatureRange")
        self.guard.charge("FeatureRange", peer, features=self.cell.n_features)
        low, high = self.own_range
        return {"low": low, "high": high, "tag": np.array([range_tag(self._secret, self.id, low, high)])}

    def block_scaling(self, ranges: Sequence[SignedRange]) -> tuple[np.ndarray, np.ndarray]:
        """The column block's scaling from its members' signed ranges, checked here; (low, high), shapes (n_j,).

        Raises
        ------
        PrivacyError
            The ranges are not exactly one per column-block member, a tag does not
            verify, or this entity's own range is not the one it published: the
            scaling would then be the requester's choice (a reconstruction lever).
        """
        # By bytes, not by value: -0.0 == 0.0, but the tags differ.
        key = tuple((r.entity_id, _float_bytes(r.low), _float_bytes(r.high), r.tag) for r in ranges)
        verified = self._verified_scaling
        if verified is not None and verified[0] == key:
            return verified[1]
        n = self.cell.n_features
        members = set(self.config.column_block_members)
        given = [r.entity_id for r in ranges]
        if sorted(given) != sorted(members):
            raise PrivacyError(
                f"entity {self.id}: a scaling must combine the published ranges of exactly the column block's entities "
                f"{sorted(members)} (its config's column_block_members), once each; got {given}"
            )
        lows, highs = [], []
        for signed in ranges:
            low, high = np.asarray(signed.low, dtype=np.float64), np.asarray(signed.high, dtype=np.float64)
            if low.shape != (n,) or high.shape != (n,):
                raise DataError(
                    f"entity {self.id} holds {n} features; "
                    f"the range of {signed.entity_id} has {low.size} lows and {high.size} highs"
                )
            if not hmac.compare_digest(signed.tag, range_tag(self._secret, signed.entity_id, low, high)):
                raise PrivacyError(
                    f"entity {self.id}: the range relayed for {signed.entity_id} does not carry a valid tag under "
                    "the column-group secret: it was altered or comes from another column block"
                )
            lows.append(low)
            highs.append(high)
        own = given.index(self.id)
        if not (np.array_equal(lows[own], self.own_range[0]) and np.array_equal(highs[own], self.own_range[1])):
            raise PrivacyError(f"entity {self.id}: the range relayed as its own is not the one it holds")
        if self.bounds is not None and not all(
            np.array_equal(low, self.bounds[0]) and np.array_equal(high, self.bounds[1])
            for low, high in zip(lows, highs, strict=True)
        ):
            # A member with validly tagged other bounds could otherwise widen one feature and squash it to a constant.
            raise PrivacyError(
                f"entity {self.id}: a member's range differs from the bounds its schema declares; the column block's "
                "members must declare the same bounds (the features check compares them)"
            )
        scaling = np.min(lows, axis=0), np.max(highs, axis=0)
        for bound in scaling:
            bound.setflags(write=False)
        self._verified_scaling = (key, scaling)
        return scaling

    def _random_points(self, mbar: int, epoch: int = 0) -> np.ndarray:
        """B_j's first ``mbar`` rows in basis epoch ``epoch``, shape (mbar, n_j); kept for the last (mbar, epoch)."""
        points = self._points
        if points is None or points[0] != (mbar, epoch):
            points = ((mbar, epoch), derive_B(self._secret, mbar, self.cell.n_features, epoch))
            points[1].setflags(write=False)
            self._points = points
        return points[1]

    def kernel_stream(
        self,
        kernel_name: KernelName,
        mbar: int,
        mu: float,
        ranges: Sequence[SignedRange],
        record_set: str | None = None,
        ids: list[str] | None = None,
        peer: str = "",
        nonce: bytes = b"",
        epoch: int = 0,
        batch_rows: int = KERNEL_BATCH_ROWS,
    ) -> BlockStream:
        """This entity's share of its row block's kernel (masked), or its block K(A, B_j') on its own.

        The rows are the training or held-out records in this entity's order, or the records named by
        ``ids`` in the order given, scaled with :meth:`block_scaling` of ``ranges``.

        With a ``nonce`` (secure aggregation, :mod:`ppsvm.core.aggregation`) the answer is the share
        (A B' or the log-kernel -mu ||a - b||^2) in fixed point plus the masks of every pair of its row
        block, bound to the nonce, the ordered records and the view: only the row block's sum can be read.
        Without one, or for an entity alone in its row block (nothing to mask with), the block leaves on its
        own, which a column-block peer can invert (privacy rule 8): where its column block has other members,
        it is released only when its config consents or the reconstruction risk measured once on the entity's
        own records is within ``single_block_max_gain`` (:attr:`single_block_allowed`: decided before the charge).

        Every check and the charge happen here, before any row is computed; the rows are computed as
        the stream's batches are asked for (a block on its own ``batch_rows`` at a time, a masked share
        in its masks' batches), so that they can leave while the next ones are computed.

        Returns
        -------
        BlockStream
            Shape (rows, mbar); uint64 masked shares with a nonce, float64 kernel values without.

        Raises
        ------
        PrivacyError
            mbar >= n_j without the entity's own override (rule 3), ranges that fail :meth:`block_scaling`,
            another kernel, width or scaling than the pinned one or a larger mbar, a nonce answered before,
            or a single-block release over the measured-risk limit without consent.
        DataError
            Ranges of the wrong length, unknown or repeated ids, a nonce that is too short.
        """
        self.guard.admit("KernelBlock")
        n = self.cell.n_features
        check_mbar(mbar, n, self.config.non_private_override, self.id)
        if kernel_name == "gaussian" and not (math.isfinite(mu) and mu > 0):
            raise DataError(f"entity {self.id}: the Gaussian width mu must be a finite number > 0, got {mu}")
        if nonce and not MIN_NONCE_BYTES <= len(nonce) <= MAX_NONCE_BYTES:
            raise DataError(
                f"entity {self.id}: a nonce must have {MIN_NONCE_BYTES} to {MAX_NONCE_BYTES} bytes, got {len(nonce)}"
            )
        rows = max(len(self.cell.train_ids), len(self.cell.test_ids))
        if mbar * max(rows, n) * 8 > MAX_ARRAY_BYTES:  # only reachable with the non-private override
            raise DataError(
                f"entity {self.id}: mbar = {mbar} would need more than {MAX_ARRAY_BYTES >> 30} GiB for B_j or the block"
            )
        if record_set in ("train", "test"):
            records, count = record_set, len(self.cell.train_ids if record_set == "train" else self.cell.test_ids)
        elif ids is not None:
            self.cell.check_ids(ids, None if self.scoring is None else self.scoring.unknown)
            records, count = "ids", len(ids)
        else:
            raise DataError("a kernel request must name a record set or record ids")
        low, high = self.block_scaling(ranges)
        basis = Basis(
            kernel_name, float(mu) if kernel_name == "gaussian" else 0.0, tuple(low.tolist()), tuple(high.tolist())
        )
        masked = bool(nonce) and bool(self._pair_secrets)
        # Only a column-block peer knows B_j: a block whose column block has no other member leaves under a B_j
        # the receiver does not know (the papers' case), whether masked or not.
        exposed = not masked and len(self.config.column_block_members) > 1
        if exposed and not self.single_block_allowed:
            raise PrivacyError(
                f"entity {self.id} refuses to release its kernel block on its own: a colluding column-block peer's "
                "reconstruction of its records, measured at its start, is above its limit ([privacy] "
                f"{SINGLE_BLOCK_GAIN_KEY}; its own log has the figures). Alternatives: combine it with the other "
                "entities of its row block (secure aggregation: a vertical or checkerboard federation whose entities "
                f"hold pair secrets), DP mode, or its operator's consent ([privacy] {SINGLE_BLOCK_CONSENT_KEY} = true)"
            )
        self.guard.charge(
            "KernelBlock",
            peer,
            basis=basis,
            mbar=mbar,
            epoch=epoch,
            nonce=nonce.hex() if nonce else None,
            records=records,
            rows=count,
            masked=masked,
        )
        named = self._served_rows(ids or []) if records == "ids" else None
        X = self.cell.X_train if records == "train" else self.cell.X_test if records == "test" else named
        assert X is not None
        with self.guard.touching("KernelBlock"):
            points = self._random_points(mbar, epoch)
        if not nonce:
            # Each batch of rows is scaled and its kernel computed only when it is to leave, as K(B, A')': both
            # kernels are symmetric, and so the rows come laid out by columns, as the coordinator keeps K.
            batches = (
                kernel(kernel_name, points, scale_to_unit(X[start : start + batch_rows], low, high), mu).T
                for start in range(0, count, batch_rows)
            )
            return BlockStream((count, mbar), np.dtype(np.float64), self._touching_each(batches))
        ordered_ids = (
            self.cell.train_ids if records == "train" else self.cell.test_ids if records == "test" else ids or []
        )
        with self.guard.touching("KernelBlock"):
            # What every entity of the row block asks under: its column block's scaling is not (each has its own).
            view = {"kernel": kernel_name, "mu": basis.mu.hex(), "mbar": mbar}
            context = mask_context(nonce, self._records_digest(records, ordered_ids), view)
            # The masks are one stream per pair over all rows in order: the share is made whole, then masked
            # batch by batch as the batches leave.
            share = log_share(kernel_name, scale_to_unit(X, low, high), points, mu)
        return BlockStream(
            (count, mbar),
            np.dtype(np.uint64),
            self._touching_each(masked_shares(share, self.id, self._pair_secrets, context)),
        )

    # The same release with its rows put together, for callers that want the block whole (tests, the attack runs).
    kernel_block = _whole(kernel_stream)

    def _touching_each(self, batches: Iterator[np.ndarray]) -> Iterator[np.ndarray]:
        """``batches``, each computed inside :meth:`ReleaseGuard.touching` (a failure's text names no record)."""
        while True:
            with self.guard.touching("KernelBlock"):
                batch = next(batches, None)
            if batch is None:
                return
            yield batch

    @property
    def blocks_leave_alone(self) -> bool:
        """Whether its kernel blocks would reach the coordinator on their own where a peer knows its B_j: no row-block
        peer to combine with (a horizontal split, or alone in its row block) and other members in its column block."""
        return not self._pair_secrets and len(self.config.column_block_members) > 1

    @cached_property
    def single_block_exposure(self) -> Risk:
        """:func:`ppsvm.core.privacy.single_block_exposure` of its records: measured once, on first use (the start
        line of an entity whose blocks leave alone; the first unmasked request of one whose blocks may)."""
        return single_block_exposure(self.cell.X_train, self._secret)

    @property
    def single_block_allowed(self) -> bool:
        """Whether its kernel block may leave on its own where a column-block peer knows B_j (privacy rule 8): its
        operator consents, or :attr:`single_block_exposure` is within ``single_block_max_gain``.

        The same for every request (no view, mbar or epoch of the coordinator's enters it), so a refusal is decided
        before the charge and tells a caller one fixed bit of the entity, not one per view it asks about.
        """
        return self.config.single_block_consent or self.single_block_exposure.gain <= self.config.single_block_max_gain

    def _records_digest(self, records: str, ids: Sequence[str] | np.ndarray) -> bytes:
        """:func:`records_digest` of the ordered ids, kept for the training and held-out sets (0.7 s at a million ids,
        and they do not change while the entity runs)."""
        if records == "ids":
            return records_digest(list(ids))
        digest = self._set_digests.get(records)
        if digest is None:
            digest = self._set_digests[records] = records_digest(np.asarray(ids))
        return digest

    def _served_rows(self, ids: list[str]) -> np.ndarray:
        """The rows of records named by id, refused when one of them changed since it was served (issue 26).

        A changed record served again would be a second view of it (2 x mbar equations); the caller hears that a
        record changed, never which. The fingerprints are written before any row leaves.
        """
        with self.guard.touching("KernelBlock"):
            rows = self._rows_for_ids(ids)
            changed = self.served.changed(ids, rows)
        if changed:
            raise PrivacyError(
                f"entity {self.id}: a record changed since its last release: the same id with other values would be "
                "a second view of it. A changed record is served again only as a new record (a new id)"
            )
        with self.guard.touching("KernelBlock"):
            self.served.remember(ids, rows)
        return rows

    def _rows_for_ids(self, ids: list[str]) -> np.ndarray:
        """Feature rows of ids passed by ``Cell.check_ids``, from the cell or the scoring source, in order."""
        if self.scoring is None:
            return self.cell.rows_for_ids(ids)
        held = np.array(self.cell.holds(ids), dtype=bool)
        rows = np.empty((len(ids), self.cell.n_features))
        if held.any():
            rows[held] = self.cell.rows_for_ids([r for r, known in zip(ids, held, strict=True) if known])
        if not held.all():
            rows[~held] = self.scoring.rows([r for r, known in zip(ids, held, strict=True) if not known])
            if self.bounds is not None:  # a new record beyond the bounds is scored at them, like a training one
                np.clip(rows, *self.bounds, out=rows)
        return rows

    def accept_model(self, model_json: bytes, directory: Path) -> Path:
        """Validate and store the coordinator's model (random-kernel or DP) next to the entity's config."""
        self.guard.admit("AcceptModel")
        model = _received_model(model_json)
        path = directory / f"{self.id}.model.json"
        write_atomic(path, model_json.decode("utf-8"))
        logger.info("entity %s stored the %s model at %s", self.id, type(model).__name__, path)
        return path

    def _check_epsilon(self, epsilon: float | None) -> float:
        if epsilon is None or not (math.isfinite(epsilon) and epsilon >= MIN_EPSILON):
            raise DataError(f"entity {self.id}: epsilon must be a finite number >= {MIN_EPSILON:g}, got {epsilon}")
        return epsilon

    def log_digest(self, release: int) -> str:
        """The chain digest of release number ``release`` of its log (0: the creation line), for a coordinator's
        rollback check.

        It says nothing about the records: the line it digests is the guard's record of a release (its RPC, peer,
        shapes and charge), and the digest of the latest one is in Metadata anyway.
        """
        self.guard.admit("LogDigest")
        releases = self.guard.state()["releases"]
        if not 0 <= release <= releases:
            raise DataError(f"entity {self.id}: its release log holds releases 0 to {releases}; asked for {release}")
        return self.guard.log.digest_at(release)

    def remaining_budget(self) -> float | None:
        """The DP budget left (epsilon), None without one."""
        micro = self.guard.remaining_micro
        return None if micro is None else epsilon_of(micro)

    def dp_weights(
        self,
        *,
        method: str,
        mechanism: str,
        epsilon: float | None,
        C: float,
        rho: np.ndarray,
        low: np.ndarray,
        high: np.ndarray,
        huber_h: float,
        peer: str = "",
    ) -> tuple[Release, float | None]:
        """Train the linear SVM on zhat of this cell's training rows and release its weights.

        The request is checked from its own numbers (rho finite with bounded rows, a scaling with
        high >= low): with the scaled rows clipped to a fixed box, every zhat is finite whatever the
        records hold, so no failure can depend on them. The release is charged before the rows are read.

        Returns
        -------
        (Release, remaining budget or None when not private)

        Raises
        ------
        PrivacyError
            No budget configured, the budget would be exceeded, or an unnoised or continuous-noise
            release without the entity's own setting.
        DataError
            A request field out of range (named), a cell without labels.
        ReleaseFailed
            Training failed after the records were read (charged; the text names no data).
        """
        self.guard.admit("DpWeights")
        if not is_mechanism(mechanism):
            raise DataError(f"mechanism must be one of {', '.join((*MECHANISMS, NON_PRIVATE))}, got {mechanism!r}")
        for name, value, bound in (("c", C, MAX_DP_C), ("huber_h", huber_h, 1.0)):
            if not (math.isfinite(value) and 0 < value <= bound):
                raise DataError(f"entity {self.id}: {name} must be a finite number in (0, {bound:g}], got {value}")
        d = self.cell.n_features
        if rho.ndim != 2 or not 1 <= rho.shape[0] <= MAX_DP_FREQUENCIES or rho.shape[1] != d:
            raise DataError(
                f"entity {self.id} holds {d} features: rho must be D x {d} with 1 <= D <= {MAX_DP_FREQUENCIES}, "
                f"got shape {rho.shape} (DP training needs every feature in one cell, s = 1)"
            )
        if low.shape != (d,) or high.shape != (d,):
            raise DataError(
                f"entity {self.id} holds {d} features; got a scaling of {low.size} lows and {high.size} highs"
            )
        if not (np.isfinite(rho).all() and np.abs(rho).sum(axis=1).max() <= MAX_RHO_ROW_L1):
            raise DataError(f"entity {self.id}: rho must be finite with every row's absolute sum <= {MAX_RHO_ROW_L1:g}")
        if not (np.isfinite(low).all() and np.isfinite(high).all() and (high >= low).all()):
            raise DataError(f"entity {self.id}: the scaling (low, high) must be finite numbers with high >= low")
        if phase_range(rho, low, high, self.bounds) < MIN_PHASE_RANGE:
            raise DataError(
                f"entity {self.id}: no frequency turns {MIN_PHASE_RANGE:g} radians across the box of its records under "
                "this scaling, so every record would get the same features (nothing to learn): use frequencies or a "
                "scaling that spread the box"
            )
        cell = self.cell
        if cell.y_train is None:
            raise DataError(
                f"entity {self.id} holds no labels: DP training needs "
                "row blocks with every feature and the label (s = 1)"
            )
        if mechanism == NON_PRIVATE:
            if not self.config.non_private_weights:
                raise PrivacyError(
                    f"entity {self.id} refuses to release weights without noise; only its own config's "
                    f"[privacy] {NON_PRIVATE_WEIGHTS_KEY} = true allows it (NOT PRIVATE, benchmarks only)"
                )
            logger.warning("entity %s: releasing weights WITHOUT noise (NOT PRIVATE)", self.id)
            self.guard.charge("DpWeights", peer, mechanism=mechanism, rows=len(cell.train_ids), not_private=True)
            with self.guard.touching("DpWeights"):
                return private_weights(
                    self._zhat(rho, low, high), cell.y_train, C=C, epsilon=None, mechanism=NON_PRIVATE
                ), None
        eps = self._check_epsilon(epsilon)
        if mechanism in CONTINUOUS_NOISE_MECHANISMS and not self.config.continuous_noise:
            raise PrivacyError(
                f"entity {self.id} refuses mechanism {mechanism!r}: its noise is drawn in floating point and is "
                "not hardened against the floating-point attack; use laplace, or set [privacy] "
                f"{CONTINUOUS_NOISE_KEY} = true in the entity's own config"
            )
        if mechanism == "objective":
            # Refused from the request and n before the charge: a tiny huber_h is no failure on the records.
            objective_perturbation_parameters(n=len(cell.train_ids), C=C, epsilon=eps, huber_h=huber_h)
        self.guard.charge(
            "DpWeights",
            peer,
            epsilon=eps,
            mechanism=mechanism,
            method=method,
            rows=len(cell.train_ids),
            frequencies=int(rho.shape[0]),
            c=C,
        )
        with self.guard.touching("DpWeights"):
            release = private_weights(
                self._zhat(rho, low, high), cell.y_train, C=C, epsilon=eps, mechanism=mechanism, huber_h=huber_h
            )
        logger.info(
            "entity %s released %s weights (epsilon %g); %g of its budget remains",
            self.id,
            mechanism,
            eps,
            self.remaining_budget(),
        )
        return release, self.remaining_budget()

    def _zhat(self, rho: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
        """zhat of the training rows (their scaled values clipped to a fixed box, so rho'x stays finite)."""
        return fourier_features(apply_scaling(self.cell.X_train, low, high), rho)

    def dp_evaluate(
        self, model_json: bytes, epsilon: float, peer: str = "", source: IntegerSource | None = None
    ) -> DpEvaluation:
        """The held-out error rate of a DP model, from an error count with discrete Laplace noise (charged).

        Changing one held-out record changes the error count by at most 1, so noise of scale
        1/epsilon makes the count epsilon-DP; clamping to [0, n_test] is post-processing.

        Returns
        -------
        dict
            n_test, error_rate (noised), epsilon, noise.
        """
        self.guard.admit("DpEvaluate")
        eps = self._check_epsilon(epsilon)
        model = _received_model(model_json)
        if not isinstance(model, DpModel):
            raise DataError("DpEvaluate takes a DP model file")
        cell = self.cell
        if cell.y_test is None or len(cell.test_ids) == 0:
            raise DataError(f"entity {self.id} holds no labelled held-out records to evaluate on")
        if model.n_features != cell.n_features:
            raise DataError(f"the model expects {model.n_features} features; entity {self.id} holds {cell.n_features}")
        n_test = len(cell.test_ids)
        self.guard.charge("DpEvaluate", peer, epsilon=eps, rows=n_test)
        with self.guard.touching("DpEvaluate"):
            errors = int(np.count_nonzero(np.where(model.decision(cell.X_test) >= 0, 1.0, -1.0) != cell.y_test))
            noisy = errors + discrete_laplace(
                Fraction(1) / Fraction(eps), integer_source(None) if source is None else source
            )
        return {
            "n_test": n_test,
            "error_rate": min(max(noisy, 0), n_test) / n_test,
            "epsilon": eps,
            "noise": f"discrete Laplace, scale 1/{eps:g} errors, on the error count",
        }

    def dp_score_histogram(
        self, model_json: bytes, edges: np.ndarray, epsilon: float, peer: str = "", source: IntegerSource | None = None
    ) -> DpHistogram:
        """Per-class counts of a DP model's decision values on the training records, each with discrete Laplace noise.

        Bin k holds the decision values d with edges[k-1] <= d < edges[k] (edges[-1] = -inf, edges[B] = +inf),
        counted separately for the records labelled -1 and +1 (:func:`ppsvm.core.metrics.class_histogram`).

        Privacy. Under replace-one neighbours (n_train public), replacing one record removes one unit from
        the (class, bin) count of the old record and adds one to that of the new one: the vector of the
        2(B + 1) counts has L1 sensitivity 2, whatever the model and the edges are. Adding i.i.d. discrete
        Laplace noise of scale 2/epsilon to every count (exact sampler, integer arithmetic) makes the release
        epsilon-DP. So the request needs no check beyond its size and well-formed edges; the noised counts
        are released as drawn (they may be negative; clamping them would be post-processing).

        Parameters
        ----------
        model_json : bytes
            A ppsvm-dp-model file with as many features as the cell.
        edges : ndarray, shape (B,)
            Finite, strictly increasing, 1 <= B <= MAX_HISTOGRAM_EDGES.
        epsilon : float
            Spent on the whole histogram, >= MIN_EPSILON.
        peer : str
            Who asked, for the release log.
        source : IntegerSource, optional
            The noise's randomness; None draws from the OS (tests inject a seeded one).

        Returns
        -------
        dict
            n_train, negative_counts and positive_counts (B + 1 noised counts each, in bin order), epsilon, noise.

        Raises
        ------
        DataError
            A request field out of range (named), a model that is not a DP model or has another number of
            features, a cell without labels. Nothing is charged.
        PrivacyError
            The entity's mode does not serve DP releases, or its budget does not cover epsilon.
        ReleaseFailed
            The computation failed after the records were read (charged; the text names no data).
        """
        self.guard.admit("DpScoreHistogram")
        eps = self._check_epsilon(epsilon)
        model = _received_model(model_json)
        if not isinstance(model, DpModel):
            raise DataError("DpScoreHistogram takes a DP model file")
        cell = self.cell
        if model.n_features != cell.n_features:
            raise DataError(f"the model expects {model.n_features} features; entity {self.id} holds {cell.n_features}")
        if edges.ndim != 1 or not 1 <= edges.size <= MAX_HISTOGRAM_EDGES:
            raise DataError(
                f"entity {self.id}: edges must hold between 1 and {MAX_HISTOGRAM_EDGES} numbers, got {edges.size}"
            )
        if not (np.isfinite(edges).all() and (np.diff(edges) > 0).all()):
            raise DataError(f"entity {self.id}: edges must be finite numbers in strictly increasing order")
        if cell.y_train is None:
            raise DataError(f"entity {self.id} holds no labels: a histogram by class needs labelled training records")
        n_train = len(cell.train_ids)
        self.guard.charge("DpScoreHistogram", peer, epsilon=eps, rows=n_train, bins=edges.size + 1)
        with self.guard.touching("DpScoreHistogram"):
            exact = class_histogram(cell.y_train, model.decision(cell.X_train), edges)
            scale = Fraction(2) / Fraction(eps)
            draws = integer_source(None) if source is None else source
            negative, positive = ([int(c) + discrete_laplace(scale, draws) for c in counts] for counts in exact)
        return {
            "n_train": n_train,
            "negative_counts": negative,
            "positive_counts": positive,
            "epsilon": eps,
            "noise": f"discrete Laplace, scale 2/{eps:g} records, on each of the {2 * (edges.size + 1)} counts",
        }

    def local_baseline(
        self,
        task: Task,
        kernel_name: KernelName,
        nu: float | None,
        mu: float | None,
        seed: int,
        peer: str = "",
        wanted: Callable[[], bool] = lambda: True,
        *,
        search: Search = "grid",
        leave_one_out: bool = False,
    ) -> dict[str, float]:
        """Train on this cell alone, evaluate on its held-out records; only the figures leave.

        It is the federated model's LP on this cell's rows: a reduced kernel K(A_ij, Abar') whose basis Abar is
        as many of its own training rows, drawn by ``seed``, as the federated training's rule gives
        (:func:`ppsvm.core.privacy.default_mbar` of its n_j features and its training rows), the same solver and
        the same tuning. So it costs what the federated training costs on as many rows: with a basis of up to 300
        rows it took 20-50 times as long and outran the call's deadline (issue 29). With ``leave_one_out``,
        the papers' protocol for cells of about 25 records, the basis is the whole cell, K(A_ij, A_ij'), as theirs.

        nu and mu of None are tuned by ``search`` (grid or nested uniform design) with 5-fold
        cross-validation, or leave-one-out (refused above LEAVE_ONE_OUT_MAX_ROWS training records: a requester
        could otherwise ask for a very long computation).

        ``wanted`` (the call's ``context.is_active``) is asked after each grid point of the tuning: once the
        caller has cancelled or its deadline has passed, the computation stops with :class:`CallCancelled`.

        Returns
        -------
        dict
            n_train, n_test (shapes) and error_rate/auc (classify) or relative_error/rmse (regress), rounded to
            BASELINE_DIGITS; the task must be the one the cell's labels make (+-1: classify):
            nothing else about the cell or the model trained on it leaves the entity.
        """
        self.guard.admit("LocalBaseline")
        for name, value, (low, high) in (("nu", nu, BASELINE_NU_RANGE), ("mu", mu, BASELINE_MU_RANGE)):
            if value is not None and not (math.isfinite(value) and low <= value <= high):
                raise DataError(
                    f"entity {self.id}: {name} must be a number in [{low:g}, {high:g}] (or 0 to tune), got {value}"
                )
        cell = self.cell
        if cell.y_train is None or cell.y_test is None:
            raise DataError(f"entity {self.id} holds no labels, so it cannot train alone")
        # Labels are published by Records in this mode, so these checks tell the requester nothing new. The task
        # is the labels': a regression figure of a +-1 cell is a 64-bit function of its records that, with a
        # fixed nu, picked one unknown held-out label out of 2,002 candidates (issue 27).
        # Class codes were checked against label_names at start.
        classes = self.config.label_names is not None and len(self.config.label_names) > 2
        signs = np.isin(np.concatenate([cell.y_train, cell.y_test]), (-1.0, 1.0)).all()
        labels_task = "classify" if classes or signs else "regress"
        if task != labels_task:
            raise DataError(f"entity {self.id}: its labels make its task {labels_task!r}; it does not answer {task!r}")
        if task == "classify" and len(np.unique(cell.y_train)) < 2:
            raise DataError(f"entity {self.id}: its training records are all of one class, so it cannot train alone")
        if len(cell.test_ids) == 0:
            raise DataError(f"entity {self.id} holds no held-out records to evaluate on")
        if search not in SEARCHES:
            raise DataError(f"entity {self.id}: search must be one of {', '.join(SEARCHES)}, got {search!r}")
        n_train = len(cell.train_ids)
        if leave_one_out and n_train > LEAVE_ONE_OUT_MAX_ROWS:
            raise DataError(
                f"entity {self.id}: leave-one-out tuning is for cells of at most {LEAVE_ONE_OUT_MAX_ROWS} training "
                f"records, and this one has more; ask for k-fold cross-validation"
            )
        self.guard.charge(
            "LocalBaseline",
            peer,
            task=task,
            kernel=kernel_name,
            nu=nu,
            mu=mu,
            seed=seed,
            search=search,
            leave_one_out=leave_one_out,
        )

        def stop_if_unwanted(done: int, total: int) -> None:
            if not wanted():
                # No count in the text: how far the solver got in a given time depends on the records.
                raise CallCancelled(f"entity {self.id}: LocalBaseline stopped, its caller cancelled or timed out")

        with self.guard.touching("LocalBaseline"):
            model = fit_local(
                task,
                kernel_name,
                cell.X_train,
                cell.y_train,
                basis_fraction=1.0,
                basis_rows=None if leave_one_out else default_mbar([cell.X_train.shape[1]], n_train),
                nu=nu,
                mu=mu,
                seed=seed,
                folds=n_train if leave_one_out else DEFAULT_FOLDS,
                search=search,
                progress=stop_if_unwanted,
            )
            figures = local_figures(task, model, cell.X_test, cell.y_test)
        # Rounded to what a person reads: the bits beyond them are a function of the records, not a finding.
        readable = {
            name: float(f"{value:.{BASELINE_DIGITS}g}") if name == "rmse" else round(value, BASELINE_DIGITS)
            for name, value in figures.items()
        }
        return {"n_train": len(cell.train_ids), "n_test": len(cell.test_ids), **readable}
