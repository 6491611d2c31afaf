"""``ppsvm reproduce sinc``: Fung & Mangasarian section 4, the 2-D sinc function and its Figures 3-6.

Two entities, horizontal partition (2 row blocks x 1 column block, n = 2 features):
entity r0c0 owns points in the inner square [-1.5, 1.5]^2, entity r1c0 points in
the rest of [-3, 3]^2. The joint random-kernel regression is trained over real
gRPC entity servers (in this process, ``ppsvm.api.inprocess``) and
compared with each entity's model of its own points alone and with a pooled
reference, all evaluated on points from the whole square.

With n_j = 2, privacy rule 3 allows only mbar = 1, and one Gaussian bump cannot
follow the sinc surface. The paper's setting (many random points) needs the
entity-side override ``non_private_allow_mbar_at_least_features``; runs with
mbar >= 2 are NOT PRIVATE and are labelled so everywhere.

The surfaces of the figures are evaluated on a regular plotting grid over
[-3, 3]^2. For the joint model those grid points are new points held out at the
entity owning their region, so their kernel rows come from the entities like
any other record's: the coordinator never computes a kernel itself.

This module is the command (its options, the run, the parser); the problem is in
:mod:`~ppsvm.experiments.sinc.problem`, the three models in :mod:`~ppsvm.experiments.sinc.models`
and the figures and Markdown in :mod:`~ppsvm.experiments.sinc.report`.
"""

from __future__ import annotations

import argparse
import math
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ppsvm.config import NON_PRIVATE_OVERRIDE_KEY
from ppsvm.constants import DEFAULT_FOLDS, MU_GRID_TIMES_N
from ppsvm.core.lp import DEFAULT_FORMULATION
from ppsvm.core.tuning import search_grid
from ppsvm.errors import ConfigError
from ppsvm.experiments.report import (
    DEFAULT_OUT,
    Progress,
    add_common_arguments,
    parse_list,
    print_summary,
    require_matplotlib,
    write_results,
)
from ppsvm.experiments.sinc.models import alone_run, joint_run, reference_run
from ppsvm.experiments.sinc.problem import (
    ALONE_BASIS_FRACTION,
    ENTITIES,
    FUNCTION,
    HALF_WIDTH,
    MBARS,
    N_FEATURES,
    NAME,
    PAPER,
    PLOT_STEPS,
    POINTS_PER_ENTITY,
    QUICK_MBARS,
    QUICK_PLOT_STEPS,
    QUICK_POINTS_PER_ENTITY,
    REGIONS,
    SPLIT_SEED,
    TEST,
    TEST_SEED,
    TRAIN,
    TRAIN_SEED,
    TUNE_SEED,
    build_data,
)
from ppsvm.experiments.sinc.report import draw_figures, markdown


@dataclass(frozen=True)
class SincOptions:
    """What to run; the defaults are the paper's setting.

    Attributes
    ----------
    quick : bool
        250 points per entity, mbar 50 only, a 31 x 31 plotting grid (for CI).
    mbar : tuple of int or None
        Random points of the joint model, one run each; None: (1, 100), or (50,) when quick.
        Values >= 2 need the entities' non-private override and are labelled NOT PRIVATE.
    extra_mu_times_n : tuple of float
        Gaussian widths (times 1/n, features scaled to [0, 1]) tried besides the default grid,
        each with nu tuned; the lowest cross-validated score on the model's own training data wins.
    alone_basis_fraction : float
        Fraction of its own rows an entity-alone model uses as kernel basis.
    """

    out: Path = DEFAULT_OUT
    quick: bool = False
    no_progress: bool = False
    mbar: tuple[int, ...] | None = None
    extra_mu_times_n: tuple[float, ...] = ()
    alone_basis_fraction: float = ALONE_BASIS_FRACTION

    def __post_init__(self) -> None:
        if self.mbar is not None:
            if not self.mbar or any(isinstance(m, bool) or not isinstance(m, int) or m < 1 for m in self.mbar):
                raise ConfigError(f"mbar must be whole numbers >= 1, got {list(self.mbar)}")
            if len(set(self.mbar)) != len(self.mbar):
                raise ConfigError(f"mbar values must differ, got {list(self.mbar)}")
        if any(not (math.isfinite(t) and t > 0) for t in self.extra_mu_times_n):
            raise ConfigError(f"extra widths must be numbers > 0, got {list(self.extra_mu_times_n)}")
        if not 0 < self.alone_basis_fraction <= 1:
            raise ConfigError(f"alone basis fraction must be in (0, 1], got {self.alone_basis_fraction}")

    @property
    def mbars(self) -> tuple[int, ...]:
        """The mbar of each joint run, in order."""
        if self.mbar is not None:
            return self.mbar
        return QUICK_MBARS if self.quick else MBARS

    @property
    def points_per_entity(self) -> int:
        """Training points of each entity (as many fresh ones are held out)."""
        return QUICK_POINTS_PER_ENTITY if self.quick else POINTS_PER_ENTITY

    @property
    def plot_steps(self) -> int:
        """Points along each axis of the plotting grid."""
        return QUICK_PLOT_STEPS if self.quick else PLOT_STEPS


