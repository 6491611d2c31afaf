"""Entity data sources and schemas: CSV, Parquet and SQLite read to the same cell; errors name where."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ppsvm.data import sources
from ppsvm.data.schema import Feature, Schema, outward_bounds, parse_schema
from ppsvm.data.sources import DataSource, parse_data_table, read_source
from ppsvm.errors import ConfigError, DataError

# A hospital-like extract: a text id, a text outcome, a categorical and a column with gaps.
COLUMNS = ("patient", "age", "smoker", "bmi", "outcome", "part")
ROWS: list[tuple[Any, ...]] = [
    ("p01", 61, "never", 27.5, "yes", "train"),
    ("p02", 45, "former", None, "no", "train"),
    ("p03", 70, "current", 31.0, "yes", "test"),
    ("p04", 38, None, 22.1, "no", "train"),
    ("p05", 52, "never", None, "no", "train"),
]
SCHEMA = Schema(
    (
        Feature("age", "number"),
        Feature("smoker", "category", ("never", "former", "current"), impute="never"),
        Feature("bmi", "number", impute=25.0),
    )
)
# What the schema encodes ROWS to, written out by hand: age, smoker one-hot, bmi (25 imputed).
EXPECTED = np.array(
    [
        [61, 1, 0, 0, 27.5],
        [45, 0, 1, 0, 25.0],
        [70, 0, 0, 1, 31.0],
        [38, 1, 0, 0, 22.1],
        [52, 1, 0, 0, 25.0],
    ]
)
COMMON = dict(id_column="patient", label_column="outcome", split_column="part", labels=("yes", "no"))


def write_csv(path: Path, rows: list[tuple[Any, ...]] = ROWS, columns: tuple[str, ...] = COLUMNS) -> Path:
    lines = [",".join(columns)] + [",".join("" if v is None else str(v) for v in row) for row in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def write_sqlite(path: Path, rows: list[tuple[Any, ...]] = ROWS) -> str:
    with sqlite3.connect(path) as connection:
        columns = "patient TEXT, age INTEGER, smoker TEXT, bmi REAL, outcome TEXT, part TEXT, note TEXT"
        connection.execute(f"CREATE TABLE patients ({columns})")
        connection.executemany("INSERT INTO patients VALUES (?, ?, ?, ?, ?, ?, 'not read')", rows)
    return f"sqlite:///{path}"


def write_parquet(path: Path, rows: list[tuple[Any, ...]] = ROWS) -> Path:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    table = pa.table({name: [row[k] for row in rows] for k, name in enumerate(COLUMNS)})
    pq.write_table(table, path, row_group_size=2)  # several row groups: batches meet their boundaries
    return path


def check_expected(cell: Any) -> None:
    assert cell.feature_names == ("age", "smoker=never", "smoker=former", "smoker=current", "bmi")
    assert cell.train_ids.tolist() == ["p01", "p02", "p04", "p05"] and cell.test_ids.tolist() == ["p03"]
    np.testing.assert_array_equal(cell.X_train, EXPECTED[[0, 1, 3, 4]])
    np.testing.assert_array_equal(cell.X_test, EXPECTED[[2]])
    np.testing.assert_array_equal(cell.y_train, [1, -1, -1, -1])
    np.testing.assert_array_equal(cell.y_test, [1])


def test_csv_source_encodes_categories_and_imputes(tmp_path: Path) -> None:
    check_expected(read_source(DataSource("csv", path=write_csv(tmp_path / "p.csv"), **COMMON), SCHEMA))


def test_a_list_of_labels_gives_each_class_its_place(tmp_path: Path) -> None:
    rows = [(*row[:4], grade, row[5]) for row, grade in zip(ROWS, ["high", "low", "mid", "mid", "high"], strict=True)]
    source = DataSource("csv", path=write_csv(tmp_path / "p.csv", rows), **{**COMMON, "labels": ("low", "mid", "high")})
    assert parse_data_table(
        {"source": "csv", "path": "p.csv", "labels": ["low", "mid", "high"]}, "t", tmp_path
    ).labels == ("low", "mid", "high")
    cell = read_source(source, SCHEMA)
    np.testing.assert_array_equal(cell.y_train, [2, 0, 1, 2])
    np.testing.assert_array_equal(cell.y_test, [1])
    cell.check_class_codes(("low", "mid", "high"))
    with pytest.raises(DataError, match=r"record 'p01' has label 2, but label_names names 2 classes"):
        cell.check_class_codes(("low", "mid"))
    unknown = DataSource("csv", path=source.path, **{**COMMON, "labels": ("low", "mid", "top")})
    with pytest.raises(DataError, match="label 'high' is none of the classes 'low', 'mid', 'top'"):
        read_source(unknown, SCHEMA)


def test_sqlite_table_and_query_read_the_same_cell(tmp_path: Path) -> None:
    url = write_sqlite(tmp_path / "h.db")
    check_expected(read_source(DataSource("sql", url=url, table="patients", **COMMON), SCHEMA))
    query = "SELECT * FROM patients WHERE age > 0"
    check_expected(read_source(DataSource("sql", url=url, query=query, **COMMON), SCHEMA))


def test_parquet_source_reads_the_same_cell(tmp_path: Path) -> None:
    check_expected(read_source(DataSource("parquet", path=write_parquet(tmp_path / "p.parquet"), **COMMON), SCHEMA))


@pytest.mark.parametrize("kind", ["csv", "parquet", "sql"])
def test_batches_keep_row_positions_across_their_boundaries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """With 2-row batches the error still names the right line or row."""
    monkeypatch.setattr(sources, "BATCH_ROWS", 2)
    bad = [*ROWS[:4], ("p05", 52, "sometimes", 20.0, "no", "train")]
    if kind == "csv":
        source, where = DataSource("csv", path=write_csv(tmp_path / "p.csv", bad), **COMMON), "line 6"
    elif kind == "parquet":
        source, where = DataSource("parquet", path=write_parquet(tmp_path / "p.parquet", bad), **COMMON), "row 5"
    else:
        url = write_sqlite(tmp_path / "h.db", bad)
        source, where = DataSource("sql", url=url, table="patients", **COMMON), "row 5"
    with pytest.raises(DataError, match=f"{where}, column 'smoker': 'sometimes' is not a declared category"):
        read_source(source, SCHEMA)


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        (
            [("p01", None, "never", 1.0, "yes", "train")],
            "line 2, column 'age': missing value and the schema imputes none",
        ),
        ([("p01", "old", "never", 1.0, "yes", "train")], "line 2, column 'age': 'old' is not a number"),
        (
            [("p01", 1, "never", 1.0, "maybe", "train")],
            "line 2, column 'outcome': label 'maybe' is neither 'yes' nor 'no'",
        ),
        ([("p01", 1, "never", 1.0, None, "train")], "line 2, column 'outcome': missing label"),
        ([("", 1, "never", 1.0, "yes", "train")], "line 2, column 'patient': empty record id"),
        ([ROWS[0], ROWS[1], ROWS[0]], "line 4: duplicate record id 'p01' (first on line 2)"),
        ([("p01", 1, "never", 1.0, "yes", "valid")], "line 2, column 'part': expected 'train' or 'test', got 'valid'"),
        ([("p01", 1, "never", 1.0, "yes", "test")], "every record is marked 'test'"),
        ([], "no records"),
    ],
)
def test_csv_errors_name_file_line_and_column(tmp_path: Path, rows: list[tuple[Any, ...]], message: str) -> None:
    path = write_csv(tmp_path / "p.csv", rows)
    with pytest.raises(DataError) as caught:
        read_source(DataSource("csv", path=path, **COMMON), SCHEMA)
    assert str(path) in str(caught.value) and message in str(caught.value)


def test_a_declared_column_the_source_lacks_is_named(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "p.csv")
    schema = Schema((*SCHEMA.features, Feature("weight", "number")))
    with pytest.raises(DataError, match="no column\\(s\\) 'weight'"):
        read_source(DataSource("csv", path=path, **COMMON), schema)
    url = write_sqlite(tmp_path / "h.db")
    with pytest.raises(DataError, match="table 'patients' at sqlite:///.*weight"):
        read_source(DataSource("sql", url=url, table="patients", **COMMON), schema)


def test_parquet_and_sql_need_a_schema(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="needs a declared schema"):
        read_source(DataSource("sql", url=write_sqlite(tmp_path / "h.db"), table="patients", **COMMON))


def test_not_a_parquet_file_is_named(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    path = write_csv(tmp_path / "p.parquet")
    with pytest.raises(DataError, match="not a readable Parquet file"):
        read_source(DataSource("parquet", path=path, **COMMON), SCHEMA)


def test_a_database_url_password_never_appears(tmp_path: Path) -> None:
    source = DataSource("sql", url="postgresql+psycopg://alice:s3cret@127.0.0.1:9/h", table="patients", **COMMON)
    assert "s3cret" not in source.describe() and "alice" in source.describe()
    with pytest.raises(DataError) as caught:  # nothing listens on port 9
        read_source(source, SCHEMA)
    assert "s3cret" not in str(caught.value) and "127.0.0.1" in str(caught.value)


def test_url_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = DataSource("sql", url_env="PPSVM_TEST_DB", table="patients", **COMMON)
    with pytest.raises(ConfigError, match="PPSVM_TEST_DB"):
        read_source(source, SCHEMA)
    monkeypatch.setenv("PPSVM_TEST_DB", write_sqlite(tmp_path / "h.db"))
    check_expected(read_source(source, SCHEMA))


def test_schema_round_trips_and_fingerprints_what_encodes() -> None:
    parsed = parse_schema({"features": SCHEMA.as_dict()["features"]}, "x")
    assert parsed == SCHEMA and parsed.fingerprint() == SCHEMA.fingerprint()
    other_impute = Schema((SCHEMA.features[0], SCHEMA.features[1], Feature("bmi", "number", impute=24.0)))
    other_order = Schema(
        (SCHEMA.features[0], Feature("smoker", "category", ("former", "never", "current")), SCHEMA.features[2])
    )
    assert len({SCHEMA.fingerprint(), other_impute.fingerprint(), other_order.fingerprint()}) == 3


@pytest.mark.parametrize(
    ("features", "message"),
    [
        ([], "at least one"),
        ([{"name": "a", "type": "text"}], "'type' must be one of number, category"),
        ([{"name": "a", "type": "category"}], "'categories' must list"),
        ([{"name": "a", "type": "category", "categories": ["x", "x"]}], "listed twice"),
        ([{"name": "a", "type": "category", "categories": ["x"], "impute": "y"}], "one of the declared categories"),
        ([{"name": "a", "impute": "y"}], "'impute' must be a finite number"),
        ([{"name": "a", "categories": ["x"]}], "category features only"),
        ([{"name": "a"}, {"name": "a"}], "declared more than once"),
        ([{"name": " a"}], "'name' must be"),
        ([{"name": "a", "colour": 1}], "unknown key(s) colour"),
        ([{"name": "a", "low": 0}], "declare both 'low' and 'high'"),
        ([{"name": "a", "low": 2, "high": 1}], "'low' must be below 'high'"),
        ([{"name": "a", "low": 0, "high": float("inf")}], "'high' must be a finite number"),
        ([{"name": "a", "low": True, "high": 3}], "'low' must be a finite number"),
        ([{"name": "a", "type": "category", "categories": ["x"], "low": 0, "high": 1}], "number features only"),
    ],
)
def test_schema_errors_name_the_feature(features: list[dict[str, Any]], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_schema({"features": features}, "e.toml")
    assert message in str(caught.value) and "e.toml" in str(caught.value)


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"source": "excel", "path": "x"}, "'source' must be one of csv, parquet, sql"),
        ({"source": "csv"}, "a csv source takes path"),
        ({"source": "sql", "url": "sqlite://", "path": "x"}, "a sql source takes"),
        ({"source": "sql", "url": "sqlite://", "table": "t", "query": "q"}, "a sql source takes"),
        ({"source": "csv", "path": "x", "labels": {"positive": "a"}}, "'labels' must be"),
        ({"source": "csv", "path": "x", "labels": ["a", "b"]}, "a list of three or more different texts"),
        ({"source": "csv", "path": "x", "labels": ["a", "b", "a"]}, "a list of three or more different texts"),
        ({"source": "csv", "path": "x", "delimiter": ";;"}, "'delimiter' must be one character"),
        ({"source": "csv", "path": "x", "sheet": 1}, "unknown key(s) sheet"),
    ],
)
def test_data_table_errors_name_the_key(table: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_data_table(table, "e.toml [data]", Path("/base"))
    assert message in str(caught.value)


def test_data_table_paths_are_relative_to_the_config() -> None:
    source = parse_data_table({"source": "parquet", "path": "d/p.parquet", "id": "patient"}, "w", Path("/conf"))
    assert source.path == Path("/conf/d/p.parquet") and source.id_column == "patient"


# --- a scoring source: new records, read again on demand -------------------------------------------------


def holds_none(ids: list[str]) -> list[bool]:
    """A cell that holds none of ``ids``: every record of the scoring source is served from there."""
    return [False] * len(ids)


def test_scoring_records_grow_with_their_source_and_skip_the_cells_ids(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ppsvm.entity import records

    url = write_sqlite(tmp_path / "h.db", [])
    source = DataSource("sql", url=url, table="patients", id_column="patient")
    scoring = records.ScoringRecords(source, SCHEMA, None, lambda ids: [r == "p01" for r in ids])
    scoring.refresh(force=True)
    assert scoring.ids().tolist() == [] and scoring.unknown(["p03"]) == ["p03"]
    with sqlite3.connect(tmp_path / "h.db") as connection:
        connection.executemany("INSERT INTO patients VALUES (?, ?, ?, ?, ?, ?, 'x')", ROWS[:3])
    clock = [100.0]
    monkeypatch.setattr(records.time, "monotonic", lambda: clock[0])
    scoring.refresh(force=True)
    assert scoring.ids().tolist() == ["p02", "p03"]  # p01 is the cell's: served from there
    np.testing.assert_array_equal(scoring.rows(["p03", "p02"]), EXPECTED[[2, 1]])
    with sqlite3.connect(tmp_path / "h.db") as connection:
        connection.execute("INSERT INTO patients VALUES (?, ?, ?, ?, ?, ?, 'x')", ROWS[3])
    clock[0] += records.SCORING_REFRESH_S / 2  # too soon: an unknown id does not make it read again
    assert scoring.unknown(["p04"]) == ["p04"]
    clock[0] += records.SCORING_REFRESH_S
    assert scoring.unknown(["p04", "p02"]) == []
    np.testing.assert_array_equal(scoring.rows(["p04"]), EXPECTED[[3]])


def test_scoring_records_are_kept_by_pseudonym(tmp_path: Path) -> None:
    from ppsvm.core.randomness import record_pseudonyms
    from ppsvm.entity.records import ScoringRecords

    url = write_sqlite(tmp_path / "h.db", ROWS[:2])
    key = bytes(range(32))
    scoring = ScoringRecords(DataSource("sql", url=url, table="patients", id_column="patient"), SCHEMA, key, holds_none)
    scoring.refresh(force=True)
    assert scoring.ids().tolist() == record_pseudonyms(key, ["p01", "p02"])


def test_a_bad_row_in_the_scoring_source_never_reaches_a_caller(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A hostile coordinator can make the entity re-read its scoring source at will. A row that does not
    encode must not send its value back in the call's error: the entity logs it and serves what it had."""
    from ppsvm.entity.records import ScoringRecords

    url = write_sqlite(tmp_path / "h.db", ROWS[:2])
    scoring = ScoringRecords(
        DataSource("sql", url=url, table="patients", id_column="patient"), SCHEMA, None, holds_none
    )
    scoring.refresh(force=True, strict=True)
    with sqlite3.connect(tmp_path / "h.db") as connection:
        connection.execute("INSERT INTO patients VALUES ('p09', 'HIV+', 'never', 20.0, 'no', 'train', 'x')")
    scoring.refresh(force=True)  # during a call: nothing raised
    assert scoring.ids().tolist() == ["p01", "p02"] and scoring.unknown(["p09"]) == ["p09"]
    assert "'HIV+' is not a number" in caplog.text and "still serving the 2 records" in caplog.text
    with pytest.raises(DataError, match="'HIV\\+' is not a number"):
        scoring.refresh(force=True, strict=True)  # at start: the entity stops, naming the row


