"""Helpers shared by the benchmark scripts: synthetic data, timing, machine info, output."""

from __future__ import annotations

import datetime
import functools
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ppsvm.experiments.report import cpu_model
from ppsvm.memory import process_memory_mib

if TYPE_CHECKING:
    from ppsvm.core.dask_engine import DaskKernel
    from ppsvm.core.lp import Formulation

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"

# The docs/design.md section 4 setting: 20 features, mbar = 19 (< n_j = 20, privacy rule 3), nu = 1.
N_FEATURES = 20
MBAR = 19
NU = 1.0
# The width the coordinator fetches Gaussian blocks at when tuning: 1/n for features in [0, 1].
MU = 1.0 / N_FEATURES
# Objectives must agree with highs-dual to this relative tolerance.
AGREEMENT_RTOL = 1e-6
# Rows above which a formulation is not run by default (measured too slow in docs/design.md section 4).
SKIP_ABOVE = {"cvxpy-primal": 40_000, "cvxpy-dual": 160_000}
# The formulation every other one's objective is checked against.
REFERENCE_FORMULATION: Formulation = "highs-dual"


def synthetic(m: int, seed: int = 0, n_features: int = N_FEATURES) -> tuple[np.ndarray, np.ndarray]:
    """Features uniform on [0, 1]^n_features and +-1 labels from a noisy nonlinear rule.

    A periodic term, an interaction and a linear term over the first 8
    features (the others are noise), plus Gaussian noise; classes balanced by
    thresholding at the median. Neither one feature nor a linear rule
    separates the classes; test errors of PPSVM and scikit-learn's SVC are in
    results/train_scaling.json.

    Returns
    -------
    X : ndarray, shape (m, n_features)
    y : ndarray, shape (m,), values +-1
    """
    if n_features < 8:
        raise ValueError(f"the rule uses 8 features, got n_features = {n_features}")
    rng = np.random.default_rng(seed)
    X = rng.random((m, n_features))
    score = (
        np.sin(2 * np.pi * X[:, 0])
        + 4.0 * (X[:, 1] - 0.5) * (X[:, 2] - 0.5)
        + 0.5 * X[:, 3:8].sum(axis=1)
        + rng.normal(0.0, 0.2, m)
    )
    y = np.where(score > np.median(score), 1.0, -1.0)
    return X, y


@dataclass
class Timing:
    """Wall-clock and CPU seconds (this process, all threads) of each run, and the last result."""

    wall: list[float]
    cpu: list[float]
    result: Any


def timed(call: Callable[[], Any], repeats: int, single_above: float) -> Timing:
    """Run ``call`` up to ``repeats`` times; stop after one run whose wall-clock time exceeds ``single_above`` s.

    CPU time is recorded because other jobs may share the machine: it is far less
    sensitive to them than wall-clock time (for single-threaded work such as HiGHS's
    simplex).
    """
    timing = Timing([], [], None)
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        timing.result = call()
        timing.cpu.append(time.process_time() - cpu)
        timing.wall.append(time.perf_counter() - wall)
        if timing.wall[-1] > single_above:
            break
    return timing


class BasisLP:
    """PPSVM's LP (nu = NU) on a Gaussian kernel K(A, basis'), as a scikit-learn-style estimator for the benchmarks.

    ``basis`` given: that basis (e.g. uniform random points, as PPSVM's B). Otherwise ``mbar`` training rows drawn at
    random with ``seed``, as Nystroem draws its landmarks: not private (B would be records, which column-block peers
    hold; privacy rule 1), run to tell how much of PPSVM's error comes from its random basis rather than its LP.
    """

    def __init__(self, mu: float, basis: np.ndarray | None = None, mbar: int = MBAR, seed: int = 0) -> None:
        self.mu, self.basis, self.mbar, self.seed = mu, basis, mbar, seed

    def fit(self, A: np.ndarray, y: np.ndarray) -> BasisLP:
        from ppsvm.core.kernels import gaussian_kernel
        from ppsvm.core.lp import solve_lp

        basis = self.basis
        if basis is None:
            basis = A[np.random.default_rng(self.seed).choice(len(A), self.mbar, replace=False)]
        solution = solve_lp("classify", np.asfortranarray(gaussian_kernel(A, basis, self.mu)), y, NU)
        self.basis_, self.u_, self.gamma_ = basis, solution.u, solution.gamma
        return self

    def predict(self, A: np.ndarray) -> np.ndarray:
        from ppsvm.core.kernels import gaussian_kernel

        return np.where(gaussian_kernel(A, self.basis_, self.mu) @ self.u_ - self.gamma_ >= 0, 1.0, -1.0)


