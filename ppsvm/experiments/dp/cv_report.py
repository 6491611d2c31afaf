"""dp-figures5-9.md, the report of the Figures 5-9 part of ``ppsvm reproduce dp``: the paper's protocol beside ours,
the attribute subsets, the AUC and time tables, the paper's claims, where Adult differs from the census extracts
and why, and the run."""

from __future__ import annotations

from typing import Any

import numpy as np

from ppsvm.core.dp import laplace_scale
from ppsvm.core.fourier import MAX_FREQUENCY_ITERATIONS
from ppsvm.experiments import report
from ppsvm.experiments.adult import ATTRIBUTES, DATA_FILE
from ppsvm.experiments.dp import cv
from ppsvm.experiments.dp.report import markdown_table, with_error
from ppsvm.experiments.dp.setting import (
    CV_HYBRID,
    CV_METHODS,
    CV_NON_PRIVATE,
    CV_PRIVATE,
    CV_RECORDS,
    FIGURE_DIMENSIONS,
    FIGURE_SAMPLING,
    FIGURE_TIME,
    FULL_RATE,
    NAME,
    CvSettings,
    key,
)

PAPER = "Li, Xiong, Ohno-Machado & Jiang 2014"
# Their cross-validation is 10-fold, repeated this many times (section 5.1, Metrics).
PAPER_REPETITIONS = 10


def box_cell(stats: dict[str, float]) -> str:
    """mean ± s.d. [q1, median, q3] of a :func:`ppsvm.experiments.dp.stats.spread`, 3 decimals."""
    return f"{stats['mean']:.3f} ± {stats['std']:.3f} [{stats['q1']:.3f}, {stats['median']:.3f}, {stats['q3']:.3f}]"


def trend(p: dict[str, Any]) -> str:
    """A paired change (later minus earlier) as "rises (+0.100 ± 0.010, 4/4)": rises or falls beyond 2 standard
    errors, else no clear change (one repetition: the sign decides)."""
    word = {"beats": "rises", "loses": "falls", "tie": "no clear change"}[p["verdict"]]
    return word + with_error(p).removeprefix(p["verdict"])


def seconds_cell(stats: dict[str, float]) -> str:
    return f"{stats['median']:.2f} [{stats['q1']:.2f}, {stats['q3']:.2f}]"


def attributes_markdown(settings: CvSettings) -> str:
    """The attribute subsets: which Adult column stands in each of the paper's places, and from which
    dimensionality on."""
    rows = []
    for k, attribute in enumerate(ATTRIBUTES):
        tier = min(d for d in (5, 8, 11, 14) if cv.features(d) > k)
        encoding = "number" if not attribute.values else "1 if " + " or ".join(attribute.values) + ", else 0"
        if attribute.log:
            encoding = "log1p of the amount"
        rows.append(
            [
                str(tier),
                attribute.paper,
                f"{attribute.name} (column {attribute.column})",
                encoding,
                "substitute (Adult has no such attribute)" if attribute.substitute else "counterpart",
            ]
        )
    return markdown_table(
        ["from dimensionality", "paper's attribute", "Adult feature", "encoding", "kind"], rows, text=True
    )