def test_declared_bounds_cover_every_encoded_column_and_enter_the_fingerprint() -> None:
    features = [
        {"name": "age", "low": 0, "high": 120},
        {"name": "smoker", "type": "category", "categories": ["never", "former", "current"]},
    ]
    schema = parse_schema({"features": features}, "x")
    low, high = schema.declared_bounds() or (None, None)
    np.testing.assert_array_equal(low, [0, 0, 0, 0])
    np.testing.assert_array_equal(high, [120, 1, 1, 1])
    wider = parse_schema({"features": [{**features[0], "high": 130}, features[1]]}, "x")
    assert wider.fingerprint() != schema.fingerprint()
    assert parse_schema({"features": [{"name": "age"}, features[1]]}, "x").declared_bounds() is None


@pytest.mark.parametrize(
    ("low", "high", "expected"),
    [(6.981, 28.11, (6, 29)), (18, 84, (18, 84)), (0.05263, 0.1634, (0.05, 0.17)), (-3.21, 0.5, (-3.3, 0.5)),
     (5, 5, (5, 5.1)), (0, 0, (0, 1)), (143.5, 2501, (100, 2600))],
)  # fmt: skip
def test_proposed_bounds_are_round_and_never_narrower_than_the_data(low: float, high: float, expected: Any) -> None:
    proposed = outward_bounds(low, high)
    assert proposed == expected
    assert proposed[0] <= low and proposed[1] >= high and proposed[0] < proposed[1]


