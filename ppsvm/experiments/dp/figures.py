"""The figures of ``ppsvm reproduce dp``, counterparts on UCI Adult of Li et al. (2014)'s: test AUC against epsilon
(Figures 3 and 4), against dimensionality (5 and 6) and against the sampling rate (7 and 8), with boxplots of the
two DP methods, and the hybrid model's time (9); besides, our time to learn rho against public records and D."""

from __future__ import annotations

from typing import Any

import numpy as np

from ppsvm.core.fourier import MAX_FREQUENCY_PAIRS
from ppsvm.experiments.dp import cv, stats
from ppsvm.experiments.dp.setting import (
    CV_HYBRID,
    CV_METHODS,
    CV_NON_PRIVATE,
    CV_PRIVATE,
    EPSILON_METHODS,
    EXACT_RBF,
    FULL_RATE,
    HYBRID_LAPLACE,
    N_ENTITIES,
    N_PRIVATE,
    N_TEST,
    NON_PRIVATE,
    PLAIN_METHODS,
    PRIVATE_LAPLACE,
    CvSettings,
    Settings,
    key,
)


def figure_auc(summary: dict[str, Any], settings: Settings) -> Any:
    """Counterpart of Figures 3 and 4 (US, Brazil): test AUC (mean ± s.d.) against epsilon, with the no-epsilon
    baselines as lines."""
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
        "repetitions (counterpart of Li et al. 2014, Figures 3 and 4)",
        fontsize=10,
    )
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7.5, loc="lower right")
    fig.tight_layout()
    return fig


def figure_rho_time(timing: list[dict[str, Any]], settings: Settings) -> Any:
    """Our addition (the paper's time figure is Figure 9): seconds to learn rho against public records, one line
    per D (wall-clock and CPU)."""
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
    ax.set_title(
        "Learning rho on UCI Adult public records (our addition; Li et al. 2014 time rho in Figure 9)", fontsize=9
    )
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    return fig


def _auc_panels(
    title: str, xlabel: str, ticks: list[str], boxes: dict[str, list[list[float]]], fig: Any
) -> tuple[Any, Any, Any]:
    """The layout of the paper's Figures 5-8: (a) mean AUC against the varied parameter, (b) a boxplot of
    dp-hybrid's AUCs and (c) one of private-svm's, on one AUC scale so that their spreads compare at a glance."""
    ax, ax_hybrid, ax_private = fig.subplots(1, 3, gridspec_kw={"width_ratios": [1.3, 1, 1]})
    values = [v for per in boxes.values() for group in per for v in group]
    low, high = min(values), max(values)
    margin = 0.05 * (high - low or 0.01)
    for axis, (name, groups), letter in zip((ax_hybrid, ax_private), boxes.items(), "bc", strict=True):
        axis.boxplot(groups, tick_labels=ticks)
        axis.set_ylim(low - margin, high + margin)
        axis.set_title(f"({letter}) boxplot of {name}", fontsize=9)
        axis.set_xlabel(xlabel)
        axis.grid(True, alpha=0.3)
    ax_hybrid.set_ylabel("test AUC per split")
    ax.set_title("(a) mean test AUC ± s.d. over splits", fontsize=9)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(f"test AUC ({N_TEST:,} records per fold)")
    ax.grid(True, alpha=0.3)
    fig.suptitle(title, fontsize=10)
    return ax, ax_hybrid, ax_private


def _method_styles() -> dict[str, tuple[str, str]]:
    return {CV_HYBRID: ("tab:red", "o"), CV_PRIVATE: ("tab:blue", "s"), CV_NON_PRIVATE: ("black", "D")}


def _public_colors(settings: CvSettings) -> dict[int, Any]:
    import matplotlib

    greens = matplotlib.colormaps["Greens"]
    sizes = settings.public_sizes
    return {size: greens(0.4 + 0.6 * k / max(len(sizes) - 1, 1)) for k, size in enumerate(sizes)}


def _protocol(settings: CvSettings, splits: int) -> str:
    folds = f"{settings.folds}" if settings.folds_run == settings.folds else f"{settings.folds_run} of {settings.folds}"
    return (
        f"{settings.repetitions} repetition(s) x {folds} folds ({splits} splits), "
        f"epsilon {key(settings.epsilon)}, C = {key(settings.C)}, D = {settings.frequencies}, "
        f"{settings.entities} entities"
    )


def figure_dimensions(summary: dict[str, Any], splits: list[dict[str, Any]], settings: CvSettings) -> Any:
    """Counterpart of Figures 5 and 6 (US, Brazil): test AUC against the paper's dimensionality (attributes + the
    label), every training record kept; boxplots of dp-hybrid and private-svm over the splits."""
    from matplotlib.figure import Figure

    dims = list(settings.dimensions)
    ticks = [f"{d}\n({cv.features(d)} attr.)" for d in dims]
    fig = Figure(figsize=(15, 4.9))
    boxes = {
        CV_METHODS[name]: [stats.cv_auc(splits, name, d, FULL_RATE) for d in dims] for name in (CV_HYBRID, CV_PRIVATE)
    }
    title = "UCI Adult: AUC against dimensionality (counterpart of Li et al. 2014, Figures 5 and 6); " + _protocol(
        settings, len(splits)
    )
    ax, _, _ = _auc_panels(title, "dimensionality (the paper's count: attributes + label)", ticks, boxes, fig)
    positions = np.arange(1, len(dims) + 1)
    for k, (name, (color, marker)) in enumerate(_method_styles().items()):
        per = summary["dimensions"][name]
        ax.errorbar(
            positions + 0.04 * (k - 1),
            [per[str(d)]["mean"] for d in dims],
            yerr=[per[str(d)]["std"] for d in dims],
            color=color,
            marker=marker,
            capsize=3,
            label=CV_METHODS[name],
        )
    for size, color in _public_colors(settings).items():
        per = summary["dimensions"][cv.public_only_name(size)]
        ax.plot(
            positions,
            [per[str(d)]["mean"] for d in dims],
            color=color,
            linestyle="--",
            marker=".",
            label=f"Public-{size} (public-only RBF SVM)",
        )
    ax.set_xticks(positions)
    ax.set_xticklabels(ticks)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    return fig


