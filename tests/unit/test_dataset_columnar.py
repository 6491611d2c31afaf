"""load_dataset's two readers: column by column (pyarrow) where it can vouch for a file, else line by line.

The column reader returns the line reader's dataset bit for bit or declines (NotColumnar); an error it raises
itself is the line reader's, word for word. Every file with a problem still gets today's message.
"""

from __future__ import annotations

import math
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ppsvm.data import columnar, dataset
from ppsvm.data.dataset import Dataset, DatasetOptions, load_dataset
from ppsvm.errors import ConfigError, DataError

LIMIT = 1 << 20

# Spellings of numbers both readers take, and fields they might read apart: padding, quotes (also after a space),
# missing-value tokens with and without padding, what float() takes and pyarrow does not, and the reverse.
NUMBERS = ["1", "-2.5", "+3", ".5", "5.", "1e3", "1E-3", "-0", "007", "0.30000000000000004", "1e300", "4.9e-324"]
ODD = [
    " 4", "4 ", "\t4", '"7"', ' "7"', '"7" ', '"-0"', '""', '"8', "1_000", "0x1", "1e400", "1e-400", "inf", "-Infinity",
    "nan", "NaN", "١", "1e", "abc", "NA", " NA", '"NA"', "", " ", "?", "-999", "é", '"a,b"', ' "a,b"', '"x\ny"',
    '"x\r\ny"', "\x00", "12345678901234567890123",
]  # fmt: skip
LABELS = {  # the usual values of each labelling first, then what may be wrong
    "numbers": ["1", "0", "1", " 0", '"1"', "-1", "yes", "NA", "?", "", "1.0"],
    "words": ["yes", "no", " yes", '"no"', "maybe", ' "no"', "NA", "", "1"],
    "regress": ["0.5", "-2", "1e3", " 2", '"3"', "-0", "NA", "?", "", "x", "inf"],
}
IDS = ["a", "b", " c", "é", '"e"', '"f,g"', "i\t", ' "h"', "NA", "", '"j\nk"']


@st.composite
def files(draw: st.DrawFn) -> tuple[bytes, DatasetOptions]:
    """A delimited file and the options it is read with: each field now and then a tricky one, so that a file
    holds none (and both readers read it), or one or two that one of them might read otherwise."""
    task = draw(st.sampled_from(["classify", "regress"]))
    chosen = draw(st.sampled_from([None, None, "yes", "no"])) if task == "classify" else None
    labels = LABELS["regress" if task == "regress" else "numbers" if chosen is None else "words"]
    n_features = draw(st.integers(1, 3))
    with_id, with_drop, header = draw(st.booleans()), draw(st.booleans()), draw(st.booleans())
    names = (["id"] if with_id else []) + (["note"] if with_drop else []) + [f"f{k}" for k in range(n_features)]
    names.append("y")
    odds = draw(st.sampled_from([0, 16, 64]))  # one field in this many tricky (none at 0)

    def field(usual: list[Any], tricky: list[Any]) -> Any:
        return draw(st.sampled_from(tricky if odds and draw(st.integers(1, odds)) == 1 else usual))

    rows = []
    for k in range(draw(st.integers(1, 8))):
        fields = [field([f"r{k}", f" s{k}", f'"t{k}"', f"é{k}"], IDS)] if with_id else []
        if with_drop:
            fields.append(field(["n", "", '"n,1"', "é"], [' "n,2"', '"n\n3"', " n"]))
        fields += [field(NUMBERS, ODD) for _ in range(n_features)]
        fields.append(field(labels[:5], labels))
        rows.append(",".join(fields))
        if draw(st.integers(0, 9)) == 0:
            rows.append(field(["", ","], [" ", '""']))  # a blank line, or one that is not
        if odds and draw(st.integers(0, 29)) == 0:
            rows.append(",".join(fields[:-1]))  # a field short
    if header:
        rows.insert(0, ",".join(field([names, [f'"{name}"' for name in names]], [names[:-1] + ["f0"]])))
    end = draw(st.sampled_from(["\n", "\r\n"]))
    text = end.join(rows) + draw(st.sampled_from([end, ""]))
    bom = draw(st.sampled_from([b"", b"\xef\xbb\xbf"]))
    sign = draw(st.sampled_from(["positive", "negative"]))
    options = DatasetOptions(
        label=draw(st.sampled_from([-1, "y"] if header else [-1, len(names) - 1])),
        task=task,
        **({sign: chosen} if chosen is not None else {}),
        drop=(1 if with_id else 0,) if with_drop else (),
        id_column=draw(st.sampled_from([0, "id"] if header else [0])) if with_id else None,
        missing=draw(st.sampled_from(["refuse", "drop", "impute"])),
        missing_values=field(
            [dataset.DEFAULT_MISSING_VALUES, ("", "?", "NA")], [("", "-999"), ("NA ",), ("?", "nan"), ()]
        ),
        header=header,
    )
    return bom + text.encode("utf-8"), options


