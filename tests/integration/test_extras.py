"""Each extra installs what its command runs (issue 30): the wheel, with only that extra, in a fresh venv.

One wheel is built from the checkout (``pip wheel --no-deps``, as tests/unit/test_packaging.py does); each test
makes an empty venv of this interpreter (``python -m venv --without-pip``), installs ``WHEEL[extra]`` into it with
this interpreter's pip (``pip --python VENV``: no ensurepip per venv, 10 s saved each) and runs the extra's
command there, from a temporary directory, so that ``ppsvm`` is the installed one and never the checkout:

- no extra: ``ppsvm --help`` and ``ppsvm demo``; the API and a SQL source say which extra they need;
- reproduce: ``ppsvm reproduce table1 --quick`` on one dataset and one partition count (about 25 s);
- api: ``RandomKernelClassifier`` fitted on WDBC from Python;
- docs: ``mkdocs build --strict`` of a copy of mkdocs.yml and docs/ (the API reference from the installed package);
- parquet, sql: an entity's ``[data]`` and ``[schema]`` tables read by ``read_source`` from a Parquet file and from
  SQLite;
- dask: a small LP solved by the interior-point method on a one-worker local Dask cluster over mutual TLS from a
  CA made there (``ppsvm.core.dask_engine``), to the objective of the same LP solved in the process;
- test: the whole suite collected (every test module imported) and one test file run.

Installing is most of the time: about 30 s for the base and 60 s for the reproduce extra on 2 cores from a local
package mirror (pip's byte-compilation is skipped: ``--no-compile``), 6 to 8 minutes for the file.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
INSTALL_TIMEOUT_S = 600
RUN_TIMEOUT_S = 300

pytestmark = pytest.mark.long


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The checkout's wheel, built once for every venv of this file."""
    out = tmp_path_factory.mktemp("wheel")
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(REPO)],
        cwd=out,
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT_S,
        check=False,
    )
    assert result.returncode == 0, f"pip wheel failed:\n{result.stdout}{result.stderr}"
    (built,) = out.glob("ppsvm-*.whl")
    return built


def fresh_venv(where: Path, wheel: Path, extra: str | None) -> Path:
    """A new venv at ``where`` holding the wheel with ``extra`` (None: no extra) and its dependencies only."""
    made = subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(where)],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )
    assert made.returncode == 0, f"python -m venv failed:\n{made.stdout}{made.stderr}"
    python = where / "bin" / "python"
    requirement = f"{wheel}[{extra}]" if extra else str(wheel)
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-compile", requirement],
        env=own_environment(),  # an import path pointing at a checkout would make pip see ppsvm as installed
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT_S,
        check=False,
    )
    assert installed.returncode == 0, f"pip install {requirement} failed:\n{installed.stdout}{installed.stderr}"
    return where


def own_environment() -> dict[str, str]:
    """The environment without the suite's PYTHON* variables (the import path, the home): the venv decides alone."""
    return {key: value for key, value in os.environ.items() if not key.startswith("PYTHON")}


