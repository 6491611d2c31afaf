"""The checkerboard split: cell files round-trip exactly, secrets stay private, failures leave nothing."""

from __future__ import annotations

import csv
import json
import os
import stat
import tempfile
import tomllib
from pathlib import Path

import numpy as np
import pytest
from cryptography import x509
from hypothesis import given, settings
from hypothesis import strategies as st

from ppsvm.config import load_entity_config, load_federation
from ppsvm.data.dataset import Dataset
from ppsvm.data.partition import SplitOptions, SplitResult, split_dataset
from ppsvm.data.schema import outward_bounds
from ppsvm.errors import ConfigError, DataError
from ppsvm.wire.certs import certificate_identity


def make_dataset(m: int = 40, n: int = 7, task: str = "classify", seed: int = 1) -> Dataset:
    rng = np.random.default_rng(seed)
    # Values whose decimal form is long or extreme, to catch any lossy formatting.
    X = rng.standard_normal((m, n)) * 10.0 ** rng.integers(-300, 300, size=(m, n))
    X[0, :2] = [0.1, -0.0]
    y = np.where(np.arange(m) % 3 == 0, 1.0, -1.0) if task == "classify" else rng.standard_normal(m) / 3
    ids = np.array([f'rec "{i}", x' if i % 5 == 0 else f"rec{i}" for i in range(m)])
    return Dataset(ids=ids, X=X, y=y, feature_names=tuple(f"f{k}" for k in range(n)), source="<synthetic>")


def read_cell(path: Path) -> tuple[list[str], list[list[str]]]:
    with path.open(newline="") as handle:
        rows = list(csv.reader(handle))
    return rows[0], rows[1:]


def reassemble(result: SplitResult, dataset: Dataset) -> tuple[np.ndarray, np.ndarray, dict[str, str]]:
    """X and y rebuilt from the cell files by record id, and each id's split."""
    position = {record_id: k for k, record_id in enumerate(dataset.ids.tolist())}
    X = np.full(dataset.X.shape, np.nan)
    y = np.full(dataset.y.shape, np.nan)
    split_of: dict[str, str] = {}
    column_of = {name: k for k, name in enumerate(dataset.feature_names)}
    for config_path in result.entity_config_paths:
        entity = tomllib.loads(config_path.read_text())["entity"]
        header, rows = read_cell(config_path.parent / entity["data"])
        assert header[:3] == ["id", "label", "split"]
        columns = [column_of[name] for name in header[3:]]
        for record_id, label, split, *values in rows:
            X[position[record_id], columns] = [float(v) for v in values]
            y[position[record_id]] = float(label)
            assert split_of.setdefault(record_id, split) == split
    return X, y, split_of


@pytest.fixture
def dataset() -> Dataset:
    return make_dataset()


def test_cells_round_trip_exactly(dataset: Dataset, tmp_path: Path) -> None:
    result = split_dataset(dataset, SplitOptions(rows=3, cols=2, out_dir=tmp_path / "out"))
    X, y, _ = reassemble(result, dataset)
    assert (X == dataset.X).all() and (y == dataset.y).all()
    assert np.signbit(X[0, 1])  # -0.0 survives too
    assert [p.name for p in result.entity_config_paths] == [
        "r0c0.toml",
        "r0c1.toml",
        "r1c0.toml",
        "r1c1.toml",
        "r2c0.toml",
        "r2c1.toml",
    ]
    header, _ = read_cell(tmp_path / "out" / "r0c1.csv")
    assert header == ["id", "label", "split", "f4", "f5", "f6"]


def test_regression_targets_round_trip(tmp_path: Path) -> None:
    data = make_dataset(task="regress")
    result = split_dataset(data, SplitOptions(rows=2, cols=3, out_dir=tmp_path, task="regress", kernel="linear"))
    X, y, _ = reassemble(result, data)
    assert (X == data.X).all() and (y == data.y).all()


