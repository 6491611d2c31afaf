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
"""

from __future__ import annotations

import argparse
import math
import shutil
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ppsvm.api.inprocess import fixed_secret, serve_split, set_secrets
from ppsvm.config import NON_PRIVATE_OVERRIDE_KEY
from ppsvm.constants import DEFAULT_FOLDS, MU_GRID_TIMES_N, REFERENCE_ROW_FRACTION
from ppsvm.coordinator.evaluate import assembled_decisions
from ppsvm.coordinator.reference import pool_cells
from ppsvm.coordinator.train import TrainOptions, train
from ppsvm.core.local_svm import LocalModel, fit_local
from ppsvm.core.metrics import relative_error
from ppsvm.core.model import Model
from ppsvm.core.privacy import NOT_PRIVATE_BANNER
from ppsvm.core.tuning import search_grid
from ppsvm.data.dataset import Dataset
from ppsvm.data.partition import SplitOptions, split_dataset
from ppsvm.errors import ConfigError
from ppsvm.experiments.report import (
    DEFAULT_OUT,
    Progress,
    add_common_arguments,
    parse_list,
    png,
    require_matplotlib,
    versions_markdown,
    write_results,
)

NAME = "sinc"
# Fung & Mangasarian, section 4: relative error of the joint model and of each entity alone.
PAPER = {"joint": 0.01, "alone_inner": 5.01, "alone_outer": 1.05}
HALF_WIDTH = 3.0
INNER_HALF_WIDTH = 1.5
N_FEATURES = 2
POINTS_PER_ENTITY = 1000
MBARS = (1, 100)
# The plotting grid: PLOT_STEPS x PLOT_STEPS points over [-3, 3]^2 (spacing 0.1).
PLOT_STEPS = 61
# The quick run (part of the test suite): fewer points, one (not private) mbar, a coarser plotting grid.
# It must still show the paper's claim, the joint model beating each entity alone: at 250 points and
# mbar = 50 it does by a wide margin (0.13 vs 0.46 and 0.99); mbar = 30 at 300 points did not (0.30 vs 0.18).
QUICK_POINTS_PER_ENTITY = 250
QUICK_MBARS = (50,)
QUICK_PLOT_STEPS = 31
# An entity alone uses 10% of its own rows as kernel basis: 100 rows at 1000 points, the size of the
# joint model's mbar = 100 (the full 1000-row kernel costs about 17 s per LP here, hours with tuning).
ALONE_BASIS_FRACTION = 0.1
TRAIN_SEED = 0  # training points
TEST_SEED = 1  # fresh held-out points
SPLIT_SEED = 0
TUNE_SEED = 0
ENTITIES = ("r0c0", "r1c0")
REGIONS = ("inner square [-1.5,1.5]^2", "outer frame [-3,3]^2 minus inner square")
# Record ids are "<kind>-<index>"; grid indices are row-major positions on the plotting grid.
TRAIN, TEST, GRID = "train", "test", "grid"
FUNCTION = (
    "f(x1,x2) = sinc(x1) sinc(x2), sinc(t) = sin(pi t)/(pi t) (product form; the paper's exact "
    "definition was not available to check)"
)
# Our reading of the paper's Figures 3-6 (the paper is not in this repository).
FIGURES = {
    3: "the true function f on [-3,3]^2",
    4: f"the approximation by entity 1 ({ENTITIES[0]}, {REGIONS[0]}) alone",
    5: f"the approximation by entity 2 ({ENTITIES[1]}, {REGIONS[1]}) alone",
    6: "the joint random-kernel approximation, the paper's privacy-preserving model",
}


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


@dataclass(frozen=True)
class SincData:
    """The records the entities hold: training points, fresh points, plotting-grid points.

    Attributes
    ----------
    dataset : Dataset
        ids "train-k", "test-k", "grid-k"; X (m, 2); y = f(X), shape (m,).
    kind : ndarray of str, shape (m,)
        TRAIN, TEST or GRID per record.
    region : ndarray of int, shape (m,)
        0 inner square (entity r0c0), 1 outer frame (entity r1c0).
    axis : ndarray, shape (steps,)
        Coordinates of the plotting grid along each axis; grid point k is (axis[k % steps], axis[k // steps]).
    """

    dataset: Dataset
    kind: np.ndarray
    region: np.ndarray
    axis: np.ndarray

    def mask(self, kind: str, region: int | None = None) -> np.ndarray:
        """Boolean mask (m,) of the records of ``kind`` (and ``region``, if given)."""
        chosen = self.kind == kind
        return chosen if region is None else chosen & (self.region == region)


def sinc_2d(X: np.ndarray) -> np.ndarray:
    """Product form f(x1, x2) = sinc(x1) sinc(x2), sinc(t) = sin(pi t) / (pi t).

    Parameters
    ----------
    X : ndarray, shape (m, 2)

    Returns
    -------
    ndarray, shape (m,)
    """
    return np.sinc(X[:, 0]) * np.sinc(X[:, 1])


def region_of(X: np.ndarray) -> np.ndarray:
    """0 for points in the inner square (boundary included), 1 elsewhere; X (m, 2) -> (m,) of int."""
    return (np.abs(X).max(axis=1) > INNER_HALF_WIDTH).astype(np.int64)


def region_points(rng: np.random.Generator, count: int) -> tuple[np.ndarray, np.ndarray]:
    """``count`` uniform points in the inner square, then ``count`` in the outer frame (rejection sampling).

    Returns
    -------
    X : ndarray, shape (2 count, 2)
    region : ndarray of int, shape (2 count,)
        0 for the first ``count`` rows (inner), 1 for the rest (outer).
    """
    inner = rng.uniform(-INNER_HALF_WIDTH, INNER_HALF_WIDTH, size=(count, 2))
    outer = np.empty((0, 2))
    while len(outer) < count:
        candidates = rng.uniform(-HALF_WIDTH, HALF_WIDTH, size=(2 * count, 2))
        outer = np.vstack([outer, candidates[region_of(candidates) == 1]])
    return np.vstack([inner, outer[:count]]), np.repeat([0, 1], count)


def plot_grid(steps: int) -> tuple[np.ndarray, np.ndarray]:
    """A regular ``steps`` x ``steps`` grid over [-3, 3]^2, x1 varying fastest.

    Returns
    -------
    axis : ndarray, shape (steps,)
    points : ndarray, shape (steps * steps, 2)
        Row k is (axis[k % steps], axis[k // steps]), so values of shape (steps * steps,)
        reshape to (steps, steps) with rows along x2, as ``numpy.meshgrid(axis, axis)``.
    """
    axis = np.linspace(-HALF_WIDTH, HALF_WIDTH, steps)
    x1, x2 = np.meshgrid(axis, axis)
    return axis, np.column_stack([x1.ravel(), x2.ravel()])


def build_data(count: int, steps: int) -> SincData:
    """Training points (seed TRAIN_SEED), fresh points (seed TEST_SEED), then the plotting grid."""
    X_train, region_train = region_points(np.random.default_rng(TRAIN_SEED), count)
    X_test, region_test = region_points(np.random.default_rng(TEST_SEED), count)
    axis, X_grid = plot_grid(steps)
    parts = ((TRAIN, X_train, region_train), (TEST, X_test, region_test), (GRID, X_grid, region_of(X_grid)))
    X = np.vstack([X for _, X, _ in parts])
    kind = np.concatenate([np.full(len(X), name) for name, X, _ in parts])
    ids = np.concatenate([[f"{name}-{k}" for k in range(len(X))] for name, X, _ in parts])
    dataset = Dataset(ids=ids, X=X, y=sinc_2d(X), feature_names=("x1", "x2"), source="synthetic 2-D sinc")
    return SincData(dataset, kind, np.concatenate([region for _, _, region in parts]), axis)


def grid_edge(value: float, grid: Iterable[float]) -> str | None:
    """ "low" or "high" when ``value`` is (to rounding) the smallest or largest of ``grid``, else None.

    A tuned value on the edge of the grid searched suggests the grid should extend further that way;
    a single value was not searched, so it has no edge.
    """
    values = [float(v) for v in grid]
    if len(values) < 2:
        return None
    if np.isclose(value, min(values), rtol=1e-9, atol=0.0):
        return "low"
    if np.isclose(value, max(values), rtol=1e-9, atol=0.0):
        return "high"
    return None


def searched_grid(mus: Sequence[float | None]) -> tuple[list[float], list[float]]:
    """(nu values, mu values) searched over all width candidates (None: search_grid's own widths)."""
    nu_values: set[float] = set()
    mu_values: set[float] = set()
    for mu in mus:
        nus, widths = search_grid("regress", "gaussian", N_FEATURES, None, mu)
        nu_values.update(nus)
        mu_values.update(widths)
    return sorted(nu_values), sorted(mu_values)


def edges(nu: float, mu: float, mus: Sequence[float | None]) -> dict[str, str | None]:
    """Which edge (low / high) of the grid searched the tuned nu and mu sit on (None: inside)."""
    nu_values, mu_values = searched_grid(mus)
    return {"nu": grid_edge(nu, nu_values), "mu": grid_edge(mu, mu_values)}


def edge_text(edge: dict[str, str | None]) -> str:
    """'nu low, mu high' for the tuned values on an edge of the grid searched; '—' when none is."""
    return ", ".join(f"{name} {side}" for name, side in edge.items() if side) or "—"


def best(scores: Sequence[float]) -> int:
    """Index of the lowest score; the first of equal scores, so reruns pick the same candidate."""
    return min(range(len(scores)), key=lambda k: (scores[k], k))


def _write_override(split_configs: Sequence[Path]) -> None:
    """Let the entities accept mbar >= n_j: the explicit, loudly named setting privacy rule 3 requires."""
    for path in split_configs:
        with path.open("a", encoding="utf-8") as handle:
            handle.write(f"\n[privacy]\n{NON_PRIVATE_OVERRIDE_KEY} = true\n")


def _of_kind(ids: np.ndarray, kind: str) -> np.ndarray:
    """Mask (k,) of the ids "<kind>-<index>"."""
    return np.char.startswith(ids.astype(str), f"{kind}-")


def _indices(ids: np.ndarray) -> np.ndarray:
    """The <index> of ids "<kind>-<index>" (for grid points, the position on the plotting grid); shape (k,)."""
    return np.array([int(i.split("-", 1)[1]) for i in ids.tolist()], dtype=np.int64)


def joint_run(data: SincData, mbar: int, mus: Sequence[float | None], work: Path) -> tuple[dict[str, Any], np.ndarray]:
    """Split by region, serve both entities over gRPC, train the joint model, evaluate it.

    ``mus``: Gaussian widths to try (None: the coordinator's own grid); nu is always tuned by the
    coordinator, and the width with the lowest coordinator inner-CV score (training data only) is kept.

    Returns
    -------
    result : dict
        Settings, tuned values and relative errors of the run (JSON-ready).
    surface : ndarray, shape (steps * steps,)
        The same model's decision values on the plotting grid.
    """
    private = mbar < N_FEATURES
    held_out = data.kind != TRAIN
    split = split_dataset(
        data.dataset,
        SplitOptions(rows=2, cols=1, out_dir=work, seed=SPLIT_SEED, task="regress", kernel="gaussian", overwrite=True),
        provenance={"synthetic": "2-D sinc", "points_per_entity": int(data.mask(TRAIN).sum() // 2)},
        held_out=held_out,
        row_blocks=data.region,
    )
    set_secrets(split, [fixed_secret(NAME, 0)])
    if not private:
        _write_override(split.entity_config_paths)
    seconds: dict[str, float] = {}
    with serve_split(split, work) as federation:
        started = time.perf_counter()
        candidates: list[tuple[float, Model]] = []
        for mu in mus:
            candidate = train(
                federation,
                TrainOptions(
                    task="regress", kernel="gaussian", mbar=mbar, nu=None, mu=mu, seed=TUNE_SEED, distribute=False
                ),
            )
            candidates.append((candidate.training["tuning"]["score"], candidate))
        chosen = best([score for score, _ in candidates])
        model = candidates[chosen][1]
        seconds["train"] = time.perf_counter() - started
        started = time.perf_counter()
        decisions = assembled_decisions(federation, model, ("train", "test"))
        seconds["evaluate"] = time.perf_counter() - started
    train_ids, train_targets, train_fitted = decisions["train"]
    held_ids, held_targets, held_fitted = decisions["test"]
    fresh, on_grid = _of_kind(held_ids, TEST), _of_kind(held_ids, GRID)
    surface = np.empty(int(on_grid.sum()))
    surface[_indices(held_ids[on_grid])] = held_fitted[on_grid]
    train_region = data.region[data.mask(TRAIN)][_indices(train_ids)]
    by_region = {
        REGIONS[k]: relative_error(train_targets[train_region == k], train_fitted[train_region == k]) for k in (0, 1)
    }
    tuning = model.training["tuning"]
    result = {
        "mbar": mbar,
        "private": model.private,
        "nu": model.nu,
        "mu": model.mu,
        "mu_candidates": ["coordinator grid" if m is None else m for m in mus],
        "candidate_scores": [{"mu": c.mu, "nu": c.nu, "inner_cv": score} for score, c in candidates],
        "mu_fixed": mus[chosen] is not None,
        "inner_cv_relative_error": tuning["score"],
        "grid_edge": edges(model.nu, model.mu, mus),
        "joint_train_relative_error": relative_error(train_targets, train_fitted),
        "joint_test_relative_error": relative_error(held_targets[fresh], held_fitted[fresh]),
        "n_test": int(fresh.sum()),
        "joint_plot_grid_relative_error": relative_error(data.dataset.y[data.mask(GRID)], surface),
        "joint_train_relative_error_by_region": by_region,
        "seconds": seconds,
    }
    return result, surface


def reference_run(data: SincData, split_dir: Path, mus: Sequence[float | None]) -> dict[str, Any]:
    """Pooled reduced-kernel reference (NOT PRIVATE: reads every cell), widths tried as for the joint model.

    Trained on the training rows of the split's cells (``ppsvm.coordinator.reference.pool_cells``),
    evaluated on the fresh points (the cells' held-out rows also hold the plotting grid).
    """
    started = time.perf_counter()
    X_train, y_train, _, _ = pool_cells(split_dir)
    candidates: list[tuple[float, LocalModel]] = []
    for mu in mus:
        candidate = fit_local(
            "regress",
            "gaussian",
            X_train,
            y_train,
            basis_fraction=REFERENCE_ROW_FRACTION,
            nu=None,
            mu=mu,
            seed=TUNE_SEED,
        )
        assert candidate.tuning is not None
        candidates.append((candidate.tuning.score, candidate))
    model = candidates[best([score for score, _ in candidates])][1]
    fresh = data.mask(TEST)
    X, y = data.dataset.X, data.dataset.y
    return {
        "relative_error_training": relative_error(y_train, model.decision(X_train)),
        "relative_error_test": relative_error(y[fresh], model.decision(X[fresh])),
        "basis_rows": len(model.basis),
        "nu": model.nu,
        "mu": model.mu,
        "grid_edge": edges(model.nu, model.mu, mus),
        "candidate_scores": [{"mu": c.mu, "nu": c.nu, "cv": score} for score, c in candidates],
        "seconds": time.perf_counter() - started,
    }


def alone_run(
    data: SincData, k: int, basis_fraction: float, mus: Sequence[float | None]
) -> tuple[dict[str, Any], np.ndarray]:
    """Entity ``k``'s model of its own training points, evaluated on all points (computed here, not by the entity).

    Widths are tried as for the joint model (None: fit_local's own grid), relative to 1/n in the
    entity's own [0, 1] scaling; the lowest cross-validated score on its own points wins.

    Returns
    -------
    result : dict
        Tuned values and relative errors (JSON-ready).
    surface : ndarray, shape (steps * steps,)
        The same model's decision values on the plotting grid.
    """
    started = time.perf_counter()
    X, y = data.dataset.X, data.dataset.y
    mine = data.mask(TRAIN, k)
    candidates: list[tuple[float, LocalModel]] = []
    for mu in mus:
        candidate = fit_local(
            "regress", "gaussian", X[mine], y[mine], basis_fraction=basis_fraction, nu=None, mu=mu, seed=TUNE_SEED
        )
        assert candidate.tuning is not None
        candidates.append((candidate.tuning.score, candidate))
    model = candidates[best([score for score, _ in candidates])][1]
    grid = data.mask(GRID)
    surface = model.decision(X[grid])

    def error(mask: np.ndarray) -> float:
        return relative_error(y[mask], model.decision(X[mask]))

    result = {
        "entity": ENTITIES[k],
        "region": REGIONS[k],
        "n_train": int(mine.sum()),
        "basis_rows": len(model.basis),
        "nu": model.nu,
        "mu": model.mu,
        "relative_error": {
            "all_training_points": error(data.mask(TRAIN)),
            "all_test_points": error(data.mask(TEST)),
            "own_test_points": error(data.mask(TEST, k)),
            "plot_grid": relative_error(y[grid], surface),
        },
        "grid_edge": edges(model.nu, model.mu, mus),
        "candidate_scores": [{"mu": c.mu, "nu": c.nu, "cv": score} for score, c in candidates],
        "seconds": time.perf_counter() - started,
    }
    return result, surface


def surface_figure(axis: np.ndarray, values: np.ndarray, truth: np.ndarray, title: str) -> Any:
    """A 3-D surface of ``values`` over the plotting grid, beside its map seen from above.

    Parameters
    ----------
    axis : ndarray, shape (steps,)
    values, truth : ndarray, shape (steps * steps,)
        The surface drawn, and the true function: the z and colour range always cover the
        truth's, so a flat or wild approximation reads as such against the same scale.
    title : str

    Returns
    -------
    matplotlib.figure.Figure
        The map outlines the inner square [-1.5, 1.5]^2, entity 1's region (a 3-D plot would hide it).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    steps = len(axis)
    x1, x2 = np.meshgrid(axis, axis)
    z = values.reshape(steps, steps)
    low = min(float(truth.min()), float(values.min()))
    high = max(float(truth.max()), float(values.max()))
    margin = 0.05 * (high - low)
    low, high = low - margin, high + margin
    figure = plt.figure(figsize=(11.0, 4.8))
    surface = figure.add_subplot(1, 2, 1, projection="3d")
    surface.plot_surface(
        x1, x2, z, cmap="viridis", vmin=low, vmax=high, rstride=1, cstride=1, linewidth=0, antialiased=True
    )
    surface.set_xlim(-HALF_WIDTH, HALF_WIDTH)
    surface.set_ylim(-HALF_WIDTH, HALF_WIDTH)
    surface.set_zlim(low, high)
    surface.set_xlabel("x1")
    surface.set_ylabel("x2")
    surface.set_zlabel("f")
    above = figure.add_subplot(1, 2, 2)
    filled = above.contourf(x1, x2, z, levels=np.linspace(low, high, 25), cmap="viridis")
    a = INNER_HALF_WIDTH
    above.plot(
        [-a, a, a, -a, -a],
        [-a, -a, a, a, -a],
        color="crimson",
        linestyle="--",
        linewidth=1.2,
        label="entity 1's region (inner square)",
    )
    above.set_aspect("equal")
    above.set_xlabel("x1")
    above.set_ylabel("x2")
    above.legend(loc="upper right", fontsize=7)
    figure.colorbar(filled, ax=above, shrink=0.85, label="f", ticks=MaxNLocator(6))
    figure.suptitle(title, fontsize=10)
    return figure


def figure_name(number: int) -> str:
    """The file of the paper's Figure ``number``, e.g. sinc-figure3.png."""
    return f"{NAME}-figure{number}.png"


def markdown(
    joint: list[dict[str, Any]],
    alone: list[dict[str, Any]],
    reference: dict[str, Any],
    figures: dict[str, dict[str, Any]],
    settings: dict[str, Any],
    options: SincOptions,
) -> str:
    """The results table with the paper's relative errors beside ours, the figures, then the settings.

    Parameters
    ----------
    joint, alone, reference : the results of :func:`joint_run` (one per mbar), :func:`alone_run`
        (entity r0c0, then r1c0) and :func:`reference_run`.
    figures : dict
        File name to what it shows (``paper_figure``, ``shows``, ``relative_error_on_plot_grid``).
    settings : dict
        The JSON's settings.
    options : SincOptions
    """
    count = settings["points_per_entity"]
    lines = ["# Fung & Mangasarian, section 4: privacy-preserving approximation of the 2-D sinc function", ""]
    if any(not run["private"] for run in joint):
        lines += [
            f"**{NOT_PRIVATE_BANNER}** — rows marked NOT PRIVATE below ran with the entity-side override "
            f"`{NON_PRIVATE_OVERRIDE_KEY} = true` (mbar >= n_j = 2); only mbar = 1 is private.",
            "",
        ]
    if options.quick:
        lines += ["**Quick run** (reduced for CI): not the paper's setting; rerun without --quick.", ""]
    lines += [
        f"2-D sinc, {settings['function']}; {settings['points']}. Gaussian kernel, 2 entities (row blocks by region), "
        "gRPC entity servers with mutual TLS over loopback, in the reproducing process.",
        "",
        f"| model | private | mbar | nu | mu | rel. error, {2 * count} training points "
        f"| rel. error, {2 * count} fresh points | paper | tuned value on grid edge |",
        "|:--|:--|--:|--:|--:|--:|--:|--:|:--|",
    ]
    for run in joint:
        lines.append(
            f"| joint random-kernel model (gRPC) | {'yes' if run['private'] else '**NOT PRIVATE**'} | {run['mbar']} "
            f"| {run['nu']:g} | {run['mu']:.4g} | {run['joint_train_relative_error']:.3f} "
            f"| {run['joint_test_relative_error']:.3f} | {PAPER['joint']} | {edge_text(run['grid_edge'])} |"
        )
    for entry, paper in zip(alone, (PAPER["alone_inner"], PAPER["alone_outer"]), strict=True):
        lines.append(
            f"| entity {entry['entity']} alone: {entry['region']} | n/a | {entry['basis_rows']} own rows "
            f"| {entry['nu']:g} | {entry['mu']:.4g} | {entry['relative_error']['all_training_points']:.3f} "
            f"| {entry['relative_error']['all_test_points']:.3f} | {paper} | {edge_text(entry['grid_edge'])} |"
        )
    lines += [
        f"| pooled reference (**NOT PRIVATE**: all points in one place, {reference['basis_rows']} random rows as "
        f"basis) | no | — | {reference['nu']:g} | {reference['mu']:.4g} | {reference['relative_error_training']:.3f} | "
        f"{reference['relative_error_test']:.3f} | — | {edge_text(reference['grid_edge'])} |",
        "",
    ]
    for run in joint:
        regions = "; ".join(f"{k}: {v:.3f}" for k, v in run["joint_train_relative_error_by_region"].items())
        tuned = (
            "nu tuned by the coordinator at a fixed extra width mu"
            if run["mu_fixed"]
            else "nu and mu tuned by the coordinator"
        )
        lines.append(
            f"- mbar = {run['mbar']}{'' if run['private'] else ' (NOT PRIVATE)'}: coordinator inner-CV relative error "
            f"{run['inner_cv_relative_error']:.4f}; {tuned}; training-point error by region: {regions}; "
            f"train {run['seconds']['train']:.0f} s"
        )
    lines += [
        "",
        "## Figures",
        "",
        "Our reading of the paper's Figures 3-6 (the paper is not in this repository): "
        + "; ".join(f"Figure {number}, {text}" for number, text in FIGURES.items())
        + f". Each surface is drawn on a {settings['plot_grid']['steps']} x {settings['plot_grid']['steps']} "
        "grid over [-3,3]^2 from the very models in the table, beside its map seen from above (dashed: entity 1's "
        "region, the inner square).",
        "",
    ]
    for name, figure in figures.items():
        error = (
            ""
            if figure["relative_error_on_plot_grid"] is None
            else (f" (relative error on the plotting grid {figure['relative_error_on_plot_grid']:.3f})")
        )
        lines.append(f"- `{name}`: Figure {figure['paper_figure']}, {figure['shows']}{error}.")
    lines += [""] + [f"![Figure {figure['paper_figure']}]({name})" for name, figure in figures.items()]
    lines += [
        "",
        "## Settings",
        "",
        "- Relative error = ||prediction - y|| / ||y|| (the paper's eq. 4.17). Joint model: trained on the training "
        "points over gRPC; 'training points' uses kernel rows assembled from the entities for those records (the "
        f"paper's figure), 'fresh points' {count} + {count} new uniform points from the same regions, held out at "
        "their region's entity and assembled the same way.",
        f"- Entity alone: ppsvm.core.local_svm.fit_local on that entity's {count} points only (basis = a random "
        f"{settings['alone_basis_fraction']:.0%} of its own rows, nu and mu by {DEFAULT_FOLDS}-fold cross-validation), "
        "computed by this command, evaluated on points of the whole square. The paper's figures 5.01 and 1.05 are "
        "for entity 1 (inner square) and entity 2 (outer frame).",
        f"- Pooled reference: ppsvm.coordinator.reference.pool_cells + fit_local, {REFERENCE_ROW_FRACTION:.0%} of the "
        "training rows as basis.",
        "- Grid (ppsvm.core.tuning.search_grid, the same for every model): nu in "
        f"{{{', '.join(f'{v:g}' for v in settings['nu_grid'])}}} x mu in "
        f"{{{', '.join(f'{v:g}' for v in settings['mu_grid_times_n'])}}}/n (n = 2, features scaled to [0, 1])"
        + (
            f", plus the extra widths {settings['mu_candidates_times_n'][1:]}/n each with nu tuned, keeping the lowest "
            "cross-validated score on the model's own training data"
            if len(settings["mu_candidates_times_n"]) > 1
            else ""
        )
        + ". 'Grid edge': the tuned nu or mu is the lowest or highest value searched (including any extra widths).",
        "- Privacy: with n_j = 2 features, privacy rule 3 (mbar < n_j) allows only mbar = 1, a single Gaussian bump, "
        "which cannot follow the sinc surface. Runs with mbar >= 2 (the paper's setting) set "
        f"`{NON_PRIVATE_OVERRIDE_KEY} = true` in both entity configs and are NOT PRIVATE: with as many random points "
        "as features, a record's kernel row pins the record down.",
        f"- Secrets: {settings['secrets']}. Seeds: training points {TRAIN_SEED}, fresh points {TEST_SEED}, split "
        f"{SPLIT_SEED}, tuning folds and bases {TUNE_SEED}.",
        "",
        versions_markdown(),
        "",
    ]
    return "\n".join(lines)


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
    truth = data.dataset.y[data.mask(GRID)]
    joint_shown = joint[shown]
    joint_label = f"joint random-kernel model, mbar = {joint_shown['mbar']}" + (
        "" if joint_shown["private"] else ", NOT PRIVATE"
    )
    drawn = [
        (3, truth, None, "Figure 3: f(x1,x2) = sinc(x1) sinc(x2)"),
        (4, alone_surfaces[0], alone[0]["relative_error"]["plot_grid"], f"Figure 4: entity 1 ({REGIONS[0]}) alone"),
        (5, alone_surfaces[1], alone[1]["relative_error"]["plot_grid"], f"Figure 5: entity 2 ({REGIONS[1]}) alone"),
        (6, joint_surfaces[shown], joint_shown["joint_plot_grid_relative_error"], f"Figure 6: {joint_label}"),
    ]
    pictures: dict[str, bytes] = {}
    figures: dict[str, dict[str, Any]] = {}
    for number, values, error, title in drawn:
        subtitle = "" if error is None else f"\nrelative error on the plotting grid {error:.3f}"
        pictures[figure_name(number)] = png(surface_figure(data.axis, values, truth, title + subtitle))
        figures[figure_name(number)] = {
            "paper_figure": number,
            "shows": FIGURES[number]
            + (
                f"; here mbar = {joint_shown['mbar']}, {'private' if joint_shown['private'] else 'NOT PRIVATE'}"
                if number == 6
                else ""
            ),
            "relative_error_on_plot_grid": error,
        }
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
        f"folds={DEFAULT_FOLDS}, seed={TUNE_SEED}, formulation='highs-dual', distribute=False)",
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
    text = markdown(joint, alone, reference, figures, settings, options)
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
    """Build :class:`SincOptions` from the command line, run, print the Markdown and the files written."""
    options = SincOptions(
        out=args.out,
        quick=args.quick,
        no_progress=args.no_progress,
        mbar=parse_list(int, args.mbar, "--mbar") if args.mbar is not None else None,
        extra_mu_times_n=parse_list(float, args.extra_mu_times_n, "--extra-mu-times-n"),
        alone_basis_fraction=args.alone_basis_fraction,
    )
    paths = run(options)
    print(paths[0].read_text(encoding="utf-8"))
    print("wrote: " + ", ".join(str(path) for path in paths))
    return 0
