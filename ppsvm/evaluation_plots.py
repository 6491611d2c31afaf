"""The ROC curve and the calibration plot of ``ppsvm coordinator evaluate --plot DIR``, drawn from the report."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ppsvm.experiments.report import png, require_matplotlib
from ppsvm.files import PUBLIC_MODE, write_all


def write_evaluation_plots(report: dict[str, Any], out_dir: Path, title: str) -> list[Path]:
    """Write roc.png and calibration.png of a classification report into ``out_dir`` (both or neither).

    Parameters
    ----------
    report : dict
        :func:`ppsvm.coordinator.evaluate.evaluate_model`'s result for a classifier (its "roc" and "calibration").
    out_dir : Path
        Created if missing.
    title : str
        Above both plots (e.g. the model file's name).

    Returns
    -------
    list of Path
    """
    require_matplotlib("ppsvm coordinator evaluate --plot")
    from matplotlib.figure import Figure

    roc = Figure(figsize=(4.5, 4.5))
    axes = roc.subplots()
    axes.plot([p[0] for p in report["roc"]], [p[1] for p in report["roc"]], label=f"model (AUC {report['auc']:.3f})")
    axes.plot([0, 1], [0, 1], linestyle=":", color="grey", label="constant score (AUC 0.5)")
    axes.set(xlabel="false positive rate (1 - specificity)", ylabel="true positive rate (sensitivity)", title=title)
    axes.legend(loc="lower right")

    calibration = Figure(figsize=(5.5, 4.0))
    axes = calibration.subplots()
    deciles = report["calibration"]
    centres = [(d["score_low"] + d["score_high"]) / 2 for d in deciles]
    axes.plot(centres, [d["positive_rate"] for d in deciles], marker="o", label="observed positive rate")
    axes.axvline(0.0, linestyle=":", color="grey", label="decision threshold")
    axes.set(xlabel="decision value (decile centre)", ylabel="share of positives", ylim=(0, 1), title=title)
    axes.legend(loc="upper left")

    paths = [out_dir / "roc.png", out_dir / "calibration.png"]
    figures = zip(paths, (roc, calibration), strict=True)
    write_all(out_dir, {path.name: (png(figure), PUBLIC_MODE) for path, figure in figures})
    return paths
