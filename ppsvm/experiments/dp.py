"""``ppsvm reproduce dp``: Li, Xiong, Ohno-Machado & Jiang 2014, Figures 3 and 4 on UCI Adult.

The paper's claims checked here: the hybrid DP RBF SVM (rho learned on a few public
records) beats PrivateSVM (rho drawn at random) at every epsilon and stays close to the
non-private SVM; it also beats SVMs trained on the public records alone. Figure 4 (our
reading; the paper's PDF is not available here): the time to learn rho against the
number of public records and D.

Setting (every decision the paper or the issue left open, stated; the Markdown the run
writes repeats them with the values used):

- Data: the shipped ``adult.data`` (32,561 records; the UCI file), label +1 for ``>50K``.
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
- Per repetition r (seed = --seed + r, 10 repetitions; every generator is
  ``np.random.default_rng([seed, purpose tag, ...])``, i.e. numpy's SeedSequence): shuffle;
  the first 27,000 records are private, split evenly over 3 entities (9,000 each); the next
  3,000 are the test set; the remaining 2,561 are the public pool. Public sets are nested
  prefixes of the pool: 20 within 50 within 100 within 200.
- dp-hybrid and private-svm both take the feature scaling (:func:`ppsvm.core.fourier.public_scaling`,
  :func:`ppsvm.core.fourier.apply_scaling`) and the kernel width (:func:`ppsvm.core.fourier.public_kernel_width`,
  the median heuristic) from the same 20 public records: neither touches private data for
  them. dp-hybrid learns rho with :func:`ppsvm.core.fourier.learn_frequencies` on those 20 records;
  private-svm draws rho with :func:`ppsvm.core.fourier.random_frequencies`. D = 100 frequencies (the
  product default).
- C = 1 in the (C/n) * sum hinge convention (the product default; the paper's C was not
  available to check, and C is not tuned: tuning it on 20 public records would say nothing
  about a 9,000-record SVM, and tuning on the test set is not allowed). With ||zhat|| = 1,
  C <= 1 makes every record a margin violator (margins <= ||w|| <= C), so the SVM is exactly
  w = (C/n) sum_i y_i zhat(x_i): the JSON records the fraction of dual variables at their
  bound. The "other C" table reports C = 10 and 100 as a sensitivity (test-set figures,
  public-only included, not used to choose anything; the headline stays C = 1).
- Each entity maps its rows with fourier_features(apply_scaling(rows, low, high), rho), as
  ``ppsvm.entity.cell.EntityCore.dp_weights`` does, and releases w through a mechanism; the model
  is the n_i-weighted mean of the 3 releases, as ``ppsvm.coordinator.dp_train.train_dp`` combines
  them (each release is epsilon-DP for its own entity's records; the mean costs nothing
  more). The exact weights are :func:`ppsvm.core.linear_svm.train_linear_svm`'s, which is what
  ``private_weights(..., mechanism="none")`` returns; the Laplace and output-gamma releases
  add :func:`ppsvm.core.dp.laplace_output_perturbation` / :func:`ppsvm.core.dp.output_perturbation`
  noise to them, which is what :func:`ppsvm.core.dp.private_weights` does internally (checked bit
  for bit in repetition 0: the "decomposition check"), so the SVM is trained once per entity
  and not once per (epsilon, mechanism). The objective mechanism calls ``private_weights``.
- Mechanisms: the paper's Laplace mechanism is the headline for both dp-hybrid and
  private-svm; output-gamma and objective perturbation (Chaudhuri, Monteleoni, Sarwate 2011)
  for dp-hybrid are OUR ADDITIONS, labelled so. Every (method, mechanism, epsilon) is a
  separate experiment on the same records: budgets are not composed across them.
- Noise here is seeded for reproducibility; the product's training draws it from
  :func:`ppsvm.core.dp.secure_generator` (the OS CSPRNG).
- Non-private (the solid line): the same pipeline with no noise (the n-weighted mean of the
  3 entities' exact weights, learned rho). Extra rows: the same with private-svm's random
  rho; one linear SVM on the pooled 27,000 mapped rows (learned rho); an exact RBF SVM
  (:func:`ppsvm.core.linear_svm.train_kernel_svm`, intercept as a constant feature) on a random
  subsample of ``--exact-rows`` private records with the same public scaling and width.
- public-only: ``train_kernel_svm`` on 20 / 50 / 100 / 200 public records, each set with its
  own public scaling and width (as ``ppsvm.coordinator.dp_train`` does for public-only); no epsilon.
- AUC (:func:`ppsvm.core.metrics.auc`) on the 3,000 test records: mean and standard deviation
  over repetitions; the error rate (sign of the decision, no intercept for the Fourier
  models) is in the JSON.
- Verdicts per epsilon: "beats" when the mean paired AUC difference (same repetition) is
  more than 2 standard errors above 0, "loses" when more than 2 below, else "tie" (with one
  repetition there is no standard error and the sign decides); "close" to non-private when
  the mean AUC is at most :data:`CLOSE_AUC` below it.
- Time to learn rho: ``learn_frequencies`` on the public records of repetition 0 (each size
  scaled by its own range, width by the median heuristic) for n_public in {20, 50, 100, 200}
  and D in {25, 50, 100, 200}; wall-clock median of 3 runs (1 run when a run exceeds 60 s).
  Timings live under keys named ``seconds`` in the JSON: everything else is identical on a
  rerun with the same options on the same machine. Another BLAS thread count changes the
  rounding inside the 500 L-BFGS iterations that learn rho, and with it dp-hybrid's AUCs in
  the fourth or fifth decimal (measured: OPENBLAS_NUM_THREADS=1 against 2).

``--quick``: 2 repetitions, epsilon 1 and 4, public-only 20 and 200, a 500-row exact RBF
SVM, C = 100 as the only other C, and a single-run rho timing grid of 20 and 50 public records
by D = 25 and 50.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import hashlib
import logging
import math
import os
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ppsvm.core.dp import (
    DEFAULT_HUBER_H,
    DEFAULT_N_FREQUENCIES,
    l2_sensitivity,
    laplace_output_perturbation,
    laplace_scale,
    output_perturbation,
    private_weights,
)
from ppsvm.core.fourier import (
    MAX_FREQUENCY_ITERATIONS,
    MAX_FREQUENCY_PAIRS,
    apply_scaling,
    fourier_features,
    frequency_objective,
    learn_frequencies,
    public_kernel_width,
    public_scaling,
    random_frequencies,
)
from ppsvm.core.kernels import gaussian_kernel
from ppsvm.core.linear_svm import DEFAULT_C, decision, train_kernel_svm, train_linear_svm
from ppsvm.core.metrics import evaluate
from ppsvm.data.shipped import SHIPPED_DATA
from ppsvm.errors import ConfigError, DataError
from ppsvm.experiments import report

NAME = "dp"
DATA_FILE = "adult.data"
FIGURE_AUC = "dp-figure3.png"
FIGURE_RHO_TIME = "dp-figure4.png"

# adult.data columns (0-based) and the values used.
AGE, EDUCATION_NUM, MARITAL, GAIN, LOSS, HOURS, LABEL = 0, 4, 5, 10, 11, 12, 14
N_COLUMNS = 15
POSITIVE = ">50K"
MARITAL_VALUES = (
    "Divorced",
    "Married-AF-spouse",
    "Married-civ-spouse",
    "Married-spouse-absent",
    "Never-married",
    "Separated",
    "Widowed",
)

# The split.
N_PRIVATE = 27_000
N_ENTITIES = 3
N_TEST = 3_000
HYBRID_PUBLIC = 20

# A timing run longer than this is not repeated: the median of 3 would cost minutes more.
SINGLE_ABOVE_S = 60.0
# "Close to the non-private model": mean AUC at most this far below it.
CLOSE_AUC = 0.01
# Public pairs (from pool records outside every public set) on which the kernel approximation is checked.
DIAGNOSTIC_POOL_ROWS = 400
DIAGNOSTIC_PAIRS = 2_000

# Purpose tags of the seeded generators: np.random.default_rng([seed, TAG, ...]). The values are
# those of the benchmark this target replaced, so its numbers carry over unchanged.
TAG_SPLIT, TAG_LEARN, TAG_RANDOM, TAG_NOISE, TAG_EXACT, TAG_DIAG, TAG_TIMING, TAG_CHECK = range(1, 9)
MECHANISM_TAG = {"laplace": 0, "output-gamma": 1, "objective": 2}
MAP_TAG = {"dp-hybrid": 0, "private-svm": 1}

# Rows of the AUC table, in order: key -> label.
HYBRID_LAPLACE = "dp-hybrid/laplace"
PRIVATE_LAPLACE = "private-svm/laplace"
NON_PRIVATE = "non-private/learned-rho"
EXACT_RBF = "exact-rbf/subsample"
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
    EXACT_RBF: "exact RBF SVM, private subsample",
}
FIGURES = ("auc", "error_rate")


@dataclasses.dataclass(frozen=True)
class Preset:
    """The settings ``--quick`` and a full run differ in (options left unset take them)."""

    repetitions: int
    epsilons: tuple[float, ...]
    public_sizes: tuple[int, ...]
    timing_public: tuple[int, ...]
    timing_frequencies: tuple[int, ...]
    timing_repeats: int
    exact_rows: int
    other_C: tuple[float, ...]


FULL = Preset(
    repetitions=10,
    epsilons=(0.5, 1.0, 2.0, 4.0),
    public_sizes=(20, 50, 100, 200),
    timing_public=(20, 50, 100, 200),
    timing_frequencies=(25, 50, 100, 200),
    timing_repeats=3,
    exact_rows=1000,
    other_C=(10.0, 100.0),
)
QUICK = Preset(
    repetitions=2,
    epsilons=(1.0, 4.0),
    public_sizes=(20, 200),
    timing_public=(20, 50),
    timing_frequencies=(25, 50),
    timing_repeats=1,
    exact_rows=500,
    other_C=(100.0,),
)


@dataclasses.dataclass(frozen=True)
class DpReproduceOptions:
    """What ``ppsvm reproduce dp`` was asked for; None takes the ``--quick`` or full preset.

    Raises :class:`ppsvm.errors.ConfigError` on a setting that cannot run.
    """

    out: Path = report.DEFAULT_OUT
    quick: bool = False
    no_progress: bool = False
    repetitions: int | None = None
    epsilons: tuple[float, ...] | None = None
    seed: int = 0
    C: float = DEFAULT_C
    frequencies: int = DEFAULT_N_FREQUENCIES
    other_C: tuple[float, ...] | None = None
    exact_rows: int | None = None
    raw_capital: bool = False
    no_timing: bool = False

    def __post_init__(self) -> None:
        if self.repetitions is not None and self.repetitions < 1:
            raise ConfigError(f"--repetitions must be at least 1, got {self.repetitions}")
        if self.epsilons is not None:
            if not self.epsilons or not all(math.isfinite(e) and e > 0 for e in self.epsilons):
                raise ConfigError(f"--epsilon needs one or more finite values > 0, got {list(self.epsilons)}")
            if len(set(self.epsilons)) != len(self.epsilons):
                raise ConfigError(f"--epsilon values must be distinct, got {list(self.epsilons)}")
        if self.seed < 0:
            raise ConfigError(f"--seed must be >= 0 (numpy seed sequences take non-negative integers), got {self.seed}")
        if not (math.isfinite(self.C) and self.C > 0):
            raise ConfigError(f"--C must be a finite number > 0, got {self.C}")
        if self.frequencies < 1:
            raise ConfigError(f"--frequencies must be at least 1, got {self.frequencies}")
        if self.other_C is not None:
            if not all(math.isfinite(c) and c > 0 for c in self.other_C):
                raise ConfigError(f"--other-C values must be finite numbers > 0, got {list(self.other_C)}")
            if len(set(self.other_C)) != len(self.other_C) or self.C in self.other_C:
                raise ConfigError(
                    f"--other-C values must be distinct and differ from --C {self.C:g}, got {list(self.other_C)}"
                )
        if self.exact_rows is not None and not 0 <= self.exact_rows <= N_PRIVATE:
            raise ConfigError(f"--exact-rows must be between 0 (skip) and {N_PRIVATE:,}, got {self.exact_rows}")


@dataclasses.dataclass(frozen=True)
class Settings:
    """Every setting of one run, preset and options resolved (recorded in the JSON)."""

    quick: bool
    repetitions: int
    seed: int
    epsilons: tuple[float, ...]
    C: float
    frequencies: int
    public_sizes: tuple[int, ...]
    other_C: tuple[float, ...]
    exact_rows: int
    log_capital: bool
    timing_public: tuple[int, ...]
    timing_frequencies: tuple[int, ...]
    timing_repeats: int

    @property
    def seeds(self) -> list[int]:
        return [self.seed + r for r in range(self.repetitions)]


def resolve_settings(options: DpReproduceOptions) -> Settings:
    """The preset (``--quick`` or full) overridden by the options that were set.

    Epsilons are sorted so that tables and the figure run left to right.
    """
    preset = QUICK if options.quick else FULL
    timing = not options.no_timing
    return Settings(
        quick=options.quick,
        repetitions=preset.repetitions if options.repetitions is None else options.repetitions,
        seed=options.seed,
        epsilons=tuple(sorted(preset.epsilons if options.epsilons is None else options.epsilons)),
        C=options.C,
        frequencies=options.frequencies,
        public_sizes=preset.public_sizes,
        other_C=preset.other_C if options.other_C is None else options.other_C,
        exact_rows=preset.exact_rows if options.exact_rows is None else options.exact_rows,
        log_capital=not options.raw_capital,
        timing_public=preset.timing_public if timing else (),
        timing_frequencies=preset.timing_frequencies if timing else (),
        timing_repeats=preset.timing_repeats,
    )


def rng(*key: int) -> np.random.Generator:
    """A generator seeded from (seed, purpose tag, ...): reproducible, independent streams."""
    return np.random.default_rng([int(k) for k in key])


def key(value: float) -> str:
    """An epsilon or C as a JSON key: 0.5 -> "0.5", 1.0 -> "1"."""
    return f"{value:g}"


# --- data -----------------------------------------------------------------------------------------


def load_adult(path: Path, log_capital: bool) -> tuple[np.ndarray, np.ndarray, list[str], dict[str, Any]]:
    """UCI Adult as the paper's 12 features and +-1 labels.

    Parameters
    ----------
    path : Path
        ``adult.data`` (15 comma-separated fields per record).
    log_capital : bool
        Apply log1p to capital-gain and capital-loss.

    Returns
    -------
    X : ndarray, shape (m, 12)
        age, education-num, capital-gain, capital-loss, hours-per-week, marital-status one-hot (7).
    y : ndarray, shape (m,)
        +1 for ``>50K``, else -1.
    names : list of str, length 12
    checks : dict
        Record and class counts and where '?' occurs.

    Raises
    ------
    DataError
        A record without 15 fields, a '?' in a column used, or unknown marital-status values.
    """
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    rows = [[field.strip() for field in line.split(",")] for line in lines]
    bad = [k for k, r in enumerate(rows) if len(r) != N_COLUMNS]
    if bad:
        raise DataError(f"{path}: {len(bad)} records without {N_COLUMNS} fields (first: record {bad[0] + 1})")
    used = (AGE, EDUCATION_NUM, MARITAL, GAIN, LOSS, HOURS, LABEL)
    missing_used = {c: sum(r[c] == "?" for r in rows) for c in used}
    if any(missing_used.values()):
        raise DataError(f"{path}: '?' in the columns used (column: count): {missing_used}")
    marital = sorted({r[MARITAL] for r in rows})
    if not set(marital) <= set(MARITAL_VALUES):
        raise DataError(f"{path}: unexpected marital-status values {sorted(set(marital) - set(MARITAL_VALUES))}")
    numeric = np.array([[float(r[c]) for c in (AGE, EDUCATION_NUM, GAIN, LOSS, HOURS)] for r in rows])
    if log_capital:
        numeric[:, 2:4] = np.log1p(numeric[:, 2:4])
    one_hot = np.array([[r[MARITAL] == v for v in MARITAL_VALUES] for r in rows], dtype=float)
    X = np.hstack([numeric, one_hot])
    y = np.where(np.array([r[LABEL] for r in rows]) == POSITIVE, 1.0, -1.0)
    capital = "log1p({})" if log_capital else "{}"
    names = [
        "age",
        "education-num",
        capital.format("capital-gain"),
        capital.format("capital-loss"),
        "hours-per-week",
        *(f"marital={v}" for v in MARITAL_VALUES),
    ]
    checks = {
        "records": len(rows),
        "positives": int((y > 0).sum()),
        "negatives": int((y < 0).sum()),
        "question_marks_in_used_columns": {str(c): n for c, n in missing_used.items()},
        "question_marks_by_column_all": {
            str(c): sum(r[c] == "?" for r in rows) for c in range(N_COLUMNS) if any(r[c] == "?" for r in rows)
        },
        "rows_with_any_question_mark": sum(any(f == "?" for f in r) for r in rows),
    }
    return X, y, names, checks


# --- one repetition -------------------------------------------------------------------------------


def kernel_mse(rho: np.ndarray, P: np.ndarray, i: np.ndarray, j: np.ndarray, gamma: float) -> float:
    """Mean squared error of zhat(x_i)'zhat(x_j) against exp(-gamma ||x_i - x_j||^2) over pairs (i, j).

    Parameters
    ----------
    rho : ndarray, shape (D, d)
    P : ndarray, shape (m, d)
        Scaled public records.
    i, j : ndarray, shape (pairs,)
        Row indices into ``P``.
    gamma : float

    Returns
    -------
    float
    """
    differences = P[i] - P[j]
    # zhat(x_i)'zhat(x_j) = (1/D) sum_k cos(rho_k'(x_i - x_j)): the very error learn_frequencies minimises.
    return frequency_objective(rho, differences, np.exp(-gamma * (differences**2).sum(1)))[0]


def public_only(X: np.ndarray, y: np.ndarray, public: np.ndarray, test: np.ndarray, C: float) -> dict[str, Any]:
    """``train_kernel_svm`` on the public records alone, with their own scaling and width (no epsilon).

    Parameters
    ----------
    X : ndarray, shape (m, d)
    y : ndarray, shape (m,)
    public, test : ndarray of int
        Row indices of the public and test records.
    C : float

    Returns
    -------
    dict
        Test AUC and error rate, public positives and the kernel width.
    """
    low, high = public_scaling(X[public])
    scaled = apply_scaling(X[public], low, high)
    width = public_kernel_width(scaled)
    model = train_kernel_svm(gaussian_kernel(scaled, scaled, width), y[public], C)
    scores = decision(gaussian_kernel(apply_scaling(X[test], low, high), scaled, width), model)
    return {**evaluate("classify", y[test], scores), "positives": int((y[public] > 0).sum()), "kernel_width": width}


def split_indices(m: int, seed: int) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    """Repetition ``seed``'s shuffle of ``m`` records into entity blocks, test rows and the public pool.

    Returns
    -------
    entities : list of ndarray
        N_ENTITIES blocks of N_PRIVATE / N_ENTITIES record indices.
    test : ndarray, shape (N_TEST,)
    pool : ndarray, shape (m - N_PRIVATE - N_TEST,)
        Public sets are its prefixes.
    """
    perm = rng(seed, TAG_SPLIT).permutation(m)
    private, test, pool = perm[:N_PRIVATE], perm[N_PRIVATE : N_PRIVATE + N_TEST], perm[N_PRIVATE + N_TEST :]
    return np.array_split(private, N_ENTITIES), test, pool


def run_repetition(X: np.ndarray, y: np.ndarray, seed: int, settings: Settings, check: bool) -> dict[str, Any]:
    """One repetition: split, public preprocessing, every method at every epsilon and C.

    Parameters
    ----------
    X : ndarray, shape (m, d)
    y : ndarray, shape (m,)
    seed : int
        This repetition's seed (every generator is derived from it).
    settings : Settings
    check : bool
        Also run the decomposition check (private_weights == exact weights + noise).

    Returns
    -------
    dict
        Per-epsilon, no-epsilon, public-only and other-C figures, preprocessing and diagnostics.
    """
    started = time.perf_counter()
    C, D, epsilons = settings.C, settings.frequencies, settings.epsilons
    entities, test, pool = split_indices(len(y), seed)
    private = np.concatenate(entities)
    counts = np.array([len(e) for e in entities], dtype=float)
    public = pool[:HYBRID_PUBLIC]
    out: dict[str, Any] = {
        "seed": seed,
        "epsilon": {},
        "plain": {},
        "public_only": {},
        "other_C": {key(c): {} for c in settings.other_C},
    }

    # Preprocessing shared by dp-hybrid and private-svm, from the 20 public records only.
    low, high = public_scaling(X[public])
    scaled_public = apply_scaling(X[public], low, high)
    width = public_kernel_width(scaled_public)
    fit = learn_frequencies(scaled_public, width, D, rng(seed, TAG_LEARN))
    rho = {"dp-hybrid": fit.rho, "private-svm": random_frequencies(X.shape[1], D, width, rng(seed, TAG_RANDOM))}
    test_scaled = apply_scaling(X[test], low, high)
    diag_rows = pool[max(settings.public_sizes) :][:DIAGNOSTIC_POOL_ROWS]
    P = apply_scaling(X[diag_rows], low, high)
    pairs = rng(seed, TAG_DIAG).choice(len(P) * (len(P) - 1) // 2, size=DIAGNOSTIC_PAIRS, replace=False)
    iu, ju = np.triu_indices(len(P), k=1)
    i, j = iu[pairs], ju[pairs]
    out["preprocessing"] = {
        "kernel_width": width,
        "public_positives": int((y[public] > 0).sum()),
        "features_constant_on_public": [int(k) for k in np.flatnonzero(high <= low)],
        "test_rows_outside_unit_box": float(np.mean(((test_scaled < 0) | (test_scaled > 1)).any(axis=1))),
        "test_max_abs_scaled": float(np.abs(test_scaled).max()),
        "rho_fit": {
            "seconds": fit.seconds,
            "iterations": fit.iterations,
            "n_pairs": fit.n_pairs,
            "objective_start": fit.objective_start,
            "objective_end": fit.objective_end,
            "message": fit.message,
        },
        "heldout_kernel_mse": {name: kernel_mse(r, P, i, j, width) for name, r in rho.items()},
    }

    diagnostics: dict[str, Any] = {"alpha_at_bound": {}, "noise_to_signal": {}}
    for map_name, frequencies in rho.items():
        Zt = fourier_features(test_scaled, frequencies)
        Zs = [fourier_features(apply_scaling(X[e], low, high), frequencies) for e in entities]
        for c_index, c_value in enumerate((C, *settings.other_C)):
            headline = c_index == 0
            fits = [train_linear_svm(Z, y[e], c_value) for Z, e in zip(Zs, entities, strict=True)]
            exact = [f.w for f in fits]
            if map_name == "dp-hybrid":
                # Entity 0's dual variables at the bound C/n; all of them (C <= 1) means w = (C/n) sum y z exactly.
                alpha = fits[0].alpha
                diagnostics["alpha_at_bound"][key(c_value)] = float(
                    np.mean(np.isclose(alpha, c_value / len(alpha), rtol=1e-9, atol=0.0))
                )
            mean_exact = np.average(exact, axis=0, weights=counts)
            bucket = out["plain"] if headline else out["other_C"][key(c_value)]
            exact_name = NON_PRIVATE if map_name == "dp-hybrid" else "non-private/random-rho"
            bucket[exact_name] = evaluate("classify", y[test], Zt @ mean_exact)
            bucket = out["epsilon"] if headline else out["other_C"][key(c_value)]
            # Objective perturbation re-solves a perturbed problem per release: headline C only.
            mechanisms = ["laplace"]
            if map_name == "dp-hybrid":
                mechanisms += ["output-gamma"] + (["objective"] if headline else [])
            elif not headline:
                mechanisms += ["output-gamma"]
            for e_index, eps in enumerate(epsilons):
                for mechanism in mechanisms:
                    releases = []
                    for k, (Z, e, w) in enumerate(zip(Zs, entities, exact, strict=True)):
                        gen = rng(seed, TAG_NOISE, MAP_TAG[map_name], MECHANISM_TAG[mechanism], e_index, k, c_index)
                        if mechanism == "laplace":
                            releases.append(
                                laplace_output_perturbation(w, n=len(e), C=c_value, D=D, epsilon=eps, rng=gen)
                            )
                        elif mechanism == "output-gamma":
                            releases.append(output_perturbation(w, n=len(e), C=c_value, epsilon=eps, rng=gen))
                        else:
                            releases.append(
                                private_weights(
                                    Z,
                                    y[e],
                                    C=c_value,
                                    epsilon=eps,
                                    mechanism="objective",
                                    rng=gen,
                                    huber_h=DEFAULT_HUBER_H,
                                ).weights
                            )
                    model = np.average(releases, axis=0, weights=counts)
                    bucket.setdefault(f"{map_name}/{mechanism}", {})[key(eps)] = evaluate(
                        "classify", y[test], Zt @ model
                    )
                    if map_name == "dp-hybrid" and mechanism != "objective":
                        noise = diagnostics["noise_to_signal"].setdefault(key(c_value), {}).setdefault(mechanism, {})
                        noise[key(eps)] = {
                            "entity0": float(np.linalg.norm(releases[0] - exact[0]) / np.linalg.norm(exact[0])),
                            "mean": float(np.linalg.norm(model - mean_exact) / np.linalg.norm(mean_exact)),
                        }
            if map_name == "dp-hybrid" and headline and check:
                out["decomposition_check"] = decomposition_check(
                    Zs[0], y[entities[0]], exact[0], C, D, epsilons[0], seed
                )
        if map_name == "dp-hybrid":
            pooled = train_linear_svm(np.vstack(Zs), y[private], C)
            out["plain"]["non-private/pooled-learned-rho"] = evaluate("classify", y[test], Zt @ pooled.w)
    out["diagnostics"] = diagnostics

    if settings.exact_rows > 0:
        subsample = rng(seed, TAG_EXACT).choice(private, size=settings.exact_rows, replace=False)
        A = apply_scaling(X[subsample], low, high)
        rbf = train_kernel_svm(gaussian_kernel(A, A, width), y[subsample], C)
        out["plain"][EXACT_RBF] = evaluate("classify", y[test], decision(gaussian_kernel(test_scaled, A, width), rbf))
    for size in settings.public_sizes:
        out["public_only"][str(size)] = public_only(X, y, pool[:size], test, C)
        for c_value in settings.other_C:
            out["other_C"][key(c_value)][f"public-only/{size}"] = public_only(X, y, pool[:size], test, c_value)
    out["test_positive_rate"] = float(np.mean(y[test] > 0))
    out["seconds"] = time.perf_counter() - started
    return out


def decomposition_check(
    Z: np.ndarray, y: np.ndarray, exact: np.ndarray, C: float, D: int, eps: float, seed: int
) -> dict[str, bool]:
    """Whether ``private_weights`` with a seeded generator equals exact weights + the mechanism's noise, bit for bit.

    Parameters
    ----------
    Z : ndarray, shape (n, 2D)
    y : ndarray, shape (n,)
    exact : ndarray, shape (2D,)
        The exact SVM weights on (Z, y).
    C, D, eps, seed

    Returns
    -------
    dict
        Mechanism name -> bool, for "laplace" and "output-gamma".
    """
    result = {}
    for mechanism in ("laplace", "output-gamma"):
        release = private_weights(Z, y, C=C, epsilon=eps, mechanism=mechanism, rng=rng(seed, TAG_CHECK))
        if mechanism == "laplace":
            ours = laplace_output_perturbation(exact, n=len(y), C=C, D=D, epsilon=eps, rng=rng(seed, TAG_CHECK))
        else:
            ours = output_perturbation(exact, n=len(y), C=C, epsilon=eps, rng=rng(seed, TAG_CHECK))
        result[mechanism] = bool(np.array_equal(release.weights, ours))
    return result


# --- time to learn rho ----------------------------------------------------------------------------


def rho_timing(X: np.ndarray, settings: Settings, done: Callable[[dict[str, Any]], None]) -> list[dict[str, Any]]:
    """``learn_frequencies`` wall and CPU seconds on repetition 0's public records, per (n_public, D).

    Parameters
    ----------
    X : ndarray, shape (m, d)
    settings : Settings
        The grid (``timing_public`` x ``timing_frequencies``) and the repeats.
    done : callable
        Called with each point's row as soon as it is measured (progress).

    Returns
    -------
    list of dict
        One row per point; every timing is under its "seconds" key.
    """
    seed = settings.seeds[0]
    _, _, pool = split_indices(len(X), seed)
    rows = []
    for n_public in settings.timing_public:
        low, high = public_scaling(X[pool[:n_public]])
        scaled = apply_scaling(X[pool[:n_public]], low, high)
        width = public_kernel_width(scaled)
        for D in settings.timing_frequencies:
            wall: list[float] = []
            cpu: list[float] = []
            for _ in range(settings.timing_repeats):
                # CPU time too: other jobs may share the machine, and it is far less sensitive to them.
                wall_start, cpu_start = time.perf_counter(), time.process_time()
                fit = learn_frequencies(scaled, width, D, rng(seed, TAG_TIMING, n_public, D))
                cpu.append(time.process_time() - cpu_start)
                wall.append(time.perf_counter() - wall_start)
                if wall[-1] > SINGLE_ABOVE_S:
                    break
            row = {
                "n_public": n_public,
                "D": D,
                "iterations": fit.iterations,
                "n_pairs": fit.n_pairs,
                "objective_end": fit.objective_end,
                "message": fit.message,
                "seconds": {
                    "wall": wall,
                    "cpu": cpu,
                    "median_wall": statistics.median(wall),
                    "median_cpu": statistics.median(cpu),
                },
            }
            rows.append(row)
            done(row)
    return rows


# --- summaries and verdicts -----------------------------------------------------------------------


def mean_std(values: Sequence[float]) -> dict[str, float]:
    """Mean, sample standard deviation (0 for one value) and count."""
    a = np.asarray(values, dtype=float)
    return {"mean": float(a.mean()), "std": float(a.std(ddof=1)) if a.size > 1 else 0.0, "n": int(a.size)}


def at(rep: dict[str, Any], path: Sequence[str]) -> Any:
    """The entry of one repetition's results at ``path``, one key per level."""
    node: Any = rep
    for name in path:
        node = node[name]
    return node


