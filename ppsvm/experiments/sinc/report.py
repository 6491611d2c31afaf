"""What ``ppsvm reproduce sinc`` writes: the paper's Figures 1-6, the comparison of the error measures, the Markdown."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ppsvm.config import NON_PRIVATE_OVERRIDE_KEY
from ppsvm.core.privacy import NOT_PRIVATE_BANNER
from ppsvm.experiments.report import machine, png, versions_markdown
from ppsvm.experiments.sinc.problem import (
    FIGURES,
    HALF_WIDTH,
    INNER_HALF_WIDTH,
    NAME,
    PAPER,
    PLOT,
    READINGS,
    TRAIN,
    SincData,
)
from ppsvm.progress import clock

# The paper's models in its order: result key, paper figure, what it is.
MODELS = (
    ("entity1_alone", 3, "entity 1 alone (E1 in S1)"),
    ("entity2_alone", 4, "entity 2 alone (E2 in S2)"),
    ("revealed", 5, "both entities' data revealed, K(A, A')"),
    ("ppa", 6, "Algorithm 3.1 over gRPC, K(A, B')"),
)
MEASURES = ("error_4_17", "norm_ratio")


def figure_name(number: int) -> str:
    """The file of the paper's Figure ``number``, e.g. sinc-figure3.png."""
    return f"{NAME}-figure{number}.png"


def factor(ours: float, paper: float) -> float:
    """How many times ours and the paper's differ, >= 1 (inf when ours is 0 or not finite)."""
    if not (math.isfinite(ours) and ours > 0):
        return math.inf
    return max(ours / paper, paper / ours)


def measure_agreement(results: dict[str, dict[str, Any]], n_points: int) -> dict[str, Any]:
    """Which error measure the paper's four printed numbers agree with, reading by reading.

    For each model, each measure's factor from the paper's number; per reading, the geometric mean of the
    factors over the four models. Also what (4.17) = 0.01 would need: every term of its sum is a squared
    pointwise relative error, so their root mean square would have to be 0.01 / sqrt(points).

    Parameters
    ----------
    results : dict
        Reading key to model key to its figures (``error_4_17``, ``norm_ratio``).
    n_points : int
        |E1 u E2|, the points (4.17) sums over.
    """
    readings: dict[str, Any] = {}
    for key, models in results.items():
        rows = {}
        for name, _, _ in MODELS:
            figures = models[name]
            rows[name] = {
                "paper": PAPER[name],
                **{measure: figures[measure] for measure in MEASURES},
                **{f"factor_{measure}": factor(figures[measure], PAPER[name]) for measure in MEASURES},
            }
        means = {
            measure: float(np.exp(np.mean([np.log(row[f"factor_{measure}"]) for row in rows.values()])))
            for measure in MEASURES
        }
        readings[key] = {
            "models": rows,
            "geometric_mean_factor": means,
            "closer": min(MEASURES, key=lambda measure: means[measure]),
        }
    return {
        "readings": readings,
        "rms_pointwise_relative_error_for_4_17_of_0_01": PAPER["ppa"] / math.sqrt(n_points),
    }


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _outline_s1(axes: Any) -> None:
    a = INNER_HALF_WIDTH
    axes.plot([-a, a, a, -a, -a], [-a, -a, a, a, -a], color="crimson", linestyle="--", linewidth=1.2, label="S1")


