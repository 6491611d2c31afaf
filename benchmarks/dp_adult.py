"""Li, Xiong, Ohno-Machado, Jiang 2014, Figures 3 and 4 on UCI Adult: AUC of the hybrid DP RBF SVM vs epsilon.

The paper's claim checked here: the hybrid model (rho learned on a few public records)
beats PrivateSVM (rho drawn at random) at every epsilon and stays close to the
non-private SVM; it also beats SVMs trained on the public records alone. Figure 4's
companion: the time to learn rho against the number of public records and D.

Setting (every decision the paper or the issue left open, stated):

- Data: common/data/adult.data (32,561 records; the UCI file, shipped), label +1 for ``>50K``.
  Features (d = 12): age, education-num, log1p(capital-gain), log1p(capital-loss),
  hours-per-week, and marital-status one-hot (7 values). fnlwgt is NOT used: it is the
  census sampling weight (how many people a record stands for), not an attribute of the
  person, and the feature list the issue attributes to the paper does not contain it.
  None of the columns used has a '?' (checked at load; '?' occurs only in workclass,
  occupation and native-country, which are not used), so no record is dropped.
  log1p on the two capital columns is a fixed, data-independent transform chosen here
  (``--raw-capital`` turns it off): the scaling comes from 20 public records, among which
  capital gain is often all 0 or small, and raw dollar values up to 99,999 would then land
  hundreds of units outside [0, 1].
- Per repetition r (seed = --seed + r, 10 repetitions; every generator below is derived
  from (seed, purpose tag) with numpy's SeedSequence): shuffle; the first 27,000 records are
  private, split evenly over 3 entities (9,000 each); the next 3,000 are the test set; the
  remaining 2,561 are the public pool. Public sets are nested prefixes of the pool:
  20 within 50 within 100 within 200.
- dp-hybrid and private-svm both take the feature scaling (common.dp.public_scaling /
  apply_scaling) and the kernel width (public_kernel_width, the median heuristic) from the
  same 20 public records: neither touches private data for them. dp-hybrid learns rho
  with learn_frequencies on those 20 records; private-svm draws rho with random_frequencies.
  D = 100 frequencies (the product default).
- C = 1 in the (C/n) * sum hinge convention (the product default; the paper's C was not
  available to check, and C is not tuned: tuning it on 20 public records would say
  nothing about a 9,000-record SVM, and tuning on the test set is not allowed). Note that
  with ||zhat|| = 1, C <= 1 makes every record a margin violator (margins <= ||w|| <= C),
  so the SVM is exactly w = (C/n) sum_i y_i zhat(x_i): the JSON records the fraction of dual
  variables at their bound. The table "other C" reports C = 10 and 100 as a sensitivity
  (test-set figures, public-only included, not used to choose anything; the headline stays C = 1).
- Each entity maps its rows with fourier_features(apply_scaling(rows, low, high), rho), as
  entity.cell.EntityCore.dp_weights does, and releases w through a mechanism; the model is
  the n_i-weighted mean of the 3 releases, as coordinator.dp_train.train_dp combines them
  (each release is epsilon-DP for its own entity's records; the mean costs nothing more).
  The exact weights are private_weights(..., mechanism="none") (train_linear_svm); the
  Laplace and output-gamma releases add laplace_output_perturbation / output_perturbation
  noise to them, which is what private_weights does internally (checked bit for bit in
  repetition 0: "decomposition check"), so the SVM is trained once per entity and not once
  per (epsilon, mechanism). The objective mechanism calls private_weights directly.
- Mechanisms: the paper's Laplace mechanism is the headline for both dp-hybrid and
  private-svm; output-gamma and objective perturbation (Chaudhuri, Monteleoni, Sarwate 2011)
  for dp-hybrid are OUR ADDITIONS, labelled so. Every (method, mechanism, epsilon) is a
  separate experiment on the same records: budgets are not composed across them.
- Benchmark noise is seeded for reproducibility; the product uses secure_generator.
- Non-private (the solid line): the same pipeline with mechanism "none" (the n-weighted mean
  of the 3 entities' exact weights, learned rho). Extra rows: the same with private-svm's
  random rho; one linear SVM on the pooled 27,000 mapped rows (learned rho); an exact RBF SVM
  (train_kernel_svm, intercept as a constant feature) on a random subsample of
  --exact-rows private records with the same public scaling and width.
- public-only: train_kernel_svm on 20 / 50 / 100 / 200 public records, each set with its own
  public scaling and width (as coordinator.dp_train does for public-only); no epsilon.
- AUC (common.metrics.auc) on the 3,000 test records: mean and standard deviation over
  repetitions; error_rate (sign of the decision, no intercept for the Fourier models) is
  in the JSON.
- Verdicts per epsilon: "beats" when the mean paired AUC difference (same repetition) is
  more than 2 standard errors above 0, "loses" when more than 2 below, else "tie";
  "close" to non-private when the mean AUC is at most CLOSE_AUC below it.
- Time to learn rho: learn_frequencies on the public records of repetition 0 (each size
  scaled by its own range, width by the median heuristic) for n_public in {20, 50, 100, 200}
  and D in {25, 50, 100, 200}; wall-clock median of 3 runs (1 run when a run exceeds 60 s).

    PYTHONPATH=. .venv/bin/python benchmarks/dp_adult.py [--quick] [--reps 10] [--seed 0]

Writes benchmarks/results/dp_adult.json, dp_adult.png and dp_rho_time.png.
"""

from __future__ import annotations

import argparse
import logging
import math
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from benchmarks._shared import (  # noqa: E402
    RESULTS, load_average, machine_info, median, package_versions, print_machine, table, timed, write_json,
)
from common.dp import (  # noqa: E402
    DEFAULT_C, DEFAULT_HUBER_H, DEFAULT_N_FREQUENCIES, MAX_FREQUENCY_ITERATIONS, MAX_FREQUENCY_PAIRS,
    apply_scaling, decision, fourier_features, laplace_output_perturbation, laplace_scale, learn_frequencies,
    l2_sensitivity, output_perturbation, private_weights, public_kernel_width, public_scaling, random_frequencies,
    train_kernel_svm, train_linear_svm,
)
from common.kernels import gaussian_kernel  # noqa: E402
from common.metrics import auc, error_rate  # noqa: E402

