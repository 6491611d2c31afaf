"""An entity's cell: strict CSV parsing, and EntityCore's answers computed exactly and only within the rules."""

from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path

import numpy as np
import pytest

from ppsvm.config import load_entity_config
from ppsvm.core.model import ColumnScaling, Model, ModelEntity
from ppsvm.core.randomness import derive_B
from ppsvm.data.sources import load_cell
from ppsvm.entity.cell import EntityCore, SignedRange
from ppsvm.errors import ConfigError, DataError, PrivacyError

from .files import assert_load_fails, write

SECRET = bytes(range(32))

CELL = """id,label,split,f1,f2,f3
r1,1,train,1.0,10,-1
r2,-1,test,2.5,20,0
r3,-1,train,3.0,5,2
r4,1,train,-4.0,30,1

r5,1,test,100,-50,7
"""


# ---------------------------------------------------------------- load_cell


def test_load_cell_splits_train_and_test(tmp_path: Path) -> None:
    cell = load_cell(write(tmp_path / "c.csv", CELL))
    assert cell.train_ids.tolist() == ["r1", "r3", "r4"]
    assert cell.test_ids.tolist() == ["r2", "r5"]
    np.testing.assert_array_equal(cell.X_train, [[1, 10, -1], [3, 5, 2], [-4, 30, 1]])
    np.testing.assert_array_equal(cell.X_test, [[2.5, 20, 0], [100, -50, 7]])
    np.testing.assert_array_equal(cell.y_train, [1, -1, 1])
    np.testing.assert_array_equal(cell.y_test, [-1, 1])
    assert cell.feature_names == ("f1", "f2", "f3")
    assert cell.n_features == 3
    assert cell.X_train.dtype == np.float64


def test_load_cell_without_label_or_split(tmp_path: Path) -> None:
    cell = load_cell(write(tmp_path / "c.csv", " id , b ,a\nx, 1e-3 , -2\ny,4,5\n"))
    assert cell.train_ids.tolist() == ["x", "y"]
    assert cell.test_ids.tolist() == []
    assert cell.X_test.shape == (0, 2)
    assert cell.y_train is None and cell.y_test is None
    assert cell.feature_names == ("b", "a")
    np.testing.assert_array_equal(cell.X_train, [[1e-3, -2], [4, 5]])


def test_load_cell_reserved_columns_in_any_position(tmp_path: Path) -> None:
    cell = load_cell(write(tmp_path / "c.csv", "id,f1,split,f2,label\na,1,test,2,0.5\nb,3,train,4,-7.25\n"))
    assert cell.feature_names == ("f1", "f2")
    np.testing.assert_array_equal(cell.X_train, [[3, 4]])
    np.testing.assert_array_equal(cell.X_test, [[1, 2]])
    np.testing.assert_array_equal(cell.y_train, [-7.25])
    np.testing.assert_array_equal(cell.y_test, [0.5])


@pytest.mark.parametrize(
    ("text", "fragments"),
    [
        ("id,f1,f2\na,1,x\n", ["line 2", "column 'f2'", "'x' is not a number"]),
        ("id,f1,f2\na,1,2\nb,1,\n", ["line 3", "column 'f2'", "'' is not a number"]),
        ("id,label,f1\na,yes,1\n", ["line 2", "column 'label'", "'yes' is not a number"]),
        ("id,f1\na,1\nb,inf\n", ["line 3", "column 'f1'", "'inf' is not a finite number"]),
        ("id,f1\na,nan\n", ["line 2", "column 'f1'", "'nan' is not a finite number"]),
        ("id,label,f1\na,-Infinity,1\n", ["line 2", "column 'label'", "not a finite number"]),
        ("id,f1,f2\na,1,2\nb,1\n", ["line 3", "2 fields, the header has 3"]),
        ("id,f1,f2\na,1,2,3\n", ["line 2", "4 fields, the header has 3"]),
        ("id,f1\na,1\nb,2\n\na,3\n", ["line 5", "duplicate record id 'a'", "first on line 2"]),
        ("id,f1\n ,1\n", ["line 2", "column 'id'", "empty record id"]),
        ("id,split,f1\na,train,1\nb,Test,2\n", ["line 3", "column 'split'", "expected 'train' or 'test', got 'Test'"]),
        ("", ["empty file"]),
        ("\n", ["empty file"]),
        ("id,f1\n", ["no records"]),
        ("id,split,f1\na,test,1\nb,test,2\n", ["every record is marked 'test'"]),
        ("id,label,split\na,1,train\n", ["line 1", "no feature columns"]),
        ("key,f1\na,1\n", ["line 1", "the first column must be 'id', got 'key'"]),
    ],
)
def test_load_cell_errors_name_file_line_column(tmp_path: Path, text: str, fragments: list[str]) -> None:
    assert_load_fails(load_cell, DataError, write(tmp_path / "bad.csv", text), fragments)