def run(options: SincOptions) -> list[Path]:
    """Run the reproduction; write sinc.md, sinc.json and sinc-figure3..6.png into ``options.out``.

    Returns
    -------
    list of Path
        The files written.
    """
    require_matplotlib()
    started = time.perf_counter()
    mbars = options.mbars
    progress = Progress(len(mbars) + 4, NAME, enabled=not options.no_progress)
    data = build_data(options.points_per_entity, options.plot_steps)
    mus_times_n: list[float | None] = [None, *options.extra_mu_times_n]
    mus = [None if t is None else t / N_FEATURES for t in mus_times_n]

    joint: list[dict[str, Any]] = []
    joint_surfaces: list[np.ndarray] = []
    reference: dict[str, Any] = {}
    work_root = Path(tempfile.mkdtemp(prefix="ppsvm-sinc-"))
    try:
        for mbar in mbars:
            work = work_root / f"mbar{mbar}"
            result, surface = joint_run(data, mbar, mus, work)
            joint.append(result)
            joint_surfaces.append(surface)
            progress.advance(
                f"mbar = {mbar}{'' if result['private'] else ' (NOT PRIVATE)'}: joint relative error "
                f"{result['joint_test_relative_error']:.3f}"
            )
            if not reference:
                reference = reference_run(data, work, mus)
                progress.advance(f"pooled reference: {reference['relative_error_test']:.3f}")
    finally:
        shutil.rmtree(work_root, ignore_errors=True)
    alone: list[dict[str, Any]] = []
    alone_surfaces: list[np.ndarray] = []
    for k in (0, 1):
        result, surface = alone_run(data, k, options.alone_basis_fraction, mus)
        alone.append(result)
        alone_surfaces.append(surface)
        progress.advance(f"entity {ENTITIES[k]} alone: {result['relative_error']['all_test_points']:.3f}")

    figures_started = time.perf_counter()
    # Figure 6 shows the joint model with the most random points: the paper's setting, as far as the runs go.
    shown = int(np.argmax(mbars))
    pictures, figures = draw_figures(data, joint[shown], joint_surfaces[shown], alone, alone_surfaces)
    progress.advance("figures")
    progress.advance("figures")

    settings = {
        "function": FUNCTION,
        "points": f"{data.mask(TRAIN, 0).sum()} uniform random points per entity (seed {TRAIN_SEED}) for training, "
        f"{data.mask(TEST, 0).sum()} + {data.mask(TEST, 1).sum()} fresh ones (seed {TEST_SEED}) held out; "
        "outer-frame points by rejection sampling",
        "points_per_entity": options.points_per_entity,
        "regions": dict(zip(ENTITIES, REGIONS, strict=True)),
        "mbar": list(mbars),
        "mu_candidates_times_n": ["coordinator grid", *options.extra_mu_times_n],
        "alone_basis_fraction": options.alone_basis_fraction,
        "train_options": "TrainOptions(task='regress', kernel='gaussian', mbar=<each>, nu=None, "
        f"mu=None{' and then each extra width' if options.extra_mu_times_n else ''}, "
        f"folds={DEFAULT_FOLDS}, seed={TUNE_SEED}, formulation={DEFAULT_FORMULATION!r}, distribute=False, "
        "basis='paper')",
        "grid_source": "ppsvm.core.tuning.search_grid('regress', 'gaussian', n, None, None)",
        "nu_grid": list(search_grid("regress", "gaussian", N_FEATURES, None, None)[0]),
        "mu_grid_times_n": list(MU_GRID_TIMES_N),
        "plot_grid": {
            "steps": options.plot_steps,
            "range": [-HALF_WIDTH, HALF_WIDTH],
            "held_by": "each grid point is a held-out record of the entity owning its region; the joint "
            "model's surface is assembled from their kernel rows",
        },
        "override": f"[privacy] {NON_PRIVATE_OVERRIDE_KEY} = true appended to both entity configs when mbar >= 2",
        "secrets": f"column-block secret sha256('ppsvm-benchmark/{NAME}/0'), the same B for every run "
        "(reproducible; real deployments use random secrets)",
        "seeds": {"train_points": TRAIN_SEED, "test_points": TEST_SEED, "split": SPLIT_SEED, "tuning": TUNE_SEED},
        "transport": "ppsvm.entity.server.start_entity in this process, gRPC with mutual TLS over 127.0.0.1",
        "paper": PAPER,
        "quick": options.quick,
    }
    text = markdown(joint, alone, reference, figures, settings)
    payload = {
        "settings": settings,
        "joint": joint,
        "alone": alone,
        "reference": reference,
        "figures": figures,
        "seconds": {"figures": time.perf_counter() - figures_started, "total": time.perf_counter() - started},
    }
    return write_results(options.out, NAME, text, payload, pictures)


