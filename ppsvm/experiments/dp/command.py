"""``ppsvm reproduce dp`` as a command: its options, the run of each part from data to files, and what it prints."""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import time
from pathlib import Path

from ppsvm.core.dp import DEFAULT_HUBER_H, DEFAULT_N_FREQUENCIES
from ppsvm.core.fourier import MAX_FREQUENCY_ITERATIONS, MAX_FREQUENCY_PAIRS
from ppsvm.core.linear_svm import DEFAULT_C
from ppsvm.core.threshold import DEFAULT_THRESHOLD_EPSILON
from ppsvm.errors import DataError
from ppsvm.experiments import report
from ppsvm.experiments.adult import (
    ADULT_FILE,
    ATTRIBUTES,
    DATA_FILE,
    PAPER_DIMENSIONS,
    Adult,
    load_adult,
    load_adult_attributes,
)
from ppsvm.experiments.dp.cv import CvFit, features, plan_cv, run_fold
from ppsvm.experiments.dp.cv_report import cv_claims_markdown, cv_markdown
from ppsvm.experiments.dp.figures import (
    figure_auc,
    figure_dimensions,
    figure_rho_time,
    figure_sampling,
    figure_time,
)
from ppsvm.experiments.dp.report import claims_markdown, markdown, setting_markdown
from ppsvm.experiments.dp.runs import Fit, plan, rho_timing, run_repetition
from ppsvm.experiments.dp.setting import (
    CLOSE_AUC,
    CV_NAME,
    CV_RECORDS,
    DIAGNOSTIC_PAIRS,
    DIAGNOSTIC_POOL_ROWS,
    FIGURE_AUC,
    FIGURE_DIMENSIONS,
    FIGURE_RHO_TIME,
    FIGURE_SAMPLING,
    FIGURE_TIME,
    FULL,
    FULL_CV,
    HYBRID_PUBLIC,
    N_ENTITIES,
    N_PRIVATE,
    N_TEST,
    NAME,
    PART_CV,
    PART_EPSILON,
    PARTS,
    QUICK,
    QUICK_CV,
    SINGLE_ABOVE_S,
    CvSettings,
    DpReproduceOptions,
    Settings,
    key,
    resolve_cv_settings,
    resolve_settings,
)
from ppsvm.experiments.dp.stats import summarise, summarise_cv, verdicts, verdicts_cv


def rerun_command(options: DpReproduceOptions) -> str:
    """The ``ppsvm reproduce dp`` command line that repeats this run (without --out and --no-progress)."""
    parts = ["ppsvm reproduce dp"]
    if options.quick:
        parts.append("--quick")
    if options.parts != PARTS:
        parts.append("--figures " + " ".join(options.parts))
    if options.repetitions is not None:
        parts.append(f"--repetitions {options.repetitions}")
    if options.cv_repetitions is not None:
        parts.append(f"--cv-repetitions {options.cv_repetitions}")
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
    if options.threshold_epsilon != DEFAULT_THRESHOLD_EPSILON:
        parts.append(f"--threshold-epsilon {key(options.threshold_epsilon)}")
    return " ".join(parts)


