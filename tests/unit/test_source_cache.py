"""The encoded cell kept beside a data file: used while nothing that decides it changed, never a wrong cell."""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ppsvm.config import load_entity_config
from ppsvm.data import sources
from ppsvm.data.cell_cache import SUFFIX
from ppsvm.data.schema import Feature, Schema
from ppsvm.data.sources import DataSource, load_cell, read_source

from .files import write

CELL = "id,label,split,f1,f2\nr1,1,train,1.5,10\nr2,-1,test,2.5,20\nr3,-1,train,3.0,-5\n"


def cache_of(path: Path) -> Path:
    return path.with_name(path.name + SUFFIX)


def counting_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Each read of a source (columnar or exact) appends its kind: a cache hit appends nothing."""
    from ppsvm.data import columnar

    reads: list[str] = []
    real = columnar.read_source

    def read(source: DataSource, *args: Any) -> Any:
        reads.append(source.kind)
        return real(source, *args)

    monkeypatch.setattr(columnar, "read_source", read)
    return reads


def assert_same(got: Any, want: Any) -> None:
    for name in ("train_ids", "test_ids", "X_train", "X_test", "y_train", "y_test"):
        np.testing.assert_array_equal(getattr(got, name), getattr(want, name), err_msg=name)
    assert got.feature_names == want.feature_names and got.source == want.source


def test_a_second_read_is_a_hit_and_gives_the_same_cell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path / "c.csv", CELL)
    reads = counting_reads(monkeypatch)
    first = load_cell(path, cache=True)
    assert reads == ["csv"] and cache_of(path).exists()
    again = load_cell(path, cache=True)
    assert reads == ["csv"]  # read from the cache, not parsed
    assert_same(again, first)
    assert again.X_train.dtype == np.float64 and again.train_ids.dtype.kind == "U"


def test_the_cache_is_private_to_its_owner(tmp_path: Path) -> None:
    """It holds the records: mode 0600 whatever the umask, like the data ppsvm split writes."""
    path = write(tmp_path / "c.csv", CELL)
    old = os.umask(0o002)
    try:
        load_cell(path, cache=True)
    finally:
        os.umask(old)
    assert stat.S_IMODE(cache_of(path).stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.csv", "c.csv" + SUFFIX]  # no temporary left


def test_a_cache_others_can_write_is_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    path = write(tmp_path / "c.csv", CELL)
    load_cell(path, cache=True)
    cache_of(path).chmod(0o666)
    reads = counting_reads(monkeypatch)
    load_cell(path, cache=True)
    assert reads == ["csv"] and "writable by others" in caplog.text
    assert stat.S_IMODE(cache_of(path).stat().st_mode) == 0o600  # written anew, private


def test_changed_content_of_the_same_size_and_mtime_is_a_miss(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The key is the bytes' hash, not the file's size and modification time."""
    path = write(tmp_path / "c.csv", CELL)
    load_cell(path, cache=True)
    before = path.stat()
    edited = CELL.replace("1.5,10", "1.6,10")
    assert len(edited) == len(CELL)
    path.write_text(edited, encoding="utf-8")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (path.stat().st_size, path.stat().st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    reads = counting_reads(monkeypatch)
    assert load_cell(path, cache=True).X_train[0, 0] == 1.6
    assert reads == ["csv"]
    assert load_cell(path, cache=True).X_train[0, 0] == 1.6 and reads == ["csv"]  # the new cache is used


SCHEMA = Schema((Feature("f1", "number"), Feature("f2", "number", impute=0.0)))


def test_another_schema_or_other_options_are_a_miss(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path / "d.csv", "id,f1,f2\na,1,\nb,2,NA\n")
    source = DataSource("csv", path=path, cache=True)
    reads = counting_reads(monkeypatch)
    assert read_source(source, SCHEMA).X_train[:, 1].tolist() == [0.0, 0.0]
    assert read_source(source, SCHEMA).X_train[:, 1].tolist() == [0.0, 0.0] and reads == ["csv"]
    imputing_five = Schema((Feature("f1", "number"), Feature("f2", "number", impute=5.0)))
    assert read_source(source, imputing_five).X_train[:, 1].tolist() == [5.0, 5.0] and reads == ["csv"] * 2
    # Other missing values: "NA" is no longer one, so the read is refused (and nothing cached is returned).
    only_empty = DataSource("csv", path=path, cache=True, missing_values=frozenset({""}))
    with pytest.raises(sources.DataError, match="line 3, column 'f2': 'NA' is not a number"):
        read_source(only_empty, imputing_five)
    assert read_source(source, imputing_five).X_train[:, 1].tolist() == [5.0, 5.0]  # its cache was kept


@pytest.mark.parametrize(
    "damage",
    [
        "truncate",  # a write cut short
        "flip a payload byte",  # decayed on disk: only the CRC sees it
        "garbage",
        "empty",
        "huge header",
    ],
)
def test_a_damaged_cache_is_a_miss_never_an_error_nor_a_wrong_cell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, damage: str
) -> None:
    path = write(tmp_path / "c.csv", CELL)
    want = load_cell(path, cache=True)
    cache = cache_of(path)
    raw = bytearray(cache.read_bytes())
    if damage == "truncate":
        raw = raw[:-5]
    elif damage == "flip a payload byte":
        raw[-3] ^= 0x01  # a bit of the last feature value
    elif damage == "garbage":
        raw = bytearray(b"\x00\xff" * 100)
    elif damage == "empty":
        raw = bytearray()
    else:
        magic_end = raw.index(b"\n") + 1
        raw[magic_end : magic_end + 8] = (2**62).to_bytes(8, "little")
    cache.write_bytes(bytes(raw))
    reads = counting_reads(monkeypatch)
    caplog.set_level(logging.INFO)
    assert_same(load_cell(path, cache=True), want)
    assert reads == ["csv"] and "damaged" in caplog.text
    reads.clear()
    assert_same(load_cell(path, cache=True), want)
    assert reads == []  # repaired: the next read is a hit