# --- the columnar reader: the exact reader's cell, or none ----------------------------------------------------

# Fields the csv module and pyarrow might read apart: spellings of numbers, missing values, padding, quotes.
TRICKY = st.sampled_from(
    [
        "1", "-2.5", "+3", ".5", "5.", "1e3", "1E-3", " 4", "4 ", "\t4", "1_000", "0x1", "-0", "007", "1e400",
        "nan", "NaN", "-nan", "inf", "-Infinity", "NA", "", " ", "?", "null", "-999", '"7"', '""', '"8', '9"',
        "never", " never", "former ", "current", "Never", "yes", "no", " yes", "train", "test", " test", "valid",
        '"a,b"', '"x\ny"', '"x\r\ny"', "é", "١", "p01", "p02", " p03", "p04\t",
    ]
)  # fmt: skip
# Mostly what each column of COLUMNS (and a note) should hold, so that many files are valid; now and then anything.
PLAUSIBLE = [
    st.sampled_from(["p1", "p2", " p3", "p4", "é5", '"p,6"', "p1"]),
    st.sampled_from(["1", "2.5", " 3", "1e3", '"4"', "-0", "0.1"]),
    st.sampled_from(["never", " former", "current", "", "NA"]),
    st.sampled_from(["1", "", "NA", "2.5", "-999"]),
    st.sampled_from(["yes", "no", " yes"]),
    st.sampled_from(["train", "test", "train"]),
    TRICKY,
]