def _surface_pair(
    figure: Any, row: int, rows: int, axis: np.ndarray, values: np.ndarray, limits: tuple[float, float], title: str
) -> None:
    """A 3-D surface of ``values`` (steps^2,) over the plotting grid and its map from above, in figure row ``row``."""
    from matplotlib.ticker import MaxNLocator

    steps = len(axis)
    x1, x2 = np.meshgrid(axis, axis)
    z = values.reshape(steps, steps)
    low, high = limits
    surface = figure.add_subplot(rows, 2, 2 * row + 1, projection="3d")
    # Values outside the common range are clipped in the picture only, so one wild surface cannot flatten the rest.
    surface.plot_surface(
        x1, x2, np.clip(z, low, high), cmap="viridis", vmin=low, vmax=high, rstride=1, cstride=1, linewidth=0
    )
    surface.set_xlim(-HALF_WIDTH, HALF_WIDTH)
    surface.set_ylim(-HALF_WIDTH, HALF_WIDTH)
    surface.set_zlim(low, high)
    surface.set_xlabel("x1")
    surface.set_ylabel("x2")
    surface.set_title(title, fontsize=8)
    above = figure.add_subplot(rows, 2, 2 * row + 2)
    filled = above.contourf(x1, x2, np.clip(z, low, high), levels=np.linspace(low, high, 25), cmap="viridis")
    _outline_s1(above)
    above.set_aspect("equal")
    above.set_xlabel("x1")
    above.set_ylabel("x2")
    above.legend(loc="upper right", fontsize=7)
    figure.colorbar(filled, ax=above, shrink=0.85, ticks=MaxNLocator(6))


def _limits(truth: np.ndarray, values: list[np.ndarray]) -> tuple[float, float]:
    """A z range covering the truth and the approximations, at most 3 times the truth's span around it."""
    t_low, t_high = float(truth.min()), float(truth.max())
    span = t_high - t_low
    low = max(min([t_low, *(float(v.min()) for v in values)]), t_low - span)
    high = min(max([t_high, *(float(v.max()) for v in values)]), t_high + span)
    margin = 0.05 * (high - low)
    return low - margin, high + margin


def grid_figure(data: SincData) -> Any:
    """The paper's Figure 1, the domains S1 and S2, with our grids E1 and E2 drawn in."""
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(6.0, 6.0))
    X = data.dataset.X
    for k, (colour, label) in enumerate((("tab:blue", "E1 (entity 1)"), ("tab:orange", "E2 (entity 2)"))):
        points = X[data.mask(TRAIN, k)]
        axes.scatter(points[:, 0], points[:, 1], s=2, color=colour, label=f"{label}: {len(points)} points")
    _outline_s1(axes)
    axes.set_xlim(-HALF_WIDTH, HALF_WIDTH)
    axes.set_ylim(-HALF_WIDTH, HALF_WIDTH)
    axes.set_aspect("equal")
    axes.set_xlabel("x1")
    axes.set_ylabel("x2")
    axes.legend(loc="upper right", fontsize=7, framealpha=0.9)
    axes.set_title(
        "Figure 1 (paper): S1 = [-1.5,1.5]^2 and S2 = [-3,3]^2 - S1,\nwith the grids E1 and E2 of this run", fontsize=9
    )
    return figure


def _row_title(reading_label: str, figures: dict[str, Any]) -> str:
    private = "" if figures.get("private", True) else ", NOT PRIVATE"
    return (
        f"{reading_label}\nmu = {figures['mu']:g}, nu = {figures['nu']:g}{private}: "
        f"(4.17) = {figures['error_4_17']:.3g}, norm ratio = {figures['norm_ratio']:.3g}"
    )