def auc_at(*path: str) -> Callable[[dict[str, Any]], float]:
    """A getter of the AUC at ``path`` in a repetition's results (the path is bound now, safe inside loops)."""

    def get(rep: dict[str, Any]) -> float:
        return at(rep, path)["auc"]

    return get


def summarise(reps: list[dict[str, Any]], settings: Settings) -> dict[str, Any]:
    """Mean and standard deviation over repetitions of every AUC and error rate."""

    def stats(*path: str) -> dict[str, dict[str, float]]:
        return {m: mean_std([at(r, path)[m] for r in reps]) for m in FIGURES}

    summary: dict[str, Any] = {"epsilon": {}, "plain": {}, "public_only": {}, "other_C": {}}
    for method in EPSILON_METHODS:
        summary["epsilon"][method] = {key(e): stats("epsilon", method, key(e)) for e in settings.epsilons}
    for method in PLAIN_METHODS:
        if method in reps[0]["plain"]:
            summary["plain"][method] = stats("plain", method)
    for size in settings.public_sizes:
        summary["public_only"][str(size)] = stats("public_only", str(size))
    for c_value in settings.other_C:
        c = key(c_value)
        entry: dict[str, Any] = {}
        for method, value in reps[0]["other_C"][c].items():
            if "auc" in value:
                entry[method] = stats("other_C", c, method)
            else:
                entry[method] = {key(e): stats("other_C", c, method, key(e)) for e in settings.epsilons}
        summary["other_C"][c] = entry
    return summary