def test_train_test_disjoint_cover_and_stratified(dataset: Dataset, tmp_path: Path) -> None:
    result = split_dataset(dataset, SplitOptions(rows=2, cols=1, out_dir=tmp_path, test_fraction=0.25, seed=7))
    _, _, split_of = reassemble(result, dataset)
    assert set(split_of) == set(dataset.ids.tolist())
    test_ids = {i for i, s in split_of.items() if s == "test"}
    assert len(test_ids) == result.n_test == 10 and result.n_train == 30
    labels = dict(zip(dataset.ids.tolist(), dataset.y.tolist(), strict=True))
    assert abs(sum(labels[i] == 1 for i in test_ids) - 10 * 14 / 40) <= 0.5  # class ratio kept
    for config_path in result.entity_config_paths:
        _, rows = read_cell(config_path.with_suffix(".csv"))
        splits = [row[2] for row in rows]
        assert splits == sorted(splits, key=["train", "test"].index)  # train rows first
        assert "test" in splits
        assert {row[1] for row in rows if row[2] == "train"} == {"1", "-1"}


def test_both_classes_in_test_set_when_possible(tmp_path: Path) -> None:
    data = make_dataset(m=30)
    data = Dataset(data.ids, data.X, np.where(np.arange(30) < 2, 1.0, -1.0), data.feature_names, data.source)
    result = split_dataset(data, SplitOptions(rows=1, cols=1, out_dir=tmp_path, test_fraction=0.1))
    _, rows = read_cell(tmp_path / "r0c0.csv")
    assert result.n_test == 3
    assert {row[1] for row in rows if row[2] == "test"} == {"1", "-1"}


def test_no_test_fraction(dataset: Dataset, tmp_path: Path) -> None:
    result = split_dataset(dataset, SplitOptions(rows=2, cols=2, out_dir=tmp_path, test_fraction=0.0))
    assert (result.n_train, result.n_test) == (40, 0)


def test_seed_determines_split(dataset: Dataset, tmp_path: Path) -> None:
    cells = []
    for name, seed in (("a", 3), ("b", 3), ("c", 4)):
        split_dataset(dataset, SplitOptions(rows=2, cols=2, out_dir=tmp_path / name, seed=seed))
        cells.append((tmp_path / name / "r1c0.csv").read_text())
    assert cells[0] == cells[1] != cells[2]


def test_secrets_private_and_shared_per_column_block(dataset: Dataset, tmp_path: Path) -> None:
    result = split_dataset(dataset, SplitOptions(rows=3, cols=2, out_dir=tmp_path))
    secrets_by_block: dict[int, set[str]] = {0: set(), 1: set()}
    for config_path in result.entity_config_paths:
        entity = tomllib.loads(config_path.read_text())["entity"]
        secret_path = tmp_path / entity["secret_file"]
        assert stat.S_IMODE(secret_path.stat().st_mode) == 0o600
        secrets_by_block[entity["column_block"]].add(secret_path.read_text())
    assert all(len(texts) == 1 for texts in secrets_by_block.values())
    block0, block1 = (texts.pop() for texts in secrets_by_block.values())
    assert block0 != block1 and len(block0.strip()) == 64 and block0.endswith("\n")


def test_entity_config_format(dataset: Dataset, tmp_path: Path) -> None:
    split_dataset(dataset, SplitOptions(rows=2, cols=2, out_dir=tmp_path))
    assert (tmp_path / "r0c1.toml").read_text() == (
        "# ppsvm entity r0c1: private to this data owner; never give this file to the coordinator.\n"
        "[entity]\n"
        'id = "r0c1"\n'
        'listen = "127.0.0.1:50052"\n'
        'data = "r0c1.csv"\n'
        "column_block = 1\n"
        'secret_file = "column-block-1.secret"\n'
        'id_key_file = "record-ids.key"\n'
        'column_block_members = ["r0c1", "r1c1"]\n'
        'pair_secrets = { "r0c0" = "pair-r0c0-r0c1.secret" }\n'
        "\n"
        "[tls]\n"
        'ca = "ca.pem"\n'
        'cert = "r0c1.pem"\n'
        'key = "r0c1.key"\n'
        'coordinator = "coordinator"\n'
        "\n"
        + "\n".join(
            f'[[schema.features]]\nname = "{name}"\ntype = "number"\nlow = {low!r}\nhigh = {high!r}\n'
            for name in ("f4", "f5", "f6")
            for column in (dataset.X[:, dataset.feature_names.index(name)],)
            for low, high in (outward_bounds(float(column.min()), float(column.max())),)
        )
    )


