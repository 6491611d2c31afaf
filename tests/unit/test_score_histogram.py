"""DpScoreHistogram at the entity (EntityCore.dp_score_histogram): exact bins, sensitivity 2, noise, refusals.

The counts are checked against a computation written out here (a loop over the records), at an epsilon so
large that the noise is zero but for a probability below 1e-200000 (discrete Laplace of scale 2e-6); the
noise itself against the exact sampler replayed from the same seed.
"""

from __future__ import annotations

import random
import re
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from ppsvm.config import load_entity_config
from ppsvm.constants import MAX_HISTOGRAM_EDGES
from ppsvm.core.dp_model import DpModel
from ppsvm.core.metrics import class_histogram
from ppsvm.core.noise import discrete_laplace
from ppsvm.entity import cell as cell_module
from ppsvm.entity.cell import EntityCore
from ppsvm.entity.guard import MIN_EPSILON, epsilon_micro
from ppsvm.errors import ConfigError, DataError, PrivacyError, ReleaseFailed

from .files import write
from .test_cell import small_model

FEATURES = 3
N_TRAIN = 40
EXACT = 1e6  # epsilon at which the discrete Laplace noise (scale 2/EXACT) is 0 but for P < 1e-200000
BUDGET = 1e9


def cell_text(X: np.ndarray, y: np.ndarray, n_test: int = 5) -> str:
    """A cell file of records r0, r1, ... (the last ``n_test`` held out); floats written exactly (repr)."""
    lines = ["id,label,split," + ",".join(f"f{k}" for k in range(X.shape[1]))]
    for k, (row, label) in enumerate(zip(X, y, strict=True)):
        split = "test" if k >= len(X) - n_test else "train"
        lines.append(",".join([f"r{k}", repr(float(label)), split, *map(repr, row.tolist())]))
    return "\n".join(lines) + "\n"


def random_records(seed: int, m: int = N_TRAIN + 5) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.normal(size=(m, FEATURES)), rng.choice([-1.0, 1.0], size=m)


def make_core(directory: Path, text: str, privacy: str = f"epsilon_total = {BUDGET}") -> EntityCore:
    """An entity over the cell ``text``, with the [privacy] table ``privacy`` (DP mode when it sets a budget)."""
    write(directory / "cell.csv", text)
    write(directory / "secret.hex", bytes(range(32)).hex() + "\n")
    config = (
        '[entity]\nid = "ent-1"\ndata = "cell.csv"\ncolumn_block = 0\nsecret_file = "secret.hex"\n'
        f"\n[privacy]\n{privacy}\n"
    )
    return EntityCore(load_entity_config(write(directory / "entity.toml", config)), new_release_log=True)


@pytest.fixture
def core(tmp_path: Path) -> EntityCore:
    return make_core(tmp_path, cell_text(*random_records(0)))


def dp_model(rho: np.ndarray, weights: np.ndarray, low: np.ndarray | None = None) -> DpModel:
    d = rho.shape[1]
    low = np.zeros(d) if low is None else low
    return DpModel(
        method="dp-hybrid",
        mechanism="laplace",
        epsilon=1.0,
        private=True,
        low=tuple(low.tolist()),
        high=tuple((low + 1.0).tolist()),
        kernel_width=1.0,
        C=1.0,
        rho=tuple(map(tuple, rho.tolist())),
        weights=tuple(weights.tolist()),
    )


def random_model(rng: np.random.Generator, d: int = FEATURES) -> DpModel:
    D = int(rng.integers(1, 6))
    return dp_model(rng.normal(scale=2.0, size=(D, d)), rng.normal(size=2 * D), rng.normal(size=d))


def random_edges(rng: np.random.Generator, decision: np.ndarray) -> np.ndarray:
    """1 to 30 edges, partly drawn around the decision values and partly on some of them exactly."""
    spread = float(np.abs(decision).max()) + 1.0
    drawn = rng.uniform(-spread, spread, size=int(rng.integers(1, 30)))
    on_values = rng.choice(decision, size=int(rng.integers(0, 4)))
    return np.unique(np.concatenate([drawn, on_values]))


