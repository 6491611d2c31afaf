"""Reading raw benchmark files: the real UCI files and every error path."""

from __future__ import annotations

import argparse
import csv
import gzip
import importlib
import logging
import re
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from ppsvm.cli_arguments import add_dataset_arguments, dataset_options_from_args
from ppsvm.data import dataset
from ppsvm.data.dataset import MAX_REPORTED_PROBLEMS, DatasetOptions, load_dataset
from ppsvm.data.shipped import SHIPPED_DATA
from ppsvm.errors import ConfigError, DataError
from ppsvm.experiments.adult import ADULT_FILE


@pytest.fixture
def dataset_path(tmp_path: Path) -> Callable[[str], Path]:
    """A UCI file as ppsvm ships it: in ppsvm/data/bundled, or Adult unpacked from the experiments' gzip."""

    def locate(name: str) -> Path:
        if name == "adult.data":
            path = tmp_path / name
            path.write_bytes(gzip.decompress(ADULT_FILE.read_bytes()))
            return path
        return SHIPPED_DATA / name

    return locate


def write(tmp_path: Path, text: str, name: str = "data.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# --- the real benchmark files -------------------------------------------------------------


def test_wdbc(dataset_path: Callable[[str], Path]) -> None:
    path = dataset_path("wdbc.data")
    importlib.import_module("ppsvm.data.columnar")  # pyarrow, imported by a first load_dataset: not timed here
    start = time.perf_counter()
    data = load_dataset(path, DatasetOptions(label=1, positive="M", drop=(0,), id_column=0))
    assert time.perf_counter() - start < 0.5
    assert data.X.shape == (569, 30)
    assert data.X.dtype == np.float64 and np.isfinite(data.X).all()
    assert int((data.y == 1).sum()) == 212 and set(data.y) == {-1.0, 1.0}
    assert data.ids[0] == "842302" and len(set(data.ids)) == 569
    assert data.feature_names[:2] == ("x2", "x3") and len(data.feature_names) == 30
    assert data.source == str(path)
    assert data.X[0, 0] == 17.99


def test_cleveland_refuses_missing_values_by_default(dataset_path: Callable[[str], Path]) -> None:
    path = dataset_path("processed.cleveland.data")
    with pytest.raises(DataError, match=r"line 88, column 12: missing value '\?'") as caught:
        load_dataset(path, DatasetOptions(negative="0"))
    assert str(path) in str(caught.value) and "--missing drop" in str(caught.value)


def test_cleveland_drop_missing(dataset_path: Callable[[str], Path], caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        data = load_dataset(dataset_path("processed.cleveland.data"), DatasetOptions(negative="0", missing="drop"))
    assert data.X.shape == (297, 13)
    assert int((data.y == 1).sum()) == 137
    assert "dropped 6 of 303 rows" in caplog.text
    # Default ids are data row numbers counted before dropping, so they stay stable.
    assert "87" not in set(data.ids) and data.ids[-1] == "301"  # line 303 has a "?"


def test_ionosphere(dataset_path: Callable[[str], Path]) -> None:
    data = load_dataset(dataset_path("ionosphere.data"), DatasetOptions(label=-1, positive="g"))
    assert data.X.shape == (351, 34)
    assert int((data.y == 1).sum()) == 225


def test_pima_numeric_zero_one_labels(dataset_path: Callable[[str], Path]) -> None:
    data = load_dataset(dataset_path("pima-indians-diabetes.data"), DatasetOptions())
    assert data.X.shape == (768, 8)
    assert int((data.y == 1).sum()) == 268 and int((data.y == -1).sum()) == 500


def test_bupa(dataset_path: Callable[[str], Path]) -> None:
    path = dataset_path("bupa.data")
    data = load_dataset(path, DatasetOptions(label=-1, positive="2"))
    assert data.X.shape == (345, 6)
    assert int((data.y == 1).sum()) == 200
    with pytest.raises(DataError, match=r"'1' \(145\), '2' \(200\).*--positive"):
        load_dataset(path, DatasetOptions())


def test_adult_names_the_string_column(dataset_path: Callable[[str], Path]) -> None:
    with pytest.raises(DataError, match=r"(?s)line 1, column 1: non-numeric feature value 'State-gov'.*--drop 1,3,"):
        load_dataset(dataset_path("adult.data"), DatasetOptions(positive=">50K"))


# --- parsing ------------------------------------------------------------------------------


def test_whitespace_blank_lines_and_header(tmp_path: Path) -> None:
    path = write(tmp_path, "id, a , b, cls\n\nr1, 1.5, 2, yes\n  \nr2 ,3,4e-3 , no\n\n")
    data = load_dataset(path, DatasetOptions(label="cls", positive="yes", id_column="id", header=True))
    assert data.feature_names == ("a", "b")
    assert data.ids.tolist() == ["r1", "r2"] and data.ids.dtype.kind == "U"
    np.testing.assert_array_equal(data.X, [[1.5, 2.0], [3.0, 4e-3]])
    np.testing.assert_array_equal(data.y, [1.0, -1.0])


def test_drop_by_name_and_negative_label_index(tmp_path: Path) -> None:
    path = write(tmp_path, "a,b,c,y\n1,2,3,-1\n4,5,6,1\n")
    data = load_dataset(path, DatasetOptions(label=-1, drop=("b",), header=True))
    assert data.feature_names == ("a", "c")
    np.testing.assert_array_equal(data.X, [[1, 3], [4, 6]])
    np.testing.assert_array_equal(data.y, [-1, 1])
    assert data.ids.tolist() == ["0", "1"]


def test_negative_class_value(tmp_path: Path) -> None:
    path = write(tmp_path, "1,0\n2,3\n3,1\n")
    data = load_dataset(path, DatasetOptions(negative="0"))
    np.testing.assert_array_equal(data.y, [-1, 1, 1])


def test_regression_targets(tmp_path: Path) -> None:
    path = write(tmp_path, "1,0.25\n2,-3e2\n")
    data = load_dataset(path, DatasetOptions(task="regress"))
    np.testing.assert_array_equal(data.y, [0.25, -300.0])


def test_impute_leaves_missing_values_to_the_split(tmp_path: Path) -> None:
    path = write(tmp_path, "1,?,1\n3,4,0\n,8,1\n")
    data = load_dataset(path, DatasetOptions(missing="impute"))
    np.testing.assert_array_equal(np.isnan(data.X), [[False, True], [False, False], [True, False]])
    np.testing.assert_array_equal(data.X[~np.isnan(data.X)], [1, 3, 4, 8])


@pytest.mark.parametrize("token", ["NA", "NaN", "nan", "null", "N/A", "?", ""])
def test_common_missing_spellings(tmp_path: Path, token: str) -> None:
    path = write(tmp_path, f"1,2,1\n3,{token},0\n")
    with pytest.raises(DataError, match=rf"line 2, column 1: missing value '{re.escape(token)}'"):
        load_dataset(path, DatasetOptions())
    assert np.isnan(load_dataset(path, DatasetOptions(missing="impute")).X[1, 1])
    custom = DatasetOptions(missing="impute", missing_values=("", "-999"))
    if token:
        with pytest.raises(DataError, match=rf"non-numeric feature value '{re.escape(token)}'|non-finite"):
            load_dataset(path, custom)
    assert np.isnan(load_dataset(write(tmp_path, "1,2,1\n3,-999,0\n", "b.csv"), custom).X[1, 1])


def test_a_header_line_is_recognised_and_every_problem_reported_at_once(tmp_path: Path) -> None:
    rows = ["age,glucose,bmi,outcome"] + [f"{30 + k},{'NA' if k == 2 else 90 + k},x{k},1" for k in range(30)]
    path = write(tmp_path, "\n".join(rows) + "\n", "hospital.csv")
    with pytest.raises(DataError) as raised:
        load_dataset(path, DatasetOptions(missing="impute"))
    message = str(raised.value)
    assert "line 1 looks like a header ('age', 'glucose', 'bmi', ...): pass --header" in message
    # line 1's three names, then bmi's text on every line, capped: 20 listed and a count of the rest.
    assert f"more than {MAX_REPORTED_PROBLEMS} problem(s)" in message and "... and 13 more" in message
    assert message.count("non-numeric feature value") == MAX_REPORTED_PROBLEMS
    assert "drop the column with --drop 2 " in message and "'NA'" not in message.split("\n")[1]


# --- errors: each names the file, the line and the column ----------------------------------


def test_missing_value_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "a,b,y\n1,2,1\n3,,0\n", "m.csv")
    with pytest.raises(DataError, match=r"m\.csv, line 3, column 1 \('b'\): missing value ''"):
        load_dataset(path, DatasetOptions(header=True))


def test_missing_label_is_an_error_unless_dropped(tmp_path: Path) -> None:
    path = write(tmp_path, "1,1\n2,?\n3,0\n")
    for policy in ("refuse", "impute"):
        with pytest.raises(DataError, match=r"line 2, column 1: missing label '\?'"):
            load_dataset(path, DatasetOptions(missing=policy))
    assert load_dataset(path, DatasetOptions(missing="drop")).ids.tolist() == ["0", "2"]


# One malformed file each: the DataError names the line, the column and the value at fault.
@pytest.mark.parametrize(
    ("text", "options", "message"),
    [
        pytest.param(
            "1,2,1\n3,abc,0\n",
            DatasetOptions(),
            r"(?s)line 2, column 1: non-numeric feature value 'abc'.*drop the column with --drop 1 ",
            id="non_numeric_feature",
        ),
        pytest.param(
            "1,2,1\n\n3,4,5,0\n", DatasetOptions(), r"line 3: 4 fields, but line 1 has 3", id="inconsistent_field_count"
        ),
        pytest.param(
            "a,1,1\nb,2,0\na,3,1\n",
            DatasetOptions(id_column=0),
            r"line 3, column 0: duplicate record id 'a' \(also on line 1\)",
            id="duplicate_ids_name_both_lines",
        ),
        pytest.param(
            "1,a\n2,b\n3,a\n",
            DatasetOptions(),
            r"2 distinct values \('a' \(2\), 'b' \(1\)\).*--positive",
            id="ambiguous_labels_listed",
        ),
        pytest.param(
            "1,B\n2,M\n",
            DatasetOptions(positive="X"),
            r"no value 'X' \(the positive class\); values found: 'B' \(1\), 'M' \(1\)",
            id="positive_value_must_occur",
        ),
        pytest.param(
            "1,0.5\n2,high\n",
            DatasetOptions(task="regress"),
            r"line 2, column 1: regression target 'high' is not a number",
            id="bad_regression_target",
        ),
    ],
)
def test_malformed_file(tmp_path: Path, text: str, options: DatasetOptions, message: str) -> None:
    with pytest.raises(DataError, match=message):
        load_dataset(write(tmp_path, text), options)


@pytest.mark.parametrize("value", ["inf", "-Infinity"])
def test_non_finite_feature(tmp_path: Path, value: str) -> None:
    path = write(tmp_path, f"1,2,1\n{value},4,0\n")
    with pytest.raises(DataError, match=rf"line 2, column 0: non-finite feature value '{value}'"):
        load_dataset(path, DatasetOptions())


@pytest.mark.parametrize("text", ["", "\n\n", "a,b,y\n"])
def test_empty_file(tmp_path: Path, text: str) -> None:
    with pytest.raises(DataError, match="no data rows"):
        load_dataset(write(tmp_path, text), DatasetOptions(header=bool(text.strip())))


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="cannot read"):
        load_dataset(tmp_path / "absent.csv", DatasetOptions())