def protocol_markdown(settings: CvSettings, checks: dict[str, Any], pool: int) -> str:
    """The paper's protocol (with its sections) beside what this run did."""
    s = settings
    n = CV_RECORDS - CV_RECORDS // s.folds
    positive = checks["positives"] / checks["records"]
    rows = [
        [
            "data",
            "IPUMS census extracts, US (370,000 records) and Brazil (190,000), 40,000 records taken from each (5.1)",
            f"UCI Adult (`{DATA_FILE}`, {checks['records']:,} records), one data set",
        ],
        [
            "label",
            "annual income above its median: balanced classes (5.1, Metrics)",
            f"income `>50K`: {positive:.1%} positive",
        ],
        [
            "private records / public pool",
            "30,000 / 10,000 (5.1)",
            f"{CV_RECORDS:,} / {pool:,} (the rest of Adult), per repetition from one seeded shuffle",
        ],
        [
            "cross-validation",
            "10-fold, repeated 10 times; the average reported (5.1, Metrics); 27,000 training and 3,000 test "
            "records per fold (Table 1)",
            f"{s.folds}-fold ({n:,} / {CV_RECORDS // s.folds:,}), {s.repetitions} repetition(s)"
            + ("" if s.folds_run == s.folds else f", the first {s.folds_run} folds of each")
            + f", seeds {s.seeds}"
            + ("; see Run for why not 10" if s.repetitions < PAPER_REPETITIONS else ""),
        ],
        [
            "private data holders",
            "one",
            f"{s.entities} simulated entities holding equal shares of the training records (as the Figure 3 part); "
            "the model is the record-weighted mean of their releases",
        ],
        [
            "public records",
            "20 for the hybrid model (Table 1), sampled uniformly from the pool (5.1); baselines Public-50, -100, "
            "-200 (5.1, Comparison)",
            f"{s.hybrid_public} for dp-hybrid and private-svm (scaling, kernel width, and rho for dp-hybrid); "
            "public-only with " + ", ".join(str(p) for p in s.public_sizes) + "; drawn per fold, uniformly without "
            "replacement, each set within the larger ones",
        ],
        ["epsilon", "1 (Table 1)", f"{key(s.epsilon)} per entity, the paper's Laplace mechanism"],
        [
            "dimensionality",
            "5, 8, 11, 14 over nested attribute subsets, the label counted (5.1)",
            ", ".join(str(d) for d in s.dimensions) + " (d - 1 attributes: table below), every training record",
        ],
        [
            "sampling rate",
            "0.1 to 1: random subsets of the training records (5.1, 5.4)",
            ", ".join(key(r) for r in s.rates)
            + f": a uniform draw without replacement, nested across rates, every attribute (d = "
            f"{s.sampling_dimension})",
        ],
        [
            "parameters",
            "set to their best values (5.1); C, the kernel width and D not given",
            f"C = {key(s.C)} in (1/2)||w||^2 + (C/n) sum hinge, the kernel width by the median heuristic on the "
            f"public records, D = {s.frequencies} (the Figure 3 part's headline); nothing tuned on private or test "
            "records",
        ],
        [
            "metric",
            "AUC; boxplots for the hybrid model and private SVM (5.1, Metrics)",
            f"AUC on each test fold; mean, s.d. and quartiles over the {s.repetitions * s.folds_run} splits; "
            "boxplots for dp-hybrid and private-svm",
        ],
        [
            "time",
            "Figure 9: the hybrid model's time against dimensionality and sampling rate; MATLAB R2010b on a "
            "3.2 GHz PC (5, 5.5)",
            f"seconds of every dp-hybrid fit: learning rho (L-BFGS-B, at most {MAX_FREQUENCY_ITERATIONS} "
            "iterations) and the whole fit through `ppsvm.DpHybridClassifier` (wall-clock and CPU)",
        ],
    ]
    return markdown_table(["", f"{PAPER} (section)", "here"], rows, text=True)


def dimension_markdown(summary: dict[str, Any], verdict: dict[str, Any], settings: CvSettings) -> str:
    """Figures 5 and 6: AUC per method and dimensionality, and dp-hybrid against private-svm."""
    dims = settings.dimensions
    names = [*CV_METHODS, *(cv.public_only_name(size) for size in settings.public_sizes)]
    labels = {
        **CV_METHODS,
        **{cv.public_only_name(p): f"Public-{p} (public-only RBF SVM)" for p in settings.public_sizes},
    }
    rows = [[labels[name], *(box_cell(summary["dimensions"][name][str(d)]) for d in dims)] for name in names]
    vrows = [
        [
            f"d={d}",
            with_error(verdict["dimensions"][str(d)]["hybrid_vs_private_svm"])
            + f", splits won {verdict['dimensions'][str(d)]['hybrid_vs_private_svm']['split_wins']}/"
            f"{verdict['dimensions'][str(d)]['hybrid_vs_private_svm']['splits']}",
            spread_pair(verdict["dimensions"][str(d)]),
        ]
        for d in dims
    ]
    return "\n".join(
        [
            f"## AUC against dimensionality (`{FIGURE_DIMENSIONS}`: counterpart of Figures 5 and 6)",
            "",
            "Test AUC over splits, every training record: mean ± s.d. [first quartile, median, third quartile]. "
            "d counts the label as the paper does (d - 1 attributes).",
            "",
            markdown_table(["method", *(f"d={d} ({cv.features(d)} attr.)" for d in dims)], rows),
            "",
            "dp-hybrid against private-svm: verdict on the per-repetition mean AUC difference (mean ± standard "
            "error, repetitions won), the splits won; the spread of each (s.d. / IQR over splits).",
            "",
            markdown_table(["dimensionality", "dp-hybrid vs private-svm", "s.d. / IQR: dp-hybrid; private-svm"], vrows),
        ]
    )