def test_a_cache_that_cannot_be_written_is_logged_and_the_read_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Whatever stands in its way (a read-only directory; here, as root can write anywhere, a directory of its
    name): the cell is read and served, a log line says so, no temporary file is left."""
    path = write(tmp_path / "c.csv", CELL)
    cache_of(path).mkdir()
    caplog.set_level(logging.INFO)
    assert load_cell(path, cache=True).train_ids.tolist() == ["r1", "r3"]
    assert "not readable" in caplog.text and "cannot write the cache" in caplog.text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.csv", "c.csv" + SUFFIX]


def test_an_entity_caches_its_cell_unless_told_not_to(tmp_path: Path) -> None:
    write(tmp_path / "cell.csv", CELL)
    base = '[entity]\nid = "e"\ndata = "cell.csv"\ncolumn_block = 0\nsecret_file = "s.hex"\n'
    assert load_entity_config(write(tmp_path / "e.toml", base)).data.cache
    off = load_entity_config(write(tmp_path / "off.toml", base + "data_cache = false\n"))
    assert not off.data.cache
    read_source(off.data)
    assert not cache_of(tmp_path / "cell.csv").exists()
    sql = '[entity]\nid = "e"\ncolumn_block = 0\nsecret_file = "s.hex"\n[data]\nsource = "sql"\nurl = "sqlite://"\n'
    sql += 'table = "t"\n[[schema.features]]\nname = "f1"\n'
    assert not load_entity_config(write(tmp_path / "sql.toml", sql)).data.cache  # no file to key a cache on


def test_parquet_sources_are_cached_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    path = tmp_path / "d.parquet"
    pq.write_table(pa.table({"id": ["a", "b"], "f1": [1.0, 2.0], "f2": [None, 3.0]}), path)
    source = DataSource("parquet", path=path, cache=True)
    reads = counting_reads(monkeypatch)
    first = read_source(source, SCHEMA)
    assert_same(read_source(source, SCHEMA), first)
    assert reads == ["parquet"] and first.X_train.tolist() == [[1.0, 0.0], [2.0, 3.0]]
