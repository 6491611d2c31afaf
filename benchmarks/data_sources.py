"""How fast an entity reads its records from CSV, Parquet and SQLite, and how much memory it takes.

Writes one synthetic hospital-like extract of --rows records (default 1,000,000): a text id,
20 numbers, a category of 4 declared values, a number with 5% missing (imputed), a text label
and a train/test column, as a CSV file, a Parquet file and a SQLite table. Each is then read by
``ppsvm.data.sources.read_source`` with the declared schema in a fresh process, so that its peak
RSS (VmHWM) is the read's own, and pandas.read_csv reads the CSV in another as the peer a user
knows. Reported per source: seconds, rows per second, peak RSS above the process's RSS after its
imports, and that against the bytes of the encoded matrix (rows x 25 float64 columns), which any
reader must hold.

The figure of merit is the last ratio: reading in batches of 65,536 rows keeps the extra memory to
one batch of raw values and one copy of the matrix while the batches are stacked, whatever the
source's size. Writes results/data_sources.json.

    python -m benchmarks.data_sources [--rows 1000000] [--quick]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._shared import ROOT, load_average, machine_info, print_machine, table, write_json

NAME = "data_sources"
CATEGORIES = ("a", "b", "c", "d")
N_NUMBERS = 20
MiB = 2**20
# Issue 14: a 10^6-row source loads with bounded memory; the bound checked here.
MEMORY_BOUND = "peak RSS above imports <= 2 x encoded matrix + 256 MiB"


def schema_toml() -> dict[str, Any]:
    features = [{"name": f"x{k}"} for k in range(N_NUMBERS)]
    features.append({"name": "group", "type": "category", "categories": list(CATEGORIES)})
    features.append({"name": "gap", "impute": 0.5})
    return {"features": features}


def write_sources(rows: int, directory: Path, seed: int) -> dict[str, Path]:
    """The same records as CSV, Parquet and SQLite, in chunks (the writer must not be what runs out)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    columns = ["id", *(f"x{k}" for k in range(N_NUMBERS)), "group", "gap", "label", "part"]
    paths = {"csv": directory / "records.csv", "parquet": directory / "records.parquet", "sql": directory / "r.db"}
    with paths["csv"].open("w", encoding="utf-8") as csv_file, sqlite3.connect(paths["sql"]) as database:
        csv_file.write(",".join(columns) + "\n")
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
            database.executemany(f"INSERT INTO records VALUES ({', '.join('?' * len(columns))})", records)
            batch = pa.table({name: [record[c] for record in records] for c, name in enumerate(columns)})
            if writer is None:
                writer = pq.ParquetWriter(paths["parquet"], batch.schema)
            writer.write_table(batch)
        assert writer is not None
        writer.close()
    return paths


def reader_process(kind: str, path: str, out: str) -> None:
    """One read in this (fresh) process: its time and its peak RSS above what the imports left."""
    from benchmarks._shared import peak_rss_mib, proc_status, reset_peak_rss
    from ppsvm.data.schema import parse_schema
    from ppsvm.data.sources import DataSource, read_source

    schema = parse_schema(schema_toml(), "benchmark")
    common = {"id_column": "id", "label_column": "label", "split_column": "part", "labels": ("yes", "no")}
    sources = {
        "csv": DataSource("csv", path=Path(path), **common),
        "parquet": DataSource("parquet", path=Path(path), **common),
        "sql": DataSource("sql", url=f"sqlite:///{path}", query='SELECT *, grp AS "group" FROM records', **common),
    }
    if kind == "pandas":
        import pandas as pd  # the peer: what a user would reach for first
    else:  # the readers' libraries, imported before the measurement: "above imports" means it
        import pyarrow.parquet  # noqa: F401
        import sqlalchemy  # noqa: F401
    before = proc_status()["VmRSS"]
    reset_peak_rss()
    started = time.perf_counter()
    if kind == "pandas":
        frame = pd.read_csv(path)
        rows, width = len(frame), frame.shape[1]
    else:
        cell = read_source(sources[kind], schema)
        rows, width = len(cell.train_ids) + len(cell.test_ids), cell.n_features
    seconds = time.perf_counter() - started
    figures = {"seconds": seconds, "rows": rows, "width": width}
    figures |= {"rss_after_imports_mib": before, "peak_above_imports_mib": peak_rss_mib() - before}
    Path(out).write_text(json.dumps(figures), encoding="utf-8")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--quick", action="store_true", help="100,000 rows")
    parser.add_argument("--seed", type=int, default=0)
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
        started = time.perf_counter()
        paths = write_sources(rows, Path(tmp), args.seed)
        print(f"wrote {rows:,} records as CSV, Parquet and SQLite in {time.perf_counter() - started:.1f} s", flush=True)
        for kind, path in [
            ("csv", paths["csv"]),
            ("parquet", paths["parquet"]),
            ("sql", paths["sql"]),
            ("pandas", paths["csv"]),
        ]:
            out = Path(tmp) / f"{kind}.json"
            command = [sys.executable, "-m", "benchmarks.data_sources", "--reader", kind, str(path), str(out)]
            subprocess.run(command, check=True, cwd=ROOT)
            figures = json.loads(out.read_text(encoding="utf-8"))
            figures["source_bytes"] = path.stat().st_size
            results[kind] = figures
            print(
                f"  {kind:<8} {figures['seconds']:.1f} s, "
                f"peak {figures['peak_above_imports_mib']:.0f} MiB above imports",
                flush=True,
            )
    matrix_mib = rows * results["csv"]["width"] * 8 / MiB
    for figures in results.values():
        figures["to_matrix"] = figures["peak_above_imports_mib"] / matrix_mib
    bound_ok = all(
        results[kind]["peak_above_imports_mib"] <= 2 * matrix_mib + 256 for kind in ("csv", "parquet", "sql")
    )
    headers = ["source", "file", "read", "rows/s", "peak RSS above imports", "/ encoded matrix"]
    lines = [
        [
            "pandas.read_csv (peer, no encoding)" if kind == "pandas" else f"ppsvm {kind}",
            f"{figures['source_bytes'] / MiB:.0f} MiB",
            f"{figures['seconds']:.1f} s",
            f"{rows / figures['seconds']:,.0f}",
            f"{figures['peak_above_imports_mib']:.0f} MiB",
            f"{figures['to_matrix']:.2f}x",
        ]
        for kind, figures in results.items()
    ]
    print(f"\n{rows:,} records; encoded matrix {rows:,} x {results['csv']['width']} float64 = {matrix_mib:.0f} MiB")
    print(table(headers, lines))
    verdict = f"{'PASS' if bound_ok else 'FAIL'}"
    print(f"target: {MEMORY_BOUND}: {verdict}; load average at end {load_average()}")
    payload = {
        "machine": info,
        "rows": rows,
        "matrix_mib": matrix_mib,
        "results": results,
        "target": {MEMORY_BOUND: verdict},
    }
    path = write_json(NAME, payload, args.quick)
    print(f"wrote {path.relative_to(ROOT)}")
    return 0 if bound_ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
