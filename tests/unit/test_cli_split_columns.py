"""``--cols`` of ``ppsvm split`` and ``ppsvm demo``: a count of contiguous column blocks, or each block's features
by name (``age,sex:bp,chol`` or ``@FILE``), every feature in exactly one block."""

from __future__ import annotations

import csv
import json
import tomllib
from pathlib import Path

import numpy as np
import pytest

from ppsvm.cli import build_parser, main
from ppsvm.cli_arguments import column_blocks_from_arg
from ppsvm.data.partition import column_layout, named_feature_blocks
from ppsvm.errors import ConfigError

FEATURES = ("age", "sex", "bp", "chol")


def test_a_whole_number_is_the_count_of_contiguous_blocks() -> None:
    assert column_blocks_from_arg("3") == 3
    assert column_blocks_from_arg(" 2 ") == 2
    assert column_layout(2, FEATURES) == (2, None)


def test_names_make_blocks_separated_by_colons() -> None:
    assert column_blocks_from_arg("age,sex:bp,chol") == (("age", "sex"), ("bp", "chol"))
    assert column_blocks_from_arg(" age , chol : sex,bp ") == (("age", "chol"), ("sex", "bp"))
    assert column_blocks_from_arg("age,sex,bp,chol") == (("age", "sex", "bp", "chol"),)
    cols, blocks = column_layout((("chol", "age"), ("sex",), ("bp",)), FEATURES)
    assert cols == 3 and blocks is not None
    assert [block.tolist() for block in blocks] == [[3, 0], [1], [2]]


def test_a_file_holds_one_block_per_line(tmp_path: Path) -> None:
    path = tmp_path / "blocks.txt"
    path.write_text('# hospital A\nage, chol\n\n  \n"sex","b,p"\n# the end\n', encoding="utf-8")
    assert column_blocks_from_arg(f"@{path}") == (("age", "chol"), ("sex", "b,p"))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("age,,sex:bp,chol", "column block 0 has an empty feature name"),
        ("age,sex:", "column block 1 has an empty feature name"),
        ("age,sex::bp,chol", "column block 1 has an empty feature name"),
        ("", "column block 0 has an empty feature name"),
    ],
)
def test_an_empty_block_or_name_is_refused(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as error:
        column_blocks_from_arg(text)
    assert "e.g. --cols age,sex:bp,chol" in str(error.value)


def test_a_file_that_is_missing_empty_or_has_an_empty_name_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"--cols: cannot read .*absent\.txt"):
        column_blocks_from_arg(f"@{tmp_path / 'absent.txt'}")
    empty = tmp_path / "empty.txt"
    empty.write_text("# nothing yet\n\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"empty\.txt names no column block"):
        column_blocks_from_arg(f"@{empty}")
    gap = tmp_path / "gap.txt"
    gap.write_text("age,sex\nbp,,chol\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"gap\.txt line 2 has an empty feature name"):
        column_blocks_from_arg(f"@{gap}")


def test_unknown_repeated_and_left_out_names_are_named_with_the_features() -> None:
    with pytest.raises(ConfigError) as error:
        named_feature_blocks(FEATURES, [["age", "agee", "sex"], ["sex", "bp", "height"]])
    message = str(error.value)
    assert "unknown feature(s) 'agee', 'height'" in message
    assert "'sex' named more than once" in message
    assert "'chol' in no column block" in message
    assert message.endswith("the dataset's features: age, sex, bp, chol")
    # Twice in one block is as wrong as in two.
    with pytest.raises(ConfigError, match="'age' named more than once"):
        named_feature_blocks(FEATURES, [["age", "age", "sex"], ["bp", "chol"]])
    with pytest.raises(ConfigError, match="at least one feature"):
        named_feature_blocks(FEATURES, [["age", "sex", "bp", "chol"], []])


def test_split_and_demo_share_the_option() -> None:
    parser = build_parser(reproduce_targets=False)
    split = parser.parse_args(["split", "data.csv", "--rows", "2", "--cols", "age,sex:bp,chol", "--out", "o"])
    demo = parser.parse_args(["demo", "--cols", "@blocks.txt"])
    assert (split.cols, demo.cols) == ("age,sex:bp,chol", "@blocks.txt")
    assert column_blocks_from_arg(parser.parse_args(["demo"]).cols) == 2


def write_visits(path: Path) -> None:
    rng = np.random.default_rng(3)
    lines = ["id,age,sex,bp,chol,outcome"]
    for k in range(40):
        age, bp, chol = rng.random(3).round(4)
        lines.append(f"p{k},{age},{'fm'[k % 2]},{bp},{chol},{'sick' if age > bp else 'well'}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def split_args(data: Path, out: Path, cols: str) -> list[str]:
    return [
        "-q", "split", str(data), "--header", "--id-column", "id", "--label", "outcome", "--positive", "sick",
        "--rows", "2", "--cols", cols, "--out", str(out),
    ]  # fmt: skip


def cell_header(split_dir: Path, entity: str) -> list[str]:
    config = tomllib.loads((split_dir / f"{entity}.toml").read_text(encoding="utf-8"))
    with (split_dir / config["entity"]["data"]).open(newline="", encoding="utf-8") as handle:
        return next(csv.reader(handle))


def test_split_by_names_puts_the_named_columns_in_each_cell(tmp_path: Path) -> None:
    data = tmp_path / "visits.csv"
    write_visits(data)
    blocks = tmp_path / "blocks.txt"
    blocks.write_text("# what each organisation records\nchol,age\nsex,bp\n", encoding="utf-8")
    for cols, out in (("chol,age:sex,bp", tmp_path / "inline"), (f"@{blocks}", tmp_path / "file")):
        assert main(split_args(data, out, cols)) == 0
        for i in range(2):
            assert cell_header(out, f"r{i}c0") == ["id", "label", "split", "chol", "age"]
            assert cell_header(out, f"r{i}c1") == ["id", "label", "split", "sex", "bp"]
        manifest = json.loads((out / "split.json").read_text(encoding="utf-8"))
        assert manifest["options"]["column_blocks"] == "given"
        assert [block["features"] for block in manifest["column_blocks"]] == [["chol", "age"], ["sex", "bp"]]


def test_split_names_a_bad_block_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "visits.csv"
    write_visits(data)
    out = tmp_path / "out"
    assert main(split_args(data, out, "age,bmi:sex,bp")) == 1
    error = capsys.readouterr().err
    assert "unknown feature(s) 'bmi'" in error and "'chol' in no column block" in error, error
    assert "the dataset's features: age, sex, bp, chol" in error
    assert not out.exists() or not any(out.iterdir())
