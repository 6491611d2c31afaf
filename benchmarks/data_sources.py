"""How fast an entity reads its records, against the ecosystem's own reader of each format.

Writes one synthetic hospital-like extract of --rows records (default 1,000,000): a text id, 20 numbers, a
category of 4 declared values, a number with 5% missing (imputed), a text label and a train/test column,
as a CSV file, a Parquet file, a SQLite table and (where PostgreSQL runs: --postgres URL, or a throwaway
server from Debian's binaries) a PostgreSQL table; and a plain cell CSV as ``ppsvm split`` writes it.

Each read runs in a fresh process, its libraries imported before the clock starts, so that its time and
its peak RSS (VmHWM) above the imports are the read's own. ppsvm's reader (``read_source`` with the
declared schema: every check, the encoding, the train/test split) is paired with the reader a user of the
format would reach for, which only parses: pandas.read_csv and pyarrow.csv.read_csv for the CSV,
pyarrow.parquet.read_table for Parquet, ADBC's own Arrow fetch (the driver ppsvm uses) for PostgreSQL,
pandas.read_sql for SQLite. The two alternate (A B A B ...) --repeats times and the ratio is taken pair by
pair, its median reported, so that the machine's drift moves both alike. The target: each within 2x.

Entity start: ``load_cell`` on the plain cell CSV cold (no cache beside it: parse, hash, write the cache)
and cached (hash the file, read the cache), against pandas.read_csv of the same file. And the cost of the
cache's content hash: SHA-256 and BLAKE2b through hashlib over the CSV file.

    python -m benchmarks.data_sources [--rows 1000000] [--repeats 3] [--quick] [--postgres URL]
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypedDict

import numpy as np

from benchmarks._shared import ROOT, load_average, machine_info, median, print_machine, table, write_json

NAME = "data_sources"
CATEGORIES = ("a", "b", "c", "d")
N_NUMBERS = 20
CELL_FEATURES = 20
MiB = 2**20
# Issue 14: a 10^6-row source loads with bounded memory; the bound checked here.
MEMORY_BOUND = "peak RSS above imports <= 2 x encoded matrix + 256 MiB"
# Issue 28: each source within this factor of its ecosystem reader.
TARGET_RATIO = 2.0
COLUMNS = ["id", *(f"x{k}" for k in range(N_NUMBERS)), "group", "gap", "label", "part"]


class SharedFields(TypedDict):
    """The DataSource fields every ppsvm source of the extract shares (a TypedDict, so ``**COMMON`` is typed)."""

    id_column: str
    label_column: str
    split_column: str
    labels: tuple[str, ...]


COMMON: SharedFields = {"id_column": "id", "label_column": "label", "split_column": "part", "labels": ("yes", "no")}
SQLITE_QUERY = 'SELECT *, grp AS "group" FROM records'


def schema_toml() -> dict[str, Any]:
    features: list[dict[str, Any]] = [{"name": f"x{k}"} for k in range(N_NUMBERS)]
    features.append({"name": "group", "type": "category", "categories": list(CATEGORIES)})
    features.append({"name": "gap", "impute": 0.5})
    return {"features": features}


def write_sources(rows: int, directory: Path, seed: int) -> dict[str, Path]:
    """The same records as CSV, Parquet and SQLite, in chunks (the writer must not be what runs out)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    paths = {"csv": directory / "records.csv", "parquet": directory / "records.parquet", "sql": directory / "r.db"}
    with paths["csv"].open("w", encoding="utf-8") as csv_file, sqlite3.connect(paths["sql"]) as database:
        csv_file.write(",".join(COLUMNS) + "\n")
        database.execute(
            "CREATE TABLE records (id TEXT, "
            + ", ".join(f"x{k} REAL" for k in range(N_NUMBERS))
            + ", grp TEXT, gap REAL, label TEXT, part TEXT)"
        )
        writer = None
        for start in range(0, rows, 100_000):
            k = min(100_000, rows - start)
            X = np.round(rng.random((k, N_NUMBERS)), 6)
            group = rng.choice(np.array(CATEGORIES), k)
            gap = np.where(rng.random(k) < 0.05, np.nan, np.round(rng.random(k), 6))
            label = np.where(X[:, 0] > X[:, 1], "yes", "no")
            part = np.where(rng.random(k) < 0.1, "test", "train")
            ids = [f"p{start + i:08d}" for i in range(k)]
            records = [
                (ids[i], *X[i].tolist(), group[i], None if np.isnan(gap[i]) else float(gap[i]), label[i], part[i])
                for i in range(k)
            ]
            csv_file.writelines(",".join("" if v is None else str(v) for v in record) + "\n" for record in records)
            database.executemany(f"INSERT INTO records VALUES ({', '.join('?' * len(COLUMNS))})", records)
            batch = pa.table({name: [record[c] for record in records] for c, name in enumerate(COLUMNS)})
            if writer is None:
                writer = pq.ParquetWriter(paths["parquet"], batch.schema)
            writer.write_table(batch)
        assert writer is not None
        writer.close()
    return paths