def expected_counts(labels: np.ndarray, decision: np.ndarray, edges: np.ndarray) -> tuple[list[int], list[int]]:
    """The histogram by the definition: record d goes to bin k where edges[k-1] <= d < edges[k]."""
    negative, positive = [0] * (edges.size + 1), [0] * (edges.size + 1)
    for label, value in zip(labels.tolist(), decision.tolist(), strict=True):
        k = sum(1 for edge in edges.tolist() if edge <= value)
        (negative if label == -1 else positive)[k] += 1
    return negative, positive


def histogram(core: EntityCore, model: DpModel, edges: np.ndarray, epsilon: float = EXACT, **kw: object) -> dict:
    return dict(core.dp_score_histogram(model.to_json().encode(), np.asarray(edges, dtype=np.float64), epsilon, **kw))


# ---------------------------------------------------------------- the counts


def test_class_histogram_bins_by_the_edges_below() -> None:
    """A value on an edge goes to the bin above it; -inf to the first bin, +inf and NaN to the last."""
    labels = np.array([-1.0, 1.0, 1.0, -1.0, 1.0, -1.0, -1.0, 0.5])
    decision = np.array([-1.0, 0.0, 0.5, 1.0, -np.inf, np.inf, np.nan, 0.0])
    negative, positive = class_histogram(labels, decision, np.array([0.0, 1.0]))
    assert negative.tolist() == [1, 0, 3] and positive.tolist() == [1, 2, 0]  # label 0.5 is in neither class


def test_counts_are_the_histogram_of_the_models_decisions(core: EntityCore) -> None:
    rng = np.random.default_rng(1)
    cell = core.cell
    assert cell.y_train is not None
    for _ in range(5):
        model = random_model(rng)
        decision = model.decision(cell.X_train)
        edges = random_edges(rng, decision)
        released = histogram(core, model, edges)
        assert (released["negative_counts"], released["positive_counts"]) == expected_counts(
            cell.y_train, decision, edges
        )
        assert released["n_train"] == N_TRAIN and released["epsilon"] == EXACT
        assert sum(released["negative_counts"]) + sum(released["positive_counts"]) == N_TRAIN


def test_values_exactly_on_an_edge_count_in_the_bin_above(core: EntityCore) -> None:
    """Edges at every decision value: bin 0 is empty and bin k + 1 counts the records whose value is edges[k]."""
    model = random_model(np.random.default_rng(2))
    cell = core.cell
    assert cell.y_train is not None
    decision = model.decision(cell.X_train)
    edges = np.unique(decision)
    released = histogram(core, model, edges)
    for name, label in (("negative_counts", -1.0), ("positive_counts", 1.0)):
        on_edge = [int(np.count_nonzero((decision == edge) & (cell.y_train == label))) for edge in edges]
        assert released[name] == [0, *on_edge], name


def test_neighbouring_cells_differ_by_at_most_two_in_l1(tmp_path: Path) -> None:
    """Replace-one neighbours: for random models and edges, the exact count vectors differ by L1 <= 2.

    Each draw replaces another record with a new one (features and label), and the two histograms are
    the entities' own answers; the bound is reached whenever the record changes its (class, bin) cell.
    """
    rng = np.random.default_rng(3)
    X, y = random_records(4)
    reached = 0
    for draw in range(40):
        X2, y2 = X.copy(), y.copy()
        k = int(rng.integers(N_TRAIN))
        X2[k], y2[k] = rng.normal(scale=3.0, size=FEATURES), rng.choice([-1.0, 1.0])
        one = make_core(tmp_path / f"{draw}" / "one", cell_text(X, y))
        other = make_core(tmp_path / f"{draw}" / "other", cell_text(X2, y2))
        model = random_model(rng)
        edges = random_edges(rng, model.decision(X[:N_TRAIN]))
        a, b = histogram(one, model, edges), histogram(other, model, edges)
        distance = sum(
            abs(u - v) for name in ("negative_counts", "positive_counts") for u, v in zip(a[name], b[name], strict=True)
        )
        assert distance <= 2, (draw, a, b)
        reached += distance == 2
    assert reached > 0  # not vacuous: some replacements did move a record to another cell