def spread_pair(entry: dict[str, Any]) -> str:
    std, iqr = entry["std"], entry["iqr"]
    return f"{std['dp-hybrid']:.3f} / {iqr['dp-hybrid']:.3f}; {std['private-svm']:.3f} / {iqr['private-svm']:.3f}"


def sampling_markdown(summary: dict[str, Any], verdict: dict[str, Any], settings: CvSettings) -> str:
    """Figures 7 and 8: AUC per sampling rate of dp-hybrid and private-svm, and their comparison."""
    rows = []
    for rate in settings.rates:
        k = key(rate)
        entry = verdict["sampling"][k]
        pair = entry["hybrid_vs_private_svm"]
        rows.append(
            [
                f"{k} ({summary['n_train'][k]:,} records)",
                box_cell(summary["sampling"][CV_HYBRID][k]),
                box_cell(summary["sampling"][CV_PRIVATE][k]),
                with_error(pair) + f", splits won {pair['split_wins']}/{pair['splits']}",
                spread_pair(entry),
            ]
        )
    d_all = settings.sampling_dimension
    public = "; ".join(
        f"Public-{p} {summary['dimensions'][cv.public_only_name(p)][str(d_all)]['mean']:.3f}"
        for p in settings.public_sizes
    )
    return "\n".join(
        [
            f"## AUC against the sampling rate (`{FIGURE_SAMPLING}`: counterpart of Figures 7 and 8)",
            "",
            f"Every attribute (d = {d_all}); test AUC over splits as above. Models that see no private record do not "
            f"depend on the rate (mean AUC: {public}); the non-private reference at rate 1: "
            f"{summary['dimensions'][CV_NON_PRIVATE][str(d_all)]['mean']:.3f}.",
            "",
            markdown_table(
                [
                    "sampling rate",
                    CV_METHODS[CV_HYBRID],
                    CV_METHODS[CV_PRIVATE],
                    "dp-hybrid vs private-svm",
                    "s.d. / IQR: dp-hybrid; private-svm",
                ],
                rows,
            ),
        ]
    )


def time_markdown(summary: dict[str, Any], settings: CvSettings) -> str:
    """Figure 9: seconds of dp-hybrid (rho, the whole fit) and private-svm's whole fit, per dimensionality and
    per sampling rate."""
    times = summary["time"]

    def row(label: str, study: str, x: str) -> list[str]:
        hybrid, private = times[study][CV_HYBRID][x], times[study][CV_PRIVATE][x]
        return [
            label,
            seconds_cell(hybrid["rho"]),
            f"{hybrid['rho_iterations']['median']:.0f}",
            seconds_cell(hybrid["fit_wall"]),
            seconds_cell(hybrid["fit_cpu"]),
            seconds_cell(private["fit_wall"]),
        ]

    rows = [row(f"d={d}, rate 1", "dimensions", str(d)) for d in settings.dimensions]
    rows += [row(f"rate {key(r)}, d={settings.sampling_dimension}", "sampling", key(r)) for r in settings.rates]
    return "\n".join(
        [
            f"## The hybrid model's time (`{FIGURE_TIME}`: counterpart of Figure 9)",
            "",
            "Seconds per fit, median [first quartile, third quartile] over splits. Learning rho is timed inside the "
            "coordinator's training (wall-clock); the whole fit is `DpHybridClassifier.fit`, which also writes the "
            "records of the simulated entities, starts them, maps and trains in each and releases the weights. "
            "private-svm draws rho instead of learning it.",
            "",
            markdown_table(
                [
                    "point",
                    "dp-hybrid: rho (wall)",
                    "L-BFGS iterations",
                    "dp-hybrid: fit (wall)",
                    "dp-hybrid: fit (CPU)",
                    "private-svm: fit (wall)",
                ],
                rows,
            ),
        ]
    )