def test_load_cell_names_a_line_over_the_limit(tmp_path: Path) -> None:
    """A cell whose fourth line is 3 MB (a 2 GB line, scaled down; the csv module would hold it whole, several times
    over) against a 64 KiB limit: a DataError naming the file and the line, not a MemoryError."""
    path = write(tmp_path / "long.csv", "id,label,f1\na,1,2\nb,-1,3\nc,1," + "4," * 1_500_000 + "5\n")
    with pytest.raises(DataError, match=rf"{path}, line 4 is longer than 65,536 characters"):
        load_cell(path, max_line_chars=1 << 16)
    assert len(load_cell(write(tmp_path / "fine.csv", CELL), max_line_chars=64).train_ids) == 3


def test_load_cell_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "absent.csv"
    with pytest.raises(DataError, match="cannot read data file") as caught:
        load_cell(path)
    assert str(path) in str(caught.value)


def test_rows_for_ids_in_request_order(tmp_path: Path) -> None:
    cell = load_cell(write(tmp_path / "c.csv", CELL))
    cell.check_ids(["r5", "r1", "r2"])
    rows = cell.rows_for_ids(["r5", "r1", "r2"])
    np.testing.assert_array_equal(rows, [[100, -50, 7], [1, 10, -1], [2.5, 20, 0]])


def test_check_ids_refuses_unknown_repeated_and_empty(tmp_path: Path) -> None:
    cell = load_cell(write(tmp_path / "c.csv", CELL))
    with pytest.raises(DataError, match=r"unknown record id\(s\) 'zz', 'r9' \(2 of 3\)"):
        cell.check_ids(["zz", "r1", "r9"])
    with pytest.raises(DataError, match=r"\.\.\. \(7 of 7\)"):
        cell.check_ids([f"u{k}" for k in range(7)])
    # A repeated id would let a request grow without bound (the allocation of a huge block) for no new row.
    with pytest.raises(DataError, match="ids: record id 'r1' appears more than once"):
        cell.check_ids(["r2", "r1", "r5", "r1"])
    with pytest.raises(DataError, match="ids: the list of record ids is empty"):
        cell.check_ids([])


# ---------------------------------------------------------------- EntityCore


def make_core(
    tmp_path: Path,
    cell_text: str = CELL,
    override: bool = False,
    column_block: int = 0,
    consent: bool = True,
    entity_settings: str = "",
) -> EntityCore:
    """An entity with a column-block peer (so its blocks on their own are exposed to it, privacy rule 8); these
    tests check the kernels' math, so it consents to single-block releases unless ``consent`` is False."""
    write(tmp_path / "cell.csv", cell_text)
    write(tmp_path / "secret.hex", SECRET.hex() + "\n")
    text = (
        f'[entity]\nid = "ent-7"\ndata = "cell.csv"\ncolumn_block = {column_block}\nsecret_file = "secret.hex"\n'
        f'column_block_members = ["ent-7", "peer-1"]\n{entity_settings}'
    )
    text += "\n[privacy]\n"
    if override:
        text += "non_private_allow_mbar_at_least_features = true\n"
    if consent:
        text += "consent_single_block_release = true\n"
    return EntityCore(load_entity_config(write(tmp_path / "entity.toml", text)), new_release_log=True)


def expected_gaussian(X: np.ndarray, low: np.ndarray, high: np.ndarray, B: np.ndarray, mu: float) -> np.ndarray:
    out = np.empty((len(X), len(B)))
    for r, x in enumerate(X):
        scaled = [(x[k] - low[k]) / (high[k] - low[k]) for k in range(len(x))]
        for c, b in enumerate(B):
            out[r, c] = np.exp(-mu * sum((scaled[k] - b[k]) ** 2 for k in range(len(x))))
    return out


def signed(entity_id: str, low: np.ndarray, high: np.ndarray, secret: bytes = SECRET) -> SignedRange:
    """A range tagged as a column-block member would tag it: HMAC-SHA256 written out here, not via range_tag."""
    message = (
        b"ppsvm/v1/feature-range/"
        + entity_id.encode()
        + b"\0"
        + np.asarray(low, "<f8").tobytes()
        + np.asarray(high, "<f8").tobytes()
    )
    return SignedRange(entity_id, list(low), list(high), hmac.new(secret, message, hashlib.sha256).hexdigest())