def plausible_line(fields: tuple[str, ...], at: int, tricky: str, swap: int) -> str:
    """A plausible row, one field in four rows swapped for a tricky one."""
    return ",".join(tricky if k == at and swap == 0 else field for k, field in enumerate(fields))


CSV_LINES = st.lists(
    st.builds(plausible_line, st.tuples(*PLAUSIBLE), st.integers(0, 5), TRICKY, st.integers(0, 7)), max_size=12
).flatmap(
    lambda lines: st.lists(st.lists(TRICKY, min_size=4, max_size=7).map(",".join), max_size=1).map(
        lambda tricky: lines + tricky
    )
)
# The plain cell CSV: id, label, split, two features, mostly numbers.
CELL_NUMBERS = st.sampled_from(["1", "-2.5", "0.1", "1e-3", "-0", "007", "3", "0.30000000000000004", "1e300"])
CELL_LINES = st.lists(
    st.tuples(
        st.sampled_from(["1", "-1", "0.5"]),
        st.sampled_from(["train", "train", "test"]),
        st.one_of(CELL_NUMBERS, TRICKY),
        CELL_NUMBERS,
    ).map(",".join),
    max_size=12,
)


def assert_same_cell(got: Any, want: Any) -> None:
    assert got.feature_names == want.feature_names and got.source == want.source
    for name in ("train_ids", "test_ids"):
        assert getattr(got, name).tolist() == getattr(want, name).tolist(), name
    for name in ("X_train", "X_test", "y_train", "y_test"):
        a, b = getattr(got, name), getattr(want, name)
        assert (a is None) == (b is None), name
        if a is not None:  # bit for bit, -0.0 and all
            assert a.shape == b.shape and a.tobytes() == b.tobytes(), name