def paired(differences: Sequence[float]) -> dict[str, Any]:
    """Verdict on paired AUC differences a - b (one per repetition).

    "beats" when the mean is more than 2 standard errors above 0, "loses" when more than 2
    below, else "tie"; with one repetition there is no standard error (None) and the sign decides.

    Parameters
    ----------
    differences : sequence of float, length n >= 1

    Returns
    -------
    dict
        mean_difference, standard_error, wins (differences > 0), n, verdict.
    """
    d = np.asarray(differences, dtype=float)
    mean = float(d.mean())
    se = float(d.std(ddof=1) / math.sqrt(d.size)) if d.size > 1 else None
    bound = 0.0 if se is None else 2 * se
    verdict = "beats" if mean > bound else ("loses" if mean < -bound else "tie")
    return {
        "mean_difference": mean,
        "standard_error": se,
        "wins": int((d > 0).sum()),
        "n": int(d.size),
        "verdict": verdict,
    }


def versus(
    reps: list[dict[str, Any]], a: Callable[[dict[str, Any]], float], b: Callable[[dict[str, Any]], float]
) -> dict[str, Any]:
    """:func:`paired` on the AUCs ``a(rep) - b(rep)`` over repetitions."""
    return paired([a(r) - b(r) for r in reps])


def close_to(gap: dict[str, Any]) -> dict[str, Any]:
    """A :func:`paired` result against the non-private model, with whether it is within CLOSE_AUC."""
    return {**gap, "close": gap["mean_difference"] >= -CLOSE_AUC}