def write_cell(rows: int, path: Path, seed: int) -> None:
    """A plain cell CSV as ``ppsvm split`` writes it: id, label, split, features as Python's repr of floats."""
    rng = np.random.default_rng(seed)
    with path.open("w", encoding="utf-8") as out:
        out.write(",".join(["id", "label", "split", *(f"f{k}" for k in range(1, CELL_FEATURES + 1))]) + "\n")
        for start in range(0, rows, 100_000):
            k = min(100_000, rows - start)
            X = rng.random((k, CELL_FEATURES)).tolist()
            labels = np.where(rng.random(k) < 0.5, "1", "-1")
            split = np.where(rng.random(k) < 0.2, "test", "train")
            out.writelines(f"r{start + i},{labels[i]},{split[i]}," + ",".join(map(repr, X[i])) + "\n" for i in range(k))


@contextlib.contextmanager
def throwaway_postgres() -> Iterator[str | None]:
    """A PostgreSQL server from Debian's binaries (as the `postgres` user when root) on a free port, its URL;
    None where there is none to start."""
    import socket

    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), reverse=True)
    if not found:
        yield None
        return
    binaries, root = found[0].parent, Path(tempfile.mkdtemp(prefix="ppsvm-postgres-"))
    as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    if as_user:
        shutil.chown(root, "postgres")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    options = f"-c listen_addresses=127.0.0.1 -c port={port} -c unix_socket_directories={root} -c fsync=off"
    pg_ctl = [*as_user, str(binaries / "pg_ctl"), "-D", str(root / "data")]
    try:
        initdb = [*as_user, str(binaries / "initdb"), "-D", str(root / "data"), "-U", "postgres", "--auth=trust"]
        subprocess.run(initdb, check=True, capture_output=True, timeout=120)
        start = [*pg_ctl, "-l", str(root / "log"), "-o", options, "-w", "start"]
        subprocess.run(start, check=True, capture_output=True, timeout=120)
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run([*pg_ctl, "-m", "fast", "-w", "stop"], check=False, capture_output=True, timeout=60)
        shutil.rmtree(root, ignore_errors=True)


def load_postgres(url: str, csv_path: Path) -> None:
    """The CSV's records into a PostgreSQL table ``records`` (COPY), numbers as double precision."""
    import psycopg

    columns = ["id text", *(f"x{k} double precision" for k in range(N_NUMBERS))]
    columns += ['"group" text', "gap double precision", "label text", "part text"]
    with psycopg.connect(url.replace("postgresql+psycopg", "postgresql")) as connection:
        connection.execute("DROP TABLE IF EXISTS records")
        connection.execute(f"CREATE TABLE records ({', '.join(columns)})")
        with connection.cursor().copy("COPY records FROM STDIN WITH (FORMAT csv, HEADER true)") as copy:
            with csv_path.open("rb") as handle:
                while block := handle.read(1 << 20):
                    copy.write(block)


