"""Fung & Mangasarian section 4: privacy-preserving approximation of the 2-D sinc function.

Two entities, horizontal partition (2 row blocks x 1 column block, n = 2 features):
entity r0c0 owns points in the inner square [-1.5, 1.5]^2, entity r1c0 points in
the rest of [-3, 3]^2. The joint random-kernel regression is trained over real
in-process gRPC entity servers and compared with each entity's model of its own
points alone, both evaluated on points from the whole square.

With n_j = 2, privacy rule 3 allows only mbar = 1. The paper's setting (many
random points) needs the entity-side override ``non_private_allow_mbar_at_least_features``;
runs with mbar >= 2 are NOT PRIVATE and are labelled so everywhere.

    PYTHONPATH=. .venv/bin/python benchmarks/sinc.py [--quick] [--mbar 1,100]

Writes benchmarks/results/sinc.{json,md}.
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from benchmarks._shared import (  # noqa: E402
    fixed_secret, grid_edge, package_versions, serve_split, write_results,
)
from common.config import NON_PRIVATE_OVERRIDE_KEY  # noqa: E402
from common.constants import DEFAULT_FOLDS, MU_GRID_TIMES_N, REFERENCE_ROW_FRACTION  # noqa: E402
from common.dataset import Dataset  # noqa: E402
from common.local_svm import fit_local  # noqa: E402
from common.metrics import relative_error  # noqa: E402
from common.partition import SplitOptions, split_dataset  # noqa: E402
from common.privacy import NOT_PRIVATE_BANNER  # noqa: E402
from common.tuning import search_grid  # noqa: E402
from coordinator.evaluate import evaluate_model  # noqa: E402
from coordinator.federation import Session  # noqa: E402
from coordinator.reference import pool_cells  # noqa: E402
from coordinator.train import TrainOptions, train  # noqa: E402

NAME = "sinc"
# Fung & Mangasarian, section 4: relative error of the joint model and of each entity alone.
PAPER = {"joint": 0.01, "alone_inner": 5.01, "alone_outer": 1.05}
HALF_WIDTH = 3.0
INNER_HALF_WIDTH = 1.5
POINTS_PER_ENTITY = 1000
TRAIN_SEED = 0       # training points
TEST_SEED = 1        # fresh held-out points
SPLIT_SEED = 0
TUNE_SEED = 0
ENTITY_NAMES = ("inner square [-1.5,1.5]^2", "outer frame [-3,3]^2 minus inner square")


def searched_grid(n: int, mus: list[float | None]) -> tuple[list[float], list[float]]:
    """(nu values, mu values) searched over all width candidates (None: search_grid's own widths)."""
    nu_values: set[float] = set()
    mu_values: set[float] = set()
    for mu in mus:
        nus, widths = search_grid("regress", "gaussian", n, None, mu)
        nu_values.update(nus)
        mu_values.update(widths)
    return sorted(nu_values), sorted(mu_values)


def edges(nu: float, mu: float, grid: tuple[list[float], list[float]]) -> dict[str, str | None]:
    """Which edge (low / high) of the grid searched the tuned nu and mu sit on (None: inside)."""
    return {"nu": grid_edge(nu, grid[0]), "mu": grid_edge(mu, grid[1])}


def sinc_2d(X: np.ndarray) -> np.ndarray:
    """Product form f(x1, x2) = sinc(x1) sinc(x2), sinc(t) = sin(pi t) / (pi t); X (m, 2) -> (m,)."""
    return np.sinc(X[:, 0]) * np.sinc(X[:, 1])


def region_points(rng: np.random.Generator, count: int) -> tuple[np.ndarray, np.ndarray]:
    """`count` uniform points in the inner square, then `count` in the outer frame (rejection sampling).

    Returns X (2 count, 2) and the region (0 inner, 1 outer) of each row.
    """
    inner = rng.uniform(-INNER_HALF_WIDTH, INNER_HALF_WIDTH, size=(count, 2))
    outer = np.empty((0, 2))
    while len(outer) < count:
        candidates = rng.uniform(-HALF_WIDTH, HALF_WIDTH, size=(2 * count, 2))
        outside = np.abs(candidates).max(axis=1) > INNER_HALF_WIDTH
        outer = np.vstack([outer, candidates[outside]])
    return np.vstack([inner, outer[:count]]), np.repeat([0, 1], count)


def build_dataset(count: int) -> tuple[Dataset, np.ndarray, np.ndarray]:
    """Training points (seed TRAIN_SEED) followed by fresh held-out points (seed TEST_SEED)."""
    X_train, region_train = region_points(np.random.default_rng(TRAIN_SEED), count)
    X_test, region_test = region_points(np.random.default_rng(TEST_SEED), count)
    X = np.vstack([X_train, X_test])
    held_out = np.repeat([False, True], 2 * count)
    ids = np.array([f"{'test' if h else 'train'}-{k}" for k, h in enumerate(held_out)])
    dataset = Dataset(ids=ids, X=X, y=sinc_2d(X), feature_names=("x1", "x2"), source="synthetic 2-D sinc")
    return dataset, held_out, np.concatenate([region_train, region_test])


def joint_run(dataset: Dataset, held_out: np.ndarray, region: np.ndarray, mbar: int, mus: list[float | None],
              work: Path) -> dict[str, Any]:
    """Split by region, serve both entities over gRPC, train the joint model, evaluate it.

    ``mus``: Gaussian widths to try (None = the coordinator's own grid); nu is always tuned by the
    coordinator, and the width with the lowest coordinator inner-CV score (training data only) is kept.
    """
    private = mbar < dataset.X.shape[1]
    split = split_dataset(
        dataset,
        SplitOptions(rows=2, cols=1, out_dir=work, seed=SPLIT_SEED, task="regress", kernel="gaussian", overwrite=True),
        provenance={"synthetic": "2-D sinc", "points_per_entity": int((~held_out).sum() // 2)},
        held_out=held_out, row_blocks=region,
    )
    (work / "column-block-0.secret").write_text(fixed_secret(NAME, 0), encoding="utf-8")
    if not private:
        for path in split.entity_config_paths:
            with path.open("a", encoding="utf-8") as handle:
                handle.write(f"\n[privacy]\n{NON_PRIVATE_OVERRIDE_KEY} = true\n")
    timings: dict[str, float] = {}
    with serve_split(split, work) as federation:
        started = time.perf_counter()
        candidates = []
        for mu in mus:
            candidate = train(federation, TrainOptions(task="regress", kernel="gaussian", mbar=mbar, nu=None, mu=mu,
                                                       seed=TUNE_SEED, distribute=False))
            candidates.append((candidate.training["tuning"]["score"], len(candidates), candidate))
        score, _, model = min(candidates, key=lambda c: c[:2])
        timings["train"] = time.perf_counter() - started
        started = time.perf_counter()
        test = evaluate_model(federation, model)
        # The paper's figure is on the 2000 points themselves: assemble K for the training records the same way.
        with Session(federation) as session:
            session.load_metadata()
            blocks = session.align_records()
            K = session.kernel(model.kernel, model.mbar, model.mu, model.scaling, blocks, "train")
        targets = np.concatenate([b.train_labels for b in blocks])
        fitted = model.decision(K)
        per_region = {}
        for b, start, stop in _offsets(blocks):
            per_region[ENTITY_NAMES[b.row_block]] = relative_error(targets[start:stop], fitted[start:stop])
        timings["evaluate"] = time.perf_counter() - started
    tuning = model.training["tuning"] or {}
    chosen = mus[[c[2] for c in candidates].index(model)]
    return {
        "mbar": mbar, "private": model.private, "nu": model.nu, "mu": model.mu,
        "mu_candidates": ["coordinator grid" if m is None else m for m in mus],
        "candidate_scores": [{"mu": c[2].mu, "nu": c[2].nu, "inner_cv": c[0]} for c in candidates],
        "mu_fixed": chosen is not None, "inner_cv_relative_error": tuning.get("score"),
        "grid_edge": edges(model.nu, model.mu, searched_grid(dataset.X.shape[1], mus)),
        "joint_test_relative_error": test["relative_error"], "joint_test_rmse": test["rmse"], "n_test": test["n_test"],
        "joint_train_relative_error": relative_error(targets, fitted),
        "joint_train_relative_error_by_region": per_region,
        "seconds": timings,
    }


def reference_run(split_dir: Path, mus_times_n: list[float | None]) -> dict[str, Any]:
    """Pooled reduced-kernel reference (NOT PRIVATE: reads every cell), widths tried as for the joint model."""
    X_train, y_train, X_test, y_test = pool_cells(split_dir)
    n = X_train.shape[1]
    candidates = []
    for times_n in mus_times_n:
        candidate = fit_local("regress", "gaussian", X_train, y_train, basis_fraction=REFERENCE_ROW_FRACTION, nu=None,
                              mu=None if times_n is None else times_n / n, seed=TUNE_SEED)
        candidates.append((candidate.tuning.score, len(candidates), candidate))
    model = min(candidates, key=lambda c: c[:2])[2]
    return {"relative_error_training": relative_error(y_train, model.decision(X_train)),
            "relative_error_test": relative_error(y_test, model.decision(X_test)),
            "basis_rows": len(model.basis), "nu": model.nu, "mu": model.mu,
            "grid_edge": edges(model.nu, model.mu, searched_grid(n, [None if t is None else t / n for t in mus_times_n])),
            "candidate_scores": [{"mu": c[2].mu, "nu": c[2].nu, "cv": c[0]} for c in candidates]}


def _offsets(blocks: list[Any]) -> list[tuple[Any, int, int]]:
    out, start = [], 0
    for b in blocks:
        out.append((b, start, start + len(b.train_ids)))
        start += len(b.train_ids)
    return out


def alone_runs(dataset: Dataset, held_out: np.ndarray, region: np.ndarray, basis_fraction: float,
               mus_times_n: list[float | None]) -> list[dict[str, Any]]:
    """Each entity's model of its own training points, evaluated on all points (computed here, not by the entity).

    Widths are tried as for the joint model (None = fit_local's own grid), relative to 1/n in the
    entity's own [0, 1] scaling; the lowest cross-validated score on its own points wins.
    """
    train_all, test_all = ~held_out, held_out
    results = []
    for k in (0, 1):
        mine = train_all & (region == k)
        started = time.perf_counter()
        n = dataset.X.shape[1]
        candidates = []
        for times_n in mus_times_n:
            candidate = fit_local("regress", "gaussian", dataset.X[mine], dataset.y[mine],
                                  basis_fraction=basis_fraction, nu=None,
                                  mu=None if times_n is None else times_n / n, seed=TUNE_SEED)
            candidates.append((candidate.tuning.score, len(candidates), candidate))
        model = min(candidates, key=lambda c: c[:2])[2]
        seconds = time.perf_counter() - started
        on = {
            "all_training_points": relative_error(dataset.y[train_all], model.decision(dataset.X[train_all])),
            "all_test_points": relative_error(dataset.y[test_all], model.decision(dataset.X[test_all])),
            "own_test_points": relative_error(dataset.y[test_all & (region == k)],
                                              model.decision(dataset.X[test_all & (region == k)])),
        }
        results.append({"entity": f"r{k}c0", "region": ENTITY_NAMES[k], "n_train": int(mine.sum()),
                        "basis_rows": len(model.basis), "nu": model.nu, "mu": model.mu, "relative_error": on,
                        "grid_edge": edges(model.nu, model.mu,
                                           searched_grid(n, [None if t is None else t / n for t in mus_times_n])),
                        "candidate_scores": [{"mu": c[2].mu, "nu": c[2].nu, "cv": c[0]} for c in candidates],
                        "seconds": seconds})
    return results


def edge_text(edge: dict[str, str | None]) -> str:
    """'nu low, mu high' for the tuned values on an edge of the grid searched; '—' when none is."""
    return ", ".join(f"{name} {side}" for name, side in edge.items() if side) or "—"


def markdown(joint: list[dict[str, Any]], alone: list[dict[str, Any]], reference: dict[str, Any],
             settings: dict[str, Any]) -> str:
    lines = []
    if any(not run["private"] for run in joint):
        lines += [f"**{NOT_PRIVATE_BANNER}** — rows marked NOT PRIVATE below ran with the entity-side override "
                  f"`{NON_PRIVATE_OVERRIDE_KEY} = true` (mbar >= n_j = 2); only mbar = 1 is private.", ""]
    lines += [
        f"2-D sinc, {settings['function']}; {settings['points']}. Gaussian kernel, 2 entities (row blocks by region), "
        "in-process gRPC entity servers over loopback.",
        "",
        f"| model | private | mbar | nu | mu | rel. error, {2 * settings['count']} training points "
        f"| rel. error, {2 * settings['count']} fresh points | paper | tuned value on grid edge |",
        "|:--|:--|--:|--:|--:|--:|--:|--:|:--|",
    ]
    for run in joint:
        lines.append(
            f"| joint random-kernel model (gRPC) | {'yes' if run['private'] else '**NOT PRIVATE**'} | {run['mbar']} "
            f"| {run['nu']:g} | {run['mu']:.4g} | {run['joint_train_relative_error']:.3f} "
            f"| {run['joint_test_relative_error']:.3f} | {PAPER['joint']} | {edge_text(run['grid_edge'])} |"
        )
    for entry, paper in zip(alone, (PAPER["alone_inner"], PAPER["alone_outer"])):
        lines.append(
            f"| {entry['region']} alone (fit_local in this script) | n/a | {entry['basis_rows']} own rows "
            f"| {entry['nu']:g} | {entry['mu']:.4g} | {entry['relative_error']['all_training_points']:.3f} "
            f"| {entry['relative_error']['all_test_points']:.3f} | {paper} | {edge_text(entry['grid_edge'])} |"
        )
    lines.append(
        f"| pooled reference (**NOT PRIVATE**: all points in one place, {reference['basis_rows']} random rows as basis) "
        f"| no | — | {reference['nu']:g} | {reference['mu']:.4g} | {reference['relative_error_training']:.3f} "
        f"| {reference['relative_error_test']:.3f} | — | {edge_text(reference['grid_edge'])} |"
    )
    lines += [""]
    for run in joint:
        regions = "; ".join(f"{k}: {v:.3f}" for k, v in run["joint_train_relative_error_by_region"].items())
        lines.append(
            f"- mbar = {run['mbar']}: coordinator inner-CV relative error {run['inner_cv_relative_error']}; "
            f"{'nu tuned by the coordinator at a fixed extra width mu' if run['mu_fixed'] else 'nu and mu tuned by the coordinator'}"
            f"; on a grid edge: {edge_text(run['grid_edge'])}; training-point error by region: "
            f"{regions}; train {run['seconds']['train']:.0f} s"
        )
    lines += [
        "",
        "Relative error = ||prediction - y|| / ||y||. Joint model: trained on the training points over gRPC; "
        "'training points' uses kernel rows assembled from the entities for those records (the paper's figure), "
        f"'fresh points' is evaluate_model on {settings['count']} + {settings['count']} new uniform points from the same "
        "regions (held out in the split). "
        f"Entity alone: common.local_svm.fit_local on that entity's {settings['count']} points only "
        f"(basis = a random {settings['alone_basis_fraction']:.0%} of its own rows, nu and mu by {DEFAULT_FOLDS}-fold CV), "
        "computed by this script for the benchmark, evaluated on points of the whole square. "
        f"Pooled reference: coordinator.reference.pool_cells + fit_local, {REFERENCE_ROW_FRACTION:.0%} of training rows "
        "as basis. Grid (common.tuning.search_grid, the same for every model): nu in "
        f"{{{', '.join(f'{v:g}' for v in settings['nu_grid'])}}} x mu in "
        f"{{{', '.join(f'{v:g}' for v in settings['mu_grid_times_n'])}}}/n (n = 2, features scaled to [0, 1])"
        + (f", plus the extra widths {settings['mu_candidates_times_n'][1:]}/n each with nu tuned, keeping the lowest "
           "cross-validated score on the model's own training data" if len(settings['mu_candidates_times_n']) > 1 else "")
        + ". 'Grid edge': the tuned nu or mu is the lowest or highest value searched (including any extra widths).",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="300 points per entity, mbar 1 and 30")
    parser.add_argument("--mbar", help="comma-separated mbar values (default 1,100)")
    parser.add_argument("--extra-mu-times-n", default="",
                        help="comma-separated Gaussian widths (times 1/n, features scaled to [0, 1]) tried besides "
                             f"the coordinator's own grid (which ends at {max(MU_GRID_TIMES_N):g}/n), e.g. 256,1024; the "
                             "lowest inner-CV score on training data wins (default '': the coordinator's grid only)")
    parser.add_argument("--alone-basis-fraction", type=float, default=0.1,
                        help="fraction of its own rows an entity-alone model uses as kernel basis (default 0.1: "
                             "100 rows, the size of the joint model's mbar = 100; the full 1000-row kernel, as the "
                             "entity's LocalBaseline would use, costs about 17 s per LP here, hours with tuning)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.ERROR, format="%(levelname)s %(name)s: %(message)s")

    count = 300 if args.quick else POINTS_PER_ENTITY
    mbars = [int(m) for m in args.mbar.split(",")] if args.mbar else ([1, 30] if args.quick else [1, 100])
    dataset, held_out, region = build_dataset(count)
    n = dataset.X.shape[1]
    extra = [float(v) for v in args.extra_mu_times_n.split(",") if v.strip()]
    mus_times_n: list[float | None] = [None, *extra]
    mus: list[float | None] = [None if v is None else v / n for v in mus_times_n]
    nu_grid, mu_grid = search_grid("regress", "gaussian", n, None, None)

    started = time.perf_counter()
    joint = []
    work_root = Path(tempfile.mkdtemp(prefix="ppsvm-sinc-"))
    try:
        for mbar in mbars:
            run = joint_run(dataset, held_out, region, mbar, mus, work_root / f"mbar{mbar}")
            joint.append(run)
            if len(joint) == 1:
                reference = reference_run(work_root / f"mbar{mbar}", mus_times_n)
            print(f"mbar={mbar}{'' if run['private'] else ' [NOT PRIVATE]'}: joint training-point rel. error "
                  f"{run['joint_train_relative_error']:.3f}, fresh {run['joint_test_relative_error']:.3f} "
                  f"(train {run['seconds']['train']:.0f} s)", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(work_root, ignore_errors=True)
    alone = alone_runs(dataset, held_out, region, args.alone_basis_fraction, mus_times_n)
    total = time.perf_counter() - started

    settings = {
        "function": "f(x1,x2) = sinc(x1) sinc(x2), sinc(t) = sin(pi t)/(pi t) (product form; the paper's exact "
                    "definition was not available to check)",
        "points": f"{count} uniform random points per entity (seed {TRAIN_SEED}) for training, {count} + {count} "
                  f"fresh ones (seed {TEST_SEED}) held out; outer-frame points by rejection sampling",
        "regions": {"r0c0": ENTITY_NAMES[0], "r1c0": ENTITY_NAMES[1]},
        "mbar": mbars, "mu_candidates_times_n": ["coordinator grid", *extra], "alone_basis_fraction": args.alone_basis_fraction,
        "train_options": "TrainOptions(task='regress', kernel='gaussian', mbar=<each>, nu=None, "
                         f"mu=None{' and then each extra width' if extra else ''}, folds={DEFAULT_FOLDS}, seed={TUNE_SEED}, formulation='highs-dual', distribute=False)",
        "grid_source": "common.tuning.search_grid('regress', 'gaussian', n, None, None)",
        "nu_grid": list(nu_grid), "mu_grid_times_n": [mu * n for mu in mu_grid],
        "override": f"[privacy] {NON_PRIVATE_OVERRIDE_KEY} = true appended to both entity configs when mbar >= 2",
        "secrets": "column-block secret overwritten with sha256('ppsvm-benchmark/sinc/0') so B is reproducible (benchmark only)",
        "count": count, "paper": PAPER, "versions": package_versions(),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "total_seconds": total, "quick": args.quick,
    }
    text = markdown(joint, alone, reference, settings)
    print(text)
    print(f"total wall time {total:.0f} s")
    write_results(NAME, text, {"settings": settings, "joint": joint, "alone": alone, "reference": reference})
    return 0


if __name__ == "__main__":
    sys.exit(main())