def test_split_makes_certificates_for_every_party(dataset: Dataset, tmp_path: Path) -> None:
    result = split_dataset(dataset, SplitOptions(rows=2, cols=2, out_dir=tmp_path))
    ca = x509.load_pem_x509_certificate((tmp_path / "ca.pem").read_bytes())
    assert not (tmp_path / "ca.key").exists(), "a split's CA key is not kept"
    for name in ("coordinator", "r0c0", "r0c1", "r1c0", "r1c1"):
        cert = x509.load_pem_x509_certificate((tmp_path / f"{name}.pem").read_bytes())
        cert.verify_directly_issued_by(ca)
        assert certificate_identity((tmp_path / f"{name}.pem").read_bytes())[0] == name
        assert stat.S_IMODE((tmp_path / f"{name}.key").stat().st_mode) == 0o600
    federation = load_federation(result.federation_path)
    assert federation.tls is not None and federation.tls.identity() == "coordinator"
    entity = load_entity_config(result.entity_config_paths[3])
    assert entity.tls is not None and entity.tls.identity() == "r1c1" and entity.coordinator_identity == "coordinator"


def test_federation_is_public_and_complete(dataset: Dataset, tmp_path: Path) -> None:
    result = split_dataset(dataset, SplitOptions(rows=2, cols=3, out_dir=tmp_path, host="::1", base_port=6000))
    text = result.federation_path.read_text()
    assert text.startswith("# ppsvm federation: the coordinator's view (no data, no secrets).\n[task]\n")
    federation = tomllib.loads(text)
    assert federation["task"] == {"task": "classify", "kernel": "gaussian"}
    assert federation["entity"][4] == {"id": "r1c1", "address": "[::1]:6004", "row_block": 1, "column_block": 1}
    assert len(federation["entity"]) == 6
    for path in tmp_path.glob("*.secret"):
        assert path.read_text().strip() not in text
    assert ".secret" not in text and ".csv" not in text and "secret" not in text.split("\n", 1)[1]


def test_manifest(dataset: Dataset, tmp_path: Path) -> None:
    source = tmp_path / "src.data"
    source.write_bytes(b"abc")
    data = Dataset(dataset.ids, dataset.X, dataset.y, dataset.feature_names, str(source))
    split_dataset(data, SplitOptions(rows=2, cols=3, out_dir=tmp_path / "out"), provenance={"label": 1, "drop": (0,)})
    text = (tmp_path / "out" / "split.json").read_text()
    manifest = json.loads(text)
    assert manifest["source_sha256"] == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    assert manifest["dataset"] == {"label": 1, "drop": [0]}
    assert manifest["options"]["rows"] == 2 and manifest["options"]["test_fraction"] == 0.3
    assert (manifest["m"], manifest["n"], manifest["n_train"], manifest["n_test"]) == (40, 7, 28, 12)
    assert [(b["start"], b["stop"]) for b in manifest["column_blocks"]] == [(0, 3), (3, 5), (5, 7)]
    assert manifest["cells"][0] == {
        "id": "r0c0",
        "row_block": 0,
        "column_block": 0,
        "n_train": 14,
        "n_test": 6,
        "n_features": 3,
    }
    for path in (tmp_path / "out").glob("*.secret"):
        assert path.read_text().strip() not in text
    assert repr(float(data.X[5, 5])) not in text


def test_given_column_blocks_round_trip_and_are_recorded(dataset: Dataset, tmp_path: Path) -> None:
    """Column blocks as the features each owner records, not contiguous ranges."""
    blocks = [[5, 0, 2], [1, 6], [3, 4]]
    result = split_dataset(dataset, SplitOptions(rows=2, cols=3, out_dir=tmp_path / "out"), column_blocks=blocks)
    X, y, _ = reassemble(result, dataset)
    assert (X == dataset.X).all() and (y == dataset.y).all()
    assert read_cell(tmp_path / "out" / "r1c0.csv")[0] == ["id", "label", "split", "f5", "f0", "f2"]
    manifest = json.loads((tmp_path / "out" / "split.json").read_text())
    assert [b["columns"] for b in manifest["column_blocks"]] == blocks
    assert [("start" in b, b.get("stop")) for b in manifest["column_blocks"]] == [
        (False, None),
        (False, None),
        (True, 5),
    ]
    assert manifest["options"]["column_blocks"] == "given"