def draw_figures(
    data: SincData, results: dict[str, dict[str, Any]], surfaces: dict[str, dict[str, np.ndarray]]
) -> tuple[dict[str, bytes], dict[str, dict[str, Any]]]:
    """The paper's Figures 1-6: domains and grids, the exact function, then each model under each reading.

    Parameters
    ----------
    data : SincData
    results : dict
        Reading key to model key to its figures.
    surfaces : dict
        Reading key to model key to its values on the plotting grid, shape (steps^2,).

    Returns
    -------
    pictures : dict
        File name to PNG bytes.
    figures : dict
        File name to the paper figure it is and what it shows.
    """
    plt = _pyplot()
    truth = data.dataset.y[data.mask(PLOT)]
    pictures = {figure_name(1): png(grid_figure(data))}
    figures: dict[str, dict[str, Any]] = {figure_name(1): {"paper_figure": 1, "shows": FIGURES[1]}}
    exact = plt.figure(figsize=(11.0, 4.8))
    _surface_pair(exact, 0, 1, data.axis, truth, _limits(truth, []), "")
    exact.suptitle(
        "Figure 2 (paper): the exact sinc(x1, x2) = sin(pi x1)/(pi x1) sin(pi x2)/(pi x2), (4.16)", fontsize=10
    )
    pictures[figure_name(2)] = png(exact)
    figures[figure_name(2)] = {"paper_figure": 2, "shows": FIGURES[2]}
    for name, number, label in MODELS:
        drawn = [surfaces[r.key][name] for r in READINGS]
        limits = _limits(truth, drawn)
        figure = plt.figure(figsize=(11.0, 4.6 * len(READINGS)))
        for row, (reading, values) in enumerate(zip(READINGS, drawn, strict=True)):
            _surface_pair(
                figure,
                row,
                len(READINGS),
                data.axis,
                values,
                limits,
                _row_title(reading.label, results[reading.key][name]),
            )
        figure.suptitle(f"Figure {number} (paper): {label}", fontsize=10)
        pictures[figure_name(number)] = png(figure)
        figures[figure_name(number)] = {
            "paper_figure": number,
            "shows": FIGURES[number],
            "rows": [r.key for r in READINGS],
            "norm_ratio_plot_grid": {r.key: results[r.key][name]["norm_ratio_plot_grid"] for r in READINGS},
        }
    return pictures, figures


def _revealed_note(results: dict[str, dict[str, Any]], settings: dict[str, Any]) -> str:
    """Why all data revealed is not cross-validated under some reading, with the measured time of its one fit."""
    skipped = [r for r in READINGS if r.key not in settings["revealed_cross_validated_under"]]
    if not skipped:
        return "All data revealed is cross-validated under every reading."
    fits = len(settings["mu_set"]) * len(settings["nu_set"]) * settings["folds"]
    return (
        "Under "
        + ", ".join(
            f"{r.key} its one fit on all {results[r.key]['revealed']['train_points']} points took "
            f"{results[r.key]['revealed']['seconds']:.0f} s"
            for r in skipped
        )
        + f"; cross-validating it would take {fits} such fold fits, so there it takes the (mu, nu) Algorithm 3.1 "
        "chose (the stated reading's widths make the LPs far quicker, and it is cross-validated there)."
    )


def _number(value: float) -> str:
    return "inf" if math.isinf(value) else f"{value:.3g}"