def test_class_histogram_sensitivity_property() -> None:
    """The same bound over many more draws, on the function the entity counts with (no cell files)."""
    rng = np.random.default_rng(5)
    for _ in range(500):
        m = int(rng.integers(1, 60))
        X, y = rng.normal(size=(m, FEATURES)), rng.choice([-1.0, 1.0], size=m)
        X2, y2 = X.copy(), y.copy()
        k = int(rng.integers(m))
        X2[k], y2[k] = rng.normal(scale=3.0, size=FEATURES), rng.choice([-1.0, 1.0])
        model = random_model(rng)
        edges = random_edges(rng, model.decision(X))
        one = np.concatenate(class_histogram(y, model.decision(X), edges))
        other = np.concatenate(class_histogram(y2, model.decision(X2), edges))
        assert int(np.abs(one - other).sum()) <= 2


def test_noise_is_the_exact_sampler_at_scale_two_over_epsilon(core: EntityCore) -> None:
    """With a seeded source, released - exact is the sampler's draws at scale 2/epsilon, negative class first."""
    model = random_model(np.random.default_rng(6))
    cell = core.cell
    assert cell.y_train is not None
    decision = model.decision(cell.X_train)
    edges = np.quantile(decision, [0.25, 0.5, 0.75])
    epsilon = 0.5
    released = histogram(core, model, edges, epsilon, source=random.Random(11))
    replay = random.Random(11)
    noise = [discrete_laplace(Fraction(2) / Fraction(epsilon), replay) for _ in range(2 * (edges.size + 1))]
    negative, positive = expected_counts(cell.y_train, decision, edges)
    assert released["negative_counts"] == [c + z for c, z in zip(negative, noise[:4], strict=True)]
    assert released["positive_counts"] == [c + z for c, z in zip(positive, noise[4:], strict=True)]
    assert any(noise) and released["epsilon"] == epsilon
    assert "discrete Laplace, scale 2/0.5" in released["noise"]


def test_the_release_is_charged_with_its_epsilon(core: EntityCore) -> None:
    before = core.remaining_budget()
    assert before is not None
    histogram(core, random_model(np.random.default_rng(7)), np.array([-1.0, 0.0, 1.0]), 0.25, peer="coordinator")
    record = list(core.guard.log.releases())[-1]
    assert record["rpc"] == "DpScoreHistogram" and record["peer"] == "coordinator"
    assert record["epsilon_micro"] == epsilon_micro(0.25) and record["rows"] == N_TRAIN and record["bins"] == 4
    assert core.remaining_budget() == pytest.approx(before - 0.25)