@pytest.mark.parametrize(
    ("blocks", "message"),
    [
        ([[0, 1, 2], [3, 4, 5]], "exactly once"),  # feature 6 left out
        ([[0, 1, 2, 3], [3, 4, 5, 6]], "exactly once"),
        ([[0, 1, 2, 3, 4, 5, 7], [6]], "exactly once"),
        ([[-1, 0, 1, 2, 3, 4, 5], [6]], "exactly once"),
        ([[0, 1, 2, 3, 4, 5, 6], []], "at least one feature"),
        ([[0, 1, 2, 3, 4, 5, 6]], "1 column blocks given for cols = 2"),
    ],
)
def test_given_column_blocks_must_hold_each_feature_once(
    dataset: Dataset, tmp_path: Path, blocks: list[list[int]], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        split_dataset(dataset, SplitOptions(rows=1, cols=2, out_dir=tmp_path / "out"), column_blocks=blocks)
    assert not (tmp_path / "out").exists()


def test_refuses_non_empty_out_dir(dataset: Dataset, tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("keep")
    with pytest.raises(ConfigError, match="is not empty; choose another or pass --overwrite"):
        split_dataset(dataset, SplitOptions(rows=1, cols=1, out_dir=tmp_path))
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]


def test_each_pair_of_a_row_block_shares_its_own_secret(dataset: Dataset, tmp_path: Path) -> None:
    """Secure aggregation's masks: a pair secret per two entities of a row block, none across row blocks."""
    split_dataset(dataset, SplitOptions(rows=2, cols=3, out_dir=tmp_path))
    pairs = sorted(p.name for p in tmp_path.glob("pair-*.secret"))
    assert pairs == [f"pair-r{i}c{a}-r{i}c{b}.secret" for i in range(2) for a, b in ((0, 1), (0, 2), (1, 2))]
    assert len({(tmp_path / name).read_text() for name in pairs}) == 6
    config = load_entity_config(tmp_path / "r1c1.toml")
    assert config.read_pair_secrets() == {
        "r1c0": bytes.fromhex((tmp_path / "pair-r1c0-r1c1.secret").read_text()),
        "r1c2": bytes.fromhex((tmp_path / "pair-r1c1-r1c2.secret").read_text()),
    }


def test_overwrite_replaces_and_removes_stale_cells(dataset: Dataset, tmp_path: Path) -> None:
    split_dataset(dataset, SplitOptions(rows=3, cols=3, out_dir=tmp_path))
    (tmp_path / "notes.txt").write_text("keep")
    split_dataset(dataset, SplitOptions(rows=1, cols=2, out_dir=tmp_path, overwrite=True))
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "ca.pem", "client.key", "client.pem", "column-block-0.secret", "column-block-1.secret", "coordinator.key",
        "coordinator.pem",
        "federation.toml", "notes.txt", "pair-r0c0-r0c1.secret",
        "r0c0.csv", "r0c0.key", "r0c0.pem", "r0c0.releases.jsonl", "r0c0.toml",
        "r0c1.csv", "r0c1.key", "r0c1.pem", "r0c1.releases.jsonl", "r0c1.toml", "record-ids.key", "split.json",
    ]  # fmt: skip