def formulations_in_order() -> list[Formulation]:
    """Every LP formulation, the reference first so its objective is known before the others are compared with it."""
    from ppsvm.core.lp import FORMULATIONS

    return [REFERENCE_FORMULATION, *(f for f in FORMULATIONS if f != REFERENCE_FORMULATION)]


def skipped(formulation: str, m: int, no_skip: bool) -> dict[str, str] | None:
    """The result entry of a formulation not run at ``m`` rows (too slow, see SKIP_ABOVE), or None to run it."""
    limit = SKIP_ABOVE.get(formulation)
    if limit is None or m <= limit or no_skip:
        return None
    return {"skipped": f"above {limit} rows (too slow; --no-skip to run)"}


def time_solve(
    K: np.ndarray | DaskKernel, y: np.ndarray, formulation: Formulation, repeats: int, single_above: float
) -> tuple[dict[str, Any], Any]:
    """Time the classification LP on K with one formulation; its result entry and the last solution.

    The entry holds the wall-clock and CPU seconds, the objective, the iterations, the
    formulation that produced the solution (``highs-dual`` after an ``ipm`` fallback) and the
    solution's optimality certificate (None where the formulation gives none).
    """
    from ppsvm.core.lp import solve_lp

    timing = timed(functools.partial(solve_lp, "classify", K, y, NU, formulation), repeats, single_above)
    solution = timing.result
    entry = {
        "seconds": timing.wall,
        "median_s": median(timing.wall),
        "cpu_seconds": timing.cpu,
        "median_cpu_s": median(timing.cpu),
        "objective": solution.objective,
        "iterations": solution.iterations,
        "solved_by": solution.formulation,
        "certificate": None if solution.certificate is None else solution.certificate.as_dict(),
    }
    return entry, solution


def time_formulation(
    K: np.ndarray,
    y: np.ndarray,
    formulation: Formulation,
    repeats: int,
    single_above: float,
    reference_objective: float | None,
) -> tuple[dict[str, Any], Any]:
    """:func:`time_solve`, with the objective's relative gap to ``reference_objective`` (None: this is the
    reference, gap 0) and whether it is within AGREEMENT_RTOL."""
    entry, solution = time_solve(K, y, formulation, repeats, single_above)
    reference = solution.objective if reference_objective is None else reference_objective
    gap = relative_gap(solution.objective, reference)
    entry.update(relative_gap_to_highs_dual=gap, agrees=gap <= AGREEMENT_RTOL)
    return entry, solution


def median(values: list[float]) -> float:
    return float(statistics.median(values))


def relative_gap(value: float, reference: float) -> float:
    return abs(value - reference) / max(abs(reference), 1e-300)


def pseudonyms_of(split_dir: Path, ids: list[str]) -> list[str]:
    """What the entities of a split publish for ``ids``: their pseudonyms under the split's record-id key."""
    from ppsvm.core.randomness import record_pseudonyms
    from ppsvm.data.partition import ID_KEY_FILE

    return record_pseudonyms(bytes.fromhex((split_dir / ID_KEY_FILE).read_text().strip()), ids)


def proc_status(pid: int | None = None) -> dict[str, float]:
    """VmRSS and VmHWM (MiB) of a live process, this one by default (:func:`ppsvm.memory.process_memory_mib`)."""
    return process_memory_mib(pid)


def peak_rss_mib(pid: int | None = None) -> float:
    """Peak resident set size in MiB of a live process (this one by default) since its exec or reset_peak_rss()."""
    return proc_status(pid)["VmHWM"]


def reset_peak_rss() -> None:
    """Start this process's VmHWM again from its current RSS (Linux's clear_refs "5")."""
    Path("/proc/self/clear_refs").write_text("5")