def load_average() -> list[float]:
    """The 1, 5 and 15 minute load averages (empty where the platform has none)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


# Held back unless debugging: ppsvm's INFO lines (they would interleave with the progress bar) and the simulated
# entities' NOT PRIVATE warnings, which the non-private baselines of this target raise by design (the report labels
# those rows).
QUIET = {"ppsvm": logging.WARNING, "ppsvm.entity.cell": logging.ERROR}


def run(options: DpReproduceOptions) -> list[Path]:
    """Run the parts of the reproduction ``options.parts`` names and write their files into ``options.out``.

    Figures 3-4: dp.md, dp.json, the AUC figure and (unless ``--no-timing``) the rho timing figure. Figures 5-9:
    dp-figures5-9.md and .json and the figures of dimensionality, sampling rate and time. Each part writes its
    files as soon as it ends; one progress bar covers both.

    Parameters
    ----------
    options : DpReproduceOptions

    Returns
    -------
    list of Path
        The files written, part by part.
    """
    report.require_matplotlib()
    settings = resolve_settings(options)
    cv_settings = resolve_cv_settings(options)
    adult = load_adult(ADULT_FILE, log_capital=settings.log_capital) if PART_EPSILON in options.parts else None
    attributes = load_adult_attributes(ADULT_FILE) if PART_CV in options.parts else None
    steps = 0
    if adult is not None:
        needed = N_PRIVATE + N_TEST + max(settings.public_sizes)
        if len(adult.y) <= needed:
            raise DataError(f"{ADULT_FILE}: {len(adult.y):,} records, fewer than the {needed:,} the split needs")
        timing_points = len(settings.timing_public) * len(settings.timing_frequencies)
        steps += settings.repetitions * len(plan(settings)) + timing_points
    if attributes is not None:
        needed = CV_RECORDS + max(cv_settings.public_sizes)
        if len(attributes.y) < needed:
            raise DataError(f"{ADULT_FILE}: {len(attributes.y):,} records, fewer than the {needed:,} the folds need")
        steps += cv_settings.repetitions * cv_settings.folds_run * len(plan_cv(cv_settings))
    progress = report.Progress(steps, NAME, enabled=not options.no_progress)
    rerun = rerun_command(options)
    paths: list[Path] = []
    with report.quiet_logs(QUIET):
        if adult is not None:
            paths += run_epsilon(options.out, adult, settings, progress, rerun)
        if attributes is not None:
            paths += run_cv(options.out, attributes, cv_settings, progress, rerun)
    return paths


def run_epsilon(out: Path, adult: Adult, settings: Settings, progress: report.Progress, rerun: str) -> list[Path]:
    """The Figures 3-4 part: AUC against epsilon over seeded splits, the time to learn rho; dp.md, dp.json and its
    figures written into ``out``."""
    pool = len(adult.y) - N_PRIVATE - N_TEST
    load_start = load_average()
    started = time.perf_counter()
    reps = []
    for r, seed in enumerate(settings.seeds):

        def fitted(fit: Fit, r: int = r) -> None:
            progress.advance(f"rep {r + 1}/{settings.repetitions}: {'/'.join(fit.path)}")

        reps.append(run_repetition(adult, seed, settings, fitted))
    reps_seconds = time.perf_counter() - started
    timing_started = time.perf_counter()
    timing = rho_timing(
        adult.X,
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
    setting_text = setting_markdown(settings, adult.names, adult.checks, pool)
    text = markdown(summary, verdict, timing, reps, settings, setting_text, seconds, rerun)
    pictures = {FIGURE_AUC: report.png(figure_auc(summary, settings))}
    if timing:
        pictures[FIGURE_RHO_TIME] = report.png(figure_rho_time(timing, settings))
    payload = {
        "target": NAME,
        "part": PART_EPSILON,
        "reproduces": "Li, Xiong, Ohno-Machado & Jiang 2014, Figures 3 and 4 (AUC against epsilon, section 5.2) on "
        "UCI Adult",
        "settings": {
            **dataclasses.asdict(settings),
            "seeds": settings.seeds,
            "data": {"file": DATA_FILE, "sha256": adult.sha256, "checks": adult.checks},
            "features": adult.names,
            "fnlwgt": "excluded (census sampling weight)",
            "split": {
                "private": N_PRIVATE,
                "entities": N_ENTITIES,
                "per_entity": N_PRIVATE // N_ENTITIES,
                "test": N_TEST,
                "public_pool": pool,
                "public_sets": "nested prefixes of the shuffled pool",
                "hybrid_public": HYBRID_PUBLIC,
                "cross_validation": f"one split per repetition: the last fold of {CV_NAME}'s cross-validation of the "
                "same seed (the paper: 10-fold cross-validation repeated 10 times)",
            },
            "fitted_with": "ppsvm.DpHybridClassifier (simulated entities with the release guard), random_state = "
            "the repetition's seed",
            "scaling_and_width": f"of the {HYBRID_PUBLIC} public records, for dp-hybrid and private-svm alike; "
            "public-only: of its own public set",
            "combine": "n_i-weighted mean of the entities' released weights (as ppsvm coordinator train)",
            "noise": "the operating system's generator, as in production (not seeded)",
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
            FIGURE_AUC: "test AUC vs epsilon (counterpart of the paper's Figures 3 and 4)",
            **(
                {FIGURE_RHO_TIME: "time to learn rho vs public records and D (our addition, not a paper figure)"}
                if timing
                else {}
            ),
        },
        "seconds": seconds,
        "rerun": rerun,
    }
    return report.write_results(out, NAME, text, payload, pictures)


def run_cv(out: Path, data: Adult, settings: CvSettings, progress: report.Progress, rerun: str) -> list[Path]:
    """The Figures 5-9 part: repeated 10-fold cross-validation over dimensionalities and sampling rates;
    dp-figures5-9.md, .json and its three figures written into ``out``."""
    load_start = load_average()
    started = time.perf_counter()
    splits = []
    for r, seed in enumerate(settings.seeds):
        for fold in range(settings.folds_run):

            def fitted(fit: CvFit, r: int = r, fold: int = fold) -> None:
                progress.advance(
                    f"cv rep {r + 1}/{settings.repetitions} fold {fold + 1}/{settings.folds_run}: {fit.name} "
                    f"d={fit.dimension} rate={key(fit.rate)}"
                )

            splits.append(run_fold(data, seed, fold, settings, fitted))
    elapsed = time.perf_counter() - started
    seconds = {"cv": elapsed, "total": elapsed, "load_average": {"start": load_start, "end": load_average()}}
    summary = summarise_cv(splits, settings)
    verdict = verdicts_cv(splits, settings)
    pool = len(data.y) - CV_RECORDS
    text = cv_markdown(summary, verdict, settings, data.checks, pool, seconds, rerun)
    pictures = {
        FIGURE_DIMENSIONS: report.png(figure_dimensions(summary, splits, settings)),
        FIGURE_SAMPLING: report.png(figure_sampling(summary, splits, settings)),
        FIGURE_TIME: report.png(figure_time(summary, settings)),
    }
    payload = {
        "target": NAME,
        "part": PART_CV,
        "reproduces": "Li, Xiong, Ohno-Machado & Jiang 2014, Figures 5-9 (AUC against dimensionality and sampling "
        "rate with boxplots, sections 5.3-5.4; time, section 5.5) on UCI Adult",
        "settings": {
            **dataclasses.asdict(settings),
            "seeds": settings.seeds,
            "data": {"file": DATA_FILE, "sha256": data.sha256, "checks": data.checks},
            "attributes": [
                {**dataclasses.asdict(a), "from_dimensionality": min(d for d in PAPER_DIMENSIONS if features(d) > k)}
                for k, a in enumerate(ATTRIBUTES)
            ],
            "dimensionality": "the paper's count, the label included: d uses the first d - 1 attributes",
            "split": {
                "cross_validated": CV_RECORDS,
                "public_pool": pool,
                "per_repetition": "one seeded shuffle (the Figure 3 part's split stream): the first "
                f"{CV_RECORDS:,} records in {settings.folds} consecutive folds, the rest the public pool",
                "public_sets": "per fold, prefixes of a seeded permutation of the pool (uniform, nested)",
                "sampling": "per fold, prefixes of a seeded permutation of the training records (uniform without "
                "replacement, nested across rates); count = round(rate * training records)",
                "entities": settings.entities,
            },
            "fitted_with": "ppsvm.DpHybridClassifier (simulated entities with the release guard), random_state = "
            "folds * seed + fold, shared by the fold's fits; width_factor 1 (median heuristic), threshold none",
            "noise": "the operating system's generator, as in production (not seeded)",
            "verdict_rule": "per-repetition mean paired AUC difference beyond 2 standard errors (one repetition: the "
            "sign)",
            "max_frequency_iterations": MAX_FREQUENCY_ITERATIONS,
        },
        "summary": summary,
        "verdicts": verdict,
        "splits": splits,
        "figures": {
            FIGURE_DIMENSIONS: "AUC vs dimensionality, boxplots of dp-hybrid and private-svm (counterpart of the "
            "paper's Figures 5 and 6)",
            FIGURE_SAMPLING: "AUC vs sampling rate, boxplots of dp-hybrid and private-svm (counterpart of the "
            "paper's Figures 7 and 8)",
            FIGURE_TIME: "dp-hybrid's time vs dimensionality and sampling rate (counterpart of the paper's Figure 9)",
        },
        "seconds": seconds,
        "rerun": rerun,
    }
    return report.write_results(out, CV_NAME, text, payload, pictures)


def cmd(args: argparse.Namespace) -> int:
    """``ppsvm reproduce dp``: parse, run, print the paper's claims and the files written."""
    options = DpReproduceOptions(
        out=args.out,
        quick=args.quick,
        no_progress=args.no_progress,
        parts=tuple(args.figures),
        repetitions=args.repetitions,
        cv_repetitions=args.cv_repetitions,
        epsilons=None if args.epsilon is None else tuple(args.epsilon),
        seed=args.seed,
        C=args.C,
        frequencies=args.frequencies,
        other_C=None if args.other_C is None else tuple(args.other_C),
        exact_rows=args.exact_rows,
        raw_capital=args.raw_capital,
        no_timing=args.no_timing,
        threshold_epsilon=args.threshold_epsilon,
    )
    paths = run(options)
    written = {path.name: path for path in paths}
    if f"{NAME}.json" in written:
        document = json.loads(written[f"{NAME}.json"].read_text(encoding="utf-8"))
        print(claims_markdown(document["verdicts"], resolve_settings(options)))
    if f"{CV_NAME}.json" in written:
        document = json.loads(written[f"{CV_NAME}.json"].read_text(encoding="utf-8"))
        print(cv_claims_markdown(document["summary"], document["verdicts"], resolve_cv_settings(options)))
    print("wrote: " + ", ".join(str(p) for p in paths))
    return 0