def either_reader(source: DataSource, schema: Schema | None) -> None:
    """The columnar reader declines, or returns what the exact reader returns; it never returns a cell where the
    exact reader raises."""
    from ppsvm.data import columnar

    try:
        want = sources._read_by_batches(source, schema, 1 << 20, False)
    except DataError:
        want = None
    try:
        got = columnar.read_source(source, schema, 1 << 20)
    except columnar.NotColumnar:
        return
    except DataError:  # a header both readers refuse
        assert want is None
        return
    assert want is not None, "the columnar reader returned a cell the exact reader refuses"
    assert_same_cell(got, want)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=CSV_LINES, cell_lines=CELL_LINES, crlf=st.booleans(), numeric_token=st.booleans())
def test_fuzz_csv_columnar_reader_agrees_with_the_exact_reader(
    tmp_path: Path, lines: list[str], cell_lines: list[str], crlf: bool, numeric_token: bool
) -> None:
    end = "\r\n" if crlf else "\n"
    path = tmp_path / "fuzz.csv"
    lines = [f"r{k}{line}" for k, line in enumerate(lines)]  # ids mostly unique: many files read to a cell
    path.write_bytes(end.join(["patient,age,smoker,bmi,outcome,part,note", *lines, ""]).encode("utf-8"))
    missing = frozenset({"", "NA", "?", "-999"} if numeric_token else {"", "NA", "?"})
    either_reader(DataSource("csv", path=path, missing_values=missing, **COMMON), SCHEMA)
    cell = tmp_path / "cell.csv"
    cell.write_bytes(
        end.join(["id,label,split,f1,f2", *(f"r{k},{line}" for k, line in enumerate(cell_lines)), ""]).encode()
    )
    either_reader(sources.cell_file(cell), None)