def test_failure_while_staging_leaves_nothing(
    dataset: Dataset, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_fsync = os.fsync
    calls = []

    def failing_fsync(descriptor: int) -> None:
        calls.append(descriptor)
        if len(calls) == 4:
            raise OSError(28, "No space left on device")
        real_fsync(descriptor)

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(ConfigError, match="No space left"):
        split_dataset(dataset, SplitOptions(rows=2, cols=2, out_dir=tmp_path / "out"))
    assert not (tmp_path / "out").exists()


def test_failure_while_renaming_removes_what_it_wrote(
    dataset: Dataset, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "notes.txt").write_text("keep")
    real_replace = os.replace
    calls = []

    def failing_replace(source: Path, target: Path) -> None:
        calls.append(target)
        if len(calls) == 5:
            raise OSError(5, "Input/output error")
        real_replace(source, target)

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(ConfigError, match="Input/output error"):
        split_dataset(dataset, SplitOptions(rows=2, cols=2, out_dir=tmp_path, overwrite=True))
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        (dict(rows=29, test_fraction=0.3), ConfigError, "29 row blocks but only 28 training records"),
        (dict(cols=8), ConfigError, r"cols must be between 1 and the number of features \(7\), not 8"),
        (dict(rows=0), ConfigError, "rows must be at least 1"),
        (dict(test_fraction=1.0), ConfigError, r"test fraction must be in \[0, 1\)"),
        (dict(kernel="rbf"), ConfigError, "kernel must be one of"),
        (dict(base_port=65530, rows=3, cols=3), ConfigError, "65530..65538"),
        (dict(rows=14, test_fraction=0.0), DataError, r"row block \d+ has \d+ training records, all of class .*fewer"),
    ],
)
def test_bad_splits_are_refused_before_writing(
    dataset: Dataset, tmp_path: Path, options: dict[str, object], error: type[Exception], message: str
) -> None:
    arguments: dict[str, object] = {"rows": 1, "cols": 1, "out_dir": tmp_path / "out", **options}
    with pytest.raises(error, match=message):
        split_dataset(dataset, SplitOptions(**arguments))  # type: ignore[arg-type]
    assert not (tmp_path / "out").exists()


def test_classification_needs_plus_minus_one_labels(dataset: Dataset, tmp_path: Path) -> None:
    data = Dataset(dataset.ids, dataset.X, (dataset.y + 1) / 2, dataset.feature_names, dataset.source)
    with pytest.raises(DataError, match=r"\+1 or -1"):
        split_dataset(data, SplitOptions(rows=1, cols=1, out_dir=tmp_path))


@settings(max_examples=25, deadline=None)
@given(
    X=st.lists(
        st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=3, max_size=3), min_size=4, max_size=9
    ),
    prefix=st.text(alphabet=st.sampled_from("ab ,\"'\\é\t"), max_size=6),
)
def test_any_finite_values_and_odd_ids_round_trip(X: list[list[float]], prefix: str) -> None:
    m = len(X)
    data = Dataset(
        ids=np.array([f"{prefix}{i}" for i in range(m)]),
        X=np.array(X),
        y=np.array(X)[:, 2],
        feature_names=("a,b", 'q"', "c"),
        source="<hypothesis>",
    )
    with tempfile.TemporaryDirectory() as directory:
        options = SplitOptions(rows=2, cols=2, out_dir=Path(directory), test_fraction=0.0, task="regress")
        result = split_dataset(data, options)
        rebuilt, y, _ = reassemble(result, data)
    assert (rebuilt == data.X).all() and (y == data.y).all()


def test_missing_values_are_imputed_from_each_row_blocks_training_records(tmp_path: Path) -> None:
    dataset = make_dataset(m=40, n=4)
    X = np.round(np.random.default_rng(3).normal(size=(40, 4)), 3)
    holes = np.zeros(X.shape, dtype=bool)
    holes[::3, 1] = holes[5::7, 3] = True
    X[holes] = np.nan
    dataset = Dataset(dataset.ids, X, dataset.y, dataset.feature_names, dataset.source)
    result = split_dataset(dataset, SplitOptions(rows=2, cols=2, out_dir=tmp_path / "s"))
    filled, _, split_of = reassemble(result, dataset)
    assert np.isfinite(filled).all()
    np.testing.assert_array_equal(filled[~holes], X[~holes])
    # Each row block's fill is the mean of that block's own training values, used for its test records too.
    block_of = {}
    for config_path in result.entity_config_paths:
        entity = tomllib.loads(config_path.read_text())["entity"]
        _, rows = read_cell(config_path.parent / entity["data"])
        block_of.update({row[0]: config_path.stem[:2] for row in rows})
    position = {record_id: k for k, record_id in enumerate(dataset.ids.tolist())}
    for block in ("r0", "r1"):
        rows = np.array([position[i] for i, b in block_of.items() if b == block])
        train = np.array([position[i] for i, b in block_of.items() if b == block and split_of[i] == "train"])
        for column in (1, 3):
            expected = np.nanmean(X[train, column])
            missing_rows = rows[holes[rows, column]]
            assert missing_rows.size and np.allclose(filled[missing_rows, column], expected, rtol=1e-12)
    manifest = json.loads((tmp_path / "s" / "split.json").read_text())
    assert sum(manifest["imputed"].values()) == int(holes.sum())