def test_a_failure_after_the_charge_stays_charged_and_names_no_data(
    core: EntityCore, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(labels: np.ndarray, decision: np.ndarray, edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        raise FloatingPointError(f"value {decision[0]!r} of record r0")

    monkeypatch.setattr(cell_module, "class_histogram", broken)
    with pytest.raises(ReleaseFailed) as failed:
        histogram(core, random_model(np.random.default_rng(8)), np.array([0.0]), 0.5)
    assert str(failed.value) == (
        "entity ent-1: DpScoreHistogram failed after reading its records; the attempt is charged as a release "
        "and its cause is in the entity's own log only"
    )
    assert [r["rpc"] for r in core.guard.log.releases()] == ["DpScoreHistogram"]


# ---------------------------------------------------------------- refusals, before any charge


def random_kernel_model() -> bytes:
    return small_model().to_json().encode()


GOOD = dp_model(np.ones((2, FEATURES)), np.array([0.5, -0.5, 1.0, 0.25])).to_json().encode()
REFUSED: list[tuple[str, bytes, list[float], float, type[Exception], str]] = [
    ("no edges", GOOD, [], 1.0, DataError, "edges must hold between 1 and 1024 numbers, got 0"),
    (
        "too many edges",
        GOOD,
        list(range(MAX_HISTOGRAM_EDGES + 1)),
        1.0,
        DataError,
        "edges must hold between 1 and 1024 numbers, got 1025",
    ),
    ("NaN edge", GOOD, [0.0, float("nan"), 2.0], 1.0, DataError, "edges must be finite"),
    ("infinite edge", GOOD, [float("-inf"), 0.0], 1.0, DataError, "edges must be finite"),
    ("repeated edge", GOOD, [0.0, 1.0, 1.0], 1.0, DataError, "strictly increasing"),
    ("signed zeros", GOOD, [-0.0, 0.0], 1.0, DataError, "strictly increasing"),
    ("decreasing edges", GOOD, [1.0, 0.0], 1.0, DataError, "strictly increasing"),
    ("random-kernel model", random_kernel_model(), [0.0], 1.0, DataError, "takes a DP model file"),
    (
        "wrong feature count",
        dp_model(np.ones((1, FEATURES + 1)), np.ones(2)).to_json().encode(),
        [0.0],
        1.0,
        DataError,
        f"the model expects {FEATURES + 1} features; entity ent-1 holds {FEATURES}",
    ),
    ("not a model", b'{"format": "ppsvm-dp-model"}', [0.0], 1.0, ConfigError, "received model"),
    ("epsilon below the minimum", GOOD, [0.0], MIN_EPSILON / 2, DataError, "epsilon must be a finite number >="),
    ("NaN epsilon", GOOD, [0.0], float("nan"), DataError, "epsilon must be a finite number >="),
    ("epsilon over the budget", GOOD, [0.0], 2.0, PrivacyError, "privacy budget exhausted"),
]


@pytest.mark.parametrize(
    ("model", "edges", "epsilon", "kind", "message"),
    [case[1:] for case in REFUSED],
    ids=[case[0] for case in REFUSED],
)
def test_refused_requests_charge_nothing(
    tmp_path: Path, model: bytes, edges: list[float], epsilon: float, kind: type[Exception], message: str
) -> None:
    core = make_core(tmp_path, cell_text(*random_records(0)), "epsilon_total = 1.5")
    core.dp_score_histogram(GOOD, np.array([0.0]), 1.0)  # leaves 0.5 of the budget
    log = core.guard.log.path.read_bytes()
    with pytest.raises(kind, match=re.escape(message)):
        core.dp_score_histogram(model, np.asarray(edges, dtype=np.float64), epsilon)
    assert core.guard.log.path.read_bytes() == log and core.remaining_budget() == pytest.approx(0.5)


def test_a_random_kernel_entity_refuses_it(tmp_path: Path) -> None:
    core = make_core(tmp_path, cell_text(*random_records(0)), "")
    with pytest.raises(PrivacyError, match="serves the random-kernel protocol and refuses DpScoreHistogram"):
        core.dp_score_histogram(GOOD, np.array([0.0]), 1.0)
    assert core.guard.log.count == 0


def test_a_cell_without_labels_is_refused(tmp_path: Path) -> None:
    X, _ = random_records(0)
    text = "id," + ",".join(f"f{k}" for k in range(FEATURES)) + "\n"
    text += "".join(f"r{k}," + ",".join(map(repr, row.tolist())) + "\n" for k, row in enumerate(X))
    core = make_core(tmp_path, text)
    with pytest.raises(DataError, match="holds no labels"):
        core.dp_score_histogram(GOOD, np.array([0.0]), 1.0)
    assert core.guard.log.count == 0