def outcome(read: Any) -> Dataset | str:
    """What a reader gives: its dataset, or its error's kind and message."""
    try:
        result: Dataset = read()
    except (DataError, ConfigError) as error:
        return f"{type(error).__name__}: {error}"
    return result


def assert_same(got: Dataset | str, want: Dataset | str) -> None:
    """The same error, or the same dataset bit for bit (ids and their dtype, -0.0 and NaN's bits too)."""
    if isinstance(want, str) or isinstance(got, str):
        assert got == want
        return
    assert got.ids.dtype == want.ids.dtype and got.ids.tolist() == want.ids.tolist()
    for name in ("X", "y"):
        a, b = getattr(got, name), getattr(want, name)
        assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes(), name
    assert got.feature_names == want.feature_names and got.source == want.source
    assert got.label_values == want.label_values and got.classes == want.classes


def both_readers(path: Path, options: DatasetOptions) -> bool:
    """Whether the column reader read the file (and, then, to the line reader's dataset or error)."""
    want = outcome(lambda: dataset._load_lines(path, str(path), options, LIMIT))
    assert_same(outcome(lambda: load_dataset(path, options, max_line_chars=LIMIT)), want)
    try:
        got = outcome(lambda: dataset._load_columns(path, str(path), options, LIMIT))
    except columnar.NotColumnar:
        return False
    assert_same(got, want)
    return True


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=files())
def test_fuzz_the_column_reader_agrees_with_the_line_reader(tmp_path: Path, case: tuple[bytes, DatasetOptions]) -> None:
    data, options = case
    path = tmp_path / "fuzz.csv"
    path.write_bytes(data)
    both_readers(path, options)


