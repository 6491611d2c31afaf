"""Issue 27's property test: no hostile request is answered differently by two neighbouring data sets but by noise.

Three copies of r0c0 of a 2 x 1 WDBC split are served by real ``ppsvm entity`` processes, each from its own split
directory (same secrets, same record-id key), and every request goes to all three:

- ``original``: the cell;
- ``label``: the cell with one training label flipped (FLIPPED_TRAIN, the record whose flip told the old DpWeights
  solver apart, tests/integration/test_dp_label_flip.py) and one held-out label flipped;
- ``feature``: the cell with one training record's x2 moved to its declared high (a new maximum) and the held-out
  record holding x2's maximum moved to the declared low.

Each RPC reads either the training or the held-out records, so for each DP release the two data sets it reads are
neighbours (one record replaced). Hypothesis makes the requests a hostile coordinator may send with its valid
certificate: models with subnormal, huge, zero and negative spans, rho and weights at and beyond their limits,
widths, thresholds, basis values and histogram edges (DpScoreHistogram, DpEvaluate); DpWeights of both methods and
every mechanism (the entity serves the continuous-noise ones too, by its config), C, D, rho, the scaling and huber_h
at their extremes; KernelBlock with every kernel, mbar, Gaussian width, record set, id list, nonce, epoch and relayed
scaling (altered, forged by a colluding peer, missing); FeatureRange, Records; LocalBaseline with every task, nu, mu,
search and leave-one-out. The same request to the three must give

- the same kind of outcome: all answer, or all refuse with the same status code and the same text;
- no failure after the records were read (the fixed text of ReleaseFailed, or INTERNAL), ever, and no refusal that
  was charged (a refusal leaves the release log as it was: it happened before the records were read);
- the same release counts, and for an answer the same fields besides the noise: DP replies are the same in
  everything but their noised numbers, which are finite and lie within the noise's 1 - 1e-9 range of the exact
  value computed by the harness on that entity's own records (DpEvaluate, DpScoreHistogram, DpWeights' Laplace
  and output-gamma); random-kernel replies, which are not noised, are identical except where the changed record
  itself is released (its kernel row, its label in Records: that mode publishes them by design) and LocalBaseline's
  rounded figures (a function of both changed records by design; only their range is checked).

Random-kernel entities pin their basis view at the first kernel block, so each random-kernel example runs on a fresh
triple of entities (started in the background while the previous example runs). The controls show that the
comparison is not vacuous: on the real entities, the changed record's kernel row is told apart when it is not
exempted; in process, a deliberately non-private DpWeights (mechanism "none", allowed by the entity's config) and the
pre-issue-27 unclipped scaling (monkeypatched in) give outcomes the comparison flags.

A hole found and fixed: DpWeights with mechanism objective and C below about 1.5e-298 answered NaN weights, charged
(alike on every data set: 2 h n / C overflowed the exact finish); n / C is now bounded from the request alone.

Another fixed: without single-block consent (the entity's default), KernelBlock measured the reconstruction risk of
the view asked for, after the charge, and quoted the figures in its refusal: a coordinator could pick views until
one neighbour answered and the other refused. The entity now decides once, from a measurement made before any
request (test_the_single_block_gate_is_one_decision_made_before_any_request shows the one bit left).

Run: ``pytest -m long tests/integration/test_hostile_neighbours.py`` (about 2 minutes on 2 cores).
"""

from __future__ import annotations

import csv
import functools
import json
import math
import shutil
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import stats

from ppsvm.config import CONTINUOUS_NOISE_KEY, NON_PRIVATE_WEIGHTS_KEY, load_entity_config
from ppsvm.constants import MAX_HISTOGRAM_EDGES
from ppsvm.core import fourier
from ppsvm.core.aggregation import MAX_NONCE_BYTES, MIN_NONCE_BYTES
from ppsvm.core.dp import l2_sensitivity, laplace_scale
from ppsvm.core.dp_model import MAX_KERNEL_WIDTH, MAX_THRESHOLD, MAX_WEIGHTS_L1, DpModel
from ppsvm.core.fourier import MAX_RHO_ROW_L1, SCALED_BOX, apply_scaling, fourier_features
from ppsvm.core.kernels import scale_to_unit
from ppsvm.core.linear_svm import SOLVER_L2_ERROR, train_linear_svm
from ppsvm.core.metrics import class_histogram
from ppsvm.core.privacy import single_block_exposure
from ppsvm.core.randomness import derive_B, range_tag
from ppsvm.core.reconstruction import measure_risk
from ppsvm.data.cell import Cell
from ppsvm.data.sources import read_source
from ppsvm.entity.cell import BASELINE_MU_RANGE, BASELINE_NU_RANGE, MAX_DP_C, MAX_DP_FREQUENCIES, EntityCore
from ppsvm.entity.guard import MIN_EPSILON
from ppsvm.entity.records import pseudonymous
from ppsvm.errors import PpsvmError
from ppsvm.experiments.coordinator_attacks import overflow_model
from ppsvm.wire.chunks import decode_arrays
from ppsvm.wire.grpc_util import status_for
from ppsvm.wire.rpc import ppsvm_pb2 as pb

from .conftest import WDBC, WDBC_OPTIONS, pseudonyms, split
from .test_malicious_coordinator import TIMEOUT, Entity, start_entity

pytestmark = pytest.mark.long

N = 30  # WDBC features, one column block
ENTITY = "r0c0"
PEER = "r1c0"  # the other member of its column block: its range is relayed, its process is not needed
NEIGHBOURS = ("original", "label", "feature")
FLIPPED_TRAIN = "88119002"  # tests/integration/test_dp_label_flip.py: its flip told the old solver apart
MOVED = "x2"  # feature 0, declared bounds 6..29
TOP = float(np.finfo(np.float64).max)
TINY = 5e-324
BUDGET = 1e9  # epsilon_total: no hostile sequence here spends it
DELTA = 1e-9  # a noised answer outside its noise's 1 - DELTA range fails the test (union-bounded per answer)
DP_EXAMPLES = 100
RK_EXAMPLES = 10
# Objective perturbation's Newton steps factor a dense 2D x 2D Hessian: 8.6 s at D = 3,000 in process; at the
# D = 10,000 the entity admits, one request at epsilon 0.001 held 6.9 GB and had not finished after 20 minutes
# (the same for every data set, so no neighbour tells it apart; kept out for time).
OBJECTIVE_MAX_D = 300
# A subnormal or zero rho makes every zhat row the same vector: the certified SVM solve then took 1-28 s at D = 200
# and C = 1000 and did not finish in 120 s at D = 1,000 (in process, loaded machine); 0.9 s at D = 100.
DEGENERATE_MAX_D = 100
# Likewise a scaling that maps the records onto a few points (subnormal, probe and shifted spans): 12-19 s in process
# at D = 100 and C = 1000, about 100 s for the three entities and the harness. Such requests with D > 10 are sent
# with C at most this (the same for every neighbour: time, not outcome).
DEGENERATE_MAX_C = 100.0
POST_READ = "failed after reading its records"  # ReleaseFailed's fixed text

DP_PRIVACY = (
    f'mode = "dp"\nepsilon_total = {BUDGET:.0f}\n{CONTINUOUS_NOISE_KEY} = true\n'
    "max_releases_per_minute = 0\nmin_free_disk_mb = 0\n"
)
RK_PRIVACY = (
    "consent_single_block_release = true\nmax_baseline_releases = 4\n"
    "max_releases_per_minute = 0\nmin_free_disk_mb = 0\n"
)


# --- the neighbouring cells -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Pristine:
    """Three split directories never served (``original``, ``label``, ``feature``) and what the entity sees."""

    directories: dict[str, Path]
    cells: dict[str, Cell]  # as each entity holds it: pseudonyms, values clipped to the declared bounds
    changed: dict[str, tuple[str, str]]  # neighbour -> (training, held-out) pseudonym changed
    bounds: tuple[np.ndarray, np.ndarray]
    secret: bytes


