"""Where the learned inverse's leak comes from, and what noise on the combined kernel costs it and the SVM.

The learned inverse (benchmarks/collusion.py): the column-block peer (entity (1, 0)), colluding with the coordinator,
fits a ridge regression from its own row block's combined Gaussian log-kernel rows (the sum of both column blocks'
shares -mu ||a_j - b_j||^2, which secure aggregation hands the coordinator) to its own values, and applies it to the
victim's (entity (0, 0)) row block. Scored as in collusion.py: the share of the victim's scaled values recovered
within 0.05, beside the no-release guess (:func:`ppsvm.core.reconstruction.no_release_guess`); gain = the difference.
Every configuration is a 2 x 2 partition from :func:`benchmarks.collusion.partition` (Gaussian, mu = 1/n, records
shuffled by the seed, which also fixes the column blocks' B_j), all records of cell (0, 0) attacked.

1. *Leak source* (Cleveland, Pima, WDBC, Ionosphere; mbar = min n_j - 1 and min n_j // 2): the same regression
   fitted and applied on (a) the combination; (b) the partner's share only (column block 1 of each row block: what
   the victim's row-block peer released, the victim nothing); (c) the victim's share only (column block 0). Which
   share carries what the attack recovers.
2. *Noise trade-off* (WDBC, Ionosphere, Cleveland; mbar = min n_j - 1): Gaussian noise of sd sigma = rel * std(L),
   L the noise-free combined log-kernel of all records, added entrywise to the log-kernel, rel in LEVELS.
   (a) The attack on noisy combinations (a fresh draw for each row block), with the default ridge
   (``benchmarks.collusion._RIDGE``) and with the ridge the attacker picks from RIDGES by 5-fold CV on its own row
   block (the share of its own held-out values recovered). (b) The SVM's test error on K = exp(L + noise) (one
   draw): 10-fold stratified CV over all records (:func:`ppsvm.core.tuning.fold_indices`); on each training part nu
   is chosen from ``NU_GRID_CLASSIFY`` by :func:`ppsvm.core.tuning.tune` (inner 5-fold CV, mu fixed at 1/n), the LP
   is solved by :func:`ppsvm.core.lp.solve_lp` and the error is that of K_test u - gamma on the held-out fold.
   Noise draws come from ``numpy.random.default_rng([seed, data set's index in NOISE_DATASETS, rel's index in
   LEVELS])``, so a level's figures do not depend on which other levels or data sets run.

Means over seeds 0, 1, 2 (sd across seeds, ddof 0), and per data set the smallest level whose mean gain is at most
0.05, with the test error there.

    .venv/bin/python -m benchmarks.collusion_noise            # 3 minutes on 2 cores at a load average of 5
    .venv/bin/python -m benchmarks.collusion_noise --quick    # seed 0, rel 0, 0.1, 0.5, 2: 30 s

Pure computation in this process (no gRPC); prints the two Markdown tables and writes results/collusion_noise.json
(``--quick``: results/collusion_noise-quick.json, git-ignored).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks._shared import machine_info, write_json
from benchmarks.collusion import TOLERANCE, Partition, as_dict, learned_inverse, load, mbars, partition, score
from ppsvm.constants import DEFAULT_FOLDS, NU_GRID_CLASSIFY
from ppsvm.core.aggregation import log_share
from ppsvm.core.lp import solve_lp
from ppsvm.core.metrics import error_rate
from ppsvm.core.reconstruction import Recovery
from ppsvm.core.tuning import fold_indices, tune
from ppsvm.data.partition import feature_blocks

NAME = "collusion_noise"
LEAK_DATASETS = ("cleveland", "pima", "wdbc", "ionosphere")
NOISE_DATASETS = ("wdbc", "ionosphere", "cleveland")
SEEDS = (0, 1, 2)
# Noise sd relative to std(L); --quick runs QUICK_LEVELS with seed 0 only.
LEVELS = (0.0, 0.003, 0.01, 0.03, 0.1, 0.3, 0.5, 1.0, 2.0)
QUICK_LEVELS = (0.0, 0.1, 0.5, 2.0)
# Ridges the attacker chooses from (learned_inverse's relative ridge), by ATTACKER_FOLDS-fold CV on its row block.
RIDGES = (1e-6, 1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0)
ATTACKER_FOLDS = 5
OUTER_FOLDS = 10
# A mean gain at or below this counts as no leak beyond the no-release guess.
GAIN_TARGET = 0.05
SOURCES = ("combination", "partner", "victim")

Log = Callable[[str], None]


# --- 1. leak source ----------------------------------------------------------------------------------------------


def leak_sources(p: Partition) -> dict[str, Recovery]:
    """The learned inverse against cell (0, 0) of a 2 x 2 partition, from each of SOURCES.

    Parameters
    ----------
    p : Partition
        A 2 x 2 partition.

    Returns
    -------
    dict
        Per source, the score of the regression fitted on row block 1's rows of that source against the colluder's
        values (cell (1, 0)) and applied to row block 0's: ``combination`` (both shares summed), ``partner``
        (column block 1's share) and ``victim`` (column block 0's share).
    """
    truth, prior = p.cells[0][0], p.cells[1][0]
    inputs = {
        "combination": (p.combination(1), p.combination(0)),
        "partner": (p.shares[1][1], p.shares[0][1]),
        "victim": (p.shares[1][0], p.shares[0][0]),
    }
    return {
        source: score(learned_inverse(train, prior, rows, prior), truth, prior)
        for source, (train, rows) in inputs.items()
    }


def run_leak(datasets: tuple[str, ...], seeds: tuple[int, ...], log: Log) -> dict[str, Any]:
    """Part 1 for each data set and mbar in :func:`benchmarks.collusion.mbars`: per seed and the mean over seeds."""
    results: dict[str, Any] = {}
    for name in datasets:
        data = load(name, 0, 0)  # not Adult: the sample size and seed are unused
        widths = [len(c) for c in feature_blocks(data.X.shape[1], 2)]
        entries = []
        for mbar in mbars(widths):
            started = time.perf_counter()
            per_seed: list[dict[str, Any]] = []
            for seed in seeds:
                found = leak_sources(partition(data, 2, 2, "gaussian", mbar, seed))
                per_seed.append({"seed": seed, **{source: as_dict(found[source]) for source in SOURCES}})
            mean = {source: float(np.mean([s[source]["recovered"] for s in per_seed])) for source in SOURCES}
            mean["baseline"] = float(np.mean([s["combination"]["baseline"] for s in per_seed]))
            entries.append({"mbar": mbar, "seeds": per_seed, "mean": mean})
            log(f"  leak source {name} mbar {mbar}: {time.perf_counter() - started:.1f} s")
        results[name] = {"records": len(data.X), "features": data.X.shape[1], "widths": widths, "mbars": entries}
    return results


# --- 2. noise trade-off ------------------------------------------------------------------------------------------


def noisy(L: np.ndarray, sd: float, rng: np.random.Generator) -> np.ndarray:
    """``L`` plus entrywise N(0, sd^2) noise from ``rng`` (``L`` itself, and no draw, at sd = 0)."""
    return L if sd == 0 else L + rng.normal(0.0, sd, L.shape)


def tuned_ridge(rows: np.ndarray, values: np.ndarray, seed: int) -> float:
    """The ridge of RIDGES whose learned inverse recovers most of the attacker's own held-out values.

    Parameters
    ----------
    rows : ndarray, shape (k, mbar)
        The attacker's own row block's (noisy) combined log-kernel rows.
    values : ndarray, shape (k, n)
        Its own values; also the prior the guesses are snapped to.
    seed : int
        Draws the ATTACKER_FOLDS folds.

    Returns
    -------
    float
        The ridge with the highest mean share within TOLERANCE over the folds (ties: the smaller ridge).
    """
    order = np.random.default_rng(seed).permutation(len(rows))
    folds = np.array_split(order, ATTACKER_FOLDS)
    best, best_share = RIDGES[0], -1.0
    for ridge in RIDGES:
        shares = []
        for held in folds:
            keep = np.setdiff1d(order, held)
            guess = learned_inverse(rows[keep], values[keep], rows[held], values, ridge=ridge)
            shares.append(score(guess, values[held], values).recovered)
        if np.mean(shares) > best_share:
            best, best_share = ridge, float(np.mean(shares))
    return best


def noisy_attack(p: Partition, sd: float, rng: np.random.Generator, seed: int) -> tuple[Recovery, Recovery, float]:
    """The learned inverse on both row blocks' combinations plus noise of sd ``sd`` (row block 0 drawn first).

    Returns
    -------
    default : Recovery
        With learned_inverse's default ridge.
    tuned : Recovery
        With the ridge :func:`tuned_ridge` picks on the attacker's noisy rows.
    ridge : float
        That ridge.
    """
    victims = noisy(p.combination(0), sd, rng)
    own = noisy(p.combination(1), sd, rng)
    truth, prior = p.cells[0][0], p.cells[1][0]
    default = score(learned_inverse(own, prior, victims, prior), truth, prior)
    ridge = tuned_ridge(own, prior, seed)
    tuned = score(learned_inverse(own, prior, victims, prior, ridge=ridge), truth, prior)
    return default, tuned, ridge


def cv_error(K: np.ndarray, y: np.ndarray, mu: float, seed: int) -> tuple[float, list[float]]:
    """Mean OUTER_FOLDS-fold test error of the classification LP on ``K``, nu tuned on each training part.

    Parameters
    ----------
    K : ndarray, shape (m, mbar)
        Gaussian kernel of all records at width ``mu``.
    y : ndarray, shape (m,)
        Labels +-1.
    mu : float
    seed : int
        Draws the outer and the inner folds.

    Returns
    -------
    error : float
        Mean over the outer folds of the held-out error rate.
    nus : list of float
        The nu chosen on each outer fold's training part.
    """
    errors, nus = [], []
    for held in fold_indices("classify", y, OUTER_FOLDS, seed):
        train = np.ones(len(y), dtype=bool)
        train[held] = False
        points = [(nu, mu) for nu in NU_GRID_CLASSIFY]
        chosen = tune(
            "classify", "gaussian", K[train], y[train], mu_ref=mu, points=points, folds=DEFAULT_FOLDS, seed=seed
        )
        solution = solve_lp("classify", K[train], y[train], chosen.nu)
        errors.append(error_rate(y[held], K[held] @ solution.u - solution.gamma))
        nus.append(chosen.nu)
    return float(np.mean(errors)), nus


def level_summary(per_seed: list[dict[str, Any]]) -> dict[str, float]:
    """Means (and sds, ddof 0) over seeds of one level's figures."""
    default = np.array([s["default"]["gain"] for s in per_seed])
    tuned = np.array([s["tuned"]["gain"] for s in per_seed])
    error = np.array([s["test_error"] for s in per_seed])
    return {
        "sigma": float(np.mean([s["sigma"] for s in per_seed])),
        "recovered": float(np.mean([s["default"]["recovered"] for s in per_seed])),
        "baseline": float(np.mean([s["default"]["baseline"] for s in per_seed])),
        "gain": float(default.mean()),
        "gain_sd": float(default.std()),
        "gain_tuned": float(tuned.mean()),
        "gain_tuned_sd": float(tuned.std()),
        "test_error": float(error.mean()),
        "test_error_sd": float(error.std()),
    }