def _peak_bytes(read: Callable[[], object]) -> int:
    """Peak Python memory while ``read`` runs (its DataError, if any, swallowed)."""
    tracemalloc.start()
    try:
        read()
    except DataError:
        pass
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def test_a_line_longer_than_the_limit_is_named_and_never_read_whole(tmp_path: Path) -> None:
    """A 3 MB third line (what a 2 GB one is, scaled down) against a 64 KiB limit: the error names the file and the
    line, and reading never held the line. Control: the csv module alone, as load_dataset used it before, holds five
    times the line (a row of 1.5 million fields), which for a 2 GB line ends in MemoryError."""
    path = write(tmp_path, "1,2,1\n3,4,0\n" + "5," * 1_500_000 + "1\n", name="long.csv")
    with pytest.raises(DataError, match=rf"{path}, line 3 is longer than 65,536 characters"):
        load_dataset(path, DatasetOptions(), max_line_chars=1 << 16)
    by_lines = _peak_bytes(lambda: dataset._load_lines(path, str(path), DatasetOptions(), 1 << 16))
    assert by_lines < 1 << 20
    # Before it, the column reader's text scan declines the file: it holds a block of 16 MiB (and a copy of the
    # last, shorter one), whatever the length of a line.
    assert _peak_bytes(lambda: load_dataset(path, DatasetOptions(), max_line_chars=1 << 16)) < by_lines + (33 << 20)

    def unbounded() -> list[list[str]]:
        with path.open(newline="") as handle:
            return list(csv.reader(handle))

    assert _peak_bytes(unbounded) > path.stat().st_size