# The cell's own training range, and a peer's that widens every feature.
LOW, HIGH = np.array([-4.0, 5.0, -1.0]), np.array([3.0, 30.0, 2.0])
PEER_LOW, PEER_HIGH = np.array([-10.0, -60.0, -2.0]), np.array([110.0, 40.0, 9.0])
OWN = signed("ent-7", LOW, HIGH)
PEER = signed("peer-1", PEER_LOW, PEER_HIGH)
NARROW_PEER = signed("peer-1", LOW + 1, HIGH - 1)  # leaves the block scaling at the cell's own range
RANGES = [OWN, NARROW_PEER]


def test_feature_range_tag_is_the_hmac_of_id_and_range(tmp_path: Path) -> None:
    published = make_core(tmp_path).feature_range()
    assert published["tag"].tolist() == [OWN.tag]


def test_block_scaling_is_the_members_min_and_max(tmp_path: Path) -> None:
    low, high = make_core(tmp_path).block_scaling([PEER, OWN])
    np.testing.assert_array_equal(low, PEER_LOW)
    np.testing.assert_array_equal(high, PEER_HIGH)


@pytest.mark.parametrize(
    ("ranges", "fragment"),
    [
        ([OWN], "exactly the column block's entities ['ent-7', 'peer-1']"),
        ([OWN, PEER, PEER], "once each"),
        ([OWN, PEER, signed("stranger", LOW, HIGH)], "got ['ent-7', 'peer-1', 'stranger']"),
        # The coordinator moves one bound of a genuine range: the tag no longer verifies.
        ([OWN, SignedRange("peer-1", list(PEER_LOW), [110.0, 400.0, 9.0], PEER.tag)], "does not carry a valid tag"),
        ([OWN, signed("peer-1", PEER_LOW, PEER_HIGH, secret=bytes(32))], "does not carry a valid tag"),
        # Signed with the secret, but not the range this entity holds.
        ([signed("ent-7", LOW - 1, HIGH), PEER], "not the one it holds"),
    ],
)
@pytest.mark.parametrize("after_a_valid_request", [False, True], ids=["first", "after-valid"])
def test_block_scaling_refuses_ranges_the_requester_could_choose(
    tmp_path: Path, ranges: list[SignedRange], fragment: str, after_a_valid_request: bool
) -> None:
    core = make_core(tmp_path)
    if after_a_valid_request:  # the entity keeps the last scaling it verified: that must not wave others through
        core.kernel_block("gaussian", 2, 1.0, [OWN, PEER], record_set="train")
    with pytest.raises(PrivacyError) as caught:
        core.kernel_block("gaussian", 2, 1.0, ranges, record_set="train")
    assert fragment in str(caught.value) and "ent-7" in str(caught.value)


def test_a_verified_range_with_a_bound_of_another_sign_of_zero_is_checked_again(tmp_path: Path) -> None:
    """-0.0 == 0.0 as numbers, but the tag covers the bytes: the kept verification is looked up by bytes."""
    genuine = signed("peer-1", np.array([0.0, -60.0, -2.0]), PEER_HIGH)
    core = make_core(tmp_path)
    core.block_scaling([OWN, genuine])
    flipped = SignedRange("peer-1", [-0.0, -60.0, -2.0], list(PEER_HIGH), genuine.tag)
    with pytest.raises(PrivacyError, match="does not carry a valid tag"):
        core.block_scaling([OWN, flipped])
    np.testing.assert_array_equal(core.block_scaling([OWN, genuine])[0], [-4.0, -60.0, -2.0])


def test_kernel_block_refuses_mbar_at_least_features(tmp_path: Path) -> None:
    core = make_core(tmp_path)
    for mbar in (3, 4, 50):
        with pytest.raises(PrivacyError) as caught:
            core.kernel_block("gaussian", mbar, 0.5, RANGES, record_set="train")
        assert "privacy rule 3" in str(caught.value)
        assert "ent-7" in str(caught.value)
    with pytest.raises(PrivacyError, match="mbar must be >= 1"):
        core.kernel_block("gaussian", 0, 0.5, RANGES, record_set="train")