def verdicts(reps: list[dict[str, Any]], settings: Settings) -> dict[str, Any]:
    """The paper's claims per epsilon (headline C) and per epsilon and mechanism at the other C."""
    out: dict[str, Any] = {}
    smallest, largest = str(min(settings.public_sizes)), str(max(settings.public_sizes))
    for e in settings.epsilons:
        k = key(e)
        hybrid = auc_at("epsilon", HYBRID_LAPLACE, k)
        out[k] = {
            "hybrid_vs_private_svm": versus(reps, hybrid, auc_at("epsilon", PRIVATE_LAPLACE, k)),
            "hybrid_minus_non_private": close_to(versus(reps, hybrid, auc_at("plain", NON_PRIVATE))),
            "hybrid_vs_public_only_smallest": versus(reps, hybrid, auc_at("public_only", smallest)),
            "hybrid_vs_public_only_largest": versus(reps, hybrid, auc_at("public_only", largest)),
        }
    for c_value in settings.other_C:
        c = key(c_value)
        entry: dict[str, Any] = {}
        for mechanism in ("laplace", "output-gamma"):
            for e in settings.epsilons:
                k = key(e)
                hybrid_c = auc_at("other_C", c, f"dp-hybrid/{mechanism}", k)
                entry.setdefault(mechanism, {})[k] = {
                    "hybrid_vs_private_svm": versus(
                        reps, hybrid_c, auc_at("other_C", c, f"private-svm/{mechanism}", k)
                    ),
                    "hybrid_minus_non_private": close_to(versus(reps, hybrid_c, auc_at("other_C", c, NON_PRIVATE))),
                }
        out[f"C={c}"] = entry
    return out


