"""dp.md, the Markdown report of ``ppsvm reproduce dp``: the setting with every open decision, the AUC and
error tables beside the trivial baselines, the paper's claims, the diagnostics and how to rerun."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

import numpy as np

from ppsvm.core.dp import DEFAULT_HUBER_H, l2_sensitivity, laplace_scale
from ppsvm.core.fourier import MAX_FREQUENCY_ITERATIONS, MAX_FREQUENCY_PAIRS
from ppsvm.experiments import report
from ppsvm.experiments.adult import DATA_FILE
from ppsvm.experiments.dp.setting import (
    CLOSE_AUC,
    CV_NAME,
    DIAGNOSTIC_PAIRS,
    EPSILON_METHODS,
    EXACT_RBF,
    FIGURE_AUC,
    FIGURE_RHO_TIME,
    HYBRID_LAPLACE,
    HYBRID_PUBLIC,
    N_ENTITIES,
    N_PRIVATE,
    N_TEST,
    NON_PRIVATE,
    PLAIN_METHODS,
    PRIVATE_LAPLACE,
    RANDOM_RHO,
    SINGLE_ABOVE_S,
    USEFUL_MECHANISMS,
    Settings,
    key,
)


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[str]], *, text: bool = False) -> str:
    """A Markdown pipe table: first column left-aligned, the others right-aligned (numbers), or every column
    left-aligned when ``text``.

    Raises
    ------
    ValueError
        A row has a different number of cells than ``headers``.
    """
    for row in rows:
        if len(row) != len(headers):
            raise ValueError(f"a row has {len(row)} cells, the header {len(headers)}: {list(row)}")
    others = ":---" if text else "---:"
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join([":---", *([others] * (len(headers) - 1))]) + "|"]
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
            f"- **Split**, per repetition r (seed = {s.seed} + r, {s.repetitions} repetitions, seeds {s.seeds}; the "
            "split is `np.random.default_rng([seed, purpose tag])`): shuffle; the first "
            f"{N_PRIVATE:,} records are private, which the estimator shuffles into {N_ENTITIES} simulated entities "
            f"({N_PRIVATE // N_ENTITIES:,} each); the next {N_TEST:,} are the test set; the remaining {pool:,} are "
            f"the public pool. Public sets are nested prefixes of the pool: "
            + " within ".join(str(n) for n in s.public_sizes)
            + f". The paper repeats 10-fold cross-validation 10 times (section 5.1); this part fits about 70 models "
            "per split, so it takes one split per repetition: the last fold of the cross-validation that "
            f"`{CV_NAME}.md` runs with the same seed.",
            "- **Public preprocessing**: dp-hybrid and private-svm both take the feature scaling (per-feature min and "
            "max) and the kernel width (median heuristic) from the same "
            f"{HYBRID_PUBLIC} public records; neither touches private data for them. dp-hybrid learns rho on those "
            f"records (L-BFGS-B, at most {MAX_FREQUENCY_ITERATIONS} iterations, at most {MAX_FREQUENCY_PAIRS:,} "
            "pairs); private-svm draws rho from the kernel's Fourier transform (Rubinstein et al.). "
            f"D = {s.frequencies} frequencies.",
            f"- **C = {s.C:g}** in the (C/n) * sum hinge convention (the paper gives no value: its section 5.1 "
            "only says each method's parameters were set to their best values). C is not tuned: tuning it on 20 "
            "public records would say nothing about a "
            f"{N_PRIVATE // N_ENTITIES:,}-record SVM, and tuning on the test set is not allowed. With ||zhat|| = 1, "
            "C <= 1 makes every record a margin violator (margins <= ||w|| <= C), so the SVM is exactly "
            "w = (C/n) sum_i y_i zhat(x_i). "
            + (
                f'The "other C" tables (C = {", ".join(key(c) for c in s.other_C)}) are a sensitivity on the test '
                "set, not used to choose anything."
                if s.other_C
                else ""
            ),
            "- **Every model is fitted with ppsvm's public estimator** `ppsvm.DpHybridClassifier` (`fit(X_private, "
            "y_private, X_public, y_public)`, `random_state` = the repetition's seed), which simulates the "
            "entities in this process with the code and the release guard of `ppsvm entity serve` and trains "
            "with that of `ppsvm coordinator train --method ...`: each entity maps its rows with zhat(scaled rows), "
            "trains the exact hinge-loss SVM without intercept and releases its weights through the mechanism, "
            "charged to its release log; the model is the record-count-weighted mean of the "
            f"{N_ENTITIES} releases (each is epsilon-DP for its own entity's records; the mean costs nothing more). "
            "One `random_state` per repetition gives every fit the same row blocks and rho, so paired comparisons "
            "differ only in what they compare.",
            "- **Mechanisms**: the paper's Laplace mechanism (Delta = 2^2.5 C sqrt(D) / n per coordinate) is the "
            "headline for dp-hybrid and private-svm; output-gamma and objective perturbation (Chaudhuri, Monteleoni "
            f"& Sarwate 2011; Huber h = {DEFAULT_HUBER_H:g}) for dp-hybrid are **our additions**. Every (method, "
            "mechanism, epsilon) is a separate experiment on the same records: budgets are not composed across them.",
            "- **Noise comes from the operating system's generator**, as in production, and is not seeded: a "
            "rerun repeats every figure without noise exactly and the noised ones within their spread.",
            "- **Non-private** (the solid line of the figure): the same pipeline with no noise (learned rho). Extra "
            "rows: the same with private-svm's random rho; one linear SVM on the pooled "
            f"{N_PRIVATE:,} mapped rows (learned rho)"
            + (
                f"; an exact RBF SVM (intercept as a constant feature) on a random subsample of {s.exact_rows:,} "
                "private records (the estimator's public-only method given them, so scaling and width come from the "
                "subsample)"
                if s.exact_rows
                else ""
            )
            + ".",
            "- **public-only**: an RBF SVM on "
            + " / ".join(str(n) for n in s.public_sizes)
            + " public records, each set with its own public scaling and width; no epsilon.",
            f"- **Figures**: AUC and error rate on the {N_TEST:,} test records, mean and standard deviation over "
            "repetitions, beside the trivial baselines (the majority class for everyone; a constant score, AUC 0.5).",
            "- **Decision threshold** (our addition; the paper's Fourier models have no intercept and cut at 0): "
            + (
                f"each entity also releases a histogram of the averaged model's scores on its training records per "
                f"class, with discrete Laplace noise, for epsilon {s.threshold_epsilon:g} on top of the weights' "
                "epsilon; the coordinator cuts where the summed histograms show the fewest training errors. The "
                "threshold moves no score, so the AUCs are those of the paper's models; the error table gives both "
                "cuts."
                if s.threshold_epsilon
                else "none (`--threshold-epsilon 0`): every model cuts at 0, as the paper's."
            ),
            "- **Verdicts** per epsilon: *beats* when the mean paired AUC difference (same repetition) is more than 2 "
            "standard errors above 0, *loses* when more than 2 below, else *tie* (one repetition: the sign decides); "
            f"*close* to non-private when dp-hybrid's mean AUC is at most {CLOSE_AUC} below it.",
            "- **Time to learn rho** (our addition): rho learned on repetition 0's public pool prefixes of "
            + ", ".join(str(n) for n in s.timing_public)
            + " records (each scaled by its own range, width by the "
            "median heuristic) for D in {" + ", ".join(str(d) for d in s.timing_frequencies) + "}; wall-clock "
            f"median of {s.timing_repeats} run(s) (1 run when a run exceeds {SINGLE_ABOVE_S:g} s)."
            if s.timing_public
            else "- **Time to learn rho**: skipped (`--no-timing`).",
        ]
    )


def majority_error(reps: list[dict[str, Any]]) -> float:
    """The mean test error of predicting the majority class for everyone (its test share, per repetition)."""
    return float(np.mean([min(r["test_positive_rate"], 1 - r["test_positive_rate"]) for r in reps]))


def error_markdown(summary: dict[str, Any], reps: list[dict[str, Any]], settings: Settings) -> str:
    """The test error table: each model at its chosen threshold and cut at 0, beside the trivial baselines."""
    epsilons = settings.epsilons

    def both(stats: dict[str, Any]) -> str:
        return f"{stats['error_rate']['mean']:.3f} / {stats['error_rate_at_zero']['mean']:.3f}"

    rows = [
        [label, *(both(summary["epsilon"][method][key(e)]) for e in epsilons)]
        for method, label in EPSILON_METHODS.items()
    ]
    rows += [
        [f"{label} [no eps]", *([both(summary["plain"][method])] * len(epsilons))]
        for method, label in PLAIN_METHODS.items()
        if method in summary["plain"]
    ]
    rows += [
        [f"public-only, {size} public [no eps]", *([both(summary["public_only"][str(size)])] * len(epsilons))]
        for size in settings.public_sizes
    ]
    majority = majority_error(reps)
    rows.append(["majority class for everyone (trivial baseline)", *([f"{majority:.3f}"] * len(epsilons))])
    return "\n".join(
        [
            f"## Test error rate (mean over {len(reps)} repetitions): at the chosen threshold / cut at 0 (the paper)",
            "",
            f"The trivial baselines: the majority class for everyone errs on {majority:.3f} of the test records; a "
            "constant score has AUC 0.500. A model at or near the first does not classify, whatever its AUC.",
            "",
            markdown_table(["method", *(f"eps={key(e)}" for e in epsilons)], rows),
        ]
    )


def useful_markdown(summary: dict[str, Any], reps: list[dict[str, Any]], settings: Settings) -> str:
    """The useful configuration: dp-hybrid with C from the noise rule, the width chosen on the public records and
    the threshold from the entities' histograms, test AUC and error per mechanism and epsilon, beside the trivial
    baseline."""
    useful = summary.get("useful", {})
    if not useful:
        return ""
    epsilons = settings.epsilons

    def both(stats: dict[str, Any]) -> str:
        return f"{stats['auc']['mean']:.3f} / {stats['error_rate']['mean']:.3f}"

    rows = [
        [f"dp-hybrid, {mechanism}", *(both(useful[f"dp-hybrid/{mechanism}"][key(e)]) for e in epsilons)]
        for mechanism in USEFUL_MECHANISMS
    ]
    rows.append(["non-private (same choices) [no eps]", *([both(useful[NON_PRIVATE])] * len(epsilons))])
    rows.append(["trivial baseline [no eps]", *([f"0.500 / {majority_error(reps):.3f}"] * len(epsilons))])
    chosen = [
        (fit["C"], fit["kernel_width"] / r["preprocessing"]["kernel_width"])
        for r in reps
        for mechanism in USEFUL_MECHANISMS
        for fit in r["useful"][f"dp-hybrid/{mechanism}"].values()
    ]
    counts: dict[str, int] = {}
    for C, factor in chosen:
        label = f"C = {C:g}, width x {factor:.3g}"
        counts[label] = counts.get(label, 0) + 1
    return "\n".join(
        [
            "## The useful configuration (our addition): C from public facts, width chosen on the public records, "
            "the threshold from the entities' histograms",
            "",
            f"Test AUC / error rate, mean over {len(reps)} repetitions. C: the largest of {{0.1, 1, 10, 100}} whose "
            "expected noise norm stays below half the bound sqrt(2C) on the weights (mechanism, epsilon, D and the "
            "entities' record count). The kernel width from {0.25, 1, 4} x the median heuristic, by "
            f"cross-validation on the {HYBRID_PUBLIC} public records with the release's noise simulated (the median "
            "width unless another wins by 0.02 AUC; no privacy cost). The threshold as in the table above.",
            "",
            markdown_table(["method", *(f"eps={key(e)}" for e in epsilons)], rows),
            "",
            "Chosen (fits over repetitions, mechanisms and epsilons): "
            + ", ".join(f"{label}: {n}" for label, n in sorted(counts.items(), key=lambda item: -item[1]))
            + ".",
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
        "SVM: the counterpart of the paper's Figures 3 (US) and 4 (Brazil), which plot AUC against epsilon from 0.5 "
        "to 4 (section 5.2).",
        f"- `{FIGURE_RHO_TIME}`: the time to learn rho against the number of public records and D; our addition "
        f"(the paper's time figure, Figure 9, is against dimensionality and sampling rate: `{CV_NAME}.md`)."
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
        error_markdown(summary, reps, s),
        "",
        useful_markdown(summary, reps, s),
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
                (RANDOM_RHO, "non-private (random rho)"),
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
            "## Time to learn rho against public records and D (our addition)",
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
    noise = reps[0]["diagnostics"]["noise_to_signal"][key(s.C)]
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
        f"- ||released model - exact model|| / ||exact model|| in repetition 0 (the {N_ENTITIES}-entity means, "
        f"dp-hybrid), C = {key(s.C)}: "
        + "; ".join(f"{m} " + ", ".join(f"eps={e}: {v:.2f}" for e, v in per.items()) for m, per in noise.items())
        + ".",
        f"- Laplace scale per coordinate at n = {n_entity:,}, C = {key(s.C)}, D = {s.frequencies}: "
        + ", ".join(f"eps={key(e)}: {laplace_scale(s.C, s.frequencies, n_entity, e):.2e}" for e in epsilons)
        + f"; output-gamma L2 sensitivity 2C/n + solver term = {l2_sensitivity(s.C, n_entity):.2e}.",
        "- Test error of the non-private model at the other C (chosen threshold / at 0): "
        + "; ".join(
            f"C={c}: {summary['other_C'][c][NON_PRIVATE]['error_rate']['mean']:.3f} / "
            f"{summary['other_C'][c][NON_PRIVATE]['error_rate_at_zero']['mean']:.3f}"
            for c in summary["other_C"]
        )
        + ".",
        "",
        "## Run",
        "",
        f"Wall clock: repetitions {seconds['repetitions']:.0f} s, rho timing {seconds['rho_timing']:.0f} s, total "
        f"{seconds['total']:.0f} s; load average at start {seconds['load_average']['start']}, at end "
        f"{seconds['load_average']['end']} (other jobs may share the machine). A rerun on the same machine repeats "
        "every figure without noise exactly (the noise is drawn from the operating system, as in production); "
        "another BLAS thread count moves the learned rho in its last digits and dp-hybrid's AUCs in the fourth or "
        "fifth decimal.",
        "",
        f"Rerun: `{rerun}` (add `--out DIR`).",
        "",
        report.versions_markdown(),
        "",
    ]
    return "\n".join(lines)