def first_safe(levels: list[dict[str, Any]], key: str) -> dict[str, Any] | None:
    """The first level (in increasing rel) whose mean ``key`` gain is at most GAIN_TARGET, with its test error."""
    for level in levels:
        if level["mean"][key] <= GAIN_TARGET:
            return {
                "relative": level["relative"],
                "gain": level["mean"][key],
                "test_error": level["mean"]["test_error"],
            }
    return None


def run_noise(datasets: tuple[str, ...], seeds: tuple[int, ...], levels: tuple[float, ...], log: Log) -> dict[str, Any]:
    """Part 2 for each data set at mbar = min n_j - 1: per level, per seed and the mean over seeds."""
    results: dict[str, Any] = {}
    for name in datasets:
        data = load(name, 0, 0)  # not Adult: the sample size and seed are unused
        y = np.asarray(data.y, dtype=float)
        blocks = feature_blocks(data.X.shape[1], 2)
        widths = [len(c) for c in blocks]
        mbar = mbars(widths)[0]
        per_level: list[list[dict[str, Any]]] = [[] for _ in levels]
        spread = []
        for seed in seeds:
            p = partition(data, 2, 2, "gaussian", mbar, seed)
            # All records' combined log-kernel in their original order: the row blocks' combinations are its rows.
            L = np.sum([log_share("gaussian", data.X[:, c], p.B[j], p.mu) for j, c in enumerate(blocks)], axis=0)
            spread.append(float(L.std()))
            for k, rel in enumerate(levels):
                started = time.perf_counter()
                sd = rel * spread[-1]
                rng = np.random.default_rng([seed, NOISE_DATASETS.index(name), LEVELS.index(rel)])
                default, tuned, ridge = noisy_attack(p, sd, rng, seed)
                error, nus = cv_error(np.exp(noisy(L, sd, rng)), y, p.mu, seed)
                per_level[k].append(
                    {
                        "seed": seed,
                        "sigma": sd,
                        "default": as_dict(default),
                        "tuned": as_dict(tuned),
                        "tuned_ridge": ridge,
                        "test_error": error,
                        "nu_per_fold": nus,
                    }
                )
                log(
                    f"  noise {name} seed {seed} rel {rel:g}: gain {default.gain:+.3f} (ridge {ridge:g}: "
                    f"{tuned.gain:+.3f}), test error {error:.4f} [{time.perf_counter() - started:.1f} s]"
                )
        entries = [
            {"relative": rel, "seeds": per_seed, "mean": level_summary(per_seed)}
            for rel, per_seed in zip(levels, per_level, strict=True)
        ]
        results[name] = {
            "records": len(data.X),
            "features": data.X.shape[1],
            "widths": widths,
            "mbar": mbar,
            "mu": 1.0 / data.X.shape[1],
            "std_L": spread,  # per seed, in the order of settings["seeds"]
            "levels": entries,
            "first_safe": {"default": first_safe(entries, "gain"), "tuned": first_safe(entries, "gain_tuned")},
        }
    return results