NAME = "dp_adult"
DATA = Path(__file__).resolve().parents[1] / "common" / "data" / "adult.data"  # shipped copy, see its SOURCES.md

# adult.data columns (0-based) and the values used.
AGE, FNLWGT, EDUCATION_NUM, MARITAL, GAIN, LOSS, HOURS, LABEL = 0, 2, 4, 5, 10, 11, 12, 14
N_COLUMNS = 15
POSITIVE = ">50K"
MARITAL_VALUES = ("Divorced", "Married-AF-spouse", "Married-civ-spouse", "Married-spouse-absent",
                  "Never-married", "Separated", "Widowed")

# The split.
N_PRIVATE = 27_000
N_ENTITIES = 3
N_TEST = 3_000
HYBRID_PUBLIC = 20

FULL = {"reps": 10, "epsilons": [0.5, 1.0, 2.0, 4.0], "public_sizes": [20, 50, 100, 200],
        "timing_public": [20, 50, 100, 200], "timing_D": [25, 50, 100, 200], "timing_repeats": 3,
        "exact_rows": 1000, "extra_C": [10.0, 100.0]}
QUICK = {"reps": 2, "epsilons": [1.0, 4.0], "public_sizes": [20, 200],
         "timing_public": [20, 50], "timing_D": [25, 100], "timing_repeats": 1,
         "exact_rows": 500, "extra_C": [100.0]}
SINGLE_ABOVE_S = 60.0
# "close to the non-private model": mean AUC at most this far below it.
CLOSE_AUC = 0.01
# Public pairs (from pool records outside every public set) on which the kernel approximation is checked.
DIAGNOSTIC_POOL_ROWS = 400
DIAGNOSTIC_PAIRS = 2_000

# Purpose tags of the seeded generators: np.random.default_rng([seed, TAG, ...]).
TAG_SPLIT, TAG_LEARN, TAG_RANDOM, TAG_NOISE, TAG_EXACT, TAG_DIAG, TAG_TIMING, TAG_CHECK = range(1, 9)
MECHANISM_TAG = {"laplace": 0, "output-gamma": 1, "objective": 2}
MAP_TAG = {"dp-hybrid": 0, "private-svm": 1}

# Rows of the AUC table, in order: (key, label).
HYBRID_LAPLACE = "dp-hybrid/laplace"
PRIVATE_LAPLACE = "private-svm/laplace"
NON_PRIVATE = "non-private/learned-rho"
EPSILON_METHODS = {
    HYBRID_LAPLACE: f"dp-hybrid, Laplace ({HYBRID_PUBLIC} public)",
    PRIVATE_LAPLACE: "private-svm, Laplace",
    "dp-hybrid/output-gamma": "dp-hybrid, output-gamma [our addition]",
    "dp-hybrid/objective": "dp-hybrid, objective [our addition]",
}
PLAIN_METHODS = {
    NON_PRIVATE: "non-private SVM (learned rho, 3-entity mean)",
    "non-private/random-rho": "non-private (random rho, 3-entity mean)",
    "non-private/pooled-learned-rho": "non-private, 27,000 rows pooled (learned rho)",
    "exact-rbf/subsample": "exact RBF SVM, private subsample",
}


def rng(*key: int) -> np.random.Generator:
    """A generator seeded from (seed, purpose tag, ...): reproducible, independent streams."""
    return np.random.default_rng([int(k) for k in key])


def load_adult(path: Path, log_capital: bool) -> tuple[np.ndarray, np.ndarray, list[str], dict[str, Any]]:
    """Features (m, 12), labels (+1 for >50K), feature names and what was checked while loading."""
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    rows = [[field.strip() for field in line.split(",")] for line in lines]
    bad = [k for k, r in enumerate(rows) if len(r) != N_COLUMNS]
    if bad:
        raise SystemExit(f"{path}: {len(bad)} rows without {N_COLUMNS} fields (first: line {bad[0] + 1})")
    used = (AGE, EDUCATION_NUM, MARITAL, GAIN, LOSS, HOURS, LABEL)
    missing_used = {c: sum(r[c] == "?" for r in rows) for c in used}
    if any(missing_used.values()):
        raise SystemExit(f"{path}: '?' in columns used: {missing_used}")
    marital = sorted({r[MARITAL] for r in rows})
    if tuple(marital) != MARITAL_VALUES:
        raise SystemExit(f"{path}: unexpected marital-status values {marital}")
    numeric = np.array([[float(r[c]) for c in (AGE, EDUCATION_NUM, GAIN, LOSS, HOURS)] for r in rows])
    if log_capital:
        numeric[:, 2:4] = np.log1p(numeric[:, 2:4])
    one_hot = np.array([[r[MARITAL] == v for v in MARITAL_VALUES] for r in rows], dtype=float)
    X = np.hstack([numeric, one_hot])
    y = np.where(np.array([r[LABEL] for r in rows]) == POSITIVE, 1.0, -1.0)
    capital = "log1p({})" if log_capital else "{}"
    names = ["age", "education-num", capital.format("capital-gain"), capital.format("capital-loss"),
             "hours-per-week", *(f"marital={v}" for v in MARITAL_VALUES)]
    checks = {
        "records": len(rows), "positives": int((y > 0).sum()), "negatives": int((y < 0).sum()),
        "question_marks_in_used_columns": {str(c): n for c, n in missing_used.items()},
        "question_marks_by_column_all": {str(c): sum(r[c] == "?" for r in rows) for c in range(N_COLUMNS)
                                         if any(r[c] == "?" for r in rows)},
        "rows_with_any_question_mark": sum(any(f == "?" for f in r) for r in rows),
    }
    return X, y, names, checks


def figures(y: np.ndarray, scores: np.ndarray) -> dict[str, float]:
    return {"auc": auc(y, scores), "error_rate": error_rate(y, scores)}