def _rows(path: Path) -> list[list[str]]:
    with path.open(newline="") as handle:
        return list(csv.reader(handle))


def _write(path: Path, rows: list[list[str]]) -> None:
    with path.open("w", newline="") as handle:
        csv.writer(handle).writerows(rows)


def held_cell(config_path: Path) -> Cell:
    """The cell as the entity of ``config_path`` holds it: records named by pseudonym, values clipped to the declared
    bounds (read by the harness, never by the attacker, to score the noise)."""
    config = load_entity_config(config_path)
    key = config.read_id_key()
    assert key is not None and config.schema is not None
    cell = pseudonymous(read_source(config.data, config.schema), key)
    bounds = config.schema.declared_bounds()
    assert bounds is not None
    for X in (cell.X_train, cell.X_test):
        np.clip(X, *bounds, out=X)
    return cell


def make_pristine(base: Path) -> Pristine:
    original = split(base / "original", WDBC, 2, 1, *WDBC_OPTIONS)
    bounds = load_entity_config(original / f"{ENTITY}.toml").schema.declared_bounds()
    assert bounds is not None
    rows = _rows(original / f"{ENTITY}.csv")
    column = rows[0].index(MOVED)
    feature = rows[0][3:].index(MOVED)
    train = [r for r in rows[1:] if r[2] == "train"]
    test = [r for r in rows[1:] if r[2] == "test"]
    directories = {"original": original}
    # label: FLIPPED_TRAIN's label and the first held-out record's.
    label_test = test[0][0]
    assert any(r[0] == FLIPPED_TRAIN for r in train), "the split changed: pick FLIPPED_TRAIN again"
    directories["label"] = base / "label"
    shutil.copytree(original, directories["label"])
    flipped = [list(r) for r in rows]
    for r in flipped[1:]:
        if r[0] in (FLIPPED_TRAIN, label_test):
            r[1] = "1" if r[1] == "-1" else "-1"
    _write(directories["label"] / f"{ENTITY}.csv", flipped)
    # feature: a training record's x2 to the declared high (a new maximum), the held-out maximum's to the low.
    high, low = float(bounds[1][feature]), float(bounds[0][feature])
    assert max(float(r[column]) for r in train) < high
    moved_train = train[1][0]
    moved_test = max(test, key=lambda r: float(r[column]))[0]
    directories["feature"] = base / "feature"
    shutil.copytree(original, directories["feature"])
    moved = [list(r) for r in rows]
    for r in moved[1:]:
        if r[0] == moved_train:
            r[column] = repr(high)
        elif r[0] == moved_test:
            r[column] = repr(low)
    _write(directories["feature"] / f"{ENTITY}.csv", moved)
    names = pseudonyms(original, [FLIPPED_TRAIN, label_test, moved_train, moved_test])
    changed = {"original": ("", ""), "label": (names[0], names[1]), "feature": (names[2], names[3])}
    cells = {name: held_cell(directory / f"{ENTITY}.toml") for name, directory in directories.items()}
    secret = load_entity_config(original / f"{ENTITY}.toml").read_secret()
    made = Pristine(directories, cells, changed, bounds, secret)
    # The public scalings the strategies draw from: the declared bounds, and the training range a coordinator with
    # similar public records could hold.
    X = cells["original"].X_train
    SCALES.update(declared=bounds, training=(X.min(axis=0), X.max(axis=0)), cell=(X, X))
    return made


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Pristine:
    made = make_pristine(tmp_path_factory.mktemp("neighbours"))
    original, label, feature = (made.cells[n] for n in NEIGHBOURS)
    assert original.y_train is not None and label.y_train is not None
    assert int((original.y_train != label.y_train).sum()) == 1 and np.array_equal(original.X_train, label.X_train)
    assert int((original.y_test != label.y_test).sum()) == 1 and np.array_equal(original.X_test, label.X_test)
    assert int((original.X_train != feature.X_train).sum()) == 1 and np.array_equal(original.y_train, feature.y_train)
    assert int((original.X_test != feature.X_test).sum()) == 1 and np.array_equal(original.y_test, feature.y_test)
    return made


@dataclass
class Triple:
    """The three neighbours served at once, and the release count each had after the last call."""

    entities: dict[str, Entity]
    releases: dict[str, int] = field(default_factory=dict)

    def stop(self) -> None:
        for entity in self.entities.values():
            entity.stop()


_POOL = ThreadPoolExecutor(max_workers=6)  # a triple starting in the background while another answers


def serve(pristine: Pristine, base: Path, privacy: str) -> Triple:
    """Copies of the three pristine directories under ``base``, each config given ``privacy``, served at once."""
    configs = {}
    for name in NEIGHBOURS:
        directory = base / name
        shutil.copytree(pristine.directories[name], directory)
        config = directory / f"{ENTITY}.toml"
        config.write_text(config.read_text() + f"\n[privacy]\n{privacy}")
        configs[name] = config
    started = {name: _POOL.submit(start_entity, config) for name, config in configs.items()}
    entities: dict[str, Entity] = {}
    error: BaseException | None = None
    for name, future in started.items():
        try:
            entities[name] = future.result()
        except BaseException as exc:  # noqa: BLE001 - stop the others first
            error = exc
    triple = Triple(entities)
    if error is not None:
        triple.stop()
        raise error
    triple.releases = {name: e.metadata().releases for name, e in entities.items()}
    return triple


# --- outcomes and their comparison ------------------------------------------------------------------------------

STREAMS = ("Records", "FeatureRange", "KernelBlock")


@dataclass(frozen=True)
class Outcome:
    """One entity's answer to one request: its reply, or the status code and text it refused with."""

    answered: bool
    code: str = ""
    details: str = ""
    reply: Any = None
    releases: int = 0  # releases in its log after the call
    charged: bool = False  # the call added to the log

    @property
    def post_read(self) -> bool:
        """A failure after the records were read: the one bit the issue is about."""
        return not self.answered and (self.code == "INTERNAL" or POST_READ in self.details)

    def describe(self) -> str:
        return "answered" if self.answered else f"refused {self.code}: {self.details}"


def ask(entity: Entity, rpc: str, request: Any, before: int) -> Outcome:
    try:
        reply = getattr(entity.stub, rpc)(request, timeout=TIMEOUT)
        if rpc in STREAMS:
            reply = decode_arrays(reply)
    except grpc.RpcError as error:
        outcome = Outcome(False, error.code().name, error.details() or "")
    else:
        outcome = Outcome(True, reply=reply)
    releases = entity.metadata().releases
    return replace(outcome, releases=releases, charged=releases != before)


def ask_all(triple: Triple, rpc: str, request: Any) -> dict[str, Outcome]:
    futures = {
        name: _POOL.submit(ask, entity, rpc, request, triple.releases[name]) for name, entity in triple.entities.items()
    }
    outcomes = {name: future.result() for name, future in futures.items()}
    triple.releases = {name: outcome.releases for name, outcome in outcomes.items()}
    return outcomes


def _masked(values: np.ndarray, rows: list[int]) -> np.ndarray:
    out = np.array(values, copy=True)
    if rows and out.size:
        out[rows] = 0
    return out


def fixed_part(rpc: str, reply: Any, exempt: list[int]) -> dict[str, Any]:
    """What an answer must hold the same on both neighbours: everything but its noise (DP) or the released changed
    record itself (rows ``exempt`` of a kernel block, labels at ``exempt`` of Records, the rounded baseline)."""
    if rpc == "DpEvaluate":
        return {k: getattr(reply, k) for k in ("entity_id", "n_test", "epsilon", "noise", "budget_remaining")}
    if rpc == "DpScoreHistogram":
        fixed = {k: getattr(reply, k) for k in ("entity_id", "n_train", "epsilon", "noise", "budget_remaining")}
        return {**fixed, "bins": (len(reply.negative_counts), len(reply.positive_counts))}
    if rpc == "DpWeights":
        keys = ("entity_id", "n_train", "mechanism", "epsilon", "noise", "budget_remaining")
        fixed = {**{k: getattr(reply, k) for k in keys}, "size": len(reply.weights)}
        if reply.mechanism == "none":  # no noise: the weights themselves must agree
            fixed["weights"] = np.asarray(reply.weights)
        return fixed
    if rpc == "LocalBaseline":
        return {k: getattr(reply, k) for k in ("entity_id", "n_train", "n_test")}
    if rpc == "KernelBlock":
        return {"kernel": _masked(reply["kernel"], exempt)}
    if rpc == "Records":
        train, test = exempt[:1], exempt[1:]
        return {
            **reply,
            "train_labels": _masked(reply["train_labels"], train),
            "test_labels": _masked(reply["test_labels"], test),
        }
    return dict(reply)  # FeatureRange: all of it


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()
    return bool(a == b)