def test_split_declares_round_bounds_that_cover_every_record_alike_across_a_column_block(
    dataset: Dataset, tmp_path: Path
) -> None:
    """Issue 26: the scaling comes from bounds the column block agrees on, never from who holds which records."""
    split_dataset(dataset, SplitOptions(rows=3, cols=2, out_dir=tmp_path))
    for j in range(2):
        schemas = {load_entity_config(tmp_path / f"r{i}c{j}.toml").schema for i in range(3)}
        assert len(schemas) == 1
        (schema,) = schemas
        assert schema is not None
        bounds = schema.declared_bounds()
        assert bounds is not None
        columns = [dataset.feature_names.index(name) for name in schema.encoded_names]
        assert (bounds[0] <= dataset.X[:, columns].min(axis=0)).all()
        assert (bounds[1] >= dataset.X[:, columns].max(axis=0)).all()


@settings(max_examples=60, deadline=None)
@given(
    bits=st.lists(st.integers(0, 2**64 - 1), min_size=6, max_size=60),
    task=st.sampled_from(["classify", "regress"]),
    block_rows=st.sampled_from([1, 3, 1 << 16]),
    threads=st.booleans(),
)
def test_cell_files_read_back_bit_for_bit_by_both_cell_readers(
    bits: list[int], task: str, block_rows: int, threads: bool
) -> None:
    """Any float64 (subnormals, -0.0, 17 digits) written to a cell file, a block of records at a time (on two
    threads or one), reads back as itself through the entity's column reader and its line reader; ids the csv
    module quotes read back too."""
    from ppsvm.data import columnar, partition, sources

    values = np.array(bits[: len(bits) // 3 * 3], dtype=np.uint64).view(np.float64).reshape(-1, 3)
    X = np.where(np.isfinite(values), values, -0.0)
    m = len(X)
    odd = ["a,b", 'q"x', "l\nm", "é", "p"]
    ids = np.array([f"{odd[k % len(odd)]}{k}" for k in range(m)])
    y = np.where(np.arange(m) % 2 == 0, 1.0, -1.0) if task == "classify" else X[:, 0][::-1].copy()
    data = Dataset(ids=ids, X=X, y=y, feature_names=("f0", "f1", "f2"), source="<bits>")
    train, test, columns = np.arange(m)[::-1][: m - 1], np.array([0]), np.array([2, 0])
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "r0c0.csv"
        previous = partition._CELL_BLOCK_ROWS, columnar.spare_core
        partition._CELL_BLOCK_ROWS, columnar.spare_core = block_rows, lambda: threads
        try:
            path.write_bytes(partition.cell_bytes(data, train, test, columns, task))
        finally:
            partition._CELL_BLOCK_ROWS, columnar.spare_core = previous
        assert path.read_text(encoding="utf-8") == partition.cell_csv(data, train, test, columns, task)
        cells = [sources._read_by_batches(sources.cell_file(path), None, 1 << 20, False)]
        try:
            cells.append(columnar.read_source(sources.cell_file(path), None, 1 << 20))
        except columnar.NotColumnar:
            pass
    for cell in cells:
        assert cell.train_ids.tolist() == ids[train].tolist() and cell.test_ids.tolist() == ids[test].tolist()
        assert cell.X_train.tobytes() == X[np.ix_(train, columns)].tobytes()
        assert cell.X_test.tobytes() == X[np.ix_(test, columns)].tobytes()
        assert cell.y_train is not None and cell.y_train.tobytes() == y[train].tobytes()