def test_tricky_valid_files_are_read_column_by_column(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Quotes, padding, a byte-order mark, CRLF, blank lines, missing values, text labels, ids: read by pyarrow."""
    text = (
        '\ufeff"id", "a" ,b,"c,d",cls\r\n\r\n'
        'r1, 1.5, -2e-3 ,"x, y",yes\r\n'
        ' r2 ,"3",NA,z, no\r\n'
        'r3,-0,"4.9e-324",z,"yes"\r\n'
        "r4,.5,7.,,no\r\n"
    )
    path = tmp_path / "t.csv"
    path.write_bytes(text.encode("utf-8"))
    options = DatasetOptions(label="cls", positive="yes", id_column="id", drop=("c,d",), header=True, missing="impute")
    want = dataset._load_lines(path, str(path), options, LIMIT)
    got = dataset._load_columns(path, str(path), options, LIMIT)
    assert_same(got, want)
    assert got.ids.tolist() == ["r1", "r2", "r3", "r4"] and got.feature_names == ("a", "b")
    assert math.copysign(1.0, got.X[2, 0]) == -1.0 and got.X[2, 1] == 5e-324 and np.isnan(got.X[1, 1])

    def refuse(*args: Any) -> None:
        raise AssertionError("read line by line")

    monkeypatch.setattr(dataset, "_load_lines", refuse)
    assert_same(load_dataset(path, options), want)
    plain = tmp_path / "p.csv"
    plain.write_text("1,2,0\n3,4,1\n5,6,1\n")
    assert load_dataset(plain, DatasetOptions(missing="drop")).y.tolist() == [-1.0, 1.0, 1.0]


@pytest.mark.parametrize(
    "value",
    [
        "0.1", "-0", "1e-320", "2.2250738585072011e-308", "9007199254740993", "1.7976931348623157e308",
        "0.30000000000000004", "123456789012345678901234567890e-30", "1." + "7" * 100_000, "+.5e+5", "00.0100",
    ],
)  # fmt: skip
def test_pyarrow_parses_numbers_as_float_does(tmp_path: Path, value: str) -> None:
    """Hard decimals (halfway cases, subnormals, 100,000 digits) become float()'s float64, bit for bit."""
    path = tmp_path / "n.csv"
    path.write_text(f"{value},1\n{value},0\n")
    got = dataset._load_columns(path, str(path), DatasetOptions(), LIMIT)
    assert struct.pack("<d", got.X[0, 0]) == struct.pack("<d", float(value))


@pytest.mark.parametrize(
    "value", ["1_000", "١", "\u20001", "\xa01", "0x10", "1d5", "nan", "inf", "-Infinity", "1e", " NA", "1\x0b"]
)
def test_what_float_and_pyarrow_might_read_apart_is_read_line_by_line(tmp_path: Path, value: str) -> None:
    path = tmp_path / "odd.csv"
    path.write_text(f"{value},1\n2,0\n", encoding="utf-8")
    with pytest.raises(columnar.NotColumnar):
        dataset._load_columns(path, str(path), DatasetOptions(missing="impute", missing_values=("NA",)), LIMIT)
    both_readers(path, DatasetOptions(missing="impute", missing_values=("NA",)))


# Today's message for each kind of problem, word for word, whichever reader meets it first: the file ({p}) and the
# options it is read with, then the message. A text column's hint:
DROP = (
    "drop the column with --drop 1 or encode it as numbers (missing values are spelt '', '?', 'NA', 'N/A', 'NaN', "
    "'nan', 'null', 'NULL', 'None' unless --missing-values says otherwise)"
)
PROBLEMS: dict[str, tuple[bytes, DatasetOptions]] = {
    "non_numeric": (b"a,b,y\n1,2,1\n3,x,0\n", DatasetOptions(header=True)),
    "non_finite": (b"1,2,1\ninf,4,0\n", DatasetOptions()),
    "header_hint": (b"\xef\xbb\xbfx,y,z\r\n1,2,1\r\n3,4,0\r\n", DatasetOptions()),
    "missing_refused": (b"1,2,1\n3,NA,0\n5,,1\n", DatasetOptions()),
    "missing_label": (b"1,2,1\n3,4,?\n", DatasetOptions(missing="impute")),
    "duplicate_id": (b"a,1,1\nb,2,0\na,3,1\n", DatasetOptions(id_column=0)),
    "missing_id": (b"a,1,1\nNA,2,0\n", DatasetOptions(id_column=0)),
    "fields": (b"1,2,1\n\n3,4,5,0\n", DatasetOptions()),
    "fields_header": (b"a,b,y\n1,2\n", DatasetOptions(header=True)),
    "open_quote": (b'1,2,1\n3,"4,0\n', DatasetOptions()),
    "quoted_after_a_space": (b'1, "2,3",1\n4,5,0\n', DatasetOptions()),
    "two_texts_unsigned": (b"1,a\n2,b\n3,a\n", DatasetOptions()),
    "too_many_classes": (b"".join(b"%d,c%d\n" % (k, k) for k in range(101)), DatasetOptions()),
    "positive_absent": (b"1,B\n2,M\n", DatasetOptions(positive="X")),
    "one_class": (b"1,M\n2,M\n", DatasetOptions(positive="M")),
    "regression_target": (b"1,0.5\n2,high\n", DatasetOptions(task="regress")),
    "regression_inf": (b"1,0.5\n2,inf\n", DatasetOptions(task="regress")),
    "not_utf8": (b"1,2,1\n3,\xff,0\n", DatasetOptions()),
    "field_over_the_csv_limit": (b"1,2,1\n3," + b"4" * 140_000 + b",0\n", DatasetOptions()),
    "name": (b"a,,y\n1,2,1\n", DatasetOptions(header=True)),
    "repeated_name": (b"a,a,y\n1,2,1\n", DatasetOptions(header=True)),
    "no_rows": (b"a,b,y\n\n", DatasetOptions(header=True)),
    "nothing_left": (b"1,?,1\n?,2,0\n", DatasetOptions(missing="drop")),
    "label_out_of_range": (b"1,2,1\n3,4,0\n", DatasetOptions(label=7)),
}
MESSAGES = {
    "non_numeric": "{p}: 1 problem(s):\n  {p}, line 3, column 1 ('b'): non-numeric feature value 'x'\n" + DROP,
    "non_finite": "{p}: 1 problem(s):\n  {p}, line 2, column 0: non-finite feature value 'inf'",
    "header_hint": "{p}: 2 problem(s):\n  {p}, line 1, column 0: non-numeric feature value 'x'\n  {p}, line 1, "
    "column 1: non-numeric feature value 'y'\nline 1 looks like a header ('x', 'y', ...): pass --header",
    "missing_refused": "{p}: 1 problem(s):\n  {p}, line 2, column 1: missing value 'NA' (2 rows have missing values, "
    "in columns 1); pass --missing drop to drop those rows or --missing impute to fill them with each entity's "
    "training means",
    "missing_label": "{p}, line 2, column 2: missing label '?'; fix the file or drop such rows with --missing drop",
    "duplicate_id": "{p}, line 3, column 0: duplicate record id 'a' (also on line 1)",
    "missing_id": "{p}, line 2, column 0: missing record id 'NA'",
    "fields": "{p}, line 3: 4 fields, but line 1 has 3",
    "fields_header": "{p}, line 2: 2 fields, but the header on line 1 has 3",
    "open_quote": "{p}, line 2: 2 fields, but line 1 has 3",
    "quoted_after_a_space": "{p}: 1 problem(s):\n  {p}, line 1, column 1: non-numeric feature value '2,3'\n" + DROP,
    "two_texts_unsigned": "{p}: label column 1 has 2 distinct values ('a' (2), 'b' (1)), not two of -1/1 or 0/1; "
    "pass --positive VALUE (that value -> +1, all others -> -1) or --negative VALUE",
    "too_many_classes": "{p}: label column 1 has 101 distinct values ('c0' (1), 'c1' (1), 'c2' (1), 'c3' (1), "
    "'c4' (1), 'c5' (1), 'c6' (1), 'c7' (1), ...), not two of -1/1 or 0/1; 101 classes are more than one model per "
    "class should fit (at most 100): for a real-valued target pass --task regress; "
    "pass --positive VALUE (that value -> +1, all others -> -1) or --negative VALUE",
    "positive_absent": "{p}: label column 1 has no value 'X' (the positive class); values found: 'B' (1), 'M' (1)",
    "one_class": "{p}: label column 1: every record has label 'M'; a classifier needs two classes",
    "regression_target": "{p}, line 2, column 1: regression target 'high' is not a number",
    "regression_inf": "{p}, line 2, column 1: non-finite regression target 'inf'",
    "not_utf8": "{p}: not UTF-8 text (invalid start byte at byte 8)",
    "field_over_the_csv_limit": "{p}, line 2: field larger than field limit (131072)",
    "name": "{p}, header line: column 1 has no name",
    "repeated_name": "{p}, header line: columns 0 and 1 are both named 'a'",
    "no_rows": "{p}: no data rows (the file is empty or holds only a header)",
    "nothing_left": "{p}: every row has a missing value; nothing is left after dropping them",
    "label_out_of_range": "{p}: label column 7 is out of range: the file has 3 columns (0..2, or -1..-3 from the end)",
}


@pytest.mark.parametrize("case", list(PROBLEMS))
def test_every_problem_gets_todays_message(tmp_path: Path, case: str) -> None:
    data, options = PROBLEMS[case]
    path = tmp_path / "bad.csv"
    path.write_bytes(data)
    kind = "ConfigError" if case == "label_out_of_range" else "DataError"
    assert outcome(lambda: load_dataset(path, options)) == f"{kind}: " + MESSAGES[case].format(p=path)
    both_readers(path, options)


def test_a_long_line_gets_todays_message(tmp_path: Path) -> None:
    path = tmp_path / "long.csv"
    path.write_text("1,2,1\n" + "7" * 2000 + ",1,0\n")
    with pytest.raises(DataError) as raised:
        load_dataset(path, DatasetOptions(), max_line_chars=1000)
    assert str(raised.value) == (
        f"{path}, line 2 is longer than 1,000 characters, longer than any sane record: "
        "is it a text file with one record per line?"
    )