def claims(summary: dict[str, Any], verdict: dict[str, Any], settings: CvSettings) -> list[str]:
    """The paper's claims of sections 5.2-5.5 that Figures 5-9 bear on, each with what this run measured."""
    dims, rates = settings.dimensions, settings.rates
    first, last = min(dims), max(dims)
    d_all = settings.sampling_dimension
    means = summary["dimensions"]

    def path(name: str) -> str:
        return " -> ".join(f"{means[name][str(d)]['mean']:.3f}" for d in dims)

    def monotone(name: str) -> bool:
        values = [means[name][str(d)]["mean"] for d in dims]
        return all(b > a for a, b in zip(values, values[1:], strict=False))

    growth = verdict["growth"]
    publics = [cv.public_only_name(p) for p in settings.public_sizes]
    grown = [p for p in publics if growth[p]["verdict"] == "beats"]
    lines = [
        f"- 5.3, Figures 5-6: dp-hybrid's AUC grows with dimensionality. From d={first} to d={last}: "
        f"{trend(growth[CV_HYBRID])}; means {path(CV_HYBRID)}{'' if monotone(CV_HYBRID) else ' (not at every step)'}.",
        f"- 5.3: the public-data baselines grow with dimensionality. From d={first} to d={last} they rise at "
        f"{len(grown)} of {len(publics)} sizes ("
        + "; ".join(f"Public-{p.split('/')[1]} {path(p)}" for p in publics)
        + ").",
    ]
    if "private_last_step" in verdict:
        step = verdict["private_last_step"]
        at = verdict["dimensions"]
        lines.append(
            f"- 5.3: private-svm degrades at d={step['to']} with wide boxplots. AUC from d={step['from']} to "
            f"d={step['to']}: {trend(step)}; IQR {at[str(step['from'])]['iqr']['private-svm']:.3f} -> "
            f"{at[str(step['to'])]['iqr']['private-svm']:.3f} (dp-hybrid "
            f"{at[str(step['from'])]['iqr']['dp-hybrid']:.3f} -> {at[str(step['to'])]['iqr']['dp-hybrid']:.3f})."
        )
    above = verdict["against_public"]
    larger = [p for p in publics if p != cv.public_only_name(settings.hybrid_public)]
    lines.append(
        f"- 5.2-5.3, Figures 3-6: dp-hybrid ({settings.hybrid_public} public records) stays above the public-data "
        f"baselines. At d={last}: "
        + "; ".join(f"against Public-{p.split('/')[1]} {with_error(above[p][str(last)]['dp-hybrid'])}" for p in larger)
        + "."
    )
    by_dim = [verdict["dimensions"][str(d)]["hybrid_vs_private_svm"]["verdict"] for d in dims]
    by_rate = [verdict["sampling"][key(r)]["hybrid_vs_private_svm"]["verdict"] for r in rates]
    lines.append(
        f"- 5.4, Figures 7-8: dp-hybrid beats private-svm at every sampling rate. Beats at {by_rate.count('beats')} "
        f"of {len(rates)} rates (ties {by_rate.count('tie')}, loses {by_rate.count('loses')}); at the "
        f"dimensionalities of Figures 5-6 it beats at {by_dim.count('beats')} of {len(dims)} (ties "
        f"{by_dim.count('tie')}, loses {by_dim.count('loses')})."
    )
    span = verdict["hybrid_rate_span"]
    hybrid_rates = summary["sampling"][CV_HYBRID]
    lines.append(
        f"- 5.4, Figures 7-8: dp-hybrid's AUC is high already at small rates and levels off as the rate grows. "
        f"From rate {key(max(rates))} down to {key(min(rates))}: {trend(span)}; means "
        + " -> ".join(f"{hybrid_rates[key(r)]['mean']:.3f}" for r in rates)
        + "."
    )
    wider = [
        x
        for study in ("dimensions", "sampling")
        for x, entry in verdict[study].items()
        if entry["std"]["private-svm"] > entry["std"]["dp-hybrid"]
    ]
    lines.append(
        f"- 5.4: private-svm varies more than dp-hybrid (its rho is random). Its s.d. over splits is the larger at "
        f"{len(wider)} of {len(dims) + len(rates)} points (dimensionalities and rates)."
    )
    t = summary["time"]
    rho_first = t["dimensions"][CV_HYBRID][str(first)]["rho"]["median"]
    rho_last = t["dimensions"][CV_HYBRID][str(last)]["rho"]["median"]
    fit_low = t["sampling"][CV_HYBRID][key(min(rates))]["fit_wall"]["median"]
    fit_high = t["sampling"][CV_HYBRID][key(max(rates))]["fit_wall"]["median"]
    rho_high = t["sampling"][CV_HYBRID][key(max(rates))]["rho"]["median"]
    lines.append(
        f"- 5.5, Figure 9: dimensionality, not the sampling rate, sets dp-hybrid's cost, and learning rho is its "
        f"overhead. Learning rho: {rho_first:.2f} s at d={first}, {rho_last:.2f} s at d={last} (medians); the whole "
        f"fit at d={d_all}: {fit_low:.2f} s at rate {key(min(rates))}, {fit_high:.2f} s at rate {key(max(rates))}, "
        f"of which rho {rho_high:.2f} s."
    )
    return lines