def differences(rpc: str, first: Outcome, second: Outcome, exempt: list[int] | None = None) -> list[str]:
    """How two neighbours' outcomes of one request differ beyond the noise (empty: they do not)."""
    if first.answered != second.answered:
        return [f"{rpc}: {first.describe()} / {second.describe()}"]
    found = []
    if first.releases != second.releases or first.charged != second.charged:
        found.append(f"{rpc}: release counts {first.releases} / {second.releases}")
    if not first.answered:
        if (first.code, first.details) != (second.code, second.details):
            found.append(f"{rpc}: {first.describe()} / {second.describe()}")
        return found
    a, b = fixed_part(rpc, first.reply, exempt or []), fixed_part(rpc, second.reply, exempt or [])
    for key in sorted(set(a) | set(b)):
        if key not in a or key not in b or not _same(a[key], b[key]):
            found.append(f"{rpc}: {key} differs")
    return found


# --- the noise: answers lie in its distribution around the exact values ------------------------------------------


def laplace_tail(scale: float, count: int) -> float:
    """|X| below this for ``count`` discrete Laplace draws of ``scale`` with probability >= 1 - DELTA."""
    return scale * math.log(2 * count / DELTA) + 1.0


def check_noise(rpc: str, request: Any, reply: Any, cell: Cell) -> list[str]:
    """Problems of one DP answer against the exact value on ``cell`` (the answering entity's own records)."""
    assert cell.y_train is not None and cell.y_test is not None
    if rpc == "DpEvaluate":
        if not (math.isfinite(reply.error_rate) and 0.0 <= reply.error_rate <= 1.0):
            return [f"DpEvaluate: error rate {reply.error_rate}"]
        model = DpModel.from_json(request.model_json.decode())
        exact = int(np.count_nonzero(model.prediction(model.decision(cell.X_test)) != cell.y_test))
        noised = reply.error_rate * reply.n_test
        if abs(noised - exact) > laplace_tail(1 / request.epsilon, 1):
            return [f"DpEvaluate: {noised} errors, exact {exact}, epsilon {request.epsilon}"]
        return []
    if rpc == "DpScoreHistogram":
        model = DpModel.from_json(request.model_json.decode())
        exact = class_histogram(cell.y_train, model.decision(cell.X_train), np.asarray(request.edges))
        noised = np.array([reply.negative_counts, reply.positive_counts])
        worst = int(np.abs(noised - np.asarray(exact)).max())
        if worst > laplace_tail(2 / request.epsilon, noised.size):
            return [f"DpScoreHistogram: a count {worst} from the exact one, epsilon {request.epsilon}"]
        return []
    weights = np.asarray(reply.weights)
    if not np.isfinite(weights).all():
        return ["DpWeights: weights not finite"]
    if reply.mechanism not in ("laplace", "output-gamma"):
        return []  # objective perturbation: the minimiser of a perturbed objective, finite is what is checked
    D, n = request.n_frequencies, len(cell.y_train)
    rho = np.asarray(request.rho).reshape(D, N)
    Z = fourier_features(apply_scaling(cell.X_train, np.asarray(request.low), np.asarray(request.high)), rho)
    exact = train_linear_svm(Z, cell.y_train, request.c).w
    slack = 2 * SOLVER_L2_ERROR + 1e-9 * (1 + float(np.abs(exact).max()))
    if reply.mechanism == "laplace":
        worst = float(np.abs(weights - exact).max())
        if worst > laplace_tail(laplace_scale(request.c, D, n, request.epsilon), 2 * D) + slack:
            return [f"DpWeights laplace: a weight {worst} from the exact one"]
        return []
    gamma = stats.gamma(2 * D, scale=l2_sensitivity(request.c, n) / request.epsilon)
    distance = float(np.linalg.norm(weights - exact))
    if not gamma.ppf(DELTA / 2) - slack <= distance <= gamma.ppf(1 - DELTA / 2) + slack:
        return [f"DpWeights output-gamma: noise of norm {distance}, outside its 1 - {DELTA:g} range"]
    return []


# --- hostile requests -------------------------------------------------------------------------------------------
#
# Each request is valid but as hostile as its checks allow, or carries exactly one fault the entity must refuse
# from the request alone (FAULTLESS of the time none: most requests are answered and their noise checked).

FAULTLESS = 0.6
FINITE = st.sampled_from([0.0, -0.0, TINY, -TINY, 1e-300, 1e-12, 0.5, 1.0, -1.0, 6.0, 29.0, 1e6, 1e300, TOP, -TOP])
FINITE = FINITE | st.floats(allow_nan=False, allow_infinity=False)
EPSILONS = st.sampled_from([MIN_EPSILON, 0.01, 1.0, 10.0, 1e3, 1e5]) | st.floats(MIN_EPSILON, 100.0)
BAD_EPSILONS = st.sampled_from([0.0, -1.0, math.nan, math.inf, MIN_EPSILON * (1 - 1e-9), 1e300])
SCALES: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # "declared", "training": set by the pristine fixture
# Per-feature scalings (low, high) as a coordinator may relay them in a model or a DpWeights request.
SPANS = ("declared", "declared", "training", "subnormal", "probe", "probe", "huge", "zero", "shifted", "free")
BAD_SPANS = ("negative", "nan", "inf")


def fault(draw: st.DrawFn, faults: tuple[str, ...]) -> str:
    """ "" (no fault) FAULTLESS of the time, else one of ``faults``."""
    if draw(st.floats(0.0, 1.0)) < FAULTLESS:
        return ""
    return draw(st.sampled_from(faults))


@st.composite
def scalings(draw: st.DrawFn, n: int = N, broken: bool = False) -> tuple[list[float], list[float]]:
    """(low, high) for ``n`` features, every feature alike or each its own; ``broken``: one of them invalid."""
    if draw(st.booleans()):
        kinds = [draw(st.sampled_from(SPANS))] * n
    else:
        kinds = draw(st.lists(st.sampled_from(SPANS), min_size=n, max_size=n))
    if broken:
        kinds[draw(st.integers(0, n - 1))] = draw(st.sampled_from(BAD_SPANS))
    declared = tuple(np.resize(bound, n) for bound in SCALES["declared"])
    training = tuple(np.resize(bound, n) for bound in SCALES["training"])
    low, high = [], []
    for f, kind in enumerate(kinds):
        if kind == "declared":
            lo, hi = declared[0][f], declared[1][f]
        elif kind == "training":
            lo, hi = training[0][f], training[1][f]
        elif kind == "subnormal":
            lo, hi = 0.0, TINY
        elif kind == "probe":  # x / span overflows exactly above t: the threshold oracle's scaling
            t = draw(st.floats(float(declared[0][f]), float(declared[1][f])))
            lo, hi = 0.0, t / TOP
        elif kind == "huge":
            lo, hi = -TOP, TOP
        elif kind == "zero":
            lo = hi = draw(FINITE)
        elif kind == "shifted":
            lo, hi = 1e308, 1e308
        elif kind == "free":
            lo, hi = sorted((draw(FINITE), draw(FINITE)))
        elif kind == "negative":
            lo, hi = 1.0, 0.0
        elif kind == "nan":
            lo, hi = math.nan, 1.0
        else:
            lo, hi = 0.0, math.inf
        low.append(float(lo))
        high.append(float(hi))
    return low, high


