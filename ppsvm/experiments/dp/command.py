"""``ppsvm reproduce dp`` as a command: its options, the run from data to files, and what it prints."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path

from ppsvm.core.dp import DEFAULT_HUBER_H, DEFAULT_N_FREQUENCIES
from ppsvm.core.fourier import MAX_FREQUENCY_ITERATIONS, MAX_FREQUENCY_PAIRS
from ppsvm.core.linear_svm import DEFAULT_C
from ppsvm.core.threshold import DEFAULT_THRESHOLD_EPSILON
from ppsvm.errors import DataError
from ppsvm.experiments import report
from ppsvm.experiments.adult import ADULT_FILE, DATA_FILE, load_adult
from ppsvm.experiments.dp.figures import figure_auc, figure_rho_time
from ppsvm.experiments.dp.report import claims_markdown, markdown, setting_markdown
from ppsvm.experiments.dp.runs import Fit, plan, rho_timing, run_repetition
from ppsvm.experiments.dp.setting import (
    CLOSE_AUC,
    DIAGNOSTIC_PAIRS,
    DIAGNOSTIC_POOL_ROWS,
    FIGURE_AUC,
    FIGURE_RHO_TIME,
    FULL,
    HYBRID_PUBLIC,
    N_ENTITIES,
    N_PRIVATE,
    N_TEST,
    NAME,
    QUICK,
    SINGLE_ABOVE_S,
    DpReproduceOptions,
    key,
    resolve_settings,
)
from ppsvm.experiments.dp.stats import summarise, verdicts


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
    if options.threshold_epsilon != DEFAULT_THRESHOLD_EPSILON:
        parts.append(f"--threshold-epsilon {key(options.threshold_epsilon)}")
    return " ".join(parts)


def load_average() -> list[float]:
    """The 1, 5 and 15 minute load averages (empty where the platform has none)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


@contextlib.contextmanager
def quiet_fits() -> Iterator[None]:
    """Hold back what every fit logs unless debugging: ppsvm's INFO lines (they would interleave with the
    progress bar) and the simulated entities' NOT PRIVATE warnings, which the non-private baselines of this
    target raise by design (the report labels those rows)."""
    quieter = {"ppsvm": logging.WARNING, "ppsvm.entity.cell": logging.ERROR}
    levels = {name: logging.getLogger(name).level for name in quieter}
    if logging.getLogger("ppsvm").getEffectiveLevel() > logging.DEBUG:
        for name, level in quieter.items():
            logging.getLogger(name).setLevel(level)
    try:
        yield
    finally:
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)


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
    adult = load_adult(ADULT_FILE, log_capital=settings.log_capital)
    needed = N_PRIVATE + N_TEST + max(settings.public_sizes)
    if len(adult.y) <= needed:
        raise DataError(f"{ADULT_FILE}: {len(adult.y):,} records, fewer than the {needed:,} the split needs")
    pool = len(adult.y) - N_PRIVATE - N_TEST
    fits = len(plan(settings))
    timing_points = len(settings.timing_public) * len(settings.timing_frequencies)
    progress = report.Progress(settings.repetitions * fits + timing_points, NAME, enabled=not options.no_progress)
    load_start = load_average()

    with quiet_fits():
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
    rerun = rerun_command(options)
    setting_text = setting_markdown(settings, adult.names, adult.checks, pool)
    text = markdown(summary, verdict, timing, reps, settings, setting_text, seconds, rerun)
    pictures = {FIGURE_AUC: report.png(figure_auc(summary, settings))}
    if timing:
        pictures[FIGURE_RHO_TIME] = report.png(figure_rho_time(timing, settings))
    payload = {
        "target": NAME,
        "reproduces": "Li, Xiong, Ohno-Machado & Jiang 2014, Figures 3 and 4 (our reading) on UCI Adult",
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
    """``ppsvm reproduce dp``: parse, run, print the paper's claims and the files written."""
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
        threshold_epsilon=args.threshold_epsilon,
    )
    paths = run(options)
    document = json.loads(paths[1].read_text(encoding="utf-8"))
    print(claims_markdown(document["verdicts"], resolve_settings(options)))
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
            "Every model is fitted with ppsvm.DpHybridClassifier, which simulates the entities in this process "
            "with the code and release guard of ppsvm's entities (no gRPC). The noise comes from the operating "
            "system's generator as in production, so a rerun repeats the figures without noise exactly and the "
            f"others within their spread. Writes {NAME}.md, {NAME}.json, {FIGURE_AUC} and {FIGURE_RHO_TIME}, "
            "and prints the paper's claims. The full run takes about 30 minutes on 2 idle cores."
        ),
    )
    report.add_common_arguments(
        parser,
        quick_help=(
            f"{QUICK.repetitions} repetitions, epsilon {' and '.join(key(e) for e in QUICK.epsilons)}, "
            "public-only 20 and 200, a 2 x 2 single-run rho timing grid (about 2 minutes)"
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
    parser.add_argument(
        "--threshold-epsilon",
        type=float,
        default=DEFAULT_THRESHOLD_EPSILON,
        help="epsilon each entity spends on the score histogram that chooses the decision threshold, on top of "
        "--epsilon (default %(default)s; 0: threshold 0, as the paper). Errors at threshold 0 are reported too",
    )
    parser.set_defaults(run=cmd)