def test_the_default_line_limit_is_1_mib(tmp_path: Path) -> None:
    path = write(tmp_path, "1,2,1\n" + "7" * (1 << 20) + ",1,0\n")
    with pytest.raises(DataError, match=r"line 2 is longer than 1,048,576 characters"):
        load_dataset(path, DatasetOptions())
    short = write(tmp_path, "1,2,1\n0." + "7" * 100_000 + ",1,0\n", name="short.csv")
    assert load_dataset(short, DatasetOptions()).X.shape == (2, 2)


def test_single_class(tmp_path: Path) -> None:
    path = write(tmp_path, "1,M\n2,M\n")
    with pytest.raises(DataError, match="every record has label 'M'"):
        load_dataset(path, DatasetOptions(positive="M"))
    with pytest.raises(DataError, match=r"1 distinct values"):
        load_dataset(write(tmp_path, "1,1\n2,1\n"), DatasetOptions())


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (DatasetOptions(label=5), r"label column 5 is out of range: the file has 3 columns"),
        (DatasetOptions(label="y"), r"label column 'y' is a name, but the file has no header"),
        (DatasetOptions(drop=(2,)), r"column 2 is both the label and a dropped column"),
        (DatasetOptions(id_column=-1), r"column 2 is both the label and the id column"),
        (DatasetOptions(drop=(0, 1)), r"no feature columns left"),
    ],
)
def test_bad_column_references(tmp_path: Path, options: DatasetOptions, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_dataset(write(tmp_path, "1,2,1\n3,4,0\n"), options)


def test_contradictory_options() -> None:
    with pytest.raises(ConfigError, match="not both"):
        DatasetOptions(positive="1", negative="0")
    with pytest.raises(ConfigError, match="classification only"):
        DatasetOptions(task="regress", positive="1")
    with pytest.raises(ConfigError, match="delimiter"):
        DatasetOptions(delimiter=", ")


# --- command line -------------------------------------------------------------------------


def test_arguments_build_options() -> None:
    parser = argparse.ArgumentParser()
    add_dataset_arguments(parser)
    args = parser.parse_args(
        ["--label", "1", "--positive", "M", "--drop", "0,id", "--drop", "-2", "--id-column", "0", "--missing", "drop"]
    )
    options = dataset_options_from_args(args, "classify")
    assert options == DatasetOptions(
        label=1, positive="M", drop=(0, "id", -2), id_column=0, missing="drop", task="classify"
    )
    defaults = dataset_options_from_args(parser.parse_args([]), "regress")
    assert defaults == DatasetOptions(task="regress")
    with pytest.raises(SystemExit):
        parser.parse_args(["--positive", "1", "--negative", "0"])


def test_a_long_list_of_problems_still_counts_and_orders_the_missing_values(tmp_path: Path) -> None:
    # 30 text values in column 1 (20 listed, 10 counted) and one refused missing value in column 2.
    rows = [f"{k},x{k},{'?' if k == 3 else 2},1" for k in range(30)]
    path = write(tmp_path, "\n".join(rows) + "\n", "many.csv")
    with pytest.raises(DataError) as raised:
        load_dataset(path, DatasetOptions())
    lines = str(raised.value).splitlines()
    assert lines[0].endswith(f"more than {MAX_REPORTED_PROBLEMS + 1} problem(s):")
    assert lines[MAX_REPORTED_PROBLEMS + 1].strip() == "... and 10 more"
    assert "line 4, column 2: missing value '?'" in lines[MAX_REPORTED_PROBLEMS + 2]


@pytest.mark.parametrize(
    ("text", "classes", "codes"),
    [
        ("1,b\n2,c\n3,a\n4,b\n", ("a", "b", "c"), [1, 2, 0, 1]),
        # Numbers by value, not as text: 10 after 2.
        ("1,10\n2,2\n3,1\n4,2\n", ("1", "2", "10"), [2, 1, 0, 1]),
    ],
)
def test_three_or_more_labels_are_classes_by_code(
    tmp_path: Path, text: str, classes: tuple[str, ...], codes: list[int]
) -> None:
    path = tmp_path / "d.csv"
    path.write_text(text)
    data = load_dataset(path, DatasetOptions())
    assert data.classes == classes and data.label_values is None
    assert data.y.tolist() == codes
    # Naming a class makes it one against the rest, as before.
    binary = load_dataset(path, DatasetOptions(positive=classes[0]))
    assert binary.classes is None and sorted(set(binary.y.tolist())) == [-1.0, 1.0]