# --- one read, in a fresh process ----------------------------------------------------------------------------


def reader_process(kind: str, location: str, out: str) -> None:
    """One read of ``location`` by reader ``kind``: its seconds, rows and peak RSS above its imports."""
    from benchmarks._shared import peak_rss_mib, proc_status, reset_peak_rss

    read = _reader(kind, location)
    before = proc_status()["VmRSS"]
    reset_peak_rss()
    started = time.perf_counter()
    rows, width = read()
    seconds = time.perf_counter() - started
    figures = {"seconds": seconds, "rows": rows, "width": width}
    figures |= {"rss_after_imports_mib": before, "peak_above_imports_mib": peak_rss_mib() - before}
    Path(out).write_text(json.dumps(figures), encoding="utf-8")


def _reader(kind: str, location: str) -> Any:
    """The read of ``kind`` as a call returning (rows, width), its libraries imported now (before the clock)."""
    if kind.startswith("ppsvm") or kind.startswith("cell"):
        from ppsvm.data import columnar  # noqa: F401 - pyarrow and its compute functions, imported now
        from ppsvm.data.schema import parse_schema
        from ppsvm.data.sources import DataSource, load_cell, read_source

        schema = parse_schema(schema_toml(), "benchmark")
        sources = {
            "ppsvm-csv": lambda: DataSource("csv", path=Path(location), **COMMON),
            "ppsvm-parquet": lambda: DataSource("parquet", path=Path(location), **COMMON),
            "ppsvm-sqlite": lambda: DataSource("sql", url=f"sqlite:///{location}", query=SQLITE_QUERY, **COMMON),
            "ppsvm-postgresql": lambda: DataSource("sql", url=location, table="records", **COMMON),
        }
        if kind in ("ppsvm-sqlite", "ppsvm-postgresql"):
            import sqlalchemy
        if kind == "ppsvm-postgresql":
            import adbc_driver_postgresql.dbapi  # noqa: F401
        if kind.startswith("cell"):
            cached = kind != "cell-uncached"
            return lambda: _shape(load_cell(Path(location), cache=cached))
        return lambda: _shape(read_source(sources[kind](), schema))
    if kind in ("pandas-csv", "pandas-sqlite"):
        import pandas as pd
        import sqlalchemy

        if kind == "pandas-csv":
            return lambda: pd.read_csv(location).shape
        engine = sqlalchemy.create_engine(f"sqlite:///{location}")
        return lambda: pd.read_sql(sqlalchemy.text(SQLITE_QUERY), engine).shape
    if kind == "arrow-csv":
        import pyarrow.csv

        return lambda: pyarrow.csv.read_csv(location).shape
    if kind == "arrow-parquet":
        import pyarrow.parquet

        return lambda: pyarrow.parquet.read_table(location).shape
    assert kind == "adbc-postgresql"
    import adbc_driver_postgresql.dbapi as dbapi

    def fetch() -> tuple[int, int]:
        with dbapi.connect(location.replace("postgresql+psycopg", "postgresql")) as connection:
            with connection.cursor() as cursor:
                cursor.execute("SELECT * FROM records")
                fetched = cursor.fetch_arrow_table()
        return fetched.num_rows, fetched.num_columns

    return fetch


def _shape(cell: Any) -> tuple[int, int]:
    return len(cell.train_ids) + len(cell.test_ids), cell.n_features


def one_read(kind: str, location: str | Path, scratch: Path) -> dict[str, Any]:
    out = scratch / f"{kind}.json"
    command = [sys.executable, "-m", "benchmarks.data_sources", "--reader", kind, str(location), str(out)]
    subprocess.run(command, check=True, cwd=ROOT)
    return json.loads(out.read_text(encoding="utf-8"))


# --- pairs, ratios, the report ---------------------------------------------------------------------------------


