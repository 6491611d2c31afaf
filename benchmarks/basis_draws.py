"""Test error of PPSVM's random basis against Nystroem's landmarks, over many draws of the basis.

train_scaling compares one PPSVM model (one B) with one Nystroem + LinearSVC model (one set of landmarks):
with mbar = 19 basis functions, which points were drawn moves the test error by several hundredths, so a
single pair cannot say which method is better. Here, in one process on the pooled rows of the same
synthetic data (benchmarks._shared.synthetic, n = mbar + 1 features scaled to [0, 1], 5% held out), each of
--draws draws gives two bases,

- B: mbar points uniform on [0, 1]^n, as PPSVM's entities derive B (privacy rule 2),
- L: mbar training rows at random, Nystroem's landmarks (not private: records cannot be B, rule 1),

and each basis is fitted with two models: PPSVM's LP (nu = 1, the same LP as train(); benchmarks._shared.BasisLP)
and scikit-learn's Nystroem(gamma=mu) on that basis + LinearSVC (Nystroem fitted on the basis itself, so its
components are exactly those points). mu = 1/n as in train_scaling. Prints mean, s.d., range of the test
error and the median fit time of each of the four; writes results/basis_draws.json.

    python -m benchmarks.basis_draws [--quick] [--sizes 40000 160000] [--mbars 19 100] [--draws 10]
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings
from typing import Any

import numpy as np

from benchmarks._shared import (
    MBAR,
    BasisLP,
    load_average,
    machine_info,
    median,
    print_machine,
    synthetic,
    table,
    write_json,
)

NAME = "basis_draws"
TEST_FRACTION = 0.05
DEFAULT_SIZES, QUICK_SIZES = [40_000, 160_000], [10_000]
DEFAULT_DRAWS, QUICK_DRAWS = 10, 3
METHODS = (
    ("uniform-lp", "uniform B, PPSVM's LP"),
    ("uniform-nystroem", "uniform B, Nystroem + LinearSVC"),
    ("landmark-lp", "training rows, PPSVM's LP"),
    ("landmark-nystroem", "training rows, Nystroem + LinearSVC"),
)


class NystroemOnBasis:
    """Nystroem(gamma=mu) whose components are exactly ``basis``, then LinearSVC (scikit-learn's defaults)."""

    def __init__(self, mu: float, basis: np.ndarray, seed: int) -> None:
        self.mu, self.basis, self.seed = mu, basis, seed

    def fit(self, A: np.ndarray, y: np.ndarray) -> NystroemOnBasis:
        from sklearn.kernel_approximation import Nystroem
        from sklearn.svm import LinearSVC

        self.map_ = Nystroem(gamma=self.mu, n_components=len(self.basis), random_state=self.seed).fit(self.basis)
        self.svm_ = LinearSVC(dual="auto", random_state=self.seed).fit(self.map_.transform(A), y)
        return self

    def predict(self, A: np.ndarray) -> np.ndarray:
        return np.asarray(self.svm_.predict(self.map_.transform(A)), dtype=float)


def data(m: int, n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Training rows (m of them) and held-out rows, scaled to [0, 1] with the training rows' range."""
    from ppsvm.core.kernels import scale_to_unit

    total = int(np.ceil(m / (1 - TEST_FRACTION)))
    X, y = synthetic(total, seed, n)
    order = np.random.default_rng([seed, 1]).permutation(total)
    train, test = order[:m], order[m:]
    low, high = X[train].min(axis=0), X[train].max(axis=0)
    return scale_to_unit(X[train], low, high), y[train], scale_to_unit(X[test], low, high), y[test]


def measure(m: int, mbar: int, draws: int, seed: int) -> dict[str, Any]:
    """Test errors and fit times of the four (basis, model) pairs over ``draws`` draws of the bases."""
    n = mbar + 1
    mu = 1.0 / n
    A, y, A_test, y_test = data(m, n, seed)
    # Lists of the draws' figures, then their summary (floats) beside them.
    runs: dict[str, dict[str, Any]] = {key: {"test_error": [], "seconds": []} for key, _ in METHODS}
    for draw in range(draws):
        rng = np.random.default_rng([seed, 2, draw])
        uniform, landmarks = rng.random((mbar, n)), A[rng.choice(m, mbar, replace=False)]
        models: dict[str, BasisLP | NystroemOnBasis] = {
            "uniform-lp": BasisLP(mu, basis=uniform),
            "uniform-nystroem": NystroemOnBasis(mu, uniform, draw),
            "landmark-lp": BasisLP(mu, basis=landmarks),
            "landmark-nystroem": NystroemOnBasis(mu, landmarks, draw),
        }
        for key, model in models.items():
            start = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # LinearSVC's ConvergenceWarning: the error is what is compared
                model.fit(A, y)
            runs[key]["seconds"].append(time.perf_counter() - start)
            runs[key]["test_error"].append(float(np.mean(model.predict(A_test) != y_test)))
    for entry in runs.values():
        errors = entry["test_error"]
        entry.update(
            mean=statistics.fmean(errors),
            sd=statistics.stdev(errors) if len(errors) > 1 else 0.0,
            min=min(errors),
            max=max(errors),
            median_s=median(entry["seconds"]),
        )
    return {"mu": mu, "n_features": n, "draws": draws, "methods": runs}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"m = 10,000, {QUICK_DRAWS} draws")
    parser.add_argument("--sizes", type=int, nargs="+", help="training rows (default 40000 160000)")
    parser.add_argument("--mbars", type=int, nargs="+", default=[MBAR, 100], help="basis sizes (default 19 100)")
    parser.add_argument("--draws", type=int, help=f"draws of the bases (default {DEFAULT_DRAWS})")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    sizes = args.sizes or (QUICK_SIZES if args.quick else DEFAULT_SIZES)
    draws = args.draws or (QUICK_DRAWS if args.quick else DEFAULT_DRAWS)

    info = machine_info()
    print_machine(info)
    started = time.perf_counter()
    results: dict[str, dict[str, Any]] = {}
    rows = []
    for mbar in args.mbars:
        for m in sizes:
            figures = results.setdefault(str(mbar), {})[str(m)] = measure(m, mbar, draws, args.seed)
            for key, label in METHODS:
                e = figures["methods"][key]
                rows.append(
                    [
                        f"{m:,}",
                        str(mbar),
                        label,
                        f"{e['mean']:.3f}",
                        f"{e['sd']:.3f}",
                        f"{e['min']:.3f} - {e['max']:.3f}",
                        f"{e['median_s']:.2f} s",
                    ]
                )
            print(f"m = {m:,}, mbar = {mbar}: done ({time.perf_counter() - started:.0f} s)", flush=True)
    print()
    print(table(["m", "mbar", "basis, model", "mean error", "s.d.", "range", "fit (median)"], rows))
    info["load_average_at_end"] = load_average()
    setting = {"sizes": sizes, "mbars": args.mbars, "draws": draws, "seed": args.seed, "nu": 1.0, "mu": "1/n"}
    payload = {"machine": info, "setting": setting, "results": results, "seconds": time.perf_counter() - started}
    print(f"\nwrote {write_json(NAME, payload, args.quick)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