def add_parser(targets: argparse._SubParsersAction) -> None:
    """Add the ``sinc`` target to ``ppsvm reproduce``."""
    parser = targets.add_parser(
        "sinc",
        help="Fung & Mangasarian section 4 and Figures 3-6: 2-D sinc, joint random kernel vs each entity alone",
        description=(
            "Fung & Mangasarian, section 4: approximate f(x1,x2) = sinc(x1) sinc(x2) on [-3,3]^2, entity r0c0 "
            "owning 1000 points in the inner square [-1.5,1.5]^2 and entity r1c0 1000 in the rest, with the joint "
            "random-kernel regression over real gRPC entity servers, each entity alone and a pooled reference; "
            "relative errors beside the paper's (0.01 joint, 5.01 and 1.05 alone) and surface plots of the true "
            "function, each entity alone and the joint model (the paper's Figures 3-6). With n_j = 2 features, "
            "privacy rule 3 (mbar < n_j) allows only mbar = 1: runs with mbar >= 2 set the entities' explicit "
            f"non-private override ({NON_PRIVATE_OVERRIDE_KEY}) and are labelled NOT PRIVATE, because with as many "
            "random points as features a record's kernel row pins the record down. The full run takes about "
            "6 minutes on 2 cores (the pooled reference's tuning is half of it)."
        ),
    )
    add_common_arguments(
        parser,
        quick_help=(
            f"CI-sized run: {QUICK_POINTS_PER_ENTITY} points per entity, mbar {','.join(map(str, QUICK_MBARS))} "
            f"(NOT PRIVATE), a {QUICK_PLOT_STEPS} x {QUICK_PLOT_STEPS} plotting grid (well under a minute)"
        ),
    )
    parser.add_argument(
        "--mbar",
        help=f"comma-separated mbar values, one joint model each (default "
        f"{','.join(map(str, MBARS))}; with --quick {','.join(map(str, QUICK_MBARS))}); "
        "values >= 2 are NOT PRIVATE",
    )
    parser.add_argument(
        "--extra-mu-times-n",
        default="",
        help="comma-separated Gaussian widths (times 1/n, features scaled to [0, 1]) tried besides "
        f"the default grid (which ends at {max(MU_GRID_TIMES_N):g}/n), e.g. 1024,4096; the "
        "lowest cross-validated score on training data wins (default: the grid only)",
    )
    parser.add_argument(
        "--alone-basis-fraction",
        type=float,
        default=ALONE_BASIS_FRACTION,
        help="fraction of its own rows an entity-alone model uses as kernel basis (default "
        f"{ALONE_BASIS_FRACTION:g}: 100 rows, the size of the joint model's mbar = 100)",
    )
    parser.set_defaults(run=cmd)


def cmd(args: argparse.Namespace) -> int:
    """Build :class:`SincOptions` from the command line, run, print where the report and the files are."""
    options = SincOptions(
        out=args.out,
        quick=args.quick,
        no_progress=args.no_progress,
        mbar=parse_list(int, args.mbar, "--mbar") if args.mbar is not None else None,
        extra_mu_times_n=parse_list(float, args.extra_mu_times_n, "--extra-mu-times-n"),
        alone_basis_fraction=args.alone_basis_fraction,
    )
    paths = run(options)
    print_summary(paths)
    return 0