RHO_KINDS = ("normal10", "normal10", "flip-scan", "normal1", "limit", "spike", "subnormal", "zeros")


@st.composite
def frequencies(draw: st.DrawFn, D: int, n: int = N, broken: str = "") -> np.ndarray:
    """rho, D x n: N(0, 10^2) (the label-flip scan's), rows at MAX_RHO_ROW_L1, a spike at it, subnormal, zero;
    ``broken`` "over" or "nan": one entry beyond the bound, or NaN. A subnormal or zero rho has at most
    DEGENERATE_MAX_D rows (its caller reads D from the shape)."""
    kind = draw(st.sampled_from(RHO_KINDS))
    if kind in ("subnormal", "zeros"):
        D = min(D, DEGENERATE_MAX_D)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if kind == "flip-scan":  # test_dp_label_flip's rho exactly (D = 10 there)
        rho = np.random.default_rng(draw(st.integers(0, 2))).normal(0.0, 10.0, (D, n))
    elif kind in ("normal10", "normal1"):
        rho = rng.normal(0.0, 10.0 if kind == "normal10" else 1.0, (D, n))
    elif kind == "limit":
        rho = rng.uniform(-1, 1, (D, n))
        rho = rho / np.abs(rho).sum(axis=1, keepdims=True) * MAX_RHO_ROW_L1 * (1 - 1e-12)
    elif kind == "spike":
        rho = np.zeros((D, n))
        rho[np.arange(D), rng.integers(0, n, D)] = rng.choice([-1.0, 1.0], D) * MAX_RHO_ROW_L1
    else:
        rho = np.full((D, n), TINY if kind == "subnormal" else 0.0)
    if broken:
        rho[-1, 0] = 2 * MAX_RHO_ROW_L1 if broken == "over" else math.nan
    return rho


MODEL_TEMPLATE = json.loads(
    DpModel(
        method="dp-hybrid",
        mechanism="laplace",
        epsilon=1.0,
        private=True,
        low=(0.0,) * N,
        high=(1.0,) * N,
        kernel_width=1.0,
        C=1.0,
        rho=((1.0,) * N,),
        weights=(0.3, -0.7),
    ).to_json()
)
MODEL_JSON = json.dumps(MODEL_TEMPLATE).encode()  # a mild model, for DpEvaluate sent to a random-kernel entity
WIDTHS = st.sampled_from([TINY, 1e-300, 1e-6, 1.0, 1e6, MAX_KERNEL_WIDTH])
THRESHOLDS = st.sampled_from([0.0, 0.0, TINY, -1e6, MAX_THRESHOLD, -MAX_THRESHOLD])