def paired(
    ours: str, peers: dict[str, str], location: str | Path, repeats: int, scratch: Path, before: Any = None
) -> dict[str, Any]:
    """``ours`` and each peer read ``location`` in turn, ``repeats`` times; medians and the median pair ratio.

    ``before`` (a callable) runs before each of our reads (e.g. removing a cache)."""
    runs: dict[str, list[dict[str, Any]]] = {ours: [], **{peer: [] for peer in peers}}
    ratios: dict[str, list[float]] = {peer: [] for peer in peers}
    for _ in range(repeats):
        for peer in peers:
            if before is not None:
                before()
            mine = one_read(ours, location, scratch)
            theirs = one_read(peer, location, scratch)
            runs[ours].append(mine)
            runs[peer].append(theirs)
            ratios[peer].append(mine["seconds"] / theirs["seconds"])
    summary = {kind: _summary(figures) for kind, figures in runs.items()}
    return {
        "ours": ours,
        "readers": summary,
        "ratio": {peers[peer]: median(values) for peer, values in ratios.items()},
        "ratio_runs": {peers[peer]: values for peer, values in ratios.items()},
        "peer_names": peers,
    }


def _summary(figures: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "seconds": median([f["seconds"] for f in figures]),
        "runs_s": [f["seconds"] for f in figures],
        "rows": figures[0]["rows"],
        "width": figures[0]["width"],
        "peak_above_imports_mib": max(f["peak_above_imports_mib"] for f in figures),
    }


def hash_costs(path: Path) -> dict[str, float]:
    """Seconds to hash ``path`` through hashlib (best of 3): the cache key's cost at every start."""
    costs = {}
    for algorithm in ("sha256", "blake2b"):
        best = float("inf")
        for _ in range(3):
            started = time.perf_counter()
            with path.open("rb") as handle:
                hashlib.file_digest(handle, algorithm)
            best = min(best, time.perf_counter() - started)
        costs[algorithm] = best
    return costs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3, help="pairs of reads per reader and peer")
    parser.add_argument("--quick", action="store_true", help="100,000 rows")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--postgres", help="a PostgreSQL URL to load the records into (default: a throwaway server)")
    parser.add_argument("--reader", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.reader:
        reader_process(*args.reader)
        return 0
    rows = 100_000 if args.quick else args.rows
    info = machine_info()
    print_machine(info)
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="ppsvm-sources-") as tmp:
        scratch = Path(tmp)
        started = time.perf_counter()
        paths = write_sources(rows, scratch, args.seed)
        cell = scratch / "cell.csv"
        write_cell(rows, cell, args.seed)
        print(f"wrote {rows:,} records as CSV, Parquet, SQLite, cell CSV in {time.perf_counter() - started:.1f} s")
        hashes = hash_costs(paths["csv"])
        plan = [
            ("csv", "ppsvm-csv", {"pandas-csv": "pandas.read_csv", "arrow-csv": "pyarrow.csv.read_csv"}, paths["csv"]),
            ("parquet", "ppsvm-parquet", {"arrow-parquet": "pyarrow.parquet.read_table"}, paths["parquet"]),
            ("sqlite", "ppsvm-sqlite", {"pandas-sqlite": "pandas.read_sql"}, paths["sql"]),
        ]
        for name, ours, peers, location in plan:
            results[name] = paired(ours, peers, location, args.repeats, scratch)
            report_line(name, results[name])
        with contextlib.ExitStack() as stack:
            url = args.postgres or stack.enter_context(throwaway_postgres())
            if url is None:
                print("  postgresql: skipped (no PostgreSQL server; --postgres URL, or install Debian's postgresql)")
            else:
                load_postgres(url, paths["csv"])
                peers = {"adbc-postgresql": "ADBC fetch_arrow_table"}
                results["postgresql"] = paired("ppsvm-postgresql", peers, url, args.repeats, scratch)
                report_line("postgresql", results["postgresql"])
        cache = cell.with_name(cell.name + ".ppsvm-cache")
        cold = paired(
            "cell-cold", {"pandas-csv": "pandas.read_csv"}, cell, args.repeats, scratch, lambda: cache.unlink(True)
        )
        cached = paired("cell-cached", {"pandas-csv": "pandas.read_csv"}, cell, args.repeats, scratch)
        uncached = paired("cell-uncached", {"pandas-csv": "pandas.read_csv"}, cell, args.repeats, scratch)
        entity_start = {"cold (parse, hash, write the cache)": cold, "cached": cached, "no cache": uncached}
        for label, figures in entity_start.items():
            report_line(f"load_cell {label}", figures)
        cell_bytes = cell.stat().st_size
        source_bytes = {name: path.stat().st_size for name, path in paths.items()}
    return report(rows, info, results, entity_start, hashes, source_bytes, cell_bytes, args.quick)