def figure_sampling(summary: dict[str, Any], splits: list[dict[str, Any]], settings: CvSettings) -> Any:
    """Counterpart of Figures 7 and 8 (US, Brazil): test AUC against the sampling rate of the training records,
    every attribute; the public-only models and the non-private one (rate 1) as lines; boxplots of dp-hybrid and
    private-svm over the splits."""
    from matplotlib.figure import Figure

    rates = list(settings.rates)
    d_all = settings.sampling_dimension
    ticks = [key(rate) for rate in rates]
    fig = Figure(figsize=(15, 4.9))
    boxes = {
        CV_METHODS[name]: [stats.cv_auc(splits, name, d_all, rate) for rate in rates]
        for name in (CV_HYBRID, CV_PRIVATE)
    }
    title = (
        f"UCI Adult: AUC against sampling rate, {cv.features(d_all)} attributes (counterpart of Li et al. 2014, "
        "Figures 7 and 8); " + _protocol(settings, len(splits))
    )
    ax, _, _ = _auc_panels(title, "sampling rate of the training records", ticks, boxes, fig)
    positions = np.arange(1, len(rates) + 1)
    styles = _method_styles()
    for k, name in enumerate((CV_HYBRID, CV_PRIVATE)):
        color, marker = styles[name]
        per = summary["sampling"][name]
        ax.errorbar(
            positions + 0.04 * (k - 0.5),
            [per[key(rate)]["mean"] for rate in rates],
            yerr=[per[key(rate)]["std"] for rate in rates],
            color=color,
            marker=marker,
            capsize=3,
            label=CV_METHODS[name],
        )
    ax.axhline(
        summary["dimensions"][CV_NON_PRIVATE][str(d_all)]["mean"],
        color="black",
        linewidth=1.3,
        label=f"{CV_METHODS[CV_NON_PRIVATE]}, rate 1",
    )
    for size, color in _public_colors(settings).items():
        ax.axhline(
            summary["dimensions"][cv.public_only_name(size)][str(d_all)]["mean"],
            color=color,
            linestyle="--",
            linewidth=1.2,
            label=f"Public-{size} (no private records)",
        )
    ax.set_xticks(positions)
    ax.set_xticklabels(ticks)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    return fig


def figure_time(summary: dict[str, Any], settings: CvSettings) -> Any:
    """Counterpart of Figure 9: the hybrid model's seconds against (a) dimensionality, every training record, and
    (b) the sampling rate, every attribute: learning rho, the whole fit (wall-clock and CPU) and, for scale,
    private-svm's whole fit, which draws rho instead. Medians over the splits, bars from quartile to quartile."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 4.3))
    axes = fig.subplots(1, 2, sharey=True)
    series = (
        (CV_HYBRID, "rho", "dp-hybrid: learning rho (wall-clock)", "tab:red", "-"),
        (CV_HYBRID, "fit_wall", "dp-hybrid: whole fit (wall-clock)", "tab:orange", "-"),
        (CV_HYBRID, "fit_cpu", "dp-hybrid: whole fit (CPU)", "tab:orange", ":"),
        (CV_PRIVATE, "fit_wall", "private-svm: whole fit (wall-clock)", "tab:blue", "--"),
    )
    studies = (
        ("dimensions", [str(d) for d in settings.dimensions], "(a) dimensionality (attributes + label), rate 1"),
        (
            "sampling",
            [key(r) for r in settings.rates],
            f"(b) sampling rate, {cv.features(settings.sampling_dimension)} attributes",
        ),
    )
    for ax, (study, xs, label) in zip(axes, studies, strict=True):
        positions = np.arange(len(xs))
        for name, kind, text, color, style in series:
            per = [summary["time"][study][name][x][kind] for x in xs]
            medians = np.array([p["median"] for p in per])
            bars = [medians - [p["q1"] for p in per], [p["q3"] for p in per] - medians]
            ax.errorbar(positions, medians, yerr=bars, color=color, linestyle=style, marker="o", capsize=3, label=text)
        ax.set_xticks(positions)
        ax.set_xticklabels(xs)
        ax.set_xlabel(label)
        ax.grid(True, alpha=0.3)
    axes[0].set_ylabel("seconds (median, quartile bars)")
    axes[0].set_ylim(bottom=0)
    axes[1].legend(fontsize=7)
    fig.suptitle(
        "UCI Adult: time of the hybrid model (counterpart of Li et al. 2014, Figure 9); in-process simulated "
        f"entities, {settings.hybrid_public} public records",
        fontsize=10,
    )
    fig.tight_layout()
    return fig
