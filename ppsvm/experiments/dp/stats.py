"""Statistics of ``ppsvm reproduce dp`` over repetitions: means, standard deviations and the paper's claims as
paired verdicts (same repetition, two standard errors); for the Figures 5-9 part also the boxplots' quartiles."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ppsvm.experiments.dp import cv
from ppsvm.experiments.dp.setting import (
    CLOSE_AUC,
    CV_HYBRID,
    CV_METHODS,
    CV_NON_PRIVATE,
    CV_PRIVATE,
    EPSILON_METHODS,
    FIGURES,
    FULL_RATE,
    HYBRID_LAPLACE,
    NON_PRIVATE,
    PLAIN_METHODS,
    PRIVATE_LAPLACE,
    CvSettings,
    Settings,
    key,
)


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
    summary["useful"] = {
        method: stats("useful", method) if "auc" in value else {e: stats("useful", method, e) for e in value}
        for method, value in reps[0].get("useful", {}).items()
    }
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


# --- the Figures 5-9 part ---------------------------------------------------------------------------


def spread(values: Sequence[float]) -> dict[str, float]:
    """:func:`mean_std` with the five numbers of a boxplot (min, quartiles, max) and the interquartile range."""
    a = np.asarray(values, dtype=float)
    q1, median, q3 = (float(q) for q in np.percentile(a, [25, 50, 75]))
    return {
        **mean_std(values),
        "min": float(a.min()),
        "q1": q1,
        "median": median,
        "q3": q3,
        "max": float(a.max()),
        "iqr": q3 - q1,
    }


def by_repetition(splits: list[dict[str, Any]], values: Sequence[float]) -> list[float]:
    """Means of ``values`` (one per split) over the folds of each repetition, in seed order.

    Folds of one repetition share eight ninths of their training records, so their differences are far from
    independent and a standard error over splits would be too small; paired verdicts use these means instead.
    """
    seeds = sorted({s["seed"] for s in splits})
    return [float(np.mean([v for s, v in zip(splits, values, strict=True) if s["seed"] == seed])) for seed in seeds]


def cv_auc(splits: list[dict[str, Any]], name: str, dimension: int, rate: float) -> list[float]:
    """The test AUC of fit (name, dimension, rate) in every split."""
    return [fit["auc"] for fit in cv.select(splits, name, dimension, rate)]


def cv_paired(splits: list[dict[str, Any]], a: Sequence[float], b: Sequence[float]) -> dict[str, Any]:
    """:func:`paired` on the per-repetition means of a - b, with the splits won (a > b) out of all."""
    differences = [x - z for x, z in zip(a, b, strict=True)]
    return {
        **paired(by_repetition(splits, differences)),
        "split_wins": int(sum(d > 0 for d in differences)),
        "splits": len(differences),
    }


def cv_names(settings: CvSettings) -> list[str]:
    """The rows of the dimensionality tables, in order."""
    return [*CV_METHODS, *(cv.public_only_name(size) for size in settings.public_sizes)]


def summarise_cv(splits: list[dict[str, Any]], settings: CvSettings) -> dict[str, Any]:
    """AUC spreads over splits per method and dimensionality (rate 1) and per method and sampling rate (every
    attribute), and the hybrid model's seconds (rho, fit wall-clock and CPU) beside private-svm's fit seconds."""
    d_all = settings.sampling_dimension

    def times(name: str, dimension: int, rate: float) -> dict[str, Any]:
        chosen = cv.select(splits, name, dimension, rate)
        out = {kind: spread([f["seconds"][kind] for f in chosen]) for kind in ("fit_wall", "fit_cpu")}
        if name == CV_HYBRID:
            out["rho"] = spread([f["seconds"]["rho"] for f in chosen])
            out["rho_iterations"] = spread([f["rho_iterations"] for f in chosen])
        return out

    summary: dict[str, Any] = {
        "dimensions": {
            name: {str(d): spread(cv_auc(splits, name, d, FULL_RATE)) for d in settings.dimensions}
            for name in cv_names(settings)
        },
        "sampling": {
            name: {key(rate): spread(cv_auc(splits, name, d_all, rate)) for rate in settings.rates}
            for name in (CV_HYBRID, CV_PRIVATE)
        },
        "time": {
            "dimensions": {
                name: {str(d): times(name, d, FULL_RATE) for d in settings.dimensions}
                for name in (CV_HYBRID, CV_PRIVATE)
            },
            "sampling": {
                name: {key(rate): times(name, d_all, rate) for rate in settings.rates}
                for name in (CV_HYBRID, CV_PRIVATE)
            },
        },
        "noise_to_signal": {
            str(d): spread([s["noise_to_signal"][str(d)] for s in splits]) for d in settings.dimensions
        },
    }
    summary["n_train"] = {key(rate): cv.select(splits, CV_HYBRID, d_all, rate)[0]["n_train"] for rate in settings.rates}
    positives = [s["test_positive_rate"] for s in splits]
    # The paper's models cut at 0: what that does on Adult's imbalanced labels, beside the majority class.
    summary["error_at_zero"] = {
        str(d): float(np.mean([f["error_rate_at_zero"] for f in cv.select(splits, CV_HYBRID, d, FULL_RATE)]))
        for d in settings.dimensions
    }
    summary["majority_error"] = float(np.mean([min(p, 1 - p) for p in positives]))
    summary["test_positive_rate"] = float(np.mean(positives))
    return summary


def verdicts_cv(splits: list[dict[str, Any]], settings: CvSettings) -> dict[str, Any]:
    """The paper's claims of sections 5.3 and 5.4 as paired verdicts over repetitions.

    Returns
    -------
    dict
        "dimensions" and "sampling": per dimensionality or rate, dp-hybrid against private-svm and the spread of
        each (s.d. and IQR over splits); "growth": per method, AUC at the largest minus the smallest
        dimensionality; "private_last_step": private-svm's AUC at the largest minus the next dimensionality;
        "hybrid_rate_span": dp-hybrid's AUC at the smallest minus the largest rate; "against_public": per
        public-only model and dimensionality, dp-hybrid and the non-private reference against it.
    """
    d_all = settings.sampling_dimension
    dims, rates = settings.dimensions, settings.rates

    def versus_private(dimension: int, rate: float) -> dict[str, Any]:
        hybrid = cv_auc(splits, CV_HYBRID, dimension, rate)
        private = cv_auc(splits, CV_PRIVATE, dimension, rate)
        hybrid_spread, private_spread = spread(hybrid), spread(private)
        return {
            "hybrid_vs_private_svm": cv_paired(splits, hybrid, private),
            "std": {"dp-hybrid": hybrid_spread["std"], "private-svm": private_spread["std"]},
            "iqr": {"dp-hybrid": hybrid_spread["iqr"], "private-svm": private_spread["iqr"]},
        }

    def change(name: str, first: tuple[int, float], last: tuple[int, float]) -> dict[str, Any]:
        return cv_paired(splits, cv_auc(splits, name, *last), cv_auc(splits, name, *first))

    out: dict[str, Any] = {
        "dimensions": {str(d): versus_private(d, FULL_RATE) for d in dims},
        "sampling": {key(rate): versus_private(d_all, rate) for rate in rates},
        "growth": {name: change(name, (min(dims), FULL_RATE), (max(dims), FULL_RATE)) for name in cv_names(settings)},
        "hybrid_rate_span": change(CV_HYBRID, (d_all, max(rates)), (d_all, min(rates))),
        # The paper's hybrid model stays above its public-data baselines (sections 5.2, 5.3); and how far the
        # same pipeline without noise gets against them.
        "against_public": {
            name: {
                str(d): {
                    "dp-hybrid": cv_paired(
                        splits, cv_auc(splits, CV_HYBRID, d, FULL_RATE), cv_auc(splits, name, d, FULL_RATE)
                    ),
                    "non-private": cv_paired(
                        splits, cv_auc(splits, CV_NON_PRIVATE, d, FULL_RATE), cv_auc(splits, name, d, FULL_RATE)
                    ),
                }
                for d in dims
            }
            for name in cv_names(settings)[len(CV_METHODS) :]
        },
    }
    if len(dims) > 1:
        last, before = sorted(dims)[-1], sorted(dims)[-2]
        out["private_last_step"] = {
            "from": before,
            "to": last,
            **change(CV_PRIVATE, (before, FULL_RATE), (last, FULL_RATE)),
        }
    return out