def report_line(name: str, figures: dict[str, Any]) -> None:
    ours = figures["readers"][figures["ours"]]
    against = ", ".join(f"{ratio:.2f}x {peer}" for peer, ratio in figures["ratio"].items())
    print(f"  {name:<28} {ours['seconds']:.2f} s ({against})", flush=True)


def report(
    rows: int,
    info: dict[str, Any],
    results: dict[str, Any],
    entity_start: dict[str, Any],
    hashes: dict[str, float],
    source_bytes: dict[str, int],
    cell_bytes: int,
    quick: bool,
) -> int:
    matrix_mib = rows * results["csv"]["readers"]["ppsvm-csv"]["width"] * 8 / MiB
    lines = []
    for name, figures in results.items():
        for kind, reader in figures["readers"].items():
            ours = kind == figures["ours"]
            lines.append(
                [
                    f"{name}: {'ppsvm' if ours else figures['peer_names'][kind]}",
                    f"{reader['seconds']:.2f} s",
                    f"{rows / reader['seconds']:,.0f}",
                    f"{reader['peak_above_imports_mib']:.0f} MiB",
                    " / ".join(f"{ratio:.2f}x" for ratio in figures["ratio"].values()) if ours else "",
                ]
            )
    for label, figures in entity_start.items():
        reader = figures["readers"][figures["ours"]]
        seconds, peak = reader["seconds"], reader["peak_above_imports_mib"]
        ratio = figures["ratio"]["pandas.read_csv"]
        lines.append(
            [f"load_cell {label}", f"{seconds:.2f} s", f"{rows / seconds:,.0f}", f"{peak:.0f} MiB", f"{ratio:.2f}x"]
        )
    print(f"\n{rows:,} records; encoded matrix {rows:,} x 25 float64 = {matrix_mib:.0f} MiB")
    print(table(["reader", "read", "rows/s", "peak RSS above imports", "ppsvm / peer"], lines))
    print(
        f"hash of the {source_bytes['csv'] / MiB:.0f} MiB CSV: "
        + ", ".join(f"{k} {v:.3f} s" for k, v in hashes.items())
    )
    within = {name: all(r <= TARGET_RATIO for r in figures["ratio"].values()) for name, figures in results.items()}
    bound_ok = all(
        figures["readers"][figures["ours"]]["peak_above_imports_mib"] <= 2 * matrix_mib + 256
        for figures in results.values()
    )
    verdicts = {
        f"each source within {TARGET_RATIO:g}x of its ecosystem reader": {
            k: "PASS" if v else "FAIL" for k, v in within.items()
        },
        MEMORY_BOUND: "PASS" if bound_ok else "FAIL",
    }
    end_load = load_average()
    print(f"targets: {json.dumps(verdicts)}; load average at end {end_load}")
    payload = {
        "machine": info,
        "load_average_at_end": end_load,
        "rows": rows,
        "matrix_mib": matrix_mib,
        "source_bytes": source_bytes,
        "sources": results,
        "entity_start": {"cell_csv_bytes": cell_bytes, "cell_features": CELL_FEATURES, **entity_start},
        "hash_seconds": hashes,
        "target": verdicts,
    }
    path = write_json(NAME, payload, quick)
    print(f"wrote {path.relative_to(ROOT)}")
    return 0 if bound_ok and all(within.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