TYPED_ODD = st.one_of(
    st.none(), st.integers(-3, 3), st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["never", " current", "yes", "no", "train", " test", "1.5", "NA", "", "-0", "x"]),
)  # fmt: skip
# What each column of COLUMNS should hold as a typed source holds it (ids get the row's number), now and then odd.
TYPED_PLAUSIBLE = [
    st.sampled_from(["p", " q", "r "]),
    st.one_of(st.integers(0, 90), st.floats(0, 90), st.sampled_from(["61", " 2.5"])),
    st.sampled_from(["never", "former", "current", None, "NA", " never"]),
    st.one_of(st.floats(10, 40), st.none(), st.just(float("nan")), st.integers(10, 40)),
    st.sampled_from(["yes", "no", " no"]),
    st.sampled_from(["train", "train", "test"]),
]


def typed_row(k: int, fields: tuple[Any, ...], at: int, odd: Any, swap: int) -> tuple[Any, ...]:
    """A plausible row (its id made unique by its number ``k``), one field in eight rows swapped for an odd one."""
    row = [f"{fields[0]}{k}", *fields[1:]]
    if swap == 0:
        row[at] = odd
    return tuple(row)


TYPED_ROWS = st.lists(
    st.tuples(st.tuples(*TYPED_PLAUSIBLE), st.integers(0, 5), TYPED_ODD, st.integers(0, 7)), max_size=8
).map(lambda drawn: [typed_row(k, *row) for k, row in enumerate(drawn)])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=TYPED_ROWS)
def test_fuzz_parquet_and_sqlite_columnar_reader_agrees_with_the_exact_reader(
    tmp_path: Path, rows: list[tuple[Any, ...]]
) -> None:
    """Typed columns as Parquet and SQLite hold them: nulls, NaN, integers and floats, text where numbers are
    expected. A SQLite column takes any mix; a Parquet column is one type (pyarrow's own choice, or text)."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    columns = {}
    for k, name in enumerate(COLUMNS):
        values = [row[k] for row in rows]
        try:
            columns[name] = pa.array(values)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            columns[name] = pa.array([None if v is None else str(v) for v in values], pa.string())
    pq.write_table(pa.table(columns), tmp_path / "p.parquet", row_group_size=3)
    either_reader(DataSource("parquet", path=tmp_path / "p.parquet", **COMMON), SCHEMA)
    with sqlite3.connect(tmp_path / "h.db") as connection:
        connection.execute("DROP TABLE IF EXISTS patients")  # tmp_path is the same for every example
        connection.execute(f"CREATE TABLE patients ({', '.join(COLUMNS)})")
        connection.executemany("INSERT INTO patients VALUES (?, ?, ?, ?, ?, ?)", rows)
    either_reader(DataSource("sql", url=f"sqlite:///{tmp_path / 'h.db'}", table="patients", **COMMON), SCHEMA)


def test_a_clean_source_is_read_column_by_column(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fast reader is what reads a clean source: the exact one is not called."""

    def refuse(*args: Any) -> None:
        raise AssertionError("read line by line")

    monkeypatch.setattr(sources, "_read_by_batches", refuse)
    check_expected(read_source(DataSource("csv", path=write_csv(tmp_path / "p.csv"), **COMMON), SCHEMA))
    check_expected(read_source(DataSource("parquet", path=write_parquet(tmp_path / "p.parquet"), **COMMON), SCHEMA))
    url = write_sqlite(tmp_path / "h.db")
    check_expected(read_source(DataSource("sql", url=url, table="patients", **COMMON), SCHEMA))


def test_a_quoted_line_end_past_the_first_mebibyte_is_read_as_the_csv_module_reads_it(tmp_path: Path) -> None:
    """pyarrow is told to look for line ends in quotes where the file holds a quote, wherever it is (past its first
    blocks here), so the record is the csv module's, not two halves."""
    from ppsvm.data import columnar

    rows = [f"r{k},{k % 7},{1 + k % 3}" for k in range(120_000)]  # about 1.3 MB without a quote
    path = write_csv(tmp_path / "late.csv", [], ("id", "f1", "f2"))
    path.write_text("id,f1,f2\n" + "\n".join(rows) + '\n"late\nid",8,9\n', encoding="utf-8")
    cell = columnar.read_source(sources.cell_file(path), None, 1 << 20)
    assert_same_cell(cell, sources._read_by_batches(sources.cell_file(path), None, 1 << 20, False))
    assert cell.train_ids[-1] == "late\nid" and len(cell.train_ids) == 120_001