def run(venv: Path, *args: str, cwd: Path, timeout: float = RUN_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    """``args[0]`` from the venv's bin/ (``ppsvm``, ``python``, ``mkdocs``), as a user of that venv runs it."""
    env = own_environment() | {
        "VIRTUAL_ENV": str(venv),
        "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONDONTWRITEBYTECODE": "1",
        "NO_MKDOCS_2_WARNING": "1",
        "MPLBACKEND": "Agg",
    }
    return subprocess.run(
        [str(venv / "bin" / args[0]), *args[1:]],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def succeeded(result: subprocess.CompletedProcess[str]) -> str:
    """The command's stdout, after checking it exited 0 (its output in the failure message)."""
    shown = " ".join(Path(result.args[0]).name if k == 0 else arg for k, arg in enumerate(result.args))
    assert result.returncode == 0, f"{shown} exited {result.returncode}:\n{result.stdout}{result.stderr}"
    return result.stdout


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> Path:
    """The wheel without any extra."""
    return fresh_venv(tmp_path_factory.mktemp("base") / "venv", wheel, None)


# Reads the [data] and [schema] tables of an entity config (TOML, as `ppsvm entity --config` does) with
# ppsvm.data.sources; the data file or database is made by the script's first argument.
READ_SOURCE = textwrap.dedent(
    """
    import sys, tomllib
    from pathlib import Path
    import ppsvm
    from ppsvm.data.schema import parse_schema
    from ppsvm.data.sources import parse_data_table, read_source
    from ppsvm.errors import ConfigError

    here = Path.cwd()
    assert Path(ppsvm.__file__).is_relative_to(sys.prefix), ppsvm.__file__
    rows = [("p1", 61, "yes"), ("p2", 45, "no"), ("p3", 70, "yes"), ("p4", 38, "no")]
    if sys.argv[1] == "parquet":
        import pyarrow as pa, pyarrow.parquet as pq
        columns = {name: [row[k] for row in rows] for k, name in enumerate(("patient", "age", "outcome"))}
        pq.write_table(pa.table(columns), here / "patients.parquet")
        where = 'source = "parquet"\\npath = "patients.parquet"'
    else:
        import sqlite3
        (here / "patients.db").unlink(missing_ok=True)
        with sqlite3.connect(here / "patients.db") as connection:
            connection.execute("CREATE TABLE patients (patient TEXT, age INTEGER, outcome TEXT)")
            connection.executemany("INSERT INTO patients VALUES (?, ?, ?)", rows)
        where = f'source = "sql"\\nurl = "sqlite:///{here / "patients.db"}"\\ntable = "patients"'
    config = tomllib.loads(f'''
    [data]
    {where}
    id = "patient"
    label = "outcome"
    labels = {{ positive = "yes", negative = "no" }}

    [[schema.features]]
    name = "age"
    type = "number"
    ''')
    try:
        source = parse_data_table(config["data"], "entity.toml [data]", here)
        cell = read_source(source, parse_schema(config["schema"], "entity.toml"))
    except ConfigError as error:
        print(f"ConfigError: {error}")
        sys.exit(2)
    print("ids", ",".join(cell.train_ids.tolist()), "labels", cell.y_train.tolist(), "age", cell.X_train[:, 0].tolist())
    """
)
READ_OUTPUT = "ids p1,p2,p3,p4 labels [1.0, -1.0, 1.0, -1.0] age [61.0, 45.0, 70.0, 38.0]"

# K's rows sent to a one-worker local cluster over mutual TLS (a CA and the coordinator's certificate made here, as
# `ppsvm certs` makes them) and the LP solved there, against the same LP solved in this process.
DASK_SOLVE = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    import numpy as np
    import ppsvm
    from ppsvm.core.dask_engine import DaskKernel, local_cluster, tls_security
    from ppsvm.core.lp import solve_lp
    from ppsvm.wire.certs import CA_FILE, CLIENT, COORDINATOR, certificate_file, key_file, make_certificates

    assert Path(ppsvm.__file__).is_relative_to(sys.prefix), ppsvm.__file__
    pki = Path.cwd() / "pki"
    pki.mkdir()
    for name, pem in make_certificates({"coordinator": (COORDINATOR, CLIENT)}).items():
        (pki / name).write_bytes(pem.text)
    security = tls_security(pki / CA_FILE, pki / certificate_file("coordinator"), pki / key_file("coordinator"))
    rng = np.random.default_rng(0)
    X, B = rng.random((2000, 5)), rng.random((7, 5))
    K = np.asfortranarray(np.exp(-0.5 * ((X[:, None, :] - B[None, :, :]) ** 2).sum(axis=2)))
    y = np.where(np.sin(6.0 * X[:, 0]) + X[:, 1] > 0.6, 1.0, -1.0)
    client = local_cluster(1, security)
    try:
        assert all(address.startswith("tls://") for address in client.scheduler_info()["workers"])
        with DaskKernel(client, K, chunk_rows=500) as held:
            on_workers = solve_lp("classify", held, y, 1.0, "ipm")
    finally:
        client.shutdown()
    here = solve_lp("classify", K, y, 1.0, "ipm")
    gap = abs(on_workers.objective - here.objective) / abs(here.objective)
    print("solved by", on_workers.formulation, "in", on_workers.iterations, "iterations, relative gap", f"{gap:.1e}")
    """
)


def test_without_an_extra_the_cli_and_the_demo_run(base: Path, tmp_path: Path) -> None:
    """The README's first command, `pip install -e . && ppsvm demo`, installs no extra (about 30 s)."""
    assert "demo" in succeeded(run(base, "ppsvm", "--help", cwd=tmp_path))
    assert "usage: ppsvm demo" in succeeded(run(base, "ppsvm", "demo", "--help", cwd=tmp_path))
    report = succeeded(run(base, "ppsvm", "demo", "--out", str(tmp_path / "demo"), cwd=tmp_path))
    assert "PPSVM K(A, B') over gRPC" in report and "each entity alone" in report, report


def test_without_an_extra_the_api_and_a_sql_source_name_the_extra_they_need(base: Path, tmp_path: Path) -> None:
    api = run(base, "python", "-c", "from ppsvm import RandomKernelClassifier", cwd=tmp_path)
    assert api.returncode != 0 and "pip install 'ppsvm[api]'" in api.stderr, api.stderr
    sql = run(base, "python", "-c", READ_SOURCE, "sql", cwd=tmp_path)
    assert sql.returncode == 2, f"{sql.stdout}{sql.stderr}"
    assert "ConfigError: a sql data source needs sqlalchemy: pip install 'ppsvm[sql]'" in sql.stdout
    dask = run(base, "python", "-c", "import ppsvm.core.dask_engine", cwd=tmp_path)
    assert dask.returncode != 0 and "pip install 'ppsvm[dask]'" in dask.stderr, dask.stderr


def test_without_the_reproduce_extra_reproduce_names_it(base: Path, tmp_path: Path) -> None:
    result = run(base, "ppsvm", "reproduce", "table1", "--quick", "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert result.returncode != 0
    assert "Traceback" not in result.stderr and "ppsvm[reproduce]" in result.stderr, result.stderr


def test_reproduce_extra_runs_a_quick_table1(wheel: Path, tmp_path: Path) -> None:
    venv = fresh_venv(tmp_path / "venv", wheel, "reproduce")
    assert "--quick" in succeeded(run(venv, "ppsvm", "reproduce", "table1", "--help", cwd=tmp_path))
    out = tmp_path / "out"
    # --quick on one dataset and one partition count: the whole protocol (PPSVM over gRPC entities, the pooled and
    # entity-alone fits, the figure) in about 25 s where the full --quick takes about two minutes.
    stdout = succeeded(
        run(
            venv,
            "ppsvm",
            "reproduce",
            "table1",
            "--quick",
            "--datasets",
            "bupa",
            "--partitions",
            "2",
            "--no-progress",
            "--out",
            str(out),
            cwd=tmp_path,
        )
    )
    assert "table1.md" in stdout, stdout
    assert {"table1.md", "table1.json", "table1-figure3.png"} <= {path.name for path in out.iterdir()}


def test_api_extra_fits_the_estimator(wheel: Path, tmp_path: Path) -> None:
    venv = fresh_venv(tmp_path / "venv", wheel, "api")
    script = textwrap.dedent(
        """
        import sys
        from pathlib import Path
        import ppsvm
        from ppsvm import RandomKernelClassifier, load_dataset

        assert Path(ppsvm.__file__).is_relative_to(sys.prefix), ppsvm.__file__
        X, y = load_dataset("wdbc")
        model = RandomKernelClassifier(row_blocks=2, column_blocks=2, random_state=0).fit(X[:300], y[:300])
        print("accuracy", round(model.score(X[300:], y[300:]), 3))
        """
    )
    stdout = succeeded(run(venv, "python", "-c", script, cwd=tmp_path))
    accuracy = float(stdout.split()[-1])
    assert accuracy > 0.8, stdout


def test_docs_extra_builds_the_site_with_warnings_as_errors(wheel: Path, tmp_path: Path) -> None:
    venv = fresh_venv(tmp_path / "venv", wheel, "docs")
    copy = tmp_path / "checkout"
    copy.mkdir()
    shutil.copy2(REPO / "mkdocs.yml", copy / "mkdocs.yml")
    shutil.copytree(REPO / "docs", copy / "docs", ignore=shutil.ignore_patterns("__pycache__"))
    site = tmp_path / "site"
    succeeded(run(venv, "mkdocs", "build", "--strict", "-d", str(site), cwd=copy, timeout=600))
    # The API reference is rendered from the installed package's docstrings, the CLI page from its parser.
    api = (site / "reference" / "api" / "index.html").read_text(encoding="utf-8")
    assert 'id="ppsvm.api.estimators.RandomKernelClassifier"' in api
    assert "usage: ppsvm reproduce dp" in (site / "reference" / "cli" / "index.html").read_text(encoding="utf-8")


@pytest.mark.parametrize("extra", ["parquet", "sql"])
def test_data_source_extra_reads_an_entity_data_table(wheel: Path, tmp_path: Path, extra: str) -> None:
    venv = fresh_venv(tmp_path / "venv", wheel, extra)
    work = tmp_path / "entity"
    work.mkdir()
    assert READ_OUTPUT in succeeded(run(venv, "python", "-c", READ_SOURCE, extra, cwd=work))


def test_dask_extra_solves_the_lp_on_a_local_cluster_over_tls(wheel: Path, tmp_path: Path) -> None:
    venv = fresh_venv(tmp_path / "venv", wheel, "dask")
    work = tmp_path / "coordinator"
    work.mkdir()
    stdout = succeeded(run(venv, "python", "-c", DASK_SOLVE, cwd=work))
    assert "solved by ipm in " in stdout, stdout
    assert float(stdout.split()[-1]) <= 1e-9, stdout


def test_test_extra_collects_the_suite_and_runs_a_file(wheel: Path, tmp_path: Path) -> None:
    """The suite is run from the checkout (as `pip install -e '.[test]'` then `pytest` does); every test module is
    imported by the collection, so a library a test imports and the extra lacks fails here."""
    venv = fresh_venv(tmp_path / "venv", wheel, "test")
    options = ("-p", "no:cacheprovider", "-n", "0", "-q")
    collected = succeeded(run(venv, "python", "-m", "pytest", *options, "--collect-only", "tests", cwd=REPO))
    assert "tests collected" in collected and "error" not in collected.splitlines()[-1], collected[-2000:]
    # scikit-learn and pandas (column names through the estimators), the test extra's own reasons for both.
    ran = succeeded(run(venv, "python", "-m", "pytest", *options, "tests/unit/test_estimator_columns.py", cwd=REPO))
    assert " passed" in ran and "failed" not in ran, ran[-2000:]