def markdown(
    results: dict[str, dict[str, Any]],
    agreement: dict[str, Any],
    figures: dict[str, dict[str, Any]],
    settings: dict[str, Any],
    seconds: dict[str, float],
) -> str:
    """The report: protocol, results beside the paper's numbers under each reading, the measures, figures, settings.

    Parameters
    ----------
    results : dict
        Reading key to model key to its figures.
    agreement : dict
        :func:`measure_agreement` of the results.
    figures : dict
        File name to the paper figure it is and what it shows.
    settings : dict
        The JSON's settings.
    seconds : dict
        Timings, ``total`` among them.
    """
    grids = settings["grids"]
    n_points = grids["E1"]["points"] + grids["E2"]["points"]
    mbar = settings["mbar"]
    lines = ["# Fung & Mangasarian, Section 4.1: privacy-preserving approximation of the 2-D sinc function", ""]
    lines += [
        f"**{NOT_PRIVATE_BANNER}** — the paper's setting, mbar = {mbar} random points for n = 2 features, breaks "
        "the paper's own condition mbar < n (Algorithms 2.1 and 3.1, step (I); the project's privacy rule 3). The "
        f"entities ran with `{NON_PRIVATE_OVERRIDE_KEY} = true`; with two features only mbar = 1 is private (its row "
        "below).",
        "",
    ]
    if settings["quick"]:
        lines += ["**Quick run** (reduced for CI): not the paper's setting; rerun without --quick.", ""]
    lines += [
        f"Runtime {clock(seconds['total'])} on {machine()['cpu']} ({machine()['cpus']} CPUs); Algorithm 3.1's "
        f"cross-validation over gRPC {clock(seconds['ppa_cross_validation'])}.",
        "",
        "## The protocol, as Section 4 states it",
        "",
        f"- Function (4.16), the product form (Figure 2's caption repeats it): {settings['function']}.",
        f"- Domain {settings['domain']}. Entity 1 (r0c0) holds an equally spaced grid E1 in S1, entity 2 (r1c0) "
        "one, E2, in S2 = D - S1, '1000 data points' each (Section 4.1). No square grid has 1000 points: E1 = "
        f"{grids['E1']['layout']} ({grids['E1']['points']} points, spacing {grids['E1']['spacing']:.4g}), E2 = "
        f"{grids['E2']['layout']} ({grids['E2']['points']} points, spacing {grids['E2']['spacing']:.4g})"
        + (", smaller grids for the quick run" if settings["quick"] else ", the counts nearest 1000 for one spacing")
        + ". Cell centres, not end points: (4.17) divides by sinc(x), and a "
        "grid through x = +-3, +-2 or +-1 meets its zeros, where (4.17) is undefined; the paper prints finite values. "
        f"Zeros of sinc on E1 u E2 here: {grids['sinc_zeros_on_E1_E2']}; smallest |sinc|: "
        f"{grids['min_abs_sinc_on_E1_E2']:.2g}.",
        f"- mbar = {mbar}, B uniform on [0, 1], features scaled to [0, 1] by the minimum and maximum (Section 4). "
        f"mu from {{{', '.join(f'{v:g}' for v in settings['mu_set'])}}}, nu from "
        f"{{{', '.join(f'2^{round(math.log2(v))}' for v in settings['nu_set'])}}} by cross-validation 'in all the "
        f"algorithms'; the paper gives no fold count: {settings['folds']}-fold here, each (mu, nu) scored by the "
        "held-out norm ratio (the paper does not say which score).",
        "- The regression LP (3.13)-(3.14): min ||s||_1 + nu ||u||_1 subject to -s <= K u - e gamma - y <= s.",
        "- Models (Section 4.1 and the captions): Figure 3, entity 1's data alone; Figure 4, entity 2's alone; "
        "Figure 5, both entities' data publicly revealed, the ordinary kernel K(A, A') (Section 4's second claim); "
        "Figure 6, Algorithm 3.1, the random kernel K(A, B') from the entities' private blocks. The paper does not "
        "say which kernel an entity alone uses; ours use their own ordinary kernel K(A_i, A_i') (all their points as "
        "basis), as the revealed model does.",
        f"- Error (4.17) as printed: ( sum over x in E1 u E2 of (app(x) - sinc(x))^2 / sinc(x)^2 )^(1/2), a sum over "
        f"{n_points} points, not a mean. Beside it the norm ratio ||app - sinc|| / ||sinc|| over the same points. The "
        "paper prints 5.01 (entity 1 alone), 1.05 (entity 2 alone), 0.01 (revealed) and 0.01 (Algorithm 3.1).",
        "- mu is read two ways. As stated: on the [0, 1]-scaled features. Ours: in the original x units, i.e. mu R^2 "
        "on the scaled features, R the range the scaling divides by (the same for x1 and x2).",
        "",
        "## Results",
        "",
    ]
    for reading in READINGS:
        models = results[reading.key]
        lines += [
            f"**{reading.label}**",
            "",
            "| model (paper figure) | private | basis | mu | width on scaled features | nu | CV norm ratio "
            f"| (4.17) on E1 u E2 | norm ratio on E1 u E2 | paper | norm ratio, {grids['plot_grid']['steps']}^2 "
            "plotting grid (ours) | on the edge of the set |",
            "|:--|:--|:--|--:|--:|--:|--:|--:|--:|--:|--:|:--|",
        ]
        for name, number, label in (*MODELS, ("ppa_private_mbar1", None, "ours: Algorithm 3.1 at mbar = 1")):
            figures_of = models[name]
            private = figures_of.get("private")
            private_text = "n/a" if private is None else "yes" if private else "**NOT PRIVATE**"
            cv = figures_of.get("cv_norm_ratio")
            cv_text = f"{cv:.3g}" if cv is not None else figures_of.get("not_cross_validated", "—")
            edge = figures_of.get("on_set_edge") or {}
            edge_text = ", ".join(f"{k} {v}" for k, v in edge.items() if v) or "—"
            lines.append(
                f"| {label}{'' if number is None else f' (Figure {number})'} | {private_text} | {figures_of['basis']} "
                f"| {figures_of['mu']:g} | {figures_of['width_scaled']:.4g} | {figures_of['nu']:g} | {cv_text} "
                f"| {_number(figures_of['error_4_17'])} | {_number(figures_of['norm_ratio'])} "
                f"| {PAPER.get(name, '—')} | {_number(figures_of['norm_ratio_plot_grid'])} | {edge_text} |"
            )
        lines.append("")
    lines += [
        "## Which measure the paper's numbers are",
        "",
        "| model (paper figure) | paper | "
        + " | ".join(f"{r.key}: (4.17) | {r.key}: norm ratio" for r in READINGS)
        + " |",
        "|:--|--:|" + "--:|" * (2 * len(READINGS)),
    ]
    for name, number, label in MODELS:
        cells = [
            _number(agreement["readings"][r.key]["models"][name][measure]) for r in READINGS for measure in MEASURES
        ]
        lines.append(f"| {label} (Figure {number}) | {PAPER[name]} | " + " | ".join(cells) + " |")
    lines.append("")
    for reading in READINGS:
        entry = agreement["readings"][reading.key]
        means = entry["geometric_mean_factor"]
        lines.append(
            f"- {reading.label}: over the four models, (4.17) is off the paper's numbers by a factor "
            f"{_number(means['error_4_17'])} on geometric average, the norm ratio by {_number(means['norm_ratio'])}; "
            f"closer: {'the norm ratio' if entry['closer'] == 'norm_ratio' else '(4.17)'}."
        )
    lines += [
        f"- (4.17) sums squared pointwise relative errors over {n_points} points: a value of 0.01 needs their root "
        f"mean square to be {agreement['rms_pointwise_relative_error_for_4_17_of_0_01']:.2g}, every point within "
        "0.01 relative error, even where sinc crosses zero.",
        "",
        "## Figures",
        "",
        "Each model's surface on the plotting grid, one row per reading of mu, the 3-D view beside the map from "
        "above (dashed: S1). Values beyond the z range drawn are clipped in the picture only.",
        "",
    ]
    for name, figure in figures.items():
        lines.append(f"- `{name}`: Figure {figure['paper_figure']} of the paper, {figure['shows']}.")
    lines += [""] + [f"![Figure {figure['paper_figure']}]({name})" for name, figure in figures.items()]
    lines += [
        "",
        "## Settings",
        "",
        f"- Algorithm 3.1: {settings['algorithm_3_1']}.",
        f"- Each entity alone and all data revealed: {settings['local_models']}; cross-validated with the fold's own "
        "rows as basis. " + _revealed_note(results, settings),
        f"- Cross-validation: {settings['cross_validation']}; fold seed {settings['fold_seed']}.",
        f"- Plotting grid: {grids['plot_grid']['steps']} x {grids['plot_grid']['steps']} over D (ends included, so it "
        f"holds zeros of sinc: only the norm ratio is reported there); {grids['plot_grid']['held_by']}.",
        f"- {settings['override']}. Secrets: {settings['secrets']}. Split seed {settings['seeds']['split']}.",
        f"- Transport: {settings['transport']}.",
        "",
        versions_markdown(),
        "",
    ]
    return "\n".join(lines)