def _package(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "not installed"


def load_average() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def blas_pools() -> list[dict[str, Any]]:
    """The BLAS libraries loaded so far and their thread counts (BLAS-3 bound solvers depend on them)."""
    import scipy.linalg  # noqa: F401 - loads scipy's own BLAS, which ppsvm.core.ipm calls besides numpy's
    from threadpoolctl import threadpool_info

    return [{key: pool.get(key) for key in ("internal_api", "version", "num_threads")} for pool in threadpool_info()]


def machine_info() -> dict[str, Any]:
    return {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "hostname": platform.node(),
        "platform": platform.platform(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "highspy": _package("highspy"),
        "scipy": _package("scipy"),
        "cvxpy": _package("cvxpy"),
        "scikit-learn": _package("scikit-learn"),
        "grpcio": _package("grpcio"),
        "blas": blas_pools(),
        "load_average_at_start": load_average(),
    }


def print_machine(info: dict[str, Any]) -> None:
    print(f"machine: {info['cpu_model']}, {info['cpu_count']} CPUs, {info['platform']}")
    print(
        f"python {info['python']}, numpy {info['numpy']}, highspy {info['highspy']}, cvxpy {info['cvxpy']}, "
        f"scikit-learn {info['scikit-learn']}; BLAS threads "
        f"{', '.join(str(pool['num_threads']) for pool in info['blas'])}; {info['date']}"
    )
    print(
        f"load average at start {info['load_average_at_start']} "
        "(other jobs may share this machine: figures are wall-clock, not CPU time)"
    )


def result_path(name: str, suffix: str, quick: bool = False) -> Path:
    """``results/<name><suffix>``, or ``results/<name>-quick<suffix>`` for a ``--quick`` run (git-ignored)."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    return RESULTS / f"{name}{'-quick' if quick else ''}{suffix}"


def write_json(name: str, payload: dict[str, Any], quick: bool = False) -> Path:
    """Write ``results/<name>.json`` atomically; a ``--quick`` run writes ``<name>-quick.json`` (git-ignored),
    so trying a script never replaces the committed full-run figures."""
    path = result_path(name, ".json", quick)
    temporary = path.with_suffix(".json.tmp")
    temporary.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    os.replace(temporary, path)
    return path


def with_earlier_runs(
    name: str, field: str, entries: list[dict[str, Any]], key: Callable[[dict[str, Any]], Any]
) -> list[dict[str, Any]]:
    """``entries`` and those of ``results/<name>.json``'s ``field`` whose key none of them has, sorted by key.

    A run of some sizes replaces those sizes' figures and keeps the others, so that a long table can be measured
    in parts (an idle hour is rare here). An earlier entry keeps the machine block of the run that measured it,
    under "machine", unless it has its own already.
    """
    path = result_path(name, ".json")
    fresh = {key(entry) for entry in entries}
    earlier = []
    if path.exists():
        previous = json.loads(path.read_text(encoding="utf-8"))
        earlier = [
            {**entry, "machine": entry.get("machine", previous["machine"])}
            for entry in previous.get(field, [])
            if key(entry) not in fresh
        ]
    return sorted([*earlier, *entries], key=key)


def table(headers: list[str], rows: list[list[str]]) -> str:
    """Plain text table: first column left-aligned, the rest right-aligned."""
    widths = [max(len(str(r[k])) for r in [headers, *rows]) for k in range(len(headers))]
    lines = []
    for r in [headers, None, *rows]:
        if r is None:
            lines.append("  ".join("-" * w for w in widths))
            continue
        cells = [str(c).ljust(w) if k == 0 else str(c).rjust(w) for k, (c, w) in enumerate(zip(r, widths, strict=True))]
        lines.append("  ".join(cells))
    return "\n".join(lines)


def seconds_text(values: list[float]) -> str:
    """Median, with a marker when fewer than 3 runs were made."""
    text = f"{median(values):.2f} s"
    return text if len(values) >= 3 else f"{text} ({len(values)} run{'s' if len(values) > 1 else ''})"


def package_versions(
    names: tuple[str, ...] = ("numpy", "scipy", "highspy", "grpcio", "protobuf", "cvxpy"),
) -> dict[str, str]:
    """Python and the given packages' installed versions ("not installed" when absent)."""
    return {"python": platform.python_version(), **{name: _package(name) for name in names}}