# --- Markdown -------------------------------------------------------------------------------------


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A Markdown pipe table: first column left-aligned, the others right-aligned (numbers).

    Raises
    ------
    ValueError
        A row has a different number of cells than ``headers``.
    """
    for row in rows:
        if len(row) != len(headers):
            raise ValueError(f"a row has {len(row)} cells, the header {len(headers)}: {list(row)}")
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join([":---", *(["---:"] * (len(headers) - 1))]) + "|"]
    lines += ["| " + " | ".join(str(c).replace("|", "\\|") for c in row) + " |" for row in rows]
    return "\n".join(lines)


def cell(stats: dict[str, float]) -> str:
    """mean ± standard deviation, 3 decimals."""
    return f"{stats['mean']:.3f} ± {stats['std']:.3f}"


def signed(v: float) -> str:
    return f"{v:+.3f}"


def with_error(p: dict[str, Any]) -> str:
    """A :func:`paired` result as "verdict (+0.025 ± 0.007, 9/10)"."""
    se = "" if p["standard_error"] is None else f" ± {p['standard_error']:.3f}"
    return f"{p['verdict']} ({signed(p['mean_difference'])}{se}, {p['wins']}/{p['n']})"


def setting_markdown(settings: Settings, names: list[str], checks: dict[str, Any], pool: int) -> str:
    """The setting and every open decision, with the values this run used."""
    s = settings
    capital = (
        "Capital-gain and capital-loss go through log1p, a fixed data-independent transform chosen here "
        "(`--raw-capital` turns it off): the scaling comes from 20 public records, among which capital gain "
        "is often all 0 or small, and raw dollar values up to 99,999 would land hundreds of units outside "
        "[0, 1]"
        if s.log_capital
        else "Capital-gain and capital-loss are used raw (`--raw-capital`)"
    )
    return "\n".join(
        [
            "## Setting",
            "",
            f"- **Data**: the shipped `{DATA_FILE}` (UCI Adult, {checks['records']:,} records, "
            f"{checks['positives']:,} with label `>50K` = +1). Features (d = {len(names)}): {', '.join(names)}. "
            "fnlwgt is NOT used: it is the census sampling weight (how many people a record stands for), not an "
            "attribute of the person, and the feature list the issue attributes to the paper does not contain it. "
            "No '?' in the columns used (checked at load; '?' occurs in "
            f"{checks['rows_with_any_question_mark']:,} records, only in workclass, occupation and native-country), "
            f"so no record is dropped. {capital}.",
            f"- **Split**, per repetition r (seed = {s.seed} + r, {s.repetitions} repetitions, seeds {s.seeds}; every "
            "generator is `np.random.default_rng([seed, purpose tag, ...])`): shuffle; the first "
            f"{N_PRIVATE:,} records are private, split evenly over {N_ENTITIES} entities "
            f"({N_PRIVATE // N_ENTITIES:,} each); the next {N_TEST:,} are the test set; the remaining {pool:,} are "
            f"the public pool. Public sets are nested prefixes of the pool: "
            + " within ".join(str(n) for n in s.public_sizes)
            + ".",
            "- **Public preprocessing**: dp-hybrid and private-svm both take the feature scaling (per-feature min and "
            "max) and the kernel width (median heuristic) from the same "
            f"{HYBRID_PUBLIC} public records; neither touches private data for them. dp-hybrid learns rho on those "
            f"records (L-BFGS-B, at most {MAX_FREQUENCY_ITERATIONS} iterations, at most {MAX_FREQUENCY_PAIRS:,} "
            "pairs); private-svm draws rho from the kernel's Fourier transform (Rubinstein et al.). "
            f"D = {s.frequencies} frequencies.",
            f"- **C = {s.C:g}** in the (C/n) * sum hinge convention (the product default; the paper's C was not "
            "available to check). C is not tuned: tuning it on 20 public records would say nothing about a "
            f"{N_PRIVATE // N_ENTITIES:,}-record SVM, and tuning on the test set is not allowed. With ||zhat|| = 1, "
            "C <= 1 makes every record a margin violator (margins <= ||w|| <= C), so the SVM is exactly "
            "w = (C/n) sum_i y_i zhat(x_i) (see the dual variables at the bound below). "
            + (
                f'The "other C" tables (C = {", ".join(key(c) for c in s.other_C)}) are a sensitivity on the test '
                "set, not used to choose anything."
                if s.other_C
                else ""
            ),
            "- **Training and release**: each entity maps its rows with zhat(scaled rows) and trains the exact "
            "hinge-loss SVM without intercept; the model is the record-count-weighted mean of the "
            f"{N_ENTITIES} entities' releases, as `ppsvm coordinator train` combines them (each release is "
            "epsilon-DP for its own entity's records; the mean costs nothing more). The Laplace and output-gamma "
            "releases add their mechanism's noise to the exact weights, which is what `ppsvm.core.dp.private_weights` "
            "does internally (checked bit for bit in repetition 0, the decomposition check below), so each SVM is "
            "trained once and not once per (epsilon, mechanism); objective perturbation calls `private_weights`.",
            "- **Mechanisms**: the paper's Laplace mechanism (Delta = 2^2.5 C sqrt(D) / n per coordinate) is the "
            "headline for dp-hybrid and private-svm; output-gamma and objective perturbation (Chaudhuri, Monteleoni "
            f"& Sarwate 2011; Huber h = {DEFAULT_HUBER_H:g}) for dp-hybrid are **our additions**. Every (method, "
            "mechanism, epsilon) is a separate experiment on the same records: budgets are not composed across them.",
            "- **Noise is seeded for reproducibility** (the generators above); the product's training "
            "(`ppsvm coordinator train`) draws noise from a cryptographically seeded generator instead.",
            "- **Non-private** (the solid line of Figure 3): the same pipeline with no noise (learned rho). Extra "
            "rows: the same with private-svm's random rho; one linear SVM on the pooled "
            f"{N_PRIVATE:,} mapped rows (learned rho)"
            + (
                f"; an exact RBF SVM (intercept as a constant feature) on a random subsample of {s.exact_rows:,} "
                "private records with the same public scaling and width"
                if s.exact_rows
                else ""
            )
            + ".",
            "- **public-only**: an RBF SVM on "
            + " / ".join(str(n) for n in s.public_sizes)
            + " public records, each set with its own public scaling and width; no epsilon.",
            f"- **Figures**: AUC on the {N_TEST:,} test records, mean and standard deviation over repetitions; error "
            "rates (sign of the decision, no intercept for the Fourier models) are in the JSON.",
            "- **Verdicts** per epsilon: *beats* when the mean paired AUC difference (same repetition) is more than 2 "
            "standard errors above 0, *loses* when more than 2 below, else *tie* (one repetition: the sign decides); "
            f"*close* to non-private when dp-hybrid's mean AUC is at most {CLOSE_AUC} below it.",
            "- **Time to learn rho** (Figure 4): rho learned on repetition 0's public pool prefixes of "
            + ", ".join(str(n) for n in s.timing_public)
            + " records (each scaled by its own range, width by the "
            "median heuristic) for D in {" + ", ".join(str(d) for d in s.timing_frequencies) + "}; wall-clock "
            f"median of {s.timing_repeats} run(s) (1 run when a run exceeds {SINGLE_ABOVE_S:g} s)."
            if s.timing_public
            else "- **Time to learn rho**: skipped (`--no-timing`).",
        ]
    )


def claims_markdown(verdict: dict[str, Any], settings: Settings) -> str:
    """One line per paper claim: at how many epsilons it holds (headline C, Laplace)."""
    per = [verdict[key(e)] for e in settings.epsilons]
    n = len(per)
    beats = sum(v["hybrid_vs_private_svm"]["verdict"] == "beats" for v in per)
    close = sum(v["hybrid_minus_non_private"]["close"] for v in per)
    small = sum(v["hybrid_vs_public_only_smallest"]["verdict"] == "beats" for v in per)
    large = sum(v["hybrid_vs_public_only_largest"]["verdict"] == "beats" for v in per)
    smallest, largest = min(settings.public_sizes), max(settings.public_sizes)
    return "\n".join(
        [
            "## The paper's claims (Laplace, C = " + key(settings.C) + ")",
            "",
            f"- dp-hybrid beats private-svm: at {beats} of {n} epsilons.",
            f"- dp-hybrid is close to the non-private SVM (within {CLOSE_AUC} AUC): at {close} of {n} epsilons.",
            f"- dp-hybrid beats public-only with {smallest} public records: at {small} of {n} epsilons.",
            f"- dp-hybrid beats public-only with {largest} public records: at {large} of {n} epsilons.",
        ]
    )


def markdown(
    summary: dict[str, Any],
    verdict: dict[str, Any],
    timing: list[dict[str, Any]],
    reps: list[dict[str, Any]],
    settings: Settings,
    setting_text: str,
    seconds: dict[str, Any],
    rerun: str,
) -> str:
    """dp.md: what is reproduced, the setting, the tables, the diagnostics, how to rerun."""
    s = settings
    epsilons = s.epsilons
    n_entity = N_PRIVATE // N_ENTITIES
    headers = ["method", *(f"eps={key(e)}" for e in epsilons)]
    rows = [
        [label, *(cell(summary["epsilon"][method][key(e)]["auc"]) for e in epsilons)]
        for method, label in EPSILON_METHODS.items()
    ]
    for method, label in PLAIN_METHODS.items():
        if method in summary["plain"]:
            if method == EXACT_RBF:
                label = f"{label} ({s.exact_rows:,} rows)"
            rows.append([f"{label} [no eps]", *([cell(summary["plain"][method]["auc"])] * len(epsilons))])
    for size in s.public_sizes:
        rows.append(
            [
                f"public-only, {size} public [no eps]",
                *([cell(summary["public_only"][str(size)]["auc"])] * len(epsilons)),
            ]
        )
    mode = "quick run (`--quick`): fewer repetitions and epsilons, a smaller timing grid" if s.quick else "full run"
    lines = [
        "# UCI Adult: the hybrid differentially private RBF SVM "
        "(Li, Xiong, Ohno-Machado & Jiang 2014, Figures 3 and 4)",
        "",
        "The paper's claims: the hybrid model (rho learned on a few public records) beats PrivateSVM (rho drawn at "
        "random) at every epsilon, stays close to the non-private SVM, and beats SVMs trained on the public records "
        f"alone. This is a {mode}.",
        "",
        f"- `{FIGURE_AUC}`: test AUC against epsilon for dp-hybrid, private-svm, public-only and the non-private "
        "SVM; our reading of the paper's Figure 3 (the paper's PDF is not available here).",
        f"- `{FIGURE_RHO_TIME}`: the time to learn rho against the number of public records and D; our reading of "
        "the paper's Figure 4."
        if timing
        else f"- `{FIGURE_RHO_TIME}`: not drawn (`--no-timing`).",
        "",
        setting_text,
        "",
        f"## Test AUC (mean ± standard deviation over {len(reps)} repetitions, C = {key(s.C)}, D = {s.frequencies})",
        "",
        "[no eps]: does not depend on epsilon, repeated in every column.",
        "",
        markdown_table(headers, rows),
        "",
        claims_markdown(verdict, s),
        "",
        "Paired AUC differences of dp-hybrid (Laplace) per epsilon: verdict (mean ± standard error, repetitions won).",
        "",
    ]
    vrows = []
    for e in epsilons:
        v = verdict[key(e)]
        nonp = v["hybrid_minus_non_private"]
        vrows.append(
            [
                f"eps={key(e)}",
                with_error(v["hybrid_vs_private_svm"]),
                f"{'close' if nonp['close'] else 'NOT close'} ({signed(nonp['mean_difference'])})",
                with_error(v["hybrid_vs_public_only_smallest"]),
                with_error(v["hybrid_vs_public_only_largest"]),
            ]
        )
    smallest, largest = min(s.public_sizes), max(s.public_sizes)
    lines += [
        markdown_table(
            [
                "epsilon",
                "hybrid vs private-svm",
                "hybrid - non-private",
                f"hybrid vs public-only {smallest}",
                f"hybrid vs public-only {largest}",
            ],
            vrows,
        ),
        "",
    ]

    if s.other_C:
        crows = []
        vrows = []
        for c_value in s.other_C:
            c = key(c_value)
            block = summary["other_C"][c]
            for method, label in (
                (HYBRID_LAPLACE, "dp-hybrid, Laplace"),
                ("dp-hybrid/output-gamma", "dp-hybrid, output-gamma"),
                (PRIVATE_LAPLACE, "private-svm, Laplace"),
                ("private-svm/output-gamma", "private-svm, output-gamma"),
            ):
                crows.append([f"C={c} {label}", *(cell(block[method][key(e)]["auc"]) for e in epsilons)])
            for method, label in (
                (NON_PRIVATE, "non-private (learned rho)"),
                ("non-private/random-rho", "non-private (random rho)"),
                *((f"public-only/{n}", f"public-only, {n} public") for n in s.public_sizes),
            ):
                crows.append([f"C={c} {label} [no eps]", *([cell(block[method]["auc"])] * len(epsilons))])
            for mechanism in ("laplace", "output-gamma"):
                per = verdict[f"C={c}"][mechanism]
                vrows.append(
                    [
                        f"C={c} {mechanism}: hybrid vs private-svm",
                        *(with_error(per[key(e)]["hybrid_vs_private_svm"]) for e in epsilons),
                    ]
                )
                vrows.append(
                    [
                        f"C={c} {mechanism}: hybrid - non-private",
                        *(
                            f"{'close' if per[key(e)]['hybrid_minus_non_private']['close'] else 'NOT close'} "
                            f"({signed(per[key(e)]['hybrid_minus_non_private']['mean_difference'])})"
                            for e in epsilons
                        ),
                    ]
                )
        lines += [
            f"## Other C (a sensitivity on the test set, NOT used to choose C; the headline is C = {key(s.C)})",
            "",
            "Test AUC:",
            "",
            markdown_table(headers, crows),
            "",
            "The paper's claims at the other C (same rules; non-private = learned rho, 3-entity mean, same C):",
            "",
            markdown_table(["claim", *(f"eps={key(e)}" for e in epsilons)], vrows),
            "",
        ]

    if timing:
        trows = []
        for n_public in s.timing_public:
            cells = []
            for D in s.timing_frequencies:
                t = next(x for x in timing if x["n_public"] == n_public and x["D"] == D)
                runs = len(t["seconds"]["wall"])
                mark = "" if runs >= 3 else f", {runs} run"
                cells.append(
                    f"{t['seconds']['median_wall']:.2f} s ({t['seconds']['median_cpu']:.2f} cpu, "
                    f"{t['iterations']} it{mark})"
                )
            n_pairs = next(x for x in timing if x["n_public"] == n_public)["n_pairs"]
            trows.append([f"{n_public} public ({n_pairs} pairs)", *cells])
        lines += [
            "## Time to learn rho (Figure 4)",
            "",
            f"L-BFGS-B to tolerance 1e-12, at most {MAX_FREQUENCY_ITERATIONS} iterations, at most "
            f"{MAX_FREQUENCY_PAIRS:,} pairs: wall-clock median of {s.timing_repeats} run(s), CPU seconds and "
            "iterations. Timings depend on the machine and its load (below).",
            "",
            markdown_table(["n_public", *(f"D={D}" for D in s.timing_frequencies)], trows),
            "",
        ]

    pre = [r["preprocessing"] for r in reps]
    fits = [p["rho_fit"] for p in pre]
    at_bound = {
        c: [r["diagnostics"]["alpha_at_bound"][c] for r in reps] for c in reps[0]["diagnostics"]["alpha_at_bound"]
    }
    noise = reps[0]["diagnostics"]["noise_to_signal"][key(s.C)]
    first = key(epsilons[0])
    errors = ", ".join(
        f"{label.split(' (')[0].split(',')[0]} {summary['epsilon'][method][first]['error_rate']['mean']:.3f}"
        for method, label in list(EPSILON_METHODS.items())[:2]
    )
    lines += [
        "## Diagnostics",
        "",
        f"- rho learned on {HYBRID_PUBLIC} public records per repetition: median "
        f"{statistics.median(f['seconds'] for f in fits):.1f} s, iterations {sorted(f['iterations'] for f in fits)}, "
        f"training-pair MSE {np.median([f['objective_start'] for f in fits]):.2e} -> "
        f"{np.median([f['objective_end'] for f in fits]):.2e} (medians).",
        f"- Kernel approximation MSE on {DIAGNOSTIC_PAIRS:,} held-out public pairs (pool records outside every "
        f"public set): learned rho {np.mean([p['heldout_kernel_mse']['dp-hybrid'] for p in pre]):.2e}, random rho "
        f"{np.mean([p['heldout_kernel_mse']['private-svm'] for p in pre]):.2e} (means over repetitions).",
        f"- Features constant on the {HYBRID_PUBLIC} public records (only shifted, not scaled): "
        f"{[len(p['features_constant_on_public']) for p in pre]} per repetition; test rows outside [0, 1]^d after "
        f"public scaling: {np.mean([p['test_rows_outside_unit_box'] for p in pre]):.1%} (max |scaled value| "
        f"{max(p['test_max_abs_scaled'] for p in pre):.1f}).",
        "- Dual variables at the bound C/n (entity 0, learned rho), mean over repetitions: "
        + ", ".join(f"C={c}: {np.mean(v):.1%}" for c, v in at_bound.items())
        + ".",
        f"- ||release - exact|| / ||exact|| in repetition 0 (entity 0 / {N_ENTITIES}-entity mean), C = {key(s.C)}: "
        + "; ".join(
            f"{m} " + ", ".join(f"eps={e}: {v['entity0']:.2f}/{v['mean']:.2f}" for e, v in per.items())
            for m, per in noise.items()
        )
        + ".",
        f"- Laplace scale per coordinate at n = {n_entity:,}, C = {key(s.C)}, D = {s.frequencies}: "
        + ", ".join(f"eps={key(e)}: {laplace_scale(s.C, s.frequencies, n_entity, e):.2e}" for e in epsilons)
        + f"; output-gamma L2 sensitivity 2C/n + solver term = {l2_sensitivity(s.C, n_entity):.2e}.",
        f"- Test error rate (sign of the decision; no intercept in the Fourier models), C = {key(s.C)}: {errors} "
        f"(eps={first}), non-private {summary['plain'][NON_PRIVATE]['error_rate']['mean']:.3f}, public-only "
        + ", ".join(f"{n}: {summary['public_only'][str(n)]['error_rate']['mean']:.3f}" for n in s.public_sizes)
        + f"; share of >50K in the test sets {np.mean([r['test_positive_rate'] for r in reps]):.3f}"
        + "".join(
            f"; C={c}: non-private {summary['other_C'][c][NON_PRIVATE]['error_rate']['mean']:.3f}"
            for c in summary["other_C"]
        )
        + ".",
        "- Decomposition check (repetition 0): private_weights == exact weights + mechanism noise: "
        + ", ".join(f"{m} {'yes' if ok else 'NO'}" for m, ok in reps[0]["decomposition_check"].items())
        + ".",
        "",
        "## Run",
        "",
        f"Wall clock: repetitions {seconds['repetitions']:.0f} s, rho timing {seconds['rho_timing']:.0f} s, total "
        f"{seconds['total']:.0f} s; load average at start {seconds['load_average']['start']}, at end "
        f"{seconds['load_average']['end']} (other jobs may share the machine). Everything except the timings is "
        "identical on a rerun on the same machine; another BLAS thread count moves the learned rho in its last "
        "digits and dp-hybrid's AUCs in the fourth or fifth decimal.",
        "",
        f"Rerun: `{rerun}` (add `--out DIR`).",
        "",
        report.versions_markdown(),
        "",
    ]
    return "\n".join(lines)


# --- figures --------------------------------------------------------------------------------------


def figure_auc(summary: dict[str, Any], settings: Settings) -> Any:
    """Figure 3: test AUC (mean ± s.d.) against epsilon, with the no-epsilon baselines as lines."""
    import matplotlib
    from matplotlib.figure import Figure

    epsilons = np.array(settings.epsilons)
    fig = Figure(figsize=(8.5, 5.5))
    ax = fig.subplots()
    styles = {
        HYBRID_LAPLACE: ("tab:red", "o"),
        PRIVATE_LAPLACE: ("tab:blue", "s"),
        "dp-hybrid/output-gamma": ("tab:orange", "^"),
        "dp-hybrid/objective": ("tab:purple", "v"),
    }
    for k, (method, label) in enumerate(EPSILON_METHODS.items()):
        stats = [summary["epsilon"][method][key(e)]["auc"] for e in epsilons]
        offset = 2.0 ** (0.03 * (k - 1.5))  # small horizontal shifts so the error bars do not overlap
        color, marker = styles[method]
        ax.errorbar(
            epsilons * offset,
            [s["mean"] for s in stats],
            yerr=[s["std"] for s in stats],
            color=color,
            marker=marker,
            capsize=3,
            label=label,
        )
    ax.axhline(
        summary["plain"][NON_PRIVATE]["auc"]["mean"],
        color="black",
        linestyle="-",
        linewidth=1.5,
        label=PLAIN_METHODS[NON_PRIVATE],
    )
    if EXACT_RBF in summary["plain"]:
        ax.axhline(
            summary["plain"][EXACT_RBF]["auc"]["mean"],
            color="gray",
            linestyle=":",
            linewidth=1.5,
            label=f"exact RBF SVM, {settings.exact_rows:,} private rows",
        )
    greens = matplotlib.colormaps["Greens"]
    sizes = settings.public_sizes
    for k, size in enumerate(sizes):
        ax.axhline(
            summary["public_only"][str(size)]["auc"]["mean"],
            color=greens(0.4 + 0.6 * k / max(len(sizes) - 1, 1)),
            linestyle="--",
            linewidth=1.3,
            label=f"public-only, {size} public",
        )
    ax.set_xscale("log", base=2)
    ax.set_xticks(epsilons)
    ax.set_xticklabels([key(e) for e in epsilons])
    ax.set_xlabel("epsilon (per entity release)")
    ax.set_ylabel(f"test AUC ({N_TEST:,} records)")
    ax.set_title(
        f"UCI Adult: DP RBF SVMs, {N_PRIVATE:,} private records over {N_ENTITIES} entities, "
        f"C = {key(settings.C)}, D = {settings.frequencies}\nmean ± s.d. over {settings.repetitions} "
        "repetitions (Li et al. 2014, Figure 3, our reading)",
        fontsize=10,
    )
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7.5, loc="lower right")
    fig.tight_layout()
    return fig


def figure_rho_time(timing: list[dict[str, Any]], settings: Settings) -> Any:
    """Figure 4: seconds to learn rho against public records, one line per D (wall-clock and CPU)."""
    import matplotlib.ticker
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.5, 4.5))
    ax = fig.subplots()
    for k, D in enumerate(settings.timing_frequencies):
        points = sorted(
            (t["n_public"], t["seconds"]["median_wall"], t["seconds"]["median_cpu"]) for t in timing if t["D"] == D
        )
        color = f"C{k}"
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", color=color, label=f"D = {D}, wall-clock")
        ax.plot(
            [p[0] for p in points],
            [p[2] for p in points],
            marker=".",
            linestyle=":",
            color=color,
            label=f"D = {D}, CPU",
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks(settings.timing_public)
    ax.set_xticklabels([str(n) for n in settings.timing_public])
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    # Timings span about two decades: label 1, 2, 5 of each so that values can be read off.
    ax.yaxis.set_major_locator(matplotlib.ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda value, _: f"{value:g}"))
    ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xlabel(f"public records (their pairs, capped at {MAX_FREQUENCY_PAIRS:,}, enter the fit)")
    ax.set_ylabel("seconds to learn rho (median of runs)")
    ax.set_title("Learning rho on UCI Adult public records (Li et al. 2014, Figure 4, our reading)", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    return fig


# --- the command ----------------------------------------------------------------------------------


def rerun_command(options: DpReproduceOptions) -> str:
    """The ``ppsvm reproduce dp`` command line that repeats this run (without --out and --no-progress)."""
    parts = ["ppsvm reproduce dp"]
    if options.quick:
        parts.append("--quick")
    if options.repetitions is not None:
        parts.append(f"--repetitions {options.repetitions}")
    if options.epsilons is not None:
        parts.append("--epsilon " + " ".join(key(e) for e in options.epsilons))
    if options.seed:
        parts.append(f"--seed {options.seed}")
    if options.C != DEFAULT_C:
        parts.append(f"--C {key(options.C)}")
    if options.frequencies != DEFAULT_N_FREQUENCIES:
        parts.append(f"--frequencies {options.frequencies}")
    if options.other_C is not None:
        parts.append(" ".join(["--other-C", *(key(c) for c in options.other_C)]))
    if options.exact_rows is not None:
        parts.append(f"--exact-rows {options.exact_rows}")
    if options.raw_capital:
        parts.append("--raw-capital")
    if options.no_timing:
        parts.append("--no-timing")
    return " ".join(parts)


def load_average() -> list[float]:
    """The 1, 5 and 15 minute load averages (empty where the platform has none)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


