"""What ``ppsvm reproduce sinc`` writes: the surfaces of the paper's Figures 3-6 and the Markdown report."""

from __future__ import annotations

from typing import Any

import numpy as np

from ppsvm.config import NON_PRIVATE_OVERRIDE_KEY
from ppsvm.constants import DEFAULT_FOLDS, REFERENCE_ROW_FRACTION
from ppsvm.core.privacy import NOT_PRIVATE_BANNER
from ppsvm.experiments.report import png, versions_markdown
from ppsvm.experiments.sinc.problem import (
    FIGURES,
    GRID,
    HALF_WIDTH,
    INNER_HALF_WIDTH,
    NAME,
    PAPER,
    REGIONS,
    SPLIT_SEED,
    TEST_SEED,
    TRAIN_SEED,
    TUNE_SEED,
    SincData,
)


def edge_text(edge: dict[str, str | None]) -> str:
    """'nu low, mu high' for the tuned values on an edge of the grid searched; '—' when none is."""
    return ", ".join(f"{name} {side}" for name, side in edge.items() if side) or "—"


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


def draw_figures(
    data: SincData,
    joint_shown: dict[str, Any],
    joint_surface: np.ndarray,
    alone: list[dict[str, Any]],
    alone_surfaces: list[np.ndarray],
) -> tuple[dict[str, bytes], dict[str, dict[str, Any]]]:
    """The paper's Figures 3-6: the true function, each entity alone, the joint model shown.

    Parameters
    ----------
    data : SincData
    joint_shown : dict
        The result of the joint run drawn in Figure 6 (:func:`ppsvm.experiments.sinc.models.joint_run`).
    joint_surface : ndarray, shape (steps * steps,)
        Its decision values on the plotting grid.
    alone : list of dict
        The results of :func:`ppsvm.experiments.sinc.models.alone_run`, entity r0c0 then r1c0.
    alone_surfaces : list of ndarray, each of shape (steps * steps,)

    Returns
    -------
    pictures : dict
        File name to PNG bytes.
    figures : dict
        File name to what it shows (``paper_figure``, ``shows``, ``relative_error_on_plot_grid``).
    """
    truth = data.dataset.y[data.mask(GRID)]
    joint_label = f"joint random-kernel model, mbar = {joint_shown['mbar']}" + (
        "" if joint_shown["private"] else ", NOT PRIVATE"
    )
    drawn = [
        (3, truth, None, "Figure 3: f(x1,x2) = sinc(x1) sinc(x2)"),
        (4, alone_surfaces[0], alone[0]["relative_error"]["plot_grid"], f"Figure 4: entity 1 ({REGIONS[0]}) alone"),
        (5, alone_surfaces[1], alone[1]["relative_error"]["plot_grid"], f"Figure 5: entity 2 ({REGIONS[1]}) alone"),
        (6, joint_surface, joint_shown["joint_plot_grid_relative_error"], f"Figure 6: {joint_label}"),
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
    return pictures, figures


def markdown(
    joint: list[dict[str, Any]],
    alone: list[dict[str, Any]],
    reference: dict[str, Any],
    figures: dict[str, dict[str, Any]],
    settings: dict[str, Any],
) -> str:
    """The results table with the paper's relative errors beside ours, the figures, then the settings.

    Parameters
    ----------
    joint, alone, reference : the results of :func:`joint_run` (one per mbar), :func:`alone_run`
        (entity r0c0, then r1c0) and :func:`reference_run`.
    figures : dict
        File name to what it shows (``paper_figure``, ``shows``, ``relative_error_on_plot_grid``).
    settings : dict
        The JSON's settings (``quick`` among them).
    """
    count = settings["points_per_entity"]
    lines = ["# Fung & Mangasarian, section 4: privacy-preserving approximation of the 2-D sinc function", ""]
    if any(not run["private"] for run in joint):
        lines += [
            f"**{NOT_PRIVATE_BANNER}** — rows marked NOT PRIVATE below ran with the entity-side override "
            f"`{NON_PRIVATE_OVERRIDE_KEY} = true` (mbar >= n_j = 2); only mbar = 1 is private.",
            "",
        ]
    if settings["quick"]:
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