def differences(summary: dict[str, Any], verdict: dict[str, Any], settings: CvSettings, positive: float) -> list[str]:
    """Where Adult behaves otherwise than the paper's census extracts, and why, with this run's figures."""
    dims, rates = settings.dimensions, settings.rates
    first, last, d_all = min(dims), max(dims), settings.sampling_dimension
    means = summary["dimensions"]
    n_train = CV_RECORDS - CV_RECORDS // settings.folds
    n_entity = n_train // settings.entities
    class_mean = settings.C <= 1
    public_pairs = settings.hybrid_public * (settings.hybrid_public - 1) // 2
    steps = [
        ((a, b), means[CV_HYBRID][str(b)]["mean"] - means[CV_HYBRID][str(a)]["mean"])
        for a, b in zip(dims, dims[1:], strict=False)
    ]
    lines = [
        f"- **Labels.** The paper cuts income at its median, so its classes are balanced; Adult's `>50K` holds "
        f"{positive:.1%} of the records. AUC does not depend on the class shares, but the paper's cut at 0 does: "
        f"at d={last} dp-hybrid errs on {summary['error_at_zero'][str(last)]:.3f} of the test records against "
        f"{summary['majority_error']:.3f} for the majority class, so error rates would say little (the Figure 3 "
        "part adds a DP threshold for this).",
        "- **Attributes.** Six of the paper's 13 attributes (family size, dwelling ownership, automobiles, children, "
        "disability, years at the address) do not exist in Adult; their places hold workclass, occupation, "
        "relationship, race and the two capital amounts (table above), so the subsets are the paper's in size "
        "and order, not in content.",
    ]
    if steps:
        (before, big), gain = max(steps, key=lambda item: item[1])
        added = ", ".join(a.name for a in ATTRIBUTES[cv.features(before) : cv.features(big)])
        lines.append(
            f"- **Growth with dimensionality.** dp-hybrid gains most from d={before} to d={big} "
            f"({gain:+.3f} mean AUC), where {added} enter: the gains follow what each of Adult's attributes "
            "says about income, not the count of attributes."
        )
    noise = summary["noise_to_signal"]
    scale = laplace_scale(settings.C, settings.frequencies, n_entity, settings.epsilon)
    if "private_last_step" in verdict:
        step = verdict["private_last_step"]
        lines.append(
            f"- **private-svm at the largest dimensionality.** The paper sees it degrade at 14 and puts it down to "
            f"more noise in higher dimensions; here its AUC from d={step['from']} to d={step['to']}: {trend(step)}. "
            "The Laplace noise does not grow with the attributes: its scale, 2^2.5 C sqrt(D) / (n epsilon) = "
            f"{scale:.2e} per coordinate at n = {n_entity:,} per entity, involves D and n only, and the released "
            "weights' noise relative to the noiseless ones (dp-hybrid, same rho) is "
            + ", ".join(f"{noise[str(d)]['median']:.2f}" for d in dims)
            + f" for d = {', '.join(str(d) for d in dims)} (medians)."
        )
    pairs = [
        entry["hybrid_vs_private_svm"] for study in ("dimensions", "sampling") for entry in verdict[study].values()
    ]
    by_point = [pair["verdict"] for pair in pairs]
    if by_point.count("beats") < len(by_point):
        gap = float(np.mean([pair["mean_difference"] for pair in pairs]))
        reason = (
            f"At C = {key(settings.C)} every record violates the margin (||zhat|| = 1 bounds each margin by "
            "||w|| <= C), so both SVMs are the class-mean difference of the mapped records, a smooth function that "
            f"D = {settings.frequencies} random frequencies already approximate well: learning them on "
            f"{public_pairs} public pairs moves the AUC by {gap:+.3f} on average over the points."
            if class_mean
            else f"The mean AUC difference over the points is {gap:+.3f}."
        )
        lines.append(
            f"- **dp-hybrid against private-svm.** The paper's hybrid model wins everywhere; here dp-hybrid beats "
            f"private-svm at {by_point.count('beats')} of {len(by_point)} points (dimensionalities and rates), ties "
            f"at {by_point.count('tie')} and loses at {by_point.count('loses')}. {reason}"
        )
    wider = [
        entry
        for study in ("dimensions", "sampling")
        for entry in verdict[study].values()
        if entry["std"]["private-svm"] > entry["std"]["dp-hybrid"]
    ]
    at_last = verdict["dimensions"][str(last)]["std"]
    spreads = (
        f"private-svm's AUC varies more over the splits at {len(wider)} of {len(by_point)} points (s.d. "
        f"{at_last['private-svm']:.3f} against {at_last['dp-hybrid']:.3f} at d={last}), as the paper finds: its rho "
        "is a fresh random draw in every fold, dp-hybrid's is fitted to the kernel on the public pairs."
        if 2 * len(wider) > len(by_point)
        else f"private-svm's s.d. over the splits is the larger at only {len(wider)} of {len(by_point)} points: "
        "with the same noise scale for both, the random rho adds no visible spread."
    )
    lines.append(f"- **Stability.** The paper's boxplots show private SVM the less stable; here {spreads}")
    larger = [p for p in settings.public_sizes if p != settings.hybrid_public]
    above = verdict["against_public"]

    def against(p: int, who: str) -> dict[str, Any]:
        return above[cv.public_only_name(p)][str(last)][who]

    unbeaten = [p for p in larger if against(p, "dp-hybrid")["verdict"] != "beats"]
    if unbeaten:
        still = [p for p in unbeaten if against(p, "non-private")["verdict"] != "beats"]
        if still:
            model = f"C = {key(settings.C)} makes it the class-mean difference, and " if class_mean else ""
            cause = (
                "Without noise the same pipeline on all "
                f"{n_train:,} training records ({means[CV_NON_PRIVATE][str(last)]['mean']:.3f}) still does not beat "
                + ", ".join(f"Public-{p} ({with_error(against(p, 'non-private'))})" for p in still)
                + f": what holds dp-hybrid back there is its model, not its noise: {model}its scaling and width come "
                f"from {settings.hybrid_public} public records."
            )
        else:
            cause = (
                f"Without noise the same pipeline ({means[CV_NON_PRIVATE][str(last)]['mean']:.3f}) beats them, so "
                "the noise costs dp-hybrid the difference."
            )
        smallest_larger = min(larger)
        few = means[cv.public_only_name(smallest_larger)][str(last)]["mean"]
        lines.append(
            f"- **Public-only baselines.** The paper's hybrid model stays above Public-50 to -200; here at d={last} "
            f"dp-hybrid (mean AUC {means[CV_HYBRID][str(last)]['mean']:.3f}) does not beat "
            + ", ".join(
                f"Public-{p} ({means[cv.public_only_name(p)][str(last)]['mean']:.3f}: "
                f"{with_error(against(p, 'dp-hybrid'))})"
                for p in unbeaten
            )
            + f". {cause} On Adult {smallest_larger} public records already reach {few:.3f} with an exact RBF SVM, "
            f"{means[CV_NON_PRIVATE][str(last)]['mean'] - few:.3f} below what the noiseless pipeline learns from "
            f"{n_train:,} private records."
        )
    n_low = cv.sampled_count(n_train, min(rates)) // settings.entities
    n_high = cv.sampled_count(n_train, max(rates)) // settings.entities
    scale_low = laplace_scale(settings.C, settings.frequencies, n_low, settings.epsilon)
    scale_high = laplace_scale(settings.C, settings.frequencies, n_high, settings.epsilon)
    hybrid_rates = summary["sampling"][CV_HYBRID]
    extrapolated = (
        f" At C <= 1 the noiseless weights (the class-mean difference) do not shrink with n, so the noise-to-weights "
        f"ratio measured at rate 1 ({noise[str(d_all)]['median']:.2f}) grows to about "
        f"{noise[str(d_all)]['median'] * scale_low / scale_high:.1f} at rate {key(min(rates))}: the noise dominates "
        "there, which the paper's text does not report."
        if class_mean and str(d_all) in noise and max(rates) == FULL_RATE
        else ""
    )
    lines.append(
        f"- **Sampling rate.** At rate {key(min(rates))} each entity holds {n_low:,} records and the Laplace scale "
        f"is {scale_low / scale_high:.0f} times that at rate {key(max(rates))} ({scale_low:.2e} against "
        f"{scale_high:.2e}); dp-hybrid's mean AUC is {hybrid_rates[key(min(rates))]['mean']:.3f} ± "
        f"{hybrid_rates[key(min(rates))]['std']:.3f} there and {hybrid_rates[key(max(rates))]['mean']:.3f} ± "
        f"{hybrid_rates[key(max(rates))]['std']:.3f} at rate {key(max(rates))} (d = {d_all}).{extrapolated} The "
        f"mean of our {settings.entities} entities' releases also carries sqrt({settings.entities}) = "
        f"{settings.entities**0.5:.1f} times the noise of the paper's single holder of the same records."
    )
    t = summary["time"]["dimensions"][CV_HYBRID]
    rho_first, rho_last = t[str(first)]["rho"]["median"], t[str(last)]["rho"]["median"]
    iterations = {t[str(d)]["rho_iterations"]["median"] for d in dims}
    capped = iterations == {float(MAX_FREQUENCY_ITERATIONS)}
    times = f"{rho_first:.2f} s at d={first}, {rho_last:.2f} s at d={last}"
    if rho_last < 1.25 * rho_first:
        why = (
            f"each L-BFGS-B iteration evaluates {public_pairs} pairs x {settings.frequencies} cosines, whose arguments "
            f"cost d multiplications each, so at d <= {cv.features(last)} the cosines dominate"
            + (
                f"; and the fit stops at its {MAX_FREQUENCY_ITERATIONS}-iteration cap at every d, so the "
                f"iterations cannot grow with the D x d unknowns as an uncapped run's may"
                if capped
                else ""
            )
        )
        dimension_text = f"barely moves with the dimensionality ({times}): {why}"
    else:
        dimension_text = f"grows with the dimensionality ({times})"
    sampling = summary["time"]["sampling"][CV_HYBRID]
    fit_low = sampling[key(min(rates))]["fit_wall"]["median"]
    fit_high = sampling[key(max(rates))]["fit_wall"]["median"]
    lines.append(
        f"- **Time.** Learning rho uses the {settings.hybrid_public} public records only, so it does not depend on "
        f"the sampling rate; it {dimension_text}. The whole fit grows with the rate here ({fit_low:.2f} s to "
        f"{fit_high:.2f} s) because ppsvm's simulation writes, reads and maps every record of each entity as a real "
        "deployment would; the paper's MATLAB run had no such step. Timings are wall-clock on a shared 2-core "
        "machine (load in Run)."
    )
    return lines