@contextlib.contextmanager
def quiet_fits() -> Iterator[None]:
    """Hold back the per-fit INFO lines of ppsvm.core (they would interleave with the progress bar) unless debugging."""
    logger = logging.getLogger("ppsvm.core")
    level = logger.level
    if logger.getEffectiveLevel() > logging.DEBUG:
        logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        logger.setLevel(level)


def run(options: DpReproduceOptions) -> list[Path]:
    """Run the reproduction and write dp.md, dp.json and the figures into ``options.out``.

    Parameters
    ----------
    options : DpReproduceOptions

    Returns
    -------
    list of Path
        The files written.
    """
    report.require_matplotlib()
    settings = resolve_settings(options)
    data = SHIPPED_DATA / DATA_FILE
    X, y, names, checks = load_adult(data, log_capital=settings.log_capital)
    if len(y) <= N_PRIVATE + N_TEST + max(settings.public_sizes):
        raise DataError(
            f"{data}: {len(y):,} records, fewer than the {N_PRIVATE + N_TEST + max(settings.public_sizes):,} "
            "the split needs"
        )
    pool = len(y) - N_PRIVATE - N_TEST
    timing_points = len(settings.timing_public) * len(settings.timing_frequencies)
    progress = report.Progress(settings.repetitions + timing_points, NAME, enabled=not options.no_progress)
    load_start = load_average()

    with quiet_fits():
        started = time.perf_counter()
        reps = []
        for r, seed in enumerate(settings.seeds):
            rep = run_repetition(X, y, seed, settings, check=r == 0)
            reps.append(rep)
            hybrid = rep["epsilon"][HYBRID_LAPLACE][key(settings.epsilons[0])]["auc"]
            progress.advance(
                f"rep {r + 1}/{settings.repetitions} hybrid AUC {hybrid:.3f} (eps={key(settings.epsilons[0])})"
            )
        reps_seconds = time.perf_counter() - started
        timing_started = time.perf_counter()
        timing = rho_timing(
            X,
            settings,
            lambda t: progress.advance(
                f"rho timing {t['n_public']} public, D={t['D']}: {t['seconds']['median_wall']:.1f} s"
            ),
        )
        timing_seconds = time.perf_counter() - timing_started
    seconds = {
        "repetitions": reps_seconds,
        "rho_timing": timing_seconds,
        "total": time.perf_counter() - started,
        "load_average": {"start": load_start, "end": load_average()},
    }

    summary = summarise(reps, settings)
    verdict = verdicts(reps, settings)
    rerun = rerun_command(options)
    text = markdown(
        summary, verdict, timing, reps, settings, setting_markdown(settings, names, checks, pool), seconds, rerun
    )
    pictures = {FIGURE_AUC: report.png(figure_auc(summary, settings))}
    if timing:
        pictures[FIGURE_RHO_TIME] = report.png(figure_rho_time(timing, settings))
    payload = {
        "target": NAME,
        "reproduces": "Li, Xiong, Ohno-Machado & Jiang 2014, Figures 3 and 4 (our reading) on UCI Adult",
        "settings": {
            **dataclasses.asdict(settings),
            "seeds": settings.seeds,
            "data": {"file": DATA_FILE, "sha256": hashlib.sha256(data.read_bytes()).hexdigest(), "checks": checks},
            "features": names,
            "fnlwgt": "excluded (census sampling weight)",
            "split": {
                "private": N_PRIVATE,
                "entities": N_ENTITIES,
                "per_entity": N_PRIVATE // N_ENTITIES,
                "test": N_TEST,
                "public_pool": pool,
                "public_sets": "nested prefixes of the shuffled pool",
                "hybrid_public": HYBRID_PUBLIC,
            },
            "scaling_and_width": f"public_scaling / public_kernel_width of the {HYBRID_PUBLIC} public records, for "
            "dp-hybrid and private-svm alike; public-only: of its own public set",
            "combine": "n_i-weighted mean of the entities' released weights (as ppsvm coordinator train)",
            "noise": "seeded numpy generators np.random.default_rng([seed, tag, ...]) for reproducibility; the "
            "product's training uses a cryptographically seeded generator",
            "huber_h": DEFAULT_HUBER_H,
            "close_auc": CLOSE_AUC,
            "verdict_rule": "mean paired difference beyond 2 standard errors",
            "single_above_s": SINGLE_ABOVE_S,
            "max_frequency_pairs": MAX_FREQUENCY_PAIRS,
            "max_frequency_iterations": MAX_FREQUENCY_ITERATIONS,
            "diagnostic_pool_rows": DIAGNOSTIC_POOL_ROWS,
            "diagnostic_pairs": DIAGNOSTIC_PAIRS,
        },
        "summary": summary,
        "verdicts": verdict,
        "rho_timing": timing,
        "repetitions": reps,
        "figures": {
            FIGURE_AUC: "test AUC vs epsilon (paper Figure 3, our reading)",
            **(
                {FIGURE_RHO_TIME: "time to learn rho vs public records and D (paper Figure 4, our reading)"}
                if timing
                else {}
            ),
        },
        "seconds": seconds,
        "rerun": rerun,
    }
    return report.write_results(options.out, NAME, text, payload, pictures)