def kernel_mse(rho: np.ndarray, P: np.ndarray, i: np.ndarray, j: np.ndarray, gamma: float) -> float:
    """Mean squared error of zhat(x_i)'zhat(x_j) against exp(-gamma ||x_i - x_j||^2) over the pairs."""
    Z = fourier_features(P, rho)
    target = np.exp(-gamma * ((P[i] - P[j]) ** 2).sum(1))
    return float(np.mean(((Z[i] * Z[j]).sum(1) - target) ** 2))


def public_only(X: np.ndarray, y: np.ndarray, public: np.ndarray, test: np.ndarray, C: float) -> dict[str, Any]:
    """train_kernel_svm on the public records alone, with their own scaling and width (no epsilon)."""
    low, high = public_scaling(X[public])
    scaled = apply_scaling(X[public], low, high)
    width = public_kernel_width(scaled)
    model = train_kernel_svm(gaussian_kernel(scaled, scaled, width), y[public], C)
    scores = decision(gaussian_kernel(apply_scaling(X[test], low, high), scaled, width), model)
    return {**figures(y[test], scores), "positives": int((y[public] > 0).sum()), "kernel_width": width}


def run_rep(X: np.ndarray, y: np.ndarray, seed: int, cfg: dict[str, Any], check: bool) -> dict[str, Any]:
    """One repetition: split, public preprocessing, every method at every epsilon."""
    started = time.perf_counter()
    C, D, epsilons = cfg["C"], cfg["D"], cfg["epsilons"]
    perm = rng(seed, TAG_SPLIT).permutation(len(y))
    private, test, pool = perm[:N_PRIVATE], perm[N_PRIVATE:N_PRIVATE + N_TEST], perm[N_PRIVATE + N_TEST:]
    entities = np.array_split(private, N_ENTITIES)
    counts = np.array([len(e) for e in entities], dtype=float)
    public = pool[:HYBRID_PUBLIC]
    out: dict[str, Any] = {"seed": seed, "epsilon": {}, "plain": {}, "public_only": {}, "other_C": {}}

    # Public-only preprocessing shared by dp-hybrid and private-svm: the 20 public records.
    low, high = public_scaling(X[public])
    scaled_public = apply_scaling(X[public], low, high)
    width = public_kernel_width(scaled_public)
    fit = learn_frequencies(scaled_public, width, D, rng(seed, TAG_LEARN))
    rho = {"dp-hybrid": fit.rho, "private-svm": random_frequencies(X.shape[1], D, width, rng(seed, TAG_RANDOM))}
    test_scaled = apply_scaling(X[test], low, high)
    constant = [int(k) for k in np.flatnonzero(high <= low)]
    diag_rows = pool[max(cfg["public_sizes"]):][:DIAGNOSTIC_POOL_ROWS]
    P = apply_scaling(X[diag_rows], low, high)
    pairs = rng(seed, TAG_DIAG).choice(len(P) * (len(P) - 1) // 2, size=DIAGNOSTIC_PAIRS, replace=False)
    iu, ju = np.triu_indices(len(P), k=1)
    i, j = iu[pairs], ju[pairs]
    out["preprocessing"] = {
        "kernel_width": width, "public_positives": int((y[public] > 0).sum()),
        "features_constant_on_public": constant,
        "test_rows_outside_unit_box": float(np.mean(((test_scaled < 0) | (test_scaled > 1)).any(axis=1))),
        "test_max_abs_scaled": float(np.abs(test_scaled).max()),
        "rho_fit": {"seconds": fit.seconds, "iterations": fit.iterations, "n_pairs": fit.n_pairs,
                    "objective_start": fit.objective_start, "objective_end": fit.objective_end, "message": fit.message},
        "heldout_kernel_mse": {name: kernel_mse(r, P, i, j, width) for name, r in rho.items()},
    }

    all_C = [C, *cfg["extra_C"]]
    diagnostics: dict[str, Any] = {"alpha_at_bound": {}, "noise_to_signal": {}}
    for map_name, frequencies in rho.items():
        Zt = fourier_features(test_scaled, frequencies)
        Zs = [fourier_features(apply_scaling(X[e], low, high), frequencies) for e in entities]
        for c_index, c_value in enumerate(all_C):
            headline = c_index == 0
            exact = [private_weights(Z, y[e], C=c_value, epsilon=None, mechanism="none").weights
                     for Z, e in zip(Zs, entities)]
            if map_name == "dp-hybrid":
                # Fraction of entity 0's dual variables at the bound C/n (1.0: w = (C/n) sum y z exactly).
                alpha = train_linear_svm(Zs[0], y[entities[0]], c_value).alpha
                diagnostics["alpha_at_bound"][f"{c_value:g}"] = float(np.mean(np.isclose(alpha, c_value / len(alpha),
                                                                                          rtol=1e-9, atol=0.0)))
            if headline:
                headline_exact = exact
            mean_exact = np.average(exact, axis=0, weights=counts)
            target = out["plain"] if headline else out["other_C"].setdefault(f"{c_value:g}", {})
            key = NON_PRIVATE if map_name == "dp-hybrid" else "non-private/random-rho"
            target[key] = figures(y[test], Zt @ mean_exact)
            mechanisms = ["laplace"]
            if map_name == "dp-hybrid":
                mechanisms += ["output-gamma"] + (["objective"] if headline else [])
            elif not headline:
                mechanisms += ["output-gamma"]
            for e_index, eps in enumerate(epsilons):
                for mechanism in mechanisms:
                    releases = []
                    for k, (Z, e, w) in enumerate(zip(Zs, entities, exact)):
                        gen = rng(seed, TAG_NOISE, MAP_TAG[map_name], MECHANISM_TAG[mechanism], e_index, k, c_index)
                        if mechanism == "laplace":
                            releases.append(laplace_output_perturbation(w, n=len(e), C=c_value, D=D, epsilon=eps, rng=gen))
                        elif mechanism == "output-gamma":
                            releases.append(output_perturbation(w, n=len(e), C=c_value, epsilon=eps, rng=gen))
                        else:
                            releases.append(private_weights(Z, y[e], C=c_value, epsilon=eps, mechanism="objective",
                                                            rng=gen, huber_h=DEFAULT_HUBER_H).weights)
                    model = np.average(releases, axis=0, weights=counts)
                    key = f"{map_name}/{mechanism}"
                    bucket = out["epsilon"] if headline else out["other_C"][f"{c_value:g}"]
                    bucket.setdefault(key, {})[f"{eps:g}"] = figures(y[test], Zt @ model)
                    if map_name == "dp-hybrid" and mechanism != "objective":
                        # ||released - exact|| / ||exact|| of entity 0, and of the 3-entity mean.
                        diagnostics["noise_to_signal"].setdefault(f"{c_value:g}", {}).setdefault(mechanism, {})[f"{eps:g}"] = {
                            "entity0": float(np.linalg.norm(releases[0] - exact[0]) / np.linalg.norm(exact[0])),
                            "mean": float(np.linalg.norm(model - mean_exact) / np.linalg.norm(mean_exact)),
                        }
        if map_name == "dp-hybrid":
            pooled = train_linear_svm(np.vstack(Zs), y[private], C)
            out["plain"]["non-private/pooled-learned-rho"] = figures(y[test], Zt @ pooled.w)
            if check:
                out["decomposition_check"] = decomposition_check(Zs[0], y[entities[0]], headline_exact[0], C, D, epsilons[0],
                                                            seed)
    out["diagnostics"] = diagnostics

    if cfg["exact_rows"] > 0:
        subsample = rng(seed, TAG_EXACT).choice(private, size=cfg["exact_rows"], replace=False)
        A = apply_scaling(X[subsample], low, high)
        model = train_kernel_svm(gaussian_kernel(A, A, width), y[subsample], C)
        out["plain"]["exact-rbf/subsample"] = figures(y[test], decision(gaussian_kernel(test_scaled, A, width), model))
    for size in cfg["public_sizes"]:
        out["public_only"][str(size)] = public_only(X, y, pool[:size], test, C)
        for c_value in cfg["extra_C"]:
            out["other_C"][f"{c_value:g}"][f"public-only/{size}"] = public_only(X, y, pool[:size], test, c_value)
    out["test_positive_rate"] = float(np.mean(y[test] > 0))
    out["seconds"] = time.perf_counter() - started
    return out


def decomposition_check(Z: np.ndarray, y: np.ndarray, exact: np.ndarray, C: float, D: int, eps: float,
                        seed: int) -> dict[str, bool]:
    """private_weights with a seeded generator equals exact weights + the mechanism's noise, bit for bit."""
    result = {}
    for mechanism in ("laplace", "output-gamma"):
        release = private_weights(Z, y, C=C, epsilon=eps, mechanism=mechanism, rng=rng(seed, TAG_CHECK))
        if mechanism == "laplace":
            ours = laplace_output_perturbation(exact, n=len(y), C=C, D=D, epsilon=eps, rng=rng(seed, TAG_CHECK))
        else:
            ours = output_perturbation(exact, n=len(y), C=C, epsilon=eps, rng=rng(seed, TAG_CHECK))
        result[mechanism] = bool(np.array_equal(release.weights, ours))
    return result


def rho_timing(X: np.ndarray, seed: int, cfg: dict[str, Any]) -> list[dict[str, Any]]:
    """learn_frequencies wall/CPU time on repetition 0's public records, per (n_public, D)."""
    perm = rng(seed, TAG_SPLIT).permutation(len(X))
    pool = perm[N_PRIVATE + N_TEST:]
    rows = []
    for n_public in cfg["timing_public"]:
        low, high = public_scaling(X[pool[:n_public]])
        scaled = apply_scaling(X[pool[:n_public]], low, high)
        width = public_kernel_width(scaled)
        for D in cfg["timing_D"]:
            timing = timed(lambda: learn_frequencies(scaled, width, D, rng(seed, TAG_TIMING, n_public, D)),
                           cfg["timing_repeats"], SINGLE_ABOVE_S)
            fit = timing.result
            rows.append({"n_public": n_public, "D": D, "wall_s": timing.wall, "cpu_s": timing.cpu,
                         "median_wall_s": median(timing.wall), "median_cpu_s": median(timing.cpu),
                         "iterations": fit.iterations, "n_pairs": fit.n_pairs, "objective_end": fit.objective_end,
                         "message": fit.message})
            print(f"  rho timing n_public={n_public} D={D}: {median(timing.wall):.1f} s wall, "
                  f"{fit.iterations} iterations", file=sys.stderr, flush=True)
    return rows


def mean_std(values: list[float]) -> dict[str, float]:
    a = np.asarray(values, dtype=float)
    return {"mean": float(a.mean()), "std": float(a.std(ddof=1)) if a.size > 1 else 0.0, "n": int(a.size)}


def summarise(reps: list[dict[str, Any]], epsilons: list[float], cfg: dict[str, Any]) -> dict[str, Any]:
    """Mean and standard deviation over repetitions of every figure."""
    summary: dict[str, Any] = {"epsilon": {}, "plain": {}, "public_only": {}, "other_C": {}}
    for key in EPSILON_METHODS:
        summary["epsilon"][key] = {f"{e:g}": {m: mean_std([r["epsilon"][key][f"{e:g}"][m] for r in reps])
                                              for m in ("auc", "error_rate")} for e in epsilons}
    for key in PLAIN_METHODS:
        if key in reps[0]["plain"]:
            summary["plain"][key] = {m: mean_std([r["plain"][key][m] for r in reps]) for m in ("auc", "error_rate")}
    for size in cfg["public_sizes"]:
        summary["public_only"][str(size)] = {m: mean_std([r["public_only"][str(size)][m] for r in reps])
                                             for m in ("auc", "error_rate")}
    for c_value in cfg["extra_C"]:
        block = reps[0]["other_C"][f"{c_value:g}"]
        entry: dict[str, Any] = {}
        for key, value in block.items():
            if "auc" in value:
                entry[key] = {m: mean_std([r["other_C"][f"{c_value:g}"][key][m] for r in reps]) for m in ("auc", "error_rate")}
            else:
                entry[key] = {f"{e:g}": {m: mean_std([r["other_C"][f"{c_value:g}"][key][f"{e:g}"][m] for r in reps])
                                         for m in ("auc", "error_rate")} for e in epsilons}
        summary["other_C"][f"{c_value:g}"] = entry
    return summary


def paired(reps: list[dict[str, Any]], a: Any, b: Any) -> dict[str, Any]:
    """Mean paired AUC difference a - b over repetitions, its standard error and a verdict."""
    d = np.array([a(r) - b(r) for r in reps])
    se = float(d.std(ddof=1) / math.sqrt(d.size)) if d.size > 1 else float("nan")
    mean = float(d.mean())
    if not math.isfinite(se):
        verdict = "beats" if mean > 0 else ("loses" if mean < 0 else "tie")
    else:
        verdict = "beats" if mean > 2 * se else ("loses" if mean < -2 * se else "tie")
    return {"mean_difference": mean, "standard_error": se, "wins": int((d > 0).sum()), "n": int(d.size),
            "verdict": verdict}


def verdicts(reps: list[dict[str, Any]], epsilons: list[float], cfg: dict[str, Any]) -> dict[str, Any]:
    out = {}
    smallest, largest = str(min(cfg["public_sizes"])), str(max(cfg["public_sizes"]))
    for e in epsilons:
        k = f"{e:g}"
        hybrid = lambda r, k=k: r["epsilon"][HYBRID_LAPLACE][k]["auc"]  # noqa: E731
        gap = paired(reps, hybrid, lambda r: r["plain"][NON_PRIVATE]["auc"])
        out[k] = {
            "hybrid_vs_private_svm": paired(reps, hybrid, lambda r, k=k: r["epsilon"][PRIVATE_LAPLACE][k]["auc"]),
            "hybrid_minus_non_private": {**gap, "close": gap["mean_difference"] >= -CLOSE_AUC},
            "hybrid_vs_public_only_smallest": paired(reps, hybrid, lambda r: r["public_only"][smallest]["auc"]),
            "hybrid_vs_public_only_largest": paired(reps, hybrid, lambda r: r["public_only"][largest]["auc"]),
        }
    for c_value in cfg["extra_C"]:
        c = f"{c_value:g}"
        entry = {}
        for mechanism in ("laplace", "output-gamma"):
            for e in epsilons:
                k = f"{e:g}"
                hybrid = lambda r, k=k, m=mechanism: r["other_C"][c][f"dp-hybrid/{m}"][k]["auc"]  # noqa: E731
                gap = paired(reps, hybrid, lambda r: r["other_C"][c][NON_PRIVATE]["auc"])
                entry.setdefault(mechanism, {})[k] = {
                    "hybrid_vs_private_svm": paired(reps, hybrid,
                                                    lambda r, k=k, m=mechanism: r["other_C"][c][f"private-svm/{m}"][k]["auc"]),
                    "hybrid_minus_non_private": {**gap, "close": gap["mean_difference"] >= -CLOSE_AUC},
                }
        out[f"C={c}"] = entry
    return out


def cell(stats: dict[str, float]) -> str:
    return f"{stats['mean']:.3f} ± {stats['std']:.3f}"


def signed(v: float) -> str:
    return f"{v:+.3f}"


def report(summary: dict[str, Any], verdict: dict[str, Any], timing: list[dict[str, Any]], reps: list[dict[str, Any]],
           cfg: dict[str, Any]) -> str:
    epsilons = cfg["epsilons"]
    headers = ["method", *(f"eps={e:g}" for e in epsilons)]
    rows = [[label, *(cell(summary["epsilon"][key][f"{e:g}"]["auc"]) for e in epsilons)]
            for key, label in EPSILON_METHODS.items()]
    for key, label in PLAIN_METHODS.items():
        if key in summary["plain"]:
            if key == "exact-rbf/subsample":
                label = f"{label} ({cfg['exact_rows']:,} rows)"
            rows.append([f"{label} [no eps]", *([cell(summary["plain"][key]["auc"])] * len(epsilons))])
    for size in cfg["public_sizes"]:
        rows.append([f"public-only, {size} public [no eps]", *([cell(summary["public_only"][str(size)]["auc"])] * len(epsilons))])
    lines = [f"Test AUC, mean ± standard deviation over {len(reps)} repetitions (C = {cfg['C']:g}, D = {cfg['D']}; "
             "[no eps]: does not depend on epsilon, repeated in every column)", "", table(headers, rows), ""]

    vrows = []
    for e in epsilons:
        v = verdict[f"{e:g}"]
        hp, nonp = v["hybrid_vs_private_svm"], v["hybrid_minus_non_private"]
        lo_, hi_ = v["hybrid_vs_public_only_smallest"], v["hybrid_vs_public_only_largest"]
        vrows.append([f"eps={e:g}",
                      f"{hp['verdict']} ({signed(hp['mean_difference'])} ± {hp['standard_error']:.3f}, {hp['wins']}/{hp['n']})",
                      f"{'close' if nonp['close'] else 'NOT close'} ({signed(nonp['mean_difference'])})",
                      f"{lo_['verdict']} ({signed(lo_['mean_difference'])})",
                      f"{hi_['verdict']} ({signed(hi_['mean_difference'])})"])
    smallest, largest = min(cfg["public_sizes"]), max(cfg["public_sizes"])
    lines += ["Paper's claims, dp-hybrid (Laplace) per epsilon: paired AUC differences over repetitions, "
              "mean ± standard error and repetitions won",
              "", table(["epsilon", "hybrid vs private-svm", "hybrid - non-private",
                         f"hybrid vs public-only {smallest}", f"hybrid vs public-only {largest}"], vrows), "",
              f"beats / loses: mean paired difference more than 2 standard errors above / below 0, else tie; "
              f"close: hybrid's mean AUC at most {CLOSE_AUC} below the non-private SVM (learned rho, 3-entity mean).", ""]

    if cfg["extra_C"]:
        crow = []
        for c_value in cfg["extra_C"]:
            block = summary["other_C"][f"{c_value:g}"]
            for key, label in ((HYBRID_LAPLACE, "dp-hybrid, Laplace"), ("dp-hybrid/output-gamma", "dp-hybrid, output-gamma"),
                               (PRIVATE_LAPLACE, "private-svm, Laplace"), ("private-svm/output-gamma", "private-svm, output-gamma")):
                crow.append([f"C={c_value:g} {label}", *(cell(block[key][f"{e:g}"]["auc"]) for e in epsilons)])
            for key, label in ((NON_PRIVATE, "non-private (learned rho)"), ("non-private/random-rho", "non-private (random rho)"),
                               *((f"public-only/{n}", f"public-only, {n} public") for n in cfg["public_sizes"])):
                crow.append([f"C={c_value:g} {label} [no eps]", *([cell(block[key]["auc"])] * len(epsilons))])
        vrow = []
        for c_value in cfg["extra_C"]:
            entry = verdict[f"C={c_value:g}"]
            for mechanism in ("laplace", "output-gamma"):
                per = entry[mechanism]
                vrow.append([f"C={c_value:g} {mechanism}: hybrid vs private-svm",
                             *(f"{per[f'{e:g}']['hybrid_vs_private_svm']['verdict']} "
                               f"({signed(per[f'{e:g}']['hybrid_vs_private_svm']['mean_difference'])}, "
                               f"{per[f'{e:g}']['hybrid_vs_private_svm']['wins']}/{per[f'{e:g}']['hybrid_vs_private_svm']['n']})"
                               for e in epsilons)])
                vrow.append([f"C={c_value:g} {mechanism}: hybrid - non-private",
                             *(f"{'close' if per[f'{e:g}']['hybrid_minus_non_private']['close'] else 'NOT close'} "
                               f"({signed(per[f'{e:g}']['hybrid_minus_non_private']['mean_difference'])})" for e in epsilons)])
        lines += ["Other C (sensitivity on the test set, NOT used to choose C; the headline is C = "
                  f"{cfg['C']:g}): test AUC", "", table(headers, crow), "",
                  "The paper's claims at the other C (same rules; non-private = learned rho, 3-entity mean, same C)", "",
                  table(["claim", *(f"eps={e:g}" for e in epsilons)], vrow), ""]

    ds = cfg["timing_D"]
    trow = []
    for n_public in cfg["timing_public"]:
        cells = []
        for D in ds:
            t = next(x for x in timing if x["n_public"] == n_public and x["D"] == D)
            mark = "" if len(t["wall_s"]) >= 3 else f", {len(t['wall_s'])} run"
            cells.append(f"{t['median_wall_s']:.1f} s ({t['median_cpu_s']:.1f} cpu, {t['iterations']} it{mark})")
        pairs = next(x for x in timing if x["n_public"] == n_public)["n_pairs"]
        trow.append([f"{n_public} public ({pairs} pairs)", *cells])
    lines += ["Time to learn rho (learn_frequencies, L-BFGS-B to tol 1e-12, at most "
              f"{MAX_FREQUENCY_ITERATIONS} iterations, at most {MAX_FREQUENCY_PAIRS} pairs): wall-clock median of "
              f"{cfg['timing_repeats']} run(s), CPU seconds and iterations", "",
              table(["n_public", *(f"D={D}" for D in ds)], trow), ""]

    pre = [r["preprocessing"] for r in reps]
    fits = [p["rho_fit"] for p in pre]
    mse_l = [p["heldout_kernel_mse"]["dp-hybrid"] for p in pre]
    mse_r = [p["heldout_kernel_mse"]["private-svm"] for p in pre]
    constant = [len(p["features_constant_on_public"]) for p in pre]
    at_bound = {c: [r["diagnostics"]["alpha_at_bound"][c] for r in reps] for c in reps[0]["diagnostics"]["alpha_at_bound"]}
    nts = reps[0]["diagnostics"]["noise_to_signal"][f"{cfg['C']:g}"]
    lines += [
        "Diagnostics",
        f"- rho learned on {HYBRID_PUBLIC} public records per repetition: median {median([f['seconds'] for f in fits]):.1f} s, "
        f"iterations {sorted(f['iterations'] for f in fits)}, training-pair MSE {np.median([f['objective_start'] for f in fits]):.2e} -> "
        f"{np.median([f['objective_end'] for f in fits]):.2e} (medians)",
        f"- kernel approximation MSE on {DIAGNOSTIC_PAIRS} held-out public pairs (pool records outside every public set): "
        f"learned rho {np.mean(mse_l):.2e}, random rho {np.mean(mse_r):.2e} (means over repetitions)",
        f"- features constant on the {HYBRID_PUBLIC} public records (only shifted, not scaled): {constant} per repetition; "
        f"test rows outside [0, 1]^d after public scaling: {np.mean([p['test_rows_outside_unit_box'] for p in pre]):.1%} "
        f"(max |scaled value| {max(p['test_max_abs_scaled'] for p in pre):.1f})",
        "- dual variables at the bound C/n (entity 0, learned rho), mean over repetitions: "
        + ", ".join(f"C={c}: {np.mean(v):.1%}" for c, v in at_bound.items()),
        f"- ||release - exact|| / ||exact|| in repetition 0 (entity 0 / 3-entity mean), C = {cfg['C']:g}: "
        + "; ".join(f"{m} " + ", ".join(f"eps={e}: {v['entity0']:.2f}/{v['mean']:.2f}" for e, v in per.items())
                    for m, per in nts.items()),
        f"- Laplace scale per coordinate at n = {N_PRIVATE // N_ENTITIES:,}, C = {cfg['C']:g}, D = {cfg['D']}: "
        + ", ".join(f"eps={e:g}: {laplace_scale(cfg['C'], cfg['D'], N_PRIVATE // N_ENTITIES, e):.2e}" for e in epsilons)
        + f"; output-gamma L2 sensitivity 2C/n = {l2_sensitivity(cfg['C'], N_PRIVATE // N_ENTITIES):.2e}",
        f"- test error rate (sign of the decision; no intercept in the Fourier models), C = {cfg['C']:g}: "
        + ", ".join(f"{label.split(' (')[0].split(',')[0]} {summary['epsilon'][key][f'{epsilons[0]:g}']['error_rate']['mean']:.3f}"
                    for key, label in list(EPSILON_METHODS.items())[:2])
        + f" (eps={epsilons[0]:g}), non-private {summary['plain'][NON_PRIVATE]['error_rate']['mean']:.3f}, public-only "
        + ", ".join(f"{n}: {summary['public_only'][str(n)]['error_rate']['mean']:.3f}" for n in cfg["public_sizes"])
        + f"; share of >50K in the test sets {np.mean([r['test_positive_rate'] for r in reps]):.3f}"
        + "".join(f"; C={c}: non-private {summary['other_C'][c][NON_PRIVATE]['error_rate']['mean']:.3f}"
                  for c in summary["other_C"]),
        f"- decomposition check (repetition 0): private_weights == exact + mechanism noise: {reps[0].get('decomposition_check')}",
        "- benchmark noise is seeded for reproducibility; the product uses secure_generator",
    ]
    return "\n".join(lines)


def plot_auc(summary: dict[str, Any], cfg: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    epsilons = np.array(cfg["epsilons"])
    fig, ax = plt.subplots(figsize=(8.5, 5.5))
    styles = {HYBRID_LAPLACE: ("tab:red", "o"), PRIVATE_LAPLACE: ("tab:blue", "s"),
              "dp-hybrid/output-gamma": ("tab:orange", "^"), "dp-hybrid/objective": ("tab:purple", "v")}
    for k, (key, label) in enumerate(EPSILON_METHODS.items()):
        stats = [summary["epsilon"][key][f"{e:g}"]["auc"] for e in epsilons]
        offset = 2.0 ** (0.03 * (k - 1.5))  # small horizontal shifts so error bars do not overlap
        color, marker = styles[key]
        ax.errorbar(epsilons * offset, [s["mean"] for s in stats], yerr=[s["std"] for s in stats], color=color,
                    marker=marker, capsize=3, label=label)
    np_stats = summary["plain"][NON_PRIVATE]["auc"]
    ax.axhline(np_stats["mean"], color="black", linestyle="-", linewidth=1.5, label=f"{PLAIN_METHODS[NON_PRIVATE]}")
    if "exact-rbf/subsample" in summary["plain"]:
        ax.axhline(summary["plain"]["exact-rbf/subsample"]["auc"]["mean"], color="gray", linestyle=":", linewidth=1.5,
                   label=f"exact RBF SVM, {cfg['exact_rows']:,} private rows")
    greens = matplotlib.colormaps["Greens"]
    sizes = cfg["public_sizes"]
    for k, size in enumerate(sizes):
        ax.axhline(summary["public_only"][str(size)]["auc"]["mean"], color=greens(0.4 + 0.6 * k / max(len(sizes) - 1, 1)),
                   linestyle="--", linewidth=1.3, label=f"public-only, {size} public")
    ax.set_xscale("log", base=2)
    ax.set_xticks(epsilons)
    ax.set_xticklabels([f"{e:g}" for e in epsilons])
    ax.set_xlabel("epsilon (per entity release)")
    ax.set_ylabel(f"test AUC ({N_TEST:,} records)")
    ax.set_title(f"UCI Adult: DP RBF SVMs, {N_PRIVATE:,} private records over {N_ENTITIES} entities, "
                 f"C = {cfg['C']:g}, D = {cfg['D']}\nmean ± s.d. over {cfg['reps']} repetitions (Li et al. 2014, Fig. 3 setting)",
                 fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7.5, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_timing(timing: list[dict[str, Any]], cfg: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    for k, D in enumerate(cfg["timing_D"]):
        points = sorted((t["n_public"], t["median_wall_s"], t["median_cpu_s"]) for t in timing if t["D"] == D)
        color = f"C{k}"
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", color=color, label=f"D = {D}, wall-clock")
        ax.plot([p[0] for p in points], [p[2] for p in points], marker=".", linestyle=":", color=color,
                label=f"D = {D}, CPU")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks(cfg["timing_public"])
    ax.set_xticklabels([str(n) for n in cfg["timing_public"]])
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.yaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
    ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xlabel(f"public records (at most {MAX_FREQUENCY_PAIRS:,} pairs: 100 and 200 use the same count)")
    ax.set_ylabel("seconds to learn rho (median of runs)")
    ax.set_title("learn_frequencies on UCI Adult public records (Li et al. 2014, Fig. 4 setting)", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="2 repetitions, epsilon 1 and 4, public-only 20 and 200, a 2 x 2 single-run rho timing")
    parser.add_argument("--reps", type=int, help="repetitions (default 10; quick 2)")
    parser.add_argument("--seed", type=int, default=0, help="repetition r uses seed + r (default 0)")
    parser.add_argument("--data", type=Path, default=DATA, help=f"adult.data (default {DATA})")
    parser.add_argument("--C", type=float, default=DEFAULT_C, help=f"SVM cost, (C/n) sum hinge (default {DEFAULT_C:g})")
    parser.add_argument("--D", type=int, default=DEFAULT_N_FREQUENCIES, help=f"frequencies (default {DEFAULT_N_FREQUENCIES})")
    parser.add_argument("--extra-C", help="comma-separated C values for the sensitivity table ('' for none; default 10,100)")
    parser.add_argument("--exact-rows", type=int, help="private rows of the exact RBF SVM (0: skip; default 1000)")
    parser.add_argument("--raw-capital", action="store_true", help="do not log1p capital-gain and capital-loss")
    parser.add_argument("--no-timing", action="store_true", help="skip the rho timing table")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")

    preset = dict(QUICK if args.quick else FULL)
    cfg: dict[str, Any] = {**preset, "C": args.C, "D": args.D, "quick": args.quick}
    if args.reps is not None:
        cfg["reps"] = args.reps
    if args.extra_C is not None:
        cfg["extra_C"] = [float(v) for v in args.extra_C.split(",") if v.strip()]
    if args.exact_rows is not None:
        cfg["exact_rows"] = args.exact_rows
    if cfg["reps"] < 1:
        parser.error("need --reps >= 1")

    info = machine_info()
    print_machine(info)
    X, y, names, checks = load_adult(args.data, log_capital=not args.raw_capital)
    seeds = [args.seed + r for r in range(cfg["reps"])]
    print(f"UCI Adult {X.shape[0]:,} records ({checks['positives']:,} >50K), {X.shape[1]} features: {', '.join(names)}; "
          f"no '?' in the columns used ('?' in {checks['rows_with_any_question_mark']:,} rows, other columns only)")
    print(f"per repetition: {N_PRIVATE:,} private records over {N_ENTITIES} entities, {N_TEST:,} test, public pool "
          f"{X.shape[0] - N_PRIVATE - N_TEST:,}; dp-hybrid and private-svm scale and set the width from {HYBRID_PUBLIC} "
          f"public records; C = {cfg['C']:g}, D = {cfg['D']}; epsilons {cfg['epsilons']}; seeds {seeds}")
    print("benchmark noise is seeded for reproducibility; the product uses secure_generator\n", flush=True)

    started = time.perf_counter()
    reps = []
    for r, seed in enumerate(seeds):
        result = run_rep(X, y, seed, cfg, check=r == 0)
        reps.append(result)
        h = result["epsilon"][HYBRID_LAPLACE]
        p = result["epsilon"][PRIVATE_LAPLACE]
        print(f"rep {r + 1}/{len(seeds)} (seed {seed}): {result['seconds']:.0f} s, rho fit "
              f"{result['preprocessing']['rho_fit']['seconds']:.0f} s; AUC hybrid "
              + " ".join(f"{h[k]['auc']:.3f}" for k in h) + " | private-svm " + " ".join(f"{p[k]['auc']:.3f}" for k in p)
              + f" | non-private {result['plain'][NON_PRIVATE]['auc']:.3f}", file=sys.stderr, flush=True)
    reps_seconds = time.perf_counter() - started
    timing: list[dict[str, Any]] = []
    timing_started = time.perf_counter()
    if not args.no_timing:
        timing = rho_timing(X, seeds[0], cfg)
    timing_seconds = time.perf_counter() - timing_started
    total = time.perf_counter() - started

    summary = summarise(reps, cfg["epsilons"], cfg)
    verdict = verdicts(reps, cfg["epsilons"], cfg)
    if not timing:
        cfg["timing_public"], cfg["timing_D"] = [], []
    text = report(summary, verdict, timing, reps, cfg)
    print(text)
    RESULTS.mkdir(parents=True, exist_ok=True)
    auc_png, time_png = RESULTS / f"{NAME}.png", RESULTS / "dp_rho_time.png"
    plot_auc(summary, cfg, auc_png)
    if timing:
        plot_timing(timing, cfg, time_png)
    info["load_average_at_end"] = load_average()
    info["wall_clock_s"] = total
    print(f"\nwall clock: repetitions {reps_seconds:.0f} s, rho timing {timing_seconds:.0f} s, total {total:.0f} s; "
          f"load average at end {info['load_average_at_end']}")
    rerun = " ".join(["PYTHONPATH=. .venv/bin/python benchmarks/dp_adult.py", *(["--quick"] if args.quick else []),
                      *([f"--reps {cfg['reps']}"] if cfg["reps"] != preset["reps"] else []),
                      *([f"--seed {args.seed}"] if args.seed else []),
                      *([f"--C {args.C:g}"] if args.C != DEFAULT_C else []),
                      *([f"--D {args.D}"] if args.D != DEFAULT_N_FREQUENCIES else []),
                      *([f"--extra-C '{args.extra_C}'"] if args.extra_C is not None else []),
                      *([f"--exact-rows {args.exact_rows}"] if args.exact_rows is not None else []),
                      *(["--raw-capital"] if args.raw_capital else []),
                      *(["--no-timing"] if args.no_timing else []),
                      *([f"--data {args.data}"] if args.data != DATA else [])])
    print(f"rerun: {rerun}")
    settings = {
        **cfg, "seeds": seeds, "data": str(args.data), "features": names, "fnlwgt": "excluded (census sampling weight)",
        "log1p_capital": not args.raw_capital, "data_checks": checks,
        "split": {"private": N_PRIVATE, "entities": N_ENTITIES, "per_entity": N_PRIVATE // N_ENTITIES, "test": N_TEST,
                  "public_pool": X.shape[0] - N_PRIVATE - N_TEST, "public_sets": "nested prefixes of the shuffled pool",
                  "hybrid_public": HYBRID_PUBLIC},
        "scaling_and_width": f"public_scaling / public_kernel_width of the {HYBRID_PUBLIC} public records, for dp-hybrid "
                             "and private-svm alike; public-only: of its own public set",
        "combine": "n_i-weighted mean of the entities' released weights (coordinator.dp_train.train_dp)",
        "noise": "seeded numpy generators np.random.default_rng([seed, tag, ...]) for reproducibility; the product "
                 "uses secure_generator",
        "huber_h": DEFAULT_HUBER_H, "close_auc": CLOSE_AUC, "verdict_rule": "mean paired difference beyond 2 standard errors",
        "single_above_s": SINGLE_ABOVE_S,
    }
    path = write_json(NAME, {"machine": info, "versions": package_versions(("numpy", "scipy", "matplotlib")),
                             "settings": settings, "summary": summary, "verdicts": verdict, "rho_timing": timing,
                             "repetitions": reps, "seconds": {"repetitions": reps_seconds, "rho_timing": timing_seconds,
                                                              "total": total},
                             "outputs": [str(auc_png.relative_to(ROOT)), *([str(time_png.relative_to(ROOT))] if timing else [])],
                             "rerun": rerun})
    print(f"wrote {path.relative_to(ROOT)}, {auc_png.relative_to(ROOT)}"
          + (f", {time_png.relative_to(ROOT)}" if timing else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