def cv_markdown(
    summary: dict[str, Any],
    verdict: dict[str, Any],
    settings: CvSettings,
    checks: dict[str, Any],
    pool: int,
    seconds: dict[str, Any],
    rerun: str,
) -> str:
    """dp-figures5-9.md: what is reproduced, the protocol, the attributes, the tables, the claims, the differences,
    the diagnostics and the run."""
    s = settings
    splits = s.repetitions * s.folds_run
    mode = (
        f"a quick run (`--quick`): {s.repetitions} repetition, {s.folds_run} of the {s.folds} folds, "
        f"dimensionalities {', '.join(str(d) for d in s.dimensions)}, rates {', '.join(key(r) for r in s.rates)}"
        if s.quick
        else "a full run"
    )
    per_repetition = seconds["cv"] / s.repetitions * s.folds / s.folds_run
    n_train = CV_RECORDS - CV_RECORDS // s.folds
    lines = [
        f"# UCI Adult: AUC against dimensionality and sampling rate, and the hybrid model's time ({PAPER}, "
        "Figures 5-9)",
        "",
        "The paper's sections 5.3-5.5 vary the census data's dimensionality (Figures 5 and 6, US and Brazil) and the "
        "share of training records used (Figures 7 and 8), each with boxplots of the hybrid model and of private SVM, "
        f"and time the hybrid model against both (Figure 9). This is {mode}; every model is fitted with "
        "`ppsvm.DpHybridClassifier` (simulated entities with their release guard; the noise from the operating "
        "system's generator, as in production). The paper's figures are images not in the text we have, so this "
        "report compares with the claims its text makes.",
        "",
        f"- `{FIGURE_DIMENSIONS}`: counterpart of Figures 5 and 6: (a) mean AUC against dimensionality, (b) boxplot "
        "of dp-hybrid, (c) boxplot of private-svm.",
        f"- `{FIGURE_SAMPLING}`: counterpart of Figures 7 and 8: the same against the sampling rate.",
        f"- `{FIGURE_TIME}`: counterpart of Figure 9: seconds against (a) dimensionality and (b) sampling rate.",
        "",
        "## Protocol",
        "",
        protocol_markdown(s, checks, pool),
        "",
        "Per repetition r (seed = "
        f"{s.seed} + r): one shuffle (`np.random.default_rng([seed, 1])`, the Figure 3 part's split stream) puts the "
        f"first {CV_RECORDS:,} records into {s.folds} consecutive folds and the rest into the public pool; per fold "
        "a seeded permutation of the pool gives the public sets (prefixes) and one of the training records the "
        "subsamples (prefixes). Every fit of a fold shares the estimator's `random_state` (row blocks and rho), "
        "so paired comparisons differ only in what they compare. Verdicts pair the per-repetition means "
        "(the folds of one repetition share most training records): *beats* / *loses* beyond 2 standard errors, "
        "else *tie*; with one repetition the sign decides.",
        "",
        "## Attributes of growing dimensionality",
        "",
        "The paper's subsets (5.1) are nested and grow in a fixed order; its dimensionality counts the label "
        "(annual income), so d = 5, 8, 11, 14 means 4, 7, 10, 13 attributes. Here each place takes Adult's "
        "counterpart where there is one; each attribute Adult lacks takes the next Adult attribute no other place "
        "uses, in the file's column order (fnlwgt, a sampling weight, excluded). Categorical attributes become one "
        "0/1 column each, as the paper's marital status became is-single and is-married; a '?' counts as 0 "
        f"(workclass {checks['question_marks_by_column_all'].get('1', 0):,}, occupation "
        f"{checks['question_marks_by_column_all'].get('6', 0):,}, native-country "
        f"{checks['question_marks_by_column_all'].get('13', 0):,} records). No record is dropped.",
        "",
        attributes_markdown(s),
        "",
        dimension_markdown(summary, verdict, s),
        "",
        sampling_markdown(summary, verdict, s),
        "",
        time_markdown(summary, s),
        "",
        "## The paper's claims on Adult",
        "",
        *claims(summary, verdict, s),
        "",
        "## Where Adult differs from the census extracts, and why",
        "",
        *differences(summary, verdict, s, checks["positives"] / checks["records"]),
        "",
        "## Diagnostics",
        "",
        "- ||released - noiseless|| / ||noiseless|| of dp-hybrid's weights at rate 1 (same rho; the "
        f"{s.entities} entities' mean noise), median [quartiles] over splits: "
        + "; ".join(f"d={d}: {seconds_cell(summary['noise_to_signal'][str(d)])}" for d in s.dimensions)
        + ".",
        f"- Laplace scale per coordinate at epsilon {key(s.epsilon)}, C = {key(s.C)}, D = {s.frequencies}: "
        + ", ".join(
            f"rate {key(r)} (n = {n:,} per entity): {laplace_scale(s.C, s.frequencies, n, s.epsilon):.2e}"
            for r, n in ((r, cv.sampled_count(n_train, r) // s.entities) for r in s.rates)
        )
        + ".",
        f"- Test records labelled `>50K`: {summary['test_positive_rate']:.3f} on average over the test folds.",
        "",
        "## Run",
        "",
        f"Wall clock: {seconds['cv']:.0f} s for {splits} splits ({seconds['cv'] / splits:.0f} s per split, "
        f"{per_repetition / 60:.1f} min per repetition of {s.folds} folds); load average at start "
        f"{seconds['load_average']['start']}, at end {seconds['load_average']['end']} (other jobs may share the "
        "machine)."
        + (
            ""
            if s.quick
            else " This run does the paper's 10 repetitions."
            if s.repetitions >= PAPER_REPETITIONS
            else f" The paper's 10 repetitions would take about {10 * per_repetition / 60:.0f} min here; this "
            f"part's budget is 40 minutes, so the full run does {s.repetitions} (`--cv-repetitions 10` runs the "
            "paper's protocol)."
        ),
        "",
        f"Rerun: `{rerun}` (add `--out DIR`). AUCs of models without noise (the non-private reference and "
        "public-only) repeat exactly; the others move within their spread, the noise being drawn afresh.",
        "",
        report.versions_markdown(),
        "",
    ]
    return "\n".join(lines)


def cv_claims_markdown(summary: dict[str, Any], verdict: dict[str, Any], settings: CvSettings) -> str:
    """What ``ppsvm reproduce dp`` prints for this part: the claims, one line each."""
    return "\n".join([f"## The paper's claims, Figures 5-9 ({NAME})", "", *claims(summary, verdict, settings)])
