"""The figures of ``ppsvm reproduce dp``: test AUC against epsilon (Figure 3) and the time to learn rho
(Figure 4), our readings of Li et al. (2014)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ppsvm.core.fourier import MAX_FREQUENCY_PAIRS
from ppsvm.experiments.dp.setting import (
    EPSILON_METHODS,
    EXACT_RBF,
    HYBRID_LAPLACE,
    N_ENTITIES,
    N_PRIVATE,
    N_TEST,
    NON_PRIVATE,
    PLAIN_METHODS,
    PRIVATE_LAPLACE,
    Settings,
    key,
)


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