def cmd(args: argparse.Namespace) -> int:
    """``ppsvm reproduce dp``: parse, run, print the Markdown and the files written."""
    options = DpReproduceOptions(
        out=args.out,
        quick=args.quick,
        no_progress=args.no_progress,
        repetitions=args.repetitions,
        epsilons=None if args.epsilon is None else tuple(args.epsilon),
        seed=args.seed,
        C=args.C,
        frequencies=args.frequencies,
        other_C=None if args.other_C is None else tuple(args.other_C),
        exact_rows=args.exact_rows,
        raw_capital=args.raw_capital,
        no_timing=args.no_timing,
    )
    paths = run(options)
    print(paths[0].read_text(encoding="utf-8"))
    print("wrote: " + ", ".join(str(p) for p in paths))
    return 0


def add_parser(targets: argparse._SubParsersAction) -> None:
    """Add the ``dp`` target to ``ppsvm reproduce``."""
    summary = (
        "Li, Xiong, Ohno-Machado & Jiang 2014, Figures 3 and 4 on UCI Adult: AUC vs epsilon of the hybrid "
        "DP RBF SVM, private-svm, public-only and non-private SVMs; time to learn rho"
    )
    parser = targets.add_parser(
        NAME,
        help="Li, Xiong, Ohno-Machado & Jiang 2014 Figures 3-4: differentially private RBF SVMs on UCI Adult, "
        "AUC vs epsilon and the time to learn rho",
        description=(
            f"{summary}. Runs on the shipped UCI Adult file ({DATA_FILE}): {N_PRIVATE:,} private records over "
            f"{N_ENTITIES} entities, {N_TEST:,} test records, public sets from the rest; repeated over seeded "
            "splits, with a table at other C values and the time to learn rho against public records and D. "
            "The entities are simulated in this process with the functions ppsvm's entities and coordinator call "
            "(mapping, training, release, averaging), not over gRPC. "
            "The differential-privacy noise is seeded here so that reruns give identical figures; the product's "
            "training (ppsvm coordinator train) draws it from a cryptographically seeded generator. "
            f"Writes {NAME}.md, {NAME}.json, {FIGURE_AUC} and {FIGURE_RHO_TIME}. The full run takes about 4 "
            "minutes on 2 idle cores (most of it timing rho) and much longer on a loaded machine."
        ),
    )
    report.add_common_arguments(
        parser,
        quick_help=(
            f"{QUICK.repetitions} repetitions, epsilon {' and '.join(key(e) for e in QUICK.epsilons)}, "
            "public-only 20 and 200, a 2 x 2 single-run rho timing grid (well under a minute)"
        ),
    )
    parser.add_argument(
        "--repetitions", type=int, help=f"seeded repetitions (default {FULL.repetitions}; --quick {QUICK.repetitions})"
    )
    parser.add_argument(
        "--epsilon",
        type=float,
        nargs="+",
        metavar="EPS",
        help="epsilon of each entity's release, one or more (default "
        f"{' '.join(key(e) for e in FULL.epsilons)}; --quick {' '.join(key(e) for e in QUICK.epsilons)})",
    )
    parser.add_argument("--seed", type=int, default=0, help="repetition r uses seed + r (default %(default)s)")
    parser.add_argument("--C", type=float, default=DEFAULT_C, help="SVM cost in (C/n) sum hinge (default %(default)s)")
    parser.add_argument(
        "--frequencies", type=int, default=DEFAULT_N_FREQUENCIES, help="D, Fourier frequencies (default %(default)s)"
    )
    parser.add_argument(
        "--other-C",
        type=float,
        nargs="*",
        metavar="C",
        help="C values of the sensitivity table, none to skip it (default "
        f"{' '.join(key(c) for c in FULL.other_C)}; --quick {' '.join(key(c) for c in QUICK.other_C)})",
    )
    parser.add_argument(
        "--exact-rows",
        type=int,
        help=f"private rows of the exact RBF SVM, 0 to skip it (default {FULL.exact_rows}; --quick {QUICK.exact_rows})",
    )
    parser.add_argument("--raw-capital", action="store_true", help="do not log1p capital-gain and capital-loss")
    parser.add_argument("--no-timing", action="store_true", help="skip the time to learn rho (and its figure)")
    parser.set_defaults(run=cmd)