# --- report ------------------------------------------------------------------------------------------------------


def markdown(headers: list[str], rows: list[list[str]]) -> str:
    """A Markdown table, the first column left-aligned and the others right-aligned."""
    lines = ["| " + " | ".join(headers) + " |", "|---|" + "--:|" * (len(headers) - 1)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])


def report(leak: dict[str, Any], noise: dict[str, Any], seeds: tuple[int, ...]) -> str:
    """Both parts as Markdown tables, with the smallest noise level that removes the gain."""
    over = f"mean over seeds {', '.join(map(str, seeds))}"
    lines = [
        f"Leak source: share of the victim's values within {TOLERANCE} by the learned inverse fitted on each source",
        f"(2 x 2, Gaussian, all of cell (0, 0); {over}). guess: the no-release guess.",
        "",
    ]
    body = [
        [
            f"{name} ({result['features']})",
            "/".join(map(str, result["widths"])),
            str(entry["mbar"]),
            *(f"{entry['mean'][key]:.3f}" for key in ("baseline", *SOURCES)),
        ]
        for name, result in leak.items()
        for entry in result["mbars"]
    ]
    headers = ["data (features)", "widths", "mbar", "guess", "combination", "partner only", "victim only"]
    lines += [markdown(headers, body), ""]
    lines += [
        "Noise trade-off: N(0, sigma^2) on the combined log-kernel, sigma = rel x std(L); learned inverse with the",
        f"default ridge ('gain') and the attacker's CV-tuned ridge ('tuned'); SVM {OUTER_FOLDS}-fold test error with",
        f"nu tuned inside each training part ({over}; sd across seeds in parentheses).",
        "",
    ]
    body = []
    for name, result in noise.items():
        for level in result["levels"]:
            m = level["mean"]
            body.append(
                [
                    f"{name} (mbar {result['mbar']})",
                    f"{level['relative']:g}",
                    f"{m['sigma']:.2e}",
                    f"{m['recovered']:.3f}",
                    f"{m['baseline']:.3f}",
                    f"{m['gain']:.3f} ({m['gain_sd']:.3f})",
                    f"{m['gain_tuned']:.3f} ({m['gain_tuned_sd']:.3f})",
                    f"{m['test_error']:.4f} ({m['test_error_sd']:.4f})",
                ]
            )
    headers = ["data", "rel", "sigma", "recovered", "guess", "gain (sd)", "tuned gain (sd)", "test error (sd)"]
    lines += [markdown(headers, body), "", f"Smallest rel with mean gain <= {GAIN_TARGET}:"]
    for name, result in noise.items():
        zero = result["levels"][0]["mean"]["test_error"]  # LEVELS and QUICK_LEVELS start at rel 0
        for label, found in result["first_safe"].items():
            if found is None:
                last = result["levels"][-1]
                key = "gain" if label == "default" else "gain_tuned"
                lines.append(
                    f"  {name}, {label} ridge: none (gain {last['mean'][key]:.3f} at rel {last['relative']:g})"
                )
            else:
                lines.append(
                    f"  {name}, {label} ridge: rel {found['relative']:g} (gain {found['gain']:.3f}), test error "
                    f"{found['test_error']:.4f} against {zero:.4f} without noise"
                )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="seed 0, rel 0, 0.1, 0.5 and 2")
    args = parser.parse_args(argv)
    seeds = SEEDS[:1] if args.quick else SEEDS
    levels = QUICK_LEVELS if args.quick else LEVELS

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    machine = machine_info()
    started = time.perf_counter()
    leak = run_leak(LEAK_DATASETS, seeds, log)
    leak_seconds = time.perf_counter() - started
    noise = run_noise(NOISE_DATASETS, seeds, levels, log)
    total = time.perf_counter() - started
    print(report(leak, noise, seeds))
    print(f"\ntotal wall time {total:.0f} s (leak source {leak_seconds:.0f} s)")
    settings = {
        "partition": "2x2, Gaussian, mu = 1 / n, victims: all of cell (0, 0), colluder: entity (1, 0)",
        "seeds": list(seeds),
        "tolerance": TOLERANCE,
        "leak_datasets": list(LEAK_DATASETS),
        "leak_sources": list(SOURCES),
        "noise_datasets": list(NOISE_DATASETS),
        "noise_mbar": "min n_j - 1",
        "relative_levels": list(levels),
        "noise_rng": "default_rng([seed, index in noise_datasets, index in all_levels])",
        "all_levels": list(LEVELS),
        "attacker_ridges": list(RIDGES),
        "attacker_folds": ATTACKER_FOLDS,
        "outer_folds": OUTER_FOLDS,
        "inner_folds": DEFAULT_FOLDS,
        "nu_grid": list(NU_GRID_CLASSIFY),
        "gain_target": GAIN_TARGET,
        "leak_seconds": leak_seconds,
        "total_seconds": total,
    }
    payload = {"machine": machine, "settings": settings, "leak_source": leak, "noise": noise}
    path = write_json(NAME, payload, quick=args.quick)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