def add_parser(targets: argparse._SubParsersAction) -> None:
    """Add the ``dp`` target to ``ppsvm reproduce``."""
    summary = (
        "Li, Xiong, Ohno-Machado & Jiang 2014 on UCI Adult: Figures 3-4, AUC vs epsilon of the hybrid DP RBF SVM, "
        "private-svm, public-only and non-private SVMs; Figures 5-9, AUC vs dimensionality and vs sampling rate "
        "with boxplots, and the hybrid model's time, by repeated 10-fold cross-validation"
    )
    parser = targets.add_parser(
        NAME,
        help="Li, Xiong, Ohno-Machado & Jiang 2014 Figures 3-9: differentially private RBF SVMs on UCI Adult, "
        "AUC vs epsilon, dimensionality and sampling rate, and the time to learn rho",
        description=(
            f"{summary}. Runs on the shipped UCI Adult file ({DATA_FILE}). Figures 3-4: {N_PRIVATE:,} private "
            f"records over {N_ENTITIES} entities, {N_TEST:,} test records, public sets from the rest, repeated over "
            "seeded splits, with a table at other C values and the time to learn rho against public records and D; "
            f"writes {NAME}.md, {NAME}.json, {FIGURE_AUC} and {FIGURE_RHO_TIME}. Figures 5-9: {CV_RECORDS:,} "
            "records in 10 folds, public records from the rest, 13 Adult attributes in the paper's nested subsets; "
            f"writes {CV_NAME}.md, {CV_NAME}.json, {FIGURE_DIMENSIONS}, {FIGURE_SAMPLING} and {FIGURE_TIME}. "
            "Every model is fitted with ppsvm.DpHybridClassifier, which simulates the entities in this process "
            "with the code and release guard of ppsvm's entities (no gRPC). The noise comes from the operating "
            "system's generator as in production, so a rerun repeats the figures without noise exactly and the "
            "others within their spread. Prints the paper's claims. The full run takes about 25 minutes for "
            "Figures 3-4 and 40 for Figures 5-9 on 2 cores."
        ),
    )
    report.add_common_arguments(
        parser,
        quick_help=(
            f"Figures 3-4: {QUICK.repetitions} repetitions, epsilon {' and '.join(key(e) for e in QUICK.epsilons)}, "
            "public-only 20 and 200, a 2 x 2 single-run rho timing grid (about 2 minutes); Figures 5-9: "
            f"{QUICK_CV.folds_run} folds of {QUICK_CV.repetitions} repetition, dimensionalities "
            f"{' and '.join(str(d) for d in QUICK_CV.dimensions)}, rates "
            f"{' and '.join(key(r) for r in QUICK_CV.rates)} (under a minute)"
        ),
    )
    parser.add_argument(
        "--figures",
        nargs="+",
        choices=PARTS,
        default=list(PARTS),
        metavar="PART",
        help=f"the parts to run, by the paper's figures: {PART_EPSILON} (AUC vs epsilon) and/or {PART_CV} "
        "(AUC vs dimensionality and sampling rate, time) (default: both)",
    )
    parser.add_argument(
        "--repetitions",
        type=int,
        help=f"Figures 3-4: seeded repetitions (default {FULL.repetitions}; --quick {QUICK.repetitions})",
    )
    parser.add_argument(
        "--cv-repetitions",
        type=int,
        help=f"Figures 5-9: repetitions of the 10-fold cross-validation (default {FULL_CV.repetitions}, to fit "
        f"40 minutes on 2 cores; the paper's is 10; --quick {QUICK_CV.repetitions})",
    )
    parser.add_argument(
        "--epsilon",
        type=float,
        nargs="+",
        metavar="EPS",
        help="Figures 3-4: epsilon of each entity's release, one or more (Figures 5-9 use the paper's 1; default "
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
    parser.add_argument(
        "--no-timing",
        action="store_true",
        help="Figures 3-4: skip the time to learn rho against public records and D (and its figure)",
    )
    parser.add_argument(
        "--threshold-epsilon",
        type=float,
        default=DEFAULT_THRESHOLD_EPSILON,
        help="epsilon each entity spends on the score histogram that chooses the decision threshold, on top of "
        "--epsilon (default %(default)s; 0: threshold 0, as the paper). Errors at threshold 0 are reported too",
    )
    parser.set_defaults(run=cmd)