def test_kernel_block_override_allows_large_mbar(tmp_path: Path) -> None:
    core = make_core(tmp_path, override=True)
    mbar = 5
    K = core.kernel_block("gaussian", mbar, 0.7, RANGES, record_set="train")
    expected = expected_gaussian(
        np.array([[1, 10, -1], [3, 5, 2], [-4, 30, 1]], float), LOW, HIGH, derive_B(SECRET, mbar, 3), 0.7
    )
    np.testing.assert_allclose(K, expected, rtol=1e-12, atol=0)


def test_kernel_block_gaussian_exact(tmp_path: Path) -> None:
    core = make_core(tmp_path)
    B = derive_B(SECRET, 2, 3)
    # The block's scaling is wider than the cell's own range (the peer's range widens it).
    low, high = PEER_LOW, PEER_HIGH
    train = core.kernel_block("gaussian", 2, 1.3, [OWN, PEER], record_set="train")
    assert train.shape == (3, 2)
    np.testing.assert_allclose(train, expected_gaussian(core.cell.X_train, low, high, B, 1.3), rtol=1e-12, atol=0)
    test = core.kernel_block("gaussian", 2, 1.3, [OWN, PEER], record_set="test")
    np.testing.assert_allclose(
        test, expected_gaussian(np.array([[2.5, 20, 0], [100, -50, 7]]), low, high, B, 1.3), rtol=1e-12, atol=0
    )
    by_id = core.kernel_block("gaussian", 2, 1.3, [OWN, PEER], ids=["r4", "r2"])
    np.testing.assert_allclose(
        by_id, expected_gaussian(np.array([[-4, 30, 1], [2.5, 20, 0]], float), low, high, B, 1.3), rtol=1e-12, atol=0
    )


def test_kernel_block_linear_exact(tmp_path: Path) -> None:
    core = make_core(tmp_path)
    B = derive_B(SECRET, 2, 3)
    K = core.kernel_block("linear", 2, 0.0, RANGES, record_set="test")
    scaled = (np.array([[2.5, 20, 0], [100, -50, 7]]) - LOW) / (HIGH - LOW)
    expected = [[sum(s[k] * b[k] for k in range(3)) for b in B] for s in scaled]
    np.testing.assert_allclose(K, expected, rtol=1e-12)


def test_kernel_block_depends_on_secret(tmp_path: Path) -> None:
    core = make_core(tmp_path)
    K = core.kernel_block("gaussian", 2, 1.0, RANGES, record_set="train")
    wrong = expected_gaussian(core.cell.X_train, LOW, HIGH, derive_B(bytes(32), 2, 3), 1.0)
    assert not np.allclose(K, wrong)


def test_kernel_block_refuses_ranges_of_the_wrong_width(tmp_path: Path) -> None:
    core = make_core(tmp_path)
    with pytest.raises(DataError, match="holds 3 features; the range of peer-1 has 2 lows and 2 highs"):
        core.kernel_block("gaussian", 2, 1.0, [OWN, signed("peer-1", LOW[:2], HIGH[:2])], record_set="train")


def test_kernel_block_needs_record_set_or_ids(tmp_path: Path) -> None:
    core = make_core(tmp_path)
    with pytest.raises(DataError, match="must name a record set or record ids"):
        core.kernel_block("gaussian", 2, 1.0, RANGES)
    with pytest.raises(DataError, match="unknown record id"):
        core.kernel_block("gaussian", 2, 1.0, RANGES, ids=["r1", "nope"])


def test_feature_range_uses_train_rows_only(tmp_path: Path) -> None:
    core = make_core(tmp_path)
    ranges = core.feature_range()
    np.testing.assert_array_equal(ranges["low"], [-4.0, 5.0, -1.0])
    np.testing.assert_array_equal(ranges["high"], [3.0, 30.0, 2.0])  # r5 (test) has 100 and 7


def test_records_with_labels(tmp_path: Path) -> None:
    records = make_core(tmp_path).records()
    assert set(records) == {"train_ids", "test_ids", "train_labels", "test_labels"}
    assert records["train_ids"].tolist() == ["r1", "r3", "r4"]
    assert records["test_ids"].tolist() == ["r2", "r5"]
    assert records["train_labels"].tolist() == [1.0, -1.0, 1.0]
    assert records["test_labels"].tolist() == [-1.0, 1.0]


def test_records_without_labels(tmp_path: Path) -> None:
    records = make_core(tmp_path, "id,split,f1,f2\na,train,1,2\nb,test,3,4\n", column_block=1).records()
    assert set(records) == {"train_ids", "test_ids"}
    assert records["train_ids"].tolist() == ["a"]
    assert records["test_ids"].tolist() == ["b"]