def _coefficients(draw: st.DrawFn, size: int, broken: bool = False) -> list[float]:
    """Weights or dual coefficients: mild, at the L1 bound, subnormal, zero; ``broken``: near the largest double."""
    if broken:
        return [TOP / 2] * size
    kind = draw(st.sampled_from(["mild", "limit", "limit", "subnormal", "zeros"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if kind == "mild":
        return rng.normal(0.0, 1.0, size).tolist()
    if kind == "limit":
        return (rng.choice([-1.0, 1.0], size) * MAX_WEIGHTS_L1 / size * (1 - 1e-12)).tolist()
    return [TINY if kind == "subnormal" else 0.0] * size


MODEL_FAULTS = (
    "not-utf8",
    "not-json",
    "other-format",
    "nan",
    "features",
    "method",
    "span",
    "width",
    "threshold",
    "coefficients",
    "length",
    "rho",
    "basis",
)


@st.composite
def dp_models(draw: st.DrawFn) -> bytes:
    """A model file for DpEvaluate or DpScoreHistogram, every number as hostile as the format allows, or with one
    fault (too many features, beyond a bound, not a DP model, not JSON)."""
    broken = fault(draw, MODEL_FAULTS)
    if broken == "not-utf8":
        return b"\xff\xfe{"
    if broken == "not-json":
        return b'{"format": "ppsvm-dp-model", '
    n = draw(st.sampled_from([N - 1, N + 1])) if broken == "features" else N
    document = dict(MODEL_TEMPLATE)
    method = draw(st.sampled_from(["dp-hybrid", "private-svm", "public-only", "public-only"]))
    low, high = draw(scalings(n, broken=broken == "span"))
    width = draw(st.sampled_from([2 * MAX_KERNEL_WIDTH, 0.0, -1.0])) if broken == "width" else draw(WIDTHS)
    document.update(method=method, low=low, high=high, kernel_width=width, C=draw(FINITE))
    extra = 1 if broken == "length" else 0
    if method == "public-only":
        k = draw(st.integers(1, 3))
        basis = "over" if broken == "basis" else draw(st.sampled_from(["corners", "random", "zeros"]))
        rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
        values = {
            "corners": rng.choice([-SCALED_BOX, SCALED_BOX], (k, n)),
            "random": rng.uniform(-SCALED_BOX, SCALED_BOX, (k, n)),
            "zeros": np.zeros((k, n)),
            "over": np.full((k, n), 2 * SCALED_BOX),
        }[basis]
        dual = _coefficients(draw, k + extra, broken == "coefficients")
        document.update(mechanism="public", epsilon=None, private=False, rho=[], weights=[])
        document.update(basis=values.tolist(), dual_coef=dual, threshold=1.0 if broken == "threshold" else 0.0)
    else:
        D = draw(st.sampled_from([1, 2, 3, 10]))
        rho = draw(frequencies(D, n, broken="over" if broken == "rho" else ""))
        weights = _coefficients(draw, 2 * D + extra, broken == "coefficients")
        threshold = 2 * MAX_THRESHOLD if broken == "threshold" else draw(THRESHOLDS)
        document.update(rho=rho.tolist(), weights=weights, threshold=threshold)
    if broken == "other-format":
        document["format"] = "ppsvm-model"
    elif broken == "method":
        document["method"] = "other"
    elif broken == "nan":
        document["C"] = math.nan
    return json.dumps(document, allow_nan=True).encode()


def _epsilon(draw: st.DrawFn, broken: bool) -> float:
    return draw(BAD_EPSILONS) if broken else draw(EPSILONS)


@st.composite
def dp_evaluate_requests(draw: st.DrawFn) -> tuple[str, Any]:
    broken = draw(st.sampled_from([False] * 9 + [True]))
    return "DpEvaluate", pb.DpEvaluateRequest(model_json=draw(dp_models()), epsilon=_epsilon(draw, broken))


@st.composite
def dp_histogram_requests(draw: st.DrawFn) -> tuple[str, Any]:
    broken = fault(draw, ("epsilon", "empty", "equal", "decreasing", "nan", "inf", "too-many"))
    if broken in ("", "epsilon"):
        kind = draw(st.sampled_from(["few", "few", "few", "extreme", "most"]))
        if kind == "few":
            edges = sorted(set(draw(st.lists(FINITE, min_size=1, max_size=6))))
        elif kind == "extreme":
            edges = draw(st.sampled_from([[-TOP, TOP], [TINY], [-TINY, 0.0, TINY], [-MAX_THRESHOLD, MAX_THRESHOLD]]))
        else:
            edges = np.linspace(-2.0, 2.0, MAX_HISTOGRAM_EDGES).tolist()
    elif broken == "too-many":
        edges = np.linspace(-2.0, 2.0, MAX_HISTOGRAM_EDGES + 1).tolist()
    else:
        edges = {"empty": [], "equal": [1.0, 1.0], "decreasing": [2.0, 1.0], "nan": [math.nan], "inf": [0, math.inf]}[
            broken
        ]
    epsilon = _epsilon(draw, broken == "epsilon")
    return "DpScoreHistogram", pb.DpHistogramRequest(model_json=draw(dp_models()), edges=edges, epsilon=epsilon)


# Every mechanism the entity serves (its config allows the continuous-noise ones), and what it must refuse.
MECHANISMS = ("laplace", "output-gamma", "objective")
C_VALUES = st.sampled_from([TINY, 1e-300, 1e-6, 1.0, 300.0, MAX_DP_C, MAX_DP_C]) | st.floats(1e-3, MAX_DP_C)
BAD_C = st.sampled_from([0.0, -1.0, MAX_DP_C * (1 + 1e-15), math.nan, math.inf])
HUBER_H = st.sampled_from([0.0, 0.0, TINY, 1e-300, 2e-277, 1e-250, 1e-100, 1e-6, 0.5, 1.0])
BAD_HUBER_H = st.sampled_from([1.5, -0.5, math.nan])
WEIGHTS_FAULTS = ("method", "none", "mechanism", "epsilon", "c", "huber_h", "D", "D-over", "span", "length", "rho")


def few_points(low: list[float], high: list[float], rho: np.ndarray) -> bool:
    """Whether rho'x of the original cell's scaled training records takes fewer than 50 distinct rows (read by the
    harness only to keep the run short: see DEGENERATE_MAX_C)."""
    try:
        scaled = apply_scaling(SCALES["cell"][0], np.asarray(low), np.asarray(high))
    except ValueError:  # a broken scaling: refused before any solve
        return False
    with np.errstate(all="ignore"):
        projected = np.nan_to_num(scaled @ rho.T)
    return len(np.unique(np.round(projected, 9), axis=0)) < 50


@st.composite
def dp_weights_requests(draw: st.DrawFn) -> tuple[str, Any]:
    broken = fault(draw, WEIGHTS_FAULTS)
    mechanism = draw(st.sampled_from(MECHANISMS))
    sizes = [1, 2, 3, 10, 10, 10, 30, 100, 300, 1000, MAX_DP_FREQUENCIES]
    D = draw(st.sampled_from([s for s in sizes if mechanism != "objective" or s <= OBJECTIVE_MAX_D]))
    if broken == "D-over":
        D = MAX_DP_FREQUENCIES + 1
    rho = draw(frequencies(D, broken=draw(st.sampled_from(["over", "nan"])) if broken == "rho" else ""))
    D = rho.shape[0]
    low, high = draw(scalings(broken=broken == "span"))
    c = draw(BAD_C if broken == "c" else C_VALUES)
    if broken != "c" and D > 10 and few_points(low, high, rho):
        c = min(c, DEGENERATE_MAX_C)
    request = pb.DpRequest(
        method=draw(st.sampled_from(["dp-hybrid", "private-svm"])),
        mechanism=mechanism,
        epsilon=_epsilon(draw, broken == "epsilon"),
        c=c,
        n_frequencies=D,
        rho=rho.ravel().tolist(),
        low=low,
        high=high,
        huber_h=draw(BAD_HUBER_H if broken == "huber_h" else HUBER_H),
    )
    if broken == "method":
        request.method = draw(st.sampled_from(["public-only", "", "dp-hybrid "]))
    elif broken == "none":
        request.mechanism, request.epsilon = "none", draw(st.sampled_from([0.0, 1.0]))
    elif broken == "mechanism":
        request.mechanism = draw(st.sampled_from(["gaussian", "", "Laplace"]))
    elif broken == "D":
        request.n_frequencies = D + draw(st.sampled_from([1, -1]))
    elif broken == "length":
        del request.low[-1]
    return "DpWeights", request


DP_REQUESTS = st.one_of(
    dp_weights_requests(),
    dp_weights_requests(),
    dp_evaluate_requests(),
    dp_evaluate_requests(),
    dp_histogram_requests(),
    dp_histogram_requests(),
    st.sampled_from([("Records", pb.Empty()), ("KernelBlock", pb.KernelRequest(kernel=pb.LINEAR, mbar=1))]),
)


# Random-kernel requests are drawn as specs and built against the entity's public facts (ids, tagged ranges).
@dataclass(frozen=True)
class KernelSpec:
    kernel: int
    mbar: int
    mu: float
    records: str
    scaling: str
    nonce: str
    epoch: int
    column_major: bool
    follow: bool = False  # ask under the view this example's first kernel block pinned (kernel, mu, mbar at most)


GAUSSIAN_WIDTHS = st.sampled_from([TINY, 1e-300, 1e-12, 1.0 / N, 1.0, 1e12, TOP]) | st.floats(1e-6, 1e6)
KERNEL_FAULTS = ("kernel", "mbar", "mu", "records", "scaling", "nonce", "epoch")


@st.composite
def kernel_specs(draw: st.DrawFn) -> KernelSpec:
    """A kernel request at the extremes its checks allow (any width, mbar up to n_j - 1, records by set or id, a
    fresh nonce), or with one fault: another kernel, mbar >= n_j, a width that is not a positive number, unknown
    or repeated ids, a scaling altered, forged by a colluding peer or missing a member, a nonce too short, too long
    or used before, an epoch not opened."""
    broken = fault(draw, KERNEL_FAULTS)
    options = {
        "kernel": (st.sampled_from([pb.LINEAR, pb.GAUSSIAN, pb.GAUSSIAN]), st.sampled_from([pb.KERNEL_UNSPECIFIED, 7])),
        "mbar": (st.sampled_from([1, 2, N // 2, N - 2, N - 1]), st.sampled_from([0, N, N + 1, 2**32 - 1])),
        "mu": (GAUSSIAN_WIDTHS, st.sampled_from([0.0, -1.0, -TINY, math.nan, math.inf])),
        "records": (
            st.sampled_from(["train", "train", "test", "changed", "some"]),
            st.sampled_from(["unknown", "repeated", "empty", "unset", "none"]),
        ),
        "scaling": (
            st.sampled_from(["honest", "honest", "reversed"]),
            st.sampled_from(["altered", "peer-forged", "own-forged", "missing", "twice", "short", "foreign"]),
        ),
        "nonce": (st.sampled_from(["none", "none", "fresh", "longest"]), st.sampled_from(["short", "long", "again"])),
        "epoch": (st.just(0), st.sampled_from([1, 2**32 - 1])),
    }
    values = {name: draw(bad if name == broken else good) for name, (good, bad) in options.items()}
    if broken == "mu":
        values["kernel"] = pb.GAUSSIAN  # a linear kernel has no width to check
    return KernelSpec(**values, column_major=draw(st.booleans()), follow=draw(st.booleans()))


@dataclass(frozen=True)
class BaselineSpec:
    task: str
    kernel: int
    nu: float
    mu: float
    seed: int
    search: str
    leave_one_out: bool


def _setting(draw: st.DrawFn, bounds: tuple[float, float], broken: bool) -> float:
    low, high = bounds
    if broken:
        return draw(st.sampled_from([low * (1 - 1e-9), high * (1 + 1e-9), TINY, TOP, -1.0, math.nan, math.inf]))
    return draw(st.sampled_from([0.0, 0.0, low, high]) | st.floats(low, high))  # 0: tuned by the entity


@st.composite
def baseline_specs(draw: st.DrawFn) -> BaselineSpec:
    """LocalBaseline at the corners of its allowed settings (or tuned), or with one fault: a task its labels do not
    make, no kernel, nu or mu out of range, an unknown search."""
    broken = fault(draw, ("task", "kernel", "nu", "mu", "search"))
    return BaselineSpec(
        task=draw(st.sampled_from(["regress", "", "other"])) if broken == "task" else "classify",
        kernel=pb.KERNEL_UNSPECIFIED if broken == "kernel" else draw(st.sampled_from([pb.GAUSSIAN, pb.LINEAR])),
        nu=_setting(draw, BASELINE_NU_RANGE, broken == "nu"),
        mu=_setting(draw, BASELINE_MU_RANGE, broken == "mu"),
        seed=draw(st.integers(0, 2**64 - 1)),
        search="random" if broken == "search" else draw(st.sampled_from(["", "grid", "uniform-design"])),
        leave_one_out=draw(st.booleans()),
    )


RK_SPECS = st.one_of(
    kernel_specs(),
    kernel_specs(),
    kernel_specs(),
    baseline_specs(),
    st.sampled_from(["Records", "FeatureRange", "DpEvaluate"]),
)


@dataclass
class Facts:
    """What the coordinator knows of the entity (ids, its tagged range) and what a colluding peer adds (the
    column-block secret, to tag ranges of its choosing)."""

    train_ids: list[str]
    test_ids: list[str]
    changed: list[str]
    own: pb.SignedRange
    peer: pb.SignedRange
    secret: bytes
    last_nonce: bytes = b""
    nonces: int = 0
    pinned: tuple[int, float, int] | None = None  # (kernel, mu, mbar) of this example's first kernel block answered

    def tagged(self, entity_id: str, low: np.ndarray, high: np.ndarray) -> pb.SignedRange:
        tag = range_tag(self.secret, entity_id, low, high)
        return pb.SignedRange(entity_id=entity_id, low=low.tolist(), high=high.tolist(), tag=tag)


def kernel_request(spec: KernelSpec, facts: Facts) -> pb.KernelRequest:
    kernel, mu, mbar = spec.kernel, spec.mu, spec.mbar
    if spec.follow and facts.pinned is not None:
        kernel, mu = facts.pinned[:2]
        mbar = mbar if mbar >= N else min(mbar, facts.pinned[2])
    request = pb.KernelRequest(kernel=kernel, mbar=mbar, mu=mu, epoch=spec.epoch)
    request.column_major = spec.column_major
    ids = {
        "changed": facts.changed,
        "some": [facts.test_ids[3], facts.train_ids[5], *facts.changed],
        "unknown": [facts.train_ids[0], "not-a-record"],
        "repeated": [facts.changed[0], facts.changed[0]],
        "empty": [],
    }
    if spec.records in ("train", "test", "unset"):
        request.record_set = {"train": pb.TRAIN, "test": pb.TEST, "unset": pb.RECORD_SET_UNSPECIFIED}[spec.records]
    elif spec.records in ids:
        request.ids.SetInParent()
        request.ids.ids.extend(ids[spec.records])
    own, peer = facts.own, facts.peer
    low, high = np.array(own.low), np.array(own.high)
    wide_low = low.copy()
    wide_low[0] = -TOP
    altered = pb.SignedRange(entity_id=own.entity_id, low=wide_low.tolist(), high=own.high, tag=own.tag)
    ranges = {
        "honest": [own, peer],
        "reversed": [peer, own],
        "altered": [altered, peer],
        "peer-forged": [own, facts.tagged(PEER, np.full(N, -TOP), np.full(N, TOP))],
        "own-forged": [facts.tagged(ENTITY, wide_low, high), peer],
        "missing": [own],
        "twice": [own, own, peer],
        "short": [pb.SignedRange(entity_id=own.entity_id, low=own.low[:-1], high=own.high[:-1], tag=own.tag), peer],
        "foreign": [own, pb.SignedRange(entity_id="r9c9", low=peer.low, high=peer.high, tag=peer.tag)],
    }[spec.scaling]
    request.scaling.CopyFrom(pb.Scaling(ranges=ranges))
    if spec.nonce != "none":
        facts.nonces += 1
        fresh = facts.nonces.to_bytes(8, "big") * 8
        nonce = {
            "fresh": fresh[:MIN_NONCE_BYTES],
            "longest": fresh[:MAX_NONCE_BYTES],
            "short": fresh[: MIN_NONCE_BYTES - 1],
            "long": fresh + b"x",
            "again": facts.last_nonce or fresh[:MIN_NONCE_BYTES],
        }[spec.nonce]
        facts.last_nonce = nonce
        request.nonce = nonce
    return request


def baseline_request(spec: BaselineSpec) -> pb.BaselineRequest:
    tuned = not (spec.nu and spec.mu)
    return pb.BaselineRequest(
        task=spec.task,
        kernel=spec.kernel,
        nu=spec.nu,
        mu=spec.mu,
        seed=spec.seed,
        search=spec.search,
        # Leave-one-out tuning on 199 records is 199 fits per grid point (half a minute): only with nu and mu fixed.
        leave_one_out=spec.leave_one_out and not tuned,
    )


def exempt_rows(rpc: str, request: Any, facts: Facts, neighbour: str, pristine: Pristine) -> list[int]:
    """Positions of the reply where the neighbour's changed record is itself released (random-kernel mode)."""
    train, test = pristine.changed[neighbour]
    if rpc == "Records" and neighbour == "label":
        return [facts.train_ids.index(train), facts.test_ids.index(test)]
    if rpc != "KernelBlock" or neighbour != "feature":
        return []
    which = request.WhichOneof("records")
    if which == "ids":
        return [k for k, name in enumerate(request.ids.ids) if name in (train, test)]
    if which == "record_set" and request.record_set == pb.TRAIN:
        return [facts.train_ids.index(train)]
    if which == "record_set" and request.record_set == pb.TEST:
        return [facts.test_ids.index(test)]
    return []


# --- the property -----------------------------------------------------------------------------------------------


@dataclass
class Tally:
    """Requests compared, by RPC and outcome, and every breach found."""

    compared: Counter[str] = field(default_factory=Counter)
    seconds: Counter[str] = field(default_factory=Counter)
    slowest: tuple[float, str] = (0.0, "")
    breaches: list[str] = field(default_factory=list)

    def report(self) -> str:
        counts = ", ".join(f"{key}: {count}" for key, count in sorted(self.compared.items()))
        seconds = ", ".join(f"{k} {v:.1f}" for k, v in sorted(self.seconds.items()))
        return f"{counts}; seconds by RPC: {seconds}; slowest {self.slowest[0]:.1f} s: {self.slowest[1][:300]}"


def compare(
    triple: Triple, rpc: str, request: Any, tally: Tally, pristine: Pristine, facts: Facts | None = None
) -> dict[str, Outcome]:
    """Send ``request`` to the three neighbours and add to ``tally`` every way their outcomes break the property."""
    start = time.monotonic()
    outcomes = ask_all(triple, rpc, request)
    original = outcomes["original"]
    tally.compared[f"{rpc} {'answered' if original.answered else 'refused'}"] += 1
    found = []
    for name, outcome in outcomes.items():
        if outcome.post_read:
            found.append(f"{name}: {rpc} failed after reading the records: {outcome.details}")
        elif not outcome.answered and outcome.charged:
            found.append(f"{name}: {rpc} refused after its charge: {outcome.details}")
        elif outcome.answered and rpc in ("DpEvaluate", "DpScoreHistogram", "DpWeights"):
            problems = check_noise(rpc, request, outcome.reply, pristine.cells[name])
            found += [f"{name}: {problem}" for problem in problems]
        elif outcome.answered and rpc == "KernelBlock" and not np.isfinite(outcome.reply["kernel"]).all():
            found.append(f"{name}: a kernel value is not finite")
        elif outcome.answered and rpc == "LocalBaseline":
            figures = (outcome.reply.error_rate, outcome.reply.auc)
            if not all(math.isfinite(v) and 0.0 <= v <= 1.0 for v in figures):
                found.append(f"{name}: LocalBaseline figures {figures}")
    for name in NEIGHBOURS[1:]:
        exempt = exempt_rows(rpc, request, facts, name, pristine) if facts is not None else []
        found += [f"original / {name}: {d}" for d in differences(rpc, original, outcomes[name], exempt)]
    if found:
        tally.breaches.append(f"{rpc} {_brief(request)}: {'; '.join(found)}")
    took = time.monotonic() - start
    tally.seconds[rpc] += took
    if took > tally.slowest[0]:
        shape = {k: getattr(request, k) for k in ("mechanism", "c", "n_frequencies", "huber_h") if hasattr(request, k)}
        tally.slowest = (took, f"{rpc} {shape or _brief(request)}")
    return outcomes


def _brief(request: Any) -> str:
    text = str(request).replace("\n", " ")
    return text if len(text) < 600 else text[:600] + "..."


def same_metadata(triple: Triple) -> list[str]:
    keys = ("releases", "epsilon_spent", "pinned_basis", "pinned_mbar", "points_used", "epoch")
    seen = {name: tuple(getattr(e.metadata(), k) for k in keys) for name, e in triple.entities.items()}
    return [] if len(set(seen.values())) == 1 else [f"metadata differ: {seen}"]


HYPOTHESIS = settings(
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
)


@pytest.fixture(scope="module")
def dp_triple(pristine: Pristine, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Triple]:
    triple = serve(pristine, tmp_path_factory.mktemp("dp-triple"), DP_PRIVACY)
    try:
        yield triple
    finally:
        triple.stop()


def test_hostile_dp_requests_answer_alike_on_neighbours_but_for_the_noise(
    dp_triple: Triple, pristine: Pristine
) -> None:
    tally = Tally()

    @settings(HYPOTHESIS, max_examples=DP_EXAMPLES)
    @given(requests=st.lists(DP_REQUESTS, min_size=1, max_size=3))
    def run(requests: list[tuple[str, Any]]) -> None:
        for rpc, request in requests:
            compare(dp_triple, rpc, request, tally, pristine)
        tally.breaches += same_metadata(dp_triple)

    run()
    print(f"\nDP neighbours compared: {tally.report()}")
    assert not tally.breaches, "\n".join(tally.breaches)
    # Not vacuous: each DP RPC answered (and its noise checked) several times, and refusals compared too.
    for rpc in ("DpWeights", "DpEvaluate", "DpScoreHistogram"):
        assert tally.compared[f"{rpc} answered"] >= 3, tally.report()
    assert sum(n for key, n in tally.compared.items() if key.startswith("Dp") and "refused" in key) >= 3


def tiny_c_objective_request() -> pb.DpRequest:
    """Objective perturbation at C = 1e-300: valid (C in (0, MAX_DP_C]) and epsilon' > 0, but 2 h n / C is past
    float64's range (it was answered with NaN weights before n / C was bounded)."""
    rho = np.random.default_rng(0).normal(0.0, 10.0, (2, N))
    low, high = SCALES["declared"]
    return pb.DpRequest(
        method="dp-hybrid",
        mechanism="objective",
        epsilon=1.0,
        c=1e-300,
        n_frequencies=2,
        rho=rho.ravel().tolist(),
        low=low.tolist(),
        high=high.tolist(),
    )


def test_objective_perturbation_at_a_tiny_c_is_refused_from_the_request(dp_triple: Triple) -> None:
    """In process, the C below which the weights were NaN was bisected on the three neighbours and three noise draws:
    1.4857556917268845e-298 each time, 2 h n / C = 1.34e300 = DBL_MAX / (2^27 + 1), where the double-double
    splitting of the exact dual finish overflows. Now refused before any record is read, alike, uncharged."""
    outcomes = ask_all(dp_triple, "DpWeights", tiny_c_objective_request())
    for name, outcome in outcomes.items():
        assert not outcome.answered and not outcome.post_read and not outcome.charged, (name, outcome)
        assert "raise C" in outcome.details, (name, outcome)
    for name in NEIGHBOURS[1:]:
        assert differences("DpWeights", outcomes["original"], outcomes[name]) == []


class Triples:
    """Fresh random-kernel triples, the next one starting in the background while the current one serves."""

    def __init__(self, pristine: Pristine, base: Path) -> None:
        self.pristine, self.base, self.made = pristine, base, 0
        self.background = ThreadPoolExecutor(max_workers=1)
        self.next: Future[Triple] = self._start()
        self.current: Triple | None = None

    def _start(self) -> Future[Triple]:
        self.made += 1
        return self.background.submit(serve, self.pristine, self.base / f"rk-{self.made}", RK_PRIVACY)

    def fresh(self) -> Triple:
        if self.current is not None:
            self.current.stop()
        self.current = self.next.result()
        self.next = self._start()
        return self.current

    def close(self) -> None:
        if self.current is not None:
            self.current.stop()
        self.next.result().stop()
        self.background.shutdown()


@pytest.fixture(scope="module")
def rk_triples(pristine: Pristine, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Triples]:
    triples = Triples(pristine, tmp_path_factory.mktemp("rk-triples"))
    try:
        yield triples
    finally:
        triples.close()


def facts_of(triple: Triple, pristine: Pristine) -> Facts:
    """The entity's public facts as the coordinator holds them (from Records and FeatureRange of the original)."""
    cell = pristine.cells["original"]
    ranges = decode_arrays(triple.entities["original"].stub.FeatureRange(pb.Empty(), timeout=TIMEOUT))
    own = pb.SignedRange(entity_id=ENTITY, low=ranges["low"], high=ranges["high"], tag=str(ranges["tag"][0]))
    facts = Facts(cell.train_ids.tolist(), cell.test_ids.tolist(), [], own, own, pristine.secret)
    # The peer's range as its own FeatureRange would publish it: the same declared bounds, tagged as r1c0.
    facts.peer = facts.tagged(PEER, np.asarray(ranges["low"]), np.asarray(ranges["high"]))
    facts.changed = [pristine.changed["feature"][0], pristine.changed["label"][1]]
    for name, entity in triple.entities.items():  # keep the three in step: the same releases everywhere
        if name != "original":
            decode_arrays(entity.stub.FeatureRange(pb.Empty(), timeout=TIMEOUT))
    triple.releases = {name: e.metadata().releases for name, e in triple.entities.items()}
    return facts


def test_hostile_random_kernel_requests_answer_alike_on_neighbours(rk_triples: Triples, pristine: Pristine) -> None:
    tally = Tally()
    # Control on the real entities: the moved record's kernel row is told apart unless the comparison exempts it.
    triple = rk_triples.fresh()
    facts = facts_of(triple, pristine)
    request = kernel_request(KernelSpec(pb.LINEAR, N - 1, 0.0, "train", "honest", "none", 0, False), facts)
    outcomes = ask_all(triple, "KernelBlock", request)
    assert all(o.answered for o in outcomes.values()), outcomes
    rows = exempt_rows("KernelBlock", request, facts, "feature", pristine)
    assert differences("KernelBlock", outcomes["original"], outcomes["feature"]) == ["KernelBlock: kernel differs"]
    assert differences("KernelBlock", outcomes["original"], outcomes["feature"], rows) == []
    assert differences("KernelBlock", outcomes["original"], outcomes["label"]) == []

    @settings(HYPOTHESIS, max_examples=RK_EXAMPLES)
    @given(specs=st.lists(RK_SPECS, min_size=3, max_size=8))
    def run(specs: list[Any]) -> None:
        triple = rk_triples.fresh()
        facts = facts_of(triple, pristine)
        for spec in specs:
            if isinstance(spec, KernelSpec):
                rpc, request = "KernelBlock", kernel_request(spec, facts)
            elif isinstance(spec, BaselineSpec):
                rpc, request = "LocalBaseline", baseline_request(spec)
            elif spec == "DpEvaluate":
                rpc, request = spec, pb.DpEvaluateRequest(model_json=MODEL_JSON, epsilon=1.0)
            else:
                rpc, request = spec, pb.Empty()
            outcomes = compare(triple, rpc, request, tally, pristine, facts)
            if rpc == "KernelBlock" and facts.pinned is None and outcomes["original"].answered:
                facts.pinned = (request.kernel, request.mu, request.mbar)
        for rpc in ("Records", "FeatureRange"):  # no request fields: asked once more after the hostile ones
            compare(triple, rpc, pb.Empty(), tally, pristine, facts)
        tally.breaches += same_metadata(triple)

    run()
    print(f"\nrandom-kernel neighbours compared: {tally.report()}")
    assert not tally.breaches, "\n".join(tally.breaches)
    for rpc in ("KernelBlock", "LocalBaseline", "Records", "FeatureRange"):
        assert tally.compared[f"{rpc} answered"] >= 2, tally.report()
    assert tally.compared["KernelBlock refused"] >= 2, tally.report()


def straddled_view(pristine: Pristine) -> tuple[int, float, float]:
    """A linear view (mbar) whose measured single-block gain differs between ``original`` and ``feature``, and
    their two gains: computed by the harness exactly as the entity measures it (its records scaled by the declared
    bounds and clipped, B_j of epoch 0, measure_risk's seed)."""
    low, high = pristine.bounds
    gains = {}
    for mbar in (5, 10, 15, 20):
        points = derive_B(pristine.secret, mbar, N, 0)
        gains[mbar] = tuple(
            measure_risk(
                np.clip(scale_to_unit(pristine.cells[name].X_train, low, high), 0, 1), points, "linear", 0.0
            ).gain
            for name in ("original", "feature")
        )
    mbar = max(gains, key=lambda m: abs(gains[m][0] - gains[m][1]))
    return mbar, *gains[mbar]


def start_gains(pristine: Pristine) -> dict[str, float]:
    """Each neighbour's single-block gain as its entity measures it at start (single_block_exposure)."""
    return {name: single_block_exposure(pristine.cells[name].X_train, pristine.secret).gain for name in NEIGHBOURS}


@pytest.mark.parametrize("limit", ["default", "view", "start"])
def test_the_single_block_gate_is_one_decision_made_before_any_request(
    limit: str, pristine: Pristine, tmp_path: Path
) -> None:
    """Entities that do not consent to single-block releases (their default) decide once, from what a colluding peer
    recovers at their largest private mbar (measured at start), not per request. Asked for the block of three
    training records both neighbours hold unchanged:

    - ``default`` (0.05, below every neighbour's gain) and ``view`` (between the neighbours' gains at the linear view
      where they differ most, which the old per-request gate measured: one answered, the other refused after the
      charge, each quoting its own records' figures): every view refused alike by all three, uncharged, one text;
    - ``start``: the operator's limit between the neighbours' start gains, the one bit left by design. One answers,
      the other refuses uncharged, with the same text at every view: the coordinator can neither pick the view it is
      measured at nor ask it twice for another answer.
    """
    mbar, original_gain, feature_gain = straddled_view(pristine)
    gains = start_gains(pristine)
    if abs(original_gain - feature_gain) < 1e-3 or gains["original"] == gains["feature"]:
        pytest.fail(f"no view whose gain differs between the neighbours: {mbar, original_gain, feature_gain, gains}")
    privacy = "max_releases_per_minute = 0\nmin_free_disk_mb = 0\n"
    chosen = {
        "default": None,
        "view": (original_gain + feature_gain) / 2,
        "start": (gains["original"] + gains["feature"]) / 2,
    }[limit]
    if chosen is not None:
        privacy += f"single_block_max_gain = {chosen!r}\n"
    triple = serve(pristine, tmp_path / "no-consent", privacy)
    try:
        facts = facts_of(triple, pristine)
        unchanged = [i for i in facts.train_ids if i != pristine.changed["feature"][0]][:3]
        asked = []
        for spec in (
            KernelSpec(pb.LINEAR, mbar, 0.0, "train", "honest", "none", 0, False),
            KernelSpec(pb.LINEAR, 1, 0.0, "train", "honest", "none", 0, False),
            KernelSpec(pb.GAUSSIAN, N - 1, 1.0 / N, "train", "honest", "none", 0, False),
        ):
            request = kernel_request(spec, facts)
            request.ids.SetInParent()
            request.ids.ids.extend(unchanged)
            asked.append(ask_all(triple, "KernelBlock", request))
    finally:
        triple.stop()
    described = [{name: o.describe() for name, o in outcomes.items()} for outcomes in asked]
    assert not [o for outcomes in asked for o in outcomes.values() if not o.answered and o.charged], described
    allowed = {name: limit == "start" and gain <= chosen for name, gain in gains.items()}
    if limit == "start":
        assert allowed["original"] != allowed["feature"]
        assert {name: o.answered for name, o in asked[0].items()} == allowed, described
    # The gate's refusals: every view, one text with no figure (the allowed ones met their own pin after the first).
    refusals = [outcomes[name] for outcomes in asked for name, ok in allowed.items() if not ok]
    assert refusals and all(not o.answered for o in refusals), described
    assert len({o.details for o in refusals}) == 1 and "%" not in refusals[0].details, described


# --- controls: the comparison tells apart what is not private -----------------------------------------------------


def in_process(pristine: Pristine, base: Path, name: str, privacy: str) -> EntityCore:
    directory = base / name
    shutil.copytree(pristine.directories[name], directory)
    config = directory / f"{ENTITY}.toml"
    config.write_text(config.read_text() + f"\n[privacy]\n{privacy}")
    return EntityCore(load_entity_config(config))


def local(call: Callable[[], Any], core: EntityCore) -> Outcome:
    """:class:`Outcome` of an in-process call, refused as the servicer would (status code and text)."""
    try:
        reply = call()
    except PpsvmError as error:
        return Outcome(False, status_for(error).name, str(error), releases=core.guard.state()["releases"])
    return Outcome(True, reply=reply, releases=core.guard.state()["releases"])


def test_control_unnoised_weights_differ_between_neighbours(pristine: Pristine, tmp_path: Path) -> None:
    """DpWeights without noise (mechanism "none", allowed by the entities' own config): the comparison flags it."""
    privacy = DP_PRIVACY + f"{NON_PRIVATE_WEIGHTS_KEY} = true\n"
    cores = {name: in_process(pristine, tmp_path, name, privacy) for name in ("original", "label")}
    rho = np.random.default_rng(0).normal(0.0, 10.0, (10, N))
    low, high = pristine.bounds

    def weights(core: EntityCore) -> pb.DpReply:
        release, _ = core.dp_weights(
            method="dp-hybrid", mechanism="none", epsilon=None, C=MAX_DP_C, rho=rho, low=low, high=high, huber_h=0.5
        )
        return pb.DpReply(
            entity_id=core.id,
            n_train=release.n,
            weights=release.weights.tolist(),
            mechanism=release.mechanism,
            noise=release.noise,
        )

    outcomes = {name: local(functools.partial(weights, core), core) for name, core in cores.items()}
    assert all(o.answered for o in outcomes.values())
    assert differences("DpWeights", outcomes["original"], outcomes["label"]) == ["DpWeights: weights differs"]


def _unclipped_scaling(X: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """apply_scaling before issue 27: what overflowed stayed infinite."""
    span = np.where(high > low, high - low, 1.0)
    with np.errstate(over="ignore", invalid="ignore"):
        return (np.asarray(X, dtype=np.float64) - low) / span


def test_control_the_unclipped_scaling_fails_on_one_neighbour_only(
    pristine: Pristine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The old path, monkeypatched in: the overflow probe at a threshold between the neighbours' maxima fails after
    the records were read on one of them and not the other, and the comparison flags both."""
    cores = {name: in_process(pristine, tmp_path, name, DP_PRIVACY) for name in ("original", "feature")}
    original, feature = (pristine.cells[name] for name in ("original", "feature"))
    train_t = float(original.X_train[:, 0].max() + feature.X_train[:, 0].max()) / 2
    test_t = float(original.X_test[:, 0].max() + feature.X_test[:, 0].max()) / 2
    monkeypatch.setattr(fourier, "apply_scaling", _unclipped_scaling)
    calls = {
        "DpScoreHistogram": lambda core: pb.DpHistogramReply(
            **core.dp_score_histogram(overflow_model(0, train_t, N), np.array([0.0]), 1.0)
        ),
        "DpEvaluate": lambda core: pb.DpEvaluateReply(**core.dp_evaluate(overflow_model(0, test_t, N), 1.0)),
    }
    for rpc, call in calls.items():
        outcomes = {name: local(functools.partial(call, core), core) for name, core in cores.items()}
        assert [o.post_read for o in outcomes.values()].count(True) == 1, (rpc, outcomes)
        assert differences(rpc, outcomes["original"], outcomes["feature"]), rpc
    # The fixed path (monkeypatch undone): both answer, and the comparison finds nothing but noise.
    monkeypatch.undo()
    for rpc, call in calls.items():
        outcomes = {name: local(functools.partial(call, core), core) for name, core in cores.items()}
        assert all(o.answered for o in outcomes.values()), (rpc, outcomes)
        assert differences(rpc, outcomes["original"], outcomes["feature"]) == [], rpc
