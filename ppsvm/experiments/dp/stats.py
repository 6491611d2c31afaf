"""Statistics of ``ppsvm reproduce dp`` over repetitions: means, standard deviations and the paper's claims as
paired verdicts (same repetition, two standard errors)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ppsvm.experiments.dp.setting import (
    CLOSE_AUC,
    EPSILON_METHODS,
    FIGURES,
    HYBRID_LAPLACE,
    NON_PRIVATE,
    PLAIN_METHODS,
    PRIVATE_LAPLACE,
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