def test_core_reports_bad_secret(tmp_path: Path) -> None:
    write(tmp_path / "cell.csv", CELL)
    write(tmp_path / "secret.hex", "abcd")
    config = load_entity_config(
        write(
            tmp_path / "e.toml", '[entity]\nid = "e"\ndata = "cell.csv"\ncolumn_block = 0\nsecret_file = "secret.hex"\n'
        )
    )
    with pytest.raises(ConfigError, match="has 2 bytes"):
        EntityCore(config, new_release_log=True)


def small_model() -> Model:
    return Model(
        task="classify",
        kernel="gaussian",
        mu=0.5,
        nu=2.0,
        mbar=2,
        u=(0.25, -1.5),
        gamma=0.125,
        private=True,
        scaling=(ColumnScaling(0, (-4.0, 5.0, -1.0), (3.0, 30.0, 2.0)),),
        entities=(ModelEntity("ent-7", 0, 0),),
        training={"n_train": 3},
    )


def test_accept_model_stores_valid_model(tmp_path: Path) -> None:
    core = make_core(tmp_path)
    out = tmp_path / "models"
    text = small_model().to_json()
    path = core.accept_model(text.encode("utf-8"), out)
    assert path == out / "ent-7.model.json"
    assert path.read_text(encoding="utf-8") == text
    assert Model.load(path) == small_model()
    assert sorted(p.name for p in out.iterdir()) == ["ent-7.model.json"]


@pytest.mark.parametrize(
    "payload",
    [
        b"not json at all",
        b"\xff\xfe\x00garbage",
        json.dumps({"format": "something-else"}).encode(),
        small_model().to_json().replace('"mbar": 2', '"mbar": 3').encode(),
        b'{"format": "ppsvm-model", "version": 1}',
        b"42",
        b"null",
    ],
)
def test_accept_model_rejects_garbage_without_writing(tmp_path: Path, payload: bytes) -> None:
    core = make_core(tmp_path)
    out = tmp_path / "models"
    out.mkdir()
    with pytest.raises(ConfigError):
        core.accept_model(payload, out)
    assert list(out.iterdir()) == []


def test_local_baseline_tunes_by_leave_one_out_and_refuses_it_on_large_cells(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    lines = ["id,label,split,f1,f2,f3"]
    for i in range(230):
        x = rng.random(3)
        label = 1 if x[0] + 0.2 * rng.standard_normal() > 0.5 else -1
        lines.append(f"r{i},{label},{'test' if i % 10 == 0 else 'train'},{x[0]:.4f},{x[1]:.4f},{x[2]:.4f}")
    small = make_core(tmp_path / "small", "\n".join(lines[:41]) + "\n")
    figures = small.local_baseline("classify", "gaussian", None, None, 0, search="uniform-design", leave_one_out=True)
    assert figures["n_train"] == 36 and 0.0 <= figures["error_rate"] <= 1.0
    record = list(small.guard.log.releases())[-1]
    assert record["search"] == "uniform-design" and record["leave_one_out"] is True  # the log says how it was tuned
    large = make_core(tmp_path / "large", "\n".join(lines) + "\n")
    with pytest.raises(DataError, match="leave-one-out tuning is for cells of at most 200 training records"):
        large.local_baseline("classify", "linear", None, None, 0, leave_one_out=True)
    with pytest.raises(DataError, match="search must be one of grid, uniform-design, got 'random'"):
        small.local_baseline("classify", "linear", None, None, 0, search="random")  # type: ignore[arg-type]
    assert large.guard.log.count == 0  # refused before anything was released


def test_local_baseline_is_the_federated_lp_on_a_basis_of_the_federated_size(tmp_path: Path) -> None:
    """Issue 29: the entity-alone model is K(A_ij, Abar') with Abar min(n_j - 1, ceil(10% of the training rows))
    of its own training rows, the rule of the federated mbar, not the whole cell; checked against the papers' LP
    written out with its slacks and solved by scipy's linprog, and the figures computed by hand."""
    from scipy.optimize import linprog
    from scipy.spatial.distance import cdist

    rng = np.random.default_rng(3)
    n, m, nu, mu = 6, 200, 10.0, 0.5
    X = rng.random((m, n))
    y = np.where(X[:, 0] + X[:, 1] ** 2 + 0.3 * rng.standard_normal(m) > 0.9, 1, -1)
    test = np.arange(m) % 10 == 0
    rows = [f"r{i},{y[i]},{'test' if test[i] else 'train'}," + ",".join(f"{v:.6f}" for v in X[i]) for i in range(m)]
    core = make_core(tmp_path, "id,label,split," + ",".join(f"f{j}" for j in range(n)) + "\n" + "\n".join(rows))
    figures = core.local_baseline("classify", "gaussian", nu, mu, seed=4)

    A, d = core.cell.X_train, core.cell.y_train
    low, high = A.min(axis=0), A.max(axis=0)
    k = min(n - 1, int(np.ceil(0.1 * len(A))))  # 5 points, where the whole cell has 180
    basis = (A[np.sort(np.random.default_rng(4).choice(len(A), size=k, replace=False))] - low) / (high - low)
    K = np.exp(-mu * cdist((A - low) / (high - low), basis, "sqeuclidean"))
    # min nu e'xi + e's over (u, gamma, xi, s): D(K u - e gamma) + xi >= e, -s <= u <= s, xi >= 0.
    p = len(A)
    cost = np.concatenate([np.zeros(k + 1), nu * np.ones(p), np.ones(k)])
    margin = np.hstack([-d[:, None] * K, d[:, None], -np.eye(p), np.zeros((p, k))])
    bound = np.hstack([np.eye(k), np.zeros((k, 1 + p)), -np.eye(k)])
    solved = linprog(
        cost,
        A_ub=np.vstack([margin, bound, np.hstack([-np.eye(k), np.zeros((k, 1 + p)), -np.eye(k)])]),
        b_ub=np.concatenate([-np.ones(p), np.zeros(2 * k)]),
        bounds=[(None, None)] * (k + 1) + [(0, None)] * (p + k),
    )
    u, gamma = solved.x[:k], solved.x[k]
    decision = np.exp(-mu * cdist((core.cell.X_test - low) / (high - low), basis, "sqeuclidean")) @ u - gamma
    labels = core.cell.y_test
    errors = np.mean(np.where(decision >= 0, 1, -1) != labels)
    pairs = decision[labels > 0][:, None] - decision[labels < 0][None, :]
    area = np.mean((pairs > 0) + 0.5 * (pairs == 0))
    assert figures == {"n_train": 180, "n_test": 20, "error_rate": round(errors, 3), "auc": round(area, 3)}


# ---------------------------------------------------------------- privacy rule 8: combined, or consented


def test_a_block_on_its_own_is_refused_above_the_measured_risk_without_consent(tmp_path: Path) -> None:
    """A column-block peer knows B_j: the entity measures what it would recover and refuses, naming the way out."""
    rng = np.random.default_rng(3)
    X = rng.integers(0, 4, size=(120, 6)).astype(float)
    text = "id,label,f1,f2,f3,f4,f5,f6\n" + "".join(
        f"r{k},{1 if k % 2 else -1}," + ",".join(f"{v:g}" for v in row) + "\n" for k, row in enumerate(X)
    )
    core = make_core(tmp_path, text, consent=False)
    low, high = X.min(axis=0), X.max(axis=0)
    ranges = [signed("ent-7", low, high), signed("peer-1", low, high)]
    with pytest.raises(PrivacyError) as refused:
        core.kernel_block("gaussian", 5, 1 / 6, ranges, record_set="train")
    text = str(refused.value)
    assert "single_block_max_gain" in text and "consent_single_block_release" in text
    assert "secure aggregation" in text and "DP mode" in text
    # Decided from one measurement made before any request: every view refused alike, with no figure of the
    # records in the text (the entity's own log has them) and nothing charged.
    assert core.single_block_exposure.gain > core.config.single_block_max_gain
    with pytest.raises(PrivacyError) as again:
        core.kernel_block("linear", 1, 0.0, ranges, record_set="train")
    assert str(again.value) == text and "%" not in text and "gain 0" not in text
    assert core.guard.releases_by_rpc.get("KernelBlock", 0) == 0


def test_an_entity_alone_in_its_column_block_releases_its_block_without_a_risk_check(tmp_path: Path) -> None:
    """Nobody else knows its B_j: the papers' case, against the coordinator alone."""
    write(tmp_path / "cell.csv", CELL)
    write(tmp_path / "secret.hex", SECRET.hex() + "\n")
    config = '[entity]\nid = "solo"\ndata = "cell.csv"\ncolumn_block = 0\nsecret_file = "secret.hex"\n'
    core = EntityCore(load_entity_config(write(tmp_path / "entity.toml", config)), new_release_log=True)
    low, high = core.own_range
    block = core.kernel_block("linear", 2, 0.0, [signed("solo", low, high)], record_set="train")
    assert block.dtype == np.float64 and block.shape == (3, 2)


def masked_pair(tmp_path: Path) -> tuple[EntityCore, EntityCore]:
    """Two entities of one row block (column blocks 0 and 1, each with a peer) holding one pair secret."""
    write(tmp_path / "pair.secret", bytes(range(100, 132)).hex() + "\n")
    left = make_core(tmp_path / "a", consent=False, entity_settings='pair_secrets = { "ent-8" = "../pair.secret" }\n')
    right_cell = (
        "id,label,split,g1,g2,g3,g4\nr1,1,train,0,1,2,3\nr2,-1,test,1,1,1,1\nr3,-1,train,5,4,3,2\nr4,1,train,2,2,9,0\n"
    )
    write(tmp_path / "b" / "cell.csv", right_cell)
    write(tmp_path / "b" / "secret.hex", bytes(range(1, 33)).hex() + "\n")
    config = (
        '[entity]\nid = "ent-8"\ndata = "cell.csv"\ncolumn_block = 1\nsecret_file = "secret.hex"\n'
        'column_block_members = ["ent-8", "peer-2"]\npair_secrets = { "ent-7" = "../pair.secret" }\n'
    )
    right = EntityCore(load_entity_config(write(tmp_path / "b" / "entity.toml", config)), new_release_log=True)
    return left, right


@pytest.mark.parametrize("kernel", ["linear", "gaussian"])
def test_masked_shares_of_a_row_block_sum_to_its_kernel(tmp_path: Path, kernel: str) -> None:
    from ppsvm.core.aggregation import decode_sum

    left, right = masked_pair(tmp_path)
    right_low, right_high = right.own_range
    right_ranges = [
        SignedRange(r.entity_id, r.low, r.high, r.tag)
        for r in (
            signed("ent-8", right_low, right_high, bytes(range(1, 33))),
            signed("peer-2", right_low, right_high, bytes(range(1, 33))),
        )
    ]
    nonce = bytes(range(32))
    mu = 1 / 7 if kernel == "gaussian" else 0.0
    shares = [
        left.kernel_block(kernel, 2, mu, RANGES, ids=["r4", "r1"], nonce=nonce),  # type: ignore[arg-type]
        right.kernel_block(kernel, 2, mu, right_ranges, ids=["r4", "r1"], nonce=nonce),  # type: ignore[arg-type]
    ]
    assert all(share.dtype == np.uint64 for share in shares)
    combined = decode_sum(shares[0] + shares[1])
    scaled = np.hstack(
        [
            (left.cell.rows_for_ids(["r4", "r1"]) - LOW) / (HIGH - LOW),
            (right.cell.rows_for_ids(["r4", "r1"]) - right_low) / (right_high - right_low),
        ]
    )
    B = np.hstack([derive_B(SECRET, 2, 3), derive_B(bytes(range(1, 33)), 2, 4)])
    if kernel == "gaussian":
        expected = np.log(expected_gaussian(scaled, np.zeros(7), np.ones(7), B, mu))
    else:
        expected = scaled @ B.T
    np.testing.assert_allclose(combined, expected, rtol=0, atol=1e-11)
    # Masked, the entity's block is not released on its own: no risk measured, nothing refused without consent.
    assert "single_block_exposure" not in vars(left)
    with pytest.raises(PrivacyError, match="answered nonce"):
        left.kernel_block(kernel, 2, mu, RANGES, ids=["r4", "r1"], nonce=nonce)  # type: ignore[arg-type]


def test_the_pin_covers_the_largest_mbar_released(tmp_path: Path) -> None:
    """Issue 25: training honestly at mbar = 1 and later asking for 2 adds a point for every record."""
    core = make_core(tmp_path)
    core.kernel_block("linear", 1, 0.0, RANGES, record_set="train")
    core.kernel_block("linear", 1, 0.0, RANGES, record_set="test")
    with pytest.raises(PrivacyError, match="at most mbar = 1"):
        core.kernel_block("linear", 2, 0.0, RANGES, record_set="train")


@pytest.mark.parametrize("nonce", [b"short", bytes(65)])
def test_a_nonce_of_the_wrong_size_is_refused_before_any_record_is_read(tmp_path: Path, nonce: bytes) -> None:
    core = make_core(tmp_path)
    with pytest.raises(DataError, match="nonce must have 16 to 64 bytes"):
        core.kernel_block("linear", 1, 0.0, RANGES, record_set="train", nonce=nonce)
    assert core.guard.releases_by_rpc["KernelBlock"] == 0


# ---------------------------------------------------------------- declared bounds (issue 26)

BOUNDED_SCHEMA = """
[[schema.features]]
name = "f1"
low = -5.0
high = 5.0

[[schema.features]]
name = "f2"
low = 0.0
high = 40.0

[[schema.features]]
name = "f3"
low = -2.0
high = 3.0
"""


def test_declared_bounds_are_the_scaling_and_clip_what_lies_outside(tmp_path: Path) -> None:
    """No extreme of the records leaves, new records never move the scaling: r5 (100, -50, 7) is clipped."""
    core = make_core(tmp_path, entity_settings=BOUNDED_SCHEMA)
    low, high = np.array([-5.0, 0.0, -2.0]), np.array([5.0, 40.0, 3.0])
    published = core.feature_range()
    np.testing.assert_array_equal(published["low"], low)
    np.testing.assert_array_equal(published["high"], high)
    np.testing.assert_array_equal(core.cell.X_test[1], [5.0, 0.0, 3.0])
    ranges = [signed("ent-7", low, high), signed("peer-1", low, high)]
    K = core.kernel_block("linear", 2, 0.0, ranges, record_set="test")
    scaled = (np.array([[2.5, 20, 0], [5.0, 0.0, 3.0]]) - low) / (high - low)
    np.testing.assert_allclose(K, scaled @ derive_B(SECRET, 2, 3).T, rtol=1e-12)


def test_a_peer_cannot_squash_a_feature_with_other_bounds_when_bounds_are_declared(tmp_path: Path) -> None:
    """Issue 26: a colluding peer's validly tagged range with one feature widened 10^6-fold is refused."""
    core = make_core(tmp_path, entity_settings=BOUNDED_SCHEMA)
    low, high = np.array([-5.0, 0.0, -2.0]), np.array([5.0, 40.0, 3.0])
    squashing = signed("peer-1", low, high * np.array([1e6, 1, 1]))
    with pytest.raises(PrivacyError, match="differs from the bounds its schema declares"):
        core.kernel_block("gaussian", 2, 0.5, [signed("ent-7", low, high), squashing], record_set="train")
    assert core.guard.releases_by_rpc["KernelBlock"] == 0


def test_a_record_that_changed_since_it_was_served_is_refused_as_a_second_view(tmp_path: Path) -> None:
    """Issue 26: the same id with other values would give a second kernel row (2 x mbar equations for one record);
    the entity refuses it, also after a restart, and says only that a record changed."""
    core = make_core(tmp_path)
    first = core.kernel_block("linear", 2, 0.0, RANGES, ids=["r4", "r1"])
    assert first.shape == (2, 2)
    edited = CELL.replace("r4,1,train,-4.0,30,1", "r4,1,train,-4.0,30,1.2")
    restarted = make_core(tmp_path, edited)  # the same release log and fingerprints, the edited cell
    with pytest.raises(PrivacyError, match="a record changed since its last release") as refused:
        restarted.kernel_block("linear", 2, 0.0, RANGES, ids=["r1", "r4"])
    assert "r4" not in str(refused.value) and "r1" not in str(refused.value)
    again = restarted.kernel_block("linear", 2, 0.0, RANGES, ids=["r1"])  # an unchanged record is served as before
    np.testing.assert_array_equal(again, first[1:])


def test_an_entity_proposes_round_bounds_from_its_own_records_for_its_column_block_to_agree_on(tmp_path: Path) -> None:
    """`ppsvm entity bounds`: the schema with outward-rounded bounds of every record (held-out ones too)."""
    import tomllib

    from ppsvm.data.schema import parse_schema
    from ppsvm.entity.cli import proposed_bounds

    make_core(tmp_path)
    proposal = parse_schema(tomllib.loads(proposed_bounds(load_entity_config(tmp_path / "entity.toml")))["schema"], "x")
    assert proposal.encoded_names == ("f1", "f2", "f3")
    low, high = proposal.declared_bounds() or (None, None)
    np.testing.assert_array_equal(low, [-10.0, -50.0, -1.0])  # two significant digits of the larger end (100)
    np.testing.assert_array_equal(high, [100.0, 30.0, 7.0])
